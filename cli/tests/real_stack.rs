//! The conformance workloads on a real RDMA device, named by `DVCQ_DEVICE` (the VM test runs
//! this on `rxe0`): each workload polled by the direct backend and by rdma-core's
//! `ibv_poll_cq`, each checked against what the workload expects and the two against each
//! other, field by field ([`dvcq_cli::conformance::run_on_device`]). Prints the VM test's
//! `vm-plan` / `vm-row` / `vm-check` / `vm-skip` lines.
//!
//! Without `DVCQ_DEVICE` it skips with one line (a host has no RDMA device; the VM test is
//! where it runs).

#[path = "../../tests/support/lifetimes.rs"]
mod lifetimes;
#[path = "../../tests/support/skip.rs"]
mod skip;

use dvcq::Context;
use dvcq_cli::conformance::{run_on_device, WORKLOADS};

#[test]
fn workloads_agree_on_a_real_device() {
    let Some(name) = std::env::var("DVCQ_DEVICE").ok().filter(|n| !n.is_empty()) else {
        skip::skip_here("DVCQ_DEVICE is not set; tests/vm/run runs this test on rxe0 in a VM");
        return;
    };
    let ctx = Context::open(&name).unwrap_or_else(|e| panic!("{e}"));
    // One line per run (tests/vm/report.py): a row of the completions it compared, a check
    // that polls none saying what it checked, or a skip saying why. A skip or check with
    // problems is printed as a row, which the report fails.
    println!("vm-plan {}", WORKLOADS.len() * 2);
    let mut failures = Vec::new();
    for r in run_on_device(&ctx) {
        for (run, extra) in [(&r.direct, &r.cross), (&r.generic, &Vec::new())] {
            let bad = run.problems.len() + extra.len();
            let (w, name) = (run.workload, run.backend.name());
            match (&run.skipped, &run.summary) {
                (Some(why), _) if bad == 0 => println!("vm-skip {w} {name} {why}"),
                (None, Some(what)) if bad == 0 && run.records.is_empty() => println!("vm-check {w} {name} 0 {what}"),
                _ => println!("vm-row {w} {name} {} {bad} {}", run.records.len(), run.reason),
            }
            failures.extend(run.problems.iter().chain(extra.iter()).map(|p| format!("{w} [{name}]: {p}")));
        }
    }
    for f in &failures {
        println!("mismatch: {f}");
    }
    assert!(failures.is_empty(), "{} mismatches on {name}", failures.len());
}

/// On rxe the resize and extended-CQ checks run (and pass, by the test above); XRC does
/// not exist there, and its check says so. A resized rxe CQ stays polled by dvcq's reader,
/// which followed the queue to its new mapping.
#[test]
fn rxe_runs_resize_overrun_and_the_extended_cq_and_skips_xrc() {
    use dvcq::verbs::{Access, QpType, SendOp, SendWr};
    use dvcq::{BackendChoice, BackendKind, Completion, CqOptions, QpInit};
    use dvcq_cli::conformance::run;
    let Some(ctx) = real_device("rxe_runs_resize_overrun_and_the_extended_cq_and_skips_xrc") else { return };
    if ctx.info().unwrap().provider != "rxe" {
        skip::skip_here("not an rxe device");
        return;
    }
    let check = |name: &str| {
        let w = WORKLOADS.iter().find(|w| w.name == name).unwrap();
        run(&ctx, w, BackendChoice::Auto)
    };
    for name in ["cq_resize", "cq_ex_fields", "cq_overrun"] {
        let r = check(name);
        assert_eq!((r.skipped.as_deref(), r.problems.len()), (None, 0), "{name}: {:?}", r.problems);
    }
    let xrc = check("xrc_traffic");
    assert!(xrc.skipped.as_deref().is_some_and(|w| w.contains("IBV_DEVICE_XRC")), "{:?}", xrc.skipped);

    let mut cq = ctx.create_cq(CqOptions::new(8)).unwrap();
    assert_eq!(cq.backend().kind, BackendKind::Rxe);
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    let sg = [mr.slice(0, 8).unwrap()];
    for i in 0..6 {
        qp.post_send(&[SendWr::new(i, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(cq.resize(100).unwrap() >= 100);
    assert_eq!(cq.backend().kind, BackendKind::Rxe, "{}", cq.backend().reason);
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut wcs = [Completion::default(); 8];
    while got.len() < 6 && std::time::Instant::now() < deadline {
        let n = cq.poll_count(&mut wcs);
        got.extend(wcs[..n].iter().map(|c| c.wr_id));
    }
    assert_eq!(got, (0..6).collect::<Vec<_>>(), "every completion across the resize, in order, once");
}

/// The verbs lifetimes on the real device: objects dropped in any order, the rest working.
#[test]
fn objects_dropped_in_any_order_on_a_real_device() {
    let Some(name) = std::env::var("DVCQ_DEVICE").ok().filter(|n| !n.is_empty()) else {
        skip::skip_here("DVCQ_DEVICE is not set; tests/vm/run runs this test on rxe0 in a VM");
        return;
    };
    for first in ["nothing", "context", "pd", "context and pd"] {
        lifetimes::one_write(&name, first);
    }
}

/// Memory windows on the real device: a bound window keeps its region registered, and the
/// binds `Qp::bind_mw` refuses are refused before anything is posted.
#[test]
fn memory_windows_on_a_real_device() {
    let Some(name) = std::env::var("DVCQ_DEVICE").ok().filter(|n| !n.is_empty()) else {
        skip::skip_here("DVCQ_DEVICE is not set; tests/vm/run runs this test on rxe0 in a VM");
        return;
    };
    lifetimes::bind_refusals(&name);
    lifetimes::window_outlives_its_region(&name);
}

/// Receive buffers on the real device: a posted receive keeps its region registered and
/// allocated after the application drops the `Mr`, and memory of another context is
/// refused where the device writes.
#[test]
fn receive_buffers_on_a_real_device() {
    let Some(name) = std::env::var("DVCQ_DEVICE").ok().filter(|n| !n.is_empty()) else {
        skip::skip_here("DVCQ_DEVICE is not set; tests/vm/run runs this test on rxe0 in a VM");
        return;
    };
    lifetimes::receive_outlives_its_region(&name);
    lifetimes::foreign_buffers_are_refused_where_written(&name);
}

/// Zero-copy views on the real device where its backend has them (rxe): each entry a walk
/// shows is the completion a poll would have returned, and the walk consumes them.
#[test]
fn views_walk_the_real_queue() {
    use dvcq::verbs::{Access, QpType, SendOp, SendWr};
    use dvcq::{BackendKind, Completion, CqOptions, QpInit};
    let Some(name) = std::env::var("DVCQ_DEVICE").ok().filter(|n| !n.is_empty()) else {
        skip::skip_here("DVCQ_DEVICE is not set; tests/vm/run runs this test on rxe0 in a VM");
        return;
    };
    let ctx = Context::open(&name).unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    if cq.backend().kind != BackendKind::Rxe {
        assert!(cq.views().is_none(), "{name}: only rxe has views through the Cq API");
        skip::skip_here(&format!("{name}: polled by {}, which has no views", cq.backend().kind.name()));
        return;
    }
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    let sg = [mr.slice(0, 8).unwrap()];
    for i in 0..6 {
        qp.post_send(&[SendWr::new(100 + i, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = Vec::new();
    while seen.len() < 6 && std::time::Instant::now() < deadline {
        let mut walk = cq.views().expect("rxe has views");
        while let Some(v) = walk.next() {
            let c = v.completion();
            assert_eq!((v.wr_id(), v.qp_num(), v.status()), (c.wr_id, c.qp_num, 0), "{name}");
            assert_eq!(v.opcode(), c.opcode as u32, "{name}");
            seen.push(v.wr_id());
        }
    }
    assert_eq!(seen, (100..106).collect::<Vec<_>>(), "{name}: every completion, in order, once");
    let mut wcs = [Completion::default(); 4];
    assert_eq!(cq.poll_count(&mut wcs), 0, "{name}: the walks consumed what they showed");
}

/// The device `DVCQ_DEVICE` names, or `None` after one skip line.
/// On rxe the atomics and RNR retry checks run and pass (rxe keeps an atomic's operand in
/// host order); a UC pair moves a SEND and a WRITE with immediate, and a SEND with no
/// receive posted completes at the requester while the responder drops it.
#[test]
fn rxe_runs_atomics_rnr_exhaustion_and_uc() {
    use dvcq::verbs::{Access, QpAttrs, QpType, RecvWr, SendOp, SendWr};
    use dvcq::{BackendChoice, Completion, CqOptions, QpInit, WcOpcode, WcStatus};
    use dvcq_cli::conformance::run;
    let Some(ctx) = real_device("rxe_runs_atomics_rnr_exhaustion_and_uc") else { return };
    if ctx.info().unwrap().provider != "rxe" {
        skip::skip_here("not an rxe device");
        return;
    }
    for name in ["atomic_cas_fa", "rnr_retry_exceeded"] {
        let w = WORKLOADS.iter().find(|w| w.name == name).unwrap();
        let r = run(&ctx, w, BackendChoice::Auto);
        assert_eq!((r.skipped.as_deref(), r.problems.len()), (None, 0), "{name}: {:?}", r.problems);
        if name == "atomic_cas_fa" && cfg!(target_endian = "little") {
            assert!(r.summary.as_deref().is_some_and(|s| s.contains("little-endian")), "{:?}", r.summary);
        }
    }

    let mut cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(8192, Access::ALL).unwrap();
    let mut a = pd.create_qp(&QpInit::new(QpType::Uc, &cq)).unwrap();
    let mut b = pd.create_qp(&QpInit::new(QpType::Uc, &cq)).unwrap();
    let (ea, eb) = (a.endpoint().unwrap(), b.endpoint().unwrap());
    a.connect_with(&eb, &QpAttrs::default()).unwrap();
    b.connect_with(&ea, &QpAttrs::default()).unwrap();
    let mut poll = |n: usize| {
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut wcs = [Completion::default(); 8];
        while got.len() < n && std::time::Instant::now() < deadline {
            let k = cq.poll_count(&mut wcs);
            got.extend(wcs[..k].iter().map(|c| (c.wr_id, c.status, c.opcode)));
        }
        got.sort_by_key(|g| g.0);
        got
    };
    mr.write(0, b"dropped!arrives!").unwrap();
    a.post_send(&[SendWr::new(1, SendOp::Send, &[mr.slice(0, 8).unwrap()])]).unwrap();
    assert_eq!(poll(1), [(1, WcStatus::Success, WcOpcode::Send)], "a UC SEND with no receive completes");
    b.post_recv(&[RecvWr::new(10, &[mr.slice(4096, 64).unwrap()])]).unwrap();
    a.post_send(&[SendWr::new(2, SendOp::Send, &[mr.slice(8, 8).unwrap()])]).unwrap();
    assert_eq!(poll(2), [(2, WcStatus::Success, WcOpcode::Send), (10, WcStatus::Success, WcOpcode::Recv)]);
    let mut buf = [0u8; 8];
    mr.read(4096, &mut buf).unwrap();
    assert_eq!(&buf, b"arrives!", "the receive took the second SEND, the first was dropped");
    b.post_recv(&[RecvWr::new(11, &[mr.slice(4096, 64).unwrap()])]).unwrap();
    let w = SendOp::WriteWithImm(mr.remote().at(6000), 5);
    a.post_send(&[SendWr::new(3, w, &[mr.slice(0, 8).unwrap()])]).unwrap();
    assert_eq!(
        poll(2),
        [(3, WcStatus::Success, WcOpcode::RdmaWrite), (11, WcStatus::Success, WcOpcode::RecvRdmaWithImm)]
    );
    mr.read(6000, &mut buf).unwrap();
    assert_eq!(&buf, b"dropped!");

    // The caller's memory: a vector registered as it is, written by the device, given back.
    let theirs = pd.reg_mr_buffer(vec![0u8; 4096], Access::ALL).unwrap();
    let w = SendOp::Write(theirs.remote().at(16));
    a.post_send(&[SendWr::new(4, w, &[mr.slice(8, 8).unwrap()])]).unwrap();
    assert_eq!(poll(1), [(4, WcStatus::Success, WcOpcode::RdmaWrite)]);
    let v: Vec<u8> = theirs.into_buffer().unwrap();
    assert_eq!(&v[16..24], b"arrives!");

    // The rdma-core objects behind the handles: a QP's `struct ibv_qp` names its context,
    // PD and CQs and carries its number; a region's `struct ibv_mr` its keys.
    let raw = |p: Option<std::ptr::NonNull<std::ffi::c_void>>| p.expect("an rdma-core object").as_ptr();
    let (ctx_p, pd_p, cq_p, qp_p, mr_p) =
        (raw(ctx.as_raw()), raw(pd.as_raw()), raw(cq.as_raw()), raw(a.as_raw()), raw(mr.as_raw()));
    let srq = pd.create_srq(4, 1).unwrap();
    let srq_p = raw(srq.as_raw());
    // SAFETY: live objects of rdma-core 44's layouts: `struct ibv_qp` {context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num}; `struct ibv_mr` {context, pd, addr, length, handle, lkey, rkey}; `struct ibv_srq` {context, srq_context, pd}.
    unsafe {
        let word = |p: *mut std::ffi::c_void, i: usize| *p.cast::<*mut std::ffi::c_void>().add(i);
        assert_eq!((word(qp_p, 0), word(qp_p, 2), word(qp_p, 3), word(qp_p, 4)), (ctx_p, pd_p, cq_p, cq_p));
        assert_eq!(*qp_p.cast::<u8>().add(52).cast::<u32>(), a.qpn());
        assert_eq!((word(mr_p, 0), word(mr_p, 1)), (ctx_p, pd_p));
        assert_eq!(*mr_p.cast::<u8>().add(36).cast::<u32>(), mr.lkey());
        assert_eq!((word(srq_p, 0), word(srq_p, 2)), (ctx_p, pd_p));
        assert_eq!(word(pd_p, 0), ctx_p);
        assert_eq!(word(cq_p, 0), ctx_p);
    }
}

fn real_device(test: &str) -> Option<Context> {
    let Some(name) = std::env::var("DVCQ_DEVICE").ok().filter(|n| !n.is_empty()) else {
        skip::skip_here(&format!("{test}: DVCQ_DEVICE is not set; tests/vm/run runs this test on rxe0 in a VM"));
        return None;
    };
    Some(Context::open(&name).unwrap_or_else(|e| panic!("{e}")))
}

/// Completion events through the device's own completion channel (`ibv_create_comp_channel`,
/// `ibv_req_notify_cq`, `ibv_get_cq_event`, `ibv_ack_cq_events`).
mod events {
    use dvcq::verbs::{Access, QpCaps, QpType, SendOp, SendWr};
    use dvcq::{ArmMode, BackendChoice, Completion, Context, Cq, CqEventKind, CqOptions, Mr, Pd, Qp, QpInit, WcStatus};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// A wait with a completion due returns long before this, even on an emulated CPU.
    const WAIT: Duration = Duration::from_secs(20);
    const DEPTH: u32 = 32;

    /// An RC QP connected to itself, completing into `cq`, and a region it writes.
    fn loopback(ctx: &Context, cq: &Cq) -> (Qp, Mr, Pd) {
        let pd = ctx.alloc_pd().unwrap();
        let caps = QpCaps { max_send_wr: DEPTH, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let mut qp = pd.create_qp(&QpInit { caps, ..QpInit::new(QpType::Rc, cq) }).unwrap();
        let me = qp.endpoint().unwrap();
        qp.connect(&me).unwrap();
        let mr = pd.reg_mr(4096, Access::ALL).unwrap();
        (qp, mr, pd)
    }

    fn write(qp: &mut Qp, mr: &Mr, wr_id: u64) {
        let sg = [mr.slice(0, 8).unwrap()];
        qp.post_send(&[SendWr::new(wr_id, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
    }

    /// Polls until `n` completions came (the device completes a WRITE asynchronously).
    fn take(cq: &mut Cq, n: usize) -> Vec<Completion> {
        let mut all = Vec::new();
        let mut wcs = [Completion::default(); 16];
        let t = Instant::now();
        while all.len() < n {
            assert!(t.elapsed() < WAIT, "{}: {} of {n} completions", cq.id(), all.len());
            let k = cq.poll_count(&mut wcs);
            all.extend_from_slice(&wcs[..k]);
        }
        all
    }

    /// One CQ on a channel, on each backend that can be armed: an armed CQ's event names
    /// it; `wait` sleeps through an idle timeout and takes a producer thread's completions
    /// in order; events are acknowledged in batches and all of them before the destroy.
    #[test]
    fn completion_events_through_a_real_channel() {
        let Some(ctx) = super::real_device("completion_events_through_a_real_channel") else { return };
        for choice in [BackendChoice::Auto, BackendChoice::Generic] {
            let ch = ctx.create_channel().unwrap();
            let mut cq = ctx.create_cq_on(&ch, CqOptions::new(DEPTH).backend(choice)).unwrap();
            let backend = cq.backend().kind.name();
            let (mut qp, mr, _pd) = loopback(&ctx, &cq);
            // Arm, complete, and the event arrives naming this CQ.
            cq.arm(ArmMode::Next).unwrap();
            write(&mut qp, &mr, 1);
            let e = ch.next_event(Some(WAIT)).unwrap().unwrap_or_else(|| panic!("{backend}: no event"));
            assert_eq!((e.cq, e.kind), (cq.id(), CqEventKind::Completion), "{backend}");
            assert_eq!(take(&mut cq, 1)[0].wr_id, 1, "{backend}");
            assert!(ch.try_next_event().unwrap().is_none(), "{backend}: one event per arm");
            assert_eq!(ch.unacked_events(), 1, "{backend}: acknowledged in batches, not one by one");
            // Nothing due: a wait sleeps its timeout and returns nothing.
            let mut wcs = [Completion::default(); 16];
            let t = Instant::now();
            assert!(cq.wait(&mut wcs, Some(Duration::from_millis(50))).unwrap().is_empty(), "{backend}");
            assert!(t.elapsed() >= Duration::from_millis(50), "{backend}");
            // A producer thread writes at random intervals; wait takes them all, in order.
            const N: u64 = 300;
            let consumed = Arc::new(AtomicU64::new(0));
            let producer = {
                let consumed = consumed.clone();
                std::thread::spawn(move || {
                    let mut x = 0x9e37_79b9_7f4a_7c15u64;
                    for i in 0..N {
                        while i >= consumed.load(Ordering::Acquire) + u64::from(DEPTH) {
                            std::thread::yield_now();
                        }
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        std::thread::sleep(Duration::from_micros(x % 300));
                        write(&mut qp, &mr, 100 + i);
                    }
                    (qp, mr)
                })
            };
            let mut next = 100;
            while next < 100 + N {
                let polled = cq.wait(&mut wcs, Some(WAIT)).unwrap();
                assert!(!polled.is_empty(), "{backend}: a wait slept {WAIT:?} with completion {next} due");
                for wc in polled {
                    assert_eq!((wc.wr_id, wc.status), (next, WcStatus::Success), "{backend}");
                    next += 1;
                }
                consumed.store(next - 100, Ordering::Release);
            }
            let _ = producer.join().unwrap();
            assert!(cq.events_taken() > 0, "{backend}: the waits slept on events");
            assert!(ch.unacked_events() < 16, "{backend}: {} events unacknowledged", ch.unacked_events());
            println!("events: {backend}: {N} completions through wait, {} events", cq.events_taken());
            drop(cq);
            assert_eq!(ch.unacked_events(), 0, "{backend}: every event acknowledged before the destroy");
        }
    }

    /// Three CQs share one channel: the events of an armed pair name them, and three waiter
    /// threads, one per CQ, each get exactly their own CQ's completions while one producer
    /// writes to all three QPs.
    #[test]
    fn one_channel_for_several_cqs() {
        const CQS: usize = 3;
        const PER: u64 = 200;
        let Some(ctx) = super::real_device("one_channel_for_several_cqs") else { return };
        let ch = ctx.create_channel().unwrap();
        let mut cqs: Vec<Cq> = (0..CQS).map(|_| ctx.create_cq_on(&ch, CqOptions::new(DEPTH)).unwrap()).collect();
        let mut qps: Vec<(Qp, Mr, Pd)> = cqs.iter().map(|cq| loopback(&ctx, cq)).collect();
        for cq in cqs.iter_mut() {
            cq.arm(ArmMode::Next).unwrap();
        }
        for k in [0, 2] {
            let (qp, mr, _) = &mut qps[k];
            write(qp, mr, 0);
        }
        let mut named: Vec<_> = (0..2).map(|_| ch.next_event(Some(WAIT)).unwrap().expect("an event").cq).collect();
        named.sort();
        assert_eq!(named, [cqs[0].id(), cqs[2].id()], "the events name the CQs that completed");
        for k in [0, 2] {
            take(&mut cqs[k], 1);
        }
        let consumed: Vec<Arc<AtomicU64>> = (0..CQS).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let waiters: Vec<_> = cqs
            .into_iter()
            .zip(qps.iter().map(|(qp, _, _)| qp.qpn()))
            .zip(consumed.iter().cloned())
            .map(|((mut cq, qpn), consumed)| {
                std::thread::spawn(move || {
                    let mut wcs = [Completion::default(); 16];
                    let mut got = 0;
                    while got < PER {
                        let id = cq.id();
                        let polled = cq.wait(&mut wcs, Some(WAIT)).unwrap();
                        assert!(!polled.is_empty(), "{id}: a waiter slept {WAIT:?} with completions due");
                        for wc in polled {
                            assert_eq!((wc.qp_num, wc.wr_id, wc.status), (qpn, 1 + got, WcStatus::Success));
                            got += 1;
                        }
                        consumed.store(got, Ordering::Release);
                    }
                    cq
                })
            })
            .collect();
        let t0 = Instant::now();
        for i in 0..PER {
            for (k, (qp, mr, _)) in qps.iter_mut().enumerate() {
                while i >= consumed[k].load(Ordering::Acquire) + u64::from(DEPTH) {
                    assert!(t0.elapsed() < Duration::from_secs(120), "cq {k}: its waiter stopped taking completions");
                    assert!(!waiters[k].is_finished(), "cq {k}: its waiter failed");
                    std::thread::yield_now();
                }
                write(qp, mr, 1 + i);
            }
            if i % 20 == 19 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let cqs: Vec<Cq> =
            waiters.into_iter().map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect();
        let events: Vec<u64> = cqs.iter().map(Cq::events_taken).collect();
        println!("events: {CQS} CQs on one channel, {PER} completions each, events {events:?}");
        assert!(events.iter().all(|&e| e > 0), "every waiter slept on the shared channel: {events:?}");
        // The QPs hold their CQs: the CQs are destroyed (and their events acknowledged) with
        // the last of both.
        drop(qps);
        drop(cqs);
        assert_eq!(ch.unacked_events(), 0, "every event acknowledged before the destroys");
    }
}
