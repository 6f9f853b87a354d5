//! What the lab cases (real NICs only; elsewhere each skips with one line) share: finding
//! a device of a provider, and polling a CQ until it returned what a case waits for.

use crate::cq::Cq;
use dvcq_provider::Completion;

/// The first device served by rdma-core's `provider` (`mlx5`, `irdma`), or `None` after
/// printing why `case` is skipped (`what` names the hardware: `mlx5 (ConnectX)`).
pub(super) fn device_of(provider: &str, what: &str, case: &str) -> Option<String> {
    let found = crate::device::list().devices.into_iter().find(|d| d.provider == provider).map(|d| d.name);
    if found.is_none() {
        eprintln!("skip {case}: no {what} device on this machine");
    }
    found
}

/// Polls `cq` until `want` completions arrived or 5 s passed; returns what arrived.
pub(super) fn drain(cq: &mut Cq, want: usize) -> Vec<Completion> {
    let mut got = Vec::new();
    let mut out = [Completion::default(); 16];
    let start = std::time::Instant::now();
    while got.len() < want && start.elapsed() < std::time::Duration::from_secs(5) {
        let n = cq.poll(&mut out);
        got.extend_from_slice(&out[..n]);
    }
    got
}
