//! Completion events through rdma-core: the channel's fd made non-blocking, events read
//! with `ibv_get_cq_event` and acknowledged with `ibv_ack_cq_events` in batches, every one
//! acknowledged before its CQ is destroyed, and CQ moderation with `ibv_modify_cq`.
//!
//! The channel keeps a book of the CQs made on it: which token (dvcq's CQ id) each has and
//! how many of its events are not acknowledged yet. Reading an event and forgetting a CQ at
//! destroy both take the book's lock, so an event read for a CQ is always counted where the
//! CQ's destroy finds it (`ibv_destroy_cq` waits until every event it reported was acked).

use super::cq::{CompChannel, VerbsCq};
use super::ffi;
use super::ops;
use crate::sys::error::VerbsError;
use std::collections::HashMap;
use std::sync::MutexGuard;

/// Events of one CQ acknowledged together (`ibv_ack_cq_events` takes a mutex in
/// libibverbs; one call per this many events keeps it off the event path).
const ACK_BATCH: u32 = 16;

/// One CQ's entry in a channel's book.
#[derive(Debug, Clone, Copy)]
struct Booked {
    token: u64,
    unacked: u32,
    /// Its error events (`sys::async_event`) already reported through the channel.
    errors_reported: u64,
}

/// The CQs made on a channel, by `ibv_cq` address.
#[derive(Debug, Default)]
pub(crate) struct EventBook {
    cqs: HashMap<usize, Booked>,
    /// The context's count of CQ error events when the channel last looked for its own.
    errors_seen: u64,
}

impl CompChannel {
    fn book(&self) -> MutexGuard<'_, EventBook> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `fcntl(fd, F_SETFL, flags | O_NONBLOCK)`: `ibv_get_cq_event` then returns `EAGAIN`
    /// instead of blocking, and the fd suits epoll.
    pub(crate) fn set_nonblocking(&self) -> Result<(), VerbsError> {
        let fd = self.fd();
        // SAFETY: F_GETFL on an fd the channel owns reads its flags and touches no memory.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(VerbsError::last("fcntl(F_GETFL)"));
        }
        // SAFETY: as above; F_SETFL changes only the fd's status flags.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(VerbsError::last("fcntl(F_SETFL)"));
        }
        Ok(())
    }

    /// Records that `cq`, made on this channel, has id `token`.
    pub(crate) fn register(&self, cq: &VerbsCq, token: u64) {
        let errors_reported = cq.overruns().unwrap_or(0);
        self.book().cqs.insert(cq.as_ptr() as usize, Booked { token, unacked: 0, errors_reported });
    }

    /// The token of a CQ made on this channel with a CQ error event (it overran) not
    /// reported through the channel yet, after reading the context's async events; each
    /// such event is reported once. Checked before the channel's completion events, so a
    /// waiter learns of the error first.
    pub(crate) fn take_cq_error(&self) -> Option<u64> {
        let mut book = self.book();
        let total = self._ctx.cq_errors_total();
        if total == book.errors_seen {
            return None;
        }
        for (&cq, b) in book.cqs.iter_mut() {
            let Some(n) = self._ctx.counted_cq_errors(cq as *mut ffi::ibv_cq) else { continue };
            if n > b.errors_reported {
                b.errors_reported += 1;
                return Some(b.token);
            }
        }
        book.errors_seen = total;
        None
    }

    /// The context's async event fd, where dvcq reads it: a waiter sleeps on it beside the
    /// channel's, so a CQ error wakes it.
    pub(crate) fn async_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        // SAFETY: the fd belongs to the context, which the channel holds an Arc of and which closes it only when the last handle goes, after every borrow of `self`.
        self._ctx.reads_async_events().then(|| unsafe { std::os::fd::BorrowedFd::borrow_raw(self._ctx.async_fd()) })
    }

    /// `ibv_get_cq_event` without blocking: the token of the CQ the next event is for, or
    /// `None` when no event is queued. The event is counted and acknowledged in batches.
    pub(crate) fn try_get_event(&self) -> Result<Option<u64>, VerbsError> {
        let mut book = self.book();
        let mut cq: *mut ffi::ibv_cq = core::ptr::null_mut();
        let mut cq_ctx: *mut core::ffi::c_void = core::ptr::null_mut();
        // SAFETY: a live channel whose fd is non-blocking; both out pointers are valid for writes. The book's lock is held, so no CQ of this channel is destroyed meanwhile.
        let rc = unsafe { ffi::ibv_get_cq_event(self.as_ptr(), &mut cq, &mut cq_ctx) };
        if rc != 0 {
            let e = VerbsError::last("ibv_get_cq_event");
            if e.errno == libc::EAGAIN || e.errno == libc::EINTR {
                return Ok(None);
            }
            return Err(e);
        }
        let Some(b) = book.cqs.get_mut(&(cq as usize)) else {
            // A CQ dvcq did not make on this channel (an application's own): acknowledge at
            // once, so its destroy does not wait on dvcq.
            // SAFETY: rdma-core just reported an event for this live CQ.
            unsafe { ffi::ibv_ack_cq_events(cq, 1) };
            return Ok(Some(u64::MAX));
        };
        b.unacked += 1;
        if b.unacked >= ACK_BATCH {
            // SAFETY: the CQ is live: it is in the book, and leaves it (under this lock) before it is destroyed.
            unsafe { ffi::ibv_ack_cq_events(cq, b.unacked) };
            b.unacked = 0;
        }
        Ok(Some(b.token))
    }

    /// Acknowledges every event of `cq` still unacknowledged and forgets it; its destroy
    /// follows.
    pub(crate) fn release(&self, cq: *mut ffi::ibv_cq) {
        let mut book = self.book();
        if let Some(b) = book.cqs.remove(&(cq as usize)) {
            if b.unacked > 0 {
                // SAFETY: the CQ is live (its destroy runs after this returns).
                unsafe { ffi::ibv_ack_cq_events(cq, b.unacked) };
            }
        }
    }

    /// Events read and not yet acknowledged, over every CQ (for the tests of ack
    /// accounting).
    pub(crate) fn unacked(&self) -> u64 {
        self.book().cqs.values().map(|b| u64::from(b.unacked)).sum()
    }
}

impl VerbsCq {
    /// `ibv_modify_cq(cq, {IBV_CQ_ATTR_MODERATE, {count, period_us}})`.
    pub(crate) fn moderate(&self, count: u16, period_us: u16) -> Result<(), VerbsError> {
        let mut attr = ffi::ibv_modify_cq_attr {
            attr_mask: ffi::IBV_CQ_ATTR_MODERATE,
            moderate: ffi::ibv_moderate_cq { cq_count: count, cq_period: period_us },
        };
        // SAFETY: a live CQ and an initialised attribute struct on our stack.
        let rc = unsafe { ops::modify_cq(self.as_ptr(), &mut attr) };
        if rc != 0 {
            return Err(VerbsError::code("ibv_modify_cq", rc));
        }
        Ok(())
    }
}

impl CompChannel {
    /// The channel's fd, borrowed for as long as the channel lives.
    pub(crate) fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the fd belongs to the channel, which closes it only in `ibv_destroy_comp_channel` (its drop), after every borrow of `self` ended.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd()) }
    }
}

impl CompChannel {
    /// Whether the channel was made on `ctx`.
    pub(crate) fn belongs_to(&self, ctx: &std::sync::Arc<super::device::Context>) -> bool {
        std::sync::Arc::ptr_eq(&self._ctx, ctx)
    }
}
