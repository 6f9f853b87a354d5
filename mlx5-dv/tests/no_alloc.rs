//! The poll path allocates nothing: a counting global allocator around steady-state polls.

use dvcq_mlx5_dv::model::build;
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig};
use dvcq_mlx5_dv::{CqConfig, QpConfig, Registry};
use dvcq_provider::testing::{allocations, CountingAlloc};
use dvcq_provider::Completion;
use dvcq_uapi::mlx5::opcode::{cqe_opcode, syndrome, wqe_opcode};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// The counter these tests read does count: an allocation, a zeroed one and a growth each
/// add one (otherwise every test here would pass whatever the poll path did).
#[test]
fn the_counting_allocator_counts() {
    let before = allocations();
    let boxed = std::hint::black_box(Box::new(7u64));
    let mut zeroed = std::hint::black_box(vec![0u8; 4096]);
    zeroed.reserve(1 << 16);
    std::hint::black_box(&zeroed);
    assert_eq!(allocations() - before, 3);
    drop((boxed, zeroed));
    assert_eq!(allocations() - before, 3, "freeing is not counted");
}

#[test]
fn poll_views_and_peek_do_not_allocate() {
    let mut m = Mlx5Model::new(ModelConfig::new(256)).unwrap();
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(9, 256, 256)).unwrap();
    let mut cq = m.poller::<64>(reg, CqConfig::default()).unwrap();
    let mut buf = [Completion::default(); 16];
    let mut total = 0;
    for round in 0..50u32 {
        for i in 0..200u32 {
            let e = match i % 4 {
                0 => build::req(9, i as u16, wqe_opcode::SEND, 0),
                1 => build::resp(cqe_opcode::RESP_SEND_IMM, 9, i as u16, 64, 5),
                2 => build::err(build::ErrSpec {
                    requester: true,
                    qpn: 9,
                    syndrome: syndrome::WR_FLUSH_ERR,
                    ..Default::default()
                }),
                _ => build::req(0x777, 0, wqe_opcode::SEND, 0), // unknown QP: fault item
            };
            m.push(&e).unwrap();
        }
        let before = allocations();
        let _ = cq.peek();
        let mut got = 0;
        while got < 150 {
            got += cq.poll(&mut buf);
        }
        {
            let mut v = cq.views();
            while let Some(x) = v.next() {
                std::hint::black_box(x.byte_cnt());
                got += 1;
            }
        }
        got += cq.poll(&mut buf);
        let after = allocations();
        assert_eq!(after, before, "allocation in poll path (round {round})");
        total += got;
    }
    assert_eq!(total, 50 * 200);
}

/// Compressed sessions, both layouts, sends and receives, one completion per call and
/// batches of 16: polling and peeking allocate nothing either.
#[test]
fn compressed_sessions_do_not_allocate() {
    use dvcq_mlx5_dv::model::compress::{bench_lap, Compression, Policy};
    use dvcq_mlx5_dv::{CompLayout, MiniFormat};
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        for (send, batch) in [(true, 1), (true, 16), (false, 1), (false, 16)] {
            let mut mc = ModelConfig::new(256);
            mc.compression = Some(Compression { layout, format: MiniFormat::Hash, policy: Policy::Always });
            let mut m = Mlx5Model::new(mc).unwrap();
            let mut reg = Registry::new();
            reg.add_qp(QpConfig::rc(9, 256, 256)).unwrap();
            let mut cq = m.poller::<64>(reg, CqConfig::default()).unwrap();
            let mut buf = [Completion::default(); 16];
            let lap = bench_lap(128, 9, send);
            for round in 0..20 {
                m.push_all(&lap).unwrap();
                m.flush().unwrap();
                let before = allocations();
                let _ = cq.peek();
                let mut got = 0;
                while got < lap.len() {
                    let n = cq.poll(&mut buf[..batch]);
                    assert!(n > 0, "{layout:?}, send {send}, batch {batch}: stalled at {got}");
                    assert!(buf[..n].iter().all(|c| c.is_ok()));
                    got += n;
                }
                assert_eq!(allocations(), before, "{layout:?}, send {send}, batch {batch}, round {round}");
            }
            assert!(cq.stats().sessions >= 20, "{layout:?}: the laps compressed");
        }
    }
}

/// The inline-scatter copy (receives on an RQ and on an SRQ, READ responses into a send
/// WQE), each copy checked against the registered memory region: polling, one completion
/// per call and batches of 16, and peeking allocate nothing either.
#[test]
fn inline_scatter_copies_do_not_allocate() {
    use dvcq_mlx5_dv::model::wqe::{self, DataSeg};
    use dvcq_provider::{DmaBuffer, WcStatus};
    use std::sync::Arc;
    const LKEY: u32 = 0x1234;
    const SRQN: u32 = 0x31;
    const N: usize = 8;
    for batch in [1, 16] {
        // Destination buffers: 32 bytes per WQE, RQ's first, then the SQ's, then the SRQ's.
        let dst = Arc::new(DmaBuffer::new(3 * N * 32).unwrap());
        let seg = |queue: usize, i: usize| DataSeg {
            addr: dst.as_ptr() as u64 + ((queue * N + i) * 32) as u64,
            len: 32,
            lkey: LKEY,
        };
        let wq = |len: usize, wqes: Vec<(usize, Vec<u8>)>| {
            let mem = Arc::new(DmaBuffer::new(len).unwrap());
            for (off, bytes) in wqes {
                mem.write_bytes(off, &bytes).unwrap();
            }
            mem.wq_buffer(0, len).unwrap()
        };
        let mut reg = Registry::new();
        reg.add_memory_region(dst.memory_region(0, dst.len(), LKEY).unwrap()).unwrap();
        reg.add_srq(SRQN, N as u32).unwrap();
        reg.add_qp(QpConfig::rc(9, N as u32, N as u32)).unwrap();
        reg.add_qp(QpConfig { srqn: Some(SRQN), ..QpConfig::rc(10, N as u32, 0) }).unwrap();
        let rq = (0..N).map(|i| (i * 32, wqe::recv_wqe(None, &[seg(0, i)], 32))).collect();
        reg.set_recv_wqes(9, wq(N * 32, rq), 32, false).unwrap();
        let sq = (0..N).map(|i| (i * 64, wqe::send_wqe(wqe_opcode::RDMA_READ, i as u16, 9, &[seg(1, i)]))).collect();
        reg.set_send_wqes(9, wq(N * 64, sq)).unwrap();
        let srq = (0..N).map(|i| (i * 32, wqe::recv_wqe(Some(wqe::srq_next(((i + 1) % N) as u16)), &[seg(2, i)], 32)));
        reg.set_srq_wqes(SRQN, wq(N * 32, srq.collect()), 32).unwrap();
        let mut m = Mlx5Model::new(ModelConfig::new(64)).unwrap();
        let mut cq = m.poller::<64>(reg, CqConfig::default()).unwrap();
        let mut buf = [Completion::default(); 16];
        for round in 0..20u8 {
            let data = [round; 20];
            for i in 0..N {
                let reg = cq.registry_mut();
                let at = reg.qp_mut(9).unwrap().rq.post(i as u64);
                m.push(&build::resp(cqe_opcode::RESP_SEND, 9, at, 0, 0).inline(&data)).unwrap();
                let at = reg.qp_mut(9).unwrap().sq.post(i as u64, 1);
                m.push(&build::req(9, at, wqe_opcode::RDMA_READ, 0).inline(&data)).unwrap();
                assert!(cq.registry_mut().srq_mut(SRQN).unwrap().post(i as u16, i as u64));
                m.push(&build::resp(cqe_opcode::RESP_SEND, 10, i as u16, 0, 0).srqn_uidx(SRQN).inline(&data)).unwrap();
            }
            let before = allocations();
            let _ = cq.peek();
            let mut got = 0;
            while got < 3 * N {
                let n = cq.poll(&mut buf[..batch]);
                assert!(n > 0, "batch {batch}: stalled at {got}");
                assert!(buf[..n].iter().all(|c| c.status == WcStatus::Success), "{:?}", &buf[..n]);
                got += n;
            }
            assert_eq!(allocations(), before, "batch {batch}, round {round}");
            assert_eq!(cq.stats().inline_not_copied, 0, "every copy ran");
            let mut all = vec![0u8; dst.len()];
            dst.read_bytes(0, &mut all).unwrap();
            assert!(all.chunks(32).all(|b| b[..20] == data), "round {round}: the data went into every WQE's buffer");
        }
    }
}
