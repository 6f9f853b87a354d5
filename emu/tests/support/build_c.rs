//! A test's C program, compiled against the installed libibverbs, for the tests that run
//! programs on the emulated devices. Included with `#[path]` by tests that also include
//! `tests/support/skip.rs` as `mod skip`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `src` (a `.c` file) compiled into `out_dir`, named after the file; `None` (with a skip)
/// where there is no C compiler or no verbs headers. Compiler errors otherwise fail the test.
pub fn build_c(src: &Path, out_dir: &Path) -> Option<PathBuf> {
    let name = src.file_stem().and_then(|n| n.to_str()).expect("a C file's name");
    std::fs::create_dir_all(out_dir).unwrap();
    let exe = out_dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    match Command::new(&cc).args(["-O1", "-Wall", "-Werror", "-o"]).arg(&exe).arg(src).arg("-libverbs").output() {
        Ok(o) if o.status.success() => Some(exe),
        Ok(o) => {
            let why = String::from_utf8_lossy(&o.stderr);
            if why.contains("infiniband/") || why.contains("-libverbs") {
                super::skip::skip_check(&format!("building {name}.c needs libibverbs-dev (verbs.h, mlx5dv.h): {why}"));
                return None;
            }
            panic!("{name}.c does not build:\n{why}");
        }
        Err(e) => {
            super::skip::skip_check(&format!("no C compiler ({cc}: {e})"));
            None
        }
    }
}
