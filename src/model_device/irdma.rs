//! `model-e810`: how rdma-core's irdma provider sizes a QP's queues and WQEs (v44
//! `providers/irdma/uverbs.c` `irdma_ucreate_qp`, `uk.c` `irdma_get_wqe_shift`,
//! `irdma_get_sqdepth`, `irdma_fragcnt_to_quanta_sq`, `irdma_inline_data_size_to_quanta`),
//! and the CQEs an E810 (GEN2, RoCEv2) writes for executed work, as rdma-core's
//! `irdma_uk_cq_poll_cmpl` and `irdma_process_cqe` read them.

use super::DeviceError;
use crate::verbs::{QpCaps, SendOp};
use dvcq_e810_dv::model::ModelCqe;
use dvcq_provider::WcStatus;
use dvcq_uapi::irdma::codes::{flush, rq_op, sq_op};

/// `IRDMA_SQ_RSVD`: quanta the provider keeps out of every SQ.
const SQ_RSVD: u32 = 258;
/// `IRDMA_RQ_RSVD`.
const RQ_RSVD: u32 = 1;
/// `IRDMA_QP_SW_MIN_WQSIZE`: the least WRs a queue holds.
const MIN_WQSIZE: u32 = 8;
/// `max_hw_wq_quanta` and `max_hw_rq_quanta` of an E810.
const MAX_WQ_QUANTA: u32 = 32768;
/// `IRDMA_MAX_WQ_FRAGMENT_COUNT`.
pub(crate) const MAX_FRAGS: u32 = 13;
/// `IRDMA_MAX_INLINE_DATA_SIZE`.
pub(crate) const MAX_INLINE: u32 = 101;

/// IB opcodes of the last packet of a multi-packet SEND (`IBV_OPCODE_SEND_LAST` and
/// `_WITH_IMMEDIATE`, `infiniband/opcode.h`); GEN2 RoCE reports the received opcode.
const ROCE_SEND_LAST: u8 = 0x02;
const ROCE_SEND_LAST_WITH_IMM: u8 = 0x03;
/// IB opcodes of a SEND with invalidate (`IBV_OPCODE_SEND_LAST_WITH_INVALIDATE`,
/// `IBV_OPCODE_SEND_ONLY_WITH_INVALIDATE`): what GEN2 RoCE reports for one, inferred as
/// for the other receives (rdma-core's `set_ib_wc_op_rq` maps every opcode but
/// WRITE-with-immediate to `IBV_WC_RECV`, so the poll does not depend on it).
const ROCE_SEND_LAST_WITH_INV: u8 = 0x16;
const ROCE_SEND_ONLY_WITH_INV: u8 = 0x17;

/// A QP's queues as rdma-core sized them, and where its posts are recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpLayout {
    /// The completion context every CQE of the QP carries (model choice: addresses a
    /// fixed stride apart, as the provider's QP structures are).
    pub(crate) ctx: u64,
    /// SQ ring size in quanta.
    pub(crate) sq_quanta: u32,
    /// RQ ring size in WQEs, and log2 of a WQE's quanta.
    pub(crate) rq_wqes: u32,
    pub(crate) rq_shift: u8,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline: u32,
    /// The QP's index in its send CQ's and its receive CQ's registries.
    pub(crate) send_id: dvcq_e810_dv::QpId,
    pub(crate) recv_id: dvcq_e810_dv::QpId,
}

/// `irdma_get_wqe_shift` on GEN2: log2 of the largest WQE in 32-byte quanta.
const fn wqe_shift(sge: u32, inline: u32) -> u8 {
    if sge > 1 || inline > 8 {
        if sge < 4 && inline <= 39 {
            1
        } else if sge < 8 && inline <= 101 {
            2
        } else {
            3
        }
    } else {
        0
    }
}

/// `irdma_get_sqdepth` / `irdma_get_rqdepth`: quanta of a queue of `wrs` WRs.
fn depth(wrs: u32, shift: u8, rsvd: u32, what: &'static str) -> Result<u32, DeviceError> {
    let need = (u64::from(wrs) << shift) + u64::from(rsvd);
    let d = need.next_power_of_two().max(u64::from(MIN_WQSIZE << shift));
    if d > u64::from(MAX_WQ_QUANTA) {
        let max = ((MAX_WQ_QUANTA - rsvd) >> shift).into();
        return Err(DeviceError::TooLarge { what, value: wrs.into(), max, device: "model-e810" });
    }
    Ok(d as u32)
}

/// Sizes a QP asking for `caps` (the sizes `irdma_ucreate_qp` gives, and its refusals).
pub(crate) fn layout(caps: &QpCaps) -> Result<(QpLayout, QpCaps), DeviceError> {
    let too = |what, value: u32, max: u32| DeviceError::TooLarge {
        what,
        value: value.into(),
        max: max.into(),
        device: "model-e810",
    };
    if caps.max_send_sge > MAX_FRAGS {
        return Err(too("max_send_sge", caps.max_send_sge, MAX_FRAGS));
    }
    if caps.max_recv_sge > MAX_FRAGS {
        return Err(too("max_recv_sge", caps.max_recv_sge, MAX_FRAGS));
    }
    if caps.max_inline_data > MAX_INLINE {
        return Err(too("max_inline_data", caps.max_inline_data, MAX_INLINE));
    }
    // GEN2 sizes the SQ for one entry more than asked (room for immediate data).
    let sq_shift = wqe_shift(caps.max_send_sge + 1, caps.max_inline_data);
    let sq_depth = depth(caps.max_send_wr, sq_shift, SQ_RSVD, "max_send_wr")?;
    let rq_shift = wqe_shift(caps.max_recv_sge, 0);
    let rq_depth = depth(caps.max_recv_wr, rq_shift, RQ_RSVD, "max_recv_wr")?;
    let l = QpLayout {
        ctx: 0,
        sq_quanta: sq_depth,
        rq_wqes: rq_depth >> rq_shift,
        rq_shift,
        max_send_sge: caps.max_send_sge,
        max_recv_sge: caps.max_recv_sge,
        max_inline: caps.max_inline_data,
        send_id: dvcq_e810_dv::QpId(0),
        recv_id: dvcq_e810_dv::QpId(0),
    };
    let granted = QpCaps {
        max_send_wr: (sq_depth - SQ_RSVD) >> sq_shift,
        max_recv_wr: (rq_depth - RQ_RSVD) >> rq_shift,
        ..*caps
    };
    Ok((l, granted))
}

/// Quanta a send WQE takes: by fragment count (immediate data takes one fragment), or by
/// inline length; a bind takes one (`irdma_uk_mw_bind`: `IRDMA_QP_WQE_MIN_QUANTA`).
pub(crate) fn quanta(op: SendOp, num_sge: usize, inline_len: Option<u64>) -> u16 {
    if let SendOp::BindMw(_) = op {
        return 1;
    }
    if let Some(n) = inline_len {
        return match n {
            0..=8 => 1,
            9..=39 => 2,
            40..=70 => 3,
            71..=101 => 4,
            102..=132 => 5,
            133..=163 => 6,
            164..=194 => 7,
            _ => 8,
        };
    }
    // 0 or 1 fragments take 1 quantum, 2 or 3 take 2, ... 14 or 15 take 8.
    let frags = num_sge + usize::from(op.imm().is_some());
    (frags / 2 + 1).min(8) as u16
}

/// The SQ WQE opcode (`IRDMAQP_OP_*`): immediate data is a WQE flag, not an opcode; a
/// solicited SEND or WRITE has its own.
pub(crate) const fn sq_opcode(op: SendOp, solicited: bool) -> u8 {
    match (op, solicited) {
        (SendOp::Send | SendOp::SendWithImm(_), false) => sq_op::SEND,
        (SendOp::Send | SendOp::SendWithImm(_), true) => sq_op::SEND_SOL,
        (SendOp::Write(_) | SendOp::WriteWithImm(..), false) => sq_op::RDMA_WRITE,
        (SendOp::Write(_) | SendOp::WriteWithImm(..), true) => sq_op::RDMA_WRITE_SOL,
        (SendOp::Read(_), _) => sq_op::RDMA_READ,
        (SendOp::SendWithInv(_), false) => sq_op::SEND_INV,
        (SendOp::SendWithInv(_), true) => sq_op::SEND_SOL_INV,
        (SendOp::BindMw(_), _) => sq_op::BIND_MW,
        // GEN3's (rdma-core v64+); an E810 never posts one (`Fabric::check_send`).
        (SendOp::FetchAdd { .. }, _) => sq_op::ATOMIC_FETCH_AND_ADD,
        (SendOp::CompareSwap { .. }, _) => sq_op::ATOMIC_COMPARE_AND_SWAP,
    }
}

/// The flush (minor) code a queue flushes with for a status.
pub(crate) const fn flush_code(s: WcStatus) -> u16 {
    match s {
        WcStatus::LocLenErr => flush::LOC_LEN_ERR,
        WcStatus::LocProtErr => flush::PROT_ERR,
        WcStatus::LocQpOpErr => flush::LOC_QP_OP_ERR,
        WcStatus::RemAccessErr => flush::REM_ACCESS_ERR,
        WcStatus::RemOpErr => flush::REM_OP_ERR,
        WcStatus::RemInvReqErr => flush::REM_INV_REQ_ERR,
        WcStatus::RetryExcErr => flush::RETRY_EXC_ERR,
        WcStatus::RnrRetryExcErr => flush::RNR_RETRY_EXC_ERR,
        WcStatus::MwBindErr => flush::MW_BIND_ERR,
        _ => flush::GENERAL_ERR,
    }
}

/// The received opcode an RQ CQE carries (GEN2 RoCE: the IB opcode of the message's last
/// packet; a message beyond one MTU ends in a LAST packet). UD sends are single-packet;
/// the 6-bit field holds the opcode without the transport bits. That is inferred: UD's
/// opcodes (0x64, 0x65) do not fit in 6 bits, and rdma-core's `set_ib_wc_op_rq` compares the
/// field with the RC values (`IBV_OPCODE_RDMA_WRITE_ONLY_WITH_IMMEDIATE` and the like).
pub(crate) fn rq_opcode(op: SendOp, len: u64, mtu: u32) -> u8 {
    let multi = len > u64::from(mtu);
    match (op, multi) {
        (SendOp::WriteWithImm(..), false) => rq_op::ROCE_WRITE_ONLY_WITH_IMM,
        (SendOp::WriteWithImm(..), true) => rq_op::ROCE_WRITE_LAST_WITH_IMM,
        (SendOp::SendWithImm(_), false) => rq_op::ROCE_SEND_ONLY_WITH_IMM,
        (SendOp::SendWithImm(_), true) => ROCE_SEND_LAST_WITH_IMM,
        (SendOp::SendWithInv(_), false) => ROCE_SEND_ONLY_WITH_INV,
        (SendOp::SendWithInv(_), true) => ROCE_SEND_LAST_WITH_INV,
        (_, false) => rq_op::ROCE_SEND_ONLY,
        (_, true) => ROCE_SEND_LAST,
    }
}

/// A successful UD receive's extra facts: the source QP, IPv4 (RoCEv2 over IPv4) and the
/// source MAC (model choice: 02:00 then the sender's IPv4 address).
#[derive(Debug, Clone, Copy)]
pub(crate) struct UdSource {
    pub(crate) src_qp: u32,
    pub(crate) ipv4: bool,
    pub(crate) smac: [u8; 6],
}

/// A receive's CQE.
#[allow(clippy::too_many_arguments)]
pub(crate) fn recv_ok(
    l: &QpLayout,
    qpn: u32,
    wqe: u16,
    op: SendOp,
    len: u64,
    byte_len: u32,
    mtu: u32,
    solicited: bool,
    ud: Option<UdSource>,
) -> ModelCqe {
    // A UD message is one packet (at most the MTU, its GRH aside).
    let len = if ud.is_some() { 0 } else { len };
    let mut c = ModelCqe::recv(l.ctx, qpn, wqe, l.rq_shift, rq_opcode(op, len, mtu), byte_len);
    if let Some(imm) = op.imm() {
        c = c.with_imm(imm);
    }
    // RC receive of a SEND_WITH_INV: bit 53 and the invalidated STag in qword2
    // (`IRDMACQ_STAG`, `IRDMACQ_INVSTAG`; `irdma_uk_cq_poll_cmpl` reads them).
    if let (Some(stag), None) = (op.invalidate_rkey(), ud) {
        c = c.with_inv(stag);
    }
    if solicited {
        c = c.solicited();
    }
    if let Some(u) = ud {
        c = c.with_ud(u.src_qp, u.ipv4, u.smac, None);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rdma-core v44's numbers: 64 sends of one entry need 2-quanta WQEs (GEN2 counts one
    /// entry more), 64 << 1 + 258 quanta round to 512, which report 127 WRs; 64 receives of
    /// one entry: a ring of 128 WQEs reporting 127.
    #[test]
    fn queues_are_sized_as_rdma_core_sizes_them() {
        let (l, g) = layout(&QpCaps::default()).unwrap();
        assert_eq!((l.sq_quanta, l.rq_wqes, l.rq_shift), (512, 128, 0));
        assert_eq!((g.max_send_wr, g.max_recv_wr), (127, 127));
        let (l, g) = layout(&QpCaps { max_send_wr: 1, max_recv_wr: 1, ..QpCaps::default() }).unwrap();
        assert_eq!((l.sq_quanta, l.rq_wqes, g.max_send_wr, g.max_recv_wr), (512, 8, 127, 7));
        let (l, _) = layout(&QpCaps { max_recv_sge: 3, ..QpCaps::default() }).unwrap();
        assert_eq!((l.rq_wqes, l.rq_shift), (128, 1));
        assert!(layout(&QpCaps { max_send_sge: 14, ..QpCaps::default() }).is_err());
        assert!(layout(&QpCaps { max_inline_data: 102, ..QpCaps::default() }).is_err());
        assert!(layout(&QpCaps { max_send_wr: 8192, ..QpCaps::default() }).is_ok());
        assert!(layout(&QpCaps { max_send_wr: 16384, ..QpCaps::default() }).is_err());
    }

    #[test]
    fn quanta_follow_the_fragment_and_inline_tables() {
        let q = |n, imm| quanta(if imm { SendOp::SendWithImm(1) } else { SendOp::Send }, n, None);
        assert_eq!([q(0, false), q(1, false), q(2, false), q(3, false), q(4, false)], [1, 1, 2, 2, 3]);
        assert_eq!([q(1, true), q(13, false), q(14, true)], [2, 7, 8]);
        assert_eq!([quanta(SendOp::Send, 0, Some(8)), quanta(SendOp::Send, 0, Some(39))], [1, 2]);
        assert_eq!(quanta(SendOp::Send, 0, Some(101)), 4);
    }
}
