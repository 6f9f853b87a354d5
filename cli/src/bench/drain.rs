//! Drain cost on a real device or a model: fill a CQ with RDMA WRITE completions, then time
//! the drain, for each way the device can be polled, alternating them repetition by
//! repetition so all see the same machine state:
//!
//! - `direct`: [`crate::Cq::poll`] on the backend `BackendChoice::Auto` picks (dvcq's own
//!   reader of the device's ring where one applies);
//! - `ibv_poll_cq`: rdma-core's poll into an array of `struct ibv_wc`, nothing more: what an
//!   application pays today, and the baseline of the ratios;
//! - `cq_ex`: rdma-core's extended CQ (`ibv_create_cq_ex`; `ibv_start_poll`,
//!   `ibv_next_poll`, the `ibv_wc_read_*` of `struct ibv_wc`'s fields, `ibv_end_poll`) into
//!   the same `struct ibv_wc`s: the provider's other poll, which a program may use instead;
//! - `generic`: [`crate::Cq::poll`] on the generic backend, `ibv_poll_cq` plus the
//!   conversion into dvcq's [`Completion`];
//! - `floor` (rxe only, a measuring stick rather than a poller): the least a poll of rxe's
//!   queue can do, through the zero-copy views ([`crate::Cq::views`]): the producer index
//!   read once per call, each record's six words copied out as they lie in the ring (what
//!   rdma-core's poll copies into a `struct ibv_wc`), converted into nothing, and the
//!   consumer index stored once per call. No lock, no conversion, no statistics: a poller
//!   that returns anything an application can use pays at least this.
//!
//! With `qps` above 1 the fill's WRITEs are spread over that many QPs sharing the CQ, in a
//! shuffled order (the order `bench scale` uses on the models), so each poller's lookup of
//! a CQE's QP runs with a working set that grows with them: dvcq's one-probe index against
//! rdma-core's two-level QP table, in the same harness (`bench scale -d DEVICE`).
//!
//! A drain is timed only once the device has finished the fill: a drain that finds the CQ
//! empty before the fill's last completion was waiting on the device, not polling, and is
//! run again after a wait twice as long (from 100 ms; an emulated device executing work
//! for thousands of QPs needs seconds). The models write synchronously and need no wait.
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
    /// QPs sharing the CQ, each taking its share of every fill (1 to [`MAX_QPS`]).
    pub qps: u32,
}

/// The most QPs a drain spreads a fill over.
pub const MAX_QPS: u32 = 4096;

/// One poller's figures.
#[derive(Clone, Debug, Serialize)]
pub struct DrainRow {
    /// `direct` (the backend `Auto` picks: `rxe`, `model`, ...), `ibv_poll_cq` (rdma-core's
    /// poll alone), `cq_ex`, `generic` (the generic backend: `ibv_poll_cq` and the
    /// conversion) or, on rxe, `floor` (the records copied out of the ring, nothing more).
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

/// QPs connected each to itself with a region to write, completing into `cq`, and the
/// order a fill posts on them.
struct Loop {
    qps: Vec<crate::Qp>,
    /// The QP of each WRITE of a fill, by index into `qps`.
    order: Vec<u32>,
    mr: crate::Mr,
    _pd: crate::Pd,
}

fn make_loop(ctx: &Context, cq: &Cq, p: &DrainParams) -> Result<Loop, Error> {
    let pd = ctx.alloc_pd()?;
    let n = p.qps.clamp(1, MAX_QPS);
    // Each QP takes its share of a fill (the first ones one more where it does not divide).
    let share = p.completions.div_ceil(n);
    let caps = QpCaps { max_send_wr: share, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let mut qps = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let mut qp = pd.create_qp(&QpInit { caps, ..QpInit::new(QpType::Rc, cq) })?;
        let me = qp.endpoint()?;
        qp.connect(&me)?;
        qps.push(qp);
    }
    let mr = pd.reg_mr(4096, Access::ALL)?;
    Ok(Loop { qps, order: fill_order(p.completions, n), mr, _pd: pd })
}

/// The QP of each of a fill's `completions` WRITEs over `qps` QPs: each its share, in
/// `bench scale`'s fixed shuffle, so few consecutive CQEs share a QP.
fn fill_order(completions: u32, qps: u32) -> Vec<u32> {
    super::scale::shuffled_shares(completions, qps)
}

/// How a row polls its CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// [`Cq::poll`], whatever backend the CQ has.
    Cq,
    /// rdma-core's `ibv_poll_cq` into `struct ibv_wc`s, without dvcq's conversion.
    Verbs,
    /// rdma-core's extended CQ into the same `struct ibv_wc`s.
    VerbsEx,
    /// The `floor` row: rxe's records copied out of the ring through the views.
    Floor,
}

/// Scratch space for one poll call of each kind.
struct Scratch {
    wcs: Vec<Completion>,
    verbs: Vec<dvcq::tool_support::IbvWc>,
    /// The floor row's copies of the kernel's records.
    records: Vec<[u64; 6]>,
}

/// One poll call the row's way: completions taken, and the first that failed, if any.
#[inline]
fn poll_once(cq: &mut Cq, how: How, s: &mut Scratch) -> Result<(usize, Option<String>), Error> {
    match how {
        How::Cq => {
            let n = cq.poll_count(&mut s.wcs);
            Ok((n, s.wcs[..n].iter().find(|c| !c.is_ok()).map(|c| c.status.name().to_string())))
        }
        How::Verbs | How::VerbsEx => {
            let n = if how == How::Verbs {
                dvcq::tool_support::ibv_poll_cq(cq, &mut s.verbs, "ibv_poll_cq")?
            } else {
                match dvcq::tool_support::ibv_poll_cq_ex(cq, &mut s.verbs, "cq_ex")? {
                    // What was polled before the failure is consumed and counted; the
                    // failure itself stops the run.
                    (0, Some(e)) => return Err(e),
                    (n, _) => n,
                }
            };
            Ok((n, s.verbs[..n].iter().find(|w| w.status != 0).map(|w| format!("status {}", w.status))))
        }
        How::Floor => {
            let Some(mut walk) = cq.views() else {
                return Err(Error::Mismatch {
                    device: cq.device().to_string(),
                    what: "no views for the floor row".into(),
                });
            };
            let mut n = 0;
            while n < s.records.len() {
                let Some(v) = walk.next() else { break };
                // `as_rxe` is always there on a walk (views exist on rxe only).
                s.records[n] = v.as_rxe().map_or([0; 6], |r| r.words());
                n += 1;
            }
            drop(walk);
            // `status` is the low half of the record's second word.
            let bad = s.records[..n].iter().map(|w| w[1] as u32).find(|&st| st != 0);
            Ok((n, bad.map(|st| format!("status {st}"))))
        }
    }
}

/// The first wait for the device to finish a fill, before a drain is timed.
const FIRST_SETTLE: Duration = Duration::from_millis(100);

/// One fill and drain after waiting `settle` for the device: ns per completion of the whole
/// drain, and whether a poll found the CQ empty before the fill's end (the device had not
/// finished: the figure includes waiting for it).
fn one_rep(cq: &mut Cq, how: How, lp: &mut Loop, p: &DrainParams, settle: Duration) -> Result<(f64, bool), Error> {
    let sg = [lp.mr.slice(0, 8)?];
    let to = lp.mr.remote().at(64);
    for (i, &k) in lp.order.iter().enumerate() {
        lp.qps[k as usize].post_send(&[SendWr::new(i as u64, SendOp::Write(to), &sg)])?;
    }
    // Let the device finish the work before timing, so calls find full batches.
    if cq.backend().kind != BackendKind::Model {
        std::thread::sleep(settle);
    }
    let mut s = Scratch {
        wcs: vec![Completion::default(); p.batch],
        verbs: vec![dvcq::tool_support::IbvWc::default(); p.batch],
        records: vec![[0; 6]; p.batch],
    };
    let mut got = 0u32;
    let mut waited = false;
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
        waited |= n == 0;
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
    Ok((busy.as_nanos() as f64 / f64::from(got.max(1)), waited))
}

/// [`one_rep`] until a drain did not wait on the device, doubling `settle` (shared by the
/// rows: they post the same fills) each time one did, up to [`FILL_WAIT`].
fn settled_rep(cq: &mut Cq, how: How, lp: &mut Loop, p: &DrainParams, settle: &mut Duration) -> Result<f64, Error> {
    loop {
        let (ns, waited) = one_rep(cq, how, lp, p, *settle)?;
        if !waited || *settle >= FILL_WAIT {
            return Ok(ns);
        }
        *settle = (*settle * 2).min(FILL_WAIT);
    }
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
        ("cq_ex", BackendChoice::Generic, How::VerbsEx),
        ("generic", BackendChoice::Generic, How::Cq),
        ("floor", BackendChoice::Auto, How::Floor),
    ];
    for &(name, choice, how) in rows {
        let opts = CqOptions::new(p.completions).backend(choice);
        let made = if how == How::VerbsEx {
            dvcq::tool_support::create_extended_cq(ctx, opts, dvcq::tool_support::IBV_WC_STANDARD_FLAGS, None)
        } else {
            ctx.create_cq(opts)
        };
        match made {
            Ok(mut cq) => {
                // The floor reads rxe's ring through the views, which only rxe's backend has.
                if how == How::Floor && cq.views().is_none() {
                    continue;
                }
                let lp = make_loop(ctx, &cq, p)?;
                pollers.push((name.to_string(), cq, how, lp));
            }
            // A model has no rdma-core poll: its row is the direct one only.
            Err(Error::Mismatch { .. }) if choice == BackendChoice::Generic => {}
            // A provider without the extended CQ (EOPNOTSUPP): no cq_ex row.
            Err(Error::Verbs { .. }) if how == How::VerbsEx => {}
            Err(e) => return Err(e),
        }
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); pollers.len()];
    let mut settle = FIRST_SETTLE;
    for _ in 0..p.reps {
        for (i, (_, cq, how, lp)) in pollers.iter_mut().enumerate() {
            samples[i].push(settled_rep(cq, *how, lp, p, &mut settle)?);
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
                // Each fill posts `completions` WRITEs on QPs with one-deep receive queues.
                cq: cq.advice(Some(u64::from(p.completions) + u64::from(p.qps.max(1)))),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A fill gives every QP its share, shuffled: no QP is left out or given more than one
    /// above another, and consecutive WRITEs mostly change QP.
    #[test]
    fn a_fill_spreads_its_writes_evenly_and_shuffled() {
        let order = fill_order(4096, 256);
        let mut per = vec![0u32; 256];
        for &k in &order {
            per[k as usize] += 1;
        }
        assert!(per.iter().all(|&c| c == 16), "{per:?}");
        let same = order.windows(2).filter(|w| w[0] == w[1]).count();
        assert!(same < 64, "{same} consecutive pairs on one QP");
        assert_eq!(fill_order(10, 1), vec![0; 10]);
        let order = fill_order(10, 4);
        let mut per = [0; 4];
        order.iter().for_each(|&k| per[k as usize] += 1);
        assert_eq!(per, [3, 3, 2, 2]);
    }

    /// On a model, a drain over many QPs polls every completion of every fill.
    #[test]
    fn a_drain_over_many_qps_takes_every_completion() {
        let ctx = Context::open("model-mlx5").unwrap();
        let rows = run(&ctx, &DrainParams { completions: 512, batch: 16, reps: 2, qps: 64 }).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].completions, 512);
        assert!(rows[0].ns_per_completion > 0.0);
    }
}
