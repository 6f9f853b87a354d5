//! The device side: a thread that watches the doorbell records libmlx5 writes, executes the
//! WQEs it posted from its own SQ buffer, and writes CQEs, built with the mlx5 model's CQE
//! builders, into libmlx5's own CQ ring, where the real `ibv_poll_cq` (or dvcq's direct
//! poller) finds them.
//!
//! Executed so far, between RC (and UC) QPs of this process: SEND, SEND with immediate and
//! with invalidate (into the peer's RQ or SRQ), RDMA WRITE and WRITE with immediate, RDMA
//! READ, compare-and-swap and fetch-and-add (`engine/atomic.rs`), each with lkey and rkey
//! checks (through memory windows too), scatter/gather or inline; memory-window binds and
//! invalidations (`engine/window.rs`). A message with no receive
//! posted waits for one, until its RNR retries run out (for ever with 7). An access or
//! length error gives an error CQE and moves the QP to the error state; a QP in the error
//! state flushes what is posted (send and receive) with `WR_FLUSH_ERR`. Any other opcode
//! completes with a local QP operation error, named once on standard error.
//!
//! Arms and events: the device watches each CQ's arm word in the doorbell record (seeded
//! with a sentinel at creation, since libmlx5's first arm writes the zero it started from)
//! and, for an armed CQ with a completion channel, queues one completion event once a CQE
//! the arm asks for is past the consumer index the arm was made at (at once if one already
//! is). A CQE that finds the ring full overruns the CQ: it goes to the error state, takes no
//! more CQEs, and `IBV_EVENT_CQ_ERR` goes to the context's async fd.

use crate::emulator::{self, Emulator};
use crate::objects::{Cq, Device, Mr, Qp, QpState};
use crate::recv::{self, load_be32, RecvWqe};
use crate::wqe::{self, Ctrl, Gather, Raddr};
use dvcq_mlx5_dv::model::build::{self, Entry, ErrSpec};
use dvcq_uapi::mlx5::opcode::{cqe_opcode, syndrome, wqe_opcode};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::time::Duration;

pub(crate) mod atomic;
pub(crate) mod compress;
pub(crate) mod remote;
pub(crate) mod window;

static STARTED: AtomicBool = AtomicBool::new(false);

/// What the device writes into a new CQ's arm word, so that any arm changes it.
pub const ARM_SENTINEL: u32 = 0xffff_ffff;
/// `IBV_EVENT_CQ_ERR`.
const EVENT_CQ_ERR: u32 = 0;
/// The arm word's solicited-only command bit (`MLX5_CQ_DB_REQ_NOT_SOL`).
const ARM_SOLICITED: u32 = 1 << 24;

/// Seeds a new CQ's arm word (the doorbell record's second word) with [`ARM_SENTINEL`].
///
/// # Safety
///
/// `dbrec` is a live, 4-byte aligned CQ doorbell record of two words.
pub unsafe fn seed_arm_word(dbrec: u64) {
    // SAFETY: the caller guarantees the record; word [1] is the arm word.
    unsafe { AtomicU32::from_ptr((dbrec + 4) as usize as *mut u32) }.store(ARM_SENTINEL.to_be(), Ordering::Release);
}

/// Starts the device thread, once per process.
pub fn start() {
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let spawned = std::thread::Builder::new().name("dvcq-emu-device".into()).spawn(|| {
        let mut idle = 0u32;
        loop {
            if emulator::with(|e| e.step() + e.step_irdma()) > 0 {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            // A short spin (the CPU kept), then a wait that a message on the wire ends: a
            // yield would hand the core to whatever else runs for a whole time slice.
            if idle < 64 {
                std::hint::spin_loop();
            } else {
                remote::idle_wait(Duration::from_micros(50));
            }
        }
    });
    if let Err(e) = spawned {
        eprintln!("dvcq-emu: cannot start the device thread ({e}); posted work will not execute");
    }
}

/// Copies `len` bytes from `src` to `dst` in the application's memory.
///
/// # Safety
///
/// Both ranges are live memory of registered regions (or the provider's rings) the caller
/// checked; they may overlap (a loopback write within one region).
pub(crate) unsafe fn copy(src: u64, dst: u64, len: usize) {
    // SAFETY: as the caller guarantees; `copy` allows overlap.
    unsafe { std::ptr::copy(src as usize as *const u8, dst as usize as *mut u8, len) };
}

/// What executing one WQE came to.
enum Outcome {
    /// Done; `byte_cnt` for its CQE.
    Done(u32),
    /// Failed with this CQE syndrome: the QP goes to the error state.
    Failed(u8),
    /// Cannot run yet (no receive posted at the peer, or a CQ full): nothing consumed.
    Later,
    /// Sent to the peer's process: consumed, its CQE comes with the reply.
    Sent,
}

/// `IBV_ACCESS_LOCAL_WRITE`, `_REMOTE_WRITE`, `_REMOTE_READ`.
const ACCESS_LOCAL_WRITE: u32 = 1;
const ACCESS_REMOTE_READ: u32 = 4;

impl Emulator {
    /// One pass over every QP: executes or flushes what was posted since the last pass.
    /// Returns how many WQEs it consumed.
    pub fn step(&mut self) -> u32 {
        let wired = self.wire_step();
        let mut work = Vec::new();
        for (&fd, ctx) in self.contexts.iter().filter(|(_, c)| c.device == Device::Mlx5) {
            for (&h, qp) in &ctx.qps {
                if matches!(qp.state, QpState::Rts | QpState::Err) {
                    work.push((fd, h));
                }
            }
        }
        let done: u32 = work.into_iter().map(|(fd, h)| self.step_qp(fd, h)).sum();
        // A pass of work ends what compressed CQEs it began: the sessions reach the rings.
        self.flush_sessions();
        self.step_arms();
        done + wired
    }

    /// Takes new arms from the CQs' doorbell records and fires the completion events they
    /// are owed.
    fn step_arms(&mut self) {
        use crate::events::Owner;
        let mut fire = Vec::new();
        for (&fd, ctx) in self.contexts.iter_mut().filter(|(_, c)| c.device == Device::Mlx5) {
            for (&h, cq) in ctx.cqs.iter_mut() {
                let Some(channel) = cq.channel else { continue };
                // SAFETY: the CQ's doorbell record, live until DESTROY_CQ, which needs the lock this thread holds; word [1] is the arm word.
                let word = unsafe { load_be32(cq.dbrec + 4) };
                if word != cq.arm_seen {
                    cq.arm_seen = word;
                    cq.armed = Some((word & ARM_SOLICITED != 0, word & 0xff_ffff));
                }
                let Some((solicited, ci)) = cq.armed else { continue };
                let upto = if solicited { cq.notify_pi } else { cq.pi };
                let ahead = upto.wrapping_sub(ci) & 0xff_ffff;
                if ahead != 0 && ahead <= cq.ncqe {
                    cq.armed = None;
                    fire.push((channel, cq.user_handle, Owner::Cq(fd, h)));
                }
            }
        }
        for (channel, handle, owner) in fire {
            if let Some(ch) = self.events.get_mut(&channel) {
                ch.push(bytemuck::bytes_of(&crate::abi::CompEventDesc { cq_handle: handle }), owner);
            }
        }
    }

    fn step_qp(&mut self, fd: i32, h: u32) -> u32 {
        let Some(qp) = self.contexts.get(&fd).and_then(|c| c.qps.get(&h)).copied() else { return 0 };
        let mut done = 0;
        if qp.wq.sq_wqe_count > 0 {
            // SAFETY: the QP's doorbell record, recorded at CREATE_QP and live until DESTROY_QP, which needs the lock this thread holds; word [1] is the SQ's.
            let posted = unsafe { load_be32(qp.wq.dbrec + 4) } & 0xffff;
            while (qp_now(self, fd, h).map(|q| q.sq_ci).unwrap_or(posted) & 0xffff) != posted {
                let Some(q) = qp_now(self, fd, h) else { break };
                if !self.one_send(fd, h, q) {
                    break;
                }
                done += 1;
            }
        }
        if qp.state == QpState::Err && qp.srq.is_none() && qp.wq.rq_wqe_count > 0 {
            // SAFETY: as above; word [0] is the RQ's.
            let posted = unsafe { load_be32(qp.wq.dbrec) } & 0xffff;
            while let Some(q) = qp_now(self, fd, h).filter(|q| q.rq_ci & 0xffff != posted) {
                let spec = ErrSpec {
                    requester: false,
                    qpn: q.qpn,
                    wqe_counter: q.rq_ci as u16,
                    syndrome: syndrome::WR_FLUSH_ERR,
                    srqn_uidx: q.wq.uidx,
                    ..ErrSpec::default()
                };
                self.complete(fd, q.recv_cq, &build::err(spec));
                if let Some(q) = qp_mut(self, fd, h) {
                    q.rq_ci = q.rq_ci.wrapping_add(1);
                }
                done += 1;
            }
        }
        done
    }

    /// Executes (or, in the error state, flushes) the SQ WQE at the QP's consumer index.
    /// False when it cannot run yet (its message waits for a receive): nothing consumed.
    fn one_send(&mut self, fd: i32, h: u32, qp: Qp) -> bool {
        let (units, ctrl) = read_wqe(&qp);
        let outcome = if qp.state == QpState::Err {
            Outcome::Failed(syndrome::WR_FLUSH_ERR)
        } else {
            self.execute(fd, &qp, &ctrl, &units)
        };
        let cqe: Option<Entry> = match outcome {
            Outcome::Later => return false,
            Outcome::Sent => None,
            Outcome::Done(n) if ctrl.signaled() || qp.sq_sig_all => {
                Some(build::req(qp.qpn, ctrl.wqe_index, ctrl.opcode, n).srqn_uidx(qp.wq.uidx))
            }
            Outcome::Done(_) => None,
            Outcome::Failed(s) => Some(build::err(ErrSpec {
                requester: true,
                qpn: qp.qpn,
                wqe_counter: ctrl.wqe_index,
                syndrome: s,
                wqe_opcode: ctrl.opcode,
                srqn_uidx: qp.wq.uidx,
                ..ErrSpec::default()
            })),
        };
        if let Some(e) = &cqe {
            self.complete(fd, qp.send_cq, e);
        }
        if let Some(q) = qp_mut(self, fd, h) {
            q.sq_ci = q.sq_ci.wrapping_add(ctrl.wqebbs());
            if matches!(outcome, Outcome::Failed(_)) {
                q.state = QpState::Err;
            }
        }
        true
    }

    /// Executes one WQE of an RTS QP.
    fn execute(&mut self, fd: i32, qp: &Qp, ctrl: &Ctrl, units: &[u8]) -> Outcome {
        let op = ctrl.opcode;
        let rdma = matches!(op, wqe_opcode::RDMA_WRITE | wqe_opcode::RDMA_WRITE_IMM | wqe_opcode::RDMA_READ);
        let send = matches!(op, wqe_opcode::SEND | wqe_opcode::SEND_IMM | wqe_opcode::SEND_INVAL);
        let atomic = matches!(op, wqe_opcode::ATOMIC_CS | wqe_opcode::ATOMIC_FA);
        if op == wqe_opcode::UMR && qp.qp_type != crate::objects::QpType::Ud {
            // A memory window's bind or invalidation: the device's own work, nothing sent.
            if let Some(o) = self.remote_busy(qp) {
                return o;
            }
            return self.umr(fd, qp, ctrl, units);
        }
        if !rdma && !send && !atomic {
            warn_once(op);
            return Outcome::Failed(syndrome::LOCAL_QP_OP_ERR);
        }
        if qp.qp_type == crate::objects::QpType::Ud {
            return self.datagram(fd, qp, ctrl, units);
        }
        // ctrl, then the remote address for RDMA (and the atomic segment), then the data.
        let data_at = if atomic {
            atomic::DATA_AT
        } else if rdma {
            32
        } else {
            16
        };
        // Only the WQE's own units: what follows them in the ring is an older WQE's.
        let end = (usize::from(ctrl.ds) * 16).clamp(data_at, units.len());
        let Ok(gather) = Gather::parse(&units[data_at..end]) else {
            return Outcome::Failed(syndrome::LOCAL_LENGTH_ERR);
        };
        if let Some(o) = self.remote_send(fd, qp, ctrl, units, &gather) {
            return o;
        }
        let Some((peer_fd, peer)) = self.find_qp(qp.path.dest_qpn) else {
            return Outcome::Failed(syndrome::REMOTE_OP_ERR);
        };
        if !matches!(peer.state, QpState::Rtr | QpState::Rts) {
            return Outcome::Failed(syndrome::REMOTE_OP_ERR);
        }
        if atomic {
            return self.atomic_local(fd, qp, (peer_fd, &peer), op, units, &gather);
        }
        if op == wqe_opcode::RDMA_READ {
            return self.rdma_read(fd, qp, (peer_fd, &peer), Raddr::parse(&units[16..32]), &gather);
        }
        let data = match self.gather(fd, qp.pd, &gather) {
            Ok(d) => d,
            Err(s) => return Outcome::Failed(s),
        };
        let imm = matches!(op, wqe_opcode::RDMA_WRITE_IMM | wqe_opcode::SEND_IMM | wqe_opcode::SEND_INVAL);
        // A message that consumes a receive needs one posted, and room for its CQE.
        let mut recv = None;
        if send || op == wqe_opcode::RDMA_WRITE_IMM {
            match self.peek_recv(peer_fd, &peer) {
                Some(r) => recv = Some(r),
                None => return self.rnr_wait(qp, &peer),
            }
        }
        if rdma {
            let raddr = Raddr::parse(&units[16..32]);
            let Some(ctx) = self.contexts.get(&peer_fd) else { return Outcome::Failed(syndrome::REMOTE_OP_ERR) };
            let found = find_mr(
                window::remote_regions(ctx, peer.qpn).iter(),
                peer.pd,
                raddr.rkey,
                raddr.addr,
                data.len() as u64,
                ACCESS_REMOTE_WRITE,
                |m| m.rkey,
            );
            let Some(dst) = found else { return Outcome::Failed(syndrome::REMOTE_ACCESS_ERR) };
            // SAFETY: dst..dst+len lies in a registered region of the peer (directly or under a bound window, whose region remote_regions checks is still registered; checked above), live until DEREG_MR, which needs the lock this thread holds.
            unsafe { copy(data.as_ptr() as u64, dst, data.len()) };
        }
        let Some((wqe, next)) = recv else { return Outcome::Done(data.len() as u32) };
        // The responder: the message lands in the receive's entries (an RDMA WRITE with
        // immediate carries none), and its CQE goes to the peer's receive CQ.
        let (resp_op, landed) = match op {
            wqe_opcode::RDMA_WRITE_IMM => (cqe_opcode::RESP_WR_IMM, Ok(())),
            _ => {
                let o = match op {
                    wqe_opcode::SEND_IMM => cqe_opcode::RESP_SEND_IMM,
                    wqe_opcode::SEND_INVAL => cqe_opcode::RESP_SEND_INV,
                    _ => cqe_opcode::RESP_SEND,
                };
                (o, self.scatter(peer_fd, peer.pd, &wqe, &data))
            }
        };
        self.take_recv(peer_fd, &peer, next);
        if landed.is_ok() && op == wqe_opcode::SEND_INVAL {
            if let Some(ctx) = self.contexts.get_mut(&peer_fd) {
                window::invalidate(ctx, peer.qpn, ctrl.imm);
            }
        }
        let e = match landed {
            Ok(()) => {
                let imm_word = if imm { ctrl.imm } else { 0 };
                build::resp(resp_op, peer.qpn, wqe.index, data.len() as u32, imm_word)
                    .srqn_uidx(peer.wq.uidx)
                    .solicited(ctrl.fm_ce_se & wqe::CTRL_SOLICITED != 0)
            }
            Err(s) => responder_error(&peer, wqe.index, s),
        };
        self.complete(peer_fd, peer.recv_cq, &e);
        match landed {
            Ok(()) => Outcome::Done(data.len() as u32),
            // The responder's NAK: a message longer than the receive is an invalid request,
            // a bad key a remote operation error.
            Err(s) => {
                set_state(self, peer_fd, peer.qpn, QpState::Err);
                Outcome::Failed(if s == syndrome::LOCAL_LENGTH_ERR {
                    syndrome::REMOTE_INVAL_REQ_ERR
                } else {
                    syndrome::REMOTE_OP_ERR
                })
            }
        }
    }

    /// The bytes a WQE sends: its inline data, or its entries read from regions of `pd`.
    pub(crate) fn gather(&self, fd: i32, pd: u32, g: &Gather) -> Result<Vec<u8>, u8> {
        let segs = match g {
            Gather::Inline(d) => return Ok(d.clone()),
            Gather::Segs(s) => s,
        };
        let ctx = self.contexts.get(&fd).ok_or(syndrome::LOCAL_QP_OP_ERR)?;
        let mut data = Vec::with_capacity(g.len() as usize);
        for &(addr, len, lkey) in segs {
            let host =
                find_mr(ctx.mrs.values(), pd, lkey, addr, len.into(), 0, |m| m.lkey).ok_or(syndrome::LOCAL_PROT_ERR)?;
            let at = data.len();
            data.resize(at + len as usize, 0);
            // SAFETY: host..host+len lies in a registered region (checked), live until DEREG_MR, which needs the lock this thread holds.
            unsafe { recv::read_mem(host, &mut data[at..]) };
        }
        Ok(data)
    }

    /// Writes `data` into the entries of receive `wqe`, in regions of `pd` that allow local
    /// writes.
    pub(crate) fn scatter(&self, fd: i32, pd: u32, wqe: &RecvWqe, data: &[u8]) -> Result<(), u8> {
        let room: u64 = wqe.sges.iter().map(|&(_, l, _)| u64::from(l)).sum();
        if room < data.len() as u64 {
            return Err(syndrome::LOCAL_LENGTH_ERR);
        }
        let ctx = self.contexts.get(&fd).ok_or(syndrome::LOCAL_QP_OP_ERR)?;
        let mut rest = data;
        let mut dsts = Vec::new();
        for &(addr, len, lkey) in &wqe.sges {
            if rest.is_empty() {
                break;
            }
            let n = rest.len().min(len as usize);
            let host = find_mr(ctx.mrs.values(), pd, lkey, addr, n as u64, ACCESS_LOCAL_WRITE, |m| m.lkey)
                .ok_or(syndrome::LOCAL_PROT_ERR)?;
            dsts.push((host, &rest[..n]));
            rest = &rest[n..];
        }
        for (host, part) in dsts {
            // SAFETY: host..host+len lies in a registered, locally writable region (checked), live until DEREG_MR, which needs the lock this thread holds.
            unsafe { copy(part.as_ptr() as u64, host, part.len()) };
        }
        Ok(())
    }

    /// The receive a message to `peer` would consume, and (for an SRQ) the SRQ's next head.
    fn peek_recv(&self, peer_fd: i32, peer: &Qp) -> Option<(RecvWqe, u32)> {
        match peer.srq {
            Some(s) => {
                let srq = self.contexts.get(&peer_fd)?.srqs.get(&s)?;
                // SAFETY: the SRQ exists under the lock this thread holds: its buffer and doorbell record are live.
                unsafe { recv::peek_srq(srq) }
            }
            // SAFETY: the peer QP exists under the lock this thread holds.
            None => unsafe { recv::peek_rq(peer) }.map(|w| (w, 0)),
        }
    }

    /// Consumes the receive [`Self::peek_recv`] returned.
    fn take_recv(&mut self, peer_fd: i32, peer: &Qp, next: u32) {
        let Some(ctx) = self.contexts.get_mut(&peer_fd) else { return };
        match peer.srq {
            Some(s) => {
                if let Some(srq) = ctx.srqs.get_mut(&s) {
                    srq.head = next;
                    srq.consumed = srq.consumed.wrapping_add(1);
                }
            }
            None => {
                if let Some(q) = ctx.qps.values_mut().find(|q| q.qpn == peer.qpn) {
                    q.rq_ci = q.rq_ci.wrapping_add(1);
                }
            }
        }
    }

    /// RDMA READ: the peer's region (which must allow remote reads) into the local entries.
    fn rdma_read(&mut self, fd: i32, qp: &Qp, peer: (i32, &Qp), raddr: Raddr, g: &Gather) -> Outcome {
        let Gather::Segs(segs) = g else { return Outcome::Failed(syndrome::LOCAL_QP_OP_ERR) };
        let len = g.len();
        let Some(pctx) = self.contexts.get(&peer.0) else { return Outcome::Failed(syndrome::REMOTE_OP_ERR) };
        let regions = window::remote_regions(pctx, peer.1.qpn);
        let found = find_mr(regions.iter(), peer.1.pd, raddr.rkey, raddr.addr, len, ACCESS_REMOTE_READ, |m| m.rkey);
        let Some(src) = found else { return Outcome::Failed(syndrome::REMOTE_ACCESS_ERR) };
        let mut data = vec![0u8; len as usize];
        // SAFETY: src..src+len lies in a registered region of the peer (directly or under a bound window whose region is still registered; checked), live until DEREG_MR, which needs the lock this thread holds.
        unsafe { recv::read_mem(src, &mut data) };
        let wqe = RecvWqe { index: 0, sges: segs.clone() };
        match self.scatter(fd, qp.pd, &wqe, &data) {
            Ok(()) => Outcome::Done(len as u32),
            Err(s) => Outcome::Failed(s),
        }
    }

    /// The QP numbered `qpn` in this process, and its context fd.
    fn find_qp(&self, qpn: u32) -> Option<(i32, Qp)> {
        self.contexts
            .iter()
            .filter(|(_, c)| c.device == Device::Mlx5)
            .find_map(|(&fd, c)| c.qps.values().find(|q| q.qpn == qpn).map(|q| (fd, *q)))
    }

    /// Writes `e` into CQ `cq_handle`'s ring at its producer index, the owner bit last.
    /// A full ring overruns the CQ instead: it goes to the error state (no more CQEs) and
    /// `IBV_EVENT_CQ_ERR` about it goes to the context's async fd.
    fn complete(&mut self, fd: i32, cq_handle: u32, e: &Entry) {
        // A good CQE carries the device clock at completion (the core clock's cycles); an
        // error CQE has its syndromes where the timestamp would be.
        let op = e.cqe.op_own >> 4;
        let error = op == cqe_opcode::REQ_ERR || op == cqe_opcode::RESP_ERR;
        let e = if error { *e } else { e.timestamp(crate::mlx5::cycles_now()) };
        if !self.compress(fd, cq_handle, &e) {
            self.put(fd, cq_handle, &e);
        }
    }

    /// Writes `e` as it is at the CQ's producer index, or overruns the CQ (as
    /// [`Self::complete`] says).
    fn put(&mut self, fd: i32, cq_handle: u32, e: &Entry) {
        use crate::events::Owner;
        let Some(ctx) = self.contexts.get_mut(&fd) else { return };
        let async_fd = ctx.async_fd;
        let Some(cq) = ctx.cqs.get_mut(&cq_handle) else { return };
        if cq.overrun {
            return;
        }
        // SAFETY: the CQ's doorbell record, live until DESTROY_CQ (which needs this lock and is refused while a QP uses the CQ); word [0] is the consumer index.
        let ci = unsafe { load_be32(cq.dbrec) } & 0xff_ffff;
        if cq.pi.wrapping_sub(ci) & 0xff_ffff >= cq.ncqe {
            cq.overrun = true;
            let ev = crate::abi::AsyncEventDesc { element: cq.user_handle, event_type: EVENT_CQ_ERR, reserved: 0 };
            if let Some(ch) = async_fd.and_then(|a| self.events.get_mut(&a)) {
                ch.push(bytemuck::bytes_of(&ev), Owner::Cq(fd, cq_handle));
            }
            return;
        }
        let op = e.cqe.op_own >> 4;
        let error = op == cqe_opcode::REQ_ERR || op == cqe_opcode::RESP_ERR;
        // SAFETY: write_cqe's contract: the CQ's ring as libmlx5 allocated it, live until DESTROY_CQ; the slot is one the poller has consumed (checked above).
        unsafe { write_cqe(cq, e) };
        cq.pi = cq.pi.wrapping_add(1);
        if e.cqe.op_own & 0x02 != 0 || error {
            cq.notify_pi = cq.pi;
        }
    }
}

const ACCESS_REMOTE_WRITE: u32 = 2;

/// The host address of `[addr, addr + len)` in the region of `pd` whose key (`key_of`) is
/// `key` and whose access has every bit of `need`.
pub(crate) fn find_mr<'a>(
    mrs: impl Iterator<Item = &'a Mr>,
    pd: u32,
    key: u32,
    addr: u64,
    len: u64,
    need: u32,
    key_of: impl Fn(&Mr) -> u32,
) -> Option<u64> {
    mrs.filter(|m| key_of(m) == key && m.pd == pd && m.access & need == need).find_map(|m| {
        let off = addr.checked_sub(m.iova)?;
        (off.checked_add(len)? <= m.length).then_some(m.start + off)
    })
}

/// Sets the state of QP `qpn` of context `fd`.
fn set_state(e: &mut Emulator, fd: i32, qpn: u32, state: QpState) {
    if let Some(q) = e.contexts.get_mut(&fd).and_then(|c| c.qps.values_mut().find(|q| q.qpn == qpn)) {
        q.state = state;
    }
}

fn qp_now(e: &Emulator, fd: i32, h: u32) -> Option<Qp> {
    e.contexts.get(&fd).and_then(|c| c.qps.get(&h)).copied()
}

fn qp_mut(e: &mut Emulator, fd: i32, h: u32) -> Option<&mut Qp> {
    e.contexts.get_mut(&fd).and_then(|c| c.qps.get_mut(&h))
}

/// The WQE at the QP's SQ consumer index as bytes (wrapped at the ring's end), at most the
/// largest WQE (`max_sq_desc_sz`), and its control segment.
fn read_wqe(qp: &Qp) -> (Vec<u8>, Ctrl) {
    let ring = u64::from(qp.wq.sq_wqe_count) * wqe::WQEBB as u64;
    let base = qp.wq.buf + (u64::from(qp.wq.rq_wqe_count) << qp.wq.rq_wqe_shift);
    let start = u64::from(qp.sq_ci & (qp.wq.sq_wqe_count - 1)) * wqe::WQEBB as u64;
    let mut first = [0u8; 16];
    // SAFETY: the SQ lies in the provider's QP buffer recorded at CREATE_QP (RQ first, SQ after it), live until DESTROY_QP, which needs the lock this thread holds; `start` is inside the ring.
    unsafe { copy(base + start, first.as_mut_ptr() as u64, 16) };
    let ctrl = Ctrl::parse(&first);
    // At least the three fixed units an RDMA WQE reads, at most 512 bytes.
    let len = (usize::from(ctrl.ds) * 16).clamp(48, 512);
    let mut units = vec![0u8; len];
    for (k, chunk) in units.chunks_mut(16).enumerate() {
        let off = (start + k as u64 * 16) % ring;
        // SAFETY: as above; `off` is inside the ring and 16-byte aligned, so 16 bytes fit.
        unsafe { copy(base + off, chunk.as_mut_ptr() as u64, chunk.len()) };
    }
    (units, ctrl)
}

/// Writes `e` at the CQ's producer index: the body first, then `op_own` with the owner bit
/// of this pass through the ring, with release ordering, as the device's DMA lands.
///
/// # Safety
///
/// `cq.buf` is the live ring of `cq.ncqe` entries of `cq.cqe_size` bytes libmlx5 allocated,
/// and the slot at `cq.pi` is one its poller has consumed.
pub(crate) unsafe fn write_cqe(cq: &Cq, e: &Entry) {
    let slot = cq.buf + u64::from(cq.pi & (cq.ncqe - 1)) * u64::from(cq.cqe_size);
    // The 64-byte CQE is the last 64 bytes of a 128-byte entry.
    let cqe_at = slot + u64::from(cq.cqe_size) - 64;
    if cq.cqe_size == 128 {
        // SAFETY: the entry's first half, inside the slot.
        unsafe { copy(e.first_half.as_ptr() as u64, slot, 64) };
    }
    let bytes: [u8; 64] = bytemuck::cast(e.cqe);
    // SAFETY: the CQE's first 63 bytes, inside the slot.
    unsafe { copy(bytes.as_ptr() as u64, cqe_at, 63) };
    let owner = ((cq.pi >> cq.ncqe.trailing_zeros()) & 1) as u8;
    let op_own = (bytes[63] & !1) | owner;
    // SAFETY: the CQE's last byte, inside the slot; the poller reads it as a byte.
    unsafe { AtomicU8::from_ptr((cqe_at + 63) as usize as *mut u8) }.store(op_own, Ordering::Release);
}

/// Names an opcode the device does not execute yet, once per opcode.
fn warn_once(op: u8) {
    static SEEN: [AtomicBool; 256] = [const { AtomicBool::new(false) }; 256];
    if !SEEN[usize::from(op)].swap(true, Ordering::Relaxed) {
        eprintln!(
            "dvcq-emu: mlx5 WQE opcode {op:#04x} is not emulated yet; it completes with a local QP operation error"
        );
    }
}

/// The error CQE of a receive on `peer`, WQE `wqe_counter`, that failed with `syndrome`.
pub(crate) fn responder_error(peer: &Qp, wqe_counter: u16, syndrome: u8) -> Entry {
    build::err(ErrSpec {
        requester: false,
        qpn: peer.qpn,
        wqe_counter,
        syndrome,
        srqn_uidx: peer.wq.uidx,
        ..ErrSpec::default()
    })
}
