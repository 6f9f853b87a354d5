//! `Cq::resize` on both models through the public API: completions written before a resize
//! come out first and in order, whatever happens to the ring; sizes the device refuses are
//! refused without losing anything. (rxe is resized in the VM: `dvcq validate`'s
//! `cq_resize`.)

use dvcq::verbs::{Access, QpType, SendOp, SendWr};
use dvcq::{Completion, Context, Cq, CqOptions, Error, Qp, QpInit};

/// A CQ of `depth` and an RC QP connected to itself completing into it, with a region.
fn rig(device: &str, depth: u32) -> (Context, Cq, Qp, dvcq::Mr, dvcq::Pd) {
    let ctx = Context::open(device).unwrap();
    let cq = ctx.create_cq(CqOptions::new(depth)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut init = QpInit::new(QpType::Rc, &cq);
    init.caps.max_send_wr = 64;
    let mut qp = pd.create_qp(&init).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    (ctx, cq, qp, mr, pd)
}

/// Posts RDMA WRITEs numbered `ids` (one completion each).
fn writes(qp: &mut Qp, mr: &dvcq::Mr, ids: std::ops::Range<u64>) {
    let sg = [mr.slice(0, 8).unwrap()];
    for i in ids {
        qp.post_send(&[SendWr::new(i, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
    }
}

/// Polls everything there is; the wr_ids in order.
fn drain(cq: &mut Cq) -> Vec<u64> {
    let mut got = Vec::new();
    let mut wcs = [Completion::default(); 5];
    loop {
        let n = cq.poll_count(&mut wcs);
        if n == 0 {
            return got;
        }
        got.extend(wcs[..n].iter().map(|c| c.wr_id));
    }
}

#[test]
fn completions_waiting_across_resizes_come_out_first_and_in_order() {
    for device in ["model-mlx5", "model-e810"] {
        let (_ctx, mut cq, mut qp, mr, _pd) = rig(device, 8);
        writes(&mut qp, &mr, 0..6);
        let mut wcs = [Completion::default(); 2];
        assert_eq!(cq.poll_count(&mut wcs), 2);
        // Grown, then grown again before anything is polled (mlx5: two RESIZE CQEs and two
        // ring switches pending), with completions written in between.
        assert!(cq.resize(20).unwrap() >= 20, "{device}");
        writes(&mut qp, &mr, 6..10);
        assert!(cq.resize(40).unwrap() >= 40, "{device}");
        assert_eq!(cq.depth(), cq.resize(40).unwrap(), "{device}: the same depth again changes nothing");
        writes(&mut qp, &mr, 10..12);
        // Shrunk with ten waiting.
        let got = cq.resize(12).unwrap();
        assert!(got >= 12 && got == cq.depth(), "{device}: {got}");
        writes(&mut qp, &mr, 12..14);
        assert_eq!(drain(&mut cq), (2..14).collect::<Vec<_>>(), "{device}");
        // The new ring wraps many times.
        for i in 14..200 {
            writes(&mut qp, &mr, i..i + 1);
            assert_eq!(drain(&mut cq), [i], "{device}");
        }
        assert_eq!(cq.stats().completions, 200, "{device}");
    }
}

#[test]
fn resizes_the_device_refuses_lose_nothing() {
    for device in ["model-mlx5", "model-e810"] {
        let (ctx, mut cq, mut qp, mr, _pd) = rig(device, 16);
        let max = ctx.info().unwrap().max_cqe;
        for bad in [0, max + 1] {
            let e = cq.resize(bad).unwrap_err();
            assert!(matches!(e, Error::CqDepth { asked, .. } if asked == bad), "{device}: {e}");
        }
        writes(&mut qp, &mr, 0..12);
        let before = cq.depth();
        match cq.resize(2) {
            // mlx5: rdma-core copies the waiting CQEs into the new ring, which cannot hold 12.
            Err(e) => {
                assert_eq!(device, "model-mlx5", "{e}");
                assert!(e.to_string().contains("completions waiting"), "{e}");
                assert_eq!(cq.depth(), before);
            }
            // irdma: the old ring is polled first, so any size does.
            Ok(got) => assert_eq!((device, got), ("model-e810", 2)),
        }
        assert_eq!(drain(&mut cq), (0..12).collect::<Vec<_>>(), "{device}");
    }
}
