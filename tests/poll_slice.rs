//! `Cq::poll` hands back the completions it filled, as the front of the caller's buffer:
//! all of them when the buffer has room, a full buffer otherwise, nothing when the CQ is
//! empty; `poll_count` says how many of the same. `Cq::wait` and `wait_with` (and the
//! model device's own `ModelCq::poll`) hand back what they filled the same way.

#[path = "support/loopback.rs"]
mod loopback;

use dvcq::model_device::{ModelDevice, ModelVendor};
use dvcq::verbs::{Access, QpType, SendOp, SendWr};
use dvcq::{Completion, Context, CqOptions, WaitOptions, WcStatus};
use std::time::Duration;

#[test]
fn poll_returns_the_filled_front_of_the_buffer() {
    for device in ["model-mlx5", "model-e810"] {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(64)).unwrap();
        let (_pd, mr, mut qp) = loopback::rc_to_itself(&ctx, &cq);
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

#[test]
fn wait_returns_the_filled_front_of_the_buffer() {
    for device in ["model-mlx5", "model-e810"] {
        let ctx = Context::open(device).unwrap();
        let ch = ctx.create_channel().unwrap();
        let mut cq = ctx.create_cq_on(&ch, CqOptions::new(64)).unwrap();
        let (_pd, mr, mut qp) = loopback::rc_to_itself(&ctx, &cq);
        let sg = [mr.slice(0, 8).unwrap()];
        let wrs: Vec<_> = (1..=6).map(|id| SendWr::new(id, SendOp::Write(mr.remote().at(64)), &sg)).collect();
        qp.post_send(&wrs).unwrap();

        let long = Some(Duration::from_secs(5));
        let mut wcs = [Completion { wr_id: 0xdead, ..Completion::default() }; 4];
        let ids = |polled: &[Completion]| polled.iter().map(|c| c.wr_id).collect::<Vec<_>>();
        assert_eq!(ids(cq.wait(&mut wcs, long).unwrap()), [1, 2, 3, 4], "{device}: a full buffer");
        let mut two = [Completion::default(); 2];
        assert_eq!(ids(cq.wait_with(&mut two, long, WaitOptions::hybrid(Duration::ZERO)).unwrap()), [5, 6], "{device}");
        let short = Some(Duration::from_millis(10));
        assert!(cq.wait(&mut wcs, short).unwrap().is_empty(), "{device}: nothing at the timeout");
        assert_eq!(cq.wait_count(&mut wcs, short).unwrap(), 0, "{device}");
        qp.post_send(&wrs[..1]).unwrap();
        assert_eq!(cq.wait_count(&mut wcs, long).unwrap(), 1, "{device}: the count of the same");
        assert_eq!(wcs[0].wr_id, 1, "{device}");
    }
}

#[test]
fn a_model_cq_polls_into_the_front_of_the_buffer_too() {
    use dvcq::verbs::QpCaps;
    let dev = ModelDevice::new(ModelVendor::Mlx5);
    let mut cq = dev.create_cq(16).unwrap();
    let qp = dev.create_qp(QpType::Rc, &cq, &cq, QpCaps::default(), None).unwrap();
    qp.connect(&qp.endpoint()).unwrap();
    let mr = dev.reg_mr(4096, Access::ALL).unwrap();
    let sg = [mr.slice(0, 8).unwrap()];
    let wrs: Vec<_> = (1..=3).map(|id| SendWr::new(id, SendOp::Write(mr.remote().at(64)), &sg)).collect();
    qp.post_send(&wrs).unwrap();
    let mut wcs = [Completion { wr_id: 0xdead, ..Completion::default() }; 2];
    assert_eq!(cq.poll(&mut wcs).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(cq.poll_count(&mut wcs), 1);
    assert!(cq.poll(&mut wcs).is_empty());
}
