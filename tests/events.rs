//! Event mode on both models through the public API: the race-free wait under a producer
//! thread (no lost wakeup), one event per arm, arming with completions pending, solicited-only
//! filtering, moderation by count and by period, routing of many CQs' events on one channel,
//! CQ error events on overrun, and the refusals.

use dvcq::verbs::{Access, QpCaps, QpType, RecvWr, SendOp, SendWr};
use dvcq::{ArmMode, Completion, CompletionChannel, Context, Cq, CqEventKind, CqOptions, Error, Mr, Qp, QpInit};
use dvcq::{WaitOptions, WcStatus};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MODELS: [&str; 2] = ["model-mlx5", "model-e810"];

/// A loopback RC QP (connected to itself) whose completions go to `cq`, and a region.
fn loopback(ctx: &Context, cq: &Cq) -> (Qp, Mr) {
    loopback_with(ctx, cq, QpCaps::default())
}

/// [`loopback`] with the send queue sized for `caps`.
fn loopback_with(ctx: &Context, cq: &Cq, caps: QpCaps) -> (Qp, Mr) {
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut init = QpInit::new(QpType::Rc, cq);
    init.caps = caps;
    let mut qp = pd.create_qp(&init).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    (qp, mr)
}

/// A signaled 8-byte RDMA WRITE into the QP's own region.
fn write(qp: &mut Qp, mr: &Mr, wr_id: u64) -> Result<(), Error> {
    let sg = [mr.slice(0, 8)?];
    qp.post_send(&[SendWr::new(wr_id, SendOp::Write(mr.remote().at(64)), &sg)])
}

/// A SEND of 8 bytes, solicited or not, to the QP's own receive queue.
fn send(qp: &mut Qp, mr: &Mr, wr_id: u64, solicited: bool) {
    let sg = [mr.slice(0, 8).unwrap()];
    let mut wr = SendWr::new(wr_id, SendOp::Send, &sg);
    wr.solicited = solicited;
    qp.post_send(&[wr]).unwrap();
}

fn post_recv(qp: &mut Qp, mr: &Mr, wr_id: u64) {
    let sg = [mr.slice(1024, 64).unwrap()];
    qp.post_recv(&[RecvWr { wr_id, sg_list: &sg }]).unwrap();
}

fn drain(cq: &mut Cq) -> Vec<Completion> {
    let mut all = Vec::new();
    let mut wcs = [Completion::default(); 32];
    loop {
        let n = cq.poll_count(&mut wcs);
        if n == 0 {
            return all;
        }
        all.extend_from_slice(&wcs[..n]);
    }
}

fn events(ch: &CompletionChannel) -> Vec<(u64, CqEventKind)> {
    std::iter::from_fn(|| ch.try_next_event().unwrap()).map(|e| (e.cq.get(), e.kind)).collect()
}

/// xorshift64*: the producer's intervals, reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Completions the no-lost-wakeup tests write per model and mode: 10^6 in a release build
/// (`DVCQ_EVENTS_N` sets another number), 10^5 in a debug build, where each completion costs
/// about ten times as much.
fn producer_count() -> u64 {
    let default = if cfg!(debug_assertions) { 100_000 } else { 1_000_000 };
    std::env::var("DVCQ_EVENTS_N").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// How long a wait may take to return once a completion is pending beyond the CQ's
/// moderation period: scheduling on a loaded machine. A lost wakeup sleeps until the wait's
/// timeout ([`WAIT_TIMEOUT`]), far beyond it.
const SLACK: Duration = Duration::from_millis(500);
/// The timeout of every wait in these tests.
const WAIT_TIMEOUT: Duration = Duration::from_secs(10);
/// Each of these tests gives up, and fails, after this long: a safety net only (a lost
/// wakeup shows as a wait reaching [`WAIT_TIMEOUT`]). These tests together take about 10 s
/// on an idle two-core machine and took 70 s beside two busy loops; 120 s was once exceeded
/// on a machine running two other builds beside the suite.
const DEADLINE: Duration = Duration::from_secs(300);
/// What the producer and the consumer of one run share.
struct Stream {
    t0: Instant,
    /// When completion i was posted, in ns since `t0` (stored before the post).
    posted_ns: Vec<AtomicU64>,
    /// Completions the consumer has taken.
    consumed: AtomicU64,
    /// The consumer has stopped (finished or failed): the producer stops too.
    stop: AtomicBool,
}

impl Stream {
    fn ns(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    /// Spins (yielding) until `ready` or the consumer stops or the deadline passes.
    fn until(&self, what: &str, ready: impl Fn() -> bool) -> Result<(), String> {
        while !ready() {
            if self.stop.load(Ordering::Acquire) {
                return Err(format!("the consumer stopped while the producer waited for {what}"));
            }
            if self.t0.elapsed() > DEADLINE {
                return Err(format!("gave up after {DEADLINE:?} waiting for {what}"));
            }
            std::thread::yield_now();
        }
        Ok(())
    }
}

/// Sets [`Stream::stop`] when the consumer ends, by return or by panic.
struct StopOnDrop<'a>(&'a Stream);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::Release);
    }
}

/// One no-lost-wakeup run: its device, how the consumer waits, the CQ's moderation.
#[derive(Clone, Copy)]
struct Run {
    device: &'static str,
    opts: WaitOptions,
    /// `(count, period_us)` set on the CQ.
    moderation: Option<(u16, u16)>,
    completions: u64,
    /// Every this many completions the producer makes a quiet point.
    quiet_every: u64,
}

/// A producer thread writes completions at random intervals (bursts, short spins, sleeps,
/// and now and then a quiet point) while the consumer sleeps in `wait` between
/// them. The producer keeps no more sends outstanding than the CQ holds, as an application
/// must (a post beyond it would overrun the CQ), and every post succeeds. Every completion
/// is consumed, in order, and no wait returns later than the moderation period plus
/// [`SLACK`] after a completion was pending while it waited: a lost wakeup would sleep on
/// to the timeout.
fn no_lost_wakeup(run: Run) {
    const CQ_DEPTH: u32 = 256;
    let Run { device, opts, moderation, completions: n, quiet_every } = run;
    let ctx = Context::open(device).unwrap();
    let ch = ctx.create_channel().unwrap();
    let mut cq = ctx.create_cq_on(&ch, CqOptions::new(CQ_DEPTH)).unwrap();
    let period = match moderation {
        Some((count, period_us)) => {
            cq.set_moderation(count, period_us).unwrap();
            Duration::from_micros(period_us.into())
        }
        None => Duration::ZERO,
    };
    let caps = QpCaps { max_send_wr: CQ_DEPTH, ..QpCaps::default() };
    // What may be outstanding: what the CQ holds and what the QP was asked to hold.
    let cap = u64::from(CQ_DEPTH.min(caps.max_send_wr));
    let (mut qp, mr) = loopback_with(&ctx, &cq, caps);
    let stream = Arc::new(Stream {
        t0: Instant::now(),
        posted_ns: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
        consumed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let producer = {
        let s = stream.clone();
        std::thread::spawn(move || -> Result<(), String> {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            for i in 0..n {
                let quiet = i % quiet_every == quiet_every - 1;
                if quiet {
                    // A quiet point: once the consumer has taken everything, give it time
                    // to fall asleep, then write one completion and wait for the consumer
                    // to take it. Nothing else is written meanwhile, so only this
                    // completion's event (or the moderation period) can wake it: were
                    // that wakeup lost, it would sleep to its timeout.
                    s.until(&format!("the consumer to take completions 0..{i}"), || {
                        s.consumed.load(Ordering::Acquire) == i
                    })?;
                    std::thread::sleep(Duration::from_micros(100));
                }
                s.until(&format!("room to post completion {i}"), || i - s.consumed.load(Ordering::Acquire) < cap)?;
                s.posted_ns[i as usize].store(s.ns(), Ordering::Release);
                write(&mut qp, &mr, i).map_err(|e| format!("post {i} with fewer than {cap} outstanding: {e}"))?;
                if quiet {
                    s.until(&format!("the consumer to take completion {i}"), || {
                        s.consumed.load(Ordering::Acquire) > i
                    })?;
                    continue;
                }
                match rng.next() % 100 {
                    0..=89 => {}
                    90..=97 => (0..rng.next() % 1000).for_each(|_| std::hint::spin_loop()),
                    _ => std::thread::sleep(Duration::from_micros(rng.next() % 50)),
                }
            }
            Ok(())
        })
    };
    let s = &*stream;
    let stop = StopOnDrop(s);
    let mut wcs = [Completion::default(); 64];
    let mut next = 0u64;
    let mut worst = Duration::ZERO;
    let mut full_periods = 0u64;
    while next < n {
        let start = s.ns();
        let got = cq.wait_with(&mut wcs, Some(WAIT_TIMEOUT), opts).unwrap();
        let back = s.ns();
        let posted = s.posted_ns[next as usize].load(Ordering::Acquire);
        assert!(
            !got.is_empty(),
            "{device}: a wait slept {WAIT_TIMEOUT:?} with completion {next} of {n} {} (lost wakeup?)",
            if posted == u64::MAX { "not posted yet" } else { "posted" }
        );
        let pending = Duration::from_nanos(back.saturating_sub(posted.max(start)));
        worst = worst.max(pending);
        if !period.is_zero() && pending >= period {
            full_periods += 1;
        }
        for wc in got {
            assert_eq!((wc.wr_id, wc.status), (next, WcStatus::Success), "{device}: completion out of order");
            next += 1;
        }
        s.consumed.store(next, Ordering::Release);
    }
    drop(stop);
    producer.join().unwrap().unwrap_or_else(|e| panic!("{device}: producer: {e}"));
    assert_eq!(drain(&mut cq).len(), 0, "{device}: nothing beyond the {n} written");
    println!(
        "{device}: {n} completions through wait ({:?} spin, moderation {moderation:?}) in {:.2?}, {} events \
         taken, longest pending {worst:.2?}, {full_periods} waits of a full period",
        opts.spin,
        s.t0.elapsed(),
        cq.events_taken()
    );
    assert!(cq.events_taken() > 0, "{device}: the consumer slept on events at least once");
    assert!(
        worst <= period + SLACK,
        "{device}: a wait returned {worst:?} after a completion was pending (moderation period {period:?})"
    );
    if moderation.is_some() {
        // At a quiet point one completion, fewer than the count, waits for the period (unless
        // the consumer was slow to fall asleep and polled it at once): most quiet points show.
        let quiet_points = n / quiet_every;
        assert!(
            full_periods * 2 >= quiet_points,
            "{device}: {full_periods} waits of a full moderation period for {quiet_points} quiet points"
        );
    }
}

#[test]
fn no_lost_wakeup_in_event_mode() {
    for device in MODELS {
        no_lost_wakeup(Run {
            device,
            opts: WaitOptions::events(),
            moderation: None,
            completions: producer_count(),
            quiet_every: 256,
        });
    }
}

#[test]
fn no_lost_wakeup_in_hybrid_mode() {
    let opts = WaitOptions::hybrid(Duration::from_micros(20));
    for device in MODELS {
        no_lost_wakeup(Run { device, opts, moderation: None, completions: producer_count(), quiet_every: 256 });
    }
}

/// With moderation the consumer may sleep while completions are pending, but never past
/// the period (plus [`SLACK`]): at every quiet point one completion is pending, fewer than
/// the count, so only the period's timer wakes the consumer.
#[test]
fn no_lost_wakeup_with_moderation_sleeps_at_most_the_period() {
    for device in MODELS {
        let run = Run {
            device,
            opts: WaitOptions::events(),
            moderation: Some((16, 1000)),
            completions: producer_count() / 50,
            quiet_every: 32,
        };
        no_lost_wakeup(run);
    }
}

#[test]
fn one_event_per_arm_and_arming_with_completions_pending_fires_at_once() {
    for d in MODELS {
        let ctx = Context::open(d).unwrap();
        let ch = ctx.create_channel().unwrap();
        let mut cq = ctx.create_cq_on(&ch, CqOptions::new(64)).unwrap();
        let (mut qp, mr) = loopback(&ctx, &cq);
        write(&mut qp, &mr, 1).unwrap();
        assert!(events(&ch).is_empty(), "{d}: a disarmed CQ raises no event");
        cq.arm(ArmMode::Next).unwrap();
        assert_eq!(events(&ch), [(cq.id().get(), CqEventKind::Completion)], "{d}: pending CQE fires the arm at once");
        assert_eq!(drain(&mut cq).len(), 1);
        cq.arm(ArmMode::Next).unwrap();
        assert!(events(&ch).is_empty(), "{d}: everything consumed: the arm waits");
        write(&mut qp, &mr, 2).unwrap();
        write(&mut qp, &mr, 3).unwrap();
        assert_eq!(events(&ch).len(), 1, "{d}: one event for one arm, two completions");
        assert_eq!(drain(&mut cq).len(), 2);
    }
}

#[test]
fn solicited_only_arms_fire_on_solicited_and_error_completions() {
    for d in MODELS {
        let ctx = Context::open(d).unwrap();
        let ch = ctx.create_channel().unwrap();
        let send_cq = ctx.create_cq(CqOptions::new(64)).unwrap();
        let mut recv_cq = ctx.create_cq_on(&ch, CqOptions::new(64)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.reg_mr(4096, Access::ALL).unwrap();
        let mut init = QpInit::new(QpType::Rc, &send_cq);
        init.recv_cq = &recv_cq;
        let mut qp = pd.create_qp(&init).unwrap();
        let me = qp.endpoint().unwrap();
        qp.connect(&me).unwrap();
        for i in 0..4 {
            post_recv(&mut qp, &mr, 100 + i);
        }
        recv_cq.arm(ArmMode::Solicited).unwrap();
        send(&mut qp, &mr, 1, false);
        assert!(events(&ch).is_empty(), "{d}: an unsolicited receive does not fire a solicited arm");
        recv_cq.arm(ArmMode::Solicited).unwrap();
        assert!(events(&ch).is_empty(), "{d}: nor does re-arming with only it pending");
        send(&mut qp, &mr, 2, true);
        // On irdma the second request was skipped (the CQ was armed: never narrowed), and
        // reading the event re-arms for any completion (rdma-core's irdma_cq_event), which
        // the two receives still in the CQ fire at once: a second event.
        let fired = if d == "model-e810" { 2 } else { 1 };
        let ev = (recv_cq.id().get(), CqEventKind::Completion);
        assert_eq!(events(&ch), vec![ev; fired], "{d}: a solicited receive fires");
        let got = drain(&mut recv_cq);
        assert_eq!(got.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [100, 101]);
        // An error completion qualifies too: flushing the posted receives.
        recv_cq.arm(ArmMode::Solicited).unwrap();
        qp.enter_error_state().unwrap();
        assert_eq!(events(&ch).len(), 1, "{d}: flush (error) completions fire a solicited arm");
        assert!(drain(&mut recv_cq).iter().all(|w| w.status == WcStatus::WrFlushErr));
    }
}

#[test]
fn moderation_by_count_and_by_period() {
    for d in MODELS {
        let ctx = Context::open(d).unwrap();
        let ch = ctx.create_channel().unwrap();
        let mut cq = ctx.create_cq_on(&ch, CqOptions::new(64)).unwrap();
        let (mut qp, mr) = loopback(&ctx, &cq);
        cq.set_moderation(4, 0).unwrap();
        cq.arm(ArmMode::Next).unwrap();
        for i in 0..3 {
            write(&mut qp, &mr, i).unwrap();
        }
        assert!(events(&ch).is_empty(), "{d}: 3 of 4 completions: no event yet");
        write(&mut qp, &mr, 3).unwrap();
        assert_eq!(events(&ch).len(), 1, "{d}: the 4th completion fires");
        assert_eq!(drain(&mut cq).len(), 4);

        cq.set_moderation(1000, 2000).unwrap();
        cq.arm(ArmMode::Next).unwrap();
        let t = Instant::now();
        write(&mut qp, &mr, 9).unwrap();
        let e = ch.next_event(Some(Duration::from_secs(5))).unwrap();
        let waited = t.elapsed();
        assert!(e.is_some(), "{d}: the period fires the event without more completions");
        assert!(waited >= Duration::from_micros(2000), "{d}: not before the period ({waited:?})");
        assert_eq!(drain(&mut cq).len(), 1);

        let e = cq.set_moderation(1, 4096).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{d}: {e}");
        assert!(e.to_string().contains("4095"), "{d}: says the limit: {e}");
    }
}

/// Four CQs on one channel, each waited on by its own thread, one producer writing to their
/// QPs in turn: every waiter gets exactly its own CQ's completions, in order, and none sleeps
/// through them. The producer keeps no more sends outstanding per QP than its CQ holds (a
/// real application must: more would overrun the CQ) and gives up at a deadline or as soon
/// as a waiter has failed.
#[test]
fn many_cqs_on_one_channel_route_to_their_waiters() {
    const CQS: usize = 4;
    const PER: u64 = 2000;
    const CQ_DEPTH: u32 = 128;
    for d in MODELS {
        let ctx = Context::open(d).unwrap();
        let ch = ctx.create_channel().unwrap();
        let mut cqs: Vec<Cq> = (0..CQS).map(|_| ctx.create_cq_on(&ch, CqOptions::new(CQ_DEPTH)).unwrap()).collect();
        let caps = QpCaps { max_send_wr: CQ_DEPTH, ..QpCaps::default() };
        let cap = u64::from(CQ_DEPTH.min(caps.max_send_wr));
        let mut qps: Vec<(Qp, Mr)> = cqs.iter().map(|cq| loopback_with(&ctx, cq, caps)).collect();
        // Single-threaded routing first: arm all, complete on two, the events name those.
        for cq in cqs.iter_mut() {
            cq.arm(ArmMode::Next).unwrap();
        }
        let (qp, mr) = &mut qps[1];
        write(qp, mr, 0).unwrap();
        let (qp, mr) = &mut qps[3];
        write(qp, mr, 0).unwrap();
        let mut ids: Vec<u64> = events(&ch).into_iter().map(|e| e.0).collect();
        ids.sort();
        assert_eq!(ids, [cqs[1].id().get(), cqs[3].id().get()], "{d}: events name their CQs");
        for cq in cqs.iter_mut() {
            drain(cq);
        }
        // Then one waiter thread per CQ, one producer writing to them in turn.
        let consumed: Vec<Arc<AtomicU64>> = (0..CQS).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let mut waiters: Vec<_> = cqs
            .into_iter()
            .zip(qps.iter().map(|(qp, _)| qp.qpn()))
            .zip(consumed.iter().cloned())
            .map(|((mut cq, qpn), consumed)| {
                std::thread::spawn(move || {
                    let mut wcs = [Completion::default(); 16];
                    let mut got = 0;
                    while got < PER {
                        let id = cq.id();
                        let polled = cq.wait(&mut wcs, Some(WAIT_TIMEOUT)).unwrap();
                        assert!(
                            !polled.is_empty(),
                            "{id}: a waiter slept {WAIT_TIMEOUT:?} through its CQ's completions"
                        );
                        for wc in polled {
                            assert_eq!((wc.qp_num, wc.wr_id, wc.status), (qpn, got, WcStatus::Success), "{}", cq.id());
                            got += 1;
                        }
                        consumed.store(got, Ordering::Release);
                    }
                    cq
                })
            })
            .collect();
        let t0 = Instant::now();
        let mut posted = [0u64; CQS];
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        // Spins until `ready`; false when a waiter ended before taking all its completions
        // (it failed: the caller stops and reports it). Fails at the deadline.
        let until = |ready: &dyn Fn() -> bool| -> bool {
            while !ready() {
                if waiters.iter().zip(&consumed).any(|(w, c)| w.is_finished() && c.load(Ordering::Acquire) < PER) {
                    return false;
                }
                assert!(t0.elapsed() < DEADLINE, "{d}: gave up after {DEADLINE:?}");
                std::thread::yield_now();
            }
            true
        };
        'rounds: for round in 0..PER {
            // Each round writes one completion per QP, starting at a random one.
            let first = rng.next() as usize;
            for k in (0..CQS).map(|j| (first + j) % CQS) {
                if !until(&|| posted[k] - consumed[k].load(Ordering::Acquire) < cap) {
                    break 'rounds;
                }
                let (qp, mr) = &mut qps[k];
                write(qp, mr, posted[k]).unwrap_or_else(|e| panic!("{d}: qp {k} with room: {e}"));
                posted[k] += 1;
            }
            // A quiet point now and then: every waiter takes its completions and sleeps.
            if round % 50 == 49 && !until(&|| (0..CQS).all(|k| consumed[k].load(Ordering::Acquire) == posted[k])) {
                break;
            }
        }
        // A failed waiter's panic first; the others may still be asleep in their waits.
        if let Some(k) = (0..CQS).find(|&k| waiters[k].is_finished() && consumed[k].load(Ordering::Acquire) < PER) {
            std::panic::resume_unwind(waiters.swap_remove(k).join().expect_err("a waiter that stopped early failed"));
        }
        let mut events_taken = Vec::new();
        for (k, w) in waiters.into_iter().enumerate() {
            let mut cq = w.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            assert!(drain(&mut cq).is_empty(), "{d}: waiter {k} got exactly its CQ's completions");
            events_taken.push(cq.events_taken());
        }
        assert_eq!(posted, [PER; CQS], "{d}");
        println!("{d}: {CQS} waiters took {PER} completions each in {:.2?}, events {events_taken:?}", t0.elapsed());
        assert!(
            events_taken.iter().all(|&e| e > 0),
            "{d}: every waiter slept on the channel ({events_taken:?} events)"
        );
    }
}

#[test]
fn overrun_raises_a_cq_error_event_and_wait_returns_what_was_written_first() {
    for d in MODELS {
        let ctx = Context::open(d).unwrap();
        let ch = ctx.create_channel().unwrap();
        let mut cq = ctx.create_cq_on(&ch, CqOptions::new(1)).unwrap();
        let (mut qp, mr) = loopback(&ctx, &cq);
        let mut posted = 0;
        while ch.try_next_event().unwrap().is_none() && posted < 64 {
            write(&mut qp, &mr, posted).unwrap();
            posted += 1;
        }
        // What a CQ of 1 holds: mlx5's ring of 2, all of it; irdma GEN2's ring of 4 but
        // one slot. The event came with the first CQE that did not fit.
        let holds = if d == "model-mlx5" { 2 } else { 3 };
        assert_eq!(posted, holds + 1, "{d}: the overrun raised its event at the first CQE lost");
        let mut wcs = [Completion::default(); 64];
        // The event was taken above; wait drains the CQEs written before the overrun, all
        // of them, in order, and nothing else.
        let polled = cq.wait(&mut wcs, Some(Duration::from_millis(10))).unwrap();
        let ids: Vec<u64> = polled.iter().map(|w| w.wr_id).collect();
        assert_eq!(ids, (0..holds).collect::<Vec<_>>(), "{d}: what was written before the overrun is polled");
        assert!(polled.iter().all(|w| w.is_ok() && w.opcode == dvcq::WcOpcode::RdmaWrite), "{d}");
        // Then the CQ error item, counting them, then the typed error.
        assert_eq!(cq.wait(&mut wcs, Some(Duration::from_millis(10))).unwrap().len(), 1, "{d}");
        assert_eq!((wcs[0].cq_error(), wcs[0].wr_id), (Some(dvcq::CqErrorReason::Overrun), holds), "{d}");
        let e = cq.wait(&mut wcs, Some(Duration::from_millis(10))).unwrap_err();
        assert!(matches!(e, Error::CqInError { reason: dvcq::CqErrorReason::Overrun, .. }), "{d}: {e}");
        assert_eq!(cq.stats().overruns, Some(1), "{d}");
    }
    // And when nothing is left, the error event is the answer.
    for d in MODELS {
        let ctx = Context::open(d).unwrap();
        let ch = ctx.create_channel().unwrap();
        let mut cq = ctx.create_cq_on(&ch, CqOptions::new(1)).unwrap();
        let (mut qp, mr) = loopback(&ctx, &cq);
        for i in 0..8 {
            let _ = write(&mut qp, &mr, i);
        }
        drain(&mut cq);
        let mut wcs = [Completion::default(); 8];
        let e = cq.wait(&mut wcs, Some(Duration::from_secs(5))).unwrap_err();
        assert!(e.to_string().contains("overran"), "{d}: {e}");
        // The event came once, but the CQ stays in error: later waits say so at once
        // instead of sleeping on a CQ that writes nothing more.
        let t = Instant::now();
        let e = cq.wait(&mut wcs, Some(Duration::from_secs(5))).unwrap_err();
        assert!(e.to_string().contains("overran") && t.elapsed() < Duration::from_secs(2), "{d}: {e}");
    }
}

#[test]
fn wait_refuses_a_cq_without_a_channel_and_times_out_quietly() {
    let ctx = Context::open("model-mlx5").unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(8)).unwrap();
    let mut wcs = [Completion::default(); 4];
    let e = cq.wait(&mut wcs, Some(Duration::ZERO)).unwrap_err();
    assert!(e.to_string().contains("without a completion channel"), "{e}");
    let ch = ctx.create_channel().unwrap();
    let mut cq = ctx.create_cq_on(&ch, CqOptions::new(8)).unwrap();
    let t = Instant::now();
    assert!(cq.wait(&mut wcs, Some(Duration::from_millis(20))).unwrap().is_empty());
    assert!(t.elapsed() >= Duration::from_millis(20));
    let other = Context::open("model-e810").unwrap();
    let e = other.create_cq_on(&ch, CqOptions::new(8)).unwrap_err();
    assert!(e.to_string().contains("made on model-mlx5"), "{e}");
}

/// The race that the wait's poll after its arm closes, made to happen (the model's
/// `before_next_arm`): a completion lands after the wait's empty poll and before the device
/// sees the arm, and raises no event. The wait finds it by that poll, at once; a wait that
/// slept right after arming would sleep to its timeout.
#[test]
fn a_completion_landing_between_the_empty_poll_and_the_arm_is_found_at_once() {
    for d in MODELS {
        for opts in [WaitOptions::events(), WaitOptions::hybrid(Duration::from_micros(50))] {
            let ctx = Context::open(d).unwrap();
            let ch = ctx.create_channel().unwrap();
            let mut cq = ctx.create_cq_on(&ch, CqOptions::new(64)).unwrap();
            let qp = Arc::new(std::sync::Mutex::new(loopback(&ctx, &cq)));
            let q = qp.clone();
            cq.model().expect("a model CQ").before_next_arm(move || {
                let (qp, mr) = &mut *q.lock().unwrap();
                write(qp, mr, 7).unwrap();
            });
            let mut wcs = [Completion::default(); 4];
            let t = Instant::now();
            let polled = cq.wait_with(&mut wcs, Some(Duration::from_secs(5)), opts).unwrap();
            let took = t.elapsed();
            assert_eq!((polled.len(), polled[0].wr_id), (1, 7), "{d}: the completion that landed before the arm");
            assert!(took < Duration::from_secs(2), "{d}: the wait slept {took:?} through a completion in its CQ");
            let stats = cq.model().unwrap().arm_stats();
            assert_eq!((stats.taken, stats.events), (1, 0), "{d}: the arm was taken and raised no event");
            assert!(events(&ch).is_empty(), "{d}: no event on the channel: only the poll after the arm saw it");
        }
    }
}

/// A timeout too long for an `Instant` to hold (`Duration::MAX`) is no deadline: the waits
/// take what is there without panicking, and sleep until a completion comes.
#[test]
fn an_endless_timeout_is_no_deadline() {
    for d in MODELS {
        let ctx = Context::open(d).unwrap();
        let ch = ctx.create_channel().unwrap();
        let mut cq = ctx.create_cq_on(&ch, CqOptions::new(64)).unwrap();
        let (mut qp, mr) = loopback(&ctx, &cq);
        let mut wcs = [Completion::default(); 4];
        write(&mut qp, &mr, 1).unwrap();
        assert_eq!(cq.wait(&mut wcs, Some(Duration::MAX)).unwrap().len(), 1, "{d}");
        write(&mut qp, &mr, 2).unwrap();
        assert_eq!(cq.wait_with(&mut wcs, None, WaitOptions::hybrid(Duration::MAX)).unwrap().len(), 1, "{d}");
        write(&mut qp, &mr, 3).unwrap();
        let both = WaitOptions::hybrid(Duration::MAX);
        assert_eq!(cq.wait_with(&mut wcs, Some(Duration::MAX), both).unwrap().len(), 1, "{d}");
        cq.arm(ArmMode::Next).unwrap();
        write(&mut qp, &mr, 4).unwrap();
        let e = ch.next_event(Some(Duration::MAX)).unwrap();
        assert_eq!(e.map(|e| (e.cq, e.kind)), Some((cq.id(), CqEventKind::Completion)), "{d}");
        assert_eq!(drain(&mut cq).len(), 1);
        // Nothing there: the wait sleeps (no deadline passed at once) until a completion.
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            write(&mut qp, &mr, 5).unwrap();
            (qp, mr)
        });
        let t = Instant::now();
        let polled = cq.wait(&mut wcs, Some(Duration::MAX)).unwrap();
        assert_eq!((polled.len(), polled[0].wr_id), (1, 5), "{d}");
        assert!(t.elapsed() >= Duration::from_millis(40), "{d}: it slept until the completion came");
        writer.join().unwrap();
    }
}

/// A CQ that overruns while its waiter sleeps (armed for solicited completions, which plain
/// writes are not) reports on the context's async fd, as a device does, not on the
/// channel's: the wait wakes and returns what was written before, then the error.
#[test]
fn an_overrun_while_the_wait_sleeps_wakes_it() {
    for d in MODELS {
        let ctx = Context::open(d).unwrap();
        let ch = ctx.create_channel().unwrap();
        let mut cq = ctx.create_cq_on(&ch, CqOptions::new(1)).unwrap();
        let (mut qp, mr) = loopback(&ctx, &cq);
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            for i in 0..8 {
                let _ = write(&mut qp, &mr, i);
            }
            (qp, mr)
        });
        let mut wcs = [Completion::default(); 16];
        let solicited = WaitOptions { arm: ArmMode::Solicited, ..WaitOptions::events() };
        let t = Instant::now();
        let n = cq.wait_with(&mut wcs, Some(Duration::from_secs(5)), solicited).unwrap().len();
        let took = t.elapsed();
        assert!(n > 0 && took < Duration::from_secs(2), "{d}: {n} after {took:?}: the overrun did not wake the wait");
        let _ = writer.join().unwrap();
        let e = loop {
            match cq.wait_with(&mut wcs, Some(Duration::from_secs(5)), solicited) {
                Ok(polled) => assert!(!polled.is_empty(), "{d}: slept through the overrun error"),
                Err(e) => break e,
            }
        };
        assert!(e.to_string().contains("overran"), "{d}: {e}");
        assert!(events(&ch).is_empty(), "{d}: the error was reported once");
    }
}
