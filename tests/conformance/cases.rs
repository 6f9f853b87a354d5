//! Conformance cases, each written once against [`Backend`].

use crate::backends::{Backend, QPN};
use dvcq::{Completion, FaultKind, WcFlags, WcOpcode, WcStatus};

fn drain<B: Backend>(b: &mut B, batch: usize) -> Vec<Completion> {
    let mut all = Vec::new();
    let mut buf = vec![Completion::default(); batch];
    loop {
        let n = b.poll(&mut buf);
        all.extend_from_slice(&buf[..n]);
        if n == 0 {
            return all;
        }
    }
}

pub fn sends_complete_in_order_with_their_wr_ids<B: Backend>() {
    let mut b = B::new(16);
    let idx: Vec<u16> = (0..5).map(|i| b.post_send(0x1000 + i)).collect();
    for &i in &idx {
        b.complete_send(i);
    }
    let got = drain(&mut b, 8);
    assert_eq!(got.len(), 5);
    for (i, c) in got.iter().enumerate() {
        assert_eq!(
            (c.status, c.opcode, c.qp_num, c.wr_id),
            (WcStatus::Success, WcOpcode::Send, QPN, 0x1000 + i as u64)
        );
        assert!(c.fault().is_none());
    }
}

pub fn receives_carry_length_and_immediate<B: Backend>() {
    let mut b = B::new(16);
    let a = b.post_recv(77);
    let c = b.post_recv(78);
    b.complete_recv(a, 100, None);
    b.complete_recv(c, 200, Some(0x0102_0304));
    let got = drain(&mut b, 4);
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].opcode, got[0].byte_len, got[0].wr_id), (WcOpcode::Recv, 100, 77));
    assert!(!got[0].wc_flags.contains(WcFlags::WITH_IMM));
    assert_eq!((got[1].byte_len, got[1].wr_id), (200, 78));
    assert!(got[1].wc_flags.contains(WcFlags::WITH_IMM));
    // imm_data is the wire (network-order) word read as a host integer, as ibv_wc holds it.
    assert_eq!(got[1].imm_data, u32::from_ne_bytes(0x0102_0304u32.to_be_bytes()));
}

pub fn errors_report_a_failure_status_and_the_wr_id<B: Backend>() {
    let mut b = B::new(16);
    let ok = b.post_send(1);
    let bad = b.post_send(2);
    b.complete_send(ok);
    b.fail_send(bad);
    let got = drain(&mut b, 4);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].status, WcStatus::Success);
    assert_eq!((got[1].status, got[1].wr_id, got[1].qp_num), (WcStatus::RemAccessErr, 2, QPN));
    assert!(got[1].fault().is_none(), "a device error is a completion, not a fault item");
}

pub fn unknown_qp_is_a_fault_item_between_good_completions<B: Backend>() {
    let mut b = B::new(16);
    let x = b.post_send(10);
    let y = b.post_send(11);
    b.complete_send(x);
    b.unknown_qp();
    b.complete_send(y);
    let got = drain(&mut b, 8);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].wr_id, 10);
    assert_eq!(got[1].fault().map(|f| f.kind), Some(FaultKind::UnknownQp));
    assert_eq!(got[1].status, WcStatus::GeneralErr);
    assert_eq!(got[2].wr_id, 11);
}

pub fn many_laps_lose_nothing<B: Backend>() {
    let mut b = B::new(8);
    let mut next = 0u64;
    for lap in 0..100 {
        let k = 1 + lap % (b.room().min(5) as u64);
        for _ in 0..k {
            let i = b.post_send(next);
            b.complete_send(i);
            next += 1;
        }
        let got = drain(&mut b, 3);
        assert_eq!(got.len() as u64, k, "lap {lap}");
        let first = next - k;
        for (j, c) in got.iter().enumerate() {
            assert_eq!(c.wr_id, first + j as u64, "lap {lap}");
        }
    }
}

pub fn batches_split_anywhere<B: Backend>() {
    for batch in [1, 2, 3, 7] {
        let mut b = B::new(16);
        for i in 0..12 {
            let s = b.post_send(i);
            b.complete_send(s);
        }
        let got = drain(&mut b, batch);
        assert_eq!(got.iter().map(|c| c.wr_id).collect::<Vec<_>>(), (0..12).collect::<Vec<_>>(), "batch {batch}");
    }
}

pub fn empty_ring_polls_zero_and_peek_matches_poll<B: Backend>() {
    let mut b = B::new(8);
    assert_eq!(b.poll(&mut [Completion::default(); 4]), 0);
    assert!(b.peek().is_none());
    let r = b.post_recv(5);
    b.complete_recv(r, 9, None);
    let p = b.peek().unwrap();
    assert_eq!(b.peek().unwrap(), p, "peek does not consume");
    let mut c = [Completion::default()];
    assert_eq!(b.poll(&mut c), 1);
    assert_eq!(c[0].wr_id, p.wr_id);
    assert_eq!(c[0].byte_len, p.byte_len);
    assert_eq!(b.poll(&mut c), 0);
}
