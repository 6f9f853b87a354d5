//! The emulated device: a ConnectX-6 Dx named `mlx5_0`, one RoCE port. Its identity (what
//! sysfs shows) and its attributes (what QUERY_DEVICE and QUERY_PORT answer) live here, the
//! values a real card of that model reports, never zeros a provider would divide by or
//! refuse.

use crate::abi::{ExQueryDeviceResp, QueryDeviceResp, QueryPortResp};

/// The RDMA device name.
pub const IBDEV: &str = "mlx5_0";
/// The uverbs character device name (`/dev/infiniband/uverbs0`).
pub const UVERBS: &str = "uverbs0";
/// The path rdma-core opens for it (always under `/dev/infiniband`).
pub const UVERBS_PATH: &[u8] = b"/dev/infiniband/uverbs0";
/// The prefix of every uverbs node path.
pub const UVERBS_PREFIX: &[u8] = b"/dev/infiniband/uverbs";
/// The PCI modalias libibverbs matches libmlx5's table with: Mellanox 0x15b3, device 0x101d
/// (ConnectX-6 Dx).
pub const MODALIAS: &str = "pci:v000015B3d0000101Dsv000015B3sd00000016bc02sc00i00";
/// The node GUID, as sysfs prints it.
pub const NODE_GUID_TEXT: &str = "0c42:a103:0065:7e0a";
/// The node GUID as a number.
pub const NODE_GUID: u64 = 0x0c42_a103_0065_7e0a;
/// The board id `ibv_devinfo` prints.
pub const BOARD_ID: &str = "MT_0000000531";
/// The port's GIDs: the link-local one for RoCE v1 and the same for RoCE v2 (a real port
/// lists each address once per RoCE version).
pub const GIDS: [&str; 2] = ["fe80:0000:0000:0000:0e42:a1ff:fe65:7e0a", "fe80:0000:0000:0000:0e42:a1ff:fe65:7e0a"];
/// The GID types, index for index with [`GIDS`].
pub const GID_TYPES: [&str; 2] = ["IB/RoCE v1", "RoCE v2"];
/// Firmware 22.36.1010, as `fw_ver` packs it (major << 32 | minor << 16 | sub-minor).
pub const FW_VER: u64 = (22 << 32) | (36 << 16) | 1010;
/// Completion vectors the context offers.
pub const NUM_COMP_VECTORS: u32 = 8;
/// The device clock in kHz (1 GHz: one cycle a nanosecond).
pub const CORE_CLOCK_KHZ: u64 = 1_000_000;

/// Limits the command layer enforces and reports.
pub mod limits {
    pub const MAX_QP: u32 = 1 << 17;
    pub const MAX_QP_WR: u32 = 32768;
    pub const MAX_SGE: u32 = 30;
    pub const MAX_CQ: u32 = 1 << 24;
    pub const MAX_CQE: u32 = (1 << 22) - 1;
    pub const MAX_MR: u32 = 1 << 24;
    pub const MAX_PD: u32 = 1 << 23;
    pub const MAX_SRQ: u32 = 1 << 23;
    pub const MAX_SRQ_WR: u32 = 32767;
    pub const MAX_SRQ_SGE: u32 = 31;
    pub const MAX_INLINE: u32 = 512;
    pub const MAX_RD_ATOM: u32 = 16;
}

/// `IB_ATOMIC_HCA`.
const ATOMIC_HCA: u32 = 1;

/// The device attributes of legacy QUERY_DEVICE (and the base of the extended one).
pub fn attributes() -> QueryDeviceResp {
    use limits::*;
    QueryDeviceResp {
        fw_ver: FW_VER,
        node_guid: NODE_GUID.to_be(),
        sys_image_guid: NODE_GUID.to_be(),
        max_mr_size: u64::MAX,
        page_size_cap: 0xffff_ffff_ffff_f000,
        vendor_id: 0x02c9,
        vendor_part_id: 0x101d,
        hw_ver: 0,
        max_qp: MAX_QP,
        max_qp_wr: MAX_QP_WR,
        device_cap_flags: 0xed72_1c36,
        max_sge: MAX_SGE,
        max_sge_rd: MAX_SGE,
        max_cq: MAX_CQ,
        max_cqe: MAX_CQE,
        max_mr: MAX_MR,
        max_pd: MAX_PD,
        max_qp_rd_atom: MAX_RD_ATOM,
        max_ee_rd_atom: 0,
        max_res_rd_atom: MAX_RD_ATOM * MAX_QP,
        max_qp_init_rd_atom: MAX_RD_ATOM,
        max_ee_init_rd_atom: 0,
        atomic_cap: ATOMIC_HCA,
        max_ee: 0,
        max_rdd: 0,
        max_mw: 1 << 24,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        max_mcast_grp: 1 << 21,
        max_mcast_qp_attach: 240,
        max_total_mcast_qp_attach: 240 << 21,
        max_ah: i32::MAX as u32,
        max_fmr: 0,
        max_map_per_fmr: 0,
        max_srq: MAX_SRQ,
        max_srq_wr: MAX_SRQ_WR,
        max_srq_sge: MAX_SRQ_SGE,
        max_pkeys: 128,
        local_ca_ack_delay: 16,
        phys_port_cnt: 1,
        reserved: [0; 4],
    }
}

/// The extended QUERY_DEVICE response (its `response_length` is set by the caller to what
/// it writes).
pub fn attributes_ex() -> ExQueryDeviceResp {
    ExQueryDeviceResp {
        base: attributes(),
        timestamp_mask: (1 << 63) - 1,
        hca_core_clock: CORE_CLOCK_KHZ,
        device_cap_flags_ex: u64::from(attributes().device_cap_flags),
        max_cq_moderation_count: u16::MAX,
        max_cq_moderation_period: 4095,
        ..ExQueryDeviceResp::default()
    }
}

/// `IBV_PORT_ACTIVE`.
pub const PORT_ACTIVE: u8 = 4;
/// `IBV_MTU_4096`.
pub const MTU_4096: u8 = 5;
/// `IBV_LINK_LAYER_ETHERNET`.
pub const LINK_LAYER_ETHERNET: u8 = 2;

/// Port 1's attributes: active, RoCE (Ethernet link layer), 4096-byte MTU, 4x 25 Gb/s lanes
/// (100 Gb/s), one P_Key, the GID table sysfs lists.
pub fn port() -> QueryPortResp {
    QueryPortResp {
        port_cap_flags: 0x0401_0000,
        max_msg_sz: 1 << 30,
        gid_tbl_len: GIDS.len() as u32,
        pkey_tbl_len: 1,
        state: PORT_ACTIVE,
        max_mtu: MTU_4096,
        active_mtu: MTU_4096,
        max_vl_num: 4,
        // IB_WIDTH_4X and IB_SPEED_EDR (25 Gb/s a lane).
        active_width: 2,
        active_speed: 32,
        // LinkUp.
        phys_state: 5,
        link_layer: LINK_LAYER_ETHERNET,
        ..QueryPortResp::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_limit_a_provider_divides_by_or_sizes_with_is_zero() {
        let a = attributes();
        for (name, v) in [
            ("max_qp", a.max_qp),
            ("max_qp_wr", a.max_qp_wr),
            ("max_sge", a.max_sge),
            ("max_cqe", a.max_cqe),
            ("max_srq_wr", a.max_srq_wr),
            ("max_srq_sge", a.max_srq_sge),
            ("atomic_cap", a.atomic_cap),
            ("phys_port_cnt", u32::from(a.phys_port_cnt)),
        ] {
            assert_ne!(v, 0, "{name}");
        }
        let p = port();
        assert_eq!((p.state, p.link_layer), (PORT_ACTIVE, LINK_LAYER_ETHERNET));
        assert_eq!(p.gid_tbl_len as usize, GIDS.len());
        assert_ne!(p.max_msg_sz, 0);
    }
}
