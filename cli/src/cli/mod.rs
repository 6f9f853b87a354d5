//! The `dvcq` command line: one file per subcommand.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

pub mod bench;
mod bench_cq;
mod bench_decode;
mod bench_events;
mod bench_scale;
pub mod decode;
mod device_name;
pub mod devices;
pub mod emulate;
mod output;
mod progress;
pub mod ring;
pub mod run;
pub mod stat;
mod table;
pub mod traffic;
mod traffic_remote;
pub mod validate;
mod validate_deadline;

/// What every subcommand shares, shown under `dvcq --help`.
const AFTER_HELP: &str = "\
Every subcommand that takes a device takes it as -d/--device NAME: a name `dvcq devices`
lists (rxe0, mlx5_0, ...) or a model (model-mlx5, model-e810); without -d it is model-mlx5
(`devices -d` only picks one device to show, and lists them all without it). The commands
that run on the models only (bench poll, bench cq, ring export) also take mlx5, e810, irdma.

--json prints JSON lines everywhere: each line of standard output is one complete JSON value.
Most subcommands print one line, one object; `decode` prints one per CQE and problem, and
`bench poll` one per table row, each as soon as it is found or measured.

Commands that run for more than a second show a progress line on standard error when it is
a terminal, and never with --json.";

/// dvcq: direct-verbs RDMA completion queues, their hardware models and tools.
#[derive(Debug, Parser)]
#[command(name = "dvcq", version = crate::device::version_line(), about, long_about = None, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmarks on the models and on devices (perftest-style output).
    Bench(bench::BenchArgs),
    /// Ring images: decode one, or export a model scenario as one.
    Ring(ring::RingArgs),
    /// List RDMA devices and the built-in models, with the backend each gets.
    Devices(devices::DevicesArgs),
    /// Validate a device: the conformance workloads, each checked completion by completion.
    Validate(validate::ValidateArgs),
    /// Decode error-CQE dumps (rdma-core, kernel, DPDK, bare hex) found in any text.
    Decode(decode::DecodeArgs),
    /// A device's counters (the kernel's sysfs counters, or a model's) around a short
    /// workload, next to the statistics and depth advice of the CQ dvcq polled.
    Stat(stat::StatArgs),
    /// Run a program over the emulated devices (an emulated ConnectX-6 Dx, mlx5_0, under
    /// the host's rdma-core): dvcq emulate -- PROGRAM [ARGS...].
    Emulate(emulate::EmulateArgs),
    /// Runs an unmodified verbs program with dvcq polling its CQs (libdvcq_preload.so).
    Run(run::RunArgs),
}

impl Command {
    /// The subcommand as typed: `bench poll`, `ring decode`, `decode`, ...
    fn name(&self) -> &'static str {
        match self {
            Command::Bench(a) => a.name(),
            Command::Ring(a) => a.name(),
            Command::Devices(_) => "devices",
            Command::Validate(_) => "validate",
            Command::Decode(_) => "decode",
            Command::Stat(_) => "stat",
            Command::Emulate(_) => "emulate",
            Command::Run(_) => "run",
        }
    }
}

/// Runs the CLI with the process arguments.
///
/// A subcommand's error is one line on standard error, `dvcq <subcommand>: <what>`, where
/// `<what>` starts with the input and line it is about when there is one (`<file>:<line>: `,
/// `<stdin>` for standard input) or with the option (`--entries 3: `); exit status 2.
/// Usage errors clap finds (an unknown option, a value out of an option's range) are clap's
/// own `error: ...` lines and usage, exit status 2 too.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Bench(a) => a.run(),
        Command::Decode(a) => a.run(),
        Command::Devices(a) => a.run(),
        Command::Validate(a) => a.run(),
        Command::Ring(a) => a.run(),
        Command::Stat(a) => a.run(),
        Command::Emulate(a) => a.run(),
        Command::Run(a) => a.run(),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            output::warn(&format!("dvcq {}: {e}", cli.command.name()));
            ExitCode::from(2)
        }
    }
}

/// An error a subcommand reports to the user: one line, saying what and where (without the
/// `dvcq <subcommand>: ` that `main` puts before it).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CliError(pub String);
