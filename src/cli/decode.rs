//! `dvcq decode`: find error-CQE dumps in any text and say what they mean.

use super::output::{warn, Output};
use super::CliError;
use crate::decode::{render_text, scan_with, Report, RingCqeSize, ScanOptions, Vendor};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

/// Vendor whose dump formats to look for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum VendorArg {
    /// ConnectX: rdma-core, kernel, DPDK dumps and bare 64-byte hex strings.
    #[default]
    Mlx5,
    /// Intel E810/X722: CQEs as four or eight 64-bit hex qwords.
    Irdma,
}

const AFTER_HELP: &str = "\
Input: any text (whole logs too) holding one or more dumps:
  rdma-core   'mlx5: <host>: got completion with error:' + 4 lines of '%08x %08x %08x %08x'
  kernel      print_hex_dump lines '[cqe_dump: ]00000000: 00 11 ...' (16 bytes a line)
  DPDK        'MLX5 Error CQ: at [0x..], len=N' + rte_hexdump lines (error CQEs of the ring;
              64- or 128-byte CQEs, see --cqe-size)
  bare        one line of 64 bytes in hex, spaces optional (success CQEs decode too)
  irdma       4 or 8 hex qwords per CQE (with --vendor irdma); '%016llx', or 4 or 8 '0x%llx' a line
Problems are reported with their line number and reason; decoding goes on.

Exit status:
  0  at least one dump decoded and no problem reported
  1  a bad dump was reported (the good ones are still printed), or no dump was found
  2  usage or I/O error";

/// Arguments of `dvcq decode`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct DecodeArgs {
    /// File to read; `-` or nothing reads standard input.
    #[arg(value_name = "FILE|-")]
    pub input: Option<PathBuf>,
    /// Which vendor's formats to look for.
    #[arg(long, value_enum, default_value_t = VendorArg::Mlx5)]
    pub vendor: VendorArg,
    /// Print JSON lines: one object per decoded CQE ("type":"cqe") and per problem
    /// ("type":"problem"), in line order.
    #[arg(long)]
    pub json: bool,
    /// mlx5: the CQE size of a dumped CQ ring (DPDK dumps the whole ring). `auto` reads
    /// 128-byte CQEs when every slot's first half is zero, as in the rings DPDK creates when
    /// built with 128-byte cache lines (arm64's generic build); set 128 when those halves
    /// hold inline data. A dump of one 64-byte CQE is that CQE either way.
    #[arg(long, value_enum, default_value_t = CqeSizeArg::Auto)]
    pub cqe_size: CqeSizeArg,
}

/// `--cqe-size` of `dvcq decode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CqeSizeArg {
    /// 128 when every slot's first half is zero, else 64.
    #[default]
    Auto,
    /// 64-byte CQEs.
    #[value(name = "64")]
    Bytes64,
    /// 128-byte CQEs, the cqe64 in each one's second half.
    #[value(name = "128")]
    Bytes128,
}

impl DecodeArgs {
    /// Runs the subcommand.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        if self.vendor == VendorArg::Irdma && self.cqe_size != CqeSizeArg::Auto {
            return Err(CliError(
                "decode: --cqe-size applies to mlx5 rings; an irdma CQE's size comes from its qwords (4 or 8)".into(),
            ));
        }
        let mut raw = Vec::new();
        let name = match &self.input {
            Some(p) if p.as_os_str() != "-" => {
                raw = std::fs::read(p).map_err(|e| CliError(format!("decode: cannot read {}: {e}", p.display())))?;
                p.display().to_string()
            }
            _ => {
                std::io::stdin()
                    .read_to_end(&mut raw)
                    .map_err(|e| CliError(format!("decode: cannot read standard input: {e}")))?;
                "<stdin>".to_string()
            }
        };
        let text = String::from_utf8_lossy(&raw);
        let vendor = match self.vendor {
            VendorArg::Mlx5 => Vendor::Mlx5,
            VendorArg::Irdma => Vendor::Irdma,
        };
        let ring_cqe_size = match self.cqe_size {
            CqeSizeArg::Auto => RingCqeSize::Auto,
            CqeSizeArg::Bytes64 => RingCqeSize::Bytes64,
            CqeSizeArg::Bytes128 => RingCqeSize::Bytes128,
        };
        let report = scan_with(&text, vendor, ScanOptions { ring_cqe_size });
        let out = if self.json { render_json(&report)? } else { render_human(&report, &name) };
        Output::stdout().write(&out)?;
        if !self.json {
            for p in &report.problems {
                warn(&format!("dvcq decode: {name}: {p}"));
            }
            if report.dumps.is_empty() && report.problems.is_empty() {
                let empty = if text.trim().is_empty() { "the input is empty: " } else { "" };
                warn(&format!("dvcq decode: {name}: {empty}no CQE dump found"));
            }
        }
        Ok(exit_code(&report))
    }
}

/// 0 when something decoded and nothing was wrong, else 1.
pub fn exit_code(r: &Report) -> ExitCode {
    if !r.dumps.is_empty() && r.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn render_human(r: &Report, name: &str) -> String {
    let mut s = String::new();
    for (i, f) in r.dumps.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        s.push_str(&render_text(i + 1, f));
    }
    if !r.problems.is_empty() && !r.dumps.is_empty() {
        s.push_str(&format!(
            "\n{} dump(s) decoded, {} problem(s) in {name} (see standard error)\n",
            r.dumps.len(),
            r.problems.len()
        ));
    }
    s
}

/// JSON lines for a report, dumps and problems merged in line order.
pub fn render_json(r: &Report) -> Result<String, CliError> {
    let err = |e: serde_json::Error| CliError(format!("decode: JSON encoding failed: {e}"));
    let mut items: Vec<(usize, u8, serde_json::Value)> = Vec::new();
    for f in &r.dumps {
        let mut v = serde_json::to_value(f).map_err(err)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), "cqe".into());
        }
        items.push((f.line, 0, v));
    }
    for p in &r.problems {
        let mut v = serde_json::to_value(p).map_err(err)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), "problem".into());
        }
        items.push((p.line, 1, v));
    }
    items.sort_by_key(|(l, k, _)| (*l, *k));
    let mut s = String::new();
    for (_, _, v) in items {
        s.push_str(&serde_json::to_string(&v).map_err(err)?);
        s.push('\n');
    }
    Ok(s)
}
