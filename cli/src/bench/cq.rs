//! What the [`crate::Cq`] handle's statistics cost (`dvcq bench cq`): the same laps polled
//! through the handle on a model device twice, counting and not counting, so the difference
//! is the statistics alone.
//!
//! A lap posts `completions` RDMA WRITEs on an RC QP connected to itself; the model device
//! executes them at the doorbell and writes their CQEs (not timed). The lap is then drained
//! through [`crate::Cq`] in batches (timed): with [`crate::Cq::poll`], which counts, or with
//! the same poll without the counting. Instructions per completion come from two runs of
//! the whole benchmark under callgrind, one each way (`dvcq bench cq --callgrind`).

use crate::cq::{Cq, CqOptions};
use crate::verbs::{Access, QpCaps, QpType, SendOp, SendWr};
use crate::{Completion, Context, QpInit};
use dvcq::Error;
use serde::Serialize;
use std::time::Instant;

/// What to run.
#[derive(Clone, Copy, Debug)]
pub struct CqBenchParams {
    /// Completions per lap (the CQ and the send queue are this deep).
    pub completions: u32,
    /// Completions per poll call.
    pub batch: usize,
    /// Laps per repetition.
    pub laps: u32,
    /// Repetitions; the median is reported.
    pub reps: u32,
}

/// One way of polling, measured.
#[derive(Clone, Debug, Serialize)]
pub struct CqBenchRow {
    /// Whether the handle counted (`Cq::poll`) or not.
    pub stats: bool,
    /// Completions polled per repetition.
    pub completions: u64,
    /// Median over repetitions of ns per completion (the drain only).
    pub ns_per_completion: f64,
    /// The fastest repetition.
    pub ns_per_completion_min: f64,
}

/// WRITEs posted per doorbell while filling a lap.
const POST_CHUNK: usize = 32;

/// A model CQ with an RC QP connected to itself that writes into its own region.
#[derive(Debug)]
pub struct CqBench {
    cq: Cq,
    qp: crate::Qp,
    mr: crate::Mr,
    _pd: crate::Pd,
    completions: u32,
    scratch: Vec<Completion>,
}

impl CqBench {
    /// Sets up on `ctx` (a model device: the rdma-core devices' laps would not complete in
    /// a deterministic number of instructions).
    ///
    /// # Errors
    ///
    /// [`Error::Mismatch`] for a device that is not a model; the CQ, QP or region could not
    /// be made.
    pub fn new(ctx: &Context, p: &CqBenchParams) -> Result<Self, Error> {
        if !ctx.is_model() {
            return Err(Error::Mismatch {
                device: ctx.name().to_string(),
                what: "bench cq runs on the models only (model-mlx5, model-e810)".into(),
            });
        }
        let cq = ctx.create_cq(CqOptions::new(p.completions))?;
        let pd = ctx.alloc_pd()?;
        let caps =
            QpCaps { max_send_wr: p.completions, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let mut qp = pd.create_qp(&QpInit { caps, ..QpInit::new(QpType::Rc, &cq) })?;
        let me = qp.endpoint()?;
        qp.connect(&me)?;
        let mr = pd.reg_mr(4096, Access::ALL)?;
        Ok(CqBench { cq, qp, mr, _pd: pd, completions: p.completions, scratch: vec![Completion::default(); p.batch] })
    }

    /// The CQ polled.
    pub fn cq(&self) -> &Cq {
        &self.cq
    }

    /// Posts one lap of WRITEs; the device completes them at the doorbell.
    ///
    /// # Errors
    ///
    /// A post was refused.
    pub fn fill(&mut self) -> Result<(), Error> {
        let sg = [self.mr.slice(0, 8)?];
        let to = self.mr.remote().at(64);
        let mut wrs = Vec::with_capacity(POST_CHUNK);
        let mut left = u64::from(self.completions);
        while left > 0 {
            wrs.clear();
            let k = left.min(POST_CHUNK as u64);
            wrs.extend((0..k).map(|i| SendWr::new(left - i, SendOp::Write(to), &sg)));
            self.qp.post_send(&wrs)?;
            left -= k;
        }
        Ok(())
    }

    /// Drains the lap in batches, counting through `Cq::poll` or not; returns the
    /// completions polled.
    pub fn drain(&mut self, stats: bool) -> u64 {
        let mut got = 0u64;
        loop {
            let n = if stats {
                self.cq.poll_count(std::hint::black_box(&mut self.scratch))
            } else {
                dvcq::tool_support::poll_uncounted(&mut self.cq, std::hint::black_box(&mut self.scratch))
            };
            if n == 0 {
                return got;
            }
            got += n as u64;
        }
    }
}

/// Runs the repetitions one way (`stats`: through `Cq::poll`), at least one lap each.
///
/// # Errors
///
/// A post was refused, or a lap did not come back whole.
pub fn run(b: &mut CqBench, p: &CqBenchParams, stats: bool) -> Result<CqBenchRow, Error> {
    let mut per_rep = Vec::with_capacity(p.reps.max(1) as usize);
    let mut count = 0u64;
    for _ in 0..p.reps.max(1) {
        let (mut ns, mut got) = (0u128, 0u64);
        for _ in 0..p.laps.max(1) {
            b.fill()?;
            let t = Instant::now();
            let n = b.drain(stats);
            ns += t.elapsed().as_nanos();
            if n != u64::from(b.completions) {
                return Err(Error::Mismatch {
                    device: b.cq.device().to_string(),
                    what: format!("a lap of {} WRITEs gave {n} completions", b.completions),
                });
            }
            got += n;
        }
        count = got;
        per_rep.push(ns as f64 / got.max(1) as f64);
    }
    per_rep.sort_by(f64::total_cmp);
    Ok(CqBenchRow {
        stats,
        completions: count,
        ns_per_completion: per_rep[per_rep.len() / 2],
        ns_per_completion_min: per_rep[0],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways poll every completion of every lap; only the counting way moves the
    /// statistics.
    #[test]
    fn both_ways_poll_the_laps_and_only_one_counts() {
        for dev in ["model-mlx5", "model-e810"] {
            let ctx = Context::open(dev).unwrap();
            let p = CqBenchParams { completions: 40, batch: 16, laps: 3, reps: 2 };
            let mut b = CqBench::new(&ctx, &p).unwrap();
            let off = run(&mut b, &p, false).unwrap();
            assert_eq!((off.completions, b.cq().stats().completions), (120, 0), "{dev}");
            let on = run(&mut b, &p, true).unwrap();
            let s = b.cq().stats();
            assert_eq!((on.completions, s.completions, s.largest_batch), (120, 240, 16), "{dev}");
            assert_eq!(s.high_water, 40, "{dev}: each lap filled the CQ before the drain");
        }
        let e = CqBench::new(
            &Context::open("model-mlx5").unwrap(),
            &CqBenchParams { completions: 0, batch: 1, laps: 1, reps: 1 },
        );
        assert!(e.is_err(), "a CQ of depth 0 is refused");
    }
}
