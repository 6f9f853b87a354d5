//! `dvcq bench cq`: what the `Cq` handle's statistics cost per completion, on a model.

use super::bench::callgrind_instructions;
use super::device_name::{Model, DEFAULT_DEVICE, MODEL_HELP};
use super::output::Output;
use super::progress::Progress;
use super::table::Table;
use super::CliError;
use crate::bench::cq::{self, CqBench, CqBenchParams, CqBenchRow};
use std::process::ExitCode;

/// Arguments of `dvcq bench cq`.
#[derive(Debug, Clone, clap::Args)]
pub(super) struct CqArgs {
    #[arg(short = 'd', long = "device", default_value = DEFAULT_DEVICE, help = MODEL_HELP, value_parser = Model::parse)]
    device: Model,
    /// Completions per lap: the CQ's and the send queue's depth (1 to 4063).
    #[arg(short = 'n', long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=4063))]
    completions: u32,
    /// Completions per poll call (1 to 256).
    #[arg(long, default_value_t = 16, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256))]
    batch: usize,
    /// Laps per repetition (1 to 1000).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1000))]
    laps: u32,
    /// Repetitions (1 to 1000); the median is reported.
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: u32,
    /// Also count instructions per completion under valgrind --tool=callgrind: the whole
    /// benchmark run once counting and once not, the difference divided by the completions.
    #[arg(long)]
    callgrind: bool,
    /// One JSON line: an object with `device`, `batch`, `rows` (`stats`, `completions`,
    /// `ns_per_completion`, `ns_per_completion_min`) and `instr_per_completion` (the
    /// statistics' cost, with --callgrind).
    #[arg(long)]
    json: bool,
    /// Internal: one of the two runs --callgrind makes (`on` counts, `off` does not); it
    /// prints nothing.
    #[arg(long, hide = true, value_parser = ["on", "off"])]
    callgrind_run: Option<String>,
}

impl CqArgs {
    fn params(&self) -> CqBenchParams {
        CqBenchParams { completions: self.completions, batch: self.batch, laps: self.laps, reps: self.reps }
    }

    pub(super) fn run(&self) -> Result<ExitCode, CliError> {
        let err = |e: crate::Error| CliError(e.to_string());
        let ctx = crate::Context::open(self.device.name()).map_err(err)?;
        let p = self.params();
        let mut b = CqBench::new(&ctx, &p).map_err(err)?;
        if let Some(way) = &self.callgrind_run {
            cq::run(&mut b, &p, way == "on").map_err(err)?;
            return Ok(ExitCode::SUCCESS);
        }
        // Interleave the two ways repetition by repetition, so both see the same machine.
        let one = CqBenchParams { reps: 1, ..p };
        let (mut off, mut on): (Vec<CqBenchRow>, Vec<CqBenchRow>) = (Vec::new(), Vec::new());
        let progress = Progress::start("bench cq", self.json);
        for rep in 0..p.reps {
            progress.stage(format!("repetition {} of {}", rep + 1, p.reps));
            off.push(cq::run(&mut b, &one, false).map_err(err)?);
            on.push(cq::run(&mut b, &one, true).map_err(err)?);
        }
        let rows = [summary(off), summary(on)];
        progress.stage("callgrind");
        let instr = if self.callgrind { Some(self.instructions()?) } else { None };
        drop(progress);
        let stats = b.cq().stats();
        let mut out = Output::stdout();
        if self.json {
            let v = serde_json::json!({
                "device": self.device.name(),
                "batch": self.batch,
                "rows": rows,
                "instr_per_completion": instr,
                "cq_stats": stats,
            });
            return out.line(&v.to_string()).map(|()| ExitCode::SUCCESS);
        }
        out.line(&format!(
            " dvcq Cq statistics cost: {}, {} completions per lap, batch {}, {} laps, {} reps",
            self.device.name(),
            self.completions,
            self.batch,
            self.laps,
            self.reps
        ))?;
        let mut t = Table::new(&["#stats", "ns/completion[median]", "ns/completion[min]"]);
        for r in &rows {
            let on = if r.stats { "on" } else { "off" };
            t.row(vec![on.into(), format!("{:.2}", r.ns_per_completion), format!("{:.2}", r.ns_per_completion_min)]);
        }
        for line in t.lines() {
            out.line(&line)?;
        }
        let ns = rows[1].ns_per_completion - rows[0].ns_per_completion;
        out.line(&format!(" statistics cost: {ns:+.2} ns per completion (median; noise of a few ns is normal)"))?;
        match instr {
            Some(i) => out.line(&format!(" statistics cost: {i:+.2} instructions per completion (callgrind)"))?,
            None => out.line(" add --callgrind for the cost in instructions per completion (valgrind)")?,
        }
        out.line(&format!(" the CQ: {} polls, {} completions", stats.polls, stats.completions))?;
        out.line(&format!(" the CQ: {}", b.cq().advice(Some(u64::from(self.completions) + 1))))?;
        Ok(ExitCode::SUCCESS)
    }

    /// The statistics' instructions per completion: the whole benchmark under callgrind
    /// counting, minus the same not counting, over the completions polled.
    fn instructions(&self) -> Result<f64, CliError> {
        let laps = self.laps.min(8);
        let run = |way: &str| {
            let mut a: Vec<String> = ["bench", "cq", "--callgrind-run", way, "--reps", "1"].map(String::from).into();
            for (k, v) in [
                ("--device", self.device.name().to_owned()),
                ("--completions", self.completions.to_string()),
                ("--batch", self.batch.to_string()),
                ("--laps", laps.to_string()),
            ] {
                a.extend([k.to_string(), v]);
            }
            callgrind_instructions(&a, way)
        };
        let on = run("on")?;
        let off = run("off")?;
        let n = f64::from(laps) * f64::from(self.completions);
        Ok((on as f64 - off as f64) / n)
    }
}

/// The median and the fastest of single-repetition rows (at least one).
fn summary(mut rows: Vec<CqBenchRow>) -> CqBenchRow {
    rows.sort_by(|a, b| a.ns_per_completion.total_cmp(&b.ns_per_completion));
    let min = rows.first().map_or(0.0, |r| r.ns_per_completion);
    let mid = rows.len() / 2;
    let mut m = rows.swap_remove(mid);
    m.ns_per_completion_min = min;
    m
}
