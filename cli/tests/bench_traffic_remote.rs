//! The two-host `bench traffic` (`--server` / `HOST`) over loopback: the out-of-band
//! exchange and its refusals, between real dvcq processes or a dvcq and a peer written here
//! that speaks (or does not speak) the exchange. No data moves on this host: the models live
//! inside one process, which a two-host run refuses once the exchange has succeeded (the
//! data path runs on soft-RoCE in the VM test).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_dvcq"))
        .args(["bench", "traffic"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dvcq")
}

/// Waits at most `limit` for `child`; kills it and fails past that.
fn finish(mut child: Child, limit: Duration) -> Output {
    let t0 = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("dvcq still running after {limit:?}: {}", String::from_utf8_lossy(&o.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Connects to a server that may still be starting.
fn connect(port: u16) -> TcpStream {
    let t0 = Instant::now();
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => return s,
            Err(e) if t0.elapsed() > Duration::from_secs(20) => panic!("no server on {port}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn read_line(s: &TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line
}

fn hello(version: u32) -> String {
    format!(
        "{{\"protocol\":\"dvcq-traffic\",\"version\":{version},\"dvcq\":\"0.0.0\",\"role\":\"client\",\"options\":{{}}}}\n"
    )
}

#[test]
fn two_dvcqs_agree_then_both_refuse_a_model_by_name() {
    let port = free_port().to_string();
    let server = spawn(&["--server", "-p", &port, "-d", "model-mlx5"]);
    let client = spawn(&["127.0.0.1", "-p", &port, "-d", "model-mlx5", "--oob-timeout", "20"]);
    let (c, s) = (finish(client, Duration::from_secs(30)), finish(server, Duration::from_secs(30)));
    for (side, o) in [("client", &c), ("server", &s)] {
        // The exchange passed (versions and options agreed): each side got as far as its device.
        assert_eq!(o.status.code(), Some(2), "{side}: {}", stderr(o));
        let e = stderr(o);
        assert!(e.contains("dvcq bench traffic: model-mlx5 is a model inside this process"), "{side}: {e}");
        assert!(o.stdout.is_empty(), "{side}");
    }
}

#[test]
fn mismatched_options_stop_both_sides_naming_the_option() {
    let port = free_port().to_string();
    let server = spawn(&["--server", "-p", &port, "-s", "4096", "-d", "model-mlx5"]);
    let client = spawn(&["127.0.0.1", "-p", &port, "-s", "64", "-d", "model-mlx5", "--oob-timeout", "20"]);
    let (c, s) = (finish(client, Duration::from_secs(30)), finish(server, Duration::from_secs(30)));
    assert_eq!((c.status.code(), s.status.code()), (Some(2), Some(2)));
    assert!(stderr(&c).contains("-s/--size 64 here, 4096 on the server"), "{}", stderr(&c));
    assert!(stderr(&s).contains("-s/--size 4096 here, 64 on the client"), "{}", stderr(&s));
    // One error line each.
    assert_eq!(stderr(&c).lines().count(), 1, "{}", stderr(&c));

    let port = free_port().to_string();
    let server = spawn(&["--server", "-p", &port, "-d", "model-mlx5", "--poller", "direct"]);
    let client = spawn(&["127.0.0.1", "-p", &port, "-d", "model-mlx5", "--oob-timeout", "20"]);
    let (c, s) = (finish(client, Duration::from_secs(30)), finish(server, Duration::from_secs(30)));
    assert_eq!((c.status.code(), s.status.code()), (Some(2), Some(2)));
    assert!(stderr(&c).contains("--poller direct,ibv_poll_cq,cq_ex here, direct on the server"), "{}", stderr(&c));
}

#[test]
fn another_version_is_refused_on_both_sides() {
    // A client of another version against a dvcq server.
    let port = free_port();
    let server = spawn(&["--server", "-p", &port.to_string(), "-d", "model-mlx5"]);
    let mut s = connect(port);
    s.write_all(hello(2).as_bytes()).unwrap();
    let answer = read_line(&s);
    let o = finish(server, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains("the peer speaks the dvcq-traffic exchange version 2 (dvcq 0.0.0), this dvcq speaks version 1"),
        "{}",
        stderr(&o)
    );
    // The peer is told why, in the exchange's error message.
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(v["msg"], "error", "{answer}");
    assert!(v["what"].as_str().unwrap().contains("version 2"), "{answer}");

    // A server of another version against a dvcq client.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let client = spawn(&["127.0.0.1", "-p", &port, "-d", "model-mlx5", "--oob-timeout", "20"]);
    let (s, _) = l.accept().unwrap();
    let theirs = read_line(&s);
    assert!(theirs.contains("\"protocol\":\"dvcq-traffic\"") && theirs.contains("\"version\":1"), "{theirs}");
    (&s).write_all(hello(7).as_bytes()).unwrap();
    let o = finish(client, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("exchange version 7"), "{}", stderr(&o));
}

#[test]
fn a_peer_that_is_not_dvcq_is_named_so_and_both_exit() {
    let port = free_port();
    let server = spawn(&["--server", "-p", &port.to_string(), "-d", "model-mlx5"]);
    let mut s = connect(port);
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let o = finish(server, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("the peer is not dvcq bench traffic: it sent \"GET / HTTP/1.1\""), "{}", stderr(&o));

    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let client = spawn(&["127.0.0.1", "-p", &port, "-d", "model-mlx5", "--oob-timeout", "20"]);
    let (s, _) = l.accept().unwrap();
    (&s).write_all(b"SSH-2.0-OpenSSH_9.2p1\r\n").unwrap();
    let o = finish(client, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not dvcq bench traffic: it sent \"SSH-2.0-OpenSSH_9.2p1\""), "{}", stderr(&o));
}

#[test]
fn no_server_at_the_address_is_a_clear_error_after_a_bounded_wait() {
    let port = free_port().to_string();
    let t0 = Instant::now();
    let o =
        finish(spawn(&["127.0.0.1", "-p", &port, "-d", "model-mlx5", "--oob-timeout", "2"]), Duration::from_secs(30));
    let took = t0.elapsed();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(&format!("no dvcq bench traffic server at 127.0.0.1:{port}")), "{}", stderr(&o));
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(15), "{took:?}");
}

#[test]
fn a_server_that_dies_or_falls_silent_stops_the_client() {
    // Dies after reading the client's hello: its socket closes, as a killed process's does.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let client = spawn(&["127.0.0.1", "-p", &port, "-d", "model-mlx5", "--oob-timeout", "20"]);
    let (s, _) = l.accept().unwrap();
    read_line(&s);
    drop(s);
    let o = finish(client, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("the peer closed the connection (waiting for the peer's hello)"), "{}", stderr(&o));

    // Falls silent: the client gives up after --oob-timeout.
    let client = spawn(&["127.0.0.1", "-p", &port, "-d", "model-mlx5", "--oob-timeout", "1"]);
    let (s, _) = l.accept().unwrap();
    let t0 = Instant::now();
    let o = finish(client, Duration::from_secs(30));
    drop(s);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no answer in 1 s (waiting for the peer's hello)"), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(15));
}

#[test]
fn one_host_options_are_refused_in_a_two_host_run() {
    for (flag, extra) in [("--sq-sig-all", None), ("--cq-per-qp", None), ("--depth", Some("64"))] {
        let mut args = vec!["127.0.0.1", "-p", "1", flag];
        args.extend(extra);
        let o = finish(spawn(&args), Duration::from_secs(30));
        assert_eq!(o.status.code(), Some(2), "{flag}");
        assert!(stderr(&o).contains(&format!("{flag}: a one-host option")), "{}", stderr(&o));
    }
    let o = finish(spawn(&["--server", "127.0.0.1"]), Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2), "--server and HOST together");
}
