//! `dvcq stat`: a device's own counters (the kernel's sysfs counters, what `rdma statistic
//! show` reads, or a model's) before and after a short workload on a CQ dvcq polls, next to
//! that CQ's statistics and depth advice.

use super::device_name::{self, DEFAULT_DEVICE, DEVICE_HELP};
use super::output::Output;
use super::table::Table;
use super::CliError;
use crate::cq::{CqOptions, CqStats, DepthAdvice};
use crate::device::counters::{self, DeviceCounters, SYSFS_ROOT};
use crate::verbs::{Access, QpCaps, QpType, SendOp, SendWr};
use crate::{Backend, Completion, Context, QpInit};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Arguments of `dvcq stat`.
#[derive(Debug, clap::Args)]
pub struct StatArgs {
    #[arg(short = 'd', long = "device", default_value = DEFAULT_DEVICE,
          help = DEVICE_HELP)]
    device: String,
    /// RDMA WRITEs the workload posts on an RC QP connected to itself, polled through dvcq
    /// (0 to 4096; 0: only read the counters, without opening the device).
    #[arg(short = 'n', long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(0..=4096))]
    writes: u32,
    /// One JSON line: an object with `device`, `source`, `counters` (`scope`, `kind`, `name`, `before`,
    /// `after`, `delta`, `cq_related`, `error`), and `cq` (`backend`, `stats`, `advice`;
    /// null without a workload).
    #[arg(long)]
    json: bool,
    /// Where the kernel's device directories are (for tests and chroots).
    #[arg(long, value_name = "DIR", default_value = SYSFS_ROOT)]
    sysfs: PathBuf,
}

/// One counter before and after the workload.
#[derive(Clone, Debug, Serialize)]
struct Row {
    scope: String,
    kind: String,
    name: String,
    before: Option<u64>,
    after: Option<u64>,
    delta: Option<i128>,
    cq_related: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The workload's CQ, after it.
#[derive(Clone, Debug, Serialize)]
struct CqReport {
    backend: Backend,
    writes: u32,
    stats: CqStats,
    advice: DepthAdvice,
}

/// How long the workload may take (the VM runs the kernel under emulation).
const WORKLOAD_WAIT: Duration = Duration::from_secs(20);

impl StatArgs {
    /// Runs the subcommand.
    ///
    /// # Errors
    ///
    /// An unknown device, a workload that could not run, output that cannot be written.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        let err = CliError;
        let model = self.device.starts_with("model-");
        let (before, after, cq) = if self.writes == 0 && !model {
            // Counters only: no need to open the device (nor for it to be a verbs device).
            // A name that is no device there but a model's, mistyped, says which model.
            let c = counters::read_sysfs(&self.sysfs, &self.device).map_err(|e| {
                match device_name::suggestion(&self.device, &[]) {
                    Some(m) => err(format!("no device named {:?}: did you mean {m}? ({e})", self.device)),
                    None => err(e.to_string()),
                }
            })?;
            (None, c, None)
        } else {
            let ctx = device_name::open(&self.device)?;
            let read = || ctx.counters(&self.sysfs).map_err(|e| err(e.to_string()));
            if self.writes == 0 {
                (None, read()?, None)
            } else {
                let before = read()?;
                let cq = workload(&ctx, self.writes).map_err(err)?;
                (Some(before), read()?, Some(cq))
            }
        };
        let rows = rows(before.as_ref(), &after);
        let mut out = Output::stdout();
        if self.json {
            let v = serde_json::json!({
                "device": self.device,
                "source": after.source,
                "counters": rows,
                "cq": cq,
            });
            out.line(&v.to_string())?;
            return Ok(ExitCode::SUCCESS);
        }
        self.print(&mut out, &after, &rows, cq.as_ref())?;
        Ok(ExitCode::SUCCESS)
    }

    fn print(&self, out: &mut Output, c: &DeviceCounters, rows: &[Row], cq: Option<&CqReport>) -> Result<(), CliError> {
        out.line(&format!(" dvcq stat: {}", self.device))?;
        let what = if c.source == "model" {
            "the model's counters".to_string()
        } else {
            format!("kernel counters: {}", c.source)
        };
        let when = if cq.is_some() { "before and after the workload" } else { "now" };
        out.line(&format!(" --- {what}, {when}"))?;
        if rows.is_empty() {
            out.line(" (the driver exposes no counters for this device)")?;
        }
        let mut t = Table::new(&["#scope", "#kind", "#counter", "#before", "#after", "#delta"]);
        let num = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        for r in rows {
            let mark = if r.cq_related { "*" } else { " " };
            let name = format!("{}{mark}", r.name);
            let delta = match r.delta {
                Some(0) | None => String::new(),
                Some(d) => format!("{d:+}"),
            };
            let after = match &r.error {
                Some(e) => format!("unreadable: {e}"),
                None => num(r.after),
            };
            t.row(vec![r.scope.clone(), r.kind.clone(), name, num(r.before), after, delta]);
        }
        if !rows.is_empty() {
            for line in t.lines() {
                out.line(&line)?;
            }
        }
        if rows.iter().any(|r| r.cq_related) {
            out.line(
                " * about CQs and their completions: overflows, error and flush completions, sequence errors, retries",
            )?;
        }
        let Some(cq) = cq else {
            return Ok(());
        };
        let s = &cq.stats;
        let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        out.line(&format!(
            " --- dvcq's CQ: {} RDMA WRITEs, {} backend ({})",
            cq.writes,
            cq.backend.kind.name(),
            cq.backend.reason
        ))?;
        out.line(&format!(
            " polls {}  empty {}  completions {}  largest batch {}  errors {}  faults {}",
            s.polls, s.empty_polls, s.completions, s.largest_batch, s.errors, s.faults
        ))?;
        for (status, n) in s.errors_by_status.iter() {
            out.line(&format!("   {} ({}): {n}", status.name(), status.as_str()))?;
        }
        out.line(&format!(
            " doorbell writes {}  overruns {}  compression sessions {}",
            opt(s.doorbell_writes),
            opt(s.overruns),
            opt(s.compression_sessions)
        ))?;
        out.line(&format!(" {}", cq.advice))
    }
}

/// The counters of `after`, each with its value in `before` (matched by scope, kind, name).
fn rows(before: Option<&DeviceCounters>, after: &DeviceCounters) -> Vec<Row> {
    let mut v = Vec::new();
    for g in &after.groups {
        for c in &g.counters {
            let was = before.and_then(|b| b.get(&g.scope, &g.kind, &c.name));
            let delta = match (was, c.value) {
                (Some(b), Some(a)) => Some(i128::from(a) - i128::from(b)),
                _ => None,
            };
            v.push(Row {
                scope: g.scope.clone(),
                kind: g.kind.clone(),
                name: c.name.clone(),
                before: was,
                after: c.value,
                delta,
                cq_related: c.cq_related,
                error: c.error.clone(),
            });
        }
    }
    v
}

/// `writes` RDMA WRITEs on an RC QP connected to itself, completing into a CQ dvcq polls
/// (the device's direct backend where it has one), all polled.
fn workload(ctx: &Context, writes: u32) -> Result<CqReport, String> {
    let e = |e: crate::Error| e.to_string();
    let cq = ctx.create_cq(CqOptions::new(writes)).map_err(e)?;
    let pd = ctx.alloc_pd().map_err(e)?;
    let caps = QpCaps { max_send_wr: writes, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let mut qp = pd.create_qp(&QpInit { caps, ..QpInit::new(QpType::Rc, &cq) }).map_err(e)?;
    let me = qp.endpoint().map_err(e)?;
    qp.connect(&me).map_err(e)?;
    let mr = pd.reg_mr(4096, Access::ALL).map_err(e)?;
    let sg = [mr.slice(0, 8).map_err(e)?];
    let to = mr.remote().at(64);
    for i in 0..u64::from(writes) {
        qp.post_send(&[SendWr::new(i, SendOp::Write(to), &sg)]).map_err(e)?;
    }
    let mut cq = cq;
    let mut wcs = [Completion::default(); 16];
    let (mut got, deadline) = (0u32, Instant::now() + WORKLOAD_WAIT);
    while got < writes {
        let n = cq.poll_count(&mut wcs);
        got += n as u32;
        if n == 0 {
            if Instant::now() > deadline {
                return Err(format!("{} of {writes} completions did not arrive in {WORKLOAD_WAIT:?}", writes - got));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    let in_flight = u64::from(writes) + 1;
    Ok(CqReport { backend: cq.backend().clone(), writes, stats: cq.stats(), advice: cq.advice(Some(in_flight)) })
}
