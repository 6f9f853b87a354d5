//! A progress line for the subcommands that run for seconds: on standard error, rewritten in
//! place, and only when standard error is a terminal and the output is not `--json` (a pipe,
//! a log file and a JSON reader get nothing from it).

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a run goes before its progress line appears (a quick run shows none).
const FIRST_AFTER: Duration = Duration::from_secs(1);
/// How often the line is redrawn.
const EVERY: Duration = Duration::from_millis(250);

/// What the drawing thread and the run share.
#[derive(Debug, Default)]
struct State {
    /// The stage the run is in (`busy (1 of 3)`).
    stage: String,
    /// The run is over: clear the line and stop.
    done: bool,
    /// The line is on the terminal now.
    drawn: bool,
}

/// The state and the condition variable that wakes the drawing thread when it changes.
type Shared = Arc<(Mutex<State>, Condvar)>;

/// A progress line while it lives (dropping it clears the line); nothing at all when
/// standard error is not a terminal or the output is JSON.
#[derive(Debug)]
pub(crate) struct Progress {
    shared: Option<(Shared, JoinHandle<()>)>,
}

impl Progress {
    /// A progress line `dvcq <what>: <stage>, <seconds> s`, shown when standard error is a
    /// terminal and `json` is false.
    pub(crate) fn start(what: &str, json: bool) -> Progress {
        if json || !std::io::stderr().is_terminal() {
            return Progress { shared: None };
        }
        let shared: Shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let theirs = Arc::clone(&shared);
        let what = what.to_owned();
        let thread = std::thread::spawn(move || draw(&what, &theirs));
        Progress { shared: Some((shared, thread)) }
    }

    /// Runs `write`, which writes to standard output, with the progress line out of its
    /// way: cleared first, drawn again on the next tick (both streams may be one terminal).
    pub(crate) fn around<T>(&self, write: impl FnOnce() -> T) -> T {
        let Some((shared, _)) = &self.shared else { return write() };
        let Ok(mut s) = shared.0.lock() else { return write() };
        if s.drawn {
            clear();
            s.drawn = false;
        }
        write()
    }

    /// Says which stage the run is in.
    pub(crate) fn stage(&self, stage: impl Into<String>) {
        if let Some((shared, _)) = &self.shared {
            if let Ok(mut s) = shared.0.lock() {
                s.stage = stage.into();
            }
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some((shared, thread)) = self.shared.take() {
            if let Ok(mut s) = shared.0.lock() {
                s.done = true;
            }
            shared.1.notify_all();
            let _ = thread.join();
        }
    }
}

/// The drawing thread: redraws the line until the run is done, then clears it.
fn draw(what: &str, shared: &(Mutex<State>, Condvar)) {
    let start = Instant::now();
    let (lock, wake) = shared;
    let Ok(mut state) = lock.lock() else { return };
    let mut wait = FIRST_AFTER;
    loop {
        state = match wake.wait_timeout_while(state, wait, |s| !s.done) {
            Ok((s, _)) => s,
            Err(_) => return,
        };
        wait = EVERY;
        if state.done {
            if state.drawn {
                clear();
            }
            return;
        }
        let stage = if state.stage.is_empty() { String::new() } else { format!("{}, ", state.stage) };
        let line = format!("\r\x1b[Kdvcq {what}: {stage}{} s", start.elapsed().as_secs());
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes()).and_then(|()| err.flush());
        state.drawn = true;
    }
}

/// Clears the terminal line the cursor is on and returns to its start.
fn clear() {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(b"\r\x1b[K").and_then(|()| err.flush());
}
