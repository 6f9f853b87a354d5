//! `dvcq bench traffic`: perftest-style traffic polled three ways in one run (dvcq direct,
//! `ibv_poll_cq`, rdma-core's extended CQ), on a real device or a model. The options follow
//! perftest's (`-d`, `-s`, `-n`, `-t`, `-Q`, `-e`, `-q`), the banner and the latency table
//! its layout; see [`crate::bench::traffic`] for what each figure means.

use super::bench::callgrind_total;
use super::device_name::{self, DEFAULT_DEVICE, DEVICE_HELP};
use super::output::Output;
use super::progress::Progress;
use super::CliError;
use crate::bench::traffic::{self, Moderation, PollerKind, TrafficParams, TrafficReport, TrafficRow, Verb};
use std::process::{Command, ExitCode, Stdio};

/// Most work requests the callgrind child posts per QP (valgrind runs code ~50 times
/// slower; the count per completion settles long before).
const CALLGRIND_ITERS: u32 = 1000;

/// Arguments of `dvcq bench traffic`.
#[derive(Debug, Clone, clap::Args)]
pub struct TrafficArgs {
    #[arg(short = 'd', long = "device", default_value = DEFAULT_DEVICE, help = DEVICE_HELP,
          long_help = concat!("The device: a name `dvcq devices` lists (rxe0, mlx5_0, ...) or a model ",
              "(model-mlx5, model-e810); a model has only the direct poller"))]
    device: String,
    /// RDMA WRITE (as ib_write_bw) or SEND (as ib_send_bw: receives on the same CQ).
    #[arg(long, value_enum, default_value = "write")]
    verb: Verb,
    /// Message size in bytes (1 to 8388608).
    #[arg(short = 's', long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1 << 23))]
    size: u32,
    /// Iterations: work requests per QP in each phase of a repetition (1 to 1000000).
    #[arg(short = 'n', long = "iters", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    iters: u32,
    /// Send queue depth: work requests outstanding per QP (1 to 32768).
    #[arg(short = 't', long = "tx-depth", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=32768))]
    tx_depth: u32,
    /// Selective signaling: one send in N is signaled (perftest's -Q/--cq-mod).
    #[arg(short = 'Q', long = "signal-every", visible_alias = "cq-mod", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=32768))]
    signal_every: u32,
    /// Make the QPs with sq_sig_all: every send completes, none is flagged signaled
    /// (instead of --signal-every).
    #[arg(long)]
    sq_sig_all: bool,
    /// Sleep on the completion channel between completions instead of busy-polling
    /// (perftest's -e): poll, arm, poll again, sleep.
    #[arg(short = 'e', long = "events")]
    events: bool,
    /// Completions asked of one poll call (1 to 4096).
    #[arg(long, default_value_t = 16, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096))]
    batch: usize,
    /// QPs, each connected to itself (1 to 1024); they share one CQ unless --cq-per-qp.
    #[arg(short = 'q', long = "qps", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    qps: u32,
    /// One CQ per QP instead of one CQ shared by all.
    #[arg(long)]
    cq_per_qp: bool,
    /// CQ depth (default: the completions its QPs can have outstanding).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    depth: Option<u32>,
    /// CQ moderation (ibv_modify_cq): an event waits for COUNT completions or PERIOD_US
    /// microseconds; it changes event mode (-e) only.
    #[arg(long, value_name = "COUNT,PERIOD_US", value_parser = parse_moderation)]
    moderation: Option<Moderation>,
    /// Repetitions (1 to 1000); the pollers take turns in each. The median throughput is
    /// reported, latencies over all repetitions.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: u32,
    /// One JSON line: an object with the settings, `cqs`, `cq_depth`, `rows` (one per poller:
    /// `poller`, `backend`, `completions_per_s`, `ns_per_completion`,
    /// `ratio_to_ibv_poll_cq`, `t_typical_us`, `p99_us`, `p99_9_us`, ...) and `skipped`.
    #[arg(long)]
    json: bool,
    /// Also print `vm-figure NAME VALUE UNIT` lines (what the VM test collects).
    #[arg(long)]
    figure_lines: bool,
    /// Also count instructions per completion of the poll calls under valgrind's callgrind
    /// (one run of at most 1000 work requests per QP and poller, throughput phase only).
    #[arg(long)]
    callgrind: bool,
    /// Internal: this is the callgrind count's run of one poller (throughput phase only,
    /// JSON out).
    #[arg(long, hide = true, value_enum)]
    callgrind_run: Option<PollerKind>,
    #[command(flatten)]
    pub(super) remote: super::traffic_remote::RemoteArgs,
}

/// `COUNT,PERIOD_US`: two numbers of at most 65535.
fn parse_moderation(s: &str) -> Result<Moderation, String> {
    let (c, p) = s.split_once(',').ok_or_else(|| format!("{s:?}: expected COUNT,PERIOD_US (e.g. 16,100)"))?;
    let num = |what: &str, v: &str| {
        v.trim().parse::<u16>().map_err(|_| format!("{what} {v:?} is not a number from 0 to 65535"))
    };
    Ok(Moderation { count: num("COUNT", c)?, period_us: num("PERIOD_US", p)? })
}

impl TrafficArgs {
    fn params(&self) -> TrafficParams {
        TrafficParams {
            verb: self.verb,
            size: self.size,
            iters: self.iters,
            tx_depth: self.tx_depth,
            signal_every: self.signal_every,
            sq_sig_all: self.sq_sig_all,
            events: self.events,
            batch: self.batch,
            qps: self.qps,
            cq_per_qp: self.cq_per_qp,
            cq_depth: self.depth,
            moderation: self.moderation,
            reps: self.reps,
            only: self.callgrind_run,
            latency: self.callgrind_run.is_none(),
        }
    }

    /// Runs the subcommand.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        if self.remote.is_remote() {
            let common = super::traffic_remote::Common {
                device: &self.device,
                verb: self.verb,
                size: self.size,
                iters: self.iters,
                tx_depth: self.tx_depth,
                signal_every: self.signal_every,
                qps: self.qps,
                reps: self.reps,
                batch: self.batch,
                events: self.events,
                json: self.json,
                figure_lines: self.figure_lines,
                refused: [
                    (self.sq_sig_all, "--sq-sig-all"),
                    (self.cq_per_qp, "--cq-per-qp"),
                    (self.callgrind, "--callgrind"),
                ]
                .into_iter()
                .chain([(self.depth.is_some(), "--depth"), (self.moderation.is_some(), "--moderation")])
                .filter_map(|(on, flag)| on.then_some(flag))
                .collect(),
            };
            return super::traffic_remote::run(&self.remote, &common);
        }
        let fail = |e: crate::Error| CliError(e.to_string());
        let p = self.params();
        p.check().map_err(|e| CliError(e.to_string()))?;
        let ctx = device_name::open(&self.device)?;
        let progress = Progress::start("bench traffic", self.json || self.callgrind_run.is_some());
        progress.stage(format!("{} reps of {} work requests per QP", p.reps, p.iters));
        let mut report = traffic::run(&ctx, &p).map_err(fail)?;
        let mut out = Output::stdout();
        if self.callgrind_run.is_some() {
            out.line(&serde_json::to_string(&report).map_err(|e| CliError(e.to_string()))?)?;
            return Ok(ExitCode::SUCCESS);
        }
        if self.callgrind {
            progress.stage("callgrind");
            for r in &mut report.rows {
                r.instructions_per_completion = Some(self.instructions(r.poller)?);
            }
        }
        drop(progress);
        if self.json {
            out.line(&serde_json::to_string(&report).map_err(|e| CliError(e.to_string()))?)?;
        } else {
            self.print_table(&mut out, &report)?;
        }
        if self.figure_lines {
            for r in &report.rows {
                let name = format!("traffic_{}", r.poller);
                out.line(&format!("vm-figure {name}_ns_per_completion {:.1} ns/completion", r.ns_per_completion))?;
                out.line(&format!("vm-figure {name}_completions_per_s {:.0} completions/s", r.completions_per_s))?;
                out.line(&format!("vm-figure {name}_t_typical {:.2} us", r.t_typical_us))?;
                if let Some(x) = r.ratio_to_ibv_poll_cq.filter(|_| r.poller != "ibv_poll_cq") {
                    out.line(&format!("vm-figure {name}_ratio_to_ibv_poll_cq {x:.3} x"))?;
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }

    fn print_table(&self, out: &mut Output, r: &TrafficReport) -> Result<(), CliError> {
        let p = &r.params;
        let rule = "-".repeat(100);
        let pair = |k1: &str, v1: String, k2: &str, v2: String| format!(" {k1:<16}: {v1:<32} {k2:<16}: {v2}");
        out.line(&rule)?;
        let ways: Vec<&str> = r.rows.iter().map(|row| row.poller).collect();
        out.line(&format!("                    {} traffic polled by {}", p.verb.title(), ways.join(", ")))?;
        if p.events {
            out.line(&format!(" Test with events. Using {}'s completion channel", r.device))?;
        }
        out.line(&pair("Device", r.device.clone(), "Connection type", "RC".into()))?;
        let sharing = if p.cq_per_qp { "one per QP".to_string() } else { format!("shared by {} QP(s)", p.qps) };
        out.line(&pair("Number of qps", p.qps.to_string(), "CQs", format!("{} ({sharing})", r.cqs)))?;
        out.line(&pair("TX depth", p.tx_depth.to_string(), "CQ depth", r.cq_depth.to_string()))?;
        let signal = if p.sq_sig_all { "all (sq_sig_all)".to_string() } else { format!("1 in {}", p.signal_every) };
        let moderation = match p.moderation {
            Some(m) => format!("{} completions or {} usec", m.count, m.period_us),
            None => "OFF".into(),
        };
        out.line(&pair("Signaled sends", signal, "CQ moderation", moderation))?;
        let mode = if p.events { "events" } else { "busy polling" };
        out.line(&pair("CQE poll batch", p.batch.to_string(), "Completion mode", mode.into()))?;
        out.line(&pair(
            "Message size",
            format!("{}[B]", p.size),
            "Iterations",
            format!("{} x {} reps", p.iters, p.reps),
        ))?;
        out.line(&rule)?;
        out.line(
            " #poller      #backend  #completions  compl/s[M]  ns/compl[cpu]  ratio_to_ibv_poll_cq  polls/compl  events  instr/compl",
        )?;
        for row in &r.rows {
            out.line(&throughput_row(row))?;
        }
        out.line(&rule)?;
        out.line(
            " #poller      #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]",
        )?;
        for row in &r.rows {
            out.line(&format!(
                " {:<12} {:<6} {:<14} {:<14.2} {:<12.2} {:<18.2} {:<14.2} {:<15.2} {:<22.2} {:.2}",
                row.poller,
                p.size,
                u64::from(p.iters) * u64::from(p.reps),
                row.t_min_us,
                row.t_max_us,
                row.t_typical_us,
                row.t_avg_us,
                row.t_stdev_us,
                row.p99_us,
                row.p99_9_us
            ))?;
        }
        out.line(&rule)?;
        for s in &r.skipped {
            out.line(&format!(" {}: skipped: {}", s.poller, s.reason))?;
        }
        for row in &r.rows {
            out.line(&format!(" {} polls with {}: {}", row.poller, row.backend.name(), row.backend_reason))?;
        }
        out.line(" ns/compl: the polling thread's CPU time (it posts too) per completion; compl/s: per wall second")?;
        out.line(" t_*: one work request at a time, from its post to the poll call that returns its completion")?;
        if !self.callgrind {
            out.line(" add --callgrind for instructions per completion of the poll calls (valgrind)")?;
        }
        Ok(())
    }

    /// Instructions per completion of `poller`'s poll calls: a child run of this binary
    /// under `valgrind --tool=callgrind`, collecting only inside the poll function
    /// (`--toggle-collect`), divided by the completions that run polled.
    fn instructions(&self, poller: &str) -> Result<f64, CliError> {
        let kind = PollerKind::ALL
            .into_iter()
            .find(|k| k.name() == poller)
            .ok_or_else(|| CliError(format!("no poller named {poller}")))?;
        let exe = std::env::current_exe().map_err(|e| CliError(format!("cannot find own executable: {e}")))?;
        let file = std::env::temp_dir().join(format!("dvcq-traffic-callgrind-{}-{poller}.out", std::process::id()));
        let mut cmd = Command::new("valgrind");
        cmd.arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", file.display()))
            .arg(format!("--toggle-collect=*{}*", kind.symbol()))
            .arg(&exe)
            .args(["bench", "traffic", "--callgrind-run", poller])
            .args(self.child_args());
        let run =
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).output().map_err(|e| {
                CliError(format!("cannot run valgrind ({e}); install it, e.g. `apt-get install valgrind`"))
            })?;
        if !run.status.success() {
            let _ = std::fs::remove_file(&file);
            let why = String::from_utf8_lossy(&run.stderr);
            let last = why.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(CliError(format!("valgrind run of the {poller} poller failed ({}): {last}", run.status)));
        }
        let total = callgrind_total(&file);
        let _ = std::fs::remove_file(&file);
        let total = total?;
        let child: serde_json::Value = serde_json::from_slice(&run.stdout)
            .map_err(|e| CliError(format!("the callgrind run of {poller} printed no report: {e}")))?;
        let completions = child["rows"][0]["completions"]
            .as_u64()
            .filter(|&n| n > 0)
            .ok_or_else(|| CliError(format!("the callgrind run of {poller} reported no completions")))?;
        Ok(total as f64 / completions as f64)
    }

    /// What the callgrind child is told after `bench traffic --callgrind-run POLLER`: every
    /// setting of this run, one repetition, at most [`CALLGRIND_ITERS`] work requests.
    fn child_args(&self) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |k: &str, v: String| a.extend([k.to_owned(), v]);
        push("-d", self.device.clone());
        push("--verb", if self.verb == Verb::Write { "write".into() } else { "send".into() });
        push("-s", self.size.to_string());
        push("-n", self.iters.min(CALLGRIND_ITERS).to_string());
        push("-t", self.tx_depth.to_string());
        push("-Q", self.signal_every.to_string());
        push("--batch", self.batch.to_string());
        push("-q", self.qps.to_string());
        push("--reps", "1".into());
        if let Some(d) = self.depth {
            push("--depth", d.to_string());
        }
        if let Some(m) = self.moderation {
            push("--moderation", format!("{},{}", m.count, m.period_us));
        }
        for (on, flag) in [(self.sq_sig_all, "--sq-sig-all"), (self.events, "-e"), (self.cq_per_qp, "--cq-per-qp")] {
            if on {
                a.push(flag.to_owned());
            }
        }
        a
    }
}

/// One row of the throughput table.
fn throughput_row(r: &TrafficRow) -> String {
    let ratio = r.ratio_to_ibv_poll_cq.map_or_else(|| "-".to_string(), |x| format!("{x:.2}"));
    let instr = r.instructions_per_completion.map_or_else(|| "-".to_string(), |i| format!("{i:.1}"));
    let row = format!(
        " {:<12} {:<9} {:<13} {:<11.3} {:<14.1} {:<21} {:<12.3} {:<7} {}",
        r.poller,
        r.backend.name(),
        r.completions,
        r.completions_per_s / 1e6,
        r.ns_per_completion,
        ratio,
        r.polls_per_completion,
        r.events,
        instr
    );
    row.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moderation_is_two_numbers() {
        assert_eq!(parse_moderation("16,100"), Ok(Moderation { count: 16, period_us: 100 }));
        assert_eq!(parse_moderation("0,0"), Ok(Moderation { count: 0, period_us: 0 }));
        assert!(parse_moderation("16").unwrap_err().contains("COUNT,PERIOD_US"));
        assert!(parse_moderation("16,x").unwrap_err().starts_with("PERIOD_US \"x\""));
        assert!(parse_moderation("70000,1").unwrap_err().starts_with("COUNT \"70000\""));
    }
}
