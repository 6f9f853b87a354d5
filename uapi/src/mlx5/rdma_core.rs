//! rdma-core's private mlx5 provider structs that an attach to rdma-core's own CQs, QPs,
//! SRQs and receive WQs reads (`providers/mlx5/mlx5.h`: `struct mlx5_cq`, `struct mlx5_qp`,
//! `struct mlx5_wq`, `struct mlx5_srq`, `struct mlx5_rwq`),
//! as a table of byte offsets per release range, for x86_64 (LP64, glibc).
//! The `wr_id` tables and queue tails live here: `struct mlx5dv_qp` (what `mlx5dv_init_obj`
//! gives, `providers/mlx5/mlx5.c` `mlx5dv_get_qp`) has no `wrid`, `wqe_head` or `wr_data`.
//!
//! ```c
//! struct mlx5_wq {                    /* the same in every release of the table */
//!         uint64_t *wrid;  unsigned *wqe_head;  struct mlx5_spinlock lock;
//!         unsigned wqe_cnt, max_post, head, tail, cur_post;
//!         int max_gs, qp_state_max_gs, wqe_shift, offset;
//!         void *qend;  uint32_t *wr_data;
//! };
//! struct mlx5_qp {
//!         struct mlx5_resource rsc;   /* { enum type; uint32_t rsn; } */
//!         struct verbs_qp verbs_qp;   /* union { ibv_qp; ibv_qp_ex; }, comp_mask, xrcd */
//!         struct mlx5dv_qp_ex dv_qp;  struct ibv_qp *ibv_qp;
//!         struct mlx5_buf buf;  int max_inline_data, buf_size;
//!         struct mlx5_buf sq_buf;  int sq_buf_size;  struct mlx5_bf *bf;
//!         ... new post send API state ...
//!         uint8_t fm_cache, sq_signal_bits;  void *sq_start;
//!         struct mlx5_wq sq;
//!         __be32 *db;  [v64: struct ibv_buf *dbrec_ibv_buf;]  bool custom_db;
//!         struct mlx5_wq rq;
//!         ...
//! };
//! struct mlx5_rwq {                  /* the same text in every release of the table */
//!         struct mlx5_resource rsc;  struct ibv_wq wq;
//!         struct mlx5_buf buf;  int buf_size;  struct mlx5_wq rq;
//!         __be32 *db;  bool custom_db;  void *pbuff;  __be32 *recv_db;  int wq_sig;
//! };
//! struct mlx5_cq {
//!         struct verbs_cq verbs_cq;   /* union { ibv_cq; ibv_cq_ex; } */
//!         struct mlx5_buf buf_a, buf_b, *active_buf, *resize_buf;
//!         int resize_cqes, active_cqes;  struct mlx5_spinlock lock;
//!         uint32_t cqn, cons_index;  __be32 *dbrec;  [v64: struct ibv_buf *dbrec_ibv_buf;]
//!         bool custom_db;  int arm_sn;
//!         ...
//! };
//! ```
//!
//! `arm_sn` is what the mlx5 attach reads before each arm: libibverbs' `ibv_get_cq_event`
//! advances it (through the provider's `cq_event`, `mlx5_cq_event`) for every event read,
//! whoever reads it.
//!
//! Read in the rdma-core tree at every tag v44.0 to v64.0, the heads of the stable-v44 to
//! stable-v63 branches, and master at 691953d8 (`PACKAGE_VERSION` 65.0, not released: v64.0
//! is the newest release tag). Four layouts of the fields read here:
//!
//! - v44.0-v44.12: `struct ibv_qp_ex` (inside `verbs_qp`) ends at `wr_atomic_write`.
//! - v45.0-v47.9: `ibv_qp_ex` gains `wr_flush` (one function pointer): everything after
//!   `verbs_qp` moves 8 bytes.
//! - v48.0-v63.1: `struct mlx5_srq` appends `free_wqe_bitmap` and `nwqes`, and the SRQ's
//!   free list changes hands ("mlx5: Enhance SRQ performance"): `mlx5_free_srq_wqe` no
//!   longer links a freed WQE behind the list's tail in the WQE buffer, it sets the WQE's
//!   bit in `free_wqe_bitmap`, and `mlx5_post_srq_recv` links the freed WQEs in when the
//!   list runs dry ([`SrqFree`]).
//! - v64.0 (and master): `struct mlx5_buf` starts with a `struct ibv_buf` (address, size,
//!   pd, dmabuf fd) instead of address and length and drops `mparent_domain` (64 → 72
//!   bytes), and `struct mlx5_qp` and `struct mlx5_cq` gain `dbrec_ibv_buf` after their
//!   doorbell record pointer (`struct mlx5_srq` does not: it keeps `db`, `custom_db`,
//!   `counter`; nor does `struct mlx5_rwq`, whose fields after `buf` move 8 bytes). (`struct mlx5_cq` up to `arm_sn` is otherwise the same text in every release
//!   read, `ibv_cq_ex` too.)
//!
//! The offsets agree with a C `offsetof` probe that declares these structs as each
//! release's `mlx5.h` does (the header is private) over rdma-core 44's installed `verbs.h`
//! and `mlx5dv.h`, with `ibv_qp_ex`, `mlx5_buf` and `mlx5_srq` changed as listed for the
//! later rows.
//! Nothing here is bindgen output: the root crate's glue asserts the public sizes
//! ([`IBV_QP_SIZE`], [`MLX5DV_QP_EX_SIZE`], [`IBV_SRQ_SIZE`], the `ibv_qp` offsets) against bindgen's
//! structs, which ties the table to the headers the build saw.

use core::mem::{offset_of, size_of};
use static_assertions::const_assert_eq;

/// `sizeof(struct ibv_qp)` on x86_64 glibc.
pub const IBV_QP_SIZE: usize = 160;
/// `offsetof(struct ibv_qp, qp_num)`.
pub const IBV_QP_QP_NUM_OFFSET: usize = 52;
/// `sizeof(struct ibv_qp_ex)` in rdma-core v44 (ends at `wr_atomic_write`).
pub const IBV_QP_EX_SIZE_V44: usize = 352;
/// `sizeof(struct ibv_qp_ex)` from v45 (`wr_flush` appended).
pub const IBV_QP_EX_SIZE_V45: usize = IBV_QP_EX_SIZE_V44 + 8;
/// `sizeof(struct ibv_cq_ex)` on x86_64 glibc (`verbs.h`; the same text v44 to v65): the
/// size of `struct verbs_cq`, the union `struct mlx5_cq` starts with.
pub const IBV_CQ_EX_SIZE: usize = 288;
/// `offsetof(struct ibv_cq, channel)`: the completion channel the CQ was created on.
pub const IBV_CQ_CHANNEL_OFFSET: usize = 8;
/// `sizeof(struct mlx5dv_qp_ex)` (public, `mlx5dv.h`; the same text v44 to v65).
pub const MLX5DV_QP_EX_SIZE: usize = 104;
/// `sizeof(struct ibv_srq)` on x86_64 glibc.
pub const IBV_SRQ_SIZE: usize = 128;
/// `MLX5_RSC_TYPE_QP`, the first value of `enum mlx5_rsc_type`: `rsc.type` of a QP.
pub const MLX5_RSC_TYPE_QP: u32 = 0;
/// `MLX5_RSC_TYPE_XSRQ`: `rsc.type` of an XRC SRQ (`enum mlx5_rsc_type` is QP, XSRQ, SRQ,
/// RWQ, INVAL in every release of the table). An XRC SRQ is a `struct mlx5_srq` too
/// (`mlx5_create_xrc_srq`), with its user index in `rsc.rsn` on a CQE-version-1 context.
pub const MLX5_RSC_TYPE_XSRQ: u32 = 1;
/// `MLX5_RSC_TYPE_SRQ`: `rsc.type` of a basic SRQ.
pub const MLX5_RSC_TYPE_SRQ: u32 = 2;
/// `MLX5_RSC_TYPE_RWQ`: `rsc.type` of a receive work queue (`ibv_create_wq`).
pub const MLX5_RSC_TYPE_RWQ: u32 = 3;
/// `sizeof(struct ibv_wq)` on x86_64 glibc (`verbs.h`; the same text v44 to v65).
pub const IBV_WQ_SIZE: usize = 152;
/// `offsetof(struct mlx5_wqe_srq_next_seg, next_wqe_index)` (`mlx5dv.h`): where an SRQ
/// WQE's big-endian free-list link is.
pub const SRQ_NEXT_WQE_INDEX_OFFSET: usize = 2;

/// `struct mlx5_spinlock`: a `pthread_spinlock_t` and two ints.
#[repr(C)]
struct Spinlock {
    lock: u32,
    in_use: i32,
    need_lock: i32,
}

/// `struct mlx5_wq`, pointers as `u64`.
#[repr(C)]
struct Wq {
    wrid: u64,
    wqe_head: u64,
    lock: Spinlock,
    wqe_cnt: u32,
    max_post: u32,
    head: u32,
    tail: u32,
    cur_post: u32,
    max_gs: i32,
    qp_state_max_gs: i32,
    wqe_shift: i32,
    offset: i32,
    qend: u64,
    wr_data: u64,
}

const_assert_eq!(offset_of!(Wq, lock), 16);
const_assert_eq!(offset_of!(Wq, wqe_cnt), 28);
const_assert_eq!(offset_of!(Wq, max_post), 32);
const_assert_eq!(offset_of!(Wq, head), 36);
const_assert_eq!(offset_of!(Wq, tail), 40);
const_assert_eq!(offset_of!(Wq, cur_post), 44);
const_assert_eq!(offset_of!(Wq, wqe_shift), 56);
const_assert_eq!(offset_of!(Wq, offset), 60);
const_assert_eq!(offset_of!(Wq, qend), 64);
const_assert_eq!(offset_of!(Wq, wr_data), 72);
const_assert_eq!(size_of::<Wq>(), 80);

/// `struct mlx5_buf` before v64.
#[repr(C)]
struct BufV44 {
    buf: u64,
    length: u64,
    base: i32,
    hmem: u64,
    kind: u32,
    resource_type: u64,
    req_alignment: u64,
    mparent_domain: u64,
}
const_assert_eq!(size_of::<BufV44>(), 64);

/// `struct ibv_buf` (`libibverbs/driver.h`, v64).
#[repr(C)]
struct IbvBuf {
    addr: u64,
    size: u64,
    pd: u64,
    dmabuf_fd: i32,
}
const_assert_eq!(size_of::<IbvBuf>(), 32);

/// `struct mlx5_buf` from v64: a `struct ibv_buf` first.
#[repr(C)]
struct BufV64 {
    ibv_buf: IbvBuf,
    base: i32,
    hmem: u64,
    kind: u32,
    resource_type: u64,
    req_alignment: u64,
}
const_assert_eq!(size_of::<BufV64>(), 72);

/// `struct verbs_qp`: the union of `ibv_qp` and `ibv_qp_ex` (`EX` bytes), then
/// `comp_mask` and `xrcd`.
#[repr(C)]
struct VerbsQp<const EX: usize> {
    qp_ex: [u8; EX],
    comp_mask: u32,
    xrcd: u64,
}

/// `struct mlx5_qp` up to the end of `rq`, for a `verbs_qp` of `EX` bytes, a buffer type
/// `B` and `DB` words (0 or 1) of `dbrec_ibv_buf` after `db`.
#[repr(C)]
struct Qp<const EX: usize, B, const DB: usize> {
    rsc_type: u32,
    rsn: u32,
    verbs_qp: VerbsQp<EX>,
    dv_qp: [u64; MLX5DV_QP_EX_SIZE / 8],
    ibv_qp: u64,
    buf: B,
    max_inline_data: i32,
    buf_size: i32,
    sq_buf: B,
    sq_buf_size: i32,
    bf: u64,
    inl_wqe: u8,
    cur_setters_cnt: u8,
    num_mkey_setters: u8,
    fm_cache_rb: u8,
    err: i32,
    nreq: i32,
    cur_size: u32,
    cur_post_rb: u32,
    cur_eth: u64,
    cur_data: u64,
    cur_ctrl: u64,
    cur_mkey: u64,
    fm_cache: u8,
    sq_signal_bits: u8,
    sq_start: u64,
    sq: Wq,
    db: u64,
    dbrec_ibv_buf: [u64; DB],
    custom_db: u8,
    rq: Wq,
}

type QpV44 = Qp<IBV_QP_EX_SIZE_V44, BufV44, 0>;
type QpV45 = Qp<IBV_QP_EX_SIZE_V45, BufV44, 0>;
type QpV64 = Qp<IBV_QP_EX_SIZE_V45, BufV64, 1>;

// What the probe printed for each layout.
const_assert_eq!(offset_of!(QpV44, verbs_qp), 8);
const_assert_eq!(offset_of!(QpV44, dv_qp), 376);
const_assert_eq!(offset_of!(QpV44, ibv_qp), 480);
const_assert_eq!(offset_of!(QpV44, buf), 488);
const_assert_eq!(offset_of!(QpV44, sq_buf), 560);
const_assert_eq!(offset_of!(QpV44, sq_buf_size), 624);
const_assert_eq!(offset_of!(QpV44, sq_start), 704);
const_assert_eq!(offset_of!(QpV44, sq), 712);
const_assert_eq!(offset_of!(QpV44, db), 792);
const_assert_eq!(offset_of!(QpV44, custom_db), 800);
const_assert_eq!(offset_of!(QpV44, rq), 808);
const_assert_eq!(offset_of!(QpV45, dv_qp), 384);
const_assert_eq!(offset_of!(QpV45, ibv_qp), 488);
const_assert_eq!(offset_of!(QpV45, buf), 496);
const_assert_eq!(offset_of!(QpV45, sq_buf), 568);
const_assert_eq!(offset_of!(QpV45, sq_buf_size), 632);
const_assert_eq!(offset_of!(QpV45, sq_start), 712);
const_assert_eq!(offset_of!(QpV45, sq), 720);
const_assert_eq!(offset_of!(QpV45, db), 800);
const_assert_eq!(offset_of!(QpV45, rq), 816);
const_assert_eq!(offset_of!(QpV64, ibv_qp), 488);
const_assert_eq!(offset_of!(QpV64, buf), 496);
const_assert_eq!(offset_of!(QpV64, sq_buf), 576);
const_assert_eq!(offset_of!(QpV64, sq_buf_size), 648);
const_assert_eq!(offset_of!(QpV64, sq_start), 728);
const_assert_eq!(offset_of!(QpV64, sq), 736);
const_assert_eq!(offset_of!(QpV64, db), 816);
const_assert_eq!(offset_of!(QpV64, custom_db), 832);
const_assert_eq!(offset_of!(QpV64, rq), 840);

/// `struct verbs_srq`: `ibv_srq`, `srq_type`, `xrcd`, `cq`, `srq_num`.
#[repr(C)]
struct VerbsSrq {
    srq: [u64; IBV_SRQ_SIZE / 8],
    srq_type: u32,
    xrcd: u64,
    cq: u64,
    srq_num: u32,
}
const_assert_eq!(size_of::<VerbsSrq>(), 160);
const_assert_eq!(offset_of!(VerbsSrq, srq_type), 128);
const_assert_eq!(offset_of!(VerbsSrq, cq), 144);
const_assert_eq!(offset_of!(VerbsSrq, srq_num), 152);

/// The fields v48.0 appends to `struct mlx5_srq`.
#[repr(C)]
struct SrqBitmap {
    free_wqe_bitmap: u64,
    nwqes: u32,
}

/// `struct mlx5_srq`, with a buffer type `B` and `X` the fields appended after
/// `unexp_out` (`()` before v48, [`SrqBitmap`] from v48).
#[repr(C)]
struct Srq<B, X> {
    rsc_type: u32,
    rsn: u32,
    vsrq: VerbsSrq,
    buf: B,
    lock: Spinlock,
    wrid: u64,
    srqn: u32,
    max: i32,
    max_gs: i32,
    wqe_shift: i32,
    head: i32,
    tail: i32,
    waitq_head: i32,
    waitq_tail: i32,
    db: u64,
    custom_db: u8,
    counter: u16,
    wq_sig: i32,
    cmd_qp: u64,
    tm_list: u64,
    tm_head: u64,
    tm_tail: u64,
    op: u64,
    op_head: i32,
    op_tail: i32,
    unexp_in: i32,
    unexp_out: i32,
    appended: X,
}

type SrqV44 = Srq<BufV44, ()>;
type SrqV48 = Srq<BufV44, SrqBitmap>;
type SrqV64 = Srq<BufV64, SrqBitmap>;

const_assert_eq!(offset_of!(SrqV44, vsrq), 8);
const_assert_eq!(offset_of!(SrqV44, buf), 168);
const_assert_eq!(offset_of!(SrqV44, lock), 232);
const_assert_eq!(offset_of!(SrqV44, wrid), 248);
const_assert_eq!(offset_of!(SrqV44, srqn), 256);
const_assert_eq!(offset_of!(SrqV44, max), 260);
const_assert_eq!(offset_of!(SrqV44, wqe_shift), 268);
const_assert_eq!(offset_of!(SrqV44, head), 272);
const_assert_eq!(offset_of!(SrqV44, tail), 276);
const_assert_eq!(offset_of!(SrqV44, waitq_head), 280);
const_assert_eq!(offset_of!(SrqV44, db), 288);
const_assert_eq!(offset_of!(SrqV44, counter), 298);
const_assert_eq!(offset_of!(SrqV44, wq_sig), 300);
const_assert_eq!(offset_of!(SrqV44, cmd_qp), 304);
const_assert_eq!(offset_of!(SrqV44, unexp_out), 356);
const_assert_eq!(size_of::<SrqV44>(), 360);
const_assert_eq!(offset_of!(SrqV48, counter), 298);
const_assert_eq!(offset_of!(SrqV48, appended) + offset_of!(SrqBitmap, free_wqe_bitmap), 360);
const_assert_eq!(offset_of!(SrqV48, appended) + offset_of!(SrqBitmap, nwqes), 368);
const_assert_eq!(size_of::<SrqV48>(), 376);
const_assert_eq!(offset_of!(SrqV64, lock), 240);
const_assert_eq!(offset_of!(SrqV64, wrid), 256);
const_assert_eq!(offset_of!(SrqV64, head), 280);
const_assert_eq!(offset_of!(SrqV64, db), 296);
const_assert_eq!(offset_of!(SrqV64, counter), 306);
const_assert_eq!(offset_of!(SrqV64, cmd_qp), 312);
const_assert_eq!(offset_of!(SrqV64, appended) + offset_of!(SrqBitmap, free_wqe_bitmap), 368);
const_assert_eq!(offset_of!(SrqV64, appended) + offset_of!(SrqBitmap, nwqes), 376);
const_assert_eq!(size_of::<SrqV64>(), 384);

/// `struct mlx5_rwq`, with a buffer type `B`.
#[repr(C)]
struct Rwq<B> {
    rsc_type: u32,
    rsn: u32,
    wq: [u64; IBV_WQ_SIZE / 8],
    buf: B,
    buf_size: i32,
    rq: Wq,
    db: u64,
    custom_db: u8,
    pbuff: u64,
    recv_db: u64,
    wq_sig: i32,
}

type RwqV44 = Rwq<BufV44>;
type RwqV64 = Rwq<BufV64>;

// What a C `offsetof` probe printed for each layout (`struct mlx5_rwq` declared as every
// release's mlx5.h has it, with each `struct mlx5_buf`, over rdma-core 44's verbs.h).
const_assert_eq!(offset_of!(RwqV44, wq), 8);
const_assert_eq!(offset_of!(RwqV44, buf), 160);
const_assert_eq!(offset_of!(RwqV44, buf_size), 224);
const_assert_eq!(offset_of!(RwqV44, rq), 232);
const_assert_eq!(offset_of!(RwqV44, db), 312);
const_assert_eq!(offset_of!(RwqV44, custom_db), 320);
const_assert_eq!(offset_of!(RwqV44, pbuff), 328);
const_assert_eq!(offset_of!(RwqV44, recv_db), 336);
const_assert_eq!(offset_of!(RwqV44, wq_sig), 344);
const_assert_eq!(size_of::<RwqV44>(), 352);
const_assert_eq!(offset_of!(RwqV64, buf), 160);
const_assert_eq!(offset_of!(RwqV64, buf_size), 232);
const_assert_eq!(offset_of!(RwqV64, rq), 240);
const_assert_eq!(offset_of!(RwqV64, db), 320);
const_assert_eq!(offset_of!(RwqV64, pbuff), 336);
const_assert_eq!(offset_of!(RwqV64, recv_db), 344);
const_assert_eq!(offset_of!(RwqV64, wq_sig), 352);
const_assert_eq!(size_of::<RwqV64>(), 360);

/// `struct mlx5_cq` up to `flags`, for a buffer type `B` and `DB` words (0 or 1) of
/// `dbrec_ibv_buf` after `dbrec`. After `arm_sn` the text is, in every release read:
/// `int cqe_sz, resize_cqe_sz, stall_next_poll, stall_enable; uint64_t stall_last_count;
/// int stall_adaptive_enable, stall_cycles; struct mlx5_resource *cur_rsc; struct
/// mlx5_srq *cur_srq; struct mlx5_cqe64 *cqe64; uint32_t flags;`.
#[repr(C)]
struct Cq<B, const DB: usize> {
    verbs_cq: [u64; IBV_CQ_EX_SIZE / 8],
    buf_a: B,
    buf_b: B,
    active_buf: u64,
    resize_buf: u64,
    resize_cqes: i32,
    active_cqes: i32,
    lock: Spinlock,
    cqn: u32,
    cons_index: u32,
    dbrec: u64,
    dbrec_ibv_buf: [u64; DB],
    custom_db: u8,
    arm_sn: i32,
    cqe_sz: i32,
    resize_cqe_sz: i32,
    stall_next_poll: i32,
    stall_enable: i32,
    stall_last_count: u64,
    stall_adaptive_enable: i32,
    stall_cycles: i32,
    cur_rsc: u64,
    cur_srq: u64,
    cqe64: u64,
    flags: u32,
}

type CqV44 = Cq<BufV44, 0>;
type CqV64 = Cq<BufV64, 1>;

// What a C `offsetof` probe printed for each layout (the structs declared as each
// release's mlx5.h has them, over rdma-core 44's installed verbs.h).
const_assert_eq!(offset_of!(CqV44, buf_a), 288);
const_assert_eq!(offset_of!(CqV44, buf_b), 352);
const_assert_eq!(offset_of!(CqV44, active_buf), 416);
const_assert_eq!(offset_of!(CqV44, cqn), 452);
const_assert_eq!(offset_of!(CqV44, cons_index), 456);
const_assert_eq!(offset_of!(CqV44, dbrec), 464);
const_assert_eq!(offset_of!(CqV44, custom_db), 472);
const_assert_eq!(offset_of!(CqV44, arm_sn), 476);
// `cqe_sz` and `flags` also against `offsetof` over the v44.0 and v64.0 trees' own
// `providers/mlx5/mlx5.h` (v44.0: 480 and 536; v64.0: 504 and 560).
const_assert_eq!(offset_of!(CqV44, cqe_sz), 480);
const_assert_eq!(offset_of!(CqV44, flags), 536);
const_assert_eq!(offset_of!(CqV64, buf_a), 288);
const_assert_eq!(offset_of!(CqV64, buf_b), 360);
const_assert_eq!(offset_of!(CqV64, active_buf), 432);
const_assert_eq!(offset_of!(CqV64, cqn), 468);
const_assert_eq!(offset_of!(CqV64, cons_index), 472);
const_assert_eq!(offset_of!(CqV64, dbrec), 480);
const_assert_eq!(offset_of!(CqV64, dbrec_ibv_buf), 488);
const_assert_eq!(offset_of!(CqV64, custom_db), 496);
const_assert_eq!(offset_of!(CqV64, arm_sn), 500);
const_assert_eq!(offset_of!(CqV64, cqe_sz), 504);
const_assert_eq!(offset_of!(CqV64, flags), 560);

/// Where the fields of `struct mlx5_cq` are (byte offsets from the start of the struct,
/// where its public `struct ibv_cq` is too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mlx5CqLayout {
    /// `buf_a`'s address word (`buf_a.buf`, or `buf_a.ibv_buf.addr` from v64).
    pub buf_a: usize,
    /// `buf_b`'s address word.
    pub buf_b: usize,
    /// `active_buf` (8-byte pointer): `&buf_a` or `&buf_b`, the ring in use.
    pub active_buf: usize,
    /// `cqn` (`u32`).
    pub cqn: usize,
    /// `cons_index` (`u32`): rdma-core's consumer counter, stale while dvcq polls.
    pub cons_index: usize,
    /// `dbrec` (8-byte pointer): the CQ's doorbell record.
    pub dbrec: usize,
    /// `arm_sn` (`int`): completion events read for the CQ (`mlx5_cq_event`).
    pub arm_sn: usize,
    /// `cqe_sz` (`int`), right after `arm_sn`: the CQE size `mlx5dv_init_obj` reports
    /// (`mlx5dv_cq.cqe_size` is read from it), the public fact that pins `arm_sn`'s offset.
    pub cqe_sz: usize,
    /// `flags` (`uint32_t`): `MLX5_CQ_FLAGS_*`, where `mlx5dv_init_obj` sets
    /// [`MLX5_CQ_FLAGS_DV_OWNED`].
    pub flags: usize,
    /// Bytes from the start of the struct to the end of `flags`: what a reader may touch.
    pub size: usize,
}

/// `MLX5_CQ_FLAGS_DV_OWNED` (`providers/mlx5/mlx5.h`, `1 << 5` in every release read):
/// set by `mlx5dv_init_obj(MLX5DV_OBJ_CQ)` (`mlx5dv_get_cq`); while it is set rdma-core's
/// `__mlx5_cq_clean` leaves the CQEs of a destroyed QP (or one moved to RESET) in the ring.
pub const MLX5_CQ_FLAGS_DV_OWNED: u32 = 1 << 5;

macro_rules! cq_layout {
    ($t:ty) => {
        Mlx5CqLayout {
            buf_a: offset_of!($t, buf_a),
            buf_b: offset_of!($t, buf_b),
            active_buf: offset_of!($t, active_buf),
            cqn: offset_of!($t, cqn),
            cons_index: offset_of!($t, cons_index),
            dbrec: offset_of!($t, dbrec),
            arm_sn: offset_of!($t, arm_sn),
            cqe_sz: offset_of!($t, cqe_sz),
            flags: offset_of!($t, flags),
            size: offset_of!($t, flags) + 4,
        }
    };
}

/// Where the fields of one `struct mlx5_wq` are, from the start of the queue struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mlx5WqLayout {
    /// `wrid`: the `uint64_t` wr_id table (8-byte pointer).
    pub wrid: usize,
    /// `wqe_head`: the `unsigned` table of each WQE's work-request count (8-byte pointer).
    pub wqe_head: usize,
    /// `wqe_cnt` (`u32`).
    pub wqe_cnt: usize,
    /// `max_post` (`u32`): what a post may have outstanding.
    pub max_post: usize,
    /// `head` (`u32`): work requests posted.
    pub head: usize,
    /// `tail` (`u32`): work requests retired, written by the poll.
    pub tail: usize,
    /// `cur_post` (`u32`): the next WQE index, in 64-byte blocks (send queue).
    pub cur_post: usize,
    /// `wqe_shift` (`i32`): log2 of the WQE stride.
    pub wqe_shift: usize,
    /// `offset` (`i32`): the queue's byte offset in the QP buffer.
    pub offset: usize,
    /// `wr_data` (8-byte pointer): the send queue's per-WQE completion opcode table.
    pub wr_data: usize,
    /// `sizeof(struct mlx5_wq)`.
    pub size: usize,
}

/// `struct mlx5_wq`'s offsets: one layout for every release in the table.
pub const MLX5_WQ: Mlx5WqLayout = Mlx5WqLayout {
    wrid: offset_of!(Wq, wrid),
    wqe_head: offset_of!(Wq, wqe_head),
    wqe_cnt: offset_of!(Wq, wqe_cnt),
    max_post: offset_of!(Wq, max_post),
    head: offset_of!(Wq, head),
    tail: offset_of!(Wq, tail),
    cur_post: offset_of!(Wq, cur_post),
    wqe_shift: offset_of!(Wq, wqe_shift),
    offset: offset_of!(Wq, offset),
    wr_data: offset_of!(Wq, wr_data),
    size: size_of::<Wq>(),
};

/// Where the fields of `struct mlx5_qp` are (byte offsets from the start of the struct;
/// the `struct ibv_qp` an application holds is at [`Mlx5QpLayout::ibv_qp`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mlx5QpLayout {
    /// `rsc.type` (`u32`, [`MLX5_RSC_TYPE_QP`] for a QP).
    pub rsc_type: usize,
    /// `rsc.rsn` (`u32`): the user index on a CQE-version-1 context, else the QPN.
    pub rsn: usize,
    /// `verbs_qp.qp`: the public `struct ibv_qp`.
    pub ibv_qp: usize,
    /// `ibv_qp`: the struct's pointer back to its own `verbs_qp.qp`.
    pub ibv_qp_ptr: usize,
    /// `buf`'s address word (`buf.buf`, or `buf.ibv_buf.addr` from v64).
    pub buf: usize,
    /// `sq_buf`'s address word (raw-packet QPs).
    pub sq_buf: usize,
    /// `sq_buf_size` (`i32`): non-zero for a raw-packet QP's separate send buffer.
    pub sq_buf_size: usize,
    /// `sq_start` (8-byte pointer): where send WQEs begin.
    pub sq_start: usize,
    /// `sq` ([`Mlx5WqLayout`]).
    pub sq: usize,
    /// `db` (8-byte pointer): the QP's doorbell record.
    pub db: usize,
    /// `rq` ([`Mlx5WqLayout`]).
    pub rq: usize,
    /// Bytes from the start of the struct to the end of `rq`: what a reader may touch.
    pub size: usize,
}

/// How rdma-core's poll hands a completed SRQ WQE back to the SRQ's free list
/// (`mlx5_free_srq_wqe`, `providers/mlx5/srq.c`), which `mlx5_post_srq_recv` takes WQEs
/// from. The list itself is threaded through the WQE buffer: each WQE starts with a
/// `struct mlx5_wqe_srq_next_seg` whose `next_wqe_index` (big-endian, at byte 2) names the
/// next free WQE, from `head` (posted next) to `tail`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SrqFree {
    /// v44-v47: the freed WQE `ind` is linked behind the tail at once:
    /// `wqe(tail).next_wqe_index = ind; tail = ind`.
    LinkTail,
    /// v48 on: `bitmap_set_bit(free_wqe_bitmap, ind)` (bit `ind % 64` of the `unsigned
    /// long` at `ind / 64`); the post path links set bits in when `head == tail`.
    Bitmap {
        /// `free_wqe_bitmap` (8-byte pointer to `max` bits).
        bitmap: usize,
        /// `nwqes` (`u32`): WQEs the post path may link in (the list's, without the
        /// ODP wait queue's).
        nwqes: usize,
    },
}

/// Where the fields of `struct mlx5_srq` are (from the start of the struct; the public
/// `struct ibv_srq` is at [`Mlx5SrqLayout::ibv_srq`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mlx5SrqLayout {
    /// `rsc.type` (`u32`, [`MLX5_RSC_TYPE_SRQ`] for a basic SRQ).
    pub rsc_type: usize,
    /// `rsc.rsn` (`u32`): the SRQ number for a basic SRQ.
    pub rsn: usize,
    /// `vsrq.srq`: the public `struct ibv_srq`.
    pub ibv_srq: usize,
    /// `vsrq.srq_type` (`enum ibv_srq_type`: basic, XRC or tag matching).
    pub srq_type: usize,
    /// `vsrq.cq` (8-byte pointer): the CQ an XRC SRQ's receives complete on
    /// (`ibv_srq_init_attr_ex.cq`, which libibverbs' `set_vsrq` records).
    pub cq: usize,
    /// `vsrq.srq_num` (`u32`): an XRC SRQ's number.
    pub srq_num: usize,
    /// `buf`'s address word.
    pub buf: usize,
    /// `wrid` (8-byte pointer): the wr_id table, `max` entries indexed by WQE index.
    pub wrid: usize,
    /// `srqn` (`u32`).
    pub srqn: usize,
    /// `max` (`i32`): WQEs in the SRQ's buffer (the free list's and the ODP wait queue's).
    pub max: usize,
    /// `wqe_shift` (`i32`).
    pub wqe_shift: usize,
    /// `head` (`i32`): the free list's first WQE, the next one posted.
    pub head: usize,
    /// `tail` (`i32`): the free list's last WQE.
    pub tail: usize,
    /// `waitq_head` (`i32`): the ODP wait queue's first WQE, -1 without one.
    pub waitq_head: usize,
    /// `waitq_tail` (`i32`).
    pub waitq_tail: usize,
    /// `db` (8-byte pointer).
    pub db: usize,
    /// `counter` (`u16`): receives posted, as the doorbell record carries it.
    pub counter: usize,
    /// `wq_sig` (`i32`): WQE signatures on.
    pub wq_sig: usize,
    /// `cmd_qp` (8-byte pointer): the command QP of a tag-matching SRQ, null otherwise.
    pub cmd_qp: usize,
    /// How the poll frees a WQE, and the fields that takes.
    pub free: SrqFree,
    /// Bytes from the start of the struct to the end of the last field named here.
    pub size: usize,
}

/// Where the fields of `struct mlx5_rwq` are (from the start of the struct; the public
/// `struct ibv_wq` is at [`Mlx5RwqLayout::ibv_wq`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mlx5RwqLayout {
    /// `rsc.type` (`u32`, [`MLX5_RSC_TYPE_RWQ`]).
    pub rsc_type: usize,
    /// `rsc.rsn` (`u32`): the user index rdma-core gave the WQ (`mlx5_store_uidx`).
    pub rsn: usize,
    /// `wq`: the public `struct ibv_wq`.
    pub ibv_wq: usize,
    /// `buf`'s address word (`buf.buf`, or `buf.ibv_buf.addr` from v64).
    pub buf: usize,
    /// `rq` ([`Mlx5WqLayout`]): the wr_id table, head and tail.
    pub rq: usize,
    /// `db` (8-byte pointer): the doorbell record.
    pub db: usize,
    /// `pbuff` (8-byte pointer): the receive WQEs, `buf + rq.offset`.
    pub pbuff: usize,
    /// `recv_db` (8-byte pointer): the record's receive word (`&db[MLX5_RCV_DBR]`).
    pub recv_db: usize,
    /// Bytes from the start of the struct to the end of `recv_db`: what a reader may touch.
    pub size: usize,
}

macro_rules! rwq_layout {
    ($t:ty) => {
        Mlx5RwqLayout {
            rsc_type: offset_of!($t, rsc_type),
            rsn: offset_of!($t, rsn),
            ibv_wq: offset_of!($t, wq),
            buf: offset_of!($t, buf),
            rq: offset_of!($t, rq),
            db: offset_of!($t, db),
            pbuff: offset_of!($t, pbuff),
            recv_db: offset_of!($t, recv_db),
            size: offset_of!($t, recv_db) + 8,
        }
    };
}

/// One row of the table: the private mlx5 layouts of one range of rdma-core releases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mlx5Layout {
    /// The first release with this layout, as (major, minor).
    pub first: (u32, u32),
    /// The last release read to have it, as (major, minor). Every point release of the
    /// majors from `first.0` to `last.0` uses the row (the stable branches' heads were read).
    pub last: (u32, u32),
    /// `struct mlx5_qp`.
    pub qp: Mlx5QpLayout,
    /// `struct mlx5_wq` (both of a QP's queues).
    pub wq: Mlx5WqLayout,
    /// `struct mlx5_srq`.
    pub srq: Mlx5SrqLayout,
    /// `struct mlx5_cq`.
    pub cq: Mlx5CqLayout,
    /// `struct mlx5_rwq`.
    pub rwq: Mlx5RwqLayout,
}

macro_rules! qp_layout {
    ($t:ty) => {
        Mlx5QpLayout {
            rsc_type: offset_of!($t, rsc_type),
            rsn: offset_of!($t, rsn),
            ibv_qp: offset_of!($t, verbs_qp),
            ibv_qp_ptr: offset_of!($t, ibv_qp),
            buf: offset_of!($t, buf),
            sq_buf: offset_of!($t, sq_buf),
            sq_buf_size: offset_of!($t, sq_buf_size),
            sq_start: offset_of!($t, sq_start),
            sq: offset_of!($t, sq),
            db: offset_of!($t, db),
            rq: offset_of!($t, rq),
            size: size_of::<$t>(),
        }
    };
}

macro_rules! srq_layout {
    ($t:ty, $free:expr, $end:expr) => {
        Mlx5SrqLayout {
            rsc_type: offset_of!($t, rsc_type),
            rsn: offset_of!($t, rsn),
            ibv_srq: offset_of!($t, vsrq),
            srq_type: offset_of!($t, vsrq) + offset_of!(VerbsSrq, srq_type),
            cq: offset_of!($t, vsrq) + offset_of!(VerbsSrq, cq),
            srq_num: offset_of!($t, vsrq) + offset_of!(VerbsSrq, srq_num),
            buf: offset_of!($t, buf),
            wrid: offset_of!($t, wrid),
            srqn: offset_of!($t, srqn),
            max: offset_of!($t, max),
            wqe_shift: offset_of!($t, wqe_shift),
            head: offset_of!($t, head),
            tail: offset_of!($t, tail),
            waitq_head: offset_of!($t, waitq_head),
            waitq_tail: offset_of!($t, waitq_tail),
            db: offset_of!($t, db),
            counter: offset_of!($t, counter),
            wq_sig: offset_of!($t, wq_sig),
            cmd_qp: offset_of!($t, cmd_qp),
            free: $free,
            size: $end,
        }
    };
}

/// The v48 free-list fields of an SRQ layout `$t`.
macro_rules! srq_bitmap {
    ($t:ty) => {
        SrqFree::Bitmap {
            bitmap: offset_of!($t, appended) + offset_of!(SrqBitmap, free_wqe_bitmap),
            nwqes: offset_of!($t, appended) + offset_of!(SrqBitmap, nwqes),
        }
    };
}

const SRQ_V44: Mlx5SrqLayout = srq_layout!(SrqV44, SrqFree::LinkTail, offset_of!(SrqV44, cmd_qp) + 8);
const SRQ_V48: Mlx5SrqLayout = srq_layout!(SrqV48, srq_bitmap!(SrqV48), offset_of!(SrqV48, appended) + 12);
const SRQ_V64: Mlx5SrqLayout = srq_layout!(SrqV64, srq_bitmap!(SrqV64), offset_of!(SrqV64, appended) + 12);

/// The private mlx5 layouts, oldest first; the ranges do not overlap.
pub const MLX5_LAYOUTS: [Mlx5Layout; 4] = [
    Mlx5Layout {
        first: (44, 0),
        last: (44, 12),
        qp: qp_layout!(QpV44),
        wq: MLX5_WQ,
        srq: SRQ_V44,
        cq: cq_layout!(CqV44),
        rwq: rwq_layout!(RwqV44),
    },
    Mlx5Layout {
        first: (45, 0),
        last: (47, 9),
        qp: qp_layout!(QpV45),
        wq: MLX5_WQ,
        srq: SRQ_V44,
        cq: cq_layout!(CqV44),
        rwq: rwq_layout!(RwqV44),
    },
    Mlx5Layout {
        first: (48, 0),
        last: (63, 1),
        qp: qp_layout!(QpV45),
        wq: MLX5_WQ,
        srq: SRQ_V48,
        cq: cq_layout!(CqV44),
        rwq: rwq_layout!(RwqV44),
    },
    Mlx5Layout {
        first: (64, 0),
        last: (64, 0),
        qp: qp_layout!(QpV64),
        wq: MLX5_WQ,
        srq: SRQ_V64,
        cq: cq_layout!(CqV64),
        rwq: rwq_layout!(RwqV64),
    },
];

// The QP's end is its rq's end, and each row's sizes follow from the structs.
const_assert_eq!(MLX5_LAYOUTS[0].qp.size, 808 + 80);
const_assert_eq!(MLX5_LAYOUTS[1].qp.size, 816 + 80);
const_assert_eq!(MLX5_LAYOUTS[2].qp.size, 816 + 80);
const_assert_eq!(MLX5_LAYOUTS[3].qp.size, 840 + 80);
const_assert_eq!(MLX5_LAYOUTS[0].qp.ibv_qp, 8);
const_assert_eq!(MLX5_LAYOUTS[0].srq.size, 312);
const_assert_eq!(MLX5_LAYOUTS[2].srq.size, 372);
const_assert_eq!(MLX5_LAYOUTS[3].srq.size, 380);
const_assert_eq!(MLX5_LAYOUTS[0].rwq.size, 344);
const_assert_eq!(MLX5_LAYOUTS[2].rwq.rq, 232);
const_assert_eq!(MLX5_LAYOUTS[3].rwq.size, 352);
const_assert_eq!(MLX5_LAYOUTS[3].rwq.rq, 240);

impl Mlx5Layout {
    /// The row for rdma-core major release `major` on this target, or `None` for a release
    /// outside the table or a target other than x86_64 (the sizes of the pthread objects
    /// and pointers are x86_64's).
    pub fn for_release(major: u32) -> Option<&'static Mlx5Layout> {
        if !cfg!(target_arch = "x86_64") {
            return None;
        }
        MLX5_LAYOUTS.iter().find(|l| l.covers(major))
    }

    /// True if this row is the layout of major release `major`.
    pub const fn covers(&self, major: u32) -> bool {
        self.first.0 <= major && major <= self.last.0
    }

    /// Every QP field this row names with the bytes it takes, in order, queue fields at
    /// their absolute offsets: what an image builder writes and a reader checks.
    pub fn qp_fields(&self) -> [(&'static str, usize, usize); 22] {
        let (q, w) = (&self.qp, &self.wq);
        let wq = |base: usize| {
            [
                (base + w.wrid, 8),
                (base + w.wqe_head, 8),
                (base + w.wqe_cnt, 4),
                (base + w.max_post, 4),
                (base + w.head, 4),
                (base + w.tail, 4),
                (base + w.cur_post, 4),
                (base + w.wqe_shift, 4),
                (base + w.offset, 4),
                (base + w.wr_data, 8),
            ]
        };
        let (s, r) = (wq(q.sq), wq(q.rq));
        let names =
            ["wrid", "wqe_head", "wqe_cnt", "max_post", "head", "tail", "cur_post", "wqe_shift", "offset", "wr_data"];
        let mut out = [("", 0, 0); 22];
        out[0] = ("rsc.rsn", q.rsn, 4);
        out[1] = ("ibv_qp", q.ibv_qp_ptr, 8);
        for i in 0..10 {
            out[2 + i] = (names[i], s[i].0, s[i].1);
            out[12 + i] = (names[i], r[i].0, r[i].1);
        }
        out
    }
}

impl Mlx5Layout {
    /// Every SRQ field this row names with the bytes it takes, in order: what an image
    /// builder writes and a reader checks.
    pub fn srq_fields(&self) -> impl Iterator<Item = (&'static str, usize, usize)> {
        let s = &self.srq;
        let base = [
            ("rsc.type", s.rsc_type, 4),
            ("rsc.rsn", s.rsn, 4),
            ("vsrq.srq_type", s.srq_type, 4),
            ("vsrq.cq", s.cq, 8),
            ("vsrq.srq_num", s.srq_num, 4),
            ("buf", s.buf, 8),
            ("wrid", s.wrid, 8),
            ("srqn", s.srqn, 4),
            ("max", s.max, 4),
            ("wqe_shift", s.wqe_shift, 4),
            ("head", s.head, 4),
            ("tail", s.tail, 4),
            ("waitq_head", s.waitq_head, 4),
            ("waitq_tail", s.waitq_tail, 4),
            ("db", s.db, 8),
            ("counter", s.counter, 2),
            ("wq_sig", s.wq_sig, 4),
            ("cmd_qp", s.cmd_qp, 8),
        ];
        let appended = match s.free {
            SrqFree::Bitmap { bitmap, nwqes } => Some([("free_wqe_bitmap", bitmap, 8), ("nwqes", nwqes, 4)]),
            SrqFree::LinkTail => None,
        };
        base.into_iter().chain(appended.into_iter().flatten())
    }
}

impl Mlx5Layout {
    /// Every receive-WQ field this row names with the bytes it takes, queue fields at their
    /// absolute offsets: what an image builder writes and a reader checks.
    pub fn rwq_fields(&self) -> [(&'static str, usize, usize); 12] {
        let (r, w) = (&self.rwq, &self.wq);
        [
            ("rsc.type", r.rsc_type, 4),
            ("rsc.rsn", r.rsn, 4),
            ("buf", r.buf, 8),
            ("rq.wrid", r.rq + w.wrid, 8),
            ("rq.wqe_cnt", r.rq + w.wqe_cnt, 4),
            ("rq.head", r.rq + w.head, 4),
            ("rq.tail", r.rq + w.tail, 4),
            ("rq.wqe_shift", r.rq + w.wqe_shift, 4),
            ("rq.offset", r.rq + w.offset, 4),
            ("db", r.db, 8),
            ("pbuff", r.pbuff, 8),
            ("recv_db", r.recv_db, 8),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_ordered_and_fields_fit() {
        for w in MLX5_LAYOUTS.windows(2) {
            assert!(w[0].last < w[1].first, "{w:?}");
            assert_eq!(w[0].last.0 + 1, w[1].first.0, "no gap between {w:?}");
        }
        for row in &MLX5_LAYOUTS {
            assert!(row.first <= row.last);
            let q = &row.qp;
            assert!(q.ibv_qp + IBV_QP_SIZE <= q.ibv_qp_ptr, "ibv_qp overlaps what follows it");
            assert!(q.sq + row.wq.size <= q.db && q.db + 8 <= q.rq && q.rq + row.wq.size == q.size);
            for (name, off, len) in row.qp_fields() {
                assert_eq!(off % len, 0, "{name} at {off} misaligned");
                assert!(off + len <= q.size, "{name} past the struct");
            }
            let s = &row.srq;
            assert!(s.ibv_srq + IBV_SRQ_SIZE <= s.buf, "ibv_srq overlaps what follows it");
            for (name, off, len) in row.srq_fields() {
                assert_eq!(off % len, 0, "srq {name} at {off} misaligned");
                assert!(off + len <= s.size, "srq {name} past the struct");
            }
            let r = &row.rwq;
            assert!(r.ibv_wq + IBV_WQ_SIZE <= r.buf && r.rq + row.wq.size <= r.db, "rwq fields overlap");
            for (name, off, len) in row.rwq_fields() {
                assert_eq!(off % len, 0, "rwq {name} at {off} misaligned");
                assert!(off + len <= r.size, "rwq {name} past the struct");
            }
            let c = &row.cq;
            assert!(IBV_CQ_EX_SIZE <= c.buf_a && c.buf_a < c.buf_b && c.buf_b < c.active_buf);
            assert!(c.active_buf % 8 == 0 && c.dbrec % 8 == 0 && c.cqn % 4 == 0 && c.arm_sn % 4 == 0);
            assert!(
                c.cqn + 4 == c.cons_index && c.cons_index < c.dbrec && c.dbrec < c.arm_sn && c.arm_sn + 4 == c.cqe_sz
            );
            assert!(c.cqe_sz < c.flags && c.flags % 4 == 0 && c.flags + 4 == c.size);
        }
        // The SRQ's free list changed hands at v48, its buffer struct at v64.
        let frees = MLX5_LAYOUTS.map(|r| matches!(r.srq.free, SrqFree::Bitmap { .. }));
        assert_eq!(frees, [false, false, true, true]);
        assert_eq!(MLX5_LAYOUTS[3].srq.counter - MLX5_LAYOUTS[2].srq.counter, 8, "only mlx5_buf grew");
        assert_eq!(MLX5_LAYOUTS[3].rwq.recv_db - MLX5_LAYOUTS[2].rwq.recv_db, 8, "only mlx5_buf grew");
        assert!(MLX5_LAYOUTS[..3].iter().all(|r| r.rwq == MLX5_LAYOUTS[0].rwq), "one rwq layout before v64");
    }

    #[test]
    fn releases_find_their_row() {
        let expect = |major: u32| match major {
            _ if !cfg!(target_arch = "x86_64") => None,
            44 => Some((44, 0)),
            45..=47 => Some((45, 0)),
            48..=63 => Some((48, 0)),
            64 => Some((64, 0)),
            _ => None,
        };
        for major in [0, 43, 44, 45, 47, 48, 50, 63, 64, 65, u32::MAX] {
            assert_eq!(Mlx5Layout::for_release(major).map(|r| r.first), expect(major), "v{major}");
        }
    }
}
