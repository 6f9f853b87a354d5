//! What the lab cases (real NICs only; elsewhere each skips with one line) share: finding
//! a device of a provider, a connected pair of RC QPs on one CQ, attaching rdma-core's CQ
//! and QPs to a direct poller, rounds of sends checked completion by completion, and
//! polling a CQ until it returned what a case waits for.

use crate::cq::{BackendChoice, Cq, Poller};
use crate::verbs::{Access, MrSlice, QpCaps, QpType, SendOp, SendWr};
use crate::QpInit;
use crate::{Context, Mr, Pd, Qp, Srq};
use core::ptr::NonNull;
use dvcq_provider::{Completion, WcOpcode, WcStatus};

/// The first device served by rdma-core's `provider` (`mlx5`, `irdma`), or `None` after
/// printing why `case` is skipped (`what` names the hardware: `mlx5 (ConnectX)`).
pub(super) fn device_of(provider: &str, what: &str, case: &str) -> Option<String> {
    let found = crate::device::list().devices.into_iter().find(|d| d.provider == provider).map(|d| d.name);
    if found.is_none() {
        eprintln!("skip {case}: no {what} device on this machine");
    }
    found
}

/// Polls `cq` until `want` completions arrived or 5 s passed; returns what arrived.
pub(super) fn drain(cq: &mut Cq, want: usize) -> Vec<Completion> {
    let mut got = Vec::new();
    let mut out = [Completion::default(); 16];
    let start = std::time::Instant::now();
    while got.len() < want && start.elapsed() < std::time::Duration::from_secs(5) {
        let n = cq.poll_count(&mut out);
        got.extend_from_slice(&out[..n]);
    }
    got
}

/// Two RC QPs on `cq` with 8-deep queues (the second receiving from `srq` when given),
/// connected to each other, and a 64 KiB memory region.
pub(super) fn rc_pair(pd: &Pd, cq: &Cq, srq: Option<&Srq>) -> (Qp, Qp, Mr) {
    let caps = QpCaps { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let init = |srq| QpInit { qp_type: QpType::Rc, send_cq: cq, recv_cq: cq, srq, caps, sq_sig_all: false };
    let mut a = pd.create_qp(&init(None)).expect("create_qp");
    let mut b = pd.create_qp(&init(srq)).expect("create_qp");
    let (ea, eb) = (a.endpoint().unwrap(), b.endpoint().unwrap());
    a.connect(&eb).unwrap();
    b.connect(&ea).unwrap();
    let mr = pd.reg_mr(1 << 16, Access::ALL).unwrap();
    (a, b, mr)
}

/// A direct poller on `verbs_cq` (a CQ made with the generic backend, whose handle is never
/// polled: the application's CQ as rdma-core made it), with `qps` attached.
///
/// # Safety
///
/// `verbs_cq` and every QP in `qps` outlive the returned `Cq` (the caller declares it
/// after them, so it drops first), nothing else polls or arms the CQ, and posts happen on
/// the polling thread, between polls.
pub(super) unsafe fn attach_direct(ctx: &Context, verbs_cq: &Cq, qps: &[&Qp]) -> Cq {
    let Poller::Generic(g) = &verbs_cq.poller else { panic!("asked for the generic backend") };
    let cq_ptr = NonNull::new(g.verbs_cq().as_ptr().cast()).unwrap();
    // SAFETY: the caller keeps the CQ alive past the returned handle, and nothing else polls it.
    let mut cq = unsafe { Cq::attach(ctx, cq_ptr, BackendChoice::Direct) }.expect("direct attach");
    for qp in qps {
        // SAFETY: the caller keeps the QP alive past the returned handle and posts only between polls on this thread.
        unsafe { cq.attach_qp(qp.verbs_ptr().unwrap()) }.expect("attach_qp");
    }
    cq
}

/// `rounds` rounds of eight 200-byte sends from `a`, each matched by a receive `recv` posts
/// (wr_ids from 0x2000, buffers of 256 bytes): every round's 16 completions succeed with
/// the wr_ids and receive lengths posted. A round after the first lap of the 8-deep queues
/// works only if the direct poll gave their room back to rdma-core's post.
pub(super) fn send_rounds(cq: &mut Cq, a: &mut Qp, mr: &Mr, rounds: u64, mut recv: impl FnMut(u64, &[MrSlice<'_>])) {
    for round in 0..rounds {
        for i in 0..8u64 {
            let sg = [mr.slice(4096 + i * 256, 256).unwrap()];
            recv(0x2000 + round * 16 + i, &sg);
        }
        for i in 0..8u64 {
            let sg = [mr.slice(i * 256, 200).unwrap()];
            a.post_send(&[SendWr::new(0x1000 + round * 16 + i, SendOp::Send, &sg)]).expect("post_send");
        }
        let got = drain(cq, 16);
        assert_eq!(got.len(), 16, "round {round}: {got:?}");
        assert!(got.iter().all(|c| c.status == WcStatus::Success), "round {round}: {got:?}");
        let of = |op: WcOpcode| {
            let mut v: Vec<(u64, u32)> = got.iter().filter(|c| c.opcode == op).map(|c| (c.wr_id, c.byte_len)).collect();
            v.sort_unstable();
            v
        };
        let sends: Vec<u64> = of(WcOpcode::Send).into_iter().map(|(w, _)| w).collect();
        assert_eq!(sends, (0..8).map(|i| 0x1000 + round * 16 + i).collect::<Vec<_>>(), "round {round}");
        assert_eq!(
            of(WcOpcode::Recv),
            (0..8).map(|i| (0x2000 + round * 16 + i, 200)).collect::<Vec<_>>(),
            "round {round}"
        );
    }
}

/// [`Cq::idle_poll`] on a direct poller: true (an empty poll, counted as one) while the
/// ring is empty, false once a completion waits, which then asking again does not consume
/// and the next poll returns. `a` is an RC QP on `cq` connected to a peer that accepts
/// RDMA WRITEs into `mr`.
pub(super) fn idle_polls_count_as_empty_polls(cq: &mut Cq, a: &mut Qp, mr: &Mr) {
    let before = cq.stats();
    for _ in 0..3 {
        assert!(cq.idle_poll(), "an empty ring is idle");
    }
    let after = cq.stats();
    assert_eq!((after.polls, after.empty_polls), (before.polls + 3, before.empty_polls + 3));
    let sg = [mr.slice(0, 8).unwrap()];
    a.post_send(&[SendWr::new(0x77, SendOp::Write(mr.remote().at(512)), &sg)]).expect("post_send");
    let start = std::time::Instant::now();
    while cq.idle_poll() {
        assert!(start.elapsed() < std::time::Duration::from_secs(5), "the WRITE never completed");
    }
    let waiting = cq.stats();
    assert!(!cq.idle_poll(), "asking again consumed nothing");
    assert_eq!(cq.stats().polls, waiting.polls, "a poll that is not idle is not counted as one");
    let got = drain(cq, 1);
    assert_eq!(got.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(), [(0x77, WcStatus::Success)]);
    assert!(cq.idle_poll());
}
