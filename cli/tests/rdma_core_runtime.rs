//! rdma-core is loaded at run time, so the API is the same in every build: a program that
//! adopts an application's rdma-core objects compiles anywhere, and where rdma-core cannot
//! be loaded (here: `DVCQ_NO_RDMA_CORE=1`, which makes the loader report it absent) it
//! fails with an error that says what to install, while the models go on working.

use core::ffi::c_void;
use core::ptr::NonNull;
use dvcq::{BackendChoice, CompletionChannel, Context, Cq, Error};
use std::process::Command;

/// What every "not available" message ends with.
const INSTALL: &str = "apt-get install libibverbs1 ibverbs-providers";

/// Set in the child process [`without_rdma_core_the_interop_calls_fail_naming_what_to_install`]
/// starts, which runs [`child_without_rdma_core`] there.
const CHILD: &str = "DVCQ_TEST_NO_RDMA_CORE_CHILD";

/// The interop entry points, with the signatures they have in every build.
#[allow(clippy::type_complexity)]
fn interop_signatures() {
    let _: unsafe fn(NonNull<c_void>) -> Result<Context, Error> = Context::from_raw;
    let _: unsafe fn(&Context, NonNull<c_void>, BackendChoice) -> Result<Cq, Error> = Cq::attach;
    let _: unsafe fn(&Context, NonNull<c_void>) -> Result<CompletionChannel, Error> = CompletionChannel::from_raw;
}

/// What a program using the interop does, in a process where rdma-core is absent: opening
/// a real device and adopting a context both fail with [`Error::NoRdmaCore`] naming what to
/// install; a model opens and polls as ever.
fn no_rdma_core_checks() {
    interop_signatures();
    assert!(!dvcq::device::rdma_core_available());
    match Context::open("mlx5_0") {
        Err(e @ Error::NoRdmaCore { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("\"mlx5_0\"") && text.contains("DVCQ_NO_RDMA_CORE=1") && text.contains(INSTALL),
                "{text}"
            );
        }
        other => panic!("{:?}", other.map(|c| c.name().to_string())),
    }
    // SAFETY: where rdma-core cannot be loaded, from_raw fails before it reads the pointer (its documented error), so a dangling one is never used.
    match unsafe { Context::from_raw(NonNull::dangling()) } {
        Err(e @ Error::NoRdmaCore { .. }) => assert!(e.to_string().contains(INSTALL), "{e}"),
        other => panic!("{:?}", other.map(|c| c.name().to_string())),
    }
    let ctx = Context::open("model-mlx5").expect("the models need no rdma-core");
    let mut cq = ctx.create_cq(dvcq::CqOptions::new(16)).expect("a model CQ");
    let mut wc = [dvcq::Completion::default(); 4];
    assert_eq!(cq.poll_count(&mut wc), 0);
}

/// The child's half: runs only in the process the test below starts.
#[test]
fn child_without_rdma_core() {
    if std::env::var_os(CHILD).is_some() {
        no_rdma_core_checks();
    }
}

/// This test binary again, with `DVCQ_NO_RDMA_CORE=1`, running [`child_without_rdma_core`]
/// (the loader decides once per process, so the check needs a process of its own).
#[test]
fn without_rdma_core_the_interop_calls_fail_naming_what_to_install() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_without_rdma_core", "--nocapture", "--test-threads=1"])
        .env("DVCQ_NO_RDMA_CORE", "1")
        .env(CHILD, "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("1 passed"), "the child ran nothing: {stdout}");
}

fn dvcq(args: &[&str], no_rdma_core: bool) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dvcq"));
    c.args(args);
    if no_rdma_core {
        c.env("DVCQ_NO_RDMA_CORE", "1");
    }
    c.output().expect("dvcq runs")
}

/// `dvcq devices` where rdma-core cannot be loaded lists the models and says what to
/// install; `--json` has no release and the same reason.
#[test]
fn devices_without_rdma_core_says_what_to_install() {
    let out = dvcq(&["devices"], true);
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("model-mlx5") && text.contains(INSTALL), "{text}");
    let out = dvcq(&["devices", "--json"], true);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert!(v["rdma_core"].is_null(), "{v}");
    assert!(v["no_hardware"].as_str().is_some_and(|s| s.contains(INSTALL) && s.contains("DVCQ_NO_RDMA_CORE=1")), "{v}");
}

/// `dvcq --version` says which rdma-core this machine has, found at run time: none with
/// `DVCQ_NO_RDMA_CORE=1`, and otherwise whatever this process finds too.
#[test]
fn version_says_which_rdma_core_is_loaded() {
    let line = |no: bool| {
        let out = dvcq(&["--version"], no);
        assert!(out.status.success());
        let line = String::from_utf8(out.stdout).unwrap();
        assert_eq!(line.lines().count(), 1, "{line:?}");
        assert!(line.starts_with(&format!("dvcq {} (", dvcq::device::VERSION)), "{line}");
        line
    };
    let absent = line(true);
    assert!(absent.contains("(no rdma-core: ") && absent.contains(INSTALL), "{absent}");
    let here = line(false);
    if dvcq::device::rdma_core_available() {
        assert!(here.contains("(rdma-core ") && here.contains("libibverbs.so"), "{here}");
    } else {
        assert!(here.contains("(no rdma-core: "), "{here}");
    }
}
