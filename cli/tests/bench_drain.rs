//! `dvcq bench drain` on the models (a real device runs it in the VM test): its rows, its
//! JSON and figure lines, and its refusals.

mod support;

use support::dvcq;

#[test]
fn a_model_has_its_direct_row_only_with_a_time_per_completion() {
    for device in ["model-mlx5", "model-e810"] {
        let o = dvcq(&["bench", "drain", "-d", device, "-n", "64", "--reps", "2", "--json"], None);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["device"], device);
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "a model has no rdma-core poll: {v}");
        assert_eq!((rows[0]["poller"].as_str(), rows[0]["backend"].as_str()), (Some("direct"), Some("model")));
        assert_eq!(rows[0]["completions"], 64);
        let (median, min) =
            (rows[0]["ns_per_completion"].as_f64().unwrap(), rows[0]["ns_per_completion_min"].as_f64().unwrap());
        assert!(min > 0.0 && min <= median, "{v}");
        assert!(rows[0]["ratio_to_ibv_poll_cq"].is_null(), "{v}");
    }
}

#[test]
fn figure_lines_name_the_poller_and_backend() {
    let o = dvcq(&["bench", "drain", "-n", "16", "--reps", "1", "--figure-lines"], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let figure = out.lines().find(|l| l.starts_with("vm-figure ")).unwrap_or_else(|| panic!("{out}"));
    let words: Vec<&str> = figure.split_whitespace().collect();
    assert_eq!((words[1], words[3]), ("drain_direct_model", "ns/completion"), "{out}");
    assert!(words[2].parse::<f64>().unwrap() > 0.0, "{out}");
}

#[test]
fn unknown_devices_and_bad_sizes_are_refused_in_one_line() {
    let o = dvcq(&["bench", "drain", "-d", "mlx5_9"], None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("mlx5_9") && err.contains("model-mlx5"), "names the device and what exists: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    for bad in [["-n", "0"], ["-n", "4097"], ["--batch", "0"], ["--reps", "0"]] {
        let o = dvcq(&["bench", "drain", bad[0], bad[1]], None);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
    }
}
