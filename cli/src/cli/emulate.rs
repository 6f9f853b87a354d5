//! `dvcq emulate [OPTIONS] -- PROGRAM [ARGS...]`: runs any program, dvcq or not, over the
//! emulated devices of the `dvcq-emu` preload (`libdvcq_emu.so`): an emulated ConnectX-6 Dx
//! named `mlx5_0` and an E810 named `irdma0` under the unmodified rdma-core of the host. The program replaces this
//! process (exec), so its exit status, signals and terminal are its own; two programs run
//! this way (each with its own `dvcq emulate`) reach each other's QPs over the emulator's
//! wire.

use super::CliError;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The devices the preload emulates, by name.
pub const EMULATED: &[&str] = &["mlx5_0", "irdma0"];

/// The preload library's file name.
pub const PRELOAD: &str = "libdvcq_emu.so";

/// Arguments of `dvcq emulate`.
#[derive(Debug, clap::Args)]
#[command(trailing_var_arg = true)]
pub struct EmulateArgs {
    /// The emulated devices the program sees (repeatable; all of them without it):
    /// mlx5_0 (a ConnectX-6 Dx), irdma0 (an E810).
    #[arg(short = 'd', long = "device", value_name = "NAME")]
    devices: Vec<String>,
    /// The preload library, instead of the libdvcq_emu.so next to the dvcq binary (or in
    /// ../lib from it).
    #[arg(long, value_name = "PATH")]
    preload: Option<PathBuf>,
    /// The program and its arguments (after --).
    #[arg(required = true, value_name = "PROGRAM [ARGS]...", allow_hyphen_values = true)]
    command: Vec<OsString>,
}

impl EmulateArgs {
    /// Runs the program under the preload; returns only when it could not be started.
    ///
    /// # Errors
    ///
    /// No preload library, an unknown device, or a program the preload cannot reach (not
    /// found, setuid or setgid, statically linked), each in one line.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        for d in &self.devices {
            if !EMULATED.contains(&d.as_str()) {
                return Err(CliError(format!(
                    "--device {d}: not an emulated device (there is: {})",
                    EMULATED.join(", ")
                )));
            }
        }
        let lib = match &self.preload {
            Some(p) if p.is_file() => std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()),
            Some(p) => return Err(CliError(format!("--preload {}: no such file", p.display()))),
            None => find_preload()?,
        };
        let (program, args) = self.command.split_first().ok_or_else(|| CliError("no program to run".into()))?;
        let path = resolve(Path::new(program))
            .ok_or_else(|| CliError(format!("{}: no such program", program.to_string_lossy())))?;
        check_program(&path)?;
        let mut preload = lib.into_os_string();
        if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
            preload.push(":");
            preload.push(old);
        }
        let devices = if self.devices.is_empty() { EMULATED.join(",") } else { self.devices.join(",") };
        let err = std::process::Command::new(&path)
            .arg0(program)
            .args(args)
            .env("LD_PRELOAD", preload)
            .env("DVCQ_EMU_DEVICES", devices)
            .exec();
        Err(CliError(format!("{}: cannot run it: {err}", path.display())))
    }
}

/// The preload next to this binary (a cargo build puts both in `target/<profile>/`), or in
/// `../lib` from it (an installed prefix).
fn find_preload() -> Result<PathBuf, CliError> {
    let exe = std::env::current_exe().map_err(|e| CliError(format!("cannot find the dvcq binary's path: {e}")))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let candidates = [dir.join(PRELOAD), dir.join("../lib").join(PRELOAD)];
    candidates.iter().find(|p| p.is_file()).map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())).ok_or_else(
        || {
            CliError(format!(
                "no {PRELOAD} next to {} (build it with `cargo build -p dvcq-emu` and the same profile as dvcq, \
                 or name it with --preload PATH)",
                exe.display()
            ))
        },
    )
}

/// `program` as the C library's `execvp` would find it: a path with a slash as is, else the
/// first executable of that name on `PATH`.
fn resolve(program: &Path) -> Option<PathBuf> {
    let executable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.as_os_str().to_string_lossy().contains('/') {
        return executable(program).then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| executable(p))
}

/// Refuses what the preload cannot reach: a setuid or setgid program (the loader ignores
/// `LD_PRELOAD`, libibverbs ignores `SYSFS_PATH`) and a statically linked one (no loader,
/// nothing to interpose).
fn check_program(path: &Path) -> Result<(), CliError> {
    let mode = path.metadata().map_err(|e| CliError(format!("{}: {e}", path.display())))?.permissions().mode();
    if mode & 0o6000 != 0 {
        let which = if mode & 0o4000 != 0 { "setuid" } else { "setgid" };
        return Err(CliError(format!(
            "{}: a {which} program: the loader ignores LD_PRELOAD for it, so it cannot see the emulated devices",
            path.display()
        )));
    }
    let head = read_head(path).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    if elf_is_static(&head) == Some(true) {
        return Err(CliError(format!(
            "{}: a statically linked program: it loads no preload library, so it cannot see the emulated devices",
            path.display()
        )));
    }
    Ok(())
}

/// The first 64 KiB of a file (where an ELF file's program headers are).
fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(path)?.take(64 * 1024).read_to_end(&mut head)?;
    Ok(head)
}

/// Whether an ELF image (its first bytes) is statically linked: it has no `PT_INTERP`
/// program header, so no dynamic loader runs for it. `None` for a file that is not a
/// 64-bit little-endian ELF image (a script: its interpreter gets the preload).
pub fn elf_is_static(head: &[u8]) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    if head.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let u16_at = |o: usize| head.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| head.get(o..o + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()));
    let u64_at = |o: usize| head.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    let mut interp = false;
    for i in 0..phnum {
        interp |= u32_at(phoff.checked_add(i.checked_mul(phentsize)?)?)? == PT_INTERP;
    }
    Some(!interp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_program_has_a_loader_and_a_script_is_no_elf() {
        let sh = read_head(Path::new("/bin/sh")).unwrap();
        assert_eq!(elf_is_static(&sh), Some(false));
        assert_eq!(elf_is_static(b"#!/bin/sh\necho\n"), None);
        // The same image with its PT_INTERP header renamed (to PT_NULL) reads as static.
        let mut stat = sh.clone();
        let phoff = u64::from_le_bytes(sh[0x20..0x28].try_into().unwrap()) as usize;
        let (size, n) = (u16::from_le_bytes([sh[0x36], sh[0x37]]) as usize, u16::from_le_bytes([sh[0x38], sh[0x39]]));
        for i in 0..usize::from(n) {
            let at = phoff + i * size;
            if stat[at..at + 4] == 3u32.to_le_bytes() {
                stat[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
            }
        }
        assert_eq!(elf_is_static(&stat), Some(true));
        assert_eq!(elf_is_static(&sh[..0x30]), None, "a cut header is not guessed");
    }
}
