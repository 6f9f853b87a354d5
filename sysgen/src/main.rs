//! Writes what dvcq keeps generated: `src/sys/bindings.rs` from the installed rdma-core
//! headers (no argument), or `capi/include/dvcq.h` from the C API's sources (`header`):
//! `cargo run --manifest-path sysgen/Cargo.toml [-- header]`. The tests of this crate check
//! the kept files instead.

use std::process::ExitCode;

fn main() -> ExitCode {
    let (file, text) = match std::env::args().nth(1).as_deref() {
        None | Some("bindings") => (dvcq_sysgen::BINDINGS, dvcq_sysgen::generate()),
        Some("header") => (dvcq_sysgen::header::HEADER, dvcq_sysgen::header::generate_header()),
        Some(other) => {
            eprintln!("dvcq-sysgen: unknown file {other:?}: say `bindings` (the default) or `header`");
            return ExitCode::from(2);
        }
    };
    let path = dvcq_sysgen::header::repository_root().join(file);
    match text.and_then(|t| std::fs::write(&path, t).map_err(|e| format!("writing {}: {e}", path.display()))) {
        Ok(()) => {
            println!("wrote {file}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dvcq-sysgen: {e}");
            ExitCode::FAILURE
        }
    }
}
