//! `dvcq devices`: every RDMA device and model, as `ibv_devinfo` shows them, with the dvcq
//! backend that applies to each and why.

use super::output::Output;
use super::CliError;
use crate::device::{self, DeviceInfo, DeviceList};
use std::process::ExitCode;

/// Arguments of `dvcq devices`.
#[derive(Debug, clap::Args)]
pub struct DevicesArgs {
    /// One JSON line: an object with `rdma_core`, `devices` (each with `name`, `driver`,
    /// `backend`, `reason`, `ports`, ...), and `no_hardware` when no real device is listed.
    #[arg(long)]
    json: bool,
    /// Only this device (a name `dvcq devices` lists, or a model); all of them without it.
    #[arg(short = 'd', long = "device", value_name = "NAME")]
    device: Option<String>,
    /// Instead of the devices: each rdma-core release range the private-layout tables of
    /// the direct attaches cover, one `VENDOR FROM-TO` line each (`--json`: one JSON line,
    /// a list of `{vendor, from, to}`).
    #[arg(long)]
    layouts: bool,
}

/// One release range a private-layout table covers.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LayoutRange {
    /// The backend whose table it is (`mlx5`, `irdma`, `rxe`).
    pub vendor: &'static str,
    /// The first release (`v44.0`; rxe's table is by major release: `v44`).
    pub from: String,
    /// The last release read to have the layout.
    pub to: String,
}

/// Every range of every private-layout table, oldest first per vendor.
pub fn layout_ranges() -> Vec<LayoutRange> {
    let mlx5 = dvcq_uapi::mlx5::rdma_core::MLX5_LAYOUTS.iter().map(|l| LayoutRange {
        vendor: "mlx5",
        from: format!("v{}.{}", l.first.0, l.first.1),
        to: format!("v{}.{}", l.last.0, l.last.1),
    });
    let irdma = dvcq_uapi::irdma::rdma_core::IRDMA_LAYOUTS.iter().map(|l| LayoutRange {
        vendor: "irdma",
        from: format!("v{}.{}", l.first.0, l.first.1),
        to: format!("v{}.{}", l.last.0, l.last.1),
    });
    let rxe = dvcq_uapi::rxe::cq_layout::RXE_CQ_LAYOUTS.iter().map(|l| LayoutRange {
        vendor: "rxe",
        from: format!("v{}", l.first_major),
        to: format!("v{}", l.last_major),
    });
    mlx5.chain(irdma).chain(rxe).collect()
}

impl DevicesArgs {
    /// Runs the subcommand.
    ///
    /// # Errors
    ///
    /// An unknown `--device`, or output that cannot be written.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        if self.layouts {
            let ranges = layout_ranges();
            let mut out = Output::stdout();
            if self.json {
                let text = serde_json::to_string(&ranges).map_err(|e| CliError(e.to_string()))?;
                out.line(&text)?;
            } else {
                for r in &ranges {
                    out.line(&format!("{} {}-{}", r.vendor, r.from, r.to))?;
                }
            }
            return Ok(ExitCode::SUCCESS);
        }
        let mut list = device::list();
        if let Some(name) = &self.device {
            if !list.devices.iter().any(|d| &d.name == name) {
                let known: Vec<String> = list.devices.iter().map(|d| d.name.clone()).collect();
                let hint = super::device_name::suggestion(name, &known)
                    .map_or_else(String::new, |n| format!(": did you mean {n}?"));
                return Err(CliError(format!("no device named {name:?}{hint} (devices here: {})", known.join(", "))));
            }
            list.devices.retain(|d| &d.name == name);
        }
        let mut out = Output::stdout();
        if self.json {
            let text = serde_json::to_string(&list).map_err(|e| CliError(e.to_string()))?;
            out.line(&text)?;
        } else {
            out.write(&render(&list))?;
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The human table: one `ibv_devinfo -v` style block per device, then the rdma-core line.
pub fn render(list: &DeviceList) -> String {
    let mut s = String::new();
    for d in &list.devices {
        render_device(&mut s, d);
        s.push('\n');
    }
    for u in &list.unreadable {
        s.push_str(&format!("unreadable: {u}\n"));
    }
    match &list.rdma_core {
        Some(r) => s.push_str(&format!("rdma-core: {r}\n")),
        None => s.push_str("rdma-core: none loaded\n"),
    }
    if let Some(why) = &list.no_hardware {
        s.push_str(&format!("no hardware: {why}; the models above are always there\n"));
    }
    s
}

fn render_device(s: &mut String, d: &DeviceInfo) {
    let row = |s: &mut String, k: &str, v: String| s.push_str(&format!("\t{:<20}{v}\n", format!("{k}:")));
    s.push_str(&format!("hca_id:\t{}\n", d.name));
    row(s, "backend", format!("{} ({})", d.backend, d.reason));
    row(s, "driver", format!("{} (provider {})", d.driver, d.provider));
    row(s, "transport", d.transport.clone());
    row(s, "node_type", d.node_type.clone());
    row(s, "node_guid", d.node_guid.clone());
    row(s, "vendor_id", format!("{:#06x}", d.vendor_id));
    row(s, "vendor_part_id", d.vendor_part_id.to_string());
    row(s, "hw_ver", format!("{:#x}", d.hw_ver));
    row(s, "fw_ver", if d.fw_ver.is_empty() { "-".into() } else { d.fw_ver.clone() });
    row(s, "max_cqe", d.max_cqe.to_string());
    row(s, "max_cq", d.max_cq.to_string());
    row(s, "max_qp", d.max_qp.to_string());
    row(s, "max_qp_wr", d.max_qp_wr.to_string());
    row(s, "max_sge", d.max_sge.to_string());
    row(s, "max_srq_wr", d.max_srq_wr.to_string());
    row(s, "num_comp_vectors", d.num_comp_vectors.to_string());
    row(s, "phys_port_cnt", d.ports.len().to_string());
    for p in &d.ports {
        s.push_str(&format!("\t\tport:\t{}\n", p.port));
        let prow = |s: &mut String, k: &str, v: String| s.push_str(&format!("\t\t\t{:<16}{v}\n", format!("{k}:")));
        prow(s, "state", p.state.clone());
        prow(s, "link_layer", p.link_layer.clone());
        prow(s, "active_mtu", p.active_mtu.to_string());
        prow(s, "port_lid", p.lid.to_string());
        for g in &p.gids {
            let kind = if g.kind.is_empty() { String::new() } else { format!(", {}", g.kind) };
            prow(s, &format!("GID[{:>3}]", g.index), format!("{}{kind}", g.gid));
        }
    }
}
