//! `Cq::poll` hands back the completions it filled, as the front of the caller's buffer:
//! all of them when the buffer has room, a full buffer otherwise, nothing when the CQ is
//! empty; `poll_count` says how many of the same.

use dvcq::verbs::{Access, QpType, SendOp, SendWr};
use dvcq::{Completion, Context, CqOptions, QpInit, WcStatus};

#[test]
fn poll_returns_the_filled_front_of_the_buffer() {
    for device in ["model-mlx5", "model-e810"] {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(64)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.reg_mr(4096, Access::ALL).unwrap();
        let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
        let me = qp.endpoint().unwrap();
        qp.connect(&me).unwrap();
        let sg = [mr.slice(0, 8).unwrap()];
        let wrs: Vec<_> = (1..=5).map(|id| SendWr::new(id, SendOp::Write(mr.remote().at(64)), &sg)).collect();
        qp.post_send(&wrs).unwrap();

        // A sentinel behind the filled part shows that nothing past it is handed back.
        let mut wcs = [Completion { wr_id: 0xdead, ..Completion::default() }; 4];
        let mut got = Vec::new();
        while got.len() < 5 {
            let polled = cq.poll(&mut wcs);
            assert!(polled.len() <= 4, "{device}");
            assert!(polled.iter().all(|c| c.status == WcStatus::Success && c.wr_id != 0xdead), "{device}: {polled:?}");
            got.extend(polled.iter().map(|c| c.wr_id));
        }
        assert_eq!(got, [1, 2, 3, 4, 5], "{device}: in order, none twice");
        assert!(cq.poll(&mut wcs).is_empty(), "{device}: an empty CQ fills nothing");
        assert_eq!(cq.poll_count(&mut wcs), 0, "{device}");
        assert!(cq.poll(&mut []).is_empty(), "{device}: an empty buffer takes nothing");
    }
}
