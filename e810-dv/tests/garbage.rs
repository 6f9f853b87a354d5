//! Arbitrary bytes in ring memory: the live poller never panics, never loops forever, and
//! whatever it returns for a slot it cannot use is a fault item.

use dvcq_e810_dv::model::{IrdmaModel, ModelConfig};
use dvcq_e810_dv::{Compat, QpConfig, QpRegistry, Transport};
use dvcq_provider::{Completion, WcStatus};
use dvcq_uapi::irdma::cqe::q2;
use dvcq_uapi::irdma::HwRev;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn garbage_ring_never_panics(gen in 1u8..=3, slots in (4usize..=13).prop_flat_map(|n| proptest::collection::vec(proptest::collection::vec(any::<u8>(), 64), n)), small_ctx in any::<bool>(), compat in prop::sample::select(Compat::ALL.to_vec()), conn_wqe_bug in any::<bool>()) {
        // rdma-core's connection-WQE skip too, which can bring the head back over CQEs it
        // consumed: a poll call still ends.
        let compat = if conn_wqe_bug { compat.with_conn_wqe_bug() } else { compat };
        // GEN3 exists only with the current compat (rdma-core v64 and later).
        let gen = HwRev::from_u8(gen).filter(|&g| g != HwRev::Gen3 || compat.has_gen3()).unwrap_or(HwRev::Gen2);
        // Ring sizes as rdma-core allocates them, powers of two or not: odd ones on GEN1 only.
        let slots = if gen == HwRev::Gen1 { &slots[..] } else { &slots[..slots.len() & !1] };
        let mut m = IrdmaModel::new(ModelConfig::new(gen, slots.len() as u32)).unwrap();
        let mut qps = QpRegistry::new(gen);
        qps.register(1, QpConfig::rc(1, 4, 4)).unwrap();
        qps.register(2, QpConfig::ud(2, 8, 2)).unwrap();
        // An iWARP QP: its connection WQEs take the general path until one completes.
        qps.register(3, QpConfig { transport: Transport::Iwarp, conn_wqes: 3, ..QpConfig::rc(3, 8, 4) }).unwrap();
        let mut cq = m.poller(qps, compat).unwrap();
        let size = m.config().cqe_size as usize;
        for (i, s) in slots.iter().enumerate() {
            let mut b = s[..size].to_vec();
            if small_ctx {
                // Make handles hit registered QPs often, with the QP number such a QP's
                // CQEs carry: a completion reports the CQE's own QP id (qword2), as
                // rdma-core does, so a random one would say nothing about the handle.
                let ctx = s[8] % 4;
                b[8..16].copy_from_slice(&u64::from(ctx).to_le_bytes());
                let w2 = u64::from_le_bytes(b[16..24].try_into().unwrap());
                let w2 = q2::make(u32::from(ctx), q2::src_qpn_or_inv_stag(w2));
                b[16..24].copy_from_slice(&w2.to_le_bytes());
            }
            m.write_raw(i as u32, &b).unwrap();
        }
        let _ = cq.peek();
        let mut out = [Completion::default(); 5];
        let mut rounds = 0;
        let (mut failed, mut faults) = (dvcq_provider::StatusCounts::default(), 0u64);
        loop {
            let before = cq.ci();
            let n = cq.poll(&mut out);
            // Every item is a completion of a registered QP (its handle and QP id) or a
            // fault item; a fault's status is the generic error, so code that ignores
            // faults still sees one.
            for c in &out[..n] {
                if c.status != WcStatus::Success {
                    failed.add(c.status);
                }
                faults += u64::from(c.fault().is_some());
                match c.fault() {
                    None => prop_assert!([1, 2, 3].contains(&c.qp_num), "completion of an unknown QP: {c:?}"),
                    Some(_) => prop_assert_eq!(c.status, WcStatus::GeneralErr),
                }
            }
            rounds += 1;
            prop_assert!(rounds < 1000, "poller does not terminate");
            if n == 0 && cq.ci() == before {
                break;
            }
        }
        // Every failed completion and fault item is counted once, whichever path made it.
        prop_assert_eq!(cq.stats().errors, failed);
        prop_assert_eq!(cq.stats().faults, faults);
        let mut v = cq.views();
        while let Some(x) = v.next() {
            let _ = (x.comp_ctx(), x.status(), x.imm(), x.payload_len(), x.qp_id());
        }
    }
}
