//! Numeric codes that appear in mlx5 CQEs: CQE opcodes (the high nibble of `op_own`), CQE
//! formats, error syndromes, and the send-WQE opcodes a requester CQE echoes
//! (rdma-core `providers/mlx5/mlx5dv.h` `enum MLX5_CQE_*` and `mlx5dv_get_cqe_*`;
//! `providers/mlx5/cq.c` `handle_good_req`, `mlx5_handle_error_cqe`).

/// CQE opcodes, `MLX5_CQE_*` (`op_own >> 4`).
pub mod cqe_opcode {
    code_table! {
        u8, "MLX5_CQE_",
        /// Successful requester (send-queue) completion.
        REQ = 0;
        /// Responder, RDMA WRITE with immediate.
        RESP_WR_IMM = 1;
        /// Responder, SEND.
        RESP_SEND = 2;
        /// Responder, SEND with immediate.
        RESP_SEND_IMM = 3;
        /// Responder, SEND with invalidate.
        RESP_SEND_INV = 4;
        /// The last CQE written to the old buffer of a resized CQ.
        RESIZE_CQ = 5;
        /// Tag-matching list operation completion.
        NO_PACKET = 6;
        /// Signature error, consumed by the provider (no work completion).
        SIG_ERR = 12;
        /// Requester error.
        REQ_ERR = 13;
        /// Responder error.
        RESP_ERR = 14;
        /// A slot software initialised and hardware has not written.
        INVALID = 15;
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
    code_table! {
        u8, "MLX5_CQE_SYNDROME_",
        /// Local length error.
        LOCAL_LENGTH_ERR = 0x01;
        /// Local QP operation error.
        LOCAL_QP_OP_ERR = 0x02;
        /// Local protection error.
        LOCAL_PROT_ERR = 0x04;
        /// Work request flushed.
        WR_FLUSH_ERR = 0x05;
        /// Memory window bind error.
        MW_BIND_ERR = 0x06;
        /// Bad response.
        BAD_RESP_ERR = 0x10;
        /// Local access error.
        LOCAL_ACCESS_ERR = 0x11;
        /// Remote invalid request.
        REMOTE_INVAL_REQ_ERR = 0x12;
        /// Remote access error.
        REMOTE_ACCESS_ERR = 0x13;
        /// Remote operation error.
        REMOTE_OP_ERR = 0x14;
        /// Transport retry counter exceeded.
        TRANSPORT_RETRY_EXC_ERR = 0x15;
        /// RNR retry counter exceeded.
        RNR_RETRY_EXC_ERR = 0x16;
        /// Remote aborted.
        REMOTE_ABORTED_ERR = 0x22;
    }

    /// `MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT`: with [`REMOTE_ABORTED_ERR`] on an SRQ, an
    /// on-demand-paging page fault that rdma-core re-posts and swallows.
    pub const VENDOR_ODP_PFAULT: u8 = 0x93;
}

/// Send-WQE opcodes, `MLX5_OPCODE_*`; a requester CQE carries the completed WQE's opcode in
/// bits 31:24 of `sop_drop_qpn`.
pub mod wqe_opcode {
    code_table! {
        u8, "MLX5_OPCODE_",
        NOP = 0x00;
        SEND_INVAL = 0x01;
        RDMA_WRITE = 0x08;
        RDMA_WRITE_IMM = 0x09;
        SEND = 0x0a;
        SEND_IMM = 0x0b;
        TSO = 0x0e;
        RDMA_READ = 0x10;
        ATOMIC_CS = 0x11;
        ATOMIC_FA = 0x12;
        ATOMIC_MASKED_CS = 0x14;
        ATOMIC_MASKED_FA = 0x15;
        LOCAL_INVAL = 0x1b;
        CONFIG_CMD = 0x1f;
        SET_PSV = 0x20;
        UMR = 0x25;
        TAG_MATCHING = 0x28;
        FLOW_TBL_ACCESS = 0x2c;
        MMO = 0x2f;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table's `name`, its `ALL`, its prefix and its codes by number.
    type Table = (fn(u8) -> Option<&'static str>, &'static [u8], &'static str, &'static [(u8, &'static str)]);

    /// `name` by number for every value of each table (rdma-core `mlx5dv.h`), and `ALL` in
    /// numeric order.
    #[test]
    fn names_by_number() {
        let tables: [Table; 3] = [
            (
                cqe_opcode::name,
                &cqe_opcode::ALL,
                "MLX5_CQE_",
                &[
                    (0, "REQ"),
                    (1, "RESP_WR_IMM"),
                    (2, "RESP_SEND"),
                    (3, "RESP_SEND_IMM"),
                    (4, "RESP_SEND_INV"),
                    (5, "RESIZE_CQ"),
                    (6, "NO_PACKET"),
                    (12, "SIG_ERR"),
                    (13, "REQ_ERR"),
                    (14, "RESP_ERR"),
                    (15, "INVALID"),
                ],
            ),
            (
                syndrome::name,
                &syndrome::ALL,
                "MLX5_CQE_SYNDROME_",
                &[
                    (0x01, "LOCAL_LENGTH_ERR"),
                    (0x02, "LOCAL_QP_OP_ERR"),
                    (0x04, "LOCAL_PROT_ERR"),
                    (0x05, "WR_FLUSH_ERR"),
                    (0x06, "MW_BIND_ERR"),
                    (0x10, "BAD_RESP_ERR"),
                    (0x11, "LOCAL_ACCESS_ERR"),
                    (0x12, "REMOTE_INVAL_REQ_ERR"),
                    (0x13, "REMOTE_ACCESS_ERR"),
                    (0x14, "REMOTE_OP_ERR"),
                    (0x15, "TRANSPORT_RETRY_EXC_ERR"),
                    (0x16, "RNR_RETRY_EXC_ERR"),
                    (0x22, "REMOTE_ABORTED_ERR"),
                ],
            ),
            (
                wqe_opcode::name,
                &wqe_opcode::ALL,
                "MLX5_OPCODE_",
                &[
                    (0x00, "NOP"),
                    (0x01, "SEND_INVAL"),
                    (0x08, "RDMA_WRITE"),
                    (0x09, "RDMA_WRITE_IMM"),
                    (0x0a, "SEND"),
                    (0x0b, "SEND_IMM"),
                    (0x0e, "TSO"),
                    (0x10, "RDMA_READ"),
                    (0x11, "ATOMIC_CS"),
                    (0x12, "ATOMIC_FA"),
                    (0x14, "ATOMIC_MASKED_CS"),
                    (0x15, "ATOMIC_MASKED_FA"),
                    (0x1b, "LOCAL_INVAL"),
                    (0x1f, "CONFIG_CMD"),
                    (0x20, "SET_PSV"),
                    (0x25, "UMR"),
                    (0x28, "TAG_MATCHING"),
                    (0x2c, "FLOW_TBL_ACCESS"),
                    (0x2f, "MMO"),
                ],
            ),
        ];
        for (name, all, prefix, want) in tables {
            for v in 0..=u8::MAX {
                let expected = want.iter().find(|e| e.0 == v).map(|e| Some(e.1));
                assert_eq!(name(v).map(|n| n.strip_prefix(prefix)), expected, "{prefix} {v:#04x}");
            }
            assert!(all.len() == want.len() && all.iter().zip(want).all(|(a, w)| *a == w.0), "{prefix}");
        }
    }
}
