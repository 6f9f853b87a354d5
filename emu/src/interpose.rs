//! The C library functions this library replaces when preloaded. Each one asks the fd table
//! (or the path) whether the call is the emulator's; every other call goes straight to the
//! C library's own function. What is answered here:
//!
//! * `open`/`openat` of `/dev/infiniband/uverbs0` (`mlx5_0`) or `uverbs1` (`irdma0`): a
//!   real `/dev/null` descriptor (so libibverbs' `fstat` check of a character device
//!   numbered as sysfs says passes), made a command fd of that device; other uverbs nodes
//!   do not exist.
//! * `stat` of the uverbs node: `/dev/null`'s.
//! * `write` on a command fd: one uverbs command. `ioctl` on it: `ENOTTY`, so libibverbs
//!   uses the `write()` ABI. `read` on it: `EINVAL`.
//! * `mmap` of a command fd: the UAR and clock pages. `munmap` of them: forgotten.
//! * `read` of an event fd: one event record. `close` of any emulator fd: its state goes.
//! * `socket(AF_NETLINK, _, NETLINK_RDMA)`: `EPROTONOSUPPORT`, so libibverbs discovers
//!   devices through sysfs even where the kernel has RDMA netlink.
//! * `opendir("/etc/libibverbs.d")`: the directory `DVCQ_EMU_IBV_CONFIG_DIR` names, where set
//!   ([`crate::config_dir`]).
//!
//! The variadic C prototypes (`open`, `openat`, `ioctl`) are declared with their optional
//! argument as a fixed one: on the x86-64 and AArch64 Linux calling conventions a variadic
//! integer or pointer argument travels in the same register as a fixed one, and when the
//! caller passed none the value is only ever forwarded, never used.

use crate::device;
use crate::emulator;
use crate::fd_table::{self, FdKind};
use crate::objects::Device;
use crate::real;
use libc::{c_char, c_int, c_ulong, c_void, mode_t, off_t, size_t, ssize_t};
use std::ffi::CStr;

#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
compile_error!("the preload's variadic interposers assume the x86-64 or AArch64 Linux calling convention");

/// `NETLINK_RDMA`.
const NETLINK_RDMA: c_int = 20;

/// What a path names, for the emulator.
enum Node {
    /// Not an RDMA node.
    Other,
    /// An emulated device's uverbs node.
    Ours(Device),
    /// Another `/dev/infiniband/uverbs*` node: the emulator hides real ones.
    OtherUverbs,
}

/// Classifies a C path.
///
/// # Safety
///
/// `path` is null or a NUL-terminated string.
unsafe fn node(path: *const c_char) -> Node {
    if path.is_null() {
        return Node::Other;
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    let p = unsafe { CStr::from_ptr(path) }.to_bytes();
    if p == device::UVERBS_PATH {
        Node::Ours(Device::Mlx5)
    } else if p == crate::irdma::UVERBS_PATH {
        Node::Ours(Device::Irdma)
    } else if p.starts_with(device::UVERBS_PREFIX) {
        Node::OtherUverbs
    } else {
        Node::Other
    }
}

/// Opens the emulated node: a `/dev/null` descriptor made a command fd.
fn open_ours(flags: c_int, dev: Device) -> c_int {
    let flags = libc::O_RDWR | (flags & libc::O_CLOEXEC);
    // SAFETY: the path is a NUL-terminated literal.
    let fd = unsafe { real::open(c"/dev/null".as_ptr(), flags, 0) };
    if fd < 0 {
        return fd;
    }
    if !fd_table::set(fd, FdKind::Cmd) {
        // SAFETY: fd was just opened here and is not shared.
        unsafe { real::close(fd) };
        real::set_errno(libc::EMFILE);
        return -1;
    }
    emulator::with(|e| e.opened(fd, dev));
    fd
}

/// `open(path, flags, mode)`.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    // SAFETY: path comes from the C caller, NUL-terminated or null.
    match unsafe { node(path) } {
        Node::Ours(dev) => open_ours(flags, dev),
        Node::OtherUverbs => {
            real::set_errno(libc::ENOENT);
            -1
        }
        // SAFETY: forwarded unchanged.
        Node::Other => unsafe { real::open(path, flags, mode) },
    }
}

/// `open64`: the same as [`open`] on 64-bit Linux.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    // SAFETY: path comes from the C caller, NUL-terminated or null.
    match unsafe { node(path) } {
        Node::Ours(dev) => open_ours(flags, dev),
        Node::OtherUverbs => {
            real::set_errno(libc::ENOENT);
            -1
        }
        // SAFETY: forwarded unchanged.
        Node::Other => unsafe { real::open64(path, flags, mode) },
    }
}

/// `__open_2`: the fortified `open` without a mode.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as for open; no mode, as the fortified form guarantees no O_CREAT.
    unsafe { open(path, flags, 0) }
}

/// `__open64_2`.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as for open64.
    unsafe { open64(path, flags, 0) }
}

/// `openat(dirfd, path, flags, mode)`.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    // SAFETY: path comes from the C caller, NUL-terminated or null.
    match unsafe { node(path) } {
        Node::Ours(dev) => open_ours(flags, dev),
        Node::OtherUverbs => {
            real::set_errno(libc::ENOENT);
            -1
        }
        // SAFETY: forwarded unchanged.
        Node::Other => unsafe { real::openat(dirfd, path, flags, mode) },
    }
}

/// `openat64`.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    // SAFETY: path comes from the C caller, NUL-terminated or null.
    match unsafe { node(path) } {
        Node::Ours(dev) => open_ours(flags, dev),
        Node::OtherUverbs => {
            real::set_errno(libc::ENOENT);
            -1
        }
        // SAFETY: forwarded unchanged.
        Node::Other => unsafe { real::openat64(dirfd, path, flags, mode) },
    }
}

/// `stat(path, buf)`: the uverbs node is `/dev/null`.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn stat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: path comes from the C caller; buf is the caller's stat buffer.
    unsafe {
        match node(path) {
            Node::Ours(_) => real::stat(c"/dev/null".as_ptr(), buf),
            Node::OtherUverbs => {
                real::set_errno(libc::ENOENT);
                -1
            }
            Node::Other => real::stat(path, buf),
        }
    }
}

/// `stat64`.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn stat64(path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: path comes from the C caller; buf is the caller's stat buffer.
    unsafe {
        match node(path) {
            Node::Ours(_) => real::stat64(c"/dev/null".as_ptr(), buf),
            Node::OtherUverbs => {
                real::set_errno(libc::ENOENT);
                -1
            }
            Node::Other => real::stat64(path, buf),
        }
    }
}

/// `fstatat`.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn fstatat(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
    // SAFETY: path comes from the C caller; buf is the caller's stat buffer.
    unsafe {
        match node(path) {
            Node::Ours(_) => real::fstatat(libc::AT_FDCWD, c"/dev/null".as_ptr(), buf, 0),
            Node::OtherUverbs => {
                real::set_errno(libc::ENOENT);
                -1
            }
            Node::Other => real::fstatat(dirfd, path, buf, flags),
        }
    }
}

/// `fstatat64`.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn fstatat64(dirfd: c_int, path: *const c_char, buf: *mut libc::stat64, flags: c_int) -> c_int {
    // SAFETY: path comes from the C caller; buf is the caller's stat buffer.
    unsafe {
        match node(path) {
            Node::Ours(_) => real::fstatat64(libc::AT_FDCWD, c"/dev/null".as_ptr(), buf, 0),
            Node::OtherUverbs => {
                real::set_errno(libc::ENOENT);
                -1
            }
            Node::Other => real::fstatat64(dirfd, path, buf, flags),
        }
    }
}

/// `close(fd)`: an emulator fd's state goes first, so a reused number is never mistaken.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if fd_table::kind(fd) != FdKind::None {
        emulator::with(|e| e.closing(fd));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::close(fd) }
}

/// `read(fd, buf, count)`.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    let kind = fd_table::kind(fd);
    if kind == FdKind::None {
        // SAFETY: forwarded unchanged.
        return unsafe { real::read(fd, buf, count) };
    }
    if !emulator::is_event_fd(kind) || buf.is_null() {
        real::set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: the caller gives `count` writable bytes at buf (non-null, checked).
    let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), count) };
    match emulator::read_event(fd, out) {
        Ok(n) => n as ssize_t,
        Err(e) => {
            real::set_errno(e);
            -1
        }
    }
}

/// `write(fd, buf, count)`: on a command fd, one command; the whole count on success.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    if fd_table::kind(fd) != FdKind::Cmd {
        // SAFETY: forwarded unchanged.
        return unsafe { real::write(fd, buf, count) };
    }
    if buf.is_null() {
        real::set_errno(libc::EFAULT);
        return -1;
    }
    // SAFETY: the caller gives `count` readable bytes at buf (non-null, checked).
    let cmd = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), count) };
    match emulator::with(|e| e.command(fd, cmd)) {
        Ok(()) => count as ssize_t,
        Err(e) => {
            real::set_errno(e);
            -1
        }
    }
}

/// `ioctl(fd, request, arg)`: `ENOTTY` on a command fd.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    if fd_table::kind(fd) == FdKind::Cmd {
        real::set_errno(libc::ENOTTY);
        return -1;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::ioctl(fd, request, arg) }
}

/// The emulator's answer to an mmap of a command fd.
fn mmap_ours(fd: c_int, len: size_t, off: off_t) -> *mut c_void {
    match emulator::with(|e| e.mmap(fd, len, off)) {
        Ok(addr) => addr as *mut c_void,
        Err(e) => {
            real::set_errno(e);
            libc::MAP_FAILED
        }
    }
}

/// `mmap`.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    if fd_table::kind(fd) == FdKind::Cmd {
        return mmap_ours(fd, len, off);
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mmap(addr, len, prot, flags, fd, off) }
}

/// `mmap64`.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    if fd_table::kind(fd) == FdKind::Cmd {
        return mmap_ours(fd, len, off);
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::mmap64(addr, len, prot, flags, fd, off) }
}

/// `munmap`: a device page is forgotten, then unmapped.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    if emulator::has_mappings() {
        emulator::with(|e| e.unmapping(addr as usize, len));
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::munmap(addr, len) }
}

/// `socket`: RDMA netlink is refused.
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    if domain == libc::AF_NETLINK && protocol == NETLINK_RDMA {
        real::set_errno(libc::EPROTONOSUPPORT);
        return -1;
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::socket(domain, ty, protocol) }
}

/// `opendir`: libibverbs' provider configuration directory may be replaced
/// ([`crate::config_dir`]).
///
/// # Safety
///
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    if !path.is_null() {
        // SAFETY: a non-null path is a NUL-terminated string, as the C function requires.
        if let Some(dir) = crate::config_dir::redirect(unsafe { CStr::from_ptr(path) }) {
            // SAFETY: `dir` is a NUL-terminated string that lives for the whole process.
            return unsafe { real::opendir(dir.as_ptr()) };
        }
    }
    // SAFETY: forwarded unchanged.
    unsafe { real::opendir(path) }
}
