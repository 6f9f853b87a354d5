//! `Cq::stats` on both models: what the handle counts per poll call and what the backend
//! adds (the high-water mark from the device's producer count, overruns, doorbell writes,
//! errors by status counted on the pollers' slow paths).

use dvcq::verbs::{Access, QpCaps, QpType, SendOp, SendWr};
use dvcq::{Completion, Context, CqOptions, HighWaterSource, QpInit, WcStatus};

const MODELS: [&str; 2] = ["model-mlx5", "model-e810"];

/// A CQ of `depth` and an RC QP connected to itself completing into it.
struct Loop {
    cq: dvcq::Cq,
    qp: dvcq::Qp,
    mr: dvcq::Mr,
    _pd: dvcq::Pd,
}

fn self_loop(ctx: &Context, depth: u32) -> Loop {
    let cq = ctx.create_cq(CqOptions::new(depth)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let caps = QpCaps { max_send_wr: 64, ..QpCaps::default() };
    let mut qp = pd.create_qp(&QpInit { caps, ..QpInit::new(QpType::Rc, &cq) }).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    Loop { cq, qp, mr, _pd: pd }
}

fn writes(l: &mut Loop, ids: std::ops::Range<u64>, rkey_xor: u32) {
    let sg = [l.mr.slice(0, 8).unwrap()];
    for i in ids {
        let mut to = l.mr.remote().at(64);
        to.rkey ^= rkey_xor;
        l.qp.post_send(&[SendWr::new(i, SendOp::Write(to), &sg)]).unwrap();
    }
}

/// Ten WRITEs polled two at a time: the batches never exceed 2, but the device's producer
/// count says the ring held 10; each non-empty poll publishes the consumer index once.
#[test]
fn the_high_water_mark_is_how_full_the_ring_got_not_the_batch() {
    for dev in MODELS {
        let ctx = Context::open(dev).unwrap();
        let mut l = self_loop(&ctx, 32);
        writes(&mut l, 0..10, 0);
        let mut out = [Completion::default(); 2];
        let mut polls = 0;
        while l.cq.poll_count(&mut out) > 0 {
            polls += 1;
        }
        let s = l.cq.stats();
        assert_eq!((s.polls, s.empty_polls, s.completions, s.largest_batch), (polls + 1, 1, 10, 2), "{dev}");
        assert_eq!((s.high_water, s.high_water_source), (10, HighWaterSource::Producer), "{dev}");
        assert_eq!(s.doorbell_writes, Some(5), "{dev}: one consumer-index store per batch");
        assert_eq!((s.errors, s.faults, s.overruns), (0, 0, Some(0)), "{dev}");
        assert_eq!(s.compression_sessions.is_some(), dev == "model-mlx5", "{dev}: only mlx5 compresses");
        // A fuller ring later raises the mark; polling it as it fills does not.
        writes(&mut l, 10..30, 0);
        while l.cq.poll_count(&mut out) > 0 {}
        assert_eq!(l.cq.stats().high_water, 20, "{dev}");
        for i in 30..40 {
            writes(&mut l, i..i + 1, 0);
            l.cq.poll(&mut out);
        }
        assert_eq!(l.cq.stats().high_water, 20, "{dev}");
    }
}

/// A WRITE with a bad rkey fails with REM_ACCESS_ERR and the WRITEs behind it are flushed:
/// the errors are counted by status, by the vendor poller on its slow path.
#[test]
fn errors_are_counted_by_status() {
    for dev in MODELS {
        let ctx = Context::open(dev).unwrap();
        let mut l = self_loop(&ctx, 32);
        writes(&mut l, 0..2, 0);
        writes(&mut l, 2..3, 0x00ff_ff00);
        writes(&mut l, 3..6, 0);
        let mut out = [Completion::default(); 16];
        let mut got = Vec::new();
        loop {
            let n = l.cq.poll_count(&mut out);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&out[..n]);
        }
        let s = l.cq.stats();
        let failed = got.iter().filter(|c| c.status != WcStatus::Success).count() as u64;
        assert_eq!(s.errors, failed, "{dev}");
        assert_eq!(s.errors_by_status.get(WcStatus::RemAccessErr), 1, "{dev}");
        assert_eq!(s.errors_by_status.get(WcStatus::WrFlushErr), failed - 1, "{dev}");
        assert!(failed >= 2, "{dev}: the WRITEs behind the failed one are flushed: {got:?}");
        let json = serde_json::to_value(s).unwrap();
        assert_eq!(json["errors_by_status"]["IBV_WC_REM_ACCESS_ERR"], 1, "{dev}");
    }
}

/// One completion more than the ring holds: the device finds the CQ full and puts it in
/// error, and the statistics say so.
#[test]
fn an_overrun_is_counted() {
    for dev in MODELS {
        let ctx = Context::open(dev).unwrap();
        let mut l = self_loop(&ctx, 1);
        writes(&mut l, 0..8, 0);
        let s = l.cq.stats();
        assert_eq!(s.overruns, Some(1), "{dev}");
    }
}
