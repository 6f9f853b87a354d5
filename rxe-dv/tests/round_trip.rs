//! What the kernel posts is what a poll returns, field by field, on CQs of every size, over
//! many laps of the ring, in batches of every size; the consumer index is published masked,
//! once per poll, as rdma-core's `advance_consumer` leaves it.

use dvcq_provider::testing::{drain, drain_in_batches, drain_one_by_one};
use dvcq_provider::{Completion, CqDriver, WcFlags, WcOpcode, WcStatus};
use dvcq_rxe_dv::model::{record, ModelConfig, RxeModel};
use dvcq_rxe_dv::RxeCq;

/// A completion using every field `ibv_wc` has, different for each `k`: the opcodes and
/// statuses in turn, immediates and invalidated rkeys, UD source fields.
fn wc(k: u32) -> Completion {
    const OPS: [WcOpcode; 12] = [
        WcOpcode::Send,
        WcOpcode::RdmaWrite,
        WcOpcode::RdmaRead,
        WcOpcode::CompSwap,
        WcOpcode::FetchAdd,
        WcOpcode::BindMw,
        WcOpcode::LocalInv,
        WcOpcode::Tso,
        WcOpcode::Flush,
        WcOpcode::AtomicWrite,
        WcOpcode::Recv,
        WcOpcode::RecvRdmaWithImm,
    ];
    let opcode = OPS[k as usize % OPS.len()];
    let status = if k % 5 == 4 { WcStatus::ALL[1 + (k as usize / 5) % 21] } else { WcStatus::Success };
    let wc_flags = match k % 4 {
        0 => WcFlags::empty(),
        1 => WcFlags::WITH_IMM,
        2 => WcFlags::WITH_INV,
        _ => WcFlags::GRH | WcFlags::WITH_IMM,
    };
    Completion {
        wr_id: u64::from(k) << 20 | 0xabc,
        byte_len: k.wrapping_mul(31),
        imm_data: k.wrapping_mul(0x0101_0101),
        qp_num: 0x11 + k % 3,
        wc_flags,
        status,
        opcode,
        sl: (k % 16) as u8,
        pkey_index: (k % 64) as u16,
        src_qp: k ^ 0xff_ffff,
        vendor_err: if status == WcStatus::Success { 0 } else { 0x8000 | k },
        slid: (k % 0xffff) as u16,
        dlid_path_bits: (k % 128) as u8,
        ..Completion::default()
    }
}

fn model(cqe: u32) -> (RxeModel, RxeCq) {
    let m = RxeModel::new(ModelConfig::new(cqe)).unwrap();
    let cq = m.poller().unwrap();
    (m, cq)
}

/// Posts `n` completions from `first` on, as many as fit at a time, draining with `batch`,
/// and checks each against what was posted.
fn run(m: &mut RxeModel, cq: &mut RxeCq, first: u32, n: u32, batch: usize) {
    let room = m.cqe() as u32;
    let start = cq.ci();
    let mut k = first;
    while k < first + n {
        let chunk = room.min(first + n - k);
        for j in k..k + chunk {
            m.push(&record(&wc(j))).unwrap();
        }
        let counted = cq.failures();
        let got = drain(cq, batch);
        assert_eq!(got.len(), chunk as usize, "batch {batch} at {k}");
        for (j, c) in (k..).zip(&got) {
            assert_eq!(*c, wc(j), "record {j}");
        }
        // The poller counts each failed completion it returns, by status, as it makes it.
        let mut want = counted.errors;
        got.iter().filter(|c| c.status != WcStatus::Success).for_each(|c| want.add(c.status));
        assert_eq!((cq.failures().errors, cq.failures().faults), (want, counted.faults), "batch {batch} at {k}");
        k += chunk;
        let ci = start.wrapping_add(k - first);
        assert_eq!(cq.ci(), ci, "ci counts every completion");
        assert_eq!(cq.stored_ci(), ci & (m.slots() - 1), "consumer index stored masked");
        assert_eq!(m.count(), 0);
    }
}

#[test]
fn every_field_round_trips_on_every_cq_size() {
    // Miri runs the small rings only (it is slow, and they wrap as often).
    let sizes: &[(u32, u32)] = if cfg!(miri) { &[(1, 6), (2, 3)] } else { &[(1, 40), (2, 30), (255, 6), (4095, 2)] };
    for &(cqe, laps) in sizes {
        let (mut m, mut cq) = model(cqe);
        let slots = m.slots();
        assert_eq!(cq.info().entries, slots);
        assert_eq!(cq.info().cqe_size, 128);
        assert_eq!(cq.info().vendor, "rxe");
        run(&mut m, &mut cq, 0, slots * laps + 3, 16);
        assert_eq!(cq.ci(), slots * laps + 3);
        assert_eq!(cq.poll(&mut [Completion::default(); 4]), 0);
    }
}

/// Batches of one, of exactly what is waiting, and larger than the ring: the same
/// completions in the same order, and a poll never takes more than is waiting.
#[test]
fn batch_sizes_do_not_change_what_is_polled() {
    for batch in [1, 3, 7, 8, 64] {
        let (mut m, mut cq) = model(7);
        run(&mut m, &mut cq, 0, 100, batch);
    }
    let (mut m, mut cq) = model(7);
    for j in 0..5 {
        m.push(&record(&wc(j))).unwrap();
    }
    let got = drain_in_batches(&mut cq, &[2, 0, 1, 9], 6);
    assert_eq!(got, (0..5).map(wc).collect::<Vec<_>>());
    assert_eq!(cq.poll(&mut []), 0);
}

/// `peek` shows exactly what the next one-completion poll takes, and consumes nothing.
#[test]
fn peek_agrees_with_poll() {
    let (mut m, mut cq) = model(15);
    assert_eq!(cq.peek(), None);
    for j in 0..40 {
        m.push(&record(&wc(j))).unwrap();
        if j % 10 == 9 {
            assert_eq!(cq.len(), 10);
            let before = cq.stored_ci();
            assert_eq!(cq.peek(), Some(wc(j - 9)));
            assert_eq!(cq.stored_ci(), before, "peek stored the consumer index");
            let got = drain_one_by_one(&mut cq).unwrap();
            assert_eq!(got, (j - 9..=j).map(wc).collect::<Vec<_>>());
            assert!(cq.is_empty());
        }
    }
}

/// A queue rdma-core already polled: the poller starts at the stored consumer index, not at
/// slot 0, and its counter runs on from there.
#[test]
fn attach_starts_where_the_consumer_index_is() {
    let mut m = RxeModel::new(ModelConfig::new(7)).unwrap();
    m.set_producer(5);
    m.write_consumer_raw(5);
    let mut cq = m.poller().unwrap();
    assert_eq!((cq.ci(), cq.geometry().consumer, cq.geometry().producer), (5, 5, 5));
    for j in 0..6 {
        m.push(&record(&wc(j))).unwrap();
    }
    assert_eq!(drain(&mut cq, 4), (0..6).map(wc).collect::<Vec<_>>());
    assert_eq!((cq.ci(), cq.stored_ci()), (11, 3));
}

/// `update_ci` republishes the counter masked (a consumer index another writer clobbered is
/// put back), and the kernel's full test sees every slot a poll freed.
#[test]
fn the_published_index_frees_the_slots() {
    let (mut m, mut cq) = model(3);
    for j in 0..3 {
        m.push(&record(&wc(j))).unwrap();
    }
    assert!(m.is_full());
    let mut out = [Completion::default(); 2];
    assert_eq!(cq.poll(&mut out), 2);
    assert_eq!((m.consumer_index(), m.is_full()), (2, false));
    m.write_consumer_raw(0);
    cq.update_ci();
    assert_eq!(m.consumer_index(), 2);
    m.push(&record(&wc(3))).unwrap();
    m.push(&record(&wc(4))).unwrap();
    assert_eq!(drain(&mut cq, 8), (2..5).map(wc).collect::<Vec<_>>());
    assert_eq!(m.consumer_index(), 5 & 3);
}

/// A larger element stride (a kernel with a bigger `struct rxe_cqe` or cache line) reads
/// the same records, and the smallest one too.
#[test]
fn any_power_of_two_stride_from_64_reads_the_same() {
    for log2 in [6, 7, 8, 12] {
        let mut m = RxeModel::new(ModelConfig { cqe: 5, log2_elem_size: log2 }).unwrap();
        let mut cq = m.poller().unwrap();
        assert_eq!(cq.info().cqe_size, 1 << log2);
        run(&mut m, &mut cq, 0, 30, 4);
    }
}

/// The high-water mark is the most records one poll call found waiting, not the most it
/// returned: a batch of 2 on a queue holding 5 still sees 5. Each poll that takes records
/// stores the consumer index once; an empty poll stores nothing.
#[test]
fn the_high_water_mark_is_what_a_poll_found_waiting() {
    let (mut m, mut cq) = model(7);
    assert_eq!((cq.high_water(), cq.consumer_writes()), (0, 0));
    for j in 0..5 {
        m.push(&record(&wc(j))).unwrap();
    }
    let mut out = [Completion::default(); 2];
    assert_eq!(cq.poll(&mut out), 2);
    assert_eq!((cq.high_water(), cq.consumer_writes()), (5, 1));
    assert_eq!(drain(&mut cq, 2).len(), 3);
    assert_eq!(cq.poll(&mut out), 0);
    // Two more polls took records (3 then 1 waiting), the empty ones wrote nothing.
    assert_eq!((cq.high_water(), cq.consumer_writes()), (5, 3));
    for j in 5..12 {
        m.push(&record(&wc(j))).unwrap();
    }
    assert_eq!(drain(&mut cq, 16).len(), 7);
    assert_eq!(cq.high_water(), 7, "a fuller queue raises the mark");
    cq.update_ci();
    assert_eq!(cq.consumer_writes(), 5);
}
