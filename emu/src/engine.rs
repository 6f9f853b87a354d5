//! The device side: a thread that watches the doorbell records libmlx5 writes, executes the
//! WQEs it posted from its own SQ buffer, and writes CQEs, built with the mlx5 model's CQE
//! builders, into libmlx5's own CQ ring, where the real `ibv_poll_cq` (or dvcq's direct
//! poller) finds them.
//!
//! Executed so far: RDMA WRITE (scatter/gather or inline) between QPs of this process,
//! with lkey and rkey checks; an access error gives an error CQE and moves the QP to the
//! error state, and a QP in the error state flushes what is posted (send and receive) with
//! `WR_FLUSH_ERR`. Any other opcode completes with a local QP operation error, named once
//! on standard error. A full CQ holds the device back until the poller makes room (a real
//! device would overrun it).

use crate::emulator::{self, Emulator};
use crate::objects::{Cq, Mr, Qp, QpState};
use crate::wqe::{self, Ctrl, Gather, Raddr};
use dvcq_mlx5_dv::model::build::{self, Entry, ErrSpec};
use dvcq_uapi::mlx5::opcode::syndrome;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::time::Duration;

static STARTED: AtomicBool = AtomicBool::new(false);

/// Starts the device thread, once per process.
pub fn start() {
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let spawned = std::thread::Builder::new().name("dvcq-emu-device".into()).spawn(|| {
        let mut idle = 0u32;
        loop {
            if emulator::with(Emulator::step) > 0 {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            if idle < 256 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    });
    if let Err(e) = spawned {
        eprintln!("dvcq-emu: cannot start the device thread ({e}); posted work will not execute");
    }
}

/// Loads a big-endian 32-bit doorbell word with acquire ordering.
///
/// # Safety
///
/// `addr` is a 4-byte aligned word of live memory (a doorbell record the provider passed at
/// create time, alive until its destroy command, which takes the emulator lock the caller
/// holds).
unsafe fn load_be32(addr: u64) -> u32 {
    // SAFETY: the caller guarantees an aligned, live word; other agents access it only
    // through word-sized (atomic on x86-64 and AArch64) stores.
    u32::from_be(unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) }.load(Ordering::Acquire))
}

/// Copies `len` bytes from `src` to `dst` in the application's memory.
///
/// # Safety
///
/// Both ranges are live memory of registered regions (or the provider's rings) the caller
/// checked; they may overlap (a loopback write within one region).
unsafe fn copy(src: u64, dst: u64, len: usize) {
    // SAFETY: as the caller guarantees; `copy` allows overlap.
    unsafe { std::ptr::copy(src as usize as *const u8, dst as usize as *mut u8, len) };
}

/// What executing one WQE came to.
enum Outcome {
    /// Done; `byte_cnt` for its CQE.
    Done(u32),
    /// Failed with this CQE syndrome: the QP goes to the error state.
    Failed(u8),
}

impl Emulator {
    /// One pass over every QP: executes or flushes what was posted since the last pass.
    /// Returns how many WQEs it consumed.
    pub fn step(&mut self) -> u32 {
        let mut work = Vec::new();
        for (&fd, ctx) in &self.contexts {
            for (&h, qp) in &ctx.qps {
                if matches!(qp.state, QpState::Rts | QpState::Err) {
                    work.push((fd, h));
                }
            }
        }
        work.into_iter().map(|(fd, h)| self.step_qp(fd, h)).sum()
    }

    fn step_qp(&mut self, fd: i32, h: u32) -> u32 {
        let Some(qp) = self.contexts.get(&fd).and_then(|c| c.qps.get(&h)).copied() else { return 0 };
        let mut done = 0;
        if qp.wq.sq_wqe_count > 0 {
            // SAFETY: the QP's doorbell record, recorded at CREATE_QP and live until
            // DESTROY_QP, which needs the lock this thread holds; word [1] is the SQ's.
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
                if !self.complete(fd, q.recv_cq, &build::err(spec)) {
                    break;
                }
                if let Some(q) = qp_mut(self, fd, h) {
                    q.rq_ci = q.rq_ci.wrapping_add(1);
                }
                done += 1;
            }
        }
        done
    }

    /// Executes (or, in the error state, flushes) the SQ WQE at the QP's consumer index.
    /// False when it could not complete (its CQ is full): nothing was consumed.
    fn one_send(&mut self, fd: i32, h: u32, qp: Qp) -> bool {
        let (units, ctrl) = read_wqe(&qp);
        let outcome = if qp.state == QpState::Err {
            Outcome::Failed(syndrome::WR_FLUSH_ERR)
        } else {
            self.execute(fd, &qp, &ctrl, &units)
        };
        let cqe: Option<Entry> = match outcome {
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
            if !self.complete(fd, qp.send_cq, e) {
                return false;
            }
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
        match ctrl.opcode {
            wqe::OP_RDMA_WRITE => {
                let raddr = Raddr::parse(&units[16..32]);
                let Ok(gather) = Gather::parse(&units[32..]) else {
                    return Outcome::Failed(syndrome::LOCAL_LENGTH_ERR);
                };
                self.rdma_write(fd, qp, raddr, &gather)
            }
            op => {
                warn_once(op);
                Outcome::Failed(syndrome::LOCAL_QP_OP_ERR)
            }
        }
    }

    fn rdma_write(&mut self, fd: i32, qp: &Qp, raddr: Raddr, gather: &Gather) -> Outcome {
        let Some(ctx) = self.contexts.get(&fd) else { return Outcome::Failed(syndrome::LOCAL_QP_OP_ERR) };
        // The local side: every entry inside a region of the QP's PD.
        let mut sources = Vec::new();
        if let Gather::Segs(segs) = gather {
            for &(addr, len, lkey) in segs {
                match find_mr(ctx.mrs.values(), qp.pd, lkey, addr, len.into(), 0, |m| m.lkey) {
                    Some(host) => sources.push((host, len as usize)),
                    None => return Outcome::Failed(syndrome::LOCAL_PROT_ERR),
                }
            }
        }
        let total = gather.len();
        // The remote side: the connected QP of this process, and a region of its PD the
        // rkey names that allows remote writes.
        let Some((peer_fd, peer)) = self.find_qp(qp.path.dest_qpn) else {
            return Outcome::Failed(syndrome::REMOTE_ACCESS_ERR);
        };
        if !matches!(peer.state, QpState::Rtr | QpState::Rts) {
            return Outcome::Failed(syndrome::REMOTE_ACCESS_ERR);
        }
        let Some(peer_ctx) = self.contexts.get(&peer_fd) else { return Outcome::Failed(syndrome::REMOTE_ACCESS_ERR) };
        let Some(mut dst) =
            find_mr(peer_ctx.mrs.values(), peer.pd, raddr.rkey, raddr.addr, total, ACCESS_REMOTE_WRITE, |m| m.rkey)
        else {
            return Outcome::Failed(syndrome::REMOTE_ACCESS_ERR);
        };
        match gather {
            Gather::Inline(data) => {
                // SAFETY: dst..dst+len lies in a registered region (checked above); the
                // source is the emulator's own copy of the inline data.
                unsafe { copy(data.as_ptr() as u64, dst, data.len()) };
            }
            Gather::Segs(_) => {
                for (src, len) in sources {
                    // SAFETY: both ranges lie in registered regions (checked above), live
                    // until DEREG_MR, which needs the lock this thread holds.
                    unsafe { copy(src, dst, len) };
                    dst += len as u64;
                }
            }
        }
        Outcome::Done(total as u32)
    }

    /// The QP numbered `qpn` in this process, and its context fd.
    fn find_qp(&self, qpn: u32) -> Option<(i32, Qp)> {
        self.contexts.iter().find_map(|(&fd, c)| c.qps.values().find(|q| q.qpn == qpn).map(|q| (fd, *q)))
    }

    /// Writes `e` into CQ `cq_handle`'s ring at its producer index, the owner bit last.
    /// False when the ring is full.
    fn complete(&mut self, fd: i32, cq_handle: u32, e: &Entry) -> bool {
        let Some(cq) = self.contexts.get_mut(&fd).and_then(|c| c.cqs.get_mut(&cq_handle)) else { return true };
        // SAFETY: the CQ's doorbell record, live until DESTROY_CQ (which needs this lock and
        // is refused while a QP uses the CQ); word [0] is the consumer index.
        let ci = unsafe { load_be32(cq.dbrec) } & 0xff_ffff;
        if cq.pi.wrapping_sub(ci) & 0xff_ffff >= cq.ncqe {
            return false;
        }
        // SAFETY: write_cqe's contract: the CQ's ring as libmlx5 allocated it, live until
        // DESTROY_CQ; the slot is one the poller has consumed (checked above).
        unsafe { write_cqe(cq, e) };
        cq.pi = cq.pi.wrapping_add(1);
        true
    }
}

/// `IBV_ACCESS_REMOTE_WRITE`.
const ACCESS_REMOTE_WRITE: u32 = 2;

/// The host address of `[addr, addr + len)` in the region of `pd` whose key (`key_of`) is
/// `key` and whose access has every bit of `need`.
fn find_mr<'a>(
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
    // SAFETY: the SQ lies in the provider's QP buffer recorded at CREATE_QP (RQ first, SQ
    // after it), live until DESTROY_QP, which needs the lock this thread holds; `start` is
    // inside the ring.
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
unsafe fn write_cqe(cq: &Cq, e: &Entry) {
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
