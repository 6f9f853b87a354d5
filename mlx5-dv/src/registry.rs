//! The resource registry: the QPs and SRQs a CQ's CQEs may name, with the wr_id tables the
//! application fills when it posts, read the way rdma-core's `providers/mlx5/cq.c`
//! (`mlx5_parse_cqe`, `handle_good_req`, `handle_responder`) reads its own.
//!
//! rdma-core keeps `wrid`, `wqe_head` and `wr_data` private, so a direct-verbs poller cannot
//! recover `wr_id`s for work posted through `ibv_post_send`. Here the application records
//! each post ([`SendQueue::post`], [`RecvQueue::post`], [`Srq::post`]) and the poller reads
//! the tables exactly the way rdma-core's poll reads its own. Without posts, a queue's
//! table holds the identity mapping, so `wr_id` is the WQE index.

mod adopt;
mod adopt_srq;
mod remove;

use crate::scatter::{RecvWqes, Scatter, SendWqes};
use crate::sig::{MkeySig, SigError};
pub use adopt::{AdoptError, ForeignWq};
pub use adopt_srq::ForeignSrq;
use adopt_srq::SrqAdoption;
use core::cell::Cell;
use dvcq_provider::{MemoryRegion, MemoryRegions, Pow2Table, WcOpcode, WcStatus, WqBuffer};
use rustc_hash::FxHashMap;

/// Marker in `wr_data` for "no opcode recorded for this WQE".
const NO_WR_DATA: u8 = 0xff;

/// One send-queue table entry: rdma-core's `wrid[i]`, `wqe_head[i]` and `wr_data[i]`, kept
/// together so a completion touches one cache line and one bounds check.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SqEntry {
    pub(crate) wr_id: u64,
    /// `wqe_head[i] + 1`: the SQ's tail once this entry's work request retires, kept so
    /// that a poll retires with one load and one store.
    retired_tail: u32,
    pub(crate) wr_data: u8,
}

impl SqEntry {
    /// An entry for the work request numbered `wqe_head` (rdma-core's `wqe_head[i]`).
    pub(crate) fn new(wr_id: u64, wqe_head: u32, wr_data: u8) -> Self {
        Self { wr_id, retired_tail: wqe_head.wrapping_add(1), wr_data }
    }

    /// rdma-core's `wqe_head[i]`.
    fn wqe_head(&self) -> u32 {
        self.retired_tail.wrapping_sub(1)
    }
}

/// Send-queue tracking: rdma-core's `sq.wrid`, `sq.wqe_head`, `sq.wr_data`, head and tail.
#[derive(Debug, Clone)]
pub struct SendQueue {
    table: Pow2Table<SqEntry>,
    /// Next WQE index (in 64-byte WQEBBs), `sq.cur_post`.
    cur_post: u32,
    /// Work requests posted, `sq.head`.
    head: u32,
    /// Work requests retired, `sq.tail`. A cell so that a poll run can retire work
    /// requests of several QPs through shared references (the poller is `!Sync`).
    tail: Cell<u32>,
}

impl SendQueue {
    /// `None` unless `wqe_cnt` is a power of two.
    fn new(wqe_cnt: u32) -> Option<Self> {
        Some(Self {
            // Identity: each WQE is its own work request with wr_id = its index, so a CQE
            // for index i retires it.
            table: Pow2Table::from_fn(wqe_cnt as usize, |i| SqEntry::new(i as u64, i as u32, NO_WR_DATA))?,
            cur_post: 0,
            head: 0,
            tail: Cell::new(0),
        })
    }

    /// Records a posted send work request of `wqebbs` 64-byte blocks; returns the WQE index
    /// its control segment carries (what the requester CQE's `wqe_counter` will be).
    ///
    /// Like rdma-core: `wrid[idx] = wr_id`, `wqe_head[idx] = head`, then `head += 1`,
    /// `cur_post += wqebbs`. A later CQE for this WQE retires it and every older one.
    pub fn post(&mut self, wr_id: u64, wqebbs: u32) -> u16 {
        self.post_with_opcode(wr_id, wqebbs, None)
    }

    /// [`SendQueue::post`] for WQEs whose completion opcode the CQE cannot tell (UMR,
    /// SET_PSV, NOP, MMO: rdma-core's `wr_data`), or `Driver2` for raw WQEs.
    pub fn post_with_opcode(&mut self, wr_id: u64, wqebbs: u32, opcode: Option<WcOpcode>) -> u16 {
        *self.table.at_mut(self.cur_post as usize) =
            SqEntry::new(wr_id, self.head, opcode.map_or(NO_WR_DATA, |o| o as u8));
        let wqe = self.cur_post as u16;
        self.head = self.head.wrapping_add(1);
        self.cur_post = self.cur_post.wrapping_add(wqebbs.max(1));
        wqe
    }

    /// Work requests posted but not yet retired by a CQE.
    pub fn outstanding(&self) -> u32 {
        self.head.wrapping_sub(self.tail.get())
    }

    /// The posted range of a queue with nothing posted yet, for a ring image: `count`
    /// one-WQEBB work requests at WQE indexes `first`, `first + 1`, ... (wrapping), each
    /// its index as wr_id, outstanding.
    pub(crate) fn set_posted(&mut self, first: u32, count: u32) {
        let mask = self.table.mask() as u32;
        for k in 0..count.min(mask + 1) {
            let bb = first.wrapping_add(k);
            *self.table.at_mut((bb & mask) as usize) = SqEntry::new(u64::from(bb & mask), bb, NO_WR_DATA);
        }
        self.head = first.wrapping_add(count);
        self.tail.set(first);
        self.cur_post = first.wrapping_add(count);
    }

    /// The WQE index of the oldest outstanding work request and how many WQEBBs from it
    /// to the next post hold outstanding work (the whole queue when it is full); (0, 0)
    /// with nothing outstanding. What a ring image records of the SQ's posts.
    pub(crate) fn posted_bbs(&self) -> (u32, u32) {
        let outstanding = self.outstanding();
        if outstanding == 0 || outstanding > self.wqe_cnt() {
            return (0, 0);
        }
        let tail = self.tail.get();
        let mask = self.table.mask() as u32;
        let first = (0..=mask).find(|&i| self.table.at(i as usize).wqe_head() == tail);
        match first {
            Some(first) => {
                let n = self.cur_post.wrapping_sub(first) & mask;
                (first, if n == 0 { mask + 1 } else { n })
            }
            None => (0, 0),
        }
    }

    /// Whether the WQE a requester CQE's `wqe_counter` names holds a work request posted
    /// and not yet retired.
    pub(crate) fn holds_outstanding(&self, wqe_counter: u16) -> bool {
        let e = self.table.at(wqe_counter as usize & self.table.mask());
        let outstanding = self.outstanding();
        // Garbage may have retired past the head: then nothing counts as posted.
        outstanding <= self.wqe_cnt() && e.wqe_head().wrapping_sub(self.tail.get()) < outstanding
    }

    /// Entries in the table (`wqe_cnt`).
    pub fn wqe_cnt(&self) -> u32 {
        self.table.len() as u32
    }

    /// The wr_id for a requester CQE's `wqe_counter` and retire everything up to it
    /// (`sq.tail = wqe_head[idx] + 1`, as `mlx5_parse_cqe` does: one CQE retires the older
    /// unsignaled WQEs). Returns (masked index, wr_id, wr_data).
    #[inline(always)]
    pub(crate) fn complete(&mut self, wqe_counter: u16) -> (u32, u64, u8) {
        let idx = wqe_counter as usize & self.table.mask();
        let e = self.table.at(idx);
        self.tail.set(e.retired_tail);
        (idx as u32, e.wr_id, e.wr_data)
    }

    /// The wr_id table (`wqe_cnt` entries, a power of two), for a poll loop that indexes
    /// it with `wqe_counter & (len - 1)`.
    #[inline(always)]
    pub(crate) fn table(&self) -> &Pow2Table<SqEntry> {
        &self.table
    }

    /// Retires every work request up to and including the one at masked index `idx`: what
    /// [`SendQueue::complete`] does, for a poll loop that looks entries up with
    /// [`SendQueue::peek`] and retires once, after its last requester CQE.
    #[inline(always)]
    pub(crate) fn retire_through(&self, idx: u32) {
        self.tail.set(self.table.at(idx as usize).retired_tail);
    }

    /// Retires every work request up to and including the one whose table entry is `e`
    /// (read from [`SendQueue::table`]): the fast path's per-CQE form of
    /// [`SendQueue::complete`].
    #[inline(always)]
    pub(crate) fn retire(&self, e: &SqEntry) {
        self.tail.set(e.retired_tail);
    }

    /// Like [`SendQueue::complete`] without retiring anything.
    #[inline(always)]
    pub(crate) fn peek(&self, wqe_counter: u16) -> (u32, u64, u8) {
        let idx = wqe_counter as usize & self.table.mask();
        let e = self.table.at(idx);
        (idx as u32, e.wr_id, e.wr_data)
    }
}

/// Receive-queue tracking: rdma-core's `rq.wrid`, head and tail.
#[derive(Debug, Clone)]
pub struct RecvQueue {
    wrid: Pow2Table<u64>,
    head: u32,
    /// A cell for the same reason as [`SendQueue`]'s tail.
    tail: Cell<u32>,
}

impl RecvQueue {
    /// `None` unless `wqe_cnt` is a power of two.
    fn new(wqe_cnt: u32) -> Option<Self> {
        Some(Self { wrid: Pow2Table::from_fn(wqe_cnt as usize, |i| i as u64)?, head: 0, tail: Cell::new(0) })
    }

    /// Records a posted receive; returns its WQE index.
    pub fn post(&mut self, wr_id: u64) -> u16 {
        let idx = self.head as usize & self.wrid.mask();
        *self.wrid.at_mut(idx) = wr_id;
        self.head = self.head.wrapping_add(1);
        idx as u16
    }

    /// Receives posted and not yet completed.
    pub fn outstanding(&self) -> u32 {
        self.head.wrapping_sub(self.tail.get())
    }

    /// Entries in the table (`wqe_cnt`).
    pub fn wqe_cnt(&self) -> u32 {
        self.wrid.len() as u32
    }

    /// Completes the receive at WQE counter `wqe_counter`; returns (index, wr_id). The
    /// index is the CQE's counter masked to the queue, `rq.wrid[wqe_counter & (wqe_cnt -
    /// 1)]`, as rdma-core takes it from v55.0 on, for successful receives
    /// (`handle_responder`) and errors and flushes (`mlx5_parse_cqe`'s error branch) alike:
    /// commit 7e8db6fbd, "mlx5: Handle OOO WQE consumption in CQE generation", because a
    /// device may consume receive WQEs out of order. v44 to v54 (every point release
    /// checked) and the kernel's `mlx5_poll_one` took `rq.wrid[rq.tail & (wqe_cnt - 1)]`,
    /// which names the same WQE only while receives complete in order; a ring where they do
    /// not (tests/image.rs has one) polls differently on those releases, and dvcq gives
    /// v55's answer. The tail counts completions either way.
    #[inline(always)]
    pub(crate) fn complete(&mut self, wqe_counter: u16) -> (u32, u64) {
        self.tail.set(self.tail.get().wrapping_add(1));
        self.at(wqe_counter as u32)
    }

    /// [`RecvQueue::complete`] without counting the completion.
    #[inline]
    pub(crate) fn peek(&self, wqe_counter: u16) -> (u32, u64) {
        self.at(wqe_counter as u32)
    }

    /// (index, wr_id) of the receive at running position (or WQE counter) `pos`.
    #[inline(always)]
    pub(crate) fn at(&self, pos: u32) -> (u32, u64) {
        let idx = pos as usize & self.wrid.mask();
        (idx as u32, *self.wrid.at(idx))
    }

    /// The wr_id table (`wqe_cnt` entries, a power of two), indexed by the masked WQE
    /// counter.
    #[inline(always)]
    pub(crate) fn wrids(&self) -> &Pow2Table<u64> {
        &self.wrid
    }

    /// The running position of the next receive posted.
    #[inline(always)]
    pub(crate) fn head(&self) -> u32 {
        self.head
    }

    /// The running position of the next receive completion.
    #[inline(always)]
    pub(crate) fn tail(&self) -> u32 {
        self.tail.get()
    }

    /// Records that every receive before running position `tail` has completed.
    #[inline(always)]
    pub(crate) fn set_tail(&self, tail: u32) {
        self.tail.set(tail);
    }
}

/// Shared receive queue tracking: rdma-core's `srq.wrid`, indexed by the CQE's
/// `wqe_counter` **without masking** (rdma-core `handle_responder`; an RQ index is masked).
#[derive(Debug, Clone)]
pub struct Srq {
    srqn: u32,
    /// The SRQ number as a CQE's `srqn_uidx` holds it (read as one native word).
    srqn_wire: u32,
    wrid: Box<[u64]>,
    /// A cell for the same reason as [`SendQueue`]'s tail.
    completed: Cell<u64>,
    /// Receives recorded with [`Srq::post`], or copied from rdma-core's SRQ.
    posted: u64,
    /// An SRQ rdma-core posts to ([`Registry::adopt_srq`]): the mirror's position in
    /// rdma-core's free list and the WQEs completed since the last hand-back.
    adoption: Option<Box<SrqAdoption>>,
}

impl Srq {
    /// Records a receive posted at SRQ WQE index `wqe_index` (the SRQ's free-list
    /// position); false, recording nothing, for an index past the SRQ.
    pub fn post(&mut self, wqe_index: u16, wr_id: u64) -> bool {
        match self.wrid.get_mut(wqe_index as usize) {
            Some(s) => {
                *s = wr_id;
                self.posted = self.posted.wrapping_add(1);
                true
            }
            None => false,
        }
    }

    /// Receives posted and not yet completed.
    pub fn outstanding(&self) -> u64 {
        self.posted.wrapping_sub(self.completed.get())
    }

    /// The SRQ number.
    pub fn srqn(&self) -> u32 {
        self.srqn
    }

    /// WQE slots in the SRQ.
    pub fn wqe_cnt(&self) -> u32 {
        self.wrid.len() as u32
    }

    /// Receive completions seen on this SRQ.
    pub fn completed(&self) -> u64 {
        self.completed.get()
    }

    /// The wr_id recorded for SRQ WQE `wqe_index` (the receive to post again after a
    /// [`dvcq_provider::FaultKind::SrqPageFault`] item, say); `None` beyond the SRQ.
    pub fn wr_id(&self, wqe_index: u16) -> Option<u64> {
        self.wrid.get(wqe_index as usize).copied()
    }

    #[inline]
    pub(crate) fn complete(&mut self, wqe_counter: u16) -> Option<u64> {
        let w = self.wrid.get(wqe_counter as usize).copied()?;
        self.add_completed(1);
        if let Some(a) = &mut self.adoption {
            a.freed(wqe_counter);
        }
        Some(w)
    }

    /// A receive WQE the device gave back without completing it (an ODP page fault on
    /// the SRQ): an adopted SRQ hands it back to rdma-core's free list as a completed one,
    /// as rdma-core does before posting it again.
    #[inline]
    pub(crate) fn note_returned(&mut self, wqe_counter: u16) {
        if (wqe_counter as usize) < self.wrid.len() {
            if let Some(a) = &mut self.adoption {
                a.freed(wqe_counter);
            }
        }
    }

    /// The SRQ number as a CQE's `srqn_uidx` holds it, for the poll loop's SRQ check.
    #[inline(always)]
    pub(crate) fn srqn_wire(&self) -> u32 {
        self.srqn_wire
    }

    /// The wr_id table, indexed by the unmasked WQE counter.
    #[inline(always)]
    pub(crate) fn wrids(&self) -> &[u64] {
        &self.wrid
    }

    /// Counts `n` completions taken from [`Srq::wrids`] directly.
    #[inline(always)]
    pub(crate) fn add_completed(&self, n: u64) {
        self.completed.set(self.completed.get().wrapping_add(n));
    }

    #[inline]
    pub(crate) fn peek(&self, wqe_counter: u16) -> Option<u64> {
        self.wrid.get(wqe_counter as usize).copied()
    }
}

/// A QP's transport type, `ibv_qp.qp_type` (`enum ibv_qp_type`), as rdma-core's mlx5
/// provider tells them apart on the poll path.
///
/// rdma-core's poll distinguishes exactly one of them: a READ or atomic response that came
/// inline in a requester CQE is copied into the send WQE's scatter list only for an RC QP;
/// for any other type `mlx5_copy_to_send_wqe` refuses and the completion's status is
/// `IBV_WC_GENERAL_ERR` ("scatter to CQE is supported only for RC QPs"). UD needs no rule
/// of its own (rdma-core fills the UD fields of every responder CQE), and the raw Ethernet
/// extras follow [`QpConfig::rx_csum`], rdma-core's `MLX5_RX_CSUM_VALID`, not the type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected, `IBV_QPT_RC`.
    #[default]
    Rc,
    /// Unreliable connected, `IBV_QPT_UC`.
    Uc,
    /// Unreliable datagram, `IBV_QPT_UD`.
    Ud,
    /// Raw Ethernet, `IBV_QPT_RAW_PACKET`.
    RawPacket,
    /// XRC initiator, `IBV_QPT_XRC_SEND`.
    XrcSend,
    /// XRC target, `IBV_QPT_XRC_RECV`.
    XrcRecv,
    /// A provider-defined QP, `IBV_QPT_DRIVER` (mlx5's DC initiators and targets).
    Driver,
}

impl QpType {
    /// The type of `ibv_qp.qp_type` value `qp_type` (libibverbs' `enum ibv_qp_type`);
    /// `None` for a value libibverbs does not define.
    pub const fn from_ibv(qp_type: u32) -> Option<QpType> {
        Some(match qp_type {
            2 => QpType::Rc,
            3 => QpType::Uc,
            4 => QpType::Ud,
            8 => QpType::RawPacket,
            9 => QpType::XrcSend,
            10 => QpType::XrcRecv,
            0xff => QpType::Driver,
            _ => return None,
        })
    }

    /// The `enum ibv_qp_type` value.
    pub const fn ibv(self) -> u32 {
        match self {
            QpType::Rc => 2,
            QpType::Uc => 3,
            QpType::Ud => 4,
            QpType::RawPacket => 8,
            QpType::XrcSend => 9,
            QpType::XrcRecv => 10,
            QpType::Driver => 0xff,
        }
    }

    /// The lower-case word ring images write for it (`qp_type=<word>`).
    pub const fn word(self) -> &'static str {
        match self {
            QpType::Rc => "rc",
            QpType::Uc => "uc",
            QpType::Ud => "ud",
            QpType::RawPacket => "raw_packet",
            QpType::XrcSend => "xrc_send",
            QpType::XrcRecv => "xrc_recv",
            QpType::Driver => "driver",
        }
    }

    /// The type a ring image word names.
    pub fn from_word(w: &str) -> Option<QpType> {
        [QpType::Rc, QpType::Uc, QpType::Ud, QpType::RawPacket, QpType::XrcSend, QpType::XrcRecv, QpType::Driver]
            .into_iter()
            .find(|t| t.word() == w)
    }
}

/// How a QP is set up, as far as the CQ poller cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpConfig {
    /// QP number (24 bits).
    pub qpn: u32,
    /// Send queue entries (`sq.wqe_cnt`, a power of two).
    pub sq_wqe_cnt: u32,
    /// Receive queue entries (`rq.wqe_cnt`, a power of two; ignored with an SRQ, where
    /// rdma-core's QP has 0).
    pub rq_wqe_cnt: u32,
    /// The SRQ the QP receives from, by SRQ number.
    pub srqn: Option<u32>,
    /// A raw-packet (Ethernet) QP with the RX checksum capability (`MLX5_RX_CSUM_VALID`):
    /// its receives may carry `IBV_WC_IP_CSUM_OK`, and their completions carry the raw
    /// Ethernet extras (L4 checksum, header flags and types, RSS hash). Those CQE bytes are
    /// reserved for IB/RoCE transport QPs, so other QPs leave the extras unwritten.
    pub rx_csum: bool,
    /// The QP's transport type ([`QpType`]): only an RC QP copies READ and atomic
    /// responses that came inline in its CQEs.
    pub qp_type: QpType,
    /// The QP's user index, which CQEs carry in `srqn_uidx` on CQs of CQE version 1
    /// (24 bits). rdma-core gives each QP, XRC SRQ and receive WQ of a device context the
    /// first free index of the context's table (`mlx5_store_uidx`), so a CQ's QPs seldom
    /// have indexes 0, 1, 2, ...: give the one rdma-core gave. `None`: the QP's registration
    /// order on this registry (0, 1, 2, ..., as ring images number their `qp` lines). Give
    /// every QP of a registry its index, or none of them.
    pub uidx: Option<u32>,
}

impl QpConfig {
    /// An RC QP with the given queue sizes.
    pub fn rc(qpn: u32, sq_wqe_cnt: u32, rq_wqe_cnt: u32) -> Self {
        Self { qpn, sq_wqe_cnt, rq_wqe_cnt, srqn: None, rx_csum: false, qp_type: QpType::Rc, uidx: None }
    }
}

/// Bits outside a CQE's 24-bit user index field, in wire order, that the user index key of
/// an XRC SRQ or receive WQ carries ([`Qp::key_wire`]): no requester CQE's masked key
/// equals such a key.
pub(crate) const KEY_NO_SQ: u32 = !dvcq_uapi::mlx5::cqe::QPN_MASK.to_be();

/// The bit of [`Qp::recv_path`] that marks an entry without a send queue (an XRC SRQ or a
/// receive WQ).
pub(crate) const NO_SQ_PATH: u32 = 1 << 31;

/// [`Qp`]'s SRQ slot when it has no SRQ (SRQ slots are below 2^24).
const NO_SRQ_SLOT: u32 = u32::MAX;

/// Where [`Qp::recv_path`] keeps the [`RecvKind`] (two bits).
const RECV_KIND_SHIFT: u32 = 25;
/// Bit 24 of [`Qp::recv_path`]: no SRQ (SRQ slots are below 2^24, as SRQ numbers are 24-bit
/// and unique).
const NO_SRQ_PATH: u32 = 1 << 24;
/// [`Qp::recv_path`] of a QP (not an XRC SRQ or receive WQ) whose receives complete from its
/// own RQ without the raw Ethernet extras: the commonest path, tested with one compare.
pub(crate) const PLAIN_RQ_PATH: u32 = (RecvKind::Rq as u32) << RECV_KIND_SHIFT | NO_SRQ_PATH;

/// Where a QP's receive completions get their wr_id ([`Qp::recv_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvKind {
    /// The QP's own receive queue.
    Rq,
    /// The shared receive queue it is attached to.
    Srq,
    /// The QP's own receive queue, with the raw Ethernet extras (RX checksum capability).
    RqEth,
    /// Off the fast path (raw Ethernet extras on an SRQ).
    Slow,
}

/// One registered QP.
#[derive(Debug, Clone)]
pub struct Qp {
    cfg: QpConfig,
    /// Send queue tracking.
    pub sq: SendQueue,
    /// Receive queue tracking.
    pub rq: RecvQueue,
    /// The slot of the SRQ it receives from, or [`NO_SRQ_SLOT`].
    srq: u32,
    /// The QPN and the user index as a CQE holds them (24-bit big-endian fields read as
    /// one native word), for the poll loop's QP check. The user index of an XRC SRQ or a
    /// receive WQ has bits set outside the 24-bit field ([`Qp::key_wire`]).
    keys_wire: [u32; 2],
    /// See [`Qp::recv_path`].
    recv_path: u32,
    kind: ResourceKind,
    /// Its SRQ is rdma-core's ([`Registry::adopt_srq`]): receives take the slow path, where
    /// each completed SRQ WQE is noted for the free-list hand-back.
    srq_adopted: bool,
}

/// What an entry of the registry's QP table stands for. CQEs of version 1 name a QP, an XRC
/// SRQ or a receive work queue alike by user index, and the poller treats the last two as
/// QPs whose receives come from an SRQ or from their own queue; they have no QPN lookup
/// and no send queue. A requester CQE naming one (which a device does not write) is an
/// [`dvcq_provider::FaultKind::UnknownQp`] item: rdma-core's `get_req_context` would take
/// the SRQ or WQ it finds by that index for a QP (`rsc_to_mqp` is a plain cast) and read
/// and write a send queue that is not there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ResourceKind {
    /// A QP ([`Registry::add_qp`]).
    #[default]
    Qp,
    /// An XRC SRQ ([`Registry::add_xrc_srq`]): `config().qpn` is its SRQ number.
    XrcSrq,
    /// A receive work queue ([`Registry::add_rwq`]): `config().qpn` is its WQ number.
    Rwq,
}

impl Qp {
    /// The configuration it was registered with, its user index filled in.
    pub fn config(&self) -> &QpConfig {
        &self.cfg
    }
    /// Whether it is a QP, or an XRC SRQ or receive WQ that CQEs name as they name a QP.
    pub fn kind(&self) -> ResourceKind {
        self.kind
    }
    /// The QP's user index (CQE version 1 lookups): [`QpConfig::uidx`], or its registration
    /// order.
    pub fn uidx(&self) -> u32 {
        // Registration fills the index in.
        self.cfg.uidx.unwrap_or(0)
    }
    pub(crate) fn srq_slot(&self) -> Option<u32> {
        (self.srq != NO_SRQ_SLOT).then_some(self.srq)
    }
    /// [`Qp::recv_kind`] and the SRQ slot in one word, for the fast path's test whether a
    /// run can go on with this QP: equal words mean the same receive path. An XRC SRQ's or
    /// receive WQ's has [`NO_SQ_PATH`] set as well: a requester CQE's run never goes on with
    /// one (it has no send queue).
    #[inline(always)]
    pub(crate) fn recv_path(&self) -> u32 {
        self.recv_path
    }
    /// The key a CQE of this QP carries, as a native read of its big-endian field: the
    /// QPN (CQE version 0) or the user index (`v1`).
    #[inline(always)]
    ///
    /// A requester CQE's key, masked to 24 bits, is compared with this word as it is: only a
    /// QP has a send queue, and the user index of an XRC SRQ or a receive WQ carries bits
    /// outside the field ([`KEY_NO_SQ`]), so that a requester CQE naming one is no match and
    /// the fast path leaves it to the slow path, which makes it a fault item. A responder
    /// CQE's key is compared under the mask (`(key ^ word) & mask`). (Version 0 never
    /// finds those entries: they have no QPN lookup.)
    pub(crate) fn key_wire(&self, v1: bool) -> u32 {
        self.keys_wire[v1 as usize]
    }
    /// Whether the entry has a send queue: a QP, not an XRC SRQ or a receive WQ.
    #[inline(always)]
    pub(crate) fn has_sq(&self) -> bool {
        self.kind == ResourceKind::Qp
    }
    /// [`Qp::recv_kind`] as registration recorded it in [`Qp::recv_path`]: one load, and
    /// for a QP receiving on its own RQ without extras (`recv_path() == PLAIN_RQ_PATH`) one
    /// compare.
    #[inline(always)]
    pub(crate) fn recorded_recv_kind(&self) -> RecvKind {
        match (self.recv_path >> RECV_KIND_SHIFT) & 3 {
            0 => RecvKind::Rq,
            1 => RecvKind::Srq,
            2 => RecvKind::RqEth,
            _ => RecvKind::Slow,
        }
    }
    /// Where the QP's receives complete, for the poll fast path: its own RQ (with or
    /// without raw Ethernet extras), an SRQ, or the slow path.
    #[inline(always)]
    pub(crate) fn recv_kind(&self) -> RecvKind {
        match (self.cfg.rx_csum, self.srq_slot()) {
            (false, None) => RecvKind::Rq,
            (false, Some(_)) if self.srq_adopted => RecvKind::Slow,
            (false, Some(_)) => RecvKind::Srq,
            (true, None) => RecvKind::RqEth,
            (true, Some(_)) => RecvKind::Slow,
        }
    }
}

// The poll path addresses the registry's QPs by slot: with a power-of-two size that is one
// shift (a 136-byte Qp took two instructions there, and cost the one-QP poll 0.6
// instructions per CQE at batch 16).
#[cfg(target_pointer_width = "64")]
static_assertions::const_assert_eq!(core::mem::size_of::<Qp>(), 128);

/// Errors registering resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// A queue size that is not a power of two from 1 to 2^16.
    #[error("{what} of qp {qpn:#x} has {size} entries: must be a power of two from 1 to 65536")]
    BadQueueSize {
        /// The QP.
        qpn: u32,
        /// Which queue.
        what: &'static str,
        /// The size given.
        size: u32,
    },
    /// A QPN or SRQN wider than 24 bits.
    #[error("{what} {value:#x} does not fit in 24 bits")]
    TooWide {
        /// What number.
        what: &'static str,
        /// The value.
        value: u32,
    },
    /// Registered twice.
    #[error("{what} {value:#x} is already registered")]
    Duplicate {
        /// What number.
        what: &'static str,
        /// The value.
        value: u32,
    },
    /// An SRQ entry count outside 1 to 2^16 (SRQs need not be a power of two).
    #[error("srq {srqn:#x} has {size} entries: must be 1 to 65536")]
    BadSrqSize {
        /// The SRQ.
        srqn: u32,
        /// The size given.
        size: u32,
    },
    /// A QP that names an SRQ nobody registered.
    #[error("qp {qpn:#x} names srq {srqn:#x}, which is not registered")]
    NoSuchSrq {
        /// The QP.
        qpn: u32,
        /// The SRQ.
        srqn: u32,
    },
    /// WQEs given for a QP or SRQ that is not registered.
    #[error("{what} {value:#x} is not registered")]
    NotRegistered {
        /// What number.
        what: &'static str,
        /// The value.
        value: u32,
    },
    /// A receive WQE stride that is not a power of two from 16 bytes.
    #[error("receive wqe stride of {stride} bytes: must be a power of two from 16")]
    BadWqeStride {
        /// The stride given.
        stride: u32,
    },
    /// A WQE buffer smaller than its queue.
    #[error("{what} buffer of {what_value:#x} has {have} bytes, its queue needs {need}")]
    WqeBufferTooSmall {
        /// Which queue: "qp rq", "qp sq" or "srq".
        what: &'static str,
        /// The QPN or SRQN.
        what_value: u32,
        /// Bytes the queue's WQEs take.
        need: usize,
        /// Bytes given.
        have: usize,
    },
}

/// Entries of [`KeyIndex`]'s direct table: a power of two, as rdma-core's second-level QP and
/// user-index tables (`MLX5_QP_TABLE_SIZE`, `MLX5_UIDX_TABLE_SIZE`).
const LOW_ENTRIES: usize = 1 << 12;

/// Registry slots by a 24-bit key (a QPN or a user index). A table of [`LOW_ENTRIES`] slots
/// indexed by the key's low bits holds the slot of the first key to take each index
/// ([`NO_SLOT`]: free); a hash map of every key stands behind it. Devices hand out QPNs in
/// sequence and rdma-core user indexes from 0 up, so their low bits rarely collide: a CQ
/// shared by many QPs finds one in a few instructions, as rdma-core's QPN- and
/// index-keyed tables do. The table's size is fixed, so indexing it needs no bounds check.
/// It holds no keys: a lookup checks the key of the QP it finds there, which the poll
/// path reads anyway.
#[derive(Debug, Clone)]
struct KeyIndex {
    low: Box<[u32; LOW_ENTRIES]>,
    /// Every key. Fx hashing: the keys are numbers the application registered.
    all: FxHashMap<u32, u32>,
}

/// A free entry of [`KeyIndex`]'s table: no registry has this slot.
const NO_SLOT: u32 = u32::MAX;

impl Default for KeyIndex {
    fn default() -> Self {
        Self { low: Box::new([NO_SLOT; LOW_ENTRIES]), all: FxHashMap::default() }
    }
}

impl KeyIndex {
    fn contains(&self, key: u32) -> bool {
        self.all.contains_key(&key)
    }

    /// The slot of `key`.
    fn get(&self, key: u32) -> Option<u32> {
        self.all.get(&key).copied()
    }

    /// Enters `key` for registry slot `slot`; the key registered first keeps a shared
    /// index.
    fn insert(&mut self, key: u32, slot: u32) {
        self.all.insert(key, slot);
        let e = &mut self.low[key as usize % LOW_ENTRIES];
        if *e == NO_SLOT {
            *e = slot;
        }
    }

    /// The slot the table holds at `key`'s index: `key`'s if `key` took the index first,
    /// another key's, or (a free index) [`NO_SLOT`].
    #[inline(always)]
    fn low_slot(&self, key: u32) -> u32 {
        self.low[key as usize % LOW_ENTRIES]
    }
}

/// The work queue whose WQE a CQE with inline data names, by registry slot: where the data
/// is copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InlineDest {
    /// The send queue of the QP in the slot (READ and atomic responses).
    Send(u32),
    /// The receive queue of the QP in the slot.
    Rq(u32),
    /// The SRQ in the slot.
    Srq(u32),
}

/// A QP's WQE buffers, for inline scatter.
#[derive(Debug, Clone, Default)]
struct QpWqes {
    rq: Option<RecvWqes>,
    sq: Option<SendWqes>,
}

/// The QPs and SRQs of a CQ, looked up by QPN (CQE version 0) or user index (version 1).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    qps: Vec<Qp>,
    srqs: Vec<Srq>,
    by_qpn: KeyIndex,
    by_uidx: KeyIndex,
    by_srqn: FxHashMap<u32, u32>,
    /// Receive WQ number -> slot in `qps`.
    by_wqn: FxHashMap<u32, u32>,
    /// WQE buffers by QP and SRQ slot: read only for CQEs with inline data, so they stay
    /// out of the structures the poll loops read.
    qp_wqes: Vec<QpWqes>,
    srq_wqes: Vec<Option<RecvWqes>>,
    null_lkey: Option<u32>,
    /// The only memory inline scatter writes into.
    regions: MemoryRegions,
    /// Signature-enabled mkeys by index, with their error records.
    sig_mkeys: FxHashMap<u32, MkeySig>,
    /// For a poll run on a QP without an SRQ to hold in place of one.
    no_srq: NoSrq,
    /// The entry a one-CQE poll took last ([`Registry::qp_for_one`]).
    one: OneMemo,
}

/// (masked key in wire order, slot) of the entry a one-CQE poll took last, so that its
/// next CQE finds a QP with one compare, and a CQE of another QP goes straight to the
/// table of low key bits, without first reading the QP it does not name. Slots stay valid
/// while entries are only added; removing one forgets it.
#[derive(Debug, Clone)]
struct OneMemo(Cell<(u32, u32)>);

/// [`OneMemo`]'s key when it holds no entry: bits outside the 24-bit key field, which no
/// masked key has.
const NO_ONE_KEY: u32 = KEY_NO_SQ;

impl Default for OneMemo {
    fn default() -> Self {
        Self(Cell::new((NO_ONE_KEY, u32::MAX)))
    }
}

/// An SRQ of no entries that no CQE names (its number is no 24-bit value).
#[derive(Debug, Clone)]
struct NoSrq(Srq);

impl Default for NoSrq {
    fn default() -> Self {
        Self(Srq {
            srqn: u32::MAX,
            srqn_wire: u32::MAX,
            wrid: Box::new([]),
            completed: Cell::new(0),
            posted: 0,
            adoption: None,
        })
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers an SRQ with `entries` WQE slots.
    ///
    /// # Errors
    ///
    /// [`RegistryError`] for a duplicate, over-wide number, or an entry count that is zero
    /// or above 65536.
    pub fn add_srq(&mut self, srqn: u32, entries: u32) -> Result<&mut Srq, RegistryError> {
        if srqn > dvcq_uapi::mlx5::cqe::QPN_MASK {
            return Err(RegistryError::TooWide { what: "srqn", value: srqn });
        }
        if entries == 0 || entries > 1 << 16 {
            return Err(RegistryError::BadSrqSize { srqn, size: entries });
        }
        if self.by_srqn.contains_key(&srqn) {
            return Err(RegistryError::Duplicate { what: "srqn", value: srqn });
        }
        let slot = self.srqs.len() as u32;
        self.srqs.push(Srq {
            srqn,
            srqn_wire: srqn.to_be(),
            wrid: (0..entries as u64).collect(),
            completed: Cell::new(0),
            posted: 0,
            adoption: None,
        });
        self.by_srqn.insert(srqn, slot);
        Ok(&mut self.srqs[slot as usize])
    }

    /// Registers a QP, under its user index [`QpConfig::uidx`] for CQE version 1 (by
    /// default its registration order: 0, 1, 2, ... as ring images assign them).
    ///
    /// # Errors
    ///
    /// [`RegistryError`] for bad sizes, duplicates (of the QPN or the user index), numbers
    /// wider than 24 bits, or an unknown SRQ.
    pub fn add_qp(&mut self, cfg: QpConfig) -> Result<&mut Qp, RegistryError> {
        self.add_entry(cfg, ResourceKind::Qp)
    }

    /// Registers an XRC SRQ of `entries` WQEs, and the user index rdma-core gave it
    /// (`MLX5_RSC_TYPE_XSRQ`): CQEs of version 1 name it by that index, version 0 by its
    /// number, as any SRQ. Its receives complete from its wr_id table, as an SRQ's do.
    ///
    /// # Errors
    ///
    /// As for [`Registry::add_srq`], and for a user index another resource has.
    pub fn add_xrc_srq(&mut self, srqn: u32, uidx: u32, entries: u32) -> Result<&mut Srq, RegistryError> {
        if uidx > dvcq_uapi::mlx5::cqe::QPN_MASK {
            return Err(RegistryError::TooWide { what: "uidx", value: uidx });
        }
        if self.by_uidx.contains(uidx) {
            return Err(RegistryError::Duplicate { what: "uidx", value: uidx });
        }
        // Checked above, what the entry could refuse; the SRQ checks the rest.
        self.add_srq(srqn, entries)?;
        let cfg = QpConfig { srqn: Some(srqn), uidx: Some(uidx), ..QpConfig::rc(srqn, 1, 0) };
        self.add_entry(cfg, ResourceKind::XrcSrq)?;
        self.srq_mut(srqn).ok_or(RegistryError::NotRegistered { what: "srqn", value: srqn })
    }

    /// Registers a receive work queue (`ibv_create_wq`, the queues an RSS QP spreads its
    /// receives over) of `wqe_cnt` WQEs, under the user index rdma-core gave it
    /// (`MLX5_RSC_TYPE_RWQ`; such CQs are of CQE version 1). Its receives complete from
    /// its own queue, as a QP's RQ's do, without the raw Ethernet checksum flag (rdma-core
    /// reads that capability off QPs only); record posts through [`Registry::rwq_mut`].
    ///
    /// # Errors
    ///
    /// [`RegistryError`] for a bad size, a number wider than 24 bits, or a WQ number or
    /// user index registered before.
    pub fn add_rwq(&mut self, wqn: u32, uidx: u32, wqe_cnt: u32) -> Result<&mut RecvQueue, RegistryError> {
        if wqn > dvcq_uapi::mlx5::cqe::QPN_MASK {
            return Err(RegistryError::TooWide { what: "wqn", value: wqn });
        }
        if self.by_wqn.contains_key(&wqn) {
            return Err(RegistryError::Duplicate { what: "wqn", value: wqn });
        }
        let cfg = QpConfig { uidx: Some(uidx), ..QpConfig::rc(wqn, 1, wqe_cnt) };
        let slot = self.qps.len() as u32;
        self.add_entry(cfg, ResourceKind::Rwq)?;
        self.by_wqn.insert(wqn, slot);
        Ok(&mut self.qps[slot as usize].rq)
    }

    /// The receive work queue with this number, to record posts.
    pub fn rwq_mut(&mut self, wqn: u32) -> Option<&mut RecvQueue> {
        let slot = *self.by_wqn.get(&wqn)?;
        self.qps.get_mut(slot as usize).map(|q| &mut q.rq)
    }

    /// Registers one entry of the QP table: a QP (found by QPN and user index), or an XRC
    /// SRQ or receive WQ (found by user index only) that CQEs name as they name a QP.
    fn add_entry(&mut self, cfg: QpConfig, kind: ResourceKind) -> Result<&mut Qp, RegistryError> {
        if cfg.qpn > dvcq_uapi::mlx5::cqe::QPN_MASK {
            return Err(RegistryError::TooWide { what: "qpn", value: cfg.qpn });
        }
        let slot = self.qps.len() as u32;
        let uidx = cfg.uidx.unwrap_or(slot);
        if uidx > dvcq_uapi::mlx5::cqe::QPN_MASK {
            return Err(RegistryError::TooWide { what: "uidx", value: uidx });
        }
        let bad = |what, size| RegistryError::BadQueueSize { qpn: cfg.qpn, what, size };
        for (what, size) in [("sq", cfg.sq_wqe_cnt), ("rq", cfg.rq_wqe_cnt)] {
            if size > 1 << 16 {
                return Err(bad(what, size));
            }
        }
        let sq = SendQueue::new(cfg.sq_wqe_cnt).ok_or(bad("sq", cfg.sq_wqe_cnt))?;
        // A QP on an SRQ has no RQ of its own (rdma-core leaves `rq.wqe_cnt` 0): its
        // receives never reach this table, which only needs to exist.
        let rq_cnt = if cfg.srqn.is_some() { cfg.rq_wqe_cnt.max(1) } else { cfg.rq_wqe_cnt };
        let rq = RecvQueue::new(rq_cnt).ok_or(bad("rq", cfg.rq_wqe_cnt))?;
        if kind == ResourceKind::Qp && self.by_qpn.contains(cfg.qpn) {
            return Err(RegistryError::Duplicate { what: "qpn", value: cfg.qpn });
        }
        if self.by_uidx.contains(uidx) {
            return Err(RegistryError::Duplicate { what: "uidx", value: uidx });
        }
        let srq = match cfg.srqn {
            Some(srqn) => Some(*self.by_srqn.get(&srqn).ok_or(RegistryError::NoSuchSrq { qpn: cfg.qpn, srqn })?),
            None => None,
        };
        let no_sq = if kind == ResourceKind::Qp { 0 } else { KEY_NO_SQ };
        let keys_wire = [cfg.qpn.to_be(), uidx.to_be() | no_sq];
        let cfg = QpConfig { uidx: Some(uidx), ..cfg };
        let srq_adopted = srq.and_then(|s| self.srqs.get(s as usize)).is_some_and(|s| s.adoption.is_some());
        let mut qp = Qp { cfg, sq, rq, srq: srq.unwrap_or(NO_SRQ_SLOT), keys_wire, recv_path: 0, kind, srq_adopted };
        let no_sq = if kind == ResourceKind::Qp { 0 } else { NO_SQ_PATH };
        qp.recv_path = no_sq | (qp.recv_kind() as u32) << RECV_KIND_SHIFT | srq.unwrap_or(NO_SRQ_PATH);
        self.qps.push(qp);
        if kind == ResourceKind::Qp {
            self.by_qpn.insert(cfg.qpn, slot);
        }
        self.by_uidx.insert(uidx, slot);
        Ok(&mut self.qps[slot as usize])
    }

    /// The QP with this number.
    pub fn qp(&self, qpn: u32) -> Option<&Qp> {
        self.by_qpn.get(qpn).and_then(|s| self.qps.get(s as usize))
    }

    /// The QP with this number, to record posts.
    pub fn qp_mut(&mut self, qpn: u32) -> Option<&mut Qp> {
        self.by_qpn.get(qpn).and_then(|s| self.qps.get_mut(s as usize))
    }

    /// The SRQ with this number.
    pub fn srq(&self, srqn: u32) -> Option<&Srq> {
        self.by_srqn.get(&srqn).and_then(|&s| self.srqs.get(s as usize))
    }

    /// The SRQ with this number, to record posts.
    pub fn srq_mut(&mut self, srqn: u32) -> Option<&mut Srq> {
        self.by_srqn.get(&srqn).map(|&s| &mut self.srqs[s as usize])
    }

    /// All QPs in registration order, with the XRC SRQs and receive WQs that CQEs name by
    /// user index ([`Qp::kind`]).
    pub fn qps(&self) -> &[Qp] {
        &self.qps
    }

    /// Bytes the QP lookup and tracking hold: the QP table (its capacity of entries), each
    /// entry's send and receive tracking tables, the QPN and user-index lookups (their
    /// low-bit tables and hash maps, by capacity, 8 bytes and one control byte a key), and
    /// the WQE-buffer table. SRQs, memory regions and signature mkeys are not counted.
    pub fn qp_table_bytes(&self) -> usize {
        use core::mem::size_of;
        let per_qp: usize = self
            .qps
            .iter()
            .map(|q| q.sq.table().len() * size_of::<SqEntry>() + q.rq.wrid.len() * size_of::<u64>())
            .sum();
        let index = |k: &KeyIndex| LOW_ENTRIES * size_of::<u32>() + k.all.capacity() * (size_of::<(u32, u32)>() + 1);
        self.qps.capacity() * size_of::<Qp>()
            + per_qp
            + index(&self.by_qpn)
            + index(&self.by_uidx)
            + self.qp_wqes.capacity() * size_of::<QpWqes>()
    }

    /// Adds a memory region (`ibv_reg_mr`'s address, length and lkey) that inline data may
    /// be copied into. Inline scatter writes nothing anywhere else: a data segment whose
    /// range is not inside the region of its lkey stops the copy with
    /// `IBV_WC_LOC_PROT_ERR`. [`MemoryRegion::new`] states what registering memory
    /// promises, once, for every copy.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Duplicate`] for an lkey another region has.
    pub fn add_memory_region(&mut self, region: MemoryRegion) -> Result<(), RegistryError> {
        self.regions.insert(region).map_err(|r| RegistryError::Duplicate { what: "lkey", value: r.lkey() })
    }

    /// Removes the memory region of `lkey` (`ibv_dereg_mr`): no copy writes into it from
    /// then on, in this registry (clones keep theirs).
    pub fn remove_memory_region(&mut self, lkey: u32) -> Option<MemoryRegion> {
        self.regions.remove(lkey)
    }

    /// The memory regions inline data may be copied into.
    pub fn memory_regions(&self) -> &MemoryRegions {
        &self.regions
    }

    /// Where QP `qpn`'s receive WQEs are, so that a receive whose data came inline in its
    /// CQE (inline scatter) is copied into the buffers the WQE names, as rdma-core does:
    /// `buf` holds the RQ's `wqe_cnt` WQEs of `stride` bytes (`mlx5dv_qp`'s `rq.buf` and
    /// `rq.stride`), each an array of data segments, after a signature segment with
    /// `signature` (rdma-core's `wq_sig`). Without it such a receive completes with its data
    /// left in the CQE ([`crate::CqStats::inline_not_copied`] counts it). Record every post
    /// ([`RecvQueue::post`]): a receive completion that finds nothing outstanding on the RQ
    /// is garbage, and is not copied.
    ///
    /// Safe whatever the buffer holds: the copy writes only inside the memory regions
    /// added with [`Registry::add_memory_region`].
    ///
    /// # Errors
    ///
    /// [`RegistryError::NotRegistered`] for an unknown QP,
    /// [`RegistryError::BadWqeStride`] for a stride that is not a power of two from 16, or
    /// [`RegistryError::WqeBufferTooSmall`] for a buffer smaller than the RQ.
    pub fn set_recv_wqes(
        &mut self,
        qpn: u32,
        buf: WqBuffer,
        stride: u32,
        signature: bool,
    ) -> Result<(), RegistryError> {
        let slot = self.by_qpn.get(qpn).ok_or(RegistryError::NotRegistered { what: "qpn", value: qpn })?;
        let wqes = RecvWqes::new(buf, stride, signature)?;
        let need = self.qps[slot as usize].rq.wqe_cnt() as usize * stride as usize;
        Self::fits("qp rq", qpn, need, wqes.buffer().len())?;
        self.qp_wqes_mut(slot).rq = Some(wqes);
        Ok(())
    }

    /// Where QP `qpn`'s send WQEs are (`mlx5dv_qp`'s `sq.buf`: the SQ's `wqe_cnt` 64-byte
    /// blocks), so that a READ or atomic response that came inline in its CQE is copied
    /// into the WQE's scatter list. Requesters get such CQEs only on QPs created to
    /// (`sq_sig_all`, or `MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE`). Record every post
    /// ([`SendQueue::post`]): a CQE for a WQE that is not outstanding is not copied. Safe,
    /// as [`Registry::set_recv_wqes`] is.
    ///
    /// # Errors
    ///
    /// As for [`Registry::set_recv_wqes`].
    pub fn set_send_wqes(&mut self, qpn: u32, buf: WqBuffer) -> Result<(), RegistryError> {
        let slot = self.by_qpn.get(qpn).ok_or(RegistryError::NotRegistered { what: "qpn", value: qpn })?;
        let need = self.qps[slot as usize].sq.wqe_cnt() as usize * 64;
        Self::fits("qp sq", qpn, need, buf.len())?;
        self.qp_wqes_mut(slot).sq = Some(SendWqes::new(buf));
        Ok(())
    }

    /// Where SRQ `srqn`'s WQEs are (`mlx5dv_srq`'s `buf` and `stride`), as
    /// [`Registry::set_recv_wqes`] for a QP's RQ; each WQE starts with its next segment.
    /// Record every post ([`Srq::post`]): a receive completion that finds nothing
    /// outstanding on the SRQ is garbage, and is not copied.
    ///
    /// # Errors
    ///
    /// As for [`Registry::set_recv_wqes`]; an SRQ WQE also needs a data segment after its
    /// next segment (a stride of at least 32 bytes).
    pub fn set_srq_wqes(&mut self, srqn: u32, buf: WqBuffer, stride: u32) -> Result<(), RegistryError> {
        let slot = *self.by_srqn.get(&srqn).ok_or(RegistryError::NotRegistered { what: "srqn", value: srqn })?;
        if stride < 32 {
            return Err(RegistryError::BadWqeStride { stride });
        }
        let wqes = RecvWqes::new(buf, stride, false)?;
        let need = self.srqs[slot as usize].wrid.len() * stride as usize;
        Self::fits("srq", srqn, need, wqes.buffer().len())?;
        let i = slot as usize;
        if self.srq_wqes.len() <= i {
            self.srq_wqes.resize(i + 1, None);
        }
        self.srq_wqes[i] = Some(wqes);
        Ok(())
    }

    /// The WQE buffers of the QP in `slot`, grown to hold it.
    fn qp_wqes_mut(&mut self, slot: u32) -> &mut QpWqes {
        let i = slot as usize;
        if self.qp_wqes.len() <= i {
            self.qp_wqes.resize_with(i + 1, QpWqes::default);
        }
        &mut self.qp_wqes[i]
    }

    /// Whether the work queue `dest` names holds a work request posted and not yet
    /// completed: the send WQE at `wqe_counter`, or any receive on the RQ or SRQ (a count,
    /// as a receive queue's posts are counted). Garbage may have completed past the head: a
    /// count beyond the queue holds nothing.
    pub(crate) fn wqe_posted(&self, dest: InlineDest, wqe_counter: u16) -> bool {
        match dest {
            InlineDest::Send(slot) => self.qps.get(slot as usize).is_some_and(|q| q.sq.holds_outstanding(wqe_counter)),
            InlineDest::Rq(slot) => {
                self.qps.get(slot as usize).is_some_and(|q| (1..=q.rq.wqe_cnt()).contains(&q.rq.outstanding()))
            }
            // rdma-core's SRQ may hold receives posted before the adoption, which the
            // mirror cannot count: any of its WQEs may be posted.
            InlineDest::Srq(slot) => self
                .srqs
                .get(slot as usize)
                .is_some_and(|s| s.is_adopted() || (1..=s.wrid.len() as u64).contains(&s.outstanding())),
        }
    }

    /// Registers a signature-enabled memory key by its index (`mkey >> 8`, the 24 bits
    /// `mlx5dv_mkey.lkey` holds above its variant byte): a SIG_ERR CQE naming it is recorded
    /// here and produces no completion, as rdma-core's poll records it on the mkey. Read the
    /// record with [`Registry::mkey_check`]. A SIG_ERR CQE for an index not registered is a
    /// [`dvcq_provider::FaultKind::SigErr`] item instead (see [`crate::sig`]).
    ///
    /// # Errors
    ///
    /// [`RegistryError::TooWide`] for an index wider than 24 bits,
    /// [`RegistryError::Duplicate`] for one registered before.
    pub fn add_sig_mkey(&mut self, index: u32) -> Result<(), RegistryError> {
        if index > dvcq_uapi::mlx5::cqe::QPN_MASK {
            return Err(RegistryError::TooWide { what: "mkey index", value: index });
        }
        if self.sig_mkeys.contains_key(&index) {
            return Err(RegistryError::Duplicate { what: "mkey index", value: index });
        }
        self.sig_mkeys.insert(index, MkeySig::default());
        Ok(())
    }

    /// Removes the mkey of `index` (`mlx5dv_destroy_mkey`); true if it was registered.
    pub fn remove_sig_mkey(&mut self, index: u32) -> bool {
        self.sig_mkeys.remove(&index).is_some()
    }

    /// The signature error recorded on the mkey of `index` since the last check, taken
    /// (rdma-core's `mlx5dv_mkey_check` clears `err_exists` the same way); `None` when there
    /// was none. [`SigError::check`] says which check failed.
    ///
    /// # Errors
    ///
    /// [`RegistryError::NotRegistered`] for an mkey not registered.
    pub fn mkey_check(&mut self, index: u32) -> Result<Option<SigError>, RegistryError> {
        let m =
            self.sig_mkeys.get_mut(&index).ok_or(RegistryError::NotRegistered { what: "mkey index", value: index })?;
        Ok(m.pending.take())
    }

    /// Signature errors recorded on the mkey of `index` since it was registered
    /// (rdma-core's `err_count`); `None` for an mkey not registered.
    pub fn mkey_err_count(&self, index: u32) -> Option<u64> {
        self.sig_mkeys.get(&index).map(|m| m.count)
    }

    /// The registered signature mkeys' indexes, in increasing order.
    pub fn sig_mkeys(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.sig_mkeys.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Records a signature error on its mkey if that is registered (rdma-core: the CQE
    /// produces nothing); false for an mkey nobody registered.
    pub(crate) fn record_sig_err(&mut self, e: &SigError) -> bool {
        match self.sig_mkeys.get_mut(&e.mkey_index()) {
            Some(m) => {
                m.record(*e);
                true
            }
            None => false,
        }
    }

    /// Whether the mkey of `index` is registered.
    pub(crate) fn has_sig_mkey(&self, index: u32) -> bool {
        self.sig_mkeys.contains_key(&index)
    }

    /// The lkey of the device context's null memory region (`ibv_alloc_null_mr`, rdma-core's
    /// `dump_fill_mkey`): inline data a data segment of that key takes is dropped, as
    /// rdma-core drops it.
    pub fn set_null_lkey(&mut self, lkey: Option<u32>) {
        self.null_lkey = lkey;
    }

    /// The null memory region's lkey, if set ([`Registry::set_null_lkey`]).
    pub fn null_lkey(&self) -> Option<u32> {
        self.null_lkey
    }

    /// The SRQs in registration order (XRC SRQs included).
    pub fn srqs(&self) -> &[Srq] {
        &self.srqs
    }

    /// The registered receive WQEs of the entry in `slot` (a QP's RQ).
    #[inline(always)]
    pub(crate) fn recv_wqes_at(&self, slot: u32) -> Option<&RecvWqes> {
        self.qp_wqes.get(slot as usize).and_then(|w| w.rq.as_ref())
    }

    /// The registered send WQEs of the entry in `slot`.
    pub(crate) fn send_wqes_at(&self, slot: u32) -> Option<&SendWqes> {
        self.qp_wqes.get(slot as usize).and_then(|w| w.sq.as_ref())
    }

    /// The registered WQEs of the SRQ in `slot`.
    pub(crate) fn srq_wqes_at(&self, slot: u32) -> Option<&RecvWqes> {
        self.srq_wqes.get(slot as usize).and_then(Option::as_ref)
    }

    fn fits(what: &'static str, value: u32, need: usize, have: usize) -> Result<(), RegistryError> {
        if have < need {
            return Err(RegistryError::WqeBufferTooSmall { what, what_value: value, need, have });
        }
        Ok(())
    }

    /// Copies inline data into receive WQE `idx` of the QP in `slot` (its RQ) or, with
    /// `srq`, of the SRQ in `slot`: `Ok(false)` when no WQE buffer is registered for it.
    /// With `write` false, only finds out what a copy would give.
    pub(crate) fn scatter_recv(
        &self,
        slot: u32,
        srq: bool,
        idx: u32,
        data: &[u8],
        write: bool,
    ) -> Result<bool, WcStatus> {
        let wqes = if srq {
            self.srq_wqes.get(slot as usize).and_then(Option::as_ref)
        } else {
            self.qp_wqes.get(slot as usize).and_then(|w| w.rq.as_ref())
        };
        match wqes {
            Some(w) => w.scatter(srq, idx, data, self.scatter_to(write)).map(|()| true),
            None => Ok(false),
        }
    }

    /// Copies a READ or atomic response into the scatter list of the QP in `slot`'s send
    /// WQE at `wqe_counter`: `Ok(false)` when no SQ buffer is registered for it.
    pub(crate) fn scatter_send(&self, slot: u32, wqe_counter: u16, data: &[u8], write: bool) -> Result<bool, WcStatus> {
        let (Some(qp), Some(w)) =
            (self.qps.get(slot as usize), self.qp_wqes.get(slot as usize).and_then(|w| w.sq.as_ref()))
        else {
            return Ok(false);
        };
        // rdma-core scatters only for RC QPs (`mlx5_copy_to_send_wqe` tests `IBV_QPT_RC`):
        // UC, UD, raw Ethernet, XRC and DC QPs get IBV_WC_GENERAL_ERR.
        let rc = qp.cfg.qp_type == QpType::Rc;
        w.scatter(qp.sq.wqe_cnt(), rc, wqe_counter, data, self.scatter_to(write)).map(|()| true)
    }

    /// Where a copy may write (a peek with `write` false).
    #[inline(always)]
    pub(crate) fn scatter_to(&self, write: bool) -> Scatter<'_> {
        Scatter { regions: &self.regions, null_lkey: self.null_lkey, write }
    }

    /// QP slot for a QPN (version 0) — behind the poller's cache.
    #[inline(never)]
    pub(crate) fn slot_by_qpn(&self, qpn: u32) -> Option<u32> {
        self.qp_by_key::<false>(qpn).map(|(slot, _)| slot)
    }

    /// The slot and QP a CQE's key names: the QPN (version 0) or the user index (`V1`).
    #[inline(always)]
    pub(crate) fn qp_by_key<const V1: bool>(&self, key: u32) -> Option<(u32, &Qp)> {
        self.qp_by_low_bits::<V1>(key).or_else(|| self.qp_by_key_hashed::<V1>(key))
    }

    /// [`Registry::qp_by_key`] through the table of low key bits alone: `None` for a key
    /// whose low bits another key took (or no key registered).
    #[inline(always)]
    pub(crate) fn qp_by_low_bits<const V1: bool>(&self, key: u32) -> Option<(u32, &Qp)> {
        let index = if V1 { &self.by_uidx } else { &self.by_qpn };
        let slot = index.low_slot(key);
        // Version 1 compares the index in wire order, as the poll loop keeps it.
        let is_key = |q: &&Qp| if V1 { q.keys_wire[1] & !KEY_NO_SQ == key.to_be() } else { q.cfg.qpn == key };
        self.qps.get(slot as usize).filter(is_key).map(|q| (slot, q))
    }

    /// The entry a one-CQE poll takes for a CQE whose key field (the QPN in version 0, the
    /// user index in `V1`), masked to 24 bits, reads `key_wire` as a native word: the entry
    /// it took last when the key is the same, else the one the table of low key bits holds
    /// for the key, which it then remembers. `None` for a key whose low bits another key
    /// took, or one not registered: the general path looks those up.
    #[inline(always)]
    pub(crate) fn qp_for_one<const V1: bool>(&self, key_wire: u32) -> Option<&Qp> {
        let (last, slot) = self.one.0.get();
        if key_wire == last {
            return self.qps.get(slot as usize);
        }
        let (slot, qp) = self.qp_by_low_bits::<V1>(u32::from_be(key_wire))?;
        self.one.0.set((key_wire, slot));
        Some(qp)
    }

    /// The SRQ a run on a QP without one holds in its place: no CQE names it.
    #[inline(always)]
    pub(crate) fn no_srq(&self) -> &Srq {
        &self.no_srq.0
    }

    /// Forgets the entry a one-CQE poll took last: slots moved.
    pub(crate) fn forget_one(&mut self) {
        self.one = OneMemo::default();
    }

    /// [`Registry::qp_by_key`] for a key whose low bits another QP's key took.
    #[cold]
    #[inline(never)]
    pub(crate) fn qp_by_key_hashed<const V1: bool>(&self, key: u32) -> Option<(u32, &Qp)> {
        let slot = if V1 { self.by_uidx.get(key) } else { self.by_qpn.get(key) }?;
        self.qps.get(slot as usize).map(|q| (slot, q))
    }

    /// QP slot for a user index (version 1) — behind the poller's cache.
    #[inline(never)]
    pub(crate) fn slot_by_uidx(&self, uidx: u32) -> Option<u32> {
        self.qp_by_key::<true>(uidx).map(|(slot, _)| slot)
    }

    #[inline(never)]
    pub(crate) fn srq_slot_by_srqn(&self, srqn: u32) -> Option<u32> {
        self.by_srqn.get(&srqn).copied()
    }

    #[inline(always)]
    pub(crate) fn qp_at(&mut self, slot: u32) -> Option<&mut Qp> {
        self.qps.get_mut(slot as usize)
    }

    #[inline(always)]
    pub(crate) fn qp_at_ref(&self, slot: u32) -> Option<&Qp> {
        self.qps.get(slot as usize)
    }

    #[inline]
    pub(crate) fn srq_at(&mut self, slot: u32) -> Option<&mut Srq> {
        self.srqs.get_mut(slot as usize)
    }

    #[inline]
    pub(crate) fn srq_at_ref(&self, slot: u32) -> Option<&Srq> {
        self.srqs.get(slot as usize)
    }

    /// The SRQ QP `qp` receives from, or (none) an SRQ of no entries that no CQE names.
    #[inline(always)]
    pub(crate) fn srq_of(&self, qp: &Qp) -> &Srq {
        // `NO_SRQ_SLOT` is no slot.
        self.srqs.get(qp.srq as usize).unwrap_or(&self.no_srq.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_uapi::mlx5::cqe::QPN_MASK;

    #[test]
    fn one_requester_cqe_retires_older_unsignaled_wqes() {
        let mut r = Registry::new();
        let qp = r.add_qp(QpConfig::rc(0x10, 16, 16)).unwrap();
        qp.sq.post(100, 1); // unsignaled
        qp.sq.post(101, 2); // unsignaled, 2 WQEBBs
        let idx = qp.sq.post(102, 1); // signaled
        assert_eq!(idx, 3);
        assert_eq!(qp.sq.outstanding(), 3);
        let (i, wr_id, _) = qp.sq.complete(idx);
        assert_eq!((i, wr_id), (3, 102));
        assert_eq!(qp.sq.outstanding(), 0);
    }

    /// QPN lookups find every QP, whether its low bits are its own or shared (the fallback),
    /// as the low-bits table grows, and nothing for an unregistered QPN.
    #[test]
    fn qpn_lookups_with_colliding_low_bits() {
        let mut r = Registry::new();
        let qpns: Vec<u32> = (0..40).map(|i| if i % 3 == 0 { 0x1000 * (i + 1) } else { 0x200 + i }).collect();
        for (i, &q) in qpns.iter().enumerate() {
            r.add_qp(QpConfig::rc(q, 8, 8)).unwrap();
            for (slot, &p) in qpns[..=i].iter().enumerate() {
                assert_eq!(r.slot_by_qpn(p), Some(slot as u32), "qpn {p:#x} after {} registrations", i + 1);
            }
        }
        for unknown in [0x2000, 0x1ff, 0] {
            assert_eq!(r.slot_by_qpn(unknown), None, "qpn {unknown:#x}");
        }
        assert_eq!(Registry::new().slot_by_qpn(0x100), None);
    }

    #[test]
    fn identity_tables_without_posts() {
        let mut r = Registry::new();
        let qp = r.add_qp(QpConfig::rc(1, 8, 4)).unwrap();
        assert_eq!(qp.sq.complete(13).1, 5);
        assert_eq!(qp.rq.complete(0), (0, 0));
        // The counter is masked to the queue (4 entries).
        assert_eq!(qp.rq.complete(6), (2, 2));
    }

    #[test]
    fn rejects_bad_registrations() {
        let mut r = Registry::new();
        assert!(r.add_qp(QpConfig::rc(1, 3, 4)).is_err());
        assert!(r.add_qp(QpConfig::rc(1 << 24, 4, 4)).is_err());
        r.add_qp(QpConfig::rc(1, 4, 4)).unwrap();
        assert!(r.add_qp(QpConfig::rc(1, 4, 4)).is_err());
        let mut c = QpConfig::rc(2, 4, 4);
        c.srqn = Some(9);
        assert!(matches!(r.add_qp(c), Err(RegistryError::NoSuchSrq { .. })));
    }

    /// User indexes given at registration are looked up as given, whatever their low bits
    /// share; the registration order stays the order of `qps()`; a user index is refused
    /// when another QP has it (given, or as its registration order), or is wider than 24
    /// bits.
    #[test]
    fn user_indexes_as_rdma_core_gave_them() {
        let mut r = Registry::new();
        let uidxs: Vec<u32> = (0..40).map(|i| if i % 3 == 0 { 0x1000 * (i + 1) } else { 0x200 + 2 * i }).collect();
        for (i, &u) in uidxs.iter().enumerate() {
            r.add_qp(QpConfig { uidx: Some(u), ..QpConfig::rc(0x500 + i as u32, 8, 8) }).unwrap();
            for (slot, &v) in uidxs[..=i].iter().enumerate() {
                assert_eq!(r.slot_by_uidx(v), Some(slot as u32), "uidx {v:#x} after {} registrations", i + 1);
                assert_eq!(r.qp_by_key::<true>(v).map(|(s, q)| (s, q.uidx())), Some((slot as u32, v)));
            }
        }
        for unknown in [0, 1, 0x201, 0x2000] {
            assert_eq!(r.slot_by_uidx(unknown), None, "uidx {unknown:#x}");
        }
        let order: Vec<u32> = r.qps().iter().map(|q| q.config().qpn).collect();
        assert_eq!(order, (0x500..0x500 + 40).collect::<Vec<_>>());
        let taken = r.add_qp(QpConfig { uidx: Some(uidxs[5]), ..QpConfig::rc(0x600, 8, 8) }).err();
        assert_eq!(taken, Some(RegistryError::Duplicate { what: "uidx", value: uidxs[5] }));
        let wide = r.add_qp(QpConfig { uidx: Some(QPN_MASK + 1), ..QpConfig::rc(0x600, 8, 8) }).err();
        assert_eq!(wide, Some(RegistryError::TooWide { what: "uidx", value: QPN_MASK + 1 }));
        // A QP without an index takes its registration order, here one another QP has.
        let mut r = Registry::new();
        r.add_qp(QpConfig { uidx: Some(1), ..QpConfig::rc(1, 8, 8) }).unwrap();
        let implicit = r.add_qp(QpConfig::rc(2, 8, 8)).err();
        assert_eq!(implicit, Some(RegistryError::Duplicate { what: "uidx", value: 1 }));
        assert_eq!(r.qps().len(), 1, "a refused QP takes no slot");
    }

    /// The edges of what registers: 24-bit numbers, queues of 1 to 2^16 entries (QPs a
    /// power of two, SRQs any count).
    #[test]
    fn registration_limits_at_the_edges() {
        let mut r = Registry::new();
        let qp = r.add_qp(QpConfig::rc(QPN_MASK, 1 << 16, 1)).unwrap();
        assert_eq!((qp.sq.wqe_cnt(), qp.rq.wqe_cnt(), qp.uidx()), (1 << 16, 1, 0));
        let qp = r.add_qp(QpConfig::rc(7, 2, 1 << 16)).unwrap();
        assert_eq!((qp.sq.wqe_cnt(), qp.rq.wqe_cnt(), qp.uidx()), (2, 1 << 16, 1));
        let wide = RegistryError::TooWide { what: "qpn", value: QPN_MASK + 1 };
        assert_eq!(r.add_qp(QpConfig::rc(QPN_MASK + 1, 4, 4)).err(), Some(wide));
        let big = RegistryError::BadQueueSize { qpn: 8, what: "rq", size: (1 << 16) + 1 };
        assert_eq!(r.add_qp(QpConfig::rc(8, 4, (1 << 16) + 1)).err(), Some(big));
        // Refused registrations take no user index: the QPs are in registration order.
        let listed: Vec<_> = r.qps().iter().map(|q| (q.config().qpn, q.uidx())).collect();
        assert_eq!(listed, [(QPN_MASK, 0), (7, 1)]);

        assert_eq!(r.add_srq(QPN_MASK, 1 << 16).map(|s| (s.srqn(), s.completed())).ok(), Some((QPN_MASK, 0)));
        assert_eq!(r.add_srq(5, 3).map(|s| s.srqn()).ok(), Some(5), "an SRQ of 3 entries");
        assert_eq!(
            r.add_srq(QPN_MASK + 1, 4).err(),
            Some(RegistryError::TooWide { what: "srqn", value: QPN_MASK + 1 })
        );
        for size in [0, (1 << 16) + 1] {
            let e = r.add_srq(6, size).err();
            assert_eq!(e, Some(RegistryError::BadSrqSize { srqn: 6, size }));
            assert_eq!(e.map(|e| e.to_string()), Some(format!("srq 0x6 has {size} entries: must be 1 to 65536")));
        }
    }
}
