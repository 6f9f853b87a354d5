//! The common-case CQE path: runs of successful, non-extended, non-SRQ CQEs of the QP the
//! previous CQE named. It produces exactly what [`Engine::translate`] produces for such a
//! CQE (the conformance and image tests compare both paths), writing straight into the
//! caller's completions; anything else ends the run for the general path.
//!
//! Per run, not per CQE: its set-up, and the write-back of the queue tails, the QP cache
//! and rdma-core's `bytes_xfered` scratch. Per CQE: the valid bit, the context compare, one
//! table load for the completion head, the queue's new tail (in a register), and the
//! fields. A run starts with the cached QP alone; the first CQE of another QP (a CQ shared
//! by several QPs) writes the tails back and hands the rest of the run to a loop that moves
//! between QPs of the same [`RunKind`] in place: one lookup in the registry's context
//! index, and the loop reads the other QP from there on, storing each CQE's tail in its QP.

use crate::cq::Engine;
use crate::registry::{Qp, QpRegistry, RunKind};
use crate::ring::{Pos, SlotSource, SlotWords};
use crate::status::{rq_opcode, sq_opcode, Compat, Release};
use dvcq_provider::{Completion, WcFlags, WcHead, WcHeadWord, WcOpcode};
use dvcq_uapi::irdma::cqe::{off, q0, q2, q3};

/// qword3 bits that send a CQE down the general path.
pub(crate) const SLOW: u64 = q3::ERROR | q3::EXTCQE | q3::SRQ | q3::PSHDROP;

/// The upper half of qword3, where every flag the fast path tests lives: tests on it take
/// 32-bit immediates.
#[inline(always)]
const fn hi(w3: u64) -> u32 {
    (w3 >> 32) as u32
}

/// Why a fast run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `out` is full.
    Full,
    /// The CQE at the counter is not a fast-path CQE, or the ring is empty there.
    Other,
    /// The run reached the ring's end with room left in `out`: the next run goes on from
    /// the next lap's first slot.
    Lap,
    /// The CQE at the counter is a fast-path CQE of a registered QP of the other kind (UD
    /// or not), now the cached QP: the next run starts there.
    Switched,
}

/// What a fast run needs to know of the CQ's [`Compat`]: chosen once per CQ
/// ([`FastTables::of`]), so that no CQE tests the version.
#[derive(Debug)]
pub(crate) struct FastTables {
    /// The SQ opcodes [`sq_opcode`] knows, as a bit set over the 6-bit opcode field.
    sq_known: u64,
    /// The RQ opcodes that [`rq_opcode`] reports as `RECV_RDMA_WITH_IMM` without immediate
    /// data in an extension, by [GEN3][send-with-immediate capability].
    rq_write_imm: [[u64; 2]; 2],
}

impl FastTables {
    const fn new(compat: Compat) -> Self {
        let mut sq_known = 0u64;
        let mut rq_write_imm = [[0u64; 2]; 2];
        let mut op = 0;
        while op < 64 {
            if sq_opcode(op as u8, compat).is_some() {
                sq_known |= 1 << op;
            }
            let mut i = 0;
            while i < 4 {
                let (gen3, swi) = (i & 2 != 0, i & 1 != 0);
                if matches!(rq_opcode(op as u8, gen3, swi, false, compat), WcOpcode::RecvRdmaWithImm) {
                    rq_write_imm[gen3 as usize][swi as usize] |= 1 << op;
                }
                i += 1;
            }
            op += 1;
        }
        Self { sq_known, rq_write_imm }
    }

    /// The tables of `compat`.
    pub(crate) fn of(compat: Compat) -> &'static Self {
        static CURRENT: FastTables = FastTables::new(Compat::Current);
        static V52: FastTables = FastTables::new(Compat::V52);
        static V44: FastTables = FastTables::new(Compat::V44);
        match compat.release() {
            Release::Current => &CURRENT,
            Release::V52 => &V52,
            Release::V44 => &V44,
        }
    }
}

/// Completion heads of SQ CQEs by opcode, for non-UD and UD QPs (UD completions carry
/// `IBV_WC_GRH`, as `irdma_process_cqe` sets it for every UD CQE). The opcodes of
/// [`Compat::Current`] include those of every older version; [`FastTables::sq_known`]
/// says which of them a CQ takes.
const SQ_HEAD: [[WcHeadWord; 64]; 2] = {
    let mut t = [[WcHead::success(WcOpcode::Send, WcFlags::empty(), 0).word(); 64]; 2];
    let mut op = 0;
    while op < 64 {
        if let Some(o) = sq_opcode(op as u8, Compat::Current) {
            t[0][op] = WcHead::success(o, WcFlags::empty(), 0).word();
            t[1][op] = WcHead::success(o, WcFlags::GRH, 0).word();
        }
        op += 1;
    }
    t
};

/// Completion heads of RQ CQEs by [UD][invalidated STag][write with immediate].
const RQ_HEAD: [[[WcHeadWord; 2]; 2]; 2] = {
    let mut t = [[[WcHead::success(WcOpcode::Recv, WcFlags::empty(), 0).word(); 2]; 2]; 2];
    let mut i = 0;
    while i < 8 {
        let (ud, inv, imm) = (i & 4 != 0, i & 2 != 0, i & 1 != 0);
        let mut flags = WcFlags::empty();
        if ud {
            flags = flags.union(WcFlags::GRH);
        }
        if inv {
            flags = flags.union(WcFlags::WITH_INV);
        }
        let op = if imm { WcOpcode::RecvRdmaWithImm } else { WcOpcode::Recv };
        t[ud as usize][inv as usize][imm as usize] = WcHead::success(op, flags, 0).word();
        i += 1;
    }
    t
};

impl Engine {
    /// Polls common-case CQEs into `out` until `out` is full, the next CQE is not one (left
    /// unconsumed at `self.ci`), or the ring ends; returns the count and why it stopped. A
    /// CQE of another registered QP moves the run to that QP in place when both are of the
    /// same [`RunKind`].
    #[inline(always)]
    pub(crate) fn fast_run<R: SlotSource>(&mut self, ring: &R, out: &mut [Completion]) -> (usize, Stop) {
        // `last_ctx` is 0 while invalid or while a flush CQE is parked.
        let Engine { ci, entries, gen3, fast, qps, last_bytes, last_ctx, last_qp, .. } = self;
        let Some(kind) = (*last_ctx != 0).then(|| qps.get(*last_qp)).flatten().map(Qp::kind) else {
            return (0, Stop::Other);
        };
        let run = Run { entries: *entries, fast, ci, last_bytes, qps, last_ctx, last_qp, kind };
        match (kind.ud, *gen3) {
            (false, false) => run.go::<R, false, false>(ring, out),
            (false, true) => run.go::<R, false, true>(ring, out),
            (true, false) => run.go::<R, true, false>(ring, out),
            (true, true) => run.go::<R, true, true>(ring, out),
        }
    }

    /// A one-CQE [`Engine::fast_run`] at a CQE whose qword3 `w3` the caller found valid
    /// (the acquire fence issued): it is not loaded or tested again. Returns 0 (the CQE is
    /// left to the general path) or 1.
    #[inline(always)]
    pub(crate) fn fast_one<R: SlotSource>(&mut self, ring: &R, w3: u64, wc: &mut Completion) -> usize {
        // `last_ctx` is 0 while invalid or while a flush CQE is parked: the general path
        // takes the CQE and sets it.
        if hi(w3) & hi(SLOW) != 0 || self.last_ctx == 0 {
            return 0;
        }
        let slot = ring.slot(self.ci.slot());
        let c = slot.qword(off::QWORD1);
        let Engine { ci, entries, gen3, fast, qps, last_bytes, last_ctx, last_qp, .. } = self;
        let (slots, index) = qps.split();
        if c != *last_ctx {
            // Another registered QP's CQE becomes the cached one, as
            // [`Engine::switch_qp`] does, whether or not this path takes it.
            let Some(found) = index.find(c) else {
                return 0;
            };
            (*last_ctx, *last_qp) = (c, found.id);
        }
        let id = *last_qp;
        let Some(qp) = slots.get_mut(id as usize) else {
            return 0;
        };
        let kind = qp.kind();
        let write_imm = fast.rq_write_imm[*gen3 as usize][kind.send_with_imm as usize];
        let sq_known = fast.sq_known;
        let taken = match (kind.ud, *gen3) {
            (false, false) => take::<_, false, false, false>(slot, w3, qp, sq_known, write_imm, &mut [0; 2], wc),
            (false, true) => take::<_, false, true, false>(slot, w3, qp, sq_known, write_imm, &mut [0; 2], wc),
            (true, false) => take::<_, true, false, false>(slot, w3, qp, sq_known, write_imm, &mut [0; 2], wc),
            (true, true) => take::<_, true, true, false>(slot, w3, qp, sq_known, write_imm, &mut [0; 2], wc),
        };
        let Some(bytes) = taken else {
            return 0;
        };
        *last_bytes = bytes;
        ci.step_in_place(1, *entries);
        1
    }
}

/// The engine state a fast run reads and advances.
struct Run<'e> {
    entries: u32,
    fast: &'static FastTables,
    ci: &'e mut Pos,
    last_bytes: &'e mut u32,
    qps: &'e mut QpRegistry,
    /// The engine's cached QP: the run starts with it and leaves the last one it took.
    last_ctx: &'e mut u64,
    last_qp: &'e mut u32,
    /// The kind of every QP of the run.
    kind: RunKind,
}

/// Translates the successful, non-extended, non-SRQ CQE in `slot` (valid qword3 `w3`) of
/// `qp` into `wc` and moves the queue's tail past it, as `irdma_uk_cq_poll_cmpl` does
/// (the SQ tail past the WQE's quanta, the RQ tail past the receive). Returns its byte
/// count, or `None`, with nothing written, for a CQE the general path must take: a WQE
/// index past the queue, an SQ opcode not in `sq_known`, or an SQ CQE while the QP's
/// connection WQEs are pending. `write_imm`: which RQ opcodes are writes with immediate.
///
/// With `ONE` (a run of one QP), the tails go to `regs` instead, for the caller to write
/// back: the SQ index past the WQE, and the RQ index of the receive, unmasked; and the
/// caller has folded the pending connection WQEs into `sq_known` (none known).
#[inline(always)]
fn take<S: SlotWords, const UD: bool, const GEN3: bool, const ONE: bool>(
    slot: S,
    w3: u64,
    qp: &mut Qp,
    sq_known: u64,
    write_imm: u64,
    regs: &mut [u32; 2],
    wc: &mut Completion,
) -> Option<u32> {
    let w2 = slot.qword(off::QWORD2);
    let idx = u32::from(q3::wqe_idx(w3));
    let op = q3::op(w3);
    let bytes;
    if hi(w3) & hi(q3::SQ) != 0 {
        let &trk = qp.sq_trk.get(idx as usize)?;
        // Until the first SQ completion after the connection WQEs, SQ CQEs need the
        // general path.
        if sq_known >> op & 1 == 0 || (!ONE && qp.first_sq_wq) {
            return None;
        }
        if ONE {
            regs[0] = idx + u32::from(trk.quanta);
        } else {
            qp.sq.tail = (idx + u32::from(trk.quanta)) & qp.sq.mask();
        }
        bytes = trk.wr_len;
        wc.wr_id = trk.wr_id;
        wc.set_head(SQ_HEAD[UD as usize][op as usize]);
        wc.wqe_index = idx as u16;
    } else {
        // Hardware reports the RQ index in quanta (rdma-core `irdma_uk_cq_poll_cmpl`
        // divides by `rq_wqe_size_multiplier`).
        let ri = idx >> qp.config().rq_shift;
        let &wr_id = qp.rq_wrid.get(ri as usize)?;
        if ONE {
            regs[1] = ri;
        } else {
            qp.rq.tail = (ri + 1) & qp.rq.mask();
        }
        // On a non-UD QP this bit says the sender invalidated an STag (`irdma_process_cqe`).
        let inv = !UD && hi(w3) & hi(q3::STAG_IPV4) != 0;
        if inv {
            wc.imm_data = q2::src_qpn_or_inv_stag(w2);
        }
        bytes = q0::payload_len(slot.qword(off::QWORD0));
        wc.wr_id = wr_id;
        wc.set_head(RQ_HEAD[UD as usize][inv as usize][(write_imm >> op & 1) as usize]);
        wc.wqe_index = ri as u16;
    }
    // Only the fields rdma-core's `irdma_process_cqe` writes for a success, and `sl` (zero,
    // part of the head): vendor_err, pkey_index, slid and dlid_path_bits keep what the slot
    // held, as `Completion` documents.
    let qp_num = q2::qp_id(w2);
    wc.byte_len = bytes;
    wc.qp_num = qp_num;
    wc.src_qp = if UD { q2::src_qpn_or_inv_stag(w2) } else { qp_num };
    if GEN3 {
        wc.timestamp = u64::from(q0::tcp_seq_psn_rtt_ts(slot.qword(off::QWORD0)));
    }
    Some(bytes)
}

impl Run<'_> {
    /// [`Engine::fast_run`] for UD or other QPs on a GEN3 or older device: the tests those
    /// make per CQE are constants here.
    ///
    /// The cached QP's CQEs keep the queue tails in registers; a CQE of another QP hands
    /// the rest of the run to [`shared`], once per call, which moves between QPs in its
    /// loop with the tails stored in the QPs.
    #[inline(always)]
    fn go<R: SlotSource, const UD: bool, const GEN3: bool>(self, ring: &R, out: &mut [Completion]) -> (usize, Stop) {
        let Run { entries, fast, ci, last_bytes, qps, last_ctx, last_qp, kind } = self;
        let pos = *ci;
        // One lap at most: its slots are consecutive in memory and share one valid-bit
        // flip; the ring's end (not a power of two) ends the run, and the poller starts
        // the next one.
        let flip = pos.flip();
        let (slots, _) = qps.split();
        let (ctx, id) = (*last_ctx, *last_qp);
        let Some(qp) = slots.get_mut(id as usize) else {
            return (0, Stop::Other);
        };
        let sq_known = fast.sq_known;
        let write_imm = fast.rq_write_imm[GEN3 as usize][kind.send_with_imm as usize];
        let mut n = 0usize;
        // First the cached QP alone, its queue tails in registers, written back when its
        // part of the run ends: a CQ with one QP never leaves this loop.
        let mut regs = [qp.sq.tail, qp.rq.tail.wrapping_sub(1)];
        let one_sq_known = if qp.first_sq_wq { 0 } else { sq_known };
        let stop = 'one: {
            for (slot, wc) in ring.along(pos.slot(), &mut *out) {
                let Some(w3) = slot.valid_q3(flip) else {
                    break 'one Stop::Other;
                };
                if hi(w3) & hi(SLOW) != 0 {
                    break 'one Stop::Other;
                }
                if slot.qword(off::QWORD1) != ctx {
                    // Here `Switched` stands for a CQE of another QP, whatever its kind.
                    break 'one Stop::Switched;
                }
                if take::<_, UD, GEN3, true>(slot, w3, qp, one_sq_known, write_imm, &mut regs, wc).is_none() {
                    break 'one Stop::Other;
                }
                n += 1;
            }
            if n == out.len() {
                Stop::Full
            } else {
                Stop::Lap
            }
        };
        qp.sq.tail = regs[0] & qp.sq.mask();
        qp.rq.tail = regs[1].wrapping_add(1) & qp.rq.mask();
        // A CQE of another QP (a CQ shared by several QPs) hands the rest of the run to a
        // loop that moves between QPs in place, their tails stored per CQE.
        let stop = if stop != Stop::Switched {
            stop
        } else {
            let (k, stop) = shared::<R, UD, GEN3>(
                ring,
                out,
                n,
                pos,
                qps,
                (&mut *last_ctx, &mut *last_qp),
                kind,
                sq_known,
                write_imm,
            );
            n = k;
            stop
        };
        // rdma-core's `bytes_xfered` scratch: what the last completion of the run set.
        if let Some(last) = n.checked_sub(1).and_then(|i| out.get(i)) {
            *last_bytes = last.byte_len;
        }
        // A run ends at the ring's end at the latest.
        *ci = pos.step(n as u32, entries);
        (n, stop)
    }
}

/// The rest of a fast run from the CQE at `n`, of another QP than `ctx`'s: a loop that
/// moves between QPs in place, their tails stored per CQE. Out of line, so that a run of
/// one QP keeps its registers; a call pays for it once. Returns the new count, and moves
/// `ctx` and `id` to the QP it took last.
#[inline(never)]
#[allow(clippy::too_many_arguments)] // the run's state, handed over once per call
fn shared<R: SlotSource, const UD: bool, const GEN3: bool>(
    ring: &R,
    out: &mut [Completion],
    mut n: usize,
    pos: Pos,
    qps: &mut QpRegistry,
    (ctx, id): (&mut u64, &mut u32),
    kind: RunKind,
    sq_known: u64,
    write_imm: u64,
) -> (usize, Stop) {
    let flip = pos.flip();
    let (slots, index) = qps.split();
    let Some(mut qp) = slots.get_mut(*id as usize) else {
        return (n, Stop::Other);
    };
    let mut regs = [0; 2];
    let stop = 'run: {
        let rest = out.get_mut(n..).unwrap_or_default();
        for (slot, wc) in ring.along(pos.slot() + n as u32, rest) {
            let Some(w3) = slot.valid_q3(flip) else {
                break 'run Stop::Other;
            };
            if hi(w3) & hi(SLOW) != 0 {
                break 'run Stop::Other;
            }
            let c = slot.qword(off::QWORD1);
            if c != *ctx {
                // As rdma-core moves `cur_qp`: one lookup, and the loop reads the
                // other QP from here. An unknown context goes to the general path,
                // which reports it.
                let Some(found) = index.find(c) else {
                    break 'run Stop::Other;
                };
                (*ctx, *id) = (c, found.id);
                if found.kind != kind {
                    // Another kind of run: the poller starts it at this CQE.
                    break 'run Stop::Switched;
                }
                let Some(next) = slots.get_mut(found.id as usize) else {
                    break 'run Stop::Other;
                };
                qp = next;
            }
            if take::<_, UD, GEN3, false>(slot, w3, qp, sq_known, write_imm, &mut regs, wc).is_none() {
                break 'run Stop::Other;
            }
            n += 1;
        }
        if n == out.len() {
            Stop::Full
        } else {
            Stop::Lap
        }
    };
    (n, stop)
}
