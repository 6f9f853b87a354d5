//! The event fd a device model signals its completion events on (`eventfd(2)`), and the
//! readiness wait that event-mode code sleeps in, on a model's eventfd and on a real
//! completion channel's fd alike (`poll(2)`).
//!
//! The fd is non-blocking and close-on-exec, so it can sit in an epoll set (mio, tokio's
//! `AsyncFd`) beside a verbs completion channel's fd and be read without blocking.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// A non-blocking `eventfd` counter: [`EventFd::signal`] adds one and makes the fd readable,
/// [`EventFd::drain`] reads the count back to zero.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// `eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)`.
    ///
    /// # Errors
    ///
    /// The OS error (`EMFILE`, `ENOMEM`, ...).
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd takes two integers and touches no memory of ours.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: eventfd returned a new fd that nothing else owns.
        Ok(EventFd { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Adds one to the counter (`write(fd, &1u64, 8)`), waking every sleeper on the fd.
    ///
    /// A counter already at its maximum (`EAGAIN`, 2^64 - 2 signals nobody read) is still
    /// readable, so that case is success: the wakeup is not lost.
    ///
    /// # Errors
    ///
    /// Any other OS error.
    pub fn signal(&self) -> io::Result<()> {
        let one: u64 = 1;
        // SAFETY: the fd is open (owned by self) and the source is 8 readable bytes.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if n == 8 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Ok(());
        }
        Err(e)
    }

    /// Reads the counter and resets it to zero; 0 when nothing was signalled (`EAGAIN`).
    ///
    /// # Errors
    ///
    /// Any OS error other than `EAGAIN`/`EINTR`.
    pub fn drain(&self) -> io::Result<u64> {
        loop {
            let mut v: u64 = 0;
            // SAFETY: the fd is open and the destination is 8 writable bytes.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
            if n == 8 {
                return Ok(v);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => return Ok(0),
                io::ErrorKind::Interrupted => continue,
                _ => return Err(e),
            }
        }
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Sleeps until `fd` is readable or `timeout` passes (`None`: no limit), with `poll(2)`.
/// Returns whether it became readable. An interrupted sleep (`EINTR`) returns `false`, as a
/// timeout does: callers re-check their state and sleep again.
///
/// A timeout is rounded up to whole milliseconds (poll's unit), so a sleep is never cut
/// shorter than asked.
///
/// # Errors
///
/// The OS error of `poll` other than `EINTR`, or the fd reporting `POLLERR`/`POLLNVAL`.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    wait_any_readable([fd], timeout)
}

/// [`wait_readable`] over several fds: sleeps until one of them is readable or `timeout`
/// passes; true when one is.
///
/// # Errors
///
/// As [`wait_readable`], for any of the fds.
pub fn wait_any_readable<const N: usize>(fds: [BorrowedFd<'_>; N], timeout: Option<Duration>) -> io::Result<bool> {
    let ms: libc::c_int = match timeout {
        None => -1,
        Some(t) => {
            let ms = t.as_nanos().div_ceil(1_000_000);
            libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
        }
    };
    let mut pfds = fds.map(|fd| libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
    // SAFETY: N valid pollfds on our stack, and nfds says N; the fds are borrowed, so they stay open for the call.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), N as libc::nfds_t, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    if let Some(p) = pfds.iter().find(|p| p.revents & (libc::POLLERR | libc::POLLNVAL) != 0) {
        return Err(io::Error::other(format!("fd {} reports poll revents {:#x}", p.fd, p.revents)));
    }
    Ok(rc > 0 && pfds.iter().any(|p| p.revents & libc::POLLIN != 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn signals_count_and_drain_resets() {
        let e = EventFd::new().unwrap();
        assert_eq!(e.drain().unwrap(), 0, "a fresh eventfd is empty and reading it does not block");
        e.signal().unwrap();
        e.signal().unwrap();
        assert_eq!(e.drain().unwrap(), 2);
        assert_eq!(e.drain().unwrap(), 0, "a drain resets the count");
    }

    #[test]
    #[cfg_attr(miri, ignore = "poll(2) is a foreign call Miri cannot run")]
    fn readable_exactly_while_signalled() {
        let e = EventFd::new().unwrap();
        assert!(!wait_readable(e.as_fd(), Some(Duration::ZERO)).unwrap(), "fresh: not readable");
        e.signal().unwrap();
        assert!(wait_readable(e.as_fd(), Some(Duration::ZERO)).unwrap());
        assert_eq!(e.drain().unwrap(), 1);
        assert!(!wait_readable(e.as_fd(), Some(Duration::ZERO)).unwrap(), "drained: not readable");
    }

    #[test]
    #[cfg_attr(miri, ignore = "poll(2) is a foreign call Miri cannot run")]
    fn wait_times_out_and_wakes_on_a_signal_from_another_thread() {
        let e = std::sync::Arc::new(EventFd::new().unwrap());
        let t = Instant::now();
        assert!(!wait_readable(e.as_fd(), Some(Duration::from_millis(20))).unwrap());
        assert!(t.elapsed() >= Duration::from_millis(20), "a timeout is never cut short");
        let e2 = e.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            e2.signal().unwrap();
        });
        assert!(wait_readable(e.as_fd(), Some(Duration::from_secs(10))).unwrap());
        h.join().unwrap();
        assert_eq!(e.drain().unwrap(), 1);
    }
}
