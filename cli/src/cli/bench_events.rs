//! `dvcq bench events`: event-mode latency and CPU cost per wait mode (busy polling,
//! sleeping on completion events, the hybrid of both), as a perftest-style table, JSON,
//! `vm-figure` lines and an SVG plot.

use super::device_name::{self, DEFAULT_DEVICE, DEVICE_HELP};
use super::output::Output;
use super::progress::Progress;
use super::CliError;
use crate::bench::events::{self, EventsParams, EventsRow, WaitMode};
use std::process::ExitCode;
use std::time::Duration;

/// The models `--vendor` picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ModelVendor {
    /// model-mlx5.
    Mlx5,
    /// model-e810.
    Irdma,
}

/// Arguments of `dvcq bench events`.
#[derive(Debug, Clone, clap::Args)]
pub struct EventsArgs {
    #[arg(short = 'd', long = "device", default_value = DEFAULT_DEVICE, help = DEVICE_HELP)]
    device: String,
    /// An older spelling of `-d model-mlx5` (mlx5) and `-d model-e810` (irdma).
    #[arg(long, value_enum, hide = true, conflicts_with = "device")]
    vendor: Option<ModelVendor>,
    /// Completions per mode (1 to 10000000).
    #[arg(short = 'n', long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    completions: u32,
    /// The producer waits a random time from 0 to this many µs before each post (0 to
    /// 1000000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    max_gap_us: u64,
    /// The hybrid mode's busy-poll budget in µs before it arms and sleeps (0 to 1000000).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    spin_us: u64,
    /// A mode to run (repeat for several); all three without it.
    #[arg(long = "mode", value_enum)]
    modes: Vec<WaitMode>,
    /// One JSON line: an object with `device`, `completions`, `max_gap_us`, `spin_us` and `rows` (`mode`,
    /// `completions`, `p50_ns`, `p99_ns`, `p999_ns`, `max_ns`, `mean_ns`,
    /// `cpu_ns_per_completion`, `sleeps`).
    #[arg(long)]
    json: bool,
    /// Also write the latency percentiles and CPU per completion of each mode as an SVG
    /// picture to this file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<std::path::PathBuf>,
    /// Also print `vm-figure NAME VALUE UNIT` lines (what the VM test collects).
    #[arg(long)]
    figure_lines: bool,
}

/// Width of the table's rules.
const RULE: usize = 98;

impl EventsArgs {
    fn device(&self) -> String {
        match self.vendor {
            None => self.device.clone(),
            Some(ModelVendor::Mlx5) => "model-mlx5".into(),
            Some(ModelVendor::Irdma) => "model-e810".into(),
        }
    }

    fn params(&self) -> EventsParams {
        let modes = if self.modes.is_empty() {
            vec![WaitMode::Busy, WaitMode::Events, WaitMode::Hybrid]
        } else {
            self.modes.clone()
        };
        EventsParams {
            completions: self.completions,
            max_gap: Duration::from_micros(self.max_gap_us),
            spin: Duration::from_micros(self.spin_us),
            modes,
        }
    }

    /// Runs the benchmark and prints what was asked for.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        let device = self.device();
        let fail = |e: crate::Error| CliError(e.to_string());
        // Refuse an unwritable plot file before minutes of measuring.
        if let Some(path) = &self.plot {
            std::fs::write(path, "").map_err(|e| CliError(format!("--plot {}: {e}", path.display())))?;
        }
        let ctx = device_name::open(&device)?;
        let p = self.params();
        // One mode at a time (each is measured on its own anyway), so the progress line can
        // say which.
        let progress = Progress::start("bench events", self.json);
        let mut rows = Vec::with_capacity(p.modes.len());
        for (i, &mode) in p.modes.iter().enumerate() {
            progress.stage(format!("{} ({} of {}), {} completions", mode.name(), i + 1, p.modes.len(), p.completions));
            let one = EventsParams { modes: vec![mode], ..p.clone() };
            rows.extend(events::run(&ctx, &one).map_err(fail)?);
        }
        drop(progress);
        let mut out = Output::stdout();
        if self.json {
            let v = serde_json::json!({
                "device": device,
                "completions": p.completions,
                "max_gap_us": self.max_gap_us,
                "spin_us": self.spin_us,
                "rows": rows,
            });
            out.line(&v.to_string())?;
        } else {
            self.table(&mut out, &device, &rows)?;
        }
        if self.figure_lines {
            for r in &rows {
                let m = r.mode.name();
                out.line(&format!("vm-figure events_{m}_p50 {:.2} us", r.p50_ns as f64 / 1000.0))?;
                out.line(&format!("vm-figure events_{m}_p99 {:.2} us", r.p99_ns as f64 / 1000.0))?;
                out.line(&format!("vm-figure events_{m}_p999 {:.2} us", r.p999_ns as f64 / 1000.0))?;
                out.line(&format!(
                    "vm-figure events_{m}_cpu_per_completion {:.2} us",
                    r.cpu_ns_per_completion / 1000.0
                ))?;
            }
        }
        if let Some(path) = &self.plot {
            std::fs::write(path, crate::bench::events_plot::svg(&device, &rows))
                .map_err(|e| CliError(format!("--plot {}: {e}", path.display())))?;
        }
        Ok(ExitCode::SUCCESS)
    }

    fn table(&self, out: &mut Output, device: &str, rows: &[EventsRow]) -> Result<(), CliError> {
        let rule = "-".repeat(RULE);
        out.line(&rule)?;
        out.line("                              dvcq event-mode latency benchmark")?;
        out.line(&format!(" Device         : {device:<34} Completions    : {} per mode", self.completions))?;
        let gaps = format!("0 to {}[usec], uniform", self.max_gap_us);
        out.line(&format!(" Producer gaps  : {gaps:<34} Hybrid spin    : {}[usec]", self.spin_us))?;
        out.line(&rule)?;
        out.line(
            " #mode    #completions   p50[usec]   p99[usec]   p99.9[usec]   max[usec]   cpu/compl[usec]   #sleeps",
        )?;
        let us = |ns: u64| format!("{:.2}", ns as f64 / 1000.0);
        for r in rows {
            out.line(&format!(
                " {:<8} {:<14} {:<11} {:<11} {:<13} {:<11} {:<17.2} {}",
                r.mode.name(),
                r.completions,
                us(r.p50_ns),
                us(r.p99_ns),
                us(r.p999_ns),
                us(r.max_ns),
                r.cpu_ns_per_completion / 1000.0,
                r.sleeps
            ))?;
        }
        out.line(&rule)?;
        out.line(" latency: from the post that writes a completion to the consumer's return from poll or wait")?;
        out.line(" cpu/compl: the consumer thread's CPU time per completion; #sleeps: events it slept on")
    }
}
