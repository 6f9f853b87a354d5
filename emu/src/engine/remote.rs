//! The devices' side of the wire (`crate::wire`): work whose peer QP lives in another
//! process. The requester's WQEs are parsed by their device (mlx5 here, irdma in
//! `crate::irdma_engine::wire`) into a [`Work`]; everything after that is one code for both
//! devices, except where a receive is taken and where a CQE is written ([`Local`] says
//! which device a QP is on).
//!
//! * **Requester.** A WQE whose QP's destination QPN carries another process's slot is
//!   taken off the SQ and sent as one request (a SEND's or WRITE's data gathered now, a
//!   READ's scatter list kept); it stays *in flight* until its reply comes, and only then
//!   gets its CQE (if signaled, or an error): the replies of one QP come in order, so its
//!   CQEs do. An error reply (remote access, invalid request, remote operation, RNR retries
//!   exceeded, the destination QP missing) completes the WQE with that error CQE, moves the
//!   QP to the error state and flushes what follows. A peer process that exits, or cannot be
//!   reached, completes everything in flight to it with a transport-retries-exceeded error.
//! * **Responder.** A request to one of this process's QPs waits in that QP's queue (in
//!   arrival order) until it can run: until the QP is ready (at most [`NOT_READY_WAIT`]),
//!   and, for a message that consumes a receive, until one is posted (for ever with an RNR
//!   retry count of 7, else for the time the requester's RNR retries and the QP's RNR timer
//!   give). Then it runs with the same checks as between two QPs of one process: rkey,
//!   range and access of the region, the receive's own keys and length, the receive's CQE.

use super::{find_mr, set_state, Outcome, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE};
use crate::emulator::Emulator;
use crate::objects::{Qp, QpState, QpType};
use crate::recv::{self, RecvWqe};
use crate::wire::{self, Event, Header, Message, Op, Status, Wire};
use crate::wqe::{self, Ctrl, Gather, Raddr};
use dvcq_mlx5_dv::model::build::{self, Entry, ErrSpec};
use dvcq_uapi::mlx5::opcode::{cqe_opcode, syndrome, wqe_opcode};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How long a request waits for its destination QP to reach RTR before the requester is
/// told the QP is not there (a fabric's requester would retransmit that long).
pub const NOT_READY_WAIT: Duration = Duration::from_secs(2);

/// The wire and what is outstanding on it.
#[derive(Debug, Default)]
pub struct Remote {
    wire: Wire,
    /// Requests sent and not answered, per local QPN, in posting order.
    in_flight: HashMap<u32, VecDeque<InFlight>>,
    /// Requests received and not run yet, per local QPN, in arrival order.
    inbound: HashMap<u32, VecDeque<Inbound>>,
    /// The SQ WQE (QPN, SQ index) of this process waiting for a receive at a QP of this
    /// process, and since when.
    rnr_since: HashMap<u32, (u32, Instant)>,
    /// The responder CQE of the request just run, written once its reply is sent: the CQE
    /// may end the responder's program, and with it the process.
    deferred: Option<Deferred>,
}

/// A responder CQE waiting for its reply to be sent.
#[derive(Debug)]
enum Deferred {
    /// Context fd, CQ handle, the CQE.
    Mlx5(i32, u32, Entry),
    /// Context fd, QP handle, CQ handle, the CQE.
    Irdma(i32, u32, u32, dvcq_e810_dv::model::ModelCqe),
}

/// A QP of this process, on either emulated device.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Local {
    /// Context fd, the QP.
    Mlx5(i32, Qp),
    /// Context fd, QP handle, the QP.
    Irdma(i32, u32, Qp),
}

impl Local {
    fn qp(&self) -> &Qp {
        match self {
            Local::Mlx5(_, q) | Local::Irdma(_, _, q) => q,
        }
    }

    fn fd(&self) -> i32 {
        match self {
            Local::Mlx5(fd, _) | Local::Irdma(fd, _, _) => *fd,
        }
    }
}

/// One RC WQE as the wire carries it, parsed by its device.
#[derive(Debug)]
pub(crate) struct Work<'a> {
    /// `None`: an opcode the wire does not carry (it fails with a local QP operation error).
    pub op: Option<Op>,
    pub solicited: bool,
    pub raddr: u64,
    pub rkey: u32,
    /// The immediate, or the key a SEND with invalidate names.
    pub imm: u32,
    pub gather: &'a Gather,
    /// What the requester's CQE names: the WQE's index and the device's opcode.
    pub wqe_index: u16,
    pub opcode: u8,
    pub signaled: bool,
    /// An atomic's segment (compare-and-swap or fetch-and-add operands), sent as it is.
    pub atomic: Option<&'a [u8]>,
}

/// What became of a WQE handed to the wire.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Posted {
    /// Sent: its CQE comes with the reply.
    Sent,
    /// Not now (work in flight ahead of a local error, a full socket): nothing consumed.
    Later,
    /// Failed with this (mlx5) syndrome, which the device translates.
    Failed(u8),
}

/// A WQE sent to a peer, waiting for its reply.
#[derive(Debug)]
pub(crate) struct InFlight {
    seq: u32,
    slot: u32,
    wqe_index: u16,
    opcode: u8,
    signaled: bool,
    length: u32,
    /// A READ's local entries.
    read_into: Option<Vec<(u64, u32, u32)>>,
}

/// A request waiting to run.
#[derive(Debug)]
struct Inbound {
    from: u64,
    message: Message,
    since: Instant,
}

/// The wire operation of an mlx5 WQE opcode.
fn op_of(opcode: u8) -> Option<Op> {
    Some(match opcode {
        wqe_opcode::SEND => Op::Send,
        wqe_opcode::SEND_IMM => Op::SendImm,
        wqe_opcode::SEND_INVAL => Op::SendInv,
        wqe_opcode::RDMA_WRITE => Op::Write,
        wqe_opcode::RDMA_WRITE_IMM => Op::WriteImm,
        wqe_opcode::RDMA_READ => Op::Read,
        wqe_opcode::ATOMIC_CS => Op::CompareSwap,
        wqe_opcode::ATOMIC_FA => Op::FetchAdd,
        _ => return None,
    })
}

/// The requester's CQE syndrome for an error reply.
fn syndrome_of(s: Status) -> u8 {
    match s {
        Status::Ok => 0,
        Status::RemoteAccess => syndrome::REMOTE_ACCESS_ERR,
        Status::RemoteInvalid => syndrome::REMOTE_INVAL_REQ_ERR,
        Status::RemoteOp => syndrome::REMOTE_OP_ERR,
        Status::RnrExceeded => syndrome::RNR_RETRY_EXC_ERR,
        Status::NoQp => syndrome::TRANSPORT_RETRY_EXC_ERR,
    }
}

/// The RNR NAK timer an encoded `min_rnr_timer` stands for (IB spec table 45).
pub fn rnr_timer(code: u8) -> Duration {
    const US: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840, 5120, 7680, 10_240,
        15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760, 327_680, 491_520,
    ];
    Duration::from_micros(u64::from(US[usize::from(code & 31)]))
}

/// This process's slot number; 0 without one.
fn my_slot() -> u32 {
    wire::process_slot().map_or(0, |s| s.number)
}

/// The device thread's idle wait: up to `timeout`, and less when something arrives on the
/// wire (so a peer's message is served at once, not after a sleep).
pub fn idle_wait(timeout: Duration) {
    let fds = crate::emulator::with(|e| e.remote.wire.fds());
    let mut polled: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ts = libc::timespec { tv_sec: 0, tv_nsec: timeout.as_nanos().min(999_999_999) as libc::c_long };
    // SAFETY: `polled` is a live array of its length; `ts` a valid timeout; no signal mask is changed.
    unsafe { libc::ppoll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, &ts, std::ptr::null()) };
}

impl Emulator {
    /// Sends the WQE to the process its QP's peer lives in; `None` when the peer is in this
    /// process.
    pub(super) fn remote_send(&mut self, fd: i32, qp: &Qp, ctrl: &Ctrl, units: &[u8], g: &Gather) -> Option<Outcome> {
        let op = op_of(ctrl.opcode);
        let (raddr, rkey) = if matches!(op, Some(Op::Write | Op::WriteImm | Op::Read | Op::CompareSwap | Op::FetchAdd))
        {
            let r = Raddr::parse(&units[16..32]);
            (r.addr, r.rkey)
        } else {
            (0, 0)
        };
        let work = Work {
            op,
            solicited: ctrl.fm_ce_se & wqe::CTRL_SOLICITED != 0,
            raddr,
            rkey,
            imm: ctrl.imm,
            gather: g,
            wqe_index: ctrl.wqe_index,
            opcode: ctrl.opcode,
            signaled: ctrl.signaled() || qp.sq_sig_all,
            atomic: matches!(op, Some(Op::CompareSwap | Op::FetchAdd))
                .then(|| &units[super::atomic::SEG_AT..super::atomic::DATA_AT]),
        };
        Some(match self.wire_send(fd, qp, &work)? {
            Posted::Sent => Outcome::Sent,
            Posted::Later => Outcome::Later,
            Posted::Failed(s) => Outcome::Failed(s),
        })
    }

    /// Sends `w` of QP `qp` to the process its peer lives in; `None` when the peer is in
    /// this process.
    pub(crate) fn wire_send(&mut self, fd: i32, qp: &Qp, w: &Work<'_>) -> Option<Posted> {
        let dest = wire::slot_of(qp.path.dest_qpn);
        if dest == 0 || dest == my_slot() {
            return None;
        }
        if self.remote.wire.slot().is_none() {
            self.remote.wire.attach(wire::process_slot()?.clone());
        }
        let busy = self.remote.in_flight.get(&qp.qpn).is_some_and(|q| !q.is_empty());
        // A local error must not overtake work in flight: it waits for the replies.
        let fail = |s| if busy { Posted::Later } else { Posted::Failed(s) };
        let Some(op) = w.op else { return Some(fail(syndrome::LOCAL_QP_OP_ERR)) };
        let (h, data, read_into) = match self.request_of(fd, qp, w, op) {
            Ok(r) => r,
            Err(s) => return Some(fail(s)),
        };
        let length = if matches!(op, Op::Read | Op::CompareSwap | Op::FetchAdd) { h.length } else { data.len() as u32 };
        match self.remote.wire.request(dest, h, &data) {
            Ok(seq) => {
                self.remote.in_flight.entry(qp.qpn).or_default().push_back(InFlight {
                    seq,
                    slot: dest,
                    wqe_index: w.wqe_index,
                    opcode: w.opcode,
                    signaled: w.signaled,
                    length,
                    read_into,
                });
                Some(Posted::Sent)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Some(Posted::Later),
            // The peer process is gone (or never was): as a fabric's retries running out.
            Err(_) => Some(fail(syndrome::TRANSPORT_RETRY_EXC_ERR)),
        }
    }

    /// The request of `w`: its header, the data a SEND or WRITE carries (gathered now), a
    /// READ's local entries; or the syndrome of a local error.
    #[allow(clippy::type_complexity)]
    fn request_of(
        &self,
        fd: i32,
        qp: &Qp,
        w: &Work<'_>,
        op: Op,
    ) -> Result<(Header, Vec<u8>, Option<Vec<(u64, u32, u32)>>), u8> {
        let mut h = Header {
            op: op as u8,
            flags: if w.solicited { wire::FLAG_SOLICITED } else { 0 },
            dst_qpn: qp.path.dest_qpn,
            src_qpn: qp.qpn,
            imm: w.imm,
            rnr_retry: qp.path.rnr_retry,
            ..Header::default()
        };
        if matches!(op, Op::Write | Op::WriteImm | Op::Read | Op::CompareSwap | Op::FetchAdd) {
            (h.raddr, h.rkey) = (w.raddr, w.rkey);
        }
        if let Some(seg) = w.atomic {
            // The atomic segment travels as it is; the reply's 8 bytes land in the entry.
            let into = super::atomic::local_entry(w.gather)?;
            h.length = super::atomic::SIZE;
            return Ok((h, seg.to_vec(), into.map(|e| e.sges)));
        }
        if op == Op::Read {
            let Gather::Segs(segs) = w.gather else { return Err(syndrome::LOCAL_QP_OP_ERR) };
            h.length = w.gather.len() as u32;
            return Ok((h, Vec::new(), Some(segs.clone())));
        }
        Ok((h, self.gather(fd, qp.pd, w.gather)?, None))
    }

    /// Runs `w` against its peer QP in this process as the wire's responder runs a request
    /// (the same checks, the same responder CQE), for a device whose local work goes this
    /// way (irdma): `Done` with the byte count, `Later` while the message waits for a
    /// receive (until the RNR retries run out), or the requester's error syndrome.
    pub(crate) fn run_locally(&mut self, fd: i32, qp: &Qp, w: &Work<'_>, at: u32) -> Result<Option<u32>, u8> {
        let op = w.op.ok_or(syndrome::LOCAL_QP_OP_ERR)?;
        let (h, data, read_into) = self.request_of(fd, qp, w, op)?;
        let since = self.rnr_clock(qp.qpn, at);
        let inb = Inbound { from: 0, message: Message { header: h, payload: data }, since };
        let Some((status, length, out)) = self.serve(&inb) else { return Ok(None) };
        self.remote.rnr_since.remove(&qp.qpn);
        self.write_deferred();
        match status {
            Status::Ok => {}
            st => return Err(syndrome_of(st)),
        }
        if let Some(segs) = read_into {
            self.scatter(fd, qp.pd, &RecvWqe { index: 0, sges: segs }, &out)?;
        }
        Ok(Some(length))
    }

    /// `Later` while `qp` has work in flight to another process: work the device does
    /// itself (a window's bind) must not overtake it.
    pub(super) fn remote_busy(&self, qp: &Qp) -> Option<Outcome> {
        self.remote.in_flight.get(&qp.qpn).is_some_and(|q| !q.is_empty()).then_some(Outcome::Later)
    }

    /// A UD send: the datagram segment's destination QPN and Q_Key, then the data; it
    /// completes at once, whether or not a receiver takes it (as a datagram on a fabric).
    pub(super) fn datagram(&mut self, fd: i32, qp: &Qp, ctrl: &Ctrl, units: &[u8]) -> Outcome {
        // ctrl (16 bytes), the address vector (`struct mlx5_wqe_av`, 48), the data.
        let end = (usize::from(ctrl.ds) * 16).min(units.len());
        if end < 64 {
            return Outcome::Failed(syndrome::LOCAL_LENGTH_ERR);
        }
        let be32 = |o: usize| u32::from_be_bytes([units[o], units[o + 1], units[o + 2], units[o + 3]]);
        let (qkey, dqpn) = (be32(16), be32(24) & 0xff_ffff);
        let Ok(g) = Gather::parse(&units[64..end]) else { return Outcome::Failed(syndrome::LOCAL_LENGTH_ERR) };
        let data = match self.gather(fd, qp.pd, &g) {
            Ok(d) => d,
            Err(s) => return Outcome::Failed(s),
        };
        // One packet: at most the path MTU (4096 bytes).
        if data.len() > 4096 {
            return Outcome::Failed(syndrome::LOCAL_LENGTH_ERR);
        }
        let op = if ctrl.opcode == wqe_opcode::SEND_IMM { Op::SendImm } else { Op::Send };
        let mut flags = wire::FLAG_DATAGRAM;
        if ctrl.fm_ce_se & wqe::CTRL_SOLICITED != 0 {
            flags |= wire::FLAG_SOLICITED;
        }
        let h =
            Header { op: op as u8, flags, dst_qpn: dqpn, src_qpn: qp.qpn, imm: ctrl.imm, qkey, ..Header::default() };
        let len = data.len() as u32;
        self.send_datagram(h, data);
        Outcome::Done(len)
    }

    /// Delivers a datagram (`h` names its destination QPN and Q_Key, and has
    /// [`wire::FLAG_DATAGRAM`]): to a QP of this process, or over the wire; one nobody takes
    /// is dropped, as on a fabric.
    pub(crate) fn send_datagram(&mut self, h: Header, data: Vec<u8>) {
        let dest = wire::slot_of(h.dst_qpn);
        if dest == 0 || dest == my_slot() {
            let inb = Inbound { from: 0, message: Message { header: h, payload: data }, since: Instant::now() };
            self.serve(&inb);
        } else if let Some(slot) = wire::process_slot() {
            if self.remote.wire.slot().is_none() {
                self.remote.wire.attach(slot.clone());
            }
            // A peer that cannot be reached drops it, as a fabric would.
            let _ = self.remote.wire.request(dest, h, &data);
        }
    }

    /// A datagram to UD QP `peer` of this process: into its next receive after a 40-byte
    /// GRH, with a CQE naming the sender; dropped when the QP is not ready, the Q_Key
    /// differs or no receive is posted.
    fn take_datagram(&mut self, pfd: i32, peer: &Qp, h: &Header, data: &[u8]) {
        if peer.qp_type != QpType::Ud || !matches!(peer.state, QpState::Rtr | QpState::Rts) || h.qkey != peer.path.qkey
        {
            return;
        }
        let Some((wqe, next)) = self.peek_recv(pfd, peer) else { return };
        // The GRH as a RoCE port delivers it: an IPv6 header, the emulated port's GID at
        // both ends (every process shows the same sysfs tree).
        let mut grh = [0u8; 40];
        grh[0] = 0x60;
        grh[4..6].copy_from_slice(&(data.len() as u16).to_be_bytes());
        grh[6] = 0x11;
        grh[7] = 64;
        let gid = gid_bytes(crate::device::GIDS[0]);
        grh[8..24].copy_from_slice(&gid);
        grh[24..40].copy_from_slice(&gid);
        let mut packet = grh.to_vec();
        packet.extend_from_slice(data);
        let landed = self.scatter(pfd, peer.pd, &wqe, &packet);
        self.take_recv(pfd, peer, next);
        let op = if h.op == Op::SendImm as u8 { cqe_opcode::RESP_SEND_IMM } else { cqe_opcode::RESP_SEND };
        let imm = if h.op == Op::SendImm as u8 { h.imm } else { 0 };
        let e = match landed {
            Ok(()) => build::resp(op, peer.qpn, wqe.index, packet.len() as u32, imm)
                .srqn_uidx(peer.wq.uidx)
                .solicited(h.flags & wire::FLAG_SOLICITED != 0)
                .recv_addr(build::RecvAddr { src_qp: h.src_qpn, grh: true, ..build::RecvAddr::default() }),
            Err(s) => super::responder_error(peer, wqe.index, s),
        };
        self.complete(pfd, peer.recv_cq, &e);
        if landed.is_err() {
            set_state(self, pfd, peer.qpn, QpState::Err);
        }
    }

    /// Serves the wire: takes replies (writing their CQEs), runs the requests that can run,
    /// and fails what was in flight to a peer that went away. Returns how much it did.
    pub(super) fn wire_step(&mut self) -> u32 {
        if self.remote.wire.slot().is_none() {
            let Some(slot) = wire::process_slot() else { return 0 };
            self.remote.wire.attach(slot.clone());
        }
        let mut done = 0;
        for event in self.remote.wire.poll() {
            done += 1;
            match event {
                Event::Request { from, message } => {
                    let q = self.remote.inbound.entry(message.header.dst_qpn).or_default();
                    q.push_back(Inbound { from, message, since: Instant::now() });
                }
                Event::Reply { message, .. } => self.take_reply(&message),
                Event::Lost { slot } => self.lose_peer(slot),
            }
        }
        // QPs the application moved to the error state flush what is in flight first.
        let qpns: Vec<u32> = self.remote.in_flight.iter().filter(|(_, q)| !q.is_empty()).map(|(&n, _)| n).collect();
        for qpn in qpns {
            match self.find_local(qpn) {
                None => {
                    self.remote.in_flight.remove(&qpn);
                }
                Some(l) if l.qp().state == QpState::Err => {
                    done += 1;
                    self.fail_in_flight(qpn, syndrome::WR_FLUSH_ERR);
                }
                Some(_) => {}
            }
        }
        let dsts: Vec<u32> = self.remote.inbound.iter().filter(|(_, q)| !q.is_empty()).map(|(&n, _)| n).collect();
        for dst in dsts {
            while let Some(head) = self.remote.inbound.get_mut(&dst).and_then(VecDeque::pop_front) {
                match self.serve(&head) {
                    Some(_) if head.message.header.flags & wire::FLAG_DATAGRAM != 0 => done += 1,
                    Some((status, length, data)) => {
                        done += 1;
                        self.remote.wire.reply(head.from, &head.message.header, status, length, &data);
                        self.write_deferred();
                    }
                    None => {
                        self.remote.inbound.entry(dst).or_default().push_front(head);
                        break;
                    }
                }
            }
        }
        self.remote.inbound.retain(|_, q| !q.is_empty());
        self.flush_sessions();
        done
    }

    /// A message from `qp` to `peer` (both of this process) finds no receive posted: it
    /// waits (for ever with an RNR retry count of 7), and fails with `RNR_RETRY_EXC_ERR`
    /// once the retries and the responder's RNR timer have run out.
    pub(super) fn rnr_wait(&mut self, qp: &Qp, peer: &Qp) -> Outcome {
        if qp.path.rnr_retry >= 7 {
            return Outcome::Later;
        }
        let since = self.rnr_clock(qp.qpn, qp.sq_ci);
        if since.elapsed() < rnr_timer(peer.path.min_rnr_timer) * (u32::from(qp.path.rnr_retry) + 1) {
            return Outcome::Later;
        }
        self.remote.rnr_since.remove(&qp.qpn);
        Outcome::Failed(syndrome::RNR_RETRY_EXC_ERR)
    }

    /// Since when the SQ WQE at `at` of QP `qpn` has waited for a receive (now, for a WQE
    /// that did not wait before).
    fn rnr_clock(&mut self, qpn: u32, at: u32) -> Instant {
        let e = self.remote.rnr_since.entry(qpn).or_insert((at, Instant::now()));
        if e.0 != at {
            *e = (at, Instant::now());
        }
        e.1
    }

    /// Writes the responder CQE of the request just served, if it left one.
    fn write_deferred(&mut self) {
        match self.remote.deferred.take() {
            Some(Deferred::Mlx5(fd, cq, e)) => self.complete(fd, cq, &e),
            Some(Deferred::Irdma(fd, h, cq, c)) => self.irdma_responder_cqe(fd, h, cq, &c),
            None => {}
        }
    }

    /// The QP numbered `qpn` in this process, on either device.
    pub(crate) fn find_local(&self, qpn: u32) -> Option<Local> {
        if let Some((fd, qp)) = self.find_qp(qpn) {
            return Some(Local::Mlx5(fd, qp));
        }
        let (fd, h) = self.find_irdma_qp(qpn)?;
        Some(Local::Irdma(fd, h, *self.contexts.get(&fd)?.qps.get(&h)?))
    }

    /// Takes in what the wire has brought and answers it, until it has been quiet for a
    /// while (at most 50 ms): before a QP goes, the requests that reached it are answered, as
    /// a NIC acknowledges what it received whether or not the program still polls (the
    /// peer's sends would otherwise fail for want of an acknowledgement).
    pub(crate) fn drain_wire(&mut self) {
        if !self.remote.wire.attached_here() {
            return;
        }
        let deadline = Instant::now() + Duration::from_millis(50);
        let mut quiet = 0;
        while quiet < 3 && Instant::now() < deadline {
            if self.wire_step() == 0 {
                quiet += 1;
                std::thread::sleep(Duration::from_micros(200));
            } else {
                quiet = 0;
            }
        }
    }

    /// Completes the in-flight WQE a reply answers.
    fn take_reply(&mut self, m: &Message) {
        let qpn = m.header.src_qpn;
        let Some(q) = self.remote.in_flight.get_mut(&qpn) else { return };
        // A reply to work already flushed (the QP went to the error state) is dropped.
        if q.front().is_none_or(|f| f.seq != m.header.seq) {
            return;
        }
        let Some(w) = q.pop_front() else { return };
        let Some(local) = self.find_local(qpn) else { return };
        let (fd, qp) = (local.fd(), *local.qp());
        let status = Status::from_wire(m.header.status);
        let mut local_err = None;
        if qp.state == QpState::Err {
            local_err = Some(syndrome::WR_FLUSH_ERR);
        } else if status == Status::Ok {
            if let Some(segs) = &w.read_into {
                let into = RecvWqe { index: 0, sges: segs.clone() };
                if let Err(s) = self.scatter(fd, qp.pd, &into, &m.payload) {
                    local_err = Some(s);
                }
            }
        }
        let s = match (local_err, status) {
            (Some(s), _) => s,
            (None, Status::Ok) => {
                if w.signaled {
                    match local {
                        Local::Mlx5(..) => {
                            let e = build::req(qpn, w.wqe_index, w.opcode, w.length).srqn_uidx(qp.wq.uidx);
                            self.complete(fd, qp.send_cq, &e);
                        }
                        Local::Irdma(_, h, _) => self.irdma_requester_cqe(fd, h, &qp, w.wqe_index, w.opcode),
                    }
                }
                return;
            }
            (None, st) => syndrome_of(st),
        };
        // The first in flight fails with the error, the rest flush.
        self.remote.in_flight.entry(qpn).or_default().push_front(w);
        self.fail_in_flight(qpn, s);
    }

    /// Writes the requester's error CQE of `w`.
    fn error_cqe(&mut self, fd: i32, qp: &Qp, w: &InFlight, s: u8) {
        let e = build::err(ErrSpec {
            requester: true,
            qpn: qp.qpn,
            wqe_counter: w.wqe_index,
            syndrome: s,
            wqe_opcode: w.opcode,
            srqn_uidx: qp.wq.uidx,
            ..ErrSpec::default()
        });
        self.complete(fd, qp.send_cq, &e);
    }

    /// Completes everything in flight on QP `qpn` with syndrome `first` for the first and a
    /// flush for the rest, and moves the QP to the error state.
    fn fail_in_flight(&mut self, qpn: u32, first: u8) {
        let Some(q) = self.remote.in_flight.remove(&qpn) else { return };
        match self.find_local(qpn) {
            Some(Local::Mlx5(fd, qp)) => {
                for (i, w) in q.iter().enumerate() {
                    self.error_cqe(fd, &qp, w, if i == 0 { first } else { syndrome::WR_FLUSH_ERR });
                }
                set_state(self, fd, qpn, QpState::Err);
            }
            // libirdma reports every WR it still counts outstanding from one flush CQE.
            Some(Local::Irdma(fd, h, qp)) => {
                if let Some(w) = q.front() {
                    self.irdma_requester_failed(fd, h, &qp, w.wqe_index, first);
                }
            }
            None => {}
        }
    }

    /// The peer holding `slot` went away: what was in flight to it fails.
    fn lose_peer(&mut self, slot: u32) {
        let hit: Vec<u32> =
            self.remote.in_flight.iter().filter(|(_, q)| q.iter().any(|w| w.slot == slot)).map(|(&n, _)| n).collect();
        for qpn in hit {
            self.fail_in_flight(qpn, syndrome::TRANSPORT_RETRY_EXC_ERR);
        }
    }

    /// Runs one request to a QP of this process: its reply (status, byte count, data), or
    /// `None` when it must wait.
    fn serve(&mut self, inb: &Inbound) -> Option<(Status, u32, Vec<u8>)> {
        let h = &inb.message.header;
        let data = &inb.message.payload;
        let Some(local) = self.find_local(h.dst_qpn) else { return Some((Status::NoQp, 0, Vec::new())) };
        let (pfd, peer) = (local.fd(), *local.qp());
        if h.flags & wire::FLAG_DATAGRAM != 0 {
            match local {
                Local::Mlx5(..) => self.take_datagram(pfd, &peer, h, data),
                Local::Irdma(_, ph, _) => self.irdma_take_datagram(pfd, ph, &peer, h, data),
            }
            return Some((Status::Ok, 0, Vec::new()));
        }
        match peer.state {
            QpState::Rtr | QpState::Rts | QpState::Sqd => {}
            QpState::Reset | QpState::Init if inb.since.elapsed() < NOT_READY_WAIT => return None,
            _ => return Some((Status::NoQp, 0, Vec::new())),
        }
        let Some(op) = Op::from_wire(h.op) else { return Some((Status::RemoteInvalid, 0, Vec::new())) };
        let mrs = |e: &Emulator| e.contexts.get(&pfd).map(|c| super::window::remote_regions(c, peer.qpn));
        if matches!(op, Op::CompareSwap | Op::FetchAdd) {
            let opcode = if op == Op::CompareSwap { wqe_opcode::ATOMIC_CS } else { wqe_opcode::ATOMIC_FA };
            let Some(a) = super::atomic::AtomicOp::parse(opcode, data) else {
                return Some((Status::RemoteInvalid, 0, Vec::new()));
            };
            let raddr = Raddr { addr: h.raddr, rkey: h.rkey };
            return Some(match super::atomic::respond(self, pfd, &peer, raddr, a) {
                Ok(old) => (Status::Ok, super::atomic::SIZE, old.to_vec()),
                Err(s) if s == syndrome::REMOTE_ACCESS_ERR => (Status::RemoteAccess, 0, Vec::new()),
                Err(s) if s == syndrome::REMOTE_INVAL_REQ_ERR => (Status::RemoteInvalid, 0, Vec::new()),
                Err(_) => (Status::RemoteOp, 0, Vec::new()),
            });
        }
        if op == Op::Read {
            let src =
                find_mr(mrs(self)?.iter(), peer.pd, h.rkey, h.raddr, h.length.into(), ACCESS_REMOTE_READ, |m| m.rkey);
            let Some(src) = src else { return Some((Status::RemoteAccess, 0, Vec::new())) };
            let mut out = vec![0u8; h.length as usize];
            // SAFETY: src..src+length lies in a registered region of this process (checked), live until DEREG_MR, which needs the lock this thread holds.
            unsafe { recv::read_mem(src, &mut out) };
            return Some((Status::Ok, h.length, out));
        }
        let recv = if op.consumes_receive() {
            let peeked = match local {
                Local::Mlx5(..) => self.peek_recv(pfd, &peer),
                Local::Irdma(_, ph, _) => self.irdma_peek_recv(pfd, ph).map(|w| (w, 0)),
            };
            match peeked {
                Some(r) => Some(r),
                None => {
                    let budget = rnr_timer(peer.path.min_rnr_timer) * (u32::from(h.rnr_retry) + 1);
                    if h.rnr_retry >= 7 || inb.since.elapsed() < budget {
                        return None;
                    }
                    return Some((Status::RnrExceeded, 0, Vec::new()));
                }
            }
        } else {
            None
        };
        if matches!(op, Op::Write | Op::WriteImm) {
            let dst =
                find_mr(mrs(self)?.iter(), peer.pd, h.rkey, h.raddr, data.len() as u64, ACCESS_REMOTE_WRITE, |m| {
                    m.rkey
                });
            let Some(dst) = dst else { return Some((Status::RemoteAccess, 0, Vec::new())) };
            // SAFETY: dst..dst+len lies in a registered region of this process (checked), live until DEREG_MR, which needs the lock this thread holds.
            unsafe { super::copy(data.as_ptr() as u64, dst, data.len()) };
        }
        let Some((wqe, next)) = recv else { return Some((Status::Ok, data.len() as u32, Vec::new())) };
        let landed = if op == Op::WriteImm { Ok(()) } else { self.scatter(pfd, peer.pd, &wqe, data) };
        let imm = if matches!(op, Op::SendImm | Op::SendInv | Op::WriteImm) { h.imm } else { 0 };
        let solicited = h.flags & wire::FLAG_SOLICITED != 0;
        self.remote.deferred = Some(match local {
            Local::Mlx5(..) => {
                self.take_recv(pfd, &peer, next);
                let resp_op = match op {
                    Op::WriteImm => cqe_opcode::RESP_WR_IMM,
                    Op::SendImm => cqe_opcode::RESP_SEND_IMM,
                    Op::SendInv => cqe_opcode::RESP_SEND_INV,
                    _ => cqe_opcode::RESP_SEND,
                };
                let e = match landed {
                    Ok(()) => build::resp(resp_op, peer.qpn, wqe.index, data.len() as u32, imm)
                        .srqn_uidx(peer.wq.uidx)
                        .solicited(solicited),
                    Err(s) => super::responder_error(&peer, wqe.index, s),
                };
                Deferred::Mlx5(pfd, peer.recv_cq, e)
            }
            Local::Irdma(_, ph, _) => {
                let c = self.irdma_take_recv(pfd, ph, &peer, op, imm, solicited, data.len() as u32, landed);
                Deferred::Irdma(pfd, ph, peer.recv_cq, c)
            }
        });
        if landed.is_ok() && op == Op::SendInv {
            if let Some(ctx) = self.contexts.get_mut(&pfd) {
                super::window::invalidate(ctx, peer.qpn, h.imm);
            }
        }
        Some(match landed {
            Ok(()) => (Status::Ok, data.len() as u32, Vec::new()),
            Err(s) => {
                set_state(self, pfd, peer.qpn, QpState::Err);
                let st = if s == syndrome::LOCAL_LENGTH_ERR { Status::RemoteInvalid } else { Status::RemoteOp };
                (st, 0, Vec::new())
            }
        })
    }
}

/// A GID as sysfs prints it (eight groups of four hex digits) in bytes.
fn gid_bytes(text: &str) -> [u8; 16] {
    let mut g = [0u8; 16];
    for (i, group) in text.split(':').take(8).enumerate() {
        let v = u16::from_str_radix(group, 16).unwrap_or(0);
        g[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rnr_timer_codes_follow_the_ib_table() {
        assert_eq!(rnr_timer(0), Duration::from_micros(655_360));
        assert_eq!(rnr_timer(12), Duration::from_micros(640));
        assert_eq!(rnr_timer(31), Duration::from_micros(491_520));
    }

    #[test]
    fn every_error_reply_is_an_error_syndrome() {
        for s in [Status::RemoteAccess, Status::RemoteInvalid, Status::RemoteOp, Status::RnrExceeded, Status::NoQp] {
            assert_ne!(syndrome_of(s), 0, "{s:?}");
        }
        assert_eq!(syndrome_of(Status::NoQp), syndrome::TRANSPORT_RETRY_EXC_ERR);
    }
}
