//! Per-CQ state: the dvcq `Cq` that polls an application's CQ in `own` mode (or checks the
//! provider in `verify` mode), the QPs known on it, and the figures of the exit report.

use crate::layout::{IbvCq, IbvWc};
use crate::table::Table;
use crate::Mode;
use dvcq::{Completion, FaultKind};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How many completions one dvcq poll takes at most (`ibv_poll_cq` calls asking for more
/// loop); the buffer is made once per CQ.
const BATCH: usize = 64;

/// What a poll or an arm of a registered CQ needs, under the CQ's lock.
pub(crate) struct Polled {
    /// dvcq's CQ; `None` while the provider alone polls it (verify mode after dvcq let go).
    pub cq: Option<dvcq::Cq>,
    /// The QPs (and WQs) known on this CQ, as addresses, for a new attach after a resize or
    /// a QP's destruction.
    pub qps: Vec<usize>,
    /// Where dvcq's poll writes.
    pub buf: Vec<Completion>,
    /// The numbers of QPs destroyed while the CQ lived: CQEs of theirs still in the ring
    /// are what rdma-core's clean would have removed, and are dropped.
    pub gone_qps: Vec<u32>,
    /// Verify mode: the provider's completions of one call.
    pub theirs: Vec<IbvWc>,
    /// Own mode: completions taken out of the ring when a QP was destroyed, returned first,
    /// each with its CQE's raw timestamp (for an extended CQ's `read_completion_ts`).
    pub pending: VecDeque<(IbvWc, u64)>,
}

/// One registered CQ.
pub(crate) struct CqEntry {
    /// `own` or `verify`.
    pub mode: Mode,
    /// A number for the exit report (the order of creation).
    pub serial: u64,
    /// The poll state.
    pub polled: Mutex<Polled>,
    /// Completions dvcq returned to the application (own) or checked (verify).
    pub completions: AtomicU64,
    /// Completions with an error status, and polls that failed.
    pub errors: AtomicU64,
    /// Verify mode: completions where dvcq and the provider disagreed.
    pub differences: AtomicU64,
    /// CQEs of destroyed QPs dropped.
    pub absorbed: AtomicU64,
    /// An extended CQ: the provider's `start_poll` ... `read_*` pointers, as they were
    /// before the preload replaced them (`crate::ext`).
    pub ext: Option<crate::ext::Saved>,
}

// SAFETY: dvcq's Cq is only touched under `polled`'s lock.
unsafe impl Sync for CqEntry {}
// SAFETY: as above.
unsafe impl Send for CqEntry {}

static CQS: Table<CqEntry, 8192> = Table::new();

/// Lines of the exit report of CQs already destroyed or declined.
pub(crate) static REPORT: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Completions dvcq polled in CQs already destroyed.
pub(crate) static DONE_COMPLETIONS: AtomicU64 = AtomicU64::new(0);
static SERIAL: AtomicU64 = AtomicU64::new(0);

/// The next CQ number of the report.
pub(crate) fn next_serial() -> u64 {
    SERIAL.fetch_add(1, Ordering::Relaxed) + 1
}

/// The entry of `cq`, if dvcq took it.
#[inline]
pub(crate) fn get(cq: *mut IbvCq) -> Option<&'static CqEntry> {
    CQS.get(cq as usize)
}

/// Registers dvcq's `cq` for the application's `raw`.
pub(crate) fn register(
    raw: *mut IbvCq,
    mode: Mode,
    cq: dvcq::Cq,
    serial: u64,
    ext: Option<crate::ext::Saved>,
) -> Result<(), String> {
    let e = Box::new(CqEntry {
        mode,
        serial,
        polled: Mutex::new(Polled {
            cq: Some(cq),
            qps: Vec::new(),
            buf: vec![Completion::default(); BATCH],
            gone_qps: Vec::new(),
            theirs: vec![IbvWc::default(); BATCH],
            pending: VecDeque::new(),
        }),
        completions: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        differences: AtomicU64::new(0),
        absorbed: AtomicU64::new(0),
        ext,
    });
    match CQS.insert(raw as usize, e) {
        Ok(_) => Ok(()),
        Err(e) => {
            let _g = crate::Inside::enter();
            drop(e);
            Err("more than 8192 CQs registered".into())
        }
    }
}

/// Takes `cq`'s entry out after the real destroy, adding its line to the report: `backend`
/// polled it until then (dvcq's CQ was handed back just before the destroy).
pub(crate) fn unregister(cq: *mut IbvCq, backend: &str) -> Option<Box<CqEntry>> {
    let e = CQS.remove(cq as usize)?;
    DONE_COMPLETIONS.fetch_add(e.completions.load(Ordering::Relaxed), Ordering::Relaxed);
    crate::lock(&REPORT).push(e.report_line_for(backend));
    Some(e)
}

/// Takes `cq`'s entry out when it is handed back to the provider (`mlx5dv_init_obj`), its
/// report line saying why.
pub(crate) fn hand_back(cq: *mut IbvCq, why: &str) -> Option<Box<CqEntry>> {
    let e = CQS.remove(cq as usize)?;
    DONE_COMPLETIONS.fetch_add(e.completions.load(Ordering::Relaxed), Ordering::Relaxed);
    crate::lock(&REPORT).push(format!("{} handed back: {why}", e.report_line()));
    Some(e)
}

/// Every live entry (the exit report).
pub(crate) fn for_each(f: impl FnMut(&CqEntry)) {
    CQS.for_each(f)
}

impl CqEntry {
    /// The exit report's line for this CQ.
    pub(crate) fn report_line(&self) -> String {
        self.report_line_for(self.backend_name())
    }

    /// The name of the backend polling the CQ now (`provider` when dvcq does not).
    pub(crate) fn backend_name(&self) -> &'static str {
        crate::lock(&self.polled).cq.as_ref().map_or("provider", |c| c.backend().kind.name())
    }

    /// The exit report's line for this CQ, polled by `backend` until now.
    fn report_line_for(&self, backend: &str) -> String {
        let mut l = format!(
            "cq {}{} backend {} mode {} polled {} errors {}",
            self.serial,
            if self.ext.is_some() { " extended" } else { "" },
            backend,
            self.mode.name(),
            self.completions.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
        );
        if self.mode == Mode::Verify {
            l += &format!(" differences {}", self.differences.load(Ordering::Relaxed));
        }
        let a = self.absorbed.load(Ordering::Relaxed);
        if a > 0 {
            l += &format!(" dropped-cqes-of-destroyed-qps {a}");
        }
        l
    }
}

/// Own mode, after a QP's destroy: takes every entry out of the ring into `pending`,
/// dropping those of QPs dvcq does not know (the destroyed one's).
pub(crate) fn drain_after_destroy(e: &CqEntry, p: &mut Polled) {
    let _in = crate::Inside::enter();
    let Some(c) = p.cq.as_mut() else { return };
    let mut dropped = 0;
    loop {
        let k = c.poll_count(&mut p.buf);
        for x in &p.buf[..k] {
            if x.fault_kind == FaultKind::UnknownQp {
                dropped += 1;
            } else if let Some(w) = to_wc(x, &p.gone_qps) {
                p.pending.push_back((w, x.timestamp));
            } else {
                dropped += 1;
            }
        }
        if k < p.buf.len() {
            break;
        }
    }
    e.absorbed.fetch_add(dropped, Ordering::Relaxed);
}

/// `ibv_wc` of a dvcq completion; `None` for a CQE of a destroyed QP (dropped, as
/// rdma-core's clean would have removed it). Other fault items come back as failed
/// completions, as the C API returns them.
#[inline(always)]
pub(crate) fn to_wc(c: &Completion, gone: &[u32]) -> Option<IbvWc> {
    if c.fault_kind != FaultKind::None {
        return fault(c, gone);
    }
    Some(IbvWc {
        wr_id: c.wr_id,
        status: c.status as u32,
        opcode: c.opcode as u32,
        vendor_err: c.vendor_err,
        byte_len: c.byte_len,
        imm_data: c.imm_data,
        qp_num: c.qp_num,
        src_qp: c.src_qp,
        wc_flags: c.wc_flags.bits(),
        pkey_index: c.pkey_index,
        slid: c.slid,
        sl: c.sl,
        dlid_path_bits: c.dlid_path_bits,
    })
}

/// After an empty poll: the failure of that poll call the preload reports (its `ibv_poll_cq`
/// returns -1), if any. Only rdma-core's poll (the generic backend) fails inside a poll call;
/// dvcq's direct pollers keep no other error the preload would report (theirs are the
/// adoptions of dvcq's own QPs, which the preload never makes), and a CQ in error is left
/// to its completions. So the direct pollers are not asked: `Cq::take_error` after every
/// empty poll was 55 of the 314 instructions of perftest's busy-polling empty poll on the
/// emulated ConnectX (tests/perf/preload-perftest-callgrind).
#[inline]
pub(crate) fn poll_failure(c: &mut dvcq::Cq) -> Option<dvcq::Error> {
    if c.backend().kind != dvcq::BackendKind::Generic {
        return None;
    }
    c.take_error().filter(|e| !matches!(e, dvcq::Error::CqInError { .. }))
}

/// `IBV_WC_GENERAL_ERR`.
const WC_GENERAL_ERR: u32 = 21;

#[cold]
fn fault(c: &Completion, gone: &[u32]) -> Option<IbvWc> {
    if c.fault_kind == FaultKind::UnknownQp && gone.contains(&c.qp_num) {
        return None;
    }
    crate::log::once(format!(
        "dvcq returned a fault item ({:?}, value {:#x}) as a failed completion",
        c.fault_kind, c.qp_num
    ));
    Some(IbvWc {
        wr_id: c.wr_id,
        status: WC_GENERAL_ERR,
        vendor_err: c.fault_kind as u32,
        qp_num: c.qp_num,
        ..IbvWc::default()
    })
}
