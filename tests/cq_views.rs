//! `Cq::views` through the public API: none on the models, whose polls retire work requests
//! for the posting side (the VM test walks rxe's queue: `tests/real_stack.rs`).

#[path = "support/loopback.rs"]
mod loopback;

use dvcq::verbs::{SendOp, SendWr};
use dvcq::{Completion, Context, CqOptions};

#[test]
fn model_cqs_have_no_views_and_poll_as_before() {
    for device in ["model-mlx5", "model-e810"] {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(8)).unwrap();
        let (_pd, mr, mut qp) = loopback::rc_to_itself(&ctx, &cq);
        let sg = [mr.slice(0, 8).unwrap()];
        qp.post_send(&[SendWr::new(3, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
        assert!(cq.views().is_none(), "{device}: a model CQ's poll keeps queue state a walk would skip");
        let mut wcs = [Completion::default(); 2];
        assert_eq!((cq.poll_count(&mut wcs), wcs[0].wr_id), (1, 3), "{device}: asking for views consumed nothing");
    }
}
