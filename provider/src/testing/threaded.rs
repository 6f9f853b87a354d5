//! The consumer's side of a threaded producer/consumer test: how many CQEs to run, and a
//! watch on the producer thread that makes the consumer wait without holding a core, stop
//! as soon as the producer has failed, and give up after a time without progress.

use crate::backoff::Backoff;
use std::fmt::Display;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The CQE count of a threaded test: the environment variable `var` if set, else `default`.
///
/// # Panics
///
/// If `var` is set but is not a decimal number, or is below `floor`, the least count at
/// which the test still checks what it is for: a typo or a `0` must not turn the race into
/// a run that checks nothing and passes.
pub fn threaded_count(var: &str, default: u64, floor: u64) -> u64 {
    parse_count(var, std::env::var(var).ok().as_deref(), default, floor).unwrap_or_else(|e| panic!("{e}"))
}

/// [`threaded_count`] with the variable's value given: the count, or why `value` is refused.
pub fn parse_count(var: &str, value: Option<&str>, default: u64, floor: u64) -> Result<u64, String> {
    let Some(text) = value else {
        return Ok(default);
    };
    let n: u64 = text.trim().parse().map_err(|_| format!("{var}={text:?} is not a CQE count"))?;
    if n < floor {
        return Err(format!(
            "{var}={n} is below {floor}, the fewest CQEs with which the threaded tests check the race"
        ));
    }
    Ok(n)
}

/// A producer thread as its consumer sees it. The consumer calls [`idle`](Self::idle) after
/// each poll that found nothing and [`progress`](Self::progress) after each that found
/// something; `idle` backs off ([`Backoff`]) and says when to stop: the producer failed or
/// panicked, or finished while the consumer still waits for more, or nothing came for the
/// idle limit.
#[derive(Debug)]
pub struct ProducerWatch<M, E> {
    producer: Option<JoinHandle<Result<M, E>>>,
    /// The producer's model, once it finished well: everything it wrote is visible then.
    finished: Option<M>,
    backoff: Backoff,
    idle_limit: Duration,
    last_progress: Instant,
    progressed: bool,
}

impl<M, E: Display> ProducerWatch<M, E> {
    /// Watches `producer`; the consumer gives up after `idle_limit` without a completion.
    pub fn new(producer: JoinHandle<Result<M, E>>, idle_limit: Duration) -> Self {
        Self {
            producer: Some(producer),
            finished: None,
            backoff: Backoff::new(),
            idle_limit,
            last_progress: Instant::now(),
            progressed: false,
        }
    }

    /// A poll found completions, so freed slots: the next wait spins again, the idle time
    /// restarts, and the producer, if it is parked waiting for room, is woken (an atomic
    /// swap when it is not parked).
    pub fn progress(&mut self) {
        self.progressed = true;
        self.backoff.reset();
        if let Some(p) = &self.producer {
            p.thread().unpark();
        }
    }

    /// A poll found nothing, `consumed` completions in: waits a little and returns `Ok` to
    /// poll again.
    ///
    /// # Errors
    ///
    /// Why the consumer must stop: the producer failed (its error) or panicked; it
    /// finished, and a poll since found the ring empty short of the count; or no completion
    /// came for the idle limit.
    pub fn idle(&mut self, consumed: u64) -> Result<(), String> {
        let now = Instant::now();
        if std::mem::take(&mut self.progressed) {
            self.last_progress = now;
        }
        if self.finished.is_some() {
            return Err(format!("the producer finished, but the ring ran dry after {consumed} completions"));
        }
        if self.producer.as_ref().is_some_and(JoinHandle::is_finished) {
            // Joining orders everything the producer wrote before this consumer's next poll.
            self.finished = Some(self.join()?);
            return Ok(());
        }
        if now.duration_since(self.last_progress) > self.idle_limit {
            return Err(format!(
                "no completion for {:?} after {consumed} completions, the producer still running",
                self.idle_limit
            ));
        }
        self.backoff.wait();
        Ok(())
    }

    /// The producer's model once the consumer has all it expects (waits for the thread).
    ///
    /// # Errors
    ///
    /// The producer failed or panicked.
    pub fn finish(mut self) -> Result<M, String> {
        match self.finished.take() {
            Some(m) => Ok(m),
            None => self.join(),
        }
    }

    fn join(&mut self) -> Result<M, String> {
        let handle = self.producer.take().ok_or("the producer was joined already")?;
        match handle.join() {
            Ok(Ok(m)) => Ok(m),
            Ok(Err(e)) => Err(format!("the producer failed: {e}")),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(format!("the producer panicked: {what}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set variable is taken as it is, unset gives the default, and a value that is not
    /// a number or is below the floor is refused, naming the variable.
    #[test]
    fn counts_below_the_floor_or_not_numbers_are_refused() {
        assert_eq!(parse_count("N", None, 1000, 10), Ok(1000));
        assert_eq!(parse_count("N", Some("25"), 1000, 10), Ok(25));
        assert_eq!(parse_count("N", Some("10"), 1000, 10), Ok(10));
        let e = parse_count("N", Some("0"), 1000, 10).unwrap_err();
        assert_eq!(e, "N=0 is below 10, the fewest CQEs with which the threaded tests check the race");
        assert_eq!(parse_count("N", Some("1e6"), 1000, 10).unwrap_err(), "N=\"1e6\" is not a CQE count");
        assert!(parse_count("N", Some(""), 1000, 10).is_err());
    }

    /// A producer that gives up stops its consumer at once, with the producer's error,
    /// not after the consumer's own idle limit.
    #[test]
    fn the_consumer_stops_as_soon_as_the_producer_fails() {
        let producer = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            Err::<(), _>("stalled at 7")
        });
        let mut watch = ProducerWatch::new(producer, Duration::from_secs(60));
        let t = Instant::now();
        let e = loop {
            if let Err(e) = watch.idle(3) {
                break e;
            }
        };
        assert_eq!(e, "the producer failed: stalled at 7");
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }

    /// A producer that panics stops its consumer with the panic's message.
    #[test]
    fn a_panicking_producer_stops_the_consumer() {
        let producer = std::thread::spawn(|| -> Result<(), String> { panic!("model bug") });
        let mut watch = ProducerWatch::new(producer, Duration::from_secs(60));
        let e = loop {
            if let Err(e) = watch.idle(0) {
                break e;
            }
        };
        assert_eq!(e, "the producer panicked: model bug");
    }

    /// A producer that finished well gets one more poll from its consumer (what it wrote
    /// last is visible after the join); a dry ring after that is an error, and `finish`
    /// hands back the producer's value.
    #[test]
    fn a_finished_producer_gets_one_more_poll() {
        let producer = std::thread::spawn(|| Ok::<u32, String>(5));
        let mut watch = ProducerWatch::new(producer, Duration::from_secs(60));
        while watch.finished.is_none() {
            watch.idle(0).unwrap();
        }
        assert_eq!(watch.idle(4).unwrap_err(), "the producer finished, but the ring ran dry after 4 completions");
        assert_eq!(watch.finish(), Ok(5));

        let producer = std::thread::spawn(|| Ok::<u32, String>(6));
        let watch = ProducerWatch::new(producer, Duration::from_secs(60));
        assert_eq!(watch.finish(), Ok(6));
    }

    /// With the producer alive but silent, the consumer gives up after its idle limit, a
    /// time; progress restarts the clock.
    #[test]
    fn a_silent_producer_stops_the_consumer_after_the_idle_limit() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let producer = std::thread::spawn(move || rx.recv().map_err(|e| e.to_string()));
        let limit = Duration::from_millis(200);
        let mut watch = ProducerWatch::new(producer, limit);
        let t = Instant::now();
        while t.elapsed() < limit / 2 {
            watch.idle(0).unwrap();
        }
        watch.progress();
        let restarted = Instant::now();
        let e = loop {
            if let Err(e) = watch.idle(9) {
                break e;
            }
        };
        assert!(restarted.elapsed() >= limit, "{:?}", restarted.elapsed());
        assert!(restarted.elapsed() < Duration::from_secs(10), "{:?}", restarted.elapsed());
        assert_eq!(e, "no completion for 200ms after 9 completions, the producer still running");
        tx.send(()).unwrap();
    }
}
