//! CPU time of the calling thread (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`): what a
//! benchmark charges a polling or sleeping consumer thread.

use rustix::time::{clock_gettime, ClockId};
use std::io;
use std::time::Duration;

/// The CPU time the calling thread has used so far, user and system together.
///
/// # Errors
///
/// None on Linux, whose `clock_gettime` cannot fail for this clock; the `Result` keeps
/// callers ready for a platform where it can.
pub fn thread_cpu_time() -> io::Result<Duration> {
    let ts = clock_gettime(ClockId::ThreadCPUTime);
    Duration::try_from(ts).map_err(|_| io::Error::other(format!("thread CPU time out of range: {ts:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    #[cfg_attr(miri, ignore = "clock_gettime is a foreign call Miri cannot run")]
    fn counts_spinning_and_not_sleeping() {
        // Spinning advances the clock (by as much as the scheduler lets this thread run: on
        // a loaded machine less than the wall time), never by more than the wall time.
        let t0 = thread_cpu_time().unwrap();
        let start = Instant::now();
        let mut spun = Duration::ZERO;
        while spun < Duration::from_millis(20) {
            assert!(start.elapsed() < Duration::from_secs(20), "20 s of spinning used {spun:?} of CPU");
            std::hint::spin_loop();
            spun = thread_cpu_time().unwrap() - t0;
        }
        assert!(spun <= start.elapsed() + Duration::from_millis(1), "{spun:?} of CPU in {:?}", start.elapsed());
        let t1 = thread_cpu_time().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread_cpu_time().unwrap() - t1;
        assert!(slept < Duration::from_millis(25), "a 50 ms sleep used {slept:?} of CPU");
    }
}
