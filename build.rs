//! Finds rdma-core and generates the bindings of the hardware glue (`src/sys/`).
//!
//! With libibverbs' development files (found by pkg-config) and libclang (for bindgen), this
//! writes `OUT_DIR/verbs.rs` from `infiniband/verbs.h` and `infiniband/mlx5dv.h`, links
//! libibverbs and libmlx5, and sets `cfg(dvcq_rdma_core)`, which turns the glue on. Without
//! them, or with `DVCQ_NO_RDMA_CORE=1`, the crate builds in model-only mode: the models,
//! ring images and tools work, and opening a real device says why it cannot. Either way the
//! build succeeds; a model-only build prints one cargo warning saying why and how to get
//! hardware support. Installing or removing rdma-core or libclang reruns this script
//! (`build/rdma_core.rs` names what the answer depends on).

#[path = "build/rdma_core.rs"]
mod rdma_core;

use std::env;
use std::path::PathBuf;

/// Debian/Ubuntu packages that give a build with hardware support.
const PACKAGES: &str = "libibverbs-dev ibverbs-providers libclang-dev";

/// Every rdma-core function the glue calls. Types are pulled in as these need them, plus
/// the few listed in [`TYPES`].
const FUNCTIONS: &[&str] = &[
    "ibv_get_device_list",
    "ibv_free_device_list",
    "ibv_get_device_name",
    "ibv_get_device_guid",
    "ibv_open_device",
    "ibv_close_device",
    "ibv_query_device",
    "ibv_query_gid",
    "ibv_query_port",
    "ibv_alloc_pd",
    "ibv_dealloc_pd",
    "ibv_reg_mr",
    "ibv_dereg_mr",
    "ibv_create_comp_channel",
    "ibv_destroy_comp_channel",
    "ibv_create_cq",
    "ibv_destroy_cq",
    "ibv_resize_cq",
    "ibv_get_cq_event",
    "ibv_ack_cq_events",
    "ibv_get_async_event",
    "ibv_ack_async_event",
    "ibv_create_qp",
    "ibv_destroy_qp",
    "ibv_modify_qp",
    "ibv_create_srq",
    "ibv_destroy_srq",
    "ibv_create_ah",
    "ibv_destroy_ah",
    "mlx5dv_init_obj",
    "mlx5dv_query_device",
    "mlx5dv_create_cq",
    "mlx5dv_create_qp",
    "mlx5dv_get_clock_info",
];

/// Types the glue names that no listed function mentions: the extended context whose ops
/// the `static inline` verbs calls go through (`ibv_create_cq_ex` among them), the extended
/// CQ whose function pointers `ibv_start_poll` and `ibv_wc_read_*` call, and whose flags
/// (`IBV_WC_EX_WITH_*`) say what it reports, the mlx5 QP that rdma-core providers embed in
/// their private structs, the port attributes `query_port` fills, and the masks of the XRC
/// calls (`ibv_open_xrcd`, `ibv_create_srq_ex`), which are `static inline` too.
const TYPES: &[&str] = &[
    "ibv_event_type",
    "verbs_context",
    "ibv_cq_ex",
    "ibv_port_attr",
    "ibv_wc",
    "ibv_modify_cq_attr",
    "ibv_cq_attr_mask",
    "ibv_send_wr",
    "ibv_recv_wr",
    "ibv_qp_attr_mask",
    "ibv_qp_state",
    "ibv_wr_opcode",
    "ibv_send_flags",
    "ibv_access_flags",
    "ibv_wc_status",
    "ibv_wc_opcode",
    "ibv_wc_flags",
    "ibv_create_cq_wc_flags",
    "ibv_port_state",
    "ibv_mtu",
    "ibv_node_type",
    "ibv_transport_type",
    "ibv_device_cap_flags",
    "mlx5dv_obj_type",
    "mlx5dv_qp_ex",
    "mlx5dv_srq_comp_mask",
    "mlx5_wqe_srq_next_seg",
    "mlx5dv_cq_init_attr_mask",
    "mlx5dv_cq_init_attr_flags",
    "mlx5dv_cqe_comp_res_format",
    "mlx5dv_context_flags",
    "mlx5dv_context_comp_mask",
    "ibv_cq_init_attr_mask",
    "ibv_create_cq_attr_flags",
    "ibv_qp_init_attr_mask",
    "mlx5dv_qp_init_attr_mask",
    "mlx5dv_qp_create_flags",
    "ibv_xrcd_init_attr_mask",
    "ibv_srq_init_attr_mask",
];

/// Constants the glue checks dvcq's own copies against: the mlx5 CQ doorbell's offset in
/// the UAR page and its two commands (anonymous enums in mlx5dv.h).
const VARS: &[&str] = &["MLX5_CQ_DOORBELL", "MLX5_CQ_DB_REQ_NOT", "MLX5_CQ_DB_REQ_NOT_SOL"];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dvcq_rdma_core)");
    println!("cargo::rerun-if-env-changed=DVCQ_NO_RDMA_CORE");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=build/rdma_core.rs");

    if env::var_os("DVCQ_NO_RDMA_CORE").is_some_and(|v| v == "1") {
        model_only("DVCQ_NO_RDMA_CORE=1 is set");
        return;
    }
    let found = match rdma_core::find() {
        Ok(found) => found,
        Err(why) => {
            model_only(&why);
            return;
        }
    };

    let mut builder = bindgen::Builder::default()
        .header_contents("dvcq_rdma.h", "#include <infiniband/verbs.h>\n#include <infiniband/mlx5dv.h>\n")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(true)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for f in FUNCTIONS {
        builder = builder.allowlist_function(f);
    }
    for t in TYPES {
        builder = builder.allowlist_type(t);
    }
    for v in VARS {
        builder = builder.allowlist_var(v);
    }
    for inc in &found.include_paths {
        builder = builder.clang_arg(format!("-I{}", inc.display()));
    }
    let bindings = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.generate())) {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            model_only(&format!("bindgen could not read verbs.h/mlx5dv.h ({})", first_line(&e.to_string())));
            return;
        }
        Err(_) => {
            model_only("bindgen could not load libclang");
            return;
        }
    };
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("verbs.rs");
    bindings.write_to_file(&out).expect("OUT_DIR is writable");
    println!("cargo::rustc-cfg=dvcq_rdma_core");
    println!("cargo::metadata=rdma_core=1");
}

/// Finishes a model-only build: no glue, one warning with the reason and the remedy.
fn model_only(reason: &str) {
    println!("cargo::metadata=rdma_core=0");
    println!(
        "cargo::warning=dvcq: model-only build: {reason}; real RDMA devices need rdma-core's \
         development files and libclang (Debian/Ubuntu: apt-get install {PACKAGES})"
    );
}

/// The first line of an error's text that says something.
fn first_line(s: &str) -> &str {
    s.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("no reason given")
}
