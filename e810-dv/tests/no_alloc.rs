//! The poll path allocates nothing: a counting global allocator sees zero allocations while
//! the poller drains rings of every CQE kind (plain, extended, UD, errors, flushes, faults).

use dvcq_e810_dv::model::{bench_ring, IrdmaModel, ModelConfig, ModelCqe};
use dvcq_e810_dv::{Compat, QpConfig, QpRegistry};
use dvcq_provider::testing::{allocations, CountingAlloc};
use dvcq_provider::Completion;
use dvcq_uapi::irdma::codes::{flush, rq_op, sq_op};
use dvcq_uapi::irdma::HwRev;

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

#[test]
fn poll_peek_and_views_do_not_allocate() {
    let gen = HwRev::Gen2;
    let mut m = IrdmaModel::new(ModelConfig::new(gen, 128)).unwrap();
    let mut qps = QpRegistry::new(gen);
    let id = qps.register(1, QpConfig::rc(5, 64, 64)).unwrap();
    qps.register(2, QpConfig::ud(6, 64, 64)).unwrap();
    let mut cq = m.poller(qps, Compat::Current).unwrap();
    for i in 0..10u64 {
        cq.qps_mut().post_send(id, i, 1, 2, sq_op::RDMA_WRITE).unwrap();
        cq.qps_mut().post_recv(id, i).unwrap();
    }
    let cqes = [
        ModelCqe::send(1, 5, 0, sq_op::RDMA_WRITE),
        ModelCqe::recv(1, 5, 0, 0, rq_op::ROCE_WRITE_ONLY_WITH_IMM, 8).with_imm(3),
        ModelCqe::recv(2, 6, 0, 0, rq_op::ROCE_SEND_ONLY, 8).with_ud(9, true, [1; 6], Some(3)),
        ModelCqe::send(1, 5, 2, sq_op::RDMA_WRITE).with_error(2, 2),
        ModelCqe::send(0x77, 5, 0, sq_op::SEND),
        ModelCqe::flush(1, 5, true, 4, flush::LOC_LEN_ERR),
        ModelCqe::flush_general(1, 5, false, 0),
    ];
    m.push_all(cqes.iter()).unwrap();
    let mut out = [Completion::default(); 4];
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
    let after = allocations();
    assert_eq!(after - before, 0, "poll allocated");
    assert!(total > 10, "{total}");

    let mut b = bench_ring(63).unwrap();
    b.refill().unwrap();
    let mut out = vec![Completion::default(); 16];
    let before = allocations();
    let got = b.drain(&mut out, 16);
    let after = allocations();
    assert_eq!(got, 63);
    assert_eq!(after - before, 0, "bench drain allocated");
}

/// Views walk a full ring, lap after lap (its end, the valid-bit flip, the head published
/// when the walk ends), and allocate nothing; the walk sees every CQE once, in order.
#[test]
fn views_over_full_rings_do_not_allocate() {
    const CQES: u32 = 63;
    const LAPS: u32 = 5;
    let mut b = bench_ring(CQES).unwrap();
    let mut out = [Completion::default(); 4];
    let mut walked = 0u32;
    for lap in 0..LAPS {
        b.refill().unwrap();
        // Positions count two laps of the ring's slots (the valid bit's two values).
        let (entries, start) = (CQES + 1, b.cq.ci());
        let before = allocations();
        let mut seen = 0u32;
        {
            let mut v = b.cq.views();
            while let Some(x) = v.next() {
                let want = (start + seen) % (2 * entries);
                assert_eq!((x.position(), x.error()), (want, false), "lap {lap}, CQE {seen}");
                seen += 1;
            }
        }
        let after = allocations();
        assert_eq!(after - before, 0, "lap {lap}: the walk allocated");
        assert_eq!(seen, CQES, "lap {lap}: a full ring's CQEs, each once");
        assert_eq!(b.cq.poll(&mut out), 0, "lap {lap}: the walk consumed what it showed");
        walked += seen;
    }
    assert_eq!(walked, CQES * LAPS);
}
