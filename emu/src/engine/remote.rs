//! The mlx5 device's side of the wire (`crate::wire`): work whose peer QP lives in another
//! process.
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
    /// The responder CQE of the request just run (context fd, CQ handle), written once its
    /// reply is sent: the CQE may end the responder's program, and with it the process.
    deferred: Option<(i32, u32, Entry)>,
}

/// A WQE sent to a peer, waiting for its reply.
#[derive(Debug)]
struct InFlight {
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
        let dest = wire::slot_of(qp.path.dest_qpn);
        if dest == 0 || dest == my_slot() {
            return None;
        }
        if self.remote.wire.slot().is_none() {
            self.remote.wire.attach(wire::process_slot()?.clone());
        }
        let busy = self.remote.in_flight.get(&qp.qpn).is_some_and(|q| !q.is_empty());
        // A local error must not overtake work in flight: it waits for the replies.
        let fail = |s| if busy { Outcome::Later } else { Outcome::Failed(s) };
        let Some(op) = op_of(ctrl.opcode) else { return Some(fail(syndrome::LOCAL_QP_OP_ERR)) };
        let mut h = Header {
            op: op as u8,
            flags: if ctrl.fm_ce_se & wqe::CTRL_SOLICITED != 0 { wire::FLAG_SOLICITED } else { 0 },
            dst_qpn: qp.path.dest_qpn,
            src_qpn: qp.qpn,
            imm: ctrl.imm,
            rnr_retry: qp.path.rnr_retry,
            ..Header::default()
        };
        if matches!(op, Op::Write | Op::WriteImm | Op::Read | Op::CompareSwap | Op::FetchAdd) {
            let r = Raddr::parse(&units[16..32]);
            (h.raddr, h.rkey) = (r.addr, r.rkey);
        }
        let (data, read_into) = if matches!(op, Op::CompareSwap | Op::FetchAdd) {
            // The atomic segment travels as it is; the reply's 8 bytes land in the entry.
            let into = match super::atomic::local_entry(g) {
                Ok(i) => i,
                Err(s) => return Some(fail(s)),
            };
            h.length = super::atomic::SIZE;
            let seg = units[super::atomic::SEG_AT..super::atomic::DATA_AT].to_vec();
            (seg, into.map(|w| w.sges))
        } else if op == Op::Read {
            let Gather::Segs(segs) = g else { return Some(fail(syndrome::LOCAL_QP_OP_ERR)) };
            h.length = g.len() as u32;
            (Vec::new(), Some(segs.clone()))
        } else {
            match self.gather(fd, qp.pd, g) {
                Ok(d) => (d, None),
                Err(s) => return Some(fail(s)),
            }
        };
        let length = if matches!(op, Op::Read | Op::CompareSwap | Op::FetchAdd) { h.length } else { data.len() as u32 };
        match self.remote.wire.request(dest, h, &data) {
            Ok(seq) => {
                self.remote.in_flight.entry(qp.qpn).or_default().push_back(InFlight {
                    seq,
                    slot: dest,
                    wqe_index: ctrl.wqe_index,
                    opcode: ctrl.opcode,
                    signaled: ctrl.signaled() || qp.sq_sig_all,
                    length,
                    read_into,
                });
                Some(Outcome::Sent)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Some(Outcome::Later),
            // The peer process is gone (or never was): as a fabric's retries running out.
            Err(_) => Some(fail(syndrome::TRANSPORT_RETRY_EXC_ERR)),
        }
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
        let dest = wire::slot_of(dqpn);
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
        Outcome::Done(len)
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
            Err(s) => build::err(ErrSpec {
                requester: false,
                qpn: peer.qpn,
                wqe_counter: wqe.index,
                syndrome: s,
                srqn_uidx: peer.wq.uidx,
                ..ErrSpec::default()
            }),
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
            match self.find_qp(qpn) {
                None => {
                    self.remote.in_flight.remove(&qpn);
                }
                Some((_, qp)) if qp.state == QpState::Err => {
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
                        if let Some((fd, cq, e)) = self.remote.deferred.take() {
                            self.complete(fd, cq, &e);
                        }
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
        let (at, since) = *self.remote.rnr_since.entry(qp.qpn).or_insert((qp.sq_ci, Instant::now()));
        let since = if at == qp.sq_ci {
            since
        } else {
            self.remote.rnr_since.insert(qp.qpn, (qp.sq_ci, Instant::now()));
            Instant::now()
        };
        if since.elapsed() < rnr_timer(peer.path.min_rnr_timer) * (u32::from(qp.path.rnr_retry) + 1) {
            return Outcome::Later;
        }
        self.remote.rnr_since.remove(&qp.qpn);
        Outcome::Failed(syndrome::RNR_RETRY_EXC_ERR)
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
        let Some((fd, qp)) = self.find_qp(qpn) else { return };
        let status = Status::from_wire(m.header.status);
        let mut local = None;
        if qp.state == QpState::Err {
            local = Some(syndrome::WR_FLUSH_ERR);
        } else if status == Status::Ok {
            if let Some(segs) = &w.read_into {
                let into = RecvWqe { index: 0, sges: segs.clone() };
                if let Err(s) = self.scatter(fd, qp.pd, &into, &m.payload) {
                    local = Some(s);
                }
            }
        }
        let s = match (local, status) {
            (Some(s), _) => s,
            (None, Status::Ok) => {
                if w.signaled {
                    let e = build::req(qpn, w.wqe_index, w.opcode, w.length).srqn_uidx(qp.wq.uidx);
                    self.complete(fd, qp.send_cq, &e);
                }
                return;
            }
            (None, st) => syndrome_of(st),
        };
        self.error_cqe(fd, &qp, &w, s);
        set_state(self, fd, qpn, QpState::Err);
        self.fail_in_flight(qpn, syndrome::WR_FLUSH_ERR);
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
        let Some((fd, qp)) = self.find_qp(qpn) else { return };
        for (i, w) in q.iter().enumerate() {
            self.error_cqe(fd, &qp, w, if i == 0 { first } else { syndrome::WR_FLUSH_ERR });
        }
        set_state(self, fd, qpn, QpState::Err);
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
        let Some((pfd, peer)) = self.find_qp(h.dst_qpn) else { return Some((Status::NoQp, 0, Vec::new())) };
        if h.flags & wire::FLAG_DATAGRAM != 0 {
            self.take_datagram(pfd, &peer, h, data);
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
            match self.peek_recv(pfd, &peer) {
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
        let (resp_op, landed) = match op {
            Op::WriteImm => (cqe_opcode::RESP_WR_IMM, Ok(())),
            _ => {
                let o = match op {
                    Op::SendImm => cqe_opcode::RESP_SEND_IMM,
                    Op::SendInv => cqe_opcode::RESP_SEND_INV,
                    _ => cqe_opcode::RESP_SEND,
                };
                (o, self.scatter(pfd, peer.pd, &wqe, data))
            }
        };
        self.take_recv(pfd, &peer, next);
        if landed.is_ok() && op == Op::SendInv {
            if let Some(ctx) = self.contexts.get_mut(&pfd) {
                super::window::invalidate(ctx, peer.qpn, h.imm);
            }
        }
        let imm = if matches!(op, Op::SendImm | Op::SendInv | Op::WriteImm) { h.imm } else { 0 };
        let e = match landed {
            Ok(()) => build::resp(resp_op, peer.qpn, wqe.index, data.len() as u32, imm)
                .srqn_uidx(peer.wq.uidx)
                .solicited(h.flags & wire::FLAG_SOLICITED != 0),
            Err(s) => build::err(ErrSpec {
                requester: false,
                qpn: peer.qpn,
                wqe_counter: wqe.index,
                syndrome: s,
                srqn_uidx: peer.wq.uidx,
                ..ErrSpec::default()
            }),
        };
        self.remote.deferred = Some((pfd, peer.recv_cq, e));
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
