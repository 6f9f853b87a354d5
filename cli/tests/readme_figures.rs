//! The instruction counts the performance page (docs/performance.md, linked from the performance page)
//! prints are the ones the build measures: each figure
//! of its two instruction tables (the backends; compressed CQs) is run again with
//! `dvcq bench poll --callgrind` and must lie within 5% (at least 1.5 instructions) of
//! what the performance page says. A change that moves the poll path's cost (an inlining decision,
//! a spill in a loop) fails here until the performance page says what it costs now.
//!
//! The method is checked as well: the bench counts a polling run minus a run that only
//! prepares the same laps, so each figure of both tables (and of the rows the performance page gives
//! in prose) must equal what callgrind counts inside the bench's poll function alone (its
//! inclusive count, collected with `--toggle-collect`, in runs given the arguments the
//! bench reports it gave its own). A baseline that does more or less model work than the
//! polling run moves the difference and fails here, however close the performance page happens to be.
//!
//! # Another rustc: the method only
//!
//! Instruction counts depend on the compiler. The figures are recorded for one rustc, the
//! one the performance page names; built by another, this test checks the method only and says in
//! one line that the figures were not compared. Recording figures per rustc was the other
//! way, not taken: each compiler release would need its own table, measured on the
//! project's machine, to stay true, while the method check needs no record, holds with any
//! rustc, and is what makes the performance page's figures mean what they say. CI runs on the
//! project's machine, with the performance page's rustc, so there the figures are compared; a CI
//! build by another rustc fails instead of skipping, so a toolchain change comes with the
//! figures measured again.
//!
//! # Skips
//!
//! Both checks need an optimized build (`cargo test --release`) and valgrind. Without
//! them the test says so in one line and passes; in CI (`CI=true`), which is meant to run
//! it, it fails.
//!
//! # What this test reads from the performance page
//!
//! The phrase `with rustc X.Y.Z` (the figures' compiler) and the table rows whose first
//! cell is a label below ([`BACKEND_ROWS`], `receives`, `sends`), each followed by its
//! numbers in the column order the `column` functions give. Keep those when the performance page
//! changes, or change them here with it.

#[path = "support/profile.rs"]
mod profile;
#[path = "../../tests/support/skip.rs"]
mod skip;
mod support;

use std::process::Command;
use support::dvcq;

const PAGE: &str = include_str!("../../docs/performance.md");

/// The main table's rows: the performance page's label and the bench arguments that measure it.
const BACKEND_ROWS: [(&str, &[&str]); 10] = [
    ("mlx5 model, 64 B or 128 B", &[]),
    ("mlx5, receives from an SRQ (`--mix send-srq`)", &["--mix", "send-srq"]),
    ("mlx5, receives only (`--mix recv`)", &["--mix", "recv"]),
    ("mlx5, 32-byte inline receives (`--mix recv-inline`)", &["--mix", "recv-inline"]),
    (
        "mlx5, 64-byte inline receives in 128-byte CQEs (`--mix recv-inline --payload 64 --cqe-size 128`)",
        &["--mix", "recv-inline", "--payload", "64", "--cqe-size", "128"],
    ),
    ("mlx5, two QPs taking turns (`--mix two-qps`)", &["--mix", "two-qps"]),
    ("mlx5, 16 QPs in a scrambled order (`--mix many-qps`)", &["--mix", "many-qps"]),
    ("irdma model, 32 B", &["--vendor", "irdma"]),
    ("irdma, two QPs taking turns (`--mix two-qps`)", &["--vendor", "irdma", "--mix", "two-qps"]),
    ("irdma, 16 QPs in a scrambled order (`--mix many-qps`)", &["--vendor", "irdma", "--mix", "many-qps"]),
];

/// The cells of the performance page table row whose first cell is `label`, after the label (`None`
/// for an empty cell). A cell that is neither empty nor a number fails the test, naming it.
fn readme_row(label: &str) -> Vec<Option<f64>> {
    row_cells(PAGE, label).unwrap_or_else(|e| panic!("docs/performance.md: {e}"))
}

/// [`readme_row`] of the table rows in `page`: the cells, or what is wrong with the row.
fn row_cells(page: &str, label: &str) -> Result<Vec<Option<f64>>, String> {
    let line = page
        .lines()
        .find(|l| l.strip_prefix("| ").is_some_and(|r| r.starts_with(&format!("{label} |"))))
        .ok_or_else(|| format!("no table row `{label}`"))?;
    line.trim()
        .trim_matches('|')
        .split('|')
        .skip(1)
        .enumerate()
        .map(|(i, c)| match c.trim() {
            "" => Ok(None),
            text => text
                .parse()
                .map(Some)
                .map_err(|_| format!("row `{label}`, cell {} after the label: {text:?} is not a number", i + 1)),
        })
        .collect()
}

/// The rustc the performance page's figures were measured with ("... with rustc 1.95.0.").
fn readme_rustc() -> &'static str {
    let at =
        PAGE.find("with rustc ").expect("docs/performance.md names the rustc of its figures") + "with rustc ".len();
    PAGE[at..].split(|c: char| !(c.is_ascii_digit() || c == '.')).next().unwrap_or("").trim_end_matches('.')
}

/// Why this build cannot count instructions at all, if it cannot.
fn cannot_measure() -> Option<String> {
    if cfg!(debug_assertions) {
        return Some("an unoptimized build (cargo test --release)".into());
    }
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Some("valgrind is not installed".into());
    }
    None
}

/// Whether this build can count instructions; if not, it skips (in CI: fails), saying why.
fn can_measure() -> bool {
    // Another optimized profile's build (the README's `--profile tests`) is not what the
    // figures are of; CI runs this test in the release profile, where this never skips. (An
    // unoptimized build is below: a skip that fails in CI.)
    if let Some(other) = profile::not_release_profile().filter(|_| !cfg!(debug_assertions)) {
        skip::skip_here(&format!("the bench's instruction figures are not checked: {other}"));
        return false;
    }
    match cannot_measure() {
        Some(why) => {
            skip::skip_check(&format!("the bench's instruction figures are not checked: {why}"));
            false
        }
        None => true,
    }
}

/// Why the figures cannot be compared with the performance page's in this build, if they cannot: it
/// was not built by the rustc they were recorded with.
fn other_rustc() -> Option<String> {
    rustc_mismatch(readme_rustc(), built_with().as_deref())
}

/// "the performance page's figures are for rustc `want`, this binary was built by ..." unless `built`
/// is `want`.
fn rustc_mismatch(want: &str, built: Option<&str>) -> Option<String> {
    match built {
        Some(v) if v == want => None,
        v => Some(format!(
            "the performance page's figures are for rustc {want}, this binary was built by {}",
            v.map_or("a rustc that left no version note".into(), |v| format!("rustc {v}"))
        )),
    }
}

/// After the method was checked: says that the figures were not compared, when they were
/// not (`other_rustc`); in CI, fails.
fn report_uncompared(other_rustc: Option<String>) {
    if let Some(why) = other_rustc {
        skip::skip_check(&format!("performance-page instruction figures not compared (the method was checked): {why}"));
    }
}

/// The rustc version that built the `dvcq` binary, from the note rustc leaves in it
/// ("rustc version 1.95.0 (...)" in the ELF `.comment` section).
fn built_with() -> Option<String> {
    let bytes = std::fs::read(env!("CARGO_BIN_EXE_dvcq")).ok()?;
    let tag = b"rustc version ";
    let at = bytes.windows(tag.len()).position(|w| w == tag)? + tag.len();
    let rest = bytes.get(at..at + 32)?;
    let end = rest.iter().position(|&b| b == b' ' || b == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// Laps and entries of every measurement here: the `--callgrind` runs take at most 8 laps,
/// so the figures are those of the bench's defaults, and the per-repetition CQE count is
/// also the count of the method check's own callgrind run.
const SHAPE: [&str; 4] = ["--laps", "8", "--entries", "4096"];

/// One row of `bench poll --callgrind --json`.
#[derive(Debug)]
struct Measured {
    mode: String,
    batch: u64,
    ring: String,
    /// Instructions per CQE (per call for `empty`).
    instr: f64,
    /// CQEs (or empty calls) in the 8 laps.
    per_rep: u64,
    /// What the bench's callgrind runs were told after `--callgrind-run poll|prep --reps 1`.
    callgrind_args: Vec<String>,
}

/// `bench poll --callgrind --json` rows for `args`.
fn measure(args: &[&str]) -> Vec<Measured> {
    let o = dvcq(&[&["bench", "poll", "--callgrind", "--json"], &SHAPE[..], args].concat(), None);
    assert!(o.status.success(), "bench poll {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON row");
            let s = |k: &str| v[k].as_str().unwrap_or("").to_owned();
            Measured {
                mode: s("mode"),
                batch: v["batch"].as_u64().unwrap_or(0),
                ring: s("ring"),
                instr: v["instr"].as_f64().unwrap_or(f64::NAN),
                per_rep: v["per_rep"].as_u64().unwrap_or(0),
                callgrind_args: v["callgrind_args"]
                    .as_array()
                    .map(|a| a.iter().map(|x| x.as_str().unwrap_or("").to_owned()).collect())
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// What callgrind counts inside the bench target's `function` (inclusive of its callees)
/// in one of the bench's own callgrind runs (`run` is `poll` or `prep`), given the
/// arguments the bench gave it.
fn inclusive(run: &str, function: &str, args: &[String]) -> u64 {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = std::env::temp_dir().join(format!("dvcq-readme-figures-{}-{n}.out", std::process::id()));
    let o = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(format!("--toggle-collect=*BenchTarget>::{function}"))
        .arg(env!("CARGO_BIN_EXE_dvcq"))
        .args(["bench", "poll", "--callgrind-run", run, "--reps", "1"])
        .args(args)
        .output()
        .expect("run valgrind");
    let total = dvcq_cli::cli::bench::callgrind_total(&out);
    let _ = std::fs::remove_file(&out);
    assert!(o.status.success(), "callgrind of {function} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    total.unwrap_or_else(|e| panic!("callgrind of {function} {args:?}: {e}"))
}

/// "label args mode: the bench says X, the poll function alone costs Y" unless the bench's
/// figure for row `m` of `args` is, within a quarter instruction, the inclusive count of
/// the function that row times (for `empty`, that of `poll_empty` less that of the
/// baseline's `noop`), in runs given the very arguments the bench gave its own.
fn check_method(label: &str, args: &[&str], m: &Measured) -> Option<String> {
    let what = format!("{label} {args:?}: {} batch {} {}", m.mode, m.batch, m.ring);
    let what = what.trim_end();
    if m.callgrind_args.is_empty() {
        return Some(format!("{what}: the bench did not say what its callgrind runs were given"));
    }
    let own = match m.mode.as_str() {
        "full" => inclusive("poll", "poll_full", &m.callgrind_args) as f64,
        "view" => inclusive("poll", "poll_views", &m.callgrind_args) as f64,
        "empty" => {
            inclusive("poll", "poll_empty", &m.callgrind_args) as f64
                - inclusive("prep", "noop", &m.callgrind_args) as f64
        }
        other => return Some(format!("{what}: unknown mode {other}")),
    } / m.per_rep.max(1) as f64;
    ((own - m.instr).abs() > 0.25 || m.instr.is_nan())
        .then(|| format!("{what}: the bench says {:.2} per CQE, the poll function alone costs {own:.2}", m.instr))
}

/// "what: the page says X, measured Y" when Y is not within the tolerance of X.
fn compare(what: &str, readme: f64, measured: f64) -> Option<String> {
    let tolerance = (readme * 0.05).max(1.5);
    ((measured - readme).abs() > tolerance || measured.is_nan())
        .then(|| format!("{what}: the page says {readme}, measured {measured:.2} (tolerance {tolerance:.1})"))
}

/// Compares each row of `measured` that `column` places (by mode, batch and ring kind) with
/// that cell of the performance page row `label`; mismatches go to `wrong`.
fn compare_row(
    label: &str,
    args: &[&str],
    measured: &[Measured],
    column: impl Fn(&str, u64, &str) -> Option<usize>,
    wrong: &mut Vec<String>,
) {
    let cells = readme_row(label);
    for m in measured {
        let Some(c) = column(&m.mode, m.batch, &m.ring) else { continue };
        let what = format!("{label} {args:?}: {} batch {} {}", m.mode, m.batch, m.ring);
        match cells.get(c) {
            Some(Some(readme)) => wrong.extend(compare(what.trim_end(), *readme, m.instr)),
            // An empty cell: the page gives no figure there.
            Some(None) => {}
            None => wrong.push(format!("{}: the page's row has no column {}", what.trim_end(), c + 1)),
        }
    }
}

/// Both checks of a table from one measurement of each of its `rows` (page label and
/// bench arguments): the method on every row the bench printed, always; the performance page's
/// figures, in the cells `column` places, when `compare` (the performance page's rustc built this
/// binary).
fn check_table(rows: &[(&str, &[&str])], compare: bool, column: impl Fn(&str, u64, &str) -> Option<usize>) {
    let mut wrong = Vec::new();
    for &(label, args) in rows {
        let measured = measure(args);
        assert!(!measured.is_empty(), "{label} {args:?}: the bench printed no rows");
        wrong.extend(measured.iter().filter_map(|m| check_method(label, args, m)));
        if compare {
            compare_row(label, args, &measured, &column, &mut wrong);
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_backend_table_holds_what_the_build_measures() {
    if !can_measure() {
        return;
    }
    let other = other_rustc();
    check_table(&BACKEND_ROWS, other.is_none(), |mode: &str, batch, _: &str| match (mode, batch) {
        ("full", 16) => Some(0),
        ("full", 1) => Some(1),
        ("view", _) => Some(2),
        ("empty", _) => Some(3),
        _ => None,
    });
    report_uncompared(other);
}

/// The compressed-CQ table: each mix in each layout. Its rows also poll at batch 1 and
/// empty, which the performance page gives in prose only; their method is checked all the same.
#[test]
fn the_compression_table_holds_what_the_build_measures() {
    if !can_measure() {
        return;
    }
    let other = other_rustc();
    for (layout, offset) in [("basic", 0), ("enhanced", 1)] {
        // Columns: no compression, sessions basic, sessions enhanced, regular basic,
        // regular enhanced.
        check_table(
            &[
                ("receives", &["--mix", "recv", "--compression", layout]),
                ("sends", &["--mix", "send", "--compression", layout]),
            ],
            other.is_none(),
            |mode: &str, batch, ring: &str| match (mode, batch, ring) {
                ("full", 16, "uncompressed") => Some(0),
                ("full", 16, "sessions") => Some(1 + offset),
                ("full", 16, "regular") => Some(3 + offset),
                _ => None,
            },
        );
    }
    report_uncompared(other);
}

/// The comparison and the performance page parsing the two checks rest on.
#[test]
fn figures_compare_within_the_tolerance_and_rows_parse() {
    assert!(compare("x", 72.0, 74.0).is_none());
    assert!(compare("x", 72.0, 76.0).is_some());
    assert!(compare("x", 15.0, 16.4).is_none());
    assert!(compare("x", 15.0, 17.0).is_some());
    assert!(compare("x", 15.0, f64::NAN).is_some());
    let mlx5 = readme_row(BACKEND_ROWS[0].0);
    assert_eq!(mlx5.len(), 4);
    assert!(mlx5.iter().all(Option::is_some), "{mlx5:?}");
    let srq = readme_row(BACKEND_ROWS[1].0);
    assert_eq!((srq.len(), srq[2], srq[3]), (4, None, None));
    assert_eq!(readme_row("sends").len(), 5);
    // A cell that does not parse is an error that names it, not a figure left unchecked.
    let page = "| a | 1 | 2.5 | |\n| b | 1 | 7O | 3 |\n| c | 1 | ~4 |\n";
    assert_eq!(row_cells(page, "a"), Ok(vec![Some(1.0), Some(2.5), None]));
    assert_eq!(row_cells(page, "b"), Err("row `b`, cell 2 after the label: \"7O\" is not a number".into()));
    assert_eq!(row_cells(page, "c"), Err("row `c`, cell 2 after the label: \"~4\" is not a number".into()));
    assert_eq!(row_cells(page, "d"), Err("no table row `d`".into()));
    assert!(readme_rustc().split('.').count() == 3, "{}", readme_rustc());
}

/// The figures are compared only with the rustc they were recorded with, and the binary's
/// own note says which built it.
#[test]
fn figures_are_compared_only_with_their_rustc() {
    assert_eq!(rustc_mismatch("1.95.0", Some("1.95.0")), None);
    assert_eq!(
        rustc_mismatch("1.95.0", Some("1.96.1")).as_deref(),
        Some("the performance page's figures are for rustc 1.95.0, this binary was built by rustc 1.96.1")
    );
    assert!(rustc_mismatch("1.95.0", None).is_some());
    let built = built_with().expect("the dvcq binary names the rustc that built it");
    assert_eq!(built.split('.').count(), 3, "{built}");
}
