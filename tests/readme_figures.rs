//! The instruction counts the README prints are the ones the build measures: each figure
//! of its two instruction tables (the backends; compressed CQs) is run again with
//! `dvcq bench poll --callgrind` and must lie within 5% (at least 1.5 instructions) of
//! what the README says. A change that moves the poll path's cost (an inlining decision,
//! a spill in a loop) fails here until the README says what it costs now.
//!
//! Instruction counts depend on the compiler, so the check runs only with the rustc the
//! README names, in an optimized build, with valgrind; otherwise it skips with one line.

mod support;

use std::process::Command;
use support::dvcq;

const README: &str = include_str!("../README.md");

/// The main table's rows: the README's label and the bench arguments that measure it.
const BACKEND_ROWS: [(&str, &[&str]); 7] = [
    ("mlx5 model, 64 B or 128 B", &[]),
    ("mlx5, receives from an SRQ (`--mix send-srq`)", &["--mix", "send-srq"]),
    ("mlx5, two QPs taking turns (`--mix two-qps`)", &["--mix", "two-qps"]),
    ("mlx5, 16 QPs in a scrambled order (`--mix many-qps`)", &["--mix", "many-qps"]),
    ("irdma model, 32 B", &["--vendor", "irdma"]),
    ("irdma, two QPs taking turns (`--mix two-qps`)", &["--vendor", "irdma", "--mix", "two-qps"]),
    ("irdma, 16 QPs in a scrambled order (`--mix many-qps`)", &["--vendor", "irdma", "--mix", "many-qps"]),
];

/// The cells of the README table row whose first cell is `label`, after the label (`None`
/// for an empty cell).
fn readme_row(label: &str) -> Vec<Option<f64>> {
    let line = README
        .lines()
        .find(|l| l.strip_prefix("| ").is_some_and(|r| r.starts_with(&format!("{label} |"))))
        .unwrap_or_else(|| panic!("README has no table row `{label}`"));
    line.trim().trim_matches('|').split('|').skip(1).map(|c| c.trim().parse().ok()).collect()
}

/// The rustc the README's figures were measured with ("... with rustc 1.95.0.").
fn readme_rustc() -> &'static str {
    let at = README.find("with rustc ").expect("README names the rustc of its figures") + "with rustc ".len();
    README[at..].split(|c: char| !(c.is_ascii_digit() || c == '.')).next().unwrap_or("").trim_end_matches('.')
}

/// Why the figures cannot be compared in this build, if they cannot.
fn skip_reason() -> Option<String> {
    if cfg!(debug_assertions) {
        return Some("an unoptimized build (cargo test --release)".into());
    }
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Some("valgrind is not installed".into());
    }
    let want = readme_rustc();
    match built_with() {
        Some(v) if v == want => None,
        v => Some(format!(
            "the README's figures are for rustc {want}, this binary was built by {}",
            v.unwrap_or("?".into())
        )),
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

/// `bench poll --callgrind --json` rows for `args`: (mode, batch, ring, instructions).
fn measure(args: &[&str]) -> Vec<(String, u64, String, f64)> {
    let o = dvcq(&[&["bench", "poll", "--callgrind", "--json"], args].concat(), None);
    assert!(o.status.success(), "bench poll {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON row");
            let s = |k: &str| v[k].as_str().unwrap_or("").to_owned();
            (s("mode"), v["batch"].as_u64().unwrap_or(0), s("ring"), v["instr"].as_f64().unwrap_or(f64::NAN))
        })
        .collect()
}

/// "what: README says X, measured Y" when Y is not within the tolerance of X.
fn compare(what: &str, readme: f64, measured: f64) -> Option<String> {
    let tolerance = (readme * 0.05).max(1.5);
    ((measured - readme).abs() > tolerance || measured.is_nan())
        .then(|| format!("{what}: README says {readme}, measured {measured:.2} (tolerance {tolerance:.1})"))
}

/// Measures `args` and compares each row of the result that `column` places (by mode,
/// batch and ring kind) with that cell of the README row `label`; mismatches go to `wrong`.
fn check_row(label: &str, args: &[&str], column: impl Fn(&str, u64, &str) -> Option<usize>, wrong: &mut Vec<String>) {
    let cells = readme_row(label);
    for (mode, batch, ring, instr) in measure(args) {
        if let Some(Some(readme)) = column(&mode, batch, &ring).and_then(|c| cells.get(c)) {
            let what = format!("{label} {args:?}: {mode} batch {batch} {ring}");
            wrong.extend(compare(what.trim_end(), *readme, instr));
        }
    }
}

/// Runs `check` unless the figures cannot be compared here, then fails on any mismatch.
fn check_table(check: impl FnOnce(&mut Vec<String>)) {
    if let Some(why) = skip_reason() {
        eprintln!("skip: README instruction figures not checked: {why}");
        return;
    }
    let mut wrong = Vec::new();
    check(&mut wrong);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_backend_table_holds_what_the_build_measures() {
    check_table(|wrong| {
        for (label, args) in BACKEND_ROWS {
            let column = |mode: &str, batch, _: &str| match (mode, batch) {
                ("full", 16) => Some(0),
                ("full", 1) => Some(1),
                ("view", _) => Some(2),
                ("empty", _) => Some(3),
                _ => None,
            };
            check_row(label, args, column, wrong);
        }
    });
}

#[test]
fn the_compression_table_holds_what_the_build_measures() {
    check_table(|wrong| {
        for (label, mix) in [("receives", "recv"), ("sends", "send")] {
            // Columns: no compression, sessions basic, sessions enhanced, regular basic,
            // regular enhanced.
            for (layout, offset) in [("basic", 0), ("enhanced", 1)] {
                let column = |mode: &str, batch, ring: &str| match (mode, batch, ring) {
                    ("full", 16, "uncompressed") => Some(0),
                    ("full", 16, "sessions") => Some(1 + offset),
                    ("full", 16, "regular") => Some(3 + offset),
                    _ => None,
                };
                check_row(label, &["--mix", mix, "--compression", layout], column, wrong);
            }
        }
    });
}

/// The comparison and the README parsing the two checks rest on.
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
    assert!(readme_rustc().split('.').count() == 3, "{}", readme_rustc());
}
