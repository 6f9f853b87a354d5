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
