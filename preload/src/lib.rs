//! `libdvcq_preload.so`: dvcq polls the completion queues of a verbs program nobody
//! rewrites. Loaded with `LD_PRELOAD` (or started by `dvcq run`), it wraps the functions that
//! create, resize and destroy CQs, QPs, SRQs and WQs, and in each device context replaces
//! the two ops the inline `ibv_poll_cq` and `ibv_req_notify_cq` of verbs.h call with
//! trampolines that dispatch per CQ: a CQ dvcq took goes to dvcq, every other one to the
//! provider's own op saved for that context. docs/preload.md has the whole story.
//!
//! `DVCQ_PRELOAD_MODE`:
//! - `own` (the default): dvcq's attach polls the CQ and writes back what rdma-core reads
//!   later; arming goes through dvcq.
//! - `verify`: the provider polls and the application gets its completions; dvcq reads the
//!   same entries and every difference is reported.
//! - `off`: nothing is patched; the program runs on rdma-core alone.
//!
//! `DVCQ_STATS=1` prints one line per CQ at exit: backend, completions, errors.

mod cq;
mod ctx;
mod dispatch;
mod dv;
mod ext;
mod hooks;
mod layout;
mod log;
mod reach;
mod real;
mod table;
mod verify;

use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

/// How the preload treats the CQs it sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Nothing patched.
    Off,
    /// The provider polls; dvcq checks.
    Verify,
    /// dvcq polls.
    Own,
}

impl Mode {
    /// The word `DVCQ_PRELOAD_MODE` takes.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Verify => "verify",
            Mode::Own => "own",
        }
    }

    fn parse(v: Option<&str>) -> Result<Mode, String> {
        match v {
            None | Some("") | Some("own") => Ok(Mode::Own),
            Some("verify") => Ok(Mode::Verify),
            Some("off") => Ok(Mode::Off),
            Some(other) => Err(format!("DVCQ_PRELOAD_MODE={other:?} is none of own, verify, off: running with off")),
        }
    }
}

/// The environment variable that picks the mode.
pub const MODE_VAR: &str = "DVCQ_PRELOAD_MODE";

static MODE: AtomicU8 = AtomicU8::new(u8::MAX);

/// The mode, read from the environment once.
pub(crate) fn mode() -> Mode {
    match MODE.load(Ordering::Relaxed) {
        0 => Mode::Off,
        1 => Mode::Verify,
        2 => Mode::Own,
        _ => {
            let m = Mode::parse(std::env::var(MODE_VAR).ok().as_deref()).unwrap_or_else(|e| {
                log::once(e);
                Mode::Off
            });
            MODE.store(m as u8, Ordering::Relaxed);
            m
        }
    }
}

thread_local! {
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Marks the thread as inside dvcq: its own calls into rdma-core's ops (the generic and rxe
/// backends' arm, dvcq's fallbacks) reach the provider, not the trampolines again.
pub(crate) struct Inside(bool);

impl Inside {
    /// Enters; the guard restores what was there.
    pub(crate) fn enter() -> Inside {
        Inside(INSIDE.with(|c| c.replace(true)))
    }

    /// Whether the thread is inside dvcq.
    #[inline]
    pub(crate) fn active() -> bool {
        INSIDE.with(Cell::get)
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.with(|c| c.set(self.0));
    }
}

/// Locks `m`, taking over a lock a panicking thread left.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs when the library is loaded, before the program's `main`.
extern "C" fn init() {
    let m = mode();
    if m == Mode::Own && std::env::var_os("MLX5_SCATTER_TO_CQE").is_none() {
        // libmlx5 would let small receives land in the CQE, to be copied by its own poll into
        // memory dvcq only knows when told (Cq::attach_mr); keep data in the buffers.
        // SAFETY: before main, one thread; setenv copies the strings.
        unsafe { libc::setenv(c"MLX5_SCATTER_TO_CQE".as_ptr(), c"0".as_ptr(), 0) };
    }
    if std::env::var_os("DVCQ_STATS").is_some_and(|v| v == "1") {
        // SAFETY: registering a function with the C library's exit handlers.
        unsafe { libc::atexit(report) };
    }
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

/// The exit report: one line per CQ, then the total.
extern "C" fn report() {
    let mut lines = lock(&cq::REPORT).clone();
    let mut total = cq::DONE_COMPLETIONS.load(Ordering::Relaxed);
    cq::for_each(|e| {
        total += e.completions.load(Ordering::Relaxed);
        lines.push(e.report_line());
    });
    for l in &lines {
        eprintln!("dvcq-preload: {l}");
    }
    eprintln!("dvcq-preload: mode {} cqs {} dvcq polled {total}", mode().name(), lines.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_default_to_own() {
        assert_eq!(Mode::parse(None), Ok(Mode::Own));
        assert_eq!(Mode::parse(Some("verify")), Ok(Mode::Verify));
        assert_eq!(Mode::parse(Some("off")), Ok(Mode::Off));
        assert!(Mode::parse(Some("fast")).unwrap_err().contains("none of own, verify, off"));
    }

    #[test]
    fn the_guard_nests() {
        assert!(!Inside::active());
        {
            let _a = Inside::enter();
            {
                let _b = Inside::enter();
                assert!(Inside::active());
            }
            assert!(Inside::active(), "the inner guard restores the outer state");
        }
        assert!(!Inside::active());
    }
}
