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
const LAYERS: [&[&str]; 10] = [
    // The vocabulary: work requests, regions' memory, a CQ's identity.
    &["verbs", "id"],
    // rdma-core: bindings, loader, handles, the private layouts' readers.
    &["sys"],
    &["error"],
    &["model_device"],
    &["backend"],
    // What a device says of itself; the completion channel a CQ is bound to.
    &["device", "channel"],
    // An open device, its PDs and regions.
    &["context"],
    // CQs, made on a context (`Context::create_cq` lives in cq/).
    &["cq"],
    // QPs, SRQs, XRC and memory windows, made with the CQs they complete into.
    &["qp"],
    // Waiting for events; the ring images.
    &["event", "image"],
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

/// One import of a top-level module by another: who, whom, and where (`file:line`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Edge {
    from: String,
    to: String,
    at: String,
}

/// The ranges of the inline `mod name { ... }` blocks of a file (comments blanked), so that a
/// `super::` inside one climbs one module less than its file's depth says.
fn inline_mod_ranges(code: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(i) = code[from..].find("mod ") {
        let at = from + i;
        from = at + 4;
        if code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[from..];
        let name_len = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').count();
        let after = rest[name_len..].trim_start();
        if name_len == 0 || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0usize;
        for (j, &b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        ranges.push((open, j));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    ranges
}

/// Every top-level module that `code` (the text of `file`, in top-level module `module`,
/// `depth` modules below the crate root) names: through `crate::` (paths and `{...}` groups,
/// a root re-export such as `crate::Cq` counting as the module `lib.rs` takes it from) and
/// through `super::` paths that climb out of the module (`super::super::x` from
/// `src/a/b.rs`).
fn edges_of(module: &str, file: &str, depth: usize, code: &str, reexports: &[(String, String)]) -> Vec<Edge> {
    let target = |name: &str| reexports.iter().find(|(n, _)| n == name).map_or(name.to_string(), |(_, m)| m.clone());
    let mut edges: Vec<Edge> = crate_paths(code)
        .into_iter()
        .map(|(line, name)| Edge { from: module.into(), to: target(&name), at: format!("{file}:{line}") })
        .collect();
    let inline = inline_mod_ranges(code);
    let mut rest = 0;
    while let Some(i) = code[rest..].find("super::") {
        let at = rest + i;
        if code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            rest = at + "super::".len();
            continue;
        }
        let mut supers = 0;
        let mut end = at;
        while code[end..].starts_with("super::") {
            supers += 1;
            end += "super::".len();
        }
        rest = end;
        let here = depth + inline.iter().filter(|(a, b)| *a < at && at < *b).count();
        if supers >= here {
            let line = code[..at].matches('\n').count() + 1;
            push_name_or_group(&mut edges, module, &format!("{file}:{line}"), &code[end..], &target);
        }
    }
    edges.retain(|e| e.from != e.to);
    edges
}

/// The names at the crate root that a `super::` path reaching it takes: one name, or each of
/// a `{...}` group.
fn push_name_or_group(edges: &mut Vec<Edge>, module: &str, at: &str, after: &str, target: &dyn Fn(&str) -> String) {
    let names: Vec<String> = match after.strip_prefix('{') {
        Some(group) => {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            group.split(',').map(|n| n.trim().split("::").next().unwrap_or("").to_string()).collect()
        }
        None => vec![after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()],
    };
    for name in names.into_iter().filter(|n| !n.is_empty()) {
        edges.push(Edge { from: module.into(), to: target(&name), at: at.into() });
    }
}

/// The import graph of the library's top-level modules (each directory and file under `src/`
/// but `lib.rs`), read from the sources.
fn module_graph() -> (Vec<String>, Vec<Edge>) {
    let src = root().join("src");
    let reexports = root_reexports();
    let mut modules = Vec::new();
    let mut edges = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&src).expect("src/").map(|e| e.expect("an entry").path()).collect();
    entries.sort();
    for top in entries {
        let stem = top.file_stem().and_then(|s| s.to_str()).expect("a UTF-8 name").to_string();
        let mut files = Vec::new();
        if top.is_dir() {
            rust_files(&top, &mut files);
        } else if top.extension().is_some_and(|x| x == "rs") && stem != "lib" {
            files.push(top.clone());
        } else {
            continue;
        }
        for f in files {
            let rel = f.strip_prefix(&src).expect("under src/");
            // src/a.rs and src/a/mod.rs are `a` (depth 1); src/a/b.rs is `a::b` (depth 2).
            let mut depth = rel.components().count();
            if f.file_name().is_some_and(|n| n == "mod.rs") {
                depth -= 1;
            }
            let shown = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
            let code = code_of(&std::fs::read_to_string(&f).expect("readable source"));
            edges.extend(edges_of(&stem, &shown, depth, &code, &reexports));
        }
        modules.push(stem);
    }
    // Only this crate's modules: the vendor crates' aliases (`crate::mlx5`) are not among them.
    edges.retain(|e| modules.contains(&e.to));
    // Two paths into one module on one line are one import.
    edges.dedup();
    (modules, edges)
}

/// A cycle of `edges`, if there is one: its modules in order, the first repeated at the end.
fn find_cycle(modules: &[String], edges: &[Edge]) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        edges: &[Edge],
        state: &mut std::collections::HashMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        let mut next: Vec<&str> = edges.iter().filter(|e| e.from == m).map(|e| e.to.as_str()).collect();
        next.sort_unstable();
        next.dedup();
        for n in next {
            match state.get(n) {
                Some(1) => {
                    let start = path.iter().position(|p| p == n).expect("on the path");
                    let mut cycle = path[start..].to_vec();
                    cycle.push(n.to_string());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(n, edges, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = std::collections::HashMap::new();
    for m in modules {
        if !state.contains_key(m) {
            if let Some(c) = visit(m, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// Every cycle found, one at a time (each found is broken by removing its edges, so that the
/// next is found too), as a message naming its modules and each import that makes it.
fn cycles_report(modules: &[String], edges: &[Edge]) -> Vec<String> {
    let mut left = edges.to_vec();
    let mut report = Vec::new();
    while let Some(cycle) = find_cycle(modules, &left) {
        let mut text = format!("import cycle: {}", cycle.join(" -> "));
        for pair in cycle.windows(2) {
            for e in left.iter().filter(|e| e.from == pair[0] && e.to == pair[1]) {
                text.push_str(&format!("\n  {} -> {}: {}", e.from, e.to, e.at));
            }
        }
        left.retain(|e| !cycle.windows(2).any(|p| e.from == p[0] && e.to == p[1]));
        report.push(text);
    }
    report
}

#[test]
fn the_library_modules_import_each_other_without_a_cycle() {
    let (modules, edges) = module_graph();
    for m in ["sys", "cq", "context", "event", "device", "backend"] {
        assert!(modules.iter().any(|x| x == m), "module {m} not found among {modules:?}");
    }
    // The graph is read: the API's top imports what it is built on.
    assert!(edges.iter().any(|e| e.from == "cq" && e.to == "backend"), "no cq -> backend edge read: {edges:?}");
    let report = cycles_report(&modules, &edges);
    assert!(report.is_empty(), "the library's modules import each other in a cycle:\n{}", report.join("\n"));
}

#[test]
fn every_module_says_its_layer() {
    let (modules, _) = module_graph();
    let mut missing = Vec::new();
    for m in modules.iter().filter(|m| *m != "stack_tests") {
        let dir = root().join("src").join(m);
        let file = if dir.is_dir() { dir.join("mod.rs") } else { root().join("src").join(format!("{m}.rs")) };
        let text = std::fs::read_to_string(&file).expect("a module's file");
        let doc: String = text.lines().take_while(|l| l.starts_with("//!") || l.is_empty()).collect();
        if !doc.contains("Layer:") {
            missing.push(file.strip_prefix(root()).unwrap_or(&file).display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "module docs that do not say their layer (a `Layer:` paragraph):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_graph_reader_counts_groups_reexports_and_climbing_supers_and_the_cycle_names_each_import() {
    let reexports = vec![("Cq".to_string(), "cq".to_string())];
    let a =
        code_of("use crate::{Cq, error::Error};\nuse super::super::b::X;\nmod tests {\n    use super::super::c;\n}\n");
    let edges = edges_of("a", "src/a/x.rs", 2, &a, &reexports);
    let got: Vec<_> = edges.iter().map(|e| format!("{}->{}@{}", e.from, e.to, e.at)).collect();
    // `super::super` from src/a/x.rs is the crate root; inside `mod tests` it is only `a`.
    assert_eq!(got, ["a->cq@src/a/x.rs:1", "a->error@src/a/x.rs:1", "a->b@src/a/x.rs:2"]);
    let b = code_of("use super::{a::Y, Cq};\n");
    let mut edges = edges;
    edges.extend(edges_of("b", "src/b.rs", 1, &b, &reexports));
    let c = code_of("pub(crate) use crate::b;\n");
    edges.extend(edges_of("cq", "src/cq/mod.rs", 1, &c, &reexports));
    let modules: Vec<String> = ["a", "b", "cq", "error"].map(String::from).to_vec();
    let report = cycles_report(&modules, &edges);
    assert_eq!(report.len(), 2, "{report:?}");
    assert!(report[0].starts_with("import cycle: a -> b -> a"), "{}", report[0]);
    assert!(report[0].contains("a -> b: src/a/x.rs:2") && report[0].contains("b -> a: src/b.rs:1"), "{}", report[0]);
    assert!(report[1].contains("cq -> b: src/cq/mod.rs:1"), "{}", report[1]);
    // Without the edges that close them, no cycle is left.
    edges.retain(|e| e.to != "a" && e.from != "cq");
    assert!(cycles_report(&modules, &edges).is_empty());
}

/// Every `pub fn` of the library and the crates below it whose result is `Result<_, String>`,
/// as `file:line: signature`. The tools' hooks (`tool_support.rs`) and the test helpers
/// (`provider`'s `testing`, feature `testing`) are not the API and are left out.
fn string_errors_in(dir: &Path, bad: &mut Vec<String>) {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    for f in files {
        let rel = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
        if rel.ends_with("tool_support.rs") || rel.contains("/testing") || rel.contains("stack_tests") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&f).expect("readable source"));
        let mut from = 0;
        while let Some(i) = code[from..].find("pub ") {
            let at = from + i;
            from = at + 4;
            let sig_end = code[at..].find(['{', ';']).map_or(code.len(), |e| at + e);
            let sig = &code[at..sig_end];
            let is_fn =
                ["pub fn ", "pub unsafe fn ", "pub const fn ", "pub async fn "].iter().any(|p| sig.starts_with(p));
            let Some(ret) = sig.split_once("->").map(|(_, r)| r) else { continue };
            if is_fn && ret.contains("Result<") && ret.replace(char::is_whitespace, "").contains(",String>") {
                let line = code[..at].matches('\n').count() + 1;
                bad.push(format!("{rel}:{line}: {}", sig.split_whitespace().collect::<Vec<_>>().join(" ")));
            }
        }
    }
}

/// A program tells errors apart by their type: no public function of the library or of the
/// crates it re-exports returns a bare `String` as its error.
#[test]
fn no_public_function_returns_a_string_error() {
    let mut bad = Vec::new();
    for dir in ["src", "uapi/src", "provider/src", "mlx5-dv/src", "e810-dv/src", "rxe-dv/src"] {
        string_errors_in(&root().join(dir), &mut bad);
    }
    assert!(bad.is_empty(), "public functions with a String error (return a typed error):\n{}", bad.join("\n"));
}
