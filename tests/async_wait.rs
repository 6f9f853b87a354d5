//! [`AsyncCq`] on both models (feature `tokio`; `cargo test --features tokio --test
//! async_wait`): completions written by a thread at random intervals are taken in order by a
//! task sleeping on tokio's reactor; several AsyncCqs wait on one current-thread runtime;
//! a cancelled wait loses nothing; the refusals.

use dvcq::verbs::{Access, QpCaps, QpType, SendOp, SendWr};
use dvcq::{AsyncCq, Completion, Context, CqOptions, Mr, Qp, QpInit, WcStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let caps = QpCaps { max_send_wr: DEPTH, ..QpCaps::default() };
    let mut qp = pd.create_qp(&QpInit { caps, ..QpInit::new(QpType::Rc, &cq) }).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    (AsyncCq::new(cq).unwrap(), qp, mr)
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
        assert!(got > 0, "{what}: slept 10 s with completion {next} of {n} due");
        for wc in &wcs[..got] {
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
            assert_eq!(cq.cq().poll(&mut wcs), 0, "{d}: nothing beyond what was written");
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
            assert_eq!(cq.wait_timeout(&mut wcs, Duration::from_millis(20)).await.unwrap(), 0, "{d}: idle");
            // The timed-out wait left an arm behind: its stale event costs nothing.
            write(&mut qp, &mr, 1);
            write(&mut qp, &mr, 2);
            assert_eq!(cq.next().await.unwrap().wr_id, 1, "{d}");
            assert_eq!(cq.next().await.unwrap().wr_id, 2, "{d}");
            // A wait cancelled while asleep (its timeout dropped it) took nothing.
            let r = tokio::time::timeout(Duration::from_millis(10), cq.wait(&mut wcs)).await;
            assert!(r.is_err(), "{d}: nothing was written, yet wait returned {r:?}");
            write(&mut qp, &mr, 3);
            let n = cq.wait(&mut wcs).await.unwrap();
            assert_eq!((n, wcs[0].wr_id), (1, 3), "{d}");
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
    let ch = ctx.create_channel().unwrap();
    let a = ctx.create_cq_on(&ch, CqOptions::new(8)).unwrap();
    let _b = ctx.create_cq_on(&ch, CqOptions::new(8)).unwrap();
    let e = AsyncCq::new(a).unwrap_err();
    assert!(e.to_string().contains("serves 1 other CQ(s); an AsyncCq needs a channel of its own"), "{e}");
    drop(_guard);
    // Outside a runtime the fd has no reactor to join.
    let ch = ctx.create_channel().unwrap();
    let e = AsyncCq::new(ctx.create_cq_on(&ch, CqOptions::new(8)).unwrap()).unwrap_err();
    assert!(e.to_string().contains("could not join the tokio reactor"), "{e}");
}
