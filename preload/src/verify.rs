//! `verify` mode: the provider polls and its completions are what the application gets;
//! dvcq then reads the same entries from the ring with its own cursor (one batch behind)
//! and every field the two must agree on is compared. The provider keeps all of its state
//! (consumer index, queue tails, SRQ free list, arm sequence) by construction, so dvcq can
//! let go of the CQ at any moment (a resize, a QP destroyed, an SRQ it would give back
//! twice) and take it again from the provider's state.
//!
//! A ring entry the provider consumed may be written again by the device before dvcq reads
//! it only when more completions arrive than the CQ holds, which is an overrun in any mode.

use crate::cq::{self, CqEntry};
use crate::dispatch::provider_poll;
use crate::layout::{IbvCq, IbvWc};
use crate::{lock, Inside};
use core::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

/// Differences printed in full, per process (the count goes on in the report).
const PRINTED: u64 = 20;
static PRINTED_SO_FAR: AtomicU64 = AtomicU64::new(0);

const WC_SUCCESS: u32 = 0;
/// `IBV_WC_RECV`: the bit of every receive-side opcode.
const WC_RECV: u32 = 1 << 7;
const WC_RDMA_READ: u32 = 2;
const WC_COMP_SWAP: u32 = 3;
const WC_FETCH_ADD: u32 = 4;
/// `IBV_WC_WITH_IMM | IBV_WC_WITH_INV`.
const WITH_IMM_OR_INV: u32 = (1 << 1) | (1 << 2);

/// `ops.poll_cq` of a CQ in verify mode.
///
/// # Safety
///
/// As `ibv_poll_cq`.
pub(crate) unsafe fn poll(e: &CqEntry, raw: *mut IbvCq, n: c_int, wc: *mut IbvWc) -> c_int {
    let mut p = lock(&e.polled);
    let want = usize::try_from(n).unwrap_or(0).min(p.theirs.len());
    if p.cq.is_none() || want == 0 {
        drop(p);
        // SAFETY: the caller's promise, passed on.
        return unsafe { provider_poll(raw, n, wc) };
    }
    let p = &mut *p;
    // Unset fields read 0 on both sides.
    p.theirs[..want].fill(IbvWc::default());
    // SAFETY: `theirs` holds `want` records.
    let k = unsafe { provider_poll(raw, want as c_int, p.theirs.as_mut_ptr()) };
    let Ok(got) = usize::try_from(k) else {
        return k;
    };
    if got == 0 {
        return 0;
    }
    let _in = Inside::enter();
    let Some(dcq) = p.cq.as_mut() else { return 0 };
    let m = dcq.poll_count(&mut p.buf[..got]);
    let mut differ = 0u64;
    let mut errors = 0u64;
    for i in 0..got {
        let theirs = p.theirs[i];
        errors += u64::from(theirs.status != WC_SUCCESS);
        let ours = p.buf[..m].get(i).and_then(|c| cq::to_wc(c, &p.gone_qps));
        if let Some(what) = difference(&theirs, ours.as_ref()) {
            differ += 1;
            print(e, what, &theirs, ours.as_ref());
        }
        // SAFETY: `i < got <= n`: inside the caller's records.
        unsafe { wc.add(i).write(theirs) };
    }
    e.completions.fetch_add(got as u64, Ordering::Relaxed);
    e.errors.fetch_add(errors, Ordering::Relaxed);
    if differ > 0 {
        e.differences.fetch_add(differ, Ordering::Relaxed);
    }
    if m != got {
        // dvcq's cursor is no longer the provider's: take the CQ again from the provider's
        // state so that the next batches are compared entry for entry.
        crate::hooks::reattach(e, raw, p, "dvcq read another number of completions than the provider");
    }
    k
}

/// Prints a difference (the first [`PRINTED`] of a process).
fn print(e: &CqEntry, what: &str, theirs: &IbvWc, ours: Option<&IbvWc>) {
    if PRINTED_SO_FAR.fetch_add(1, Ordering::Relaxed) < PRINTED {
        eprintln!(
            "dvcq-preload: verify: cq {}: completion differs ({what}): provider {theirs:?}, dvcq {ours:?}",
            e.serial
        );
    }
}

/// Counts and prints one difference (an extended CQ's poll, compared one completion at a
/// time).
pub(crate) fn report(e: &CqEntry, what: &str, theirs: &IbvWc, ours: Option<&IbvWc>) {
    e.differences.fetch_add(1, Ordering::Relaxed);
    print(e, what, theirs, ours);
}

/// What differs between the provider's completion and dvcq's, if anything that both must
/// set.
pub(crate) fn difference(theirs: &IbvWc, ours: Option<&IbvWc>) -> Option<&'static str> {
    let Some(ours) = ours else {
        return Some("dvcq has none");
    };
    if theirs.wr_id != ours.wr_id {
        return Some("wr_id");
    }
    if theirs.status != ours.status {
        return Some("status");
    }
    if theirs.qp_num != ours.qp_num {
        return Some("qp_num");
    }
    if theirs.status != WC_SUCCESS {
        return (theirs.vendor_err != ours.vendor_err).then_some("vendor_err");
    }
    if theirs.opcode != ours.opcode {
        return Some("opcode");
    }
    if theirs.wc_flags != ours.wc_flags {
        return Some("wc_flags");
    }
    // The immediate (or invalidated rkey) is a receive's; a send's completion carries the
    // flag but no value.
    let recv = theirs.opcode & WC_RECV != 0;
    if recv && theirs.wc_flags & WITH_IMM_OR_INV != 0 && theirs.imm_data != ours.imm_data {
        return Some("imm_data");
    }
    if (recv || matches!(theirs.opcode, WC_RDMA_READ | WC_COMP_SWAP | WC_FETCH_ADD)) && theirs.byte_len != ours.byte_len
    {
        return Some("byte_len");
    }
    if recv
        && (theirs.src_qp, theirs.sl, theirs.pkey_index, theirs.slid)
            != (ours.src_qp, ours.sl, ours.pkey_index, ours.slid)
    {
        return Some("src_qp/sl/pkey_index/slid");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv() -> IbvWc {
        IbvWc {
            wr_id: 7,
            opcode: WC_RECV,
            byte_len: 64,
            qp_num: 0x11,
            src_qp: 0x22,
            wc_flags: 2,
            imm_data: 9,
            ..IbvWc::default()
        }
    }

    #[test]
    fn equal_completions_do_not_differ() {
        assert_eq!(difference(&recv(), Some(&recv())), None);
    }

    #[test]
    fn each_compared_field_is_named() {
        let r = recv();
        assert_eq!(difference(&r, None), Some("dvcq has none"));
        assert_eq!(difference(&r, Some(&IbvWc { wr_id: 8, ..r })), Some("wr_id"));
        assert_eq!(difference(&r, Some(&IbvWc { byte_len: 63, ..r })), Some("byte_len"));
        assert_eq!(difference(&r, Some(&IbvWc { imm_data: 1, ..r })), Some("imm_data"));
        assert_eq!(difference(&r, Some(&IbvWc { src_qp: 1, ..r })), Some("src_qp/sl/pkey_index/slid"));
        assert_eq!(difference(&r, Some(&IbvWc { status: 5, ..r })), Some("status"));
    }

    #[test]
    fn what_a_provider_leaves_unset_is_not_compared() {
        // A send completion: rdma-core's mlx5 leaves byte_len unset, and the immediate of
        // a send with immediate.
        let s = IbvWc { wr_id: 1, opcode: 0, qp_num: 3, ..IbvWc::default() };
        assert_eq!(difference(&s, Some(&IbvWc { byte_len: 99, ..s })), None);
        let si = IbvWc { wc_flags: 2, ..s };
        assert_eq!(difference(&si, Some(&IbvWc { imm_data: 5, ..si })), None);
        // An error: only the status and vendor error count.
        let e = IbvWc { status: 5, vendor_err: 0x44, opcode: 1, ..s };
        assert_eq!(difference(&e, Some(&IbvWc { opcode: 0, ..e })), None);
        assert_eq!(difference(&e, Some(&IbvWc { vendor_err: 1, ..e })), Some("vendor_err"));
    }
}
