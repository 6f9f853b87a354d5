//! The caller's memory a region can own ([`MrBuffer`]), and the two views of it the
//! region takes while it owns it. The crate denies `unsafe_code` elsewhere; the trait is
//! `unsafe` to implement, and the views rest on its contract.
#![allow(unsafe_code)]

/// Memory a caller hands to a memory region to own while it is registered
/// ([`crate::Pd::reg_mr_buffer`]), and gets back when it no longer is
/// ([`crate::Mr::into_buffer`]): a `Vec<u8>`, a `Box<[u8]>`, a `memmap2::MmapMut` (an
/// anonymous or hugetlbfs mapping for hugepages), or a type of the caller's.
///
/// The region owns the value, so nothing in the program can reach the memory while the
/// device may write it; the value is dropped only after the device has let go of the
/// memory (the region and every queue holding it dropped, deregistered).
///
/// # Safety
///
/// [`MrBuffer::as_mut_ptr`] and [`MrBuffer::len`] describe the same memory, valid for
/// reads and writes, every time they are called on one value, and moving the value does
/// not move that memory (it lives on the heap or in a mapping, not inside the value). No
/// other handle to that memory is kept (no shared `Arc`, no second mapping the program
/// reads through).
pub unsafe trait MrBuffer: Send + Sync + 'static {
    /// The first byte.
    fn as_mut_ptr(&mut self) -> *mut u8;
    /// Bytes.
    fn len(&self) -> usize;
    /// Whether it holds no byte.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

// SAFETY: a vector's bytes are on the heap and stay put while it is not resized, which only its owner (the region) could do, and never does.
unsafe impl MrBuffer for Vec<u8> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        Vec::as_mut_ptr(self)
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

// SAFETY: a boxed slice's bytes are on the heap and never move or change length.
unsafe impl MrBuffer for Box<[u8]> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        <[u8]>::as_mut_ptr(self)
    }
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}

// SAFETY: a mapping's pages stay where they were mapped until it is dropped.
unsafe impl MrBuffer for memmap2::MmapMut {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        <[u8]>::as_mut_ptr(self)
    }
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}

/// `buf`'s bytes, to copy from.
pub(crate) fn bytes<B: MrBuffer>(buf: &mut B) -> &[u8] {
    let len = buf.len();
    // SAFETY: `MrBuffer`'s contract: `len` initialised bytes at the pointer, owned by `buf`, which nothing else reaches; the slice borrows `buf` mutably, so no other view exists while it lives.
    unsafe { core::slice::from_raw_parts(buf.as_mut_ptr(), len) }
}

/// `buf`'s bytes, to copy into.
pub(crate) fn bytes_mut<B: MrBuffer>(buf: &mut B) -> &mut [u8] {
    let len = buf.len();
    // SAFETY: as in `bytes`; the mutable borrow of `buf` makes this the only view.
    unsafe { core::slice::from_raw_parts_mut(buf.as_mut_ptr(), len) }
}
