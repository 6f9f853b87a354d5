//! `dvcq devices` and opening devices by name: the models are always there, unknown names
//! are refused with the names that exist, and the JSON has the fields tools rely on.

use dvcq::{BackendChoice, Context, CqOptions, Error};
use std::process::Command;

fn dvcq(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dvcq")).args(args).output().expect("dvcq runs")
}

#[test]
fn the_json_lists_the_models_with_the_fields_tools_read() {
    let out = dvcq(&["devices", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert!(v.get("rdma_core").is_some(), "rdma_core key (null where rdma-core cannot be loaded)");
    let devices = v["devices"].as_array().expect("devices list");
    for name in ["model-mlx5", "model-e810"] {
        let d = devices.iter().find(|d| d["name"] == name).unwrap_or_else(|| panic!("{name} listed"));
        assert_eq!(d["backend"], "model");
        assert_eq!(d["driver"], "model");
        assert!(!d["reason"].as_str().unwrap().is_empty());
        let ports = d["ports"].as_array().unwrap();
        assert_eq!(ports[0]["state"], "PORT_ACTIVE");
        assert!(d["max_cqe"].as_u64().unwrap() > 1000);
    }
    for d in devices {
        for key in ["name", "driver", "backend", "reason", "ports"] {
            assert!(d.get(key).is_some(), "{key} in {d}");
        }
        let b = d["backend"].as_str().unwrap();
        assert!(["mlx5", "irdma", "rxe", "generic", "model"].contains(&b), "backend {b}");
    }
    let hardware = devices.iter().any(|d| d["backend"] != "model");
    assert_eq!(hardware, v.get("no_hardware").is_none(), "no_hardware says why exactly when no device is listed");
}

#[test]
fn the_table_shows_each_device_and_why_there_is_no_hardware() {
    let out = dvcq(&["devices"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("hca_id:\tmodel-mlx5") && text.contains("hca_id:\tmodel-e810"), "{text}");
    assert!(text.contains("backend:") && text.contains("GID[  0]:"), "{text}");
    assert!(text.contains("rdma-core: "), "{text}");
}

#[test]
fn an_unknown_device_is_refused_with_the_names_that_exist() {
    let out = dvcq(&["devices", "-d", "mlx5_99"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("\"mlx5_99\"") && err.contains("model-mlx5"), "{err}");
    match Context::open("mlx5_99") {
        Err(Error::UnknownDevice { name, available }) => {
            assert_eq!(name, "mlx5_99");
            assert!(available.iter().any(|a| a == "model-e810"), "{available:?}");
        }
        // Where rdma-core cannot be loaded (DVCQ_NO_RDMA_CORE=1 too), it says so, and what
        // to install.
        Err(e @ Error::NoRdmaCore { .. }) => {
            let text = e.to_string();
            assert!(text.contains("\"mlx5_99\"") && text.contains("apt-get install libibverbs1"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_model_refuses_what_it_cannot_give_with_its_limits() {
    let ctx = Context::open("model-mlx5").unwrap();
    let max = ctx.info().unwrap().max_cqe;
    match ctx.create_cq(CqOptions::new(max + 1)) {
        Err(Error::CqDepth { asked, max: m, .. }) => assert_eq!((asked, m), (max + 1, max)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(ctx.create_cq(CqOptions::new(0)), Err(Error::CqDepth { asked: 0, .. })));
    assert!(matches!(
        ctx.create_cq(CqOptions::new(4).comp_vector(1)),
        Err(Error::CompVector { asked: 1, count: 1, .. })
    ));
    let e = ctx.create_cq(CqOptions::new(4).backend(BackendChoice::Generic)).unwrap_err();
    assert!(e.to_string().contains("no rdma-core poll"), "{e}");
    let cq = ctx.create_cq(CqOptions::new(max)).unwrap();
    assert!(cq.depth() >= max);
}

#[test]
fn a_cq_of_one_model_cannot_serve_a_qp_of_another() {
    let a = Context::open("model-mlx5").unwrap();
    let b = Context::open("model-e810").unwrap();
    let cq = b.create_cq(CqOptions::new(8)).unwrap();
    let pd = a.alloc_pd().unwrap();
    let e = pd.create_qp(&dvcq::QpInit::new(dvcq::verbs::QpType::Rc, &cq)).unwrap_err();
    assert!(matches!(e, Error::Mismatch { .. }), "{e}");
}

#[test]
fn validate_reports_every_check_as_json_and_exits_by_the_results() {
    let out = dvcq(&["validate", "-d", "model-e810", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["device"], "model-e810");
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), dvcq_cli::conformance::WORKLOADS.len());
    for c in checks {
        let r = c["result"].as_str().unwrap();
        assert!(["pass", "skip"].contains(&r), "{c}");
        assert!(!c["reason"].as_str().unwrap().is_empty());
    }
    let srq = checks.iter().find(|c| c["name"] == "rc_srq").unwrap();
    assert_eq!(srq["result"], "skip", "the E810 model has no SRQ");
    // Each check that ran reports its CQs: the high-water mark the device's producer count
    // saw, never above the depth, and a suggested depth covering the work in flight.
    let send = checks.iter().find(|c| c["name"] == "rc_send").unwrap();
    let cq = &send["cqs"][0];
    assert_eq!((cq["high_water"].as_u64(), cq["high_water_source"].as_str()), (Some(16), Some("producer")), "{send}");
    assert_eq!((cq["expected_in_flight"].as_u64(), cq["suggested_depth"].as_u64()), (Some(64), Some(80)), "{send}");
    let depth = &checks.iter().find(|c| c["name"] == "cq_depth_1").unwrap()["cqs"];
    assert_eq!(depth.as_array().map(Vec::len), Some(2), "a send CQ and a receive CQ: {depth}");
    let out = dvcq(&["validate", "-d", "model-mlx5", "--only", "nothing-matches"]);
    assert_eq!(out.status.code(), Some(2));
}
