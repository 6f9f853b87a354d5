//! `dvcq validate`: the conformance workloads on one device, each a check that passes when
//! its completions are exactly the ones it expects (and, on a device that has both, when the
//! direct backend's equal `ibv_poll_cq`'s field by field).

use super::output::Output;
use super::CliError;
use crate::conformance::{self, Run, WORKLOADS};
use crate::cq::{BackendChoice, BackendKind, DepthAdvice};
use serde::Serialize;
use std::process::ExitCode;

/// Arguments of `dvcq validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The device to validate (`dvcq devices` lists them).
    #[arg(short = 'd', long = "device", default_value = "model-mlx5")]
    device: String,
    /// One JSON object: `device` and `checks`, a list of `{name, result, reason}` with result
    /// `pass`, `fail` or `skip`.
    #[arg(long)]
    json: bool,
    /// Only the checks whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    only: Option<String>,
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
}

impl Check {
    /// The table's CQ column: `high-water/depth→suggested` per CQ, `-` for none.
    fn cq_column(&self) -> String {
        if self.cqs.is_empty() {
            return "-".into();
        }
        let one = |a: &DepthAdvice| format!("{}/{}\u{2192}{}", a.high_water, a.depth, a.suggested_depth);
        self.cqs.iter().map(one).collect::<Vec<_>>().join(",")
    }
}

/// Judges one workload from its runs: the direct backend's, and `ibv_poll_cq`'s where the
/// device has one.
pub fn judge(name: &str, direct: &Run, generic: Option<&Run>) -> Check {
    let cqs: Vec<DepthAdvice> = direct.cqs.iter().map(|c| c.advice()).collect();
    if let Some(why) = &direct.skipped {
        return Check { name: name.into(), result: "skip", reason: why.clone(), cqs: Vec::new() };
    }
    let mut problems: Vec<String> =
        direct.problems.iter().map(|p| format!("[{}] {p}", direct.backend.name())).collect();
    if let Some(g) = generic {
        problems.extend(g.problems.iter().map(|p| format!("[ibv_poll_cq] {p}")));
        problems.extend(conformance::diff(
            &format!("{} vs ibv_poll_cq", direct.backend.name()),
            &g.records,
            &direct.records,
        ));
        if direct.backend == BackendKind::Rxe && g.backend == BackendKind::Generic {
            // Both read the kernel's own records: every field must agree.
            problems.extend(conformance::diff_raw("rxe vs ibv_poll_cq", &g.raw, &direct.raw));
        }
    }
    if problems.is_empty() {
        let how = match generic {
            Some(_) if direct.backend != BackendKind::Generic => {
                format!(
                    "{} completions as expected, {} and ibv_poll_cq equal",
                    direct.records.len(),
                    direct.backend.name()
                )
            }
            _ => format!(
                "{} completions as expected ({}: {})",
                direct.records.len(),
                direct.backend.name(),
                direct.reason
            ),
        };
        Check { name: name.into(), result: "pass", reason: how, cqs }
    } else {
        let more = if problems.len() > 3 { format!(" (and {} more)", problems.len() - 3) } else { String::new() };
        let reason = format!("{}{more}", problems[..problems.len().min(3)].join("; "));
        Check { name: name.into(), result: "fail", reason, cqs }
    }
}

impl ValidateArgs {
    /// Runs the subcommand: exit 0 when no check failed, 1 when one did.
    ///
    /// # Errors
    ///
    /// An unknown device, or output that cannot be written.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        let ctx = crate::Context::open(&self.device).map_err(|e| CliError(e.to_string()))?;
        let model = self.device.starts_with("model-");
        let mut checks = Vec::new();
        for w in WORKLOADS {
            if self.only.as_deref().is_some_and(|o| !w.name.contains(o)) {
                continue;
            }
            let direct = conformance::run(&ctx, w, BackendChoice::Auto);
            let generic = (!model).then(|| conformance::run(&ctx, w, BackendChoice::Generic));
            checks.push(judge(w.name, &direct, generic.as_ref()));
        }
        if checks.is_empty() {
            return Err(CliError(format!("no check's name contains {:?}", self.only.as_deref().unwrap_or(""))));
        }
        let mut out = Output::stdout();
        if self.json {
            let v = serde_json::json!({ "device": self.device, "checks": checks });
            out.line(&v.to_string())?;
        } else {
            out.line(&format!(" dvcq validate: {}", self.device))?;
            out.line(&format!(
                " {:<16} {:<7} {:<20} {}",
                "#check", "#result", "#cq hw/depth\u{2192}advice", "#reason"
            ))?;
            for c in &checks {
                out.line(&format!(" {:<16} {:<7} {:<20} {}", c.name, c.result, c.cq_column(), c.reason))?;
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
            problems,
            skipped: None,
            cqs: Vec::new(),
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
        let want = Check { name: "w".into(), result: "skip", reason: "no SRQ".into(), cqs: Vec::new() };
        assert_eq!(judge("w", &skipped, None), want);
    }
}
