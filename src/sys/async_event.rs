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
use crate::error::VerbsError;
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
            let mut book = self.async_book();
            if book.device_fatal {
                cell.set(CqErrorReason::DeviceFatal);
            }
            book.cq_errors.insert(cq as usize, (0, Arc::clone(cell)));
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
                let cq = unsafe { ev.element.cq } as usize;
                if let Some((n, cell)) = book.cq_errors.get_mut(&cq) {
                    *n += 1;
                    cell.set(CqErrorReason::Overrun);
                    book.total_cq_errors += 1;
                }
            } else if ev.event_type == ffi::IBV_EVENT_DEVICE_FATAL {
                book.device_fatal = true;
                for (_, cell) in book.cq_errors.values() {
                    cell.set(CqErrorReason::DeviceFatal);
                }
            }
            // SAFETY: the event was returned by ibv_get_async_event and is acknowledged once, here.
            unsafe { ffi::ibv_ack_async_event(&mut ev) };
        }
    }
}
