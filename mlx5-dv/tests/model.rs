//! The mlx5 hardware model itself: the ring as software leaves it before the device writes
//! (rdma-core `mlx5_alloc_cq_buf`; UCX and DPDK initialise their DevX CQs their own way), the
//! CQ error an overrun raises, and the model's own refusals (a resize to a size the device
//! has no ring for, a skip over a buffered session, a producer thread whose consumer has gone
//! away).

use dvcq_mlx5_dv::model::build;
use dvcq_mlx5_dv::model::compress::{Compression, Policy};
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig, ModelError, ModelEvent, RingInit};
use dvcq_mlx5_dv::{CompLayout, MiniFormat};
use dvcq_uapi::mlx5::opcode::{cqe_opcode, wqe_opcode};
use std::time::Duration;

const QPN: u32 = 0x10;

fn compression(layout: CompLayout, policy: Policy) -> Compression {
    Compression { layout, format: MiniFormat::Hash, policy }
}

#[test]
fn the_ring_starts_as_its_creator_initialises_it() {
    let layouts = [None, Some(CompLayout::Basic), Some(CompLayout::Enhanced)];
    for init in [RingInit::RdmaCore, RingInit::Ucx] {
        for cqe_size in [64, 128] {
            for layout in layouts {
                let mut mc = ModelConfig::new(8);
                mc.cqe_size = cqe_size;
                mc.init = init;
                mc.compression = layout.map(|l| compression(l, Policy::Never));
                let ring = Mlx5Model::new(mc).unwrap().snapshot();
                assert_eq!(ring.len(), 8 * cqe_size as usize);
                // rdma-core: op_own 0xF0 (INVALID, owner 0). UCX and DPDK: owner 1, which
                // is wrong for lap 0, and signature 0xFF. A DevX CQ with enhanced
                // compression starts its iteration count at 0xFF, so lap 0 matches no slot.
                let op_own = if init == RingInit::Ucx { 0xf1 } else { 0xf0 };
                let signature = if init == RingInit::Ucx || layout == Some(CompLayout::Enhanced) { 0xff } else { 0 };
                let what = format!("{init:?} {cqe_size}-byte {layout:?}");
                for (i, slot) in ring.chunks(cqe_size as usize).enumerate() {
                    // In a 128-byte slot the CQE is the second half (rdma-core `get_sw_cqe`).
                    let (first, cqe) = slot.split_at(cqe_size as usize - 64);
                    assert!(first.iter().all(|&b| b == 0), "{what}: slot {i}'s first half");
                    assert!(cqe[..62].iter().all(|&b| b == 0), "{what}: slot {i}'s body");
                    assert_eq!((cqe[62], cqe[63]), (signature, op_own), "{what}: slot {i}");
                    assert_eq!(cqe[63] >> 4, cqe_opcode::INVALID);
                }
            }
        }
    }
}

#[test]
fn an_overrun_puts_the_cq_in_error_and_nothing_else_does() {
    let mut m = Mlx5Model::new(ModelConfig::new(4)).unwrap();
    for i in 0..4 {
        m.push(&build::req(QPN, i, wqe_opcode::SEND, 0)).unwrap();
        assert!(!m.in_error(), "a full ring is not in error");
    }
    let e = m.push(&build::req(QPN, 4, wqe_opcode::SEND, 0)).unwrap_err();
    assert_eq!(e, ModelError::Overrun { cqn: 0x406, pi: 4, ci: 0, need: 1, free: 0 });
    assert_eq!(
        e.to_string(),
        "cq 0x406 overrun at producer index 4: the write takes 1 slot(s), consumer index 0 leaves 0 free"
    );
    assert!(m.in_error());
    assert_eq!(m.events(), &[ModelEvent::CqError { cqn: 0x406, syndrome: 1 }]);
    // An overrun-ignore CQ overwrites instead, and stays usable.
    let mut mc = ModelConfig::new(4);
    mc.overrun_ignore = true;
    let mut m = Mlx5Model::new(mc).unwrap();
    for i in 0..9 {
        m.push(&build::req(QPN, i, wqe_opcode::SEND, 0)).unwrap();
    }
    assert!(!m.in_error());
    assert!(m.events().is_empty());
}

/// A 64-byte CQE has no first half: inline-64 data or a GRH in the CQE cannot reach a
/// 64-byte CQ, so the model refuses an entry that carries one instead of dropping it; raw
/// bytes that only claim such a format (garbage) are written.
#[test]
fn a_first_half_is_refused_on_a_cq_of_64_byte_cqes() {
    let mut m = Mlx5Model::new(ModelConfig::new(4)).unwrap();
    let inline64 = build::resp(cqe_opcode::RESP_SEND, QPN, 0, 0, 0).inline(&[7; 48]);
    let grh = build::resp(cqe_opcode::RESP_SEND, QPN, 0, 8, 0).grh_in_cqe([1; 40]);
    for e in [inline64, grh] {
        assert!(matches!(m.push(&e), Err(ModelError::Config(_))));
    }
    assert_eq!(m.pi(), 0);
    let mut claims = inline64;
    claims.first_half = [0; 64];
    m.push(&claims).unwrap();
    let mut mc = ModelConfig::new(4);
    mc.cqe_size = 128;
    Mlx5Model::new(mc).unwrap().push(&inline64).unwrap();
}

#[test]
fn a_resize_to_a_ring_the_device_cannot_have_is_refused_and_writes_nothing() {
    let mut m = Mlx5Model::new(ModelConfig::new(8)).unwrap();
    m.push(&build::req(QPN, 0, wqe_opcode::SEND, 0)).unwrap();
    // Not a power of two; a power of two below 2 or above 2^22; a stride that is not the CQ's.
    for entries in [6, 24, 1, 1 << 23, 0] {
        let e = m.resize::<64>(entries).unwrap_err();
        assert!(matches!(e, ModelError::Config(_)), "{entries}: {e}");
    }
    assert!(matches!(m.resize::<128>(16), Err(ModelError::Config(_))));
    // The size the CQ has: rdma-core and the kernel return before any command.
    assert!(matches!(m.resize::<64>(8), Err(ModelError::Config(_))));
    assert_eq!(m.pi(), 1, "a refused resize writes no RESIZE CQE");
    // The bounds themselves are rings the device can have.
    for entries in [2, 1 << 22] {
        let mut m = Mlx5Model::new(ModelConfig::new(8)).unwrap();
        m.resize::<64>(entries).unwrap();
        assert_eq!((m.config().entries, m.pi()), (entries, 1));
    }
}

#[test]
fn a_skip_waits_for_the_buffered_session_to_be_flushed() {
    let mut mc = ModelConfig::new(64);
    mc.compression = Some(compression(CompLayout::Basic, Policy::Always));
    let mut m = Mlx5Model::new(mc).unwrap();
    // Receives that compress: the model holds them back to form a session.
    for i in 0..3 {
        m.push(&build::resp(cqe_opcode::RESP_SEND, QPN, i, 64, 0)).unwrap();
    }
    assert!(m.next_write_slots() > 1, "a session is buffered");
    let pi = m.pi();
    assert!(matches!(m.skip(2), Err(ModelError::Config(_))));
    assert_eq!(m.pi(), pi, "a refused skip moves nothing");
    m.flush().unwrap();
    let pi = m.pi();
    m.skip(2).unwrap();
    assert_eq!(m.pi(), pi + 2);
}

#[test]
fn a_producer_thread_fills_the_ring_and_stalls_only_past_it() {
    let entries = |n: u16| (0..n).map(|i| build::req(QPN, i, wqe_opcode::SEND, 0)).collect::<Vec<_>>();
    // Exactly a ring's worth with nobody polling: every CQE fits, so the thread ends.
    let m = Mlx5Model::new(ModelConfig::new(8)).unwrap();
    let m = m.spawn_producer(entries(8), Duration::from_millis(50)).join().unwrap().unwrap();
    assert_eq!(m.pi(), 8);
    assert!(!m.in_error());
    // One more: the ninth waits for room that never comes, and the thread gives up after
    // the stall time instead of overrunning the CQ.
    let m = Mlx5Model::new(ModelConfig::new(8)).unwrap();
    let e = m.spawn_producer(entries(9), Duration::from_millis(50)).join().unwrap().unwrap_err();
    assert!(matches!(e, ModelError::Stalled { pi: 8, ms: 50 }), "{e}");
}
