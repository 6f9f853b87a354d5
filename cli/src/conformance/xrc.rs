//! `xrc_traffic`, after rdma-core's `tests/test_cqex.py` XRC traffic (`tests/base.py`
//! `XRCResources`): an XRC initiator QP connected to a target QP made on an XRC domain, two
//! XRC SRQs of that domain completing on the CQ the initiator's sends complete on, and
//! SENDs from the initiator to each SRQ in turn, with and without immediate data. Skipped,
//! saying why, where the device has no XRC.

use super::workloads::{check_data, ok, one_cq, outcome, pattern, recv, wire_imm, MR_BYTES};
use super::{drain_extra, poll_n, Outcome, Recorder};
use crate::cq::BackendChoice;
use crate::verbs::{Access, QpCaps, QpType, RecvWr, SendOp, SendWr};
use crate::{Context, QpInit, WcFlags, WcOpcode};
use dvcq::Error;
use std::time::Duration;

/// Sends per SRQ.
const PER_SRQ: u64 = 4;
/// Bytes per send.
const LEN: u32 = 48;

/// Why `ctx` has no XRC, if it has none.
fn no_xrc(ctx: &Context) -> Option<String> {
    let name = ctx.name();
    if ctx.is_model() {
        return (!name.contains("mlx5")).then(|| format!("{name} has no XRC: irdma devices have no XRC QPs"));
    }
    let provider = ctx.info().map(|i| i.provider).unwrap_or_default();
    match dvcq::tool_support::xrc_and_max_mw(ctx).map(|(xrc, _)| xrc) {
        _ if provider == "irdma" => Some(format!("{name} has no XRC: irdma devices have no XRC QPs")),
        Some(false) | None => Some(format!("{name} has no XRC: IBV_DEVICE_XRC is not in its device_cap_flags")),
        Some(true) => None,
    }
}

/// XRC SENDs into two SRQs behind one target: every completion as expected (the receives
/// on the SRQs' CQ naming the target QP, the sends on the initiator's), the data in place.
pub(super) fn xrc_traffic(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    if let Some(why) = no_xrc(ctx) {
        return Ok(Outcome::skip(why));
    }
    let mut cq = one_cq(ctx, choice, 64)?;
    let pd = ctx.alloc_pd()?;
    let xrcd = ctx.open_xrcd()?;
    let mut srqs = Vec::new();
    for _ in 0..2 {
        match pd.create_xrc_srq(&xrcd, &cq, 16, 1) {
            Ok(s) => srqs.push(s),
            // A direct CQ that cannot adopt an XRC SRQ (a context whose CQEs name it only
            // through its target) says why; the ibv_poll_cq run still covers the check.
            Err(Error::Attach { reason, backend, .. }) => {
                return Ok(Outcome::skip(format!(
                    "the direct {backend} CQ cannot adopt an XRC SRQ ({reason}); the ibv_poll_cq run covers XRC"
                )))
            }
            Err(e) => return Err(e),
        }
    }
    let srqns: Vec<u32> = srqs.iter().map(|s| s.xrc_srqn().unwrap_or(0)).collect();
    let caps = QpCaps { max_send_wr: 16, max_recv_wr: 0, max_send_sge: 1, max_recv_sge: 0, max_inline_data: 0 };
    let init = QpInit { qp_type: QpType::XrcSend, send_cq: &cq, recv_cq: &cq, srq: None, caps, sq_sig_all: false };
    let mut initiator = pd.create_qp(&init)?;
    let mut target = xrcd.create_target_qp()?;
    let mut rec = Recorder::default();
    rec.add_qp(&initiator);
    rec.add_qp(&target);
    initiator.connect(&target.endpoint()?)?;
    target.connect(&initiator.endpoint()?)?;
    let mr = pd.reg_mr(MR_BYTES, Access::ALL)?;
    // Receives: SRQ k's i-th at 4096 + k * 2048 + i * 64, wr_id 100 * (k + 1) + i.
    let at = |k: usize, i: u64| 4096 + k as u64 * 2048 + i * 64;
    for (k, srq) in srqs.iter().enumerate() {
        for i in 0..PER_SRQ {
            let sg = [mr.slice(at(k, i), 64)?];
            srq.post_recv(&[RecvWr { wr_id: 100 * (k as u64 + 1) + i, sg_list: &sg }])?;
        }
    }
    let mut expected = Vec::new();
    for n in 0..2 * PER_SRQ {
        let (k, i) = ((n % 2) as usize, n / 2);
        mr.write(n * 64, &pattern(70 + n, LEN as usize))?;
        let sg = [mr.slice(n * 64, LEN)?];
        let imm = 0x5a00 + n as u32;
        let op = if i % 2 == 1 { SendOp::SendWithImm(imm) } else { SendOp::Send };
        initiator.post_send(&[SendWr::new(n, op, &sg).to_srq(srqns[k])])?;
        expected.push(ok(0, n, WcOpcode::Send));
        let mut rv = recv(1, 100 * (k as u64 + 1) + i, LEN);
        if i % 2 == 1 {
            rv.imm = Some(wire_imm(imm));
            rv.flags = WcFlags::WITH_IMM.bits();
        }
        expected.push(rv);
    }
    poll_n(&mut cq, &mut rec, expected.len());
    for n in 0..2 * PER_SRQ {
        let (k, i) = ((n % 2) as usize, n / 2);
        check_data(&mut rec, "xrc srq receive", &mr, at(k, i), &pattern(70 + n, LEN as usize));
    }
    drain_extra(&mut cq, &mut rec, Duration::from_millis(20));
    // The initiator's send queue and the two SRQs complete here.
    Ok(outcome(vec![(cq, 16 + 2 * 16)], rec, expected))
}
