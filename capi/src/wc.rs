//! `struct dvcq_wc`: a work completion laid out exactly as libibverbs' `struct ibv_wc`, so
//! C code hands the same arrays and completion handling to dvcq; and the numbers its
//! fields hold.

use core::mem::{align_of, offset_of, size_of};
use dvcq::{Completion, FaultKind, WcOpcode, WcStatus};
use static_assertions::const_assert_eq;

/// A work completion, `struct ibv_wc` byte for byte (48 bytes; the header checks the
/// layout against verbs.h where both are included).
///
/// `imm_data` is `ibv_wc`'s anonymous union: the immediate (network byte order) with
/// `IBV_WC_WITH_IMM`, the invalidated rkey with `IBV_WC_WITH_INV`. A fault item (a CQE
/// dvcq could not turn into a completion) has status `DVCQ_WC_GENERAL_ERR`, the
/// `DVCQ_WC_FAULT` bit in `wc_flags` and its `DVCQ_FAULT_*` kind in `vendor_err`; see
/// `dvcq_cq_poll`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct dvcq_wc {
    /// `wr_id` (for a fault item: the CQE's ring position).
    pub wr_id: u64,
    /// `status`: a `DVCQ_WC_*` status, `enum ibv_wc_status`'s number.
    pub status: u32,
    /// `opcode`: a `DVCQ_WC_*` opcode, `enum ibv_wc_opcode`'s number.
    pub opcode: u32,
    /// `vendor_err` (for a fault item: its `DVCQ_FAULT_*` kind).
    pub vendor_err: u32,
    /// `byte_len`.
    pub byte_len: u32,
    /// `imm_data` / `invalidated_rkey`.
    pub imm_data: u32,
    /// `qp_num` (for a fault item: the value the CQE held, a QPN, user index or opcode).
    pub qp_num: u32,
    /// `src_qp`.
    pub src_qp: u32,
    /// `wc_flags`: `IBV_WC_*` flag bits, and `DVCQ_WC_FAULT` on a fault item.
    pub wc_flags: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `slid`.
    pub slid: u16,
    /// `sl`.
    pub sl: u8,
    /// `dlid_path_bits`.
    pub dlid_path_bits: u8,
}

// `struct ibv_wc` as verbs.h (v44 to v64) lays it out.
const_assert_eq!(size_of::<dvcq_wc>(), 48);
const_assert_eq!(align_of::<dvcq_wc>(), 8);
const_assert_eq!(offset_of!(dvcq_wc, wr_id), 0);
const_assert_eq!(offset_of!(dvcq_wc, status), 8);
const_assert_eq!(offset_of!(dvcq_wc, opcode), 12);
const_assert_eq!(offset_of!(dvcq_wc, vendor_err), 16);
const_assert_eq!(offset_of!(dvcq_wc, byte_len), 20);
const_assert_eq!(offset_of!(dvcq_wc, imm_data), 24);
const_assert_eq!(offset_of!(dvcq_wc, qp_num), 28);
const_assert_eq!(offset_of!(dvcq_wc, src_qp), 32);
const_assert_eq!(offset_of!(dvcq_wc, wc_flags), 36);
const_assert_eq!(offset_of!(dvcq_wc, pkey_index), 40);
const_assert_eq!(offset_of!(dvcq_wc, slid), 42);
const_assert_eq!(offset_of!(dvcq_wc, sl), 44);
const_assert_eq!(offset_of!(dvcq_wc, dlid_path_bits), 45);
// The same layout as the kernel's record, which rdma-core's rxe provider copies into an
// `ibv_wc` (its first 46 bytes are `ibv_wc`'s fields).
const_assert_eq!(offset_of!(dvcq_wc, dlid_path_bits), offset_of!(dvcq::uapi::rxe::wc::UverbsWc, dlid_path_bits));
const_assert_eq!(offset_of!(dvcq_wc, imm_data), offset_of!(dvcq::uapi::rxe::wc::UverbsWc, ex));

/// `wc_flags` bit of a fault item (no libibverbs flag uses it).
pub const DVCQ_WC_FAULT: u32 = 0x8000_0000;

/// `IBV_WC_SUCCESS`.
pub const DVCQ_WC_SUCCESS: u32 = 0;
/// `IBV_WC_LOC_LEN_ERR`.
pub const DVCQ_WC_LOC_LEN_ERR: u32 = 1;
/// `IBV_WC_LOC_QP_OP_ERR`.
pub const DVCQ_WC_LOC_QP_OP_ERR: u32 = 2;
/// `IBV_WC_LOC_EEC_OP_ERR`.
pub const DVCQ_WC_LOC_EEC_OP_ERR: u32 = 3;
/// `IBV_WC_LOC_PROT_ERR`.
pub const DVCQ_WC_LOC_PROT_ERR: u32 = 4;
/// `IBV_WC_WR_FLUSH_ERR`.
pub const DVCQ_WC_WR_FLUSH_ERR: u32 = 5;
/// `IBV_WC_MW_BIND_ERR`.
pub const DVCQ_WC_MW_BIND_ERR: u32 = 6;
/// `IBV_WC_BAD_RESP_ERR`.
pub const DVCQ_WC_BAD_RESP_ERR: u32 = 7;
/// `IBV_WC_LOC_ACCESS_ERR`.
pub const DVCQ_WC_LOC_ACCESS_ERR: u32 = 8;
/// `IBV_WC_REM_INV_REQ_ERR`.
pub const DVCQ_WC_REM_INV_REQ_ERR: u32 = 9;
/// `IBV_WC_REM_ACCESS_ERR`.
pub const DVCQ_WC_REM_ACCESS_ERR: u32 = 10;
/// `IBV_WC_REM_OP_ERR`.
pub const DVCQ_WC_REM_OP_ERR: u32 = 11;
/// `IBV_WC_RETRY_EXC_ERR`.
pub const DVCQ_WC_RETRY_EXC_ERR: u32 = 12;
/// `IBV_WC_RNR_RETRY_EXC_ERR`.
pub const DVCQ_WC_RNR_RETRY_EXC_ERR: u32 = 13;
/// `IBV_WC_LOC_RDD_VIOL_ERR`.
pub const DVCQ_WC_LOC_RDD_VIOL_ERR: u32 = 14;
/// `IBV_WC_REM_INV_RD_REQ_ERR`.
pub const DVCQ_WC_REM_INV_RD_REQ_ERR: u32 = 15;
/// `IBV_WC_REM_ABORT_ERR`.
pub const DVCQ_WC_REM_ABORT_ERR: u32 = 16;
/// `IBV_WC_INV_EECN_ERR`.
pub const DVCQ_WC_INV_EECN_ERR: u32 = 17;
/// `IBV_WC_INV_EEC_STATE_ERR`.
pub const DVCQ_WC_INV_EEC_STATE_ERR: u32 = 18;
/// `IBV_WC_FATAL_ERR`.
pub const DVCQ_WC_FATAL_ERR: u32 = 19;
/// `IBV_WC_RESP_TIMEOUT_ERR`.
pub const DVCQ_WC_RESP_TIMEOUT_ERR: u32 = 20;
/// `IBV_WC_GENERAL_ERR`.
pub const DVCQ_WC_GENERAL_ERR: u32 = 21;
/// `IBV_WC_TM_ERR`.
pub const DVCQ_WC_TM_ERR: u32 = 22;
/// `IBV_WC_TM_RNDV_INCOMPLETE`.
pub const DVCQ_WC_TM_RNDV_INCOMPLETE: u32 = 23;

/// `IBV_WC_SEND`.
pub const DVCQ_WC_SEND: u32 = 0;
/// `IBV_WC_RDMA_WRITE`.
pub const DVCQ_WC_RDMA_WRITE: u32 = 1;
/// `IBV_WC_RDMA_READ`.
pub const DVCQ_WC_RDMA_READ: u32 = 2;
/// `IBV_WC_COMP_SWAP`.
pub const DVCQ_WC_COMP_SWAP: u32 = 3;
/// `IBV_WC_FETCH_ADD`.
pub const DVCQ_WC_FETCH_ADD: u32 = 4;
/// `IBV_WC_BIND_MW`.
pub const DVCQ_WC_BIND_MW: u32 = 5;
/// `IBV_WC_LOCAL_INV`.
pub const DVCQ_WC_LOCAL_INV: u32 = 6;
/// `IBV_WC_TSO`.
pub const DVCQ_WC_TSO: u32 = 7;
/// `IBV_WC_FLUSH` (rdma-core v49 and later name it).
pub const DVCQ_WC_FLUSH: u32 = 8;
/// `IBV_WC_ATOMIC_WRITE` (rdma-core v49 and later name it).
pub const DVCQ_WC_ATOMIC_WRITE: u32 = 9;
/// `IBV_WC_RECV`.
pub const DVCQ_WC_RECV: u32 = 128;
/// `IBV_WC_RECV_RDMA_WITH_IMM`.
pub const DVCQ_WC_RECV_RDMA_WITH_IMM: u32 = 129;
/// `IBV_WC_TM_ADD`.
pub const DVCQ_WC_TM_ADD: u32 = 130;
/// `IBV_WC_TM_DEL`.
pub const DVCQ_WC_TM_DEL: u32 = 131;
/// `IBV_WC_TM_SYNC`.
pub const DVCQ_WC_TM_SYNC: u32 = 132;
/// `IBV_WC_TM_RECV`.
pub const DVCQ_WC_TM_RECV: u32 = 133;
/// `IBV_WC_TM_NO_TAG`.
pub const DVCQ_WC_TM_NO_TAG: u32 = 134;

/// Fault kinds (`vendor_err` of a fault item): the CQE named a QP (or user index) nobody
/// attached.
pub const DVCQ_FAULT_UNKNOWN_QP: u32 = 1;
/// The CQE named an SRQ nobody attached.
pub const DVCQ_FAULT_UNKNOWN_SRQ: u32 = 2;
/// The CQE's opcode is not one the hardware defines.
pub const DVCQ_FAULT_BAD_OPCODE: u32 = 3;
/// The CQE's format was not enabled on this CQ.
pub const DVCQ_FAULT_BAD_FORMAT: u32 = 4;
/// A compressed session or extended CQE ran past what the ring holds.
pub const DVCQ_FAULT_TRUNCATED: u32 = 5;
/// A field held a value its layout does not allow.
pub const DVCQ_FAULT_BAD_FIELD: u32 = 6;
/// mlx5: an on-demand-paging fault on an SRQ receive: post that receive again.
pub const DVCQ_FAULT_SRQ_PAGE_FAULT: u32 = 7;
/// mlx5: a signature error on a memory key nobody registered.
pub const DVCQ_FAULT_SIG_ERR: u32 = 8;

// The numbers above are dvcq's own, which are libibverbs' (the provider's tests check
// them against the enums; the header checks them against verbs.h where it is included).
const_assert_eq!(DVCQ_WC_SUCCESS, WcStatus::Success as u32);
const_assert_eq!(DVCQ_WC_LOC_LEN_ERR, WcStatus::LocLenErr as u32);
const_assert_eq!(DVCQ_WC_LOC_QP_OP_ERR, WcStatus::LocQpOpErr as u32);
const_assert_eq!(DVCQ_WC_LOC_EEC_OP_ERR, WcStatus::LocEecOpErr as u32);
const_assert_eq!(DVCQ_WC_LOC_PROT_ERR, WcStatus::LocProtErr as u32);
const_assert_eq!(DVCQ_WC_WR_FLUSH_ERR, WcStatus::WrFlushErr as u32);
const_assert_eq!(DVCQ_WC_MW_BIND_ERR, WcStatus::MwBindErr as u32);
const_assert_eq!(DVCQ_WC_BAD_RESP_ERR, WcStatus::BadRespErr as u32);
const_assert_eq!(DVCQ_WC_LOC_ACCESS_ERR, WcStatus::LocAccessErr as u32);
const_assert_eq!(DVCQ_WC_REM_INV_REQ_ERR, WcStatus::RemInvReqErr as u32);
const_assert_eq!(DVCQ_WC_REM_ACCESS_ERR, WcStatus::RemAccessErr as u32);
const_assert_eq!(DVCQ_WC_REM_OP_ERR, WcStatus::RemOpErr as u32);
const_assert_eq!(DVCQ_WC_RETRY_EXC_ERR, WcStatus::RetryExcErr as u32);
const_assert_eq!(DVCQ_WC_RNR_RETRY_EXC_ERR, WcStatus::RnrRetryExcErr as u32);
const_assert_eq!(DVCQ_WC_LOC_RDD_VIOL_ERR, WcStatus::LocRddViolErr as u32);
const_assert_eq!(DVCQ_WC_REM_INV_RD_REQ_ERR, WcStatus::RemInvRdReqErr as u32);
const_assert_eq!(DVCQ_WC_REM_ABORT_ERR, WcStatus::RemAbortErr as u32);
const_assert_eq!(DVCQ_WC_INV_EECN_ERR, WcStatus::InvEecnErr as u32);
const_assert_eq!(DVCQ_WC_INV_EEC_STATE_ERR, WcStatus::InvEecStateErr as u32);
const_assert_eq!(DVCQ_WC_FATAL_ERR, WcStatus::FatalErr as u32);
const_assert_eq!(DVCQ_WC_RESP_TIMEOUT_ERR, WcStatus::RespTimeoutErr as u32);
const_assert_eq!(DVCQ_WC_GENERAL_ERR, WcStatus::GeneralErr as u32);
const_assert_eq!(DVCQ_WC_TM_ERR, WcStatus::TmErr as u32);
const_assert_eq!(DVCQ_WC_TM_RNDV_INCOMPLETE, WcStatus::TmRndvIncomplete as u32);
const_assert_eq!(DVCQ_WC_SEND, WcOpcode::Send as u32);
const_assert_eq!(DVCQ_WC_RDMA_WRITE, WcOpcode::RdmaWrite as u32);
const_assert_eq!(DVCQ_WC_RDMA_READ, WcOpcode::RdmaRead as u32);
const_assert_eq!(DVCQ_WC_COMP_SWAP, WcOpcode::CompSwap as u32);
const_assert_eq!(DVCQ_WC_FETCH_ADD, WcOpcode::FetchAdd as u32);
const_assert_eq!(DVCQ_WC_BIND_MW, WcOpcode::BindMw as u32);
const_assert_eq!(DVCQ_WC_LOCAL_INV, WcOpcode::LocalInv as u32);
const_assert_eq!(DVCQ_WC_TSO, WcOpcode::Tso as u32);
const_assert_eq!(DVCQ_WC_FLUSH, WcOpcode::Flush as u32);
const_assert_eq!(DVCQ_WC_ATOMIC_WRITE, WcOpcode::AtomicWrite as u32);
const_assert_eq!(DVCQ_WC_RECV, WcOpcode::Recv as u32);
const_assert_eq!(DVCQ_WC_RECV_RDMA_WITH_IMM, WcOpcode::RecvRdmaWithImm as u32);
const_assert_eq!(DVCQ_WC_TM_ADD, WcOpcode::TmAdd as u32);
const_assert_eq!(DVCQ_WC_TM_DEL, WcOpcode::TmDel as u32);
const_assert_eq!(DVCQ_WC_TM_SYNC, WcOpcode::TmSync as u32);
const_assert_eq!(DVCQ_WC_TM_RECV, WcOpcode::TmRecv as u32);
const_assert_eq!(DVCQ_WC_TM_NO_TAG, WcOpcode::TmNoTag as u32);
const_assert_eq!(DVCQ_FAULT_UNKNOWN_QP, FaultKind::UnknownQp as u32);
const_assert_eq!(DVCQ_FAULT_UNKNOWN_SRQ, FaultKind::UnknownSrq as u32);
const_assert_eq!(DVCQ_FAULT_BAD_OPCODE, FaultKind::BadOpcode as u32);
const_assert_eq!(DVCQ_FAULT_BAD_FORMAT, FaultKind::BadFormat as u32);
const_assert_eq!(DVCQ_FAULT_TRUNCATED, FaultKind::Truncated as u32);
const_assert_eq!(DVCQ_FAULT_BAD_FIELD, FaultKind::BadField as u32);
const_assert_eq!(DVCQ_FAULT_SRQ_PAGE_FAULT, FaultKind::SrqPageFault as u32);
const_assert_eq!(DVCQ_FAULT_SIG_ERR, FaultKind::SigErr as u32);

impl dvcq_wc {
    /// The `ibv_wc` of a completion; a fault item keeps its status (`GENERAL_ERR`), position
    /// and value, and is marked with `DVCQ_WC_FAULT` and its kind in `vendor_err`. Any
    /// fault kind the library adds later comes out the same way, with its own number.
    #[inline(always)]
    pub(crate) fn of(c: &Completion) -> dvcq_wc {
        let mut wc = dvcq_wc {
            wr_id: c.wr_id,
            status: c.status as u32,
            opcode: c.opcode as u32,
            vendor_err: c.vendor_err,
            byte_len: c.byte_len,
            imm_data: c.imm_data,
            qp_num: c.qp_num,
            src_qp: c.src_qp,
            wc_flags: c.wc_flags.bits(),
            pkey_index: c.pkey_index,
            slid: c.slid,
            sl: c.sl,
            dlid_path_bits: c.dlid_path_bits,
        };
        if c.fault_kind != FaultKind::None {
            wc = fault(c);
        }
        wc
    }
}

#[cold]
fn fault(c: &Completion) -> dvcq_wc {
    dvcq_wc {
        wr_id: c.wr_id,
        status: DVCQ_WC_GENERAL_ERR,
        vendor_err: c.fault_kind as u32,
        qp_num: c.qp_num,
        wc_flags: DVCQ_WC_FAULT,
        ..dvcq_wc::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq::{CqeFault, WcFlags};

    #[test]
    fn a_completion_keeps_every_ibv_wc_field() {
        let c = Completion {
            wr_id: 0x1122_3344_5566_7788,
            byte_len: 4096,
            imm_data: 0xdead_beef,
            qp_num: 0x12,
            wc_flags: WcFlags::from_bits_retain(2),
            status: WcStatus::RemAccessErr,
            opcode: WcOpcode::RecvRdmaWithImm,
            sl: 3,
            pkey_index: 5,
            src_qp: 0x34,
            vendor_err: 0x88,
            slid: 7,
            dlid_path_bits: 9,
            ..Completion::default()
        };
        let wc = dvcq_wc::of(&c);
        assert_eq!(
            wc,
            dvcq_wc {
                wr_id: 0x1122_3344_5566_7788,
                status: 10,
                opcode: 129,
                vendor_err: 0x88,
                byte_len: 4096,
                imm_data: 0xdead_beef,
                qp_num: 0x12,
                src_qp: 0x34,
                wc_flags: 2,
                pkey_index: 5,
                slid: 7,
                sl: 3,
                dlid_path_bits: 9,
            }
        );
    }

    #[test]
    fn a_fault_item_is_an_error_wc_marked_with_its_kind() {
        let c = Completion::from_fault(CqeFault { kind: FaultKind::UnknownQp, position: 77, value: 0xabc });
        let wc = dvcq_wc::of(&c);
        assert_eq!(
            (wc.status, wc.wc_flags, wc.vendor_err),
            (DVCQ_WC_GENERAL_ERR, DVCQ_WC_FAULT, DVCQ_FAULT_UNKNOWN_QP)
        );
        assert_eq!((wc.wr_id, wc.qp_num), (77, 0xabc));
        // An ordinary GENERAL_ERR completion is not a fault item.
        let g = Completion { status: WcStatus::GeneralErr, vendor_err: 1, ..Completion::default() };
        assert_eq!(dvcq_wc::of(&g).wc_flags & DVCQ_WC_FAULT, 0);
    }
}
