//! CQs and QPs dvcq makes itself on an irdma device, without a NIC: the backend as
//! `Context::create_cq` attaches it (the same reads and checks as an application's CQ),
//! and QPs made on it read and checked as `Pd::create_qp` reads them, queued for adoption,
//! adopted by the next poll call before it reads a CQE, and forgotten (their CQEs cleared)
//! before they are destroyed, over the model's ring and rdma-core's private structs laid
//! out as each release lays them out.

use super::*;
use crate::backend::irdma::own::{Change, OwnQps};
use crate::backend::OwnCq;
use std::sync::Arc;

/// The backend `attach_created` makes on `w`, sharing with dvcq's own QPs.
fn created(w: &World) -> (IrdmaBackend, Arc<OwnQps>) {
    let mut b = w.attach().unwrap_or_else(|e| panic!("{}: {e}", w.setup.what()));
    let own = b.share_with_own_qps();
    (b, own)
}

/// What `Pd::create_qp` does with a QP made on the CQ (`sys::qp::Qp::adopt_on`): read and
/// check it with the CQ's facts and row, then queue it.
fn create_qp(own: &OwnQps, qp: &QpImage) -> Result<(), String> {
    let private = qp.read_with(&own.cq, own.layout)?;
    own.lock().push(Change::AddQp(Box::new(private)));
    Ok(())
}

/// What dropping the QP does first (`sys::qp::Qp`'s drop), through the same lock.
fn destroy_qp(own: &Arc<OwnQps>, qpn: u32) {
    OwnCq::Irdma(Arc::clone(own)).lock().forget_qp(qpn);
}

/// A second QP of `w` on the CQ, numbered `qpn`.
fn qp_numbered(w: &World, qpn: u32) -> QpImage {
    let qp = QpImage::new(w, w.ucq.addr(0), w.ucq.addr(0));
    let at = |off: usize| qp.layout.uqp.qp + off;
    qp.uqp.put32(IBV_QP_QP_NUM, qpn);
    qp.uqp.put32(at(qp.layout.qp.qp_id), qpn);
    qp
}

#[test]
fn every_release_s_own_qps_are_adopted_by_the_next_poll_and_complete_with_their_wr_ids() {
    for s in setups() {
        let what = s.what();
        let mut w = World::new(s);
        let (mut b, own) = created(&w);
        assert_eq!(own.cq, *b.expect().0, "{what}: QPs are checked against the CQ as attached");
        let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
        create_qp(&own, &qp).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(b.qpns().is_empty(), "{what}: queued, not adopted, until a poll call");
        assert_eq!(poll_all(&mut b).len(), 0);
        assert_eq!(b.qpns(), [QPN], "{what}: an empty poll call adopts it");
        let sq_full = qp.sq_free();
        let mut next = 0x100u64;
        for round in 0..(2 * SQ) {
            let sig = qp.post_send(next, 1, sq_op::SEND, 11).unwrap();
            let r = qp.post_recv(next + 1).unwrap();
            w.model.push(&ModelCqe::send(qp.handle(), QPN, sig, sq_op::SEND)).unwrap();
            w.model.push(&qp.recv_cqe(r, rq_op::ROCE_SEND_ONLY, 12)).unwrap();
            let got: Vec<(u64, WcStatus, u32)> =
                poll_all(&mut b).iter().map(|c| (c.wr_id, c.status, c.byte_len)).collect();
            assert_eq!(got, [(next, WcStatus::Success, 11), (next + 1, WcStatus::Success, 12)], "{what} {round}");
            assert_eq!((qp.sq_free(), qp.rq_free()), (sq_full, RQ - 1), "{what} round {round}: tails written back");
            next += 0x10;
        }
        let entries = s.entries();
        let prod = w.model.prod();
        assert_eq!(w.cq_state(), (prod % entries, prod % entries, u8::from(prod < entries)), "{what}");
        assert!(b.take_error().is_none());
    }
}

#[test]
fn a_destroyed_qp_is_forgotten_before_the_next_poll_reads_its_cqes_and_the_others_poll_on() {
    for s in setups() {
        let what = s.what();
        let mut w = World::new(s);
        let (mut b, own) = created(&w);
        let (a, c) = (qp_numbered(&w, 0x31), qp_numbered(&w, 0x32));
        create_qp(&own, &a).unwrap();
        create_qp(&own, &c).unwrap();
        poll_all(&mut b);
        assert_eq!(b.qpns(), [0x31, 0x32], "{what}");
        // Both have CQEs in the ring when the first is destroyed: its own are cleared and
        // consumed silently (as `irdma_udestroy_qp`'s clean-up leaves them), the second's
        // still complete although the registry moved it.
        let ra = a.post_recv(0xa0).unwrap();
        let rc = c.post_recv(0xc0).unwrap();
        w.model.push(&ModelCqe::recv(a.handle(), 0x31, ra, a.rq_shift, rq_op::ROCE_SEND_ONLY, 1)).unwrap();
        w.model.push(&ModelCqe::recv(c.handle(), 0x32, rc, c.rq_shift, rq_op::ROCE_SEND_ONLY, 2)).unwrap();
        destroy_qp(&own, 0x31);
        let got = poll_all(&mut b);
        assert_eq!(b.qpns(), [0x32], "{what}");
        assert_eq!(got.iter().map(|c| (c.wr_id, c.qp_num)).collect::<Vec<_>>(), [(0xc0, 0x32)], "{what}");
        assert_eq!(got[0].fault_kind, FaultKind::None, "{what}: no fault item for the destroyed QP's CQE");
        // The number comes back on a new QP in the same batch of changes: removed, then
        // added again.
        destroy_qp(&own, 0x32);
        let again = qp_numbered(&w, 0x32);
        create_qp(&own, &again).unwrap();
        poll_all(&mut b);
        assert_eq!(b.qpns(), [0x32], "{what}");
        let r = again.post_recv(0xd0).unwrap();
        w.model.push(&ModelCqe::recv(again.handle(), 0x32, r, again.rq_shift, rq_op::ROCE_SEND_ONLY, 3)).unwrap();
        assert_eq!(poll_all(&mut b).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0xd0], "{what}");
        assert!(b.take_error().is_none());
    }
}

#[test]
fn an_own_qp_that_fails_its_checks_is_refused_at_creation_and_nothing_is_queued() {
    let s = Setup { layout: &IRDMA_LAYOUTS[1], release: (50, 0), hw_rev: HwRev::Gen2 };
    let w = World::new(s);
    let (mut b, own) = created(&w);
    let qp = QpImage::new(&w, 0x5000, 0x6000);
    let e = create_qp(&own, &qp).unwrap_err();
    assert!(
        e.starts_with("qp 0x2b: neither its send CQ (0x5000) nor its receive CQ (0x6000) is the attached CQ"),
        "{e}"
    );
    let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
    qp.uqp.put64(IBV_QP_SRQ, 0x7000);
    let e = create_qp(&own, &qp).unwrap_err();
    assert!(e.contains("it receives from an SRQ"), "{e}");
    let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
    qp.uqp.put64(qp.field(s.layout.qp.back_qp), 0x40);
    let e = create_qp(&own, &qp).unwrap_err();
    assert!(e.starts_with("qp 0x2b: back_qp is 0x40"), "{e}");
    assert!(own.lock().is_empty(), "nothing queued");
    poll_all(&mut b);
    assert!(b.qpns().is_empty() && b.take_error().is_none());
}

#[test]
fn an_adoption_the_poll_cannot_make_is_reported_once_and_the_cq_polls_on() {
    let s = Setup { layout: &IRDMA_LAYOUTS[2], release: (64, 0), hw_rev: HwRev::Gen2 };
    let mut w = World::new(s);
    let (mut b, own) = created(&w);
    let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
    create_qp(&own, &qp).unwrap();
    create_qp(&own, &qp).unwrap();
    let r = qp.post_recv(0x44).unwrap();
    w.model.push(&qp.recv_cqe(r, rq_op::ROCE_SEND_ONLY, 4)).unwrap();
    assert_eq!(poll_all(&mut b).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x44]);
    assert_eq!(b.take_error().as_deref(), Some("qp 0x2b is attached to this CQ already"));
    assert!(b.take_error().is_none());
}
