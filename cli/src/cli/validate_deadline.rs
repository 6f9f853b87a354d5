//! A deadline for each of `dvcq validate`'s checks: the check runs on a thread of its own,
//! and one that has not finished in time (a device that stopped producing completions, a
//! destroy waiting for an event that never comes) fails with a line saying so while the
//! next check runs. The thread that ran over is left behind (a thread cannot be stopped from
//! outside), blocked where it was; the process ends it when validate exits.

use std::sync::mpsc;
use std::time::Duration;

/// Why a bounded run has no result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Overrun {
    /// It was still running when the time was up.
    TimedOut(Duration),
    /// It panicked (its message went to standard error).
    Panicked,
}

impl std::fmt::Display for Overrun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Overrun::TimedOut(d) => write!(
                f,
                "did not finish within {}s (--check-timeout): the device stopped producing completions or \
                 events, or a destroy waited forever; the remaining checks ran on",
                d.as_secs()
            ),
            Overrun::Panicked => f.write_str("panicked (the message is on standard error)"),
        }
    }
}

/// Runs `f` on a thread of its own and waits `limit` for its result.
///
/// # Errors
///
/// [`Overrun::TimedOut`] when `f` has not returned within `limit`, [`Overrun::Panicked`]
/// when it panicked (or the thread could not be started).
pub fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Result<T, Overrun> {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new().name("dvcq-validate-check".into()).spawn(move || {
        // The receiver may be gone (the check ran over): the result is dropped then.
        let _ = tx.send(f());
    });
    if spawned.is_err() {
        return Err(Overrun::Panicked);
    }
    match rx.recv_timeout(limit) {
        Ok(v) => Ok(v),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(Overrun::TimedOut(limit)),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(Overrun::Panicked),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_run_within_the_limit_returns_its_result() {
        assert_eq!(bounded(Duration::from_secs(10), || 7), Ok(7));
    }

    #[test]
    fn a_run_past_the_limit_is_given_up_on_at_the_limit() {
        let start = Instant::now();
        let r = bounded(Duration::from_millis(200), || std::thread::sleep(Duration::from_secs(30)));
        assert_eq!(r, Err(Overrun::TimedOut(Duration::from_millis(200))));
        assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
        assert!(Overrun::TimedOut(Duration::from_secs(90)).to_string().contains("within 90s"));
    }

    #[test]
    fn a_panicking_run_is_reported_not_propagated() {
        let r: Result<(), _> = bounded(Duration::from_secs(10), || panic!("a check's own panic"));
        assert_eq!(r, Err(Overrun::Panicked));
    }
}
