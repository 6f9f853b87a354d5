//! One poller's share of a traffic run: its own protection domain, memory region, QPs and
//! CQs, carrying the same traffic as every other poller's, and the two phases a repetition
//! runs on them.
//!
//! - The throughput phase keeps every QP's send queue full: `-n` work requests per QP in
//!   groups of `--signal-every` (the last of a group signaled), at most `--tx-depth`
//!   outstanding, each completion retiring its group and letting another be posted. It is
//!   timed as a whole, by the wall clock and by the polling thread's CPU time.
//! - The latency phase sends one signaled work request at a time on the first QP and times
//!   each from its post to the poll call that returns its completion(s).
//!
//! Both phases busy-poll, or with `-e` sleep on the completion channel as perftest does:
//! every CQ armed up front; then sleep for an event, arm that CQ again, and drain it.

use super::poll::{self, Scratch, Taken};
use super::{PollerKind, TrafficParams, Verb};
use crate::cq::{BackendChoice, Cq, CqOptions};
use crate::event::{ArmMode, CompletionChannel};
use crate::verbs::{Access, QpCaps, QpType, RecvWr, SendOp, SendWr};
use crate::{Context, Mr, Pd, Qp, QpInit};
use dvcq::Error;
use dvcq_provider::cputime::thread_cpu_time;
use std::time::{Duration, Instant};

/// How long the device may go without completing anything before the run gives up (the
/// VM test runs the kernel's soft-RoCE under emulation).
pub(super) const STALL: Duration = Duration::from_secs(20);
/// Empty poll calls between two looks at the clock while busy-polling.
const CLOCK_EVERY: u32 = 1024;

/// A wr_id: bit 63 set for a receive, the QP's index from bit 40, and (for a send) the
/// number of work requests its completion retires in the low 32 bits.
const RECV_BIT: u64 = 1 << 63;
const QP_SHIFT: u32 = 40;
const QP_MASK: u64 = 0xffff;
const LEN_MASK: u64 = 0xffff_ffff;

fn wr_id(recv: bool, qp: usize, len: u32) -> u64 {
    (if recv { RECV_BIT } else { 0 }) | ((qp as u64 & QP_MASK) << QP_SHIFT) | u64::from(len)
}

fn decode(id: u64) -> (bool, usize, u32) {
    (id & RECV_BIT != 0, ((id >> QP_SHIFT) & QP_MASK) as usize, (id & LEN_MASK) as u32)
}

/// A QP and where its traffic stands in the current phase.
#[derive(Debug)]
struct QpLane {
    qp: Qp,
    /// Index of the CQ both its queues complete into.
    cq: usize,
    /// Sends posted, and retired by a polled completion.
    posted: u32,
    retired: u32,
    /// Signal groups posted and not yet completed.
    groups_out: u32,
    /// Receives posted, completed, and to post once the batch is absorbed.
    recvs_posted: u32,
    recvs_done: u32,
    recv_refill: u32,
}

/// What one repetition's throughput phase measured.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct BwSample {
    pub(super) wall: Duration,
    pub(super) cpu: Duration,
    pub(super) completions: u64,
    pub(super) wrs: u64,
    pub(super) polls: u64,
    pub(super) events: u64,
}

/// One poller's resources. Fields drop in order: QPs before the CQs they complete into.
#[derive(Debug)]
pub(super) struct Lane {
    pub(super) kind: PollerKind,
    qps: Vec<QpLane>,
    pub(super) cqs: Vec<Cq>,
    channel: Option<CompletionChannel>,
    mr: Mr,
    _pd: Pd,
    scratch: Scratch,
    taken: Taken,
}

/// Makes one CQ the `kind` way, on `channel` for event mode.
fn make_cq(ctx: &Context, kind: PollerKind, depth: u32, channel: Option<&CompletionChannel>) -> Result<Cq, Error> {
    let opts = CqOptions::new(depth);
    let opts = match kind {
        PollerKind::Direct => opts,
        PollerKind::IbvPollCq => opts.backend(BackendChoice::Generic),
        PollerKind::CqEx => {
            return dvcq::tool_support::create_extended_cq(ctx, opts, super::standard_wc_flags(), channel)
        }
    };
    match channel {
        Some(ch) => ctx.create_cq_on(ch, opts),
        None => ctx.create_cq(opts),
    }
}

impl Lane {
    /// Makes the lane's CQs (`cq_depth` each), QPs (RC, each connected to itself) and
    /// memory region.
    ///
    /// # Errors
    ///
    /// The device refused an object or a setting (moderation, `sq_sig_all`).
    pub(super) fn new(ctx: &Context, kind: PollerKind, p: &TrafficParams, cq_depth: u32) -> Result<Lane, Error> {
        let channel = if p.events { Some(ctx.create_channel()?) } else { None };
        let count = if p.cq_per_qp { p.qps } else { 1 };
        let mut cqs = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let mut cq = make_cq(ctx, kind, cq_depth, channel.as_ref())?;
            if let Some(m) = p.moderation {
                cq.set_moderation(m.count, m.period_us)?;
            }
            cqs.push(cq);
        }
        let pd = ctx.alloc_pd()?;
        let mr = pd.reg_mr((2 * u64::from(p.size)).max(64) as usize, Access::ALL)?;
        let recv_wr = if p.verb == Verb::Send { p.tx_depth } else { 1 };
        let caps = QpCaps {
            max_send_wr: p.tx_depth,
            max_recv_wr: recv_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let mut qps = Vec::with_capacity(p.qps as usize);
        for i in 0..p.qps as usize {
            let cq = if p.cq_per_qp { i } else { 0 };
            let init = QpInit { caps, sq_sig_all: p.sq_sig_all, ..QpInit::new(QpType::Rc, &cqs[cq]) };
            let mut qp = pd.create_qp(&init)?;
            let me = qp.endpoint()?;
            qp.connect(&me)?;
            qps.push(QpLane {
                qp,
                cq,
                posted: 0,
                retired: 0,
                groups_out: 0,
                recvs_posted: 0,
                recvs_done: 0,
                recv_refill: 0,
            });
        }
        Ok(Lane { kind, qps, cqs, channel, mr, _pd: pd, scratch: Scratch::new(p.batch), taken: Taken::default() })
    }

    fn device(&self) -> String {
        self.cqs.first().map_or_else(String::new, |c| c.device().to_string())
    }

    fn failed(&self, what: String) -> Error {
        Error::Mismatch { device: self.device(), what: format!("the {} row: {what}", self.kind.name()) }
    }

    /// Work requests a signaled completion covers.
    fn group(p: &TrafficParams) -> u32 {
        if p.sq_sig_all {
            1
        } else {
            p.signal_every
        }
    }

    fn op(&self, p: &TrafficParams) -> SendOp {
        match p.verb {
            Verb::Write => SendOp::Write(self.mr.remote().at(u64::from(p.size))),
            Verb::Send => SendOp::Send,
        }
    }

    /// Posts `count` receives to QP `i` in one call.
    fn post_recvs(&mut self, p: &TrafficParams, i: usize, count: u32) -> Result<(), Error> {
        if count == 0 {
            return Ok(());
        }
        let sg = [self.mr.slice(u64::from(p.size), p.size)?];
        let wr = RecvWr { wr_id: wr_id(true, i, 1), sg_list: &sg };
        let list = vec![wr; count as usize];
        let q = &mut self.qps[i];
        q.qp.post_recv(&list)?;
        q.recvs_posted += count;
        Ok(())
    }

    /// Posts as many whole signal groups as every QP's send queue has room for, one post
    /// call per QP.
    fn post_sends(&mut self, p: &TrafficParams) -> Result<(), Error> {
        let g = Self::group(p);
        let max_groups = p.tx_depth / g;
        let sg = [self.mr.slice(0, p.size)?];
        let op = self.op(p);
        for (i, q) in self.qps.iter_mut().enumerate() {
            let mut list: Vec<SendWr<'_>> = Vec::new();
            while q.groups_out < max_groups && q.posted < p.iters {
                let len = g.min(p.iters - q.posted);
                for k in 0..len {
                    let last = k + 1 == len;
                    let id = wr_id(false, i, if last { len } else { 0 });
                    list.push(SendWr::new(id, op, &sg).signaled(last && !p.sq_sig_all));
                }
                q.posted += len;
                q.groups_out += 1;
            }
            if !list.is_empty() {
                q.qp.post_send(&list)?;
            }
        }
        Ok(())
    }

    /// Files what the last poll call took: a send retires its group, a receive asks for a
    /// replacement.
    fn absorb(&mut self) -> Result<(), Error> {
        for &(id, ref bad) in &self.taken.items {
            if let Some(status) = bad {
                return Err(self.failed(format!("a completion failed with {status} (wr_id {id:#x})")));
            }
            let (recv, i, len) = decode(id);
            let Some(q) = self.qps.get_mut(i) else {
                return Err(self.failed(format!("a completion carries wr_id {id:#x}, which no QP of the run posted")));
            };
            if recv {
                q.recvs_done += 1;
                q.recv_refill += 1;
            } else {
                q.groups_out = q.groups_out.saturating_sub(1);
                q.retired += len;
            }
        }
        Ok(())
    }

    /// One poll call on CQ `c`; returns the completions it took.
    fn poll_cq(&mut self, p: &TrafficParams, c: usize, polls: &mut u64) -> Result<usize, Error> {
        let n = poll::poll(self.kind, &mut self.cqs[c], p.batch, &mut self.scratch, &mut self.taken)?;
        *polls += 1;
        self.absorb()?;
        Ok(n)
    }

    /// One poll call on every CQ.
    fn poll_round(&mut self, p: &TrafficParams, polls: &mut u64) -> Result<usize, Error> {
        let mut n = 0;
        for c in 0..self.cqs.len() {
            n += self.poll_cq(p, c, polls)?;
        }
        Ok(n)
    }

    /// Replaces the receives consumed and posts the groups room was made for.
    fn refill(&mut self, p: &TrafficParams) -> Result<(), Error> {
        if p.verb == Verb::Send {
            for i in 0..self.qps.len() {
                let q = &mut self.qps[i];
                let want = q.recv_refill.min(p.iters.saturating_sub(q.recvs_posted));
                q.recv_refill = 0;
                self.post_recvs(p, i, want)?;
            }
        }
        self.post_sends(p)
    }

    fn done(&self, p: &TrafficParams) -> bool {
        self.qps.iter().all(|q| q.retired >= p.iters && (p.verb != Verb::Send || q.recvs_done >= p.iters))
    }

    /// What is still missing, for a stall's error.
    fn missing(&self, p: &TrafficParams) -> String {
        let sends: u32 = self.qps.iter().map(|q| p.iters - q.retired.min(p.iters)).sum();
        let recvs: u32 = self.qps.iter().map(|q| p.iters - q.recvs_done.min(p.iters)).sum();
        let total = p.iters * self.qps.len() as u32;
        match p.verb {
            Verb::Write => format!("{sends} of {total} sends did not complete in {STALL:?}"),
            Verb::Send => format!("{sends} of {total} sends and {recvs} receives did not complete in {STALL:?}"),
        }
    }

    /// Event mode: arms every CQ, so that the next completion on each raises an event.
    fn arm_all(&mut self) -> Result<(), Error> {
        for cq in &mut self.cqs {
            cq.arm(ArmMode::Next)?;
        }
        Ok(())
    }

    /// Event mode, perftest's way (`ctx_notify_events`): sleep until a CQ's event, arm that
    /// CQ again, then drain it until a poll call comes back empty, posting what the
    /// completions made room for. Race-free: a completion written before the arm is found
    /// by the drain, one written after it raises the next event. Returns the completions
    /// drained (0 for an event whose completions an earlier drain already took).
    fn wait_and_drain(&mut self, p: &TrafficParams, polls: &mut u64) -> Result<usize, Error> {
        let Some(ch) = &self.channel else {
            return Err(self.failed("event mode without a completion channel".into()));
        };
        let Some(ev) = ch.next_event(Some(STALL))? else {
            return Err(self.failed(self.missing(p)));
        };
        // Every CQ of the lane is on its channel; an event of none of them is not ours.
        let Some(c) = self.cqs.iter().position(|cq| cq.id() == ev.cq) else {
            return Ok(0);
        };
        self.cqs[c].arm(ArmMode::Next)?;
        let mut n = 0;
        loop {
            let got = self.poll_cq(p, c, polls)?;
            if got == 0 {
                return Ok(n);
            }
            n += got;
            self.refill(p)?;
        }
    }

    /// The throughput phase of one repetition.
    ///
    /// # Errors
    ///
    /// A post or poll failed, a completion carried an error, or the device stalled.
    pub(super) fn bandwidth(&mut self, p: &TrafficParams) -> Result<BwSample, Error> {
        for q in &mut self.qps {
            (q.posted, q.retired, q.groups_out) = (0, 0, 0);
            (q.recvs_posted, q.recvs_done, q.recv_refill) = (0, 0, 0);
        }
        if p.verb == Verb::Send {
            for i in 0..self.qps.len() {
                self.post_recvs(p, i, p.iters.min(p.tx_depth))?;
            }
        }
        if p.events {
            self.arm_all()?;
        }
        let mut s = BwSample::default();
        let cpu0 = thread_cpu_time().map_err(|e| self.failed(format!("reading the thread's CPU time: {e}")))?;
        let t0 = Instant::now();
        self.post_sends(p)?;
        let mut idle = 0u32;
        let mut stalled_since: Option<Instant> = None;
        while !self.done(p) {
            if p.events {
                s.completions += self.wait_and_drain(p, &mut s.polls)? as u64;
                s.events += 1;
                continue;
            }
            let got = self.poll_round(p, &mut s.polls)?;
            s.completions += got as u64;
            if got > 0 {
                self.refill(p)?;
                (idle, stalled_since) = (0, None);
                continue;
            }
            idle += 1;
            if idle % CLOCK_EVERY == 0 {
                let now = Instant::now();
                match stalled_since {
                    None => stalled_since = Some(now),
                    Some(since) if now.duration_since(since) > STALL => return Err(self.failed(self.missing(p))),
                    Some(_) => {}
                }
            }
        }
        s.wall = t0.elapsed();
        let cpu1 = thread_cpu_time().map_err(|e| self.failed(format!("reading the thread's CPU time: {e}")))?;
        s.cpu = cpu1.saturating_sub(cpu0);
        s.wrs = u64::from(p.iters) * self.qps.len() as u64;
        Ok(s)
    }

    /// The latency phase of one repetition: `p.iters` single work requests on the first
    /// QP, each timed from its post to the poll that returns its last completion, recorded
    /// in `hist` in nanoseconds.
    ///
    /// # Errors
    ///
    /// As [`Lane::bandwidth`].
    pub(super) fn latency(&mut self, p: &TrafficParams, hist: &mut hdrhistogram::Histogram<u64>) -> Result<(), Error> {
        let c = self.qps[0].cq;
        let op = self.op(p);
        // Checked once here; each iteration cuts the same slice again (the slice borrows
        // the region, which the polls between posts borrow mutably with the lane).
        self.mr.slice(0, p.size)?;
        let need = if p.verb == Verb::Send { 2 } else { 1 };
        let mut polls = 0u64;
        if p.events {
            self.arm_all()?;
        }
        for _ in 0..p.iters {
            if p.verb == Verb::Send {
                self.post_recvs(p, 0, 1)?;
            }
            let sg = [self.mr.slice(0, p.size)?];
            let t0 = Instant::now();
            let wr = SendWr::new(wr_id(false, 0, 1), op, &sg).signaled(!p.sq_sig_all);
            self.qps[0].qp.post_send(&[wr])?;
            let mut got = 0;
            let mut idle = 0u32;
            while got < need {
                if p.events {
                    got += self.wait_and_drain(p, &mut polls)?;
                    continue;
                }
                let n = self.poll_cq(p, c, &mut polls)?;
                got += n;
                if n > 0 {
                    continue;
                }
                idle += 1;
                if idle % CLOCK_EVERY == 0 && t0.elapsed() > STALL {
                    return Err(self.failed(format!("a single work request did not complete in {STALL:?}")));
                }
            }
            hist.saturating_record(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wr_id_carries_its_kind_qp_and_group() {
        for (recv, qp, len) in [(false, 0, 1), (true, 7, 1), (false, 0xffff, u32::MAX), (false, 3, 0)] {
            assert_eq!(decode(wr_id(recv, qp, len)), (recv, qp, len));
        }
    }
}
