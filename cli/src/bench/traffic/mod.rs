//! `dvcq bench traffic`: perftest-style RC traffic (RDMA WRITE or SEND, each QP connected
//! to itself), the same traffic polled three ways in one run, the ways taking turns
//! repetition by repetition so that all see the same machine:
//!
//! - `direct`: [`crate::Cq::poll`] on the backend `BackendChoice::Auto` picks (dvcq's own
//!   reader of the device's ring where one applies);
//! - `ibv_poll_cq`: rdma-core's `ibv_poll_cq` into `struct ibv_wc`s: what an application
//!   pays today, and the baseline of the ratios;
//! - `cq_ex`: rdma-core's extended CQ (`ibv_create_cq_ex`, then `ibv_start_poll`,
//!   `ibv_next_poll`, `ibv_wc_read_*`, `ibv_end_poll`) into the same `struct ibv_wc`s.
//!
//! A model has only its direct poller. Each poller gets its own PD, memory region, QPs and
//! CQs; a repetition runs a throughput phase and a latency phase on each (the `lane` module).
//!
//! What a row reports:
//!
//! - `completions_per_s`: completions over the throughput phase's wall time. One thread
//!   posts and polls, so this is per core.
//! - `ns_per_completion`: the polling thread's CPU time over the same phase
//!   (`CLOCK_THREAD_CPUTIME_ID`), per completion: what a completion costs a core, posting
//!   included (the same work for every poller, so the rows differ by their poll paths).
//! - `ratio_to_ibv_poll_cq`: `ns_per_completion` over the `ibv_poll_cq` row's.
//! - the latency phase's `t_min`, `t_typical` (median), `t_avg`, `t_max`, `t_stdev` and the
//!   99% and 99.9% percentiles, in microseconds (hdrhistogram, 3 significant digits).
//! - with `--callgrind` (valgrind), instructions per completion of the poll calls alone.

mod lane;
pub mod oob;
pub(crate) mod poll;
pub mod remote;

use crate::cq::BackendKind;
use crate::Context;
use dvcq::Error;
use lane::{BwSample, Lane};
use serde::Serialize;

/// What the traffic does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// RDMA WRITE: one requester completion per signaled send (`ib_write_bw`).
    Write,
    /// SEND: a requester completion per signaled send and a responder completion per
    /// message, both on the QP's CQ (`ib_send_bw`).
    Send,
}

impl Verb {
    /// How perftest names the test.
    pub const fn title(self) -> &'static str {
        match self {
            Verb::Write => "RDMA_Write",
            Verb::Send => "Send",
        }
    }
}

/// A way to poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum PollerKind {
    /// dvcq's `Cq::poll` on the backend `Auto` picks.
    #[value(name = "direct")]
    Direct,
    /// rdma-core's `ibv_poll_cq`.
    #[value(name = "ibv_poll_cq")]
    IbvPollCq,
    /// rdma-core's extended CQ.
    #[value(name = "cq_ex")]
    CqEx,
}

impl PollerKind {
    /// Every poller, in the table's order.
    pub const ALL: [PollerKind; 3] = [PollerKind::Direct, PollerKind::IbvPollCq, PollerKind::CqEx];

    /// The row's name.
    pub const fn name(self) -> &'static str {
        match self {
            PollerKind::Direct => "direct",
            PollerKind::IbvPollCq => "ibv_poll_cq",
            PollerKind::CqEx => "cq_ex",
        }
    }

    /// The symbol of its poll function (what `valgrind --toggle-collect` names).
    pub const fn symbol(self) -> &'static str {
        poll::symbol(self)
    }
}

/// CQ moderation (`ibv_modify_cq`): an armed CQ's event waits for `count` completions or
/// `period_us` microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Moderation {
    /// Completions per event.
    pub count: u16,
    /// Microseconds.
    pub period_us: u16,
}

/// What a traffic run does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TrafficParams {
    /// RDMA WRITE or SEND.
    pub verb: Verb,
    /// Bytes per message.
    pub size: u32,
    /// Work requests per QP and phase.
    pub iters: u32,
    /// Send queue depth: work requests outstanding per QP at most.
    pub tx_depth: u32,
    /// Every how many sends one is signaled (perftest's `-Q`, cq_mod).
    pub signal_every: u32,
    /// QPs made with `sq_sig_all`: every send completes, none flagged.
    pub sq_sig_all: bool,
    /// Sleep on the completion channel instead of busy-polling.
    pub events: bool,
    /// Completions asked of one poll call.
    pub batch: usize,
    /// QPs.
    pub qps: u32,
    /// One CQ per QP instead of one CQ for all.
    pub cq_per_qp: bool,
    /// CQ depth asked for; `None`: what the traffic can have outstanding.
    #[serde(rename = "cq_depth_asked")]
    pub cq_depth: Option<u32>,
    /// CQ moderation, if set.
    pub moderation: Option<Moderation>,
    /// Repetitions; the median throughput is reported, latencies over all of them.
    pub reps: u32,
    /// Run this poller alone (the callgrind count's child run).
    #[serde(skip)]
    pub only: Option<PollerKind>,
    /// Run the latency phase (the callgrind child runs the throughput phase alone).
    #[serde(skip)]
    pub latency: bool,
}

impl TrafficParams {
    /// Completions one CQ may hold at once: what its QPs can have outstanding.
    pub fn outstanding_per_cq(&self) -> u64 {
        let per_qp_sends = u64::from(self.tx_depth / if self.sq_sig_all { 1 } else { self.signal_every.max(1) });
        let per_qp_recvs = if self.verb == Verb::Send { u64::from(self.tx_depth) } else { 0 };
        let qps_per_cq = if self.cq_per_qp { 1 } else { u64::from(self.qps) };
        qps_per_cq * (per_qp_sends + per_qp_recvs)
    }

    /// The CQ depth the run asks for.
    pub fn depth(&self) -> u32 {
        self.cq_depth.unwrap_or_else(|| u32::try_from(self.outstanding_per_cq()).unwrap_or(u32::MAX).max(1))
    }

    /// Refuses settings that cannot run, saying which and why.
    ///
    /// # Errors
    ///
    /// One line naming the options.
    pub fn check(&self) -> Result<(), String> {
        if self.sq_sig_all && self.signal_every > 1 {
            return Err(format!(
                "--sq-sig-all signals every send; it cannot be combined with -Q/--signal-every {}",
                self.signal_every
            ));
        }
        if self.signal_every > self.tx_depth {
            return Err(format!(
                "-Q/--signal-every {}: larger than the TX depth ({}): the send queue would fill with \
                 unsignaled sends before one completes them",
                self.signal_every, self.tx_depth
            ));
        }
        let need = self.outstanding_per_cq();
        if let Some(d) = self.cq_depth {
            if u64::from(d) < need {
                return Err(format!(
                    "--depth {d}: a CQ here must hold the {need} completions its QPs can have outstanding \
                     (TX depth {}, signal every {}, {} QP(s) per CQ{}); give at least {need}",
                    self.tx_depth,
                    if self.sq_sig_all { 1 } else { self.signal_every },
                    if self.cq_per_qp { 1 } else { self.qps },
                    if self.verb == Verb::Send { ", and a receive completion per message" } else { "" },
                ));
            }
        }
        if let Some(m) = self.moderation {
            if self.events && m.count > 1 && m.period_us == 0 {
                return Err(format!(
                    "--moderation {},0 with -e: an event would wait for {} completions that the last \
                     messages of a phase never bring; give a period (COUNT,PERIOD_US)",
                    m.count, m.count
                ));
            }
        }
        Ok(())
    }
}

/// One poller's figures.
#[derive(Clone, Debug, Serialize)]
pub struct TrafficRow {
    /// `direct`, `ibv_poll_cq` or `cq_ex`.
    pub poller: &'static str,
    /// The backend that polled.
    pub backend: BackendKind,
    /// Why that backend.
    pub backend_reason: String,
    /// Work requests posted per repetition's throughput phase (all QPs).
    pub wrs: u64,
    /// Completions polled per repetition's throughput phase.
    pub completions: u64,
    /// Completions per second of the throughput phase (one polling thread: per core),
    /// median over repetitions.
    pub completions_per_s: f64,
    /// The polling thread's CPU nanoseconds per completion, median over repetitions.
    pub ns_per_completion: f64,
    /// `ns_per_completion` over the `ibv_poll_cq` row's, where the device has that row.
    pub ratio_to_ibv_poll_cq: Option<f64>,
    /// Poll calls per completion (throughput phase).
    pub polls_per_completion: f64,
    /// Completion events slept for per repetition (throughput phase; 0 busy-polling).
    pub events: u64,
    /// Latency phase, microseconds: fastest.
    pub t_min_us: f64,
    /// Slowest.
    pub t_max_us: f64,
    /// Median (perftest's `t_typical`).
    pub t_typical_us: f64,
    /// Mean.
    pub t_avg_us: f64,
    /// Standard deviation.
    pub t_stdev_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p99_9_us: f64,
    /// Instructions per completion of the poll calls, under callgrind (`--callgrind`).
    pub instructions_per_completion: Option<f64>,
}

/// A poller the device could not run, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// The poller.
    pub poller: &'static str,
    /// Why.
    pub reason: String,
}

/// A traffic run's result.
#[derive(Clone, Debug, Serialize)]
pub struct TrafficReport {
    /// The device.
    pub device: String,
    /// What ran.
    #[serde(flatten)]
    pub params: TrafficParams,
    /// CQs per poller.
    pub cqs: u32,
    /// The depth the device gave each CQ.
    pub cq_depth: u32,
    /// One row per poller.
    pub rows: Vec<TrafficRow>,
    /// Pollers the device could not run.
    pub skipped: Vec<Skipped>,
}

/// `IBV_WC_STANDARD_FLAGS`: what the extended CQ row reads, the fields of `struct ibv_wc`.
pub(crate) fn standard_wc_flags() -> u64 {
    dvcq::tool_support::IBV_WC_STANDARD_FLAGS
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn us(ns: f64) -> f64 {
    ns / 1e3
}

/// Runs the traffic on `ctx` with every poller the device has (or `p.only`).
///
/// # Errors
///
/// Settings [`TrafficParams::check`] refuses ([`Error::Mismatch`]), a device that refuses
/// an object or setting (moderation on rxe, a moderation period above 4095 µs on a model, ...), a completion
/// with an error status, or a device that stops completing.
pub fn run(ctx: &Context, p: &TrafficParams) -> Result<TrafficReport, Error> {
    p.check().map_err(|what| Error::Mismatch { device: ctx.name().to_string(), what })?;
    let depth = p.depth();
    let mut lanes = Vec::new();
    let mut skipped = Vec::new();
    for kind in PollerKind::ALL.into_iter().filter(|k| p.only.is_none_or(|o| o == *k)) {
        match Lane::new(ctx, kind, p, depth) {
            Ok(l) => lanes.push(l),
            // A model has no rdma-core poll: its table is the direct row alone.
            Err(Error::Mismatch { .. }) if kind != PollerKind::Direct && p.only.is_none() => {}
            // A provider without the extended CQ (EOPNOTSUPP): the row is skipped, saying so.
            Err(e @ Error::Verbs { .. }) if kind == PollerKind::CqEx && p.only.is_none() => {
                skipped.push(Skipped { poller: kind.name(), reason: e.to_string() });
            }
            Err(e) => return Err(e),
        }
    }
    let mut bw: Vec<Vec<BwSample>> = vec![Vec::new(); lanes.len()];
    let mut hists = Vec::with_capacity(lanes.len());
    for _ in 0..lanes.len() {
        // One hour in nanoseconds, three significant digits.
        hists.push(hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).map_err(|e| {
            Error::Mismatch { device: ctx.name().to_string(), what: format!("latency histogram: {e}") }
        })?);
    }
    for _ in 0..p.reps.max(1) {
        for (i, lane) in lanes.iter_mut().enumerate() {
            bw[i].push(lane.bandwidth(p)?);
        }
        if p.latency {
            for (lane, h) in lanes.iter_mut().zip(hists.iter_mut()) {
                lane.latency(p, h)?;
            }
        }
    }
    let mut rows: Vec<TrafficRow> = lanes
        .iter()
        .zip(bw.iter().zip(&hists))
        .map(|(lane, (samples, h))| {
            let first = samples.first().copied().unwrap_or_default();
            let per_s = samples
                .iter()
                .map(|s| if s.wall.is_zero() { 0.0 } else { s.completions as f64 / s.wall.as_secs_f64() })
                .collect();
            let ns = samples.iter().map(|s| s.cpu.as_nanos() as f64 / s.completions.max(1) as f64).collect();
            let polls: u64 = samples.iter().map(|s| s.polls).sum();
            let done: u64 = samples.iter().map(|s| s.completions).sum();
            let events: u64 = samples.iter().map(|s| s.events).sum::<u64>() / samples.len().max(1) as u64;
            let cq = &lane.cqs[0];
            TrafficRow {
                poller: lane.kind.name(),
                backend: cq.backend().kind,
                backend_reason: cq.backend().reason.clone(),
                wrs: first.wrs,
                completions: first.completions,
                completions_per_s: median(per_s),
                ns_per_completion: median(ns),
                ratio_to_ibv_poll_cq: None,
                polls_per_completion: polls as f64 / done.max(1) as f64,
                events,
                t_min_us: us(h.min() as f64),
                t_max_us: us(h.max() as f64),
                t_typical_us: us(h.value_at_quantile(0.5) as f64),
                t_avg_us: us(h.mean()),
                t_stdev_us: us(h.stdev()),
                p99_us: us(h.value_at_quantile(0.99) as f64),
                p99_9_us: us(h.value_at_quantile(0.999) as f64),
                instructions_per_completion: None,
            }
        })
        .collect();
    if let Some(base) = rows.iter().find(|r| r.poller == "ibv_poll_cq").map(|r| r.ns_per_completion) {
        for r in &mut rows {
            r.ratio_to_ibv_poll_cq = (base > 0.0).then(|| r.ns_per_completion / base);
        }
    }
    let (cqs, cq_depth) = lanes.first().map_or((0, depth), |l| (l.cqs.len() as u32, l.cqs[0].depth()));
    Ok(TrafficReport { device: ctx.name().to_string(), params: *p, cqs, cq_depth, rows, skipped })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> TrafficParams {
        TrafficParams {
            verb: Verb::Write,
            size: 64,
            iters: 64,
            tx_depth: 32,
            signal_every: 1,
            sq_sig_all: false,
            events: false,
            batch: 16,
            qps: 1,
            cq_per_qp: false,
            cq_depth: None,
            moderation: None,
            reps: 1,
            only: None,
            latency: true,
        }
    }

    #[test]
    fn the_cq_holds_what_its_qps_can_have_outstanding() {
        let p = params();
        assert_eq!(p.depth(), 32);
        assert_eq!(TrafficParams { signal_every: 4, ..p }.depth(), 8);
        assert_eq!(TrafficParams { qps: 3, ..p }.depth(), 96);
        assert_eq!(TrafficParams { qps: 3, cq_per_qp: true, ..p }.depth(), 32);
        assert_eq!(TrafficParams { verb: Verb::Send, signal_every: 4, ..p }.depth(), 8 + 32);
        assert_eq!(TrafficParams { cq_depth: Some(1000), ..p }.depth(), 1000);
    }

    #[test]
    fn settings_that_cannot_run_are_refused_by_name() {
        let p = params();
        assert!(p.check().is_ok());
        let e = TrafficParams { sq_sig_all: true, signal_every: 2, ..p }.check().unwrap_err();
        assert!(e.starts_with("--sq-sig-all"), "{e}");
        let e = TrafficParams { signal_every: 33, ..p }.check().unwrap_err();
        assert!(e.starts_with("-Q/--signal-every 33: larger than the TX depth (32)"), "{e}");
        let e = TrafficParams { cq_depth: Some(31), ..p }.check().unwrap_err();
        assert!(e.starts_with("--depth 31:") && e.contains("at least 32"), "{e}");
        assert!(TrafficParams { cq_depth: Some(32), ..p }.check().is_ok());
        let m = Some(Moderation { count: 8, period_us: 0 });
        let e = TrafficParams { events: true, moderation: m, ..p }.check().unwrap_err();
        assert!(e.starts_with("--moderation 8,0 with -e"), "{e}");
        // Busy-polling, or with a period, moderation cannot hang the run.
        assert!(TrafficParams { moderation: m, ..p }.check().is_ok());
        let m = Some(Moderation { count: 8, period_us: 10 });
        assert!(TrafficParams { events: true, moderation: m, ..p }.check().is_ok());
    }

    #[test]
    fn the_median_is_the_middle_value() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![]), 0.0);
    }
}
