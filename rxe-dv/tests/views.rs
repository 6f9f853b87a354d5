//! Zero-copy views of the rxe queue: every field a view reads is the record's, a walk
//! consumes what it showed (and only that) when it ends, views and polls take turns on one
//! queue, and a corrupt producer index shows nothing.

use dvcq_provider::{Completion, CqDriver, WcFlags, WcOpcode, WcStatus};
use dvcq_rxe_dv::model::{record, ModelConfig, RxeModel};

fn wc(k: u32) -> Completion {
    Completion {
        wr_id: u64::from(k) << 32 | 0x5a5a,
        byte_len: 100 + k,
        imm_data: 0x0102_0304 ^ k,
        qp_num: 0x11 + k,
        wc_flags: if k % 2 == 0 { WcFlags::WITH_IMM } else { WcFlags::GRH | WcFlags::WITH_INV },
        status: if k % 3 == 2 { WcStatus::RemAccessErr } else { WcStatus::Success },
        opcode: if k % 2 == 0 { WcOpcode::RecvRdmaWithImm } else { WcOpcode::Recv },
        sl: (k % 16) as u8,
        pkey_index: 0x100 + k as u16,
        src_qp: 0xab_cd00 + k,
        vendor_err: if k % 3 == 2 { 0x8800 + k } else { 0 },
        slid: 0xbe00 + k as u16,
        dlid_path_bits: (k % 128) as u8,
        ..Completion::default()
    }
}

#[test]
fn every_field_a_view_reads_is_the_records() {
    let mut m = RxeModel::new(ModelConfig::new(15)).unwrap();
    let mut cq = m.poller().unwrap();
    for lap in 0..5u32 {
        for k in 0..12 {
            m.push(&record(&wc(lap * 12 + k))).unwrap();
        }
        let mut v = cq.views();
        assert_eq!(v.remaining(), 12);
        for k in 0..12 {
            let want = wc(lap * 12 + k);
            let r = v.next().unwrap();
            assert_eq!(
                (r.wr_id(), r.byte_len(), r.imm_data(), r.qp_num(), r.src_qp()),
                (want.wr_id, want.byte_len, want.imm_data, want.qp_num, want.src_qp)
            );
            assert_eq!(
                (r.status(), r.opcode(), r.wc_flags(), r.vendor_err()),
                (want.status as u32, want.opcode as u32, want.wc_flags.bits(), want.vendor_err)
            );
            assert_eq!(
                (r.pkey_index(), r.slid(), r.sl(), r.dlid_path_bits()),
                (want.pkey_index, want.slid, want.sl, want.dlid_path_bits)
            );
            let c = r.completion();
            assert_eq!(
                (c.wr_id, c.status, c.opcode, c.wc_flags),
                (want.wr_id, want.status, want.opcode, want.wc_flags)
            );
            assert_eq!(r.position(), lap * 12 + k);
        }
        assert!(v.next().is_none(), "a walk shows what was published when it began");
        drop(v);
        assert_eq!(m.consumer_index(), (lap + 1) * 12 % 16, "the walk's end stores the consumer index, masked");
    }
}

#[test]
fn a_walk_consumes_only_what_it_showed_and_polls_go_on_from_there() {
    let mut m = RxeModel::new(ModelConfig::new(31)).unwrap();
    let mut cq = m.poller().unwrap();
    for k in 0..10 {
        m.push(&record(&wc(k))).unwrap();
    }
    {
        let mut v = cq.views();
        assert_eq!(v.peek().map(|r| r.wr_id()), Some(wc(0).wr_id), "peek does not consume");
        assert_eq!(v.next().map(|r| r.wr_id()), Some(wc(0).wr_id));
        assert_eq!(v.next().map(|r| r.wr_id()), Some(wc(1).wr_id));
        m.push(&record(&wc(10))).unwrap();
        assert_eq!(v.remaining(), 8, "a record published during the walk waits for the next one");
    }
    assert_eq!(m.consumer_index(), 2);
    let mut out = [Completion::default(); 16];
    let n = cq.poll(&mut out);
    assert_eq!(n, 9);
    assert_eq!(out[..n].iter().map(|c| c.wr_id).collect::<Vec<_>>(), (2..11).map(|k| wc(k).wr_id).collect::<Vec<_>>());
    // An empty walk stores nothing.
    let stored = m.consumer_index();
    assert!(cq.views().next().is_none());
    assert_eq!(m.consumer_index(), stored);
}

#[test]
fn a_corrupt_producer_index_shows_nothing_and_the_poll_reports_it() {
    let mut m = RxeModel::new(ModelConfig::new(15)).unwrap();
    let mut cq = m.poller().unwrap();
    m.push(&record(&wc(0))).unwrap();
    m.write_producer_raw(0x1000);
    assert!(cq.views().next().is_none());
    assert!(!cq.idle(), "a corrupt producer index is for the poll to report, not idle");
    let mut out = [Completion::default(); 4];
    assert_eq!(cq.poll(&mut out), 1);
    assert!(out[0].fault().is_some(), "the poll names the corrupt index");
    assert!(!cq.idle(), "until a poll sees a sane index again");
    m.restore_producer();
    assert_eq!(cq.views().next().map(|r| r.wr_id()), Some(wc(0).wr_id), "nothing was lost");
}

/// A view's words are the record as it lies in the ring: `wr_id`, then `status` and `opcode`,
/// `vendor_err` and `byte_len`, `imm_data` and `qp_num`, `src_qp` and `wc_flags`, each pair
/// in one native-endian word (struct ib_uverbs_wc's order).
#[test]
fn a_views_words_are_the_records_memory() {
    let mut m = RxeModel::new(ModelConfig::new(15)).unwrap();
    let mut cq = m.poller().unwrap();
    for k in 0..6 {
        m.push(&record(&wc(k))).unwrap();
    }
    let mut v = cq.views();
    for k in 0..6 {
        let want = wc(k);
        let w = v.next().unwrap().words();
        let pair = |x: u64| (x as u32, (x >> 32) as u32);
        assert_eq!(w[0], want.wr_id);
        assert_eq!(pair(w[1]), (want.status as u32, want.opcode as u32));
        assert_eq!(pair(w[2]), (want.vendor_err, want.byte_len));
        assert_eq!(pair(w[3]), (want.imm_data, want.qp_num));
        assert_eq!(pair(w[4]), (want.src_qp, want.wc_flags.bits()));
        assert_eq!(w[5] as u16, want.pkey_index);
    }
}

/// `idle` is true exactly when a poll would return nothing, and asking consumes nothing.
#[test]
fn idle_says_what_a_poll_would_find_and_changes_nothing() {
    let mut m = RxeModel::new(ModelConfig::new(15)).unwrap();
    let mut cq = m.poller().unwrap();
    let mut out = [Completion::default(); 4];
    for k in 0..40 {
        assert!(cq.idle(), "record {k}: nothing waits");
        m.push(&record(&wc(k))).unwrap();
        assert!(!cq.idle() && !cq.idle(), "record {k} waits, asked twice");
        assert_eq!(cq.poll(&mut out), 1);
        assert_eq!(out[0].wr_id, wc(k).wr_id);
    }
    assert!(cq.idle());
}
