//! The rxe poll path alone, for an instruction count: fills the kernel-producer model with
//! RDMA WRITE completions and drains them in batches, `LAPS` times, through one
//! `#[inline(never)]` function that `valgrind --tool=callgrind --toggle-collect` can name:
//!
//! ```sh
//! cargo build --release -p dvcq-rxe-dv --features model --example poll_count
//! valgrind --tool=callgrind --toggle-collect='*rxe_poll_lap*' target/release/examples/poll_count
//! ```
//!
//! It prints the completions polled; callgrind's total over that count is the cost per
//! completion (what docs/performance.md quotes for the rxe conversion).

use dvcq_provider::{Completion, CqDriver};
use dvcq_rxe_dv::model::{ModelConfig, RxeModel};
use dvcq_rxe_dv::RxeCq;
use dvcq_uapi::rxe::UverbsWc;

const FILL: u32 = 256;
const BATCH: usize = 16;
const LAPS: u32 = 2000;

#[inline(never)]
fn rxe_poll_lap(cq: &mut RxeCq, out: &mut [Completion]) -> usize {
    let mut total = 0;
    loop {
        let n = cq.poll(out);
        if n == 0 {
            return total;
        }
        total += n;
    }
}

fn main() {
    let mut m = RxeModel::new(ModelConfig::new(FILL)).expect("model");
    let mut cq = m.poller().expect("poller");
    let mut out = [Completion::default(); BATCH];
    let mut total = 0usize;
    let mut sum = 0u64;
    for lap in 0..LAPS {
        for k in 0..FILL {
            let wc = UverbsWc { wr_id: u64::from(lap * FILL + k), opcode: 1, qp_num: 0x11, ..UverbsWc::default() };
            m.push(&wc).expect("push");
        }
        total += rxe_poll_lap(&mut cq, &mut out);
        sum = sum.wrapping_add(out.iter().map(|c| c.wr_id).sum::<u64>());
    }
    println!("{total} completions (checksum {sum})");
}
