//! Drain cost on a real device or a model, through the [`crate::Cq`] API: fill a CQ with
//! RDMA WRITE completions, then time only the poll calls that return completions, for each
//! backend the device has (its direct backend and rdma-core's `ibv_poll_cq`), alternating
//! them repetition by repetition so both see the same machine state.

use crate::cq::{BackendChoice, BackendKind, Cq, CqOptions};
use crate::error::Error;
use crate::verbs::{Access, QpCaps, QpType, SendOp, SendWr};
use crate::{Completion, Context, QpInit};
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

/// One backend's figures.
#[derive(Clone, Debug, Serialize)]
pub struct DrainRow {
    /// `direct` names the device's direct backend (`rxe`, `model`, ...); `ibv_poll_cq` the
    /// generic one.
    pub poller: String,
    /// The backend that polled, and why.
    pub backend: BackendKind,
    /// Completions polled per repetition.
    pub completions: u32,
    /// Median over repetitions of ns per completion, poll calls that returned something only.
    pub ns_per_completion: f64,
    /// The best repetition.
    pub ns_per_completion_min: f64,
    /// This row's median over `ibv_poll_cq`'s, where the device has both.
    pub ratio_to_ibv_poll_cq: Option<f64>,
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

/// One fill and drain; ns per completion of the calls that returned something.
fn one_rep(cq: &mut Cq, lp: &mut Loop, p: &DrainParams) -> Result<f64, Error> {
    let sg = [lp.mr.slice(0, 8)?];
    let to = lp.mr.remote().at(64);
    for i in 0..u64::from(p.completions) {
        lp.qp.post_send(&[SendWr::new(i, SendOp::Write(to), &sg)])?;
    }
    // Let the device finish most of the work before timing, so calls find full batches.
    std::thread::sleep(Duration::from_millis(if cq.backend().kind == BackendKind::Model { 0 } else { 100 }));
    let mut wcs = vec![Completion::default(); p.batch];
    let (mut got, mut busy) = (0u32, Duration::ZERO);
    let deadline = Instant::now() + FILL_WAIT;
    while got < p.completions {
        let t = Instant::now();
        let n = cq.poll(&mut wcs);
        let dt = t.elapsed();
        if n > 0 {
            busy += dt;
            got += n as u32;
            if let Some(bad) = wcs[..n].iter().find(|c| !c.is_ok()) {
                return Err(Error::Mismatch {
                    device: cq.device().to_string(),
                    what: format!("a fill completed with {}", bad.status.name()),
                });
            }
        } else if Instant::now() > deadline {
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
    Ok(busy.as_nanos() as f64 / f64::from(got.max(1)))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Runs the drain benchmark on `ctx`: the direct backend, and `ibv_poll_cq` where the
/// device has it.
///
/// # Errors
///
/// A CQ or QP could not be made, a post was refused, or a fill did not complete.
pub fn run(ctx: &Context, p: &DrainParams) -> Result<Vec<DrainRow>, Error> {
    let mut pollers: Vec<(String, Cq, Loop)> = Vec::new();
    for (name, choice) in [("direct", BackendChoice::Auto), ("ibv_poll_cq", BackendChoice::Generic)] {
        match ctx.create_cq(CqOptions::new(p.completions).backend(choice)) {
            Ok(cq) => {
                let lp = make_loop(ctx, &cq, p.completions)?;
                pollers.push((name.to_string(), cq, lp));
            }
            // A model has no rdma-core poll: its row is the direct one only.
            Err(Error::Mismatch { .. }) if choice == BackendChoice::Generic => {}
            Err(e) => return Err(e),
        }
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); pollers.len()];
    for _ in 0..p.reps {
        for (i, (_, cq, lp)) in pollers.iter_mut().enumerate() {
            samples[i].push(one_rep(cq, lp, p)?);
        }
    }
    let mut rows: Vec<DrainRow> = pollers
        .iter()
        .zip(samples.iter_mut())
        .map(|((name, cq, _), s)| {
            let min = s.iter().copied().fold(f64::INFINITY, f64::min);
            DrainRow {
                poller: name.clone(),
                backend: cq.backend().kind,
                completions: p.completions,
                ns_per_completion: median(s),
                ns_per_completion_min: min,
                ratio_to_ibv_poll_cq: None,
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
