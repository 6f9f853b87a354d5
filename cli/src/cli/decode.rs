//! `dvcq decode`: find error-CQE dumps in any text and say what they mean.

use super::output::{warn, Output};
use super::CliError;
use crate::decode::{render_json, render_text, scan_stream, Finding, RingCqeSize, ScanOptions, Vendor};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::ops::ControlFlow;
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
              64- or 128-byte CQEs, see --cqe-size); 'MLX5 Error CQE:' or 'MLX5 CQE:' (one
              CQE, 17.11 to 19.05); '<drv>: Error cqe:' + 4 or 8 lines of '%08X' words
  bare        one line of 64 bytes in hex, spaces optional (success CQEs decode too)
  irdma       4 or 8 hex qwords per CQE (with --vendor irdma); '%016llx', or 4 or 8 '0x%llx' a line
Problems are reported with their line number and reason; decoding goes on.

The input is read as a stream: each CQE is printed as soon as its dump has been read (the
line after a dump ends it), and memory stays bounded by one dump, so logs of any size and
live logs (`tail -f app.log | dvcq decode`) can be read. A reader that stops early
(`dvcq decode big.log | head`) ends the run quietly.

Exit status:
  0  at least one dump decoded and no problem reported (or the reader stopped early, no
     problem reported before)
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
    /// Print JSON lines (one object a line, for `jq`): one per decoded CQE ("type":"cqe")
    /// and per problem ("type":"problem"), in line order, each as soon as it is found.
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
    ///
    /// # Errors
    ///
    /// An option that does not apply, an input that cannot be read, or output that cannot
    /// be written.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        if self.vendor == VendorArg::Irdma && self.cqe_size != CqeSizeArg::Auto {
            return Err(CliError(
                "--cqe-size applies to mlx5 rings; an irdma CQE's size comes from its qwords (4 or 8)".into(),
            ));
        }
        let mut out = Output::stdout();
        let done = match &self.input {
            Some(p) if p.as_os_str() != "-" => {
                let name = p.display().to_string();
                let file = File::open(p).map_err(|e| CliError(format!("{name}: cannot read: {e}")))?;
                self.decode(BufReader::with_capacity(READ_BUFFER, file), &name, &mut out, Report::Stderr)?
            }
            _ => {
                self.decode(BufReader::with_capacity(READ_BUFFER, std::io::stdin()), STDIN, &mut out, Report::Stderr)?
            }
        };
        Ok(done.exit_code())
    }

    /// Decodes `input` (named `name` in messages) as it is read, writing each CQE to `out`
    /// as soon as its dump has been read: text blocks, or with `--json` one object a line.
    /// Problems go to standard error (text) or `out` (JSON) in the same order. Stops when
    /// the reader of `out` goes away.
    ///
    /// # Errors
    ///
    /// Output that cannot be written, or input that cannot be read (what was decoded before
    /// has been written).
    pub(crate) fn decode<R: BufRead, W: Write>(
        &self,
        input: R,
        name: &str,
        out: &mut Output<W>,
        report: Report,
    ) -> Result<Decoded, CliError> {
        let vendor = match self.vendor {
            VendorArg::Mlx5 => Vendor::Mlx5,
            VendorArg::Irdma => Vendor::Irdma,
        };
        let ring_cqe_size = match self.cqe_size {
            CqeSizeArg::Auto => RingCqeSize::Auto,
            CqeSizeArg::Bytes64 => RingCqeSize::Bytes64,
            CqeSizeArg::Bytes128 => RingCqeSize::Bytes128,
        };
        let mut done = Decoded::default();
        let mut failed = None;
        let sink = |f: Finding| {
            let written = match &f {
                Finding::Cqe(d) => {
                    done.dumps += 1;
                    if self.json {
                        json_line(out, &f)
                    } else {
                        // Blocks are separated by one blank line.
                        let gap = if done.dumps > 1 { "\n" } else { "" };
                        out.write(&format!("{gap}{}", render_text(done.dumps, d)))
                    }
                }
                Finding::Problem(p) => {
                    done.problems += 1;
                    if self.json {
                        json_line(out, &f)
                    } else {
                        report.problem(&format!("dvcq decode: {name}:{}: {}", p.line, p.message()));
                        Ok(())
                    }
                }
            };
            match written {
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
                Ok(()) if out.closed() => ControlFlow::Break(()),
                Ok(()) => ControlFlow::Continue(()),
            }
        };
        let read = scan_stream(input, vendor, ScanOptions { ring_cqe_size }, sink);
        if let Some(e) = failed {
            return Err(e);
        }
        if out.closed() {
            // `dvcq decode big.log | head`: the reader has what it wanted.
            done.stopped = true;
            return Ok(done);
        }
        let summary = read.map_err(|e| CliError(format!("{name}: cannot read: {e}")))?;
        done.bytes = summary.bytes;
        if !self.json {
            if done.problems > 0 && done.dumps > 0 {
                out.write(&format!(
                    "\n{} dump(s) decoded, {} problem(s) in {name} (see standard error)\n",
                    done.dumps, done.problems
                ))?;
            }
            if done.dumps == 0 && done.problems == 0 {
                let empty = if summary.blank { "the input is empty: " } else { "" };
                report.problem(&format!("dvcq decode: {name}: {empty}no CQE dump found"));
            }
        }
        Ok(done)
    }
}

/// What the program calls its standard input in messages.
const STDIN: &str = "<stdin>";

/// Bytes read from the input at a time.
const READ_BUFFER: usize = 1 << 16;

/// Where `dvcq decode` reports problems in its text output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Report {
    /// Standard error, a line each.
    Stderr,
    /// Nowhere (a benchmark counts them).
    Discard,
}

impl Report {
    fn problem(self, line: &str) {
        if self == Self::Stderr {
            warn(line);
        }
    }
}

/// What a `dvcq decode` run decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Decoded {
    /// CQEs written.
    pub(crate) dumps: usize,
    /// Problems reported.
    pub(crate) problems: usize,
    /// Bytes of input read (when the input was read to its end).
    pub(crate) bytes: u64,
    /// The reader of the output went away before the end of the input.
    pub(crate) stopped: bool,
}

impl Decoded {
    /// 0 when something decoded and nothing was wrong, else 1. A run whose reader went away
    /// says 0 unless it had reported a problem by then.
    pub(crate) fn exit_code(&self) -> ExitCode {
        let good = if self.stopped { self.problems == 0 } else { self.dumps > 0 && self.problems == 0 };
        if good {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }
}

/// Writes one finding as a JSON line.
fn json_line<W: Write>(out: &mut Output<W>, f: &Finding) -> Result<(), CliError> {
    let line = render_json(f).map_err(|e| CliError(format!("JSON encoding failed: {e}")))?;
    out.line(&line)
}
