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
//! byte count of a send) are left out. Two pollers of one device are compared on every field
//! verbs define ([`cross`], [`defined_fields`]).

mod compare;
mod cq_create;
mod cq_ex;
mod cq_overrun;
mod cq_resize;
mod events;
mod limits;
mod mlx5_dv;
mod timestamps;
mod verbs_ext;
mod workloads;
mod xrc;

pub use compare::{completion_differences, cross, defined_fields, diff, diff_raw, provider_exceptions};
pub use cq_ex::extended_fields;
pub use timestamps::{timestamps_monotonic, TimestampSummary, TimestampViolation};
pub use workloads::WORKLOADS;

use crate::cq::{BackendChoice, BackendKind, Cq};
use crate::verbs::Endpoint;
use crate::{Completion, WcFlags, WcOpcode, WcStatus};
use dvcq::Error;
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
    /// `imm_data`, for a successful receive with `WITH_IMM` set; with `WITH_INV`, the
    /// invalidated rkey by the name the workload gave it ([`Recorder::name_rkey`]).
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

/// A CQ a workload used, kept after the run for its statistics (and its ring), with the
/// work requests that could be in flight on it (the sum of the depths of the queues that
/// complete there, as the workload asked for them).
#[derive(Debug)]
pub struct UsedCq {
    /// The CQ.
    pub cq: Cq,
    /// Work requests that could be in flight on it.
    pub in_flight: u64,
}

impl UsedCq {
    /// Depth advice for it ([`Cq::advice`]).
    pub fn advice(&self) -> crate::cq::DepthAdvice {
        self.cq.advice(Some(self.in_flight))
    }
}

/// One workload's run on one backend.
#[derive(Debug)]
pub struct Run {
    /// The workload.
    pub workload: &'static str,
    /// The backend that polled.
    pub backend: BackendKind,
    /// Why that backend.
    pub reason: String,
    /// The completions seen, normalised, in order per QP.
    pub records: Vec<Record>,
    /// The completions seen whole, in the order polled, QP numbers named by role
    /// ([`ROLE_MARK`]): for [`diff_raw`] between two pollers of one device.
    pub raw: Vec<Completion>,
    /// The same completions reduced to the fields verbs define for each
    /// ([`defined_fields`]), less those the device's provider never writes
    /// ([`provider_exceptions`]): what two pollers of one device must agree on ([`cross`]).
    pub defined: Vec<Completion>,
    /// Differences from what the workload expects, one line each.
    pub problems: Vec<String>,
    /// Why the workload did not run on this device (a feature it lacks), if it did not.
    pub skipped: Option<String>,
    /// The CQs it polled, after the run.
    pub cqs: Vec<UsedCq>,
    /// What it did, in a few words, for a workload whose completions do not tell (one that
    /// only makes CQs, say).
    pub summary: Option<String>,
}

/// How a raw completion names a QP of the workload: its role in the low byte under this mark
/// (QP numbers are 24 bits, so no real number carries it).
pub const ROLE_MARK: u32 = 0xff00_0000;

/// Builds records from completions: maps QP numbers to roles.
#[derive(Debug, Default)]
pub struct Recorder {
    qpns: Vec<u32>,
    rkeys: Vec<u32>,
    /// The `wc_flags` bit by which the device says a receive invalidated an rkey (empty:
    /// `IBV_WC_WITH_INV`).
    inv_flag: WcFlags,
    ud: Vec<bool>,
    records: Vec<Record>,
    raw: Vec<Completion>,
    defined: Vec<Completion>,
    problems: Vec<String>,
}

impl Recorder {
    /// Names QP `qp` role `n` for the n-th QP the workload made.
    pub fn add_qp(&mut self, qp: &crate::Qp) -> u8 {
        self.qpns.push(qp.qpn());
        self.ud.push(qp.qp_type() == crate::verbs::QpType::Ud);
        (self.qpns.len() - 1) as u8
    }

    /// Names `rkey` (a memory window's, say) for the records: an invalidated rkey a
    /// completion reports becomes [`ROLE_MARK`] with the name's index in the low byte, so
    /// runs whose windows got other keys compare. Returns the name.
    pub fn name_rkey(&mut self, rkey: u32) -> u32 {
        let i = self.rkeys.iter().position(|&k| k == rkey).unwrap_or_else(|| {
            self.rkeys.push(rkey);
            self.rkeys.len() - 1
        });
        ROLE_MARK | i as u32
    }

    /// Takes `flag` as the bit by which this device marks a receive that invalidated an
    /// rkey (the kernel's soft-RoCE driver writes its own `IB_WC_WITH_INVALIDATE`, 1 << 2,
    /// into the queue it maps, which libibverbs reads as `IBV_WC_IP_CSUM_OK`).
    pub fn inv_flag(&mut self, flag: WcFlags) {
        self.inv_flag = flag;
    }

    /// The name of an rkey the workload named, or the rkey itself.
    fn rkey_name(&self, rkey: u32) -> u32 {
        self.rkeys.iter().position(|&k| k == rkey).map_or(rkey, |i| ROLE_MARK | i as u32)
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
        // The whole completion too, its QP numbers replaced by roles, for the strict
        // comparison of two pollers of one device (`diff_raw`).
        // (A remote QP of the workload is named by its role too, marked in the top byte.)
        let src = self.role(c.src_qp).map_or(c.src_qp, |r| ROLE_MARK | u32::from(r));
        // An invalidated rkey (in imm_data's place) by the name the workload gave it.
        let inv_flag = if self.inv_flag.is_empty() { WcFlags::WITH_INV } else { self.inv_flag };
        let inv = c.status == WcStatus::Success && c.opcode.is_recv() && c.wc_flags.contains(inv_flag);
        let imm_data = if inv { self.rkey_name(c.imm_data) } else { c.imm_data };
        let raw = Completion { qp_num: ROLE_MARK | u32::from(qp), src_qp: src, imm_data, ..*c };
        self.raw.push(raw);
        self.defined.push(defined_fields(&raw, self.ud[qp as usize], inv));
        // Flags and immediate data are defined for receives only: on a requester completion
        // providers differ (mlx5 and rxe set WITH_IMM on a SEND_WITH_IMM's, irdma does not).
        // GRH and the source QP are defined for UD only (rxe sets GRH on RoCE RC receives).
        let received = ok && c.opcode.is_recv();
        let ud = self.ud[qp as usize];
        let defined = if ud {
            WcFlags::GRH | WcFlags::WITH_IMM | WcFlags::WITH_INV
        } else {
            WcFlags::WITH_IMM | WcFlags::WITH_INV
        };
        let flags = c.wc_flags & defined;
        self.records.push(Record {
            qp,
            wr_id: c.wr_id,
            status: c.status,
            opcode: ok.then_some(c.opcode),
            byte_len: (ok && (c.opcode.is_recv() || c.opcode == WcOpcode::RdmaRead)).then_some(c.byte_len),
            imm: (received && (inv || c.wc_flags.contains(WcFlags::WITH_IMM))).then_some(imm_data),
            flags: if received { flags.bits() } else { 0 },
            src: (received && ud).then(|| self.role(c.src_qp).unwrap_or(u8::MAX)),
        });
    }

    /// QPs named so far.
    pub fn qps_len(&self) -> usize {
        self.qpns.len()
    }

    /// Takes in what `other` recorded (a workload that runs in parts): its QPs, records,
    /// whole completions and problems, its QP roles shifted by `base` (this recorder's QP
    /// count before). Names of rkeys are not renumbered: at most one of the two may have
    /// named any.
    pub fn absorb(&mut self, other: Recorder, base: u8) {
        if !self.rkeys.is_empty() && !other.rkeys.is_empty() {
            self.problems.push("two recorders that both named rkeys were merged: their names collide".into());
        }
        self.qpns.extend(other.qpns);
        self.rkeys.extend(other.rkeys);
        self.ud.extend(other.ud);
        let shift = |r: u8| if r == u8::MAX { r } else { r + base };
        self.records.extend(other.records.into_iter().map(|mut r| {
            r.qp = shift(r.qp);
            r.src = r.src.map(shift);
            r
        }));
        // A role in a whole completion is the low byte under ROLE_MARK.
        let shift_role =
            |n: u32| if n & ROLE_MARK == ROLE_MARK { ROLE_MARK | ((n & 0xff) + u32::from(base)) } else { n };
        let shifted = |c: Completion| Completion { qp_num: shift_role(c.qp_num), src_qp: shift_role(c.src_qp), ..c };
        self.raw.extend(other.raw.into_iter().map(shifted));
        self.defined.extend(other.defined.into_iter().map(shifted));
        self.problems.extend(other.problems);
    }

    /// Notes a problem the workload found (data that did not land, a post refused, ...).
    pub fn problem(&mut self, p: impl Into<String>) {
        self.problems.push(p.into());
    }

    /// The completions recorded whole, their QP numbers named by role ([`ROLE_MARK`]).
    pub fn raw(&self) -> &[Completion] {
        &self.raw
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
        let k = cq.poll_count(&mut wcs[..(n - got).min(16)]);
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
        let k = cq.poll_count(&mut wcs);
        for c in &wcs[..k] {
            rec.record(c);
            rec.problem(format!("unexpected extra completion qp={:#x} wr_id={}", c.qp_num, c.wr_id));
        }
        if k == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
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
    /// The CQs it polled.
    pub cqs: Vec<UsedCq>,
    /// What it did, when its completions do not say ([`Run::summary`]).
    pub summary: Option<String>,
}

impl Outcome {
    /// A check that polls no traffic (it makes CQs, say): the problems it recorded, and
    /// what it did in a few words. Its backend is reported as the generic one: it made
    /// CQs of whichever backend applies.
    pub fn checked(recorder: Recorder, summary: String) -> Outcome {
        Outcome { skipped: None, recorder, summary: Some(summary), ..Outcome::skip("") }
    }

    /// A workload this device cannot run, and why.
    pub fn skip(why: impl Into<String>) -> Outcome {
        Outcome {
            backend: crate::cq::Backend { kind: BackendKind::Generic, reason: String::new() },
            recorder: Recorder::default(),
            expected: Vec::new(),
            skipped: Some(why.into()),
            cqs: Vec::new(),
            summary: None,
        }
    }
}

/// Runs `w` on `ctx` with `choice`, and compares with what it expects.
pub fn run(ctx: &crate::Context, w: &Workload, choice: BackendChoice) -> Run {
    match (w.run)(ctx, choice) {
        Ok(mut o) => {
            if o.cqs.is_empty() {
                // A check without traffic (or skipped) reports the backend a CQ made with
                // `choice` gets on this device.
                if let Ok(cq) = ctx.create_cq(crate::cq::CqOptions::new(1).backend(choice)) {
                    o.backend = cq.backend().clone();
                }
            }
            let mut problems = o.recorder.problems;
            problems.extend(diff(w.name, &o.expected, &o.recorder.records));
            let provider = ctx.info().map(|i| i.provider).unwrap_or_default();
            let mut defined = o.recorder.defined;
            for c in &mut defined {
                provider_exceptions(&provider, c);
            }
            Run {
                workload: w.name,
                backend: o.backend.kind,
                reason: o.backend.reason,
                records: o.recorder.records,
                raw: o.recorder.raw,
                defined,
                problems,
                skipped: o.skipped,
                cqs: o.cqs,
                summary: o.summary,
            }
        }
        Err(e) => Run {
            workload: w.name,
            backend: BackendKind::Generic,
            reason: String::new(),
            records: Vec::new(),
            raw: Vec::new(),
            defined: Vec::new(),
            problems: vec![format!("could not run: {e}")],
            skipped: None,
            cqs: Vec::new(),
            summary: None,
        },
    }
}

/// The endpoint a QP reaches itself or a sibling on the same port by.
pub fn endpoint(qp: &crate::Qp) -> Result<Endpoint, Error> {
    qp.endpoint()
}

/// One workload's runs on a device: polled by the backend `Auto` picks (the direct one where
/// it applies) and by rdma-core's `ibv_poll_cq`, with their differences.
#[derive(Debug)]
pub struct DeviceRun {
    /// The run through the backend `BackendChoice::Auto` picked.
    pub direct: Run,
    /// The run through `ibv_poll_cq` (`BackendChoice::Generic`).
    pub generic: Run,
    /// Where the direct run differs from the `ibv_poll_cq` run ([`cross`]): the normalised
    /// records, and the completions on every field verbs define (on rxe, where both pollers
    /// read the same kernel records, on every field).
    pub cross: Vec<String>,
}

/// Runs every workload on `ctx` twice, direct and through `ibv_poll_cq`, and compares them.
/// On a device whose provider is `rxe` the direct run must be polled by dvcq's rxe reader
/// (a fallback to `ibv_poll_cq` there is a problem, not a pass).
pub fn run_on_device(ctx: &crate::Context) -> Vec<DeviceRun> {
    let rxe = ctx.info().is_ok_and(|i| i.provider == "rxe");
    WORKLOADS
        .iter()
        .map(|w| {
            let generic = run(ctx, w, BackendChoice::Generic);
            let direct = run(ctx, w, BackendChoice::Auto);
            let what = format!("{} direct vs ibv_poll_cq", w.name);
            let mut differences = cross(&what, &generic, &direct);
            if rxe && direct.skipped.is_none() && direct.backend != BackendKind::Rxe {
                differences.push(format!(
                    "{}: an rxe device was polled by {} ({}), not by dvcq's rxe reader",
                    w.name,
                    direct.backend.name(),
                    direct.reason
                ));
            }
            DeviceRun { direct, generic, cross: differences }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::QpType;
    use crate::{Context, CqOptions, QpInit};

    fn completion(qp_num: u32, wr_id: u64) -> Completion {
        Completion { qp_num, wr_id, opcode: WcOpcode::Recv, src_qp: qp_num, ..Completion::default() }
    }

    /// Raw records name QPs by role (so two runs with other QP numbers compare), keep every
    /// other field, and compare per QP in polled order: a change in any field is found, an
    /// interleaving across QPs is not a difference.
    #[test]
    fn raw_records_compare_every_field_per_qp() {
        let ctx = Context::open("model-mlx5").unwrap();
        let cq = ctx.create_cq(CqOptions::new(8)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let qps: Vec<_> = (0..2).map(|_| pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap()).collect();
        let record = |order: &[(usize, u64)], vendor_err: u32| {
            let mut rec = Recorder::default();
            for qp in &qps {
                rec.add_qp(qp);
            }
            for &(q, wr_id) in order {
                let mut c = completion(qps[q].qpn(), wr_id);
                c.src_qp = qps[1 - q].qpn();
                c.vendor_err = vendor_err;
                rec.record(&c);
            }
            rec.raw
        };
        let a = record(&[(0, 1), (1, 2), (0, 3)], 0);
        assert_eq!(a[0].qp_num, ROLE_MARK, "QP numbers become roles");
        assert_eq!(a[0].src_qp, ROLE_MARK | 1, "a remote QP of the workload becomes its role");
        let interleaved = record(&[(1, 2), (0, 1), (0, 3)], 0);
        assert!(diff_raw("w", &a, &interleaved).is_empty(), "the order across QPs is the device's");
        let swapped = record(&[(0, 3), (1, 2), (0, 1)], 0);
        assert_eq!(diff_raw("w", &a, &swapped).len(), 2, "the order within a QP is compared");
        let other = record(&[(0, 1), (1, 2), (0, 3)], 7);
        let d = diff_raw("w", &a, &other);
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d[0].contains("vendor_err=0x0") && d[0].contains("vendor_err=0x7"), "{}", d[0]);
        let short = record(&[(0, 1), (1, 2)], 0);
        assert_eq!(
            diff_raw("w", &a, &short),
            ["w qp0 #1: expected wr_id=3 IBV_WC_SUCCESS IBV_WC_RECV byte_len=0 imm=0x0 flags=0x0 src_qp=0xff000001 \
              vendor_err=0x0 pkey=0 slid=0 sl=0 path_bits=0 wqe_index=0 fault=None, got nothing"]
        );
    }

    /// Each recorded completion gets its defined view with its QP's type and the device's
    /// invalidation bit: a UD receive keeps src_qp, an RC one does not; a receive flagged
    /// with the device's own invalidation bit keeps its (named) rkey. Absorbing another
    /// recorder shifts the roles of its whole completions as of its records.
    #[test]
    fn defined_views_follow_the_qp_type_and_absorb_shifts_roles() {
        let ctx = Context::open("model-mlx5").unwrap();
        let cq = ctx.create_cq(CqOptions::new(8)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let rc = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
        let ud = pd.create_qp(&QpInit::new(QpType::Ud, &cq)).unwrap();
        let mut rec = Recorder::default();
        rec.add_qp(&rc);
        rec.add_qp(&ud);
        rec.inv_flag(WcFlags::IP_CSUM_OK);
        let name = rec.name_rkey(0x1234);
        rec.record(&Completion { src_qp: 0x77, ..completion(rc.qpn(), 1) });
        rec.record(&Completion { src_qp: rc.qpn(), ..completion(ud.qpn(), 2) });
        rec.record(&Completion { imm_data: 0x1234, wc_flags: WcFlags::IP_CSUM_OK, ..completion(rc.qpn(), 3) });
        assert_eq!(rec.defined.len(), 3);
        assert_eq!(rec.defined[0].src_qp, 0, "RC: src_qp is undefined");
        assert_eq!(rec.defined[1].src_qp, ROLE_MARK, "UD: the sender by its role");
        assert_eq!(rec.defined[2].imm_data, name, "the invalidated rkey by its name");
        assert_eq!(rec.defined[0], defined_fields(&rec.raw[0], false, false));

        let mut all = Recorder::default();
        all.add_qp(&rc);
        all.record(&completion(rc.qpn(), 9));
        all.absorb(rec, 1);
        let roles = |v: &[Completion]| v.iter().map(|c| (c.qp_num & 0xff, c.wr_id)).collect::<Vec<_>>();
        assert_eq!(roles(&all.raw), [(0, 9), (1, 1), (2, 2), (1, 3)]);
        assert_eq!(roles(&all.defined), roles(&all.raw));
        assert_eq!(all.raw[2].src_qp, ROLE_MARK | 1, "a remote role shifts too");
        assert_eq!(
            all.records.iter().map(|r| (r.qp, r.wr_id)).collect::<Vec<_>>(),
            roles(&all.raw).iter().map(|&(q, w)| (q as u8, w)).collect::<Vec<_>>()
        );
    }
}
