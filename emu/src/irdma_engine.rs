//! The E810's device side, run by the device thread beside the ConnectX's: it scans each
//! irdma QP's SQ in libirdma's own buffer for WQEs whose valid bit is the pass's polarity
//! (the SQ has no producer counter in memory and the doorbell page only names a QP, so the
//! ring itself is what tells), executes them (SEND, SEND with immediate, with invalidate and
//! solicited, RDMA WRITE and WRITE with immediate, RDMA READ, after lkey and rkey checks,
//! scatter/gather or inline; UD SENDs through address handles) as the wire's requests, to a
//! peer QP in this process or another (`wire`: the responder and the RNR retries are the
//! ConnectX's), takes receives from the peer's RQ the same way as the SQ (it has no doorbell
//! at all), and writes CQEs, built with the E810
//! model's CQE builders (`dvcq-e810-dv`), into libirdma's CQ ring: the extension slot of an
//! immediate first, then the body, then qword 3 with the valid bit of its slot's pass.
//!
//! Errors and flushes as libirdma reads them: one flush CQE a queue (major 1), which
//! libirdma keeps in place and reports every outstanding WR from, the first with the CQE's
//! minor code (`FLUSH_REM_ACCESS_ERR` and the like) and the rest as `WR_FLUSH_ERR`. A QP in
//! the error state takes what is posted to it without executing it and, once libirdma has
//! consumed the last flush CQE of that queue, writes a new one.
//!
//! Arms: the device watches the arm word in each CQ's shadow area (libirdma bumps its
//! 2-bit sequence number on every arm) and queues a completion event once a CQE the arm
//! asks for (any, or solicited and error ones) is past the consumer's head at the arm. A
//! CQE that finds no room (one slot always stays free: the head has no wrap bit) overruns
//! the CQ: it takes no more CQEs and `IBV_EVENT_CQ_ERR` goes to the async fd.

use crate::emulator::Emulator;
use crate::engine::remote::Posted;
use crate::events::Owner;
use crate::irdma::{IrdmaCq, IrdmaQp, CQE_SIZE};
use crate::irdma_wqe::{self, op, SqWqe};
use crate::objects::{Device, Qp, QpState, QpType};
use crate::recv::{read_mem, RecvWqe};
use crate::wire::Op;
use dvcq_e810_dv::model::ModelCqe;
use dvcq_uapi::irdma::codes::flush;
use dvcq_uapi::mlx5::opcode::syndrome;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

mod wire;

/// `IRDMA_CQ_DBSA_ARM_NEXT`: the arm asks for any completion (clear: solicited only).
const ARM_NEXT: u64 = 1 << 14;
/// `IRDMA_CQ_DBSA_CQEIDX`: the consumer's head in shadow word 0.
const CQEIDX_MASK: u64 = 0xf_ffff;
/// `IRDMA_DB_CQ_OFFSET`: where in the doorbell page libirdma writes a CQ id to arm it.
const DB_CQ_OFFSET: usize = 64;
/// `IBV_EVENT_CQ_ERR`.
const EVENT_CQ_ERR: u32 = 0;
/// WQEs one QP may execute in one pass, so that one busy QP does not starve the others.
const BURST: u32 = 64;

/// Loads a little-endian 64-bit word of the application's memory with acquire ordering.
///
/// # Safety
///
/// `addr` is a live, 8-byte aligned word of a ring, shadow area or WQE libirdma registered.
pub unsafe fn load_le64(addr: u64) -> u64 {
    // SAFETY: the caller guarantees an aligned, live word; libirdma writes such words with 64-bit stores.
    u64::from_le(unsafe { AtomicU64::from_ptr(addr as usize as *mut u64) }.load(Ordering::Acquire))
}

/// Stores a little-endian 64-bit word with release ordering (a valid bit last).
///
/// # Safety
///
/// As for [`load_le64`], and the word is the device's to write (a CQ slot libirdma has
/// consumed).
unsafe fn store_le64(addr: u64, v: u64) {
    // SAFETY: as the caller guarantees.
    unsafe { AtomicU64::from_ptr(addr as usize as *mut u64) }.store(v.to_le(), Ordering::Release);
}

/// Writes three little-endian qwords.
///
/// # Safety
///
/// As for [`store_le64`], for 24 bytes.
unsafe fn write_body(addr: u64, w: [u64; 3]) {
    for (i, q) in w.iter().enumerate() {
        // SAFETY: as the caller guarantees, word by word.
        unsafe { AtomicU64::from_ptr((addr + 8 * i as u64) as usize as *mut u64) }.store(q.to_le(), Ordering::Relaxed);
    }
}

/// What executing one WQE came to.
enum Outcome {
    /// Done.
    Done,
    /// Failed with this flush (minor) code: the QP goes to the error state.
    Failed(u16),
    /// Cannot run yet (no receive posted at the peer): nothing consumed.
    Later,
    /// Sent to the peer's process: consumed, its CQE comes with the reply.
    Sent,
}

/// The flush code of an access or length error found by the mlx5 side's shared checks.
fn flush_code(s: u8) -> u16 {
    match s {
        syndrome::LOCAL_PROT_ERR => flush::PROT_ERR,
        syndrome::LOCAL_LENGTH_ERR => flush::LOC_LEN_ERR,
        syndrome::REMOTE_ACCESS_ERR => flush::REM_ACCESS_ERR,
        syndrome::REMOTE_INVAL_REQ_ERR => flush::REM_INV_REQ_ERR,
        syndrome::REMOTE_OP_ERR => flush::REM_OP_ERR,
        syndrome::WR_FLUSH_ERR => flush::GENERAL_ERR,
        syndrome::TRANSPORT_RETRY_EXC_ERR => flush::RETRY_EXC_ERR,
        // A current kernel's code (`irdma_set_flush_fields`); libirdma before v64 reads it
        // as IBV_WC_FATAL_ERR, as on a real E810.
        syndrome::RNR_RETRY_EXC_ERR => flush::RNR_RETRY_EXC_ERR,
        _ => flush::LOC_QP_OP_ERR,
    }
}

impl Emulator {
    /// One pass over every irdma QP and CQ. Returns how many WQEs it consumed.
    pub fn step_irdma(&mut self) -> u32 {
        let mut work = Vec::new();
        for (&fd, ctx) in self.contexts.iter().filter(|(_, c)| c.device == Device::Irdma) {
            for (&h, qp) in &ctx.qps {
                if matches!(qp.state, QpState::Rts | QpState::Err) && qp.qp_type != QpType::Uc {
                    work.push((fd, h));
                }
            }
        }
        let done = work.into_iter().map(|(fd, h)| self.irdma_step_qp(fd, h)).sum();
        self.irdma_step_arms();
        done
    }

    fn irdma_qp(&self, fd: i32, h: u32) -> Option<(Qp, IrdmaQp)> {
        let ctx = self.contexts.get(&fd)?;
        Some((*ctx.qps.get(&h)?, *ctx.irdma.qps.get(&h)?))
    }

    fn irdma_qp_mut(&mut self, fd: i32, h: u32) -> Option<&mut IrdmaQp> {
        self.contexts.get_mut(&fd)?.irdma.qps.get_mut(&h)
    }

    fn irdma_step_qp(&mut self, fd: i32, h: u32) -> u32 {
        let mut done = 0;
        while done < BURST {
            let Some((qp, iq)) = self.irdma_qp(fd, h) else { break };
            if qp.state == QpState::Err {
                return done + self.irdma_flush(fd, h);
            }
            let at = iq.sq + u64::from(iq.sq_head) * CQE_SIZE;
            // SAFETY: the SQ lies in the QP buffer libirdma registered and named at CREATE_QP (checked to hold sq_quanta quanta), live until DESTROY_QP, which needs the lock this thread holds; the header is qword 3 of a 32-byte quantum of a page-aligned buffer.
            let hdr = unsafe { load_le64(at + 24) };
            if (hdr & irdma_wqe::VALID != 0) != iq.sq_valid {
                break;
            }
            let quanta = irdma_wqe::quanta(hdr);
            if irdma_wqe::opcode(hdr) == op::NOP {
                self.irdma_advance_sq(fd, h, quanta, None);
                done += 1;
                continue;
            }
            let wqe_idx = iq.sq_head;
            let parsed = if iq.sq_head + quanta > iq.sq_quanta {
                Err("a WQE across the end of the SQ")
            } else {
                let mut b = vec![0u8; (quanta as usize) * CQE_SIZE as usize];
                // SAFETY: as for the header: these quanta are inside the SQ (checked just above).
                unsafe { read_mem(at, &mut b) };
                irdma_wqe::parse_sq(&b, hdr)
            };
            let outcome = match &parsed {
                Ok(w) => self.irdma_execute(fd, &qp, w, wqe_idx),
                Err(_) => Outcome::Failed(flush::LOC_QP_OP_ERR),
            };
            let w_op = irdma_wqe::opcode(hdr);
            match outcome {
                Outcome::Later => break,
                // Its CQE (if signaled, or an error) comes with the peer's reply.
                Outcome::Sent => {
                    let signaled = parsed.as_ref().is_ok_and(|w| w.signaled);
                    self.irdma_advance_sq(fd, h, quanta, Some(signaled));
                }
                Outcome::Done => {
                    let signaled = parsed.as_ref().is_ok_and(|w| w.signaled);
                    if signaled {
                        let c = ModelCqe::send(iq.compl_ctx, qp.qpn, wqe_idx as u16, w_op);
                        self.irdma_complete(fd, qp.send_cq, &c);
                    }
                    self.irdma_advance_sq(fd, h, quanta, Some(signaled));
                }
                Outcome::Failed(minor) => {
                    // One flush CQE with the error's code: libirdma reports the failed WR
                    // (its oldest outstanding) from it, then everything posted after.
                    let c = ModelCqe::flush(iq.compl_ctx, qp.qpn, true, wqe_idx as u16, minor);
                    let at = self.irdma_complete(fd, qp.send_cq, &c);
                    self.irdma_advance_sq(fd, h, quanta, Some(true));
                    if let Some(q) = self.irdma_qp_mut(fd, h) {
                        q.sq_uncovered = false;
                        q.sq_flush_at = at;
                    }
                    set_state(self, fd, h, QpState::Err);
                }
            }
            done += 1;
        }
        done
    }

    /// Moves the SQ head past `quanta` quanta (flipping the expected valid bit at the
    /// ring's end). `covered`: `Some(true)` when the WQE got a CQE (libirdma retires every
    /// WR up to it), `Some(false)` when it got none, `None` for a NOP.
    fn irdma_advance_sq(&mut self, fd: i32, h: u32, quanta: u32, covered: Option<bool>) {
        if let Some(q) = self.irdma_qp_mut(fd, h) {
            q.sq_head += quanta;
            if q.sq_head >= q.sq_quanta {
                q.sq_head = 0;
                q.sq_valid = !q.sq_valid;
            }
            if let Some(c) = covered {
                q.sq_uncovered = !c;
            }
        }
    }

    /// A QP in the error state: takes what was posted without executing it, and writes a
    /// flush CQE for a queue with WRs libirdma still counts outstanding once the last one
    /// is consumed.
    fn irdma_flush(&mut self, fd: i32, h: u32) -> u32 {
        let Some((qp, mut iq)) = self.irdma_qp(fd, h) else { return 0 };
        let mut taken = 0;
        loop {
            // SAFETY: as in irdma_step_qp: the header of a quantum of the live SQ.
            let hdr = unsafe { load_le64(iq.sq + u64::from(iq.sq_head) * CQE_SIZE + 24) };
            if (hdr & irdma_wqe::VALID != 0) != iq.sq_valid || taken > iq.sq_quanta {
                break;
            }
            if irdma_wqe::opcode(hdr) != op::NOP {
                iq.sq_uncovered = true;
            }
            iq.sq_head += irdma_wqe::quanta(hdr).min(iq.sq_quanta - iq.sq_head);
            if iq.sq_head >= iq.sq_quanta {
                iq.sq_head = 0;
                iq.sq_valid = !iq.sq_valid;
            }
            taken += 1;
        }
        let mut rq_taken = 0;
        // SAFETY: peek_rq's contract: the QP's live RQ.
        while unsafe { peek_rq(&iq) }.is_some() && rq_taken <= iq.rq_size {
            advance_rq(&mut iq);
            rq_taken += 1;
        }
        if self.irdma_pending(fd, qp.send_cq, iq.sq_flush_at) {
            // libirdma has not consumed the last flush CQE: it reports what was just taken
            // (posted before the device saw it) from that one.
            iq.sq_uncovered = false;
        } else if iq.sq_uncovered {
            let c = ModelCqe::flush_general(iq.compl_ctx, qp.qpn, true, iq.sq_head as u16);
            iq.sq_flush_at = self.irdma_complete(fd, qp.send_cq, &c);
            iq.sq_uncovered = false;
        }
        if rq_taken > 0 && !self.irdma_pending(fd, qp.recv_cq, iq.rq_flush_at) {
            let c = ModelCqe::flush_general(iq.compl_ctx, qp.qpn, false, iq.rq_head as u16);
            iq.rq_flush_at = self.irdma_complete(fd, qp.recv_cq, &c);
        }
        if let Some(q) = self.irdma_qp_mut(fd, h) {
            *q = iq;
        }
        taken + rq_taken
    }

    /// Whether the CQE written at `at` in CQ `cq` is still in the ring, unconsumed.
    fn irdma_pending(&self, fd: i32, cq: u32, at: Option<u64>) -> bool {
        let Some(at) = at else { return false };
        let Some(icq) = self.contexts.get(&fd).and_then(|c| c.irdma.cqs.get(&cq)) else { return false };
        // SAFETY: the CQ's shadow area, live until DESTROY_CQ (refused while a QP uses the CQ), which needs the lock this thread holds.
        consumer_position(icq, unsafe { load_le64(icq.shadow) }) <= at
    }

    /// Executes one send WQE of an RTS QP (at SQ quantum `at`).
    fn irdma_execute(&mut self, fd: i32, qp: &Qp, w: &SqWqe, at: u32) -> Outcome {
        if qp.qp_type == QpType::Ud {
            return self.irdma_ud_send(fd, qp, w);
        }
        let Some(op) = wire::op_of(w) else {
            warn_once(w.op);
            return Outcome::Failed(flush::LOC_QP_OP_ERR);
        };
        let work = wire::work(w, op, at);
        // A peer in another process: over the wire, its CQE with the reply.
        if let Some(p) = self.wire_send(fd, qp, &work) {
            return match p {
                Posted::Sent => Outcome::Sent,
                Posted::Later => Outcome::Later,
                Posted::Failed(s) => Outcome::Failed(flush_code(s)),
            };
        }
        // A peer in this process: run as the wire's responder runs a request.
        match self.run_locally(fd, qp, &work, at) {
            Ok(Some(_)) => Outcome::Done,
            Ok(None) => Outcome::Later,
            Err(s) => Outcome::Failed(flush_code(s)),
        }
    }

    /// A UD SEND: to the QP and Q_Key qword 2 names, through the address handle the
    /// header names, in this process or over the wire; a datagram nobody takes (no such QP,
    /// another Q_Key, no receive posted) is dropped, and the send completes all the same, as
    /// on a wire.
    fn irdma_ud_send(&mut self, fd: i32, qp: &Qp, w: &SqWqe) -> Outcome {
        if !matches!(w.op, op::SEND | op::SEND_SOL) {
            warn_once(w.op);
            return Outcome::Failed(flush::LOC_QP_OP_ERR);
        }
        let ah_id = w.stag & 0x1_ffff;
        let ah_ok =
            self.contexts.get(&fd).is_some_and(|c| c.irdma.ahs.values().any(|&(id, pd)| id == ah_id && pd == qp.pd));
        if !ah_ok {
            return Outcome::Failed(flush::LOC_QP_OP_ERR);
        }
        let data = match self.gather(fd, qp.pd, &w.data) {
            Ok(d) => d,
            Err(s) => return Outcome::Failed(flush_code(s)),
        };
        let mut flags = crate::wire::FLAG_DATAGRAM;
        if w.op == op::SEND_SOL {
            flags |= crate::wire::FLAG_SOLICITED;
        }
        let h = crate::wire::Header {
            op: if w.imm.is_some() { Op::SendImm } else { Op::Send } as u8,
            flags,
            dst_qpn: ((w.remote_addr >> 32) & 0xff_ffff) as u32,
            src_qpn: qp.qpn,
            imm: w.imm.unwrap_or(0),
            qkey: w.remote_addr as u32,
            ..crate::wire::Header::default()
        };
        self.send_datagram(h, data);
        Outcome::Done
    }

    /// The irdma QP numbered `qpn` in this process: its context fd and handle.
    pub(crate) fn find_irdma_qp(&self, qpn: u32) -> Option<(i32, u32)> {
        self.contexts
            .iter()
            .filter(|(_, c)| c.device == Device::Irdma)
            .find_map(|(&fd, c)| c.qps.iter().find(|(_, q)| q.qpn == qpn).map(|(&h, _)| (fd, h)))
    }

    /// Writes CQE `c` into CQ `cq_handle`'s ring (two slots for an extended one) and
    /// returns the position of its first slot; a CQ without room overruns instead (no
    /// more CQEs, `IBV_EVENT_CQ_ERR` to the async fd) and `None` is returned.
    fn irdma_complete(&mut self, fd: i32, cq_handle: u32, c: &ModelCqe) -> Option<u64> {
        let ctx = self.contexts.get_mut(&fd)?;
        let async_fd = ctx.async_fd;
        let cq = ctx.cqs.get_mut(&cq_handle)?;
        let icq = ctx.irdma.cqs.get_mut(&cq_handle)?;
        if cq.overrun {
            return None;
        }
        // SAFETY: the CQ's shadow area, live until DESTROY_CQ (refused while a QP uses the CQ), which needs the lock this thread holds.
        let used = icq.written - consumer_position(icq, unsafe { load_le64(icq.shadow) });
        let need: u64 = if c.extended() { 2 } else { 1 };
        if used + need > u64::from(icq.size) - 1 {
            cq.overrun = true;
            let ev = crate::abi::AsyncEventDesc { element: cq.user_handle, event_type: EVENT_CQ_ERR, reserved: 0 };
            if let Some(ch) = async_fd.and_then(|a| self.events.get_mut(&a)) {
                ch.push(bytemuck::bytes_of(&ev), Owner::Cq(fd, cq_handle));
            }
            return None;
        }
        let at = icq.written;
        // SAFETY: both slots are inside the ring libirdma registered (cq_pages checked to hold `size` slots) and consumed by it (the room check above), live until DESTROY_CQ, which needs this lock.
        unsafe {
            if c.extended() {
                let (slot, valid) = slot_of(icq, at + 1);
                write_body(slot, c.ext_body());
                store_le64(slot + 24, c.ext_qword7(valid));
            }
            let (slot, valid) = slot_of(icq, at);
            write_body(slot, c.body());
            store_le64(slot + 24, c.qword3(valid));
        }
        icq.written += need;
        if c.solicited || c.error.is_some() {
            icq.notify_at = icq.written;
        }
        Some(at)
    }

    /// Takes new arms from the CQs' shadow areas and fires the completion events they are
    /// owed.
    fn irdma_step_arms(&mut self) {
        let mut fire = Vec::new();
        for (&fd, ctx) in self.contexts.iter_mut().filter(|(_, c)| c.device == Device::Irdma) {
            // The CQ doorbell: libirdma writes the CQ id there after each arm (taken and
            // cleared, so that an arm which brought the 2-bit sequence number back to where
            // the device last saw it is not missed).
            let kicked = ctx.irdma.db_page.map(|p| {
                // SAFETY: the context's doorbell page, mapped by the emulator and live until munmap, which clears db_page under the lock this thread holds; the CQ doorbell is the aligned word at 64.
                unsafe { AtomicU32::from_ptr((p + DB_CQ_OFFSET) as *mut u32) }.swap(0, Ordering::AcqRel)
            });
            for (&h, icq) in ctx.irdma.cqs.iter_mut() {
                let Some(cq) = ctx.cqs.get(&h) else { continue };
                let Some(channel) = cq.channel else { continue };
                // SAFETY: the CQ's shadow area (arm word at 32), live until DESTROY_CQ, which needs the lock this thread holds.
                let (arm, head) = unsafe { (load_le64(icq.shadow + 32), load_le64(icq.shadow)) };
                if arm != icq.arm_seen || kicked == Some(cq.cqn) {
                    icq.arm_seen = arm;
                    icq.armed = Some((arm & ARM_NEXT == 0, consumer_position(icq, head)));
                }
                let Some((solicited, ci)) = icq.armed else { continue };
                let upto = if solicited { icq.notify_at } else { icq.written };
                if upto > ci {
                    icq.armed = None;
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
}

/// The port's MAC address (the source MAC of UD receives).
const PORT_MAC: [u8; 6] = [0xb4, 0x96, 0x91, 0xa5, 0x3c, 0x10];

/// The 40-byte GRH a UD receive starts with on RoCE v2 between IPv6 GIDs: an IPv6 header
/// (version 6, UDP, hop limit 64) from and to the port's link-local GID.
fn grh(payload: usize) -> Vec<u8> {
    let gid: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0xb6, 0x96, 0x91, 0xff, 0xfe, 0xa5, 0x3c, 0x10];
    let mut h = vec![0x60, 0, 0, 0];
    // Payload length: UDP (8), BTH (12), DETH (8), the message, ICRC (4).
    h.extend_from_slice(&((payload + 32) as u16).to_be_bytes());
    h.extend_from_slice(&[17, 64]);
    h.extend_from_slice(&gid);
    h.extend_from_slice(&gid);
    h
}

/// How many slots libirdma has consumed, from the head it published in shadow word 0 (a
/// slot index without a wrap bit; the device never fills the ring, so it is unambiguous).
fn consumer_position(icq: &IrdmaCq, shadow0: u64) -> u64 {
    let size = u64::from(icq.size);
    let head = (shadow0 & CQEIDX_MASK) % size;
    let slot = icq.written % size;
    let used = (slot + size - head) % size;
    icq.written - used
}

/// The address of the slot at position `pos` and the valid bit of its pass (1 on the
/// first).
fn slot_of(icq: &IrdmaCq, pos: u64) -> (u64, bool) {
    let size = u64::from(icq.size);
    (icq.ring + (pos % size) * CQE_SIZE, (pos / size) % 2 == 0)
}

/// The receive WQE at the RQ's head, if libirdma has posted one there (its valid bit is
/// the pass's).
///
/// # Safety
///
/// `iq`'s RQ is live (its QP exists under the emulator's lock).
unsafe fn peek_rq(iq: &IrdmaQp) -> Option<RecvWqe> {
    if iq.rq_size == 0 {
        return None;
    }
    let at = iq.rq + (u64::from(iq.rq_head) << iq.rq_shift) * CQE_SIZE;
    // SAFETY: the WQE is inside the RQ of the QP buffer libirdma registered (checked at CREATE_QP to hold rq_size << rq_shift quanta).
    let hdr = unsafe { load_le64(at + 24) };
    if (hdr & irdma_wqe::VALID != 0) != iq.rq_valid {
        return None;
    }
    let mut b = vec![0u8; (CQE_SIZE as usize) << iq.rq_shift];
    // SAFETY: as above: the whole WQE.
    unsafe { read_mem(at, &mut b) };
    Some(RecvWqe { index: iq.rq_head as u16, sges: irdma_wqe::parse_rq(&b, hdr) })
}

/// Moves the RQ head on by one WQE (flipping the expected valid bit at the ring's end).
fn advance_rq(iq: &mut IrdmaQp) {
    iq.rq_head += 1;
    if iq.rq_head >= iq.rq_size {
        iq.rq_head = 0;
        iq.rq_valid = !iq.rq_valid;
    }
}

fn set_state(e: &mut Emulator, fd: i32, h: u32, state: QpState) {
    if let Some(q) = e.contexts.get_mut(&fd).and_then(|c| c.qps.get_mut(&h)) {
        q.state = state;
    }
}

/// Names an opcode the device does not execute yet, once per opcode.
fn warn_once(op: u8) {
    static SEEN: [AtomicBool; 64] = [const { AtomicBool::new(false) }; 64];
    if !SEEN[usize::from(op & 0x3f)].swap(true, Ordering::Relaxed) {
        eprintln!(
            "dvcq-emu: irdma WQE opcode {op:#04x} is not emulated yet; it completes with a local QP operation error"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cq(size: u32, written: u64) -> IrdmaCq {
        IrdmaCq { ring: 0x10000, shadow: 0, size, written, notify_at: 0, arm_seen: 0, armed: None }
    }

    #[test]
    fn the_consumer_position_follows_the_head_across_wraps() {
        // A 6-slot ring (irdma sizes are rarely powers of two): 9 written, head at 2 (8
        // consumed, 1 in the ring), and head at 3 (all consumed).
        assert_eq!(consumer_position(&cq(6, 9), 2), 8);
        assert_eq!(consumer_position(&cq(6, 9), 3), 9);
        assert_eq!(consumer_position(&cq(6, 0), 0), 0);
    }

    /// An irdma context with one CQ on a completion channel, its shadow area and doorbell
    /// page in `mem` (shadow at 0, doorbell page at 4096).
    fn armed_setup(mem: u64) -> (Emulator, i32) {
        use crate::events::EventFd;
        use crate::fd_table::FdKind;
        use crate::objects::{Context, Cq};
        let mut e = Emulator::default();
        let ch = EventFd::new(FdKind::CompChannel).unwrap();
        let chfd = ch.fd();
        e.events.insert(chfd, ch);
        let mut ctx = Context::default();
        ctx.device = Device::Irdma;
        ctx.ready = true;
        ctx.irdma.db_page = Some(mem as usize + 4096);
        let cq = Cq {
            user_handle: 9,
            cqn: 0x402,
            ncqe: 8,
            cqe_size: 32,
            buf: 0,
            dbrec: mem,
            channel: Some(chfd),
            comp_vector: 0,
            ..Cq::default()
        };
        ctx.cqs.insert(1, cq);
        // The arm word of an arm for any completion (ARM_NEXT_SE | ARM_NEXT), as the device
        // saw it last.
        let arm = (1 << 15) | ARM_NEXT;
        // SAFETY: the shadow area's arm word, inside the caller's allocation.
        unsafe { store_le64(mem + 32, arm) };
        ctx.irdma
            .cqs
            .insert(1, IrdmaCq { ring: 0, shadow: mem, size: 8, written: 0, notify_at: 0, arm_seen: arm, armed: None });
        e.contexts.insert(3, ctx);
        (e, chfd)
    }

    #[test]
    fn an_arm_is_seen_through_the_cq_doorbell_even_when_the_arm_word_came_back() {
        let layout = std::alloc::Layout::from_size_align(8192, 4096).unwrap();
        // SAFETY: a non-zero size; freed at the end of the test.
        let mem = unsafe { std::alloc::alloc_zeroed(layout) };
        let (mut e, chfd) = armed_setup(mem as u64);
        // Four arms between two passes: the arm word is where the device last saw it, but
        // the doorbell names the CQ.
        // SAFETY: the doorbell page's CQ word, inside the allocation.
        unsafe { AtomicU32::from_ptr(mem.add(4096 + 64).cast::<u32>()) }.store(0x402, Ordering::Release);
        e.irdma_step_arms();
        // A CQE past the consumer's head at the arm fires the event.
        e.contexts.get_mut(&3).unwrap().irdma.cqs.get_mut(&1).unwrap().written = 1;
        e.irdma_step_arms();
        assert!(e.events.get_mut(&chfd).unwrap().pop().is_some(), "no completion event");
        // SAFETY: as above.
        assert_eq!(unsafe { AtomicU32::from_ptr(mem.add(4096 + 64).cast::<u32>()) }.load(Ordering::Acquire), 0);
        // No arm, no event.
        e.contexts.get_mut(&3).unwrap().irdma.cqs.get_mut(&1).unwrap().written = 2;
        e.irdma_step_arms();
        assert!(e.events.get_mut(&chfd).unwrap().pop().is_none(), "an event without an arm");
        e.contexts.clear();
        // SAFETY: allocated above with this layout; nothing points at it any more.
        unsafe { std::alloc::dealloc(mem, layout) };
    }

    #[test]
    fn a_ud_receive_starts_with_a_40_byte_ipv6_grh() {
        let g = grh(32);
        assert_eq!(g.len(), 40);
        assert_eq!((g[0] >> 4, g[6], u16::from_be_bytes([g[4], g[5]])), (6, 17, 64));
        assert_eq!(&g[8..10], &[0xfe, 0x80]);
    }

    #[test]
    fn slots_carry_the_valid_bit_of_their_pass() {
        let c = cq(6, 0);
        assert_eq!(slot_of(&c, 0), (0x10000, true));
        assert_eq!(slot_of(&c, 5), (0x10000 + 5 * 32, true));
        // The second pass writes 0: libirdma flips its polarity at slot 0.
        assert_eq!(slot_of(&c, 6), (0x10000, false));
        assert_eq!(slot_of(&c, 13), (0x10000 + 32, true));
    }
}
