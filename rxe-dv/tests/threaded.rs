//! A producer thread posts records, with the kernel's ordering, while the poller drains
//! them; every completion is checked against the sequence. Both sides wait in bounded
//! time (spin, then sleep), so a lost record fails the test within seconds rather than
//! hanging it. The count can be scaled with `DVCQ_RXE_THREADED_RECORDS`, to no fewer than
//! [`FLOOR`].

use dvcq_provider::testing::threaded::threaded_count;
use dvcq_provider::{Completion, CqDriver, WcFlags, WcOpcode};
use dvcq_rxe_dv::model::{record, ModelConfig, RxeModel};
use std::time::{Duration, Instant};

/// The fewest records a run may be set to: the kernel-sized queue (256 slots) still laps
/// twenty times, and the smallest (two slots, a twentieth of the count) takes 256 records.
const FLOOR: u64 = 5_120;

/// The records of the kernel-sized race: `DVCQ_RXE_THREADED_RECORDS` (refused below
/// [`FLOOR`] or above `u32::MAX`, saying so), or the default (fewer under Miri, which sets no
/// variable).
fn count() -> u32 {
    let default = if cfg!(miri) { 60 } else { 200_000 };
    let n = threaded_count("DVCQ_RXE_THREADED_RECORDS", default, FLOOR);
    u32::try_from(n).unwrap_or_else(|_| panic!("DVCQ_RXE_THREADED_RECORDS={n} is above {}", u32::MAX))
}

fn wc(k: u32) -> Completion {
    let recv = k % 3 == 0;
    Completion {
        wr_id: u64::from(k) * 0x1_0001,
        byte_len: k,
        imm_data: if recv { k.rotate_left(8) } else { 0 },
        qp_num: 0x20 + k % 4,
        wc_flags: if recv { WcFlags::WITH_IMM } else { WcFlags::empty() },
        opcode: if recv { WcOpcode::RecvRdmaWithImm } else { WcOpcode::RdmaWrite },
        src_qp: !k,
        ..Completion::default()
    }
}

fn race(cqe: u32, n: u32) {
    let m = RxeModel::new(ModelConfig::new(cqe)).unwrap();
    let mut cq = m.poller().unwrap();
    let producer = m.spawn_producer((0..n).map(|k| record(&wc(k))), Duration::from_secs(20));
    let mut out = vec![Completion::default(); 8];
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut k, mut idle) = (0u32, 0u32);
    while k < n {
        let got = cq.poll(&mut out);
        if got == 0 {
            idle += 1;
            if idle < 64 {
                std::hint::spin_loop();
            } else {
                assert!(Instant::now() < deadline, "consumer starved at record {k} of {n}");
                std::thread::sleep(Duration::from_micros(20));
            }
            continue;
        }
        idle = 0;
        for c in &out[..got] {
            assert_eq!(*c, wc(k), "record {k}");
            k += 1;
        }
    }
    let m = producer.join().unwrap().unwrap();
    assert!(m.events().is_empty(), "the producer never saw a full queue it could not wait out");
    assert_eq!(cq.poll(&mut out), 0);
    assert_eq!((cq.ci(), m.consumer_index()), (n, n & (m.slots() - 1)));
}

/// Two slots hold one record: every post waits for the poll before it.
#[test]
fn race_on_the_smallest_queue() {
    race(1, count() / 20);
}

#[test]
fn race_on_a_kernel_sized_queue() {
    race(255, count());
}
