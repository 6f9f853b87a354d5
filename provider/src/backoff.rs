//! Bounded backoff for a model thread, or a test's consumer, waiting on the other side of a
//! ring (feature `model` or `testing`).
//!
//! A waiter that only spins, or spins and calls `yield_now`, stays runnable: on a machine
//! with more runnable threads than cores the side it waits for then runs only in the
//! scheduler's leftovers, and a run that takes a second on an idle machine takes minutes.
//! [`Backoff`] spins briefly (the other side is usually a few hundred cycles away), then
//! parks, for a time doubling up to [`Backoff::MAX_PARK`]. A long wait so costs the machine
//! almost nothing. The other side wakes a parked waiter as soon as it has made progress for
//! it (`Thread::unpark`, which costs an atomic swap when the waiter is not parked); without
//! that the park is a sleep, bounded all the same.
//!
//! It never yields: `yield_now` leaves the waiter runnable, and on a loaded machine hands
//! the core to a busy thread for a whole time slice each call. Measured with two busy
//! loops on two cores, a producer and consumer on an 8-slot ring took 299 s for 10^6 CQEs
//! with four yields before parking, and 11 s parking at once.

use std::time::Duration;

/// What the next [`Backoff::wait`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pause {
    /// Spin this many times (`spin_loop` hints).
    Spin(u32),
    /// Park for at most this long (until unparked).
    Park(Duration),
}

/// Spinning, then parking briefly, for a thread that waits on another. Call
/// [`wait`](Self::wait) each time the awaited state is not there yet, and
/// [`reset`](Self::reset) when it was; the other thread calls `unpark` on the waiter's
/// [`Thread`](std::thread::Thread) when it has made progress.
#[derive(Debug, Clone)]
pub struct Backoff {
    step: u32,
    /// [`Backoff::MAX_PARK`]; longer in a test that must tell an unpark from a timeout.
    max_park: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    /// Rounds of spinning: round `k` spins `2^k` times.
    const SPIN_ROUNDS: u32 = 7;
    /// The first park's limit.
    pub const MIN_PARK: Duration = Duration::from_micros(20);
    /// The longest park: how late, at most, a waiter nobody unparks sees what it waits for.
    pub const MAX_PARK: Duration = Duration::from_millis(1);

    /// A backoff that starts by spinning.
    pub const fn new() -> Self {
        Self { step: 0, max_park: Self::MAX_PARK }
    }

    /// What the next [`wait`](Self::wait) does.
    pub fn next_pause(&self) -> Pause {
        let step = self.step;
        if step < Self::SPIN_ROUNDS {
            return Pause::Spin(1 << step);
        }
        let doublings = step - Self::SPIN_ROUNDS;
        let park = Self::MIN_PARK.saturating_mul(1u32 << doublings.min(20));
        Pause::Park(park.min(self.max_park))
    }

    /// Waits once: spins or parks, each call as long as or longer than the last,
    /// up to a park of [`MAX_PARK`](Self::MAX_PARK). A park ends early when another thread
    /// unparks this one (or spuriously): the caller checks its state again either way.
    pub fn wait(&mut self) {
        match self.next_pause() {
            Pause::Spin(n) => (0..n).for_each(|_| std::hint::spin_loop()),
            Pause::Park(d) => std::thread::park_timeout(d),
        }
        // Stops counting once the park is at its longest, so the step never overflows.
        if !matches!(self.next_pause(), Pause::Park(d) if d == self.max_park) {
            self.step += 1;
        }
    }

    /// The awaited state was there: the next wait spins again.
    pub fn reset(&mut self) {
        self.step = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pauses a fresh backoff goes through in its first `n` waits.
    fn pauses(n: usize) -> Vec<Pause> {
        let mut b = Backoff::new();
        (0..n)
            .map(|_| {
                let p = b.next_pause();
                b.wait();
                p
            })
            .collect()
    }

    /// Spins grow, then parks that double from the shortest and stop at the longest; a
    /// hundred waits never go past it, and a reset spins again.
    #[test]
    fn pauses_spin_then_park_up_to_the_bound() {
        let p = pauses(100);
        assert_eq!(p[..3], [Pause::Spin(1), Pause::Spin(2), Pause::Spin(4)]);
        let first_park = p.iter().position(|x| matches!(x, Pause::Park(_))).unwrap();
        assert!(p[..first_park].iter().all(|x| matches!(x, Pause::Spin(_))), "{p:?}");
        assert_eq!(p[first_park], Pause::Park(Backoff::MIN_PARK));
        let parks: Vec<Duration> = p[first_park..]
            .iter()
            .map(|x| match x {
                Pause::Park(d) => *d,
                other => panic!("{other:?} after the first park"),
            })
            .collect();
        assert!(parks.windows(2).all(|w| w[1] == (w[0] * 2).min(Backoff::MAX_PARK)), "{parks:?}");
        assert_eq!(*parks.last().unwrap(), Backoff::MAX_PARK);
        // The spinning before the first park is short: under 200 spins.
        let spins: u32 = p[..first_park].iter().map(|x| if let Pause::Spin(n) = x { *n } else { 0 }).sum();
        assert!(spins < 200, "{spins} spins before parking");

        let mut b = Backoff::new();
        (0..50).for_each(|_| b.wait());
        assert_eq!(b.next_pause(), Pause::Park(Backoff::MAX_PARK));
        b.reset();
        assert_eq!(b.next_pause(), Pause::Spin(1));
    }

    /// A long wait parks: once at the longest park, twenty waits nobody ends take at least
    /// twenty such parks, where a spinning waiter would return at once.
    #[test]
    fn a_long_wait_parks() {
        let mut b = Backoff::new();
        (0..40).for_each(|_| b.wait());
        let t = std::time::Instant::now();
        (0..20).for_each(|_| b.wait());
        assert!(t.elapsed() >= Backoff::MAX_PARK * 20, "{:?}", t.elapsed());
    }

    /// A parked waiter wakes when the thread it waits on unparks it, long before its park
    /// would end: the other side's progress reaches it without a timer's delay.
    #[test]
    fn an_unpark_ends_the_park() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let ready = Arc::new(AtomicBool::new(false));
        let seen = ready.clone();
        let waiter = std::thread::spawn(move || {
            // Parks of ten seconds: only the unpark can end the wait in time.
            let mut b = Backoff { step: 0, max_park: Duration::from_secs(10) };
            while b.next_pause() != Pause::Park(Duration::from_secs(10)) {
                b.step += 1;
            }
            let mut parks = 0;
            while !seen.load(Ordering::Acquire) {
                b.wait();
                parks += 1;
            }
            parks
        });
        std::thread::sleep(Duration::from_millis(20));
        let t = std::time::Instant::now();
        ready.store(true, Ordering::Release);
        waiter.thread().unpark();
        let parks = waiter.join().unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(parks >= 1, "{parks}");
    }
}
