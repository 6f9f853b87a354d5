//! `dvcq bench poll` and `bench drain`: poll benchmarks on the hardware models and devices,
//! perftest-style (`bench events` is in bench_events.rs, `bench cq` in bench_cq.rs).

use super::device_name::{self, Model, DEFAULT_DEVICE, DEVICE_HELP, MODEL_HELP};
use super::output::Output;
use super::progress::Progress;
use super::table::Table;
use super::CliError;
use crate::bench::{self, BenchTarget, Mix, Mode, Params, Report, RingKind};
use crate::uapi::irdma::gen::MIN_CQ_SIZE as IRDMA_MIN_CQ_SIZE;
use crate::uapi::mlx5::cq_size as mlx5_cq;
use std::process::{Command, ExitCode};

/// Arguments of `dvcq bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Debug, clap::Subcommand)]
enum BenchWhat {
    /// Poll-path cost: ns/CQE (median of repetitions) and, with --callgrind, instructions/CQE.
    Poll(PollArgs),
    /// Drain cost on a device through the Cq API: its direct backend against ibv_poll_cq,
    /// on CQs filled by the same RDMA WRITEs, repetitions interleaved.
    Drain(DrainArgs),
    /// Event-mode latency and CPU cost: completions written at random intervals, taken by
    /// busy polling, by sleeping on completion events, and by the hybrid of both.
    Events(super::bench_events::EventsArgs),
    /// `dvcq decode --json` on a generated log (200 MB of prose and dumps by default):
    /// MB/s and peak memory, which must stay under 64 MiB.
    Decode(super::bench_decode::DecodeBenchArgs),
    /// What the Cq handle's statistics cost per completion: the same laps on a model,
    /// polled counting and not counting (with --callgrind, in instructions).
    Cq(super::bench_cq::CqArgs),
    /// Perftest-style traffic on a device, polled three ways in one run: dvcq direct,
    /// ibv_poll_cq and rdma-core's extended CQ (completions/s, CPU ns per completion,
    /// latency percentiles).
    Traffic(super::traffic::TrafficArgs),
    /// Poll cost per completion as the QPs sharing a CQ and the CQs one thread polls grow
    /// (a table, and an SVG with --plot), with memory per QP and per CQ.
    Scale(super::bench_scale::ScaleArgs),
}

#[derive(Debug, Clone, clap::Args)]
struct DrainArgs {
    #[arg(short = 'd', long = "device", default_value = DEFAULT_DEVICE, help = DEVICE_HELP,
          long_help = concat!("The device: a name `dvcq devices` lists (rxe0, mlx5_0, ...) or a model ",
              "(model-mlx5, model-e810); the models have only their direct backend"))]
    device: String,
    /// Completions per fill: the CQ's and the send queue's depth (1 to 4096).
    #[arg(short = 'n', long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=4096))]
    completions: u32,
    /// Completions per poll call (1 to 256).
    #[arg(long, default_value_t = 16, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256))]
    batch: usize,
    /// Fills per backend (1 to 1000); the median is reported.
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: u32,
    /// QPs sharing the CQ (1 to 4096): each fill's WRITEs spread over them in a shuffled
    /// order, as on a CQ shared by many connections.
    #[arg(short = 'q', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    qps: u32,
    /// One JSON line: an object with `device` and `rows` (`poller`, `backend`, `completions`,
    /// `ns_per_completion`, `ns_per_completion_min`, `ratio_to_ibv_poll_cq`, and `cq`: the
    /// CQ's depth, high-water mark and suggested depth).
    #[arg(long)]
    json: bool,
    /// Also print `vm-figure NAME VALUE UNIT` lines (what the VM test collects).
    #[arg(long)]
    figure_lines: bool,
}

impl DrainArgs {
    fn run(&self) -> Result<ExitCode, CliError> {
        let ctx = device_name::open(&self.device)?;
        let p = bench::drain::DrainParams {
            completions: self.completions,
            batch: self.batch,
            reps: self.reps,
            qps: self.qps,
        };
        let progress = Progress::start("bench drain", self.json);
        progress.stage(format!("{} reps per backend", p.reps));
        let rows = bench::drain::run(&ctx, &p).map_err(|e| CliError(e.to_string()))?;
        drop(progress);
        let mut out = Output::stdout();
        if self.json {
            let v = serde_json::json!({ "device": self.device, "rows": rows });
            out.line(&v.to_string())?;
        } else {
            out.line(&format!(
                " dvcq drain benchmark: {}, {} completions per fill on {} QP{}, batch {}, {} reps",
                self.device,
                p.completions,
                p.qps,
                if p.qps == 1 { "" } else { "s" },
                p.batch,
                p.reps
            ))?;
            let mut t = Table::new(&[
                "#poller",
                "#backend",
                "ns/completion[median]",
                "ns/completion[min]",
                "ratio_to_ibv_poll_cq",
                "#cq hw/depth\u{2192}advice",
            ]);
            for r in &rows {
                let ratio = r.ratio_to_ibv_poll_cq.map_or("-".to_string(), |x| format!("{x:.2}"));
                let cq = format!("{}/{}\u{2192}{}", r.cq.high_water, r.cq.depth, r.cq.suggested_depth);
                t.row(vec![
                    r.poller.to_string(),
                    r.backend.name().to_string(),
                    format!("{:.1}", r.ns_per_completion),
                    format!("{:.1}", r.ns_per_completion_min),
                    ratio,
                    cq,
                ]);
            }
            for line in t.lines() {
                out.line(&line)?;
            }
            out.line(" #cq: the most CQEs seen outstanding / the CQ's depth \u{2192} the depth suggested for a fill")?;
        }
        if self.figure_lines {
            for r in &rows {
                out.line(&format!(
                    "vm-figure drain_{}_{} {:.1} ns/completion",
                    r.poller,
                    r.backend.name(),
                    r.ns_per_completion
                ))?;
                if let Some(x) = r.ratio_to_ibv_poll_cq.filter(|_| r.poller != "ibv_poll_cq") {
                    // The direct row by its backend (`drain_rxe_ratio...`), the others by poller.
                    let name = if r.poller == "direct" { r.backend.name() } else { r.poller.as_str() };
                    out.line(&format!("vm-figure drain_{name}_ratio_to_ibv_poll_cq {x:.3} x"))?;
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Whether the model of a compressed CQ compresses (`--back-pressure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BackPressure {
    /// Constant back-pressure: every lap is full sessions.
    Always,
    /// None: regular CQEs only.
    Never,
}

/// One row of the table: a poll path, a batch size, and (compressed CQs) how the
/// completions reach the ring.
#[derive(Debug, Clone, Copy)]
struct Row {
    mode: Mode,
    batch: usize,
    ring: Option<RingKind>,
}

/// The benchmark's rings: the models' (`-d model-mlx5` or `model-e810`).
type Vendor = Model;

/// Most repetitions a run may ask for.
const MAX_REPS: u32 = 10_000;
/// Most laps per repetition a run may ask for.
const MAX_LAPS: u32 = 10_000;
/// Most CQEs (or empty poll calls) one repetition may take: `--laps` times `--entries`.
const MAX_CQES_PER_REP: u64 = 1 << 30;
/// The batch of `--mode full` and `empty` without `--batch`.
const DEFAULT_BATCH: usize = 16;
/// The inline data of each `--mix recv-inline` receive without `--payload`: what any CQE
/// carries.
const DEFAULT_PAYLOAD: u32 = 32;

#[derive(Debug, Clone, clap::Args)]
struct PollArgs {
    // `--vendor` is an older spelling of -d.
    #[arg(short = 'd', long = "device", alias = "vendor", default_value = DEFAULT_DEVICE, help = MODEL_HELP,
          value_name = "DEVICE", value_parser = Model::parse)]
    vendor: Vendor,
    /// CQE size in bytes (mlx5: 64 or 128; irdma: 32). Default: 64 for mlx5, 32 for irdma.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=i64::from(u32::MAX)))]
    cqe_size: Option<u32>,
    /// Ring entries, i.e. CQEs per lap (mlx5: a power of two from 2; irdma: an even size
    /// from 4, as rdma-core sizes E810 rings, `cqe + 1` doubled).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(0..=i64::from(u32::MAX)))]
    entries: u32,
    /// Poll path; without it the standard table runs (full at batch 16 and 1, view, empty).
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// Batch size for `--mode full` / `empty`: 1 to the CQEs of a lap (default 16). Without
    /// --mode it runs `--mode full` at this batch.
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 22))]
    batch: Option<usize>,
    /// Completion mix.
    #[arg(long, value_enum, default_value = "send-recv")]
    mix: Mix,
    /// With --mix recv-inline: bytes of data each receive carries inside its CQE (1 to 32
    /// in a 64-byte CQE, to 64 in a 128-byte one; default 32).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=i64::from(u32::MAX)))]
    payload: Option<u32>,
    /// Laps (ring fills) per repetition: 1 to 10000, and at most 2^30 CQEs per repetition.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=MAX_LAPS as i64))]
    laps: u32,
    /// Repetitions, 1 to 10000; the median is reported.
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u32).range(1..=MAX_REPS as i64))]
    reps: u32,
    /// Also count instructions per CQE under valgrind --tool=callgrind (needs valgrind).
    #[arg(long)]
    callgrind: bool,
    /// mlx5: a CQ created with CQE compression (needs --mix send or recv). Without --mode
    /// the table compares the same completions as full sessions, as regular CQEs on this
    /// CQ, and on a CQ without compression.
    #[arg(long, value_enum, default_value = "none")]
    compression: super::ring::CompressionArg,
    /// mlx5, with --compression: whether the model compresses (always, the default: every
    /// lap is full sessions; never: regular CQEs only, the cost of compression support alone).
    #[arg(long, value_enum)]
    back_pressure: Option<BackPressure>,
    /// mlx5, with --compression: the responder mini-CQE format (default hash).
    #[arg(long, requires = "compression", value_parser = ["hash", "csum", "csum_stridx", "ftag_stridx", "l34h_stridx"])]
    mini: Option<String>,
    /// JSON lines instead of the table: one object per row, as it is measured.
    #[arg(long)]
    json: bool,
    /// Internal: this run is one of the two a `--callgrind` count makes: `poll` polls, and
    /// `prepare` only prepares the same laps (the baseline). Either prints nothing, and
    /// both command lines have the same shape, so that the two runs differ only in the
    /// poll path (formatting a report, or parsing one more argument, costs thousands of
    /// instructions).
    #[arg(long, hide = true, value_enum)]
    callgrind_run: Option<CallgrindRun>,
}

/// Which of the two `--callgrind` runs a child process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum CallgrindRun {
    /// Polls the laps.
    Poll,
    /// Only prepares them.
    Prep,
}

impl BenchArgs {
    /// `bench poll`, `bench drain`, `bench events` or `bench decode`.
    pub(crate) fn name(&self) -> &'static str {
        match self.what {
            BenchWhat::Poll(_) => "bench poll",
            BenchWhat::Drain(_) => "bench drain",
            BenchWhat::Events(_) => "bench events",
            BenchWhat::Decode(_) => "bench decode",
            BenchWhat::Cq(_) => "bench cq",
            BenchWhat::Traffic(_) => "bench traffic",
            BenchWhat::Scale(_) => "bench scale",
        }
    }

    /// Runs the subcommand.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        match &self.what {
            BenchWhat::Poll(p) => p.run(),
            BenchWhat::Drain(d) => d.run(),
            BenchWhat::Events(e) => e.run(),
            BenchWhat::Decode(d) => d.run(),
            BenchWhat::Cq(c) => c.run(),
            BenchWhat::Traffic(t) => t.run(),
            BenchWhat::Scale(s) => s.run(),
        }
    }
}

/// Refuses a ring size the vendor's model cannot have.
fn check_entries(vendor: Vendor, entries: u32) -> Result<(), CliError> {
    match vendor {
        Vendor::Mlx5 if !mlx5_cq::is_ring_size(entries) => Err(CliError(format!(
            "--entries {entries}: mlx5 rings are powers of two from {} to {}",
            mlx5_cq::MIN_CQ_ENTRIES,
            mlx5_cq::MAX_CQ_ENTRIES
        ))),
        // irdma rings have the sizes rdma-core gives them (`cqe + 1`, doubled, even), from
        // `IRDMA_U_MINCQ_SIZE`.
        Vendor::E810 if !(IRDMA_MIN_CQ_SIZE..=1 << 20).contains(&entries) => {
            Err(CliError(format!("--entries {entries}: irdma rings have {IRDMA_MIN_CQ_SIZE} to 1048576 slots")))
        }
        // The benchmark's E810 (GEN2) ring: `cqe + 1` doubled, never odd.
        Vendor::E810 if entries % 2 == 1 => Err(CliError(format!(
            "--entries {entries}: rdma-core allocates E810 rings of an even number of slots (cqe + 1, doubled)"
        ))),
        _ => Ok(()),
    }
}

fn target(a: &PollArgs, ring: Option<RingKind>) -> Result<Box<dyn BenchTarget>, CliError> {
    check_entries(a.vendor, a.entries)?;
    let comp = a.compression.config(a.mini.as_deref())?;
    if comp.is_some() && a.vendor != Vendor::Mlx5 {
        return Err(CliError("--compression applies to mlx5 only".into()));
    }
    if let (None, Some(bp)) = (comp, a.back_pressure) {
        let bp = if bp == BackPressure::Never { "never" } else { "always" };
        return Err(CliError(format!("--back-pressure {bp} needs --compression basic or enhanced")));
    }
    if let (Some(p), false) = (a.payload, a.mix == Mix::RecvInline) {
        return Err(CliError(format!("--payload {p} needs --mix recv-inline")));
    }
    // A comparison row may drop the compression or the back-pressure.
    let comp = comp.filter(|_| ring != Some(RingKind::Uncompressed));
    let bp = a.back_pressure() == BackPressure::Always && ring != Some(RingKind::Regular);
    let t: Box<dyn BenchTarget> = match (a.vendor, a.cqe_size()) {
        (Vendor::Mlx5, 64) => {
            Box::new(bench::Mlx5Bench::<64>::new(a.entries, a.mix, comp, bp, a.payload()).map_err(CliError)?)
        }
        (Vendor::Mlx5, 128) => {
            Box::new(bench::Mlx5Bench::<128>::new(a.entries, a.mix, comp, bp, a.payload()).map_err(CliError)?)
        }
        (Vendor::Mlx5, s) => return Err(CliError(format!("--cqe-size {s}: mlx5 CQEs are 64 or 128 bytes"))),
        (Vendor::E810, 32) => Box::new(bench::IrdmaBench::new(a.entries, a.mix).map_err(CliError)?),
        (Vendor::E810, s) => return Err(CliError(format!("--cqe-size {s}: the irdma benchmark uses 32-byte CQEs"))),
    };
    Ok(t)
}

impl PollArgs {
    /// `--back-pressure`, always where not given.
    fn back_pressure(&self) -> BackPressure {
        self.back_pressure.unwrap_or(BackPressure::Always)
    }

    /// `--mode`; without it, `full` where a `--batch` is given (the one poll path that
    /// takes it besides `empty`), the standard table (`None`) otherwise.
    fn mode(&self) -> Option<Mode> {
        self.mode.or(self.batch.map(|_| Mode::Full))
    }

    /// `--payload`, 32 where not given.
    fn payload(&self) -> u32 {
        self.payload.unwrap_or(DEFAULT_PAYLOAD)
    }

    fn cqe_size(&self) -> u32 {
        self.cqe_size.unwrap_or(match self.vendor {
            Vendor::Mlx5 => 64,
            Vendor::E810 => 32,
        })
    }

    fn rows(&self) -> Vec<Row> {
        let row = |mode, batch, ring| Row { mode, batch, ring };
        let compressed = self.compression != super::ring::CompressionArg::None;
        match self.mode() {
            // A view walk has no batch: its row says 1, as in the table.
            Some(Mode::View) => vec![row(Mode::View, 1, None)],
            Some(m) => vec![row(m, self.batch.unwrap_or(DEFAULT_BATCH), None)],
            // A compressed CQ: the same completions as sessions, as regular CQEs on the
            // same CQ, and on a CQ without compression, then batch 1 and the empty call.
            None if compressed && self.back_pressure() == BackPressure::Always => vec![
                row(Mode::Full, 16, Some(RingKind::Sessions)),
                row(Mode::Full, 16, Some(RingKind::Regular)),
                row(Mode::Full, 16, Some(RingKind::Uncompressed)),
                row(Mode::Full, 1, Some(RingKind::Sessions)),
                row(Mode::Empty, 16, Some(RingKind::Sessions)),
            ],
            None => vec![
                row(Mode::Full, 16, None),
                row(Mode::Full, 1, None),
                row(Mode::View, 1, None),
                row(Mode::Empty, 16, None),
            ],
        }
    }

    fn run(&self) -> Result<ExitCode, CliError> {
        if let (Some(b), Some(Mode::View)) = (self.batch, self.mode) {
            return Err(CliError(format!("--batch {b}: a view walk has no batch (--mode full or empty)")));
        }
        let per_rep = u64::from(self.laps) * u64::from(self.entries);
        if per_rep > MAX_CQES_PER_REP {
            return Err(CliError(format!(
                "--laps {} --entries {}: {per_rep} CQEs per repetition, at most {MAX_CQES_PER_REP}",
                self.laps, self.entries
            )));
        }
        let rows = self.rows();
        let mut empty_notes = Vec::new();
        // A compressed-CQ table has the `#ring` column.
        let rings = rows.iter().any(|r| r.ring.is_some());
        let mut out = Output::stdout();
        let progress = Progress::start("bench poll", self.json || self.callgrind_run.is_some());
        let count = rows.len();
        // Each row is printed as soon as it is measured, so a later row that fails (valgrind
        // missing, say) does not take the finished ones with it.
        for (i, row) in rows.into_iter().enumerate() {
            let mut t = target(self, row.ring)?;
            let (mode, batch) = (row.mode, row.batch);
            // perftest-style: a run does what its banner says, or does not start.
            if batch > t.entries() as usize {
                // Name the batch as the user sees it: given, or one of the table's.
                let what = match self.batch {
                    Some(_) => format!("--batch {batch}"),
                    None => format!("batch {batch} (the table's; --mode with --batch picks another)"),
                };
                return Err(CliError(format!("{what}: larger than a lap of this ring ({} CQEs)", t.entries())));
            }
            progress.stage(format!("row {} of {count}", i + 1));
            let prepare_only = self.callgrind_run == Some(CallgrindRun::Prep);
            let p = Params { mode, batch, laps: self.laps, reps: self.reps, prepare_only };
            let mut r = bench::run(t.as_mut(), &p);
            r.ring = row.ring;
            if self.callgrind {
                let (instr, args) = self.instructions(row, t.entries())?;
                (r.instr, r.callgrind_args) = (Some(instr), Some(args));
            }
            if self.callgrind_run.is_some() {
                continue;
            }
            if self.json {
                out.line(&serde_json::to_string(&r).map_err(|e| CliError(e.to_string()))?)?;
                if out.closed() {
                    return Ok(ExitCode::SUCCESS);
                }
                continue;
            }
            progress.around(|| {
                if i == 0 {
                    self.print_banner(&mut out, &r.target, rings)?;
                }
                out.line(&table_row(&r))
            })?;
            if r.mode == Mode::Empty {
                empty_notes.push(empty_calls(&r));
            }
            if out.closed() {
                return Ok(ExitCode::SUCCESS);
            }
        }
        drop(progress);
        if !self.json && self.callgrind_run.is_none() {
            self.print_footer(&mut out, rings, &empty_notes)?;
        }
        Ok(ExitCode::SUCCESS)
    }

    /// The banner and the column heads, naming `device`.
    fn print_banner(&self, out: &mut Output, device: &str, rings: bool) -> Result<(), CliError> {
        let line = "-".repeat(88);
        out.line(&line)?;
        out.line("                         dvcq poll benchmark")?;
        if device.len() <= 34 {
            out.line(&format!(" Device         : {device:<34} CQE size       : {}[B]", self.cqe_size()))?;
        } else {
            out.line(&format!(" Device         : {device}"))?;
            out.line(&format!(" CQE size       : {}[B]", self.cqe_size()))?;
        }
        let mix = match self.mix {
            Mix::RecvInline => format!("recv-inline, {} B", self.payload()),
            m => value_name(m),
        };
        out.line(&format!(" Ring entries   : {:<34} Completion mix : {mix}", self.entries))?;
        out.line(&format!(" Laps per rep   : {:<34} Repetitions    : {}", self.laps, self.reps))?;
        out.line(&line)?;
        let ring_col = if rings { "   #ring" } else { "" };
        out.line(&format!(
            " #mode   #batch   #cqes/rep   ns/CQE[median]   ns/CQE[min]   MCQE/s[median]   instr/CQE{ring_col}"
        ))
    }

    /// The closing rule and the notes under the table.
    fn print_footer(&self, out: &mut Output, rings: bool, empty_notes: &[String]) -> Result<(), CliError> {
        out.line(&"-".repeat(88))?;
        for note in empty_notes {
            out.line(note)?;
        }
        if rings {
            out.line(" #ring: the same completions as compressed sessions, as regular CQEs on the")?;
            out.line("        compression-enabled CQ, and on a CQ created without compression")?;
        }
        if !self.callgrind {
            out.line(" add --callgrind for instructions per CQE (valgrind, poll path only)")?;
        }
        Ok(())
    }

    /// Instructions per CQE (or per empty call): callgrind totals of a polling run minus a
    /// run that prepares the same laps without polling, divided by the CQE count: laps
    /// times `per_lap`, the target's CQEs per lap (an irdma ring keeps one slot free, so a
    /// lap is one CQE short of `--entries`). Also returns what the two runs were given
    /// ([`PollArgs::callgrind_args`]), for the report.
    fn instructions(&self, row: Row, per_lap: u32) -> Result<(f64, Vec<String>), CliError> {
        let laps = self.laps.min(8);
        let args = self.callgrind_args(row, laps);
        let run = |prepare_only: bool| -> Result<u64, CliError> {
            let which = if prepare_only { "prep" } else { "poll" };
            let mut a: Vec<String> =
                ["bench", "poll", "--callgrind-run", which, "--reps", "1"].map(String::from).into();
            a.extend(args.iter().cloned());
            callgrind_instructions(&a, which)
        };
        let with = run(false)?;
        let base = run(true)?;
        let n = f64::from(laps) * f64::from(per_lap);
        Ok((with.saturating_sub(base) as f64 / n, args))
    }

    /// What the two callgrind runs of `row` are told after `bench poll --callgrind-run
    /// poll|prep --reps 1`: every setting of this run that shapes the ring and the
    /// completions, spelled out (`laps` at most 8, so valgrind finishes quickly).
    fn callgrind_args(&self, row: Row, laps: u32) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |k: &str, v: &str| a.extend([k.to_owned(), v.to_owned()]);
        push("--laps", &laps.to_string());
        push("--entries", &self.entries.to_string());
        push("--cqe-size", &self.cqe_size().to_string());
        if row.mode != Mode::View {
            push("--batch", &row.batch.to_string());
        }
        push("--device", self.vendor.name());
        push("--mode", &value_name(row.mode));
        push("--mix", &value_name(self.mix));
        if self.mix == Mix::RecvInline {
            push("--payload", &self.payload().to_string());
        }
        let comp = match row.ring {
            Some(RingKind::Uncompressed) => "none".to_owned(),
            _ => value_name(self.compression),
        };
        push("--compression", &comp);
        if comp != "none" {
            push("--mini", self.mini.as_deref().unwrap_or("hash"));
        }
        if comp != "none" && (row.ring == Some(RingKind::Regular) || self.back_pressure() == BackPressure::Never) {
            push("--back-pressure", "never");
        }
        a
    }
}

/// Instructions of one run of this executable with `args` under `valgrind --tool=callgrind`
/// (its output thrown away); `tag` keeps concurrent runs' output files apart.
///
/// # Errors
///
/// valgrind is missing or the run failed.
pub(super) fn callgrind_instructions(args: &[String], tag: &str) -> Result<u64, CliError> {
    let exe = std::env::current_exe().map_err(|e| CliError(format!("cannot find own executable: {e}")))?;
    let out = std::env::temp_dir().join(format!("dvcq-callgrind-{}-{tag}.out", std::process::id()));
    let mut cmd = Command::new("valgrind");
    cmd.arg("--tool=callgrind").arg(format!("--callgrind-out-file={}", out.display()));
    cmd.arg(&exe).args(args);
    let status = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| CliError(format!("cannot run valgrind ({e}); install it, e.g. `apt-get install valgrind`")))?;
    if !status.success() {
        return Err(CliError(format!("valgrind run failed ({status})")));
    }
    let total = callgrind_total(&out);
    let _ = std::fs::remove_file(&out);
    total
}

/// The note under the table for an empty-poll row: what its figures are per, and its rate
/// in calls (an empty poll has no CQEs to count).
fn empty_calls(r: &Report) -> String {
    let instr = r.instr.map_or_else(String::new, |i| format!(" and {i:.1} instructions"));
    format!(
        " empty*: one poll call on an empty ring, {:.2} ns{instr} per call ({:.1} M calls/s; no CQEs, so no MCQE/s)",
        r.ns_median, r.mcqe_per_s
    )
}

/// One row of the table.
fn table_row(r: &Report) -> String {
    let mode = match r.mode {
        Mode::Full => "full",
        Mode::View => "view",
        Mode::Empty => "empty*",
    };
    let instr = r.instr.map_or_else(|| "-".to_string(), |i| format!("{i:.1}"));
    let ring = r.ring.map_or("", RingKind::word);
    // An empty poll returns no CQE: its rate is in calls, under the table (`empty_calls`).
    let rate = if r.mode == Mode::Empty { "-".to_string() } else { format!("{:.1}", r.mcqe_per_s) };
    let row = format!(
        " {:<7} {:<8} {:<11} {:<16.2} {:<13.2} {:<16} {:<12}{}",
        mode, r.batch, r.per_rep, r.ns_median, r.ns_min, rate, instr, ring
    );
    row.trim_end().to_string()
}

/// How `v` is spelled on the command line: clap's own name for it, so that the callgrind
/// child parses exactly what this run was given.
fn value_name<T: clap::ValueEnum>(v: T) -> String {
    v.to_possible_value().map_or_else(String::new, |p| p.get_name().to_owned())
}

/// The `totals:` (or `summary:`) instruction count of the callgrind output file at `path`.
///
/// # Errors
///
/// A [`CliError`] naming the file when it cannot be read or has no such line.
pub fn callgrind_total(path: &std::path::Path) -> Result<u64, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    text.lines()
        .find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| CliError(format!("{}: no totals line in callgrind output", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sizes_are_checked_at_both_ends() {
        for (vendor, ok, bad) in [
            (Vendor::Mlx5, [2, 64, 1 << 22], [0, 1, 3, 48, 1 << 23]),
            (Vendor::E810, [4, 202, 1 << 20], [1, 3, 5, (1 << 20) + 1, 1 << 22]),
        ] {
            for n in ok {
                assert!(check_entries(vendor, n).is_ok(), "{vendor:?} {n}");
            }
            for n in bad {
                let e = check_entries(vendor, n).unwrap_err();
                assert!(e.0.starts_with(&format!("--entries {n}: ")), "{vendor:?}: {}", e.0);
            }
        }
    }
}
