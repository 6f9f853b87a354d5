//! What `dvcq devices` reports about a device: the facts `ibv_devinfo -v` prints that
//! matter to a CQ, and which dvcq backend applies and why.

use serde::Serialize;

/// One RDMA device, real or model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceInfo {
    /// The name to open it by (`rxe0`, `mlx5_0`, `model-mlx5`).
    pub name: String,
    /// The kernel driver (`mlx5_core`, `irdma`, `rdma_rxe`), or `model`.
    pub driver: String,
    /// The rdma-core provider library serving it (`mlx5`, `irdma`, `rxe`, ...), or `model`.
    pub provider: String,
    /// Node GUID, as `ibv_devinfo` prints it (`0000:0000:0000:0000`).
    pub node_guid: String,
    /// PCI vendor id (`0x15b3` Mellanox, `0x8086` Intel; 0 for soft devices).
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware revision.
    pub hw_ver: u32,
    /// Firmware version string (may be empty).
    pub fw_ver: String,
    /// Node type (`CA`, `RNIC`, ...).
    pub node_type: String,
    /// Transport (`InfiniBand`, `iWARP`, ...).
    pub transport: String,
    /// Largest CQ depth.
    pub max_cqe: u32,
    /// Most CQs.
    pub max_cq: u32,
    /// Most QPs.
    pub max_qp: u32,
    /// Largest work queue.
    pub max_qp_wr: u32,
    /// Most scatter/gather entries per work request.
    pub max_sge: u32,
    /// Largest SRQ.
    pub max_srq_wr: u32,
    /// Completion vectors (interrupt vectors CQs can be spread over).
    pub num_comp_vectors: u32,
    /// Ports, numbered from 1.
    pub ports: Vec<PortInfo>,
    /// The backend `Cq::create` uses on it: `mlx5`, `irdma`, `rxe`, `generic` or `model`.
    pub backend: String,
    /// Why that backend.
    pub reason: String,
}

/// One port of a device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PortInfo {
    /// Port number (from 1).
    pub port: u8,
    /// `PORT_ACTIVE`, `PORT_DOWN`, ...
    pub state: String,
    /// `InfiniBand` or `Ethernet`.
    pub link_layer: String,
    /// Active MTU in bytes.
    pub active_mtu: u32,
    /// LID (0 on Ethernet).
    pub lid: u16,
    /// The valid entries of the GID table.
    pub gids: Vec<GidInfo>,
}

/// A GID table entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GidInfo {
    /// Table index.
    pub index: u32,
    /// The GID in IPv6 notation with every group written (`fe80:0000:...`, as
    /// `ibv_devinfo -v` does).
    pub gid: String,
    /// `IB/RoCE v1`, `RoCE v2` or empty where the kernel says nothing.
    pub kind: String,
}

/// `ibv_port_state_str` names.
pub fn port_state_name(state: u32) -> &'static str {
    match state {
        0 => "PORT_NOP",
        1 => "PORT_DOWN",
        2 => "PORT_INIT",
        3 => "PORT_ARMED",
        4 => "PORT_ACTIVE",
        5 => "PORT_ACTIVE_DEFER",
        _ => "invalid state",
    }
}

/// Bytes of an `enum ibv_mtu` value (0 when it is none).
pub fn mtu_bytes(mtu: u32) -> u32 {
    match mtu {
        1..=5 => 128 << mtu,
        _ => 0,
    }
}

/// `ibv_node_type_str` names.
pub fn node_type_name(t: i32) -> &'static str {
    match t {
        1 => "CA",
        2 => "switch",
        3 => "router",
        4 => "RNIC",
        5 => "usNIC",
        6 => "usNIC UDP",
        7 => "unspecified",
        _ => "unknown",
    }
}

/// Transport names as `ibv_devinfo` prints them.
pub fn transport_name(t: i32) -> &'static str {
    match t {
        0 => "InfiniBand",
        1 => "iWARP",
        2 => "usNIC",
        3 => "usNIC UDP",
        4 => "unspecified",
        _ => "invalid transport",
    }
}

/// Link layer names (`IBV_LINK_LAYER_*`; unspecified reads as InfiniBand, as verbs says).
pub fn link_layer_name(l: u8) -> &'static str {
    match l {
        0 | 1 => "InfiniBand",
        2 => "Ethernet",
        _ => "unknown",
    }
}

/// A GUID in `ibv_devinfo`'s `xxxx:xxxx:xxxx:xxxx` form, from its host-order value.
pub fn guid_string(guid: u64) -> String {
    let g = guid.to_be_bytes();
    format!("{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}", g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7])
}

/// A GID in full IPv6 groups.
pub fn gid_string(gid: &[u8; 16]) -> String {
    gid.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_libibverbs() {
        assert_eq!(port_state_name(4), "PORT_ACTIVE");
        assert_eq!(port_state_name(9), "invalid state");
        assert_eq!(mtu_bytes(3), 1024);
        assert_eq!(mtu_bytes(5), 4096);
        assert_eq!(mtu_bytes(0), 0);
        assert_eq!(node_type_name(1), "CA");
        assert_eq!(transport_name(1), "iWARP");
        assert_eq!(link_layer_name(2), "Ethernet");
    }

    #[test]
    fn guids_and_gids_print_as_ibv_devinfo_does() {
        assert_eq!(guid_string(0x0011_2233_4455_6677), "0011:2233:4455:6677");
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[127, 0, 0, 2]);
        assert_eq!(gid_string(&gid), "0000:0000:0000:0000:0000:ffff:7f00:0002");
    }
}
