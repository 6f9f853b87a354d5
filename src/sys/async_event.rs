//! The device's asynchronous events (`ibv_get_async_event`) on the contexts dvcq opened.
//!
//! rdma-core reports a CQ that overran (the device found it full) as `IBV_EVENT_CQ_ERR` on
//! the context's async fd, not on the CQ's completion channel. dvcq reads that fd,
//! non-blocking, whenever a CQ's statistics are asked for or a waiter looks for events, and
//! counts each CQ's error events in the context's book, so that [`crate::Cq::stats`] says
//! how many overruns a CQ saw and [`crate::Cq::wait`] returns an error instead of sleeping
//! on a CQ the device no longer writes. Every event read is acknowledged at once
//! (`ibv_ack_async_event`), under the book's lock, which a CQ's destroy also takes to leave
//! the book first: rdma-core's destroy waits for the acknowledgement of every event it
//! reported for the CQ, and the CQ's address is never looked up after it is gone.
//!
//! Each CQ's error also goes to the cell its poller reads when a poll finds the ring empty
//! ([`dvcq_provider::CqErrorCell`]): an overrun, or a fatal error of the device
//! (`IBV_EVENT_DEVICE_FATAL`), which puts every CQ of the context in error.
//!
//! A context the application opened (`Cq::attach`) is left alone: its async events are the
//! application's to read.

use super::device::Context;
use super::ffi;
use crate::sys::error::VerbsError;
use dvcq_provider::{CqErrorCell, CqErrorReason};
use std::collections::HashMap;
use std::sync::{Arc, MutexGuard};

/// The CQs of a context dvcq opened, by `ibv_cq` address, with the error events read for
/// each and the cell their pollers read the error from; how many error events were read
/// in all (a reader that saw this total before has nothing new to look for); whether the
/// device reported a fatal error (`IBV_EVENT_DEVICE_FATAL`), which puts every CQ in error.
#[derive(Debug, Default)]
pub(crate) struct AsyncBook {
    cq_errors: HashMap<usize, (u64, Arc<CqErrorCell>)>,
    total_cq_errors: u64,
    device_fatal: bool,
}

impl AsyncBook {
    /// Books CQ `cq` (its address), whose error goes to `cell`.
    fn book(&mut self, cq: usize, cell: &Arc<CqErrorCell>) {
        if self.device_fatal {
            cell.set(CqErrorReason::DeviceFatal);
        }
        self.cq_errors.insert(cq, (0, Arc::clone(cell)));
    }

    /// An `IBV_EVENT_CQ_ERR` for CQ `cq`: counted, and the CQ is in error (an overrun).
    fn cq_error(&mut self, cq: usize) {
        if let Some((n, cell)) = self.cq_errors.get_mut(&cq) {
            *n += 1;
            cell.set(CqErrorReason::Overrun);
            self.total_cq_errors += 1;
        }
    }

    /// An `IBV_EVENT_DEVICE_FATAL`: every CQ of the context is in error, and so is any
    /// made after.
    fn device_fatal(&mut self) {
        self.device_fatal = true;
        for (_, cell) in self.cq_errors.values() {
            cell.set(CqErrorReason::DeviceFatal);
        }
    }
}

impl Context {
    fn async_book(&self) -> MutexGuard<'_, AsyncBook> {
        self.async_book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `fcntl(async_fd, F_SETFL, flags | O_NONBLOCK)`: `ibv_get_async_event` then returns
    /// `EAGAIN` instead of blocking.
    pub(super) fn set_async_nonblocking(&self) -> Result<(), VerbsError> {
        let fd = self.async_fd();
        // SAFETY: F_GETFL on the context's own fd reads its flags and touches no memory.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(VerbsError::last("fcntl(F_GETFL) on the async fd"));
        }
        // SAFETY: as above; F_SETFL changes only the fd's status flags.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(VerbsError::last("fcntl(F_SETFL) on the async fd"));
        }
        Ok(())
    }

    /// The context's async event fd (`ibv_context.async_fd`).
    pub(crate) fn async_fd(&self) -> i32 {
        // SAFETY: a live context; `async_fd` is set at open and never changes.
        unsafe { (*self.as_ptr()).async_fd }
    }

    /// Whether dvcq reads this context's async events (it opened the context).
    pub(crate) fn reads_async_events(&self) -> bool {
        self.is_owned()
    }

    /// Starts counting the error events of `cq`, made on this context, and setting `cell`
    /// when one comes (or the device fails).
    pub(super) fn book_cq(&self, cq: *mut ffi::ibv_cq, cell: &Arc<CqErrorCell>) {
        if self.reads_async_events() {
            self.async_book().book(cq as usize, cell);
        }
    }

    /// Stops counting for `cq`, about to be destroyed: reads what is queued first, so
    /// every event rdma-core reported for it is acknowledged before the destroy waits on
    /// that.
    pub(super) fn unbook_cq(&self, cq: *mut ffi::ibv_cq) {
        if !self.reads_async_events() {
            return;
        }
        let mut book = self.async_book();
        self.read_async_events(&mut book);
        book.cq_errors.remove(&(cq as usize));
    }

    /// Reads every queued async event (without blocking), counting the CQ errors of booked
    /// CQs, and returns the error events read so far for `cq`: `None` when dvcq does not
    /// read this context's events or `cq` is not booked.
    pub(crate) fn cq_errors(&self, cq: *mut ffi::ibv_cq) -> Option<u64> {
        if !self.reads_async_events() {
            return None;
        }
        let mut book = self.async_book();
        self.read_async_events(&mut book);
        book.cq_errors.get(&(cq as usize)).map(|e| e.0)
    }

    /// Reads every queued async event as [`Context::cq_errors`] does, and returns the CQ
    /// error events read on this context in all (0 where dvcq does not read them).
    pub(crate) fn cq_errors_total(&self) -> u64 {
        if !self.reads_async_events() {
            return 0;
        }
        let mut book = self.async_book();
        self.read_async_events(&mut book);
        book.total_cq_errors
    }

    /// The CQ error events counted for `cq` so far, reading nothing.
    pub(crate) fn counted_cq_errors(&self, cq: *mut ffi::ibv_cq) -> Option<u64> {
        self.async_book().cq_errors.get(&(cq as usize)).map(|e| e.0)
    }

    fn read_async_events(&self, book: &mut AsyncBook) {
        loop {
            let mut ev = ffi::ibv_async_event::default();
            // SAFETY: a live context whose async fd is non-blocking (set at open); `ev` is a writable event on our stack. The book's lock is held, so no booked CQ leaves the book (and is destroyed) while its event is looked at.
            if unsafe { ffi::ibv_get_async_event(self.as_ptr(), &mut ev) } != 0 {
                // EAGAIN: nothing queued. Another errno (the device is gone) ends the read
                // the same way: what was counted stays counted.
                return;
            }
            if ev.event_type == ffi::IBV_EVENT_CQ_ERR {
                // SAFETY: for IBV_EVENT_CQ_ERR the element is the CQ (verbs.h).
                book.cq_error(unsafe { ev.element.cq } as usize);
            } else if ev.event_type == ffi::IBV_EVENT_DEVICE_FATAL {
                book.device_fatal();
            }
            // SAFETY: the event was returned by ibv_get_async_event and is acknowledged once, here.
            unsafe { ffi::ibv_ack_async_event(&mut ev) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the context's async events do to its CQs' error cells, which the CQs' polls
    /// read: an overrun puts its own CQ in error, a fatal device every CQ, even one made
    /// after; an event for a CQ not booked changes nothing.
    #[test]
    fn error_events_reach_the_cells_the_polls_read() {
        let mut book = AsyncBook::default();
        let (a, b) = (Arc::new(CqErrorCell::new()), Arc::new(CqErrorCell::new()));
        book.book(0x1000, &a);
        book.book(0x2000, &b);
        book.cq_error(0x3000);
        assert_eq!((a.get(), b.get(), book.total_cq_errors), (None, None, 0));
        book.cq_error(0x1000);
        book.cq_error(0x1000);
        assert_eq!((a.get(), b.get(), book.total_cq_errors), (Some(CqErrorReason::Overrun), None, 2));
        assert_eq!(book.cq_errors[&0x1000].0, 2);
        book.device_fatal();
        assert_eq!((a.get(), b.get()), (Some(CqErrorReason::Overrun), Some(CqErrorReason::DeviceFatal)));
        let late = Arc::new(CqErrorCell::new());
        book.book(0x4000, &late);
        assert_eq!(late.get(), Some(CqErrorReason::DeviceFatal));
    }
}
