//! Error syndrome → `ibv_wc_status` (rdma-core `providers/mlx5/cq.c` `mlx5_handle_error_cqe`).

use dvcq_provider::WcStatus;
use dvcq_uapi::mlx5::opcode::syndrome;

/// The `ibv_wc_status` rdma-core reports for an error CQE's syndrome; any syndrome it does
/// not list is `IBV_WC_GENERAL_ERR`.
#[inline]
pub const fn syndrome_status(s: u8) -> WcStatus {
    match s {
        syndrome::LOCAL_LENGTH_ERR => WcStatus::LocLenErr,
        syndrome::LOCAL_QP_OP_ERR => WcStatus::LocQpOpErr,
        syndrome::LOCAL_PROT_ERR => WcStatus::LocProtErr,
        syndrome::WR_FLUSH_ERR => WcStatus::WrFlushErr,
        syndrome::MW_BIND_ERR => WcStatus::MwBindErr,
        syndrome::BAD_RESP_ERR => WcStatus::BadRespErr,
        syndrome::LOCAL_ACCESS_ERR => WcStatus::LocAccessErr,
        syndrome::REMOTE_INVAL_REQ_ERR => WcStatus::RemInvReqErr,
        syndrome::REMOTE_ACCESS_ERR => WcStatus::RemAccessErr,
        syndrome::REMOTE_OP_ERR => WcStatus::RemOpErr,
        syndrome::TRANSPORT_RETRY_EXC_ERR => WcStatus::RetryExcErr,
        syndrome::RNR_RETRY_EXC_ERR => WcStatus::RnrRetryExcErr,
        syndrome::REMOTE_ABORTED_ERR => WcStatus::RemAbortErr,
        _ => WcStatus::GeneralErr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_rdma_core() {
        let expect = [
            (0x01, 1),
            (0x02, 2),
            (0x04, 4),
            (0x05, 5),
            (0x06, 6),
            (0x10, 7),
            (0x11, 8),
            (0x12, 9),
            (0x13, 10),
            (0x14, 11),
            (0x15, 12),
            (0x16, 13),
            (0x22, 16),
        ];
        for (s, st) in expect {
            assert_eq!(syndrome_status(s) as u32, st, "syndrome {s:#x}");
        }
        for s in 0..=255u8 {
            if !expect.iter().any(|&(e, _)| e == s) {
                assert_eq!(syndrome_status(s), WcStatus::GeneralErr);
            }
        }
    }
}
