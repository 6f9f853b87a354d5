//! `dvcq bench traffic --server` and `dvcq bench traffic HOST`: perftest's two-host
//! convention. The server waits on a TCP port, the client names it; they agree over the
//! out-of-band exchange ([`super::oob`]) on the options, exchange their QPs' endpoints and
//! memory regions, and run, poller by poller, the same phases in lockstep:
//!
//! - throughput: the client keeps every QP's send queue full of RDMA WRITEs or SENDs (`-n`
//!   per QP, or for `-D` seconds), in signal groups of `-Q`; for SEND the server polls the
//!   receive completions and posts a receive for each. The client then says how many it
//!   sent and both exchange their figures.
//! - latency: a ping-pong on the first QP, one message each way at a time (SEND, or RDMA
//!   WRITE with immediate for `--verb write`), timed by the client from its post to the poll
//!   that returns the reply, halved (perftest's `_lat` convention).
//!
//! Each side polls its own CQ with the poller of the round (dvcq direct, `ibv_poll_cq` or the
//! extended CQ), counting poll calls, empty polls and its thread's CPU time. Both print one
//! table with a row per side and poller.
//!
//! Bad input stops both sides: the side that fails tells the other why before it exits;
//! a peer that vanishes (closed connection) or stops completing (`lane::STALL`) is an error.

use super::lane::STALL;
use super::oob::{self, Oob, OobError};
use super::poll::{self, Scratch, Taken};
use super::{PollerKind, Verb};
use crate::cq::{BackendChoice, Cq, CqOptions};
use crate::event::{ArmMode, CompletionChannel};
use crate::verbs::{Access, Endpoint, QpCaps, QpType, RecvWr, RemoteRegion, SendOp, SendWr};
use crate::{Context, Mr, Pd, Qp, QpInit};
use dvcq_provider::cputime::thread_cpu_time;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Empty polls between two looks at the clock and at the exchange while busy-polling (in
/// event mode an empty poll sleeps up to [`EVENT_WAIT`], and each one looks).
const LOOK_EVERY: u64 = 1024;
/// The longest sleep on the completion channel, so that the clock and the exchange are
/// looked at while the peer sends nothing.
const EVENT_WAIT: Duration = Duration::from_millis(100);
/// How long a WRITE server waits for the client's count after its phase began, beyond `-D`.
const WRITE_PHASE_LIMIT: Duration = Duration::from_secs(600);

/// What went wrong, one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RemoteError(pub String);

impl From<OobError> for RemoteError {
    fn from(e: OobError) -> Self {
        RemoteError(e.0)
    }
}

impl From<crate::Error> for RemoteError {
    fn from(e: crate::Error) -> Self {
        RemoteError(e.to_string())
    }
}

/// The options both sides must agree on; they travel in the hellos.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteParams {
    /// RDMA WRITE or SEND.
    pub verb: Verb,
    /// Bytes per message (`-s`).
    pub size: u32,
    /// Messages per QP in the throughput phase, and ping-pongs in the latency phase (`-n`).
    pub iters: u32,
    /// Seconds of the throughput phase instead of `-n` messages (`-D`).
    pub duration: Option<u32>,
    /// Send queue depth (`-t`).
    pub tx_depth: u32,
    /// One send in this many is signaled (`-Q`).
    pub signal_every: u32,
    /// QPs (`-q`).
    pub qps: u32,
    /// Repetitions of the throughput phase per poller.
    pub reps: u32,
    /// The pollers, in the order they run.
    pub pollers: Vec<String>,
}

impl RemoteParams {
    /// The first option that differs from the peer's, as `-s 64 here, 4096 on the server`.
    pub fn differs(&self, peer: &RemoteParams, peer_role: &str) -> Option<String> {
        let d = |flag: &str, a: String, b: String| (a != b).then(|| format!("{flag} {a} here, {b} on the {peer_role}"));
        let verb = |v: Verb| if v == Verb::Write { "write".to_string() } else { "send".to_string() };
        let dur = |x: Option<u32>| x.map_or_else(|| "unset".to_string(), |s| s.to_string());
        d("--verb", verb(self.verb), verb(peer.verb))
            .or_else(|| d("-s/--size", self.size.to_string(), peer.size.to_string()))
            .or_else(|| d("-n/--iters", self.iters.to_string(), peer.iters.to_string()))
            .or_else(|| d("-D/--duration", dur(self.duration), dur(peer.duration)))
            .or_else(|| d("-t/--tx-depth", self.tx_depth.to_string(), peer.tx_depth.to_string()))
            .or_else(|| d("-Q/--signal-every", self.signal_every.to_string(), peer.signal_every.to_string()))
            .or_else(|| d("-q/--qps", self.qps.to_string(), peer.qps.to_string()))
            .or_else(|| d("--reps", self.reps.to_string(), peer.reps.to_string()))
            .or_else(|| d("--poller", self.pollers.join(","), peer.pollers.join(",")))
            .map(|s| format!("the two sides' options differ: {s}; give both the same"))
    }
}

/// This side's own choices, which the peer need not share.
#[derive(Clone, Copy, Debug)]
pub struct LocalChoices {
    /// Completions asked of one poll call.
    pub batch: usize,
    /// Sleep on the completion channel when a poll finds nothing (`-e`).
    pub events: bool,
    /// How long a message of the exchange may take.
    pub timeout: Duration,
}

/// Server or client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// `--server`.
    Server,
    /// `HOST`.
    Client,
}

impl Role {
    /// `server` or `client`.
    pub const fn name(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
        }
    }

    const fn other(self) -> &'static str {
        match self {
            Role::Server => "client",
            Role::Client => "server",
        }
    }
}

/// One QP as the peer reaches it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct WireEndpoint {
    qpn: u32,
    lid: u16,
    gid: String,
    gid_index: u8,
    psn: u32,
}

impl WireEndpoint {
    fn of(e: &Endpoint) -> Self {
        let gid = e.gid.iter().map(|b| format!("{b:02x}")).collect();
        WireEndpoint { qpn: e.qpn, lid: e.lid, gid, gid_index: e.gid_index, psn: e.psn }
    }

    fn endpoint(&self) -> Result<Endpoint, String> {
        let mut gid = [0u8; 16];
        if self.gid.len() != 32 {
            return Err(format!("a GID of {} hex digits", self.gid.len()));
        }
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(&self.gid[2 * i..2 * i + 2], 16).map_err(|_| format!("GID {:?}", self.gid))?;
        }
        Ok(Endpoint { qpn: self.qpn, lid: self.lid, gid, gid_index: self.gid_index, psn: self.psn })
    }
}

/// One poller's QPs and region, as the peer learns them.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct WireLane {
    poller: String,
    qps: Vec<WireEndpoint>,
    addr: u64,
    len: u64,
    rkey: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct SetupMsg {
    msg: String,
    lanes: Vec<WireLane>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Plain {
    msg: String,
}

/// What one side measured in one phase.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct PhaseFigures {
    /// Completions polled.
    pub completions: u64,
    /// Poll calls.
    pub polls: u64,
    /// Poll calls that returned nothing.
    pub empty_polls: u64,
    /// The polling thread's CPU time, nanoseconds.
    pub cpu_ns: u64,
    /// Wall time of the phase on this side, nanoseconds.
    pub wall_ns: u64,
    /// Messages this side sent (client) or received (server, SEND).
    pub msgs: u64,
}

impl PhaseFigures {
    fn add(&mut self, o: &PhaseFigures) {
        self.completions += o.completions;
        self.polls += o.polls;
        self.empty_polls += o.empty_polls;
        self.cpu_ns += o.cpu_ns;
        self.wall_ns += o.wall_ns;
        self.msgs += o.msgs;
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct FiguresMsg {
    msg: String,
    /// Messages the client sent in the phase.
    sent: u64,
    figures: PhaseFigures,
}

/// Latency percentiles, microseconds (the client's, half round trips).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Latency {
    /// Fastest.
    pub t_min_us: f64,
    /// Slowest.
    pub t_max_us: f64,
    /// Median.
    pub t_typical_us: f64,
    /// Mean.
    pub t_avg_us: f64,
    /// Standard deviation.
    pub t_stdev_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p99_9_us: f64,
}

/// One side's figures for one poller: perftest's columns and dvcq's.
#[derive(Clone, Debug, Serialize)]
pub struct RemoteRow {
    /// `client` or `server`.
    pub side: &'static str,
    /// `direct`, `ibv_poll_cq` or `cq_ex`.
    pub poller: String,
    /// The backend that polled.
    pub backend: String,
    /// Bytes per message.
    pub bytes: u32,
    /// Messages per repetition of the throughput phase (all QPs).
    pub iterations: u64,
    /// Best repetition's bandwidth, bytes per second (`None`: this side saw no messages,
    /// the server of RDMA WRITEs).
    pub bw_peak_bytes_per_s: Option<f64>,
    /// Bandwidth over all repetitions, bytes per second.
    pub bw_avg_bytes_per_s: Option<f64>,
    /// Messages per second over all repetitions.
    pub msg_rate_per_s: Option<f64>,
    /// The polling thread's CPU nanoseconds per completion (throughput phase).
    pub ns_per_completion: Option<f64>,
    /// Poll calls per completion (throughput phase).
    pub polls_per_completion: Option<f64>,
    /// Poll calls that found nothing (throughput phase, all repetitions).
    pub empty_polls: u64,
    /// Completions polled (throughput phase, all repetitions).
    pub completions: u64,
    /// The same for the latency phase.
    pub latency_completions: u64,
    /// Poll calls of the latency phase.
    pub latency_polls: u64,
    /// Empty polls of the latency phase.
    pub latency_empty_polls: u64,
    /// The latency phase's percentiles (the client's row).
    pub latency: Option<Latency>,
}

/// A two-host run as one side saw it.
#[derive(Clone, Debug, Serialize)]
pub struct RemoteReport {
    /// This side.
    pub role: Role,
    /// This side's device.
    pub device: String,
    /// The peer's address.
    pub peer: String,
    /// The agreed options.
    #[serde(flatten)]
    pub params: RemoteParams,
    /// This side's poll batch.
    pub batch: usize,
    /// This side's completion mode.
    pub events: bool,
    /// This side's first QP and the peer's, per poller (for the banner).
    pub endpoints: Vec<(String, String)>,
    /// Rows: per poller, the client's then the server's.
    pub rows: Vec<RemoteRow>,
}

/// The wr_id of a message: bit 63 for a receive, the QP index from bit 40, and (a send) the
/// sends its completion retires in the low 32 bits.
const RECV_BIT: u64 = 1 << 63;
fn wr_id(recv: bool, qp: usize, len: u32) -> u64 {
    (if recv { RECV_BIT } else { 0 }) | ((qp as u64 & 0xffff) << 40) | u64::from(len)
}

/// One poller's objects on this side. Fields drop in order: QPs before their CQ.
struct RLane {
    kind: PollerKind,
    qps: Vec<Qp>,
    cq: Cq,
    channel: Option<CompletionChannel>,
    mr: Mr,
    _pd: Pd,
    peer: Option<RemoteRegion>,
    scratch: Scratch,
    taken: Taken,
    /// Receives posted and not yet completed, per QP.
    recvs_out: Vec<u32>,
}

/// Polls, counts and files what a poll call took.
struct Counts {
    f: PhaseFigures,
    /// Send groups retired per QP (the client's throughput phase).
    sends_retired: Vec<u64>,
    groups_out: Vec<u32>,
    recvs_done: u64,
    recvs_per_qp: Vec<u32>,
    sends_done: u64,
}

impl Counts {
    fn new(qps: usize) -> Counts {
        Counts {
            f: PhaseFigures::default(),
            sends_retired: vec![0; qps],
            groups_out: vec![0; qps],
            recvs_done: 0,
            recvs_per_qp: vec![0; qps],
            sends_done: 0,
        }
    }
}

fn make_cq(ctx: &Context, kind: PollerKind, depth: u32, ch: Option<&CompletionChannel>) -> Result<Cq, crate::Error> {
    let opts = CqOptions::new(depth);
    let opts = match kind {
        PollerKind::Direct => opts,
        PollerKind::IbvPollCq => opts.backend(BackendChoice::Generic),
        PollerKind::CqEx => return dvcq::tool_support::create_extended_cq(ctx, opts, super::standard_wc_flags(), ch),
    };
    match ch {
        Some(c) => ctx.create_cq_on(c, opts),
        None => ctx.create_cq(opts),
    }
}

impl RLane {
    fn new(ctx: &Context, kind: PollerKind, p: &RemoteParams, local: &LocalChoices) -> Result<RLane, RemoteError> {
        let channel = if local.events { Some(ctx.create_channel()?) } else { None };
        let rx = p.tx_depth.max(2);
        let depth = p.qps.saturating_mul(p.tx_depth + rx).saturating_add(4);
        let cq = make_cq(ctx, kind, depth, channel.as_ref())?;
        let pd = ctx.alloc_pd()?;
        let mr = pd.reg_mr((2 * u64::from(p.size)).max(64) as usize, Access::ALL)?;
        let caps =
            QpCaps { max_send_wr: p.tx_depth, max_recv_wr: rx, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let mut qps = Vec::with_capacity(p.qps as usize);
        for _ in 0..p.qps {
            qps.push(pd.create_qp(&QpInit { caps, ..QpInit::new(QpType::Rc, &cq) })?);
        }
        let n = qps.len();
        Ok(RLane {
            kind,
            qps,
            cq,
            channel,
            mr,
            _pd: pd,
            peer: None,
            scratch: Scratch::new(local.batch),
            taken: Taken::default(),
            recvs_out: vec![0; n],
        })
    }

    fn wire(&self) -> Result<WireLane, RemoteError> {
        let qps = self.qps.iter().map(|q| q.endpoint().map(|e| WireEndpoint::of(&e))).collect::<Result<_, _>>()?;
        let r = self.mr.remote();
        Ok(WireLane { poller: self.kind.name().to_string(), qps, addr: r.addr, len: r.len, rkey: r.rkey })
    }

    fn connect(&mut self, w: &WireLane, peer: &str) -> Result<(), RemoteError> {
        if w.qps.len() != self.qps.len() {
            return Err(RemoteError(format!(
                "{peer}: the peer made {} QPs for {}, this side {}",
                w.qps.len(),
                w.poller,
                self.qps.len()
            )));
        }
        for (q, e) in self.qps.iter_mut().zip(&w.qps) {
            let ep = e.endpoint().map_err(|what| RemoteError(format!("{peer}: the peer's endpoint has {what}")))?;
            q.connect(&ep)?;
        }
        self.peer = Some(RemoteRegion { addr: w.addr, len: w.len, rkey: w.rkey });
        Ok(())
    }

    fn post_recvs(&mut self, p: &RemoteParams, i: usize, count: u32) -> Result<(), RemoteError> {
        if count == 0 {
            return Ok(());
        }
        let sg = [self.mr.slice(u64::from(p.size), p.size)?];
        let list = vec![RecvWr { wr_id: wr_id(true, i, 1), sg_list: &sg }; count as usize];
        self.qps[i].post_recv(&list)?;
        self.recvs_out[i] += count;
        Ok(())
    }

    fn op(&self, p: &RemoteParams, imm: bool) -> SendOp {
        let at = self.peer.map(|r| r.at(u64::from(p.size))).unwrap_or(crate::verbs::RemoteAddr { addr: 0, rkey: 0 });
        match (p.verb, imm) {
            (Verb::Write, false) => SendOp::Write(at),
            (Verb::Write, true) => SendOp::WriteWithImm(at, 0x0d0c_0b0a),
            (Verb::Send, _) => SendOp::Send,
        }
    }

    /// One poll call; files sends and receives in `c`. Returns the completions taken.
    fn poll_once(&mut self, c: &mut Counts) -> Result<usize, RemoteError> {
        let batch = self.scratch_batch();
        let n = poll::poll(self.kind, &mut self.cq, batch, &mut self.scratch, &mut self.taken)?;
        c.f.polls += 1;
        if n == 0 {
            c.f.empty_polls += 1;
            return Ok(0);
        }
        c.f.completions += n as u64;
        for &(id, ref bad) in &self.taken.items {
            if let Some(status) = bad {
                return Err(RemoteError(format!(
                    "{}: the {} row: a completion failed with {status} (wr_id {id:#x}); the peer may have stopped",
                    self.cq.device(),
                    self.kind.name()
                )));
            }
            let i = ((id >> 40) & 0xffff) as usize;
            if i >= self.qps.len() {
                return Err(RemoteError(format!("a completion carries wr_id {id:#x}, which this side never posted")));
            }
            if id & RECV_BIT != 0 {
                c.recvs_done += 1;
                c.recvs_per_qp[i] += 1;
                self.recvs_out[i] = self.recvs_out[i].saturating_sub(1);
            } else {
                c.sends_done += 1;
                c.groups_out[i] = c.groups_out[i].saturating_sub(1);
                c.sends_retired[i] += id & 0xffff_ffff;
            }
        }
        Ok(n)
    }

    fn scratch_batch(&self) -> usize {
        self.scratch.len()
    }

    /// After an empty poll: in event mode, arm the CQ and sleep for its event (at most
    /// 100 ms, so that the caller keeps looking at the clock and the exchange).
    fn idle(&mut self) -> Result<(), RemoteError> {
        if let Some(ch) = &self.channel {
            self.cq.arm(ArmMode::Next)?;
            let _ = ch.next_event(Some(EVENT_WAIT))?;
        }
        Ok(())
    }
}

/// Watches for a stall and for the peer while a phase polls.
struct Watch {
    since: Instant,
    last_progress: u64,
    /// Empty polls between two looks.
    every: u64,
}

impl Watch {
    fn new(l: &RLane) -> Watch {
        Watch { since: Instant::now(), last_progress: 0, every: if l.channel.is_some() { 1 } else { LOOK_EVERY } }
    }

    /// Every `every` empty polls: an error if nothing completed for `lane::STALL`, or
    /// (with `peer`) if the peer reported an error or closed the exchange.
    fn look(&mut self, c: &Counts, oob: &mut Oob, peer: bool, what: &dyn Fn() -> String) -> Result<(), RemoteError> {
        if c.f.empty_polls % self.every != 0 {
            return Ok(());
        }
        if c.f.completions != self.last_progress {
            self.last_progress = c.f.completions;
            self.since = Instant::now();
        } else if self.since.elapsed() > STALL {
            return Err(RemoteError(format!("{} in {STALL:?}; the peer may have stopped", what())));
        }
        if !peer {
            return Ok(());
        }
        // The peer's error or its leaving ends the phase; anything else it sent is the next
        // phase's (it may finish first) and stays for the read that wants it.
        oob.check_peer("during the phase")?;
        Ok(())
    }
}

/// The CPU clock of this thread.
fn cpu_now() -> Result<Duration, RemoteError> {
    thread_cpu_time().map_err(|e| RemoteError(format!("reading the thread's CPU time: {e}")))
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The client's throughput phase on `l`.
fn client_bw(l: &mut RLane, p: &RemoteParams, oob: &mut Oob) -> Result<PhaseFigures, RemoteError> {
    let n = l.qps.len();
    let mut c = Counts::new(n);
    let mut posted = vec![0u64; n];
    let g = p.signal_every.max(1);
    let max_groups = (p.tx_depth / g).max(1);
    let target = if p.duration.is_some() { u64::MAX } else { u64::from(p.iters) };
    let deadline = p.duration.map(|s| Duration::from_secs(u64::from(s)));
    l.mr.slice(0, p.size)?;
    let op = l.op(p, false);
    let mut w = Watch::new(l);
    let cpu0 = cpu_now()?;
    let t0 = Instant::now();
    let mut posting = true;
    loop {
        if posting && deadline.is_some_and(|d| t0.elapsed() >= d) {
            posting = false;
        }
        if posting {
            let sg = [l.mr.slice(0, p.size)?];
            for (i, (sent, out)) in posted.iter_mut().zip(c.groups_out.iter_mut()).enumerate() {
                let mut list: Vec<SendWr<'_>> = Vec::new();
                while *out < max_groups && *sent < target {
                    let len = u64::from(g).min(target - *sent) as u32;
                    for k in 0..len {
                        let last = k + 1 == len;
                        list.push(SendWr::new(wr_id(false, i, if last { len } else { 0 }), op, &sg).signaled(last));
                    }
                    *sent += u64::from(len);
                    *out += 1;
                }
                if !list.is_empty() {
                    l.qps[i].post_send(&list)?;
                }
            }
            if posted.iter().all(|&x| x >= target) {
                posting = false;
            }
        }
        if !posting && c.groups_out.iter().all(|&x| x == 0) {
            break;
        }
        if l.poll_once(&mut c)? == 0 {
            l.idle()?;
            let outstanding: u64 = posted.iter().zip(&c.sends_retired).map(|(a, b)| a - b).sum();
            w.look(&c, oob, true, &|| format!("{outstanding} sends did not complete"))?;
        }
    }
    c.f.wall_ns = nanos(t0.elapsed());
    c.f.cpu_ns = nanos(cpu_now()?.saturating_sub(cpu0));
    c.f.msgs = posted.iter().sum();
    Ok(c.f)
}

/// The server's throughput phase on `l`: for SEND, poll receives and replace them until the
/// client's count has arrived; for WRITE, wait for the count. Returns the figures and the
/// client's own.
fn server_bw(l: &mut RLane, p: &RemoteParams, oob: &mut Oob) -> Result<(PhaseFigures, FiguresMsg), RemoteError> {
    let n = l.qps.len();
    let rx = p.tx_depth.max(2);
    if p.verb == Verb::Send {
        for i in 0..n {
            let want = rx - l.recvs_out[i];
            l.post_recvs(p, i, want)?;
        }
    }
    oob.send(&Plain { msg: "ready".into() })?;
    let mut c = Counts::new(n);
    let mut w = Watch::new(l);
    let cpu0 = cpu_now()?;
    let t0 = Instant::now();
    let mut client: Option<FiguresMsg> = None;
    if p.verb == Verb::Write {
        let limit = WRITE_PHASE_LIMIT + Duration::from_secs(u64::from(p.duration.unwrap_or(0)));
        while client.is_none() {
            client = oob.try_recv("sent")?;
            if client.is_none() {
                if t0.elapsed() > limit {
                    return Err(RemoteError(format!("{}: the client sent no count in {limit:?}", oob.peer)));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    } else {
        let mut last = t0;
        loop {
            if let Some(cm) = &client {
                if c.recvs_done >= cm.sent {
                    break;
                }
            }
            let got = l.poll_once(&mut c)?;
            if got > 0 {
                last = Instant::now();
                for i in 0..n {
                    let want = c.recvs_per_qp[i];
                    c.recvs_per_qp[i] = 0;
                    l.post_recvs(p, i, want)?;
                }
                continue;
            }
            l.idle()?;
            if c.f.empty_polls % w.every == 0 {
                if client.is_none() {
                    client = oob.try_recv("sent")?;
                } else if last.elapsed() > STALL {
                    let (done, sent) = (c.recvs_done, client.as_ref().map_or(0, |m| m.sent));
                    return Err(RemoteError(format!("{done} of the client's {sent} messages arrived in {STALL:?}")));
                }
                if client.is_none() {
                    // The stall check only: the socket was just read for the count (which
                    // also reports the peer's error or its leaving), and a count that
                    // arrives now is for the next read, not a message out of turn.
                    w.look(&c, oob, false, &|| "no message arrived".to_string())?;
                }
            }
        }
        c.f.wall_ns = nanos(last.duration_since(t0));
    }
    c.f.cpu_ns = nanos(cpu_now()?.saturating_sub(cpu0));
    c.f.msgs = c.recvs_done;
    let client = client.ok_or_else(|| RemoteError("no count from the client".into()))?;
    Ok((c.f, client))
}

/// The latency phase: `p.iters` ping-pongs on QP 0. The client returns its half round
/// trips in nanoseconds.
fn ping_pong(
    l: &mut RLane,
    p: &RemoteParams,
    role: Role,
    oob: &mut Oob,
) -> Result<(PhaseFigures, Vec<u64>), RemoteError> {
    let mut c = Counts::new(l.qps.len());
    let mut w = Watch::new(l);
    let sg_len = p.size;
    let op = l.op(p, true);
    let mut halves = Vec::with_capacity(p.iters as usize);
    let mut sends_out = 0u64;
    if role == Role::Server {
        if l.recvs_out[0] == 0 {
            l.post_recvs(p, 0, 1)?;
        }
        oob.send(&Plain { msg: "ready".into() })?;
    } else {
        let _: Plain = oob.recv("ready")?;
    }
    let cpu0 = cpu_now()?;
    let t_phase = Instant::now();
    for k in 0..u64::from(p.iters) {
        // Room for one more send.
        while sends_out >= u64::from(p.tx_depth) {
            let before = c.sends_done;
            if l.poll_once(&mut c)? == 0 {
                l.idle()?;
                w.look(&c, oob, true, &|| "a send did not complete".to_string())?;
            }
            sends_out -= (c.sends_done - before).min(sends_out);
        }
        let t0 = Instant::now();
        if role == Role::Client {
            l.post_recvs(p, 0, 1)?;
            let sg = [l.mr.slice(0, sg_len)?];
            l.qps[0].post_send(&[SendWr::new(wr_id(false, 0, 1), op, &sg).signaled(true)])?;
            sends_out += 1;
        }
        // The peer's k-th message (a receive taken while making room counts too).
        while c.recvs_done <= k {
            let before = c.sends_done;
            if l.poll_once(&mut c)? == 0 {
                l.idle()?;
                w.look(&c, oob, true, &|| "the peer's message did not arrive".to_string())?;
            }
            sends_out -= (c.sends_done - before).min(sends_out);
        }
        if role == Role::Client {
            halves.push(nanos(t0.elapsed()) / 2);
        } else {
            l.post_recvs(p, 0, 1)?;
            let sg = [l.mr.slice(0, sg_len)?];
            l.qps[0].post_send(&[SendWr::new(wr_id(false, 0, 1), op, &sg).signaled(true)])?;
            sends_out += 1;
        }
    }
    // The last sends' completions. The peer may be done and have sent its figures already:
    // the exchange is not looked at here.
    while sends_out > 0 {
        let before = c.sends_done;
        if l.poll_once(&mut c)? == 0 {
            l.idle()?;
            w.look(&c, oob, false, &|| format!("{sends_out} sends did not complete"))?;
        }
        sends_out -= (c.sends_done - before).min(sends_out);
    }
    c.f.wall_ns = nanos(t_phase.elapsed());
    c.f.cpu_ns = nanos(cpu_now()?.saturating_sub(cpu0));
    c.f.msgs = u64::from(p.iters);
    Ok((c.f, halves))
}

fn latency_of(halves: &[u64]) -> Result<Latency, RemoteError> {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
        .map_err(|e| RemoteError(format!("latency histogram: {e}")))?;
    for &x in halves {
        h.saturating_record(x.max(1));
    }
    let us = |ns: f64| ns / 1e3;
    Ok(Latency {
        t_min_us: us(h.min() as f64),
        t_max_us: us(h.max() as f64),
        t_typical_us: us(h.value_at_quantile(0.5) as f64),
        t_avg_us: us(h.mean()),
        t_stdev_us: us(h.stdev()),
        p99_us: us(h.value_at_quantile(0.99) as f64),
        p99_9_us: us(h.value_at_quantile(0.999) as f64),
    })
}

/// A row from one side's repetitions and latency phase.
fn row(
    side: &'static str,
    lane_name: &str,
    backend: &str,
    p: &RemoteParams,
    reps: &[PhaseFigures],
    lat: &PhaseFigures,
    latency: Option<Latency>,
) -> RemoteRow {
    let mut all = PhaseFigures::default();
    for r in reps {
        all.add(r);
    }
    let bytes = |f: &PhaseFigures| f.msgs as f64 * f64::from(p.size);
    let rate = |f: &PhaseFigures, x: f64| (f.wall_ns > 0).then(|| x / (f.wall_ns as f64 / 1e9));
    let saw = all.msgs > 0;
    let peak =
        reps.iter().filter_map(|f| rate(f, bytes(f))).fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    RemoteRow {
        side,
        poller: lane_name.to_string(),
        backend: backend.to_string(),
        bytes: p.size,
        iterations: reps.first().map_or(0, |f| f.msgs),
        bw_peak_bytes_per_s: peak.filter(|_| saw),
        bw_avg_bytes_per_s: rate(&all, bytes(&all)).filter(|_| saw),
        msg_rate_per_s: rate(&all, all.msgs as f64).filter(|_| saw),
        ns_per_completion: (all.completions > 0).then(|| all.cpu_ns as f64 / all.completions as f64),
        polls_per_completion: (all.completions > 0).then(|| all.polls as f64 / all.completions as f64),
        empty_polls: all.empty_polls,
        completions: all.completions,
        latency_completions: lat.completions,
        latency_polls: lat.polls,
        latency_empty_polls: lat.empty_polls,
        latency,
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct LatMsg {
    msg: String,
    figures: PhaseFigures,
}

/// Runs one side of a two-host run over `oob`, on `ctx`.
///
/// # Errors
///
/// The peer's options differ, the peer or the exchange failed, the device refused an object,
/// a completion failed, or nothing completed for `lane::STALL`. The peer is told the reason
/// before this returns.
pub fn run(
    ctx: &Context,
    role: Role,
    mut oob: Oob,
    p: &RemoteParams,
    local: &LocalChoices,
) -> Result<RemoteReport, RemoteError> {
    let r = run_inner(ctx, role, &mut oob, p, local);
    if let Err(e) = &r {
        oob.send_error(&e.0);
    }
    r
}

fn run_inner(
    ctx: &Context,
    role: Role,
    oob: &mut Oob,
    p: &RemoteParams,
    local: &LocalChoices,
) -> Result<RemoteReport, RemoteError> {
    // The hellos: the client speaks first, the server answers after checking its options.
    let peer_hello = if role == Role::Client {
        oob.send(&oob::hello(role.name(), p))?;
        oob.recv_hello()?
    } else {
        let h = oob.recv_hello()?;
        oob.send(&oob::hello(role.name(), p))?;
        h
    };
    let theirs: RemoteParams = serde_json::from_value(peer_hello.get("options").cloned().unwrap_or_default())
        .map_err(|e| RemoteError(format!("{}: the peer's options are malformed: {e}", oob.peer)))?;
    if let Some(what) = p.differs(&theirs, role.other()) {
        return Err(RemoteError(what));
    }
    if ctx.is_model() {
        return Err(RemoteError(format!(
            "{} is a model inside this process: a two-host run needs a device the peer reaches over the network \
             (rxe0, mlx5_0, ...: see `dvcq devices`)",
            ctx.name()
        )));
    }
    let kinds: Vec<PollerKind> = p
        .pollers
        .iter()
        .map(|n| {
            PollerKind::ALL
                .into_iter()
                .find(|k| k.name() == n)
                .ok_or_else(|| RemoteError(format!("no poller named {n}")))
        })
        .collect::<Result<_, _>>()?;
    let mut lanes = Vec::with_capacity(kinds.len());
    for k in kinds {
        lanes.push(RLane::new(ctx, k, p, local)?);
    }
    let mine = SetupMsg { msg: "setup".into(), lanes: lanes.iter().map(RLane::wire).collect::<Result<_, _>>()? };
    oob.send(&mine)?;
    let theirs: SetupMsg = oob.recv("setup")?;
    if theirs.lanes.len() != lanes.len() {
        return Err(RemoteError(format!(
            "{}: the peer set up {} pollers, this side {}",
            oob.peer,
            theirs.lanes.len(),
            lanes.len()
        )));
    }
    let peer = oob.peer.clone();
    let mut endpoints = Vec::new();
    for (l, w) in lanes.iter_mut().zip(&theirs.lanes) {
        l.connect(w, &peer)?;
        let me = &mine.lanes.iter().find(|m| m.poller == w.poller).map_or(0, |m| m.qps[0].qpn);
        endpoints.push((format!("QPN {me:#06x}"), format!("QPN {:#06x} GID {}", w.qps[0].qpn, w.qps[0].gid)));
    }
    let mut rows = Vec::new();
    for l in &mut lanes {
        let mut mine_reps = Vec::new();
        let mut theirs_reps = Vec::new();
        for _ in 0..p.reps.max(1) {
            match role {
                Role::Client => {
                    let _: Plain = oob.recv("ready")?;
                    let f = client_bw(l, p, oob)?;
                    oob.send(&FiguresMsg { msg: "sent".into(), sent: f.msgs, figures: f })?;
                    let s: FiguresMsg = oob.recv("figures")?;
                    mine_reps.push(f);
                    theirs_reps.push(s.figures);
                }
                Role::Server => {
                    let (f, cm) = server_bw(l, p, oob)?;
                    oob.send(&FiguresMsg { msg: "figures".into(), sent: cm.sent, figures: f })?;
                    mine_reps.push(f);
                    theirs_reps.push(cm.figures);
                }
            }
        }
        let (lat, halves) = ping_pong(l, p, role, oob)?;
        oob.send(&LatMsg { msg: "latency".into(), figures: lat })?;
        let their_lat: LatMsg = oob.recv("latency")?;
        let backend = l.cq.backend().kind.name().to_string();
        let name = l.kind.name();
        let (client, server) = match role {
            Role::Client => (
                row("client", name, &backend, p, &mine_reps, &lat, Some(latency_of(&halves)?)),
                row("server", name, "-", p, &theirs_reps, &their_lat.figures, None),
            ),
            Role::Server => (
                row("client", name, "-", p, &theirs_reps, &their_lat.figures, None),
                row("server", name, &backend, p, &mine_reps, &lat, None),
            ),
        };
        rows.push(client);
        rows.push(server);
    }
    // The client's latency figures reach the server with its last message.
    oob.send(&serde_json::json!({ "msg": "rows", "rows": rows }))?;
    let their_rows: serde_json::Value = oob.recv("rows")?;
    fill_peer_rows(&mut rows, &their_rows, role);
    Ok(RemoteReport {
        role,
        device: ctx.name().to_string(),
        peer,
        params: p.clone(),
        batch: local.batch,
        events: local.events,
        endpoints,
        rows,
    })
}

/// Takes the peer's own rows' backend and latency (what only it knows) into `rows`.
fn fill_peer_rows(rows: &mut [RemoteRow], theirs: &serde_json::Value, role: Role) {
    let Some(list) = theirs.get("rows").and_then(|r| r.as_array()) else { return };
    let peer_side = role.other();
    for r in rows.iter_mut().filter(|r| r.side == peer_side) {
        let Some(t) = list.iter().find(|t| t["side"] == peer_side && t["poller"] == r.poller.as_str()) else {
            continue;
        };
        if let Some(b) = t["backend"].as_str() {
            r.backend = b.to_string();
        }
        if let Ok(l) = serde_json::from_value::<LatencyWire>(t["latency"].clone()) {
            r.latency = Some(Latency {
                t_min_us: l.t_min_us,
                t_max_us: l.t_max_us,
                t_typical_us: l.t_typical_us,
                t_avg_us: l.t_avg_us,
                t_stdev_us: l.t_stdev_us,
                p99_us: l.p99_us,
                p99_9_us: l.p99_9_us,
            });
        }
    }
}

#[derive(Deserialize)]
struct LatencyWire {
    t_min_us: f64,
    t_max_us: f64,
    t_typical_us: f64,
    t_avg_us: f64,
    t_stdev_us: f64,
    p99_us: f64,
    p99_9_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> RemoteParams {
        RemoteParams {
            verb: Verb::Write,
            size: 64,
            iters: 100,
            duration: None,
            tx_depth: 32,
            signal_every: 1,
            qps: 1,
            reps: 1,
            pollers: vec!["direct".into()],
        }
    }

    #[test]
    fn the_first_differing_option_is_named_with_both_values() {
        let p = params();
        assert_eq!(p.differs(&p.clone(), "server"), None);
        let e = p.differs(&RemoteParams { size: 4096, ..params() }, "server").unwrap();
        assert!(e.contains("-s/--size 64 here, 4096 on the server"), "{e}");
        let e = p.differs(&RemoteParams { duration: Some(5), ..params() }, "client").unwrap();
        assert!(e.contains("-D/--duration unset here, 5 on the client"), "{e}");
        let e = p.differs(&RemoteParams { pollers: vec!["cq_ex".into()], ..params() }, "server").unwrap();
        assert!(e.contains("--poller direct here, cq_ex on the server"), "{e}");
    }

    #[test]
    fn an_endpoint_crosses_the_wire_unchanged() {
        let e = Endpoint {
            qpn: 0x11,
            lid: 0,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2],
            gid_index: 1,
            psn: 7,
        };
        let w: WireEndpoint = serde_json::from_str(&serde_json::to_string(&WireEndpoint::of(&e)).unwrap()).unwrap();
        assert_eq!(w.endpoint().unwrap(), e);
        assert!(WireEndpoint { gid: "zz".into(), ..w }.endpoint().is_err());
    }
}
