//! rdma-core's private `struct rxe_cq` (`providers/rxe/rxe.h`), as a table of byte offsets
//! per release range, and the public `struct ibv_cq` / `struct ibv_cq_ex` (`verbs.h`) it
//! starts with, for x86_64 (LP64, glibc).
//!
//! ```c
//! struct rxe_cq {
//!         struct verbs_cq       vcq;        /* union { struct ibv_cq; struct ibv_cq_ex; } */
//!         struct mminfo         mmap_info;
//!         struct rxe_queue_buf *queue;
//!         pthread_spinlock_t    lock;
//!         struct ib_uverbs_wc  *wc;         /* new API support */
//!         size_t                wc_size;
//!         uint32_t              cur_index;
//! };
//! ```
//!
//! Read in the rdma-core tree at every tag v44.0 to v64.0, the heads of the stable-v44 to
//! stable-v63 branches (point releases v44.12 to v63.1), and master at 691953d8
//! (`PACKAGE_VERSION` 65.0): `struct rxe_cq`, `struct verbs_cq` (`libibverbs/driver.h`),
//! `struct ibv_cq` and `struct ibv_cq_ex` (`libibverbs/verbs.h`) are the same text in all
//! of them, so the table has one row. The offsets agree with a C `offsetof` probe that
//! declares `struct rxe_cq` as `rxe.h` does (the header is private) over rdma-core 44's
//! installed `verbs.h`.
//!
//! Nothing here is bindgen output: the root crate's glue asserts [`VERBS_CQ_SIZE`] and the
//! `ibv_cq` offsets against bindgen's `ibv_cq` / `ibv_cq_ex`, which ties the table to the
//! headers the build saw.

use super::queue::MmInfo;
use core::mem::{align_of, offset_of, size_of};
use static_assertions::const_assert_eq;

/// `sizeof(pthread_mutex_t)` on x86_64 glibc (`__SIZEOF_PTHREAD_MUTEX_T`).
pub const PTHREAD_MUTEX_SIZE: usize = 40;
/// `sizeof(pthread_cond_t)` on x86_64 glibc (`__SIZEOF_PTHREAD_COND_T`).
pub const PTHREAD_COND_SIZE: usize = 48;
/// `sizeof(pthread_spinlock_t)` (a `volatile int` in glibc).
pub const PTHREAD_SPINLOCK_SIZE: usize = 4;
/// Function pointers in `struct ibv_cq_ex` after `wr_id`: `start_poll` to
/// `read_completion_wallclock_ns`.
pub const IBV_CQ_EX_POLL_OPS: usize = 18;

/// `struct ibv_cq` with pointers as `u64` (LP64) and the pthread objects as opaque words.
#[repr(C)]
struct IbvCq {
    context: u64,
    channel: u64,
    cq_context: u64,
    handle: u32,
    cqe: i32,
    mutex: [u64; PTHREAD_MUTEX_SIZE / 8],
    cond: [u64; PTHREAD_COND_SIZE / 8],
    comp_events_completed: u32,
    async_events_completed: u32,
}

/// `struct ibv_cq_ex`: the fields of `struct ibv_cq`, then the extended-poll state and ops.
#[repr(C)]
struct IbvCqEx {
    cq: IbvCq,
    comp_mask: u32,
    status: u32,
    wr_id: u64,
    poll_ops: [u64; IBV_CQ_EX_POLL_OPS],
}

/// `sizeof(struct ibv_cq)`.
pub const IBV_CQ_SIZE: usize = size_of::<IbvCq>();
/// `sizeof(struct ibv_cq_ex)`.
pub const IBV_CQ_EX_SIZE: usize = size_of::<IbvCqEx>();
/// `sizeof(struct verbs_cq)`: the union of `ibv_cq` and `ibv_cq_ex`, so the larger.
pub const VERBS_CQ_SIZE: usize = if IBV_CQ_EX_SIZE > IBV_CQ_SIZE { IBV_CQ_EX_SIZE } else { IBV_CQ_SIZE };
/// `offsetof(struct ibv_cq, handle)`.
pub const IBV_CQ_HANDLE_OFFSET: usize = offset_of!(IbvCq, handle);
/// `offsetof(struct ibv_cq, cqe)`: the CQ depth the kernel granted.
pub const IBV_CQ_CQE_OFFSET: usize = offset_of!(IbvCq, cqe);

const_assert_eq!(offset_of!(IbvCq, handle), 24);
const_assert_eq!(offset_of!(IbvCq, cqe), 28);
const_assert_eq!(offset_of!(IbvCq, mutex), 32);
const_assert_eq!(offset_of!(IbvCq, cond), 72);
const_assert_eq!(offset_of!(IbvCq, comp_events_completed), 120);
const_assert_eq!(IBV_CQ_SIZE, 128);
// ibv_cq_ex repeats ibv_cq's fields at the same offsets (ibv_cq_ex_to_cq casts between them).
const_assert_eq!(offset_of!(IbvCqEx, comp_mask), IBV_CQ_SIZE);
const_assert_eq!(offset_of!(IbvCqEx, wr_id), 136);
const_assert_eq!(offset_of!(IbvCqEx, poll_ops), 144);
const_assert_eq!(IBV_CQ_EX_SIZE, 288);
const_assert_eq!(VERBS_CQ_SIZE, 288);
const_assert_eq!(align_of::<IbvCqEx>(), 8);

/// `struct rxe_cq` as v44 to v65 have it, with pointers and `size_t` as `u64`.
#[repr(C)]
struct RxeCqV44 {
    vcq: [u64; VERBS_CQ_SIZE / 8],
    mmap_info: MmInfo,
    queue: u64,
    lock: [u32; PTHREAD_SPINLOCK_SIZE / 4],
    wc: u64,
    wc_size: u64,
    cur_index: u32,
}

const_assert_eq!(VERBS_CQ_SIZE % 8, 0);
const_assert_eq!(offset_of!(RxeCqV44, mmap_info), 288);
const_assert_eq!(offset_of!(RxeCqV44, queue), 304);
const_assert_eq!(offset_of!(RxeCqV44, lock), 312);
const_assert_eq!(offset_of!(RxeCqV44, wc), 320);
const_assert_eq!(offset_of!(RxeCqV44, wc_size), 328);
const_assert_eq!(offset_of!(RxeCqV44, cur_index), 336);
const_assert_eq!(size_of::<RxeCqV44>(), 344);

/// Where the fields of `struct rxe_cq` are in one range of rdma-core releases (byte offsets
/// from the start of the struct, which is also the `struct ibv_cq` an application holds:
/// `vcq.cq` is at offset 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RxeCqLayout {
    /// The first rdma-core major release with this layout.
    pub first_major: u32,
    /// The last major release checked to have it (inclusive).
    pub last_major: u32,
    /// `sizeof(struct verbs_cq)`, where the provider's own fields start.
    pub verbs_cq_size: usize,
    /// `mmap_info` ([`MmInfo`]): the mapping's `mmap` offset and size.
    pub mmap_info: usize,
    /// `queue`: the address of the mapped `struct rxe_queue_buf` (8 bytes).
    pub queue: usize,
    /// `lock`: the `pthread_spinlock_t` rdma-core's poll takes.
    pub lock: usize,
    /// `wc`: the extended poll's current record (8-byte pointer).
    pub wc: usize,
    /// `wc_size`: `1 << log2_elem_size`, set at create (8-byte `size_t`).
    pub wc_size: usize,
    /// `cur_index`: the extended poll's position (`u32`).
    pub cur_index: usize,
    /// `sizeof(struct rxe_cq)`: the bytes to read from the CQ pointer.
    pub size: usize,
}

/// The `struct rxe_cq` layouts, oldest first; the ranges do not overlap.
pub const RXE_CQ_LAYOUTS: [RxeCqLayout; 1] = [RxeCqLayout {
    first_major: 44,
    last_major: 65,
    verbs_cq_size: VERBS_CQ_SIZE,
    mmap_info: offset_of!(RxeCqV44, mmap_info),
    queue: offset_of!(RxeCqV44, queue),
    lock: offset_of!(RxeCqV44, lock),
    wc: offset_of!(RxeCqV44, wc),
    wc_size: offset_of!(RxeCqV44, wc_size),
    cur_index: offset_of!(RxeCqV44, cur_index),
    size: size_of::<RxeCqV44>(),
}];

const_assert_eq!(RXE_CQ_LAYOUTS[0].mmap_info, RXE_CQ_LAYOUTS[0].verbs_cq_size);
const_assert_eq!(RXE_CQ_LAYOUTS[0].queue, RXE_CQ_LAYOUTS[0].mmap_info + size_of::<MmInfo>());

impl RxeCqLayout {
    /// The layout of rdma-core major release `major` on this target, or `None` for a
    /// release outside the table or a target other than x86_64 (the table's sizes of the
    /// pthread objects are x86_64's).
    pub fn for_release(major: u32) -> Option<&'static RxeCqLayout> {
        if !cfg!(target_arch = "x86_64") {
            return None;
        }
        RXE_CQ_LAYOUTS.iter().find(|l| l.covers(major))
    }

    /// True if this row is the layout of major release `major`.
    pub const fn covers(&self, major: u32) -> bool {
        self.first_major <= major && major <= self.last_major
    }

    /// Every offset of this row with the bytes its field takes, in order: what an image
    /// builder writes and a reader checks against a buffer's length.
    pub const fn fields(&self) -> [(&'static str, usize, usize); 6] {
        [
            ("mmap_info", self.mmap_info, size_of::<MmInfo>()),
            ("queue", self.queue, 8),
            ("lock", self.lock, PTHREAD_SPINLOCK_SIZE),
            ("wc", self.wc, 8),
            ("wc_size", self.wc_size, 8),
            ("cur_index", self.cur_index, 4),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows cover consecutive, disjoint major ranges, and inside a row the fields are
    /// in declaration order, do not overlap and end inside the struct.
    #[test]
    fn rows_are_ordered_and_fields_fit() {
        for w in RXE_CQ_LAYOUTS.windows(2) {
            assert!(w[0].last_major < w[1].first_major, "{w:?}");
        }
        for row in &RXE_CQ_LAYOUTS {
            assert!(row.first_major <= row.last_major);
            let mut end = row.verbs_cq_size;
            for (name, off, len) in row.fields() {
                assert!(off >= end, "{name} at {off} overlaps the field before it (ends {end})");
                assert_eq!(off % len.min(8), 0, "{name} misaligned");
                end = off + len;
            }
            assert!(end <= row.size && row.size % 8 == 0);
        }
    }

    #[test]
    fn releases_find_their_row() {
        let expect = |major| if cfg!(target_arch = "x86_64") && (44..=65).contains(&major) { Some(44) } else { None };
        for major in [0, 43, 44, 50, 64, 65, 66, u32::MAX] {
            assert_eq!(RxeCqLayout::for_release(major).map(|r| r.first_major), expect(major), "v{major}");
        }
    }
}
