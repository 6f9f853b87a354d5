//! Work completions with libibverbs' numeric values (`struct ibv_wc`, `enum ibv_wc_status`,
//! `enum ibv_wc_opcode`, `enum ibv_wc_flags`).

use crate::fault::{CqErrorReason, CqeFault, FaultKind};
use core::fmt;
use core::mem::{offset_of, size_of};
use static_assertions::const_assert_eq;

/// Completion status, `enum ibv_wc_status`, with the same numbers.
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum WcStatus {
    #[default]
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    LocProtErr = 4,
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
    TmErr = 22,
    TmRndvIncomplete = 23,
}

impl WcStatus {
    /// Every status, in numeric order.
    pub const ALL: [WcStatus; 24] = [
        Self::Success,
        Self::LocLenErr,
        Self::LocQpOpErr,
        Self::LocEecOpErr,
        Self::LocProtErr,
        Self::WrFlushErr,
        Self::MwBindErr,
        Self::BadRespErr,
        Self::LocAccessErr,
        Self::RemInvReqErr,
        Self::RemAccessErr,
        Self::RemOpErr,
        Self::RetryExcErr,
        Self::RnrRetryExcErr,
        Self::LocRddViolErr,
        Self::RemInvRdReqErr,
        Self::RemAbortErr,
        Self::InvEecnErr,
        Self::InvEecStateErr,
        Self::FatalErr,
        Self::RespTimeoutErr,
        Self::GeneralErr,
        Self::TmErr,
        Self::TmRndvIncomplete,
    ];

    /// The status for a libibverbs number, or `None` if libibverbs defines none.
    pub const fn from_u32(v: u32) -> Option<WcStatus> {
        if (v as usize) < Self::ALL.len() {
            Some(Self::ALL[v as usize])
        } else {
            None
        }
    }

    /// The exact text of `ibv_wc_status_str()` (libibverbs `enum_strs.c`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::LocLenErr => "local length error",
            Self::LocQpOpErr => "local QP operation error",
            Self::LocEecOpErr => "local EE context operation error",
            Self::LocProtErr => "local protection error",
            Self::WrFlushErr => "Work Request Flushed Error",
            Self::MwBindErr => "memory management operation error",
            Self::BadRespErr => "bad response error",
            Self::LocAccessErr => "local access error",
            Self::RemInvReqErr => "remote invalid request error",
            Self::RemAccessErr => "remote access error",
            Self::RemOpErr => "remote operation error",
            Self::RetryExcErr => "transport retry counter exceeded",
            Self::RnrRetryExcErr => "RNR retry counter exceeded",
            Self::LocRddViolErr => "local RDD violation error",
            Self::RemInvRdReqErr => "remote invalid RD request",
            Self::RemAbortErr => "aborted error",
            Self::InvEecnErr => "invalid EE context number",
            Self::InvEecStateErr => "invalid EE context state",
            Self::FatalErr => "fatal error",
            Self::RespTimeoutErr => "response timeout error",
            Self::GeneralErr => "general error",
            Self::TmErr => "TM error",
            Self::TmRndvIncomplete => "TM software rendezvous",
        }
    }

    /// `ibv_wc_status_str()` for any number: "unknown" outside the enum, as libibverbs does.
    pub const fn str_of(v: u32) -> &'static str {
        match Self::from_u32(v) {
            Some(s) => s.as_str(),
            None => "unknown",
        }
    }

    /// The libibverbs `IBV_WC_*` constant name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Success => "IBV_WC_SUCCESS",
            Self::LocLenErr => "IBV_WC_LOC_LEN_ERR",
            Self::LocQpOpErr => "IBV_WC_LOC_QP_OP_ERR",
            Self::LocEecOpErr => "IBV_WC_LOC_EEC_OP_ERR",
            Self::LocProtErr => "IBV_WC_LOC_PROT_ERR",
            Self::WrFlushErr => "IBV_WC_WR_FLUSH_ERR",
            Self::MwBindErr => "IBV_WC_MW_BIND_ERR",
            Self::BadRespErr => "IBV_WC_BAD_RESP_ERR",
            Self::LocAccessErr => "IBV_WC_LOC_ACCESS_ERR",
            Self::RemInvReqErr => "IBV_WC_REM_INV_REQ_ERR",
            Self::RemAccessErr => "IBV_WC_REM_ACCESS_ERR",
            Self::RemOpErr => "IBV_WC_REM_OP_ERR",
            Self::RetryExcErr => "IBV_WC_RETRY_EXC_ERR",
            Self::RnrRetryExcErr => "IBV_WC_RNR_RETRY_EXC_ERR",
            Self::LocRddViolErr => "IBV_WC_LOC_RDD_VIOL_ERR",
            Self::RemInvRdReqErr => "IBV_WC_REM_INV_RD_REQ_ERR",
            Self::RemAbortErr => "IBV_WC_REM_ABORT_ERR",
            Self::InvEecnErr => "IBV_WC_INV_EECN_ERR",
            Self::InvEecStateErr => "IBV_WC_INV_EEC_STATE_ERR",
            Self::FatalErr => "IBV_WC_FATAL_ERR",
            Self::RespTimeoutErr => "IBV_WC_RESP_TIMEOUT_ERR",
            Self::GeneralErr => "IBV_WC_GENERAL_ERR",
            Self::TmErr => "IBV_WC_TM_ERR",
            Self::TmRndvIncomplete => "IBV_WC_TM_RNDV_INCOMPLETE",
        }
    }
}

impl fmt::Display for WcStatus {
    /// Exactly `ibv_wc_status_str()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Completion opcode, `enum ibv_wc_opcode`, with the same numbers.
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum WcOpcode {
    #[default]
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    CompSwap = 3,
    FetchAdd = 4,
    BindMw = 5,
    LocalInv = 6,
    Tso = 7,
    Flush = 8,
    AtomicWrite = 9,
    Recv = 128,
    RecvRdmaWithImm = 129,
    TmAdd = 130,
    TmDel = 131,
    TmSync = 132,
    TmRecv = 133,
    TmNoTag = 134,
    Driver1 = 135,
    Driver2 = 136,
    Driver3 = 137,
}

impl WcOpcode {
    /// The opcode for a libibverbs number, or `None` if libibverbs defines none.
    pub const fn from_u32(v: u32) -> Option<WcOpcode> {
        Some(match v {
            0 => Self::Send,
            1 => Self::RdmaWrite,
            2 => Self::RdmaRead,
            3 => Self::CompSwap,
            4 => Self::FetchAdd,
            5 => Self::BindMw,
            6 => Self::LocalInv,
            7 => Self::Tso,
            8 => Self::Flush,
            9 => Self::AtomicWrite,
            128 => Self::Recv,
            129 => Self::RecvRdmaWithImm,
            130 => Self::TmAdd,
            131 => Self::TmDel,
            132 => Self::TmSync,
            133 => Self::TmRecv,
            134 => Self::TmNoTag,
            135 => Self::Driver1,
            136 => Self::Driver2,
            137 => Self::Driver3,
            _ => return None,
        })
    }

    /// The libibverbs `IBV_WC_*` constant name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Send => "IBV_WC_SEND",
            Self::RdmaWrite => "IBV_WC_RDMA_WRITE",
            Self::RdmaRead => "IBV_WC_RDMA_READ",
            Self::CompSwap => "IBV_WC_COMP_SWAP",
            Self::FetchAdd => "IBV_WC_FETCH_ADD",
            Self::BindMw => "IBV_WC_BIND_MW",
            Self::LocalInv => "IBV_WC_LOCAL_INV",
            Self::Tso => "IBV_WC_TSO",
            Self::Flush => "IBV_WC_FLUSH",
            Self::AtomicWrite => "IBV_WC_ATOMIC_WRITE",
            Self::Recv => "IBV_WC_RECV",
            Self::RecvRdmaWithImm => "IBV_WC_RECV_RDMA_WITH_IMM",
            Self::TmAdd => "IBV_WC_TM_ADD",
            Self::TmDel => "IBV_WC_TM_DEL",
            Self::TmSync => "IBV_WC_TM_SYNC",
            Self::TmRecv => "IBV_WC_TM_RECV",
            Self::TmNoTag => "IBV_WC_TM_NO_TAG",
            Self::Driver1 => "IBV_WC_DRIVER1",
            Self::Driver2 => "IBV_WC_DRIVER2",
            Self::Driver3 => "IBV_WC_DRIVER3",
        }
    }

    /// True for receive-side opcodes (`opcode & IBV_WC_RECV`).
    pub const fn is_recv(self) -> bool {
        self as u8 & 0x80 != 0
    }
}

bitflags::bitflags! {
    /// Completion flags, `enum ibv_wc_flags`, with the same bits.
    #[repr(transparent)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct WcFlags: u32 {
        /// `IBV_WC_GRH`: a GRH is present.
        const GRH = 1 << 0;
        /// `IBV_WC_WITH_IMM`: `imm_data` is valid.
        const WITH_IMM = 1 << 1;
        /// `IBV_WC_IP_CSUM_OK`: the IPv4 and L4 checksums were verified.
        const IP_CSUM_OK = 1 << 2;
        /// `IBV_WC_WITH_INV`: `imm_data` holds the invalidated rkey.
        const WITH_INV = 1 << 3;
        /// `IBV_WC_TM_SYNC_REQ`.
        const TM_SYNC_REQ = 1 << 4;
        /// `IBV_WC_TM_MATCH`.
        const TM_MATCH = 1 << 5;
        /// `IBV_WC_TM_DATA_VALID`.
        const TM_DATA_VALID = 1 << 6;
    }
}

/// One work completion: every field of `struct ibv_wc`, plus the raw extras a direct poller
/// reads from the CQE.
///
/// # Undefined fields
///
/// Like `ibv_poll_cq`, a poll always writes the fields that are defined for the
/// completion it returns: `status`, `wr_id`, `qp_num`, `wc_flags`, `wqe_index` and the fault
/// marker, plus whatever else that kind of completion defines. Fields verbs leave undefined
/// (for example `byte_len` of a successful mlx5 SEND, `opcode` of an error, the receive-only
/// fields of a send) are not part of the result: a backend may leave what the slot held
/// there, as rdma-core does, or write a zero (the mlx5 and irdma pollers write `wc_flags`
/// through `sl` as one word, so `sl` reads 0 where verbs leave it
/// undefined). Start from [`Completion::default`] and clear slots between
/// polls if you want zeroes there, as ring-image decoding does.
///
/// # Fault items
///
/// A CQE that cannot become a completion (unknown QP, garbage) is returned in its place as a
/// *fault item*: [`Completion::fault`] is `Some`, `status` is [`WcStatus::GeneralErr`] so
/// code that only checks the status still treats it as a failure, `wr_id` is the ring
/// position (running consumer counter) of the CQE, and `qp_num` the raw QPN or user index
/// the CQE named. Completions before and after it in the same batch are unaffected.
///
/// A CQ in error (it overran, or its device failed) is reported the same way, once: a
/// [`FaultKind::CqError`] item, after every completion written before the error, whose
/// [`Completion::cq_error`] says why.
///
/// The layout groups the fields every completion writes, so a poll stores few words.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Completion {
    /// The work request id (`wr_id`), or the WQE index when no wr_id table is registered.
    pub wr_id: u64,
    /// `byte_len`.
    pub byte_len: u32,
    /// `imm_data` exactly as `ibv_wc` holds it: the immediate in network byte order read as a
    /// host integer, or (with `WITH_INV`) the invalidated rkey in host order.
    pub imm_data: u32,
    /// `qp_num`: the local QP number.
    pub qp_num: u32,
    /// `wc_flags`.
    pub wc_flags: WcFlags,
    /// `status`.
    pub status: WcStatus,
    /// `opcode`.
    pub opcode: WcOpcode,
    /// [`FaultKind::None`] for a completion; otherwise this is a fault item (read it with
    /// [`Completion::fault`]).
    pub fault_kind: FaultKind,
    /// `sl`: service level.
    pub sl: u8,
    /// The WQE index this completion retires: the index into the queue's wr_id table
    /// (mlx5: masked for SQ/RQ, unmasked for SRQ; irdma: the SQ/RQ ring index).
    pub wqe_index: u16,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `src_qp`: the remote QP number (UD and responder completions).
    pub src_qp: u32,
    /// `vendor_err`: the vendor error syndrome of an error completion.
    pub vendor_err: u32,
    /// `slid`: source LID.
    pub slid: u16,
    /// `dlid_path_bits`.
    pub dlid_path_bits: u8,
    /// Raw header-check flags: mlx5 `hds_ip_ext` (L2/L3/L4 OK bits); raw Ethernet receives.
    pub hdr_ok: u8,
    /// Raw header types: mlx5 `l4_hdr_type_etc`; raw Ethernet receives.
    pub hdr_type: u8,
    /// Raw L4 checksum from the CQE; raw Ethernet receives.
    pub checksum: u16,
    /// Raw completion timestamp from the CQE (device clock).
    pub timestamp: u64,
    /// RSS hash result or flow tag; raw Ethernet receives.
    pub flow_tag_hash: u32,
}

const_assert_eq!(size_of::<Completion>(), 64);
const_assert_eq!(offset_of!(Completion, wr_id), 0);
const_assert_eq!(offset_of!(Completion, byte_len), 8);
const_assert_eq!(offset_of!(Completion, qp_num), 16);
const_assert_eq!(offset_of!(Completion, status), 24);
const_assert_eq!(offset_of!(Completion, wqe_index), 28);
const_assert_eq!(offset_of!(Completion, timestamp), 48);

/// The eight bytes of a [`Completion`] from `wc_flags` to `sl`, which a poller can keep
/// precomputed per opcode ([`WcHead::word`]) and write with one store
/// ([`Completion::set_head`]).
// Not API (hidden with `WcHeadWord` and `set_head`): the vendor pollers' precomputed heads
// (dvcq-mlx5-dv and dvcq-e810-dv `fast.rs`), public only because they live in other crates.
#[doc(hidden)]
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WcHead {
    /// `wc_flags`.
    pub wc_flags: WcFlags,
    /// `status`.
    pub status: WcStatus,
    /// `opcode`.
    pub opcode: WcOpcode,
    /// The fault marker ([`FaultKind::None`] for a completion).
    pub fault_kind: FaultKind,
    /// `sl`.
    pub sl: u8,
}

const_assert_eq!(size_of::<WcHead>(), 8);
const_assert_eq!(offset_of!(Completion, wc_flags), 20);
const_assert_eq!(offset_of!(Completion, opcode), 25);
const_assert_eq!(offset_of!(Completion, fault_kind), 26);
const_assert_eq!(offset_of!(Completion, sl), 27);

impl WcHead {
    /// A successful completion's head.
    pub const fn success(opcode: WcOpcode, wc_flags: WcFlags, sl: u8) -> WcHead {
        WcHead { wc_flags, status: WcStatus::Success, opcode, fault_kind: FaultKind::None, sl }
    }

    /// The head packed as the eight bytes it occupies in a [`Completion`].
    pub const fn word(self) -> WcHeadWord {
        let f = self.wc_flags.bits().to_ne_bytes();
        WcHeadWord(u64::from_ne_bytes([
            f[0],
            f[1],
            f[2],
            f[3],
            self.status as u8,
            self.opcode as u8,
            self.fault_kind as u8,
            self.sl,
        ]))
    }
}

/// A [`WcHead`] packed into the eight bytes it occupies in a [`Completion`], for
/// [`Completion::set_head`]. Only [`WcHead::word`] makes one, so its bytes are always a
/// valid head.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WcHeadWord(u64);

impl Completion {
    /// Writes `wc_flags`, `status`, `opcode`, the fault marker and `sl` with one store.
    // Not API: the mlx5 and irdma pollers' fast paths (dvcq-mlx5-dv and dvcq-e810-dv
    // `fast.rs`) write a precomputed head with it; public only because they are other crates.
    #[doc(hidden)]
    #[inline(always)]
    pub fn set_head(&mut self, h: WcHeadWord) {
        let p = (self as *mut Completion).cast::<u8>();
        // SAFETY: bytes 20..28 of a Completion are wc_flags, status, opcode, fault_kind and sl (offsets pinned above), and `h` holds the bytes of a valid WcHead in that order (only `WcHead::word` builds one), so every field keeps a valid value; the range is inside `*self`, held exclusively; unaligned because offset 20 is only 4-aligned.
        unsafe { p.add(offset_of!(Completion, wc_flags)).cast::<u64>().write_unaligned(h.0) }
    }

    /// Copies bytes `bytes` (offsets into the 64-byte layout) from `from`: a poller
    /// writing the constant fields of a template completion as a few wide moves. Any range
    /// keeps `self` valid: every byte lies in an integer field (any value is valid), a
    /// one-byte enum (copied whole from a valid one) or padding. A range past the end is
    /// cut at 64.
    // Not API: the mlx5 poller's compressed-CQE sessions (dvcq-mlx5-dv `mini/session.rs`)
    // copy a template completion's constant fields with it; public only because that is
    // another crate.
    #[doc(hidden)]
    #[inline(always)]
    pub fn copy_bytes_from(&mut self, from: &Completion, bytes: core::ops::Range<usize>) {
        let end = bytes.end.min(size_of::<Completion>());
        let start = bytes.start.min(end);
        let src = (from as *const Completion).cast::<u8>();
        let dst = (self as *mut Completion).cast::<u8>();
        // SAFETY: `start <= end <= 64`, so both ranges lie inside their Completions; `from` is a shared and `self` an exclusive reference, so they do not overlap; and any byte range copied between two valid Completions at the same offsets leaves a valid one (see above).
        unsafe { core::ptr::copy_nonoverlapping(src.add(start), dst.add(start), end - start) }
    }

    /// A fault item for the CQE at ring position `position` (see the type's docs).
    #[cold]
    pub fn from_fault(f: CqeFault) -> Completion {
        Completion {
            wr_id: f.position as u64,
            qp_num: f.value,
            status: WcStatus::GeneralErr,
            fault_kind: f.kind,
            ..Completion::default()
        }
    }

    /// `Some` when this item stands for a CQE that could not become a completion.
    #[inline]
    pub fn fault(&self) -> Option<CqeFault> {
        if self.fault_kind == FaultKind::None {
            None
        } else {
            Some(CqeFault { kind: self.fault_kind, position: self.wr_id as u32, value: self.qp_num })
        }
    }

    /// Why the CQ is in error, for the [`FaultKind::CqError`] item a poll returns once the
    /// CQ is; `None` for every other completion and fault item.
    #[inline]
    pub fn cq_error(&self) -> Option<CqErrorReason> {
        self.fault().and_then(|f| f.cq_error())
    }

    /// True for a successful completion (and not a fault item).
    #[inline]
    pub fn is_ok(&self) -> bool {
        self.status == WcStatus::Success
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_numbers_and_strings_match_libibverbs() {
        for (i, s) in WcStatus::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i);
            assert_eq!(WcStatus::from_u32(i as u32), Some(*s));
        }
        assert_eq!(WcStatus::WrFlushErr.to_string(), "Work Request Flushed Error");
        assert_eq!(WcStatus::RemAbortErr.to_string(), "aborted error");
        assert_eq!(WcStatus::MwBindErr.to_string(), "memory management operation error");
        assert_eq!(WcStatus::str_of(24), "unknown");
        assert_eq!(WcStatus::str_of(u32::MAX), "unknown");
    }

    #[test]
    fn opcode_numbers_match_libibverbs() {
        assert_eq!(WcOpcode::Recv as u8, 128);
        assert_eq!(WcOpcode::RecvRdmaWithImm as u8, 129);
        // Exactly libibverbs' numbers have an opcode, and each round-trips.
        let defined: Vec<u32> = (0..=255u32).filter(|&v| WcOpcode::from_u32(v).is_some()).collect();
        assert_eq!(defined, (0..=9).chain(128..=137).collect::<Vec<u32>>());
        for v in defined {
            assert_eq!(WcOpcode::from_u32(v).map(|op| op as u32), Some(v));
        }
        assert_eq!(WcOpcode::from_u32(u32::MAX), None);
        assert!(WcOpcode::Recv.is_recv() && !WcOpcode::RdmaRead.is_recv());
    }

    /// The `IBV_WC_*` names: one per value, each the libibverbs constant.
    #[test]
    fn constant_names_are_libibverbs_own() {
        let ops: Vec<WcOpcode> = (0..=255u32).filter_map(WcOpcode::from_u32).collect();
        let mut names: Vec<&str> = ops.iter().map(|op| op.name()).collect();
        assert_eq!((names[0], names[9]), ("IBV_WC_SEND", "IBV_WC_ATOMIC_WRITE"));
        assert_eq!((WcOpcode::Recv.name(), WcOpcode::Driver3.name()), ("IBV_WC_RECV", "IBV_WC_DRIVER3"));
        let mut statuses: Vec<&str> = WcStatus::ALL.iter().map(|s| s.name()).collect();
        assert_eq!((statuses[0], statuses[5]), ("IBV_WC_SUCCESS", "IBV_WC_WR_FLUSH_ERR"));
        assert_eq!(WcStatus::TmRndvIncomplete.name(), "IBV_WC_TM_RNDV_INCOMPLETE");
        for list in [&mut names, &mut statuses] {
            assert!(list.iter().all(|n| n.starts_with("IBV_WC_")), "{list:?}");
            let n = list.len();
            list.sort_unstable();
            list.dedup();
            assert_eq!(list.len(), n, "a name given twice");
        }
    }

    #[test]
    fn only_a_successful_completion_is_ok() {
        assert!(Completion::default().is_ok());
        let flushed = Completion { status: WcStatus::WrFlushErr, ..Completion::default() };
        assert!(!flushed.is_ok());
    }

    #[test]
    fn set_head_writes_exactly_the_head_fields() {
        let before = Completion { wr_id: 9, qp_num: 5, wqe_index: 3, pkey_index: 0xffff, ..Completion::default() };
        let mut c = before;
        let h = WcHead {
            wc_flags: WcFlags::GRH | WcFlags::WITH_IMM,
            status: WcStatus::RemAbortErr,
            opcode: WcOpcode::RecvRdmaWithImm,
            fault_kind: FaultKind::BadField,
            sl: 0xa,
        };
        c.set_head(h.word());
        assert_eq!(
            (c.wc_flags, c.status, c.opcode, c.fault_kind, c.sl),
            (h.wc_flags, h.status, h.opcode, h.fault_kind, h.sl)
        );
        // Neighbours are untouched.
        assert_eq!((c.wr_id, c.qp_num, c.wqe_index, c.pkey_index), (9, 5, 3, 0xffff));
    }

    #[test]
    fn copy_bytes_from_copies_exactly_the_range() {
        let from = Completion {
            wr_id: 1,
            byte_len: 2,
            imm_data: 3,
            qp_num: 4,
            status: WcStatus::RemOpErr,
            opcode: WcOpcode::RdmaRead,
            src_qp: 6,
            vendor_err: 7,
            ..Completion::default()
        };
        let mut c = Completion { wr_id: 9, byte_len: 9, vendor_err: 9, ..Completion::default() };
        c.copy_bytes_from(&from, 16..36);
        assert_eq!((c.qp_num, c.status, c.opcode, c.src_qp), (4, WcStatus::RemOpErr, WcOpcode::RdmaRead, 6));
        assert_eq!((c.wr_id, c.byte_len, c.vendor_err), (9, 9, 9));
        // Ranges past the end are cut, empty ranges copy nothing.
        c.copy_bytes_from(&from, 60..100);
        c.copy_bytes_from(&from, 70..80);
        assert_eq!(c.wr_id, 9);
    }

    #[test]
    fn fault_items_round_trip() {
        let f = CqeFault { kind: FaultKind::UnknownQp, position: 77, value: 0xabc };
        let c = Completion::from_fault(f);
        assert_eq!(c.fault(), Some(f));
        assert_eq!(c.status, WcStatus::GeneralErr);
        assert!(Completion::default().fault().is_none());
        assert_eq!(c.cq_error(), None);
        let e = Completion::from_fault(CqeFault::cq_error_item(CqErrorReason::Overrun, 16));
        assert_eq!((e.cq_error(), e.status, e.wr_id), (Some(CqErrorReason::Overrun), WcStatus::GeneralErr, 16));
        assert_eq!(Completion::default().cq_error(), None);
    }
}
