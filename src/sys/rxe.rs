//! The rxe attach's one look into rdma-core's private memory: the `struct rxe_cq` around
//! an `ibv_cq`, read at the offsets of the layout-table row for the rdma-core release loaded,
//! after every public fact that can be checked first has been.

use super::cq::VerbsCq;
use super::ffi;
use super::maps;
use core::mem::{offset_of, size_of};
use dvcq_rxe_dv::{RxeCq, RxeCqFields};
use dvcq_uapi::rxe::cq_layout::{IBV_CQ_CQE_OFFSET, IBV_CQ_HANDLE_OFFSET, IBV_CQ_SIZE, VERBS_CQ_SIZE};
use dvcq_uapi::rxe::RxeCqLayout;
use static_assertions::const_assert_eq;

// The table's view of the public structs rdma-core's rxe_cq starts with, tied to the headers
// this build read: `struct verbs_cq` is a union of `ibv_cq` and `ibv_cq_ex`. The table is
// x86_64's (`RxeCqLayout::for_release` has no row elsewhere).
#[cfg(target_arch = "x86_64")]
const_assert_eq!(IBV_CQ_SIZE, size_of::<ffi::ibv_cq>());
#[cfg(target_arch = "x86_64")]
const_assert_eq!(
    VERBS_CQ_SIZE,
    if size_of::<ffi::ibv_cq_ex>() > size_of::<ffi::ibv_cq>() {
        size_of::<ffi::ibv_cq_ex>()
    } else {
        size_of::<ffi::ibv_cq>()
    }
);
const_assert_eq!(IBV_CQ_CQE_OFFSET, offset_of!(ffi::ibv_cq, cqe));
const_assert_eq!(IBV_CQ_HANDLE_OFFSET, offset_of!(ffi::ibv_cq, handle));

/// Where the kernel maps the queues of a device file (`/dev/infiniband/uverbsN`).
const UVERBS_FILE: &str = "/dev/infiniband/uverbs";

/// Opens dvcq's rxe poller on `cq`, which the caller found to be served by the rxe provider
/// (its context's poll function lives in the rxe provider library), with `layout` the row
/// for the rdma-core release loaded. Returns the poller and a line saying what was checked.
///
/// Order of checks: the provider (caller), the release (caller), then the private struct's
/// copy against the public `ibv_cq` (depth, handle), then `/proc/self/maps` (the queue
/// pointer starts a mapping of the uverbs file that covers `mmap_info.size` bytes), then the
/// queue header itself ([`RxeCq::attach`]).
pub(crate) fn attach(cq: &VerbsCq, provider: &str, layout: &RxeCqLayout) -> Result<(RxeCq, String), String> {
    if provider != "rxe" {
        return Err(format!("the CQ's provider is {provider}, not rxe"));
    }
    let mut bytes = vec![0u8; layout.size];
    // SAFETY: the CQ was made by the rxe provider (its context's poll_cq is rxe's, checked by the caller), which allocates every CQ as a `struct rxe_cq` whose first member is the `ibv_cq`; `layout` is the table row for the loaded release, so `layout.size` bytes from the `ibv_cq` pointer are that allocation. The CQ is live (we hold its handle). The copy is a plain byte read; the fields read from it are checked before any is used.
    unsafe { core::ptr::copy_nonoverlapping(cq.as_ptr().cast::<u8>(), bytes.as_mut_ptr(), layout.size) };
    let fields = RxeCqFields::read(layout, &bytes).map_err(|e| e.to_string())?;
    // SAFETY: a live CQ.
    let (cqe, handle) = unsafe { ((*cq.as_ptr()).cqe, (*cq.as_ptr()).handle) };
    if fields.cqe != cqe || fields.handle != handle {
        return Err(format!(
            "the private struct's ibv_cq (cqe {}, handle {}) is not the CQ's (cqe {cqe}, handle {handle})",
            fields.cqe, fields.handle
        ));
    }
    let map_size = u64::from(fields.mmap_info.size);
    maps::covered_by_file(&maps::current()?, fields.queue, map_size, UVERBS_FILE)
        .map_err(|e| format!("rxe_cq.queue: {e}"))?;
    // SAFETY: the queue pointer starts a shared mapping of the uverbs file covering `mmap_info.size` bytes (just checked in /proc/self/maps); it is the kernel's queue for this CQ, mapped until the CQ is destroyed, and the caller keeps the CQ alive for the poller's life. dvcq's Cq is the one consumer: rdma-core never polls a CQ dvcq attached (the Cq API has no path to ibv_poll_cq for it) and it is not resized meanwhile.
    let poller = unsafe { RxeCq::attach(fields.queue_desc()) }.map_err(|e| e.to_string())?;
    let g = poller.geometry();
    let why = format!(
        "dvcq reads the ring rdma_rxe maps ({} slots of {} bytes; rdma-core v{}-v{} struct rxe_cq layout, self-checks passed)",
        g.slots(),
        g.elem_size(),
        layout.first_major,
        layout.last_major
    );
    Ok((poller, why))
}
