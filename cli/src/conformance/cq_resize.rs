//! `cq_resize`, after rdma-core's `tests/test_cq.py` `test_resize_cq`: a CQ grown and shrunk
//! while completions wait in it, a shrink below the completions waiting, and traffic after,
//! every completion returned once and in order.

use super::workloads::{caps, ok, one_cq, outcome, post_recvs, recv, rig, Rig};
use super::{drain_extra, poll_n, Outcome, Record};
use crate::cq::{BackendChoice, Cq};
use crate::verbs::{QpType, SendOp, SendWr};
use crate::{Context, WcOpcode};
use dvcq::Error;
use std::time::Duration;

/// The depth the CQ starts at.
const FIRST: u32 = 16;
/// Depths asked for while completions wait: grown, then shrunk to still hold them.
const GROWN: u32 = 64;
const SHRUNK: u32 = 32;
/// A depth below what waits when it is asked for.
const TOO_SMALL: u32 = 4;

/// Sends `n` messages from QP 0 to QP 1 (a receive posted for each) without polling;
/// `next` numbers them.
fn send(r: &mut Rig, expected: &mut Vec<Record>, next: &mut u64, n: u64) -> Result<(), Error> {
    for _ in 0..n {
        let i = *next;
        *next += 1;
        post_recvs(&mut r.qps[1], &r.mrs[1], 20_000 + i, 1, 64)?;
        let sg = [r.mrs[0].slice(i % 64, 8)?];
        r.qps[0].post_send(&[SendWr::new(i, SendOp::Send, &sg)])?;
        expected.push(ok(0, i, WcOpcode::Send));
        expected.push(recv(1, 20_000 + i, 8));
    }
    Ok(())
}

/// Lets the completions of what was just posted land in the CQ before a resize, so that
/// the resize has completions waiting to carry over: a model writes them during the post,
/// rxe's kernel threads shortly after (generous: the VM emulates its CPU).
fn settle() {
    std::thread::sleep(Duration::from_millis(50));
}

/// Resizes `cq` to `depth`, noting a refusal or a depth below it as a problem; `Err` with
/// the reason when the device cannot resize this CQ at all (the check is then skipped).
fn resize(cq: &mut Cq, depth: u32, r: &mut Rig, what: &str) -> Result<(), String> {
    match cq.resize(depth) {
        Ok(got) if got < depth || got != cq.depth() => {
            r.rec.problem(format!("{what}: resized to {depth}, the CQ reports {got} (depth() {})", cq.depth()));
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(Error::Unsupported { why, .. }) => Err(why),
        Err(e @ Error::Verbs { .. }) if e.to_string().contains("not supported") => Err(e.to_string()),
        Err(e) => {
            r.rec.problem(format!("{what}: resize to {depth} failed: {e}"));
            Ok(())
        }
    }
}

/// `test_resize_cq` and more: a CQ of 16 with 12 completions written, 4 of them polled, grown
/// to 64; 16 more written, 10 polled, shrunk to 32 with 18 waiting; shrunk to 4 with 18
/// waiting (the device may refuse: rxe and mlx5 do, as rdma-core's test allows; an irdma
/// device keeps the old ring until it is polled); then all polled, a resize to the same
/// depth, resizes to 0 and past the device's maximum refused, and 100 round trips through
/// the CQ as it is. Every completion comes back once, in order per QP.
pub(super) fn cq_resize(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let mut cq = one_cq(ctx, choice, FIRST)?;
    let c = caps(32, 32);
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, c, 2)?;
    let mut expected = Vec::new();
    let mut next = 0u64;
    let mut steps = Vec::new();

    send(&mut r, &mut expected, &mut next, 6)?;
    settle();
    poll_n(&mut cq, &mut r.rec, 4);
    if let Err(why) = resize(&mut cq, GROWN, &mut r, "grow with 8 waiting") {
        return Ok(Outcome::skip(format!("the CQ cannot be resized: {why}")));
    }
    steps.push(format!("{FIRST}\u{2192}{} with 8 waiting", cq.depth()));

    send(&mut r, &mut expected, &mut next, 8)?;
    settle();
    poll_n(&mut cq, &mut r.rec, 6);
    let _ = resize(&mut cq, SHRUNK, &mut r, "shrink with 18 waiting");
    steps.push(format!("\u{2192}{} with 18 waiting", cq.depth()));

    let before = cq.depth();
    let small = match cq.resize(TOO_SMALL) {
        Ok(got) if got >= TOO_SMALL => format!("\u{2192}{got} with 18 waiting (the device keeps the old ring)"),
        Ok(got) => {
            r.rec.problem(format!("shrink to {TOO_SMALL} with 18 waiting: the CQ reports {got}"));
            String::new()
        }
        Err(_) if cq.depth() != before => {
            r.rec.problem(format!("a refused resize changed the depth from {before} to {}", cq.depth()));
            String::new()
        }
        Err(_) => format!("to {TOO_SMALL} with 18 waiting refused"),
    };
    steps.push(small);
    poll_n(&mut cq, &mut r.rec, 18);

    // A resize to the depth the CQ has changes nothing; impossible depths are refused.
    let same = cq.depth();
    let _ = resize(&mut cq, same, &mut r, "resize to the same depth");
    if cq.depth() != same {
        r.rec.problem(format!("a resize to the depth the CQ has ({same}) changed it to {}", cq.depth()));
    }
    for bad in [0, super::limits::max_cqe(ctx)?.saturating_add(1)] {
        if !matches!(cq.resize(bad), Err(Error::CqDepth { .. })) {
            r.rec.problem(format!("a resize to {bad} entries was not refused as a bad depth"));
        }
    }

    // Traffic after: round trips through the CQ as it is now, wrapping its ring.
    for _ in 0..100 {
        send(&mut r, &mut expected, &mut next, 1)?;
        poll_n(&mut cq, &mut r.rec, 2);
    }
    drain_extra(&mut cq, &mut r.rec, Duration::from_millis(20));
    let summary = format!(
        "resized {}; 0 and max+1 refused; {} completions in order through it",
        steps.join(", "),
        expected.len()
    );
    let mut o = outcome(vec![(cq, 2 * u64::from(c.max_send_wr + c.max_recv_wr))], r.rec, expected);
    o.summary = Some(summary);
    Ok(o)
}
