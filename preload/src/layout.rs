//! The parts of libibverbs' public structs the preload reads or patches, as `verbs.h`
//! defines them (identical in rdma-core 44, 56 and 64). Each offset is pinned below; the
//! emulated-device test compiles a C program against the installed headers that checks the
//! same numbers (`tests/apps.rs`).

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};
use static_assertions::const_assert_eq;

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IbvWc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

const_assert_eq!(size_of::<IbvWc>(), 48);
const_assert_eq!(offset_of!(IbvWc, status), 8);
const_assert_eq!(offset_of!(IbvWc, byte_len), 20);
const_assert_eq!(offset_of!(IbvWc, qp_num), 28);
const_assert_eq!(offset_of!(IbvWc, wc_flags), 36);
const_assert_eq!(offset_of!(IbvWc, pkey_index), 40);
const_assert_eq!(offset_of!(IbvWc, sl), 44);
const_assert_eq!(offset_of!(IbvWc, dlid_path_bits), 45);

/// `ibv_context_ops.poll_cq`.
pub(crate) type PollCq = unsafe extern "C" fn(*mut IbvCq, c_int, *mut IbvWc) -> c_int;
/// `ibv_context_ops.req_notify_cq`.
pub(crate) type ReqNotifyCq = unsafe extern "C" fn(*mut IbvCq, c_int) -> c_int;

/// `struct ibv_context` up to `ops.req_notify_cq` (`device`, then `struct ibv_context_ops`
/// by value, whose 12th and 13th pointers are `poll_cq` and `req_notify_cq`).
#[repr(C)]
pub(crate) struct IbvContext {
    pub device: *mut c_void,
    pub ops_head: [*mut c_void; 11],
    pub poll_cq: Option<PollCq>,
    pub req_notify_cq: Option<ReqNotifyCq>,
}

const_assert_eq!(offset_of!(IbvContext, poll_cq), 8 + 88);
const_assert_eq!(offset_of!(IbvContext, req_notify_cq), 8 + 96);

/// `offsetof(struct ibv_context, abi_compat)`: `__VERBS_ABI_IS_EXTENDED` there marks a
/// context embedded at the end of a `struct verbs_context`.
pub(crate) const CONTEXT_ABI_COMPAT: usize = 320;
/// `sizeof(struct ibv_context)`.
pub(crate) const CONTEXT_SIZE: usize = 328;
/// `verbs_context.sz`, relative to the embedded `ibv_context` (`verbs_context` grows by
/// prepending, so these offsets hold in every release since the field appeared).
pub(crate) const VCTX_SZ: isize = -8;
/// `verbs_context.create_cq_ex`, relative to the embedded `ibv_context`.
pub(crate) const VCTX_CREATE_CQ_EX: isize = -120;
/// `verbs_context.create_qp_ex`.
pub(crate) const VCTX_CREATE_QP_EX: isize = -56;
/// `verbs_context.create_srq_ex`.
pub(crate) const VCTX_CREATE_SRQ_EX: isize = -40;
/// `verbs_context.create_wq`.
pub(crate) const VCTX_CREATE_WQ: isize = -136;
/// `verbs_context.destroy_wq` (two slots before `create_wq`, past `modify_wq`).
pub(crate) const VCTX_DESTROY_WQ: isize = -152;

/// `struct ibv_cq` up to `cqe`.
#[repr(C)]
pub(crate) struct IbvCq {
    pub context: *mut IbvContext,
    pub channel: *mut c_void,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
}

const_assert_eq!(offset_of!(IbvCq, channel), 8);
const_assert_eq!(offset_of!(IbvCq, handle), 24);
const_assert_eq!(offset_of!(IbvCq, cqe), 28);

/// `struct ibv_qp` up to `qp_type`.
#[repr(C)]
pub(crate) struct IbvQp {
    pub context: *mut IbvContext,
    pub qp_context: *mut c_void,
    pub pd: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
}

const_assert_eq!(offset_of!(IbvQp, send_cq), 24);
const_assert_eq!(offset_of!(IbvQp, recv_cq), 32);
const_assert_eq!(offset_of!(IbvQp, srq), 40);
const_assert_eq!(offset_of!(IbvQp, qp_num), 52);
const_assert_eq!(offset_of!(IbvQp, qp_type), 60);

/// `struct ibv_wq` up to `wq_num`.
#[repr(C)]
pub(crate) struct IbvWq {
    pub context: *mut IbvContext,
    pub wq_context: *mut c_void,
    pub pd: *mut c_void,
    pub cq: *mut IbvCq,
    pub wq_num: u32,
}

const_assert_eq!(offset_of!(IbvWq, cq), 24);
const_assert_eq!(offset_of!(IbvWq, wq_num), 32);

/// `struct ibv_cq_ex`: an `ibv_cq` (the same address: `ibv_cq_ex_to_cq` is a cast), then
/// its event counters, the current completion's `status` and `wr_id`, and the per-CQ
/// pointers of the extended poll (`start_poll`, `next_poll`, `end_poll`, then the
/// `read_*` accessors in [`ex`]'s order), which the provider fills at creation, leaving
/// NULL the readers of fields the CQ was not made with.
#[repr(C)]
pub(crate) struct IbvCqEx {
    pub cq: IbvCq,
    /// `pthread_mutex_t mutex; pthread_cond_t cond;`
    pub sync: [u64; 11],
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
    pub comp_mask: u32,
    pub status: u32,
    pub wr_id: u64,
    /// The function pointers, as addresses (0: NULL), indexed by [`ex`].
    pub fns: [usize; ex::COUNT],
}

/// Indexes of `ibv_cq_ex`'s function pointers in [`IbvCqEx::fns`].
pub(crate) mod ex {
    pub const START_POLL: usize = 0;
    pub const NEXT_POLL: usize = 1;
    pub const END_POLL: usize = 2;
    pub const READ_OPCODE: usize = 3;
    pub const READ_VENDOR_ERR: usize = 4;
    pub const READ_BYTE_LEN: usize = 5;
    /// Also `ibv_wc_read_invalidated_rkey`.
    pub const READ_IMM_DATA: usize = 6;
    pub const READ_QP_NUM: usize = 7;
    pub const READ_SRC_QP: usize = 8;
    pub const READ_WC_FLAGS: usize = 9;
    pub const READ_SLID: usize = 10;
    pub const READ_SL: usize = 11;
    pub const READ_DLID_PATH_BITS: usize = 12;
    pub const READ_COMPLETION_TS: usize = 13;
    pub const READ_CVLAN: usize = 14;
    pub const READ_FLOW_TAG: usize = 15;
    pub const READ_TM_INFO: usize = 16;
    pub const READ_COMPLETION_WALLCLOCK_NS: usize = 17;
    /// How many there are.
    pub const COUNT: usize = 18;
}

const_assert_eq!(offset_of!(IbvCqEx, sync), 32);
const_assert_eq!(offset_of!(IbvCqEx, comp_mask), 128);
const_assert_eq!(offset_of!(IbvCqEx, status), 132);
const_assert_eq!(offset_of!(IbvCqEx, wr_id), 136);
const_assert_eq!(offset_of!(IbvCqEx, fns), 144);
const_assert_eq!(offset_of!(IbvCqEx, fns) + 8 * ex::READ_OPCODE, 168);
const_assert_eq!(offset_of!(IbvCqEx, fns) + 8 * ex::READ_COMPLETION_TS, 248);
const_assert_eq!(offset_of!(IbvCqEx, fns) + 8 * ex::READ_COMPLETION_WALLCLOCK_NS, 280);
const_assert_eq!(size_of::<IbvCqEx>(), 288);
