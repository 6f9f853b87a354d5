//! Zero-copy CQE views: read single fields straight from ring memory, without building a
//! [`dvcq_provider::Completion`].

use crate::cq::{expected_owner, per_lap_parity, Mlx5Cq};
use crate::doorbell::CiPublisher;
use crate::mini::{CompLayout, MiniState};
use core::mem::offset_of;
use dvcq_provider::{RingView, SlotCursor, SlotRef};
use dvcq_uapi::mlx5::cqe::{off, op_own, Cqe64, QPN_MASK};
use dvcq_uapi::mlx5::err_cqe::ErrCqe;
use dvcq_uapi::mlx5::opcode::{cqe_format, cqe_opcode};
use dvcq_uapi::{Be16, Be32};

/// Which `op_own ^ parity` bytes a view walk shows: owner bit clear (this lap) and an opcode
/// that is neither INVALID nor RESIZE. A RESIZE CQE ends the walk unconsumed: only `poll`
/// takes it, and so moves the CQ to its new ring ([`crate::Mlx5Cq::switch_ring`]). One load
/// and test, as the rotate-and-compare test it replaces.
const VIEW_OWNED: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let x = b as u8;
        let opcode = op_own::opcode(x);
        t[b] = x & op_own::OWNER_MASK == 0 && opcode != cqe_opcode::INVALID && opcode != cqe_opcode::RESIZE_CQ;
        b += 1;
    }
    t
};

/// [`VIEW_OWNED`] for each lap parity, indexed by the `op_own` byte itself: a walk picks
/// its lap's table once, and each view's test is one load.
const VIEW_OWNED_IN_LAP: [[bool; 256]; 2] = per_lap_parity(&VIEW_OWNED);

/// Whether a view walk shows the CQE with `op_own` byte `b` in a lap of owner parity
/// `parity` (see [`VIEW_OWNED`]).
#[inline(always)]
fn view_owned(b: u8, parity: u8) -> bool {
    VIEW_OWNED[(b ^ parity) as usize]
}

/// A lending iterator over software-owned CQEs. Each [`Views::next`] consumes one CQE; the
/// consumer index is published (per the CQ's policy) when the iterator is dropped.
///
/// Views are raw: they do not advance the wr_id registry, so use either views or
/// [`Mlx5Cq::poll`] for a given QP's receive queue. The iterator borrows the CQ's parts
/// separately and keeps the ring geometry and the counter in registers.
#[derive(Debug)]
pub struct Views<'a, const STRIDE: usize> {
    ring: RingView<'a, STRIDE>,
    ci: &'a mut u32,
    cur: u32,
    /// The slot of `cur` while it is in the lap the cursor was placed in, and the owner
    /// bit that lap expects: the walk steps a pointer and tests a constant (CQs without
    /// compression).
    cursor: SlotCursor<'a, STRIDE>,
    owned: &'static [bool; 256],
    doorbell: &'a mut CiPublisher,
    /// Anything but a CQ without compression takes the out-of-line test: one flag test
    /// per view either way.
    mode: ViewMode,
    /// Compression state, for the enhanced layout's title.
    mini: &'a mut MiniState,
}

/// Which ownership test a [`Views`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ViewMode {
    /// The owner bit (a CQ without compression).
    Plain,
    /// Nothing is shown: a resize is pending or a compressed session is open.
    Stopped,
    /// The owner bit, ending at a title (basic compression).
    Basic,
    /// The iteration count in byte 62, ending at a block (enhanced compression).
    Enhanced,
}

impl<'a, const STRIDE: usize> Views<'a, STRIDE> {
    /// Inlined into the caller, so that the walk's state can live in registers.
    #[inline(always)]
    pub(crate) fn new(cq: &'a mut Mlx5Cq<STRIDE>) -> Self {
        let mode = match cq.config().compression {
            _ if cq.resize_pending() || cq.session_left() > 0 => ViewMode::Stopped,
            None => ViewMode::Plain,
            Some(c) if c.layout == CompLayout::Enhanced => ViewMode::Enhanced,
            Some(_) => ViewMode::Basic,
        };
        let (ring, ci, doorbell, mini) = cq.view_parts();
        let (cursor, owned) = (Self::lap_start(ring, *ci), Self::lap_table(*ci, ring.entries()));
        Self { ring, cur: *ci, ci, cursor, owned, doorbell, mode, mini }
    }

    /// The ownership table of the lap that running position `pos` is in.
    #[inline(always)]
    fn lap_table(pos: u32, entries: u32) -> &'static [bool; 256] {
        &VIEW_OWNED_IN_LAP[expected_owner(pos, entries) as usize]
    }

    /// The CQE at `pos` if it is software-owned; its slot is addressed once, for the
    /// ownership test and every field the caller reads.
    #[inline(always)]
    fn view_at(&self, pos: u32) -> Option<CqeView<'a, STRIDE>> {
        let entries = self.ring.entries();
        let slot = self.ring.slot_ref::<STRIDE>(pos);
        let op_own = if self.mode != ViewMode::Plain {
            Self::owned_compressed(self.mode, entries, slot, pos)?
        } else {
            slot.owned_at(STRIDE - 1, |b| view_owned(b, expected_owner(pos, entries)))?
        };
        Some(CqeView { ring: self.ring, slot, idx: pos, op_own })
    }

    /// The ownership test of a CQ created with compression (or of stopped views): a
    /// regular CQE's `op_own` by the layout's test; `None` at a title or block (format
    /// 3), which is left for `poll`.
    #[inline(never)]
    fn owned_compressed(mode: ViewMode, entries: u32, slot: SlotRef<'a, STRIDE>, pos: u32) -> Option<u8> {
        let lap = pos >> entries.trailing_zeros();
        match mode {
            ViewMode::Plain | ViewMode::Stopped => None,
            ViewMode::Basic => slot.owned_at(STRIDE - 1, |b| {
                view_owned(b, (lap & 1) as u8) && op_own::format(b) != cqe_format::COMPRESSED
            }),
            ViewMode::Enhanced => Mlx5Cq::<STRIDE>::enh_owned_slot(slot, lap)
                .filter(|&b| op_own::format(b) != cqe_format::COMPRESSED && op_own::opcode(b) != cqe_opcode::RESIZE_CQ),
        }
    }

    /// The next CQE, consumed; `None` when the ring holds no more, at a RESIZE CQE (which
    /// `poll` consumes) or while a resize is pending.
    #[inline(always)]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<CqeView<'_, STRIDE>> {
        let pos = self.cur;
        let v = if self.mode == ViewMode::Plain {
            let slot = match self.cursor.slot() {
                Some(s) => s,
                None => {
                    self.cursor = Self::lap_start(self.ring, pos);
                    self.owned = Self::lap_table(pos, self.ring.entries());
                    self.cursor.slot()?
                }
            };
            let owned = self.owned;
            let op_own = slot.owned_at(STRIDE - 1, |b| owned[b as usize])?;
            self.cursor.advance();
            CqeView { ring: self.ring, slot, idx: pos, op_own }
        } else {
            self.view_at(pos)?
        };
        self.cur = pos.wrapping_add(1);
        Some(v)
    }

    /// A cursor on position `pos`: where a walk starts, and where it goes on after passing
    /// the ring's end. Inlined: a call would take the ring by reference, and with the
    /// walk's own state beside it that state would have to live in memory.
    #[inline(always)]
    fn lap_start(ring: RingView<'a, STRIDE>, pos: u32) -> SlotCursor<'a, STRIDE> {
        ring.cursor(pos)
    }

    /// The next CQE without consuming it.
    #[inline]
    pub fn peek(&self) -> Option<CqeView<'_, STRIDE>> {
        self.view_at(self.cur)
    }
}

impl<const STRIDE: usize> Drop for Views<'_, STRIDE> {
    fn drop(&mut self) {
        let consumed = self.cur.wrapping_sub(*self.ci);
        if consumed == 0 {
            // Nothing moved: the doorbell record already holds this index.
            return;
        }
        *self.ci = self.cur;
        if self.mode == ViewMode::Enhanced {
            // The last CQE shown may be the title of a block right after it: copied
            // before the consumer index releases its slot, as `poll` does.
            self.mini.take_title(self.ring, self.cur.wrapping_sub(1));
        }
        self.doorbell.after_batch(self.cur, consumed);
    }
}

/// One software-owned CQE in ring memory. Accessors read the field they name (one atomic load each),
/// already converted from big-endian; nothing else is copied.
#[derive(Debug, Clone, Copy)]
pub struct CqeView<'a, const STRIDE: usize> {
    ring: RingView<'a, STRIDE>,
    slot: SlotRef<'a, STRIDE>,
    idx: u32,
    op_own: u8,
}

impl<const STRIDE: usize> CqeView<'_, STRIDE> {
    const BASE: usize = STRIDE - 64;

    #[inline(always)]
    fn be32(&self, at: usize) -> u32 {
        self.slot.read_at::<Be32>(Self::BASE + at).map_or(0, Be32::get)
    }
    #[inline(always)]
    fn be16(&self, at: usize) -> u16 {
        self.slot.read_at::<Be16>(Self::BASE + at).map_or(0, Be16::get)
    }
    #[inline(always)]
    fn byte(&self, at: usize) -> u8 {
        self.slot.read_at::<u8>(Self::BASE + at).unwrap_or(0)
    }

    /// Running consumer position of this CQE.
    pub fn position(&self) -> u32 {
        self.idx
    }
    /// The `op_own` byte as read by the ownership check.
    #[inline(always)]
    pub fn op_own(&self) -> u8 {
        self.op_own
    }
    /// CQE opcode.
    #[inline(always)]
    pub fn opcode(&self) -> u8 {
        op_own::opcode(self.op_own)
    }
    /// CQE format.
    #[inline(always)]
    pub fn format(&self) -> u8 {
        op_own::format(self.op_own)
    }
    /// Solicited-event bit.
    pub fn se(&self) -> bool {
        op_own::se(self.op_own)
    }
    /// Local QPN (`sop_drop_qpn & 0xffffff`).
    #[inline(always)]
    pub fn qpn(&self) -> u32 {
        self.be32(off::SOP_DROP_QPN) & QPN_MASK
    }
    /// WQE opcode echoed by requester CQEs.
    #[inline(always)]
    pub fn wqe_opcode(&self) -> u8 {
        (self.be32(off::SOP_DROP_QPN) >> 24) as u8
    }
    /// WQE counter.
    #[inline(always)]
    pub fn wqe_counter(&self) -> u16 {
        self.be16(off::WQE_COUNTER)
    }
    /// Byte count.
    #[inline(always)]
    pub fn byte_cnt(&self) -> u32 {
        self.be32(off::BYTE_CNT)
    }
    /// Signature / validity iteration count.
    pub fn signature(&self) -> u8 {
        self.byte(off::SIGNATURE)
    }
    /// `srqn_uidx & 0xffffff`.
    pub fn srqn_uidx(&self) -> u32 {
        self.be32(offset_of!(Cqe64, srqn_uidx)) & QPN_MASK
    }
    /// Immediate / invalidated rkey / P_Key word, converted to host order.
    pub fn imm_inval_pkey(&self) -> u32 {
        self.be32(offset_of!(Cqe64, imm_inval_pkey))
    }
    /// `flags_rqpn`.
    pub fn flags_rqpn(&self) -> u32 {
        self.be32(offset_of!(Cqe64, flags_rqpn))
    }
    /// Source LID.
    pub fn slid(&self) -> u16 {
        self.be16(offset_of!(Cqe64, slid))
    }
    /// Timestamp.
    pub fn timestamp(&self) -> u64 {
        let at = offset_of!(Cqe64, timestamp);
        (u64::from(self.be32(at)) << 32) | u64::from(self.be32(at + 4))
    }
    /// RSS hash result.
    pub fn rss_hash_result(&self) -> u32 {
        self.be32(offset_of!(Cqe64, rss_hash_result))
    }
    /// L4 checksum.
    pub fn check_sum(&self) -> u16 {
        self.be16(offset_of!(Cqe64, check_sum))
    }
    /// `hds_ip_ext`.
    pub fn hds_ip_ext(&self) -> u8 {
        self.byte(offset_of!(Cqe64, hds_ip_ext))
    }
    /// `l4_hdr_type_etc`.
    pub fn l4_hdr_type_etc(&self) -> u8 {
        self.byte(offset_of!(Cqe64, l4_hdr_type_etc))
    }
    /// The whole cqe64, copied.
    pub fn cqe(&self) -> Cqe64 {
        self.slot.read_at::<Cqe64>(Self::BASE).unwrap_or_default()
    }
    /// The error CQE fields (meaningful for opcodes 13 and 14).
    pub fn err(&self) -> ErrCqe {
        bytemuck::cast(self.cqe())
    }
    /// Inline-scattered receive data: format 1 gives up to 32 bytes from the cqe64 itself,
    /// format 2 up to 64 bytes from the first half of a 128-byte CQE (rdma-core
    /// `handle_responder`). Copies `min(byte_cnt, capacity, out.len())` bytes into `out` and
    /// returns the count; 0 for CQEs without inline data.
    pub fn inline_data(&self, out: &mut [u8]) -> usize {
        let (start, cap) = match self.format() {
            1 => (Self::BASE, 32),
            2 if STRIDE == 128 => (0, 64),
            _ => return 0,
        };
        let n = (self.byte_cnt() as usize).min(cap).min(out.len());
        match self.ring.read_bytes(self.idx, start, &mut out[..n]) {
            Ok(()) => n,
            Err(_) => 0,
        }
    }
    /// The 40-byte GRH a 128-byte CQE carries before its cqe64 when `flags_rqpn` bit 29 is
    /// set; `None` otherwise.
    pub fn grh(&self) -> Option<[u8; 40]> {
        if STRIDE != 128 || self.flags_rqpn() & dvcq_uapi::mlx5::cqe::flags_rqpn::L3_IN_CQE == 0 {
            return None;
        }
        let mut g = [0u8; 40];
        self.ring.read_bytes(self.idx, dvcq_uapi::mlx5::cqe::GRH_OFFSET_IN_CQE128, &mut g).ok()?;
        Some(g)
    }
}
