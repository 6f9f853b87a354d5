//! Checks of the verbs beyond SEND, WRITE and READ: `atomic_cas_fa` (fetch-and-add and
//! compare-and-swap run at the responder and return the value they found) and
//! `rnr_retry_exceeded` (a SEND with no receive posted ends in `IBV_WC_RNR_RETRY_EXC_ERR`
//! once its RNR retries are spent, and the QP flushes what follows).

use super::workloads::{check_data, failed, ok, outcome, MR_BYTES};
use super::{drain_extra, poll_n, Outcome, Recorder, WAIT};
use crate::cq::{BackendChoice, Cq, CqOptions};
use crate::verbs::{Access, QpAttrs, QpCaps, QpType, SendOp, SendWr};
use crate::{Context, Mr, Pd, Qp, QpInit, WcOpcode, WcStatus};
use dvcq::Error;
use std::time::Duration;

const CAPS: QpCaps = QpCaps { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };

/// Two RC QPs on `cq`, connected to each other with `attrs`, and their PD.
fn pair(ctx: &Context, cq: &Cq, attrs: &QpAttrs, rec: &mut Recorder) -> Result<(Pd, Qp, Qp), Error> {
    let pd = ctx.alloc_pd()?;
    let init = QpInit { caps: CAPS, ..QpInit::new(QpType::Rc, cq) };
    let mut a = pd.create_qp(&init)?;
    let mut b = pd.create_qp(&init)?;
    rec.add_qp(&a);
    rec.add_qp(&b);
    let (ea, eb) = (a.endpoint()?, b.endpoint()?);
    a.connect_with(&eb, attrs)?;
    b.connect_with(&ea, attrs)?;
    Ok((pd, a, b))
}

/// A 64-bit value's bytes in one byte order.
type ByteOrder = fn(u64) -> [u8; 8];

/// The byte order the device keeps an atomic's operand in, from what a fetch-and-add of
/// `x` to zero left: ConnectX big-endian, rxe host order.
fn order_of(target: &Mr, at: u64, x: u64) -> Result<Option<ByteOrder>, Error> {
    let mut b = [0u8; 8];
    target.read(at, &mut b)?;
    Ok(if b == x.to_be_bytes() {
        Some(u64::to_be_bytes)
    } else if b == x.to_le_bytes() {
        Some(u64::to_le_bytes)
    } else {
        None
    })
}

/// Fetch-and-add of X to a zeroed 8 bytes, then a compare-and-swap of X for Y that
/// matches and one of X for Z that does not: completions `IBV_WC_FETCH_ADD` and
/// `IBV_WC_COMP_SWAP`, the local lists get 0, X and Y, the remote ends as Y (in the
/// device's byte order, found from the first result). Skips on a device without atomics.
pub(super) fn atomic_cas_fa(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    if let Err(why) = dvcq::tool_support::atomics(ctx) {
        return Ok(Outcome::skip(why));
    }
    const X: u64 = 0x0102_0304_0506_0708;
    const Y: u64 = 0x1112_1314_1516_1718;
    const Z: u64 = 0x2122_2324_2526_2728;
    let mut cq = ctx.create_cq(CqOptions::new(16).backend(choice))?;
    let mut rec = Recorder::default();
    let (pd, mut a, _b) = pair(ctx, &cq, &QpAttrs::default(), &mut rec)?;
    let local = pd.reg_mr(MR_BYTES, Access::ALL)?;
    let target = pd.reg_mr(MR_BYTES, Access::ALL | Access::REMOTE_ATOMIC)?;
    local.write(0, &[0xee; 24])?;
    target.write(64, &[0; 8])?;
    let at = target.remote().at(64);
    let ops = [
        SendOp::FetchAdd { remote: at, add: X },
        SendOp::CompareSwap { remote: at, compare: X, swap: Y },
        SendOp::CompareSwap { remote: at, compare: X, swap: Z },
    ];
    let mut expected = Vec::new();
    let mut order = None;
    for (i, op) in ops.into_iter().enumerate() {
        let sg = [local.slice(i as u64 * 8, 8)?];
        a.post_send(&[SendWr::new(i as u64 + 1, op, &sg)])?;
        poll_n(&mut cq, &mut rec, 1);
        let opcode = if i == 0 { WcOpcode::FetchAdd } else { WcOpcode::CompSwap };
        expected.push(ok(0, i as u64 + 1, opcode));
        if i == 0 {
            order = order_of(&target, 64, X)?;
        }
    }
    let bytes = match order {
        Some(b) => b,
        None => {
            rec.problem("fetch-and-add of X to 0 left neither X big-endian nor X little-endian in memory");
            u64::to_be_bytes
        }
    };
    check_data(&mut rec, "fetch-and-add's result", &local, 0, &[0; 8]);
    check_data(&mut rec, "compare-and-swap's result", &local, 8, &bytes(X));
    check_data(&mut rec, "the missed compare-and-swap's result", &local, 16, &bytes(Y));
    check_data(&mut rec, "the remote value", &target, 64, &bytes(Y));
    drain_extra(&mut cq, &mut rec, Duration::from_millis(20));
    let mut o = outcome(vec![(cq, u64::from(CAPS.max_send_wr + CAPS.max_recv_wr) * 2)], rec, expected);
    let big = order.is_some_and(|b| b(1) == 1u64.to_be_bytes());
    o.summary = Some(format!("operands kept {} in memory", if big { "big-endian" } else { "little-endian" }));
    Ok(o)
}

/// A SEND to a peer with no receive posted, from a QP connected with `rnr_retry` 1 and the
/// shortest RNR timer (0.01 ms): `IBV_WC_RNR_RETRY_EXC_ERR`, then the next SEND flushes.
/// libirdma before rdma-core v64 has no status for the E810's RNR flush code (11): it
/// reports `IBV_WC_FATAL_ERR`, and so must dvcq's poller of that release.
pub(super) fn rnr_retry_exceeded(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let irdma = ctx.info().is_ok_and(|i| i.provider == "irdma");
    let old_irdma = irdma && dvcq::device::rdma_core_release().is_some_and(|r| r.major < 64);
    let rnr = if old_irdma { WcStatus::FatalErr } else { WcStatus::RnrRetryExcErr };
    let mut cq = ctx.create_cq(CqOptions::new(16).backend(choice))?;
    let mut rec = Recorder::default();
    let attrs = QpAttrs { rnr_retry: 1, min_rnr_timer: 1, ..QpAttrs::default() };
    let (pd, mut a, _b) = pair(ctx, &cq, &attrs, &mut rec)?;
    let mr = pd.reg_mr(MR_BYTES, Access::ALL)?;
    let sg = [mr.slice(0, 64)?];
    a.post_send(&[SendWr::new(1, SendOp::Send, &sg)])?;
    if poll_n(&mut cq, &mut rec, 1) == 0 {
        rec.problem(format!("the SEND with no receive did not complete within {WAIT:?}"));
    }
    a.post_send(&[SendWr::new(2, SendOp::Send, &sg)])?;
    poll_n(&mut cq, &mut rec, 1);
    drain_extra(&mut cq, &mut rec, Duration::from_millis(20));
    let expected = vec![failed(0, 1, rnr), failed(0, 2, WcStatus::WrFlushErr)];
    Ok(outcome(vec![(cq, u64::from(CAPS.max_send_wr + CAPS.max_recv_wr) * 2)], rec, expected))
}
