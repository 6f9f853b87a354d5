//! Decoding one 64-byte mlx5 CQE into named fields and an explanation
//! (`struct mlx5_cqe64` and `struct mlx5_err_cqe` of rdma-core `providers/mlx5/mlx5dv.h`;
//! syndromes as `providers/mlx5/cq.c` `mlx5_handle_error_cqe` maps them).

use crate::mlx5::dump::cqe_from_bytes;
use crate::mlx5::syndrome_status;
use crate::provider::WcStatus;
use crate::uapi::mlx5::opcode::{cqe_format, cqe_opcode, syndrome, wqe_opcode};
use crate::uapi::mlx5::ErrCqe;
use serde::Serialize;

/// Byte offsets in the cqe64 where DPDK's mlx5 PMD has written its marker, `"seen"` and its
/// NUL, into a CQE it was about to dump (so that it dumps a CQE once), by release:
///
/// | offset | releases | where (DPDK `drivers/net/mlx5`) |
/// |---|---|---|
/// | 1 | 17.11 to 18.05, debug builds | `check_cqe_seen` in `mlx5_rxtx.h`: `struct mlx5_cqe` `rsvd0[11]`, after `pkt_info` |
/// | 17 | 18.08 to 19.05, debug builds | the same function, now on `rsvd1[11]` (after `wqe_id`, `rsvd3[8]`, `rx_hash_res`, `rx_hash_type`) |
/// | 36 | 19.08 to 24.07 | `check_err_cqe_seen` (Tx path): `rsvd1` of rdma-core's `struct mlx5_err_cqe`, after `srqn` |
/// | 4 | 24.11 on | the same, on `rsvd1` of DPDK's own `struct mlx5_error_cqe` (`drivers/common/mlx5/mlx5_prm.h`, commit 3cddeba0ca) |
///
/// Every one of them lies in bytes an error CQE leaves reserved; the decoder ignores them in
/// DPDK dumps of error CQEs.
pub const DPDK_MARKER_OFFSETS: [usize; 4] = [1, 4, 17, 36];

/// The DPDK releases that write the marker at each of [`DPDK_MARKER_OFFSETS`].
const DPDK_MARKER_RELEASES: [&str; 4] =
    ["DPDK 17.11 to 18.05", "DPDK 24.11 on", "DPDK 18.08 to 19.05", "DPDK 19.08 to 24.07"];

/// The marker bytes themselves.
pub const DPDK_MARKER: &[u8; 5] = b"seen\0";

/// The `ibv_wc_status` a CQE yields, with libibverbs' number, constant name and
/// `ibv_wc_status_str()` text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StatusInfo {
    /// `enum ibv_wc_status` value.
    pub value: u32,
    /// `IBV_WC_*` name.
    pub name: &'static str,
    /// Exactly `ibv_wc_status_str(value)`.
    pub text: &'static str,
}

impl From<WcStatus> for StatusInfo {
    fn from(s: WcStatus) -> Self {
        StatusInfo { value: s as u32, name: s.name(), text: s.as_str() }
    }
}

/// What an error syndrome means for the user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Meaning {
    /// Which side failed: `"local"`, `"remote"`, `"network or remote"` or `"unknown"`.
    pub side: &'static str,
    /// One sentence.
    pub summary: &'static str,
    /// The usual causes, most frequent first.
    pub causes: Vec<&'static str>,
}

/// Every field of one decoded mlx5 CQE (success or error), plus what follows from it.
///
/// Error-only fields are `None` for other CQEs and vice versa. This is the structure `dvcq
/// decode --json` prints, one object per CQE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mlx5Cqe {
    /// The 64 bytes in memory order, as 128 lower-case hex digits.
    pub raw: String,
    /// CQE opcode, `op_own >> 4`.
    pub opcode: u8,
    /// rdma-core name of the opcode (`MLX5_CQE_*`), or `"unknown"`.
    pub opcode_name: &'static str,
    /// Owner bit, `op_own & 1`.
    pub owner: u8,
    /// Solicited-event bit, `(op_own >> 1) & 1`.
    pub se: u8,
    /// CQE format, `(op_own >> 2) & 3`.
    pub format: u8,
    /// Name of the format.
    pub format_name: &'static str,
    /// Byte 62.
    pub signature: u8,
    /// Local QPN, bits 23:0 of bytes 56-59.
    pub qpn: u32,
    /// Bytes 60-61.
    pub wqe_counter: u16,
    /// Bits 23:0 of bytes 32-35: the SRQ number (CQE version 0) or the user index of the
    /// owning QP/SRQ (CQE version 1); a dump alone cannot tell which.
    pub srqn_uidx: u32,
    /// Error CQEs: `MLX5_CQE_SYNDROME_*` (byte 55).
    pub syndrome: Option<u8>,
    /// Error CQEs: name of the syndrome, or `"unknown"`.
    pub syndrome_name: Option<&'static str>,
    /// Error CQEs: byte 54, reported as `ibv_wc.vendor_err`.
    pub vendor_err_synd: Option<u8>,
    /// Error CQEs: what a public source says the vendor syndrome means, or that none does.
    pub vendor_err_meaning: Option<String>,
    /// Error CQEs: byte 52 (vendor-internal).
    pub hw_err_synd: Option<u8>,
    /// Error CQEs: byte 53 (vendor-internal).
    pub hw_synd_type: Option<u8>,
    /// Requester CQEs (opcodes 0 and 13): the send WQE opcode, bits 31:24 of bytes 56-59.
    pub wqe_opcode: Option<u8>,
    /// Name of [`Self::wqe_opcode`] (`MLX5_OPCODE_*`) or `"unknown"`.
    pub wqe_opcode_name: Option<&'static str>,
    /// Success responder CQEs: bytes 44-47.
    pub byte_cnt: Option<u32>,
    /// Success responder CQEs: remote QPN, bits 23:0 of bytes 24-27.
    pub src_qp: Option<u32>,
    /// Success responder CQEs: source LID.
    pub slid: Option<u16>,
    /// Success responder CQEs: immediate / invalidated rkey / P_Key word (bytes 36-39).
    pub imm_inval_pkey: Option<u32>,
    /// Non-error CQEs: the completion timestamp, bytes 48-55.
    pub timestamp: Option<u64>,
    /// The work-completion status rdma-core reports; `None` when rdma-core returns no work
    /// completion for this CQE (resize, signature error, invalid, compressed).
    pub status: Option<StatusInfo>,
    /// For error CQEs: which side failed and the usual causes.
    pub meaning: Option<Meaning>,
    /// Remarks: rdma-core behaviour for this CQE, reserved bytes that are not zero, the DPDK
    /// marker.
    pub notes: Vec<String>,
}

/// Options of [`decode_mlx5`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mlx5Options {
    /// The bytes come from a DPDK dump: DPDK's marker bytes are ignored.
    pub dpdk: bool,
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn format_name(f: u8) -> &'static str {
    match f {
        cqe_format::NO_INLINE => "no inline data",
        cqe_format::INLINE_SCATTER_32 => "MLX5_INLINE_SCATTER_32",
        cqe_format::INLINE_SCATTER_64 => "MLX5_INLINE_SCATTER_64",
        _ => "MLX5_COMPRESSED",
    }
}

/// Bytes of an error CQE that `struct mlx5_err_cqe` leaves reserved.
fn err_reserved(i: usize) -> bool {
    i < 32 || (36..52).contains(&i)
}

/// Decodes a 64-byte mlx5 CQE given in memory order.
pub fn decode_mlx5(bytes: &[u8; 64], opts: Mlx5Options) -> Mlx5Cqe {
    let mut b = *bytes;
    let mut notes = Vec::new();
    if opts.dpdk {
        for (off, releases) in DPDK_MARKER_OFFSETS.into_iter().zip(DPDK_MARKER_RELEASES) {
            if &b[off..off + DPDK_MARKER.len()] == DPDK_MARKER {
                notes.push(format!(
                    "DPDK's \"seen\" marker at bytes {off}-{} (where {releases} write it): written by the PMD, ignored",
                    off + DPDK_MARKER.len() - 1
                ));
            }
        }
    }
    let cqe = cqe_from_bytes(&b);
    let op = cqe.opcode();
    let is_err = op == cqe_opcode::REQ_ERR || op == cqe_opcode::RESP_ERR;
    if opts.dpdk && is_err {
        // The marker only ever lands in reserved bytes of an error CQE: blank them all.
        for off in DPDK_MARKER_OFFSETS {
            b[off..off + DPDK_MARKER.len()].fill(0);
        }
    }
    let mut d = Mlx5Cqe {
        raw: hex(bytes),
        opcode: op,
        opcode_name: cqe_opcode::name(op).unwrap_or("unknown"),
        owner: cqe.owner(),
        se: cqe.se() as u8,
        format: cqe.format(),
        format_name: format_name(cqe.format()),
        signature: cqe.signature,
        qpn: cqe.qpn(),
        wqe_counter: cqe.wqe_counter.get(),
        srqn_uidx: cqe.srqn_uidx(),
        syndrome: None,
        syndrome_name: None,
        vendor_err_synd: None,
        vendor_err_meaning: None,
        hw_err_synd: None,
        hw_synd_type: None,
        wqe_opcode: None,
        wqe_opcode_name: None,
        byte_cnt: None,
        src_qp: None,
        slid: None,
        imm_inval_pkey: None,
        timestamp: (!is_err).then(|| cqe.timestamp.get()),
        status: None,
        meaning: None,
        notes,
    };
    if op == cqe_opcode::REQ || op == cqe_opcode::REQ_ERR {
        let w = cqe.wqe_opcode();
        d.wqe_opcode = Some(w);
        d.wqe_opcode_name = Some(wqe_opcode::name(w).unwrap_or("unknown"));
    }
    if d.format == cqe_format::COMPRESSED {
        d.notes.push(
            "format 3: a compression title or mini-CQE block; rdma-core cannot poll compressed \
             CQs, the fields below are those of a regular CQE"
                .into(),
        );
    }
    match op {
        cqe_opcode::REQ_ERR | cqe_opcode::RESP_ERR => decode_error(&b, &mut d),
        cqe_opcode::REQ => {
            d.byte_cnt = Some(cqe.byte_cnt.get());
            d.status = Some(WcStatus::Success.into());
        }
        cqe_opcode::RESP_WR_IMM | cqe_opcode::RESP_SEND | cqe_opcode::RESP_SEND_IMM | cqe_opcode::RESP_SEND_INV => {
            d.byte_cnt = Some(cqe.byte_cnt.get());
            d.src_qp = Some(cqe.src_qp());
            d.slid = Some(cqe.slid.get());
            d.imm_inval_pkey = Some(cqe.imm_inval_pkey.get());
            d.status = Some(WcStatus::Success.into());
        }
        cqe_opcode::RESIZE_CQ => d.notes.push("resize marker: rdma-core returns no work completion for it".into()),
        cqe_opcode::SIG_ERR => {
            d.notes.push("signature error: rdma-core records it on the mkey and returns no work completion".into())
        }
        cqe_opcode::INVALID => d.notes.push("invalid: a slot software initialised and hardware never wrote".into()),
        cqe_opcode::NO_PACKET => d.notes.push("tag-matching list operation completion (app byte 40 = 1)".into()),
        _ => d.notes.push(format!("opcode {op} is not defined by rdma-core or the kernel")),
    }
    d
}

fn decode_error(b: &[u8; 64], d: &mut Mlx5Cqe) {
    let cqe = cqe_from_bytes(b);
    let e = ErrCqe::from_cqe(&cqe);
    let s = e.syndrome;
    d.syndrome = Some(s);
    d.syndrome_name = Some(syndrome::name(s).unwrap_or("unknown"));
    d.vendor_err_synd = Some(e.vendor_err_synd);
    d.vendor_err_meaning = Some(vendor_meaning(s, e.vendor_err_synd, d.opcode));
    d.hw_err_synd = Some(e.hw_err_synd);
    d.hw_synd_type = Some(e.hw_synd_type);
    let status = syndrome_status(s);
    d.status = Some(status.into());
    d.meaning = Some(meaning(s));
    let nonzero: Vec<usize> = (0..64).filter(|&i| err_reserved(i) && b[i] != 0).collect();
    if !nonzero.is_empty() {
        d.notes.push(format!(
            "reserved bytes are not zero (offsets {}): unusual for an error CQE, check the dump",
            nonzero.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(",")
        ));
    }
    // rdma-core `mlx5_parse_cqe` dumps every error CQE except these two (and ODP faults).
    if s == syndrome::WR_FLUSH_ERR || s == syndrome::TRANSPORT_RETRY_EXC_ERR {
        d.notes.push("rdma-core does not print its \"got completion with error\" dump for this syndrome".into());
    }
    if d.opcode == cqe_opcode::RESP_ERR
        && s == syndrome::REMOTE_ABORTED_ERR
        && e.vendor_err_synd == syndrome::VENDOR_ODP_PFAULT
    {
        d.notes.push("on an SRQ, rdma-core re-posts the WQE and swallows this CQE (no work completion)".into());
    }
}

/// Meaning of a vendor syndrome, only where a public source states one.
fn vendor_meaning(synd: u8, vendor: u8, opcode: u8) -> String {
    match vendor {
        // rdma-core `providers/mlx5/mlx5dv.h`: MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT = 0x93, and
        // `providers/mlx5/cq.c` treats REMOTE_ABORTED + 0x93 on a responder SRQ CQE as an
        // on-demand-paging page fault (the WQE is re-posted).
        0x93 if synd == syndrome::REMOTE_ABORTED_ERR && opcode == cqe_opcode::RESP_ERR => {
            "0x93 MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT (rdma-core mlx5dv.h): on-demand-paging page \
             fault on the receive side; rdma-core re-posts the SRQ WQE"
                .into()
        }
        0x93 => "0x93 is MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT in rdma-core mlx5dv.h (an ODP page \
                 fault), but rdma-core only interprets it with syndrome REMOTE_ABORTED_ERR on a \
                 responder CQE"
            .into(),
        // UCX `src/uct/ib/mlx5/ib_mlx5.h`: UCT_IB_MLX5_CQE_VENDOR_SYND_PSN = 0x99; UCX
        // `rc_mlx5_iface.c` releases the SRQ segment of a RESP_ERR/REMOTE_ABORTED CQE carrying
        // it, like an ODP fault.
        0x99 => "0x99 UCT_IB_MLX5_CQE_VENDOR_SYND_PSN (UCX ib_mlx5.h): UCX treats a responder \
                 REMOTE_ABORTED CQE with it as an aborted receive and releases the SRQ segment; \
                 no further public description"
            .into(),
        v => format!("{v:#04x}: undocumented (no public source states its meaning)"),
    }
}

/// The usual meaning of a syndrome. These are the InfiniBand completion-error semantics that
/// `ibv_wc_status` carries (IBTA spec vol. 1, completion error types; libibverbs
/// `ibv_poll_cq(3)`); they are not vendor-specific.
pub(crate) fn meaning(s: u8) -> Meaning {
    let (side, summary, causes): (&'static str, &'static str, &[&'static str]) = match s {
        syndrome::LOCAL_LENGTH_ERR => (
            "local",
            "a posted buffer did not fit the message",
            &[
                "receive buffers (sum of SGE lengths) smaller than the incoming message",
                "send larger than the port's maximum message size",
                "scatter/gather list longer than the QP was created for",
            ],
        ),
        syndrome::LOCAL_QP_OP_ERR => (
            "local",
            "the work request is inconsistent with the QP",
            &[
                "opcode not supported by the QP type (e.g. RDMA on a UD QP)",
                "too many SGEs or inline data larger than max_inline_data",
                "malformed WQE written by a direct-verbs poster",
            ],
        ),
        syndrome::LOCAL_PROT_ERR => (
            "local",
            "a local buffer failed the memory-protection check",
            &[
                "lkey of an MR that was deregistered or never registered",
                "address range outside the MR",
                "MR registered in another protection domain than the QP",
                "MR lacks IBV_ACCESS_LOCAL_WRITE for a receive or RDMA read target",
            ],
        ),
        syndrome::WR_FLUSH_ERR => (
            "local",
            "the QP was in the error state; this work request was flushed, not executed",
            &[
                "an earlier completion on this QP failed: look for the first non-flush error",
                "the QP was moved to IBV_QPS_ERR or destroyed (normal at disconnect)",
            ],
        ),
        syndrome::MW_BIND_ERR => (
            "local",
            "a memory-window bind failed",
            &[
                "the MR does not allow binding (no IBV_ACCESS_MW_BIND)",
                "window range outside the MR or access rights wider than the MR's",
            ],
        ),
        syndrome::BAD_RESP_ERR => (
            "network or remote",
            "the responder answered with an unexpected transport opcode",
            &["responder bug or corrupted/misrouted packets", "mismatched QP pairing"],
        ),
        syndrome::LOCAL_ACCESS_ERR => (
            "local",
            "a local buffer failed protection while serving the peer's RDMA write with immediate",
            &["receive WQE buffer with a bad lkey or range", "MR without local write access"],
        ),
        syndrome::REMOTE_INVAL_REQ_ERR => (
            "remote",
            "the responder found the request invalid",
            &[
                "operation not enabled on the remote QP (qp_access_flags lack REMOTE_READ/WRITE/ATOMIC)",
                "message longer than the responder's receive buffer or max message size",
                "max_dest_rd_atomic 0 on the responder for RDMA read or atomic",
                "misaligned atomic address",
            ],
        ),
        syndrome::REMOTE_ACCESS_ERR => (
            "remote",
            "the responder rejected the rkey or address",
            &[
                "wrong or stale rkey (remote MR deregistered or re-registered)",
                "remote address outside the MR",
                "remote MR lacks IBV_ACCESS_REMOTE_WRITE/READ/ATOMIC",
                "remote MR in a different protection domain than the remote QP",
            ],
        ),
        syndrome::REMOTE_OP_ERR => (
            "remote",
            "the responder could not complete the operation",
            &["the remote receive WQE failed (its buffer too small or bad lkey)", "remote QP went to the error state"],
        ),
        syndrome::TRANSPORT_RETRY_EXC_ERR => (
            "network or remote",
            "no acknowledgement arrived after retry_cnt retransmissions",
            &[
                "remote QP not in RTR/RTS, destroyed, or its process died",
                "wrong address vector (GID index, LID, MTU, RoCE version) or unreachable peer",
                "link down, congestion or packet loss without PFC/ECN",
                "timeout (local ACK timeout) too small for the fabric",
            ],
        ),
        syndrome::RNR_RETRY_EXC_ERR => (
            "remote",
            "the receiver had no receive WQE posted, rnr_retry times in a row",
            &[
                "the peer does not post receives fast enough (receive queue ran dry)",
                "rnr_retry too small (7 means infinite)",
            ],
        ),
        syndrome::REMOTE_ABORTED_ERR => (
            "remote",
            "the responder aborted the operation",
            &[
                "on an SRQ with on-demand paging: page fault (vendor syndrome 0x93)",
                "the remote receive resources were torn down mid-message",
            ],
        ),
        _ => (
            "unknown",
            "syndrome not defined by rdma-core; reported as IBV_WC_GENERAL_ERR",
            &["undocumented: check the firmware release notes or ask the vendor"],
        ),
    };
    Meaning { side, summary, causes: causes.to_vec() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(op_own: u8, synd: u8, vendor: u8) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[54] = vendor;
        b[55] = synd;
        b[56..60].copy_from_slice(&[0x0a, 0x00, 0x1f, 0x8e]);
        b[60..62].copy_from_slice(&[0x00, 0x05]);
        b[62] = 0x27;
        b[63] = op_own;
        b
    }

    #[test]
    fn real_rnr_dump() {
        let d = decode_mlx5(&err(0xd2, 0x16, 0x87), Mlx5Options::default());
        assert_eq!(d.opcode_name, "MLX5_CQE_REQ_ERR");
        assert_eq!(d.syndrome_name, Some("MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR"));
        assert_eq!(d.status.as_ref().unwrap().value, 13);
        assert_eq!(d.status.as_ref().unwrap().text, "RNR retry counter exceeded");
        assert_eq!(d.qpn, 0x1f8e);
        assert_eq!(d.wqe_opcode_name, Some("MLX5_OPCODE_SEND"));
        assert_eq!(d.wqe_counter, 5);
        assert_eq!(d.signature, 0x27);
        assert_eq!(d.se, 1);
        assert_eq!(d.owner, 0);
        assert!(d.vendor_err_meaning.unwrap().contains("undocumented"));
        assert!(d.notes.is_empty());
    }

    #[test]
    fn dpdk_marker_is_ignored_where_every_release_writes_it() {
        for (off, releases) in [(1, "17.11 to 18.05"), (17, "18.08 to 19.05"), (36, "19.08 to 24.07"), (4, "24.11 on")]
        {
            let mut b = err(0xd0, 0x04, 0x51);
            b[off..off + 5].copy_from_slice(DPDK_MARKER);
            let d = decode_mlx5(&b, Mlx5Options { dpdk: true });
            let want = format!("marker at bytes {off}-{} (where DPDK {releases} write it)", off + 4);
            assert!(d.notes.iter().any(|n| n.contains(&want)), "{off}: {:?}", d.notes);
            assert!(!d.notes.iter().any(|n| n.contains("reserved")), "{off}: {:?}", d.notes);
            assert_eq!((d.syndrome, d.qpn), (Some(0x04), 0x1f8e), "{off}");
            let d = decode_mlx5(&b, Mlx5Options { dpdk: false });
            assert!(d.notes.iter().any(|n| n.contains("reserved")), "{off}: {:?}", d.notes);
        }
    }
}
