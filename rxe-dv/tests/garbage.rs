//! Untrusted input never panics: random records, random headers and descriptors, random
//! producer indexes, random `struct rxe_cq` bytes. Each record comes back as the
//! completion its bytes say or as the documented fault item, and nothing is lost.
//!
//! Not under Miri: proptest persists failures in files, which Miri's isolation refuses;
//! round_trip, attach and threaded cover the same memory accesses there.
#![cfg(not(miri))]

use dvcq_provider::{Completion, CqDriver, FaultKind, WcOpcode, WcStatus};
use dvcq_rxe_dv::model::{ModelConfig, RxeModel};
use dvcq_rxe_dv::{QueueDesc, RxeCq, RxeCqFields};
use dvcq_uapi::rxe::cq_layout::RXE_CQ_LAYOUTS;
use dvcq_uapi::rxe::UverbsWc;
use proptest::prelude::*;

/// What a record's bytes must poll as: the fault kind and value, or `None` and its
/// fields.
fn expect(rec: &[u8; 48]) -> Result<UverbsWc, (FaultKind, u32)> {
    let wc: UverbsWc = bytemuck::pod_read_unaligned(rec);
    match (WcStatus::from_u32(wc.status), WcOpcode::from_u32(wc.opcode)) {
        (None, _) => Err((FaultKind::BadField, wc.status)),
        (Some(WcStatus::Success), None) => Err((FaultKind::BadOpcode, wc.opcode)),
        _ => Ok(wc),
    }
}

fn check(c: &Completion, rec: &[u8; 48], position: u32) {
    match expect(rec) {
        Err((kind, value)) => {
            let f = c.fault().expect("a fault item");
            assert_eq!((f.kind, f.value, f.position), (kind, value, position));
        }
        Ok(wc) => {
            assert_eq!(c.fault(), None);
            assert_eq!((c.wr_id, c.status as u32, c.byte_len, c.imm_data), (wc.wr_id, wc.status, wc.byte_len, wc.ex));
            assert_eq!(
                (c.qp_num, c.src_qp, c.wc_flags.bits(), c.vendor_err),
                (wc.qp_num, wc.src_qp, wc.wc_flags, wc.vendor_err)
            );
            assert_eq!(
                (c.pkey_index, c.slid, c.sl, c.dlid_path_bits),
                (wc.pkey_index, wc.slid, wc.sl, wc.dlid_path_bits)
            );
            if WcOpcode::from_u32(wc.opcode).is_some() {
                assert_eq!(c.opcode as u32, wc.opcode);
            } else {
                assert_eq!(c.opcode, WcOpcode::Send);
            }
        }
    }
}

/// Records with a plausible status and opcode half of the time, so both paths are hit.
fn records() -> impl Strategy<Value = Vec<[u8; 48]>> {
    let rec =
        (any::<[u8; 48]>(), any::<bool>(), 0u32..24, prop::sample::select(vec![0u32, 1, 2, 6, 9, 128, 129, 10, 255]))
            .prop_map(|(mut b, plausible, status, opcode)| {
                if plausible {
                    b[8..12].copy_from_slice(&status.to_ne_bytes());
                    b[12..16].copy_from_slice(&opcode.to_ne_bytes());
                }
                b
            });
    prop::collection::vec(rec, 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_records_poll_as_their_bytes_say(recs in records(), batch in 1usize..9, cqe in 1u32..20) {
        let mut m = RxeModel::new(ModelConfig::new(cqe)).unwrap();
        let mut cq = m.poller().unwrap();
        let mut out = vec![Completion::default(); batch];
        let mut polled = 0usize;
        for rec in &recs {
            if m.is_full() {
                let n = cq.poll(&mut out);
                for (j, c) in out[..n].iter().enumerate() {
                    check(c, &recs[polled + j], (polled + j) as u32);
                }
                polled += n;
            }
            m.push_bytes(rec).unwrap();
        }
        loop {
            let n = cq.poll(&mut out);
            if n == 0 {
                break;
            }
            for (j, c) in out[..n].iter().enumerate() {
                check(c, &recs[polled + j], (polled + j) as u32);
            }
            polled += n;
        }
        prop_assert_eq!(polled, recs.len(), "every record polled once");
        prop_assert_eq!(cq.ci() as usize, recs.len());
    }

    /// Any header and descriptor: the attach either refuses with an error or gives a poller
    /// whose polls stay inside the ring.
    #[test]
    fn random_headers_never_panic(
        log2 in prop_oneof![0u32..20, any::<u32>()],
        mask in prop_oneof![0u32..300, any::<u32>()],
        prod in prop_oneof![0u32..300, any::<u32>()],
        cons in prop_oneof![0u32..300, any::<u32>()],
        cqe in prop_oneof![-2i32..300, any::<i32>()],
        map_cut in 0usize..9000,
        wc_size in prop::option::of(prop_oneof![Just(128u64), any::<u64>()]),
    ) {
        let m = RxeModel::new(ModelConfig::new(16)).unwrap();
        m.write_header(log2, mask);
        m.write_producer_raw(prod);
        m.write_consumer_raw(cons);
        let desc = QueueDesc { map_size: map_cut.min(m.map_size()), cqe, wc_size, ..m.desc() };
        // SAFETY: the descriptor points into `m`'s buffer with at most its size, and `m` outlives the poller.
        let attached = unsafe { RxeCq::attach(desc) };
        if let Ok(mut cq) = attached {
            let g = cq.geometry();
            prop_assert!(g.slots().is_power_of_two() && g.index_mask >= cqe as u32);
            let mut out = [Completion::default(); 8];
            for _ in 0..4 {
                prop_assert!(cq.poll(&mut out) <= g.index_mask as usize);
            }
        }
        // The safe path over the same buffer makes the same checks.
        let whole = QueueDesc { cqe: m.cqe(), wc_size: None, ..m.desc() };
        // SAFETY: as above, with the buffer's own size.
        let unsafe_path = unsafe { RxeCq::attach(whole) }.map(|cq| cq.geometry());
        prop_assert_eq!(m.poller().map(|cq| cq.geometry()), unsafe_path);
    }

    /// A producer index the kernel would never store: one fault item per bad value, nothing
    /// consumed; back inside the mask, the records are there.
    #[test]
    fn a_corrupt_producer_index_loses_nothing(bad in 8u32.., n in 0u32..7) {
        let mut m = RxeModel::new(ModelConfig::new(7)).unwrap();
        let mut cq = m.poller().unwrap();
        for k in 0..n {
            m.push(&UverbsWc { wr_id: u64::from(k), ..UverbsWc::default() }).unwrap();
        }
        m.write_producer_raw(bad);
        let mut out = [Completion::default(); 4];
        prop_assert_eq!(cq.len(), 0);
        let f = cq.peek().and_then(|c| c.fault()).expect("peek shows the fault");
        prop_assert_eq!((f.kind, f.value, f.position), (FaultKind::BadField, bad, 0));
        prop_assert_eq!(cq.poll(&mut out), 1);
        prop_assert_eq!(out[0].fault(), Some(f));
        prop_assert_eq!(cq.peek(), None);
        prop_assert_eq!(cq.poll(&mut out), 0, "the same bad value is reported once");
        // Counted by the poller as it made the item, once.
        let counted = cq.failures();
        prop_assert_eq!((counted.errors.get(WcStatus::GeneralErr), counted.errors.total(), counted.faults), (1, 1, 1));
        prop_assert_eq!((cq.ci(), m.consumer_index()), (0, 0));
        m.restore_producer();
        let got = dvcq_provider::testing::drain(&mut cq, 3);
        prop_assert_eq!(got.iter().map(|c| c.wr_id).collect::<Vec<_>>(), (0..u64::from(n)).collect::<Vec<_>>());
    }

    #[test]
    fn random_private_structs_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let row = &RXE_CQ_LAYOUTS[0];
        if let Ok(f) = RxeCqFields::read(row, &bytes) {
            prop_assert!(bytes.len() >= row.size);
            prop_assert!(f.queue != 0 && f.queue % 4096 == 0 && f.mmap_info.size % 4096 == 0);
        }
    }
}
