//! Poll microbenchmarks on model-filled rings (`dvcq bench poll`).
//!
//! A *lap* fills the ring with `entries` CQEs through the hardware model (not timed), then
//! drains it with the poll path under test (timed). Time is reported as the median ns/CQE
//! over repetitions. Instructions are counted by running the same binary under
//! `valgrind --tool=callgrind` twice, once polling and once only preparing the same laps,
//! and dividing the difference by the number of CQEs: only the poll path is counted.

pub mod cq;
pub mod decode_log;
pub mod drain;
pub mod events;
pub mod events_plot;
mod irdma;
mod mlx5;
pub mod scale;
pub mod scale_plot;
pub mod traffic;

use serde::Serialize;
use std::time::Instant;

pub use irdma::IrdmaBench;
pub use mlx5::Mlx5Bench;

/// Which poll path to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Batch poll into full `Completion`s.
    Full,
    /// Zero-copy views reading opcode, qpn, wqe counter and byte count.
    View,
    /// Poll calls on an empty ring (cost per call, not per CQE).
    Empty,
}

/// Completion mix of a lap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mix {
    /// Alternating send (requester) and receive (responder) completions on one QP (mlx5
    /// and irdma).
    SendRecv,
    /// Requester completions only (mlx5).
    Send,
    /// Responder completions only (mlx5).
    Recv,
    /// Responder completions whose data came inside the CQE (inline scatter, `--payload`
    /// bytes), copied into the posted receive buffers: small receives on a default RC QP
    /// (mlx5).
    RecvInline,
    /// Send/receive with one flush error in every 16 completions (mlx5).
    Errors,
    /// Alternating send and receive completions, the receives from a shared receive queue
    /// (mlx5).
    SendSrq,
    /// Send/receive completions of two QPs taking turns CQE by CQE: the worst case for a
    /// poller that caches the last QP (mlx5 and irdma).
    TwoQps,
    /// Send/receive completions of 16 QPs in a scrambled order, as a CQ shared by many
    /// connections sees them: few CQEs in a row share a QP (mlx5 and irdma).
    ManyQps,
}

/// A backend prepared for benchmarking.
pub trait BenchTarget {
    /// Name shown in the banner.
    fn name(&self) -> String;
    /// Ring entries (CQEs per lap).
    fn entries(&self) -> u32;
    /// Writes one lap of CQEs into the ring through the model.
    fn prepare_lap(&mut self);
    /// Lets the model reuse the lap's slots without polling them (prepare-only baseline).
    fn discard_lap(&mut self) {}
    /// Drains the lap with batch polls of `batch`; returns completions polled.
    fn poll_full(&mut self, batch: usize) -> usize;
    /// Drains the lap with zero-copy views; returns CQEs seen.
    fn poll_views(&mut self) -> usize;
    /// One poll call on an empty ring; returns completions (always 0).
    fn poll_empty(&mut self, batch: usize) -> usize;
    /// The callgrind baseline of `poll_empty`: the same call shape doing nothing, so the
    /// difference is the poll call alone.
    fn noop(&mut self, batch: usize) -> usize;
}

/// Benchmark parameters.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Params {
    /// Poll path.
    pub mode: Mode,
    /// Batch size for full polls.
    pub batch: usize,
    /// Laps per repetition.
    pub laps: u32,
    /// Repetitions (the median is reported).
    pub reps: u32,
    /// Only prepare the laps, never poll (the callgrind baseline).
    pub prepare_only: bool,
}

/// The result of one benchmark row.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Backend name.
    pub target: String,
    /// Poll path.
    pub mode: Mode,
    /// Batch size.
    pub batch: usize,
    /// CQEs (or, for `empty`, poll calls) per repetition.
    pub per_rep: u64,
    /// Median ns per CQE (per call for `empty`).
    pub ns_median: f64,
    /// Fastest repetition, ns per CQE.
    pub ns_min: f64,
    /// Millions of CQEs per second at the median.
    pub mcqe_per_s: f64,
    /// Instructions per CQE (per call for `empty`) under callgrind, if measured.
    pub instr: Option<f64>,
    /// On a compressed-CQ table: how this row's completions reach the ring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ring: Option<RingKind>,
    /// With `instr`: the arguments its two callgrind runs gave `dvcq` after `bench poll
    /// --callgrind-run poll|prep --reps 1`, to repeat them (under kcachegrind, say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callgrind_args: Option<Vec<String>>,
}

/// How a row of a compressed-CQ table writes its completions (`dvcq bench poll
/// --compression`): the same completions three ways, so the table compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RingKind {
    /// Full mini-CQE sessions (the model under constant back-pressure).
    Sessions,
    /// Regular CQEs on the compression-enabled CQ: what compression support costs.
    Regular,
    /// Regular CQEs on a CQ created without compression: the baseline.
    Uncompressed,
}

impl RingKind {
    /// The table's word for it.
    pub fn word(self) -> &'static str {
        match self {
            RingKind::Sessions => "sessions",
            RingKind::Regular => "regular",
            RingKind::Uncompressed => "uncompressed",
        }
    }
}

/// Runs the benchmark and returns its row (without instruction counts).
pub fn run(t: &mut dyn BenchTarget, p: &Params) -> Report {
    let mut per_rep_ns = Vec::with_capacity(p.reps as usize);
    let mut per_rep = 0u64;
    for _ in 0..p.reps.max(1) {
        let mut ns = 0u128;
        let mut count = 0u64;
        for _ in 0..p.laps.max(1) {
            match p.mode {
                Mode::Empty => {
                    let start = Instant::now();
                    if p.prepare_only {
                        for _ in 0..t.entries() {
                            std::hint::black_box(t.noop(std::hint::black_box(p.batch)));
                        }
                    } else {
                        for _ in 0..t.entries() {
                            std::hint::black_box(t.poll_empty(std::hint::black_box(p.batch)));
                        }
                    }
                    ns += start.elapsed().as_nanos();
                    count += t.entries() as u64;
                }
                Mode::Full | Mode::View => {
                    t.prepare_lap();
                    if p.prepare_only {
                        t.discard_lap();
                        count += t.entries() as u64;
                        continue;
                    }
                    let start = Instant::now();
                    let got = if p.mode == Mode::Full { t.poll_full(p.batch) } else { t.poll_views() };
                    ns += start.elapsed().as_nanos();
                    count += got as u64;
                }
            }
        }
        per_rep = count;
        per_rep_ns.push(ns as f64 / count.max(1) as f64);
    }
    per_rep_ns.sort_by(|a, b| a.total_cmp(b));
    let median = per_rep_ns[per_rep_ns.len() / 2];
    Report {
        target: t.name(),
        mode: p.mode,
        batch: p.batch,
        per_rep,
        ns_median: median,
        ns_min: per_rep_ns[0],
        mcqe_per_s: mcqe_per_s(median),
        instr: None,
        ring: None,
        callgrind_args: None,
    }
}

/// Millions of CQEs a second at `ns_per_cqe`; 0 for a time too short to measure (a
/// rate of infinity would be `null` in the JSON output).
fn mcqe_per_s(ns_per_cqe: f64) -> f64 {
    if ns_per_cqe > 0.0 {
        1e3 / ns_per_cqe
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target that counts what `run` asks of it, and whose polls take a set time.
    #[derive(Default)]
    struct Fake {
        calls: Vec<&'static str>,
        /// Laps prepared and not yet polled or discarded.
        pending: u32,
        /// How long each poll call spins, in microseconds, by call number.
        spin_us: Vec<u64>,
    }

    impl Fake {
        fn spin(&mut self) {
            let us = self.spin_us.get(self.calls.len()).copied().unwrap_or(0);
            let t = Instant::now();
            while t.elapsed().as_micros() < u128::from(us) {}
        }
    }

    impl BenchTarget for Fake {
        fn name(&self) -> String {
            "fake".into()
        }
        fn entries(&self) -> u32 {
            8
        }
        fn prepare_lap(&mut self) {
            assert_eq!(self.pending, 0, "a lap prepared over one not drained");
            self.pending = 1;
            self.calls.push("prepare");
        }
        fn discard_lap(&mut self) {
            self.pending = 0;
            self.calls.push("discard");
        }
        fn poll_full(&mut self, batch: usize) -> usize {
            self.spin();
            self.pending = 0;
            self.calls.push(if batch == 4 { "full/4" } else { "full" });
            8
        }
        fn poll_views(&mut self) -> usize {
            self.spin();
            self.pending = 0;
            self.calls.push("views");
            6
        }
        fn poll_empty(&mut self, _: usize) -> usize {
            self.spin();
            self.calls.push("empty");
            0
        }
        fn noop(&mut self, _: usize) -> usize {
            self.calls.push("noop");
            0
        }
    }

    fn params(mode: Mode, laps: u32, reps: u32, prepare_only: bool) -> Params {
        Params { mode, batch: 4, laps, reps, prepare_only }
    }

    #[test]
    fn each_mode_prepares_and_polls_what_it_says_and_counts_what_was_polled() {
        let mut t = Fake::default();
        let r = run(&mut t, &params(Mode::Full, 3, 2, false));
        assert_eq!(t.calls, ["prepare", "full/4"].repeat(6));
        assert_eq!((r.per_rep, r.batch, r.mode, r.target.as_str()), (24, 4, Mode::Full, "fake"));
        // Views count the CQEs the walk saw.
        let mut t = Fake::default();
        assert_eq!(run(&mut t, &params(Mode::View, 2, 1, false)).per_rep, 12);
        assert_eq!(t.calls, ["prepare", "views", "prepare", "views"]);
        // The prepare-only baseline: the same laps, discarded, never polled.
        let mut t = Fake::default();
        assert_eq!(run(&mut t, &params(Mode::Full, 2, 1, true)).per_rep, 16);
        assert_eq!(t.calls, ["prepare", "discard", "prepare", "discard"]);
        // Empty: one call per ring entry and lap; its baseline calls the no-op instead.
        let mut t = Fake::default();
        assert_eq!(run(&mut t, &params(Mode::Empty, 2, 1, false)).per_rep, 16);
        assert_eq!(t.calls, ["empty"; 16]);
        let mut t = Fake::default();
        run(&mut t, &params(Mode::Empty, 1, 1, true));
        assert_eq!(t.calls, ["noop"; 8]);
        // Zero laps or repetitions run one.
        let mut t = Fake::default();
        assert_eq!(run(&mut t, &params(Mode::Full, 0, 0, false)).per_rep, 8);
    }

    #[test]
    fn the_row_reports_the_median_and_the_fastest_repetition() {
        // Three repetitions of one lap: the polls of the second take far longer than the
        // others, so the median is one of the fast ones and the minimum below it.
        let mut t = Fake { spin_us: vec![0, 0, 0, 20_000, 0, 0], ..Fake::default() };
        let r = run(&mut t, &params(Mode::Full, 1, 3, false));
        assert!(r.ns_min <= r.ns_median, "{r:?}");
        assert!(r.ns_median < 20_000_000.0 / 8.0, "the slow repetition is not the median: {r:?}");
        assert!((r.mcqe_per_s - 1e3 / r.ns_median).abs() < 1e-9);
        assert_eq!((r.instr, r.ring, r.callgrind_args.is_none()), (None, None, true));
        // Time is per CQE: a lap of 8 polled in at least 1 ms is at least 125 µs a CQE (and
        // the bound above leaves room for a busy machine, not for a time 8 times too long).
        let mut t = Fake { spin_us: vec![0, 1_000, 0, 1_000], ..Fake::default() };
        let r = run(&mut t, &params(Mode::Full, 1, 2, false));
        assert!((125_000.0..4_000_000.0).contains(&r.ns_min), "{r:?}");
    }

    #[test]
    fn an_empty_poll_row_times_each_call() {
        // One lap is 8 calls; the first takes at least 1 ms, so the repetition averages at
        // least 125 µs a call.
        let mut t = Fake { spin_us: vec![1_000], ..Fake::default() };
        let r = run(&mut t, &params(Mode::Empty, 1, 1, false));
        assert!((125_000.0..4_000_000.0).contains(&r.ns_median), "{r:?}");
        assert_eq!(r.ns_min, r.ns_median);
    }

    #[test]
    fn the_rate_of_an_unmeasurably_short_time_is_zero_not_infinite() {
        assert_eq!(mcqe_per_s(0.0), 0.0);
        assert_eq!(mcqe_per_s(4.0), 250.0);
    }
}
