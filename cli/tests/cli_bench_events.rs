//! `dvcq bench events` end to end: the table, the JSON rows other tools read, the
//! `vm-figure` lines, the SVG plot, and one clear error for each bad argument.

mod support;

use std::process::Output;
use support::dvcq;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_table_has_a_banner_and_one_row_per_mode() {
    let o = dvcq(&["bench", "events", "-n", "300", "--max-gap-us", "30"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let rule = "-".repeat(98);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], rule, "{out}");
    assert_eq!(lines[1].trim(), "dvcq event-mode latency benchmark", "{out}");
    assert!(lines[2].starts_with(" Device         : model-mlx5 ") && lines[2].ends_with(": 300 per mode"), "{out}");
    assert!(lines[3].contains("0 to 30[usec], uniform") && lines[3].ends_with("Hybrid spin    : 50[usec]"), "{out}");
    assert!(lines[5].starts_with(" #mode    #completions   p50[usec]   p99[usec]   p99.9[usec]"), "{out}");
    let rows: Vec<Vec<&str>> = lines[6..9].iter().map(|l| l.split_whitespace().collect()).collect();
    for (row, mode) in rows.iter().zip(["busy", "events", "hybrid"]) {
        assert_eq!((row[0], row[1], row.len()), (mode, "300", 8), "{out}");
        let v: Vec<f64> = row[2..7].iter().map(|x| x.parse().unwrap()).collect();
        assert!(v[0] <= v[1] && v[1] <= v[2] && v[2] <= v[3], "{mode}: p50 <= p99 <= p99.9 <= max: {out}");
        assert!(v[4] > 0.0, "{mode}: the consumer used CPU: {out}");
    }
    assert_eq!(rows[0][7], "0", "busy polling never sleeps: {out}");
    assert_ne!(rows[1][7], "0", "event mode sleeps: {out}");
    assert_eq!(lines[9], rule, "{out}");
    assert!(lines[10].starts_with(" latency: from the post"), "{out}");
}

#[test]
fn json_has_one_row_per_mode_with_the_documented_keys() {
    let o = dvcq(
        &["bench", "events", "--vendor", "irdma", "-n", "200", "--mode", "events", "--mode", "busy", "--json"],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!((v["device"].as_str(), v["completions"].as_u64()), (Some("model-e810"), Some(200)), "{v}");
    let rows = v["rows"].as_array().unwrap();
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["events", "busy"], "the modes asked for, in order");
    for r in rows {
        for key in ["p50_ns", "p99_ns", "p999_ns", "max_ns", "completions", "sleeps"] {
            assert!(r[key].is_u64(), "{key} in {r}");
        }
        assert!(r["cpu_ns_per_completion"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["completions"], 200, "{r}");
        let p = |k: &str| r[k].as_u64().unwrap();
        assert!(p("p50_ns") > 0 && p("p50_ns") <= p("p99_ns") && p("p99_ns") <= p("p999_ns"), "{r}");
    }
    assert!(rows[0]["sleeps"].as_u64().unwrap() > 0, "event mode slept: {v}");
}

#[test]
fn figure_lines_and_the_plot() {
    let dir = std::env::temp_dir().join(format!("dvcq-bench-events-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("events.svg");
    let o = dvcq(
        &["bench", "events", "-n", "100", "--mode", "hybrid", "--mode", "busy", "--figure-lines", "--plot"]
            .into_iter()
            .chain([svg.to_str().unwrap()])
            .collect::<Vec<_>>(),
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let figures: Vec<(String, f64, String)> = stdout(&o)
        .lines()
        .filter_map(|l| l.strip_prefix("vm-figure "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[0].to_string(), w[1].parse().unwrap(), w[2].to_string())
        })
        .collect();
    let names: Vec<&str> = figures.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "events_hybrid_p50",
            "events_hybrid_p99",
            "events_hybrid_p999",
            "events_hybrid_cpu_per_completion",
            "events_busy_p50",
            "events_busy_p99",
            "events_busy_p999",
            "events_busy_cpu_per_completion",
        ]
    );
    assert!(figures.iter().all(|f| f.1 > 0.0 && f.2 == "us"), "{figures:?}");
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.starts_with("<svg ") && picture.trim_end().ends_with("</svg>"), "{picture}");
    for text in [">hybrid<", ">busy<", ">p99.9<", "model-mlx5: 100 completions per mode"] {
        assert!(picture.contains(text), "{text} in the plot");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_arguments_are_one_clear_line_and_status_2() {
    let ours: [(&[&str], &str); 3] = [
        (&["bench", "events", "-d", "no-such-dev0", "-n", "1"], "no-such-dev0"),
        (&["bench", "events", "-n", "1", "--plot", "/nonexistent-dir/x.svg"], "--plot /nonexistent-dir/x.svg: "),
        (&["bench", "events", "-d", "model-e810", "-n", "1", "--plot", "/"], "--plot /: "),
    ];
    for (args, what) in ours {
        let o = dvcq(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(e.starts_with("dvcq bench events: ") && e.contains(what), "{args:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
        assert!(o.stdout.is_empty(), "{args:?}: nothing measured");
    }
    let usage: [(&[&str], &str); 6] = [
        (&["bench", "events", "-n", "0"], "'0' for '--completions <COMPLETIONS>': 0 is not in 1..=10000000"),
        (&["bench", "events", "--mode", "poll"], "'poll'"),
        (&["bench", "events", "--vendor", "cx7"], "'cx7'"),
        (&["bench", "events", "-d", "rxe0", "--vendor", "irdma"], "cannot be used with"),
        (&["bench", "events", "--max-gap-us", "1000001"], "1000001 is not in 0..=1000000"),
        (&["bench", "events", "--spin-us", "x"], "'x' for '--spin-us <SPIN_US>'"),
    ];
    for (args, what) in usage {
        let o = dvcq(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(e.starts_with("error: ") && e.contains(what), "{args:?}: {e}");
    }
}
