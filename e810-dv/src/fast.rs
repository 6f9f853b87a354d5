//! The common-case CQE path: runs of successful, non-extended, non-SRQ CQEs of the QP the
//! previous CQE named. It produces exactly what [`Engine::translate`] produces for such a
//! CQE (the conformance and image tests compare both paths), writing straight into the
//! caller's completions; anything else ends the run for the general path.
//!
//! Per run, not per CQE: the QP lookup, its queue tables and settings, and the write-back
//! of the queue tails and rdma-core's `bytes_xfered` scratch. Per CQE: the valid bit, the
//! context compare, one table load for the completion head, and the fields. A CQE of
//! another QP of the same kind (UD or not) moves the run to that QP without leaving the
//! call (a CQ shared by several QPs): the QP cached before needs no lookup, any other one a
//! registry lookup.

use crate::cq::Engine;
use crate::registry::QpRegistry;
use crate::ring::{Pos, SlotSource, SlotWords};
use crate::status::{rq_opcode, sq_opcode, Compat, Release};
use dvcq_provider::{Completion, WcFlags, WcHead, WcHeadWord, WcOpcode};
use dvcq_uapi::irdma::cqe::{off, q0, q2, q3};

/// A queue position no completion of a run has set (indexes are 15-bit).
const NONE: u32 = u32::MAX;

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
    /// Polls common-case CQEs of the cached QP into `out` until `out` is full, the next
    /// CQE is not one (left unconsumed at `self.ci`), or the ring ends; returns the count
    /// and why it stopped. A CQE of another registered QP moves the run to that QP in
    /// place when both are UD or both are not.
    #[inline(always)]
    pub(crate) fn fast_run<R: SlotSource>(&mut self, ring: &R, out: &mut [Completion]) -> (usize, Stop) {
        self.fast_run_as::<R, false>(ring, 0, out)
    }

    /// A one-CQE [`Engine::fast_run`] at a CQE whose qword3 `w3` the caller found valid
    /// (the acquire fence issued): it is not loaded or tested again. Returns 0 or 1.
    #[inline(always)]
    pub(crate) fn fast_one<R: SlotSource>(&mut self, ring: &R, w3: u64, wc: &mut Completion) -> usize {
        self.fast_run_as::<R, true>(ring, w3, core::slice::from_mut(wc)).0
    }

    /// [`Engine::fast_run`], with `KNOWN`: the first CQE's valid qword3 is `w3`.
    #[inline(always)]
    fn fast_run_as<R: SlotSource, const KNOWN: bool>(
        &mut self,
        ring: &R,
        w3: u64,
        out: &mut [Completion],
    ) -> (usize, Stop) {
        // `last_ctx` is 0 while invalid or while a flush CQE is parked.
        let Engine { ci, entries, gen3, fast, qps, last_bytes, last_ctx, last_qp, prev_ctx, prev_qp, .. } = self;
        let Some(ud) = (*last_ctx != 0).then(|| qps.get(*last_qp)).flatten().map(|qp| qp.ud) else {
            return (0, Stop::Other);
        };
        let cache = QpCache { last_ctx, last_qp, prev_ctx, prev_qp };
        let run = Run { entries: *entries, fast, ci, last_bytes, qps, cache };
        match (ud, *gen3) {
            (false, false) => run.go::<R, false, false, KNOWN>(ring, w3, out),
            (false, true) => run.go::<R, false, true, KNOWN>(ring, w3, out),
            (true, false) => run.go::<R, true, false, KNOWN>(ring, w3, out),
            (true, true) => run.go::<R, true, true, KNOWN>(ring, w3, out),
        }
    }
}

/// The engine's two-entry QP lookup cache, as a fast run switches it.
struct QpCache<'e> {
    last_ctx: &'e mut u64,
    last_qp: &'e mut u32,
    prev_ctx: &'e mut u64,
    prev_qp: &'e mut u32,
}

/// The engine state a fast run reads and advances.
struct Run<'e> {
    entries: u32,
    fast: &'static FastTables,
    ci: &'e mut Pos,
    last_bytes: &'e mut u32,
    qps: &'e mut QpRegistry,
    cache: QpCache<'e>,
}

impl Run<'_> {
    /// [`Engine::fast_run`] for UD or other QPs on a GEN3 or older device: the tests those
    /// make per CQE are constants here. With `KNOWN`, the first CQE's valid qword3 is
    /// `known_w3` (a one-CQE poll).
    #[inline(always)]
    fn go<R: SlotSource, const UD: bool, const GEN3: bool, const KNOWN: bool>(
        self,
        ring: &R,
        known_w3: u64,
        out: &mut [Completion],
    ) -> (usize, Stop) {
        let Run { entries, fast, qps, cache, .. } = self;
        let ci = *self.ci;
        // One lap at most: its slots are consecutive in memory and share one valid-bit
        // flip; the ring's end (not a power of two) ends the run, and the poller starts
        // the next one.
        let flip = ci.flip();
        let mut n = 0usize;
        let stop = loop {
            let ctx = *cache.last_ctx;
            let Some(qp) = qps.get_mut(*cache.last_qp) else {
                break Stop::Other;
            };
            // QP fields are read where they are used: the compiler keeps in registers what
            // a long run reuses, and a one-CQE poll loads only what its CQE needs. Two
            // derived values are worth computing once: until the first SQ completion after
            // the connection WQEs, SQ CQEs need the general path (`first_sq_wq`); and
            // which RQ opcodes are writes with immediate.
            let sq_known = if qp.first_sq_wq { 0 } else { fast.sq_known };
            let write_imm = fast.rq_write_imm[GEN3 as usize][qp.send_with_imm as usize];
            // The queue tails this QP's part of the run leaves, written back when it ends
            // ([`NONE`]: no completion of that queue): the SQ index past the last
            // completed WQE, and the RQ index of the last completed receive.
            let (mut sq_next, mut rq_last) = (NONE, NONE);
            // The context of a CQE of another QP that ended this QP's part (0: none).
            let mut other = 0;
            let stop = 'run: {
                let rest = out.get_mut(n..).unwrap_or_default();
                for (slot, wc) in ring.along(ci.slot() + n as u32, rest) {
                    let w3 = if KNOWN && n == 0 { Some(known_w3) } else { slot.valid_q3(flip) };
                    let Some(w3) = w3 else {
                        break 'run Stop::Other;
                    };
                    if hi(w3) & hi(SLOW) != 0 {
                        break 'run Stop::Other;
                    }
                    let c = slot.qword(off::QWORD1);
                    if c != ctx {
                        other = c;
                        break 'run Stop::Other;
                    }
                    let w2 = slot.qword(off::QWORD2);
                    let idx = u32::from(q3::wqe_idx(w3));
                    let op = q3::op(w3);
                    let bytes;
                    if hi(w3) & hi(q3::SQ) != 0 {
                        let Some(&trk) = qp.sq_trk.get(idx as usize) else {
                            break 'run Stop::Other;
                        };
                        if sq_known >> op & 1 == 0 {
                            break 'run Stop::Other;
                        }
                        sq_next = idx + u32::from(trk.quanta);
                        bytes = trk.wr_len;
                        wc.wr_id = trk.wr_id;
                        wc.set_head(SQ_HEAD[UD as usize][op as usize]);
                        wc.wqe_index = idx as u16;
                    } else {
                        // Hardware reports the RQ index in quanta (rdma-core
                        // `irdma_uk_cq_poll_cmpl` divides by `rq_wqe_size_multiplier`).
                        let ri = idx >> qp.config().rq_shift;
                        let Some(&wr_id) = qp.rq_wrid.get(ri as usize) else {
                            break 'run Stop::Other;
                        };
                        rq_last = ri;
                        // On a non-UD QP this bit says the sender invalidated an STag
                        // (`irdma_process_cqe`).
                        let inv = !UD && hi(w3) & hi(q3::STAG_IPV4) != 0;
                        if inv {
                            wc.imm_data = q2::src_qpn_or_inv_stag(w2);
                        }
                        bytes = q0::payload_len(slot.qword(off::QWORD0));
                        wc.wr_id = wr_id;
                        wc.set_head(RQ_HEAD[UD as usize][inv as usize][(write_imm >> op & 1) as usize]);
                        wc.wqe_index = ri as u16;
                    }
                    // Only the fields rdma-core's `irdma_process_cqe` writes for a success,
                    // and `sl` (zero, part of the head): vendor_err, pkey_index, slid and
                    // dlid_path_bits keep what the slot held, as `Completion` documents.
                    let qp_num = q2::qp_id(w2);
                    wc.byte_len = bytes;
                    wc.qp_num = qp_num;
                    wc.src_qp = if UD { q2::src_qpn_or_inv_stag(w2) } else { qp_num };
                    if GEN3 {
                        wc.timestamp = u64::from(q0::tcp_seq_psn_rtt_ts(slot.qword(off::QWORD0)));
                    }
                    n += 1;
                }
                if n == out.len() {
                    Stop::Full
                } else {
                    Stop::Lap
                }
            };
            if sq_next != NONE {
                qp.sq.tail = sq_next & qp.sq.mask();
            }
            if rq_last != NONE {
                qp.rq.tail = rq_last.wrapping_add(1) & qp.rq.mask();
            }
            // Another QP's CQE (a CQ shared by several QPs): go on with that QP, in place,
            // if it takes the same run (UD or not), as rdma-core moves `cur_qp`; else the
            // poller takes the CQE from here.
            if other == 0 || out.len() == 1 {
                break stop;
            }
            // The QP cached before (two QPs taking turns) needs no lookup.
            let next = if other == *cache.prev_ctx { Some(*cache.prev_qp) } else { qps.find_out_of_line(other) };
            let Some(next) = next.filter(|&id| qps.get(id).is_some_and(|q| q.ud == UD)) else {
                break stop;
            };
            (*cache.prev_ctx, *cache.prev_qp) = (ctx, *cache.last_qp);
            (*cache.last_ctx, *cache.last_qp) = (other, next);
        };
        // rdma-core's `bytes_xfered` scratch: what the last completion of the run set.
        if let Some(last) = n.checked_sub(1).and_then(|i| out.get(i)) {
            *self.last_bytes = last.byte_len;
        }
        // A run ends at the ring's end at the latest.
        *self.ci = ci.step(n as u32, entries);
        (n, stop)
    }
}
