//! Executing work against memory: RC and UD sends, writes and reads, receives taken from
//! an RQ or SRQ, and the CQEs each vendor writes for them.

use super::fabric::Fabric;
use super::irdma::{self as ird, UdSource};
use super::memory::{AtomicFault, LocalFault};
use super::mlx5::{self as mx, Arrival};
use super::qp::{Payload, QpHw, QpState, Recv, ReqScatter, Send};
use crate::verbs::{QpType, SendOp, Sge, UdDest, UD_GRH_BYTES};
use dvcq_e810_dv::model::ModelCqe;
use dvcq_provider::WcStatus;

/// What executing one send did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Done: the bytes it moved.
    Done(u64),
    /// The peer has no receive for it yet (RNR, with `rnr_retry` 7) or does not answer
    /// yet (in INIT): retry when that changes.
    Wait,
    /// Failed with this status at the requester.
    Fail(WcStatus),
}

/// A send as the engine executes it, borrowed from the post or from the waiting queue.
#[derive(Debug, Clone, Copy)]
pub(super) struct Work<'a> {
    pub(super) op: SendOp,
    pub(super) data: Data<'a>,
    pub(super) signaled: bool,
    pub(super) solicited: bool,
    pub(super) ud: Option<UdDest>,
    pub(super) xrc_srqn: Option<u32>,
    pub(super) wqe: u16,
    pub(super) len: u64,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Data<'a> {
    Gather(&'a [Sge]),
    Inline(&'a [u8]),
}

impl Send {
    pub(super) fn work(&self) -> Work<'_> {
        let data = match &self.payload {
            Payload::Gather(v) => Data::Gather(v),
            Payload::Inline(b) => Data::Inline(b),
        };
        Work {
            op: self.op,
            data,
            signaled: self.signaled,
            solicited: self.solicited,
            ud: self.ud,
            xrc_srqn: self.xrc_srqn,
            wqe: self.wqe,
            len: self.len,
        }
    }
}

pub(super) fn is_ipv4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

// The GRH slot a UD receive starts with is the one every RDMA device uses.
const _: () = assert!(UD_GRH_BYTES == 40);

/// The 40 bytes a UD receive starts with. RoCEv2 over IPv4 (both GIDs IPv4-mapped): 20
/// undefined bytes (zero here) and the IPv4 header; otherwise an IB GRH
/// (`struct ibv_grh`). Header values beyond the addresses and lengths are model choices.
fn grh(src: &[u8; 16], dst: &[u8; 16], payload: usize) -> [u8; 40] {
    const BTH: usize = 12;
    const DETH: usize = 8;
    const ICRC: usize = 4;
    let mut g = [0u8; 40];
    if is_ipv4_mapped(src) && is_ipv4_mapped(dst) {
        let total = (20 + 8 + BTH + DETH + payload + ICRC) as u16;
        let h = &mut g[20..];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[6] = 0x40; // don't fragment
        h[8] = 64; // TTL
        h[9] = 17; // UDP
        h[12..16].copy_from_slice(&src[12..]);
        h[16..20].copy_from_slice(&dst[12..]);
        let sum: u32 = h.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        let folded = (sum & 0xffff) + (sum >> 16);
        let csum = !(((folded & 0xffff) + (folded >> 16)) as u16);
        h[10..12].copy_from_slice(&csum.to_be_bytes());
    } else {
        g[..4].copy_from_slice(&(6u32 << 28).to_be_bytes());
        g[4..6].copy_from_slice(&((BTH + DETH + payload + ICRC) as u16).to_be_bytes());
        g[6] = 0x1b; // next header: BTH
        g[7] = 64; // hop limit
        g[8..24].copy_from_slice(src);
        g[24..40].copy_from_slice(dst);
    }
    g
}

impl Fabric {
    /// Runs the sends that wait, in order per QP, until none can move.
    pub(super) fn progress(&mut self) {
        while self.waiting > 0 {
            let mut moved = false;
            for q in 0..self.qps.len() {
                while self.qps[q].state == QpState::Rts {
                    let Some(s) = self.qps[q].sq.pop_front() else { break };
                    self.waiting -= 1;
                    let step = self.execute(q, &s.work());
                    match step {
                        Step::Wait => {
                            self.qps[q].sq.push_front(s);
                            self.waiting += 1;
                            break;
                        }
                        Step::Done(n) => self.complete_send(q, &s.work(), n),
                        Step::Fail(status) => self.fail_send(q, &s.work(), status),
                    }
                    moved = true;
                    self.apply_deferred();
                    self.recycle(s);
                }
            }
            if !moved {
                return;
            }
        }
    }

    pub(super) fn recycle(&mut self, s: Send) {
        if let Payload::Gather(v) = s.payload {
            self.give_sg(v);
        }
    }

    /// Gathers a send's bytes into the scratch buffer.
    pub(super) fn gather(&mut self, data: Data<'_>) -> Result<(), LocalFault> {
        self.data.clear();
        match data {
            Data::Gather(list) => self.mrs.gather(list, &mut self.data),
            Data::Inline(b) => {
                self.data.extend_from_slice(b);
                Ok(())
            }
        }
    }

    pub(super) fn execute(&mut self, q: usize, w: &Work<'_>) -> Step {
        // A message longer than the device sends fails at the requester before anything is
        // gathered (the IB spec's local length error; the gather would hold it in memory).
        if !matches!(w.op, SendOp::BindMw(_)) && w.len > self.attrs.max_msg_sz {
            return Step::Fail(WcStatus::LocLenErr);
        }
        match self.qps[q].qp_type {
            QpType::Rc | QpType::XrcSend => self.execute_rc(q, w),
            QpType::Uc => self.execute_uc(q, w),
            QpType::Ud => self.execute_ud(q, w),
            // A target has no send queue: posting refused it already.
            QpType::XrcRecv => Step::Fail(WcStatus::LocQpOpErr),
        }
    }

    /// RC work, and an XRC initiator's: the same transport, with the XRC SRQ the request
    /// names taking the receive at the target.
    pub(super) fn execute_rc(&mut self, q: usize, w: &Work<'_>) -> Step {
        // A bind is local work: it needs no peer. Any check failing is a bind error
        // (`IBV_WC_MW_BIND_ERR`: mlx5's MW_BIND_ERR syndrome, irdma's MW_BIND_ERR flush
        // code; the IB spec's status for it, inferred for both devices).
        if let SendOp::BindMw(b) = w.op {
            return match self.mrs.bind(&b, q) {
                Ok(_) => Step::Done(0),
                Err(_) => Step::Fail(WcStatus::MwBindErr),
            };
        }
        let Some(p) = self.qps[q].peer else { return Step::Fail(WcStatus::RetryExcErr) };
        match (self.qps[p].state, self.qps[p].peer == Some(q)) {
            // The peer does not answer yet: the requester retries.
            (QpState::Init, _) => return Step::Wait,
            (QpState::Rts | QpState::Rtr, true) => {}
            // A peer in error, or connected elsewhere, never acknowledges.
            _ => return Step::Fail(WcStatus::RetryExcErr),
        }
        let src_qp = self.qps[q].qpn;
        // XRC: every request carries the XRC SRQ number (XRCETH), and the target checks
        // that an SRQ of that number belongs to its own domain before it executes anything.
        // One that does not is an invalid request: the IB spec (XRC, the responder's XRCETH
        // checks) has the target NAK it, so the initiator completes with REM_INV_REQ_ERR and
        // goes to error; the target goes to error too (inferred: as a responder-detected
        // class J error puts an RC responder in error; it has no CQ, so nothing completes
        // there).
        let xrc = if self.qps[q].qp_type == QpType::XrcSend {
            match self.xrc_srq_of(p, w.xrc_srqn) {
                Some(s) => Some(s),
                None => {
                    self.deferred.push((p, WcStatus::RemInvReqErr));
                    return Step::Fail(WcStatus::RemInvReqErr);
                }
            }
        } else {
            None
        };
        match w.op {
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_) => {
                if self.gather(w.data).is_err() {
                    return Step::Fail(WcStatus::LocProtErr);
                }
                let Some((recv, srq)) = self.take_recv(p, xrc) else { return self.rnr(q) };
                // SEND_WITH_INV: the responder frees the window as it takes the message.
                // A key it cannot invalidate (no bound window: a region's rkey, a stale
                // tag) is IB's class J responder error: the receive completes in error
                // and the requester sees an invalid request (the kernel's soft-RoCE
                // responder completes the receive with REM_INV_REQ_ERR and goes to error;
                // the requester's status is inferred from the IB spec's NAK).
                if let Some(key) = w.op.invalidate_rkey() {
                    if !self.mrs.invalidate(key) {
                        self.reject_recv(p, recv, srq, WcStatus::RemInvReqErr);
                        return Step::Fail(WcStatus::RemInvReqErr);
                    }
                }
                let a =
                    Arrival { op: w.op, byte_len: self.data.len() as u32, src_qp, ud: false, solicited: w.solicited };
                let data = std::mem::take(&mut self.data);
                let placed = self.deliver(p, recv, srq, &a, Some(&data), None);
                self.data = data;
                match placed {
                    Ok(()) => Step::Done(a.byte_len.into()),
                    // The responder NAKs: an invalid request for a message too long, a
                    // remote operational error for a buffer it may not write.
                    Err(LocalFault::Length) => Step::Fail(WcStatus::RemInvReqErr),
                    Err(LocalFault::Protection) => Step::Fail(WcStatus::RemOpErr),
                }
            }
            SendOp::Write(to) | SendOp::WriteWithImm(to, _) => {
                if self.gather(w.data).is_err() {
                    return Step::Fail(WcStatus::LocProtErr);
                }
                let imm = matches!(w.op, SendOp::WriteWithImm(..));
                if imm && !self.has_recv(p, xrc) {
                    return self.rnr(q);
                }
                if !self.mrs.write_remote(to, &self.data, p) {
                    self.remote_access_fault(p, q);
                    return Step::Fail(WcStatus::RemAccessErr);
                }
                let n = self.data.len() as u64;
                if imm {
                    if let Some((recv, srq)) = self.take_recv(p, xrc) {
                        let a = Arrival { op: w.op, byte_len: n as u32, src_qp, ud: false, solicited: w.solicited };
                        // The data went to the remote address; the receive's list is unused.
                        let _ = self.deliver(p, recv, srq, &a, None, None);
                    }
                }
                Step::Done(n)
            }
            SendOp::BindMw(_) => Step::Fail(WcStatus::LocQpOpErr),
            SendOp::CompareSwap { remote, .. } | SendOp::FetchAdd { remote, .. } => {
                self.execute_atomic(q, p, w, remote)
            }
            SendOp::Read(from) => {
                let Data::Gather(list) = w.data else { return Step::Fail(WcStatus::LocQpOpErr) };
                if self.mrs.check_writable(list).is_err() {
                    return Step::Fail(WcStatus::LocProtErr);
                }
                let mut data = std::mem::take(&mut self.data);
                let ok = self.mrs.read_remote(from, w.len as usize, &mut data, p);
                let step = if !ok {
                    self.remote_access_fault(p, q);
                    Step::Fail(WcStatus::RemAccessErr)
                } else if self.read_in_cqe(q, w) {
                    // The response goes inside the CQE ([`Fabric::complete_send`] writes it
                    // from `self.data`); the poll copies it into the list.
                    Step::Done(w.len)
                } else if self.mrs.scatter(list, &data).is_err() {
                    Step::Fail(WcStatus::LocProtErr)
                } else {
                    Step::Done(w.len)
                };
                self.data = data;
                step
            }
        }
    }

    /// UC work: a SEND or RDMA WRITE (with or without immediate; posting refused the
    /// rest) to the connected peer. Nothing is acknowledged, so the requester completes
    /// every message it could gather: one the peer cannot take is dropped there (a peer
    /// not ready or connected elsewhere, no receive posted, a bad key or range), with no
    /// RNR and no error at either end (IB spec, UC responder: invalid or unexpected
    /// packets are silently dropped; that a bad rkey leaves the responder's state alone is
    /// inferred). A message longer than its receive completes that receive in error, as
    /// on RC.
    pub(super) fn execute_uc(&mut self, q: usize, w: &Work<'_>) -> Step {
        if self.gather(w.data).is_err() {
            return Step::Fail(WcStatus::LocProtErr);
        }
        let n = self.data.len() as u64;
        let Some(p) = self.qps[q].peer else { return Step::Done(n) };
        let ready = matches!(self.qps[p].state, QpState::Rts | QpState::Rtr) && self.qps[p].peer == Some(q);
        if !ready {
            return Step::Done(n);
        }
        let src_qp = self.qps[q].qpn;
        let a = Arrival { op: w.op, byte_len: n as u32, src_qp, ud: false, solicited: w.solicited };
        match w.op {
            SendOp::Send | SendOp::SendWithImm(_) => {
                if let Some((recv, srq)) = self.take_recv(p, None) {
                    let data = std::mem::take(&mut self.data);
                    let _ = self.deliver(p, recv, srq, &a, Some(&data), None);
                    self.data = data;
                }
                Step::Done(n)
            }
            SendOp::Write(to) | SendOp::WriteWithImm(to, _) => {
                let imm = matches!(w.op, SendOp::WriteWithImm(..));
                if imm && !self.has_recv(p, None) {
                    return Step::Done(n);
                }
                if !self.mrs.write_remote(to, &self.data, p) {
                    return Step::Done(n);
                }
                if imm {
                    if let Some((recv, srq)) = self.take_recv(p, None) {
                        let _ = self.deliver(p, recv, srq, &a, None, None);
                    }
                }
                Step::Done(n)
            }
            _ => Step::Fail(WcStatus::LocQpOpErr),
        }
    }

    /// The peer answered QP `q`'s request with an RNR NAK (no receive for it): with
    /// `rnr_retry` 7 the requester retries until a receive comes; with fewer, the retries
    /// are spent at once (the model compresses time: nothing can post a receive between
    /// them) and the request completes with `IBV_WC_RNR_RETRY_EXC_ERR`, the QP going to
    /// error ([`crate::verbs::QpAttrs`]).
    fn rnr(&self, q: usize) -> Step {
        if self.qps[q].attrs.rnr_retry == crate::verbs::RNR_RETRY_FOREVER {
            Step::Wait
        } else {
            Step::Fail(WcStatus::RnrRetryExcErr)
        }
    }

    /// An atomic on RC: the responder checks the address's alignment, then the key, range
    /// and `REMOTE_ATOMIC` right, and runs it; the 8 bytes it found come back to the
    /// requester's list (or inside the CQE, as a READ response does).
    ///
    /// A misaligned address is an invalid request (the kernel's soft-RoCE responder NAKs
    /// it with `NAK_INVALID_REQ`: `REM_INV_REQ_ERR` at the requester); a bad key, range or
    /// right a remote access error. Either puts the responder in error (inferred, as for
    /// the other responder-detected errors here). A list shorter than 8 bytes is a local
    /// length error (mlx5 writes a data segment of 8 bytes whatever the list says; the
    /// model refuses rather than write past it).
    fn execute_atomic(&mut self, q: usize, p: usize, w: &Work<'_>, remote: crate::verbs::RemoteAddr) -> Step {
        let Data::Gather(list) = w.data else { return Step::Fail(WcStatus::LocQpOpErr) };
        if w.len < u64::from(crate::verbs::ATOMIC_BYTES) {
            return Step::Fail(WcStatus::LocLenErr);
        }
        if self.mrs.check_writable(list).is_err() {
            return Step::Fail(WcStatus::LocProtErr);
        }
        let (compare, operand) = match w.op {
            SendOp::CompareSwap { compare, swap, .. } => (Some(compare), swap),
            SendOp::FetchAdd { add, .. } => (None, add),
            _ => return Step::Fail(WcStatus::LocQpOpErr),
        };
        let big_endian = self.vendor == super::ModelVendor::Mlx5;
        match self.mrs.atomic(remote, compare, operand, big_endian, p) {
            Err(AtomicFault::Misaligned) => {
                self.remote_access_fault(p, q);
                Step::Fail(WcStatus::RemInvReqErr)
            }
            Err(AtomicFault::Access) => {
                self.remote_access_fault(p, q);
                Step::Fail(WcStatus::RemAccessErr)
            }
            Ok(found) => {
                self.data.clear();
                self.data.extend_from_slice(&found);
                if self.read_in_cqe(q, w) {
                    return Step::Done(found.len() as u64);
                }
                let data = std::mem::take(&mut self.data);
                let placed = self.mrs.scatter(list, &data);
                self.data = data;
                match placed {
                    Ok(()) => Step::Done(found.len() as u64),
                    Err(_) => Step::Fail(WcStatus::LocProtErr),
                }
            }
        }
    }

    pub(super) fn execute_ud(&mut self, q: usize, w: &Work<'_>) -> Step {
        let Some(dest) = w.ud else { return Step::Fail(WcStatus::LocQpOpErr) };
        // A UD message is one packet: longer than the MTU is a local length error, found
        // before the bytes are gathered (model choice: before the keys are checked too).
        if w.len > u64::from(self.attrs.mtu) {
            return Step::Fail(WcStatus::LocLenErr);
        }
        if self.gather(w.data).is_err() {
            return Step::Fail(WcStatus::LocProtErr);
        }
        let n = self.data.len();
        // Unreliable: the sender completes whatever happens at the destination.
        let target = self.find_qp(dest.qpn, &dest.endpoint.gid).filter(|&p| {
            let d = &self.qps[p];
            d.qp_type == QpType::Ud && d.state == QpState::Rts && d.qkey == dest.qkey
        });
        if let Some(p) = target {
            if let Some((recv, srq)) = self.take_recv(p, None) {
                let g = grh(&self.gid, &self.gid, n);
                let mut buf = std::mem::take(&mut self.ud_buf);
                buf.clear();
                buf.extend_from_slice(&g);
                buf.extend_from_slice(&self.data);
                let src_qp = self.qps[q].qpn;
                let a = Arrival { op: w.op, byte_len: buf.len() as u32, src_qp, ud: true, solicited: w.solicited };
                let src = UdSource {
                    src_qp,
                    ipv4: is_ipv4_mapped(&self.gid),
                    smac: [0x02, 0x00, self.gid[12], self.gid[13], self.gid[14], self.gid[15]],
                };
                let _ = self.deliver(p, recv, srq, &a, Some(&buf), Some(src));
                self.ud_buf = buf;
            }
        }
        Step::Done(n as u64)
    }

    /// Whether QP `p` has a receive for a message; `xrc`: the XRC SRQ an XRC request
    /// named (`p` is then a target, which has no receive queue of its own).
    pub(super) fn has_recv(&self, p: usize, xrc: Option<usize>) -> bool {
        match xrc.or(self.qps[p].srq) {
            Some(s) => !self.srqs[s].posted.is_empty(),
            None => !self.qps[p].rq.is_empty(),
        }
    }

    /// The next receive of QP `p` (its RQ's, its SRQ's, or the XRC SRQ `xrc` an XRC
    /// request named), and the SRQ it came from.
    pub(super) fn take_recv(&mut self, p: usize, xrc: Option<usize>) -> Option<(Recv, Option<usize>)> {
        match xrc.or(self.qps[p].srq) {
            Some(s) => self.srqs[s].posted.pop_front().map(|r| (r, Some(s))),
            None => self.qps[p].rq.pop_front().map(|r| (r, None)),
        }
    }

    /// The CQ a receive of QP `p` from SRQ `srq` completes on: an XRC SRQ's own CQ (an XRC
    /// target has none), else the QP's receive CQ.
    fn recv_cq_of(&self, p: usize, srq: Option<usize>) -> usize {
        srq.and_then(|s| self.srqs[s].xrc).map_or(self.qps[p].recv_cq, |x| x.cq)
    }

    /// Places a message in receive `recv` of QP `p` and writes its CQE: `data` is what the
    /// receive's list takes (none for WRITE_WITH_IMM). A fault writes the receive's error
    /// (mlx5) and puts the responder in error once the requester's completion is written.
    pub(super) fn deliver(
        &mut self,
        p: usize,
        recv: Recv,
        srq: Option<usize>,
        a: &Arrival,
        data: Option<&[u8]>,
        ud: Option<UdSource>,
    ) -> Result<(), LocalFault> {
        let placed = match data {
            Some(d) => self.mrs.scatter(&recv.sg, d),
            None => Ok(()),
        };
        let (qpn, recv_cq, hw) = (self.qps[p].qpn, self.recv_cq_of(p, srq), self.qps[p].hw);
        // An SRQ receive's CQE carries the SRQ's number (CQE version 0, the model's), an XRC
        // SRQ's too, and the QP that took it (for XRC the target) in `sop_drop_qpn`.
        let srqn = srq.map(|s| self.srqs[s].srqn);
        let tag = srq.map(|s| (s, recv.wqe));
        match (placed, hw) {
            (Ok(()), QpHw::Mlx5(_)) => self.cqs[recv_cq].push_mlx5(&mx::resp_ok(qpn, recv.wqe, a, srqn), tag),
            (Ok(()), QpHw::Irdma(l)) => {
                let len = data.map_or(u64::from(a.byte_len), |d| d.len() as u64);
                let c = ird::recv_ok(&l, qpn, recv.wqe, a.op, len, a.byte_len, self.attrs.mtu, a.solicited, ud);
                self.cqs[recv_cq].push_irdma(&c);
                self.flush[p].rq_uncovered = self.flush[p].rq_uncovered.saturating_sub(1);
            }
            (Err(f), _) => {
                let status = match f {
                    LocalFault::Length => WcStatus::LocLenErr,
                    LocalFault::Protection => WcStatus::LocProtErr,
                };
                self.recv_fault(p, recv.wqe, srq, status);
            }
        }
        self.give_sg(recv.sg);
        placed
    }

    /// A receive taken and not placed (a request the responder refused): it completes in
    /// error with `status` and the responder goes to error.
    pub(super) fn reject_recv(&mut self, p: usize, recv: Recv, srq: Option<usize>, status: WcStatus) {
        self.recv_fault(p, recv.wqe, srq, status);
        self.give_sg(recv.sg);
    }

    /// The receive at `wqe` of QP `p` failed with `status`: mlx5 writes its error CQE;
    /// irdma writes no CQE for the receive itself, the responder's flush reports it first
    /// with this status (its RQ flush code). The responder goes to error once the
    /// requester's completion is written.
    fn recv_fault(&mut self, p: usize, wqe: u16, srq: Option<usize>, status: WcStatus) {
        let (qpn, recv_cq, hw) = (self.qps[p].qpn, self.recv_cq_of(p, srq), self.qps[p].hw);
        let srqn = srq.map(|s| self.srqs[s].srqn);
        let tag = srq.map(|s| (s, wqe));
        if let QpHw::Mlx5(_) = hw {
            self.cqs[recv_cq].push_mlx5(&mx::resp_err(qpn, wqe, status, srqn), tag);
        }
        self.deferred.push((p, status));
    }

    /// The responder of a request with a bad rkey or range goes to error too (IB: a
    /// responder-detected access violation is an affiliated error of the responder's QP);
    /// after the requester's completion, unless it is the requester itself.
    pub(super) fn remote_access_fault(&mut self, p: usize, q: usize) {
        if p != q {
            self.deferred.push((p, WcStatus::WrFlushErr));
        }
    }

    pub(super) fn apply_deferred(&mut self) {
        while let Some((p, status)) = self.deferred.pop() {
            if self.qps[p].state != QpState::Error {
                self.qp_error(p, WcStatus::WrFlushErr, status);
            }
        }
        self.settle_cq_errors();
    }

    /// Whether QP `q`'s READ or atomic `w` completes with its response inside the CQE: a
    /// QP with requester scatter-to-CQE, a signaled READ (every one, with `sq_sig_all`) of
    /// 1 byte up to what the send CQ's CQEs carry, or a signaled atomic (its 8-byte
    /// response: the PRM's `cs_req` covers RDMA READ and atomic responses). A longer
    /// response goes to the buffers, and so does nothing for a READ of 0 bytes (inferred:
    /// there is nothing to scatter).
    pub(super) fn read_in_cqe(&self, q: usize, w: &Work<'_>) -> bool {
        let max = self.qps[q].req_scatter.as_ref().map_or(0, ReqScatter::max);
        let len = if w.op.is_atomic() { u64::from(crate::verbs::ATOMIC_BYTES) } else { w.len };
        w.op.writes_local() && w.signaled && (1..=max).contains(&len)
    }

    /// Writes the CQE of a send that completed. A READ whose response goes in the CQE
    /// ([`Fabric::read_in_cqe`]) finds it in `self.data`, where executing it left it.
    pub(super) fn complete_send(&mut self, q: usize, w: &Work<'_>, n: u64) {
        if !w.signaled {
            return;
        }
        let (qpn, send_cq, hw) = (self.qps[q].qpn, self.qps[q].send_cq, self.qps[q].hw);
        match hw {
            QpHw::Mlx5(_) if self.read_in_cqe(q, w) => {
                let cqe_size = self.qps[q].req_scatter.as_ref().map_or(64, |r| r.cqe_size);
                let data = self.data.get(..n as usize).unwrap_or(&self.data);
                let e = mx::req_read_inline(qpn, w.wqe, w.op, data, cqe_size);
                self.cqs[send_cq].push_mlx5(&e, None);
            }
            QpHw::Mlx5(_) => self.cqs[send_cq].push_mlx5(&mx::req_ok(qpn, w.wqe, w.op, n), None),
            QpHw::Irdma(l) => {
                let c = ModelCqe::send(l.ctx, qpn, w.wqe, ird::sq_opcode(w.op, w.solicited));
                self.cqs[send_cq].push_irdma(&c);
                // The CQE retires this WR and every older one; the ones behind it wait.
                self.flush[q].sq_uncovered = self.qps[q].sq.len() as u32;
            }
        }
    }

    /// A send failed: mlx5 writes its error CQE (signaled or not), then the QP flushes;
    /// irdma moves the QP to error with the status as its SQ flush code.
    pub(super) fn fail_send(&mut self, q: usize, w: &Work<'_>, status: WcStatus) {
        let (qpn, send_cq, hw) = (self.qps[q].qpn, self.qps[q].send_cq, self.qps[q].hw);
        match hw {
            QpHw::Mlx5(_) => {
                self.cqs[send_cq].push_mlx5(&mx::req_err(qpn, w.wqe, w.op, status), None);
                self.qp_error(q, WcStatus::WrFlushErr, WcStatus::WrFlushErr);
            }
            QpHw::Irdma(_) => self.qp_error(q, status, WcStatus::WrFlushErr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roce_v2_grh_holds_a_valid_ipv4_header() {
        let mut a = [0u8; 16];
        a[10..].copy_from_slice(&[0xff, 0xff, 192, 0, 2, 1]);
        let g = grh(&a, &a, 100);
        assert!(g[..20].iter().all(|&b| b == 0));
        let h = &g[20..];
        assert_eq!((h[0], h[9], &h[12..16], &h[16..20]), (0x45, 17, &[192, 0, 2, 1][..], &[192, 0, 2, 1][..]));
        assert_eq!(u16::from_be_bytes([h[2], h[3]]), 20 + 8 + 12 + 8 + 100 + 4);
        // The header's one's-complement sum, checksum included, is 0xffff.
        let sum: u32 = h.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff);
        // Without IPv4 GIDs: an IB GRH, IP version 6, the GIDs at 8 and 24.
        let b = [0x11u8; 16];
        let g = grh(&b, &a, 0);
        assert_eq!((g[0] >> 4, g[6], &g[8..24], &g[24..40]), (6, 0x1b, &b[..], &a[..]));
    }
}
