//! `dvcq bench traffic` on the models (rxe runs it in the VM test, with all three pollers):
//! its tables and JSON, what each option changes, and its refusals.

#[path = "../../tests/support/skip.rs"]
mod skip;
mod support;

use serde_json::Value;
use support::dvcq;

fn run_json(args: &[&str]) -> Value {
    let o = dvcq(&[&["bench", "traffic", "--json", "--reps", "1"], args].concat(), None);
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn refused(args: &[&str]) -> String {
    let o = dvcq(&[&["bench", "traffic"], args].concat(), None);
    assert_eq!(o.status.code(), Some(2), "{args:?} was not refused");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.stdout.is_empty(), "{args:?} printed {}", String::from_utf8_lossy(&o.stdout));
    // The CLI's one error style: the subcommand named once.
    assert!(!err.contains("bench traffic: bench traffic"), "{args:?}: {err}");
    err
}

#[test]
fn a_model_has_its_direct_row_with_every_figure() {
    for device in ["model-mlx5", "model-e810"] {
        let v = run_json(&["-d", device, "-n", "64"]);
        assert_eq!(v["device"], device);
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "a model has no rdma-core poll: {v}");
        let r = &rows[0];
        assert_eq!((r["poller"].as_str(), r["backend"].as_str()), (Some("direct"), Some("model")), "{v}");
        assert_eq!((r["wrs"].as_u64(), r["completions"].as_u64()), (Some(64), Some(64)), "{v}");
        for key in ["completions_per_s", "ns_per_completion", "t_typical_us", "p99_us", "p99_9_us", "t_min_us"] {
            assert!(r[key].as_f64().is_some_and(|x| x > 0.0), "{key}: {v}");
        }
        let (min, typ, p99, p999, max) = (
            r["t_min_us"].as_f64().unwrap(),
            r["t_typical_us"].as_f64().unwrap(),
            r["p99_us"].as_f64().unwrap(),
            r["p99_9_us"].as_f64().unwrap(),
            r["t_max_us"].as_f64().unwrap(),
        );
        assert!(min <= typ && typ <= p99 && p99 <= p999 && p999 <= max * 1.001, "{v}");
        assert!(r["ratio_to_ibv_poll_cq"].is_null(), "no ibv_poll_cq row to compare with: {v}");
        assert!(r["instructions_per_completion"].is_null(), "{v}");
        assert_eq!(v["skipped"].as_array().map(Vec::len), Some(0), "{v}");
    }
}

#[test]
fn the_table_has_perftest_s_banner_and_latency_layout() {
    let o = dvcq(&["bench", "traffic", "-n", "32", "--reps", "2", "-s", "256"], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("RDMA_Write traffic polled by direct\n"), "{out}");
    assert!(out.contains("\n Device          : model-mlx5 "), "{out}");
    assert!(out.contains(" TX depth        : 128 "), "{out}");
    assert!(out.contains(" Message size    : 256[B] "), "{out}");
    assert!(out.contains(" Iterations      : 32 x 2 reps"), "{out}");
    assert!(
        out.contains(" #poller      #backend  #completions  compl/s[M]  ns/compl[cpu]  ratio_to_ibv_poll_cq"),
        "{out}"
    );
    assert!(
        out.contains(
            "#bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    \
             t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
        ),
        "{out}"
    );
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.first() == Some(&"direct") && w.get(2).is_some_and(|n| n.parse::<u64>().is_ok()))
        .collect();
    assert_eq!(rows.len(), 2, "a throughput row and a latency row: {out}");
    assert_eq!(&rows[0][..3], ["direct", "model", "32"], "{out}");
    // The latency row: its size and its iterations over both repetitions.
    assert_eq!(&rows[1][..3], ["direct", "256", "64"], "{out}");
    assert!(out.contains("add --callgrind for instructions per completion"), "{out}");
}

#[test]
fn selective_signaling_and_sq_sig_all_set_the_completions_per_send() {
    // Ten sends in groups of four: two full groups and a last one of two, each one completion.
    let v = run_json(&["-n", "10", "-Q", "4"]);
    assert_eq!((v["rows"][0]["wrs"].as_u64(), v["rows"][0]["completions"].as_u64()), (Some(10), Some(3)), "{v}");
    assert_eq!(v["signal_every"], 4);
    // A CQ holds what can be outstanding: 128 sends make 32 signaled groups.
    assert_eq!(v["cq_depth"], 63, "32 rounded up as rdma-core's mlx5 rounds a CQ: {v}");
    // --cq-mod is perftest's name for the same option.
    let v = run_json(&["-n", "8", "--cq-mod", "2"]);
    assert_eq!(v["rows"][0]["completions"], 4, "{v}");
    // sq_sig_all: every send completes, none flagged, on both models.
    for device in ["model-mlx5", "model-e810"] {
        let v = run_json(&["-d", device, "--sq-sig-all", "-n", "8"]);
        assert_eq!((v["rows"][0]["wrs"].as_u64(), v["rows"][0]["completions"].as_u64()), (Some(8), Some(8)), "{v}");
    }
}

#[test]
fn send_completes_at_both_ends_on_the_same_cq() {
    for device in ["model-mlx5", "model-e810"] {
        let v = run_json(&["-d", device, "--verb", "send", "-n", "12", "-Q", "3", "-s", "100"]);
        // Four signaled sends and twelve receives.
        assert_eq!(v["rows"][0]["completions"], 16, "{v}");
        assert_eq!((v["verb"].as_str(), v["size"].as_u64()), (Some("send"), Some(100)), "{v}");
    }
}

#[test]
fn qps_share_one_cq_or_get_one_each() {
    let v = run_json(&["-q", "3", "-n", "20", "-t", "16"]);
    assert_eq!((v["cqs"].as_u64(), v["rows"][0]["wrs"].as_u64()), (Some(1), Some(60)), "{v}");
    assert!(v["cq_depth"].as_u64().unwrap() >= 48, "three QPs of 16 outstanding: {v}");
    let v = run_json(&["-q", "3", "-n", "20", "-t", "16", "--cq-per-qp"]);
    assert_eq!((v["cqs"].as_u64(), v["rows"][0]["completions"].as_u64()), (Some(3), Some(60)), "{v}");
    assert!(v["cq_depth"].as_u64().unwrap() >= 16, "{v}");
    let v = run_json(&["-n", "20", "--depth", "1000"]);
    assert!(v["cq_depth"].as_u64().unwrap() >= 1000, "{v}");
    assert_eq!(v["cq_depth_asked"], 1000, "{v}");
}

#[test]
fn the_batch_sets_the_completions_a_poll_call_takes() {
    let one = run_json(&["-n", "64", "--batch", "1"]);
    let many = run_json(&["-n", "64", "--batch", "16"]);
    let calls = |v: &Value| v["rows"][0]["polls_per_completion"].as_f64().unwrap();
    assert!(calls(&one) >= 1.0, "batch 1: a call per completion at least: {one}");
    assert!(calls(&many) < 0.25, "batch 16 on a model that completes at the post: {many}");
}

#[test]
fn event_mode_sleeps_and_moderation_delays_the_event() {
    let busy = run_json(&["-n", "64"]);
    assert_eq!(busy["rows"][0]["events"], 0, "{busy}");
    let ev = run_json(&["-n", "64", "-e"]);
    assert!(ev["rows"][0]["events"].as_u64().unwrap() >= 1, "{ev}");
    assert_eq!(ev["events"], true);
    // An armed CQ holding fewer completions than the count fires when the period runs out,
    // counted from the first completion it held (or, armed over an unpolled one, from the
    // arm): a single work request waits for most of the period.
    let moderated = run_json(&["-n", "16", "-e", "--moderation", "64,300"]);
    let t = moderated["rows"][0]["t_typical_us"].as_f64().unwrap();
    assert!(t >= 150.0, "moderation 64 completions or 300 us: typical {t} us: {moderated}");
    assert_eq!(moderated["moderation"]["period_us"], 300, "{moderated}");
    let e810 = run_json(&["-d", "model-e810", "-n", "16", "-e", "--verb", "send"]);
    assert_eq!(e810["rows"][0]["completions"], 32, "{e810}");
}

#[test]
fn figure_lines_name_each_poller_s_figures() {
    let o = dvcq(&["bench", "traffic", "-n", "16", "--reps", "1", "--figure-lines"], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let figures: Vec<Vec<&str>> =
        out.lines().filter(|l| l.starts_with("vm-figure ")).map(|l| l.split_whitespace().collect()).collect();
    let names: Vec<&str> = figures.iter().map(|f| f[1]).collect();
    assert_eq!(
        names,
        ["traffic_direct_ns_per_completion", "traffic_direct_completions_per_s", "traffic_direct_t_typical"],
        "{out}"
    );
    for f in &figures {
        assert!(f[2].parse::<f64>().is_ok_and(|x| x > 0.0), "{out}");
    }
}

#[test]
fn settings_a_device_or_the_traffic_cannot_have_are_one_line_each() {
    let cases: &[(&[&str], &str)] = &[
        // With rdma-core: no such device; without it: no rdma-core at all. Either names it.
        (&["-d", "mlx5_9"], "\"mlx5_9\""),
        (&["--depth", "8"], "--depth 8: a CQ here must hold the 128 completions"),
        (&["-Q", "200"], "-Q/--signal-every 200: larger than the TX depth (128)"),
        (&["--sq-sig-all", "-Q", "2"], "--sq-sig-all signals every send"),
        (&["-e", "--moderation", "4,0"], "--moderation 4,0 with -e"),
        // The models take a period of at most 4095 us, as mlx5's 12-bit cq_period.
        (&["--moderation", "1,5000"], "cq moderation is not supported: cq_period (us) of 5000"),
        (&["--moderation", "1"], "COUNT,PERIOD_US"),
        (&["-n", "0"], "--iters"),
        (&["--batch", "0"], "--batch"),
        (&["-t", "70000"], "--tx-depth"),
        (&["-s", "0"], "--size"),
        (&["--verb", "read"], "--verb"),
    ];
    for (args, want) in cases {
        let err = refused(args);
        assert!(err.contains(want), "{args:?}: {err}");
        // dvcq's own refusals are one line; clap's add a hint line.
        if !err.starts_with("error:") {
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        }
    }
    // A QP larger than the model's send queue: the model's own words.
    let err = refused(&["-d", "model-e810", "-t", "5000", "-n", "4"]);
    assert!(err.contains("max_send_wr") && err.contains("model-e810"), "{err}");
}

/// Instructions per completion of the poll calls alone (`--toggle-collect`), under
/// valgrind. Skips where valgrind is not installed (in CI, a failure).
#[test]
fn callgrind_counts_the_poll_calls_of_the_run() {
    if std::process::Command::new("valgrind").arg("--version").output().is_err() {
        skip::skip_check("valgrind is not installed; --callgrind not tested");
        return;
    }
    let v = run_json(&["--callgrind", "-n", "64", "-d", "model-e810"]);
    let instr = v["rows"][0]["instructions_per_completion"].as_f64().unwrap_or(f64::NAN);
    // The whole run (posting, the model executing the work) is hundreds of thousands of
    // instructions per completion under valgrind; the poll calls are far fewer. The upper
    // bound is for optimized code; unoptimized, a poll costs many times more.
    let max = if cfg!(debug_assertions) { 20_000.0 } else { 2_000.0 };
    assert!((10.0..max).contains(&instr), "{instr} instructions per completion: {v}");
}
