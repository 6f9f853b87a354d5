//! Completion timestamps on the models through the public API: `model-mlx5` stamps each
//! successful CQE with its free-running clock (or, made for wallclock timestamps, the
//! real-time format), `Cq::clock` converts them to the real time they were written at,
//! `conformance::timestamps_monotonic` accepts them (across the counter's wrap too), error
//! CQEs keep their syndromes, and `model-e810` (irdma GEN2) says it has none.

use dvcq::verbs::{Access, QpType, RecvWr, SendOp, SendWr};
use dvcq::{Completion, Context, Cq, CqClock, CqOptions, Error, Mr, Qp, QpInit, Timestamps, WcStatus};
use dvcq_cli::conformance::{timestamps_monotonic, TimestampViolation};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

fn loopback(ctx: &Context, cq: &Cq) -> (Qp, Mr) {
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    (qp, mr)
}

/// `n` RDMA WRITEs and a SEND with its receive, then every completion.
fn traffic(qp: &mut Qp, mr: &Mr, cq: &mut Cq, n: u64) -> Vec<Completion> {
    let sg = [mr.slice(0, 8).unwrap()];
    let rsg = [mr.slice(1024, 64).unwrap()];
    qp.post_recv(&[RecvWr { wr_id: 1000, sg_list: &rsg }]).unwrap();
    for i in 0..n {
        qp.post_send(&[SendWr::new(i, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
    }
    qp.post_send(&[SendWr::new(n, SendOp::Send, &sg)]).unwrap();
    let mut all = Vec::new();
    let mut wcs = [Completion::default(); 16];
    loop {
        let got = cq.poll_count(&mut wcs);
        if got == 0 {
            return all;
        }
        all.extend_from_slice(&wcs[..got]);
    }
}

/// How far a model's conversion may sit from the host's real-time clock: both count from
/// the same instant, the model through the monotonic clock, so only a clock step of the
/// host (NTP) or the 6.4 ns cycle parts them.
const SLACK_NS: u64 = 50_000_000;

#[test]
fn model_mlx5_stamps_its_completions_with_a_free_running_clock() {
    let ctx = Context::open("model-mlx5").unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(64)).unwrap();
    let (mut qp, mr) = loopback(&ctx, &cq);
    let before = now_ns();
    let wcs = traffic(&mut qp, &mr, &mut cq, 8);
    let after = now_ns();
    assert_eq!(wcs.len(), 10);
    let clock = cq.clock().unwrap();
    let CqClock::Cycles(info) = clock else { panic!("a free-running CQ: {clock:?}") };
    assert_eq!(info.mask, (1 << 41) - 1, "the kernel's 41-bit counter");
    for c in &wcs {
        assert!(c.is_ok() && c.timestamp <= info.mask, "{c:?}");
        let ns = cq.timestamp_ns(c).unwrap();
        assert!(ns + SLACK_NS >= before && ns <= after + SLACK_NS, "{ns} outside {before}..{after}: {c:?}");
        assert_eq!(clock.to_ns(c.timestamp), Some(ns), "one snapshot converts as another of the same clock");
    }
    let s = timestamps_monotonic(&wcs, &clock).unwrap();
    assert_eq!((s.completions, s.qps, s.pairs), (10, 1, 9), "{s:?}");
    assert!(s.span_ns.unwrap() <= after - before + SLACK_NS, "{s:?}");
}

#[test]
fn the_checks_hold_across_the_counter_s_wrap() {
    // The model's counter wraps 2^24 cycles (107 ms) after the device is made: completions
    // from before and after read back in order once converted.
    let ctx = Context::open("model-mlx5").unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(64)).unwrap();
    let (mut qp, mr) = loopback(&ctx, &cq);
    let mut wcs = traffic(&mut qp, &mr, &mut cq, 4);
    std::thread::sleep(Duration::from_millis(120));
    wcs.extend(traffic(&mut qp, &mr, &mut cq, 4));
    // The raw values went back: the first batch ran within microseconds of the device's
    // start, long before the wrap.
    assert!(wcs[11].timestamp < wcs[0].timestamp, "{:#x} then {:#x}", wcs[0].timestamp, wcs[11].timestamp);
    let clock = cq.clock().unwrap();
    let s = timestamps_monotonic(&wcs, &clock).unwrap();
    assert_eq!(s.pairs, 11);
    assert!(s.span_ns.unwrap() >= 120_000_000, "{s:?}");
    let first = cq.timestamp_ns(&wcs[0]).unwrap();
    let last = cq.timestamp_ns(&wcs[11]).unwrap();
    assert!(last >= first + 120_000_000, "{first} then {last}");
    // Out of order, the same completions fail the check, naming both.
    let mut swapped = wcs.clone();
    swapped.swap(0, 11);
    match timestamps_monotonic(&swapped, &clock) {
        Err(TimestampViolation::Backwards { index: 1, previous_index: 0, .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_wallclock_cq_of_model_mlx5_carries_real_time() {
    let ctx = Context::open("model-mlx5").unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(64).timestamps(Timestamps::Wallclock)).unwrap();
    assert_eq!(cq.clock().unwrap(), CqClock::RealTime);
    let (mut qp, mr) = loopback(&ctx, &cq);
    let before = now_ns();
    let wcs = traffic(&mut qp, &mr, &mut cq, 3);
    let after = now_ns();
    for c in &wcs {
        assert!(c.timestamp & 0xffff_ffff < 1_000_000_000, "nanoseconds in bits 31:0: {:#x}", c.timestamp);
        let ns = cq.timestamp_ns(c).unwrap();
        assert!(ns + SLACK_NS >= before && ns <= after + SLACK_NS, "{ns} outside {before}..{after}");
        assert_eq!(ns, (c.timestamp >> 32) * 1_000_000_000 + (c.timestamp & 0xffff_ffff));
    }
    timestamps_monotonic(&wcs, &CqClock::RealTime).unwrap();
    // Raw timestamps are the free-running default.
    let cq = ctx.create_cq(CqOptions::new(8).timestamps(Timestamps::Raw)).unwrap();
    assert!(matches!(cq.clock().unwrap(), CqClock::Cycles(_)));
}

#[test]
fn error_completions_keep_their_syndromes_and_carry_no_timestamp() {
    let ctx = Context::open("model-mlx5").unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(64)).unwrap();
    let (mut qp, mr) = loopback(&ctx, &cq);
    let sg = [mr.slice(0, 8).unwrap()];
    let bad = dvcq::verbs::RemoteAddr { addr: 0, rkey: 0xdead };
    qp.post_send(&[SendWr::new(1, SendOp::Write(bad), &sg)]).unwrap();
    qp.post_send(&[SendWr::new(2, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
    let mut wcs = [Completion::default(); 8];
    let n = cq.poll_count(&mut wcs);
    let got: Vec<(u64, WcStatus, u32, u64)> =
        wcs[..n].iter().map(|c| (c.wr_id, c.status, c.vendor_err, c.timestamp)).collect();
    assert_eq!(got, [(1, WcStatus::RemAccessErr, 0x88, 0), (2, WcStatus::WrFlushErr, 0xf9, 0)]);
    // Nothing successful: nothing to check, and no claim that timestamps are missing.
    assert_eq!(timestamps_monotonic(&wcs[..n], &cq.clock().unwrap()).unwrap().completions, 0);
}

#[test]
fn model_e810_has_no_timestamps_and_says_why() {
    let ctx = Context::open("model-e810").unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(64)).unwrap();
    let why = cq.clock().unwrap_err().to_string();
    assert!(why.contains("completion timestamps is not supported") && why.contains("GEN3"), "{why}");
    let (mut qp, mr) = loopback(&ctx, &cq);
    let wcs = traffic(&mut qp, &mr, &mut cq, 2);
    assert!(cq.timestamp_ns(&wcs[0]).is_err());
    // What a validation would find had it been handed any clock: no stamp at all.
    assert_eq!(
        timestamps_monotonic(&wcs, &CqClock::Nanoseconds).unwrap_err(),
        TimestampViolation::Missing { completions: 4 }
    );
    for t in [Timestamps::Raw, Timestamps::Wallclock] {
        match ctx.create_cq(CqOptions::new(8).timestamps(t)) {
            Err(Error::Unsupported { what: "completion timestamps", why, .. }) => {
                assert!(why.contains("model-e810") && why.contains("GEN3"), "{why}")
            }
            other => panic!("{t:?}: {other:?}"),
        }
    }
}

#[test]
fn the_device_clock_is_the_kernel_s_set_up_for_156_mhz() {
    let m = dvcq::model_device::ModelDevice::new(dvcq::model_device::ModelVendor::Mlx5);
    let ci = m.clock_info().unwrap();
    assert_eq!((ci.mult, ci.shift, ci.mask), (3_435_973_837, 29, (1 << 41) - 1));
    let now = now_ns();
    assert!(ci.nsec.abs_diff(now) < SLACK_NS, "the snapshot reads the real time: {} vs {now}", ci.nsec);
    let e = dvcq::model_device::ModelDevice::new(dvcq::model_device::ModelVendor::Irdma);
    assert_eq!(e.clock_info(), None);
}
