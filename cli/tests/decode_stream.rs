//! `dvcq decode` on big and live logs: each CQE is written as soon as its dump has been read
//! (before the input ends), memory stays bounded by one dump, and a reader that goes away
//! ends the run quietly.

use dvcq_cli::bench::decode_log::write_log;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

/// `dvcq decode ARGS` with piped standard input, output and error; its output lines arrive on
/// the receiver as they are written (a thread reads them, so the child never blocks on a
/// full pipe).
fn spawn(args: &[&str]) -> (Child, ChildStdin, Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dvcq"))
        .arg("decode")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dvcq");
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, stdin, rx)
}

/// The next output line, waiting at most `secs` seconds.
fn next_line(rx: &Receiver<String>, secs: u64, what: &str) -> String {
    rx.recv_timeout(Duration::from_secs(secs)).unwrap_or_else(|e| panic!("{what}: no output line ({e})"))
}

/// rdma-core's dump of an error CQE on QP `qpn` (a remote access error).
fn dump(qpn: u32) -> String {
    let mut b = [0u8; 64];
    b[55] = 0x13;
    b[56..60].copy_from_slice(&((0x0a << 24) | qpn).to_be_bytes());
    b[63] = 0xd0;
    dvcq::mlx5::dump::err_cqe_dump("host-a", &dvcq::mlx5::dump::cqe_from_bytes(&b))
}

/// The peak resident set of process `pid` in KiB.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.split_whitespace().next()?.parse().ok()
}

#[test]
fn each_cqe_is_written_before_the_input_ends() {
    for json in [true, false] {
        let args: &[&str] = if json { &["--json", "-"] } else { &["-"] };
        let (mut child, mut stdin, rx) = spawn(args);
        // One dump and the line after it (which ends the dump); the input stays open.
        stdin.write_all(format!("{}app: retrying\n", dump(0x11)).as_bytes()).unwrap();
        stdin.flush().unwrap();
        let first = next_line(&rx, 60, "first dump");
        if json {
            let v: serde_json::Value = serde_json::from_str(&first).unwrap();
            assert_eq!((v["type"].as_str(), v["line"].as_u64(), v["qpn"].as_u64()), (Some("cqe"), Some(1), Some(0x11)));
        } else {
            assert_eq!(first, "dump 1: line 1 (rdma-core libmlx5 dump)");
        }
        // A bare hex string is whole on its own line: it is written before any line follows.
        let mut bare = [0u8; 64];
        bare[56..60].copy_from_slice(&0x0a00_0022u32.to_be_bytes());
        bare[63] = 0x00;
        let hex: String = bare.iter().map(|b| format!("{b:02x}")).collect();
        stdin.write_all(format!("{hex}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
        let want = if json { "\"qpn\":34" } else { "dump 2: line 7 (bare hex string)" };
        let found =
            std::iter::from_fn(|| Some(next_line(&rx, 60, "bare hex string"))).take(40).any(|l| l.contains(want));
        assert!(found, "{want} not written while the input is open");
        stdin.write_all(dump(0x33).as_bytes()).unwrap();
        drop(stdin);
        let rest: Vec<String> = rx.iter().collect();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{rest:?}");
        let want = if json { "\"qpn\":51" } else { "dump 3: line 8 (rdma-core libmlx5 dump)" };
        assert!(rest.iter().any(|l| l.contains(want)), "{rest:?}");
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_run_quietly() {
    // `dvcq decode big.log | head -1`: thousands of dumps, one line read.
    let path = std::env::temp_dir().join(format!("dvcq-decode-head-{}.log", std::process::id()));
    let text: String = (0..4000).map(dump).collect();
    std::fs::write(&path, text).unwrap();
    for json in [true, false] {
        let mut args = vec!["decode"];
        if json {
            args.push("--json");
        }
        args.push(path.to_str().unwrap());
        let mut child = Command::new(env!("CARGO_BIN_EXE_dvcq"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn dvcq");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        // The reader is gone (dropped with its pipe).
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let status = child.wait().unwrap();
        assert!(first.starts_with(if json { "{" } else { "dump 1: line 1 " }), "{first}");
        assert_eq!(status.code(), Some(0), "{err}");
        assert_eq!(err, "", "json: {json}");
    }
    let _ = std::fs::remove_file(&path);
}

/// 24 MB of log through a pipe: every CQE comes out while the input is still open, and the
/// peak resident set of the whole run then stays under 64 MiB (reading all of the input
/// first took gigabytes on logs this size's double).
#[test]
#[cfg(target_os = "linux")]
fn memory_stays_bounded_by_one_dump_on_a_big_log() {
    let (mut child, stdin, rx) = spawn(&["--json", "-"]);
    let mut stdin = std::io::BufWriter::with_capacity(1 << 16, stdin);
    let stats = write_log(&mut stdin, 24_000_000).unwrap();
    // The line after the last dump ends it.
    stdin.write_all(b"end of log\n").unwrap();
    stdin.flush().unwrap();
    let mut cqes = 0u64;
    while cqes < stats.cqes {
        let line = next_line(&rx, 600, "a CQE of the big log, the input still open");
        assert!(line.contains("\"type\":\"cqe\""), "{line}");
        cqes += 1;
    }
    let peak = peak_kib(child.id()).expect("VmHWM of the running decoder");
    drop(stdin);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(rx.iter().next().is_none(), "more output than the log's CQEs");
    assert!(peak < 64 * 1024, "peak resident set {peak} KiB decoding {} bytes", stats.bytes);
}
