//! `dvcq bench decode`: `dvcq decode --json` on a generated log of hundreds of MB, timed,
//! with the peak memory it took.
//!
//! The log ([`crate::bench::decode_log`]) is written to a file first; then the peak
//! resident set (`VmHWM`) is reset (`5` written to `/proc/self/clear_refs`), the file is
//! decoded by the code `dvcq decode --json` runs, its output rendered and discarded, and
//! `VmHWM` is read again. The figure therefore covers the decode alone, the program's own
//! resident pages included.

use super::decode::{CqeSizeArg, DecodeArgs, Report, VendorArg};
use super::output::Output;
use super::progress::Progress;
use super::CliError;
use crate::bench::decode_log::{write_log, LogStats};
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The most memory the decode may take, in MiB.
pub const PEAK_LIMIT_MB: f64 = 64.0;

/// Arguments of `dvcq bench decode`.
#[derive(Debug, Clone, clap::Args)]
pub struct DecodeBenchArgs {
    /// Size of the generated log in MB (10^6 bytes), 1 to 4096.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=4096))]
    size: u32,
    /// Where to write the log (kept after the run); by default a file in the temporary
    /// directory, removed after the run.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// One JSON line: an object with `mb`, `lines`, `cqes`, `decoded`, `problems`, `seconds`,
    /// `mb_per_s`, `peak_mib`, `peak_limit_mib`, `peak_covers_decode_only`.
    #[arg(long)]
    json: bool,
}

/// Counts what it is given and keeps none of it.
#[derive(Debug, Default)]
struct Discard {
    bytes: u64,
}

impl Write for Discard {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The figures of one run.
#[derive(Debug, serde::Serialize)]
struct Figures {
    mb: f64,
    lines: u64,
    cqes: u64,
    decoded: usize,
    problems: usize,
    seconds: f64,
    mb_per_s: f64,
    peak_mib: Option<f64>,
    peak_limit_mib: f64,
    /// `VmHWM` was reset before the decode (else it also covers writing the log).
    peak_covers_decode_only: bool,
}

/// A log file that is removed when dropped, unless the user named it.
struct LogFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for LogFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl DecodeBenchArgs {
    /// Runs the benchmark: exit 0 when every CQE of the log decoded, no problem was reported
    /// and the peak memory stayed under [`PEAK_LIMIT_MB`]; 1 otherwise.
    ///
    /// # Errors
    ///
    /// The log cannot be written or read, or the output cannot be written.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        let log = match &self.log {
            Some(p) => LogFile { path: p.clone(), keep: true },
            None => LogFile {
                path: std::env::temp_dir().join(format!("dvcq-bench-decode-{}.log", std::process::id())),
                keep: false,
            },
        };
        let progress = Progress::start("bench decode", self.json);
        progress.stage(format!("writing a {} MB log", self.size));
        let stats = generate(&log.path, u64::from(self.size) * 1_000_000)?;
        progress.stage(format!("decoding {} MB", self.size));
        let reset = reset_peak();
        let decode = DecodeArgs { input: None, vendor: VendorArg::Mlx5, json: true, cqe_size: CqeSizeArg::Auto };
        let name = log.path.display().to_string();
        let file = File::open(&log.path).map_err(|e| CliError(format!("{name}: cannot read: {e}")))?;
        let mut sink = Output::to(Discard::default());
        let start = Instant::now();
        let done = decode.decode(BufReader::with_capacity(1 << 16, file), &name, &mut sink, Report::Discard)?;
        let seconds = start.elapsed().as_secs_f64();
        let peak_mib = peak_kib().map(|k| k as f64 / 1024.0);
        drop(progress);
        let mb = done.bytes as f64 / 1e6;
        let f = Figures {
            mb,
            lines: stats.lines,
            cqes: stats.cqes,
            decoded: done.dumps,
            problems: done.problems,
            seconds,
            mb_per_s: mb / seconds.max(1e-9),
            peak_mib,
            peak_limit_mib: PEAK_LIMIT_MB,
            peak_covers_decode_only: reset,
        };
        let mut out = Output::stdout();
        if self.json {
            out.line(&serde_json::to_string(&f).map_err(|e| CliError(e.to_string()))?)?;
        } else {
            self.print(&mut out, &f, &stats, sink.get_ref().bytes)?;
        }
        let within = f.peak_mib.is_some_and(|p| p < PEAK_LIMIT_MB);
        let good = within && f.problems == 0 && f.decoded as u64 == stats.cqes;
        Ok(if good { ExitCode::SUCCESS } else { ExitCode::from(1) })
    }

    fn print(&self, out: &mut Output, f: &Figures, stats: &LogStats, json_bytes: u64) -> Result<(), CliError> {
        let rule = "-".repeat(72);
        out.line(&rule)?;
        out.line("                    dvcq decode benchmark (decode --json)")?;
        out.line(&rule)?;
        out.line(&format!(
            " log            : {:.1} MB, {} lines, {} dumps holding {} error CQEs",
            f.mb, stats.lines, stats.dumps, stats.cqes
        ))?;
        out.line(&format!(
            " decoded        : {} CQEs, {} problems ({:.1} MB of JSON lines, discarded)",
            f.decoded,
            f.problems,
            json_bytes as f64 / 1e6
        ))?;
        out.line(&format!(" time           : {:.2} s", f.seconds))?;
        out.line(&format!(" throughput     : {:.1} MB/s", f.mb_per_s))?;
        let peak = match f.peak_mib {
            Some(p) => format!("{p:.1} MiB"),
            None => "unknown (no VmHWM in /proc/self/status)".into(),
        };
        let scope = if f.peak_covers_decode_only { "" } else { ", writing the log included" };
        out.line(&format!(" peak memory    : {peak} (VmHWM{scope}; the limit is {PEAK_LIMIT_MB} MiB)"))?;
        out.line(&rule)?;
        if f.decoded as u64 != stats.cqes || f.problems > 0 {
            out.line(&format!(
                " FAIL: {} of the log's {} CQEs decoded, {} problems",
                f.decoded, stats.cqes, f.problems
            ))?;
        }
        if !f.peak_mib.is_some_and(|p| p < PEAK_LIMIT_MB) {
            out.line(&format!(" FAIL: peak memory not under {PEAK_LIMIT_MB} MiB"))?;
        }
        Ok(())
    }
}

/// Writes the log of `size` bytes to `path`.
fn generate(path: &Path, size: u64) -> Result<LogStats, CliError> {
    let name = path.display();
    let file = File::create(path).map_err(|e| CliError(format!("{name}: cannot write: {e}")))?;
    write_log(BufWriter::with_capacity(1 << 16, file), size).map_err(|e| CliError(format!("{name}: cannot write: {e}")))
}

/// Resets the process's peak resident set to its current size (Linux `clear_refs`, value 5);
/// false where that is not possible.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak resident set in KiB (`VmHWM` of `/proc/self/status`).
fn peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    vm_hwm_kib(&status)
}

/// `VmHWM` in KiB from the text of a `/proc/<pid>/status` file.
pub fn vm_hwm_kib(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_read_from_proc_status() {
        let status = "Name:\tdvcq\nVmPeak:\t   20000 kB\nVmHWM:\t    5120 kB\nVmRSS:\t    4000 kB\n";
        assert_eq!(vm_hwm_kib(status), Some(5120));
        assert_eq!(vm_hwm_kib("Name:\tdvcq\n"), None);
    }
}
