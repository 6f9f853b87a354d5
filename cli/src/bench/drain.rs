//! Drain cost on a real device or a model: fill a CQ with RDMA WRITE completions, then time
//! the drain, for each way the device can be polled, alternating them repetition by
//! repetition so all see the same machine state:
//!
//! - `direct`: [`crate::Cq::poll`] on the backend `BackendChoice::Auto` picks (dvcq's own
//!   reader of the device's ring where one applies);
//! - `ibv_poll_cq`: rdma-core's poll into an array of `struct ibv_wc`, nothing more: what an
//!   application pays today, and the baseline of the ratios;
//! - `generic`: [`crate::Cq::poll`] on the generic backend, `ibv_poll_cq` plus the
//!   conversion into dvcq's [`Completion`].
//!
//! The drain is timed as a whole (one clock read before the first poll call and one after
//! the last), not call by call: inside a VM under software emulation a clock read can cost
//! more than a poll call, and would swamp the difference measured.

use crate::cq::{BackendChoice, BackendKind, Cq, CqOptions};
use crate::verbs::{Access, QpCaps, QpType, SendOp, SendWr};
use crate::{Completion, Context, QpInit};
use dvcq::Error;
use serde::Serialize;
use std::time::{Duration, Instant};

/// What to measure.
#[derive(Clone, Copy, Debug)]
pub struct DrainParams {
    /// Completions per fill (the CQ and the send queue are this deep).
    pub completions: u32,
    /// Completions taken per poll call.
    pub batch: usize,
    /// Fills per backend; the median is reported.
    pub reps: u32,
}

/// One poller's figures.
#[derive(Clone, Debug, Serialize)]
pub struct DrainRow {
    /// `direct` (the backend `Auto` picks: `rxe`, `model`, ...), `ibv_poll_cq` (rdma-core's
    /// poll alone) or `generic` (the generic backend: `ibv_poll_cq` and the conversion).
    pub poller: String,
    /// The backend that polled, and why.
    pub backend: BackendKind,
    /// Completions polled per repetition.
    pub completions: u32,
    /// Median over repetitions of ns per completion, the whole drain timed.
    pub ns_per_completion: f64,
    /// The best repetition.
    pub ns_per_completion_min: f64,
    /// This row's median over `ibv_poll_cq`'s, where the device has both.
    pub ratio_to_ibv_poll_cq: Option<f64>,
    /// The CQ's depth, the most CQEs seen outstanding on it, and the depth the advice
    /// suggests for a send queue of `completions` ([`crate::Cq::advice`]).
    pub cq: crate::cq::DepthAdvice,
}

/// How long one fill may take to complete (the VM runs the kernel under emulation).
const FILL_WAIT: Duration = Duration::from_secs(20);

/// A QP connected to itself with a region to write, completing into `cq`.
struct Loop {
    qp: crate::Qp,
    mr: crate::Mr,
    _pd: crate::Pd,
}

fn make_loop(ctx: &Context, cq: &Cq, depth: u32) -> Result<Loop, Error> {
    let pd = ctx.alloc_pd()?;
    let caps = QpCaps { max_send_wr: depth, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let mut qp = pd.create_qp(&QpInit { caps, ..QpInit::new(QpType::Rc, cq) })?;
    let me = qp.endpoint()?;
    qp.connect(&me)?;
    let mr = pd.reg_mr(4096, Access::ALL)?;
    Ok(Loop { qp, mr, _pd: pd })
}

/// How a row polls its CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// [`Cq::poll`], whatever backend the CQ has.
    Cq,
    /// rdma-core's `ibv_poll_cq` into `struct ibv_wc`s, without dvcq's conversion.
    Verbs,
}

/// Scratch space for one poll call of each kind.
struct Scratch {
    wcs: Vec<Completion>,
    verbs: Vec<dvcq::tool_support::IbvWc>,
}

/// One poll call the row's way: completions taken, and the first that failed, if any.
#[inline]
fn poll_once(cq: &mut Cq, how: How, s: &mut Scratch) -> Result<(usize, Option<String>), Error> {
    match how {
        How::Cq => {
            let n = cq.poll(&mut s.wcs);
            Ok((n, s.wcs[..n].iter().find(|c| !c.is_ok()).map(|c| c.status.name().to_string())))
        }
        How::Verbs => {
            let n = dvcq::tool_support::ibv_poll_cq(cq, &mut s.verbs, "ibv_poll_cq")?;
            Ok((n, s.verbs[..n].iter().find(|w| w.status != 0).map(|w| format!("status {}", w.status))))
        }
    }
}

/// One fill and drain; ns per completion of the whole drain.
fn one_rep(cq: &mut Cq, how: How, lp: &mut Loop, p: &DrainParams) -> Result<f64, Error> {
    let sg = [lp.mr.slice(0, 8)?];
    let to = lp.mr.remote().at(64);
    for i in 0..u64::from(p.completions) {
        lp.qp.post_send(&[SendWr::new(i, SendOp::Write(to), &sg)])?;
    }
    // Let the device finish the work before timing, so calls find full batches.
    std::thread::sleep(Duration::from_millis(if cq.backend().kind == BackendKind::Model { 0 } else { 100 }));
    let mut s = Scratch {
        wcs: vec![Completion::default(); p.batch],
        verbs: vec![dvcq::tool_support::IbvWc::default(); p.batch],
    };
    let mut got = 0u32;
    let deadline = Instant::now() + FILL_WAIT;
    let t = Instant::now();
    while got < p.completions {
        let (n, bad) = poll_once(cq, how, &mut s)?;
        if let Some(bad) = bad {
            return Err(Error::Mismatch {
                device: cq.device().to_string(),
                what: format!("a fill completed with {bad}"),
            });
        }
        got += n as u32;
        if n == 0 && Instant::now() > deadline {
            return Err(Error::Mismatch {
                device: cq.device().to_string(),
                what: format!(
                    "{} of {} completions did not arrive in {FILL_WAIT:?}",
                    p.completions - got,
                    p.completions
                ),
            });
        }
    }
    let busy = t.elapsed();
    Ok(busy.as_nanos() as f64 / f64::from(got.max(1)))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Runs the drain benchmark on `ctx`: the direct backend, and rdma-core's `ibv_poll_cq`
/// alone and through the generic backend where the device has them.
///
/// # Errors
///
/// A CQ or QP could not be made, a post was refused, or a fill did not complete.
pub fn run(ctx: &Context, p: &DrainParams) -> Result<Vec<DrainRow>, Error> {
    let mut pollers: Vec<(String, Cq, How, Loop)> = Vec::new();
    let rows: &[(&str, BackendChoice, How)] = &[
        ("direct", BackendChoice::Auto, How::Cq),
        ("ibv_poll_cq", BackendChoice::Generic, How::Verbs),
        ("generic", BackendChoice::Generic, How::Cq),
    ];
    for &(name, choice, how) in rows {
        match ctx.create_cq(CqOptions::new(p.completions).backend(choice)) {
            Ok(cq) => {
                let lp = make_loop(ctx, &cq, p.completions)?;
                pollers.push((name.to_string(), cq, how, lp));
            }
            // A model has no rdma-core poll: its row is the direct one only.
            Err(Error::Mismatch { .. }) if choice == BackendChoice::Generic => {}
            Err(e) => return Err(e),
        }
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); pollers.len()];
    for _ in 0..p.reps {
        for (i, (_, cq, how, lp)) in pollers.iter_mut().enumerate() {
            samples[i].push(one_rep(cq, *how, lp, p)?);
        }
    }
    let mut rows: Vec<DrainRow> = pollers
        .iter()
        .zip(samples.iter_mut())
        .map(|((name, cq, _, _), s)| {
            let min = s.iter().copied().fold(f64::INFINITY, f64::min);
            DrainRow {
                poller: name.clone(),
                backend: cq.backend().kind,
                completions: p.completions,
                ns_per_completion: median(s),
                ns_per_completion_min: min,
                ratio_to_ibv_poll_cq: None,
                // Each fill posts `completions` WRITEs on a QP with a one-deep receive queue.
                cq: cq.advice(Some(u64::from(p.completions) + 1)),
            }
        })
        .collect();
    if let Some(base) = rows.iter().find(|r| r.poller == "ibv_poll_cq").map(|r| r.ns_per_completion) {
        for r in &mut rows {
            r.ratio_to_ibv_poll_cq = (base > 0.0).then(|| r.ns_per_completion / base);
        }
    }
    Ok(rows)
}
