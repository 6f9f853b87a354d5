//! A kernel work-completion record (`struct ib_uverbs_wc`) as a [`Completion`]: what
//! rdma-core's `rxe_poll_cq` gives the application when it `memcpy`s the record into an
//! `ibv_wc`. The conversion, and what numbers outside libibverbs' enums become, is
//! [`Completion::from_uverbs_wc`], shared with the generic backend.

use dvcq_provider::{Completion, CqeFault, FaultKind, StatusCounts, WcStatus};
use dvcq_uapi::rxe::wc::UverbsWc;

/// The completion for record `wc` found at ring position `position` (the running consumer
/// counter).
#[inline(always)]
pub(crate) fn completion(wc: &UverbsWc, position: u32) -> Completion {
    Completion::from_uverbs_wc(wc, position)
}

/// Failed completions (fault items included) by status, and fault items, of the records a
/// poller turned into completions: counted on the path that makes them, so a successful
/// record pays nothing for the statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Failures {
    /// Completions whose status is not success, by status (fault items included).
    pub errors: StatusCounts,
    /// Fault items: records that could not become a completion.
    pub faults: u64,
}

impl Failures {
    /// Counts `c` if it failed.
    #[inline(always)]
    pub(crate) fn count(&mut self, c: &Completion) {
        if c.status != WcStatus::Success {
            self.errors.add(c.status);
            self.faults += u64::from(c.fault().is_some());
        }
    }

    /// The sum of two counts (a resize's replaced poller and the one after it).
    pub fn merged(mut self, other: &Failures) -> Failures {
        self.errors.merge(&other.errors);
        self.faults += other.faults;
        self
    }
}

/// Writes into `o` the completion for the record whose six 8-byte words are `w` (each the
/// native-endian load of those 8 bytes, [`crate::queue::QueueBuf::record_words`]), found at
/// ring position `position`, and counts it in `failures` if it failed.
///
/// A successful completion with a known opcode, nearly every record, is stored as whole
/// words straight into the caller's slot ([`Completion::set_uverbs_success`]), what
/// [`Completion::from_uverbs_wc`] gives, and is not counted; every other record (an error
/// status, a number outside libibverbs' enums) takes that conversion, out of line.
#[inline(always)]
pub(crate) fn fill_from_words(o: &mut Completion, w: &[u64; 6], position: u32, failures: &mut Failures) {
    if !o.try_set_uverbs_success(w) {
        *o = other_record(w[0], w[1], w[2], w[3], w[4], w[5], position, failures);
    }
}

/// Every record but a successful one with a known opcode: the shared conversion, counted.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)] // the words in registers: no copy to memory on the fast path
fn other_record(
    w0: u64,
    w1: u64,
    w2: u64,
    w3: u64,
    w4: u64,
    w5: u64,
    position: u32,
    failures: &mut Failures,
) -> Completion {
    let c = completion(&bytemuck::cast::<[u64; 6], UverbsWc>([w0, w1, w2, w3, w4, w5]), position);
    failures.count(&c);
    c
}

/// A fault item for the record at `position`.
#[cold]
pub(crate) fn fault(kind: FaultKind, position: u32, value: u32) -> Completion {
    Completion::from_fault(CqeFault { kind, position, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_provider::{WcFlags, WcOpcode};
    use proptest::prelude::*;

    fn words(wc: &UverbsWc) -> [u64; 6] {
        bytemuck::cast(*wc)
    }

    proptest! {
        /// The conversion from words gives what the shared conversion gives, for any record:
        /// a success of every opcode, error statuses, numbers outside the enums.
        #[test]
        fn words_convert_as_the_shared_conversion_does(
            wr_id: u64, status in prop_oneof![Just(0u32), 0u32..30, any::<u32>()],
            opcode in prop_oneof![0u32..12, 128u32..136, any::<u32>()],
            vendor_err: u32, byte_len: u32, ex: u32, qp_num: u32, src_qp: u32, wc_flags: u32,
            pkey_index: u16, slid: u16, sl: u8, dlid_path_bits: u8, port_num: u8, reserved: u8,
            position: u32,
        ) {
            let wc = UverbsWc {
                wr_id, status, opcode, vendor_err, byte_len, ex, qp_num, src_qp, wc_flags,
                pkey_index, slid, sl, dlid_path_bits, port_num, reserved,
            };
            // Into a slot holding a stale completion, as a poll's output array does.
            let mut o = Completion { wr_id: 1, timestamp: 9, hdr_ok: 3, wqe_index: 4, ..Completion::default() };
            let mut failures = Failures::default();
            fill_from_words(&mut o, &words(&wc), position, &mut failures);
            let shared = Completion::from_uverbs_wc(&wc, position);
            prop_assert_eq!(o, shared);
            // Counted exactly when it failed, as the handle's scan of a batch counts.
            let failed = shared.status != WcStatus::Success;
            prop_assert_eq!(failures.errors.get(shared.status), u64::from(failed));
            prop_assert_eq!((failures.errors.total(), failures.faults), (u64::from(failed), u64::from(shared.fault().is_some())));
        }
    }

    fn recv() -> UverbsWc {
        UverbsWc {
            wr_id: 0x1122_3344_5566_7788,
            status: 0,
            opcode: 129,
            vendor_err: 0,
            byte_len: 4096,
            ex: 0x0403_0201,
            qp_num: 0x11,
            src_qp: 0x12,
            wc_flags: 0x3,
            pkey_index: 7,
            slid: 0xbeef,
            sl: 5,
            dlid_path_bits: 0x7f,
            port_num: 1,
            reserved: 0xaa,
        }
    }

    /// Every `ibv_wc` field comes from its own record field, unchanged.
    #[test]
    fn every_ibv_wc_field_is_copied() {
        let c = completion(&recv(), 9);
        assert_eq!((c.wr_id, c.byte_len, c.imm_data, c.qp_num), (0x1122_3344_5566_7788, 4096, 0x0403_0201, 0x11));
        assert_eq!(
            (c.status, c.opcode, c.wc_flags),
            (WcStatus::Success, WcOpcode::RecvRdmaWithImm, WcFlags::GRH | WcFlags::WITH_IMM)
        );
        assert_eq!((c.src_qp, c.pkey_index, c.slid, c.sl, c.dlid_path_bits), (0x12, 7, 0xbeef, 5, 0x7f));
        assert_eq!((c.vendor_err, c.wqe_index, c.fault()), (0, 0, None));
    }

    #[test]
    fn unknown_numbers_follow_the_documented_choice() {
        // Unknown status: a fault naming it, whatever the opcode.
        let c = completion(&UverbsWc { status: 24, ..recv() }, 3);
        assert_eq!(c.fault(), Some(CqeFault { kind: FaultKind::BadField, position: 3, value: 24 }));
        assert_eq!((c.status, c.wr_id), (WcStatus::GeneralErr, 3));
        // Unknown opcode on success: a fault naming the opcode.
        let c = completion(&UverbsWc { opcode: 10, ..recv() }, 4);
        assert_eq!(c.fault(), Some(CqeFault { kind: FaultKind::BadOpcode, position: 4, value: 10 }));
        // Unknown opcode on an error: the completion, wr_id and vendor_err kept.
        let c = completion(&UverbsWc { status: 5, opcode: 0xff, vendor_err: 9, ..recv() }, 5);
        assert_eq!(
            (c.status, c.opcode, c.wr_id, c.vendor_err),
            (WcStatus::WrFlushErr, WcOpcode::Send, 0x1122_3344_5566_7788, 9)
        );
        assert_eq!(c.fault(), None);
        // Unknown flag bits are kept.
        let c = completion(&UverbsWc { wc_flags: 0x8000_0002, ..recv() }, 6);
        assert_eq!(c.wc_flags.bits(), 0x8000_0002);
    }
}
