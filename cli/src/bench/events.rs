//! Event-mode latency (`dvcq bench events`): how long a consumer takes to return with a
//! completion, and how much CPU it burns per completion, when it busy-polls, sleeps on
//! completion events ([`Cq::wait`]), or spins for a budget and then sleeps (the hybrid mode).
//!
//! A producer thread posts signaled RDMA WRITEs on a QP connected to itself, one at a time,
//! at random intervals (uniform from 0 to `max_gap`). Each WRITE's `wr_id` is the time it
//! was posted; the consumer takes the completions and records, for each, the time from
//! that post to its own return from the poll or the wait. On a model the device writes
//! the CQE inside the post, so this is "completion written → consumer returns" plus the
//! post call; on a real device it also holds the device's execution of the WRITE. The
//! producer never has more WRITEs outstanding than the CQ holds.
//!
//! CPU time is the consumer thread's own (`CLOCK_THREAD_CPUTIME_ID`) over the run, divided
//! by the completions: a busy poller pays for every idle gap, a sleeping one only for its
//! wakeups.

use crate::cq::{Cq, CqOptions};
use crate::event::WaitOptions;
use crate::verbs::{Access, QpCaps, QpType, SendOp, SendWr};
use crate::{Completion, Context, QpInit};
use dvcq::Error;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the consumer waits for completions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WaitMode {
    /// A poll loop: never sleeps.
    Busy,
    /// `Cq::wait`: poll, arm, poll again, sleep on the channel.
    Events,
    /// `Cq::wait_with` and `WaitOptions::hybrid`: poll for the spin budget, then as
    /// `events`.
    Hybrid,
}

impl WaitMode {
    /// The name the table, the JSON rows and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            WaitMode::Busy => "busy",
            WaitMode::Events => "events",
            WaitMode::Hybrid => "hybrid",
        }
    }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct EventsParams {
    /// Completions per mode.
    pub completions: u32,
    /// The producer waits a random time from 0 to this before each post.
    pub max_gap: Duration,
    /// The hybrid mode's busy-poll budget.
    pub spin: Duration,
    /// The modes, each run in turn on a fresh CQ.
    pub modes: Vec<WaitMode>,
}

/// One mode's figures.
#[derive(Clone, Debug, Serialize)]
pub struct EventsRow {
    /// `busy`, `events` or `hybrid`.
    pub mode: WaitMode,
    /// Completions measured.
    pub completions: u64,
    /// Median latency, post → the consumer's return, in ns.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// The longest.
    pub max_ns: u64,
    /// The mean.
    pub mean_ns: f64,
    /// The consumer thread's CPU time over the run, per completion, in ns.
    pub cpu_ns_per_completion: f64,
    /// Completion events the consumer slept on (0 for `busy`).
    pub sleeps: u64,
}

/// CQ depth and the most WRITEs outstanding.
const DEPTH: u32 = 64;
/// A wait that finds nothing for this long while completions are due is a lost wakeup.
const STALL: Duration = Duration::from_secs(20);

/// Runs every mode of `p` on `ctx`, one after the other.
///
/// # Errors
///
/// A resource could not be made, a post was refused, a completion failed, the CQ could not
/// be armed (the mlx5 direct backend), or no completion came for 20 s while some were
/// due.
pub fn run(ctx: &Context, p: &EventsParams) -> Result<Vec<EventsRow>, Error> {
    p.modes.iter().map(|&m| run_mode(ctx, p, m)).collect()
}

fn mismatch(device: &str, what: String) -> Error {
    Error::Mismatch { device: device.to_string(), what }
}

/// xorshift64: the producer's gaps, the same sequence for every mode.
struct Gaps(u64);

impl Gaps {
    fn next(&mut self, max: Duration) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let max_ns = max.as_nanos() as u64;
        Duration::from_nanos(if max_ns == 0 { 0 } else { self.0 % (max_ns + 1) })
    }
}

/// What the producer and the consumer share.
struct Shared {
    t0: Instant,
    consumed: AtomicU64,
    stop: AtomicBool,
}

impl Shared {
    fn ns(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }
}

/// Stops the producer when the consumer ends, by return or by error.
struct StopOnDrop<'a>(&'a Shared);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::Release);
    }
}

fn run_mode(ctx: &Context, p: &EventsParams, mode: WaitMode) -> Result<EventsRow, Error> {
    let device = ctx.name().to_string();
    let channel = ctx.create_channel()?;
    let mut cq = ctx.create_cq_on(&channel, CqOptions::new(DEPTH))?;
    let pd = ctx.alloc_pd()?;
    let caps = QpCaps { max_send_wr: DEPTH, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let mut qp = pd.create_qp(&QpInit { caps, ..QpInit::new(QpType::Rc, &cq) })?;
    let me = qp.endpoint()?;
    qp.connect(&me)?;
    let mr = pd.reg_mr(4096, Access::ALL)?;
    if mode != WaitMode::Busy {
        // Arming is what event mode needs of the backend: fail before starting the producer.
        cq.arm(crate::ArmMode::Next)?;
    }
    let n = u64::from(p.completions);
    let shared = Arc::new(Shared { t0: Instant::now(), consumed: AtomicU64::new(0), stop: AtomicBool::new(false) });
    let producer = {
        let s = shared.clone();
        let max_gap = p.max_gap;
        let device = device.clone();
        std::thread::spawn(move || -> Result<(), Error> {
            let sg = [mr.slice(0, 8)?];
            let to = mr.remote().at(64);
            let mut gaps = Gaps(0x9e37_79b9_7f4a_7c15);
            for i in 0..n {
                // Room in the CQ for one more completion.
                while i >= s.consumed.load(Ordering::Acquire) + u64::from(DEPTH) {
                    if s.stop.load(Ordering::Acquire) {
                        return Ok(());
                    }
                    std::thread::yield_now();
                }
                let gap = gaps.next(max_gap);
                if !gap.is_zero() {
                    std::thread::sleep(gap);
                }
                if s.stop.load(Ordering::Acquire) {
                    return Ok(());
                }
                qp.post_send(&[SendWr::new(s.ns(), SendOp::Write(to), &sg)])
                    .map_err(|e| mismatch(&device, format!("post {i} of {n}: {e}")))?;
            }
            Ok(())
        })
    };
    let consumed = consume(&mut cq, &shared, n, mode, p.spin);
    let producer = producer.join().unwrap_or_else(|_| Err(mismatch(&device, "the producer thread panicked".into())));
    let (hist, cpu) = consumed?;
    producer?;
    Ok(EventsRow {
        mode,
        completions: hist.len(),
        p50_ns: hist.value_at_quantile(0.5),
        p99_ns: hist.value_at_quantile(0.99),
        p999_ns: hist.value_at_quantile(0.999),
        max_ns: hist.max(),
        mean_ns: hist.mean(),
        cpu_ns_per_completion: cpu.as_nanos() as f64 / n.max(1) as f64,
        sleeps: cq.events_taken(),
    })
}

/// The consumer: takes `n` completions the way `mode` says and records each one's latency;
/// returns the latencies and the thread's CPU time over the run.
fn consume(
    cq: &mut Cq,
    s: &Shared,
    n: u64,
    mode: WaitMode,
    spin: Duration,
) -> Result<(Histogram<u64>, Duration), Error> {
    let _stop = StopOnDrop(s);
    let device = cq.device().to_string();
    let clock = |e: std::io::Error| mismatch(&device, format!("the thread CPU clock failed: {e}"));
    // 1 ns to 100 s at 3 significant digits.
    let mut hist = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3)
        .map_err(|e| mismatch(&device, format!("histogram: {e}")))?;
    let mut wcs = [Completion::default(); 16];
    let mut got = 0u64;
    let cpu0 = dvcq_provider::cputime::thread_cpu_time().map_err(clock)?;
    let mut idle_since = Instant::now();
    while got < n {
        let k = match mode {
            WaitMode::Busy => {
                let k = cq.poll_count(&mut wcs);
                if k == 0 {
                    if idle_since.elapsed() > STALL {
                        return Err(mismatch(&device, format!("no completion for {STALL:?} with {got} of {n} taken")));
                    }
                    std::hint::spin_loop();
                    continue;
                }
                k
            }
            WaitMode::Events => cq.wait_count(&mut wcs, Some(STALL))?,
            WaitMode::Hybrid => cq.wait_with_count(&mut wcs, Some(STALL), WaitOptions::hybrid(spin))?,
        };
        let now = s.ns();
        if k == 0 {
            return Err(mismatch(&device, format!("a wait slept {STALL:?} with {got} of {n} taken (lost wakeup?)")));
        }
        for wc in &wcs[..k] {
            if !wc.is_ok() {
                return Err(mismatch(&device, format!("a WRITE completed with {}", wc.status.name())));
            }
            hist.saturating_record(now.saturating_sub(wc.wr_id).max(1));
        }
        got += k as u64;
        s.consumed.store(got, Ordering::Release);
        idle_since = Instant::now();
    }
    let cpu = dvcq_provider::cputime::thread_cpu_time().map_err(clock)?.saturating_sub(cpu0);
    Ok((hist, cpu))
}
