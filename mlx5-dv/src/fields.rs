//! Reading cqe64 fields either from a copied [`Cqe64`] or straight from an owned ring slot.
//!
//! The poll fast path reads each field from ring memory where it is used, so the compiler
//! never keeps a whole CQE in registers (or spills it); slow paths and peek work on a copy.
//! Both go through [`CqeFields`], so the translation code exists once. Offsets come from the
//! uapi layout (`offset_of!` on [`Cqe64`]), never from hand-written numbers.

use core::mem::offset_of;
use dvcq_provider::SlotRef;
use dvcq_uapi::mlx5::cqe::{Cqe64, QPN_MASK};
use dvcq_uapi::{Be16, Be32, Be64};

/// The cqe64 fields the translation reads, converted to host order.
pub(crate) trait CqeFields {
    fn op_own(&self) -> u8;
    fn sop_drop_qpn(&self) -> u32;
    fn wqe_counter(&self) -> u16;
    fn byte_cnt(&self) -> u32;
    fn timestamp(&self) -> u64;
    /// Raw `srqn_uidx` word (host order, unmasked).
    fn srqn_uidx_word(&self) -> u32;
    fn imm_inval_pkey(&self) -> Be32;
    fn flags_rqpn(&self) -> u32;
    fn slid(&self) -> u16;
    fn ml_path(&self) -> u8;
    fn hds_ip_ext(&self) -> u8;
    fn l4_hdr_type_etc(&self) -> u8;
    fn check_sum(&self) -> u16;
    fn rss_hash_result(&self) -> u32;

    /// Local QPN.
    #[inline(always)]
    fn qpn(&self) -> u32 {
        self.sop_drop_qpn() & QPN_MASK
    }
    /// SRQ number or user index.
    #[inline(always)]
    fn srqn_uidx(&self) -> u32 {
        self.srqn_uidx_word() & QPN_MASK
    }
}

impl CqeFields for Cqe64 {
    #[inline(always)]
    fn op_own(&self) -> u8 {
        self.op_own
    }
    #[inline(always)]
    fn sop_drop_qpn(&self) -> u32 {
        self.sop_drop_qpn.get()
    }
    #[inline(always)]
    fn wqe_counter(&self) -> u16 {
        self.wqe_counter.get()
    }
    #[inline(always)]
    fn byte_cnt(&self) -> u32 {
        self.byte_cnt.get()
    }
    #[inline(always)]
    fn timestamp(&self) -> u64 {
        self.timestamp.get()
    }
    #[inline(always)]
    fn srqn_uidx_word(&self) -> u32 {
        self.srqn_uidx.get()
    }
    #[inline(always)]
    fn imm_inval_pkey(&self) -> Be32 {
        self.imm_inval_pkey
    }
    #[inline(always)]
    fn flags_rqpn(&self) -> u32 {
        self.flags_rqpn.get()
    }
    #[inline(always)]
    fn slid(&self) -> u16 {
        self.slid.get()
    }
    #[inline(always)]
    fn ml_path(&self) -> u8 {
        self.ml_path
    }
    #[inline(always)]
    fn hds_ip_ext(&self) -> u8 {
        self.hds_ip_ext
    }
    #[inline(always)]
    fn l4_hdr_type_etc(&self) -> u8 {
        self.l4_hdr_type_etc
    }
    #[inline(always)]
    fn check_sum(&self) -> u16 {
        self.check_sum.get()
    }
    #[inline(always)]
    fn rss_hash_result(&self) -> u32 {
        self.rss_hash_result.get()
    }
}

/// A software-owned cqe64 in ring memory, in the ring slot `slot`: each accessor is one
/// relaxed atomic load ([`SlotRef::read_at`]), valid between the ownership check and the next
/// consumer-index publication.
#[derive(Clone, Copy)]
pub(crate) struct RingCqe<'a, const S: usize> {
    pub slot: SlotRef<'a, S>,
    pub op_own: u8,
}

impl<const S: usize> RingCqe<'_, S> {
    /// Offset of the cqe64 in the slot (the second half of a 128-byte CQE).
    const BASE: usize = S - 64;

    #[inline(always)]
    fn get<T: bytemuck::Pod + Default>(&self, off: usize) -> T {
        self.slot.read_at::<T>(Self::BASE + off).unwrap_or_default()
    }

    /// The big-endian word at `off` of the cqe64, one load.
    #[inline(always)]
    pub(crate) fn be32(&self, off: usize) -> Be32 {
        self.get(off)
    }
    /// The big-endian half-word at `off` of the cqe64.
    #[inline(always)]
    pub(crate) fn be16(&self, off: usize) -> Be16 {
        self.get(off)
    }
    /// The big-endian double word at `off` of the cqe64.
    #[inline(always)]
    pub(crate) fn be64(&self, off: usize) -> Be64 {
        self.get(off)
    }
    /// The byte at `off` of the cqe64.
    #[inline(always)]
    pub(crate) fn byte(&self, off: usize) -> u8 {
        self.get(off)
    }
}

impl<const S: usize> CqeFields for RingCqe<'_, S> {
    #[inline(always)]
    fn op_own(&self) -> u8 {
        self.op_own
    }
    #[inline(always)]
    fn sop_drop_qpn(&self) -> u32 {
        self.get::<Be32>(offset_of!(Cqe64, sop_drop_qpn)).get()
    }
    #[inline(always)]
    fn wqe_counter(&self) -> u16 {
        self.get::<Be16>(offset_of!(Cqe64, wqe_counter)).get()
    }
    #[inline(always)]
    fn byte_cnt(&self) -> u32 {
        self.get::<Be32>(offset_of!(Cqe64, byte_cnt)).get()
    }
    #[inline(always)]
    fn timestamp(&self) -> u64 {
        self.get::<Be64>(offset_of!(Cqe64, timestamp)).get()
    }
    #[inline(always)]
    fn srqn_uidx_word(&self) -> u32 {
        self.get::<Be32>(offset_of!(Cqe64, srqn_uidx)).get()
    }
    #[inline(always)]
    fn imm_inval_pkey(&self) -> Be32 {
        self.get::<Be32>(offset_of!(Cqe64, imm_inval_pkey))
    }
    #[inline(always)]
    fn flags_rqpn(&self) -> u32 {
        self.get::<Be32>(offset_of!(Cqe64, flags_rqpn)).get()
    }
    #[inline(always)]
    fn slid(&self) -> u16 {
        self.get::<Be16>(offset_of!(Cqe64, slid)).get()
    }
    #[inline(always)]
    fn ml_path(&self) -> u8 {
        self.get::<u8>(offset_of!(Cqe64, ml_path))
    }
    #[inline(always)]
    fn hds_ip_ext(&self) -> u8 {
        self.get::<u8>(offset_of!(Cqe64, hds_ip_ext))
    }
    #[inline(always)]
    fn l4_hdr_type_etc(&self) -> u8 {
        self.get::<u8>(offset_of!(Cqe64, l4_hdr_type_etc))
    }
    #[inline(always)]
    fn check_sum(&self) -> u16 {
        self.get::<Be16>(offset_of!(Cqe64, check_sum)).get()
    }
    #[inline(always)]
    fn rss_hash_result(&self) -> u32 {
        self.get::<Be32>(offset_of!(Cqe64, rss_hash_result)).get()
    }
}
