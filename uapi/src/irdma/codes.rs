//! Numeric codes in irdma CQEs: SQ WQE opcodes, received RoCE opcodes, major errors, flush
//! (minor) codes and the asynchronous-event codes a GEN3 SRQ flush carries
//! (rdma-core `providers/irdma/uverbs.c` `set_ib_wc_op_sq`, `set_ib_wc_op_rq`,
//! `irdma_flush_err_to_ib_wc_status`; `providers/irdma/uk.c` `irdma_uk_cq_poll_cmpl` for the
//! major and minor errors).

/// SQ WQE opcodes (`IRDMA_OP_TYPE_*`/`IRDMAQP_OP_*`), echoed in an SQ CQE's `IRDMACQ_OP`.
pub mod sq_op {
    code_table! {
        u8, "IRDMA_OP_TYPE_",
        RDMA_WRITE = 0x00;
        RDMA_READ = 0x01;
        SEND = 0x03;
        /// SEND with invalidate.
        SEND_INV = 0x04;
        /// SEND with solicited event.
        SEND_SOL = 0x05;
        /// SEND with solicited event and invalidate.
        SEND_SOL_INV = 0x06;
        /// Memory-window bind.
        BIND_MW = 0x08;
        /// Fast register (no `ibv_wc` opcode: status becomes GENERAL_ERR in rdma-core's
        /// `set_ib_wc_op_sq`).
        FAST_REG_NSMR = 0x09;
        /// Local invalidate.
        INV_STAG = 0x0a;
        /// RDMA READ with local invalidate (no `ibv_wc` opcode).
        RDMA_READ_INV_STAG = 0x0b;
        /// The provider's padding WQE.
        NOP = 0x0c;
        /// RDMA WRITE with solicited event.
        RDMA_WRITE_SOL = 0x0d;
        /// v64+.
        ATOMIC_FETCH_AND_ADD = 0x0f;
        /// v64+.
        ATOMIC_COMPARE_AND_SWAP = 0x11;
    }
}

/// Receive-side opcodes.
pub mod rq_op {
    /// GEN2 RoCE: IB `RDMA_WRITE_LAST_WITH_IMMEDIATE`.
    pub const ROCE_WRITE_LAST_WITH_IMM: u8 = 0x09;
    /// GEN2 RoCE: IB `RDMA_WRITE_ONLY_WITH_IMMEDIATE`.
    pub const ROCE_WRITE_ONLY_WITH_IMM: u8 = 0x0b;
    /// GEN2 RoCE: IB `SEND_ONLY` (any value other than 0x09/0x0b means a send).
    pub const ROCE_SEND_ONLY: u8 = 0x04;
    /// GEN2 RoCE: IB `SEND_ONLY_WITH_IMMEDIATE`.
    pub const ROCE_SEND_ONLY_WITH_IMM: u8 = 0x05;
    /// GEN3 software op: RDMA WRITE (with immediate on the receive side).
    pub const GEN3_WRITE_IMM: u8 = 0x00;
    /// GEN3 software op: RDMA WRITE with solicited event (with immediate).
    pub const GEN3_WRITE_SOL_IMM: u8 = 0x0d;
    /// `IRDMA_OP_TYPE_REC`: what rdma-core before v52 overwrote the receive opcode with.
    pub const OP_TYPE_REC: u8 = 0x3e;
    /// `IRDMA_OP_TYPE_REC_IMM`: the same, for receives with immediate data.
    pub const OP_TYPE_REC_IMM: u8 = 0x3f;
}

/// Major error codes.
pub mod major {
    /// `IRDMA_FLUSH_MAJOR_ERR`.
    pub const FLUSH: u16 = 1;
    /// `IRDMA_SRQFLUSH_RSVD_MAJOR_ERR` (GEN3, v64+): the minor is an AE code.
    pub const SRQ_FLUSH: u16 = 0xfffe;
    /// High nibble of the "CIE" non-fatal UD send errors (`major >> 12 == 0xE`, v64+).
    pub const CIE_NIBBLE: u16 = 0xe;
}

/// Flush (minor) codes, `enum irdma_flush_opcode` (rdma-core `providers/irdma/user.h`).
pub mod flush {
    code_table! {
        u16, "FLUSH_",
        INVALID = 0;
        GENERAL_ERR = 1;
        PROT_ERR = 2;
        REM_ACCESS_ERR = 3;
        LOC_QP_OP_ERR = 4;
        REM_OP_ERR = 5;
        LOC_LEN_ERR = 6;
        FATAL_ERR = 7;
        RETRY_EXC_ERR = 8;
        MW_BIND_ERR = 9;
        REM_INV_REQ_ERR = 10;
        /// rdma-core v64+.
        RNR_RETRY_EXC_ERR = 11;
    }
}

/// Asynchronous-event codes: those `irdma_ae_to_qp_err_code` translates (rdma-core
/// `providers/irdma/user.h`), and two others a decoder meets.
pub mod ae {
    code_table! {
        u16, "IRDMA_AE_",
        AMP_UNALLOCATED_STAG = 0x0102;
        AMP_INVALID_STAG = 0x0103;
        AMP_BAD_QP = 0x0104;
        AMP_BAD_PD = 0x0105;
        AMP_BAD_STAG_KEY = 0x0106;
        AMP_BAD_STAG_INDEX = 0x0107;
        AMP_BOUNDS_VIOLATION = 0x0108;
        AMP_RIGHTS_VIOLATION = 0x0109;
        AMP_TO_WRAP = 0x010a;
        AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS = 0x0112;
        AMP_MWBIND_VALID_STAG = 0x0114;
        AMP_MWBIND_INVALID_RIGHTS = 0x0118;
        AMP_MWBIND_INVALID_BOUNDS = 0x0119;
        /// Not translated: a general error.
        AMP_MWBIND_TO_INVALID_PARENT = 0x011a;
        AMP_MWBIND_BIND_DISABLED = 0x011b;
        PRIV_OPERATION_DENIED = 0x011c;
        UDA_XMIT_DGRAM_TOO_LONG = 0x0132;
        UDA_XMIT_BAD_PD = 0x0133;
        UDA_XMIT_DGRAM_TOO_SHORT = 0x0134;
        UDA_L4LEN_INVALID = 0x0135;
        /// Raised on CQ overflow (kernel `hw.c` `irdma_process_aeq` turns it into
        /// `IB_EVENT_CQ_ERR`); not translated.
        CQ_OPERATION_ERROR = 0x0203;
        IB_INVALID_REQUEST = 0x0208;
        WQE_UNEXPECTED_OPCODE = 0x020a;
        IB_REMOTE_ACCESS_ERROR = 0x020d;
        IB_REMOTE_OP_ERROR = 0x020e;
        DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER = 0x0303;
        DDP_UBE_INVALID_MO = 0x0305;
        ROCE_RSP_LENGTH_ERROR = 0x0316;
        LLP_RECEIVED_MPA_CRC_ERROR = 0x0505;
        LLP_SEGMENT_TOO_SMALL = 0x0507;
        LLP_TOO_MANY_RETRIES = 0x050a;
        LLP_TOO_MANY_RNRS = 0x050f;
        LCE_QP_CATASTROPHIC = 0x0700;
        REMOTE_QP_CATASTROPHIC = 0x0703;
        LOCAL_QP_CATASTROPHIC = 0x0704;
        RCE_QP_CATASTROPHIC = 0x0705;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name by number, as rdma-core's `providers/irdma/defs.h` and `user.h` define them;
    /// any other value has none.
    #[test]
    fn names_are_rdma_core_s_by_number() {
        let sq: [(u8, &str); 14] = [
            (0x00, "IRDMA_OP_TYPE_RDMA_WRITE"),
            (0x01, "IRDMA_OP_TYPE_RDMA_READ"),
            (0x03, "IRDMA_OP_TYPE_SEND"),
            (0x04, "IRDMA_OP_TYPE_SEND_INV"),
            (0x05, "IRDMA_OP_TYPE_SEND_SOL"),
            (0x06, "IRDMA_OP_TYPE_SEND_SOL_INV"),
            (0x08, "IRDMA_OP_TYPE_BIND_MW"),
            (0x09, "IRDMA_OP_TYPE_FAST_REG_NSMR"),
            (0x0a, "IRDMA_OP_TYPE_INV_STAG"),
            (0x0b, "IRDMA_OP_TYPE_RDMA_READ_INV_STAG"),
            (0x0c, "IRDMA_OP_TYPE_NOP"),
            (0x0d, "IRDMA_OP_TYPE_RDMA_WRITE_SOL"),
            (0x0f, "IRDMA_OP_TYPE_ATOMIC_FETCH_AND_ADD"),
            (0x11, "IRDMA_OP_TYPE_ATOMIC_COMPARE_AND_SWAP"),
        ];
        for op in 0..=u8::MAX {
            let want = sq.iter().find(|e| e.0 == op).map(|e| e.1);
            assert_eq!(sq_op::name(op), want, "SQ opcode {op:#04x}");
        }
        let flushes = [
            "INVALID",
            "GENERAL_ERR",
            "PROT_ERR",
            "REM_ACCESS_ERR",
            "LOC_QP_OP_ERR",
            "REM_OP_ERR",
            "LOC_LEN_ERR",
            "FATAL_ERR",
            "RETRY_EXC_ERR",
            "MW_BIND_ERR",
            "REM_INV_REQ_ERR",
            "RNR_RETRY_EXC_ERR",
        ];
        let ae: [(u16, &str); 36] = [
            (0x0102, "AMP_UNALLOCATED_STAG"),
            (0x0103, "AMP_INVALID_STAG"),
            (0x0104, "AMP_BAD_QP"),
            (0x0105, "AMP_BAD_PD"),
            (0x0106, "AMP_BAD_STAG_KEY"),
            (0x0107, "AMP_BAD_STAG_INDEX"),
            (0x0108, "AMP_BOUNDS_VIOLATION"),
            (0x0109, "AMP_RIGHTS_VIOLATION"),
            (0x010a, "AMP_TO_WRAP"),
            (0x0112, "AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS"),
            (0x0114, "AMP_MWBIND_VALID_STAG"),
            (0x0118, "AMP_MWBIND_INVALID_RIGHTS"),
            (0x0119, "AMP_MWBIND_INVALID_BOUNDS"),
            (0x011a, "AMP_MWBIND_TO_INVALID_PARENT"),
            (0x011b, "AMP_MWBIND_BIND_DISABLED"),
            (0x011c, "PRIV_OPERATION_DENIED"),
            (0x0132, "UDA_XMIT_DGRAM_TOO_LONG"),
            (0x0133, "UDA_XMIT_BAD_PD"),
            (0x0134, "UDA_XMIT_DGRAM_TOO_SHORT"),
            (0x0135, "UDA_L4LEN_INVALID"),
            (0x0203, "CQ_OPERATION_ERROR"),
            (0x0208, "IB_INVALID_REQUEST"),
            (0x020a, "WQE_UNEXPECTED_OPCODE"),
            (0x020d, "IB_REMOTE_ACCESS_ERROR"),
            (0x020e, "IB_REMOTE_OP_ERROR"),
            (0x0303, "DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER"),
            (0x0305, "DDP_UBE_INVALID_MO"),
            (0x0316, "ROCE_RSP_LENGTH_ERROR"),
            (0x0505, "LLP_RECEIVED_MPA_CRC_ERROR"),
            (0x0507, "LLP_SEGMENT_TOO_SMALL"),
            (0x050a, "LLP_TOO_MANY_RETRIES"),
            (0x050f, "LLP_TOO_MANY_RNRS"),
            (0x0700, "LCE_QP_CATASTROPHIC"),
            (0x0703, "REMOTE_QP_CATASTROPHIC"),
            (0x0704, "LOCAL_QP_CATASTROPHIC"),
            (0x0705, "RCE_QP_CATASTROPHIC"),
        ];
        for code in 0..=u16::MAX {
            let name = flush::name(code);
            assert_eq!(
                name.map(|n| n.strip_prefix("FLUSH_")),
                flushes.get(usize::from(code)).map(|&n| Some(n)),
                "flush {code}"
            );
            let name = ae::name(code);
            let want = ae.iter().find(|e| e.0 == code).map(|e| Some(e.1));
            assert_eq!(name.map(|n| n.strip_prefix("IRDMA_AE_")), want, "AE code {code:#06x}");
        }
    }
}
