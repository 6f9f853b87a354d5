//! Major/minor error codes → `ibv_wc_status`, `vendor_err`, and the opcode tables
//! (rdma-core `providers/irdma/uk.c` `irdma_uk_cq_poll_cmpl`; `providers/irdma/uverbs.c`
//! `irdma_flush_err_to_ib_wc_status`, `irdma_process_cqe`, `set_ib_wc_op_sq`,
//! `set_ib_wc_op_rq`, `set_ib_wc_op_rq_gen_3`).

use dvcq_provider::{WcOpcode, WcStatus};
use dvcq_uapi::irdma::codes::{ae, flush, major, rq_op, sq_op};

/// The rdma-core releases whose irdma poll differs: the irdma poll path changed in v52
/// (commit 7f2d095ff) and in v64 (the GEN3 commits d986d0b2c, 32c9f6947, c2665c2e3 and
/// 772db3ec1) only; each variant covers the releases up to the next change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Release {
    /// rdma-core v64 and later (checked against v65): minor 11 is
    /// `IBV_WC_RNR_RETRY_EXC_ERR`, major 0xFFFE is a flush with an AE code, the SRQ bit is
    /// read, atomic SQ opcodes are mapped, and ring sizes are rounded to even.
    #[default]
    Current,
    /// rdma-core v52 to v63, and the v44 to v51 point releases that took commit 7f2d095ff
    /// (from v44.7, v45.6, v46.5, v47.4, v48.3, v49.3, v50.2 and v51.2 on): as
    /// [`Release::V44`], except that RoCE write-with-immediate receives are
    /// `IBV_WC_RECV_RDMA_WITH_IMM`.
    V52,
    /// rdma-core v44 to v51 before those point releases (Debian 12 ships v44.0, Ubuntu 24.04
    /// v50.0): RoCE write-with-immediate receives are `IBV_WC_RECV` with `IBV_WC_WITH_IMM`,
    /// minor 11 is `IBV_WC_FATAL_ERR`, major 0xFFFE is a general error, the SRQ bit is not
    /// looked at, atomic SQ opcodes are general errors, and ring sizes are not rounded.
    V44,
}

/// Which rdma-core behaviour to reproduce: the release range whose poll to follow
/// ([`Release`]), and whether to copy rdma-core's connection-WQE skip as it is.
///
/// # The connection-WQE skip
///
/// rdma-core consumes the CQE of an iWARP connection WQE (`irdma_setup_connection_wqes`)
/// without a completion (`irdma_uk_cq_poll_cmpl`), by moving the ring head one slot, without
/// the polarity flip the head takes everywhere else when it wraps to slot 0. Both are bugs:
/// an extended CQE takes two slots in 32-byte mode, so rdma-core then reads the extension
/// slot as a CQE of its own (its qword1 is the extension's qword5: 0 on GEN2, which makes it
/// a skipped context-0 CQE, anything else a QP pointer it dereferences); and a skip into
/// slot 0 leaves the expected valid bit a lap behind, so every later CQE looks not yet written
/// until the device laps the ring again. Every release has them, from the provider's first
/// (v37, commit 3bebdf5cb) to today's (checked at v44.0, v50.0, v60.0, v64.0 and v65).
///
/// dvcq's default does not copy them: a connection WQE's CQE is skipped whole (both slots of
/// an extended one) and the head wraps as always. [`Compat::with_conn_wqe_bug`], and every
/// [`Compat::for_release`], reproduce what rdma-core reports instead (the extension read as
/// a CQE, the polarity kept), for a lab engineer comparing with rdma-core's own poll.
///
/// The named values (`Compat::Current`, `Compat::V52`, `Compat::V44`) follow their release
/// without the bug. They keep the names they had when `Compat` was the release enum, so are
/// not upper case.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Compat {
    release: Release,
    conn_wqe_bug: bool,
}

impl core::fmt::Debug for Compat {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}", self.release)?;
        if self.conn_wqe_bug {
            f.write_str(" (with rdma-core's connection-WQE skip)")?;
        }
        Ok(())
    }
}

/// The first point release of each of v44 to v51 with rdma-core commit 7f2d095ff ("Do not
/// override the raw op type", v52), as (major, minor): from there its irdma poll is v52's.
const V52_BACKPORTS: [(u32, u32); 8] = [(44, 7), (45, 6), (46, 5), (47, 4), (48, 3), (49, 3), (50, 2), (51, 2)];

#[allow(non_upper_case_globals)]
impl Compat {
    /// rdma-core v64 and later ([`Release::Current`]), without the connection-WQE bug.
    pub const Current: Compat = Compat { release: Release::Current, conn_wqe_bug: false };
    /// rdma-core v52 to v63 ([`Release::V52`]), without the connection-WQE bug.
    pub const V52: Compat = Compat { release: Release::V52, conn_wqe_bug: false };
    /// rdma-core v44 to v51 ([`Release::V44`]), without the connection-WQE bug.
    pub const V44: Compat = Compat { release: Release::V44, conn_wqe_bug: false };

    /// Every release range, newest first, without the connection-WQE bug.
    pub const ALL: [Compat; 3] = [Compat::Current, Compat::V52, Compat::V44];

    /// The release range followed.
    pub const fn release(self) -> Release {
        self.release
    }

    /// The same, with rdma-core's connection-WQE skip copied as it is (see the type's
    /// docs).
    pub const fn with_conn_wqe_bug(self) -> Compat {
        Compat { conn_wqe_bug: true, ..self }
    }

    /// The same, without rdma-core's connection-WQE skip (dvcq's own: the extended CQE
    /// skipped whole).
    pub const fn without_conn_wqe_bug(self) -> Compat {
        Compat { conn_wqe_bug: false, ..self }
    }

    /// Whether rdma-core's connection-WQE skip is copied.
    pub const fn conn_wqe_bug(self) -> bool {
        self.conn_wqe_bug
    }

    /// What rdma-core release `v<major>.<minor>` does, its connection-WQE skip included;
    /// `None` before v44, the oldest release reproduced.
    pub const fn for_release(major: u32, minor: u32) -> Option<Compat> {
        let release = match major {
            64.. => Release::Current,
            52..=63 => Release::V52,
            44..=51 => {
                let first = V52_BACKPORTS[(major - 44) as usize].1;
                if minor >= first {
                    Release::V52
                } else {
                    Release::V44
                }
            }
            _ => return None,
        };
        Some(Compat { release, conn_wqe_bug: true })
    }

    /// The releases this value follows, as rdma-core names them (`v64 and later`).
    pub const fn releases(self) -> &'static str {
        match self.release {
            Release::Current => "v64 and later",
            Release::V52 => "v52 to v63 (and v44.7, v45.6, v46.5, v47.4, v48.3, v49.3, v50.2, v51.2 on)",
            Release::V44 => "v44 to v51 (before v44.7, v45.6, v46.5, v47.4, v48.3, v49.3, v50.2, v51.2)",
        }
    }

    /// Whether these releases poll GEN3 CQs (rdma-core supports GEN3 from v64).
    pub const fn has_gen3(self) -> bool {
        matches!(self.release, Release::Current)
    }

    /// Receive CQEs keep the hardware opcode (rdma-core commit 7f2d095ff, v52); before,
    /// the uk layer overwrote it with `IRDMA_OP_TYPE_REC`/`REC_IMM`.
    #[inline(always)]
    pub(crate) const fn raw_rq_opcode(self) -> bool {
        !matches!(self.release, Release::V44)
    }

    /// Flush code 11 is `FLUSH_RNR_RETRY_EXC_ERR` (rdma-core commit d986d0b2c, v64).
    #[inline(always)]
    pub(crate) const fn rnr_retry_exc(self) -> bool {
        matches!(self.release, Release::Current)
    }

    /// The SRQ bit is read and major 0xFFFE is an SRQ flush (rdma-core commit 32c9f6947,
    /// v64).
    #[inline(always)]
    pub(crate) const fn srq(self) -> bool {
        matches!(self.release, Release::Current)
    }

    /// `set_ib_wc_op_sq` maps the atomic opcodes (rdma-core commit c2665c2e3, v64).
    #[inline(always)]
    pub(crate) const fn sq_atomics(self) -> bool {
        matches!(self.release, Release::Current)
    }
}

/// The completion status rdma-core derives from qword3's error fields, before the SQ
/// unknown-opcode override (`irdma_uk_cq_poll_cmpl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompStatus {
    /// `IRDMA_COMPL_STATUS_SUCCESS`.
    Success,
    /// `IRDMA_COMPL_STATUS_FLUSHED`, with the (translated) flush code.
    Flushed(u16),
    /// `IRDMA_COMPL_STATUS_UNKNOWN`: any other error.
    Unknown,
}

/// `irdma_flush_err_to_ib_wc_status` (`providers/irdma/uverbs.c`): a flush (minor) code to a
/// status.
#[inline]
pub const fn flush_code_status(minor: u16, compat: Compat) -> WcStatus {
    match minor {
        flush::GENERAL_ERR => WcStatus::WrFlushErr,
        flush::PROT_ERR => WcStatus::LocProtErr,
        flush::REM_ACCESS_ERR => WcStatus::RemAccessErr,
        flush::LOC_QP_OP_ERR => WcStatus::LocQpOpErr,
        flush::REM_OP_ERR => WcStatus::RemOpErr,
        flush::LOC_LEN_ERR => WcStatus::LocLenErr,
        flush::RETRY_EXC_ERR => WcStatus::RetryExcErr,
        flush::MW_BIND_ERR => WcStatus::MwBindErr,
        flush::REM_INV_REQ_ERR => WcStatus::RemInvReqErr,
        // Added in v64 (commit d986d0b2c); older versions fall through to FATAL.
        flush::RNR_RETRY_EXC_ERR if compat.rnr_retry_exc() => WcStatus::RnrRetryExcErr,
        _ => WcStatus::FatalErr,
    }
}

/// `irdma_ae_to_qp_err_code` (`providers/irdma/user.h`): an asynchronous-event code to a
/// flush code.
pub const fn ae_to_flush_code(code: u16) -> u16 {
    match code {
        ae::AMP_BOUNDS_VIOLATION
        | ae::AMP_INVALID_STAG
        | ae::AMP_RIGHTS_VIOLATION
        | ae::AMP_UNALLOCATED_STAG
        | ae::AMP_BAD_PD
        | ae::AMP_BAD_QP
        | ae::AMP_BAD_STAG_KEY
        | ae::AMP_BAD_STAG_INDEX
        | ae::AMP_TO_WRAP
        | ae::PRIV_OPERATION_DENIED => flush::PROT_ERR,
        ae::UDA_XMIT_BAD_PD | ae::WQE_UNEXPECTED_OPCODE => flush::LOC_QP_OP_ERR,
        ae::UDA_XMIT_DGRAM_TOO_SHORT
        | ae::UDA_XMIT_DGRAM_TOO_LONG
        | ae::UDA_L4LEN_INVALID
        | ae::DDP_UBE_INVALID_MO
        | ae::DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER => flush::LOC_LEN_ERR,
        ae::AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS | ae::IB_REMOTE_ACCESS_ERROR => flush::REM_ACCESS_ERR,
        ae::AMP_MWBIND_INVALID_RIGHTS
        | ae::AMP_MWBIND_BIND_DISABLED
        | ae::AMP_MWBIND_INVALID_BOUNDS
        | ae::AMP_MWBIND_VALID_STAG => flush::MW_BIND_ERR,
        ae::LLP_TOO_MANY_RETRIES => flush::RETRY_EXC_ERR,
        ae::IB_INVALID_REQUEST => flush::REM_INV_REQ_ERR,
        ae::LLP_SEGMENT_TOO_SMALL
        | ae::LLP_RECEIVED_MPA_CRC_ERROR
        | ae::ROCE_RSP_LENGTH_ERROR
        | ae::IB_REMOTE_OP_ERROR => flush::REM_OP_ERR,
        ae::LLP_TOO_MANY_RNRS => flush::RNR_RETRY_EXC_ERR,
        ae::LCE_QP_CATASTROPHIC | ae::REMOTE_QP_CATASTROPHIC | ae::LOCAL_QP_CATASTROPHIC | ae::RCE_QP_CATASTROPHIC => {
            flush::FATAL_ERR
        }
        _ => flush::GENERAL_ERR,
    }
}

/// The status decision of `irdma_uk_cq_poll_cmpl` for an error CQE; returns the
/// status class and the minor code as rdma-core keeps it (translated for major 0xFFFE).
/// A non-fatal UD "CIE" error (major 0xEnnn) is unknown here, as in rdma-core's userspace
/// provider (see `Engine::translate`).
#[inline]
pub const fn classify_error(major_err: u16, minor_err: u16, compat: Compat) -> (CompStatus, u16) {
    if major_err == major::FLUSH {
        (CompStatus::Flushed(minor_err), minor_err)
    } else if major_err == major::SRQ_FLUSH && compat.srq() {
        let m = ae_to_flush_code(minor_err);
        (CompStatus::Flushed(m), m)
    } else {
        (CompStatus::Unknown, minor_err)
    }
}

/// `vendor_err` of an error completion: `(major << 16) | minor` (`irdma_process_cqe`).
#[inline(always)]
pub const fn vendor_err(major_err: u16, minor_err: u16) -> u32 {
    (major_err as u32) << 16 | minor_err as u32
}

/// `set_ib_wc_op_sq` (`providers/irdma/uverbs.c`): the `ibv_wc` opcode of an SQ WQE opcode,
/// or `None` for the opcodes rdma-core has no case for (it then overwrites the status with
/// GENERAL_ERR): on versions before v64 that includes the atomics.
#[inline(always)]
pub const fn sq_opcode(op: u8, compat: Compat) -> Option<WcOpcode> {
    Some(match op {
        sq_op::ATOMIC_COMPARE_AND_SWAP | sq_op::ATOMIC_FETCH_AND_ADD if !compat.sq_atomics() => return None,
        sq_op::RDMA_WRITE | sq_op::RDMA_WRITE_SOL => WcOpcode::RdmaWrite,
        sq_op::RDMA_READ => WcOpcode::RdmaRead,
        sq_op::SEND | sq_op::SEND_INV | sq_op::SEND_SOL | sq_op::SEND_SOL_INV => WcOpcode::Send,
        sq_op::BIND_MW => WcOpcode::BindMw,
        sq_op::ATOMIC_COMPARE_AND_SWAP => WcOpcode::CompSwap,
        sq_op::ATOMIC_FETCH_AND_ADD => WcOpcode::FetchAdd,
        sq_op::INV_STAG => WcOpcode::LocalInv,
        _ => return None,
    })
}

/// The receive opcode: `set_ib_wc_op_rq` on GEN1/GEN2, `set_ib_wc_op_rq_gen_3` on
/// GEN3. `send_with_imm_cap` is the QP's `IRDMA_SEND_WITH_IMM` capability (RoCE QPs).
#[inline(always)]
pub const fn rq_opcode(op: u8, gen3: bool, send_with_imm_cap: bool, imm_valid: bool, compat: Compat) -> WcOpcode {
    let write_imm = if gen3 {
        op == rq_op::GEN3_WRITE_IMM || op == rq_op::GEN3_WRITE_SOL_IMM
    } else if !send_with_imm_cap {
        // iWARP: the presence of immediate data decides.
        imm_valid
    } else if !compat.raw_rq_opcode() {
        // Quirk (before v52, `irdma_uk_cq_poll_cmpl`): the uk layer overwrote the RQ op with
        // 0x3e/0x3f, which the RoCE switch of `set_ib_wc_op_rq` never matches, so RoCE
        // write-with-immediate receives are IBV_WC_RECV (until commit 7f2d095ff).
        false
    } else {
        op == rq_op::ROCE_WRITE_ONLY_WITH_IMM || op == rq_op::ROCE_WRITE_LAST_WITH_IMM
    };
    if write_imm {
        WcOpcode::RecvRdmaWithImm
    } else {
        WcOpcode::Recv
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each release maps to the variant whose range names it, at both ends of each range.
    #[test]
    fn releases_map_to_their_variant() {
        for (major, minor, want) in [
            (0, 0, None),
            (43, 99, None),
            (44, 0, Some(Compat::V44)),
            (44, 6, Some(Compat::V44)),
            (44, 7, Some(Compat::V52)),
            (47, 3, Some(Compat::V44)),
            (47, 4, Some(Compat::V52)),
            (50, 1, Some(Compat::V44)),
            (50, 2, Some(Compat::V52)),
            (51, 1, Some(Compat::V44)),
            (51, 2, Some(Compat::V52)),
            (52, 0, Some(Compat::V52)),
            (63, 9, Some(Compat::V52)),
            (64, 0, Some(Compat::Current)),
            (u32::MAX, 0, Some(Compat::Current)),
        ] {
            // A release's behaviour is its range's, with its connection-WQE skip.
            assert_eq!(Compat::for_release(major, minor), want.map(Compat::with_conn_wqe_bug), "v{major}.{minor}");
        }
        // Each backport's point release is the first of its major with v52's poll.
        let release = |major, minor| Compat::for_release(major, minor).map(Compat::release);
        for (major, first) in V52_BACKPORTS {
            assert_eq!(release(major, first - 1), Some(Release::V44), "v{major}");
            assert_eq!(release(major, first), Some(Release::V52), "v{major}");
            assert_eq!(release(major, u32::MAX), Some(Release::V52), "v{major}");
        }
        // The named values have no bug; the debug form says when one has it.
        assert!(Compat::ALL.iter().all(|c| !c.conn_wqe_bug()));
        assert_eq!(format!("{:?}", Compat::V52), "V52");
        assert_eq!(format!("{:?}", Compat::V52.with_conn_wqe_bug()), "V52 (with rdma-core's connection-WQE skip)");
        assert_eq!(Compat::V52.with_conn_wqe_bug().without_conn_wqe_bug(), Compat::V52, "the skip can be taken back");
        let names: Vec<_> = Compat::ALL.iter().map(|c| c.releases()).collect();
        assert!(names[0] == "v64 and later" && names[1].starts_with("v52 to v63 (and v44.7,"), "{names:?}");
        assert!(names[2].starts_with("v44 to v51 (before v44.7,"), "{names:?}");
    }

    #[test]
    fn flush_table_matches_spec() {
        let expect = [
            (1, 5),
            (2, 4),
            (3, 10),
            (4, 2),
            (5, 11),
            (6, 1),
            (7, 19),
            (8, 12),
            (9, 6),
            (10, 9),
            (11, 13),
            (0, 19),
            (12, 19),
            (0xffff, 19),
        ];
        for (minor, st) in expect {
            assert_eq!(flush_code_status(minor, Compat::Current) as u32, st, "minor {minor}");
        }
        assert_eq!(flush_code_status(11, Compat::V52), WcStatus::FatalErr);
        assert_eq!(flush_code_status(11, Compat::V44), WcStatus::FatalErr);
    }

    /// `irdma_ae_to_qp_err_code` case by case, by number: every listed code gives its
    /// flush code, and every other 16-bit value GENERAL_ERR.
    #[test]
    fn ae_table_is_rdma_core_s_whole_switch() {
        let listed: [(&[u16], u16); 10] = [
            (&[0x0108, 0x0103, 0x0109, 0x0102, 0x0105, 0x0104, 0x0106, 0x0107, 0x010a, 0x011c], 2),
            (&[0x0133, 0x020a], 4),
            (&[0x0134, 0x0132, 0x0135, 0x0305, 0x0303], 6),
            (&[0x0112, 0x020d], 3),
            (&[0x0118, 0x011b, 0x0119, 0x0114], 9),
            (&[0x050a], 8),
            (&[0x0208], 10),
            (&[0x0507, 0x0505, 0x0316, 0x020e], 5),
            (&[0x050f], 11),
            (&[0x0700, 0x0703, 0x0704, 0x0705], 7),
        ];
        for code in 0..=u16::MAX {
            let want = listed.iter().find(|(codes, _)| codes.contains(&code)).map_or(flush::GENERAL_ERR, |&(_, f)| f);
            assert_eq!(ae_to_flush_code(code), want, "AE {code:#06x}");
        }
        // Each code listed is named, by rdma-core's identifier.
        for &(codes, _) in &listed {
            for &code in codes {
                assert!(ae::name(code).is_some_and(|n| n.starts_with("IRDMA_AE_")), "AE {code:#06x}");
            }
        }
        assert_eq!(ae::name(0x0114), Some("IRDMA_AE_AMP_MWBIND_VALID_STAG"));
        assert_eq!(ae::name(0x011b), Some("IRDMA_AE_AMP_MWBIND_BIND_DISABLED"));
        assert_eq!(ae::name(0x0303), Some("IRDMA_AE_DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER"));
        assert_eq!(ae::name(0x0101), None);
    }

    #[test]
    fn ae_codes_translate() {
        assert_eq!(ae_to_flush_code(0x0108), flush::PROT_ERR);
        assert_eq!(ae_to_flush_code(0x020a), flush::LOC_QP_OP_ERR);
        assert_eq!(ae_to_flush_code(0x0303), flush::LOC_LEN_ERR);
        assert_eq!(ae_to_flush_code(0x020d), flush::REM_ACCESS_ERR);
        assert_eq!(ae_to_flush_code(0x0119), flush::MW_BIND_ERR);
        assert_eq!(ae_to_flush_code(0x050a), flush::RETRY_EXC_ERR);
        assert_eq!(ae_to_flush_code(0x0208), flush::REM_INV_REQ_ERR);
        assert_eq!(ae_to_flush_code(0x0316), flush::REM_OP_ERR);
        assert_eq!(ae_to_flush_code(0x050f), flush::RNR_RETRY_EXC_ERR);
        assert_eq!(ae_to_flush_code(0x0704), flush::FATAL_ERR);
        assert_eq!(ae_to_flush_code(0x1234), flush::GENERAL_ERR);
        assert_eq!(classify_error(0xfffe, 0x0108, Compat::Current), (CompStatus::Flushed(2), 2));
        assert_eq!(classify_error(0xfffe, 0x0108, Compat::V52), (CompStatus::Unknown, 0x0108));
        assert_eq!(classify_error(0xfffe, 0x0108, Compat::V44), (CompStatus::Unknown, 0x0108));
        assert_eq!(classify_error(1, 3, Compat::Current), (CompStatus::Flushed(3), 3));
        assert_eq!(classify_error(2, 3, Compat::Current), (CompStatus::Unknown, 3));
        assert_eq!(vendor_err(1, 3), 0x0001_0003);
    }

    #[test]
    fn opcode_tables() {
        let cur = Compat::Current;
        assert_eq!(sq_opcode(0x0d, cur), Some(WcOpcode::RdmaWrite));
        assert_eq!(sq_opcode(0x06, cur), Some(WcOpcode::Send));
        assert_eq!(sq_opcode(0x11, cur), Some(WcOpcode::CompSwap));
        assert_eq!(sq_opcode(0x0f, cur), Some(WcOpcode::FetchAdd));
        assert_eq!(sq_opcode(0x0a, cur), Some(WcOpcode::LocalInv));
        assert_eq!(sq_opcode(0x09, cur), None);
        assert_eq!(sq_opcode(0x0c, cur), None);
        // v44 to v63 have no atomic cases (they came with v64).
        for old in [Compat::V52, Compat::V44] {
            assert_eq!(sq_opcode(0x11, old), None);
            assert_eq!(sq_opcode(0x0f, old), None);
        }
        assert_eq!(sq_opcode(0x0a, Compat::V44), Some(WcOpcode::LocalInv));
        assert_eq!(rq_opcode(0x0b, false, true, true, Compat::Current), WcOpcode::RecvRdmaWithImm);
        assert_eq!(rq_opcode(0x09, false, true, true, Compat::Current), WcOpcode::RecvRdmaWithImm);
        assert_eq!(rq_opcode(0x0b, false, true, true, Compat::V52), WcOpcode::RecvRdmaWithImm);
        assert_eq!(rq_opcode(0x0b, false, true, true, Compat::V44), WcOpcode::Recv);
        assert_eq!(rq_opcode(0x05, false, true, true, Compat::Current), WcOpcode::Recv);
        assert_eq!(rq_opcode(0x00, false, false, true, Compat::Current), WcOpcode::RecvRdmaWithImm);
        assert_eq!(rq_opcode(0x00, false, false, false, Compat::Current), WcOpcode::Recv);
        assert_eq!(rq_opcode(0x0d, true, true, false, Compat::Current), WcOpcode::RecvRdmaWithImm);
        assert_eq!(rq_opcode(0x0b, true, true, true, Compat::Current), WcOpcode::Recv);
    }
}
