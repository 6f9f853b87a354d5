//! Event file descriptors: completion channels and each context's async fd. Each is a real
//! `eventfd` in semaphore mode, so `poll`/`epoll`, `O_NONBLOCK` and blocking reads behave as
//! on a kernel fd; the interposed `read` takes one count from it and returns the record the
//! emulator queued with it (`ib_uverbs_comp_event_desc` or `ib_uverbs_async_event_desc`),
//! and counts it against its object for the destroy commands' `events_reported`.

use crate::fd_table::{self, FdKind};
use crate::real;
use std::collections::VecDeque;

/// The object an event is about, for the destroy accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    /// A CQ: context command fd and CQ handle.
    Cq(i32, u32),
    /// A QP.
    Qp(i32, u32),
    /// An SRQ.
    Srq(i32, u32),
    /// A receive WQ.
    Wq(i32, u32),
    /// A port (async events only).
    Port(i32, u8),
}

/// One queued event.
#[derive(Clone, Copy, Debug)]
struct Record {
    bytes: [u8; 16],
    owner: Owner,
    /// The owner was destroyed before the application read it: skipped when read.
    dead: bool,
}

/// An event fd and what is queued on it.
#[derive(Debug)]
pub struct EventFd {
    fd: i32,
    kind: FdKind,
    queue: VecDeque<Record>,
}

impl EventFd {
    /// A new eventfd of `kind` ([`FdKind::CompChannel`] or [`FdKind::Async`]), marked as the
    /// emulator's.
    ///
    /// # Errors
    ///
    /// The errno of a failed `eventfd`, or `EMFILE` for a descriptor beyond the fd table.
    pub fn new(kind: FdKind) -> Result<EventFd, i32> {
        // SAFETY: eventfd takes no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
        if fd < 0 {
            return Err(real::errno());
        }
        if !fd_table::set(fd, kind) {
            // SAFETY: fd is the descriptor just created, not shared with anyone.
            unsafe { real::close(fd) };
            return Err(libc::EMFILE);
        }
        Ok(EventFd { fd, kind, queue: VecDeque::new() })
    }

    /// The descriptor.
    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// The size of one record a read returns.
    pub fn record_len(&self) -> usize {
        if self.kind == FdKind::Async {
            16
        } else {
            8
        }
    }

    /// Queues one event about `owner` and makes the fd readable.
    pub fn push(&mut self, bytes: &[u8], owner: Owner) {
        let mut rec = Record { bytes: [0; 16], owner, dead: false };
        let n = bytes.len().min(16);
        rec.bytes[..n].copy_from_slice(&bytes[..n]);
        self.queue.push_back(rec);
        let one = 1u64;
        // SAFETY: `one` is 8 readable bytes; fd is this eventfd, open while self lives.
        unsafe { real::write(self.fd, (&one as *const u64).cast(), 8) };
    }

    /// Takes the record for one count already read from the eventfd: its bytes and owner,
    /// or `None` for a record whose owner is gone (the caller reads the next count).
    pub fn pop(&mut self) -> Option<Option<([u8; 16], Owner)>> {
        let rec = self.queue.pop_front()?;
        Some((!rec.dead).then_some((rec.bytes, rec.owner)))
    }

    /// Drops the unread events about `owner` (its destroy reported only those read).
    pub fn forget(&mut self, owner: Owner) {
        for r in self.queue.iter_mut().filter(|r| r.owner == owner) {
            r.dead = true;
        }
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        fd_table::clear(self.fd);
    }
}
