//! The library's modules import one way: `sys` (rdma-core's bindings and handles, the only
//! FFI) knows nothing above it; the backends know `sys` and the vendor crates; `cq`,
//! `context`, `event` and `device` sit on top. The vendor-neutral and vendor crates declare
//! and call no foreign function. These tests read the sources and name each file and line
//! that breaks a rule.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The file's text with comments blanked (so doc links do not count), lines kept.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every top-level module a file names through `crate::` (`crate::cq::Cq`, and each name of
/// `crate::{cq::Cq, Context}`), with its line.
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut rest = 0;
    while let Some(i) = code[rest..].find("crate::") {
        let at = rest + i;
        rest = at + "crate::".len();
        // `dvcq_crate::` or `$crate::` are not this crate's root.
        if code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let after = &code[rest..];
        if let Some(group) = after.strip_prefix('{') {
            // Top-level names of the group: split at commas outside nested braces.
            let mut depth = 0usize;
            let mut start = 0usize;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        push_name(&mut found, line_of(rest + 1 + start), &group[start..j]);
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        push_name(&mut found, line_of(rest + 1 + start), &group[start..j]);
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            push_name(&mut found, line_of(at), after);
        }
    }
    found
}

fn push_name(found: &mut Vec<(usize, String)>, line: usize, path: &str) {
    let name: String = path.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    if !name.is_empty() {
        found.push((line, name));
    }
}

/// Each `crate::` path of the files under `src/<dir>` whose top-level module `allowed`
/// refuses, as `file:line: crate::name`.
fn violations(dir: &str, allowed: impl Fn(&str) -> bool) -> Vec<String> {
    violations_in(dir, |_| false, allowed)
}

/// [`violations`] over the files under `src/<dir>` that `skip` keeps.
fn violations_in(dir: &str, skip: impl Fn(&Path) -> bool, allowed: impl Fn(&str) -> bool) -> Vec<String> {
    let mut files = Vec::new();
    let top = root().join("src").join(dir);
    if dir.is_empty() {
        // A module that is one file: its file at the top of src/.
        files.extend(
            std::fs::read_dir(&top).expect("src/").map(|e| e.expect("an entry").path()).filter(|p| p.is_file()),
        );
    } else {
        rust_files(&top, &mut files);
    }
    files.retain(|f| !skip(f));
    assert!(!files.is_empty(), "no sources under src/{dir}");
    let mut bad = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
        for (line, name) in crate_paths(&code_of(&text)) {
            if !allowed(&name) {
                let rel = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
                bad.push(format!("{rel}:{line}: crate::{name}"));
            }
        }
    }
    bad
}

/// The vendor crates dvcq re-exports at its root: `crate::mlx5` is `dvcq_mlx5_dv`, not a
/// module of this crate.
const VENDOR_ALIASES: [&str; 4] = ["uapi", "provider", "mlx5", "irdma"];

/// The library's modules, bottom up; a module imports only from its own layer or below.
/// Tools (`cli`, `bench`, ...) and the whole-stack tests sit above them all.
const LAYERS: [&[&str]; 6] = [
    // The vocabulary: work requests, regions' memory, a CQ's identity.
    &["verbs", "id"],
    // rdma-core: bindings, loader, handles, the private layouts' readers.
    &["sys"],
    &["error"],
    &["model_device"],
    &["backend"],
    // The API a program uses, and the ring images.
    &["cq", "context", "event", "device", "image"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// What `crate::Name` (a root re-export) names: the module `lib.rs` takes it from.
fn root_reexports() -> Vec<(String, String)> {
    let lib = code_of(&std::fs::read_to_string(root().join("src/lib.rs")).expect("lib.rs"));
    let mut map = Vec::new();
    for stmt in lib.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else { continue };
        let Some((module, names)) = rest.split_once("::") else { continue };
        for name in names.trim_matches(|c: char| c == '{' || c == '}' || c.is_whitespace()).split(',') {
            let name = name.trim().rsplit("::").next().unwrap_or("").trim().to_string();
            if !name.is_empty() {
                map.push((name, module.trim().to_string()));
            }
        }
    }
    map
}

#[test]
fn every_module_imports_from_its_layer_or_below() {
    let reexports = root_reexports();
    assert!(reexports.iter().any(|(n, m)| n == "Cq" && m == "cq"), "lib.rs re-exports read: {reexports:?}");
    let mut bad = Vec::new();
    for (rank, layer) in LAYERS.iter().enumerate() {
        for module in *layer {
            let dir = if root().join("src").join(module).is_dir() { module.to_string() } else { String::new() };
            let only = format!("{module}.rs");
            let found = violations_in(
                &dir,
                |f| dir.is_empty() && f.file_name().is_some_and(|n| n != only.as_str()),
                |name| {
                    let target = reexports.iter().find(|(n, _)| n == name).map_or(name, |(_, m)| m.as_str());
                    VENDOR_ALIASES.contains(&target) || layer_of(target).is_some_and(|l| l <= rank)
                },
            );
            bad.extend(found);
        }
    }
    assert!(bad.is_empty(), "imports from a layer above:\n{}", bad.join("\n"));
}

#[test]
fn sys_imports_nothing_above_it() {
    // The vocabulary below it (`verbs`: the work requests its posts translate) only.
    let bad = violations("sys", |m| m == "sys" || m == "verbs" || VENDOR_ALIASES.contains(&m));
    assert!(bad.is_empty(), "src/sys reaches above itself:\n{}", bad.join("\n"));
}

#[test]
fn backends_know_sys_and_the_vendor_crates_only() {
    // `error` is the crate's error type, which every layer returns; the models are backends.
    let bad = violations("backend", |m| {
        ["backend", "sys", "error", "model_device"].contains(&m) || VENDOR_ALIASES.contains(&m)
    });
    assert!(bad.is_empty(), "src/backend reaches above itself:\n{}", bad.join("\n"));
}

#[test]
fn the_scanner_finds_paths_and_groups_and_ignores_comments() {
    let code = code_of("use crate::sys::ffi;\n/// [`crate::Cq`]\nuse crate::{cq::{Cq, Poller}, error::Error};\nlet x = $crate::y; // crate::z\n");
    let names: Vec<_> = crate_paths(&code).into_iter().map(|(l, n)| format!("{l}:{n}")).collect();
    assert_eq!(names, ["1:sys", "3:cq", "3:error"]);
}

/// The crates below the library (vendor-neutral core, vendor pollers and models) hold no
/// FFI: no `extern` block and no call into libc; their system calls go through safe APIs.
#[test]
fn lower_crates_declare_and_call_no_foreign_function() {
    let mut bad = Vec::new();
    for krate in ["uapi", "provider", "mlx5-dv", "e810-dv", "rxe-dv"] {
        let mut files = Vec::new();
        rust_files(&root().join(krate).join("src"), &mut files);
        for f in files {
            let code = code_of(&std::fs::read_to_string(&f).expect("readable source"));
            for (i, l) in code.lines().enumerate() {
                if l.contains("libc::") || l.contains("extern \"C\"") || l.trim_start().starts_with("extern {") {
                    let rel = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
                    bad.push(format!("{rel}:{}: {}", i + 1, l.trim()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "FFI outside dvcq's src/sys:\n{}", bad.join("\n"));
}
