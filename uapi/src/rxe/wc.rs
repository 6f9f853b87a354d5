//! `struct ib_uverbs_wc` (kernel uapi `ib_user_verbs.h`): the work completion the kernel
//! hands to userspace, and the record `rdma_rxe` writes into a user CQ's queue buffer.
//!
//! Its first 46 bytes have the layout of libibverbs' `struct ibv_wc` (48 bytes with tail
//! padding), which is why rdma-core's `rxe_poll_cq` can `memcpy` a record into an `ibv_wc`:
//! `port_num` and `reserved` land in the `ibv_wc`'s padding. `status` and `opcode` carry
//! the kernel's `ib_wc_status` / `ib_wc_opcode` numbers, which for user CQs are the
//! libibverbs numbers.

use bytemuck::{Pod, Zeroable};
use core::mem::{align_of, offset_of, size_of};
use static_assertions::const_assert_eq;

/// `sizeof(struct ib_uverbs_wc)`: the least element stride a CQ queue buffer may have
/// (rdma-core's `rxe_create_cq` refuses a smaller `1 << log2_elem_size`).
pub const UVERBS_WC_SIZE: usize = 48;

/// `struct ib_uverbs_wc`, every field in host byte order except `ex` (see there).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
pub struct UverbsWc {
    /// `wr_id` (`__aligned_u64`).
    pub wr_id: u64,
    /// `status`: `ib_wc_status`, the libibverbs `ibv_wc_status` numbers.
    pub status: u32,
    /// `opcode`: `ib_wc_opcode`, the libibverbs `ibv_wc_opcode` numbers.
    pub opcode: u32,
    /// `vendor_err`.
    pub vendor_err: u32,
    /// `byte_len`.
    pub byte_len: u32,
    /// `ex`: the union of `imm_data` (`__be32`: the immediate in network byte order, held
    /// as the four bytes the wire carried, so a host read gives what `ibv_wc.imm_data`
    /// holds) and `invalidate_rkey` (host order). Which one: `IB_WC_WITH_IMM` or
    /// `IB_WC_WITH_INVALIDATE` in `wc_flags`.
    pub ex: u32,
    /// `qp_num`: the local QP.
    pub qp_num: u32,
    /// `src_qp`: the remote QP (UD and responder completions).
    pub src_qp: u32,
    /// `wc_flags`: `ib_wc_flags`, the libibverbs `ibv_wc_flags` bits.
    pub wc_flags: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `slid`.
    pub slid: u16,
    /// `sl`.
    pub sl: u8,
    /// `dlid_path_bits`.
    pub dlid_path_bits: u8,
    /// `port_num`: not part of `ibv_wc` (it falls in the `ibv_wc`'s tail padding).
    pub port_num: u8,
    /// `reserved`.
    pub reserved: u8,
}

const_assert_eq!(size_of::<UverbsWc>(), UVERBS_WC_SIZE);
const_assert_eq!(align_of::<UverbsWc>(), 8);
const_assert_eq!(offset_of!(UverbsWc, wr_id), 0);
const_assert_eq!(offset_of!(UverbsWc, status), 8);
const_assert_eq!(offset_of!(UverbsWc, opcode), 12);
const_assert_eq!(offset_of!(UverbsWc, vendor_err), 16);
const_assert_eq!(offset_of!(UverbsWc, byte_len), 20);
const_assert_eq!(offset_of!(UverbsWc, ex), 24);
const_assert_eq!(offset_of!(UverbsWc, qp_num), 28);
const_assert_eq!(offset_of!(UverbsWc, src_qp), 32);
const_assert_eq!(offset_of!(UverbsWc, wc_flags), 36);
const_assert_eq!(offset_of!(UverbsWc, pkey_index), 40);
const_assert_eq!(offset_of!(UverbsWc, slid), 42);
const_assert_eq!(offset_of!(UverbsWc, sl), 44);
const_assert_eq!(offset_of!(UverbsWc, dlid_path_bits), 45);
const_assert_eq!(offset_of!(UverbsWc, port_num), 46);
const_assert_eq!(offset_of!(UverbsWc, reserved), 47);

/// Bytes of `ib_uverbs_wc` that `ibv_wc` has fields for: everything before `port_num`.
pub const IBV_WC_FIELD_BYTES: usize = offset_of!(UverbsWc, port_num);

#[cfg(test)]
mod tests {
    use super::*;

    /// A record read from bytes gives each field from its own bytes, in host order.
    #[test]
    fn fields_come_from_their_own_bytes() {
        let mut b = [0u8; UVERBS_WC_SIZE];
        for (i, x) in b.iter_mut().enumerate() {
            *x = i as u8 + 1;
        }
        let wc: UverbsWc = bytemuck::pod_read_unaligned(&b);
        let ne32 = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        let ne16 = |o: usize| u16::from_ne_bytes(b[o..o + 2].try_into().unwrap());
        assert_eq!(wc.wr_id, u64::from_ne_bytes(b[0..8].try_into().unwrap()));
        assert_eq!((wc.status, wc.opcode, wc.vendor_err, wc.byte_len), (ne32(8), ne32(12), ne32(16), ne32(20)));
        assert_eq!((wc.ex, wc.qp_num, wc.src_qp, wc.wc_flags), (ne32(24), ne32(28), ne32(32), ne32(36)));
        assert_eq!((wc.pkey_index, wc.slid), (ne16(40), ne16(42)));
        assert_eq!((wc.sl, wc.dlid_path_bits, wc.port_num, wc.reserved), (45, 46, 47, 48));
        assert_eq!(IBV_WC_FIELD_BYTES, 46);
    }
}
