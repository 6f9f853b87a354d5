//! Per-completion cost probe for callgrind, compressed against uncompressed:
//! `compressed_cost <none|basic|enhanced> <recv|send> <laps> [batch] [prepare]`.
//!
//! Each lap pushes [`compress::bench_lap`] (4096 completions that compress completely) into
//! an overrun-ignore model, then drains it in batches (default 16). With `prepare` the
//! laps are only written, never polled: run both under `valgrind --tool=callgrind` and
//! divide the difference of the instruction totals by `laps * 4096`.

use dvcq_mlx5_dv::model::compress::{self, Compression, Policy};
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig};
use dvcq_mlx5_dv::{CompLayout, CqConfig, MiniFormat, QpConfig, Registry};
use dvcq_provider::Completion;
use std::hint::black_box;

const ENTRIES: u32 = 4096;
const QPN: u32 = 0x1c7;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let layout = match args.get(1).map_or("basic", String::as_str) {
        "none" => None,
        "enhanced" => Some(CompLayout::Enhanced),
        _ => Some(CompLayout::Basic),
    };
    let send = args.get(2).is_some_and(|m| m == "send");
    let laps: u32 = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(16);
    let batch: usize = args.get(4).and_then(|v| v.parse().ok()).unwrap_or(16);
    let prepare_only = args.get(5).is_some_and(|m| m == "prepare");
    let mut mc = ModelConfig::new(ENTRIES);
    mc.overrun_ignore = true;
    mc.compression = layout.map(|layout| Compression { layout, format: MiniFormat::Hash, policy: Policy::Always });
    let mut model = Mlx5Model::new(mc).expect("model");
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 1 << 16, 1 << 16)).expect("qp");
    let mut cq = model.poller::<64>(reg, CqConfig::default()).expect("poller");
    let lap = compress::bench_lap(ENTRIES, QPN, send);
    let mut out = vec![Completion::default(); batch.max(1)];
    let mut total = 0u64;
    for _ in 0..laps {
        model.push_all(&lap).expect("push");
        if prepare_only {
            // Keep the ring consistent for the next lap without polling: the device does
            // not care (overrun-ignore), so nothing to do.
            continue;
        }
        total += drain(&mut cq, &mut out) as u64;
    }
    println!("{total} sessions={}", cq.stats().sessions);
}

#[inline(never)]
fn drain(cq: &mut dvcq_mlx5_dv::Mlx5Cq64, out: &mut [Completion]) -> usize {
    let mut n = 0;
    loop {
        let k = cq.poll(black_box(&mut *out));
        if k == 0 {
            return n;
        }
        n += k;
    }
}
