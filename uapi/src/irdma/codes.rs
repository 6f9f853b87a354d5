//! Numeric codes in irdma CQEs: SQ WQE opcodes, received RoCE opcodes, major errors, flush
//! (minor) codes and the asynchronous-event codes a GEN3 SRQ flush carries
//! (shared/spec/irdma.md §4.7, §5).

/// SQ WQE opcodes (`IRDMA_OP_TYPE_*`/`IRDMAQP_OP_*`), echoed in an SQ CQE's `IRDMACQ_OP`.
pub mod sq_op {
    /// RDMA WRITE.
    pub const RDMA_WRITE: u8 = 0x00;
    /// RDMA READ.
    pub const RDMA_READ: u8 = 0x01;
    /// SEND.
    pub const SEND: u8 = 0x03;
    /// SEND with invalidate.
    pub const SEND_INV: u8 = 0x04;
    /// SEND with solicited event.
    pub const SEND_SOL: u8 = 0x05;
    /// SEND with solicited event and invalidate.
    pub const SEND_SOL_INV: u8 = 0x06;
    /// Memory-window bind.
    pub const BIND_MW: u8 = 0x08;
    /// Fast register (no `ibv_wc` opcode: status becomes GENERAL_ERR, §4.7).
    pub const FAST_REG: u8 = 0x09;
    /// Local invalidate.
    pub const INV_STAG: u8 = 0x0a;
    /// RDMA READ with local invalidate (no `ibv_wc` opcode).
    pub const RDMA_READ_INV_STAG: u8 = 0x0b;
    /// NOP: the provider's padding WQE.
    pub const NOP: u8 = 0x0c;
    /// RDMA WRITE with solicited event.
    pub const RDMA_WRITE_SOL: u8 = 0x0d;
    /// Atomic fetch-and-add (v64+).
    pub const ATOMIC_FETCH_ADD: u8 = 0x0f;
    /// Atomic compare-and-swap (v64+).
    pub const ATOMIC_COMPARE_SWAP: u8 = 0x11;
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

/// Flush (minor) codes, `enum irdma_flush_opcode` (§5.2).
pub mod flush {
    /// `FLUSH_INVALID`.
    pub const INVALID: u16 = 0;
    /// `FLUSH_GENERAL_ERR`.
    pub const GENERAL_ERR: u16 = 1;
    /// `FLUSH_PROT_ERR`.
    pub const PROT_ERR: u16 = 2;
    /// `FLUSH_REM_ACCESS_ERR`.
    pub const REM_ACCESS_ERR: u16 = 3;
    /// `FLUSH_LOC_QP_OP_ERR`.
    pub const LOC_QP_OP_ERR: u16 = 4;
    /// `FLUSH_REM_OP_ERR`.
    pub const REM_OP_ERR: u16 = 5;
    /// `FLUSH_LOC_LEN_ERR`.
    pub const LOC_LEN_ERR: u16 = 6;
    /// `FLUSH_FATAL_ERR`.
    pub const FATAL_ERR: u16 = 7;
    /// `FLUSH_RETRY_EXC_ERR`.
    pub const RETRY_EXC_ERR: u16 = 8;
    /// `FLUSH_MW_BIND_ERR`.
    pub const MW_BIND_ERR: u16 = 9;
    /// `FLUSH_REM_INV_REQ_ERR`.
    pub const REM_INV_REQ_ERR: u16 = 10;
    /// `FLUSH_RNR_RETRY_EXC_ERR` (rdma-core v64+).
    pub const RNR_RETRY_EXC_ERR: u16 = 11;
}

/// Asynchronous-event codes that `irdma_ae_to_qp_err_code` translates (§5.4).
pub mod ae {
    /// `IRDMA_AE_AMP_UNALLOCATED_STAG`.
    pub const AMP_UNALLOCATED_STAG: u16 = 0x0102;
    /// `IRDMA_AE_AMP_INVALID_STAG`.
    pub const AMP_INVALID_STAG: u16 = 0x0103;
    /// `IRDMA_AE_AMP_BAD_QP`.
    pub const AMP_BAD_QP: u16 = 0x0104;
    /// `IRDMA_AE_AMP_BAD_PD`.
    pub const AMP_BAD_PD: u16 = 0x0105;
    /// `IRDMA_AE_AMP_BAD_STAG_KEY`.
    pub const AMP_BAD_STAG_KEY: u16 = 0x0106;
    /// `IRDMA_AE_AMP_BAD_STAG_INDEX`.
    pub const AMP_BAD_STAG_INDEX: u16 = 0x0107;
    /// `IRDMA_AE_AMP_BOUNDS_VIOLATION`.
    pub const AMP_BOUNDS_VIOLATION: u16 = 0x0108;
    /// `IRDMA_AE_AMP_RIGHTS_VIOLATION`.
    pub const AMP_RIGHTS_VIOLATION: u16 = 0x0109;
    /// `IRDMA_AE_AMP_TO_WRAP`.
    pub const AMP_TO_WRAP: u16 = 0x010a;
    /// `IRDMA_AE_AMP_INVALIDATE_NO_REMOTE_ACCESS_RIGHTS`.
    pub const AMP_INVALIDATE_NO_REMOTE_ACCESS: u16 = 0x0112;
    /// `IRDMA_AE_AMP_MWBIND_INVALID_RIGHTS`.
    pub const AMP_MWBIND_INVALID_RIGHTS: u16 = 0x0114;
    /// `IRDMA_AE_AMP_MWBIND_BIND_DISABLED`.
    pub const AMP_MWBIND_BIND_DISABLED: u16 = 0x0118;
    /// `IRDMA_AE_AMP_MWBIND_INVALID_BOUNDS`.
    pub const AMP_MWBIND_INVALID_BOUNDS: u16 = 0x0119;
    /// `IRDMA_AE_AMP_MWBIND_TO_INVALID_PARENT`.
    pub const AMP_MWBIND_TO_INVALID_PARENT: u16 = 0x011b;
    /// `IRDMA_AE_PRIV_OPERATION_DENIED`.
    pub const PRIV_OPERATION_DENIED: u16 = 0x011c;
    /// `IRDMA_AE_IB_INVALID_REQUEST`.
    pub const IB_INVALID_REQUEST: u16 = 0x0208;
    /// `IRDMA_AE_WQE_UNEXPECTED_OPCODE`.
    pub const WQE_UNEXPECTED_OPCODE: u16 = 0x020a;
    /// `IRDMA_AE_IB_REMOTE_ACCESS_ERROR`.
    pub const IB_REMOTE_ACCESS_ERROR: u16 = 0x020d;
    /// `IRDMA_AE_IB_REMOTE_OP_ERROR`.
    pub const IB_REMOTE_OP_ERROR: u16 = 0x020e;
    /// `IRDMA_AE_DDP_UBE_DDP_MESSAGE_TOO_LONG_FOR_AVAILABLE_BUFFER`.
    pub const DDP_MSG_TOO_LONG: u16 = 0x0303;
    /// `IRDMA_AE_DDP_UBE_INVALID_MO`.
    pub const DDP_UBE_INVALID_MO: u16 = 0x0305;
    /// `IRDMA_AE_ROCE_RSP_LENGTH_ERROR`.
    pub const ROCE_RSP_LENGTH_ERROR: u16 = 0x0316;
    /// `IRDMA_AE_UDA_XMIT_DGRAM_TOO_LONG`.
    pub const UDA_XMIT_DGRAM_TOO_LONG: u16 = 0x0132;
    /// `IRDMA_AE_UDA_XMIT_BAD_PD`.
    pub const UDA_XMIT_BAD_PD: u16 = 0x0133;
    /// `IRDMA_AE_UDA_XMIT_DGRAM_TOO_SHORT`.
    pub const UDA_XMIT_DGRAM_TOO_SHORT: u16 = 0x0134;
    /// `IRDMA_AE_UDA_L4LEN_INVALID`.
    pub const UDA_L4LEN_INVALID: u16 = 0x0135;
    /// `IRDMA_AE_LLP_SEGMENT_TOO_SMALL`.
    pub const LLP_SEGMENT_TOO_SMALL: u16 = 0x0507;
    /// `IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR`.
    pub const LLP_RECEIVED_MPA_CRC_ERROR: u16 = 0x0505;
    /// `IRDMA_AE_LLP_TOO_MANY_RETRIES`.
    pub const LLP_TOO_MANY_RETRIES: u16 = 0x050a;
    /// `IRDMA_AE_LLP_TOO_MANY_RNRS`.
    pub const LLP_TOO_MANY_RNRS: u16 = 0x050f;
    /// `IRDMA_AE_LCE_QP_CATASTROPHIC`.
    pub const LCE_QP_CATASTROPHIC: u16 = 0x0700;
    /// A catastrophic-error AE the provider maps to FATAL (0x0703..0x0705, §5.4).
    pub const CATASTROPHIC_0703: u16 = 0x0703;
    /// See [`CATASTROPHIC_0703`].
    pub const CATASTROPHIC_0704: u16 = 0x0704;
    /// See [`CATASTROPHIC_0703`].
    pub const CATASTROPHIC_0705: u16 = 0x0705;
    /// `IRDMA_AE_CQ_OPERATION_ERROR`: raised on CQ overflow (§8.7).
    pub const CQ_OPERATION_ERROR: u16 = 0x0203;
}
