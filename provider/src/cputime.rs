//! CPU time of the calling thread (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`): what a
//! benchmark charges a polling or sleeping consumer thread.

use std::io;
use std::time::Duration;

/// The CPU time the calling thread has used so far, user and system together.
///
/// # Errors
///
/// The OS error of `clock_gettime` (none is expected on Linux).
pub fn thread_cpu_time() -> io::Result<Duration> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec on our stack; the clock id is a constant every Linux kernel since 2.6.12 knows. The call writes only `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
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
