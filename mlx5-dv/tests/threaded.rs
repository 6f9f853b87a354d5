//! A producer thread (the model) and a consumer (the poller) racing on one ring: at least
//! 10^7 CQEs (in release builds; set DVCQ_THREADED_CQES to change, to no fewer than
//! [`FLOOR`]), checked for loss, duplication and reordering through a sequence number
//! carried in the CQE timestamp. Both sides wait with bounded backoff; the consumer stops
//! as soon as the producer fails, and after [`IDLE_LIMIT`] without a completion.

use dvcq_mlx5_dv::model::build;
use dvcq_mlx5_dv::model::compress::{Compression, Policy};
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig, ModelError};
use dvcq_mlx5_dv::{CompLayout, CqConfig, MiniFormat, QpConfig, Registry};
use dvcq_provider::testing::threaded::{threaded_count, ProducerWatch};
use dvcq_provider::{Completion, WcOpcode, WcStatus};
use dvcq_uapi::mlx5::opcode::{cqe_opcode, wqe_opcode};
use std::time::{Duration, Instant};

/// The fewest CQEs a run may be set to: the smallest run here (a twentieth of the count)
/// still laps its 64-entry ring more than ten times.
const FLOOR: u64 = 20_000;

/// How long the producer waits for a free slot before it gives up.
const STALL: Duration = Duration::from_secs(30);

/// How long the consumer waits for a completion while the producer runs: past the
/// producer's own limit, so a stalled producer is the one that reports.
const IDLE_LIMIT: Duration = Duration::from_secs(60);

fn count() -> u64 {
    threaded_count("DVCQ_THREADED_CQES", if cfg!(debug_assertions) { 1_000_000 } else { 10_000_000 }, FLOOR)
}

fn run<const S: usize>(n: u64, entries: u32) {
    let mut mc = ModelConfig::new(entries);
    mc.cqe_size = S as u32;
    let model = Mlx5Model::new(mc).unwrap();
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(7, 1 << 16, 1 << 16)).unwrap();
    let mut cq = model.poller::<S>(reg, CqConfig::default()).unwrap();
    let producer = model.spawn_producer(
        (0..n).map(|i| {
            let e = if i % 2 == 0 {
                build::req(7, (i / 2) as u16, wqe_opcode::SEND, 0)
            } else {
                build::resp(cqe_opcode::RESP_SEND, 7, (i / 2) as u16, (i % 4096) as u32, 0)
            };
            e.timestamp(i)
        }),
        STALL,
    );
    let mut producer = ProducerWatch::new(producer, IDLE_LIMIT);
    let mut next = 0u64;
    let mut buf = [Completion::default(); 32];
    while next < n {
        let k = cq.poll(&mut buf);
        for c in &buf[..k] {
            assert_eq!(c.timestamp, next, "lost, duplicated or reordered completion");
            assert_eq!(c.status, WcStatus::Success);
            let (op, idx) =
                if next % 2 == 0 { (WcOpcode::Send, (next / 2) as u16) } else { (WcOpcode::Recv, (next / 2) as u16) };
            assert_eq!((c.opcode, c.wqe_index), (op, idx), "at {next}");
            if next % 2 == 1 {
                assert_eq!(c.byte_len, (next % 4096) as u32);
            }
            next += 1;
        }
        if k == 0 {
            producer.idle(next).unwrap_or_else(|e| panic!("{e}"));
        } else {
            producer.progress();
        }
    }
    let model = producer.finish().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(model.pi() as u64, n);
    assert!(model.events().is_empty(), "no overrun when the producer is paced by the doorbell record");
    assert!(cq.poll_one().is_none());
}

#[test]
fn threaded_producer_and_consumer_lose_nothing() {
    run::<64>(count(), 1024);
}

#[test]
fn threaded_small_ring_128_byte_cqes() {
    run::<128>(count() / 10, 8);
}

/// A compressing producer thread: runs of sends and of receives that the model packs into
/// sessions of random length, against a poller on a small ring that the producer keeps
/// full (the device may then reuse a slot as soon as the doorbell record frees it, the
/// title's included). Order is checked by the send WQE counter and by the receive byte
/// count, which the mini-CQEs carry.
fn run_compressed(n: u64, entries: u32, layout: CompLayout) {
    let mut mc = ModelConfig::new(entries);
    mc.compression =
        Some(Compression { layout, format: MiniFormat::Hash, policy: Policy::RandomRuns { seed: 9, max: 40 } });
    let model = Mlx5Model::new(mc).unwrap();
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(7, 1 << 16, 1 << 16)).unwrap();
    let mut cq = model.poller::<64>(reg, CqConfig::default()).unwrap();
    // Runs of 37 completions of one kind; within a run only what a mini-CQE carries varies.
    let send = |i: u64| (i / 37) % 2 == 0;
    let producer = model.spawn_producer(
        (0..n).map(move |i| {
            let run = i / 37;
            let e = if send(i) {
                build::req(7, i as u16, wqe_opcode::SEND, 0)
            } else {
                // The RQ WQE counter: receives before this one (every other run).
                let ctr = (run / 2 * 37 + i % 37) as u16;
                build::resp(cqe_opcode::RESP_SEND, 7, ctr, (i % (1 << 30)) as u32, 0)
            };
            e.timestamp(run)
        }),
        STALL,
    );
    let mut producer = ProducerWatch::new(producer, IDLE_LIMIT);
    let (mut next, mut recvs) = (0u64, 0u64);
    let mut buf = [Completion::default(); 32];
    while next < n {
        let k = cq.poll(&mut buf[..1 + (next % 32) as usize]);
        for c in &buf[..k] {
            let what = format!("{layout:?}, completion {next}");
            assert_eq!((c.status, c.timestamp), (WcStatus::Success, next / 37), "{what}: {c:?}");
            if send(next) {
                assert_eq!((c.opcode, c.wqe_index), (WcOpcode::Send, next as u16), "{what}");
            } else {
                assert_eq!((c.opcode, c.byte_len), (WcOpcode::Recv, (next % (1 << 30)) as u32), "{what}");
                assert_eq!(c.wqe_index, recvs as u16, "{what}: the RQ WQE");
                recvs += 1;
            }
            next += 1;
        }
        if k == 0 {
            producer.idle(next).unwrap_or_else(|e| panic!("{layout:?}: {e}"));
        } else {
            producer.progress();
        }
    }
    let model = producer.finish().unwrap_or_else(|e| panic!("{layout:?}: {e}"));
    assert!(model.events().is_empty(), "no overrun when the producer is paced by the doorbell record");
    assert!(cq.poll_one().is_none());
    assert!(cq.stats().sessions > 0 && cq.stats().faults == 0, "{layout:?}: {:?}", cq.stats());
}

#[test]
fn threaded_compressed_sessions_lose_nothing() {
    for (layout, entries) in [(CompLayout::Basic, 64), (CompLayout::Enhanced, 16), (CompLayout::Enhanced, 64)] {
        run_compressed(count() / 20, entries, layout);
    }
}

/// A producer that gives up stops the consumer at once with the producer's error: a
/// consumer that never frees a slot (it polls into an empty buffer) leaves the producer
/// stalled on a full ring, and the consumer reports that stall soon after the producer's
/// stall time, not after its own idle limit.
#[test]
fn a_stalled_producer_stops_the_consumer() {
    let model = Mlx5Model::new(ModelConfig::new(8)).unwrap();
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(7, 64, 64)).unwrap();
    let mut cq = model.poller::<64>(reg, CqConfig::default()).unwrap();
    let stall = Duration::from_millis(200);
    let entries = (0..9u16).map(|i| build::req(7, i, wqe_opcode::SEND, 0));
    let mut producer = ProducerWatch::new(model.spawn_producer(entries, stall), IDLE_LIMIT);
    let t = Instant::now();
    let e = loop {
        assert_eq!(cq.poll(&mut []), 0);
        if let Err(e) = producer.idle(0) {
            break e;
        }
    };
    let stalled = ModelError::Stalled { pi: 8, ms: 200 };
    assert_eq!(e, format!("the producer failed: {stalled}"));
    assert!(t.elapsed() < stall + Duration::from_secs(10), "{:?}", t.elapsed());
    // The eight CQEs it wrote are all there.
    assert_eq!(cq.poll(&mut [Completion::default(); 16]), 8);
}

/// A CQ created with overrun-ignore: the device does not look at the consumer index, and
/// neither does the producer thread, which writes over CQEs the consumer has not taken.
/// A consumer that does not poll while three laps and five CQEs are written finds the
/// producer done (a producer pacing on the doorbell record would stall there), no CQ
/// error raised, nothing to poll at its index (that slot holds the fourth lap's CQE), and
/// the overrun reported by the poller's check; a poller that kept up sees none.
#[test]
fn an_overrun_ignore_producer_overwrites_and_the_poller_reports_it() {
    let mut mc = ModelConfig::new(64);
    mc.overrun_ignore = true;
    let model = Mlx5Model::new(mc).unwrap();
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(7, 1 << 16, 1 << 16)).unwrap();
    let mut cq = model.poller::<64>(reg.clone(), CqConfig::default()).unwrap();
    assert_eq!(cq.overrun_detected(), None, "a fresh CQ");
    let n = 3 * 64 + 5;
    let entries = (0..n).map(|i| build::req(7, i as u16, wqe_opcode::SEND, 0).timestamp(u64::from(i)));
    let model = model.spawn_producer(entries, Duration::from_secs(5)).join().unwrap().unwrap();
    assert_eq!((model.pi(), model.events().len()), (n, 0));
    let mut buf = [Completion::default(); 8];
    assert_eq!(cq.poll(&mut buf), 0);
    assert_eq!(cq.overrun_detected(), Some(0));

    // Kept up with: every CQE polled, no overrun to report.
    let mut mc = ModelConfig::new(64);
    mc.overrun_ignore = true;
    let model = Mlx5Model::new(mc).unwrap();
    let mut cq = model.poller::<64>(reg, CqConfig::default()).unwrap();
    let mut producer = ProducerWatch::new(
        model.spawn_producer((0..40u16).map(|i| build::req(7, i, wqe_opcode::SEND, 0)), STALL),
        IDLE_LIMIT,
    );
    let mut got = 0;
    while got < 40 {
        let k = cq.poll(&mut buf);
        got += k;
        if k == 0 {
            producer.idle(got as u64).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    producer.finish().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cq.overrun_detected(), None);
}

/// An overrun-ignore producer racing a consumer slower than it: the producer never waits,
/// the consumer loses CQEs (their sequence numbers, carried in the timestamp, jump) and
/// nothing panics; whatever it polls is a CQE the producer wrote. (Whether the poller's
/// check sees the overrun depends on where the laps stand when it looks; the test above
/// pins a case where it does.)
#[test]
fn a_racing_overrun_ignore_producer_laps_a_slow_consumer() {
    let mut mc = ModelConfig::new(64);
    mc.overrun_ignore = true;
    let model = Mlx5Model::new(mc).unwrap();
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(7, 1 << 16, 1 << 16)).unwrap();
    let mut cq = model.poller::<64>(reg, CqConfig::default()).unwrap();
    let n = 200_000u64;
    let entries = (0..n).map(|i| build::req(7, i as u16, wqe_opcode::SEND, 0).timestamp(i));
    let producer = model.spawn_producer(entries, Duration::from_secs(5));
    let mut buf = [Completion::default(); 8];
    let (mut got, mut jumps, mut last) = (0u64, 0u64, None::<u64>);
    loop {
        let done = producer.is_finished();
        let k = cq.poll(&mut buf);
        for c in &buf[..k] {
            assert!(c.timestamp < n, "a CQE the producer never wrote: {c:?}");
            if last.is_some_and(|l| c.timestamp != l + 1) {
                jumps += 1;
            }
            last = Some(c.timestamp);
        }
        got += k as u64;
        if k == 0 {
            // Not on the poll path: asked when the CQ looks empty.
            let _ = cq.overrun_detected();
            if done {
                break;
            }
        }
        // A slow consumer.
        std::thread::sleep(Duration::from_micros(200));
    }
    let model = producer.join().unwrap().unwrap();
    assert_eq!((model.pi() as u64, model.events().len()), (n, 0));
    assert!(got < n && jumps > 0, "polled {got} of {n}, {jumps} jumps: the producer never lapped the consumer");
}
