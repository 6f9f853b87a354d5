//! `dvcq devices --layouts`: the rdma-core release ranges the private-layout tables cover,
//! one `VENDOR FROM-TO` line per range, and the same as JSON `{vendor, from, to}` objects.

use std::process::Command;

fn dvcq(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dvcq")).args(args).output().expect("dvcq runs")
}

#[test]
fn the_ranges_are_listed_one_a_line_and_as_json() {
    let out = dvcq(&["devices", "--layouts"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "mlx5 v44.0-v44.12",
            "mlx5 v45.0-v47.9",
            "mlx5 v48.0-v63.1",
            "mlx5 v64.0-v64.0",
            "irdma v44.0-v47.9",
            "irdma v48.0-v63.1",
            "irdma v64.0-v64.0",
            "rxe v44-v65"
        ]
    );

    let out = dvcq(&["devices", "--layouts", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON list");
    let rows = v.as_array().expect("a list");
    assert_eq!(rows.len(), lines.len());
    for (row, line) in rows.iter().zip(&lines) {
        let (vendor, from, to) = (row["vendor"].as_str(), row["from"].as_str(), row["to"].as_str());
        assert_eq!(format!("{} {}-{}", vendor.unwrap(), from.unwrap(), to.unwrap()), *line, "{row}");
        assert_eq!(row.as_object().unwrap().len(), 3, "only vendor, from, to: {row}");
    }
}
