//! Per-CQE cost probe for callgrind: `poll_cost <mode> <laps> [batch]` drains `laps` laps of
//! the benchmark ring (half SQ SEND, half RQ RECV, 32-byte CQEs). Run it twice with
//! different lap counts under `valgrind --tool=callgrind` and divide the instruction
//! difference by the CQE difference. Modes: `poll`, `views`, `empty`.

use dvcq_e810_dv::model::bench_ring;
use dvcq_provider::Completion;
use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("poll", String::as_str);
    let laps: u32 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(10);
    let batch: usize = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(16);
    let mut b = bench_ring(4095).expect("bench ring");
    let mut out = vec![Completion::default(); batch];
    let mut total = 0u64;
    for _ in 0..laps {
        match mode {
            "empty" => {
                for _ in 0..4096 {
                    total += black_box(b.cq.poll(black_box(&mut out))) as u64;
                }
            }
            "views" => {
                b.refill().expect("refill");
                let mut v = b.cq.views();
                while let Some(x) = v.next() {
                    total += u64::from(black_box(x.wqe_idx()));
                }
            }
            _ => {
                b.refill().expect("refill");
                total += b.drain(&mut out, batch) as u64;
            }
        }
    }
    println!("{total}");
}
