//! Writes dvcq's `src/sys/bindings.rs` from the installed rdma-core headers:
//! `cargo run -p dvcq-sysgen`. The test of this crate checks the kept file instead.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = root.join(dvcq_sysgen::BINDINGS);
    match dvcq_sysgen::generate() {
        Ok(text) => match std::fs::write(&path, text) {
            Ok(()) => {
                println!("wrote {}", dvcq_sysgen::BINDINGS);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("dvcq-sysgen: writing {}: {e}", path.display());
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("dvcq-sysgen: {e}");
            ExitCode::FAILURE
        }
    }
}
