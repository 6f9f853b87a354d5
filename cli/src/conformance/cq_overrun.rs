//! `cq_overrun`: a CQ given more completions than it holds, as an application that stops
//! polling does. The device reports the overrun (rdma-core devices with `IBV_EVENT_CQ_ERR`
//! on the context's async fd, one event per completion lost on rxe; the models once, on an
//! async fd they emulate), [`crate::Cq::stats`] counts it, the poll returns one CQ error item
//! after the completions that landed before it, which come back once, in order, and
//! [`crate::Cq::wait`] then returns the error rather than sleeping on a CQ that no longer
//! gets completions.

use super::workloads::{caps, ok, outcome, rig};
use super::{Outcome, Record, WAIT};
use crate::cq::{BackendChoice, CqOptions};
use crate::verbs::{QpType, SendOp, SendWr};
use crate::{Completion, Context, CqErrorReason, WcOpcode};
use dvcq::Error;
use std::time::{Duration, Instant};

/// The depth asked for.
const DEPTH: u32 = 8;
/// Completions posted past four times the depth: past what any ring holds (irdma's ring
/// of a CQ of `n` has `2n + 2` slots on GEN2, one kept free; mlx5's one more than `n`).
const EXTRA: u64 = 8;
/// The deepest CQ made for [`DEPTH`] entries the check fills (providers round up: mlx5 to
/// a power of two less one, irdma to twice and two more).
const MOST: u32 = 1024;
/// How long the device gets, once it has reported the overrun, to finish the rest of the
/// posted work (rxe's kernel threads in an emulated VM are the slowest).
const SETTLE: Duration = Duration::from_millis(100);

/// Posts `4 × depth + EXTRA` signaled RDMA WRITEs from QP 0 to QP 1 on a CQ of `DEPTH`
/// made on a channel, without polling; waits until `Cq::stats` counts an overrun, then
/// takes the completions through `Cq::wait` until it returns [`Error::CqInError`] for an
/// overrun. What arrived must be the first writes in order, exactly as many as the ring
/// holds on the models (at least the CQ's depth and fewer than were posted on a device),
/// followed by one CQ error item that counts them; the error then stays.
pub(super) fn cq_overrun(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let channel = ctx.create_channel()?;
    let mut cq = ctx.create_cq_on(&channel, CqOptions::new(DEPTH).backend(choice))?;
    // The check posts four times what the CQ holds: a depth far past the one asked for
    // (what rdma-core read back from the device) is refused, not posted.
    let depth = u64::from(super::limits::cq_depth(ctx, &cq, DEPTH, MOST)?);
    let posted = 4 * depth + EXTRA;
    let c = caps(posted as u32, 1);
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, c, 2)?;
    let remote = r.mrs[1].remote();
    for i in 0..posted {
        let sg = [r.mrs[0].slice(i * 8, 8)?];
        r.qps[0].post_send(&[SendWr::new(i, SendOp::Write(remote.at(i * 8)), &sg)])?;
    }
    let start = Instant::now();
    let seen = loop {
        match cq.stats().overruns {
            Some(n) if n > 0 => break Some(n),
            None => break None,
            Some(_) if start.elapsed() > WAIT => break Some(0),
            Some(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    };
    match seen {
        None => {
            return Ok(Outcome::skip(format!(
                "{} does not report a CQ's overruns to dvcq (an application's context)",
                ctx.name()
            )))
        }
        Some(0) => {
            r.rec.problem(format!("no overrun reported within {WAIT:?} of {posted} completions on a CQ of {depth}"))
        }
        Some(_) => std::thread::sleep(SETTLE),
    }
    let mut out = [Completion::default(); 16];
    let mut error = None;
    // The CQ error item: when it came (completions recorded before it) and what it said.
    let mut items = Vec::new();
    let until = Instant::now() + WAIT;
    while error.is_none() && Instant::now() < until {
        match cq.wait(&mut out, Some(WAIT)) {
            Ok([]) => {
                r.rec.problem(format!("Cq::wait returned nothing within {WAIT:?} on a CQ that overran"));
                break;
            }
            Ok(polled) => {
                for w in polled {
                    match w.cq_error() {
                        Some(reason) => items.push((r.rec.len(), reason, w.wr_id)),
                        None => r.rec.record(w),
                    }
                }
            }
            Err(e) => error = Some(e),
        }
    }
    match &error {
        Some(Error::CqInError { reason: CqErrorReason::Overrun, cq: id, .. }) if *id == cq.id() => {}
        Some(e) => r.rec.problem(format!("Cq::wait on the overrun CQ: {e}, not the overrun error")),
        None => r.rec.problem("Cq::wait never returned the overrun error"),
    }
    // The poll said so too, once, with the reason and the count of completions before it.
    match items[..] {
        [(before, CqErrorReason::Overrun, said)] if said == before as u64 => {}
        _ => r.rec.problem(format!(
            "polls returned {} CQ error item(s) (completions before, reason, count said): {items:?}; expected one \
             overrun item",
            items.len()
        )),
    }
    // Once the error came, the CQ stays in error for the waiter and for the handle.
    if error.is_some() && cq.wait(&mut out, Some(Duration::from_millis(10))).is_ok() {
        r.rec.problem("a second Cq::wait after the overrun error did not return it again");
    }
    if !matches!(cq.error(), Some(Error::CqInError { reason: CqErrorReason::Overrun, .. })) {
        r.rec.problem(format!("Cq::error after the overrun: {:?}", cq.error()));
    }
    let landed = r.rec.len() as u64;
    // What lands is what the ring holds, exactly, where dvcq knows the ring (the models:
    // mlx5 fills its 2^k slots, irdma GEN2 all of its 2 (n + 1) slots but one); on a
    // device, at least the depth and fewer than were posted.
    let holds = match ctx.name() {
        "model-mlx5" => Some(depth + 1),
        "model-e810" => Some(2 * (depth + 1) - 1),
        _ => None,
    };
    match holds {
        Some(h) if landed != h => r.rec.problem(format!("{landed} completions of {posted} arrived on a ring of {h}")),
        None if landed < depth || landed >= posted => {
            r.rec.problem(format!("{landed} completions of {posted} arrived on a CQ of {depth}"))
        }
        _ => {}
    }
    let overruns = cq.stats().overruns.unwrap_or(0);
    let expected: Vec<Record> = (0..landed.min(posted)).map(|i| ok(0, i, WcOpcode::RdmaWrite)).collect();
    let mut o = outcome(vec![(cq, u64::from(c.max_send_wr))], r.rec, expected);
    o.summary = Some(format!(
        "{posted} writes on a CQ of {depth}: {landed} completions in order, the CQ error item, then Cq::wait's \
         overrun error; {overruns} overrun(s) counted"
    ));
    Ok(o)
}
