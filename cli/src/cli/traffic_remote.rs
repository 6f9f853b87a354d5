//! `dvcq bench traffic --server` and `dvcq bench traffic HOST`: the two-host run (see
//! [`crate::bench::traffic::remote`]), its options and its table.

use super::device_name;
use super::output::Output;
use super::CliError;
use crate::bench::traffic::remote::{self, LocalChoices, RemoteParams, RemoteReport, RemoteRow, Role};
use crate::bench::traffic::{oob, PollerKind, Verb};
use std::net::TcpListener;
use std::process::ExitCode;
use std::time::Duration;

/// The two-host options of `bench traffic`.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteArgs {
    /// Two hosts: wait for a client on --port (perftest's server side).
    #[arg(long, conflicts_with = "host")]
    server: bool,
    /// Two hosts: the server to run against (perftest's client side).
    #[arg(value_name = "HOST")]
    host: Option<String>,
    /// Two hosts: the TCP port of the exchange.
    #[arg(short = 'p', long, default_value_t = oob::DEFAULT_PORT)]
    port: u16,
    /// Two hosts: run the throughput phase for this many seconds instead of -n messages
    /// (1 to 3600).
    #[arg(short = 'D', long = "duration", value_parser = clap::value_parser!(u32).range(1..=3600))]
    duration: Option<u32>,
    /// Two hosts: report bandwidth in Gb/s instead of MB/s (2^20 bytes).
    #[arg(long = "report_gbits", visible_alias = "report-gbits")]
    report_gbits: bool,
    /// Two hosts: the pollers to run, in turn (default: all three); both sides poll the same
    /// way in each turn.
    #[arg(long, value_enum, value_delimiter = ',')]
    poller: Vec<PollerKind>,
    /// Two hosts: seconds to wait for the server to answer, and for each message of the
    /// exchange (1 to 600); the server waits for a client for ever.
    #[arg(long = "oob-timeout", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
    oob_timeout: u64,
}

impl RemoteArgs {
    /// True for a two-host run.
    pub(super) fn is_remote(&self) -> bool {
        self.server || self.host.is_some()
    }
}

/// The options `bench traffic` shares with the one-host run.
#[derive(Debug)]
pub(super) struct Common<'a> {
    pub(super) device: &'a str,
    pub(super) verb: Verb,
    pub(super) size: u32,
    pub(super) iters: u32,
    pub(super) tx_depth: u32,
    pub(super) signal_every: u32,
    pub(super) qps: u32,
    pub(super) reps: u32,
    pub(super) batch: usize,
    pub(super) events: bool,
    pub(super) json: bool,
    pub(super) figure_lines: bool,
    /// One-host options given, which a two-host run does not take.
    pub(super) refused: Vec<&'static str>,
}

/// Runs one side.
pub(super) fn run(a: &RemoteArgs, c: &Common<'_>) -> Result<ExitCode, CliError> {
    if let Some(flag) = c.refused.first() {
        return Err(CliError(format!("{flag}: a one-host option; a two-host run (--server or HOST) does not take it")));
    }
    if c.signal_every > c.tx_depth {
        return Err(CliError(format!(
            "-Q/--signal-every {}: larger than the TX depth ({}): the send queue would fill with unsignaled sends",
            c.signal_every, c.tx_depth
        )));
    }
    let mut pollers: Vec<String> = a.poller.iter().map(|k| k.name().to_string()).collect();
    if pollers.is_empty() {
        pollers = PollerKind::ALL.iter().map(|k| k.name().to_string()).collect();
    }
    pollers.dedup();
    let p = RemoteParams {
        verb: c.verb,
        size: c.size,
        iters: c.iters,
        duration: a.duration,
        tx_depth: c.tx_depth,
        signal_every: c.signal_every,
        qps: c.qps,
        reps: c.reps,
        pollers,
    };
    let timeout = Duration::from_secs(a.oob_timeout);
    let local = LocalChoices { batch: c.batch, events: c.events, timeout };
    let ctx = device_name::open(c.device)?;
    let (role, link) = if a.server {
        let listener = TcpListener::bind(("0.0.0.0", a.port))
            .or_else(|_| TcpListener::bind(("::", a.port)))
            .map_err(|e| CliError(format!("--port {}: cannot listen: {e}", a.port)))?;
        if !c.json {
            super::output::warn(&format!(" Waiting for a client on port {} ...", a.port));
        }
        (Role::Server, oob::accept(&listener, timeout, None).map_err(|e| CliError(e.0))?)
    } else {
        let host = a.host.as_deref().unwrap_or_default();
        (Role::Client, oob::connect(host, a.port, timeout).map_err(|e| CliError(e.0))?)
    };
    let report = remote::run(&ctx, role, link, &p, &local).map_err(|e| CliError(e.0))?;
    let mut out = Output::stdout();
    if c.json {
        out.line(&serde_json::to_string(&report).map_err(|e| CliError(e.to_string()))?)?;
    } else {
        print(&mut out, &report, a.report_gbits)?;
    }
    // The client's report holds both sides' rows: it alone prints them as figure lines.
    if c.figure_lines && report.role == Role::Client {
        for r in &report.rows {
            let name = format!("two_host_{}_{}", r.side, r.poller);
            if let Some(ns) = r.ns_per_completion {
                out.line(&format!("vm-figure {name}_ns_per_completion {ns:.1} ns/completion"))?;
            }
            if let Some(m) = r.msg_rate_per_s {
                out.line(&format!("vm-figure {name}_msg_rate {m:.0} msgs/s"))?;
            }
            if let Some(l) = r.latency {
                out.line(&format!("vm-figure {name}_t_typical {:.2} us", l.t_typical_us))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print(out: &mut Output, r: &RemoteReport, gbits: bool) -> Result<(), CliError> {
    let p = &r.params;
    let rule = "-".repeat(110);
    let pair = |k1: &str, v1: String, k2: &str, v2: String| format!(" {k1:<16}: {v1:<32} {k2:<16}: {v2}");
    out.line(&rule)?;
    out.line(&format!(
        "                    {} BW and latency, two hosts (dvcq bench traffic, {} side)",
        p.verb.title(),
        r.role.name()
    ))?;
    out.line(&pair("Device", r.device.clone(), "Peer", r.peer.clone()))?;
    out.line(&pair("Number of qps", p.qps.to_string(), "Transport type", "RC".into()))?;
    out.line(&pair("TX depth", p.tx_depth.to_string(), "Signaled sends", format!("1 in {}", p.signal_every)))?;
    let mode = if r.events { "events" } else { "busy polling" };
    out.line(&pair("CQE poll batch", r.batch.to_string(), "Completion mode", mode.into()))?;
    let iters =
        p.duration.map_or_else(|| format!("{} x {} reps", p.iters, p.reps), |d| format!("{d} s x {} reps", p.reps));
    out.line(&pair("Message size", format!("{}[B]", p.size), "Throughput run", iters))?;
    for (poller, (me, peer)) in p.pollers.iter().zip(&r.endpoints) {
        out.line(&format!(" {poller:<12} local {me}  remote {peer}"))?;
    }
    out.line(&rule)?;
    let unit = if gbits { "Gb/sec" } else { "MB/sec" };
    out.line(&format!(
        " #side   #poller      #backend  #bytes  #iterations  BW peak[{unit}]  BW average[{unit}]  MsgRate[Mpps]  ns/compl[cpu]  polls/compl  empty polls"
    ))?;
    for row in &r.rows {
        out.line(&bw_row(row, gbits))?;
    }
    out.line(&rule)?;
    out.line(
        " #poller      #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]",
    )?;
    for row in r.rows.iter().filter(|row| row.side == "client") {
        let Some(l) = row.latency else { continue };
        out.line(&format!(
            " {:<12} {:<6} {:<14} {:<14.2} {:<12.2} {:<18.2} {:<14.2} {:<15.2} {:<22.2} {:.2}",
            row.poller,
            p.size,
            p.iters,
            l.t_min_us,
            l.t_max_us,
            l.t_typical_us,
            l.t_avg_us,
            l.t_stdev_us,
            l.p99_us,
            l.p99_9_us
        ))?;
    }
    out.line(&rule)?;
    out.line(" BW, MsgRate: messages each side completed (the client's sends, the server's receives; a WRITE server sees none)")?;
    out.line(" ns/compl: the side's polling thread's CPU time per completion; t_*: half a ping-pong round trip, client's clock")?;
    Ok(())
}

fn bw_row(r: &RemoteRow, gbits: bool) -> String {
    let bw = |x: Option<f64>| {
        x.map_or_else(
            || "-".to_string(),
            |b| if gbits { format!("{:.3}", b * 8.0 / 1e9) } else { format!("{:.2}", b / f64::from(1u32 << 20)) },
        )
    };
    let opt = |x: Option<f64>, digits: usize| x.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"));
    let line = format!(
        " {:<7} {:<12} {:<9} {:<7} {:<12} {:<16} {:<19} {:<14} {:<14} {:<12} {}",
        r.side,
        r.poller,
        r.backend,
        r.bytes,
        r.iterations,
        bw(r.bw_peak_bytes_per_s),
        bw(r.bw_avg_bytes_per_s),
        opt(r.msg_rate_per_s.map(|m| m / 1e6), 6),
        opt(r.ns_per_completion, 1),
        opt(r.polls_per_completion, 3),
        r.empty_polls
    );
    line.trim_end().to_string()
}
