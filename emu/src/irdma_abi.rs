//! The irdma driver's udata (`include/uapi/rdma/irdma-abi.h`, ABI version 5): what libirdma
//! appends to the core requests and expects after the core responses. Written from the
//! header's definitions, sizes and offsets pinned. rdma-core 56 sends a longer context
//! request and takes a longer context response; the command layer reads missing request
//! bytes as zero and cuts responses to the caller's buffer.

use bytemuck::{Pod, Zeroable};
use static_assertions::{assert_eq_size, const_assert_eq};
use std::mem::offset_of;

/// `enum irdma_memreg_type`: what a REG_MR registers.
pub mod reg_type {
    /// An application's region.
    pub const MEM: u16 = 0;
    /// A QP's work queues: `[SQ sq_pages][RQ rq_pages][64-byte shadow area]`.
    pub const QP: u16 = 1;
    /// A CQ's ring (`cq_pages`), or with `FEATURE_CQ_RESIZE` its 64-byte shadow area alone.
    pub const CQ: u16 = 2;
}

/// `struct irdma_alloc_ucontext_req` (rdma-core 56 adds a `comp_mask` word after it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AllocUcontextReq {
    pub rsvd32: u32,
    pub userspace_ver: u8,
    pub rsvd8: [u8; 3],
}
assert_eq_size!(AllocUcontextReq, [u8; 8]);

/// `struct irdma_alloc_ucontext_resp` as rdma-core 44 knows it (56 adds `comp_mask` and
/// `min_hw_wq_size` after it, left zero here: no raw attributes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AllocUcontextResp {
    pub max_pds: u32,
    pub max_qps: u32,
    pub wq_size: u32,
    pub kernel_ver: u8,
    pub rsvd: [u8; 3],
    pub feature_flags: u64,
    pub db_mmap_key: u64,
    pub max_hw_wq_frags: u32,
    pub max_hw_read_sges: u32,
    pub max_hw_inline: u32,
    pub max_hw_rq_quanta: u32,
    pub max_hw_wq_quanta: u32,
    pub min_hw_cq_size: u32,
    pub max_hw_cq_size: u32,
    pub max_hw_sq_chunk: u16,
    pub hw_rev: u8,
    pub rsvd2: u8,
}
assert_eq_size!(AllocUcontextResp, [u8; 64]);
const_assert_eq!(offset_of!(AllocUcontextResp, feature_flags), 16);
const_assert_eq!(offset_of!(AllocUcontextResp, db_mmap_key), 24);
const_assert_eq!(offset_of!(AllocUcontextResp, max_hw_wq_frags), 32);
const_assert_eq!(offset_of!(AllocUcontextResp, max_hw_cq_size), 56);
const_assert_eq!(offset_of!(AllocUcontextResp, max_hw_sq_chunk), 60);
const_assert_eq!(offset_of!(AllocUcontextResp, hw_rev), 62);

/// `struct irdma_alloc_pd_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AllocPdResp {
    pub pd_id: u32,
    pub rsvd: [u8; 4],
}
assert_eq_size!(AllocPdResp, [u8; 8]);

/// `struct irdma_mem_reg_req`. libirdma leaves the page counts uninitialised for an
/// application's region (`reg_type` MEM): they mean something only for QP and CQ memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct MemRegReq {
    pub reg_type: u16,
    pub cq_pages: u16,
    pub rq_pages: u16,
    pub sq_pages: u16,
}
assert_eq_size!(MemRegReq, [u8; 8]);

/// `struct irdma_create_cq_req`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateCqReq {
    pub user_cq_buf: u64,
    pub user_shadow_area: u64,
}
assert_eq_size!(CreateCqReq, [u8; 16]);

/// `struct irdma_create_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateCqResp {
    pub cq_id: u32,
    pub cq_size: u32,
}
assert_eq_size!(CreateCqResp, [u8; 8]);

/// `struct irdma_create_qp_req`: the QP's buffer (registered with `reg_type` QP first) and
/// the completion context every CQE of the QP carries (libirdma's `struct irdma_qp_uk *`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateQpReq {
    pub user_wqe_bufs: u64,
    pub user_compl_ctx: u64,
}
assert_eq_size!(CreateQpReq, [u8; 16]);

/// `struct irdma_create_qp_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateQpResp {
    pub qp_id: u32,
    pub actual_sq_size: u32,
    pub actual_rq_size: u32,
    pub irdma_drv_opt: u32,
    pub push_idx: u16,
    pub lsmm: u8,
    pub rsvd: u8,
    pub qp_caps: u32,
}
assert_eq_size!(CreateQpResp, [u8; 24]);
const_assert_eq!(offset_of!(CreateQpResp, lsmm), 18);
const_assert_eq!(offset_of!(CreateQpResp, qp_caps), 20);

/// `struct irdma_modify_qp_req`: the extended MODIFY_QP libirdma sends to (re)flush a QP in
/// the error state.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ModifyQpReq {
    pub sq_flush: u8,
    pub rq_flush: u8,
    pub rsvd: [u8; 6],
}
assert_eq_size!(ModifyQpReq, [u8; 8]);

/// `struct ib_uverbs_create_ah` (core, the address vector flattened; libirdma sends no
/// udata with it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateAh {
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub reserved: u32,
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub grh_reserved: u8,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
    pub attr_reserved: u8,
}
assert_eq_size!(CreateAh, [u8; 56]);
const_assert_eq!(offset_of!(CreateAh, dgid), 24);
const_assert_eq!(offset_of!(CreateAh, port_num), 54);

/// `struct irdma_create_ah_resp`: the id UD WQEs name the handle by.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateAhResp {
    pub ah_id: u32,
    pub rsvd: [u8; 4],
}
assert_eq_size!(CreateAhResp, [u8; 8]);

/// `IB_USER_VERBS_CMD_CREATE_AH` and `_DESTROY_AH`.
pub const CMD_CREATE_AH: u32 = 5;
pub const CMD_DESTROY_AH: u32 = 8;

/// `IRDMA_FEATURE_RTS_AE` | `IRDMA_FEATURE_CQ_RESIZE`: what an E810's kernel driver reports.
pub const FEATURE_FLAGS: u64 = 0b11;
/// `qp_caps`: `IRDMA_WRITE_WITH_IMM` | `IRDMA_SEND_WITH_IMM` | `IRDMA_ROCE` (never
/// `IRDMA_PUSH_MODE`, which would send libirdma to the push pages).
pub const QP_CAPS: u32 = 0b111;
/// `IRDMA_GEN_2`: the E810.
pub const HW_REV_GEN2: u8 = 2;
