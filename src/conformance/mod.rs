//! One set of workloads, written once against the [`crate::Context`]/[`crate::Cq`]/QP API,
//! that runs unchanged on a model, on rxe, and on a NIC: RC and UD traffic of every basic
//! opcode, selective signaling, errors and flushes, CQ sizes from 1 to the device maximum,
//! and a CQ that wraps many times.
//!
//! Each workload knows the completions it must produce ([`Expected`]) and checks the data it
//! moved. A run on one backend gives the completions it saw, normalised so that runs on
//! different backends (and QP numbers) compare field by field: QPs are named by their role
//! in the workload, completions are kept in order per QP (the order across QPs on one CQ is
//! the device's to choose), and fields verbs leave undefined (the opcode of an error, the
//! byte count of a send) are left out.

mod workloads;

pub use workloads::WORKLOADS;

use crate::cq::{BackendChoice, BackendKind, Cq};
use crate::error::Error;
use crate::verbs::Endpoint;
use crate::{Completion, WcFlags, WcOpcode, WcStatus};
use std::time::{Duration, Instant};

/// A completion as the workloads compare them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// The QP's role in the workload (0, 1, ...), not its number.
    pub qp: u8,
    /// `wr_id`.
    pub wr_id: u64,
    /// `status`.
    pub status: WcStatus,
    /// `opcode`, for a successful completion.
    pub opcode: Option<WcOpcode>,
    /// `byte_len`, for a successful receive or RDMA READ.
    pub byte_len: Option<u32>,
    /// `imm_data`, for a successful receive with `WITH_IMM` set.
    pub imm: Option<u32>,
    /// `wc_flags` bits verbs define for a successful receive (GRH, WITH_IMM, WITH_INV).
    pub flags: u32,
    /// The sender's role, for a successful UD receive.
    pub src: Option<u8>,
}

impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "qp{} wr_id={} {}", self.qp, self.wr_id, self.status.name())?;
        if let Some(op) = self.opcode {
            write!(f, " {}", op.name())?;
        }
        if let Some(b) = self.byte_len {
            write!(f, " byte_len={b}")?;
        }
        if let Some(i) = self.imm {
            write!(f, " imm={i:#x}")?;
        }
        if self.flags != 0 {
            write!(f, " flags={:#x}", self.flags)?;
        }
        if let Some(s) = self.src {
            write!(f, " src=qp{s}")?;
        }
        Ok(())
    }
}

/// What a workload expects: a record, or (for an opcode the device chooses) a record to
/// compare without its opcode.
pub type Expected = Vec<Record>;

/// One workload's run on one backend.
#[derive(Clone, Debug)]
pub struct Run {
    /// The workload.
    pub workload: &'static str,
    /// The backend that polled.
    pub backend: BackendKind,
    /// Why that backend.
    pub reason: String,
    /// The completions seen, normalised, in order per QP.
    pub records: Vec<Record>,
    /// Differences from what the workload expects, one line each.
    pub problems: Vec<String>,
    /// Why the workload did not run on this device (a feature it lacks), if it did not.
    pub skipped: Option<String>,
}

/// Builds records from completions: maps QP numbers to roles.
#[derive(Debug, Default)]
pub struct Recorder {
    qpns: Vec<u32>,
    ud: Vec<bool>,
    records: Vec<Record>,
    problems: Vec<String>,
}

impl Recorder {
    /// Names QP `qp` role `n` for the n-th QP the workload made.
    pub fn add_qp(&mut self, qp: &crate::Qp) -> u8 {
        self.qpns.push(qp.qpn());
        self.ud.push(qp.qp_type() == crate::verbs::QpType::Ud);
        (self.qpns.len() - 1) as u8
    }

    fn role(&self, qpn: u32) -> Option<u8> {
        self.qpns.iter().position(|&q| q == qpn).map(|p| p as u8)
    }

    /// Records one completion.
    pub fn record(&mut self, c: &Completion) {
        if let Some(f) = c.fault() {
            self.problems.push(format!("fault item: {f}"));
            return;
        }
        let Some(qp) = self.role(c.qp_num) else {
            self.problems.push(format!("completion for QP {:#x}, which the workload did not make", c.qp_num));
            return;
        };
        let ok = c.status == WcStatus::Success;
        // Flags and immediate data are defined for receives only: on a requester completion
        // providers differ (mlx5 and rxe set WITH_IMM on a SEND_WITH_IMM's, irdma does not).
        // GRH and the source QP are defined for UD only (rxe sets GRH on RoCE RC receives).
        let received = ok && c.opcode.is_recv();
        let ud = self.ud[qp as usize];
        let defined = if ud { WcFlags::GRH | WcFlags::WITH_IMM | WcFlags::WITH_INV } else { WcFlags::WITH_IMM | WcFlags::WITH_INV };
        let flags = c.wc_flags & defined;
        self.records.push(Record {
            qp,
            wr_id: c.wr_id,
            status: c.status,
            opcode: ok.then_some(c.opcode),
            byte_len: (ok && (c.opcode.is_recv() || c.opcode == WcOpcode::RdmaRead)).then_some(c.byte_len),
            imm: (received && c.wc_flags.contains(WcFlags::WITH_IMM)).then_some(c.imm_data),
            flags: if received { flags.bits() } else { 0 },
            src: (received && ud).then(|| self.role(c.src_qp).unwrap_or(u8::MAX)),
        });
    }

    /// Notes a problem the workload found (data that did not land, a post refused, ...).
    pub fn problem(&mut self, p: impl Into<String>) {
        self.problems.push(p.into());
    }

    /// How many completions were recorded.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// How long a workload waits for a completion before calling it missing. Generous: the VM
/// runs the kernel under software emulation.
pub const WAIT: Duration = Duration::from_secs(10);

/// Polls `cq` until `n` completions arrived (recorded) or [`WAIT`] passed; returns how many
/// arrived.
pub fn poll_n(cq: &mut Cq, rec: &mut Recorder, n: usize) -> usize {
    let deadline = Instant::now() + WAIT;
    let mut got = 0;
    let mut wcs = [Completion::default(); 16];
    let mut idle = 0u32;
    while got < n {
        let k = cq.poll(&mut wcs[..(n - got).min(16)]);
        for c in &wcs[..k] {
            rec.record(c);
        }
        got += k;
        if k == 0 {
            if Instant::now() > deadline {
                rec.problem(format!("{} of {n} completions missing after {:?}", n - got, WAIT));
                break;
            }
            idle += 1;
            if idle > 64 {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                std::hint::spin_loop();
            }
        } else {
            idle = 0;
        }
    }
    if let Some(e) = cq.take_error() {
        rec.problem(format!("poll failed: {e}"));
    }
    got
}

/// Polls `cq` for `quiet` and records anything that arrives (to prove nothing extra came).
pub fn drain_extra(cq: &mut Cq, rec: &mut Recorder, quiet: Duration) {
    let until = Instant::now() + quiet;
    let mut wcs = [Completion::default(); 16];
    while Instant::now() < until {
        let k = cq.poll(&mut wcs);
        for c in &wcs[..k] {
            rec.record(c);
            rec.problem(format!("unexpected extra completion qp={:#x} wr_id={}", c.qp_num, c.wr_id));
        }
        if k == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Sorts records into per-QP order, keeping each QP's own order.
fn per_qp(records: &[Record]) -> Vec<Record> {
    let mut v = records.to_vec();
    v.sort_by_key(|r| r.qp);
    v
}

/// The differences between two record lists (per QP, in order), one line each.
pub fn diff(what: &str, want: &[Record], got: &[Record]) -> Vec<String> {
    let (want, got) = (per_qp(want), per_qp(got));
    let mut out = Vec::new();
    for i in 0..want.len().max(got.len()) {
        match (want.get(i), got.get(i)) {
            (Some(w), Some(g)) if w == g => {}
            (Some(w), Some(g)) => out.push(format!("{what} #{i}: expected {w}, got {g}")),
            (Some(w), None) => out.push(format!("{what} #{i}: expected {w}, got nothing")),
            (None, Some(g)) => out.push(format!("{what} #{i}: unexpected {g}")),
            (None, None) => {}
        }
    }
    out
}

/// A workload: its name and the function that runs it on a context with a backend choice.
#[derive(Clone, Copy)]
pub struct Workload {
    /// The name printed in tables.
    pub name: &'static str,
    /// Runs it: the completions it saw, what it expected, and the backend that polled.
    pub run: fn(&crate::Context, BackendChoice) -> Result<Outcome, Error>,
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workload").field("name", &self.name).finish()
    }
}

/// What one workload run gave.
#[derive(Debug)]
pub struct Outcome {
    /// The backend that polled its CQs.
    pub backend: crate::cq::Backend,
    /// What it recorded.
    pub recorder: Recorder,
    /// What it expected.
    pub expected: Expected,
    /// Why it did not run, when the device lacks what it needs.
    pub skipped: Option<String>,
}

/// Runs `w` on `ctx` with `choice`, and compares with what it expects.
pub fn run(ctx: &crate::Context, w: &Workload, choice: BackendChoice) -> Run {
    match (w.run)(ctx, choice) {
        Ok(o) => {
            let mut problems = o.recorder.problems;
            problems.extend(diff(w.name, &o.expected, &o.recorder.records));
            Run {
                workload: w.name,
                backend: o.backend.kind,
                reason: o.backend.reason,
                records: o.recorder.records,
                problems,
                skipped: o.skipped,
            }
        }
        Err(e) => Run {
            workload: w.name,
            backend: BackendKind::Generic,
            reason: String::new(),
            records: Vec::new(),
            problems: vec![format!("could not run: {e}")],
            skipped: None,
        },
    }
}

/// The endpoint a QP reaches itself or a sibling on the same port by.
pub fn endpoint(qp: &crate::Qp) -> Result<Endpoint, Error> {
    qp.endpoint()
}
