//! The emulated kernel's state for the whole process: one [`Context`] per opened command
//! fd, the event fds, and the device-wide numbers. One lock guards it; only commands, opens,
//! closes, maps and event reads take it, never a descriptor that is not the emulator's.

use crate::commands::{Errno, Numbers};
use crate::events::EventFd;
use crate::fd_table::{self, FdKind};
use crate::objects::{Context, Device, Mapping};
use crate::{mlx5, mlx5_abi, real};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The emulator's state.
#[derive(Debug, Default)]
pub struct Emulator {
    pub(crate) contexts: HashMap<i32, Context>,
    pub(crate) events: HashMap<i32, EventFd>,
    pub(crate) numbers: Numbers,
    /// Work whose peer QP lives in another process.
    pub(crate) remote: crate::engine::remote::Remote,
}

static EMULATOR: Mutex<Option<Emulator>> = Mutex::new(None);

/// Pages mapped from command fds and not yet unmapped: `munmap` takes the lock only when
/// some exist.
static LIVE_MAPPINGS: AtomicUsize = AtomicUsize::new(0);

/// Runs `f` on the emulator, under its lock.
pub fn with<R>(f: impl FnOnce(&mut Emulator) -> R) -> R {
    let mut guard: MutexGuard<'_, Option<Emulator>> = EMULATOR.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(Emulator::default))
}

impl Emulator {
    /// A command fd of `device` was opened: a context without GET_CONTEXT yet.
    pub fn opened(&mut self, fd: i32, device: Device) {
        let mut ctx = Context::default();
        ctx.device = device;
        self.contexts.insert(fd, ctx);
    }

    /// An emulator fd is being closed: a command fd takes its context and every object on it
    /// along (as the kernel does when the last reference goes); an event fd is forgotten.
    /// Pages mapped from a command fd stay mapped, as a kernel's mappings outlive the fd:
    /// only `munmap` removes them.
    pub fn closing(&mut self, fd: i32) {
        if let Some(ctx) = self.contexts.remove(&fd) {
            LIVE_MAPPINGS.fetch_sub(ctx.mappings.len(), Ordering::Relaxed);
        }
        self.events.remove(&fd);
        fd_table::clear(fd);
    }

    /// `mmap(len, off)` on command fd `fd`: a UAR or clock page of this device.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a page the device has not got, or before GET_CONTEXT.
    pub fn mmap(&mut self, fd: i32, len: usize, off: i64) -> Result<usize, Errno> {
        let ctx = self.contexts.get_mut(&fd).filter(|c| c.ready).ok_or(libc::EINVAL)?;
        let off = u64::try_from(off).map_err(|_| libc::EINVAL)?;
        if ctx.device == Device::Irdma {
            let addr = crate::irdma::mmap(ctx, len, off)?;
            ctx.mappings.push(Mapping { cmd: 0, idx: 0, addr, len });
            LIVE_MAPPINGS.fetch_add(1, Ordering::Relaxed);
            return Ok(addr);
        }
        if off % mlx5::PAGE as u64 != 0 {
            return Err(libc::EINVAL);
        }
        let (cmd, idx) = mlx5_abi::decode_mmap_page(off / mlx5::PAGE as u64);
        mlx5::check_mmap(cmd, idx, len, ctx.tot_bfregs)?;
        let addr = mlx5::map_page(len)?;
        // SAFETY: `addr` is the fresh mapping of `len` writable bytes just made.
        unsafe { mlx5::fill_page(cmd, addr, len) };
        ctx.mappings.push(Mapping { cmd, idx, addr, len });
        LIVE_MAPPINGS.fetch_add(1, Ordering::Relaxed);
        Ok(addr)
    }

    /// The range `[addr, addr + len)` is being unmapped: forget the pages it covers.
    pub fn unmapping(&mut self, addr: usize, len: usize) {
        let end = addr.saturating_add(len);
        for ctx in self.contexts.values_mut() {
            let before = ctx.mappings.len();
            ctx.mappings.retain(|m| m.addr + m.len <= addr || m.addr >= end);
            LIVE_MAPPINGS.fetch_sub(before - ctx.mappings.len(), Ordering::Relaxed);
            // The device stops reading an irdma doorbell page that goes.
            if ctx.irdma.db_page.is_some_and(|p| p >= addr && p < end) {
                ctx.irdma.db_page = None;
            }
        }
    }
}

/// Whether any page mapped from a command fd is live.
pub fn has_mappings() -> bool {
    LIVE_MAPPINGS.load(Ordering::Relaxed) != 0
}

/// Reads one event record from event fd `fd` into `buf`: waits for (or, non-blocking,
/// finds) a count on the eventfd, then takes the record queued with it.
///
/// # Errors
///
/// `EINVAL` for a buffer smaller than one record; the eventfd read's errno (`EAGAIN` on a
/// non-blocking fd with nothing queued).
pub fn read_event(fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
    let need = with(|e| e.events.get(&fd).map(EventFd::record_len)).ok_or(libc::EBADF)?;
    if buf.len() < need {
        return Err(libc::EINVAL);
    }
    loop {
        let mut count = 0u64;
        // SAFETY: `count` is 8 writable bytes; fd is an open eventfd of the emulator's (the fd table says so), so this blocks or not as the application set it.
        let r = unsafe { real::read(fd, (&mut count as *mut u64).cast(), 8) };
        if r < 0 {
            return Err(real::errno());
        }
        let rec = with(|e| {
            let ev = e.events.get_mut(&fd)?;
            let (bytes, owner) = ev.pop()??;
            e.count_read(owner, fd);
            Some(bytes)
        });
        if let Some(bytes) = rec {
            buf[..need].copy_from_slice(&bytes[..need]);
            return Ok(need);
        }
        // A record whose object was destroyed unread: take the next.
    }
}

impl Emulator {
    /// Counts an event the application read against its object (the destroy commands
    /// report these).
    fn count_read(&mut self, owner: crate::events::Owner, from_fd: i32) {
        use crate::events::Owner;
        let is_async = self.events.get(&from_fd).is_some_and(|e| e.record_len() == 16);
        match owner {
            Owner::Cq(ctx, h) => {
                if let Some(cq) = self.contexts.get_mut(&ctx).and_then(|c| c.cqs.get_mut(&h)) {
                    if is_async {
                        cq.async_events_read += 1;
                    } else {
                        cq.comp_events_read += 1;
                    }
                }
            }
            Owner::Qp(ctx, h) => {
                if let Some(qp) = self.contexts.get_mut(&ctx).and_then(|c| c.qps.get_mut(&h)) {
                    qp.events_read += 1;
                }
            }
            Owner::Srq(ctx, h) => {
                if let Some(srq) = self.contexts.get_mut(&ctx).and_then(|c| c.srqs.get_mut(&h)) {
                    srq.events_read += 1;
                }
            }
            Owner::Wq(ctx, h) => {
                if let Some(wq) = self.contexts.get_mut(&ctx).and_then(|c| c.wqs.get_mut(&h)) {
                    wq.events_read += 1;
                }
            }
            Owner::Port(..) => {}
        }
    }
}

/// Whether `kind` is one the interposed `read` answers.
pub fn is_event_fd(kind: FdKind) -> bool {
    matches!(kind, FdKind::CompChannel | FdKind::Async)
}
