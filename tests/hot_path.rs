//! The poll path as `dvcq bench poll` runs it (batch poll, views and the empty call, for
//! mlx5 and irdma, compression included) has no panic branch, allocation, lock, system call
//! or dynamic dispatch: every function it can reach, followed call by call through the
//! machine code of the optimized binary, calls only dvcq's own functions and the `mem*`
//! routines. A bounds check the compiler cannot prove, an `unwrap`, a `Vec` or a `dyn`
//! call anywhere on that path shows up here as a call outside that set.
//!
//! Needs an optimized build (`cargo test --release`, the README's command) and `objdump`
//! (binutils) on x86_64; otherwise it skips with one line.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Routines the path may call: they copy or fill memory and do nothing else.
const MEMORY_ROUTINES: [&str; 4] = ["memcpy", "memmove", "memset", "memcmp"];

/// A function's calls as objdump shows them: named targets and indirect calls.
#[derive(Default)]
struct Calls {
    named: BTreeSet<String>,
    indirect: Vec<String>,
}

/// The call graph of a disassembly (`objdump -d -C --no-show-raw-insn`). Calls and jumps to
/// the start of another function (tail calls) are edges; jumps inside a function
/// (`<f+0x..>`) and to jump tables are not.
fn call_graph(disassembly: &str) -> BTreeMap<String, Calls> {
    let mut graph: BTreeMap<String, Calls> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in disassembly.lines() {
        if let Some(name) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")).map(|(_, n)| n) {
            current = Some(name.to_owned());
            graph.entry(name.to_owned()).or_default();
            continue;
        }
        let (Some(f), Some((_, insn))) = (&current, line.split_once(":\t")) else {
            continue;
        };
        let mut parts = insn.splitn(2, char::is_whitespace);
        let (mnemonic, operands) = (parts.next().unwrap_or(""), parts.next().unwrap_or("").trim());
        let calls = graph.entry(f.clone()).or_default();
        if mnemonic.starts_with("call") && operands.starts_with('*') {
            calls.indirect.push(insn.trim().to_owned());
        } else if mnemonic.starts_with("call") || mnemonic.starts_with('j') {
            let target = operands.split_once(" <").and_then(|(_, t)| t.strip_suffix('>'));
            if let Some(t) = target.filter(|t| !t.contains("+0x")) {
                if t != f {
                    calls.named.insert(t.to_owned());
                }
            }
        }
    }
    graph
}

/// Whether `name` is dvcq's own code (a crate of the workspace, or a drop of its types).
fn is_dvcq(name: &str) -> bool {
    name.starts_with("dvcq") || name.starts_with("<dvcq") || name.contains("<dvcq")
}

fn is_memory_routine(name: &str) -> bool {
    let base = name.split('@').next().unwrap_or(name);
    MEMORY_ROUTINES.contains(&base) || MEMORY_ROUTINES.iter().any(|r| base.starts_with(&format!("__{r}")))
}

/// Every function reachable from `roots` through dvcq's own functions, and each call that
/// leaves that set (other than the memory routines), as "caller -> callee".
fn walk(graph: &BTreeMap<String, Calls>, roots: &[String]) -> (BTreeSet<String>, Vec<String>) {
    let (mut seen, mut bad) = (BTreeSet::new(), Vec::new());
    let mut stack = roots.to_vec();
    while let Some(f) = stack.pop() {
        if !seen.insert(f.clone()) {
            continue;
        }
        let Some(calls) = graph.get(&f) else {
            bad.push(format!("{f}: not found in the disassembly"));
            continue;
        };
        bad.extend(calls.indirect.iter().map(|i| format!("{f} -> indirect call `{i}`")));
        for t in &calls.named {
            if is_dvcq(t) && graph.contains_key(t) {
                stack.push(t.clone());
            } else if !is_memory_routine(t) {
                bad.push(format!("{f} -> {t}"));
            }
        }
    }
    (seen, bad)
}

#[test]
fn the_poll_path_calls_no_panic_allocation_or_dynamic_dispatch() {
    if cfg!(debug_assertions) || !cfg!(target_arch = "x86_64") {
        eprintln!("skip: the poll path's machine code is checked in optimized x86_64 builds (cargo test --release)");
        return;
    }
    let binary = env!("CARGO_BIN_EXE_dvcq");
    let out = match Command::new("objdump").args(["-d", "-C", "--no-show-raw-insn", binary]).output() {
        Ok(o) if o.status.success() => o,
        _ => {
            eprintln!("skip: objdump (binutils) is not installed; the poll path's machine code is not checked");
            return;
        }
    };
    let graph = call_graph(&String::from_utf8_lossy(&out.stdout));
    let roots: Vec<String> = graph
        .keys()
        .filter(|n| {
            ["poll_full", "poll_views", "poll_empty"]
                .iter()
                .any(|m| n.ends_with(&format!(" as dvcq::bench::BenchTarget>::{m}")))
        })
        .cloned()
        .collect();
    // Both vendors' three ways of polling (mlx5 once per CQE size).
    for vendor in ["Mlx5Bench", "IrdmaBench"] {
        assert!(
            roots.iter().filter(|r| r.contains(vendor)).count() >= 3,
            "the bench's poll functions for {vendor} are not in the binary: {roots:?}"
        );
    }
    let (reached, bad) = walk(&graph, &roots);
    // The walk went into the pollers themselves, not only the bench.
    for poller in ["Mlx5Cq", "IrdmaCq", "poll_compressed"] {
        assert!(reached.iter().any(|f| f.contains(poller)), "the walk never reached {poller}: {reached:#?}");
    }
    assert!(bad.is_empty(), "calls that leave the poll path's allowed set:\n{}", bad.join("\n"));
}

/// The walk itself: a panic two calls down and an indirect call are found; jumps inside a
/// function, jump tables and the memory routines are not calls out.
#[test]
fn the_call_graph_walk_finds_what_it_looks_for() {
    let text = "\
0000000000001000 <dvcq_a::poll>:
    1000:\tcall   2000 <dvcq_a::helper>
    1005:\tjne    1010 <dvcq_a::poll+0x10>
    100a:\tcall   3000 <memcpy@plt>
    1010:\tret
0000000000002000 <dvcq_a::helper>:
    2000:\tjmp    4000 <dvcq_a::cold>
0000000000004000 <dvcq_a::cold>:
    4000:\tcall   5000 <core::panicking::panic_bounds_check>
    4005:\tcall   *%rax
0000000000005000 <core::panicking::panic_bounds_check>:
    5000:\tud2
0000000000006000 <dvcq_a::tidy>:
    6000:\tje     6010 <dvcq_a::tidy+0x10>
    6005:\tcall   3000 <memcpy@plt>
    600a:\tjmp    *%rax
    6010:\tret
";
    let graph = call_graph(text);
    let (reached, bad) = walk(&graph, &["dvcq_a::poll".to_owned()]);
    assert_eq!(reached.len(), 3, "{reached:?}");
    assert_eq!(
        bad,
        ["dvcq_a::cold -> indirect call `call   *%rax`", "dvcq_a::cold -> core::panicking::panic_bounds_check"]
    );
    // A jump table (`jmp *`) is a match, not dynamic dispatch.
    let (reached, bad) = walk(&graph, &["dvcq_a::tidy".to_owned()]);
    assert_eq!((reached.len(), bad.len()), (1, 0), "{bad:?}");
}
