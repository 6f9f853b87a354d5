//! Programs nobody wrote for dvcq, run on the emulated ConnectX-6 Dx `mlx5_0` and E810
//! `irdma0` (`libdvcq_emu.so`) three ways with the preload (`off`, `verify`, `own`) and once
//! without it; their output must be the baseline's, and the exit report must show that dvcq
//! polled (`own`) and agreed with the provider (`verify`), or declined saying why.
//!
//! [`programs`] is the list: a program of one process, or a server and a client, which the
//! emulator's wire joins (ibverbs-utils' pingpongs, perftest; the soft-RoCE VM runs them
//! too, `tests/vm/preload-apps`).

#[path = "../../emu/tests/support/build_c.rs"]
mod build_c;
#[path = "../../emu/tests/support/preload.rs"]
mod emu;
#[path = "../../tests/support/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// One program to compare: `client` runs alone, or after `server` started.
struct Program {
    /// Its name in messages.
    name: String,
    /// The emulated device it runs on (`mlx5_0` or `irdma0`), whose dvcq backend must poll
    /// every CQ in `own` mode.
    device: &'static str,
    /// The server's command line, if there is one.
    server: Option<Vec<String>>,
    /// The command line whose output is compared (`{cq_workout}` is the C program built by
    /// the test, `{port}` a free TCP port).
    client: Vec<String>,
    /// The least completions dvcq must have polled in `own` mode.
    min_polled: u64,
    /// What its output says when it finished.
    finished: &'static str,
    /// Verify mode declines its CQs, giving this reason (mlx5 CQs whose QPs receive from an
    /// SRQ: dvcq's poll would give the provider's free SRQ entries back a second time; every
    /// irdma CQ: the provider's consumer-index write-back to the shadow area).
    verify_declined: Option<&'static str>,
    /// Compare the output with its numbers masked (QPNs, PSNs, rates and times differ from
    /// run to run), as the VM's comparison does.
    masked: bool,
    /// The least completions dvcq must have polled on extended CQs (`ibv_create_cq_ex`,
    /// polled with `ibv_start_poll`) in `own` mode, and checked in `verify` mode.
    min_ext_polled: u64,
    /// What the exit report must say in `own` and `verify` mode besides, each on a CQ's line
    /// where dvcq polled nothing.
    says: &'static [&'static str],
}

/// Why verify mode declines every irdma CQ (the preload's words).
const IRDMA_VERIFY: &str =
    "verify mode reads the ring after the provider, which irdma's shadow-area write-back does not allow";

/// Why verify mode declines an mlx5 CQ whose QPs receive from an SRQ.
const MLX5_SRQ_VERIFY: &str = "verify mode on mlx5 does not follow SRQs";

impl Program {
    /// The same, asking for `n` completions of extended CQs.
    fn ext(self, n: u64) -> Program {
        Program { min_ext_polled: n, ..self }
    }

    /// The same, verify mode declining its CQs for `reason`.
    fn verify_declined(self, reason: &'static str) -> Program {
        Program { verify_declined: Some(reason), ..self }
    }

    /// The dvcq backend that polls its CQs in `own` mode, as the exit report names it.
    fn backend(&self) -> &'static str {
        if self.device.starts_with("irdma") {
            "irdma"
        } else {
            "mlx5"
        }
    }
}

/// A two-process program over the emulator's wire on `device`: the server with `args`, 100
/// iterations on a free port, and the client naming `localhost`; outputs compared masked.
/// On irdma, verify mode declines every CQ.
fn pair(device: &'static str, program: &str, args: &[&str], min_polled: u64, finished: &'static str) -> Program {
    let server: Vec<String> = [program]
        .iter()
        .chain(&["-d", device])
        .chain(args)
        .chain(&["-p", "{port}", "-n", "100"])
        .map(|s| s.to_string())
        .collect();
    let client = server.iter().cloned().chain(["localhost".to_string()]).collect();
    let name = [program]
        .iter()
        .chain(args.iter().filter(|a| a.starts_with("-e") || a.starts_with("-t")))
        .chain(&["on", device])
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let p = Program {
        name,
        device,
        server: Some(server),
        client,
        min_polled,
        finished,
        verify_declined: None,
        masked: true,
        min_ext_polled: 0,
        says: &[],
    };
    if p.backend() == "irdma" {
        p.verify_declined(IRDMA_VERIFY)
    } else {
        p
    }
}

/// The list: the C program alone, then ibverbs-utils' pingpongs and perftest's pairs.
fn programs() -> Vec<Program> {
    let mut list = vec![Program {
        name: "cq_workout".into(),
        device: "mlx5_0",
        server: None,
        client: vec!["{cq_workout}".into()],
        min_polled: 40,
        finished: "done",
        verify_declined: None,
        masked: false,
        min_ext_polled: 0,
        // Its CQ read through mlx5dv_init_obj is the program's alone, dvcq having polled none.
        says: &["handed back: the program asked for its ring (mlx5dv_init_obj)"],
    }
    // ibv_create_cq_ex's CQ (116) and mlx5dv_create_cq's (4).
    .ext(120)];
    // The least completions are the client's: a pingpong's 100 sends and 100 receives, a
    // bandwidth test's 100 sends, writes or reads, ib_send_lat's 100 of each.
    for device in ["mlx5_0", "irdma0"] {
        list.push(pair(device, "ibv_rc_pingpong", &["-g", "0"], 200, "iters in"));
        list.push(pair(device, "ibv_rc_pingpong", &["-g", "0", "-e"], 200, "iters in"));
        list.push(pair(device, "ibv_ud_pingpong", &["-g", "0"], 200, "iters in"));
    }
    // -t: completion timestamps, an extended CQ polled with ibv_start_poll and
    // ibv_wc_read_completion_ts (the emulated ConnectX reports a timestamp mask and stamps
    // its CQEs; the emulated E810 reports none, and ibv_rc_pingpong -t refuses to run there).
    list.push(pair("mlx5_0", "ibv_rc_pingpong", &["-g", "0", "-t"], 200, "iters in").ext(100));
    // The E810 has no SRQ (ibv_srq_pingpong fails there without dvcq too).
    list.push(pair("mlx5_0", "ibv_srq_pingpong", &["-g", "1"], 200, "iters in").verify_declined(MLX5_SRQ_VERIFY));
    for device in ["mlx5_0", "irdma0"] {
        for perftest in ["ib_send_bw", "ib_write_bw", "ib_read_bw"] {
            list.push(pair(device, perftest, &[], 100, "#bytes"));
        }
    }
    list.push(pair("mlx5_0", "ib_send_lat", &[], 200, "#bytes"));
    list
}

/// `text` with every number (a run of hex digits and `x` holding a decimal digit: `100`,
/// `0x1a2b`, `fe80`) as `#`, and every run of blanks as one space (perftest pads its columns
/// to the numbers' width); words stay.
fn masked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.chars().any(|c| c.is_ascii_digit()) {
            out.push('#');
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for ch in text.chars() {
        if ch.is_ascii_hexdigit() || ch == 'x' {
            run.push(ch);
            continue;
        }
        flush(&mut run, &mut out);
        if ch == ' ' || ch == '\t' {
            if !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(ch);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// A TCP port nobody listens on now.
fn free_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string()
}

/// The preload library, built for this test's profile next to the emulator's.
fn preload_lib(emu_lib: &Path) -> PathBuf {
    let dir = emu_lib.parent().expect("the emulator sits in target/<profile>");
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(p) => p,
        None => panic!("no profile directory at {}", dir.display()),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "--quiet", "-p", "dvcq-preload", "--profile", profile, "--manifest-path"])
        .arg(emu::workspace_root().join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", dir.parent().expect("target/"))
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "building the preload failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let lib = dir.join("libdvcq_preload.so");
    assert!(lib.is_file(), "cargo built no {}", lib.display());
    lib
}

/// The C program, compiled against the installed libibverbs; `None` (with a skip) where
/// there is no C compiler or no verbs.h.
fn build_c(out_dir: &Path) -> Option<PathBuf> {
    build_c_program(out_dir, "cq_workout")
}

/// `preload/tests/c/<name>.c`, compiled into `out_dir` against the installed libibverbs.
fn build_c_program(out_dir: &Path, name: &str) -> Option<PathBuf> {
    build_c::build_c(&emu::workspace_root().join(format!("preload/tests/c/{name}.c")), out_dir)
}

/// Runs `p` with `preload` (the libraries of `LD_PRELOAD`) and `mode`: again, up to three
/// times, where perftest's clock calibration failed on either side (the machine's load, not
/// the program's verbs; the run's result is then the last one's).
fn run(p: &Program, exe: &Path, preload: &str, mode: Option<&str>) -> Output {
    let mut tries = 0;
    loop {
        tries += 1;
        let (out, server) = run_once(p, exe, preload, mode);
        let calibration_failed = [Some(&out), server.as_ref()]
            .iter()
            .flatten()
            .any(|o| String::from_utf8_lossy(&o.stderr).contains(emu::PERFTEST_CLOCK));
        if calibration_failed && tries < 3 {
            eprintln!("{} ({mode:?}): perftest's clock calibration failed; running it again", p.name);
            continue;
        }
        if let Some(so) = server {
            assert!(so.status.success(), "{}: the server failed:\n{}", p.name, String::from_utf8_lossy(&so.stderr));
        }
        return out;
    }
}

/// One run of `p`: the client's output, and the server's where there is one.
fn run_once(p: &Program, exe: &Path, preload: &str, mode: Option<&str>) -> (Output, Option<Output>) {
    let port = free_port();
    let argv = |a: &[String]| -> Vec<String> {
        a.iter().map(|s| s.replace("{cq_workout}", exe.to_str().unwrap()).replace("{port}", &port)).collect::<Vec<_>>()
    };
    let cmd = |a: &[String]| {
        let mut c = emu::emulated(&a[0], Path::new(preload));
        c.args(&a[1..]).env("DVCQ_STATS", "1").env_remove("DVCQ_PRELOAD_MODE");
        if let Some(m) = mode {
            c.env("DVCQ_PRELOAD_MODE", m);
        }
        c
    };
    let server = p.server.as_deref().map(|s| {
        let mut child = cmd(&argv(s)).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the server starts");
        // The client starts once the server listens (a fixed pause cost 16 s a run).
        let deadline = Instant::now() + Duration::from_secs(60);
        while !emu::listening(port.parse().expect("a port number")) {
            if let Some(status) = child.try_wait().expect("the server's status") {
                let o = child.wait_with_output().expect("the server's output");
                panic!(
                    "{}: the server exited ({status}) before it listened:\n{}",
                    p.name,
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            assert!(Instant::now() < deadline, "{}: the server never listened on {port}", p.name);
            std::thread::sleep(Duration::from_millis(10));
        }
        child
    });
    let out = cmd(&argv(&p.client)).output().expect("the program runs");
    (out, server.map(|s| s.wait_with_output().expect("the server ends")))
}

/// The completions of extended CQs that dvcq's mlx5 backend polled (or checked) in `mode`,
/// from the exit report's per-CQ lines (`cq N extended backend mlx5 mode M polled P ...`).
fn ext_polled(stderr: &str, mode: &str) -> u64 {
    let head = format!(" extended backend mlx5 mode {mode} polled ");
    stderr.lines().filter_map(|l| l.split_once(&head)?.1.split_whitespace().next()?.parse::<u64>().ok()).sum()
}

/// The value after `key` in the exit report's total line.
fn total(stderr: &str, key: &str) -> Option<u64> {
    let line = stderr.lines().rev().find(|l| l.starts_with("dvcq-preload: mode "))?;
    let mut words = line.split_whitespace();
    words.by_ref().find(|w| *w == key)?;
    words.next()?.parse().ok()
}

#[test]
fn programs_give_the_same_results_with_the_preload_as_without() {
    let emu_lib = emu::preload();
    let lib = preload_lib(&emu_lib);
    let Some(exe) = build_c(&emu_lib.parent().unwrap().join("preload-tests")) else { return };
    let both = format!("{} {}", emu_lib.display(), lib.display());
    let programs = programs();
    // Two programs at a time (each a server and a client, or one process): the runs share
    // nothing but the emulator's directory, where each process takes a slot of its own.
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(p) = programs.get(i) else { break };
                check_program(p, &exe, &emu_lib, &both);
            });
        }
    });
}

/// Runs `p` without the preload, then with it in each mode, and checks each run against the
/// first and against what the mode must report.
fn check_program(p: &Program, exe: &Path, emu_lib: &Path, both: &str) {
    let on_path = |prog: &str| {
        prog.starts_with('{')
            || std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(prog).is_file()))
    };
    if !on_path(&p.client[0]) {
        skip::skip_check(&format!("{} is not installed (Debian: ibverbs-utils, perftest)", p.name));
        return;
    }
    let base = run(p, exe, emu_lib.to_str().unwrap(), None);
    let shown = |o: &Output| {
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        if p.masked {
            masked(&text)
        } else {
            text
        }
    };
    let base_out = shown(&base);
    assert!(base.status.success(), "{}: the baseline failed:\n{}", p.name, String::from_utf8_lossy(&base.stderr));
    assert!(base_out.contains(p.finished), "{}: the baseline did not finish:\n{base_out}", p.name);
    for mode in ["off", "verify", "own"] {
        let o = run(p, exe, both, Some(mode));
        let (out, err) = (shown(&o), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{} ({mode}): failed:\n{out}\n{err}", p.name);
        assert_eq!(out, base_out, "{} ({mode}): the output differs from the baseline's\n{err}", p.name);
        let polled = total(&err, "polled").unwrap_or_else(|| panic!("{} ({mode}): no exit report:\n{err}", p.name));
        match mode {
            "off" => assert_eq!(polled, 0, "{}: off polls nothing:\n{err}", p.name),
            "own" => {
                assert!(polled >= p.min_polled, "{}: dvcq polled {polled} < {}:\n{err}", p.name, p.min_polled);
                assert!(!err.contains("declined"), "{}: own mode declined a CQ:\n{err}", p.name);
                assert!(!err.contains("could not be attached"), "{}: a QP or WQ was not attached:\n{err}", p.name);
                // Every CQ stayed on dvcq's backend for the device (a QP dvcq could not
                // attach would have handed its CQ to rdma-core's ibv_poll_cq, the generic
                // backend).
                let cqs: Vec<&str> = err.lines().filter(|l| l.contains(" mode own polled")).collect();
                assert!(!cqs.is_empty(), "{}: no CQ in the report:\n{err}", p.name);
                let backend = format!("backend {} mode own", p.backend());
                assert!(
                    cqs.iter().all(|l| l.contains(&backend)),
                    "{}: a CQ not polled by dvcq's {} backend:\n{err}",
                    p.name,
                    p.backend()
                );
            }
            _ => match p.verify_declined {
                Some(reason) => {
                    assert_eq!(polled, 0, "{}: verify declined its CQs:\n{err}", p.name);
                    assert!(err.contains(reason), "{}: no reason ({reason:?}):\n{err}", p.name);
                }
                None => {
                    assert!(polled > 0, "{}: verify checked nothing:\n{err}", p.name);
                    assert!(!err.contains("completion differs"), "{}: verify found differences:\n{err}", p.name);
                    assert!(err.lines().filter(|l| l.contains("mode verify polled")).all(|l| l
                        .split_whitespace()
                        .skip_while(|w| *w != "differences")
                        .nth(1)
                        == Some("0")));
                }
            },
        }
        for said in p.says.iter().filter(|_| mode != "off") {
            // On a CQ line with nothing polled by dvcq.
            assert!(
                err.lines().any(|l| l.contains(said) && l.contains(" polled 0 errors 0")),
                "{} ({mode}): the report does not say {said:?}:\n{err}",
                p.name
            );
        }
        if p.min_ext_polled > 0 && mode != "off" {
            let ext = ext_polled(&err, mode);
            assert!(
                ext >= p.min_ext_polled,
                "{} ({mode}): dvcq polled {ext} completions of extended CQs, < {}:\n{err}",
                p.name,
                p.min_ext_polled
            );
        }
    }
}

/// `dvcq` itself, built for this test's profile next to the libraries.
fn dvcq_bin(dir: &Path) -> PathBuf {
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(p) => p,
        None => panic!("no profile directory at {}", dir.display()),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "--quiet", "-p", "dvcq-cli", "--bin", "dvcq", "--profile", profile, "--manifest-path"])
        .arg(emu::workspace_root().join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", dir.parent().expect("target/"))
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "building dvcq failed:\n{}", String::from_utf8_lossy(&out.stderr));
    dir.join("dvcq")
}

/// `dvcq run` finds the preload next to itself, keeps the emulator already in
/// `LD_PRELOAD`, sets the mode and the report, and the program runs as without it.
#[test]
fn dvcq_run_starts_a_program_with_the_preload() {
    let emu_lib = emu::preload();
    let dir = emu_lib.parent().unwrap().to_path_buf();
    let _lib = preload_lib(&emu_lib);
    let Some(exe) = build_c(&dir.join("preload-tests-run")) else { return };
    let dvcq = dvcq_bin(&dir);
    let o = emu::emulated(&dvcq, &emu_lib)
        .args(["run", "--mode", "own", "--stats", "--"])
        .arg(&exe)
        .env_remove("DVCQ_PRELOAD_LIB")
        .output()
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.ends_with("done\n"), "{out}");
    assert!(total(&err, "polled").is_some_and(|n| n > 0), "dvcq did not poll:\n{err}");

    // A static program is refused before it starts, saying why.
    let fake = dir.join("preload-tests-run/static-elf");
    let mut b = vec![0u8; 64];
    b[..6].copy_from_slice(b"\x7fELF\x02\x01");
    std::fs::write(&fake, b).unwrap();
    let o = Command::new(&dvcq).args(["run", "--"]).arg(&fake).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("a static binary"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A program that loads libibverbs itself and calls it through its own handle (NCCL's
/// way), with and without `RTLD_DEEPBIND`: it runs as without the preload, which sees none
/// of its CQs and says why, once.
#[test]
fn programs_the_preload_cannot_reach_are_told() {
    let emu_lib = emu::preload();
    let lib = preload_lib(&emu_lib);
    let Some(exe) = build_c_program(&emu_lib.parent().unwrap().join("preload-tests-reach"), "dlopen_verbs") else {
        return;
    };
    let both = format!("{} {}", emu_lib.display(), lib.display());
    for (arg, line) in [
        ("handle", "dvcq-preload: the program loads libibverbs.so.1 itself (dlopen): functions it looks up on that handle (dlsym) are libibverbs' own, which dvcq cannot see"),
        ("deepbind", "dvcq-preload: libibverbs.so.1 is opened with RTLD_DEEPBIND: its calls into libibverbs (if it makes any) bind to libibverbs' own functions first, which dvcq cannot see"),
    ] {
        let base = emu::emulated(&exe, &emu_lib).arg(arg).output().unwrap();
        let o = emu::emulated(&exe, Path::new(&both)).arg(arg).env("DVCQ_STATS", "1").env("DVCQ_PRELOAD_MODE", "own").output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), base.status.code(), "{arg}: the exit status changed:\n{err}");
        assert_eq!(o.stdout, base.stdout, "{arg}: the output changed:\n{err}");
        assert_eq!(err.matches(line).count(), 1, "{arg}: not told once:\n{err}");
        assert_eq!(total(&err, "cqs"), Some(0), "{arg}: the preload saw a CQ:\n{err}");
    }
    // The emulated device answers the program that goes through its own handle.
    let o = emu::emulated(&exe, &emu_lib).arg("handle").output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).ends_with("done\n"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn extended_cq_lines_are_summed() {
    let err = "dvcq-preload: cq 1 backend mlx5 mode own polled 20 errors 0\n\
               dvcq-preload: cq 2 extended backend mlx5 mode own polled 7 errors 0\n\
               dvcq-preload: cq 3 extended backend mlx5 mode own polled 5 errors 0 dropped-cqes-of-destroyed-qps 1\n\
               dvcq-preload: cq 4 backend provider mode own declined: an extended CQ made with X\n";
    assert_eq!(ext_polled(err, "own"), 12);
    assert_eq!(ext_polled(err, "verify"), 0);
}

#[test]
fn the_report_total_is_read() {
    let err =
        "dvcq-preload: cq 1 backend mlx5 mode own polled 20 errors 0\ndvcq-preload: mode own cqs 1 dvcq polled 20\n";
    assert_eq!(total(err, "polled"), Some(20));
    assert_eq!(total(err, "cqs"), Some(1));
    assert_eq!(total("nothing", "polled"), None);
}

/// The masking keeps words, hides every number, decimal or hex, and every column padding.
#[test]
fn numbers_are_masked_and_words_kept() {
    let pingpong =
        "  local address:  LID 0x0000, QPN 0x0a3b01, PSN 0xc4e2f1, GID fe80::e42\n8192000 bytes in 0.01 seconds";
    assert_eq!(masked(pingpong), " local address: LID #, QPN #, PSN #, GID #::#\n# bytes in #.# seconds");
    assert_eq!(masked(" 65536      100\t\t   0.000617"), masked(" 65536 100\t 0.000617"));
    assert_ne!(masked("Send BW Test"), masked("Send Lat Test"));
}
