//! [`AsyncCq`] on both models (feature `tokio`; `cargo test --features tokio --test
//! async_wait`): completions written by a thread at random intervals are taken in order by a
//! task sleeping on tokio's reactor; several AsyncCqs wait on one current-thread runtime;
//! a channel shared with other waiters, sync or async, loses no event either way; an
//! overrun wakes the wait; the race the poll after the arm closes; a cancelled wait loses
//! nothing; an endless timeout; the refusals.

use dvcq::verbs::{Access, QpCaps, QpType, SendOp, SendWr};
use dvcq::{ArmMode, AsyncCq, Completion, CompletionChannel, Context, Cq, CqOptions, Mr, Qp, QpInit, WcStatus};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MODELS: [&str; 2] = ["model-mlx5", "model-e810"];
const DEPTH: u32 = 64;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// An AsyncCq on a channel of its own, and a QP connected to itself completing into it.
fn setup(device: &str) -> (AsyncCq, Qp, Mr) {
    let ctx = Context::open(device).unwrap();
    let ch = ctx.create_channel().unwrap();
    let cq = ctx.create_cq_on(&ch, CqOptions::new(DEPTH)).unwrap();
    let (qp, mr) = loopback(&ctx, &cq);
    (AsyncCq::new(cq).unwrap(), qp, mr)
}

/// A QP connected to itself completing into `cq`, and a region.
fn loopback(ctx: &Context, cq: &Cq) -> (Qp, Mr) {
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let caps = QpCaps { max_send_wr: DEPTH, ..QpCaps::default() };
    let mut qp = pd.create_qp(&QpInit { caps, ..QpInit::new(QpType::Rc, cq) }).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    (qp, mr)
}

fn write(qp: &mut Qp, mr: &Mr, wr_id: u64) {
    let sg = [mr.slice(0, 8).unwrap()];
    qp.post_send(&[SendWr::new(wr_id, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
}

/// A thread writing `n` completions at random intervals, never more outstanding than the
/// CQ holds (`consumed` counts what the waiter took).
fn producer(mut qp: Qp, mr: Mr, n: u64, consumed: Arc<AtomicU64>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..n {
            while i >= consumed.load(Ordering::Acquire) + u64::from(DEPTH) {
                std::thread::yield_now();
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % 4 == 0 {
                std::thread::sleep(Duration::from_micros(x % 300));
            }
            write(&mut qp, &mr, i);
        }
    })
}

/// Takes `n` completions with `wait`, checking their order; a wait stuck for 10 s fails.
async fn take(cq: &mut AsyncCq, n: u64, consumed: &AtomicU64, what: &str) {
    let mut wcs = [Completion::default(); 16];
    let mut next = 0;
    while next < n {
        let got = cq.wait_timeout(&mut wcs, Duration::from_secs(10)).await.unwrap();
        assert!(!got.is_empty(), "{what}: slept 10 s with completion {next} of {n} due");
        for wc in got {
            assert_eq!((wc.wr_id, wc.status), (next, WcStatus::Success), "{what}");
            next += 1;
        }
        consumed.store(next, Ordering::Release);
    }
}

#[test]
fn a_task_takes_every_completion_in_order() {
    for d in MODELS {
        runtime().block_on(async {
            let (mut cq, qp, mr) = setup(d);
            let consumed = Arc::new(AtomicU64::new(0));
            let p = producer(qp, mr, 5000, consumed.clone());
            take(&mut cq, 5000, &consumed, d).await;
            p.join().unwrap();
            assert!(cq.cq().events_taken() > 0, "{d}: the task slept on events");
            let mut wcs = [Completion::default(); 4];
            assert_eq!(cq.cq().poll_count(&mut wcs), 0, "{d}: nothing beyond what was written");
        });
    }
}

/// Four AsyncCqs, each on its own channel, waited on by four tasks of one current-thread
/// runtime: the reactor wakes each task for its own CQ.
#[test]
fn several_async_cqs_share_one_thread() {
    for d in MODELS {
        runtime().block_on(async {
            let mut tasks = Vec::new();
            let mut producers = Vec::new();
            for k in 0..4 {
                let (mut cq, qp, mr) = setup(d);
                let consumed = Arc::new(AtomicU64::new(0));
                producers.push(producer(qp, mr, 1000, consumed.clone()));
                tasks.push(tokio::spawn(async move {
                    take(&mut cq, 1000, &consumed, &format!("{d} cq {k}")).await;
                    cq.cq().events_taken()
                }));
            }
            for t in tasks {
                assert!(t.await.unwrap() > 0, "{d}: each task slept on its CQ's events");
            }
            producers.into_iter().for_each(|p| p.join().unwrap());
        });
    }
}

#[test]
fn next_returns_one_completion_and_a_cancelled_wait_loses_none() {
    for d in MODELS {
        runtime().block_on(async {
            let (mut cq, mut qp, mr) = setup(d);
            let mut wcs = [Completion::default(); 8];
            assert!(cq.wait_timeout(&mut wcs, Duration::from_millis(20)).await.unwrap().is_empty(), "{d}: idle");
            // The timed-out wait left an arm behind: its stale event costs nothing.
            write(&mut qp, &mr, 1);
            write(&mut qp, &mr, 2);
            assert_eq!(cq.next().await.unwrap().wr_id, 1, "{d}");
            assert_eq!(cq.next().await.unwrap().wr_id, 2, "{d}");
            // A wait cancelled while asleep (its timeout dropped it) took nothing.
            let r = tokio::time::timeout(Duration::from_millis(10), cq.wait(&mut wcs)).await;
            assert!(r.is_err(), "{d}: nothing was written, yet wait returned {r:?}");
            write(&mut qp, &mr, 3);
            let got = cq.wait(&mut wcs).await.unwrap();
            assert_eq!((got.len(), got[0].wr_id), (1, 3), "{d}");
        });
    }
}

#[test]
fn refusals_are_clear() {
    let ctx = Context::open("model-mlx5").unwrap();
    let rt = runtime();
    let _guard = rt.enter();
    let e = AsyncCq::new(ctx.create_cq(CqOptions::new(8)).unwrap()).unwrap_err();
    assert!(e.to_string().contains("without a completion channel"), "{e}");
    drop(_guard);
    // Outside a runtime the fd has no reactor to join.
    let ch = ctx.create_channel().unwrap();
    let e = AsyncCq::new(ctx.create_cq_on(&ch, CqOptions::new(8)).unwrap()).unwrap_err();
    assert!(e.to_string().contains("could not join the tokio reactor"), "{e}");
}

/// How many times each direction of the shared-channel test makes the race.
const SHARED_ROUNDS: u64 = 200;
/// Longer than any wait for a completion already written takes on a loaded machine.
const LATE: Duration = Duration::from_secs(2);
/// The busy waiter's timeout: a wait that reaches it lost its wakeup.
const LOST: Duration = Duration::from_secs(5);

/// One waiter on each of two CQs of one channel, an AsyncCq (made while it was the
/// channel's only CQ) and a thread in `Cq::wait` (its CQ made on the channel after). A
/// producer completes one at a time on `busy`'s QP (the AsyncCq's, or the thread's), each
/// once both waiters sleep; the other waiter's CQ gets nothing, so its waiter wakes only to
/// read the channel and routes each event it reads to `busy`'s waiter. Every completion is
/// taken within [`LATE`]: an event read by the wrong waiter and dropped or misfiled would
/// leave it to the wait's timeout.
fn shared_channel(device: &str, async_busy: bool) {
    let ctx = Context::open(device).unwrap();
    let ch = ctx.create_channel().unwrap();
    let a = ctx.create_cq_on(&ch, CqOptions::new(DEPTH)).unwrap();
    let (qp_a, mr_a) = loopback(&ctx, &a);
    let rt = runtime();
    let mut acq = {
        let _guard = rt.enter();
        AsyncCq::new(a).unwrap()
    };
    let mut b = ctx.create_cq_on(&ch, CqOptions::new(DEPTH)).unwrap();
    let (qp_b, mr_b) = loopback(&ctx, &b);
    let (mut qp, mr) = if async_busy { (qp_a, mr_a) } else { (qp_b, mr_b) };
    let what = format!("{device}, completions on the {} CQ", if async_busy { "AsyncCq's" } else { "thread's" });
    let consumed = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let producer = {
        let (consumed, done) = (consumed.clone(), done.clone());
        std::thread::spawn(move || {
            for i in 0..SHARED_ROUNDS {
                while consumed.load(Ordering::Acquire) < i && !done.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                // Both waiters fall asleep.
                std::thread::sleep(Duration::from_millis(1));
                write(&mut qp, &mr, i);
            }
        })
    };
    let stop = Arc::new(AtomicBool::new(false));
    let thread_waiter = {
        let (consumed, done, stop, what) = (consumed.clone(), done.clone(), stop.clone(), what.clone());
        std::thread::spawn(move || -> Cq {
            let mut wcs = [Completion::default(); 4];
            let mut next = 0;
            while !stop.load(Ordering::Acquire) {
                let t = Instant::now();
                let got = b.wait(&mut wcs, Some(if async_busy { Duration::from_millis(20) } else { LOST }));
                let got = got.unwrap();
                if async_busy {
                    assert!(got.is_empty(), "{what}: the thread's CQ got nothing");
                    continue;
                }
                assert!(
                    !got.is_empty() && t.elapsed() < LATE,
                    "{what}: the thread slept {:?} with completion {next} due",
                    t.elapsed()
                );
                for wc in got {
                    assert_eq!(wc.wr_id, next, "{what}");
                    next += 1;
                }
                consumed.store(next, Ordering::Release);
                if next == SHARED_ROUNDS {
                    break;
                }
            }
            done.store(true, Ordering::Release);
            b
        })
    };
    rt.block_on(async {
        let mut wcs = [Completion::default(); 4];
        let mut next = 0;
        while next < SHARED_ROUNDS {
            let t = Instant::now();
            let got = acq.wait_timeout(&mut wcs, if async_busy { LOST } else { Duration::from_secs(1) }).await.unwrap();
            if !async_busy {
                assert!(got.is_empty(), "{what}: the AsyncCq's CQ got nothing");
                if done.load(Ordering::Acquire) || thread_waiter.is_finished() {
                    break;
                }
                continue;
            }
            assert!(
                !got.is_empty() && t.elapsed() < LATE,
                "{what}: the task slept {:?} with completion {next} due",
                t.elapsed()
            );
            for wc in got {
                assert_eq!(wc.wr_id, next, "{what}");
                next += 1;
            }
            consumed.store(next, Ordering::Release);
        }
    });
    stop.store(true, Ordering::Release);
    done.store(true, Ordering::Release);
    let mut b = thread_waiter.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    producer.join().unwrap();
    assert_eq!(consumed.load(Ordering::Acquire), SHARED_ROUNDS, "{what}");
    let mut wcs = [Completion::default(); 4];
    assert_eq!((acq.cq().poll_count(&mut wcs), b.poll_count(&mut wcs)), (0, 0), "{what}: nothing left over");
    let busy_events = if async_busy { acq.cq().events_taken() } else { b.events_taken() };
    assert!(busy_events > 0, "{what}: the busy waiter slept on events");
}

#[test]
fn a_thread_sharing_the_channel_does_not_take_the_async_cqs_events() {
    for d in MODELS {
        shared_channel(d, true);
    }
}

#[test]
fn an_async_cq_sharing_the_channel_does_not_drop_a_threads_events() {
    for d in MODELS {
        shared_channel(d, false);
    }
}

/// Two AsyncCqs on one channel, tasks of one runtime: each gets its own completions, the
/// other's events read by it notwithstanding.
#[test]
fn two_async_cqs_share_a_channel() {
    for d in MODELS {
        runtime().block_on(async {
            let ctx = Context::open(d).unwrap();
            let ch: CompletionChannel = ctx.create_channel().unwrap();
            let mut tasks = Vec::new();
            let mut producers = Vec::new();
            for k in 0..2 {
                let cq = ctx.create_cq_on(&ch, CqOptions::new(DEPTH)).unwrap();
                let (qp, mr) = loopback(&ctx, &cq);
                let mut cq = AsyncCq::new(cq).unwrap();
                let consumed = Arc::new(AtomicU64::new(0));
                producers.push(producer(qp, mr, 1000, consumed.clone()));
                tasks.push(tokio::spawn(async move {
                    take(&mut cq, 1000, &consumed, &format!("{d} cq {k}")).await;
                    cq.cq().events_taken()
                }));
            }
            for t in tasks {
                assert!(t.await.unwrap() > 0, "{d}: each task slept on its CQ's events");
            }
            producers.into_iter().for_each(|p| p.join().unwrap());
        });
    }
}

/// A CQ that overruns while its AsyncCq sleeps (armed for solicited completions, which
/// plain writes are not) reports on the context's async fd, not the channel's: the wait
/// wakes, returns what was written before the overrun, then the overrun error, as
/// `Cq::wait` does.
#[test]
fn an_overrun_wakes_the_async_wait_and_is_its_error() {
    for d in MODELS {
        runtime().block_on(async {
            let ctx = Context::open(d).unwrap();
            let ch = ctx.create_channel().unwrap();
            let cq = ctx.create_cq_on(&ch, CqOptions::new(1)).unwrap();
            let (mut qp, mr) = loopback(&ctx, &cq);
            let mut cq = AsyncCq::new(cq).unwrap().with_arm(ArmMode::Solicited);
            let writer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                for i in 0..8 {
                    let sg = [mr.slice(0, 8).unwrap()];
                    let _ = qp.post_send(&[SendWr::new(i, SendOp::Write(mr.remote().at(64)), &sg)]);
                }
                (qp, mr)
            });
            let mut wcs = [Completion::default(); 16];
            let t = Instant::now();
            let n = cq.wait_timeout(&mut wcs, Duration::from_secs(5)).await.unwrap().len();
            let took = t.elapsed();
            assert!(
                n > 0 && took < Duration::from_secs(2),
                "{d}: {n} completions after {took:?}: the overrun did not wake the wait"
            );
            let _ = writer.join().unwrap();
            let t = Instant::now();
            let e = loop {
                match cq.wait_timeout(&mut wcs, Duration::from_secs(5)).await {
                    Ok(got) => assert!(!got.is_empty(), "{d}: slept through the overrun error"),
                    Err(e) => break e,
                }
            };
            assert!(e.to_string().contains("overran") && t.elapsed() < Duration::from_secs(2), "{d}: {e}");
            assert!(cq.wait(&mut wcs).await.unwrap_err().to_string().contains("overran"), "{d}: and stays in error");
        });
    }
}

/// The race the wait's poll after its arm closes (the model's `before_next_arm`): a
/// completion lands after the empty poll and before the device sees the arm, and raises no
/// event; the wait finds it at once.
#[test]
fn a_completion_landing_between_the_empty_poll_and_the_arm_is_found_at_once() {
    for d in MODELS {
        runtime().block_on(async {
            let ctx = Context::open(d).unwrap();
            let ch = ctx.create_channel().unwrap();
            let cq = ctx.create_cq_on(&ch, CqOptions::new(DEPTH)).unwrap();
            let qp = Arc::new(Mutex::new(loopback(&ctx, &cq)));
            let mut cq = AsyncCq::new(cq).unwrap();
            let q = qp.clone();
            cq.cq().model().expect("a model CQ").before_next_arm(move || {
                let (qp, mr) = &mut *q.lock().unwrap();
                write(qp, mr, 7);
            });
            let mut wcs = [Completion::default(); 4];
            let t = Instant::now();
            let got = cq.wait_timeout(&mut wcs, Duration::from_secs(5)).await.unwrap();
            assert_eq!((got.len(), got[0].wr_id), (1, 7), "{d}");
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "{d}: slept {:?} through a completion in its CQ",
                t.elapsed()
            );
            let stats = cq.cq().model().unwrap().arm_stats();
            assert_eq!((stats.taken, stats.events), (1, 0), "{d}: the arm was taken and raised no event");
        });
    }
}

/// A timeout too long for an `Instant` is no deadline.
#[test]
fn an_endless_timeout_is_no_deadline() {
    for d in MODELS {
        runtime().block_on(async {
            let (mut cq, mut qp, mr) = setup(d);
            write(&mut qp, &mr, 1);
            let mut wcs = [Completion::default(); 4];
            assert_eq!(cq.wait_timeout(&mut wcs, Duration::MAX).await.unwrap().len(), 1, "{d}");
        });
    }
}
