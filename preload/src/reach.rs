//! Programs whose verbs calls the preload cannot see, told once on standard error where
//! the preload can tell: `dlopen` is wrapped (on x86-64) to notice a program that loads
//! libibverbs itself, whose lookups on that handle (`dlsym(handle, "ibv_create_cq")`, as
//! NCCL does) return libibverbs' own functions, and a library opened with `RTLD_DEEPBIND`,
//! whose calls bind to its own dependencies' definitions before the preload's.
//!
//! The wrapper must stay invisible to the C library: `dlopen` searches the calling
//! object's `RUNPATH` and picks its namespace from the caller's address, so the stub
//! below jumps to the real `dlopen` with the program's own return address on the stack,
//! after [`dlopen_check`] looked at the arguments.

use core::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `dlopen`: [`dlopen_check`] looks at the arguments, then the real `dlopen` is entered
/// with the program's return address on the stack, as if the program had called it.
///
/// # Safety
///
/// As `dlopen`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void {
    core::arch::naked_asm!(
        // The arguments are kept across the check; 16 bytes pushed and 8 more keep the
        // stack aligned for the call (it was 8 off at entry). The caller's return address
        // is the check's third argument.
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "mov rdx, [rsp + 24]",
        "call {check}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "jmp rax",
        check = sym dlopen_check,
    )
}

/// The real `dlopen`'s address, resolved once (0 before).
static REAL: AtomicUsize = AtomicUsize::new(0);

/// What the stub jumps to when the C library has no `dlopen` after the preload.
extern "C" fn no_dlopen(_file: *const c_char, _flags: c_int) -> *mut c_void {
    core::ptr::null_mut()
}

/// The `dlopen` after the preload's.
fn real() -> usize {
    let a = REAL.load(Ordering::Acquire);
    if a != 0 {
        return a;
    }
    // SAFETY: dlvsym/dlsym with RTLD_NEXT and NUL-terminated strings only look a symbol up.
    let mut p = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlopen".as_ptr(), c"GLIBC_2.34".as_ptr()) };
    if p.is_null() {
        // SAFETY: as above (C libraries before 2.34 version it GLIBC_2.2.5 only).
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"dlopen".as_ptr()) };
    }
    let a = if p.is_null() { no_dlopen as *const () as usize } else { p as usize };
    REAL.store(a, Ordering::Release);
    a
}

/// Whether `addr` lies in the preload itself (dvcq's own loading of rdma-core).
fn ours(addr: usize) -> bool {
    let info = |a: usize| {
        // SAFETY: dladdr only reads the loader's tables; a zeroed Dl_info is a valid out-parameter.
        let mut i: libc::Dl_info = unsafe { core::mem::zeroed() };
        // SAFETY: as above.
        (unsafe { libc::dladdr(a as *const c_void, &mut i) } != 0).then_some(i.dli_fbase as usize)
    };
    let me = info(dlopen_check as *const () as usize);
    me.is_some() && info(addr) == me
}

/// The line for a `dlopen` of `file` with `flags`, if it escapes the preload.
pub(crate) fn escape(file: &[u8], flags: c_int) -> Option<String> {
    let name = String::from_utf8_lossy(file);
    let base = file.rsplit(|&b| b == b'/').next().unwrap_or(file);
    if flags & libc::RTLD_DEEPBIND != 0 {
        return Some(format!(
            "{name} is opened with RTLD_DEEPBIND: its calls into libibverbs (if it makes any) bind to libibverbs' own functions first, which dvcq cannot see: the CQs it makes run on the provider"
        ));
    }
    base.starts_with(b"libibverbs.so").then(|| {
        format!(
            "the program loads {name} itself (dlopen): functions it looks up on that handle (dlsym) are libibverbs' own, which dvcq cannot see: the CQs made through them run on the provider"
        )
    })
}

/// Looks at a `dlopen(file, flags)` from `caller`, then gives the real `dlopen`.
extern "C" fn dlopen_check(file: *const c_char, flags: c_int, caller: usize) -> usize {
    if !file.is_null() && !crate::Inside::active() && crate::mode() != crate::Mode::Off && !ours(caller) {
        // SAFETY: dlopen's argument: a NUL-terminated file name.
        let name = unsafe { CStr::from_ptr(file) }.to_bytes();
        if let Some(line) = escape(name, flags) {
            crate::log::once(line);
        }
    }
    real()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libibverbs_and_deepbind_are_told() {
        let own = escape(b"/usr/lib/x86_64-linux-gnu/libibverbs.so.1", libc::RTLD_NOW).unwrap();
        assert!(own.contains("loads /usr/lib/x86_64-linux-gnu/libibverbs.so.1 itself"), "{own}");
        let deep = escape(b"libnccl-net.so", libc::RTLD_NOW | libc::RTLD_DEEPBIND).unwrap();
        assert!(deep.starts_with("libnccl-net.so is opened with RTLD_DEEPBIND"), "{deep}");
        assert_eq!(escape(b"libmlx5-rdmav34.so", libc::RTLD_NOW), None);
        assert_eq!(escape(b"/opt/libibverbs.so.1.backup/libfoo.so", libc::RTLD_NOW), None);
    }
}
