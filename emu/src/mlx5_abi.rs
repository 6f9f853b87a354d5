//! The mlx5 driver's udata (`include/uapi/rdma/mlx5-abi.h`): what libmlx5 appends to the core
//! requests and expects after the core responses, and the mmap offset encoding. Written from
//! the header's definitions, sizes and offsets pinned.

use bytemuck::{Pod, Zeroable};
use static_assertions::{assert_eq_size, const_assert_eq};
use std::mem::offset_of;

/// `struct mlx5_ib_alloc_ucontext_req_v2` (shorter when libmlx5 retries an old kernel; the
/// missing tail reads as zero).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AllocUcontextReq {
    pub total_num_bfregs: u32,
    pub num_low_latency_bfregs: u32,
    pub flags: u32,
    pub comp_mask: u32,
    pub max_cqe_version: u8,
    pub reserved0: u8,
    pub reserved1: u16,
    pub reserved2: u32,
    pub lib_caps: u64,
}
assert_eq_size!(AllocUcontextReq, [u8; 32]);
const_assert_eq!(offset_of!(AllocUcontextReq, max_cqe_version), 16);
const_assert_eq!(offset_of!(AllocUcontextReq, lib_caps), 24);

/// `struct mlx5_ib_alloc_ucontext_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AllocUcontextResp {
    pub qp_tab_size: u32,
    pub bf_reg_size: u32,
    pub tot_bfregs: u32,
    pub cache_line_size: u32,
    pub max_sq_desc_sz: u16,
    pub max_rq_desc_sz: u16,
    pub max_send_wqebb: u32,
    pub max_recv_wr: u32,
    pub max_srq_recv_wr: u32,
    pub num_ports: u16,
    pub flow_action_flags: u16,
    pub comp_mask: u32,
    pub response_length: u32,
    pub cqe_version: u8,
    pub cmds_supp_uhw: u8,
    pub eth_min_inline: u8,
    pub clock_info_versions: u8,
    pub hca_core_clock_offset: u64,
    pub log_uar_size: u32,
    pub num_uars_per_page: u32,
    pub num_dyn_bfregs: u32,
    pub dump_fill_mkey: u32,
}
assert_eq_size!(AllocUcontextResp, [u8; 72]);
const_assert_eq!(offset_of!(AllocUcontextResp, tot_bfregs), 8);
const_assert_eq!(offset_of!(AllocUcontextResp, cache_line_size), 12);
const_assert_eq!(offset_of!(AllocUcontextResp, max_sq_desc_sz), 16);
const_assert_eq!(offset_of!(AllocUcontextResp, max_send_wqebb), 20);
const_assert_eq!(offset_of!(AllocUcontextResp, num_ports), 32);
const_assert_eq!(offset_of!(AllocUcontextResp, comp_mask), 36);
const_assert_eq!(offset_of!(AllocUcontextResp, cqe_version), 44);
const_assert_eq!(offset_of!(AllocUcontextResp, cmds_supp_uhw), 45);
const_assert_eq!(offset_of!(AllocUcontextResp, hca_core_clock_offset), 48);
const_assert_eq!(offset_of!(AllocUcontextResp, log_uar_size), 56);
const_assert_eq!(offset_of!(AllocUcontextResp, num_dyn_bfregs), 64);

/// `MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET`: `hca_core_clock_offset` is valid and
/// the core clock page may be mapped.
pub const UCONTEXT_RESP_CORE_CLOCK_OFFSET: u32 = 1;
/// `MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE | MLX5_USER_CMDS_SUPP_UHW_CREATE_AH`.
pub const CMDS_SUPP_UHW: u8 = 0x3;
/// `MLX5_USER_INLINE_MODE_NONE` as the context response encodes it.
pub const ETH_MIN_INLINE_NONE: u8 = 1;
/// `MLX5_IB_CLOCK_INFO_V1`.
pub const CLOCK_INFO_V1: u8 = 1;

/// `struct mlx5_ib_alloc_pd_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AllocPdResp {
    pub pdn: u32,
}

/// `struct mlx5_ib_query_device_resp` as rdma-core 44 sizes it (56 adds 8 bytes of `reg_c0`
/// after it; the emulator writes only what the caller's buffer holds).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct QueryDeviceResp {
    pub comp_mask: u32,
    pub response_length: u32,
    pub tso_max_tso: u32,
    pub tso_supported_qpts: u32,
    pub rss_rx_hash_fields_mask: u64,
    pub rss_rx_hash_function: u8,
    pub rss_reserved: [u8; 7],
    pub cqe_comp_max_num: u32,
    pub cqe_comp_supported_format: u32,
    pub pp_qp_rate_limit_min: u32,
    pub pp_qp_rate_limit_max: u32,
    pub pp_supported_qpts: u32,
    pub pp_cap_flags: u8,
    pub pp_reserved: [u8; 3],
    pub multi_pkt_send_wqes: u32,
    pub flags: u32,
    pub sw_parsing_offloads: u32,
    pub sw_parsing_supported_qpts: u32,
    pub striding_rq: [u32; 6],
    pub tunnel_offloads_caps: u32,
    pub dci_max_log_num_concurent: u8,
    pub dci_max_log_num_errored: u8,
    pub reserved: u16,
}
assert_eq_size!(QueryDeviceResp, [u8; 104]);
const_assert_eq!(offset_of!(QueryDeviceResp, cqe_comp_max_num), 32);
const_assert_eq!(offset_of!(QueryDeviceResp, flags), 60);
const_assert_eq!(offset_of!(QueryDeviceResp, tunnel_offloads_caps), 96);

/// `MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD`: the device pads 64-byte CQEs in 128-byte
/// entries on request.
pub const QUERY_DEV_RESP_FLAGS_CQE_128B_PAD: u32 = 1 << 1;

/// `struct mlx5_ib_create_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateCq {
    /// The CQ ring libmlx5 allocated: `ncqe * cqe_size` bytes.
    pub buf_addr: u64,
    /// The CQ doorbell record: be32 `[0]` consumer index, `[1]` arm word.
    pub db_addr: u64,
    pub cqe_size: u32,
    pub cqe_comp_en: u8,
    pub cqe_comp_res_format: u8,
    pub flags: u16,
    pub uar_page_index: u16,
    pub reserved0: u16,
    pub reserved1: u32,
}
assert_eq_size!(CreateCq, [u8; 32]);
const_assert_eq!(offset_of!(CreateCq, cqe_size), 16);
const_assert_eq!(offset_of!(CreateCq, flags), 22);
const_assert_eq!(offset_of!(CreateCq, uar_page_index), 24);

/// `MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD`: 64-byte CQEs padded to 128-byte entries.
pub const CREATE_CQ_FLAG_CQE_128B_PAD: u16 = 1 << 0;

/// `struct mlx5_ib_create_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateCqResp {
    pub cqn: u32,
    pub reserved: u32,
}

/// `struct mlx5_ib_create_qp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateQp {
    /// One buffer: the RQ at offset 0, the SQ after `rq_wqe_count << rq_wqe_shift` bytes.
    pub buf_addr: u64,
    /// be32 `[0]` the RQ doorbell record, `[1]` the SQ's.
    pub db_addr: u64,
    /// SQ size in 64-byte WQE basic blocks (a power of two).
    pub sq_wqe_count: u32,
    pub rq_wqe_count: u32,
    pub rq_wqe_shift: u32,
    pub flags: u32,
    /// The user index libmlx5 finds the QP by in CQEs (cqe_version 1); 0 is valid.
    pub uidx: u32,
    pub bfreg_index: u32,
    pub sq_buf_addr: u64,
    pub ece_options: u32,
    pub dci_log_num_concurent: u8,
    pub dci_log_num_errored: u8,
    pub reserved: u16,
}
assert_eq_size!(CreateQp, [u8; 56]);
const_assert_eq!(offset_of!(CreateQp, uidx), 32);
const_assert_eq!(offset_of!(CreateQp, sq_buf_addr), 40);
const_assert_eq!(offset_of!(CreateQp, ece_options), 48);

/// `MLX5_QP_FLAG_SIGNATURE`: RQ WQEs start with a 16-byte signature segment.
pub const QP_FLAG_SIGNATURE: u32 = 1 << 0;
/// `MLX5_QP_FLAG_SCATTER_CQE`.
pub const QP_FLAG_SCATTER_CQE: u32 = 1 << 1;

/// `struct mlx5_ib_create_qp_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateQpResp {
    /// Which static BlueFlame register libmlx5 rings (`ctx->bfs[bfreg_index]`).
    pub bfreg_index: u32,
    pub ece_options: u32,
    pub comp_mask: u32,
    pub tirn: u32,
    pub tisn: u32,
    pub rqn: u32,
    pub sqn: u32,
    pub reserved1: u32,
    pub tir_icm_addr: u64,
}
assert_eq_size!(CreateQpResp, [u8; 40]);

/// `struct mlx5_ib_create_srq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateSrq {
    pub buf_addr: u64,
    /// One be32: the count of receives posted.
    pub db_addr: u64,
    pub flags: u32,
    pub reserved0: u32,
    pub uidx: u32,
    pub reserved1: u32,
}
assert_eq_size!(CreateSrq, [u8; 32]);
const_assert_eq!(offset_of!(CreateSrq, uidx), 24);

/// `struct mlx5_ib_create_srq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateSrqResp {
    pub srqn: u32,
    pub reserved: u32,
}

/// `struct mlx5_ib_create_wq`: a receive WQ's ring and doorbell record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateWq {
    pub buf_addr: u64,
    /// be32 `[0]` the receive counter (libmlx5's `MLX5_RCV_DBR`).
    pub db_addr: u64,
    /// Entries in the ring (a power of two).
    pub rq_wqe_count: u32,
    /// log2 of an entry's bytes.
    pub rq_wqe_shift: u32,
    /// The index libmlx5 finds the WQ by in CQEs (`mlx5_store_uidx`).
    pub user_index: u32,
    /// [`WQ_FLAG_SIGNATURE`].
    pub flags: u32,
    /// [`CREATE_WQ_STRIDING_RQ`].
    pub comp_mask: u32,
    pub single_stride_log_num_of_bytes: u32,
    pub single_wqe_log_num_of_strides: u32,
    pub two_byte_shift_en: u32,
}
assert_eq_size!(CreateWq, [u8; 48]);
const_assert_eq!(offset_of!(CreateWq, rq_wqe_count), 16);
const_assert_eq!(offset_of!(CreateWq, user_index), 24);
const_assert_eq!(offset_of!(CreateWq, comp_mask), 32);
const_assert_eq!(offset_of!(CreateWq, single_stride_log_num_of_bytes), 36);
const_assert_eq!(offset_of!(CreateWq, two_byte_shift_en), 44);

/// The kernel's smallest `mlx5_ib_create_wq`: through `single_stride_log_num_of_bytes`.
pub const CREATE_WQ_MIN_LEN: usize = offset_of!(CreateWq, single_stride_log_num_of_bytes) + 4;
/// `MLX5_WQ_FLAG_SIGNATURE`: each receive WQE starts with a signature segment.
pub const WQ_FLAG_SIGNATURE: u32 = 1 << 0;
/// `MLX5_IB_CREATE_WQ_STRIDING_RQ`.
pub const CREATE_WQ_STRIDING_RQ: u32 = 1 << 0;

/// `struct mlx5_ib_create_wq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateWqResp {
    /// The bytes the kernel fills: this field's end (4).
    pub response_length: u32,
    pub reserved: u32,
}
assert_eq_size!(CreateWqResp, [u8; 8]);

/// `struct mlx5_ib_modify_wq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ModifyWq {
    pub comp_mask: u32,
    pub reserved: u32,
}
assert_eq_size!(ModifyWq, [u8; 8]);

/// `struct mlx5_ib_clock_info`: the page behind `MLX5_IB_MMAP_CLOCK_INFO`, the kernel's
/// snapshot for turning device cycles into nanoseconds.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ClockInfo {
    pub sign: u32,
    pub resv: u32,
    pub nsec: u64,
    pub cycles: u64,
    pub frac: u64,
    pub mult: u32,
    pub shift: u32,
    pub mask: u64,
    pub overflow_period: u64,
}
assert_eq_size!(ClockInfo, [u8; 56]);
const_assert_eq!(offset_of!(ClockInfo, mult), 32);
const_assert_eq!(offset_of!(ClockInfo, mask), 40);

/// `enum mlx5_ib_mmap_cmd` values the emulator maps.
pub mod mmap_cmd {
    pub const REGULAR_PAGE: u32 = 0;
    pub const NC_PAGE: u32 = 3;
    pub const CORE_CLOCK: u32 = 5;
    pub const CLOCK_INFO: u32 = 7;
}

/// `MLX5_IB_MMAP_CMD_SHIFT`: the command sits above the low 8 index bits of the page number.
pub const MMAP_CMD_SHIFT: u32 = 8;

/// A page number of the mmap offset (`offset / page_size`) split into the command and its
/// index (`idx` bits 8 and up spill above the command, as libmlx5 encodes them).
pub fn decode_mmap_page(page: u64) -> (u32, u32) {
    let cmd = ((page >> MMAP_CMD_SHIFT) & 0xff) as u32;
    let idx = ((page & 0xff) | ((page >> 16) << 8)) as u32;
    (cmd, idx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmap_offsets_decode_as_libmlx5_encodes_them() {
        // UAR index 7, regular page; the clock-info page; a spilled index 0x1_23.
        assert_eq!(decode_mmap_page(7), (mmap_cmd::REGULAR_PAGE, 7));
        assert_eq!(decode_mmap_page(7 << 8), (mmap_cmd::CLOCK_INFO, 0));
        assert_eq!(decode_mmap_page((6 << 8) | 0x23 | (1 << 16)), (6, 0x123));
    }
}
