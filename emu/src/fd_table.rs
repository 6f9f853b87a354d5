//! Which file descriptors belong to the emulator: one atomic byte per descriptor number, so
//! the interposed `read`/`write`/`close`/`mmap` of every other descriptor in the process pays
//! one relaxed load, no lock and no allocation.

use std::sync::atomic::{AtomicU8, Ordering};

/// Descriptors at or above this are never the emulator's (it refuses to hand one out).
pub const MAX_FDS: usize = 1 << 16;

/// What an emulator descriptor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FdKind {
    /// Not the emulator's.
    None = 0,
    /// An opened `/dev/infiniband/uverbsN`: the command fd of one verbs context.
    Cmd = 1,
    /// A completion channel (`CREATE_COMP_CHANNEL`): reads return `ib_uverbs_comp_event_desc`.
    CompChannel = 2,
    /// A context's async event fd: reads return `ib_uverbs_async_event_desc`.
    Async = 3,
}

static KINDS: [AtomicU8; MAX_FDS] = [const { AtomicU8::new(0) }; MAX_FDS];

/// The kind of `fd`; [`FdKind::None`] for any descriptor the emulator did not make.
pub fn kind(fd: libc::c_int) -> FdKind {
    let Ok(i) = usize::try_from(fd) else { return FdKind::None };
    match KINDS.get(i).map(|k| k.load(Ordering::Acquire)) {
        Some(1) => FdKind::Cmd,
        Some(2) => FdKind::CompChannel,
        Some(3) => FdKind::Async,
        _ => FdKind::None,
    }
}

/// Marks `fd` as the emulator's; false when the number is out of the table's range.
pub fn set(fd: libc::c_int, k: FdKind) -> bool {
    let Some(slot) = usize::try_from(fd).ok().and_then(|i| KINDS.get(i)) else { return false };
    slot.store(k as u8, Ordering::Release);
    true
}

/// Forgets `fd` (before the real close, so a reused number is never mistaken for it).
pub fn clear(fd: libc::c_int) {
    set(fd, FdKind::None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_out_of_range_is_never_ours() {
        assert!(set(1000, FdKind::CompChannel));
        assert_eq!(kind(1000), FdKind::CompChannel);
        clear(1000);
        assert_eq!(kind(1000), FdKind::None);
        assert!(!set(MAX_FDS as i32, FdKind::Cmd));
        assert_eq!(kind(-1), FdKind::None);
        assert_eq!(kind(MAX_FDS as i32), FdKind::None);
    }
}
