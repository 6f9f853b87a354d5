//! `dvcq bench scale`: poll cost per completion as the QPs sharing a CQ and the CQs one
//! thread polls grow, on the models' rings; on a device (an emulated ConnectX or E810, a
//! NIC, rxe), the QP axis through `bench drain`, dvcq's direct poll beside rdma-core's
//! `ibv_poll_cq`.

use super::bench::callgrind_instructions;
use super::device_name;
use super::output::Output;
use super::progress::Progress;
use super::CliError;
use crate::bench::scale::{self, Axis, Device, Point, ScaleParams, ScaleRow, DEFAULT_CQS, DEFAULT_QPS};
use crate::bench::scale_plot::{self, TARGET_RATIO};
use std::process::ExitCode;

/// Which axes to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Axes {
    /// QPs sharing one CQ.
    Qps,
    /// CQs polled by one thread.
    Cqs,
    /// Both, QPs first.
    Both,
}

/// Arguments of `dvcq bench scale`.
#[derive(Debug, Clone, clap::Args)]
pub(super) struct ScaleArgs {
    /// A model ring (model-mlx5, model-e810), or a device `dvcq devices` lists (mlx5_0,
    /// irdma0, rxe0, ...): on a device the QP axis is measured by draining the device's CQ
    /// filled by RDMA WRITEs on that many QPs, with dvcq's direct poll and with rdma-core's
    /// ibv_poll_cq (the `rdma-core` column).
    #[arg(short = 'd', long = "device", default_value = "model-mlx5")]
    device: String,
    /// QP counts of the QP axis, comma-separated (each 1 to 65536).
    #[arg(long, value_name = "LIST")]
    qps: Option<String>,
    /// CQ counts of the CQ axis, comma-separated (each 1 to 1024).
    #[arg(long, value_name = "LIST")]
    cqs: Option<String>,
    /// Which axes to run.
    #[arg(long, value_enum, default_value = "both")]
    axis: Axes,
    /// CQEs per lap, all CQs together (a power of two, 16 to 65536).
    #[arg(long, default_value_t = 4096, value_parser = entries_parser)]
    entries: u32,
    /// Completions per poll call (1 to 256).
    #[arg(long, default_value_t = 16, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256))]
    batch: usize,
    /// Laps per repetition (1 to 1000).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1000))]
    laps: u32,
    /// Repetitions (1 to 1000); the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: u32,
    /// Also count instructions per completion under valgrind --tool=callgrind (poll path
    /// only: a polling run minus one that prepares the same laps).
    #[arg(long)]
    callgrind: bool,
    /// One JSON object a line, a row each: `device`, `axis`, `count`, `completions`,
    /// `ns_median`, `ns_min`, `instr`, `ratio`, `memory` (`per_qp`, `per_cq`; null on a
    /// device) and `rdma_core_ns` (ibv_poll_cq's ns per completion on a device; null on a
    /// model).
    #[arg(long)]
    json: bool,
    /// Draw ns per completion against the counts (log axis) into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<std::path::PathBuf>,
    /// Internal: one of the two runs --callgrind makes, of the single point given.
    #[arg(long, hide = true, value_parser = ["poll", "prep"])]
    callgrind_run: Option<String>,
}

fn entries_parser(s: &str) -> Result<u32, String> {
    let n: u32 = s.parse().map_err(|e| format!("{e}"))?;
    if n.is_power_of_two() && (16..=1 << 16).contains(&n) {
        Ok(n)
    } else {
        Err("a power of two from 16 to 65536".into())
    }
}

/// The counts of `--qps` or `--cqs`: comma-separated, each within the axis' range.
///
/// # Errors
///
/// An empty list, a word that is not a number, or a count out of range, naming the option.
fn parse_counts(axis: Axis, list: &str) -> Result<Vec<u32>, CliError> {
    let opt = format!("--{}", axis.word());
    let what = if axis == Axis::Qps { "QP" } else { "CQ" };
    if list.trim().is_empty() {
        return Err(CliError(format!("{opt} '': give a comma-separated list of {what} counts, e.g. {opt} 1,16,256")));
    }
    list.split(',')
        .map(|w| {
            let w = w.trim();
            let n: u32 = w.parse().map_err(|_| {
                CliError(format!("{opt} {list}: '{w}' is not a {what} count (a comma-separated list of numbers)"))
            })?;
            scale::check_count(axis, n).map_err(CliError)?;
            Ok(n)
        })
        .collect()
}

impl ScaleArgs {
    /// The (axis, count) points to measure, in order.
    fn points(&self) -> Result<Vec<(Axis, u32)>, CliError> {
        let mut pts = Vec::new();
        for axis in [Axis::Qps, Axis::Cqs] {
            let on = match self.axis {
                Axes::Both => true,
                Axes::Qps => axis == Axis::Qps,
                Axes::Cqs => axis == Axis::Cqs,
            };
            let given = if axis == Axis::Qps { &self.qps } else { &self.cqs };
            // A list is checked even for an axis not run: a typo is never silently ignored.
            let counts = match given {
                Some(l) => parse_counts(axis, l)?,
                None if axis == Axis::Qps => DEFAULT_QPS.to_vec(),
                None => DEFAULT_CQS.to_vec(),
            };
            if on {
                pts.extend(counts.into_iter().map(|c| (axis, c)));
            }
        }
        Ok(pts)
    }

    /// Prints a row, as a JSON line or a table line; false once the reader has gone.
    fn print_row(&self, out: &mut Output, r: &ScaleRow) -> Result<bool, CliError> {
        if self.json {
            out.line(&serde_json::to_string(r).map_err(|e| CliError(e.to_string()))?)?;
        } else {
            out.line(&table_row(r))?;
        }
        Ok(!out.closed())
    }

    /// The model of `--device`, if it names one.
    fn model(&self) -> Option<Device> {
        Device::of_name(&self.device)
    }

    /// What the banner and the plot call the device.
    fn describe(&self) -> String {
        self.model().map_or_else(|| format!("{}, rdma-core's provider", self.device), |m| m.describe().to_string())
    }

    pub(super) fn run(&self) -> Result<ExitCode, CliError> {
        let points = self.points()?;
        let Some(model) = self.model() else {
            return self.run_on_device(&points);
        };
        if let Some(way) = &self.callgrind_run {
            // The child of --callgrind: the one point it was given, printing nothing.
            let &[(axis, count)] = points.as_slice() else {
                return Err(CliError("--callgrind-run measures exactly one point".into()));
            };
            let mut p = Point::new(model, axis, count, self.entries, self.batch).map_err(CliError)?;
            let sp = ScaleParams { laps: self.laps, reps: 1, prepare_only: way == "prep" };
            scale::run(&mut p, &sp).map_err(CliError)?;
            return Ok(ExitCode::SUCCESS);
        }
        // Refuse an unwritable plot file before minutes of measuring.
        if let Some(path) = &self.plot {
            std::fs::write(path, "").map_err(|e| CliError(format!("--plot {}: {e}", path.display())))?;
        }
        let mut out = Output::stdout();
        if !self.json {
            self.print_banner(&mut out)?;
        }
        let mut rows: Vec<ScaleRow> = Vec::new();
        for (axis, count) in points {
            let mut p = Point::new(model, axis, count, self.entries, self.batch).map_err(CliError)?;
            let sp = ScaleParams { laps: self.laps, reps: self.reps, prepare_only: false };
            let mut r = scale::run(&mut p, &sp).map_err(CliError)?;
            if let Some(first) = rows.iter().find(|f| f.axis == axis) {
                r.ratio = r.ns_median / first.ns_median.max(f64::MIN_POSITIVE);
            }
            if self.callgrind {
                r.instr = Some(self.instructions(axis, count, p.lap_len())?);
            }
            if !self.print_row(&mut out, &r)? {
                return Ok(ExitCode::SUCCESS);
            }
            rows.push(r);
        }
        if let Some(path) = &self.plot {
            std::fs::write(path, scale_plot::svg(&self.describe(), &rows))
                .map_err(|e| CliError(format!("--plot {}: {e}", path.display())))?;
        }
        if !self.json {
            self.print_footer(&mut out, &rows)?;
        }
        Ok(ExitCode::SUCCESS)
    }

    fn print_banner(&self, out: &mut Output) -> Result<(), CliError> {
        let line = "-".repeat(104);
        out.line(&line)?;
        out.line("                         dvcq scale benchmark")?;
        out.line(&format!(" Device         : {:<34} CQEs per lap   : {}", self.describe(), self.entries))?;
        out.line(&format!(" Laps per rep   : {:<34} Repetitions    : {}", self.laps, self.reps))?;
        out.line(&format!(" Poll batch     : {:<34} QP order       : shuffled", self.batch))?;
        out.line(&line)?;
        out.line(" #axis  #count  #compl/rep  ns/compl[median]  ns/compl[min]  instr/compl  ratio  B/QP     B/CQ       rdma-core")
    }

    fn print_footer(&self, out: &mut Output, rows: &[ScaleRow]) -> Result<(), CliError> {
        out.line(&"-".repeat(104))?;
        out.line(" qps: one CQ, its lap's CQEs on that many QPs, shuffled; cqs: that many CQs of")?;
        out.line("      one QP each sharing the lap, polled round-robin (one poll call of the batch per CQ)")?;
        out.line(" ratio: ns/compl over the axis' first row; B/QP: registry bytes per QP (its entry, its")?;
        out.line(&format!(
            "      SQ and RQ tracking tables of {} WQEs each, its lookup entries); B/CQ: ring buffer,",
            scale::WQ_DEPTH
        ))?;
        out.line("      poller structure and an empty registry's fixed lookup tables")?;
        if self.model().is_some() {
            out.line(" rdma-core: on a device only (-d mlx5_0 under `dvcq emulate`, a NIC, rxe0): the models")?;
            out.line("      have no rdma-core poll")?;
        }
        let at = |n| rows.iter().find(|r| r.axis == Axis::Qps && r.count == n).map(|r| r.ns_median);
        match (at(1), at(4096)) {
            (Some(one), Some(many)) => {
                let ratio = many / one.max(f64::MIN_POSITIVE);
                let status = if ratio <= TARGET_RATIO { "met" } else { "missed" };
                out.line(&format!(
                    " target: 4096 QPs at most {TARGET_RATIO}x 1 QP: {ratio:.2}x, {status} ({many:.2} ns against {one:.2} ns)"
                ))?;
            }
            _ => {
                out.line(&format!(" target ({TARGET_RATIO}x at 4096 QPs against 1 QP): needs --qps with 1 and 4096"))?
            }
        }
        if !self.callgrind {
            out.line(" add --callgrind for instructions per completion (valgrind, poll path only)")?;
        }
        if let Some(path) = &self.plot {
            out.line(&format!(" plot: {}", path.display()))?;
        }
        Ok(())
    }

    /// Instructions per completion of one point: callgrind totals of a polling run minus
    /// one that prepares the same laps without polling, over the completions.
    fn instructions(&self, axis: Axis, count: u32, per_lap: usize) -> Result<f64, CliError> {
        let laps = self.laps.min(8);
        let run = |way: &str| {
            let mut a: Vec<String> = ["bench", "scale", "--callgrind-run", way, "--reps", "1"].map(String::from).into();
            let list = if axis == Axis::Qps { "--qps" } else { "--cqs" };
            for (k, v) in [
                ("--device", self.device.clone()),
                ("--axis", axis.word().to_string()),
                (list, count.to_string()),
                ("--entries", self.entries.to_string()),
                ("--batch", self.batch.to_string()),
                ("--laps", laps.to_string()),
            ] {
                a.extend([k.to_string(), v]);
            }
            callgrind_instructions(&a, &format!("scale-{way}"))
        };
        let with = run("poll")?;
        let base = run("prep")?;
        Ok(with.saturating_sub(base) as f64 / (f64::from(laps) * per_lap as f64))
    }
}

/// One row of the table.
fn table_row(r: &ScaleRow) -> String {
    let instr = r.instr.map_or_else(|| "-".to_string(), |i| format!("{i:.1}"));
    let (per_qp, per_cq) =
        r.memory.map_or(("-".to_string(), "-".to_string()), |m| (m.per_qp.to_string(), m.per_cq.to_string()));
    let rdma_core = r.rdma_core_ns.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
    format!(
        " {:<6} {:<7} {:<11} {:<17.2} {:<14.2} {:<12} {:<6.2} {:<8} {:<10} {rdma_core}",
        r.axis.word(),
        r.count,
        r.completions,
        r.ns_median,
        r.ns_min,
        instr,
        r.ratio,
        per_qp,
        per_cq
    )
}

impl ScaleArgs {
    /// The QP axis on a device: a drain per point, dvcq's direct poll and rdma-core's.
    fn run_on_device(&self, points: &[(Axis, u32)]) -> Result<ExitCode, CliError> {
        if self.callgrind || self.callgrind_run.is_some() {
            return Err(CliError(format!(
                "--callgrind counts instructions on the model rings; on {} the drain is timed only (drop --callgrind, or use -d model-mlx5)",
                self.device
            )));
        }
        if self.axis == Axes::Cqs {
            return Err(CliError(format!(
                "--axis cqs: on a device ({}) only the QP axis is measured; use --axis qps, or -d model-mlx5 for the CQ axis",
                self.device
            )));
        }
        let qp_points: Vec<u32> = points.iter().filter(|(a, _)| *a == Axis::Qps).map(|&(_, c)| c).collect();
        if let Some(&big) = qp_points.iter().find(|&&c| c > crate::bench::drain::MAX_QPS) {
            return Err(CliError(format!(
                "--qps {big}: on a device a CQ is shared by 1 to {} QPs here",
                crate::bench::drain::MAX_QPS
            )));
        }
        let ctx = device_name::open(&self.device)?;
        if let Some(path) = &self.plot {
            std::fs::write(path, "").map_err(|e| CliError(format!("--plot {}: {e}", path.display())))?;
        }
        let mut out = Output::stdout();
        if !self.json {
            self.print_banner(&mut out)?;
        }
        let progress = Progress::start("bench scale", self.json);
        let mut rows: Vec<ScaleRow> = Vec::new();
        for count in qp_points {
            progress.stage(format!("{count} QPs"));
            // Each QP one completion a fill at least; at most a drain's 4096.
            let completions = self.entries.clamp(count, 4096);
            let mut r = scale::device_row(&ctx, count, completions, self.batch, self.reps).map_err(CliError)?;
            if let Some(first) = rows.first() {
                r.ratio = r.ns_median / first.ns_median.max(f64::MIN_POSITIVE);
            }
            if !self.print_row(&mut out, &r)? {
                return Ok(ExitCode::SUCCESS);
            }
            rows.push(r);
        }
        drop(progress);
        if let Some(path) = &self.plot {
            std::fs::write(path, scale_plot::svg(&self.describe(), &rows))
                .map_err(|e| CliError(format!("--plot {}: {e}", path.display())))?;
        }
        if !self.json {
            out.line(&"-".repeat(104))?;
            out.line(" qps: one CQ of the device filled by RDMA WRITEs spread over that many QPs, shuffled, then")?;
            out.line("      drained (`bench drain -q`): ns/compl by dvcq's direct poll, rdma-core by ibv_poll_cq")?;
            let below = rows.iter().filter(|r| r.rdma_core_ns.is_some_and(|v| r.ns_median < v)).count();
            out.line(&format!(" target: below rdma-core's at every point: {below} of {} points", rows.len()))?;
            let at = |n| rows.iter().find(|r| r.count == n).map(|r| r.ns_median);
            if let (Some(one), Some(many)) = (at(1), at(4096)) {
                let ratio = many / one.max(f64::MIN_POSITIVE);
                let status = if ratio <= TARGET_RATIO { "met" } else { "missed" };
                out.line(&format!(" target: 4096 QPs at most {TARGET_RATIO}x 1 QP: {ratio:.2}x, {status}"))?;
            }
            if let Some(path) = &self.plot {
                out.line(&format!(" plot: {}", path.display()))?;
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_lists_are_parsed_and_bad_ones_named() {
        assert_eq!(parse_counts(Axis::Qps, "1, 16,4096").unwrap(), [1, 16, 4096]);
        let err = |a, l| parse_counts(a, l).unwrap_err().0;
        assert_eq!(err(Axis::Qps, ""), "--qps '': give a comma-separated list of QP counts, e.g. --qps 1,16,256");
        assert_eq!(err(Axis::Qps, "0"), "--qps 0: a CQ is shared by 1 to 65536 QPs here");
        assert_eq!(err(Axis::Qps, "100000"), "--qps 100000: a CQ is shared by 1 to 65536 QPs here");
        assert_eq!(err(Axis::Cqs, "4,x"), "--cqs 4,x: 'x' is not a CQ count (a comma-separated list of numbers)");
        assert!(err(Axis::Qps, "1,,2").contains("'' is not a QP count"));
    }
}
