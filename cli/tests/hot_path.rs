//! The poll path as `dvcq bench poll` runs it (batch poll, views and the empty call, for
//! mlx5 and irdma, compression included) has no panic branch, allocation, lock, system call
//! or dynamic dispatch: every function it can reach, followed call by call through the
//! machine code of the optimized binary, calls only dvcq's own functions and the `mem*`
//! routines. A bounds check the compiler cannot prove, an `unwrap`, a `Vec` or a `dyn`
//! call anywhere on that path shows up here as a call outside that set.
//!
//! Needs an optimized build (`cargo test --release`, the README's command) and `objdump`
//! (binutils) on x86_64; otherwise it skips with one line, and in CI (`CI=true`), which is
//! meant to run it, fails.

#[path = "support/profile.rs"]
mod profile;
#[path = "../../tests/support/skip.rs"]
mod skip;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Routines the path may call: they copy or fill memory and do nothing else.
const MEMORY_ROUTINES: [&str; 4] = ["memcpy", "memmove", "memset", "memcmp"];

/// A function's calls as objdump shows them: named targets, and indirect calls and jumps.
#[derive(Default)]
struct Calls {
    named: BTreeSet<String>,
    indirect: Vec<String>,
}

/// The call graph of a disassembly (`objdump -d -C --no-show-raw-insn`). Calls and jumps to
/// the start of another function (tail calls) are edges, and so are calls and jumps through
/// the GOT, which objdump names (`call *0x..(%rip) # <memcpy@GLIBC_2.14>`); jumps inside a
/// function (`<f+0x..>`) are not. Any other `call *` or `jmp *` is indirect (a `dyn` call,
/// a function pointer, an indirect tail call), except a jump through a jump table: see
/// [`is_jump_table`].
fn call_graph(disassembly: &str) -> BTreeMap<String, Calls> {
    let mut graph: BTreeMap<String, Calls> = BTreeMap::new();
    let mut current: Option<String> = None;
    // The current function's instructions so far, for the jump-table check.
    let mut body: Vec<&str> = Vec::new();
    for line in disassembly.lines() {
        if let Some(name) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")).map(|(_, n)| n) {
            current = Some(name.to_owned());
            graph.entry(name.to_owned()).or_default();
            body.clear();
            continue;
        }
        let (Some(f), Some((_, insn))) = (&current, line.split_once(":\t")) else {
            continue;
        };
        let insn = insn.trim();
        // CET's `notrack` and MPX's `bnd` prefixes change nothing here.
        let bare = insn.strip_prefix("notrack ").or_else(|| insn.strip_prefix("bnd ")).unwrap_or(insn);
        let (mnemonic, operands) = split_insn(bare);
        let calls = graph.entry(f.clone()).or_default();
        let branch = mnemonic.starts_with("call") || mnemonic.starts_with('j');
        if branch && operands.starts_with('*') {
            match operands.split_once("(%rip)").and_then(|(_, c)| c.trim().strip_prefix("# ")) {
                // Through the GOT: the comment names the slot's symbol.
                Some(comment) => {
                    let slot = comment.split_once(" <").and_then(|(_, t)| t.strip_suffix('>'));
                    match slot {
                        Some(t) if !t.contains("+0x") && !t.starts_with("_GLOBAL_OFFSET_TABLE_") => {
                            calls.named.insert(t.to_owned());
                        }
                        _ => calls.indirect.push(insn.to_owned()),
                    }
                }
                None if mnemonic.starts_with('j') && is_jump_table(&body, operands) => {}
                None => calls.indirect.push(insn.to_owned()),
            }
        } else if branch {
            let target = operands.split_once(" <").and_then(|(_, t)| t.strip_suffix('>'));
            if let Some(t) = target.filter(|t| !t.contains("+0x")) {
                if t != f {
                    calls.named.insert(t.to_owned());
                }
            }
        }
        body.push(bare);
    }
    graph
}

/// An instruction's mnemonic and operands.
fn split_insn(insn: &str) -> (&str, &str) {
    let mut parts = insn.splitn(2, char::is_whitespace);
    (parts.next().unwrap_or(""), parts.next().unwrap_or("").trim())
}

/// Whether `jmp *%reg` (operands `target`) after the instructions `before` (the function so
/// far) is a `match` through a jump table, which LLVM emits for position-independent code as
/// `movslq (%base,%index,4),%reg` then `add %base,%reg` then the jump, with unrelated moves
/// possibly in between: looking back from the jump, the last write of `%reg` is that `add`,
/// and the write before it is that load from the same base. Anything else (a jump through
/// memory, a register loaded from a vtable or a closure) is an indirect jump, such as an
/// indirect tail call. The look-back stops at calls, returns and unconditional jumps, and
/// after a few instructions.
fn is_jump_table(before: &[&str], target: &str) -> bool {
    let Some(reg) = target.strip_prefix("*%").filter(|r| r.chars().all(|c| c.is_ascii_alphanumeric())) else {
        return false;
    };
    let mut writes =
        before.iter().rev().take(24).map(|i| split_insn(i)).take_while(|(m, _)| {
            !(m.starts_with("call") || m.starts_with("ret") || *m == "jmp" || m.starts_with("ud2"))
        });
    // The instructions of the look-back whose destination (AT&T: the last operand) is `reg`
    // or a part of it.
    let mut writers = std::iter::from_fn(|| writes.find(|(_, ops)| writes_register(ops, reg)));
    let Some(("add", add)) = writers.next() else {
        return false;
    };
    let Some(base) = add.strip_suffix(&format!(",%{reg}")).and_then(|b| b.strip_prefix('%')) else {
        return false;
    };
    matches!(writers.next(), Some(("movslq", load))
        if load.starts_with(&format!("(%{base},")) && load.ends_with(&format!(",4),%{reg}")))
}

/// Whether operands `ops` end in register `reg` or one of its parts (`%eax` of `rax`,
/// `%r8d` of `r8`).
fn writes_register(ops: &str, reg: &str) -> bool {
    ops.rsplit(',').next().and_then(|d| d.trim().strip_prefix('%')).is_some_and(|d| family(d) == family(reg))
}

/// The 64-bit register that `reg` (no `%`) is a part of, as a short name: `a` for rax, eax,
/// ax, al and ah; `si` for rsi, esi, si and sil; `8` for r8, r8d, r8w and r8b.
fn family(reg: &str) -> &str {
    if let Some(n) = reg.strip_prefix('r').filter(|n| n.starts_with(|c: char| c.is_ascii_digit())) {
        return n.trim_end_matches(['d', 'w', 'b']);
    }
    let r = reg.strip_prefix(['r', 'e']).unwrap_or(reg);
    let r = r.strip_suffix('l').filter(|r| r.len() == 2).unwrap_or(r);
    match r.as_bytes() {
        [b'a' | b'b' | b'c' | b'd', b'x' | b'l' | b'h'] => &r[..1],
        _ => r,
    }
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
        bad.extend(calls.indirect.iter().map(|i| format!("{f} -> indirect `{i}`")));
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
        skip::skip_check("the poll path's machine code is checked in optimized x86_64 builds (cargo test --release)");
        return;
    }
    // Another profile's build (the README's `--profile tests`) is not the one checked; CI
    // runs this test in the release profile, where this never skips.
    if let Some(other) = profile::not_release_profile() {
        skip::skip_here(&format!("the poll path's machine code is checked in the release profile's build: {other}"));
        return;
    }
    let binary = env!("CARGO_BIN_EXE_dvcq");
    let out = match Command::new("objdump").args(["-d", "-C", "--no-show-raw-insn", binary]).output() {
        Ok(o) if o.status.success() => o,
        Ok(o) => panic!("objdump -d {binary}: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            skip::skip_check(&format!(
                "objdump (binutils) cannot run ({e}); the poll path's machine code is not checked"
            ));
            return;
        }
    };
    let graph = call_graph(&String::from_utf8_lossy(&out.stdout));
    let roots: Vec<String> = graph
        .keys()
        .filter(|n| {
            ["poll_full", "poll_views", "poll_empty"]
                .iter()
                .any(|m| n.ends_with(&format!(" as dvcq_cli::bench::BenchTarget>::{m}")))
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
    6002:\tlea    0x1234(%rip),%rcx        # 9000 <anon.1>
    6009:\tmovslq (%rcx,%rax,4),%rax
    600d:\tadd    %rcx,%rax
    6010:\tmov    %r10,%r14
    6013:\tmov    %ebx,%edx
    6015:\tnotrack jmp *%rax
    6017:\tcall   *0x1a2b(%rip)        # 8000 <memcpy@GLIBC_2.14>
    601d:\tret
";
    let graph = call_graph(text);
    let (reached, bad) = walk(&graph, &["dvcq_a::poll".to_owned()]);
    assert_eq!(reached.len(), 3, "{reached:?}");
    assert_eq!(bad, ["dvcq_a::cold -> indirect `call   *%rax`", "dvcq_a::cold -> core::panicking::panic_bounds_check"]);
    // A jump table (`jmp *` after the table load and add) is a `match`, not dynamic
    // dispatch, and a call to memcpy through the GOT is a call to memcpy.
    let (reached, bad) = walk(&graph, &["dvcq_a::tidy".to_owned()]);
    assert_eq!((reached.len(), bad.len()), (1, 0), "{bad:?}");
}

/// Indirect jumps that are not a jump table are flagged: an indirect tail call through a
/// register loaded from a vtable or from memory, a jump whose register the table's `add`
/// did not write last, a table load of another base, and a jump through the GOT to a
/// function outside the allowed set.
#[test]
fn indirect_jumps_other_than_jump_tables_are_flagged() {
    let text = "\
0000000000001000 <dvcq_a::vtable_tail_call>:
    1000:\tmov    0x18(%rsi),%rax
    1004:\tjmp    *%rax
0000000000002000 <dvcq_a::memory_tail_call>:
    2000:\tjmp    *0x20(%rdi)
0000000000003000 <dvcq_a::overwritten>:
    3000:\tmovslq (%rcx,%rax,4),%rax
    3004:\tadd    %rcx,%rax
    3007:\tmov    0x8(%rdx),%eax
    300a:\tjmp    *%rax
0000000000004000 <dvcq_a::other_base>:
    4000:\tmovslq (%rdx,%rax,4),%rax
    4004:\tadd    %rcx,%rax
    4007:\tjmp    *%rax
0000000000005000 <dvcq_a::across_a_call>:
    5000:\tmovslq (%rcx,%rax,4),%rax
    5004:\tadd    %rcx,%rax
    5007:\tcall   6000 <dvcq_a::got_free>
    500c:\tjmp    *%rax
0000000000006000 <dvcq_a::got_free>:
    6000:\tjmp    *0x14a1a8(%rip)        # 188528 <free@GLIBC_2.2.5>
";
    let graph = call_graph(text);
    for (f, want) in [
        ("dvcq_a::vtable_tail_call", "dvcq_a::vtable_tail_call -> indirect `jmp    *%rax`"),
        ("dvcq_a::memory_tail_call", "dvcq_a::memory_tail_call -> indirect `jmp    *0x20(%rdi)`"),
        ("dvcq_a::overwritten", "dvcq_a::overwritten -> indirect `jmp    *%rax`"),
        ("dvcq_a::other_base", "dvcq_a::other_base -> indirect `jmp    *%rax`"),
        ("dvcq_a::got_free", "dvcq_a::got_free -> free@GLIBC_2.2.5"),
    ] {
        let (_, bad) = walk(&graph, &[f.to_owned()]);
        assert_eq!(bad, [want], "{f}");
    }
    let (_, bad) = walk(&graph, &["dvcq_a::across_a_call".to_owned()]);
    assert_eq!(
        bad,
        ["dvcq_a::across_a_call -> indirect `jmp    *%rax`", "dvcq_a::got_free -> free@GLIBC_2.2.5"],
        "the walk goes on into the callee"
    );
}

/// Register parts name their 64-bit register.
#[test]
fn register_parts_name_their_register() {
    for (part, full) in [("eax", "rax"), ("al", "rax"), ("ah", "rax"), ("ax", "rax"), ("sil", "rsi"), ("edi", "rdi")] {
        assert_eq!(family(part), family(full), "{part}");
    }
    for (part, full) in [("r8d", "r8"), ("r10w", "r10"), ("r15b", "r15"), ("ebp", "rbp"), ("bpl", "rbp")] {
        assert_eq!(family(part), family(full), "{part}");
    }
    for (a, b) in [("rax", "rbx"), ("r8", "r9"), ("r1", "r10"), ("rsi", "rdi"), ("rsp", "rbp"), ("bl", "rbp")] {
        assert_ne!(family(a), family(b), "{a} {b}");
    }
}
