//! Decoding one irdma (Intel E810 / X722) CQE given as 64-bit qwords
//! (shared/spec/irdma.md §1.4, §1.5, §4.7, §5).
//!
//! Fields come from the `dvcq_uapi::irdma::cqe` accessors; the status mapping follows
//! rdma-core's irdma provider (spec §5).

use super::mlx5::{Meaning, StatusInfo};
use crate::provider::WcStatus;
use crate::uapi::irdma::cqe::{ext, q0, q2, q3};
use serde::Serialize;

/// Every field of one decoded irdma CQE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IrdmaCqe {
    /// The qwords as given (host-order values of the little-endian 64-bit words).
    pub qwords: Vec<String>,
    /// qword3 bit 63: valid (polarity) bit.
    pub valid: u8,
    /// qword3 bit 55: error CQE.
    pub error: bool,
    /// qword3 bits 31:16: major error code (1 = flush).
    pub major_err: u16,
    /// qword3 bits 15:0: minor error code (a flush code when major is 1).
    pub minor_err: u16,
    /// Name of the minor code when it is a flush code (major 1) or an AE code (major 0xfffe).
    pub minor_err_name: Option<&'static str>,
    /// `ibv_wc.vendor_err` for an error CQE: `(major << 16) | minor`.
    pub vendor_err: Option<u32>,
    /// qword3 bits 61:56: opcode (SQ: the WQE opcode; RQ: the received protocol opcode).
    pub opcode: u8,
    /// Name of the opcode for SQ completions, or `None`.
    pub opcode_name: Option<&'static str>,
    /// qword3 bit 62: `"SQ"` or `"RQ"`.
    pub queue: &'static str,
    /// qword3 bits 46:32: WQE index in 32-byte quanta.
    pub wqe_idx: u16,
    /// qword3 bit 50: an extension part exists.
    pub extended: bool,
    /// qword3 bit 51: push-mode WQE dropped.
    pub push_dropped: bool,
    /// qword3 bit 52: SRQ completion (GEN3).
    pub srq: bool,
    /// qword3 bit 53: remote invalidate (RC receive) or IPv4 (UD receive).
    pub stag_or_ipv4: bool,
    /// qword3 bit 54: solicited event.
    pub solicited: bool,
    /// qword2 bits 55:32: local QP number.
    pub qp_id: u32,
    /// qword2 bits 31:0: UD source QPN or invalidated STag.
    pub src_qpn_or_stag: u32,
    /// qword0 bits 31:0: payload length (receive completions).
    pub payload_len: u32,
    /// qword0 bits 63:32: TCP sequence / RoCE PSN / RTT / timestamp.
    pub tcp_psn_rtt: u32,
    /// qword1: the QP completion context (provider pointer).
    pub comp_ctx: String,
    /// Extended CQEs: qword7 bit 62, immediate present.
    pub imm_valid: Option<bool>,
    /// Extended CQEs with immediate: qword4 bits 31:0.
    pub imm_data: Option<u32>,
    /// The work-completion status rdma-core's irdma provider reports.
    pub status: StatusInfo,
    /// What the status means for the user, for errors.
    pub meaning: Option<Meaning>,
    /// Remarks.
    pub notes: Vec<String>,
}

/// Names of the SQ opcodes (rdma-core `providers/irdma/user.h` / `defs.h`).
fn sq_op_name(op: u8) -> Option<&'static str> {
    Some(match op {
        0x00 => "IRDMA_OP_TYPE_RDMA_WRITE",
        0x01 => "IRDMA_OP_TYPE_RDMA_READ",
        0x03 => "IRDMA_OP_TYPE_SEND",
        0x04 => "IRDMA_OP_TYPE_SEND_INV",
        0x05 => "IRDMA_OP_TYPE_SEND_SOL",
        0x06 => "IRDMA_OP_TYPE_SEND_SOL_INV",
        0x08 => "IRDMA_OP_TYPE_BIND_MW",
        0x09 => "IRDMA_OP_TYPE_FAST_REG_NSMR",
        0x0a => "IRDMA_OP_TYPE_INV_STAG",
        0x0b => "IRDMA_OP_TYPE_RDMA_READ_INV_STAG",
        0x0c => "IRDMA_OP_TYPE_NOP",
        0x0d => "IRDMA_OP_TYPE_RDMA_WRITE_SOL",
        0x0f => "IRDMA_OP_TYPE_ATOMIC_FETCH_AND_ADD",
        0x11 => "IRDMA_OP_TYPE_ATOMIC_COMPARE_AND_SWAP",
        _ => return None,
    })
}

/// SQ opcodes `set_ib_wc_op_sq` knows (v64+); any other SQ opcode makes the status
/// GENERAL_ERR.
fn sq_op_known(op: u8) -> bool {
    matches!(op, 0x00 | 0x0d | 0x01 | 0x03..=0x06 | 0x08 | 0x11 | 0x0f | 0x0a)
}

fn flush_name(minor: u16) -> Option<&'static str> {
    Some(match minor {
        0 => "FLUSH_INVALID",
        1 => "FLUSH_GENERAL_ERR",
        2 => "FLUSH_PROT_ERR",
        3 => "FLUSH_REM_ACCESS_ERR",
        4 => "FLUSH_LOC_QP_OP_ERR",
        5 => "FLUSH_REM_OP_ERR",
        6 => "FLUSH_LOC_LEN_ERR",
        7 => "FLUSH_FATAL_ERR",
        8 => "FLUSH_RETRY_EXC_ERR",
        9 => "FLUSH_MW_BIND_ERR",
        10 => "FLUSH_REM_INV_REQ_ERR",
        11 => "FLUSH_RNR_RETRY_EXC_ERR",
        _ => return None,
    })
}

/// `irdma_flush_err_to_ib_wc_status` (spec §5.3, rdma-core v64+).
fn flush_status(minor: u16) -> WcStatus {
    match minor {
        1 => WcStatus::WrFlushErr,
        2 => WcStatus::LocProtErr,
        3 => WcStatus::RemAccessErr,
        4 => WcStatus::LocQpOpErr,
        5 => WcStatus::RemOpErr,
        6 => WcStatus::LocLenErr,
        8 => WcStatus::RetryExcErr,
        9 => WcStatus::MwBindErr,
        10 => WcStatus::RemInvReqErr,
        11 => WcStatus::RnrRetryExcErr,
        _ => WcStatus::FatalErr,
    }
}

/// `irdma_ae_to_qp_err_code` (spec §5.4): AE code → flush code, and the AE's name.
fn ae_to_flush(ae: u16) -> (u16, Option<&'static str>) {
    match ae {
        0x0102 => (2, Some("AE_AMP_UNALLOCATED_STAG")),
        0x0103 => (2, Some("AE_AMP_INVALID_STAG")),
        0x0104 => (2, Some("AE_AMP_BAD_QP")),
        0x0105 => (2, Some("AE_AMP_BAD_PD")),
        0x0106 => (2, Some("AE_AMP_BAD_STAG_KEY")),
        0x0107 => (2, Some("AE_AMP_BAD_STAG_INDEX")),
        0x0108 => (2, Some("AE_AMP_BOUNDS_VIOLATION")),
        0x0109 => (2, Some("AE_AMP_RIGHTS_VIOLATION")),
        0x010a => (2, Some("AE_AMP_TO_WRAP")),
        0x011c => (2, Some("AE_PRIV_OPERATION_DENIED")),
        0x0133 => (4, Some("AE_UDA_XMIT_BAD_PD")),
        0x020a => (4, Some("AE_WQE_UNEXPECTED_OPCODE")),
        0x0132 => (6, Some("AE_UDA_XMIT_DGRAM_TOO_LONG")),
        0x0134 => (6, Some("AE_UDA_XMIT_DGRAM_TOO_SHORT")),
        0x0135 => (6, Some("AE_UDA_L4LEN_INVALID")),
        0x0303 => (6, Some("AE_DDP_UBE_INVALID_MSN / msg too long")),
        0x0305 => (6, Some("AE_DDP_UBE_INVALID_MO")),
        0x0112 => (3, Some("AE_AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS")),
        0x020d => (3, Some("AE_IB_REMOTE_ACCESS_ERROR")),
        0x0114 => (9, Some("AE_AMP_MWBIND_INVALID_RIGHTS")),
        0x0118 => (9, Some("AE_AMP_MWBIND_BIND_DISABLED")),
        0x0119 => (9, Some("AE_AMP_MWBIND_INVALID_BOUNDS")),
        0x011b => (9, Some("AE_AMP_MWBIND_TO_INVALID_PARENT")),
        0x050a => (8, Some("AE_LLP_TOO_MANY_RETRIES")),
        0x0208 => (10, Some("AE_IB_INVALID_REQUEST")),
        0x0507 => (5, Some("AE_LLP_SEGMENT_TOO_SMALL")),
        0x0505 => (5, Some("AE_LLP_RECEIVED_MPA_CRC_ERROR")),
        0x0316 => (5, Some("AE_ROCE_RSP_LENGTH_ERROR")),
        0x020e => (5, Some("AE_IB_REMOTE_OP_ERROR")),
        0x050f => (11, Some("AE_LLP_TOO_MANY_RNRS")),
        0x0700 | 0x0703 | 0x0704 | 0x0705 => (7, Some("AE_LCE_*_CATASTROPHIC")),
        _ => (1, None),
    }
}

/// Decodes an irdma CQE from 4 qwords (main part) or 8 (main part and extension).
///
/// # Panics
/// Never; fewer than 4 qwords are padded with zeros and noted.
pub fn decode_irdma(qwords: &[u64]) -> IrdmaCqe {
    let mut q = [0u64; 8];
    for (d, s) in q.iter_mut().zip(qwords) {
        *d = *s;
    }
    let mut notes = Vec::new();
    if qwords.len() != 4 && qwords.len() != 8 {
        notes.push(format!("{} qwords given; 4 or 8 expected", qwords.len()));
    }
    let w3 = q[3];
    let error = w3 & q3::ERROR != 0;
    let major = q3::major_err(w3);
    let minor = q3::minor_err(w3);
    let opcode = q3::op(w3);
    let is_sq = w3 & q3::SQ != 0;
    let extended = w3 & q3::EXTCQE != 0;
    let mut minor_name = None;
    let status = if !error {
        if is_sq && !sq_op_known(opcode) {
            notes.push(
                "success CQE with an SQ opcode the provider does not map: rdma-core reports \
                 IBV_WC_GENERAL_ERR"
                    .into(),
            );
            WcStatus::GeneralErr
        } else {
            if is_sq && matches!(opcode, 0x0f | 0x11) {
                notes.push("rdma-core before v64 does not map atomic opcodes: it reports IBV_WC_GENERAL_ERR".into());
            }
            WcStatus::Success
        }
    } else if major == 1 {
        minor_name = flush_name(minor);
        if minor == 11 {
            notes.push("rdma-core before v64 maps flush code 11 to IBV_WC_FATAL_ERR".into());
        }
        flush_status(minor)
    } else if major == 0xfffe {
        let (f, n) = ae_to_flush(minor);
        minor_name = n;
        notes.push(format!(
            "SRQ flush: the minor code is an async-event code, translated to flush code {f} ({}); \
             rdma-core before v64 reports IBV_WC_GENERAL_ERR",
            flush_name(f).unwrap_or("?")
        ));
        flush_status(f)
    } else {
        if is_sq && (major >> 12) == 0xe {
            notes.push(
                "major 0xEnnn on an SQ CQE: on a RoCE UD QP rdma-core v64+ clears it and \
                 reports success (non-fatal)"
                    .into(),
            );
        }
        WcStatus::GeneralErr
    };
    if !error && (major != 0 || minor != 0) {
        notes.push("error bit clear but major/minor not zero".into());
    }
    let meaning = if error { status_meaning(status) } else { None };
    let ext_given = qwords.len() >= 8;
    if extended && !ext_given {
        notes.push("EXTCQE set: the extension (next slot, or bytes 32-63 on GEN3) was not given".into());
    }
    let imm_valid = ext_given.then(|| extended && q[7] & ext::IMMVALID != 0);
    IrdmaCqe {
        qwords: qwords.iter().map(|w| format!("{w:016x}")).collect(),
        valid: q3::valid(w3) as u8,
        error,
        major_err: major,
        minor_err: minor,
        minor_err_name: if error { minor_name } else { None },
        vendor_err: error.then_some(((major as u32) << 16) | minor as u32),
        opcode,
        opcode_name: if is_sq { sq_op_name(opcode) } else { None },
        queue: if is_sq { "SQ" } else { "RQ" },
        wqe_idx: q3::wqe_idx(w3),
        extended,
        push_dropped: w3 & q3::PSHDROP != 0,
        srq: w3 & q3::SRQ != 0,
        stag_or_ipv4: w3 & q3::STAG_IPV4 != 0,
        solicited: w3 & q3::SOEVENT != 0,
        qp_id: q2::qp_id(q[2]),
        src_qpn_or_stag: q2::src_qpn_or_inv_stag(q[2]),
        payload_len: q0::payload_len(q[0]),
        tcp_psn_rtt: q0::tcp_seq_psn_rtt_ts(q[0]),
        comp_ctx: format!("{:#018x}", q[1]),
        imm_valid,
        imm_data: (imm_valid == Some(true)).then_some(ext::imm_low32(q[4])),
        status: status.into(),
        meaning,
        notes,
    }
}

/// The meaning of an error status, shared with the mlx5 table through the equivalent syndrome.
fn status_meaning(s: WcStatus) -> Option<Meaning> {
    use crate::uapi::mlx5::opcode::syndrome as sy;
    let synd = match s {
        WcStatus::LocLenErr => sy::LOCAL_LENGTH_ERR,
        WcStatus::LocQpOpErr => sy::LOCAL_QP_OP_ERR,
        WcStatus::LocProtErr => sy::LOCAL_PROT_ERR,
        WcStatus::WrFlushErr => sy::WR_FLUSH_ERR,
        WcStatus::MwBindErr => sy::MW_BIND_ERR,
        WcStatus::RemInvReqErr => sy::REMOTE_INVAL_REQ_ERR,
        WcStatus::RemAccessErr => sy::REMOTE_ACCESS_ERR,
        WcStatus::RemOpErr => sy::REMOTE_OP_ERR,
        WcStatus::RetryExcErr => sy::TRANSPORT_RETRY_EXC_ERR,
        WcStatus::RnrRetryExcErr => sy::RNR_RETRY_EXC_ERR,
        WcStatus::FatalErr => {
            return Some(Meaning {
                side: "local",
                summary: "the QP hit a fatal (catastrophic) error and was flushed",
                causes: vec!["QP catastrophic async event (check dmesg for irdma AE messages)", "unknown flush code"],
            })
        }
        WcStatus::GeneralErr => {
            return Some(Meaning {
                side: "unknown",
                summary: "error the provider cannot classify (IBV_WC_GENERAL_ERR)",
                causes: vec!["major/minor codes not documented publicly beyond the flush codes"],
            })
        }
        _ => return None,
    };
    Some(super::mlx5::meaning(synd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_examples() {
        // irdma.md §1.6: GEN2 SQ success SEND, wqe_idx 5, valid 1.
        let d = decode_irdma(&[0, 0, 0, 0xC300_0005_0000_0000]);
        assert_eq!(d.valid, 1);
        assert_eq!(d.queue, "SQ");
        assert_eq!(d.opcode_name, Some("IRDMA_OP_TYPE_SEND"));
        assert_eq!(d.wqe_idx, 5);
        assert_eq!(d.status.value, 0);
        // SQ flush, major 1, minor 1.
        let d = decode_irdma(&[0, 0, 0, 0xC080_0000_0001_0001]);
        assert!(d.error);
        assert_eq!(d.status.name, "IBV_WC_WR_FLUSH_ERR");
        assert_eq!(d.vendor_err, Some(0x0001_0001));
        assert_eq!(d.minor_err_name, Some("FLUSH_GENERAL_ERR"));
        // Extended RQ WRITE_WITH_IMM.
        let d = decode_irdma(&[0, 0, 0, 0x8B04_0000_0000_0000, 0x1234, 0, 0, 0xC000_0000_0000_0000]);
        assert_eq!(d.queue, "RQ");
        assert!(d.extended);
        assert_eq!(d.imm_data, Some(0x1234));
    }

    #[test]
    fn srq_flush_translates_ae() {
        let q3 = (1u64 << 63) | (1 << 55) | (0xfffe << 16) | 0x0109;
        let d = decode_irdma(&[0, 0, 0, q3]);
        assert_eq!(d.status.name, "IBV_WC_LOC_PROT_ERR");
        assert!(d.notes.iter().any(|n| n.contains("before v64")), "{:?}", d.notes);
    }

    #[test]
    fn atomics_are_mapped_since_v64_only() {
        // SQ success, ATOMIC_FETCH_AND_ADD (0x0f), then a SEND (0x03) for contrast.
        let d = decode_irdma(&[0, 0, 0, 0xCF00_0000_0000_0000]);
        assert_eq!(d.opcode_name, Some("IRDMA_OP_TYPE_ATOMIC_FETCH_AND_ADD"));
        assert_eq!(d.status.value, 0);
        assert!(d.notes.iter().any(|n| n.contains("before v64")), "{:?}", d.notes);
        let d = decode_irdma(&[0, 0, 0, 0xC300_0000_0000_0000]);
        assert!(d.notes.is_empty(), "{:?}", d.notes);
    }
}
