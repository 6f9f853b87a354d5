//! A verbs work-completion record (`struct ibv_wc`, laid out as the kernel's
//! `struct ib_uverbs_wc`, [`UverbsWc`]) as a [`Completion`]: the one place that decides what
//! numbers outside libibverbs' enums become, for every backend that reads such records (the
//! rxe ring's, and rdma-core's `ibv_poll_cq` output).
//!
//! # Numbers outside libibverbs' enums
//!
//! [`WcStatus`] and [`WcOpcode`] hold only the numbers libibverbs defines, so:
//!
//! - an unknown status makes the record a fault item ([`FaultKind::BadField`], the value
//!   being the status): nothing about such a record can be trusted;
//! - an unknown opcode on a successful record makes it a fault item
//!   ([`FaultKind::BadOpcode`], the value being the opcode): its fields cannot be read
//!   without knowing what it completes;
//! - an unknown opcode on an error record keeps the completion, with `opcode`
//!   [`WcOpcode::Send`]: verbs leave the opcode of an error completion undefined, and the
//!   record's `wr_id`, status and `vendor_err` are what the application needs to recover
//!   the work request (rdma_rxe's `wr_to_wc_opcode` answers 0xff for a work-request opcode
//!   it does not know, so this can come from the kernel itself).
//!
//! `wc_flags` keeps every bit the record holds, known or not, as rdma-core's `memcpy` does.

use crate::completion::{Completion, WcFlags, WcOpcode, WcStatus};
use crate::fault::{CqeFault, FaultKind};
use core::mem::{align_of, offset_of};
pub use dvcq_uapi::rxe::wc::UverbsWc;
use static_assertions::const_assert_eq;

impl Completion {
    /// The completion for record `wc` found at `position` (the backend's running count,
    /// named by a fault item). Fields a verbs record has no source for (`wqe_index`, the raw
    /// Ethernet extras, the timestamp) are zero.
    // Not API: the conversion of the rxe backend (dvcq-rxe-dv `record.rs`) and of the generic
    // backend's `ibv_poll_cq` output (dvcq `src/sys/cq.rs`); public only because they are
    // other crates.
    #[doc(hidden)]
    #[inline(always)]
    pub fn from_uverbs_wc(wc: &UverbsWc, position: u32) -> Completion {
        let (status, opcode) = match (WcStatus::from_u32(wc.status), WcOpcode::from_u32(wc.opcode)) {
            (Some(s), Some(op)) => (s, op),
            (Some(s), None) if s != WcStatus::Success => (s, WcOpcode::Send),
            (Some(_), None) => return wc_fault(FaultKind::BadOpcode, position, wc.opcode),
            (None, _) => return wc_fault(FaultKind::BadField, position, wc.status),
        };
        Completion {
            wr_id: wc.wr_id,
            byte_len: wc.byte_len,
            imm_data: wc.ex,
            qp_num: wc.qp_num,
            wc_flags: WcFlags::from_bits_retain(wc.wc_flags),
            status,
            opcode,
            fault_kind: FaultKind::None,
            sl: wc.sl,
            wqe_index: 0,
            pkey_index: wc.pkey_index,
            src_qp: wc.src_qp,
            vendor_err: wc.vendor_err,
            slid: wc.slid,
            dlid_path_bits: wc.dlid_path_bits,
            ..Completion::default()
        }
    }
}

#[cold]
fn wc_fault(kind: FaultKind, position: u32, value: u32) -> Completion {
    Completion::from_fault(CqeFault { kind, position, value })
}

// The byte offsets the word stores below write, beside those pinned in completion.rs
// (`dvcq_uapi::rxe::wc` pins the record's).
const_assert_eq!(align_of::<Completion>(), 8);
const_assert_eq!(offset_of!(Completion, imm_data), 12);
const_assert_eq!(offset_of!(Completion, pkey_index), 30);
const_assert_eq!(offset_of!(Completion, src_qp), 32);
const_assert_eq!(offset_of!(Completion, vendor_err), 36);
const_assert_eq!(offset_of!(Completion, slid), 40);
const_assert_eq!(offset_of!(Completion, dlid_path_bits), 42);
const_assert_eq!(offset_of!(Completion, hdr_ok), 43);
const_assert_eq!(offset_of!(Completion, hdr_type), 44);
const_assert_eq!(offset_of!(Completion, checksum), 46);
const_assert_eq!(offset_of!(Completion, flow_tag_hash), 56);
const_assert_eq!(FaultKind::None as u8, 0);
const_assert_eq!(WcStatus::Success as u8, 0);

impl Completion {
    /// If the record whose six 8-byte words are `w` (each the native-endian load of those 8
    /// bytes of a `struct ib_uverbs_wc`) is a success with an opcode libibverbs defines,
    /// writes its completion, what [`Completion::from_uverbs_wc`] gives, and returns true;
    /// otherwise writes nothing and returns false. On a little-endian machine the
    /// completion is eight whole-word stores instead of a store per field.
    // Not API: the rxe poller's fast path (dvcq-rxe-dv `record.rs`); public only because it
    // is another crate.
    #[doc(hidden)]
    #[inline(always)]
    pub fn try_set_uverbs_success(&mut self, w: &[u64; 6]) -> bool {
        let [w0, w1, w2, w3, w4, w5] = *w;
        let wc = bytemuck::cast::<[u64; 6], UverbsWc>(*w);
        if wc.status != 0 || !known_opcode(wc.opcode) {
            return false;
        }
        if cfg!(target_endian = "big") {
            *self = Completion::from_uverbs_wc(&wc, 0);
            return true;
        }
        const LOW: u64 = 0xffff_ffff;
        // Record words (little-endian): w1 = status | opcode << 32, w2 = vendor_err |
        // byte_len << 32, w3 = ex | qp_num << 32, w4 = src_qp | wc_flags << 32, w5 =
        // pkey_index | slid << 16 | sl << 32 | dlid_path_bits << 40 | port_num << 48 |
        // reserved << 56.
        let words: [u64; 8] = [
            // 0: wr_id.
            w0,
            // 8: byte_len, imm_data.
            (w2 >> 32) | (w3 << 32),
            // 16: qp_num, wc_flags.
            (w3 >> 32) | (w4 & !LOW),
            // 24: status (Success, 0), opcode (below 256, checked), fault_kind (None, 0), sl,
            // wqe_index (0), pkey_index.
            ((w1 >> 24) & 0xff00) | (((w5 >> 32) & 0xff) << 24) | ((w5 & 0xffff) << 48),
            // 32: src_qp, vendor_err.
            (w4 & LOW) | (w2 << 32),
            // 40: slid, dlid_path_bits, hdr_ok (0), hdr_type (0), padding, checksum (0).
            ((w5 >> 16) & 0xffff) | (((w5 >> 40) & 0xff) << 16),
            // 48: timestamp (0).
            0,
            // 56: flow_tag_hash (0), padding.
            0,
        ];
        // SAFETY: a Completion is 64 bytes aligned to 8 (pinned above), so `self` is valid for an aligned write of [u64; 8], held exclusively. The words are a valid Completion at the offsets pinned above and in completion.rs: every byte lands in an integer field, in WcFlags (a transparent u32: any bits), in padding, or in one of the three one-byte enums: status 0 (WcStatus::Success), fault_kind 0 (FaultKind::None) and opcode, the record's opcode number, which `known_opcode` accepted, so it is below 256 and the discriminant of the WcOpcode with that number (the test `known_opcodes_are_the_enums_discriminants` checks both).
        unsafe { (self as *mut Completion).cast::<[u64; 8]>().write(words) }
        true
    }
}

/// Whether `op` is a number [`WcOpcode`] defines (0 to 9, 128 to 137): two comparisons
/// instead of [`WcOpcode::from_u32`]'s table.
#[inline(always)]
const fn known_opcode(op: u32) -> bool {
    op <= WcOpcode::AtomicWrite as u32
        || op.wrapping_sub(WcOpcode::Recv as u32) <= WcOpcode::Driver3 as u32 - WcOpcode::Recv as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `known_opcode` accepts exactly the numbers `WcOpcode::from_u32` knows, and each is the
    /// discriminant (`as u8`) of its opcode, which the word stores write as the opcode byte.
    #[test]
    fn known_opcodes_are_the_enums_discriminants() {
        for v in (0..=1024u32).chain([u32::MAX, u32::MAX - 127, 1 << 31, 256 + 128]) {
            let op = WcOpcode::from_u32(v);
            assert_eq!(known_opcode(v), op.is_some(), "{v}");
            if let Some(op) = op {
                assert_eq!(u32::from(op as u8), v, "{op:?}");
            }
        }
    }
}
