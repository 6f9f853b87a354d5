//! Compressed CQEs on the emulated ConnectX-6 Dx: a CQ made through rdma-core's real
//! `mlx5dv_create_cq` asking for compression gets its completions in mini-CQE sessions,
//! which dvcq's direct poller expands back to every completion, in order; validate's
//! `mlx5_compression` passes (and skips under `ibv_poll_cq`, which cannot read them).

use crate::emu::in_emulated_child;
use crate::loopback;
use dvcq::uapi::mlx5::rdma_core::Mlx5Layout;
use dvcq::verbs::{SendOp, SendWr};
use dvcq::{BackendChoice, Completion, Context, CqOptions, WcOpcode, WcStatus};
use dvcq_mlx5_dv::MiniFormat;

/// Whether dvcq's direct mlx5 backend has a layout row for the release loaded (a release
/// newer than the table has no direct poller, so no compressed CQ).
fn direct_known() -> bool {
    let release = dvcq::device::rdma_core_release().expect("the release is read from libibverbs' file name");
    Mlx5Layout::for_release(release.major).is_some()
}

#[test]
fn writes_complete_in_sessions_the_direct_poller_expands_in_order() {
    if !in_emulated_child(
        module_path!(),
        "writes_complete_in_sessions_the_direct_poller_expands_in_order",
        "emu-compression",
    ) {
        return;
    }
    let ctx = Context::open("mlx5_0").unwrap();
    let opts = CqOptions { backend: BackendChoice::Direct, ..CqOptions::new(64) }.compressed(MiniFormat::Hash);
    if !direct_known() {
        assert!(ctx.create_cq(opts).is_err(), "a compressed CQ needs the direct poller");
        println!("emu-compression: done");
        return;
    }
    let mut cq = ctx.create_cq(opts).unwrap();
    let (_pd, mr, mut qp) = loopback::rc_to_itself(&ctx, &cq);
    let sg = [mr.slice(0, 8).unwrap()];
    let mut got = Vec::new();
    // Laps of 20 WRITEs posted at once (one doorbell), the ring wrapping across laps.
    for lap in 0..5u64 {
        let wrs: Vec<SendWr> =
            (0..20).map(|i| SendWr::new(lap * 20 + i, SendOp::Write(mr.remote().at(64 + i * 8)), &sg)).collect();
        qp.post_send(&wrs).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut wcs = [Completion::default(); 8];
        while got.len() < ((lap + 1) * 20) as usize && std::time::Instant::now() < deadline {
            let n = cq.poll_count(&mut wcs);
            got.extend(wcs[..n].iter().map(|c| (c.wr_id, c.status, c.opcode)));
        }
    }
    let want: Vec<_> = (0..100).map(|i| (i, WcStatus::Success, WcOpcode::RdmaWrite)).collect();
    assert_eq!(got, want);
    let sessions = cq.stats().compression_sessions.unwrap_or(0);
    assert!(sessions >= 5, "one session a lap at least, {sessions} seen");
    println!("emu-compression: done");
}

#[test]
fn validate_mlx5_compression_passes_on_the_direct_poller() {
    if !in_emulated_child(module_path!(), "validate_mlx5_compression_passes_on_the_direct_poller", "emu-compression") {
        return;
    }
    let ctx = Context::open("mlx5_0").unwrap();
    if direct_known() {
        crate::assert_passes(&ctx, "mlx5_compression", BackendChoice::Auto);
    } else {
        let r = crate::validate(&ctx, "mlx5_compression", BackendChoice::Auto);
        assert!(r.skipped.as_deref().is_some_and(|w| w.contains("layout table")), "{:?}", r.skipped);
    }
    let g = crate::validate(&ctx, "mlx5_compression", BackendChoice::Generic);
    assert!(g.skipped.as_deref().is_some_and(|w| w.contains("ibv_poll_cq cannot read")), "{:?}", g.skipped);
    println!("emu-compression: done");
}
