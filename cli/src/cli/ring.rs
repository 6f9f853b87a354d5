//! `dvcq ring`: decode ring images and export model scenarios as images.

use super::output::Output;
use super::CliError;
use crate::image::decode_raw_as;
use crate::irdma::Compat;
use crate::provider::image::{parse_image, ImageError, ImageVendor, LineStyle};
use crate::scenario::{self, Scenario};
use crate::uapi::mlx5::cq_size as mlx5_cq;
use std::io::Read;
use std::process::ExitCode;

/// Arguments of `dvcq ring`.
#[derive(Debug, clap::Args)]
pub struct RingArgs {
    #[command(subcommand)]
    what: RingWhat,
}

#[derive(Debug, clap::Subcommand)]
enum RingWhat {
    /// Print the canonical completion lines of a ring image (FILE, or - for stdin).
    Decode {
        /// The image file; `-` or nothing reads standard input.
        file: Option<String>,
        /// irdma: decode as this rdma-core release polls (`v44.7`, or `v44` for v44.0; the
        /// default is current rdma-core, v64 and later). Releases differ in a few statuses
        /// and opcodes: v44 to v51 (Debian 12's v44.0, Ubuntu 24.04's v50.0); v52 to v63,
        /// with the v44-v51 point releases from v44.7, v45.6, v46.5, v47.4, v48.3, v49.3,
        /// v50.2 and v51.2 on; v64 on. Every release also skips an iWARP connection WQE's
        /// CQE as rdma-core does, one slot without the polarity flip (the default skips it
        /// whole).
        #[arg(long, value_name = "vN[.M]", value_parser = parse_release)]
        rdma_core: Option<Release>,
        /// Print libibverbs' names for the status, opcode and flags of each `wc` line
        /// (`status=IBV_WC_REM_ACCESS_ERR opcode=IBV_WC_SEND wc_flags=IBV_WC_WITH_IMM`), as
        /// `dvcq decode` does, instead of the canonical numbers images are compared by.
        #[arg(long)]
        names: bool,
    },
    /// Play a scenario on a hardware model and print its ring as an image.
    Export {
        /// What happens on the CQ.
        #[arg(long, value_enum, default_value = "mixed")]
        scenario: Scenario,
        /// Which model: model-mlx5 (or mlx5) or model-e810 (or e810, irdma); `--vendor` is
        /// an older spelling.
        #[arg(short = 'd', long = "device", alias = "vendor", default_value = super::device_name::DEFAULT_DEVICE,
              value_name = "DEVICE", value_parser = parse_export_vendor)]
        vendor: ExportVendor,
        /// Ring entries: mlx5, a power of two from 2; irdma, a size rdma-core allocates (`cqe +
        /// 1`, doubled on GEN2, rounded to even since v64: even from 4 on GEN2 and GEN3).
        #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(0..=i64::from(u32::MAX)))]
        entries: u32,
        /// CQE size in bytes. mlx5: 64 (default) or 128; irdma: what the generation writes
        /// (32, or 64 on GEN3).
        #[arg(long, value_parser = clap::value_parser!(u32).range(0..=i64::from(u32::MAX)))]
        cqe_size: Option<u32>,
        /// irdma hardware generation: 1 (X722), 2 (E810, default), 3.
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=3))]
        hw_rev: Option<u8>,
        /// mlx5: create the CQ with CQE compression in this layout (the model then
        /// compresses every run of compatible completions).
        #[arg(long, value_enum, default_value = "none")]
        compression: CompressionArg,
        /// mlx5, with --compression: the responder mini-CQE format (default hash).
        #[arg(long, requires = "compression", value_parser = ["hash", "csum", "csum_stridx", "ftag_stridx", "l34h_stridx"])]
        mini: Option<String>,
    },
}

/// CQE compression layouts for `--compression`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CompressionArg {
    /// No compression.
    None,
    /// The basic layout (`mlx5dv_create_cq`).
    Basic,
    /// The enhanced layout (DevX CQs).
    Enhanced,
}

impl CompressionArg {
    /// The CQ setting, with mini-CQE format word `mini` (default hash).
    ///
    /// # Errors
    ///
    /// [`CliError`] for a format without compression, or an unknown format.
    pub(crate) fn config(self, mini: Option<&str>) -> Result<Option<crate::mlx5::CompressionConfig>, CliError> {
        let layout = match (self, mini) {
            (CompressionArg::None, None) => return Ok(None),
            (CompressionArg::None, Some(m)) => {
                return Err(CliError(format!("--mini {m} needs --compression basic or enhanced")))
            }
            (CompressionArg::Basic, _) => crate::mlx5::CompLayout::Basic,
            (CompressionArg::Enhanced, _) => crate::mlx5::CompLayout::Enhanced,
        };
        let mini = mini.unwrap_or("hash");
        let format = crate::mlx5::MiniFormat::from_word(mini)
            .ok_or_else(|| CliError(format!("--mini {mini}: unknown mini-CQE format")))?;
        Ok(Some(crate::mlx5::CompressionConfig { layout, format }))
    }
}

/// The model of `ring export -d`.
fn parse_export_vendor(s: &str) -> Result<ExportVendor, String> {
    Ok(match super::device_name::Model::parse(s)? {
        super::device_name::Model::Mlx5 => ExportVendor::Mlx5,
        super::device_name::Model::E810 => ExportVendor::Irdma,
    })
}

/// An rdma-core release given with `--rdma-core`, and the irdma behaviour it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Release {
    major: u32,
    minor: u32,
    compat: Compat,
}

impl core::fmt::Display for Release {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.minor {
            0 => write!(f, "v{}", self.major),
            minor => write!(f, "v{}.{minor}", self.major),
        }
    }
}

/// `v44.7`, `44.7`, `v52` or `52` (a major alone is its `.0`): an rdma-core release from
/// v44 on (the oldest whose irdma poll dvcq reproduces).
fn parse_release(s: &str) -> Result<Release, String> {
    let text = s.strip_prefix('v').unwrap_or(s);
    let number = |t: &str| t.parse::<u32>().ok().filter(|_| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()));
    let (major, minor) = match text.split_once('.') {
        Some((major, minor)) => (number(major), number(minor)),
        None => (number(text), Some(0)),
    };
    let (Some(major), Some(minor)) = (major, minor) else {
        return Err(format!("{s:?} is not an rdma-core release: give it as v44.7, v52 or 52"));
    };
    let compat = Compat::for_release(major, minor)
        .ok_or_else(|| format!("v{major}: the irdma poll is reproduced from rdma-core v44 on"))?;
    Ok(Release { major, minor, compat })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExportVendor {
    Mlx5,
    Irdma,
}

impl RingArgs {
    /// `ring decode` or `ring export`.
    pub(crate) fn name(&self) -> &'static str {
        match self.what {
            RingWhat::Decode { .. } => "ring decode",
            RingWhat::Export { .. } => "ring export",
        }
    }

    /// Runs the subcommand.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        match &self.what {
            RingWhat::Decode { file, rdma_core, names } => {
                let (name, text) = read_input(file.as_deref())?;
                // `<file>:<line>: what`, or `<file>: what` for the input as a whole.
                let at = |e: ImageError| match e.line {
                    0 => CliError(format!("{name}: {}", e.msg)),
                    line => CliError(format!("{name}:{line}: {}", e.msg)),
                };
                let raw = parse_image(&text).map_err(at)?;
                if let (ImageVendor::Mlx5, Some(r)) = (raw.vendor, rdma_core) {
                    return Err(CliError(format!(
                        "--rdma-core {r}: applies to irdma rings only, and {name} holds an mlx5 ring"
                    )));
                }
                let style = if *names { LineStyle::Named } else { LineStyle::Canonical };
                let out = decode_raw_as(&raw, rdma_core.map_or(Compat::Current, |r| r.compat), style).map_err(at)?;
                Output::stdout().write(&out)?;
                Ok(ExitCode::SUCCESS)
            }
            RingWhat::Export { scenario, vendor, entries, cqe_size, hw_rev, compression, mini } => {
                check_export_entries(*vendor, hw_rev.unwrap_or(2), *entries)?;
                // Every option given is used: one that does not apply to the vendor is an error.
                let comp = compression.config(mini.as_deref())?;
                let text = match vendor {
                    ExportVendor::Mlx5 => {
                        if let Some(r) = hw_rev {
                            return Err(CliError(format!("--hw-rev {r}: applies to irdma rings only")));
                        }
                        let size = cqe_size.unwrap_or(64);
                        if size != 64 && size != 128 {
                            return Err(CliError(format!("--cqe-size {size}: mlx5 CQEs are 64 or 128 bytes")));
                        }
                        scenario::mlx5(*scenario, *entries, size, comp).map_err(CliError)?.to_text()
                    }
                    ExportVendor::Irdma => {
                        if comp.is_some() {
                            return Err(CliError("--compression applies to mlx5 rings only".into()));
                        }
                        let r = hw_rev.unwrap_or(2);
                        let rev = dvcq_uapi::irdma::HwRev::from_u8(r)
                            .ok_or_else(|| CliError(format!("--hw-rev {r}: must be 1, 2 or 3")))?;
                        if let Some(size) = cqe_size.filter(|&s| s as usize != rev.cqe_size()) {
                            return Err(CliError(format!(
                                "--cqe-size {size}: irdma --hw-rev {r} writes {}-byte CQEs",
                                rev.cqe_size()
                            )));
                        }
                        scenario::irdma(*scenario, *entries, rev).map_err(CliError)?
                    }
                };
                Output::stdout().write(&text)?;
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

/// `--entries` of `ring export`: mlx5, a power of two from its smallest ring to the largest
/// (the rule `bench poll` and the images follow too); irdma, a ring rdma-core allocates on
/// hardware generation `hw_rev` (any size from 4 on GEN1, an even one on GEN2 and GEN3), up
/// to the model's 2^20.
fn check_export_entries(vendor: ExportVendor, hw_rev: u8, entries: u32) -> Result<(), CliError> {
    let (min, max) = match vendor {
        ExportVendor::Mlx5 => (mlx5_cq::MIN_CQ_ENTRIES, mlx5_cq::MAX_CQ_ENTRIES),
        ExportVendor::Irdma => (dvcq_uapi::irdma::gen::MIN_CQ_SIZE, 1 << 20),
    };
    match vendor {
        ExportVendor::Mlx5 if !entries.is_power_of_two() || !(min..=max).contains(&entries) => {
            Err(CliError(format!("--entries {entries}: mlx5 rings are powers of two from {min} to {max}")))
        }
        ExportVendor::Mlx5 => Ok(()),
        ExportVendor::Irdma if !(min..=max).contains(&entries) => {
            Err(CliError(format!("--entries {entries}: an irdma ring has {min} to {max} slots")))
        }
        ExportVendor::Irdma => {
            let rev = dvcq_uapi::irdma::HwRev::from_u8(hw_rev).unwrap_or_default();
            if crate::irdma::ring::is_allocated_size(entries, rev) {
                Ok(())
            } else {
                Err(CliError(format!(
                    "--entries {entries}: rdma-core allocates GEN{hw_rev} rings of an even number of slots (cqe + 1, \
                     doubled on GEN2, rounded to even since v64)"
                )))
            }
        }
    }
}

/// Reads a file, or standard input for `None` / `-`; returns a name for messages and the text.
pub(crate) fn read_input(file: Option<&str>) -> Result<(String, String), CliError> {
    let (name, bytes) = match file {
        None | Some("-") => {
            let mut bytes = Vec::new();
            std::io::stdin().read_to_end(&mut bytes).map_err(|e| CliError(format!("<stdin>: cannot read: {e}")))?;
            ("<stdin>".to_string(), bytes)
        }
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| CliError(format!("{path}: cannot read: {e}")))?;
            (path.to_string(), bytes)
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => Ok((name, text)),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let before = &e.as_bytes()[..at];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = at - before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
            Err(CliError(format!(
                "{name}:{line}: the input is not text (bytes that are not UTF-8 at column {column}); a ring image is text"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ends of each vendor's range are taken (the CLI tests export the smallest rings
    /// only: the largest makes a 256 MiB image): the smallest ring is the device's, as in
    /// `bench poll` and the images.
    #[test]
    fn export_entries_take_both_ends_of_each_vendors_range() {
        for ok in [2, 4, 8, 1 << 21, 1 << 22] {
            assert!(check_export_entries(ExportVendor::Mlx5, 2, ok).is_ok(), "{ok}");
        }
        for bad in [0, 1, 3, 6, (1 << 22) + 4, 1 << 23, 1 << 31] {
            let e = check_export_entries(ExportVendor::Mlx5, 2, bad).unwrap_err();
            assert_eq!(e.0, format!("--entries {bad}: mlx5 rings are powers of two from 2 to 4194304"));
        }
        for bad in [0, 1, 2, 3, 1 << 21] {
            let e = check_export_entries(ExportVendor::Irdma, 2, bad).unwrap_err();
            assert_eq!(e.0, format!("--entries {bad}: an irdma ring has 4 to 1048576 slots"));
        }
    }

    /// irdma rings have the sizes rdma-core allocates: any from 4 on GEN1, even ones on GEN2
    /// and GEN3 (202 is `ibv_create_cq(cqe = 100)` on an E810), up to the model's 2^20.
    #[test]
    fn irdma_export_entries_are_ring_sizes_rdma_core_allocates() {
        for (rev, ok) in [(1, 5), (2, 202), (3, 102), (2, 4), (2, 1 << 20)] {
            assert!(check_export_entries(ExportVendor::Irdma, rev, ok).is_ok(), "GEN{rev} {ok}");
        }
        for (rev, bad) in [(2, 5), (3, 101), (2, 3), (1, 2), (2, (1 << 20) + 2)] {
            assert!(check_export_entries(ExportVendor::Irdma, rev, bad).is_err(), "GEN{rev} {bad}");
        }
        let e = check_export_entries(ExportVendor::Irdma, 2, 201).unwrap_err();
        assert_eq!(e.0, "--entries 201: rdma-core allocates GEN2 rings of an even number of slots (cqe + 1, doubled on GEN2, rounded to even since v64)");
    }
}
