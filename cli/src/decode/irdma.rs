//! Decoding one irdma (Intel E810 / X722) CQE given as 64-bit qwords
//! (field masks of rdma-core `providers/irdma/defs.h`, read as `providers/irdma/uk.c`
//! `irdma_uk_cq_poll_cmpl` reads them).
//!
//! Fields come from the `dvcq_uapi::irdma::cqe` accessors; the status mapping follows
//! rdma-core's irdma provider (`irdma_uk_cq_poll_cmpl`; `providers/irdma/uverbs.c`
//! `irdma_flush_err_to_ib_wc_status`, `set_ib_wc_op_sq`, `set_ib_wc_op_rq`).

use super::mlx5::{Meaning, StatusInfo};
use crate::irdma::status::{classify_error, flush_code_status, sq_opcode, vendor_err, CompStatus, Compat};
use crate::provider::WcStatus;
use crate::uapi::irdma::codes::{ae, flush, major as major_code, sq_op};
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
    // The status the newest rdma-core reports, with a note where older releases differ
    // (the poller's own tables, `Compat`).
    let status = if !error {
        match (is_sq, sq_opcode(opcode, Compat::Current), sq_opcode(opcode, Compat::V44)) {
            (true, None, _) => {
                notes.push(
                    "success CQE with an SQ opcode the provider does not map: rdma-core reports \
                     IBV_WC_GENERAL_ERR"
                        .into(),
                );
                WcStatus::GeneralErr
            }
            (true, Some(_), None) => {
                notes.push("rdma-core before v64 does not map this opcode: it reports IBV_WC_GENERAL_ERR".into());
                WcStatus::Success
            }
            _ => WcStatus::Success,
        }
    } else {
        match classify_error(major, minor, Compat::Current) {
            (CompStatus::Flushed(code), _) if major == major_code::FLUSH => {
                minor_name = flush::name(minor);
                let (now, old) = (flush_code_status(code, Compat::Current), flush_code_status(code, Compat::V44));
                if now != old {
                    notes.push(format!("rdma-core before v64 maps flush code {code} to {}", old.name()));
                }
                now
            }
            (CompStatus::Flushed(code), _) => {
                minor_name = ae::name(minor);
                notes.push(format!(
                    "SRQ flush: the minor code is an async-event code, translated to flush code {code} ({}); \
                     rdma-core before v64 reports IBV_WC_GENERAL_ERR",
                    flush::name(code).unwrap_or("?")
                ));
                flush_code_status(code, Compat::Current)
            }
            _ => {
                if is_sq && major >> 12 == major_code::CIE_NIBBLE {
                    notes.push(
                        "major 0xEnnn on an SQ CQE: a non-fatal UD \"CIE\" error; rdma-core's uk layer \
                         would clear it for RoCE UD QPs (v64+), but its userspace QPs are never typed so, \
                         and userspace reports IBV_WC_GENERAL_ERR"
                            .into(),
                    );
                }
                WcStatus::GeneralErr
            }
        }
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
        vendor_err: error.then_some(vendor_err(major, minor)),
        opcode,
        opcode_name: if is_sq { sq_op::name(opcode) } else { None },
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
    fn worked_examples() {
        // GEN2 SQ success SEND, wqe_idx 5, valid 1, encoded by hand from the defs.h masks.
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

    /// One SQ (bit 62) or RQ CQE's qword3, valid, with the error fields and opcode given.
    fn q3(sq: bool, error: bool, major: u16, minor: u16, op: u8) -> u64 {
        (1 << 63)
            | (u64::from(sq) << 62)
            | (u64::from(op) << 56)
            | (u64::from(error) << 55)
            | (u64::from(major) << 16)
            | u64::from(minor)
    }

    #[test]
    fn every_flush_code_by_number() {
        // rdma-core v64's `irdma_flush_err_to_ib_wc_status`, by number.
        let status = [19, 5, 4, 10, 2, 11, 1, 19, 12, 6, 9, 13, 19, 19];
        for (minor, want) in (0u16..).zip(status) {
            let d = decode_irdma(&[0, 0, 0, q3(minor % 2 == 0, true, 1, minor, 0)]);
            assert_eq!(d.status.value, want, "flush code {minor}");
            assert_eq!(d.minor_err_name, flush::name(minor), "flush code {minor}");
            assert_eq!(d.minor_err_name.is_some(), minor <= 11, "flush code {minor}");
            assert_eq!(d.vendor_err, Some(0x0001_0000 | u32::from(minor)));
            assert!(d.meaning.is_some(), "flush code {minor}");
            // Only code 11 changed meaning (v64): before, it was FATAL.
            let noted = d.notes.iter().any(|n| n.contains("before v64 maps flush code 11 to IBV_WC_FATAL_ERR"));
            assert_eq!(noted, minor == 11, "flush code {minor}: {:?}", d.notes);
        }
    }

    #[test]
    fn srq_flush_names_the_async_event() {
        // (AE code, its name, the status of the flush code it translates to), by number.
        let cases = [
            (0x0114, Some("IRDMA_AE_AMP_MWBIND_VALID_STAG"), 6),
            (0x011b, Some("IRDMA_AE_AMP_MWBIND_BIND_DISABLED"), 6),
            (0x0303, Some("IRDMA_AE_DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER"), 1),
            (0x0703, Some("IRDMA_AE_REMOTE_QP_CATASTROPHIC"), 19),
            (0x050f, Some("IRDMA_AE_LLP_TOO_MANY_RNRS"), 13),
            (0x0203, Some("IRDMA_AE_CQ_OPERATION_ERROR"), 5),
            (0x0101, None, 5),
        ];
        for (code, name, status) in cases {
            let d = decode_irdma(&[0, 0, 0, q3(false, true, 0xfffe, code, 0)]);
            assert_eq!(d.minor_err_name, name, "AE {code:#06x}");
            assert_eq!(d.status.value, status, "AE {code:#06x}");
            assert_eq!(d.vendor_err, Some(0xfffe_0000 | u32::from(code)));
            assert!(d.notes.iter().any(|n| n.starts_with("SRQ flush")), "{:?}", d.notes);
        }
        // Any other major is a general error, with no name for its minor.
        let d = decode_irdma(&[0, 0, 0, q3(true, true, 2, 0x0114, 0)]);
        assert_eq!((d.status.value, d.minor_err_name), (21, None));
        assert!(d.notes.is_empty(), "{:?}", d.notes);
    }

    #[test]
    fn immediate_data_needs_the_extension_and_its_valid_bit() {
        let ext = 1 << 50;
        let imm_valid = 1 << 62;
        // (EXTCQE, qword7, qwords given) → imm_valid, imm_data
        let cases = [
            (true, imm_valid, 8, Some(true), Some(0x1234)),
            (true, 0, 8, Some(false), None),
            (false, imm_valid, 8, Some(false), None),
            (true, imm_valid, 4, None, None),
        ];
        for (extended, q7, n, valid, data) in cases {
            let w3 = q3(false, false, 0, 0, 0) | if extended { ext } else { 0 };
            let q = [0, 0, 0, w3, 0xdead_0000_0000_1234, 0, 0, q7];
            let d = decode_irdma(&q[..n]);
            assert_eq!((d.imm_valid, d.imm_data), (valid, data), "{extended} {q7:#x} {n}");
            let missing = d.notes.iter().any(|x| x.starts_with("EXTCQE set: the extension"));
            assert_eq!(missing, extended && n == 4, "{extended} {n}");
        }
    }

    #[test]
    fn ud_cie_errors_and_stray_error_codes_are_remarked() {
        // Major 0xEnnn on an SQ CQE (a RoCE UD "CIE" error): a general error, as rdma-core's
        // userspace provider reports it, with a note.
        for (sq, major, noted) in [(true, 0xe123, true), (false, 0xe123, false), (true, 0x0e12, false)] {
            let d = decode_irdma(&[0, 0, 0, q3(sq, true, major, 1, 0)]);
            assert_eq!(d.status.value, 21, "{major:#x}");
            assert!(d.meaning.as_ref().is_some_and(|m| m.summary.contains("IBV_WC_GENERAL_ERR")), "{major:#x}");
            assert_eq!(d.notes.iter().any(|n| n.starts_with("major 0xEnnn")), noted, "{major:#x} {:?}", d.notes);
        }
        // Error codes without the error bit.
        for (major, minor) in [(0, 0), (0, 3), (2, 0)] {
            let d = decode_irdma(&[0, 0, 0, q3(true, false, major, minor, 0)]);
            let noted = d.notes.iter().any(|n| n == "error bit clear but major/minor not zero");
            assert_eq!(noted, (major, minor) != (0, 0), "{major} {minor}");
            assert_eq!((d.status.value, d.vendor_err, d.minor_err_name), (0, None, None));
        }
    }

    #[test]
    fn every_sq_opcode_of_a_successful_cqe() {
        // `set_ib_wc_op_sq` maps these; any other makes the status GENERAL_ERR.
        let mapped = [0x00, 0x0d, 0x01, 0x03, 0x04, 0x05, 0x06, 0x08, 0x11, 0x0f, 0x0a];
        for op in 0..64u8 {
            let d = decode_irdma(&[0, 0, 0, q3(true, false, 0, 0, op)]);
            assert_eq!(d.status.value == 0, mapped.contains(&op), "SQ opcode {op:#04x}");
            assert_eq!(d.opcode_name, sq_op::name(op), "SQ opcode {op:#04x}");
            let new = d.notes.iter().any(|n| n.contains("before v64"));
            assert_eq!(new, op == 0x0f || op == 0x11, "SQ opcode {op:#04x}: {:?}", d.notes);
            assert_eq!((d.vendor_err, d.minor_err_name, d.meaning.is_some()), (None, None, false));
            // A receive's opcode is the received protocol's: never an SQ name, always success.
            let d = decode_irdma(&[0, 0, 0, q3(false, false, 0, 0, op)]);
            assert_eq!((d.queue, d.opcode_name, d.status.value), ("RQ", None, 0), "RQ opcode {op:#04x}");
        }
    }
}
