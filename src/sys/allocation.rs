//! How large the block is that holds a provider's private struct, before a layout row's
//! worth of it is read.

/// Checks that the allocation `base` starts holds at least `size` bytes, before any of
/// them is read: rdma-core's mlx5 provider allocates its CQ, QP, SRQ and WQ structs with
/// `calloc` (`providers/mlx5/verbs.c`), its irdma provider its CQ struct
/// (`providers/irdma/uverbs.c`), so the C allocator's `malloc_usable_size` bounds them
/// (it is the allocator's own answer: glibc's, or that of an allocator the program
/// interposes, which replaces `malloc_usable_size` with `malloc`), and a layout row larger than the struct the release loaded has (a later row on
/// an earlier library) is refused here rather than read past the allocation.
///
/// # Safety
///
/// `base` is the start of a live block from the process's C allocator (`malloc`,
/// `calloc`).
pub(crate) unsafe fn allocation_holds(base: *const u8, size: usize, what: &str) -> Result<(), String> {
    // SAFETY: the caller's promise: a live block of the C allocator, which `malloc_usable_size` only inspects.
    let usable = unsafe { libc::malloc_usable_size(base.cast_mut().cast()) };
    if usable < size {
        return Err(format!(
            "the allocation holding it has {usable} usable bytes, fewer than the {size} of the {what} layout row"
        ));
    }
    Ok(())
}
