//! Signature errors: what a SIG_ERR CQE (opcode 12) reports, and where the poller puts it.
//!
//! A memory key created with signature offload (`mlx5dv_create_mkey` with
//! `MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE`) makes the device check T10-DIF or CRC
//! signatures as data passes through it. A failed check is not a work completion: the
//! device writes a SIG_ERR CQE naming the mkey (`struct mlx5_sigerr_cqe`, uapi's
//! [`SigErrCqe`]). rdma-core's poll (`mlx5_parse_cqe`, since v36) looks the mkey up by index
//! (`mlx5_find_mkey(mkey >> 8)`):
//!
//! - a known mkey gets the error recorded on it (`err_exists`, `err_count`, the details from
//!   `get_sig_err_info`) and the CQE produces nothing; the application reads the record with
//!   `mlx5dv_mkey_check`, which clears it;
//! - an unknown mkey fails the whole poll (`CQ_POLL_ERR`: `ibv_poll_cq` returns -2), the
//!   error's details lost.
//!
//! dvcq follows the first rule for the mkeys registered with
//! [`crate::Registry::add_sig_mkey`], whose records [`crate::Registry::mkey_check`] reads as
//! `mlx5dv_mkey_check` does. It does not follow the second: failing the poll would lose
//! the completions polled before it in the same call and the error itself, so a SIG_ERR
//! CQE naming an mkey nobody registered is a fault item of kind
//! [`dvcq_provider::FaultKind::SigErr`] in the CQE's place, which carries every detail
//! ([`SigError::from_item`] reads them back).

use dvcq_provider::{Completion, CqeFault, FaultKind};
use dvcq_uapi::mlx5::err_cqe::SigErrCqe;

/// `MLX5_SIGERR_CQE_SYNDROME_REFTAG`: the reference tag check failed.
pub const SYNDROME_REFTAG: u16 = 1 << 11;
/// `MLX5_SIGERR_CQE_SYNDROME_APPTAG`: the application tag check failed.
pub const SYNDROME_APPTAG: u16 = 1 << 12;
/// `MLX5_SIGERR_CQE_SYNDROME_GUARD`: the guard (CRC or T10-DIF checksum) check failed.
pub const SYNDROME_GUARD: u16 = 1 << 13;

/// Which check a signature error reports, in the order rdma-core's `mlx5_decode_sigerr`
/// tests the syndrome bits (`enum mlx5dv_mkey_err_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigCheck {
    /// `MLX5DV_MKEY_SIG_BLOCK_BAD_REFTAG`.
    RefTag,
    /// `MLX5DV_MKEY_SIG_BLOCK_BAD_APPTAG`.
    AppTag,
    /// `MLX5DV_MKEY_SIG_BLOCK_BAD_GUARD`.
    Guard,
}

/// One signature error as rdma-core keeps it (`struct mlx5_sig_err`, filled by
/// `get_sig_err_info`), with the mkey the CQE named.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SigError {
    /// The mkey as the CQE holds it (its index is `mkey >> 8`).
    pub mkey: u32,
    /// The signature syndrome (`SYNDROME_*` bits).
    pub syndrome: u16,
    /// Expected transport signature (bits 63:32) and reference tag (bits 31:0).
    pub expected: u64,
    /// Actual transport signature (bits 63:32) and reference tag (bits 31:0).
    pub actual: u64,
    /// Offset of the error in the data (`sig_err_offset`).
    pub offset: u64,
    /// Signature type, 3 bits (0: block, 1: transaction).
    pub sig_type: u8,
    /// Domain, 3 bits (0: wire, 1: memory).
    pub domain: u8,
}

impl SigError {
    /// The error a SIG_ERR CQE reports (rdma-core `get_sig_err_info`).
    pub fn from_cqe(c: &SigErrCqe) -> SigError {
        SigError {
            mkey: c.mkey.get(),
            syndrome: c.syndrome.get(),
            expected: u64::from(c.expected_trans_sig.get()) << 32 | u64::from(c.expected_ref_tag.get()),
            actual: u64::from(c.actual_trans_sig.get()) << 32 | u64::from(c.actual_ref_tag.get()),
            offset: c.sig_err_offset.get(),
            sig_type: c.sig_type & 7,
            domain: c.domain & 7,
        }
    }

    /// The mkey's index, `mkey >> 8`: what rdma-core looks the mkey up by, and what
    /// [`crate::Registry::add_sig_mkey`] takes.
    pub const fn mkey_index(&self) -> u32 {
        self.mkey >> 8
    }

    /// Which check failed, as `mlx5dv_mkey_check` reports it: the reference tag, else the
    /// application tag, else the guard; `None` for a syndrome with none of those bits, for
    /// which `mlx5dv_mkey_check` fails with `EINVAL` ("unknown signature error").
    pub const fn check(&self) -> Option<SigCheck> {
        if self.syndrome & SYNDROME_REFTAG != 0 {
            Some(SigCheck::RefTag)
        } else if self.syndrome & SYNDROME_APPTAG != 0 {
            Some(SigCheck::AppTag)
        } else if self.syndrome & SYNDROME_GUARD != 0 {
            Some(SigCheck::Guard)
        } else {
            None
        }
    }

    /// The fault item for a SIG_ERR CQE at ring position `pos` whose mkey nobody
    /// registered: [`FaultKind::SigErr`], `qp_num` the mkey index (the fault's value),
    /// `wr_id` the position, and the details in fields a fault item has no other use for
    /// (`vendor_err`: syndrome; `src_qp`:`byte_len`: expected; `imm_data`:`flow_tag_hash`:
    /// actual; `timestamp`: offset; `hdr_type`: the mkey's low byte; `sl`: signature type;
    /// `dlid_path_bits`: domain). Read them with [`SigError::from_item`].
    pub fn to_item(&self, pos: u32) -> Completion {
        let mut c =
            Completion::from_fault(CqeFault { kind: FaultKind::SigErr, position: pos, value: self.mkey_index() });
        c.vendor_err = u32::from(self.syndrome);
        c.src_qp = (self.expected >> 32) as u32;
        c.byte_len = self.expected as u32;
        c.imm_data = (self.actual >> 32) as u32;
        c.flow_tag_hash = self.actual as u32;
        c.timestamp = self.offset;
        c.hdr_type = self.mkey as u8;
        c.sl = self.sig_type;
        c.dlid_path_bits = self.domain;
        c
    }

    /// The signature error a [`FaultKind::SigErr`] item carries ([`SigError::to_item`]);
    /// `None` for any other item.
    pub fn from_item(c: &Completion) -> Option<SigError> {
        let f = c.fault().filter(|f| f.kind == FaultKind::SigErr)?;
        Some(SigError {
            mkey: f.value << 8 | u32::from(c.hdr_type),
            syndrome: c.vendor_err as u16,
            expected: u64::from(c.src_qp) << 32 | u64::from(c.byte_len),
            actual: u64::from(c.imm_data) << 32 | u64::from(c.flow_tag_hash),
            offset: c.timestamp,
            sig_type: c.sl,
            domain: c.dlid_path_bits,
        })
    }
}

/// A signature-enabled mkey's error record, rdma-core's `mlx5_sig_ctx` fields the poll
/// writes (`err_exists`, `err_count`, `err_info`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MkeySig {
    /// The last error, until [`crate::Registry::mkey_check`] takes it (`err_exists`).
    pub(crate) pending: Option<SigError>,
    /// Errors recorded since registration (`err_count`).
    pub(crate) count: u64,
}

impl MkeySig {
    /// Records `e`, as rdma-core's poll does: the last error wins.
    pub(crate) fn record(&mut self, e: SigError) {
        self.pending = Some(e);
        self.count = self.count.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_uapi::{Be16, Be32, Be64};

    fn cqe() -> SigErrCqe {
        SigErrCqe {
            expected_trans_sig: Be32::new(0x1111_2222),
            actual_trans_sig: Be32::new(0x3333_4444),
            expected_ref_tag: Be32::new(0x5555_6666),
            actual_ref_tag: Be32::new(0x7777_8888),
            syndrome: Be16::new(SYNDROME_APPTAG | SYNDROME_GUARD),
            sig_type: 0xf9,
            domain: 0xfa,
            mkey: Be32::new(0x00ab_cd42),
            sig_err_offset: Be64::new(0x1_0000_0200),
            ..SigErrCqe::default()
        }
    }

    /// The details are `get_sig_err_info`'s: the transport signature above the reference
    /// tag, 3-bit type and domain; the check is rdma-core's first syndrome bit.
    #[test]
    fn details_are_rdma_cores() {
        let e = SigError::from_cqe(&cqe());
        assert_eq!((e.expected, e.actual), (0x1111_2222_5555_6666, 0x3333_4444_7777_8888));
        assert_eq!((e.sig_type, e.domain, e.offset, e.mkey_index()), (1, 2, 0x1_0000_0200, 0xabcd));
        assert_eq!(e.check(), Some(SigCheck::AppTag));
        let check = |syndrome| SigError { syndrome, ..e }.check();
        assert_eq!(check(SYNDROME_REFTAG | SYNDROME_GUARD), Some(SigCheck::RefTag));
        assert_eq!(check(SYNDROME_GUARD), Some(SigCheck::Guard));
        assert_eq!(check(0x1), None);
    }

    /// A fault item carries every detail and gives them back; no other item does.
    #[test]
    fn items_carry_every_detail() {
        let e = SigError::from_cqe(&cqe());
        let item = e.to_item(77);
        let f = item.fault().unwrap();
        assert_eq!((f.kind, f.position, f.value), (FaultKind::SigErr, 77, 0xabcd));
        assert_eq!(SigError::from_item(&item), Some(e));
        assert_eq!(SigError::from_item(&Completion::default()), None);
        let other = Completion::from_fault(CqeFault { kind: FaultKind::UnknownQp, position: 1, value: 2 });
        assert_eq!(SigError::from_item(&other), None);
    }
}
