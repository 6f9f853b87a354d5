//! The C library's own functions behind the ones this library interposes, found with
//! `dlsym(RTLD_NEXT, ...)` once and cached. Everything the emulator does to file descriptors
//! goes through these, so it never re-enters its own dispatcher.

use libc::{c_char, c_int, c_void, mode_t, off_t, size_t, ssize_t};
use std::sync::atomic::{AtomicUsize, Ordering};

/// One cached symbol: 0 until looked up.
struct Sym {
    name: &'static [u8],
    addr: AtomicUsize,
}

impl Sym {
    const fn new(name: &'static [u8]) -> Sym {
        Sym { name, addr: AtomicUsize::new(0) }
    }

    /// The next definition of the symbol after this library, or `None` when there is none.
    fn get(&self) -> Option<usize> {
        let cached = self.addr.load(Ordering::Acquire);
        if cached != 0 {
            return Some(cached);
        }
        // SAFETY: `name` is a NUL-terminated literal (every `Sym::new` below ends in "\0"); dlsym only reads it.
        let found = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr().cast()) } as usize;
        if found == 0 {
            return None;
        }
        self.addr.store(found, Ordering::Release);
        Some(found)
    }
}

/// Defines a forwarding function per symbol: it calls the next definition, or fails with
/// `ENOSYS` when the process has none.
macro_rules! real {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $fail:expr;)*) => {$(
        #[doc = concat!("The C library's `", stringify!($name), "`.")]
        ///
        /// # Safety
        ///
        /// As for the C function: the pointers must be valid for what it does with them.
        pub unsafe fn $name($($arg: $ty),*) -> $ret {
            static SYM: Sym = Sym::new(concat!(stringify!($name), "\0").as_bytes());
            match SYM.get() {
                Some(addr) => {
                    // SAFETY: `addr` is the address dlsym gave for this very symbol name, whose C prototype is the one spelled here (from glibc's headers).
                    let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(addr) };
                    // SAFETY: the caller upholds the C function's contract.
                    unsafe { f($($arg),*) }
                }
                None => {
                    set_errno(libc::ENOSYS);
                    $fail
                }
            }
        }
    )*};
}

real! {
    fn open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int = -1;
    fn open64(path: *const c_char, flags: c_int, mode: mode_t) -> c_int = -1;
    fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int = -1;
    fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int = -1;
    fn close(fd: c_int) -> c_int = -1;
    fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t = -1;
    fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t = -1;
    fn ioctl(fd: c_int, request: libc::c_ulong, arg: *mut c_void) -> c_int = -1;
    fn mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void = libc::MAP_FAILED;
    fn mmap64(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void = libc::MAP_FAILED;
    fn munmap(addr: *mut c_void, len: size_t) -> c_int = -1;
    fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int = -1;
    fn stat(path: *const c_char, buf: *mut libc::stat) -> c_int = -1;
    fn stat64(path: *const c_char, buf: *mut libc::stat64) -> c_int = -1;
    fn fstatat(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int = -1;
    fn fstatat64(dirfd: c_int, path: *const c_char, buf: *mut libc::stat64, flags: c_int) -> c_int = -1;
    fn opendir(path: *const c_char) -> *mut libc::DIR = std::ptr::null_mut();
}

/// Sets the calling thread's `errno`.
pub fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// The calling thread's `errno`.
pub fn errno() -> c_int {
    // SAFETY: as in set_errno.
    unsafe { *libc::__errno_location() }
}
