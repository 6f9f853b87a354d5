//! One CLI: every subcommand that takes a device takes `-d/--device` with the same default,
//! a mistyped name gets "did you mean", `--json` is JSON lines everywhere, long runs show
//! progress on a terminal only, tables line up, help texts are plain text, and the README's
//! commands run.

#[path = "../../emu/tests/support/preload.rs"]
mod preload;
#[path = "../../tests/support/skip.rs"]
mod skip;
mod support;

use std::process::{Command, Output, Stdio};
use support::dvcq;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The default every device-taking subcommand has.
const DEFAULT: &str = "model-mlx5";

/// Each subcommand that takes a device, with arguments that make it quick.
const DEVICE_TAKERS: [&[&str]; 8] = [
    &["validate", "--only", "rc_send_imm"],
    &["stat", "-n", "4"],
    &["bench", "poll", "--mode", "full", "--reps", "1", "--laps", "1", "--entries", "64"],
    &["bench", "drain", "-n", "16", "--reps", "1"],
    &["bench", "events", "-n", "20", "--max-gap-us", "5", "--mode", "busy"],
    &["bench", "cq", "-n", "16", "--laps", "1", "--reps", "1"],
    &["bench", "traffic", "-n", "16", "--reps", "1"],
    &["ring", "export", "--scenario", "laps", "--entries", "32"],
];

/// The subcommand words of `args` (`bench poll`, `stat`).
fn words<'a>(args: &[&'a str]) -> Vec<&'a str> {
    args.iter().take_while(|a| !a.starts_with('-')).copied().collect()
}

#[test]
fn every_device_taking_subcommand_has_d_with_the_same_default() {
    for args in DEVICE_TAKERS {
        let help = dvcq(&[&words(args)[..], &["--help"]].concat(), None);
        let text = stdout(&help);
        // The option's help: its line and the ones under it, up to the next option.
        let at = text.find("  -d, --device <").unwrap_or_else(|| panic!("{args:?}: no -d, --device:\n{text}"));
        let option = text[at + 2..].split("\n  -").next().unwrap_or("");
        assert!(option.contains(&format!("[default: {DEFAULT}]")), "{args:?}: {option}");
        // Without -d it runs, on the default; with -d it takes the other model.
        for device in [None, Some("model-e810")] {
            let with: Vec<&str> = match device {
                Some(d) => [args, &["-d", d][..]].concat(),
                None => args.to_vec(),
            };
            let o = dvcq(&with, None);
            assert_eq!(o.status.code(), Some(0), "{with:?}: {}", stderr(&o));
            let out = stdout(&o);
            let want = device.unwrap_or(DEFAULT);
            // What each prints names the device: by name, as the poll bench's target
            // (`mlx5 model`, `irdma model`), or as the ring image's vendor.
            let named = match words(args).as_slice() {
                ["bench", "poll"] => out.contains(if want == DEFAULT { "mlx5 model" } else { "irdma model" }),
                ["ring", "export"] => out.contains(if want == DEFAULT { "vendor=mlx5" } else { "vendor=irdma" }),
                _ => out.contains(want),
            };
            assert!(named, "{with:?} ran on something else than {want}:\n{out}");
        }
    }
}

#[test]
fn the_models_go_by_their_short_names_and_the_old_vendor_spelling_still_works() {
    for (args, want) in [
        (&["bench", "poll", "-d", "e810"][..], "irdma model"),
        (&["bench", "poll", "-d", "irdma"], "irdma model"),
        (&["bench", "poll", "--vendor", "irdma"], "irdma model"),
        (&["bench", "poll", "-d", "mlx5"], "mlx5 model"),
        (&["bench", "poll", "--device", "model-e810"], "irdma model"),
    ] {
        let quick = ["--mode", "empty", "--reps", "1", "--laps", "1", "--entries", "64"];
        let o = dvcq(&[args, &quick[..]].concat(), None);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).contains(want), "{args:?}: {}", stdout(&o));
    }
    let o = dvcq(&["bench", "events", "--vendor", "irdma", "-n", "10", "--mode", "busy", "--json"], None);
    assert!(stdout(&o).contains("\"device\":\"model-e810\""), "{}", stderr(&o));
}

#[test]
fn a_mistyped_device_gets_did_you_mean_instead_of_install_advice() {
    for (args, meant) in [
        (&["validate", "-d", "model-mlx"][..], "model-mlx5"),
        (&["validate", "-d", "mlx5"], "model-mlx5"),
        (&["stat", "-d", "modle-e810"], "model-e810"),
        (&["stat", "-d", "model-e81O", "-n", "0"], "model-e810"),
        (&["stat", "-d", "modle-e810", "-n", "0"], "model-e810"),
        (&["bench", "drain", "-d", "model-mlx"], "model-mlx5"),
        (&["bench", "events", "-d", "modle-e810"], "model-e810"),
        (&["bench", "traffic", "-d", "model-mlx"], "model-mlx5"),
        (&["bench", "poll", "-d", "model-mlx"], "model-mlx5"),
        (&["bench", "poll", "-d", "modle-e810"], "model-e810"),
        (&["bench", "cq", "-d", "model-e8l0"], "model-e810"),
        (&["ring", "export", "-d", "model-mlx"], "model-mlx5"),
        (&["devices", "-d", "model-mlx"], "model-mlx5"),
    ] {
        let o = dvcq(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(e.contains(&format!("did you mean {meant}?")), "{args:?}: {e}");
        assert!(!e.contains("install"), "{args:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), if e.starts_with("error: ") { 3 } else { 1 }, "{args:?}: {e}");
    }
    // A name like none of them is simply unknown: no guess.
    let o = dvcq(&["validate", "-d", "bnxt_re7"], None);
    assert!(!stderr(&o).contains("did you mean"), "{}", stderr(&o));
}

/// A temporary file holding an mlx5 error-CQE dump, for `decode`.
fn dump_file(tag: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("dvcq-cli-consistency-{}-{tag}.log", std::process::id()));
    let dump = "mlx5: host: got completion with error:\n00000000 00000000 00000000 00000000\n\
                00000000 00000000 00000000 00000000\n00000000 00000000 00000000 00000000\n\
                00000000 00008716 0a001f8e 000027d2\n";
    std::fs::write(&path, dump).unwrap();
    path
}

#[test]
fn json_is_json_lines_everywhere_as_help_says() {
    let help = stdout(&dvcq(&["--help"], None));
    assert!(help.contains("--json prints JSON lines everywhere"), "{help}");
    let log = dump_file("json");
    let log = log.to_str().unwrap();
    let mut runs: Vec<Vec<&str>> = DEVICE_TAKERS
        .iter()
        .filter(|a| words(a) != ["ring", "export"])
        .map(|a| [*a, &["--json"][..]].concat())
        .collect();
    runs.push(vec!["devices", "--json"]);
    runs.push(vec!["devices", "--layouts", "--json"]);
    runs.push(vec!["devices", "-d", "model-e810", "--json"]);
    runs.push(vec!["decode", "--json", log]);
    runs.push(vec!["bench", "decode", "--size", "1", "--json"]);
    for args in runs {
        let o = dvcq(&args, None);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(!out.trim().is_empty(), "{args:?}: no output");
        for line in out.lines() {
            let v: Result<serde_json::Value, _> = serde_json::from_str(line);
            assert!(v.is_ok(), "{args:?}: a line that is not one JSON value: {line:?}\n{out}");
        }
        // Each `--json` help says what it prints is JSON lines.
        let help = stdout(&dvcq(&[&words(&args)[..], &["--help"]].concat(), None));
        let json = help.split("\n      --json").nth(1).unwrap_or("");
        let json = json.split("\n  -").next().unwrap_or("").replace(char::is_whitespace, " ");
        assert!(json.contains("JSON line"), "{args:?}: --json help: {json}");
    }
}

/// Runs `args` with standard error a pseudo-terminal (`script`), returning all the terminal
/// saw; `None` when `script` cannot run here.
fn on_a_terminal(args: &[&str]) -> Option<String> {
    let cmd = std::iter::once(env!("CARGO_BIN_EXE_dvcq")).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
    let o = Command::new("script")
        .args(["-qec", &format!("{cmd} >/dev/null"), "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// At least a second and a half of work: 30000 completions, 50 µs apart on average.
const LONG_RUN: [&str; 7] = ["bench", "events", "-n", "30000", "--max-gap-us", "100", "--mode"];

#[test]
fn a_long_run_shows_progress_on_a_terminal_only() {
    let long = [&LONG_RUN[..], &["busy"]].concat();
    // Standard error a pipe: nothing there.
    let o = dvcq(&long, None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "", "a pipe gets no progress");
    let Some(seen) = on_a_terminal(&long) else {
        skip::skip_check("`script` (util-linux) cannot run here: the progress line on a terminal is not checked");
        return;
    };
    assert!(seen.contains("\r\x1b[Kdvcq bench events: busy (1 of 1), 30000 completions, 1 s"), "{seen:?}");
    assert!(seen.ends_with("\r\x1b[K"), "the line is cleared at the end: {seen:?}");
    // --json: nothing on the terminal either.
    let seen = on_a_terminal(&[&long[..], &["--json"]].concat()).unwrap_or_default();
    assert_eq!(seen, "", "--json gets no progress");
}

#[test]
fn validate_columns_line_up_whatever_a_cell_holds() {
    let o = dvcq(&["validate", "--only", "cq_depth"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().skip(1).take_while(|l| !l.contains(" passed, ")).collect();
    assert!(lines.len() >= 5 && lines.iter().any(|l| l.contains("cq_depth_max")), "{out}");
    // Where each column starts, by characters: the head's `#`s.
    let head: Vec<char> = lines[0].chars().collect();
    let starts: Vec<usize> = (1..head.len()).filter(|&i| head[i] == '#' && head[i - 1] == ' ').collect();
    assert_eq!(starts.len(), 4, "{out}");
    for l in &lines[1..] {
        let c: Vec<char> = l.chars().collect();
        for &s in &starts[1..] {
            assert!(c[s - 1] == ' ' && c[s] != ' ', "column at {s} does not line up in {l:?}:\n{out}");
        }
    }
}

#[test]
fn the_empty_poll_row_reports_calls_not_cqes() {
    let o = dvcq(&["bench", "poll", "--mode", "empty", "--reps", "1", "--laps", "1", "--entries", "64"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let row: Vec<&str> =
        out.lines().find(|l| l.starts_with(" empty*")).unwrap_or_default().split_whitespace().collect();
    // mode, batch, calls, ns[median], ns[min], rate, instr: no CQE rate for an empty poll.
    assert_eq!(row.get(5), Some(&"-"), "{out}");
    let note = out.lines().find(|l| l.starts_with(" empty*:")).unwrap_or_default();
    assert!(note.contains(" ns per call (") && note.contains(" M calls/s;"), "{out}");
}

#[test]
fn help_texts_are_plain_text() {
    let commands: [&[&str]; 15] = [
        &[],
        &["devices"],
        &["validate"],
        &["stat"],
        &["decode"],
        &["ring"],
        &["ring", "decode"],
        &["ring", "export"],
        &["bench"],
        &["bench", "poll"],
        &["bench", "drain"],
        &["bench", "events"],
        &["bench", "decode"],
        &["bench", "cq"],
        &["bench", "traffic"],
    ];
    for c in commands {
        let text = stdout(&dvcq(&[c, &["--help"][..]].concat(), None));
        assert!(!text.is_empty(), "{c:?}");
        assert!(!text.contains("[`") && !text.contains("`]"), "{c:?}: rustdoc link syntax:\n{text}");
    }
    let top = stdout(&dvcq(&["--help"], None));
    let bench = top.lines().find(|l| l.trim_start().starts_with("bench ")).unwrap_or_default();
    assert!(bench.contains("devices"), "bench runs on devices too: {bench}");
}

/// The README's shell commands that run `dvcq`, from its CLI tour and lab-machine sections,
/// each as the pipeline of `dvcq` argument lists it is.
fn readme_commands() -> Vec<Vec<Vec<String>>> {
    let readme = include_str!("../../README.md");
    let mut commands = Vec::new();
    let mut in_sh = false;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        let line = line.split(" # ").next().unwrap_or("").trim();
        if !in_sh || !line.starts_with("dvcq ") {
            continue;
        }
        let pipeline = line
            .split(" | ")
            .flat_map(|p| p.split(" && "))
            .map(|p| p.split_whitespace().skip(1).map(String::from).collect())
            .collect();
        commands.push(pipeline);
    }
    commands
}

/// `args` made quick and runnable here: a model for a real device, no valgrind, a few
/// repetitions, small logs and plots in the temporary directory.
fn quick(args: &[String], log: &str, plot: &str) -> Vec<String> {
    let mut out: Vec<String> = args
        .iter()
        .filter(|a| *a != "--callgrind")
        .map(|a| match a.as_str() {
            "rxe0" | "mlx5_0" => DEFAULT.to_owned(),
            "app.log" => log.to_owned(),
            svg if svg.ends_with(".svg") => plot.to_owned(),
            other => other.to_owned(),
        })
        .collect();
    let more: &[&str] = match (out.first().map(String::as_str), out.get(1).map(String::as_str)) {
        (Some("bench"), Some("poll")) => &["--reps", "1", "--laps", "1", "--entries", "64"],
        (Some("bench"), Some("drain")) => &["-n", "16", "--reps", "1"],
        (Some("bench"), Some("traffic")) => &["-n", "16", "--reps", "1"],
        (Some("bench"), Some("events")) => &["-n", "20", "--max-gap-us", "5"],
        (Some("bench"), Some("scale")) => &["--qps", "1,16", "--cqs", "1,4", "--reps", "1"],
        (Some("validate"), _) => &["--only", "rc_send_imm"],
        (Some("stat"), _) => &["-n", "4"],
        _ => &[],
    };
    out.extend(more.iter().map(|s| (*s).to_owned()));
    out
}

#[test]
fn the_readmes_commands_run() {
    let commands = readme_commands();
    assert!(commands.len() >= 12, "{commands:?}");
    assert!(
        commands.iter().flatten().any(|c| c.join(" ") == "bench poll --callgrind --mix many-qps --batch 1"),
        "the tour's batch-1 run is one of them: {commands:?}"
    );
    // `dvcq emulate` finds the preload next to the binary.
    let _ = preload::preload();
    let log = dump_file("readme");
    let plot = std::env::temp_dir().join(format!("dvcq-cli-consistency-{}.svg", std::process::id()));
    let (log, plot) = (log.to_str().unwrap(), plot.to_str().unwrap());
    for pipeline in &commands {
        let mut input: Option<String> = None;
        for args in pipeline {
            let args = quick(args, log, plot);
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = dvcq(&refs, input.as_deref());
            assert_eq!(
                o.status.code(),
                Some(0),
                "README `dvcq {}` (run as {refs:?}): {}",
                pipeline[0].join(" "),
                stderr(&o)
            );
            input = Some(stdout(&o));
        }
    }
}

#[test]
fn the_readme_names_the_release_ranges_the_layout_tables_cover() {
    let ranges = dvcq_cli::cli::devices::layout_ranges();
    let version = |v: &str| -> Vec<u32> { v.trim_start_matches('v').split('.').map(|n| n.parse().unwrap()).collect() };
    let (lib, rxe): (Vec<_>, Vec<_>) = ranges.iter().partition(|r| r.vendor != "rxe");
    let first = lib.iter().map(|r| &r.from).min_by_key(|v| version(v)).unwrap();
    let last = lib.iter().map(|r| &r.to).max_by_key(|v| version(v)).unwrap();
    let rxe_first = rxe.iter().map(|r| &r.from).min_by_key(|v| version(v)).unwrap();
    let rxe_last = rxe.iter().map(|r| &r.to).max_by_key(|v| version(v)).unwrap();
    let readme = include_str!("../../README.md").replace('\n', " ");
    assert!(readme.contains(&format!("from {first} to {last}")), "the README should say from {first} to {last}");
    assert!(
        readme.contains(&format!("{rxe_first} to {rxe_last}")),
        "the README should say rxe's {rxe_first} to {rxe_last}"
    );
}

#[test]
fn the_glossary_lists_every_backend() {
    use dvcq::BackendKind;
    let glossary = include_str!("../../docs/glossary.md");
    let entry = glossary.split("**backend**").nth(1).and_then(|e| e.split("\n\n").next()).unwrap_or_default();
    for kind in [BackendKind::Mlx5, BackendKind::Irdma, BackendKind::Rxe, BackendKind::Model, BackendKind::Generic] {
        assert!(entry.contains(&format!("`{}`", kind.name())), "{} missing from: {entry}", kind.name());
    }
}

#[test]
fn the_sources_cite_public_sources_not_a_private_spec_folder() {
    // The tools' sources and the library's.
    let mut stack = vec![
        std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src")),
        std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../src")),
    ];
    let mut cites = Vec::new();
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read_to_string(&p).is_ok_and(|t| t.contains("shared/spec")) {
                cites.push(p.display().to_string());
            }
        }
    }
    assert!(cites.is_empty(), "cite rdma-core, the kernel or docs/ instead: {cites:?}");
}

/// The library's crate docs open with the README's first program (the first `rust` block),
/// line for line, so the doctest that runs it is the program the README shows.
#[test]
fn the_crate_docs_open_with_the_readmes_first_program() {
    let readme = include_str!("../../README.md");
    let program = readme.split("```rust\n").nth(1).and_then(|b| b.split("```").next()).expect("a rust block");
    let lib = include_str!("../../src/lib.rs");
    let docs: String = lib
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.strip_prefix("//! ").unwrap_or(l.trim_start_matches("//!")))
        .fold(String::new(), |s, l| s + l + "\n");
    let first = docs.split("```\n").nth(1).expect("a code block in the crate docs");
    assert_eq!(first, program, "the first example of src/lib.rs's crate docs is not the README's first program");
}

/// The library a program adds (`cargo add dvcq`) does not compile the command's crates: they
/// are this crate's dependencies, not the library's.
#[test]
fn the_library_depends_on_none_of_the_commands_crates() {
    let manifest = include_str!("../../Cargo.toml");
    let deps = manifest.split("\n[dependencies]\n").nth(1).and_then(|d| d.split("\n[").next()).expect("[dependencies]");
    for tool in ["clap", "hdrhistogram", "strsim", "serde_json"] {
        assert!(
            !deps.lines().any(|l| l.split(['.', ' ', '=']).next() == Some(tool)),
            "the dvcq library depends on {tool}, which only the command uses"
        );
    }
}
