//! The workloads themselves. Each makes its own CQs and QPs, moves data, checks that the
//! data landed, and says which completions it expects.

use super::{drain_extra, poll_n, Outcome, Record, Recorder, UsedCq, Workload};
use crate::cq::{BackendChoice, Cq, CqOptions};
use crate::verbs::{Access, MrSlice, QpCaps, QpType, RecvWr, SendOp, SendWr, UdDest, DEFAULT_QKEY, UD_GRH_BYTES};
use crate::{Context, Mr, Pd, Qp, QpInit, WcFlags, WcOpcode, WcStatus};
use dvcq::Error;
use std::time::Duration;

/// Every workload, in the order tables print them.
pub static WORKLOADS: &[Workload] = &[
    Workload { name: "rc_send", run: rc_send },
    Workload { name: "rc_send_imm", run: rc_send_imm },
    Workload { name: "rc_write", run: rc_write },
    Workload { name: "rc_write_imm", run: rc_write_imm },
    Workload { name: "rc_read", run: rc_read },
    Workload { name: "ud_send", run: ud_send },
    Workload { name: "rc_unsignaled", run: rc_unsignaled },
    Workload { name: "rc_srq", run: rc_srq },
    Workload { name: "rc_bad_rkey", run: rc_bad_rkey },
    Workload { name: "rc_flush", run: rc_flush },
    Workload { name: "cq_depth_1", run: |c, b| cq_depth(c, b, Depth::Fixed(1)) },
    Workload { name: "cq_depth_2", run: |c, b| cq_depth(c, b, Depth::Fixed(2)) },
    Workload { name: "cq_depth_255", run: |c, b| cq_depth(c, b, Depth::Fixed(255)) },
    Workload { name: "cq_depth_max", run: |c, b| cq_depth(c, b, Depth::DeviceMax) },
    Workload { name: "cq_wrap", run: cq_wrap },
    Workload { name: "cq_create_sizes", run: super::cq_create::cq_create_sizes },
    Workload { name: "cq_create_channel", run: super::cq_create::cq_create_channel },
    Workload { name: "cq_create_bad", run: super::cq_create::cq_create_bad },
    Workload { name: "cq_resize", run: super::cq_resize::cq_resize },
    Workload { name: "cq_overrun", run: super::cq_overrun::cq_overrun },
    Workload { name: "cq_wrap_sizes", run: cq_wrap_sizes },
    Workload { name: "rc_many_qps", run: rc_many_qps },
    Workload { name: "ud_send_imm", run: ud_send_imm },
    Workload { name: "rc_send_inv", run: rc_send_inv },
    Workload { name: "rc_events", run: super::events::rc_events },
    Workload { name: "ud_events", run: super::events::ud_events },
    Workload { name: "mlx5_cqe_128", run: super::mlx5_dv::mlx5_cqe_128 },
    Workload { name: "mlx5_cqe_pad", run: super::mlx5_dv::mlx5_cqe_pad },
    Workload { name: "mlx5_cqe_size_bad", run: super::mlx5_dv::mlx5_cqe_size_bad },
    Workload { name: "mlx5_compression", run: super::mlx5_dv::mlx5_compression },
    Workload { name: "mlx5_read_inline_128", run: super::mlx5_dv::mlx5_read_inline_128 },
    Workload { name: "cq_timestamps", run: super::timestamps::cq_timestamps },
    Workload { name: "cq_ex_fields", run: super::cq_ex::cq_ex_fields },
    Workload { name: "xrc_traffic", run: super::xrc::xrc_traffic },
    Workload { name: "atomic_cas_fa", run: super::verbs_ext::atomic_cas_fa },
    Workload { name: "rnr_retry_exceeded", run: super::verbs_ext::rnr_retry_exceeded },
];

/// Bytes of each memory region a workload uses.
pub(super) const MR_BYTES: usize = 64 * 1024;

pub(super) fn ok(qp: u8, wr_id: u64, opcode: WcOpcode) -> Record {
    Record {
        qp,
        wr_id,
        status: WcStatus::Success,
        opcode: Some(opcode),
        byte_len: None,
        imm: None,
        flags: 0,
        src: None,
    }
}

pub(super) fn recv(qp: u8, wr_id: u64, byte_len: u32) -> Record {
    Record { byte_len: Some(byte_len), ..ok(qp, wr_id, WcOpcode::Recv) }
}

pub(super) fn failed(qp: u8, wr_id: u64, status: WcStatus) -> Record {
    Record { qp, wr_id, status, opcode: None, byte_len: None, imm: None, flags: 0, src: None }
}

/// The immediate as `ibv_wc.imm_data` holds it (network order read as a host integer).
pub(super) fn wire_imm(imm: u32) -> u32 {
    imm.to_be()
}

/// A byte pattern that differs per workload offset, so misplaced data shows.
pub(super) fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seed as usize * 31 + i * 7) as u8).collect()
}

/// Two QPs (roles 0 and 1) with a memory region each, connected to each other (RC) or
/// ready (UD), completing into `cq` (or `send_cq`/`recv_cq`).
pub(super) struct Rig {
    pub(super) qps: Vec<Qp>,
    pub(super) mrs: Vec<Mr>,
    pub(super) rec: Recorder,
    pub(super) pd: Pd,
}

pub(super) fn caps(send: u32, recv: u32) -> QpCaps {
    QpCaps { max_send_wr: send, max_recv_wr: recv, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }
}

pub(super) fn rig(
    ctx: &Context,
    qp_type: QpType,
    send_cq: &Cq,
    recv_cq: &Cq,
    caps: QpCaps,
    n: usize,
) -> Result<Rig, Error> {
    rig_of(ctx, &QpInit { qp_type, send_cq, recv_cq, srq: None, caps, sq_sig_all: false }, n)
}

/// [`rig`] with `n` QPs made as `init` says (`sq_sig_all`, say).
pub(super) fn rig_of(ctx: &Context, init: &QpInit<'_>, n: usize) -> Result<Rig, Error> {
    let pd = ctx.alloc_pd()?;
    let mut qps = Vec::new();
    let mut mrs = Vec::new();
    let mut rec = Recorder::default();
    for _ in 0..n {
        let qp = pd.create_qp(init)?;
        rec.add_qp(&qp);
        qps.push(qp);
        mrs.push(pd.reg_mr(MR_BYTES, Access::ALL)?);
    }
    connect_pairs(&mut qps)?;
    Ok(Rig { qps, mrs, rec, pd })
}

/// Connects QP 2k with 2k+1 (RC; UD needs nothing).
pub(super) fn connect_pairs(qps: &mut [Qp]) -> Result<(), Error> {
    for pair in qps.chunks_mut(2) {
        if let [a, b] = pair {
            let (ea, eb) = (a.endpoint()?, b.endpoint()?);
            a.connect(&eb)?;
            b.connect(&ea)?;
        }
    }
    Ok(())
}

pub(super) fn one_cq(ctx: &Context, choice: BackendChoice, depth: u32) -> Result<Cq, Error> {
    ctx.create_cq(CqOptions::new(depth).backend(choice))
}

/// What a workload gives back: the backend of its (first) CQ, what it recorded and expected,
/// and its CQs with the work requests that could be in flight on each.
pub(super) fn outcome(cqs: Vec<(Cq, u64)>, rec: Recorder, expected: Vec<Record>) -> Outcome {
    let backend = cqs.first().map_or_else(
        || crate::cq::Backend { kind: crate::BackendKind::Generic, reason: String::new() },
        |(c, _)| c.backend().clone(),
    );
    let cqs = cqs.into_iter().map(|(cq, in_flight)| UsedCq { cq, in_flight }).collect();
    Outcome { backend, recorder: rec, expected, skipped: None, cqs, summary: None }
}

/// The work requests that can be in flight on a CQ that `qps` QPs of `caps` complete into
/// both ways.
pub(super) fn both_ways(qps: u64, caps: QpCaps) -> u64 {
    qps * u64::from(caps.max_send_wr + caps.max_recv_wr)
}

/// Checks that `len` bytes at `at` in `mr` equal `want`.
pub(super) fn check_data(rec: &mut Recorder, what: &str, mr: &Mr, at: u64, want: &[u8]) {
    let mut got = vec![0u8; want.len()];
    match mr.read(at, &mut got) {
        Ok(()) if got == want => {}
        Ok(()) => rec.problem(format!("{what}: the data at offset {at} is not what was sent")),
        Err(e) => rec.problem(format!("{what}: {e}")),
    }
}

pub(super) fn post_recvs(qp: &mut Qp, mr: &Mr, first_wr: u64, n: u64, each: u32) -> Result<(), Error> {
    for i in 0..n {
        let sg = [mr.slice(i * u64::from(each), each)?];
        qp.post_recv(&[RecvWr { wr_id: first_wr + i, sg_list: &sg }])?;
    }
    Ok(())
}

/// SEND (with immediate data or not) from QP 0 to QP 1, eight messages of 1 to 8·13 bytes.
fn sends(ctx: &Context, choice: BackendChoice, with_imm: bool) -> Result<Outcome, Error> {
    let mut cq = one_cq(ctx, choice, 64)?;
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, caps(16, 16), 2)?;
    let mut expected = Vec::new();
    post_recvs(&mut r.qps[1], &r.mrs[1], 100, 8, 256)?;
    for i in 0..8u64 {
        let len = 1 + 13 * i as u32;
        let data = pattern(i, len as usize);
        r.mrs[0].write(i * 256, &data)?;
        let sg = [r.mrs[0].slice(i * 256, len)?];
        let imm = 0x0100_0000 + i as u32;
        let op = if with_imm { SendOp::SendWithImm(imm) } else { SendOp::Send };
        r.qps[0].post_send(&[SendWr::new(i, op, &sg)])?;
        expected.push(ok(0, i, WcOpcode::Send));
        let mut rv = recv(1, 100 + i, len);
        if with_imm {
            rv.imm = Some(wire_imm(imm));
            rv.flags = WcFlags::WITH_IMM.bits();
        }
        expected.push(rv);
    }
    poll_n(&mut cq, &mut r.rec, expected.len());
    for i in 0..8u64 {
        let len = 1 + 13 * i as usize;
        check_data(&mut r.rec, "send", &r.mrs[1], i * 256, &pattern(i, len));
    }
    drain_extra(&mut cq, &mut r.rec, Duration::from_millis(20));
    Ok(outcome(vec![(cq, both_ways(2, caps(16, 16)))], r.rec, expected))
}

fn rc_send(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    sends(ctx, choice, false)
}

fn rc_send_imm(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    sends(ctx, choice, true)
}

/// RDMA WRITE (with immediate data or not) from QP 0 into QP 1's region.
fn writes(ctx: &Context, choice: BackendChoice, with_imm: bool) -> Result<Outcome, Error> {
    let mut cq = one_cq(ctx, choice, 64)?;
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, caps(16, 16), 2)?;
    let remote = r.mrs[1].remote();
    let mut expected = Vec::new();
    if with_imm {
        post_recvs(&mut r.qps[1], &r.mrs[1], 200, 4, 0)?;
    }
    for i in 0..4u64 {
        let data = pattern(10 + i, 100);
        r.mrs[0].write(i * 128, &data)?;
        let sg = [r.mrs[0].slice(i * 128, 100)?];
        let imm = 0xabc0 + i as u32;
        let to = remote.at(1024 + i * 128);
        let op = if with_imm { SendOp::WriteWithImm(to, imm) } else { SendOp::Write(to) };
        r.qps[0].post_send(&[SendWr::new(i, op, &sg)])?;
        expected.push(ok(0, i, WcOpcode::RdmaWrite));
        if with_imm {
            let mut rv = recv(1, 200 + i, 100);
            rv.opcode = Some(WcOpcode::RecvRdmaWithImm);
            rv.imm = Some(wire_imm(imm));
            rv.flags = WcFlags::WITH_IMM.bits();
            expected.push(rv);
        }
    }
    poll_n(&mut cq, &mut r.rec, expected.len());
    for i in 0..4u64 {
        check_data(&mut r.rec, "write", &r.mrs[1], 1024 + i * 128, &pattern(10 + i, 100));
    }
    drain_extra(&mut cq, &mut r.rec, Duration::from_millis(20));
    Ok(outcome(vec![(cq, both_ways(2, caps(16, 16)))], r.rec, expected))
}

fn rc_write(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    writes(ctx, choice, false)
}

fn rc_write_imm(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    writes(ctx, choice, true)
}

/// RDMA READ by QP 0 from QP 1's region.
fn rc_read(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let mut cq = one_cq(ctx, choice, 64)?;
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, caps(16, 16), 2)?;
    let remote = r.mrs[1].remote();
    let mut expected = Vec::new();
    for i in 0..4u64 {
        r.mrs[1].write(2048 + i * 256, &pattern(20 + i, 200))?;
        let sg = [r.mrs[0].slice(i * 256, 200)?];
        r.qps[0].post_send(&[SendWr::new(i, SendOp::Read(remote.at(2048 + i * 256)), &sg)])?;
        expected.push(Record { byte_len: Some(200), ..ok(0, i, WcOpcode::RdmaRead) });
    }
    poll_n(&mut cq, &mut r.rec, expected.len());
    for i in 0..4u64 {
        check_data(&mut r.rec, "read", &r.mrs[0], i * 256, &pattern(20 + i, 200));
    }
    drain_extra(&mut cq, &mut r.rec, Duration::from_millis(20));
    Ok(outcome(vec![(cq, both_ways(2, caps(16, 16)))], r.rec, expected))
}

/// UD SEND (with immediate data or not) from QP 0 to QP 1: the receive holds the GRH
/// slot, then the data.
fn ud_sends(ctx: &Context, choice: BackendChoice, with_imm: bool) -> Result<Outcome, Error> {
    let mut cq = one_cq(ctx, choice, 64)?;
    let mut r = rig(ctx, QpType::Ud, &cq, &cq, caps(16, 16), 2)?;
    let dest = UdDest { qpn: r.qps[1].qpn(), qkey: DEFAULT_QKEY, endpoint: r.qps[1].endpoint()? };
    let slot = UD_GRH_BYTES + 64;
    post_recvs(&mut r.qps[1], &r.mrs[1], 300, 4, slot)?;
    let mut expected = Vec::new();
    for i in 0..4u64 {
        let data = pattern(30 + i, 32);
        r.mrs[0].write(i * 64, &data)?;
        let sg = [r.mrs[0].slice(i * 64, 32)?];
        let imm = 0x00ab_0000 + i as u32;
        let op = if with_imm { SendOp::SendWithImm(imm) } else { SendOp::Send };
        r.qps[0].post_send(&[SendWr::new(i, op, &sg).to(dest)])?;
        expected.push(ok(0, i, WcOpcode::Send));
        let mut rv = Record { flags: WcFlags::GRH.bits(), src: Some(0), ..recv(1, 300 + i, 32 + UD_GRH_BYTES) };
        if with_imm {
            rv.imm = Some(wire_imm(imm));
            rv.flags |= WcFlags::WITH_IMM.bits();
        }
        expected.push(rv);
    }
    poll_n(&mut cq, &mut r.rec, expected.len());
    for i in 0..4u64 {
        check_data(
            &mut r.rec,
            "ud send",
            &r.mrs[1],
            i * u64::from(slot) + u64::from(UD_GRH_BYTES),
            &pattern(30 + i, 32),
        );
    }
    drain_extra(&mut cq, &mut r.rec, Duration::from_millis(20));
    Ok(outcome(vec![(cq, both_ways(2, caps(16, 16)))], r.rec, expected))
}

fn ud_send(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    ud_sends(ctx, choice, false)
}

fn ud_send_imm(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    ud_sends(ctx, choice, true)
}

/// SEND_WITH_INV through a type-2 memory window, as rdma-core's tests do it (a receiver
/// invalidates a window or a fast-registration region, never an `ibv_reg_mr` region):
/// QP 1 binds a window over 1 KiB of its region (`IBV_WC_BIND_MW`); QP 0 writes through
/// the window's rkey (the data lands); QP 0 sends SEND_WITH_INV naming it (the receive
/// completes with `IBV_WC_WITH_INV` and that rkey, the send as a SEND); then QP 0 writes
/// through the invalidated rkey: `REM_ACCESS_ERR`, its QP goes to error and a send posted
/// after it is flushed, as in `rc_bad_rkey`.
///
/// On rxe the receive's flag is not `IBV_WC_WITH_INV` (1 << 3) but 1 << 2: the kernel's
/// rdma_rxe writes its own `IB_WC_WITH_INVALIDATE` (1 << 2) into the completion queue it
/// maps to userspace, and rdma-core's rxe provider copies the record unchanged, so
/// libibverbs reports `IBV_WC_IP_CSUM_OK` with the rkey in `invalidated_rkey`. The check
/// expects what the real stack reports.
fn rc_send_inv(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    if let Err(why) = dvcq::tool_support::type2_windows(ctx) {
        return Ok(Outcome::skip(format!("{why}: SEND_WITH_INV needs a type-2 memory window to invalidate")));
    }
    let rxe = ctx.info().is_ok_and(|i| i.provider == "rxe");
    let mut cq = one_cq(ctx, choice, 64)?;
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, caps(16, 16), 2)?;
    if rxe {
        r.rec.inv_flag(WcFlags::IP_CSUM_OK);
    }
    let target = r.pd.reg_mr(MR_BYTES, Access::ALL.union(Access::MW_BIND))?;
    let mut mw = r.pd.alloc_mw()?;
    const AT: u64 = 4096;
    let rkey = r.qps[1].bind_mw(1, &mut mw, &target, AT, 1024, Access::REMOTE_READ.union(Access::REMOTE_WRITE))?;
    let name = r.rec.name_rkey(rkey);
    let mut expected = vec![ok(1, 1, WcOpcode::BindMw)];
    poll_n(&mut cq, &mut r.rec, 1);
    // Through the window: 100 bytes at 64 into it.
    let data = pattern(60, 100);
    r.mrs[0].write(0, &data)?;
    let sg = [r.mrs[0].slice(0, 100)?];
    let through = crate::verbs::RemoteAddr { addr: target.addr() + AT + 64, rkey };
    r.qps[0].post_send(&[SendWr::new(2, SendOp::Write(through), &sg)])?;
    expected.push(ok(0, 2, WcOpcode::RdmaWrite));
    poll_n(&mut cq, &mut r.rec, 1);
    check_data(&mut r.rec, "write through the window", &target, AT + 64, &data);
    // The SEND that invalidates it.
    post_recvs(&mut r.qps[1], &r.mrs[1], 100, 1, 256)?;
    let msg = pattern(61, 32);
    r.mrs[0].write(512, &msg)?;
    let sg = [r.mrs[0].slice(512, 32)?];
    r.qps[0].post_send(&[SendWr::new(3, SendOp::SendWithInv(rkey), &sg)])?;
    expected.push(ok(0, 3, WcOpcode::Send));
    let flags = if rxe { 0 } else { WcFlags::WITH_INV.bits() };
    expected.push(Record { imm: Some(name), flags, ..recv(1, 100, 32) });
    poll_n(&mut cq, &mut r.rec, 2);
    check_data(&mut r.rec, "send with invalidate", &r.mrs[1], 0, &msg);
    // The window is free now: its rkey reaches nothing.
    let sg = [r.mrs[0].slice(0, 64)?];
    r.qps[0].post_send(&[SendWr::new(4, SendOp::Write(through), &sg)])?;
    poll_n(&mut cq, &mut r.rec, 1);
    r.qps[0].post_send(&[SendWr::new(5, SendOp::Send, &sg)])?;
    poll_n(&mut cq, &mut r.rec, 1);
    expected.extend([failed(0, 4, WcStatus::RemAccessErr), failed(0, 5, WcStatus::WrFlushErr)]);
    drain_extra(&mut cq, &mut r.rec, Duration::from_millis(20));
    Ok(outcome(vec![(cq, both_ways(2, caps(16, 16)))], r.rec, expected))
}

/// Eight RC pairs on one CQ, four SENDs each, posted round robin before anything is polled:
/// the CQ interleaves sixteen QPs' completions.
fn rc_many_qps(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    const PAIRS: usize = 8;
    let c = caps(8, 8);
    let mut cq = one_cq(ctx, choice, 256)?;
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, c, 2 * PAIRS)?;
    let mut expected = Vec::new();
    for p in 0..PAIRS {
        post_recvs(&mut r.qps[2 * p + 1], &r.mrs[2 * p + 1], 100 * p as u64, 4, 64)?;
    }
    for k in 0..4u64 {
        for p in 0..PAIRS {
            let id = 100 * p as u64 + k;
            let len = 8 + k as u32 + p as u32;
            r.mrs[2 * p].write(k * 64, &pattern(id, len as usize))?;
            let sg = [r.mrs[2 * p].slice(k * 64, len)?];
            r.qps[2 * p].post_send(&[SendWr::new(id, SendOp::Send, &sg)])?;
            expected.push(ok(2 * p as u8, id, WcOpcode::Send));
            expected.push(recv(2 * p as u8 + 1, id, len));
        }
    }
    poll_n(&mut cq, &mut r.rec, expected.len());
    for k in 0..4u64 {
        for p in 0..PAIRS {
            let id = 100 * p as u64 + k;
            check_data(&mut r.rec, "send", &r.mrs[2 * p + 1], k * 64, &pattern(id, 8 + (k + p as u64) as usize));
        }
    }
    drain_extra(&mut cq, &mut r.rec, Duration::from_millis(20));
    Ok(outcome(vec![(cq, both_ways(2 * PAIRS as u64, c))], r.rec, expected))
}

/// 128 sends through a 16-entry send queue, one signaled in four: each signaled completion
/// retires the three unsignaled sends before it.
fn rc_unsignaled(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let mut cq = one_cq(ctx, choice, 256)?;
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, caps(16, 160), 2)?;
    post_recvs(&mut r.qps[1], &r.mrs[1], 1000, 128, 8)?;
    let mut expected = Vec::new();
    for k in 0..32u64 {
        for j in 0..4u64 {
            let i = 4 * k + j;
            let sg = [r.mrs[0].slice(i * 8, 8)?];
            r.qps[0].post_send(&[SendWr::new(i, SendOp::Send, &sg).signaled(j == 3)])?;
            expected.push(recv(1, 1000 + i, 8));
        }
        expected.push(ok(0, 4 * k + 3, WcOpcode::Send));
        poll_n(&mut cq, &mut r.rec, 5);
    }
    drain_extra(&mut cq, &mut r.rec, Duration::from_millis(20));
    Ok(outcome(vec![(cq, both_ways(2, caps(16, 160)))], r.rec, expected))
}

/// Two RC pairs whose receivers share one SRQ; the receives are consumed in posting order.
fn rc_srq(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let mut cq = one_cq(ctx, choice, 64)?;
    if ctx.info()?.max_srq_wr == 0 {
        let why = format!("{} has no SRQ", ctx.name());
        return Ok(Outcome::skip(why));
    }
    let pd = ctx.alloc_pd()?;
    let srq = pd.create_srq(16, 1)?;
    let mut rec = Recorder::default();
    let mut qps = Vec::new();
    for i in 0..4 {
        let init = QpInit {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            srq: (i % 2 == 1).then_some(&srq),
            caps: caps(16, 16),
            sq_sig_all: false,
        };
        let qp = pd.create_qp(&init)?;
        rec.add_qp(&qp);
        qps.push(qp);
    }
    connect_pairs(&mut qps)?;
    let mr = pd.reg_mr(MR_BYTES, Access::ALL)?;
    for i in 0..8u64 {
        let sg = [mr.slice(4096 + i * 64, 64)?];
        srq.post_recv(&[RecvWr { wr_id: 500 + i, sg_list: &sg }])?;
    }
    let mut expected = Vec::new();
    for (sender, first) in [(0usize, 0u64), (2, 4)] {
        for i in first..first + 4 {
            mr.write(i * 64, &pattern(40 + i, 16))?;
            let sg: [MrSlice; 1] = [mr.slice(i * 64, 16)?];
            qps[sender].post_send(&[SendWr::new(i, SendOp::Send, &sg)])?;
            expected.push(ok(sender as u8, i, WcOpcode::Send));
            expected.push(recv(sender as u8 + 1, 500 + i, 16));
        }
        poll_n(&mut cq, &mut rec, 8);
    }
    for i in 0..8u64 {
        check_data(&mut rec, "srq receive", &mr, 4096 + i * 64, &pattern(40 + i, 16));
    }
    drain_extra(&mut cq, &mut rec, Duration::from_millis(20));
    // Four send queues, the two receive queues of the QPs without the SRQ, and the SRQ.
    Ok(outcome(vec![(cq, 4 * 16 + 2 * 16 + 16)], rec, expected))
}

/// An RDMA WRITE with a wrong rkey: the requester gets `REM_ACCESS_ERR`, its QP goes to
/// error, and a send posted after that is flushed.
fn rc_bad_rkey(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let mut cq = one_cq(ctx, choice, 64)?;
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, caps(16, 16), 2)?;
    let mut bad = r.mrs[1].remote().at(0);
    bad.rkey ^= 0x00ff_ff00;
    let sg = [r.mrs[0].slice(0, 64)?];
    r.qps[0].post_send(&[SendWr::new(1, SendOp::Write(bad), &sg)])?;
    poll_n(&mut cq, &mut r.rec, 1);
    r.qps[0].post_send(&[SendWr::new(2, SendOp::Send, &sg)])?;
    poll_n(&mut cq, &mut r.rec, 1);
    drain_extra(&mut cq, &mut r.rec, Duration::from_millis(20));
    let expected = vec![failed(0, 1, WcStatus::RemAccessErr), failed(0, 2, WcStatus::WrFlushErr)];
    Ok(outcome(vec![(cq, both_ways(2, caps(16, 16)))], r.rec, expected))
}

/// Eight receives outstanding when their QP is moved to error: one flush each.
fn rc_flush(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let mut cq = one_cq(ctx, choice, 64)?;
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, caps(16, 16), 2)?;
    post_recvs(&mut r.qps[1], &r.mrs[1], 700, 8, 64)?;
    r.qps[1].enter_error_state()?;
    poll_n(&mut cq, &mut r.rec, 8);
    drain_extra(&mut cq, &mut r.rec, Duration::from_millis(20));
    let expected = (0..8).map(|i| failed(1, 700 + i, WcStatus::WrFlushErr)).collect();
    Ok(outcome(vec![(cq, both_ways(2, caps(16, 16)))], r.rec, expected))
}

#[derive(Clone, Copy)]
enum Depth {
    Fixed(u32),
    DeviceMax,
}

/// A send CQ and a receive CQ of one depth, and message after message through them, each
/// polled before the next is sent so even a one-entry CQ never overflows.
fn cq_depth(ctx: &Context, choice: BackendChoice, depth: Depth) -> Result<Outcome, Error> {
    let depth = match depth {
        Depth::Fixed(d) => d,
        Depth::DeviceMax => super::limits::max_cqe(ctx)?,
    };
    let mut scq = one_cq(ctx, choice, depth)?;
    let mut rcq = one_cq(ctx, choice, depth)?;
    let mut r = rig(ctx, QpType::Rc, &scq, &rcq, caps(4, 4), 2)?;
    let mut expected = Vec::new();
    for i in 0..6u64 {
        post_recvs(&mut r.qps[1], &r.mrs[1], 800 + i, 1, 64)?;
        let sg = [r.mrs[0].slice(0, 16)?];
        r.qps[0].post_send(&[SendWr::new(i, SendOp::Send, &sg)])?;
        expected.push(ok(0, i, WcOpcode::Send));
        expected.push(recv(1, 800 + i, 16));
        poll_n(&mut scq, &mut r.rec, 1);
        poll_n(&mut rcq, &mut r.rec, 1);
    }
    drain_extra(&mut scq, &mut r.rec, Duration::from_millis(10));
    drain_extra(&mut rcq, &mut r.rec, Duration::from_millis(10));
    // Both QPs' send queues complete on one CQ, their receive queues on the other.
    Ok(outcome(vec![(scq, 2 * 4), (rcq, 2 * 4)], r.rec, expected))
}

/// Send and receive CQs of 1, 2, 3, 7 and 31 entries, each wrapped about 24 times by
/// messages polled one by one (`cq_wrap` on one size; rdma-core's tests run many CQ sizes).
fn cq_wrap_sizes(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let mut all = Recorder::default();
    let mut expected = Vec::new();
    let mut cqs = Vec::new();
    for depth in [1u32, 2, 3, 7, 31] {
        let mut scq = one_cq(ctx, choice, depth)?;
        let mut rcq = one_cq(ctx, choice, depth)?;
        let mut r = rig(ctx, QpType::Rc, &scq, &rcq, caps(4, 4), 2)?;
        let base = all.qps_len() as u8;
        for i in 0..24 * u64::from(depth + 1) {
            post_recvs(&mut r.qps[1], &r.mrs[1], 50_000 + i, 1, 64)?;
            let sg = [r.mrs[0].slice(i % 64, 4)?];
            r.qps[0].post_send(&[SendWr::new(i, SendOp::Send, &sg)])?;
            expected.push(ok(base, i, WcOpcode::Send));
            expected.push(recv(base + 1, 50_000 + i, 4));
            if poll_n(&mut scq, &mut r.rec, 1) + poll_n(&mut rcq, &mut r.rec, 1) < 2 {
                break;
            }
        }
        drain_extra(&mut scq, &mut r.rec, Duration::from_millis(10));
        drain_extra(&mut rcq, &mut r.rec, Duration::from_millis(10));
        all.absorb(r.rec, base);
        cqs.extend([(scq, 2 * 4), (rcq, 2 * 4)]);
    }
    Ok(outcome(cqs, all, expected))
}

/// 600 round trips through a 16-entry CQ: the ring wraps dozens of times.
fn cq_wrap(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let mut cq = one_cq(ctx, choice, 16)?;
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, caps(4, 4), 2)?;
    let mut expected = Vec::new();
    for i in 0..600u64 {
        let sg = [r.mrs[0].slice(i % 64, 4)?];
        post_recvs(&mut r.qps[1], &r.mrs[1], 10_000 + i, 1, 64)?;
        r.qps[0].post_send(&[SendWr::new(i, SendOp::Send, &sg)])?;
        expected.push(ok(0, i, WcOpcode::Send));
        expected.push(recv(1, 10_000 + i, 4));
        poll_n(&mut cq, &mut r.rec, 2);
    }
    drain_extra(&mut cq, &mut r.rec, Duration::from_millis(20));
    Ok(outcome(vec![(cq, both_ways(2, caps(4, 4)))], r.rec, expected))
}
