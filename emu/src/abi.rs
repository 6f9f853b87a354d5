//! The kernel's uverbs `write()` ABI (`include/uapi/rdma/ib_user_verbs.h`): the command
//! header, and the request and response structures of the commands the emulator answers.
//! Written from the header's definitions; every size and offset is pinned below, so a
//! mistyped field fails the build instead of shifting a response.

use bytemuck::{Pod, Zeroable};
use static_assertions::{assert_eq_size, const_assert_eq};
use std::mem::offset_of;

/// `IB_USER_VERBS_CMD_FLAG_EXTENDED`: the command word's bit for the extended framing.
pub const CMD_FLAG_EXTENDED: u32 = 0x8000_0000;
/// `IB_USER_VERBS_CMD_COMMAND_MASK`.
pub const CMD_COMMAND_MASK: u32 = 0xff;

/// Command numbers (`enum ib_uverbs_write_cmds`); the extended ones share them.
pub mod cmd {
    pub const GET_CONTEXT: u32 = 0;
    pub const QUERY_DEVICE: u32 = 1;
    pub const QUERY_PORT: u32 = 2;
    pub const ALLOC_PD: u32 = 3;
    pub const DEALLOC_PD: u32 = 4;
    pub const CREATE_AH: u32 = 5;
    pub const DESTROY_AH: u32 = 8;
    pub const REG_MR: u32 = 9;
    pub const DEREG_MR: u32 = 13;
    pub const ALLOC_MW: u32 = 14;
    pub const DEALLOC_MW: u32 = 16;
    pub const CREATE_COMP_CHANNEL: u32 = 17;
    pub const CREATE_CQ: u32 = 18;
    pub const RESIZE_CQ: u32 = 19;
    pub const DESTROY_CQ: u32 = 20;
    pub const CREATE_QP: u32 = 24;
    pub const MODIFY_QP: u32 = 26;
    pub const DESTROY_QP: u32 = 27;
    pub const CREATE_SRQ: u32 = 32;
    pub const MODIFY_SRQ: u32 = 33;
    pub const DESTROY_SRQ: u32 = 35;
}

/// Extended-only command numbers (`IB_USER_VERBS_EX_CMD_*` past
/// `IB_USER_VERBS_CMD_THRESHOLD`, 50): sent with the extended framing only.
pub mod ex_cmd {
    pub const CREATE_WQ: u32 = 52;
    pub const MODIFY_WQ: u32 = 53;
    pub const DESTROY_WQ: u32 = 54;
}

/// `struct ib_uverbs_cmd_hdr`: every command starts with it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CmdHdr {
    pub command: u32,
    /// Legacy: the whole write in 4-byte words, this header included. Extended: the core
    /// request in 8-byte words.
    pub in_words: u16,
    /// Legacy: core and driver response in 4-byte words. Extended: the core response in
    /// 8-byte words.
    pub out_words: u16,
}
assert_eq_size!(CmdHdr, [u8; 8]);

/// `struct ib_uverbs_ex_cmd_hdr`: follows [`CmdHdr`] in an extended command.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ExCmdHdr {
    pub response: u64,
    pub provider_in_words: u16,
    pub provider_out_words: u16,
    pub cmd_hdr_reserved: u32,
}
assert_eq_size!(ExCmdHdr, [u8; 16]);

/// A request whose only core field is the response pointer (GET_CONTEXT, ALLOC_PD,
/// CREATE_COMP_CHANNEL, legacy QUERY_DEVICE).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ResponseOnly {
    pub response: u64,
}

/// `struct ib_uverbs_get_context_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct GetContextResp {
    pub async_fd: u32,
    pub num_comp_vectors: u32,
}
assert_eq_size!(GetContextResp, [u8; 8]);

/// `struct ib_uverbs_query_device_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct QueryDeviceResp {
    pub fw_ver: u64,
    /// Big-endian on the wire (`__be64`).
    pub node_guid: u64,
    /// Big-endian on the wire (`__be64`).
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub device_cap_flags: u32,
    pub max_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_ee_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub max_ee_init_rd_atom: u32,
    pub atomic_cap: u32,
    pub max_ee: u32,
    pub max_rdd: u32,
    pub max_mw: u32,
    pub max_raw_ipv6_qp: u32,
    pub max_raw_ethy_qp: u32,
    pub max_mcast_grp: u32,
    pub max_mcast_qp_attach: u32,
    pub max_total_mcast_qp_attach: u32,
    pub max_ah: u32,
    pub max_fmr: u32,
    pub max_map_per_fmr: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
    pub reserved: [u8; 4],
}
assert_eq_size!(QueryDeviceResp, [u8; 176]);
const_assert_eq!(offset_of!(QueryDeviceResp, vendor_id), 40);
const_assert_eq!(offset_of!(QueryDeviceResp, atomic_cap), 108);
const_assert_eq!(offset_of!(QueryDeviceResp, max_srq_sge), 164);
const_assert_eq!(offset_of!(QueryDeviceResp, max_pkeys), 168);
const_assert_eq!(offset_of!(QueryDeviceResp, phys_port_cnt), 171);

/// `struct ib_uverbs_ex_query_device`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ExQueryDevice {
    pub comp_mask: u32,
    pub reserved: u32,
}

/// `struct ib_uverbs_ex_query_device_resp` (its nested capability structs flattened, with
/// their offsets pinned).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ExQueryDeviceResp {
    pub base: QueryDeviceResp,
    pub comp_mask: u32,
    /// The core bytes written: libibverbs copies only the fields this covers.
    pub response_length: u32,
    pub odp_general_caps: u64,
    pub odp_rc_caps: u32,
    pub odp_uc_caps: u32,
    pub odp_ud_caps: u32,
    pub odp_reserved: u32,
    pub timestamp_mask: u64,
    /// In kHz.
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub rss_supported_qpts: u32,
    pub rss_max_rwq_indirection_tables: u32,
    pub rss_max_rwq_indirection_table_size: u32,
    pub rss_reserved: u32,
    pub max_wq_type_rq: u32,
    pub raw_packet_caps: u32,
    pub tm_max_rndv_hdr_size: u32,
    pub tm_max_num_tags: u32,
    pub tm_flags: u32,
    pub tm_max_ops: u32,
    pub tm_max_sge: u32,
    pub tm_reserved: u32,
    pub max_cq_moderation_count: u16,
    pub max_cq_moderation_period: u16,
    pub cq_moderation_reserved: u32,
    pub max_dm_size: u64,
    pub xrc_odp_caps: u32,
    pub reserved: u32,
}
assert_eq_size!(ExQueryDeviceResp, [u8; 304]);
const_assert_eq!(offset_of!(ExQueryDeviceResp, response_length), 180);
const_assert_eq!(offset_of!(ExQueryDeviceResp, timestamp_mask), 208);
const_assert_eq!(offset_of!(ExQueryDeviceResp, hca_core_clock), 216);
const_assert_eq!(offset_of!(ExQueryDeviceResp, device_cap_flags_ex), 224);
const_assert_eq!(offset_of!(ExQueryDeviceResp, max_wq_type_rq), 248);
const_assert_eq!(offset_of!(ExQueryDeviceResp, max_cq_moderation_count), 280);
const_assert_eq!(offset_of!(ExQueryDeviceResp, max_dm_size), 288);

/// `struct ib_uverbs_query_port`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct QueryPort {
    pub response: u64,
    pub port_num: u8,
    pub reserved: [u8; 7],
}
assert_eq_size!(QueryPort, [u8; 16]);

/// `struct ib_uverbs_query_port_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct QueryPortResp {
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub gid_tbl_len: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub state: u8,
    pub max_mtu: u8,
    pub active_mtu: u8,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub reserved: u8,
}
assert_eq_size!(QueryPortResp, [u8; 40]);
const_assert_eq!(offset_of!(QueryPortResp, state), 26);
const_assert_eq!(offset_of!(QueryPortResp, link_layer), 37);

/// `struct ib_uverbs_alloc_pd_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AllocPdResp {
    pub pd_handle: u32,
}

/// A request naming one object and nothing else (`ib_uverbs_dealloc_pd`,
/// `ib_uverbs_dereg_mr`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct Handle {
    pub handle: u32,
}

/// `struct ib_uverbs_reg_mr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct RegMr {
    pub response: u64,
    pub start: u64,
    pub length: u64,
    pub hca_va: u64,
    pub pd_handle: u32,
    pub access_flags: u32,
}
assert_eq_size!(RegMr, [u8; 40]);

/// `struct ib_uverbs_reg_mr_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct RegMrResp {
    pub mr_handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}
assert_eq_size!(RegMrResp, [u8; 12]);

/// `struct ib_uverbs_create_comp_channel_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateCompChannelResp {
    pub fd: u32,
}

/// `struct ib_uverbs_create_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateCq {
    pub response: u64,
    pub user_handle: u64,
    pub cqe: u32,
    pub comp_vector: u32,
    pub comp_channel: i32,
    pub reserved: u32,
}
assert_eq_size!(CreateCq, [u8; 32]);

/// `struct ib_uverbs_create_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateCqResp {
    pub cq_handle: u32,
    pub cqe: u32,
}

/// `struct ib_uverbs_destroy_cq` (and `_qp`, `_srq`: the same shape).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct Destroy {
    pub response: u64,
    pub handle: u32,
    pub reserved: u32,
}
assert_eq_size!(Destroy, [u8; 16]);

/// `struct ib_uverbs_destroy_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct DestroyCqResp {
    pub comp_events_reported: u32,
    pub async_events_reported: u32,
}

/// `struct ib_uverbs_destroy_qp_resp` and `ib_uverbs_destroy_srq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct DestroyEventsResp {
    pub events_reported: u32,
}

/// `struct ib_uverbs_create_qp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateQp {
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub send_cq_handle: u32,
    pub recv_cq_handle: u32,
    pub srq_handle: u32,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub sq_sig_all: u8,
    pub qp_type: u8,
    pub is_srq: u8,
    pub reserved: u8,
}
assert_eq_size!(CreateQp, [u8; 56]);
const_assert_eq!(offset_of!(CreateQp, sq_sig_all), 52);

/// `struct ib_uverbs_create_qp_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateQpResp {
    pub qp_handle: u32,
    pub qpn: u32,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub reserved: u32,
}
assert_eq_size!(CreateQpResp, [u8; 32]);

/// `struct ib_uverbs_qp_dest`: an address vector in MODIFY_QP.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct QpDest {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub dlid: u16,
    pub reserved: u16,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}
assert_eq_size!(QpDest, [u8; 32]);

/// `struct ib_uverbs_modify_qp` (legacy MODIFY_QP has no response; the extended one adds
/// `rate_limit` and a reserved word after it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ModifyQp {
    pub dest: QpDest,
    pub alt_dest: QpDest,
    pub qp_handle: u32,
    pub attr_mask: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub qp_state: u8,
    pub cur_qp_state: u8,
    pub path_mtu: u8,
    pub path_mig_state: u8,
    pub en_sqd_async_notify: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub reserved: [u8; 2],
}
assert_eq_size!(ModifyQp, [u8; 112]);
const_assert_eq!(offset_of!(ModifyQp, qp_handle), 64);
const_assert_eq!(offset_of!(ModifyQp, qp_state), 96);
const_assert_eq!(offset_of!(ModifyQp, rnr_retry), 107);

/// `struct ib_uverbs_create_srq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateSrq {
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}
assert_eq_size!(CreateSrq, [u8; 32]);

/// `struct ib_uverbs_create_srq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateSrqResp {
    pub srq_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srqn: u32,
}
assert_eq_size!(CreateSrqResp, [u8; 16]);

/// `struct ib_uverbs_modify_srq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ModifySrq {
    pub srq_handle: u32,
    pub attr_mask: u32,
    pub max_wr: u32,
    pub srq_limit: u32,
}
assert_eq_size!(ModifySrq, [u8; 16]);

/// `struct ib_uverbs_ex_create_wq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ExCreateWq {
    pub comp_mask: u32,
    /// `enum ib_wq_type`: 0 is `IB_WQT_RQ`, the only type.
    pub wq_type: u32,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub cq_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    /// `enum ib_wq_flags`.
    pub create_flags: u32,
    pub reserved: u32,
}
assert_eq_size!(ExCreateWq, [u8; 40]);
const_assert_eq!(offset_of!(ExCreateWq, user_handle), 8);
const_assert_eq!(offset_of!(ExCreateWq, pd_handle), 16);
const_assert_eq!(offset_of!(ExCreateWq, cq_handle), 20);
const_assert_eq!(offset_of!(ExCreateWq, max_wr), 24);
const_assert_eq!(offset_of!(ExCreateWq, max_sge), 28);
const_assert_eq!(offset_of!(ExCreateWq, create_flags), 32);

/// `struct ib_uverbs_ex_create_wq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ExCreateWqResp {
    pub comp_mask: u32,
    pub response_length: u32,
    pub wq_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub wqn: u32,
}
assert_eq_size!(ExCreateWqResp, [u8; 24]);
const_assert_eq!(offset_of!(ExCreateWqResp, wq_handle), 8);
const_assert_eq!(offset_of!(ExCreateWqResp, wqn), 20);

/// `struct ib_uverbs_ex_modify_wq` (no response).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ExModifyWq {
    /// `IB_WQ_STATE | IB_WQ_CUR_STATE | IB_WQ_FLAGS`.
    pub attr_mask: u32,
    pub wq_handle: u32,
    /// `enum ib_wq_state`: reset, ready, error.
    pub wq_state: u32,
    pub curr_wq_state: u32,
    pub flags: u32,
    pub flags_mask: u32,
}
assert_eq_size!(ExModifyWq, [u8; 24]);
const_assert_eq!(offset_of!(ExModifyWq, wq_handle), 4);
const_assert_eq!(offset_of!(ExModifyWq, curr_wq_state), 12);
const_assert_eq!(offset_of!(ExModifyWq, flags_mask), 20);

/// `struct ib_uverbs_ex_destroy_wq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ExDestroyWq {
    pub comp_mask: u32,
    pub wq_handle: u32,
}
assert_eq_size!(ExDestroyWq, [u8; 8]);

/// `struct ib_uverbs_ex_destroy_wq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ExDestroyWqResp {
    pub comp_mask: u32,
    pub response_length: u32,
    pub events_reported: u32,
    pub reserved: u32,
}
assert_eq_size!(ExDestroyWqResp, [u8; 16]);
const_assert_eq!(offset_of!(ExDestroyWqResp, events_reported), 8);

/// `struct ib_uverbs_comp_event_desc`: what a read of a completion channel returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CompEventDesc {
    pub cq_handle: u64,
}
assert_eq_size!(CompEventDesc, [u8; 8]);

/// `struct ib_uverbs_async_event_desc`: what a read of the async fd returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AsyncEventDesc {
    pub element: u64,
    pub event_type: u32,
    pub reserved: u32,
}
assert_eq_size!(AsyncEventDesc, [u8; 16]);

/// `enum ib_qp_attr_mask` bits MODIFY_QP checks.
pub mod qp_attr {
    pub const STATE: u32 = 1 << 0;
    pub const CUR_STATE: u32 = 1 << 1;
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const PORT: u32 = 1 << 5;
    pub const QKEY: u32 = 1 << 6;
    pub const AV: u32 = 1 << 7;
    pub const PATH_MTU: u32 = 1 << 8;
    pub const TIMEOUT: u32 = 1 << 9;
    pub const RETRY_CNT: u32 = 1 << 10;
    pub const RNR_RETRY: u32 = 1 << 11;
    pub const RQ_PSN: u32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    pub const SQ_PSN: u32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const DEST_QPN: u32 = 1 << 20;
}
