//! The QP registry: completion-context handle → the QP's SQ/RQ tracking state
//! (rdma-core `providers/irdma/uk.c` `irdma_uk_cq_poll_cmpl`, `irdma_uk_qp_init`).
//!
//! An irdma CQE names its QP by the 64-bit completion context the provider passed at
//! create-QP (qword1; `irdma_ucreate_qp` passes `&iwuqp->qp`); rdma-core dereferences it as
//! `struct irdma_qp_uk *`. A direct poller cannot, so the application registers each QP here
//! under the same handle and records its posts; the poller then reads the tables exactly as
//! rdma-core reads `sq_wrtrk_array` and `rq_wrid_array`. Without posts a queue's entries are
//! zero, as rdma-core allocates them (`calloc` in `irdma_ucreate_qp`): wr_id 0, length 0, 0
//! quanta, opcode 0 (RDMA WRITE, what a zeroed SQ WQE's header reads as).
//!
//! A QP rdma-core posts to is registered the same way and then mirrors rdma-core's tables
//! (the `mirror` module: [`Qp::adopt`], [`Qp::sync_posted`], [`Qp::hand_back`]).

mod mirror;

pub use mirror::{AdoptError, ForeignQp};

use dvcq_uapi::irdma::codes::sq_op;
use dvcq_uapi::irdma::HwRev;

/// Transport of a QP: decides the receive-opcode rule (`set_ib_wc_op_rq`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Transport {
    /// RoCEv2: the QP has the `IRDMA_SEND_WITH_IMM` capability.
    #[default]
    Roce,
    /// iWARP: no `IRDMA_SEND_WITH_IMM`; immediate presence decides the receive opcode.
    Iwarp,
}

/// QP type as far as completions care (`ibv_qp.qp_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    #[default]
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram: `src_qp` from the CQE, `IBV_WC_GRH` always set.
    Ud,
}

/// What the registry needs to know about a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// The 24-bit QP number (only for diagnostics; completions take it from the CQE).
    pub qp_num: u32,
    /// QP type.
    pub qp_type: QpType,
    /// Transport.
    pub transport: Transport,
    /// SQ size in 32-byte quanta (a power of two, as rdma-core rounds it; 0 = no SQ).
    pub sq_quanta: u32,
    /// RQ size in WQEs (a power of two; 0 = no RQ).
    pub rq_wqes: u32,
    /// log2 of the RQ WQE size in quanta (`rq_wqe_size_multiplier = 1 << rq_shift`, 0..=3;
    /// GEN1 uses 2: rdma-core `irdma_uk_calc_depth_shift_rq`).
    pub rq_shift: u8,
    /// Connection WQEs at the start of the SQ (`conn_wqes`, set by rdma-core's
    /// `irdma_setup_connection_wqes`): 3 for iWARP QPs on devices with `RTS_AE` (GEN2, GEN3),
    /// 1 for every QP in GEN1 legacy mode, 0 otherwise (RoCE). Below `sq_quanta`. The SQ
    /// starts after them: the first WR posted is WQE `conn_wqes`.
    pub conn_wqes: u16,
}

impl QpConfig {
    /// An RC RoCE QP with the given queue sizes.
    pub const fn rc(qp_num: u32, sq_quanta: u32, rq_wqes: u32) -> Self {
        Self { qp_num, qp_type: QpType::Rc, transport: Transport::Roce, sq_quanta, rq_wqes, rq_shift: 0, conn_wqes: 0 }
    }
    /// A UD RoCE QP with the given queue sizes.
    pub const fn ud(qp_num: u32, sq_quanta: u32, rq_wqes: u32) -> Self {
        Self { qp_type: QpType::Ud, ..Self::rc(qp_num, sq_quanta, rq_wqes) }
    }
}

/// Errors from registering QPs and recording posts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Completion context 0 means "destroyed QP" in a CQE and cannot be registered.
    #[error("completion context 0 is reserved")]
    NullContext,
    /// The handle is already registered.
    #[error("completion context {0:#x} is already registered")]
    Duplicate(u64),
    /// A queue size that is not a power of two or exceeds the 15-bit WQE index.
    #[error("queue of {0} entries: must be 0 or a power of two up to 32768")]
    BadSize(u32),
    /// `rq_shift` above 3.
    #[error("rq_shift {0} is above 3")]
    BadShift(u8),
    /// Connection WQEs that leave no room in the SQ.
    #[error("{0} connection wqes do not fit below the sq size")]
    BadConnWqes(u16),
    /// No such QP.
    #[error("no qp with id {0}")]
    NoQp(u32),
    /// The work queue has no room (rdma-core's ENOMEM).
    #[error("work queue full")]
    Full,
    /// A send of 0 or more than 8 quanta.
    #[error("{0} quanta: a send WQE takes 1 to 8")]
    BadQuanta(u16),
}

/// Index of a registered QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpId(pub u32);

/// One SQ tracking entry, `struct irdma_sq_uk_wr_trk_info`, plus the WQE opcode rdma-core
/// reads from the SQ WQE header on the flush path (`irdma_uk_cq_poll_cmpl`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WrTrk {
    /// `wrid`.
    pub wr_id: u64,
    /// `wr_len`: the sum of SGE lengths.
    pub wr_len: u32,
    /// `quanta` this WQE occupies.
    pub quanta: u16,
    /// The WQE opcode (`IRDMAQPSQ_OPCODE` of the WQE header).
    pub opcode: u8,
}

/// Quanta rdma-core keeps free in an SQ (`IRDMA_SQ_RING_FREE_QUANTA` subtracts 257): room
/// for the hardware's look-ahead past the last WQE posted (and the size rounding), never
/// posted into.
pub const SQ_RESERVE: u32 = 257;

/// A work-queue ring position pair, `struct irdma_ring` without the size (kept as a mask).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WqRing {
    /// Next position to post (0..size-1).
    pub head: u32,
    /// Oldest position not yet retired (0..size-1).
    pub tail: u32,
    mask: u32,
}

impl WqRing {
    fn new(size: u32) -> Self {
        Self { head: 0, tail: 0, mask: size.wrapping_sub(1) }
    }
    /// Slots in the ring.
    pub fn size(&self) -> u32 {
        self.mask.wrapping_add(1)
    }
    /// `IRDMA_RING_USED_QUANTA`.
    #[inline(always)]
    pub fn used(&self) -> u32 {
        self.head.wrapping_sub(self.tail) & self.mask
    }
    /// `IRDMA_RING_MORE_WORK`.
    #[inline(always)]
    pub fn more_work(&self) -> bool {
        self.used() != 0
    }
    /// `IRDMA_RING_FREE_QUANTA`: one slot always stays free.
    pub fn free(&self) -> u32 {
        self.size().saturating_sub(self.used() + 1)
    }
    /// `IRDMA_SQ_RING_FREE_QUANTA`: what a send post may take of an SQ, where rdma-core
    /// keeps [`SQ_RESERVE`] quanta free (`irdma_qp_get_next_send_wqe`, every release and
    /// generation: it sizes each SQ `IRDMA_SQ_RSVD` = 258 quanta beyond what it grants,
    /// so no SQ it creates has fewer than 512).
    ///
    /// Not followed for an SQ of [`SQ_RESERVE`] quanta or fewer, which rdma-core never
    /// creates: its unsigned arithmetic would wrap there and let posts overwrite work not
    /// yet completed, so such an SQ keeps the one free slot of any irdma ring ([`WqRing::free`]).
    pub fn sq_free(&self) -> u32 {
        if self.size() > SQ_RESERVE {
            self.size().saturating_sub(self.used()).saturating_sub(SQ_RESERVE)
        } else {
            self.free()
        }
    }
    /// Sets head and tail (ring images), masked.
    pub fn set(&mut self, head: u32, tail: u32) {
        self.head = head & self.mask;
        self.tail = tail & self.mask;
    }
    #[inline(always)]
    pub(crate) fn mask(&self) -> u32 {
        self.mask
    }
}

/// A registered QP: rdma-core's `irdma_qp_uk` fields the poller reads.
#[derive(Clone, Debug)]
pub struct Qp {
    ctx: u64,
    cfg: QpConfig,
    pub(crate) sq_trk: Box<[WrTrk]>,
    pub(crate) rq_wrid: Box<[u64]>,
    /// SQ ring in quanta.
    pub sq: WqRing,
    /// RQ ring in WQEs.
    pub rq: WqRing,
    pub(crate) first_sq_wq: bool,
    /// Set when a CQE reported a dropped push-mode WQE (`push_dropped`, as
    /// `irdma_uk_cq_poll_cmpl` sets it).
    pub push_dropped: bool,
    pub(crate) send_with_imm: bool,
    pub(crate) ud: bool,
}

impl Qp {
    /// The completion context it was registered under.
    pub fn ctx(&self) -> u64 {
        self.ctx
    }
    /// Its configuration.
    pub fn config(&self) -> &QpConfig {
        &self.cfg
    }
    /// The kind of fast run that takes its CQEs.
    #[inline(always)]
    pub(crate) fn kind(&self) -> RunKind {
        RunKind { ud: self.ud, send_with_imm: self.send_with_imm }
    }
    /// The SQ tracking entry at quanta index `idx` (masked).
    pub fn sq_entry(&self, idx: u32) -> WrTrk {
        self.sq_trk.get((idx & self.sq.mask()) as usize).copied().unwrap_or_default()
    }
    /// The RQ wr_id at `idx` (masked).
    pub fn rq_entry(&self, idx: u32) -> u64 {
        self.rq_wrid.get((idx & self.rq.mask()) as usize).copied().unwrap_or_default()
    }
}

/// The registry: QPs by completion context, with a small open-addressing index.
#[derive(Clone, Debug, Default)]
pub struct QpRegistry {
    qps: Vec<Qp>,
    /// The index over `qps`: capacity a power of two, at most half full.
    index: Vec<IndexEntry>,
    /// 64 - log2(index capacity): [`hash`] keeps the product's top bits.
    hash_shift: u32,
    chunk: u32,
}

/// One bucket of the context index.
#[derive(Clone, Copy, Debug, Default)]
struct IndexEntry {
    ctx: u64,
    /// QP index + 1; 0 = empty.
    id: u32,
    /// The QP's [`RunKind`]: a fast run tests it when it moves to another QP, without
    /// reading the QP.
    kind: RunKind,
}

/// What a fast run keeps constant over the QPs it moves between: whether they are UD (the
/// completion fields differ) and whether they have RoCE's send-with-immediate capability
/// (the receive opcodes differ: `set_ib_wc_op_rq`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunKind {
    pub ud: bool,
    pub send_with_imm: bool,
}

/// Fibonacci hashing: the top bits of the context times 2^64 / phi, in `0..2^(64 - shift)`.
/// Contexts are pointers to equal-sized QP structures, often a fixed stride apart; the top
/// bits of the product spread such an arithmetic run evenly over the table (the middle bits
/// taken before put consecutive QPs in consecutive buckets, so linear probing walked one
/// long cluster: about 8 probes per lookup with 16 QPs).
#[inline(always)]
fn hash(ctx: u64, shift: u32) -> usize {
    (ctx.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize
}

/// How far the index may grow past twice the QP count so that every context sits in its
/// own bucket (a lookup is then one probe): the factor over the smallest capacity.
const INDEX_SPREAD: usize = 16;

/// A QP a context lookup found: its index and kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub id: u32,
    pub kind: RunKind,
}

/// The context index on its own, borrowed apart from the QPs ([`QpRegistry::split`]): a
/// fast run looks QPs up in it while it holds one QP mutably.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ContextIndex<'r> {
    buckets: &'r [IndexEntry],
    shift: u32,
}

impl ContextIndex<'_> {
    /// The QP registered under `ctx`. The registry places every context in its own bucket
    /// whenever the index can spread them so ([`INDEX_SPREAD`]): the first probe, inline, is
    /// then the only one; the rest of a probe chain is walked out of line.
    #[inline(always)]
    pub(crate) fn find(self, ctx: u64) -> Option<Found> {
        let h = hash(ctx, self.shift);
        let e = self.buckets.get(h)?;
        if e.ctx == ctx {
            // An empty bucket holds context 0, which is never registered: its id 0 says
            // "none".
            return e.id.checked_sub(1).map(|id| Found { id, kind: e.kind });
        }
        if e.id == 0 {
            return None;
        }
        self.probe(ctx, h)
    }

    /// Linear probing past the home bucket `h`.
    #[cold]
    #[inline(never)]
    fn probe(self, ctx: u64, h: usize) -> Option<Found> {
        let mask = self.buckets.len().wrapping_sub(1);
        let mut h = h;
        // At most half full: an empty bucket ends the walk; the count bounds it all the same.
        for _ in 0..self.buckets.len() {
            h = (h + 1) & mask;
            let e = self.buckets.get(h)?;
            if e.id == 0 {
                return None;
            }
            if e.ctx == ctx {
                return Some(Found { id: e.id - 1, kind: e.kind });
            }
        }
        None
    }
}

fn check_size(n: u32) -> Result<(), RegistryError> {
    if n == 0 || (n.is_power_of_two() && n <= 1 << 15) {
        Ok(())
    } else {
        Err(RegistryError::BadSize(n))
    }
}

impl QpRegistry {
    /// An empty registry for a CQ of generation `hw_rev` (which fixes the SQ chunk size used
    /// for NOP padding).
    pub fn new(hw_rev: HwRev) -> Self {
        Self { qps: Vec::new(), index: Vec::new(), hash_shift: 63, chunk: hw_rev.sq_chunk_quanta() }
    }

    /// Registers a QP under completion context `ctx`.
    ///
    /// # Errors
    ///
    /// [`RegistryError::NullContext`], [`RegistryError::Duplicate`],
    /// [`RegistryError::BadSize`], [`RegistryError::BadShift`],
    /// [`RegistryError::BadConnWqes`].
    pub fn register(&mut self, ctx: u64, cfg: QpConfig) -> Result<QpId, RegistryError> {
        if ctx == 0 {
            return Err(RegistryError::NullContext);
        }
        if self.find(ctx).is_some() {
            return Err(RegistryError::Duplicate(ctx));
        }
        check_size(cfg.sq_quanta)?;
        check_size(cfg.rq_wqes)?;
        if cfg.rq_shift > 3 {
            return Err(RegistryError::BadShift(cfg.rq_shift));
        }
        let conn = u32::from(cfg.conn_wqes);
        if conn != 0 && conn >= cfg.sq_quanta {
            return Err(RegistryError::BadConnWqes(cfg.conn_wqes));
        }
        // rdma-core's `irdma_setup_connection_wqes` moves the SQ head and tail past the
        // connection WQEs when it creates the QP: user WRs start at WQE `conn_wqes`.
        let mut sq = WqRing::new(cfg.sq_quanta);
        sq.set(conn, conn);
        // Zeroed, as rdma-core's `calloc`ed `sq_wrtrk_array` and `rq_wrid_array` are (and
        // its zeroed SQ, whose WQE headers read as opcode 0) until a post writes an entry.
        let sq_trk = vec![WrTrk::default(); cfg.sq_quanta as usize].into_boxed_slice();
        let rq_wrid = vec![0; cfg.rq_wqes as usize].into_boxed_slice();
        let id = QpId(self.qps.len() as u32);
        self.qps.push(Qp {
            ctx,
            cfg,
            sq_trk,
            rq_wrid,
            sq,
            rq: WqRing::new(cfg.rq_wqes),
            first_sq_wq: cfg.conn_wqes > 0,
            push_dropped: false,
            send_with_imm: cfg.transport == Transport::Roce,
            ud: cfg.qp_type == QpType::Ud,
        });
        self.rebuild_index();
        Ok(id)
    }

    /// Removes the QP registered under `ctx`; returns whether there was one. Ids of QPs
    /// registered later shift down by one. CQEs of the QP still in a ring become
    /// `UnknownQp` items; [`crate::IrdmaCq::unregister`] clears them first, as rdma-core's
    /// QP destroy does.
    pub fn unregister(&mut self, ctx: u64) -> bool {
        match self.find(ctx) {
            Some(i) => {
                self.qps.remove(i as usize);
                self.rebuild_index();
                true
            }
            None => false,
        }
    }

    /// Builds the index anew: at the smallest capacity at least twice the QP count (8 at
    /// least) where every context has its home bucket to itself, up to [`INDEX_SPREAD`]
    /// times that; past it, at the smallest, with probe chains.
    fn rebuild_index(&mut self) {
        let least = (self.qps.len() * 2).next_power_of_two().max(8);
        let mut cap = least;
        while !self.place_all(cap, true) {
            if cap >= least * INDEX_SPREAD {
                cap = least;
                self.place_all(cap, false);
                break;
            }
            cap *= 2;
        }
    }

    /// Fills an index of `cap` buckets; with `home_only`, gives up (false) at the first
    /// context whose home bucket is taken.
    fn place_all(&mut self, cap: usize, home_only: bool) -> bool {
        self.index.clear();
        self.index.resize(cap, IndexEntry::default());
        self.hash_shift = 64 - cap.trailing_zeros();
        for (i, qp) in self.qps.iter().enumerate() {
            let mut h = hash(qp.ctx, self.hash_shift);
            while self.index[h].id != 0 {
                if home_only {
                    return false;
                }
                h = (h + 1) & (cap - 1);
            }
            self.index[h] = IndexEntry { ctx: qp.ctx, id: i as u32 + 1, kind: qp.kind() };
        }
        true
    }

    /// The context index, for lookups.
    #[inline(always)]
    pub(crate) fn index(&self) -> ContextIndex<'_> {
        ContextIndex { buckets: &self.index, shift: self.hash_shift }
    }

    /// The QPs, mutably, and the context index beside them.
    #[inline(always)]
    pub(crate) fn split(&mut self) -> (&mut [Qp], ContextIndex<'_>) {
        (&mut self.qps, ContextIndex { buckets: &self.index, shift: self.hash_shift })
    }

    /// The QP index for completion context `ctx`.
    #[inline]
    pub fn find(&self, ctx: u64) -> Option<u32> {
        self.index().find(ctx).map(|f| f.id)
    }

    /// Bytes the QP lookup and tracking hold: the QP table (its capacity of entries), each
    /// QP's SQ tracking and RQ wr_id tables, and the context index's buckets.
    pub fn qp_table_bytes(&self) -> usize {
        use core::mem::size_of;
        let per_qp: usize =
            self.qps.iter().map(|q| q.sq_trk.len() * size_of::<WrTrk>() + q.rq_wrid.len() * size_of::<u64>()).sum();
        self.qps.capacity() * size_of::<Qp>() + per_qp + self.index.capacity() * size_of::<IndexEntry>()
    }

    /// Number of registered QPs.
    pub fn len(&self) -> usize {
        self.qps.len()
    }
    /// True when no QP is registered.
    pub fn is_empty(&self) -> bool {
        self.qps.is_empty()
    }

    /// The QP with id `id`.
    pub fn qp(&self, id: QpId) -> Option<&Qp> {
        self.qps.get(id.0 as usize)
    }
    /// The QP with id `id`, mutably (to set ring positions).
    pub fn qp_mut(&mut self, id: QpId) -> Option<&mut Qp> {
        self.qps.get_mut(id.0 as usize)
    }
    #[inline(always)]
    pub(crate) fn get_mut(&mut self, i: u32) -> Option<&mut Qp> {
        self.qps.get_mut(i as usize)
    }
    #[inline(always)]
    pub(crate) fn get(&self, i: u32) -> Option<&Qp> {
        self.qps.get(i as usize)
    }

    /// Fills every tracking entry of QP `id` as if each WQE had been posted and nothing
    /// else: SQ entry `i` a one-quantum SEND with wr_id `i`, RQ entry `i` wr_id `i`. What a
    /// ring image or a benchmark, which record no posts, assumes of its queues; the queue
    /// positions are left as they are. A registered QP otherwise starts with zeroed entries,
    /// as rdma-core's do.
    ///
    /// # Errors
    ///
    /// [`RegistryError::NoQp`].
    pub fn preset_identity(&mut self, id: QpId) -> Result<(), RegistryError> {
        let qp = self.qps.get_mut(id.0 as usize).ok_or(RegistryError::NoQp(id.0))?;
        for (i, t) in qp.sq_trk.iter_mut().enumerate() {
            *t = WrTrk { wr_id: i as u64, wr_len: 0, quanta: 1, opcode: sq_op::SEND };
        }
        for (i, w) in qp.rq_wrid.iter_mut().enumerate() {
            *w = i as u64;
        }
        Ok(())
    }

    /// Records a posted send WR of `quanta` quanta (1..=8) and returns its SQ quanta index
    /// (what the hardware's SQ CQE will carry as `wqe_idx`). Like rdma-core, a WR never
    /// straddles an SQ chunk boundary: the gap is filled with 1-quantum NOP WQEs first
    /// (`irdma_qp_get_next_send_wqe`), and the post is refused unless the WR and its padding
    /// fit in [`WqRing::sq_free`], which keeps rdma-core's [`SQ_RESERVE`]. Unsignaled WRs are
    /// posted the same way; no CQE will name them.
    ///
    /// # Errors
    ///
    /// [`RegistryError::NoQp`], [`RegistryError::BadQuanta`], [`RegistryError::Full`].
    pub fn post_send(
        &mut self,
        id: QpId,
        wr_id: u64,
        wr_len: u32,
        quanta: u16,
        opcode: u8,
    ) -> Result<u16, RegistryError> {
        let chunk = self.chunk;
        let qp = self.qps.get_mut(id.0 as usize).ok_or(RegistryError::NoQp(id.0))?;
        if quanta == 0 || quanta > 8 {
            return Err(RegistryError::BadQuanta(quanta));
        }
        let q = quanta as u32;
        let within = qp.sq.head % chunk;
        let pad = if within + q > chunk { chunk - within } else { 0 };
        if qp.sq.sq_free() < pad + q {
            return Err(RegistryError::Full);
        }
        for _ in 0..pad {
            let h = qp.sq.head;
            qp.sq_trk[h as usize] = WrTrk { wr_id: 0, wr_len: 0, quanta: 1, opcode: sq_op::NOP };
            qp.sq.head = (h + 1) & qp.sq.mask();
        }
        let h = qp.sq.head;
        qp.sq_trk[h as usize] = WrTrk { wr_id, wr_len, quanta, opcode };
        qp.sq.head = (h + q) & qp.sq.mask();
        Ok(h as u16)
    }

    /// Records a posted receive WR and returns its RQ index (the hardware reports it in
    /// quanta: `index << rq_shift`).
    ///
    /// # Errors
    ///
    /// [`RegistryError::NoQp`], [`RegistryError::Full`].
    pub fn post_recv(&mut self, id: QpId, wr_id: u64) -> Result<u16, RegistryError> {
        let qp = self.qps.get_mut(id.0 as usize).ok_or(RegistryError::NoQp(id.0))?;
        if qp.rq.free() < 1 {
            return Err(RegistryError::Full);
        }
        let h = qp.rq.head;
        qp.rq_wrid[h as usize] = wr_id;
        qp.rq.head = (h + 1) & qp.rq.mask();
        Ok(h as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Contexts a fixed stride apart (QP structures allocated one after another) each get
    /// a bucket of their own: every lookup is one probe.
    #[test]
    fn strided_contexts_each_get_their_own_bucket() {
        for stride in [0x40u64, 0x100, 0x1000, 0x1_0000] {
            let mut r = QpRegistry::new(HwRev::Gen2);
            for k in 0..64u64 {
                r.register(0x7f00_dead_0000 + k * stride, QpConfig::rc(k as u32 + 1, 8, 8)).unwrap();
            }
            let mask = r.index.len() - 1;
            let longest = (0..64u64)
                .map(|k| {
                    let ctx = 0x7f00_dead_0000 + k * stride;
                    let mut h = hash(ctx, r.hash_shift) & mask;
                    let mut probes = 1;
                    while r.index[h].ctx != ctx {
                        h = (h + 1) & mask;
                        probes += 1;
                    }
                    assert_eq!(r.find(ctx), Some(k as u32));
                    probes
                })
                .max();
            assert_eq!(longest, Some(1), "stride {stride:#x}: a lookup takes {longest:?} probes");
        }
    }

    /// Contexts that share a home bucket at every capacity the index may take still find
    /// their QPs, through the probe chain; unknown contexts find none.
    #[test]
    fn contexts_sharing_a_bucket_are_found_past_it() {
        let a = 0x7f00_dead_0000u64;
        // The largest index two QPs may get has 8 * INDEX_SPREAD buckets: a context with
        // the same top bits there has the same home at every smaller capacity too.
        let shift = 64 - (8 * INDEX_SPREAD).trailing_zeros();
        let b = (1..).map(|k| a + k * 0x40).find(|&c| hash(c, shift) == hash(a, shift)).unwrap();
        let mut r = QpRegistry::new(HwRev::Gen2);
        r.register(a, QpConfig::rc(1, 8, 8)).unwrap();
        r.register(b, QpConfig::ud(2, 8, 8)).unwrap();
        assert_eq!(r.index.len(), 8, "no capacity separates them: the smallest is kept");
        assert_eq!(r.index().find(a), Some(Found { id: 0, kind: RunKind { ud: false, send_with_imm: true } }));
        assert_eq!(r.index().find(b), Some(Found { id: 1, kind: RunKind { ud: true, send_with_imm: true } }));
        let c = (1..).map(|k| b + k * 0x40).find(|&c| hash(c, 61) == hash(a, 61)).unwrap();
        assert_eq!(r.find(c), None);
        assert_eq!(r.find(0), None);
        assert!(r.unregister(a));
        assert_eq!(r.find(b), Some(0));
    }

    #[test]
    fn lookup_many_handles() {
        let mut r = QpRegistry::new(HwRev::Gen2);
        for i in 1..=100u64 {
            r.register(i * 0x1000 + 0x7f00_0000_0000, QpConfig::rc(i as u32, 16, 16)).unwrap();
        }
        for i in 1..=100u64 {
            assert_eq!(r.find(i * 0x1000 + 0x7f00_0000_0000), Some(i as u32 - 1));
        }
        assert_eq!(r.find(5), None);
        assert_eq!(r.register(0, QpConfig::rc(1, 4, 4)), Err(RegistryError::NullContext));
        assert!(matches!(r.register(0x7f00_0000_1000, QpConfig::rc(1, 4, 4)), Err(RegistryError::Duplicate(_))));
        assert_eq!(r.register(9, QpConfig::rc(1, 6, 4)), Err(RegistryError::BadSize(6)));
        assert!(r.unregister(0x7f00_0000_1000));
        assert_eq!(r.find(0x7f00_0000_2000), Some(0));
    }

    /// What `register` and `post_send` accept and refuse, at the edges.
    #[test]
    fn registration_and_posting_limits() {
        let mut r = QpRegistry::new(HwRev::Gen2);
        assert!(r.is_empty());
        let shift = |rq_shift| QpConfig { rq_shift, ..QpConfig::rc(1, 8, 8) };
        assert!(r.register(1, shift(3)).is_ok());
        assert_eq!(r.register(2, shift(4)), Err(RegistryError::BadShift(4)));
        let id = r.register(0x50, QpConfig::rc(2, 16, 4)).unwrap();
        assert_eq!((r.len(), r.is_empty(), r.qp(id).map(Qp::ctx)), (2, false, Some(0x50)));
        for bad in [0, 9] {
            assert_eq!(r.post_send(id, 1, 1, bad, sq_op::SEND), Err(RegistryError::BadQuanta(bad)));
        }
        // 16 quanta hold 15 (one stays free): 8, then 7 from the chunk start at 8 fill it.
        assert_eq!(r.post_send(id, 1, 1, 8, sq_op::SEND), Ok(0));
        assert_eq!(r.post_send(id, 2, 1, 7, sq_op::SEND), Ok(8));
        assert_eq!(r.post_send(id, 3, 1, 1, sq_op::SEND), Err(RegistryError::Full));
    }

    /// rdma-core refuses a send post that would leave fewer than 257 quanta free
    /// (`IRDMA_SQ_RING_FREE_QUANTA`), on every generation: a 512-quantum SQ (the smallest it
    /// creates) takes 255 one-quantum sends, a 1024-quantum one 767; padding counts. An SQ
    /// of 257 quanta or fewer, which rdma-core never creates, keeps one slot free.
    #[test]
    fn send_posts_keep_rdma_cores_257_quanta_free() {
        for rev in [HwRev::Gen1, HwRev::Gen2, HwRev::Gen3] {
            for (size, fits) in [(512u32, 255u64), (1024, 767), (256, 255), (16, 15)] {
                let mut r = QpRegistry::new(rev);
                let id = r.register(1, QpConfig::rc(1, size, 4)).unwrap();
                for i in 0..fits {
                    assert!(r.post_send(id, i, 1, 1, sq_op::SEND).is_ok(), "{rev:?} {size}: post {i}");
                }
                assert_eq!(r.post_send(id, 0, 1, 1, sq_op::SEND), Err(RegistryError::Full), "{rev:?} {size}");
                assert_eq!(r.qp(id).unwrap().sq.sq_free(), 0);
            }
        }
        // Padding to the chunk counts: 8-quanta sends on GEN2 from index 0 need no pad;
        // after one 1-quantum send each needs 7 NOPs first the first time.
        let mut r = QpRegistry::new(HwRev::Gen2);
        let id = r.register(1, QpConfig::rc(1, 512, 4)).unwrap();
        let mut posted = 0;
        while r.post_send(id, 0, 1, 8, sq_op::SEND).is_ok() {
            posted += 1;
        }
        // 255 quanta free: 31 sends of 8.
        assert_eq!(posted, 31);
        let qp = r.qp(id).unwrap();
        assert_eq!((qp.sq.used(), qp.sq.sq_free(), qp.sq.free()), (248, 7, 263));
    }

    #[test]
    fn posts_pad_with_nops_at_chunk_boundaries() {
        let mut r = QpRegistry::new(HwRev::Gen2);
        let id = r.register(1, QpConfig::rc(1, 32, 4)).unwrap();
        assert_eq!(r.post_send(id, 10, 100, 3, sq_op::SEND), Ok(0));
        assert_eq!(r.post_send(id, 11, 100, 3, sq_op::SEND), Ok(3));
        // 6 + 3 > 8: two NOPs at 6 and 7, then the WR at 8.
        assert_eq!(r.post_send(id, 12, 100, 3, sq_op::RDMA_WRITE), Ok(8));
        let qp = r.qp(id).unwrap();
        assert_eq!(qp.sq_entry(6).opcode, sq_op::NOP);
        assert_eq!(qp.sq_entry(7).opcode, sq_op::NOP);
        assert_eq!(qp.sq_entry(8).wr_id, 12);
        assert_eq!(qp.sq.head, 11);
        assert_eq!(r.post_recv(id, 7), Ok(0));
        assert_eq!(r.post_recv(id, 8), Ok(1));
        assert_eq!(r.post_recv(id, 9), Ok(2));
        assert_eq!(r.post_recv(id, 10), Err(RegistryError::Full));
    }

    #[test]
    fn connection_wqes_come_before_the_first_post() {
        let iwarp = |conn_wqes, sq| QpConfig { transport: Transport::Iwarp, conn_wqes, ..QpConfig::rc(1, sq, 4) };
        // GEN2 iWARP: 3 connection WQEs; the 8-quanta chunk still counts from index 0.
        let mut r = QpRegistry::new(HwRev::Gen2);
        let id = r.register(1, iwarp(3, 16)).unwrap();
        let qp = r.qp(id).unwrap();
        assert_eq!((qp.sq.head, qp.sq.tail, qp.first_sq_wq), (3, 3, true));
        assert_eq!(r.post_send(id, 10, 1, 1, sq_op::SEND), Ok(3));
        assert_eq!(r.post_send(id, 11, 1, 4, sq_op::SEND), Ok(4));
        // Index 8 starts a chunk: an 8-quanta WR needs no pad.
        assert_eq!(r.post_send(id, 12, 1, 8, sq_op::SEND), Ok(8));
        // GEN1 legacy: 1 connection WQE, 2-quanta chunks: a 2-quanta WR pads index 1.
        let mut r = QpRegistry::new(HwRev::Gen1);
        let id = r.register(1, iwarp(1, 8)).unwrap();
        assert_eq!(r.post_send(id, 10, 1, 2, sq_op::SEND), Ok(2));
        assert_eq!(r.qp(id).unwrap().sq_entry(1).opcode, sq_op::NOP);
        // The connection WQEs must leave room in the SQ; a RoCE QP has none.
        assert_eq!(r.register(2, iwarp(8, 8)), Err(RegistryError::BadConnWqes(8)));
        assert_eq!(r.register(3, iwarp(1, 0)), Err(RegistryError::BadConnWqes(1)));
        let id = r.register(4, QpConfig::rc(1, 8, 4)).unwrap();
        assert!(!r.qp(id).unwrap().first_sq_wq);
        assert_eq!(r.post_send(id, 10, 1, 1, sq_op::SEND), Ok(0));
    }
}
