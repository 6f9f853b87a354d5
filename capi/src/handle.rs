//! The opaque handles C holds, and the checks every call makes on them before use.
//!
//! Each handle is a `Box` handed to C as a pointer. It starts with a tag naming its type,
//! checked on every call and cleared when the handle is destroyed, so a NULL, a handle of
//! another type or (usually) one already destroyed is refused with `-EINVAL` instead of
//! being used. The tag is a best-effort check: a pointer C made up, or one to freed memory
//! that was reused, cannot be told from a live handle.

use crate::error::Fail;
use std::sync::{Mutex, MutexGuard, TryLockError};

/// A handle type: its tag, its C name, and where the tag is kept.
pub(crate) trait Handle: Sized {
    /// The tag a live handle of this type holds.
    const TAG: u64;
    /// The C type, for messages.
    const NAME: &'static str;
    /// The tag field.
    fn tag(&self) -> u64;
    /// The tag field, to clear it on destroy.
    fn tag_mut(&mut self) -> &mut u64;
}

/// The handle `p` points to, checked.
///
/// # Safety
///
/// `p` is NULL or a pointer this library returned for a handle of type `H` that the caller
/// has not destroyed (checked as far as the tag allows), not destroyed by another thread
/// during the call.
pub(crate) unsafe fn get<'a, H: Handle>(call: &str, p: *const H) -> Result<&'a H, Fail> {
    if p.is_null() {
        return Err(Fail::inval(call, format!("the {} is NULL", H::NAME)));
    }
    // SAFETY: non-NULL, and by the caller's promise a live handle of this type made by this library (a Box, so aligned and initialised); the tag is read before anything else.
    let h = unsafe { &*p };
    if h.tag() != H::TAG {
        return Err(Fail::inval(call, format!("{p:p} is not a live {} (destroyed already, or another type)", H::NAME)));
    }
    Ok(h)
}

/// Takes back the handle `p` points to for destruction: checked as [`get`], its tag
/// cleared.
///
/// # Safety
///
/// As [`get`]; and no other thread uses the handle during or after the call.
pub(crate) unsafe fn take<H: Handle>(call: &str, p: *mut H) -> Result<Box<H>, Fail> {
    // SAFETY: the caller's promise, passed on.
    unsafe { get(call, p) }?;
    // SAFETY: checked above: a live Box this library leaked for C, given back once (the tag is cleared at once, so a second destroy of the same pointer is refused while the memory is not reused).
    let mut b = unsafe { Box::from_raw(p) };
    *b.tag_mut() = 0;
    Ok(b)
}

/// Hands `h` to C through the out-parameter `out`.
///
/// # Safety
///
/// `out` is NULL (refused) or points to writable storage for one pointer.
pub(crate) unsafe fn give<H: Handle>(call: &str, out: *mut *mut H, h: H) -> Result<i32, Fail> {
    if out.is_null() {
        return Err(Fail::inval(call, format!("the out-parameter for the new {} is NULL", H::NAME)));
    }
    let p = Box::into_raw(Box::new(h));
    // SAFETY: `out` is non-NULL and, by the caller's promise, writable.
    unsafe { out.write(p) };
    Ok(0)
}

/// Clears an out-parameter (when not NULL) before a call that may fail, so C never reads a
/// stale pointer from it.
///
/// # Safety
///
/// As [`give`].
pub(crate) unsafe fn clear<H>(out: *mut *mut H) {
    if !out.is_null() {
        // SAFETY: non-NULL and, by the caller's promise, writable.
        unsafe { out.write(core::ptr::null_mut()) };
    }
}

/// Locks a handle's state, blocking (short, rare calls: set-up and tear-down).
pub(crate) fn lock<'a, T>(call: &str, what: &str, m: &'a Mutex<T>) -> Result<MutexGuard<'a, T>, Fail> {
    m.lock().map_err(|_| poisoned(call, what))
}

/// Locks a handle's state without waiting: `-EBUSY` when another thread is inside a call
/// on the same handle (a CQ or QP is used by one thread at a time, as its poll and post
/// loops are).
pub(crate) fn try_lock<'a, T>(call: &str, what: &str, m: &'a Mutex<T>) -> Result<MutexGuard<'a, T>, Fail> {
    m.try_lock().map_err(|e| match e {
        TryLockError::WouldBlock => {
            Fail::new(libc::EBUSY, format!("{call}: another thread is inside a call on this {what}"))
        }
        TryLockError::Poisoned(_) => poisoned(call, what),
    })
}

fn poisoned(call: &str, what: &str) -> Fail {
    Fail::new(libc::EIO, format!("{call}: an earlier call on this {what} failed inside libdvcq; destroy it"))
}
