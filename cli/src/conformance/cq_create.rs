//! Checks of making CQs, after rdma-core's `tests/test_cq.py` (`test_create_cq`,
//! `test_create_cq_with_comp_channel`, `test_create_cq_bad_flow`; `test_resize_cq` is
//! `cq_resize`): no traffic, each thing that goes wrong one problem line.

use super::limits::max_cqe;
use super::{Outcome, Recorder};
use crate::cq::{BackendChoice, CqOptions};
use crate::{Completion, Context};
use dvcq::Error;

/// Sizes `test_create_cq` makes: 1, half the device's maximum, the maximum.
fn sizes(max: u32) -> [u32; 3] {
    [1, (max / 2).max(1), max]
}

/// Checks a CQ just made for `depth` on `vector`: the depth it got, and that it polls empty.
fn check_new(rec: &mut Recorder, made: Result<crate::Cq, Error>, depth: u32, what: &str) {
    match made {
        Ok(mut cq) => {
            if cq.depth() < depth {
                rec.problem(format!("{what}: the CQ holds {} entries, fewer than the {depth} asked for", cq.depth()));
            }
            let mut wc = [Completion::default()];
            if cq.poll_count(&mut wc) != 0 {
                rec.problem(format!("{what}: a new CQ polled a completion: {:?}", wc[0]));
            }
        }
        Err(e) => rec.problem(format!("{what}: {e}")),
    }
}

/// CQs of 1, max/2 and max entries on the first two completion vectors, and one on the last
/// vector (`test_create_cq`). Each is dropped before the next is made.
pub(super) fn cq_create_sizes(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let max = max_cqe(ctx)?;
    let vectors = ctx.comp_vectors();
    let mut rec = Recorder::default();
    for depth in sizes(max) {
        for v in 0..vectors.min(2) {
            let made = ctx.create_cq(CqOptions::new(depth).comp_vector(v).backend(choice));
            check_new(&mut rec, made, depth, &format!("a CQ of {depth} on vector {v}"));
        }
    }
    // `comp_vectors` is at least 1, and `max` too.
    let last = vectors.saturating_sub(1);
    let depth = vectors.clamp(1, max);
    let made = ctx.create_cq(CqOptions::new(depth).comp_vector(last).backend(choice));
    check_new(&mut rec, made, depth, &format!("a CQ of {depth} on the last vector ({last})"));
    let [a, b, c] = sizes(max);
    let summary = format!("CQs of {a}, {b} and {c} entries made on {} vector(s), and on vector {last}", vectors.min(2));
    Ok(Outcome::checked(rec, summary))
}

/// CQs of 1, max/2 and max entries whose events go to a completion channel
/// (`test_create_cq_with_comp_channel`).
pub(super) fn cq_create_channel(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let max = max_cqe(ctx)?;
    let channel = ctx.create_channel()?;
    let mut rec = Recorder::default();
    for depth in sizes(max) {
        let made = ctx.create_cq_on(&channel, CqOptions::new(depth).backend(choice));
        check_new(&mut rec, made, depth, &format!("a CQ of {depth} on a channel"));
    }
    let [a, b, c] = sizes(max);
    let summary = format!("CQs of {a}, {b} and {c} entries made on a completion channel");
    Ok(Outcome::checked(rec, summary))
}

/// CQs the device must refuse (`test_create_cq_bad_flow`): 0 entries, one more than the
/// maximum, a completion vector past the last. dvcq refuses each before calling rdma-core;
/// on a real device rdma-core's (the provider's and the kernel's) own refusal is checked as
/// well, by calling `ibv_create_cq` with the same values.
pub(super) fn cq_create_bad(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let max = max_cqe(ctx)?;
    let vectors = ctx.comp_vectors();
    let mut rec = Recorder::default();
    let cases = [
        ("0 entries", CqOptions::new(0), false),
        ("max_cqe + 1 entries", CqOptions::new(max.saturating_add(1)), true),
        ("vector num_comp_vectors", CqOptions::new(100.min(max)).comp_vector(vectors), false),
        ("vector num_comp_vectors + 1", CqOptions::new(100.min(max)).comp_vector(vectors.saturating_add(1)), true),
    ];
    for (what, opts, ask_rdma_core) in cases {
        let right = match ctx.create_cq(opts.backend(choice)) {
            Ok(cq) => {
                rec.problem(format!("a CQ of {what} was made (depth {})", cq.depth()));
                continue;
            }
            Err(e) => e,
        };
        let kind_ok = match right {
            Error::CqDepth { .. } => opts.depth == 0 || opts.depth > max,
            Error::CompVector { .. } => opts.comp_vector >= vectors,
            _ => false,
        };
        if !kind_ok {
            rec.problem(format!("a CQ of {what} was refused for another reason: {right}"));
        }
        // rdma-core's test expects EINVAL from the device for these two.
        if ask_rdma_core {
            if let Some(Ok(())) = dvcq::tool_support::verbs_create_cq_unchecked(ctx, opts.depth, opts.comp_vector) {
                rec.problem(format!("rdma-core made a CQ of {what} (ibv_create_cq did not refuse it)"));
            }
        }
    }
    let by = if ctx.is_model() { "the model" } else { "dvcq and by rdma-core's ibv_create_cq" };
    let summary = format!(
        "CQs of 0 and {} entries and on vectors {vectors} and {} refused by {by}",
        max.saturating_add(1),
        vectors.saturating_add(1)
    );
    Ok(Outcome::checked(rec, summary))
}
