//! The poll path allocates nothing: a counting global allocator sees no allocation while
//! the poller drains completions, fault items and a corrupt producer index.

use dvcq_provider::testing::{allocations, CountingAlloc};
use dvcq_provider::{Completion, CqDriver};
use dvcq_rxe_dv::model::{ModelConfig, RxeModel};
use dvcq_uapi::rxe::UverbsWc;

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

#[test]
fn poll_peek_and_update_ci_do_not_allocate() {
    let mut m = RxeModel::new(ModelConfig::new(63)).unwrap();
    let mut cq = m.poller().unwrap();
    for k in 0..40u32 {
        let status = if k % 7 == 6 { 99 } else { k % 3 };
        m.push(&UverbsWc { wr_id: u64::from(k), status, opcode: k % 11, ..UverbsWc::default() }).unwrap();
    }
    let mut out = [Completion::default(); 6];
    let before = allocations();
    let _ = cq.peek();
    let mut total = 0;
    loop {
        let n = cq.poll(&mut out);
        total += n;
        if n == 0 {
            break;
        }
    }
    cq.update_ci();
    m.write_producer_raw(1 << 20);
    let faults = cq.poll(&mut out) + cq.poll(&mut out);
    let after = allocations();
    assert_eq!(after - before, 0, "the poll path allocated");
    assert_eq!((total, faults), (40, 1));
}
