//! rdma-core's private irdma provider structs that an attach to rdma-core's own CQs and QPs
//! reads (`providers/irdma/umain.h`: `struct irdma_ucq`, `struct irdma_uqp`;
//! `providers/irdma/user.h`: `struct irdma_cq_uk`, `struct irdma_qp_uk`,
//! `struct irdma_uk_attrs`), as a table of byte offsets per release range, for x86_64
//! (LP64, glibc). shared/spec/irdma.md §7a.
//!
//! ```c
//! struct irdma_ucq {
//!         struct verbs_cq verbs_cq;                 /* 288 bytes */
//!         struct verbs_mr vmr, vmr_shadow_area;     /* 56 bytes each */
//!         pthread_spinlock_t lock;  size_t buf_size;
//!         bool is_armed, skip_arm, arm_sol, skip_sol;
//!         int comp_vector;  uint32_t report_rtt;  struct irdma_uqp *uqp;
//!         struct irdma_cq_uk cq;  /* cq_base, cqe_alloc_db, cq_ack_db, shadow_area,
//!                                    cq_id, cq_size, cq_ring {head, tail, size},
//!                                    polarity, avoid_mem_cflct:1 */
//!         struct list_head resize_list;  ...
//! };
//! struct irdma_uqp {
//!         struct ibv_qp ibv_qp;  struct irdma_ucq *send_cq, *recv_cq;
//!         struct verbs_mr vmr;  size_t buf_size;  uint32_t irdma_drv_opt;
//!         pthread_spinlock_t lock;  uint16_t sq_sig_all, qperr, rsvd;
//!         uint32_t pending_rcvs, wq_size;  struct ibv_recv_wr *pend_rx_wr;
//!         struct irdma_qp_uk qp;  ...
//! };
//! struct irdma_qp_uk {
//!         struct irdma_qp_quanta *sq_base, *rq_base;
//!         [v64: struct irdma_srq_uk *srq_uk;]
//!         struct irdma_uk_attrs *uk_attrs;  __u32 *wqe_alloc_db;
//!         struct irdma_sq_uk_wr_trk_info *sq_wrtrk_array;  __u64 *rq_wrid_array;
//!         __le64 *shadow_area;  __le32 *push_db;  __le64 *push_wqe;
//!         struct irdma_ring sq_ring, rq_ring, initial_ring;
//!         __u32 qp_id, qp_caps, sq_size, rq_size, ...;  struct irdma_wqe_uk_ops wqe_ops;
//!         __u16 conn_wqes;  __u8 qp_type, ..., rq_wqe_size_multiplier;  bitfields;
//!         void *back_qp;  pthread_spinlock_t *lock;  ...
//! };
//! ```
//!
//! Read in the rdma-core tree at every tag v44.0 to v64.0, the heads of the stable-v44 to
//! stable-v63 branches, and master at 691953d8 (65.0). `irdma_ucq` up to `resize_list`,
//! `irdma_cq_uk` and the prefix of `irdma_uqp` up to `qp` are the same text in all of them
//! (v49 drops `irdma_uqp.recv_sges`, after `qp`). Three layouts of the rest:
//!
//! - v44.0-v47.9: `irdma_uk_attrs.hw_rev` at 38.
//! - v48.0-v63.1: `irdma_uk_attrs` gains `min_hw_wq_size`: `hw_rev` at 40.
//! - v64.0 (and master): `irdma_qp_uk` gains `srq_uk` after `rq_base` (every later field
//!   +8) and `irdma_uk_attrs` gains `max_hw_srq_quanta`: `hw_rev` at 44.
//!
//! The offsets agree with a C `offsetof` probe that declares these structs as each
//! release's headers do (they are private) over rdma-core 44's installed `verbs.h`, and
//! with the spec's table (where `&ucq->cq` at +0x1b8 and `&ucq->lock` at +0x190 were seen
//! in a v44 binary).

use core::mem::{offset_of, size_of};
use static_assertions::const_assert_eq;

/// `sizeof(struct verbs_cq)`: the union of `ibv_cq` and `ibv_cq_ex` (x86_64 glibc).
pub const VERBS_CQ_SIZE: usize = 288;
/// `sizeof(struct verbs_mr)`: `ibv_mr` (48 bytes), `mr_type`, `access`.
pub const VERBS_MR_SIZE: usize = 56;
/// `sizeof(struct ibv_qp)` on x86_64 glibc.
pub const IBV_QP_SIZE: usize = 160;
/// `sizeof(struct irdma_sq_uk_wr_trk_info)`: `wrid` (u64), `wr_len` (u32), `quanta`
/// (u16), two reserved bytes. The same in every release of the table.
pub const SQ_WRTRK_SIZE: usize = 16;
/// `offsetof(struct irdma_sq_uk_wr_trk_info, quanta)`.
pub const SQ_WRTRK_QUANTA: usize = 12;

/// `struct irdma_ring`.
#[repr(C)]
struct Ring {
    head: u32,
    tail: u32,
    size: u32,
}

/// `struct irdma_cq_uk`, pointers as `u64`.
#[repr(C)]
struct CqUk {
    cq_base: u64,
    cqe_alloc_db: u64,
    cq_ack_db: u64,
    shadow_area: u64,
    cq_id: u32,
    cq_size: u32,
    cq_ring: Ring,
    polarity: u8,
    avoid_mem_cflct: u8,
}
const_assert_eq!(size_of::<CqUk>(), 56);

/// `struct irdma_ucq` up to `resize_list`.
#[repr(C)]
struct Ucq {
    verbs_cq: [u64; VERBS_CQ_SIZE / 8],
    vmr: [u64; VERBS_MR_SIZE / 8],
    vmr_shadow_area: [u64; VERBS_MR_SIZE / 8],
    lock: u32,
    buf_size: u64,
    is_armed: u8,
    skip_arm: u8,
    arm_sol: u8,
    skip_sol: u8,
    comp_vector: i32,
    report_rtt: u32,
    uqp: u64,
    cq: CqUk,
    resize_list_next: u64,
    resize_list_prev: u64,
}

const_assert_eq!(offset_of!(Ucq, lock), 400);
const_assert_eq!(offset_of!(Ucq, is_armed), 416);
const_assert_eq!(offset_of!(Ucq, uqp), 432);
const_assert_eq!(offset_of!(Ucq, cq), 440);
const_assert_eq!(offset_of!(Ucq, cq) + offset_of!(CqUk, cq_id), 472);
const_assert_eq!(offset_of!(Ucq, cq) + offset_of!(CqUk, cq_ring), 480);
const_assert_eq!(offset_of!(Ucq, cq) + offset_of!(CqUk, polarity), 492);
const_assert_eq!(offset_of!(Ucq, resize_list_next), 496);

/// `struct irdma_uqp` up to `qp`.
#[repr(C)]
struct UqpPrefix {
    ibv_qp: [u64; IBV_QP_SIZE / 8],
    send_cq: u64,
    recv_cq: u64,
    vmr: [u64; VERBS_MR_SIZE / 8],
    buf_size: u64,
    irdma_drv_opt: u32,
    lock: u32,
    sq_sig_all: u16,
    qperr: u16,
    rsvd: u16,
    pending_rcvs: u32,
    wq_size: u32,
    pend_rx_wr: u64,
}
const_assert_eq!(size_of::<UqpPrefix>(), 272);

/// `struct irdma_qp_uk` up to `lock`, with `SRQ` words (0 or 1) of `srq_uk` after
/// `rq_base`.
#[repr(C)]
struct QpUk<const SRQ: usize> {
    sq_base: u64,
    rq_base: u64,
    srq_uk: [u64; SRQ],
    uk_attrs: u64,
    wqe_alloc_db: u64,
    sq_wrtrk_array: u64,
    rq_wrid_array: u64,
    shadow_area: u64,
    push_db: u64,
    push_wqe: u64,
    sq_ring: Ring,
    rq_ring: Ring,
    initial_ring: Ring,
    qp_id: u32,
    qp_caps: u32,
    sq_size: u32,
    rq_size: u32,
    max_sq_frag_cnt: u32,
    max_rq_frag_cnt: u32,
    max_inline_data: u32,
    wqe_ops: [u64; 4],
    conn_wqes: u16,
    qp_type: u8,
    swqe_polarity: u8,
    swqe_polarity_deferred: u8,
    rwqe_polarity: u8,
    rq_wqe_size: u8,
    rq_wqe_size_multiplier: u8,
    flags: u8,
    back_qp: u64,
    lock: u64,
}

type QpUkV44 = QpUk<0>;
type QpUkV64 = QpUk<1>;

const_assert_eq!(offset_of!(QpUkV44, uk_attrs), 16);
const_assert_eq!(offset_of!(QpUkV44, sq_wrtrk_array), 32);
const_assert_eq!(offset_of!(QpUkV44, rq_wrid_array), 40);
const_assert_eq!(offset_of!(QpUkV44, sq_ring), 72);
const_assert_eq!(offset_of!(QpUkV44, rq_ring), 84);
const_assert_eq!(offset_of!(QpUkV44, qp_id), 108);
const_assert_eq!(offset_of!(QpUkV44, sq_size), 116);
const_assert_eq!(offset_of!(QpUkV44, rq_size), 120);
const_assert_eq!(offset_of!(QpUkV44, conn_wqes), 168);
const_assert_eq!(offset_of!(QpUkV44, qp_type), 170);
const_assert_eq!(offset_of!(QpUkV44, rq_wqe_size_multiplier), 175);
const_assert_eq!(offset_of!(QpUkV44, back_qp), 184);
const_assert_eq!(offset_of!(QpUkV44, lock), 192);
const_assert_eq!(offset_of!(QpUkV64, uk_attrs), 24);
const_assert_eq!(offset_of!(QpUkV64, sq_wrtrk_array), 40);
const_assert_eq!(offset_of!(QpUkV64, rq_wrid_array), 48);
const_assert_eq!(offset_of!(QpUkV64, sq_ring), 80);
const_assert_eq!(offset_of!(QpUkV64, rq_ring), 92);
const_assert_eq!(offset_of!(QpUkV64, qp_id), 116);
const_assert_eq!(offset_of!(QpUkV64, back_qp), 192);
const_assert_eq!(offset_of!(QpUkV64, lock), 200);

/// Where the fields of `struct irdma_ucq` are (from the start of the struct, which is the
/// `struct ibv_cq` an application holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IrdmaCqLayout {
    /// `lock`: the `pthread_spinlock_t` rdma-core's poll takes.
    pub lock: usize,
    /// `uqp` (8-byte pointer).
    pub uqp: usize,
    /// `cq.cq_base` (8-byte pointer): ring slot 0.
    pub cq_base: usize,
    /// `cq.cqe_alloc_db` (8-byte pointer): the arm doorbell (doorbell page + 0x40).
    pub cqe_alloc_db: usize,
    /// `cq.cq_ack_db` (8-byte pointer): NULL in userspace.
    pub cq_ack_db: usize,
    /// `cq.shadow_area` (8-byte pointer, 64 bytes).
    pub shadow_area: usize,
    /// `cq.cq_id` (`u32`).
    pub cq_id: usize,
    /// `cq.cq_size` (`u32`): ring slots.
    pub cq_size: usize,
    /// `cq.cq_ring.head`, `.tail`, `.size` (`u32` each, in that order).
    pub cq_ring: usize,
    /// `cq.polarity` (`u8`): the valid bit expected next.
    pub polarity: usize,
    /// `cq.avoid_mem_cflct` (bit 0 of this byte).
    pub avoid_mem_cflct: usize,
    /// `resize_list.next` (8-byte pointer): the list is empty when it points at itself.
    pub resize_list: usize,
    /// Bytes from the start of the struct to the end of `resize_list`.
    pub size: usize,
}

/// Where the fields of `struct irdma_qp_uk` are (from the start of `irdma_qp_uk`, which
/// sits at [`IrdmaLayout::uqp_qp`] in `struct irdma_uqp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IrdmaQpLayout {
    /// `sq_base` (8-byte pointer).
    pub sq_base: usize,
    /// `rq_base` (8-byte pointer).
    pub rq_base: usize,
    /// `uk_attrs` (8-byte pointer to `struct irdma_uk_attrs`).
    pub uk_attrs: usize,
    /// `sq_wrtrk_array` (8-byte pointer; entries of [`SQ_WRTRK_SIZE`] bytes).
    pub sq_wrtrk_array: usize,
    /// `rq_wrid_array` (8-byte pointer to `u64`s).
    pub rq_wrid_array: usize,
    /// `sq_ring` (`head`, `tail`, `size`).
    pub sq_ring: usize,
    /// `rq_ring` (`head`, `tail`, `size`).
    pub rq_ring: usize,
    /// `qp_id` (`u32`): what CQEs carry.
    pub qp_id: usize,
    /// `sq_size` (`u32`).
    pub sq_size: usize,
    /// `rq_size` (`u32`).
    pub rq_size: usize,
    /// `qp_type` (`u8`).
    pub qp_type: usize,
    /// `rq_wqe_size_multiplier` (`u8`).
    pub rq_wqe_size_multiplier: usize,
    /// `back_qp` (8-byte pointer): the `irdma_uqp`.
    pub back_qp: usize,
    /// `lock` (8-byte pointer to the `irdma_uqp`'s spinlock).
    pub lock: usize,
    /// Bytes from the start of `irdma_qp_uk` to the end of `lock`.
    pub size: usize,
}

/// One row of the table: the private irdma layouts of one range of rdma-core releases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IrdmaLayout {
    /// The first release with this layout, as (major, minor).
    pub first: (u32, u32),
    /// The last release read to have it. Every point release of the majors from `first.0`
    /// to `last.0` uses the row (the stable branches' heads were read).
    pub last: (u32, u32),
    /// `struct irdma_ucq`.
    pub cq: IrdmaCqLayout,
    /// `offsetof(struct irdma_uqp, qp)`: from the application's `ibv_qp` to `irdma_qp_uk`.
    pub uqp_qp: usize,
    /// `struct irdma_qp_uk`.
    pub qp: IrdmaQpLayout,
    /// `offsetof(struct irdma_uk_attrs, hw_rev)` (`u8`: 1 GEN1, 2 GEN2, 3 GEN3).
    pub hw_rev: usize,
}

const CQ: IrdmaCqLayout = IrdmaCqLayout {
    lock: offset_of!(Ucq, lock),
    uqp: offset_of!(Ucq, uqp),
    cq_base: offset_of!(Ucq, cq) + offset_of!(CqUk, cq_base),
    cqe_alloc_db: offset_of!(Ucq, cq) + offset_of!(CqUk, cqe_alloc_db),
    cq_ack_db: offset_of!(Ucq, cq) + offset_of!(CqUk, cq_ack_db),
    shadow_area: offset_of!(Ucq, cq) + offset_of!(CqUk, shadow_area),
    cq_id: offset_of!(Ucq, cq) + offset_of!(CqUk, cq_id),
    cq_size: offset_of!(Ucq, cq) + offset_of!(CqUk, cq_size),
    cq_ring: offset_of!(Ucq, cq) + offset_of!(CqUk, cq_ring),
    polarity: offset_of!(Ucq, cq) + offset_of!(CqUk, polarity),
    avoid_mem_cflct: offset_of!(Ucq, cq) + offset_of!(CqUk, avoid_mem_cflct),
    resize_list: offset_of!(Ucq, resize_list_next),
    size: size_of::<Ucq>(),
};

macro_rules! qp_layout {
    ($t:ty) => {
        IrdmaQpLayout {
            sq_base: offset_of!($t, sq_base),
            rq_base: offset_of!($t, rq_base),
            uk_attrs: offset_of!($t, uk_attrs),
            sq_wrtrk_array: offset_of!($t, sq_wrtrk_array),
            rq_wrid_array: offset_of!($t, rq_wrid_array),
            sq_ring: offset_of!($t, sq_ring),
            rq_ring: offset_of!($t, rq_ring),
            qp_id: offset_of!($t, qp_id),
            sq_size: offset_of!($t, sq_size),
            rq_size: offset_of!($t, rq_size),
            qp_type: offset_of!($t, qp_type),
            rq_wqe_size_multiplier: offset_of!($t, rq_wqe_size_multiplier),
            back_qp: offset_of!($t, back_qp),
            lock: offset_of!($t, lock),
            size: size_of::<$t>(),
        }
    };
}

/// The private irdma layouts, oldest first; the ranges do not overlap.
pub const IRDMA_LAYOUTS: [IrdmaLayout; 3] = [
    IrdmaLayout { first: (44, 0), last: (47, 9), cq: CQ, uqp_qp: 272, qp: qp_layout!(QpUkV44), hw_rev: 38 },
    IrdmaLayout { first: (48, 0), last: (63, 1), cq: CQ, uqp_qp: 272, qp: qp_layout!(QpUkV44), hw_rev: 40 },
    IrdmaLayout { first: (64, 0), last: (64, 0), cq: CQ, uqp_qp: 272, qp: qp_layout!(QpUkV64), hw_rev: 44 },
];

const_assert_eq!(IRDMA_LAYOUTS[0].cq.size, 512);
const_assert_eq!(IRDMA_LAYOUTS[0].qp.size, 200);
const_assert_eq!(IRDMA_LAYOUTS[2].qp.size, 208);

impl IrdmaLayout {
    /// The row for rdma-core major release `major` on this target, or `None` for a release
    /// outside the table or a target other than x86_64.
    pub fn for_release(major: u32) -> Option<&'static IrdmaLayout> {
        if !cfg!(target_arch = "x86_64") {
            return None;
        }
        IRDMA_LAYOUTS.iter().find(|l| l.covers(major))
    }

    /// True if this row is the layout of major release `major`.
    pub const fn covers(&self, major: u32) -> bool {
        self.first.0 <= major && major <= self.last.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_ordered_and_fields_fit() {
        for w in IRDMA_LAYOUTS.windows(2) {
            assert!(w[0].last < w[1].first, "{w:?}");
            assert_eq!(w[0].last.0 + 1, w[1].first.0, "no gap between {w:?}");
        }
        for row in &IRDMA_LAYOUTS {
            let (c, q) = (&row.cq, &row.qp);
            assert!(c.lock >= VERBS_CQ_SIZE + 2 * VERBS_MR_SIZE);
            assert!(c.cq_base < c.cq_ring && c.cq_ring + 12 <= c.polarity && c.polarity < c.resize_list);
            for off in [c.uqp, c.cq_base, c.cqe_alloc_db, c.cq_ack_db, c.shadow_area, c.resize_list] {
                assert_eq!(off % 8, 0);
            }
            for off in [q.sq_base, q.rq_base, q.uk_attrs, q.sq_wrtrk_array, q.rq_wrid_array, q.back_qp, q.lock] {
                assert_eq!(off % 8, 0);
                assert!(off + 8 <= q.size);
            }
            assert!(row.uqp_qp >= IBV_QP_SIZE);
            assert!(row.hw_rev >= 38 && row.hw_rev <= 44);
        }
    }

    #[test]
    fn releases_find_their_row() {
        let expect = |major: u32| match major {
            _ if !cfg!(target_arch = "x86_64") => None,
            44..=47 => Some((44, 0)),
            48..=63 => Some((48, 0)),
            64 => Some((64, 0)),
            _ => None,
        };
        for major in [0, 43, 44, 47, 48, 63, 64, 65, u32::MAX] {
            assert_eq!(IrdmaLayout::for_release(major).map(|r| r.first), expect(major), "v{major}");
        }
    }
}
