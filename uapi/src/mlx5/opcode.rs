//! Numeric codes that appear in mlx5 CQEs: CQE opcodes (the high nibble of `op_own`), CQE
//! formats, error syndromes, and the send-WQE opcodes a requester CQE echoes
//! (shared/spec/mlx5.md §2, §7.1, §8).

/// CQE opcodes, `MLX5_CQE_*` (`op_own >> 4`).
pub mod cqe_opcode {
    /// `MLX5_CQE_REQ`: successful requester (send-queue) completion.
    pub const REQ: u8 = 0;
    /// `MLX5_CQE_RESP_WR_IMM`: responder, RDMA WRITE with immediate.
    pub const RESP_WR_IMM: u8 = 1;
    /// `MLX5_CQE_RESP_SEND`: responder, SEND.
    pub const RESP_SEND: u8 = 2;
    /// `MLX5_CQE_RESP_SEND_IMM`: responder, SEND with immediate.
    pub const RESP_SEND_IMM: u8 = 3;
    /// `MLX5_CQE_RESP_SEND_INV`: responder, SEND with invalidate.
    pub const RESP_SEND_INV: u8 = 4;
    /// `MLX5_CQE_RESIZE_CQ`: the last CQE written to the old buffer of a resized CQ.
    pub const RESIZE_CQ: u8 = 5;
    /// `MLX5_CQE_NO_PACKET`: tag-matching list operation completion.
    pub const NO_PACKET: u8 = 6;
    /// `MLX5_CQE_SIG_ERR`: signature error, consumed by the provider (no work completion).
    pub const SIG_ERR: u8 = 12;
    /// `MLX5_CQE_REQ_ERR`: requester error.
    pub const REQ_ERR: u8 = 13;
    /// `MLX5_CQE_RESP_ERR`: responder error.
    pub const RESP_ERR: u8 = 14;
    /// `MLX5_CQE_INVALID`: a slot software initialised and hardware has not written.
    pub const INVALID: u8 = 15;

    /// The rdma-core name of a CQE opcode, or `None` for a value no header defines.
    pub const fn name(op: u8) -> Option<&'static str> {
        Some(match op {
            REQ => "MLX5_CQE_REQ",
            RESP_WR_IMM => "MLX5_CQE_RESP_WR_IMM",
            RESP_SEND => "MLX5_CQE_RESP_SEND",
            RESP_SEND_IMM => "MLX5_CQE_RESP_SEND_IMM",
            RESP_SEND_INV => "MLX5_CQE_RESP_SEND_INV",
            RESIZE_CQ => "MLX5_CQE_RESIZE_CQ",
            NO_PACKET => "MLX5_CQE_NO_PACKET",
            SIG_ERR => "MLX5_CQE_SIG_ERR",
            REQ_ERR => "MLX5_CQE_REQ_ERR",
            RESP_ERR => "MLX5_CQE_RESP_ERR",
            INVALID => "MLX5_CQE_INVALID",
            _ => return None,
        })
    }
}

/// CQE formats, bits 3:2 of `op_own`.
pub mod cqe_format {
    /// No inline data.
    pub const NO_INLINE: u8 = 0;
    /// `MLX5_INLINE_SCATTER_32`: up to 32 payload bytes in bytes 0..32 of the cqe64.
    pub const INLINE_SCATTER_32: u8 = 1;
    /// `MLX5_INLINE_SCATTER_64`: up to 64 payload bytes in the first half of a 128-byte CQE.
    pub const INLINE_SCATTER_64: u8 = 2;
    /// `MLX5_COMPRESSED`: a compression title (basic layout) or mini-CQE block (enhanced).
    pub const COMPRESSED: u8 = 3;
}

/// Error syndromes, `MLX5_CQE_SYNDROME_*` (byte 55 of an error CQE).
pub mod syndrome {
    /// Local length error.
    pub const LOCAL_LENGTH_ERR: u8 = 0x01;
    /// Local QP operation error.
    pub const LOCAL_QP_OP_ERR: u8 = 0x02;
    /// Local protection error.
    pub const LOCAL_PROT_ERR: u8 = 0x04;
    /// Work request flushed.
    pub const WR_FLUSH_ERR: u8 = 0x05;
    /// Memory window bind error.
    pub const MW_BIND_ERR: u8 = 0x06;
    /// Bad response.
    pub const BAD_RESP_ERR: u8 = 0x10;
    /// Local access error.
    pub const LOCAL_ACCESS_ERR: u8 = 0x11;
    /// Remote invalid request.
    pub const REMOTE_INVAL_REQ_ERR: u8 = 0x12;
    /// Remote access error.
    pub const REMOTE_ACCESS_ERR: u8 = 0x13;
    /// Remote operation error.
    pub const REMOTE_OP_ERR: u8 = 0x14;
    /// Transport retry counter exceeded.
    pub const TRANSPORT_RETRY_EXC_ERR: u8 = 0x15;
    /// RNR retry counter exceeded.
    pub const RNR_RETRY_EXC_ERR: u8 = 0x16;
    /// Remote aborted.
    pub const REMOTE_ABORTED_ERR: u8 = 0x22;

    /// Every syndrome rdma-core names, in numeric order.
    pub const ALL: [u8; 13] = [
        LOCAL_LENGTH_ERR,
        LOCAL_QP_OP_ERR,
        LOCAL_PROT_ERR,
        WR_FLUSH_ERR,
        MW_BIND_ERR,
        BAD_RESP_ERR,
        LOCAL_ACCESS_ERR,
        REMOTE_INVAL_REQ_ERR,
        REMOTE_ACCESS_ERR,
        REMOTE_OP_ERR,
        TRANSPORT_RETRY_EXC_ERR,
        RNR_RETRY_EXC_ERR,
        REMOTE_ABORTED_ERR,
    ];

    /// The rdma-core name of a syndrome, or `None` for a value no header defines.
    pub const fn name(s: u8) -> Option<&'static str> {
        Some(match s {
            LOCAL_LENGTH_ERR => "MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR",
            LOCAL_QP_OP_ERR => "MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR",
            LOCAL_PROT_ERR => "MLX5_CQE_SYNDROME_LOCAL_PROT_ERR",
            WR_FLUSH_ERR => "MLX5_CQE_SYNDROME_WR_FLUSH_ERR",
            MW_BIND_ERR => "MLX5_CQE_SYNDROME_MW_BIND_ERR",
            BAD_RESP_ERR => "MLX5_CQE_SYNDROME_BAD_RESP_ERR",
            LOCAL_ACCESS_ERR => "MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR",
            REMOTE_INVAL_REQ_ERR => "MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR",
            REMOTE_ACCESS_ERR => "MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR",
            REMOTE_OP_ERR => "MLX5_CQE_SYNDROME_REMOTE_OP_ERR",
            TRANSPORT_RETRY_EXC_ERR => "MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR",
            RNR_RETRY_EXC_ERR => "MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR",
            REMOTE_ABORTED_ERR => "MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR",
            _ => return None,
        })
    }

    /// `MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT`: with [`REMOTE_ABORTED_ERR`] on an SRQ, an
    /// on-demand-paging page fault that rdma-core re-posts and swallows.
    pub const VENDOR_ODP_PFAULT: u8 = 0x93;
}

/// Send-WQE opcodes, `MLX5_OPCODE_*`; a requester CQE carries the completed WQE's opcode in
/// bits 31:24 of `sop_drop_qpn`.
pub mod wqe_opcode {
    /// `MLX5_OPCODE_NOP`.
    pub const NOP: u8 = 0x00;
    /// `MLX5_OPCODE_SEND_INVAL`.
    pub const SEND_INVAL: u8 = 0x01;
    /// `MLX5_OPCODE_RDMA_WRITE`.
    pub const RDMA_WRITE: u8 = 0x08;
    /// `MLX5_OPCODE_RDMA_WRITE_IMM`.
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    /// `MLX5_OPCODE_SEND`.
    pub const SEND: u8 = 0x0a;
    /// `MLX5_OPCODE_SEND_IMM`.
    pub const SEND_IMM: u8 = 0x0b;
    /// `MLX5_OPCODE_TSO`.
    pub const TSO: u8 = 0x0e;
    /// `MLX5_OPCODE_RDMA_READ`.
    pub const RDMA_READ: u8 = 0x10;
    /// `MLX5_OPCODE_ATOMIC_CS`.
    pub const ATOMIC_CS: u8 = 0x11;
    /// `MLX5_OPCODE_ATOMIC_FA`.
    pub const ATOMIC_FA: u8 = 0x12;
    /// `MLX5_OPCODE_ATOMIC_MASKED_CS`.
    pub const ATOMIC_MASKED_CS: u8 = 0x14;
    /// `MLX5_OPCODE_ATOMIC_MASKED_FA`.
    pub const ATOMIC_MASKED_FA: u8 = 0x15;
    /// `MLX5_OPCODE_LOCAL_INVAL`.
    pub const LOCAL_INVAL: u8 = 0x1b;
    /// `MLX5_OPCODE_CONFIG_CMD`.
    pub const CONFIG_CMD: u8 = 0x1f;
    /// `MLX5_OPCODE_SET_PSV`.
    pub const SET_PSV: u8 = 0x20;
    /// `MLX5_OPCODE_UMR`.
    pub const UMR: u8 = 0x25;
    /// `MLX5_OPCODE_TAG_MATCHING`.
    pub const TAG_MATCHING: u8 = 0x28;
    /// `MLX5_OPCODE_FLOW_TBL_ACCESS`.
    pub const FLOW_TBL_ACCESS: u8 = 0x2c;
    /// `MLX5_OPCODE_MMO`.
    pub const MMO: u8 = 0x2f;

    /// The rdma-core name of a send-WQE opcode, or `None` for a value no header defines.
    pub const fn name(op: u8) -> Option<&'static str> {
        Some(match op {
            NOP => "MLX5_OPCODE_NOP",
            SEND_INVAL => "MLX5_OPCODE_SEND_INVAL",
            RDMA_WRITE => "MLX5_OPCODE_RDMA_WRITE",
            RDMA_WRITE_IMM => "MLX5_OPCODE_RDMA_WRITE_IMM",
            SEND => "MLX5_OPCODE_SEND",
            SEND_IMM => "MLX5_OPCODE_SEND_IMM",
            TSO => "MLX5_OPCODE_TSO",
            RDMA_READ => "MLX5_OPCODE_RDMA_READ",
            ATOMIC_CS => "MLX5_OPCODE_ATOMIC_CS",
            ATOMIC_FA => "MLX5_OPCODE_ATOMIC_FA",
            ATOMIC_MASKED_CS => "MLX5_OPCODE_ATOMIC_MASKED_CS",
            ATOMIC_MASKED_FA => "MLX5_OPCODE_ATOMIC_MASKED_FA",
            LOCAL_INVAL => "MLX5_OPCODE_LOCAL_INVAL",
            CONFIG_CMD => "MLX5_OPCODE_CONFIG_CMD",
            SET_PSV => "MLX5_OPCODE_SET_PSV",
            UMR => "MLX5_OPCODE_UMR",
            TAG_MATCHING => "MLX5_OPCODE_TAG_MATCHING",
            FLOW_TBL_ACCESS => "MLX5_OPCODE_FLOW_TBL_ACCESS",
            MMO => "MLX5_OPCODE_MMO",
            _ => return None,
        })
    }
}
