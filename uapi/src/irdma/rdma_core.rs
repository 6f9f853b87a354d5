//! rdma-core's private irdma provider structs that an attach to rdma-core's own CQs and QPs
//! reads (`providers/irdma/umain.h`: `struct irdma_uvcontext`, `struct irdma_ucq`,
//! `struct irdma_uqp`; `providers/irdma/user.h`: `struct irdma_cq_uk`, `struct irdma_qp_uk`,
//! `struct irdma_ring`, `struct irdma_sq_uk_wr_trk_info`; `providers/irdma/irdma.h`:
//! `struct irdma_uk_attrs`), as a table of byte offsets per release range, for x86_64
//! (LP64, glibc).
//!
//! ```c
//! struct irdma_uvcontext {
//!         struct verbs_context ibv_ctx;   /* ends with the struct ibv_context an
//!                                            application holds (verbs_context grows at
//!                                            its front, never after ibv_context) */
//!         struct irdma_upd *iwupd;  struct irdma_uk_attrs uk_attrs;  void *db;  ...
//! };
//! struct irdma_uk_attrs {
//!         __u64 feature_flags;  __u32 max_hw_wq_frags, ..., min_hw_cq_size, max_hw_cq_size;
//!         [v64: __u32 max_hw_srq_quanta;]  __u16 max_hw_sq_chunk;
//!         [v48: __u16 min_hw_wq_size;]  __u8 hw_rev;
//! };
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
//!         __u16 conn_wqes;  __u8 qp_type, ..., rq_wqe_size, rq_wqe_size_multiplier;
//!         bool deferred_flag:1, push_mode:1, push_dropped:1, first_sq_wq:1, ...;
//!         void *back_qp;  pthread_spinlock_t *lock;  ...
//! };
//! ```
//!
//! Read in the rdma-core tree at every tag v44.0 to v64.0 (the newest release tag), the
//! heads of the stable-v44 to stable-v63 branches, and master at 691953d8 (65.0, the same
//! text as v64.0 for every struct here). `irdma_ucq` up to `resize_list`, `irdma_cq_uk`,
//! `irdma_ring`, `irdma_sq_uk_wr_trk_info`, `struct ibv_context` and the prefix of
//! `irdma_uqp` up to `qp` are the same text in all of them (v49 drops
//! `irdma_uqp.recv_sges`, after `qp`; v49 changes only the argument types of
//! `irdma_wqe_uk_ops`' function pointers). Three layouts of the rest:
//!
//! - v44.0-v47.9: `irdma_uk_attrs` is 40 bytes, `hw_rev` at 38.
//! - v48.0-v63.1: `irdma_uk_attrs` gains `min_hw_wq_size`: 48 bytes, `hw_rev` at 40, so
//!   `irdma_uvcontext.db` moves 8 bytes.
//! - v64.0 (and master): `irdma_qp_uk` gains `srq_uk` after `rq_base` (every later field
//!   +8) and `irdma_uk_attrs` gains `max_hw_srq_quanta`: `hw_rev` at 44 (still 48 bytes).
//!
//! Every offset here was printed by a C `offsetof` probe compiled against each release's
//! own headers (the provider's private `umain.h` and its libibverbs `driver.h` and
//! `verbs.h`) at v44.0, v47.9, v48.0, v52.0, v63.1, v64.0 and master; the structs below
//! restate the field lists so that `offset_of!` gives the same numbers, and the
//! assertions pin them. The root crate's glue asserts the public sizes
//! ([`IBV_CONTEXT_SIZE`], [`IBV_QP_SIZE`], the `ibv_cq` and `ibv_mr` fields) against
//! bindgen's structs, which ties the table to the headers the build saw.

use core::mem::{offset_of, size_of};
use static_assertions::const_assert_eq;

/// `sizeof(struct ibv_context)` on x86_64 glibc: `irdma_uvcontext` goes on right after it.
pub const IBV_CONTEXT_SIZE: usize = 328;
/// `sizeof(struct verbs_cq)`: the union of `ibv_cq` and `ibv_cq_ex` (x86_64 glibc).
pub const VERBS_CQ_SIZE: usize = 288;
/// `sizeof(struct verbs_mr)`: `ibv_mr` (48 bytes), `mr_type`, `access`.
pub const VERBS_MR_SIZE: usize = 56;
/// `offsetof(struct ibv_mr, context)`: `ibv_cmd_reg_mr` sets it to the PD's context.
pub const IBV_MR_CONTEXT: usize = 0;
/// `offsetof(struct ibv_mr, pd)`: the provider sets it to its context's `iwupd`.
pub const IBV_MR_PD: usize = 8;
/// `sizeof(struct ibv_qp)` on x86_64 glibc.
pub const IBV_QP_SIZE: usize = 160;
/// `sizeof(struct irdma_sq_uk_wr_trk_info)`: `wrid` (u64), `wr_len` (u32), `quanta`
/// (u16), two reserved bytes. The same in every release of the table.
pub const SQ_WRTRK_SIZE: usize = 16;
/// `offsetof(struct irdma_sq_uk_wr_trk_info, wr_len)`.
pub const SQ_WRTRK_WR_LEN: usize = 8;
/// `offsetof(struct irdma_sq_uk_wr_trk_info, quanta)`.
pub const SQ_WRTRK_QUANTA: usize = 12;
/// `IRDMA_SEND_WITH_IMM` in `irdma_qp_uk.qp_caps` (`enum irdma_qp_caps`): a RoCE QP; the
/// kernel leaves it off on iWARP.
pub const QP_CAPS_SEND_WITH_IMM: u32 = 2;
/// `irdma_qp_uk.push_mode`: bit 1 of the byte of bitfields after `rq_wqe_size_multiplier`
/// (GCC on x86_64 packs bitfields from bit 0 in declaration order).
pub const QP_FLAG_PUSH_MODE: u8 = 1 << 1;
/// `irdma_qp_uk.push_dropped`: bit 2 of the same byte.
pub const QP_FLAG_PUSH_DROPPED: u8 = 1 << 2;
/// `irdma_qp_uk.first_sq_wq`: bit 3 of the same byte (connection WQEs not all completed).
pub const QP_FLAG_FIRST_SQ_WQ: u8 = 1 << 3;

/// `struct irdma_ring`.
#[repr(C)]
struct Ring {
    head: u32,
    tail: u32,
    size: u32,
}

/// `struct irdma_sq_uk_wr_trk_info`.
#[repr(C)]
struct WrTrk {
    wrid: u64,
    wr_len: u32,
    quanta: u16,
    reserved: [u8; 2],
}
const_assert_eq!(size_of::<WrTrk>(), SQ_WRTRK_SIZE);
const_assert_eq!(offset_of!(WrTrk, wr_len), SQ_WRTRK_WR_LEN);
const_assert_eq!(offset_of!(WrTrk, quanta), SQ_WRTRK_QUANTA);

/// `struct irdma_uk_attrs` of v44.0-v47.9.
#[repr(C)]
struct UkAttrsV44 {
    feature_flags: u64,
    max_hw_wq_frags: u32,
    max_hw_read_sges: u32,
    max_hw_inline: u32,
    max_hw_rq_quanta: u32,
    max_hw_wq_quanta: u32,
    min_hw_cq_size: u32,
    max_hw_cq_size: u32,
    max_hw_sq_chunk: u16,
    hw_rev: u8,
}

/// `struct irdma_uk_attrs` of v48.0-v63.1.
#[repr(C)]
struct UkAttrsV48 {
    feature_flags: u64,
    max_hw_wq_frags: u32,
    max_hw_read_sges: u32,
    max_hw_inline: u32,
    max_hw_rq_quanta: u32,
    max_hw_wq_quanta: u32,
    min_hw_cq_size: u32,
    max_hw_cq_size: u32,
    max_hw_sq_chunk: u16,
    min_hw_wq_size: u16,
    hw_rev: u8,
}

/// `struct irdma_uk_attrs` of v64.0.
#[repr(C)]
struct UkAttrsV64 {
    feature_flags: u64,
    max_hw_wq_frags: u32,
    max_hw_read_sges: u32,
    max_hw_inline: u32,
    max_hw_rq_quanta: u32,
    max_hw_wq_quanta: u32,
    min_hw_cq_size: u32,
    max_hw_cq_size: u32,
    max_hw_srq_quanta: u32,
    max_hw_sq_chunk: u16,
    min_hw_wq_size: u16,
    hw_rev: u8,
}

const_assert_eq!(size_of::<UkAttrsV44>(), 40);
const_assert_eq!(offset_of!(UkAttrsV44, hw_rev), 38);
const_assert_eq!(offset_of!(UkAttrsV44, max_hw_cq_size), 32);
const_assert_eq!(size_of::<UkAttrsV48>(), 48);
const_assert_eq!(offset_of!(UkAttrsV48, hw_rev), 40);
const_assert_eq!(size_of::<UkAttrsV64>(), 48);
const_assert_eq!(offset_of!(UkAttrsV64, hw_rev), 44);
const_assert_eq!(offset_of!(UkAttrsV64, max_hw_sq_chunk), 40);

/// `struct irdma_uvcontext` after its `verbs_context`, that is from the end of the
/// `struct ibv_context` (8-aligned), with a `uk_attrs` of type `A`.
#[repr(C)]
struct UvcontextTail<A> {
    iwupd: u64,
    uk_attrs: A,
    db: u64,
    abi_ver: i32,
    flags: u8,
}

type UvcontextTailV44 = UvcontextTail<UkAttrsV44>;
type UvcontextTailV48 = UvcontextTail<UkAttrsV48>;
type UvcontextTailV64 = UvcontextTail<UkAttrsV64>;

// What the probe printed, from the `ibv_context` pointer.
const_assert_eq!(IBV_CONTEXT_SIZE + offset_of!(UvcontextTailV44, iwupd), 328);
const_assert_eq!(IBV_CONTEXT_SIZE + offset_of!(UvcontextTailV44, uk_attrs), 336);
const_assert_eq!(IBV_CONTEXT_SIZE + offset_of!(UvcontextTailV44, db), 376);
const_assert_eq!(IBV_CONTEXT_SIZE + offset_of!(UvcontextTailV48, db), 384);
const_assert_eq!(IBV_CONTEXT_SIZE + offset_of!(UvcontextTailV64, db), 384);

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

const_assert_eq!(offset_of!(Ucq, vmr), 288);
const_assert_eq!(offset_of!(Ucq, vmr_shadow_area), 344);
const_assert_eq!(offset_of!(Ucq, lock), 400);
const_assert_eq!(offset_of!(Ucq, buf_size), 408);
const_assert_eq!(offset_of!(Ucq, is_armed), 416);
const_assert_eq!(offset_of!(Ucq, uqp), 432);
const_assert_eq!(offset_of!(Ucq, cq), 440);
const_assert_eq!(offset_of!(Ucq, cq) + offset_of!(CqUk, shadow_area), 464);
const_assert_eq!(offset_of!(Ucq, cq) + offset_of!(CqUk, cq_id), 472);
const_assert_eq!(offset_of!(Ucq, cq) + offset_of!(CqUk, cq_size), 476);
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
const_assert_eq!(offset_of!(UqpPrefix, send_cq), 160);
const_assert_eq!(offset_of!(UqpPrefix, recv_cq), 168);
const_assert_eq!(offset_of!(UqpPrefix, lock), 244);
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
const_assert_eq!(offset_of!(QpUkV44, wqe_alloc_db), 24);
const_assert_eq!(offset_of!(QpUkV44, sq_wrtrk_array), 32);
const_assert_eq!(offset_of!(QpUkV44, rq_wrid_array), 40);
const_assert_eq!(offset_of!(QpUkV44, shadow_area), 48);
const_assert_eq!(offset_of!(QpUkV44, sq_ring), 72);
const_assert_eq!(offset_of!(QpUkV44, rq_ring), 84);
const_assert_eq!(offset_of!(QpUkV44, qp_id), 108);
const_assert_eq!(offset_of!(QpUkV44, sq_size), 116);
const_assert_eq!(offset_of!(QpUkV44, rq_size), 120);
const_assert_eq!(offset_of!(QpUkV44, max_sq_frag_cnt), 124);
const_assert_eq!(offset_of!(QpUkV44, conn_wqes), 168);
const_assert_eq!(offset_of!(QpUkV44, qp_type), 170);
const_assert_eq!(offset_of!(QpUkV44, rq_wqe_size), 174);
const_assert_eq!(offset_of!(QpUkV44, rq_wqe_size_multiplier), 175);
const_assert_eq!(offset_of!(QpUkV44, back_qp), 184);
const_assert_eq!(offset_of!(QpUkV44, lock), 192);
const_assert_eq!(offset_of!(QpUkV64, uk_attrs), 24);
const_assert_eq!(offset_of!(QpUkV64, wqe_alloc_db), 32);
const_assert_eq!(offset_of!(QpUkV64, sq_wrtrk_array), 40);
const_assert_eq!(offset_of!(QpUkV64, rq_wrid_array), 48);
const_assert_eq!(offset_of!(QpUkV64, shadow_area), 56);
const_assert_eq!(offset_of!(QpUkV64, sq_ring), 80);
const_assert_eq!(offset_of!(QpUkV64, rq_ring), 92);
const_assert_eq!(offset_of!(QpUkV64, qp_id), 116);
const_assert_eq!(offset_of!(QpUkV64, sq_size), 124);
const_assert_eq!(offset_of!(QpUkV64, rq_size), 128);
const_assert_eq!(offset_of!(QpUkV64, max_sq_frag_cnt), 132);
const_assert_eq!(offset_of!(QpUkV64, conn_wqes), 176);
const_assert_eq!(offset_of!(QpUkV64, qp_type), 178);
const_assert_eq!(offset_of!(QpUkV64, rq_wqe_size), 182);
const_assert_eq!(offset_of!(QpUkV64, rq_wqe_size_multiplier), 183);
const_assert_eq!(offset_of!(QpUkV64, back_qp), 192);
const_assert_eq!(offset_of!(QpUkV64, lock), 200);

/// Where `struct irdma_uvcontext`'s fields after its `verbs_context` are, counted from the
/// `struct ibv_context` an application holds (which is the last member of
/// `verbs_context`, so these do not move when libibverbs grows `verbs_context`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IrdmaCtxLayout {
    /// `iwupd` (8-byte pointer to the context's own `struct irdma_upd`, whose first member
    /// is its `ibv_pd`).
    pub iwupd: usize,
    /// `uk_attrs` ([`IrdmaUkAttrsLayout`]).
    pub uk_attrs: usize,
    /// `db` (8-byte pointer): the context's doorbell page; QP doorbells at +0, CQ arm
    /// doorbells at +0x40.
    pub db: usize,
}

/// Where the fields of `struct irdma_uk_attrs` are (from its start).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IrdmaUkAttrsLayout {
    /// `feature_flags` (`u64`; `IRDMA_FEATURE_*`, see [`crate::irdma::gen`]).
    pub feature_flags: usize,
    /// `max_hw_cq_size` (`u32`).
    pub max_hw_cq_size: usize,
    /// `max_hw_sq_chunk` (`u16`): a send WR never straddles this many SQ quanta.
    pub max_hw_sq_chunk: usize,
    /// `hw_rev` (`u8`: 1 GEN1, 2 GEN2, 3 GEN3).
    pub hw_rev: usize,
    /// `sizeof(struct irdma_uk_attrs)`.
    pub size: usize,
}

/// Where the fields of `struct irdma_ucq` are (from the start of the struct, which is the
/// `struct ibv_cq` an application holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IrdmaCqLayout {
    /// `vmr.ibv_mr` (the CQ buffer's registration): its `context` is at
    /// `vmr + IBV_MR_CONTEXT`, its `pd` at `vmr + IBV_MR_PD`.
    pub vmr: usize,
    /// `vmr_shadow_area.ibv_mr` (the shadow area's own registration on devices with
    /// `IRDMA_FEATURE_CQ_RESIZE`; zeroed otherwise).
    pub vmr_shadow_area: usize,
    /// `lock`: the `pthread_spinlock_t` rdma-core's poll takes.
    pub lock: usize,
    /// `buf_size` (`size_t`): bytes of the CQ buffer (CQE pages, plus the 64-byte shadow
    /// area without `IRDMA_FEATURE_CQ_RESIZE`).
    pub buf_size: usize,
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
    /// `cq.avoid_mem_cflct` (bit 0 of this byte): 64-byte CQEs.
    pub avoid_mem_cflct: usize,
    /// `resize_list.next` (8-byte pointer): the list is empty when it points at itself.
    pub resize_list: usize,
    /// Bytes from the start of the struct to the end of `resize_list`.
    pub size: usize,
}

/// Where the fields of `struct irdma_uqp` before its `qp` are (from the start of the
/// struct, which is the `struct ibv_qp` an application holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IrdmaUqpLayout {
    /// `send_cq` (8-byte pointer to the `irdma_ucq`, which is the `ibv_cq`).
    pub send_cq: usize,
    /// `recv_cq` (likewise).
    pub recv_cq: usize,
    /// `lock`: the QP's `pthread_spinlock_t` (`irdma_qp_uk.lock` points here).
    pub lock: usize,
    /// `qp`: the `struct irdma_qp_uk`, whose address is the completion context CQEs carry.
    pub qp: usize,
}

/// Where the fields of `struct irdma_qp_uk` are (from the start of `irdma_qp_uk`, which
/// sits at [`IrdmaUqpLayout::qp`] in `struct irdma_uqp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IrdmaQpLayout {
    /// `sq_base` (8-byte pointer): SQ quantum 0.
    pub sq_base: usize,
    /// `rq_base` (8-byte pointer): RQ quantum 0.
    pub rq_base: usize,
    /// `uk_attrs` (8-byte pointer to the context's `struct irdma_uk_attrs`).
    pub uk_attrs: usize,
    /// `wqe_alloc_db` (8-byte pointer): the context's doorbell page.
    pub wqe_alloc_db: usize,
    /// `sq_wrtrk_array` (8-byte pointer; entries of [`SQ_WRTRK_SIZE`] bytes).
    pub sq_wrtrk_array: usize,
    /// `rq_wrid_array` (8-byte pointer to `u64`s).
    pub rq_wrid_array: usize,
    /// `sq_ring` (`head`, `tail`, `size`; `u32` each).
    pub sq_ring: usize,
    /// `rq_ring` (`head`, `tail`, `size`; `u32` each).
    pub rq_ring: usize,
    /// `qp_id` (`u32`): what CQEs carry.
    pub qp_id: usize,
    /// `qp_caps` (`u32`; [`QP_CAPS_SEND_WITH_IMM`]).
    pub qp_caps: usize,
    /// `sq_size` (`u32`): SQ WQEs of the QP's largest size (the ring holds
    /// `sq_size << sq_shift` quanta).
    pub sq_size: usize,
    /// `rq_size` (`u32`): RQ WQEs (the ring's size).
    pub rq_size: usize,
    /// `conn_wqes` (`u16`).
    pub conn_wqes: usize,
    /// `qp_type` (`u8`).
    pub qp_type: usize,
    /// `rq_wqe_size` (`u8`): log2 of the RQ WQE size in quanta.
    pub rq_wqe_size: usize,
    /// `rq_wqe_size_multiplier` (`u8`): `1 << rq_wqe_size`.
    pub rq_wqe_size_multiplier: usize,
    /// The byte of bitfields ([`QP_FLAG_PUSH_MODE`], [`QP_FLAG_PUSH_DROPPED`],
    /// [`QP_FLAG_FIRST_SQ_WQ`]).
    pub flags: usize,
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
    /// `struct irdma_uvcontext`, from the `ibv_context`.
    pub ctx: IrdmaCtxLayout,
    /// `struct irdma_uk_attrs`.
    pub uk_attrs: IrdmaUkAttrsLayout,
    /// `struct irdma_ucq`.
    pub cq: IrdmaCqLayout,
    /// `struct irdma_uqp` up to its `qp`.
    pub uqp: IrdmaUqpLayout,
    /// `offsetof(struct irdma_uqp, qp)`: from the application's `ibv_qp` to `irdma_qp_uk`
    /// (the same as `uqp.qp`).
    pub uqp_qp: usize,
    /// `struct irdma_qp_uk`.
    pub qp: IrdmaQpLayout,
    /// `offsetof(struct irdma_uk_attrs, hw_rev)` (the same as `uk_attrs.hw_rev`).
    pub hw_rev: usize,
}

const CQ: IrdmaCqLayout = IrdmaCqLayout {
    vmr: offset_of!(Ucq, vmr),
    vmr_shadow_area: offset_of!(Ucq, vmr_shadow_area),
    lock: offset_of!(Ucq, lock),
    buf_size: offset_of!(Ucq, buf_size),
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

const UQP: IrdmaUqpLayout = IrdmaUqpLayout {
    send_cq: offset_of!(UqpPrefix, send_cq),
    recv_cq: offset_of!(UqpPrefix, recv_cq),
    lock: offset_of!(UqpPrefix, lock),
    qp: size_of::<UqpPrefix>(),
};

macro_rules! ctx_layout {
    ($t:ty) => {
        IrdmaCtxLayout {
            iwupd: IBV_CONTEXT_SIZE + offset_of!($t, iwupd),
            uk_attrs: IBV_CONTEXT_SIZE + offset_of!($t, uk_attrs),
            db: IBV_CONTEXT_SIZE + offset_of!($t, db),
        }
    };
}

macro_rules! uk_attrs_layout {
    ($t:ty) => {
        IrdmaUkAttrsLayout {
            feature_flags: offset_of!($t, feature_flags),
            max_hw_cq_size: offset_of!($t, max_hw_cq_size),
            max_hw_sq_chunk: offset_of!($t, max_hw_sq_chunk),
            hw_rev: offset_of!($t, hw_rev),
            size: size_of::<$t>(),
        }
    };
}

macro_rules! qp_layout {
    ($t:ty) => {
        IrdmaQpLayout {
            sq_base: offset_of!($t, sq_base),
            rq_base: offset_of!($t, rq_base),
            uk_attrs: offset_of!($t, uk_attrs),
            wqe_alloc_db: offset_of!($t, wqe_alloc_db),
            sq_wrtrk_array: offset_of!($t, sq_wrtrk_array),
            rq_wrid_array: offset_of!($t, rq_wrid_array),
            sq_ring: offset_of!($t, sq_ring),
            rq_ring: offset_of!($t, rq_ring),
            qp_id: offset_of!($t, qp_id),
            qp_caps: offset_of!($t, qp_caps),
            sq_size: offset_of!($t, sq_size),
            rq_size: offset_of!($t, rq_size),
            conn_wqes: offset_of!($t, conn_wqes),
            qp_type: offset_of!($t, qp_type),
            rq_wqe_size: offset_of!($t, rq_wqe_size),
            rq_wqe_size_multiplier: offset_of!($t, rq_wqe_size_multiplier),
            flags: offset_of!($t, flags),
            back_qp: offset_of!($t, back_qp),
            lock: offset_of!($t, lock),
            size: size_of::<$t>(),
        }
    };
}

macro_rules! row {
    ($first:expr, $last:expr, $attrs:ty, $qp:ty) => {
        IrdmaLayout {
            first: $first,
            last: $last,
            ctx: ctx_layout!(UvcontextTail<$attrs>),
            uk_attrs: uk_attrs_layout!($attrs),
            cq: CQ,
            uqp: UQP,
            uqp_qp: UQP.qp,
            qp: qp_layout!($qp),
            hw_rev: offset_of!($attrs, hw_rev),
        }
    };
}

/// The private irdma layouts, oldest first; the ranges do not overlap. v64.0 is the
/// newest rdma-core release; master (65.0 in development) has v64.0's text.
pub const IRDMA_LAYOUTS: [IrdmaLayout; 3] = [
    row!((44, 0), (47, 9), UkAttrsV44, QpUkV44),
    row!((48, 0), (63, 1), UkAttrsV48, QpUkV44),
    row!((64, 0), (64, 0), UkAttrsV64, QpUkV64),
];

const_assert_eq!(IRDMA_LAYOUTS[0].cq.size, 512);
const_assert_eq!(IRDMA_LAYOUTS[0].uqp_qp, 272);
const_assert_eq!(IRDMA_LAYOUTS[0].qp.size, 200);
const_assert_eq!(IRDMA_LAYOUTS[0].qp.flags, 176);
const_assert_eq!(IRDMA_LAYOUTS[2].qp.size, 208);
const_assert_eq!(IRDMA_LAYOUTS[2].qp.flags, 184);
const_assert_eq!(IRDMA_LAYOUTS[0].hw_rev, 38);
const_assert_eq!(IRDMA_LAYOUTS[1].hw_rev, 40);
const_assert_eq!(IRDMA_LAYOUTS[2].hw_rev, 44);
const_assert_eq!(IRDMA_LAYOUTS[0].ctx.db, 376);
const_assert_eq!(IRDMA_LAYOUTS[1].ctx.db, 384);
const_assert_eq!(IRDMA_LAYOUTS[2].ctx.db, 384);

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

    /// Bytes from the `ibv_context` pointer that an attach reads: up to the end of `db`.
    pub const fn ctx_span(&self) -> usize {
        self.ctx.db + 8
    }

    /// Bytes from the `ibv_qp` pointer that an attach reads: up to the end of
    /// `irdma_qp_uk.lock`.
    pub const fn uqp_span(&self) -> usize {
        self.uqp.qp + self.qp.size
    }

    /// Every QP field this row names with the bytes it takes, at their offsets from the
    /// `ibv_qp` pointer, in order: what an image builder writes and a reader checks.
    pub fn qp_fields(&self) -> [(&'static str, usize, usize); 22] {
        let (u, q) = (&self.uqp, &self.qp);
        let at = |off: usize| u.qp + off;
        [
            ("send_cq", u.send_cq, 8),
            ("recv_cq", u.recv_cq, 8),
            ("sq_base", at(q.sq_base), 8),
            ("rq_base", at(q.rq_base), 8),
            ("uk_attrs", at(q.uk_attrs), 8),
            ("wqe_alloc_db", at(q.wqe_alloc_db), 8),
            ("sq_wrtrk_array", at(q.sq_wrtrk_array), 8),
            ("rq_wrid_array", at(q.rq_wrid_array), 8),
            ("sq_ring", at(q.sq_ring), 12),
            ("rq_ring", at(q.rq_ring), 12),
            ("qp_id", at(q.qp_id), 4),
            ("qp_caps", at(q.qp_caps), 4),
            ("sq_size", at(q.sq_size), 4),
            ("rq_size", at(q.rq_size), 4),
            ("conn_wqes", at(q.conn_wqes), 2),
            ("qp_type", at(q.qp_type), 1),
            ("rq_wqe_size", at(q.rq_wqe_size), 1),
            ("rq_wqe_size_multiplier", at(q.rq_wqe_size_multiplier), 1),
            ("flags", at(q.flags), 1),
            ("back_qp", at(q.back_qp), 8),
            ("lock", at(q.lock), 8),
            ("uqp.lock", u.lock, 4),
        ]
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
            assert!(c.vmr >= VERBS_CQ_SIZE && c.vmr_shadow_area >= c.vmr + VERBS_MR_SIZE);
            assert!(c.lock >= c.vmr_shadow_area + VERBS_MR_SIZE);
            assert!(c.cq_base < c.cq_ring && c.cq_ring + 12 <= c.polarity && c.polarity < c.resize_list);
            for off in [c.uqp, c.buf_size, c.cq_base, c.cqe_alloc_db, c.cq_ack_db, c.shadow_area, c.resize_list] {
                assert_eq!(off % 8, 0);
            }
            for (name, off, len) in row.qp_fields() {
                // A ring is three u32s; every other field is aligned to its size.
                let align = if len == 12 { 4 } else { len };
                assert_eq!(off % align, 0, "{name} at {off} misaligned");
                assert!(off + len <= row.uqp_span(), "{name} past the struct");
            }
            for off in [q.sq_base, q.rq_base, q.uk_attrs, q.sq_wrtrk_array, q.rq_wrid_array, q.back_qp, q.lock] {
                assert_eq!(off % 8, 0);
                assert!(off + 8 <= q.size);
            }
            assert_eq!(q.flags, q.rq_wqe_size_multiplier + 1);
            assert_eq!(row.uqp_qp, row.uqp.qp);
            assert!(row.uqp.qp >= IBV_QP_SIZE && row.uqp.lock + 4 <= row.uqp.qp);
            assert_eq!(row.hw_rev, row.uk_attrs.hw_rev);
            assert!(row.uk_attrs.max_hw_sq_chunk + 2 <= row.uk_attrs.hw_rev && row.uk_attrs.hw_rev < row.uk_attrs.size);
            assert_eq!(row.ctx.uk_attrs + row.uk_attrs.size, row.ctx.db);
            assert_eq!(row.ctx.iwupd, IBV_CONTEXT_SIZE);
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
