//! `dvcq bench scale` end to end: the table with small sizes, the JSON rows, the SVG plot,
//! and one clear error for each bad list.

mod support;

use std::process::Output;
use support::dvcq;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Small points: quick in a debug build.
const SMALL: [&str; 8] = ["--qps", "1,16", "--cqs", "1,4", "--reps", "1", "--entries", "256"];

#[test]
fn the_table_has_a_row_per_point_and_the_target_line() {
    for device in ["model-mlx5", "model-e810"] {
        let mut args = vec!["bench", "scale", "-d", device, "--laps", "2"];
        args.extend(SMALL);
        let o = dvcq(&args, None);
        assert!(o.status.success(), "{device}: {}", stderr(&o));
        let out = stdout(&o);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "-".repeat(104), "{out}");
        assert_eq!(lines[1].trim(), "dvcq scale benchmark", "{out}");
        assert!(lines[6].starts_with(" #axis  #count  #compl/rep  ns/compl[median]"), "{out}");
        let rows: Vec<Vec<&str>> = lines[7..11].iter().map(|l| l.split_whitespace().collect()).collect();
        // irdma keeps a slot of each ring free: a lap is one CQE short per CQ.
        let lap = |cqs: u32| if device == "model-e810" { 256 - cqs } else { 256 };
        for (row, (axis, count, cqs)) in
            rows.iter().zip([("qps", "1", 1), ("qps", "16", 1), ("cqs", "1", 1), ("cqs", "4", 4)])
        {
            assert_eq!((row[0], row[1], row.len()), (axis, count, 10), "{out}");
            assert_eq!(row[2].parse::<u32>().unwrap(), 2 * lap(cqs), "{device}: completions per rep: {out}");
            assert!(row[3].parse::<f64>().unwrap() > 0.0, "{out}");
            assert_eq!((row[5], row[9]), ("-", "-"), "{out}");
            assert!(row[7].parse::<u32>().unwrap() > 0 && row[8].parse::<u32>().unwrap() > 0, "{out}");
        }
        assert_eq!((rows[0][6], rows[2][6]), ("1.00", "1.00"), "each axis' first row is its own unit: {out}");
        assert!(out.contains(" rdma-core: on a device only"), "{out}");
        assert!(out.contains("target (1.5x at 4096 QPs against 1 QP): needs --qps with 1 and 4096"), "{out}");
    }
}

#[test]
fn json_rows_parse_and_the_plot_is_well_formed() {
    let dir = std::env::temp_dir().join(format!("dvcq-bench-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("scale.svg");
    let mut args = vec!["bench", "scale", "--json", "--plot", svg.to_str().unwrap()];
    args.extend(SMALL);
    let o = dvcq(&args, None);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let points: Vec<(&str, u64)> =
        rows.iter().map(|r| (r["axis"].as_str().unwrap(), r["count"].as_u64().unwrap())).collect();
    assert_eq!(points, [("qps", 1), ("qps", 16), ("cqs", 1), ("cqs", 4)]);
    for r in &rows {
        assert_eq!((r["device"].as_str(), r["completions"].as_u64()), (Some("model-mlx5"), Some(16 * 256)), "{r}");
        assert!(r["ns_median"].as_f64().unwrap() > 0.0 && r["ratio"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["memory"]["per_qp"].as_u64().unwrap() > 0 && r["memory"]["per_cq"].as_u64().unwrap() > 0, "{r}");
        assert!(r["rdma_core_ns"].is_null() && r["instr"].is_null(), "{r}");
    }
    let picture = std::fs::read_to_string(&svg).unwrap();
    well_formed(&picture);
    assert_eq!(picture.matches("<circle").count(), 4, "a point per row");
    assert!(picture.contains("target: 1.5x the 1-QP cost"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Checks that `xml` is one element whose tags nest and close, whose attribute values are
/// quoted, and whose text has no bare `<` or `&`.
fn well_formed(xml: &str) {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = xml.trim();
    let mut roots = 0;
    while !rest.is_empty() {
        let Some(start) = rest.find('<') else {
            assert!(stack.is_empty(), "text after the root: {rest}");
            break;
        };
        let text = &rest[..start];
        for (i, _) in text.match_indices('&') {
            let ent = &text[i..];
            assert!(["&amp;", "&lt;", "&gt;", "&quot;"].iter().any(|e| ent.starts_with(e)), "bare & in {text}");
        }
        let end = rest[start..].find('>').expect("an unclosed tag") + start;
        let tag = &rest[start + 1..end];
        assert!(!tag.contains('<'), "< inside a tag: {tag}");
        assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes: {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name.trim()), "mismatched close tag {tag}");
        } else if !tag.ends_with('/') {
            if stack.is_empty() {
                roots += 1;
            }
            stack.push(tag.split_whitespace().next().unwrap());
        } else if stack.is_empty() {
            roots += 1;
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    assert_eq!(roots, 1, "one root element");
    assert!(xml.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
}

#[test]
fn bad_lists_get_a_clear_error() {
    for (args, want) in [
        (&["--qps", "0"][..], "--qps 0: a CQ is shared by 1 to 65536 QPs here"),
        (&["--qps", "100000"], "--qps 100000: a CQ is shared by 1 to 65536 QPs here"),
        (&["--qps", ""], "--qps '': give a comma-separated list of QP counts"),
        (&["--cqs", "4,many"], "--cqs 4,many: 'many' is not a CQ count"),
        (&["--cqs", "0"], "--cqs 0: one thread polls 1 to 1024 CQs here"),
        // A list for the axis not run is checked all the same.
        (&["--axis", "cqs", "--qps", "0"], "--qps 0: "),
        (&["--plot", "/nonexistent-dir/x.svg"], "--plot /nonexistent-dir/x.svg: "),
    ] {
        let o = dvcq(&[&["bench", "scale"][..], args].concat(), None);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(stdout(&o).is_empty(), "{args:?}: nothing measured before the error");
    }
    let o = dvcq(&["bench", "scale", "-d", "mlx4"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("model-mlx5"), "the choices are named: {}", stderr(&o));
}
