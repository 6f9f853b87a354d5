//! `dvcq validate`: the conformance workloads on one device, each a check that passes when
//! its completions are exactly the ones it expects (and, on a device that has both, when the
//! direct backend's equal `ibv_poll_cq`'s field by field). The checks cover what rdma-core's
//! own CQ tests cover (`tests/test_cq.py`, `test_cq_events.py`, `test_mlx5_cq.py`) where dvcq
//! can run it; a check a device cannot run is skipped with the reason.
//!
//! Each check runs on a freshly opened device, so what one check made (a model keeps every
//! CQ of a device until the device is closed) never weighs on the next.

use super::device_name::{self, DEFAULT_DEVICE, DEVICE_HELP};
use super::output::Output;
use super::progress::Progress;
use super::table::Table;
use super::CliError;
use crate::conformance::{self, Run, WORKLOADS};
use crate::cq::{BackendChoice, BackendKind, DepthAdvice};
use serde::Serialize;
use std::process::ExitCode;

/// Arguments of `dvcq validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    #[arg(short = 'd', long = "device", default_value = DEFAULT_DEVICE, help = DEVICE_HELP)]
    device: String,
    /// One JSON line: an object with `device` and `checks`, a list of `{name, result,
    /// reason, cqs}` with result `pass`, `fail` or `skip`.
    #[arg(long)]
    json: bool,
    /// Only the checks whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    only: Option<String>,
    /// Save the ring image of each CQ of a failing check here (`<check>-cq<n>.ring`, for
    /// `dvcq ring decode`), where the direct backend has a ring dvcq parses (the models'
    /// mlx5 rings, mlx5 devices).
    #[arg(long, value_name = "DIR")]
    keep_rings: Option<std::path::PathBuf>,
    /// Test hook: fail the checks whose name is this, whatever they found.
    #[arg(long, hide = true, value_name = "NAME")]
    fail_check: Option<String>,
    /// Seconds each check may take; one that runs over fails with a line saying so and the
    /// next one runs.
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    check_timeout: u64,
    /// Test hook: the checks whose name is this never finish (as on a device that stopped).
    #[arg(long, hide = true, value_name = "NAME")]
    stall_check: Option<String>,
}

/// One check's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// The workload's name.
    pub name: String,
    /// `pass`, `fail` or `skip`.
    pub result: &'static str,
    /// What failed, why it was skipped, or which backends agreed.
    pub reason: String,
    /// Each CQ the check polled (direct backend): its depth, the high-water mark seen and
    /// the depth the advice suggests for the work the check had in flight.
    pub cqs: Vec<DepthAdvice>,
    /// The ring images `--keep-rings` saved for a failing check.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rings: Vec<String>,
}

impl Check {
    /// The table's CQ column: `high-water/depth→suggested` per CQ (for more than two, the
    /// count and the one that came closest to full), `-` for none.
    fn cq_column(&self) -> String {
        let one = |a: &DepthAdvice| format!("{}/{}\u{2192}{}", a.high_water, a.depth, a.suggested_depth);
        let fullest = |a: &&DepthAdvice| (a.high_water as f64 / f64::from(a.depth.max(1)), a.depth);
        match self.cqs.len() {
            0 => "-".into(),
            1 | 2 => self.cqs.iter().map(one).collect::<Vec<_>>().join(","),
            n => {
                let worst = self
                    .cqs
                    .iter()
                    .max_by(|a, b| fullest(a).partial_cmp(&fullest(b)).unwrap_or(std::cmp::Ordering::Equal));
                format!("{n} CQs, {}", worst.map(one).unwrap_or_default())
            }
        }
    }
}

/// Saves the ring image of each CQ of a failing check's direct run into `dir` and says so
/// in the check (a CQ without one says why).
fn keep_rings(dir: &std::path::Path, check: &mut Check, direct: &Run) {
    let mut notes = Vec::new();
    for (i, used) in direct.cqs.iter().enumerate() {
        let path = dir.join(format!("{}-cq{i}.ring", check.name));
        match used.cq.ring_image() {
            Ok(text) => match std::fs::write(&path, text) {
                Ok(()) => {
                    notes.push(format!("ring image {}", path.display()));
                    check.rings.push(path.display().to_string());
                }
                Err(e) => notes.push(format!("ring image {}: {e}", path.display())),
            },
            Err(crate::Error::Unsupported { why, .. }) => notes.push(format!("no ring image of cq{i}: {why}")),
            Err(e) => notes.push(format!("no ring image of cq{i}: {e}")),
        }
    }
    if notes.is_empty() {
        notes.push("no ring image: the check polled no CQ it kept".into());
    }
    check.reason = format!("{}; {}", check.reason, notes.join("; "));
}

/// Judges one workload from its runs: the direct backend's, and `ibv_poll_cq`'s where the
/// device has one.
pub fn judge(name: &str, direct: &Run, generic: Option<&Run>) -> Check {
    let cqs: Vec<DepthAdvice> = direct.cqs.iter().map(|c| c.advice()).collect();
    if let Some(why) = &direct.skipped {
        return Check { name: name.into(), result: "skip", reason: why.clone(), cqs: Vec::new(), rings: Vec::new() };
    }
    let mut problems: Vec<String> =
        direct.problems.iter().map(|p| format!("[{}] {p}", direct.backend.name())).collect();
    // An ibv_poll_cq run the device skipped compared nothing (a device may refuse a check to
    // one poller only): the check stands on the direct run.
    let generic = generic.filter(|g| g.skipped.is_none());
    if let Some(g) = generic {
        problems.extend(g.problems.iter().map(|p| format!("[ibv_poll_cq] {p}")));
        // Every field verbs define; on rxe, where both read the kernel's own records, every
        // field.
        problems.extend(conformance::cross(&format!("{} vs ibv_poll_cq", direct.backend.name()), g, direct));
    }
    if problems.is_empty() {
        let agreed = generic.is_some() && direct.backend != BackendKind::Generic;
        let how = match (&direct.summary, generic) {
            (Some(s), _) if agreed && direct.records.is_empty() => format!("{s} (also with ibv_poll_cq)"),
            (Some(s), _) if agreed => format!("{s}; {} and ibv_poll_cq equal", direct.backend.name()),
            (Some(s), _) => s.clone(),
            (None, Some(_)) if agreed => {
                format!(
                    "{} completions as expected, {} and ibv_poll_cq equal",
                    direct.records.len(),
                    direct.backend.name()
                )
            }
            (None, _) => format!(
                "{} completions as expected ({}: {})",
                direct.records.len(),
                direct.backend.name(),
                direct.reason
            ),
        };
        Check { name: name.into(), result: "pass", reason: how, cqs, rings: Vec::new() }
    } else {
        let more = if problems.len() > 3 { format!(" (and {} more)", problems.len() - 3) } else { String::new() };
        let reason = format!("{}{more}", problems[..problems.len().min(3)].join("; "));
        Check { name: name.into(), result: "fail", reason, cqs, rings: Vec::new() }
    }
}

impl ValidateArgs {
    /// Runs the subcommand: exit 0 when no check failed, 1 when one did.
    ///
    /// # Errors
    ///
    /// An unknown device, or output that cannot be written.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        // Open once up front: an unknown device is one error line, not a failed check each.
        drop(device_name::open(&self.device)?);
        if let Some(dir) = &self.keep_rings {
            std::fs::create_dir_all(dir).map_err(|e| CliError(format!("--keep-rings {}: {e}", dir.display())))?;
        }
        let model = self.device.starts_with("model-");
        let mut checks = Vec::new();
        let progress = Progress::start("validate", self.json);
        let chosen: Vec<_> =
            WORKLOADS.iter().filter(|w| self.only.as_deref().is_none_or(|o| w.name.contains(o))).collect();
        for (i, w) in chosen.iter().enumerate() {
            progress.stage(format!("{} ({} of {})", w.name, i + 1, chosen.len()));
            let (device, w, stall) = (self.device.clone(), *w, self.stall_check.as_deref() == Some(w.name));
            let limit = std::time::Duration::from_secs(self.check_timeout);
            let ran = super::validate_deadline::bounded(limit, move || {
                if stall {
                    loop {
                        std::thread::park();
                    }
                }
                let ctx = device_name::open(&device)?;
                let direct = conformance::run(&ctx, w, BackendChoice::Auto);
                let generic = (!model).then(|| conformance::run(&ctx, w, BackendChoice::Generic));
                Ok::<_, CliError>((direct, generic))
            });
            let (direct, generic) = match ran {
                Ok(r) => r?,
                Err(over) => {
                    let reason = format!("{over}");
                    checks.push(Check {
                        name: w.name.into(),
                        result: "fail",
                        reason,
                        cqs: Vec::new(),
                        rings: Vec::new(),
                    });
                    continue;
                }
            };
            let mut check = judge(w.name, &direct, generic.as_ref());
            if self.fail_check.as_deref() == Some(w.name) {
                check.result = "fail";
                check.reason = format!("failed on purpose (--fail-check, a test hook): {}", check.reason);
            }
            if check.result == "fail" {
                if let Some(dir) = &self.keep_rings {
                    keep_rings(dir, &mut check, &direct);
                }
            }
            checks.push(check);
        }
        drop(progress);
        if checks.is_empty() {
            return Err(CliError(format!("no check's name contains {:?}", self.only.as_deref().unwrap_or(""))));
        }
        let mut out = Output::stdout();
        if self.json {
            let v = serde_json::json!({ "device": self.device, "checks": checks });
            out.line(&v.to_string())?;
        } else {
            out.line(&format!(" dvcq validate: {}", self.device))?;
            let mut t = Table::new(&["#check", "#result", "#cq hw/depth\u{2192}advice", "#reason"]);
            for c in &checks {
                t.row(vec![c.name.clone(), c.result.to_owned(), c.cq_column(), c.reason.clone()]);
            }
            for line in t.lines() {
                out.line(&line)?;
            }
        }
        let count = |r: &str| checks.iter().filter(|c| c.result == r).count();
        let (pass, fail, skip) = (count("pass"), count("fail"), count("skip"));
        if !self.json {
            out.line(&format!("{pass} passed, {fail} failed, {skip} skipped"))?;
            out.line(
                " #cq: per CQ, the most CQEs seen outstanding / its depth \u{2192} the depth suggested for the \
                 check's work in flight (its queues' depths and the high-water mark, plus a quarter)",
            )?;
        }
        Ok(if fail == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::Record;
    use crate::{WcOpcode, WcStatus};

    fn run(backend: BackendKind, records: Vec<Record>, problems: Vec<String>) -> Run {
        Run {
            workload: "w",
            backend,
            reason: "why".into(),
            records,
            raw: Vec::new(),
            defined: Vec::new(),
            problems,
            skipped: None,
            cqs: Vec::new(),
            summary: None,
        }
    }

    fn rec(wr_id: u64) -> Record {
        Record {
            qp: 0,
            wr_id,
            status: WcStatus::Success,
            opcode: Some(WcOpcode::Send),
            byte_len: None,
            imm: None,
            flags: 0,
            src: None,
        }
    }

    #[test]
    fn a_check_passes_only_when_both_backends_agree_and_expect_nothing_else() {
        let d = run(BackendKind::Rxe, vec![rec(1)], vec![]);
        let g = run(BackendKind::Generic, vec![rec(1)], vec![]);
        assert_eq!(judge("w", &d, Some(&g)).result, "pass");
        let g2 = run(BackendKind::Generic, vec![rec(2)], vec![]);
        let c = judge("w", &d, Some(&g2));
        assert_eq!(c.result, "fail");
        assert!(c.reason.contains("vs ibv_poll_cq"), "{}", c.reason);
        let bad = run(BackendKind::Rxe, vec![rec(1)], vec!["data did not land".into()]);
        assert!(judge("w", &bad, Some(&g)).reason.contains("[rxe] data did not land"));
        let mut skipped = run(BackendKind::Model, vec![], vec![]);
        skipped.skipped = Some("no SRQ".into());
        let want =
            Check { name: "w".into(), result: "skip", reason: "no SRQ".into(), cqs: Vec::new(), rings: Vec::new() };
        assert_eq!(judge("w", &skipped, None), want);
        // A check without traffic passes with what it did.
        let mut made = run(BackendKind::Rxe, vec![], vec![]);
        made.summary = Some("CQs made".into());
        let g = run(BackendKind::Generic, vec![], vec![]);
        assert_eq!(judge("w", &made, Some(&g)).reason, "CQs made (also with ibv_poll_cq)");
        assert_eq!(judge("w", &made, None).reason, "CQs made");
    }
}
