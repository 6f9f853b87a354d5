//! `dvcq run [--mode own|verify|off] -- PROGRAM [ARGS...]`: starts an unmodified verbs
//! program with `libdvcq_preload.so` (docs/preload.md), after checking that the preload can
//! reach it at all.

use super::CliError;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The preload library's file name.
const LIB: &str = "libdvcq_preload.so";
/// Where the library is asked for explicitly.
const LIB_VAR: &str = "DVCQ_PRELOAD_LIB";

/// Arguments of `dvcq run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// own: dvcq polls the program's CQs; verify: the provider polls and dvcq checks every
    /// completion against it; off: the preload stays out (a baseline under the same setup).
    #[arg(long, default_value = "own", value_parser = ["own", "verify", "off"])]
    mode: String,
    /// At exit, one line per CQ on standard error: backend, completions, errors (DVCQ_STATS=1).
    #[arg(long)]
    stats: bool,
    /// The preload library (default: $DVCQ_PRELOAD_LIB, else libdvcq_preload.so next to
    /// dvcq or in ../lib from it).
    #[arg(long, value_name = "FILE")]
    preload: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "PROGRAM")]
    program: Vec<OsString>,
}

impl RunArgs {
    /// Runs the program in place of this process (its exit status is the program's).
    pub fn run(&self) -> Result<ExitCode, CliError> {
        let lib = match &self.preload {
            Some(p) => p.clone(),
            None => find_lib()?,
        };
        if !lib.is_file() {
            return Err(CliError(format!("--preload {}: no such file", lib.display())));
        }
        let lib = lib.canonicalize().map_err(|e| CliError(format!("{}: {e}", lib.display())))?;
        let program = &self.program[0];
        let path = which(Path::new(program))
            .ok_or_else(|| CliError(format!("{}: no such program", Path::new(program).display())))?;
        reachable(&path)?;
        let mut preload = OsString::from(lib.as_os_str());
        if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
            // Libraries already preloaded (an emulated device's) come first.
            preload = [old, preload].join(std::ffi::OsStr::new(" "));
        }
        let mut cmd = Command::new(program);
        cmd.args(&self.program[1..]).env("LD_PRELOAD", preload).env("DVCQ_PRELOAD_MODE", &self.mode);
        if self.stats {
            cmd.env("DVCQ_STATS", "1");
        }
        let e = cmd.exec();
        Err(CliError(format!("{}: {e}", path.display())))
    }
}

/// The preload library from the environment or next to the executable.
fn find_lib() -> Result<PathBuf, CliError> {
    if let Some(p) = std::env::var_os(LIB_VAR).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| CliError(format!("cannot find dvcq's own path: {e}")))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [dir.join(LIB), dir.join("../lib").join(LIB), dir.join("..").join(LIB)];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        CliError(format!(
            "no {LIB} next to {} or in ../lib: build it (cargo build -p dvcq-preload), or name it with --preload or {LIB_VAR}",
            exe.display()
        ))
    })
}

/// `program` as the shell would find it.
fn which(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(program)).find(|p| p.is_file())
}

/// Refuses what `LD_PRELOAD` cannot reach: a set-user-id or set-group-id program (the
/// loader ignores the variable for it) and a static one (no loader at all).
fn reachable(path: &Path) -> Result<(), CliError> {
    let meta = std::fs::metadata(path).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    if meta.permissions().mode() & 0o6000 != 0 {
        return Err(CliError(format!(
            "{}: set-user-id or set-group-id: the dynamic loader ignores LD_PRELOAD for it, so dvcq cannot reach its CQs",
            path.display()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    match elf_interpreter(&bytes) {
        Some(false) => Err(CliError(format!(
            "{}: a static binary (no program interpreter): LD_PRELOAD cannot reach it, so dvcq cannot poll its CQs",
            path.display()
        ))),
        // A script or a dynamic program.
        _ => Ok(()),
    }
}

/// For a 64-bit little-endian ELF file, whether it names a program interpreter
/// (`PT_INTERP`); `None` for anything else (a script, another format).
fn elf_interpreter(b: &[u8]) -> Option<bool> {
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| b.get(o..o + 2).map(|s| u16::from_le_bytes([s[0], s[1]]) as usize);
    let u32_at = |o: usize| b.get(o..o + 4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]));
    let phoff = usize::try_from(u64::from_le_bytes(b[32..40].try_into().ok()?)).ok()?;
    let (phentsize, phnum) = (u16_at(54)?, u16_at(56)?);
    const PT_INTERP: u32 = 3;
    Some((0..phnum).any(|i| u32_at(phoff + i * phentsize) == Some(PT_INTERP)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_program_has_an_interpreter() {
        let sh = std::fs::read("/bin/sh").unwrap();
        assert_eq!(elf_interpreter(&sh), Some(true));
        assert_eq!(elf_interpreter(b"#!/bin/sh\necho\n"), None);
    }

    #[test]
    fn a_static_program_is_refused() {
        // A minimal static ELF header: no program headers at all.
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        assert_eq!(elf_interpreter(&b), Some(false));
        let dir = std::env::temp_dir().join(format!("dvcq-run-static-{}", std::process::id()));
        std::fs::write(&dir, &b).unwrap();
        let e = reachable(&dir).unwrap_err();
        std::fs::remove_file(&dir).unwrap();
        assert!(e.0.contains("a static binary"), "{}", e.0);
    }
}
