//! The event fd a device model signals its completion events on (`eventfd(2)`), and the
//! readiness wait that event-mode code sleeps in, on a model's eventfd and on a real
//! completion channel's fd alike (`poll(2)`).
//!
//! The fd is non-blocking and close-on-exec, so it can sit in an epoll set (mio, tokio's
//! `AsyncFd`) beside a verbs completion channel's fd and be read without blocking.

use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
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
        let fd = eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?;
        Ok(EventFd { fd })
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
        match rustix::io::write(&self.fd, &1u64.to_ne_bytes()) {
            Ok(8) | Err(Errno::AGAIN) => Ok(()),
            Ok(n) => Err(io::Error::other(format!("eventfd write took {n} of 8 bytes"))),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads the counter and resets it to zero; 0 when nothing was signalled (`EAGAIN`).
    ///
    /// # Errors
    ///
    /// Any OS error other than `EAGAIN`/`EINTR`.
    pub fn drain(&self) -> io::Result<u64> {
        let mut v = [0u8; 8];
        loop {
            return match rustix::io::read(&self.fd, &mut v) {
                Ok(8) => Ok(u64::from_ne_bytes(v)),
                Ok(n) => Err(io::Error::other(format!("eventfd read gave {n} of 8 bytes"))),
                Err(Errno::AGAIN) => Ok(0),
                Err(Errno::INTR) => continue,
                Err(e) => Err(e.into()),
            };
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
    // A timeout beyond what a timespec holds (some 292 billion years) is no limit.
    let ts = timeout.and_then(|t| Timespec::try_from(t).ok());
    let mut pfds = fds.map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN));
    let n = match poll(&mut pfds, ts.as_ref()) {
        Ok(n) => n,
        Err(Errno::INTR) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    if let Some((fd, p)) = fds.iter().zip(&pfds).find(|(_, p)| p.revents().intersects(PollFlags::ERR | PollFlags::NVAL))
    {
        return Err(io::Error::other(format!("fd {} reports poll revents {:?}", fd.as_raw_fd(), p.revents())));
    }
    Ok(n > 0 && pfds.iter().any(|p| p.revents().contains(PollFlags::IN)))
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
