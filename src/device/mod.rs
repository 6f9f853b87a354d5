//! Devices: the RDMA devices rdma-core finds and the built-in models, listed and opened by
//! name ([`crate::Context::open`]).
//!
//! Layer: what a device is and says of itself, below `context` (a context's `info` is a
//! [`DeviceInfo`]). It may import `backend` (which backend a device's CQs get), `model_device`,
//! `sys`, `error` and the vocabulary (`verbs`, `id`); never `context`, `cq`, `qp` or `event`.

pub mod counters;
mod info;

pub use crate::sys::release::{provider_name, rdma_core_release, ChosenRelease, Release, ReleaseError};
pub use info::{gid_string, guid_string, DeviceInfo, GidInfo, PortInfo};

use serde::Serialize;

/// What `dvcq devices` lists: the rdma-core release loaded, every device, and why there is
/// no hardware when there is none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceList {
    /// The rdma-core release whose libibverbs this process loaded (`v44.0`), or `None` where
    /// rdma-core cannot be loaded.
    pub rdma_core: Option<String>,
    /// Real devices first, in rdma-core's order, then the models.
    pub devices: Vec<DeviceInfo>,
    /// Why no real device is listed, when none is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_hardware: Option<String>,
    /// Devices rdma-core lists that could not be queried, with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

/// The crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Whether rdma-core's libibverbs can be loaded in this process (it is loaded at run time,
/// by soname; `DVCQ_NO_RDMA_CORE=1` makes the answer no). Without it the models work and
/// real devices cannot be opened.
pub fn rdma_core_available() -> bool {
    crate::sys::loader::verbs_loaded().is_ok()
}

/// What `dvcq --version` prints after the name: [`VERSION`] and, in brackets, what
/// [`rdma_core_status`] says of this machine.
pub fn version_line() -> &'static str {
    static LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINE.get_or_init(|| format!("{VERSION} ({})", rdma_core_status()))
}

/// Which rdma-core this process loads, for `dvcq --version`: `rdma-core v44.0
/// (/usr/lib/.../libibverbs.so.1.14.44.0)`, or that none can be loaded, why, and what to
/// install. rdma-core is loaded at run time, so this is a fact of the machine, not of the
/// build.
pub fn rdma_core_status() -> String {
    match crate::sys::loader::verbs_loaded() {
        Err(e) => format!("no rdma-core: {e}"),
        Ok(_) => match crate::sys::device::libibverbs_file() {
            Some(file) => match Release::from_libibverbs_file(&file) {
                Some(r) => format!("rdma-core {r} ({})", file.display()),
                None => format!("rdma-core ({})", file.display()),
            },
            None => "rdma-core (libibverbs.so.1)".to_string(),
        },
    }
}

/// The built-in model devices' names.
pub const MODEL_NAMES: [&str; 2] = ["model-mlx5", "model-e810"];

/// The name of every device that can be opened, real ones first.
pub fn names() -> Vec<String> {
    let mut v = hardware_names().unwrap_or_default();
    v.extend(MODEL_NAMES.iter().map(|s| s.to_string()));
    v
}

fn hardware_names() -> Result<Vec<String>, String> {
    use crate::sys::device::ListError;
    crate::sys::device::device_names().map_err(|e| match e {
        ListError::NoRdmaCore(e) => e.to_string(),
        ListError::Verbs(e) if e.errno == libc::ENOSYS => {
            format!("this kernel has no RDMA support (no /sys/class/infiniband; {e})")
        }
        ListError::Verbs(e) => e.to_string(),
    })
}

/// Lists every device, querying each real one (and, to say which backend applies, making
/// and attaching a one-entry CQ on it).
pub fn list() -> DeviceList {
    let mut devices = Vec::new();
    let mut unreadable = Vec::new();
    let no_hardware = match hardware_names() {
        Err(why) => Some(why),
        Ok(names) if names.is_empty() => {
            Some("rdma-core lists no RDMA device (no NIC, or no RDMA driver loaded in this kernel)".into())
        }
        Ok(names) => {
            for name in names {
                match crate::sys::device::Context::open(&name)
                    .map_err(|e| open_error(&name, e))
                    .and_then(|c| verbs_info(&c))
                {
                    Ok(info) => devices.push(info),
                    Err(e) => unreadable.push(format!("{name}: {e}")),
                }
            }
            None
        }
    };
    devices.extend(model_infos());
    DeviceList { rdma_core: rdma_core_release().map(|r| r.to_string()), devices, no_hardware, unreadable }
}

/// Completion vectors a model device reports (model choice: one, as a one-queue device).
pub(crate) const MODEL_COMP_VECTORS: u32 = 1;

/// Why a real device could not be opened, as the API's error: the devices that exist for an
/// unknown name, what to install where rdma-core cannot be loaded.
pub(crate) fn open_error(name: &str, e: crate::sys::device::OpenError) -> crate::Error {
    use crate::sys::device::OpenError;
    use crate::Error;
    match e {
        OpenError::Unknown { name } => Error::UnknownDevice { name, available: names() },
        OpenError::NoRdmaCore(e) => Error::NoRdmaCore {
            what: format!("opening {name:?} (only model-mlx5 and model-e810 exist here)"),
            why: e.why,
        },
        // No device list at all (a kernel without RDMA): the name is simply unknown.
        OpenError::Verbs(source) if source.call == "ibv_get_device_list" => {
            Error::UnknownDevice { name: name.to_string(), available: names() }
        }
        OpenError::Verbs(source) => Error::Verbs { device: name.to_string(), source },
    }
}

/// The models, as `dvcq devices` lists them.
pub fn model_infos() -> Vec<DeviceInfo> {
    use crate::model_device::ModelDevice;
    use crate::model_device::ModelVendor;
    [ModelVendor::Mlx5, ModelVendor::Irdma].into_iter().map(|v| model_info(&ModelDevice::new(v))).collect()
}

/// What `dvcq devices` says about a model: what it reports ([`ModelDevice::attrs`]).
///
/// [`ModelDevice::attrs`]: crate::model_device::ModelDevice::attrs
pub(crate) fn model_info(model: &crate::model_device::ModelDevice) -> DeviceInfo {
    use crate::model_device::ModelVendor;
    let vendor = model.vendor();
    let a = model.attrs();
    let gid = model.gid();
    let (vendor_id, part, what) = match vendor {
        // PCI ids of the parts the models play: ConnectX-6 (0x15b3:0x101b), E810-C (0x8086:0x1592).
        ModelVendor::Mlx5 => {
            (0x15b3, 0x101b, "dvcq's mlx5 poller on a modelled ConnectX-6 CQ that executes posted work")
        }
        ModelVendor::Irdma => {
            (0x8086, 0x1592, "dvcq's irdma poller on a modelled E810 (GEN2) CQ that executes posted work")
        }
    };
    DeviceInfo {
        name: vendor.device_name().to_string(),
        driver: "model".into(),
        provider: "model".into(),
        node_guid: guid_string(0),
        vendor_id,
        vendor_part_id: part,
        hw_ver: 0,
        fw_ver: String::new(),
        node_type: "CA".into(),
        transport: "InfiniBand".into(),
        max_cqe: a.max_cqe,
        // Model choice: the models hold as many CQs and QPs as memory allows; these are the
        // figures they report.
        max_cq: 1 << 16,
        max_qp: 1 << 16,
        max_qp_wr: a.max_qp_wr,
        max_sge: a.max_sge,
        max_srq_wr: a.max_srq_wr,
        num_comp_vectors: MODEL_COMP_VECTORS,
        ports: vec![PortInfo {
            port: 1,
            state: "PORT_ACTIVE".into(),
            link_layer: "Ethernet".into(),
            active_mtu: a.mtu,
            lid: 0,
            gids: vec![GidInfo { index: 0, gid: gid_string(&gid), kind: "RoCE v2".into() }],
        }],
        backend: "model".into(),
        reason: what.into(),
    }
}

/// The port dvcq uses on a device (the first active one, else 1) and the GID index on it
/// (RoCE: the first RoCE v2 GID that maps an IPv4 address, else the first RoCE v2 one, else
/// 0; InfiniBand: 0).
pub(crate) fn default_port_and_gid(ctx: &crate::sys::device::Context) -> (u8, u8) {
    let ports = ctx.device_attr().map(|a| a.phys_port_cnt).unwrap_or(1).max(1);
    let port = (1..=ports).find(|&p| ctx.port_attr(p).is_ok_and(|a| a.state == 4)).unwrap_or(1);
    let Ok(attr) = ctx.port_attr(port) else { return (port, 0) };
    if attr.link_layer != 2 {
        return (port, 0);
    }
    let gids = gids(ctx, port, attr.gid_tbl_len);
    let v2 = |g: &&GidInfo| g.kind == "RoCE v2";
    let mapped = gids.iter().filter(v2).find(|g| g.gid.starts_with("0000:0000:0000:0000:0000:ffff:"));
    let pick = mapped.or_else(|| gids.iter().find(v2)).map_or(0, |g| g.index);
    (port, u8::try_from(pick).unwrap_or(0))
}

/// The most GID table entries read of a port: a GID index travels in 8 bits
/// (`ibv_global_route.sgid_index`), so entries past 255 cannot be used.
const MAX_GIDS: i32 = 256;

/// The GID indices to read of a port whose `gid_tbl_len` is `len`, whatever the device
/// reported: none for a negative length, at most [`MAX_GIDS`] (an absurd length would
/// otherwise mean billions of `ibv_query_gid` calls).
fn gid_indices(len: i32) -> std::ops::Range<i32> {
    0..len.clamp(0, MAX_GIDS)
}

/// The valid GIDs of a port, with their kinds from sysfs.
fn gids(ctx: &crate::sys::device::Context, port: u8, len: i32) -> Vec<GidInfo> {
    let base = ctx.ibdev_path().join("ports").join(port.to_string()).join("gid_attrs").join("types");
    gid_indices(len)
        .filter_map(|i| {
            let gid = ctx.gid(port, i).ok()?;
            if gid == [0; 16] {
                return None;
            }
            let kind =
                std::fs::read_to_string(base.join(i.to_string())).map(|s| s.trim().to_string()).unwrap_or_default();
            Some(GidInfo { index: i as u32, gid: gid_string(&gid), kind })
        })
        .collect()
}

/// The kernel driver behind a device: sysfs's `device/driver` link, or `rdma_rxe` for the
/// soft-RoCE devices that have no bus device.
fn kernel_driver(ctx: &crate::sys::device::Context, provider: &str) -> String {
    let link = ctx.ibdev_path().join("device").join("driver");
    match std::fs::read_link(&link) {
        Ok(target) => target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        Err(_) if provider == "rxe" => "rdma_rxe".into(),
        Err(_) => "unknown".into(),
    }
}

/// What `dvcq devices` says about an open real device.
pub(crate) fn verbs_info(ctx: &std::sync::Arc<crate::sys::device::Context>) -> Result<DeviceInfo, crate::Error> {
    use crate::backend::BackendChoice;
    use crate::backend::Origin;
    let name = ctx.name().to_string();
    let verbs = |source| crate::Error::Verbs { device: name.clone(), source };
    let attr = ctx.device_attr().map_err(verbs)?;
    let provider = crate::backend::provider_of(ctx).unwrap_or_else(|| "unknown".into());
    let mut ports = Vec::new();
    for p in 1..=attr.phys_port_cnt {
        let a = ctx.port_attr(p).map_err(verbs)?;
        ports.push(PortInfo {
            port: p,
            state: info::port_state_name(a.state).to_string(),
            link_layer: info::link_layer_name(a.link_layer).to_string(),
            active_mtu: info::mtu_bytes(a.active_mtu),
            lid: a.lid,
            gids: gids(ctx, p, a.gid_tbl_len),
        });
    }
    // The backend an application's CQ gets here (`Cq::attach`), found by making the
    // smallest CQ and attaching to it.
    let (backend, mut reason) = match crate::sys::cq::VerbsCq::create(ctx, 1, 0, None) {
        Ok(cq) => match crate::backend::choose_for(&name, ctx, cq, BackendChoice::Auto, Origin::Application) {
            Ok((_, b)) => (b.kind.name().to_string(), b.reason),
            Err(e) => ("generic".to_string(), e.to_string()),
        },
        Err(e) => ("generic".to_string(), format!("could not make a CQ to check the direct backend: {e}")),
    };
    // On mlx5 and irdma dvcq's own CQs adopt dvcq's own QPs (and on mlx5 are made another
    // way, mlx5dv_create_cq): say which backend they get too, found the same way.
    if provider == "mlx5" || provider == "irdma" {
        let (made, origin) = if provider == "mlx5" {
            let created = crate::backend::mlx5::Created { cqe_size: 64, compression: None, ignore_overrun: false };
            let attrs =
                crate::sys::cq::Mlx5CqAttrs { cqe_size: 64, comp_res_format: None, pad: false, ignore_overrun: false };
            (crate::sys::cq::VerbsCq::create_mlx5(ctx, 1, 0, None, &attrs), Origin::Dvcq { created: Some(created) })
        } else {
            (crate::sys::cq::VerbsCq::create(ctx, 1, 0, None), Origin::Dvcq { created: None })
        };
        let own = match made {
            Ok(cq) => match crate::backend::choose_for(&name, ctx, cq, BackendChoice::Auto, origin) {
                Ok((_, b)) => format!("{}: {}", b.kind.name(), b.reason),
                Err(e) => format!("generic: {e}"),
            },
            Err(e) => format!("could not make one to check ({e})"),
        };
        reason = format!("attached CQs (Cq::attach): {reason}; dvcq's own CQs (Context::create_cq): {own}");
    }
    let (node_type, transport) = ctx.node_and_transport();
    let fw: Vec<u8> = attr.fw_ver.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    let count = |v: i32| u32::try_from(v).unwrap_or(0);
    Ok(DeviceInfo {
        name: name.clone(),
        driver: kernel_driver(ctx, &provider),
        provider,
        node_guid: guid_string(ctx.node_guid()),
        vendor_id: attr.vendor_id,
        vendor_part_id: attr.vendor_part_id,
        hw_ver: attr.hw_ver,
        fw_ver: String::from_utf8_lossy(&fw).into_owned(),
        node_type: info::node_type_name(node_type).to_string(),
        transport: info::transport_name(transport).to_string(),
        max_cqe: count(attr.max_cqe),
        max_cq: count(attr.max_cq),
        max_qp: count(attr.max_qp),
        max_qp_wr: count(attr.max_qp_wr),
        max_sge: count(attr.max_sge),
        max_srq_wr: count(attr.max_srq_wr),
        num_comp_vectors: ctx.num_comp_vectors(),
        ports,
        backend,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gid_table_read_is_bounded_whatever_its_reported_length() {
        assert_eq!(gid_indices(-1), 0..0);
        assert_eq!(gid_indices(0), 0..0);
        assert_eq!(gid_indices(16), 0..16);
        assert_eq!(gid_indices(i32::MAX), 0..MAX_GIDS);
    }
}
