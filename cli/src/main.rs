//! The `dvcq` command-line tool.

fn main() -> std::process::ExitCode {
    dvcq_cli::cli::main()
}
