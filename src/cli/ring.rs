//! `dvcq ring`: decode ring images and export model scenarios as images.

use super::output::Output;
use super::CliError;
use crate::image::decode_text;
use crate::scenario::{self, Scenario};
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
    },
    /// Play a scenario on a hardware model and print its ring as an image.
    Export {
        /// What happens on the CQ.
        #[arg(long, value_enum, default_value = "mixed")]
        scenario: Scenario,
        /// Which model.
        #[arg(long, value_enum, default_value = "mlx5")]
        vendor: ExportVendor,
        /// Ring entries (power of two).
        #[arg(long, default_value_t = 32)]
        entries: u32,
        /// mlx5 CQE size: 64 or 128.
        #[arg(long, default_value_t = 64)]
        cqe_size: u32,
        /// irdma hardware generation: 1 (X722), 2 (E810), 3.
        #[arg(long, default_value_t = 2)]
        hw_rev: u8,
        /// mlx5: create the CQ with CQE compression in this layout (the model then
        /// compresses every run of compatible completions).
        #[arg(long, value_enum, default_value = "none")]
        compression: CompressionArg,
        /// mlx5: the responder mini-CQE format of a compressed CQ.
        #[arg(long, default_value = "hash", value_parser = ["hash", "csum", "csum_stridx", "ftag_stridx", "l34h_stridx"])]
        mini: String,
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
    /// The CQ setting, with mini-CQE format word `mini`.
    pub(crate) fn config(self, mini: &str) -> Result<Option<crate::mlx5::CompressionConfig>, CliError> {
        let layout = match self {
            CompressionArg::None => return Ok(None),
            CompressionArg::Basic => crate::mlx5::CompLayout::Basic,
            CompressionArg::Enhanced => crate::mlx5::CompLayout::Enhanced,
        };
        let format = crate::mlx5::MiniFormat::from_word(mini)
            .ok_or_else(|| CliError(format!("--mini {mini}: unknown mini-CQE format")))?;
        Ok(Some(crate::mlx5::CompressionConfig { layout, format }))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExportVendor {
    Mlx5,
    Irdma,
}

impl RingArgs {
    /// Runs the subcommand.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        match &self.what {
            RingWhat::Decode { file } => {
                let (name, text) = read_input(file.as_deref())?;
                let out = decode_text(&text).map_err(|e| CliError(format!("{name}: {e}")))?;
                Output::stdout().write(&out)?;
                Ok(ExitCode::SUCCESS)
            }
            RingWhat::Export { scenario, vendor, entries, cqe_size, hw_rev, compression, mini } => {
                if !entries.is_power_of_two() || *entries < 4 || *entries > 1 << 22 {
                    return Err(CliError(format!("--entries {entries}: must be a power of two from 4 to 4194304")));
                }
                let text = match vendor {
                    ExportVendor::Mlx5 => scenario::mlx5(*scenario, *entries, *cqe_size, compression.config(mini)?)
                        .map_err(CliError)?
                        .to_text(),
                    ExportVendor::Irdma => {
                        if *compression != CompressionArg::None {
                            return Err(CliError("--compression applies to mlx5 rings only".into()));
                        }
                        let rev = dvcq_uapi::irdma::HwRev::from_u8(*hw_rev)
                            .ok_or_else(|| CliError(format!("--hw-rev {hw_rev}: must be 1, 2 or 3")))?;
                        scenario::irdma(*scenario, *entries, rev).map_err(CliError)?
                    }
                };
                Output::stdout().write(&text)?;
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

/// Reads a file, or standard input for `None` / `-`; returns a name for messages and the text.
pub(crate) fn read_input(file: Option<&str>) -> Result<(String, String), CliError> {
    match file {
        None | Some("-") => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map_err(|e| CliError(format!("stdin: {e}")))?;
            Ok(("stdin".into(), s))
        }
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| CliError(format!("{path}: {e}")))?;
            let s = String::from_utf8(bytes).map_err(|e| CliError(format!("{path}: not UTF-8 text ({e})")))?;
            Ok((path.to_string(), s))
        }
    }
}
