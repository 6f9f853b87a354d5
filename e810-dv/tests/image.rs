//! Ring images exported by the model decode exactly as the live poller polls, and survive
//! the text round trip; arbitrary text and ring bytes never panic.

use dvcq_e810_dv::image::{
    decode_image, format_decode, header_from_words, image_from_parts, parse_irdma_image, DecodeItem, ImageQp,
};
use dvcq_e810_dv::model::{IrdmaModel, ModelConfig, ModelCqe};
use dvcq_e810_dv::ring::{Pos, SlotWords};
use dvcq_e810_dv::{Compat, QpConfig, QpRegistry, SlotBytes, SlotSource};
use dvcq_provider::{Completion, DmaBuffer, RingView, SlotRef, WcFlags};
use dvcq_uapi::irdma::codes::{flush, rq_op, sq_op};
use dvcq_uapi::irdma::HwRev;
use proptest::prelude::*;
use std::sync::Arc;

fn scenario(gen: HwRev) {
    let entries = 32;
    let mut m = IrdmaModel::new(ModelConfig::new(gen, entries)).unwrap();
    let qp_a =
        ImageQp { qpn: 0x21, sq_wqe_cnt: 16, rq_wqe_cnt: 16, sq_head: Some(6), rq_head: Some(5), ..Default::default() };
    let qp_b = ImageQp { qpn: 0x22, sq_wqe_cnt: 8, rq_wqe_cnt: 8, ud: true, ..Default::default() };
    // The live poller with the same registry the image implies.
    let mut qps = QpRegistry::new(gen);
    let a = qps.register(1, QpConfig::rc(0x21, 16, 16)).unwrap();
    let b = qps.register(2, QpConfig::ud(0x22, 8, 8)).unwrap();
    // An image records no posts: every WQE counts as posted, one quantum each.
    qps.preset_identity(a).unwrap();
    qps.preset_identity(b).unwrap();
    qps.qp_mut(a).unwrap().sq.set(6, 0);
    qps.qp_mut(a).unwrap().rq.set(5, 0);
    qps.qp_mut(b).unwrap().sq.set(7, 0);
    qps.qp_mut(b).unwrap().rq.set(7, 0);
    let mut cq = m.poller(qps, Compat::Current).unwrap();
    // Move the ring off position 0 so the image starts mid-ring with a wrap inside.
    let mut out = vec![Completion::default(); 64];
    for _ in 0..27 {
        m.push(&ModelCqe::send(0, 0, 0, sq_op::SEND)).unwrap();
    }
    assert_eq!(cq.poll(&mut out), 0);
    let ci = cq.ci();
    assert_eq!(ci, 27);
    m.push(&ModelCqe::send(1, 0x21, 0, sq_op::SEND)).unwrap();
    m.push(&ModelCqe::recv(1, 0x21, 0, 0, rq_op::ROCE_WRITE_ONLY_WITH_IMM, 10).with_imm(0xa1b2c3d4)).unwrap();
    m.push(&ModelCqe::recv(2, 0x22, 0, 0, rq_op::ROCE_SEND_ONLY, 20).with_ud(0x99, true, [1, 2, 3, 4, 5, 6], None))
        .unwrap();
    m.push(&ModelCqe::send(2, 0x22, 0, sq_op::SEND).with_error(3, 4)).unwrap();
    m.push(&ModelCqe::flush(1, 0x21, true, 1, flush::LOC_LEN_ERR)).unwrap();
    m.push(&ModelCqe::flush_general(1, 0x21, false, 1)).unwrap();
    m.push(&ModelCqe::send(7, 0x21, 0, sq_op::SEND)).unwrap();
    let img = m.export_image(ci, &[qp_a, qp_b]).unwrap();
    let text = img.to_text();
    let parsed = parse_irdma_image(&text).unwrap();
    assert_eq!(parsed, img);
    let (items, end) = decode_image(&parsed, Compat::Current).unwrap();
    let mut live = Vec::new();
    loop {
        let before = cq.ci();
        let n = cq.poll(&mut out);
        live.extend_from_slice(&out[..n]);
        if n == 0 && cq.ci() == before {
            break;
        }
    }
    assert_eq!(items.len(), live.len());
    for (it, wc) in items.iter().zip(&live) {
        match it {
            DecodeItem::Wc(d) => assert_eq!(d, wc),
            DecodeItem::Bad { slot, reason } => {
                let f = wc.fault().unwrap();
                assert_eq!((*slot, *reason), (f.position % entries, f.kind));
            }
        }
    }
    assert_eq!(end.ci, cq.ci());
    assert_eq!(end.dbrec_ci, Some(cq.head()));
    let lines = format_decode(&items, &end);
    assert!(lines.contains("bad slot="), "{lines}");
    assert!(lines.ends_with(&format!("end ci={} dbrec_ci={}\n", cq.ci(), cq.head())));
    // 1 send + 1 recv + 1 UD recv + 1 error + 5 SQ flushes (tail 1..6) + 5 RQ flushes... the
    // RQ tail moved to 1 after the recv, so 4 remain; + 1 unknown handle.
    // GEN3 writes one flush CQE per WQE itself: each flush CQE above is one completion.
    let (expect_flush_sq, expect_flush_rq) = if gen == HwRev::Gen3 { (1, 1) } else { (5, 4) };
    assert_eq!(items.len(), 4 + expect_flush_sq + expect_flush_rq + 1, "{lines}");
}

#[test]
fn model_image_decodes_like_the_live_poller_gen3() {
    scenario(HwRev::Gen3);
}

#[test]
fn model_image_decodes_like_the_live_poller_gen2() {
    scenario(HwRev::Gen2);
}

#[test]
fn model_image_decodes_like_the_live_poller_gen1() {
    scenario(HwRev::Gen1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_ring_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 8 * 32), ci in any::<u32>(), gen in 1u8..=3, wide in any::<bool>()) {
        let size = if wide { 64 } else { 32 };
        let entries = bytes.len() / size;
        let mut text = format!("ring cqe_size={size} entries={entries} ci={ci} vendor=irdma hw_rev={gen}\n");
        text.push_str("qp qpn=5 sq_wqe_cnt=4 rq_wqe_cnt=4 sq_head=2\nqp qpn=6 sq_wqe_cnt=0 rq_wqe_cnt=2 ud rq_shift=3\n");
        for s in bytes.chunks(size) {
            for b in s {
                text.push_str(&format!("{b:02x}"));
            }
            text.push('\n');
        }
        let img = parse_irdma_image(&text).unwrap();
        for compat in Compat::ALL {
            match decode_image(&img, compat) {
                Ok((items, end)) => {
                    prop_assert!(items.len() <= 4 * entries + 16);
                    let _ = format_decode(&items, &end);
                }
                // Only GEN3 with an older release's compat is refused.
                Err(e) => prop_assert!(img.header.hw_rev == HwRev::Gen3 && compat != Compat::Current, "{e}"),
            }
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        let _ = parse_irdma_image(&text);
    }

    #[test]
    fn mutated_images_never_panic(lines in proptest::collection::vec("[ -~]{0,70}", 0..12)) {
        let mut text = String::from("ring cqe_size=32 entries=4 ci=3\n");
        for l in lines {
            text.push_str(&l);
            text.push('\n');
        }
        if let Ok(img) = parse_irdma_image(&text) {
            let _ = decode_image(&img, Compat::Current);
        }
    }
}

/// Every read an image decode makes through [`SlotBytes`] against the same read of the same
/// bytes in ring memory, at each position of two laps from `ci`: valid test, main qwords,
/// extension (the next slot in 32-byte mode, bytes 32-63 in 64-byte mode) and the GEN3 SRQ
/// context. The decode itself is the poller's code, so agreeing here means an image decodes
/// as the ring it was taken from would poll.
fn bytes_read_as_ring_memory<const S: usize>(bytes: &[u8], ci: u32)
where
    for<'a> RingView<'a, S, false>: SlotSource<Slot<'a> = SlotRef<'a, S>>,
{
    let entries = (bytes.len() / S) as u32;
    let mem = Arc::new(DmaBuffer::new(bytes.len()).unwrap());
    let ring = mem.cq_ring_any_size::<S>(0, entries).unwrap();
    for (i, slot) in bytes.chunks(S).enumerate() {
        ring.write_bytes(i as u32, 0, slot).unwrap();
    }
    let live = ring.view();
    let image = SlotBytes::new(bytes.to_vec(), S).unwrap();
    assert_eq!((image.stride(), image.bytes()), (S, bytes));
    assert_eq!((image.entries(), SlotSource::entries(&image)), (entries, SlotSource::entries(&live)));
    assert_eq!(image.ext_extra_slots(), live.ext_extra_slots());
    for k in 0..2 * entries {
        let pos = Pos::at(ci.wrapping_add(k), entries);
        let (a, b) = (image.slot(pos.slot()), live.slot(pos.slot()));
        assert_eq!(a.valid_q3(pos.flip()), b.valid_q3(pos.flip()), "valid test at {pos:?}");
        for off in [0, 8, 16, 24] {
            assert_eq!(a.qword(off), b.qword(off), "qword at byte {off} of {pos:?}");
        }
        assert_eq!(image.ext(pos), live.ext(pos), "extension of {pos:?}");
        assert_eq!(image.srq_ctx(pos.slot()), live.srq_ctx(pos.slot()), "SRQ context of {pos:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn image_bytes_read_as_ring_memory(
        bytes in proptest::collection::vec(any::<u8>(), 12 * 64),
        entries in 1usize..=12,
        wide in any::<bool>(),
        ci in 0u32..1 << 20,
    ) {
        if wide {
            bytes_read_as_ring_memory::<64>(&bytes[..entries * 64], ci);
        } else {
            bytes_read_as_ring_memory::<32>(&bytes[..entries * 32], ci);
        }
    }
}

/// The decoder bounds its work on garbage, and the bound is never smaller than honest work:
/// a full ring of 4095 completions (one slot stays free) decodes whole, and so does a GEN2
/// flush CQE that stands for all 1023 outstanding WQEs of a large SQ on a small ring.
#[test]
fn long_decodes_are_not_cut_short() {
    let entries = 4096;
    let mut m = IrdmaModel::new(ModelConfig::new(HwRev::Gen2, entries)).unwrap();
    for i in 0..entries - 1 {
        m.push(&ModelCqe::send(1, 0x21, (i % 8) as u16, sq_op::SEND)).unwrap();
    }
    // Small queues, so that their WQE count adds little to the bound.
    let qp = ImageQp { qpn: 0x21, sq_wqe_cnt: 8, rq_wqe_cnt: 8, ..Default::default() };
    let (items, end) = decode_image(&m.export_image(0, &[qp]).unwrap(), Compat::Current).unwrap();
    assert_eq!(items.len(), entries as usize - 1);
    assert!(items.iter().all(|it| matches!(it, DecodeItem::Wc(wc) if wc.status as u8 == 0)));
    assert_eq!((end.ci, end.dbrec_ci), (entries - 1, Some(entries - 1)));

    let mut m = IrdmaModel::new(ModelConfig::new(HwRev::Gen2, 8)).unwrap();
    m.push(&ModelCqe::flush_general(1, 0x21, true, 0)).unwrap();
    // An SQ with 1023 WQEs outstanding (tail 0, head 1023) and no RQ.
    let qp = ImageQp { qpn: 0x21, sq_wqe_cnt: 1024, rq_wqe_cnt: 0, sq_head: Some(1023), ..Default::default() };
    let (items, _) = decode_image(&m.export_image(0, &[qp]).unwrap(), Compat::Current).unwrap();
    assert_eq!(items.len(), 1023);
    let last = match items.last() {
        Some(DecodeItem::Wc(wc)) => wc.wqe_index,
        other => panic!("{other:?}"),
    };
    assert_eq!(last, 1022);
}

/// The limits of the ring and `qp` lines are inclusive, every key is read, and what is read
/// is written back: a 24-bit QPN of all ones, 32768-entry queues, `rq_shift` 3 and an
/// `srq` number round-trip; one past each limit is refused on its own line.
#[test]
fn image_limits_are_inclusive_and_every_key_round_trips() {
    let z = "0".repeat(64);
    let zs = format!("{z}\n").repeat(4);
    let ring = "ring cqe_size=32 entries=4 ci=0 vendor=irdma";
    let img = parse_irdma_image(&format!(
        "{ring}\nqp qpn=ffffff sq_wqe_cnt=32768 rq_wqe_cnt=32768 rq_shift=3 srq=2d\nqp qpn=5 sq_wqe_cnt=4 rq_wqe_cnt=4 srq rq_shift=2\n{zs}"
    ))
    .unwrap();
    let (a, b) = (&img.qps[0], &img.qps[1]);
    assert_eq!((a.qpn, a.sq_wqe_cnt, a.rq_wqe_cnt, a.rq_shift, a.srq), (0xff_ffff, 32768, 32768, 3, Some(0x2d)));
    assert_eq!((b.rq_shift, b.srq), (2, Some(0)));
    assert_eq!(parse_irdma_image(&img.to_text()).unwrap(), img);
    for (qp, want) in [
        ("qpn=1000000 sq_wqe_cnt=4 rq_wqe_cnt=4", "wider than 24 bits"),
        ("qpn=1 sq_wqe_cnt=65536 rq_wqe_cnt=4", "sq_wqe_cnt=65536"),
        ("qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=65536", "rq_wqe_cnt=65536"),
        ("qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 rq_shift=4", "rq_shift=4"),
    ] {
        let e = parse_irdma_image(&format!("{ring}\nqp {qp}\n{zs}")).unwrap_err();
        assert!(e.line == 2 && e.msg.contains(want), "{qp}: {e}");
    }
    // Ring sizes are the ones rdma-core allocates (`cqe + 1`, doubled on GEN2, rounded to
    // even since v64), checked on the ring line before any slot: 4 to 2^22 slots, even on
    // GEN2 (the default) and GEN3, any on GEN1.
    for (entries, hw_rev, want) in [
        (2, "", "entries=2: an irdma ring has 4 to 4194304 slots"),
        (1 << 23, "", "entries=8388608: an irdma ring has 4 to 4194304 slots"),
        (
            201,
            "",
            "entries=201: rdma-core allocates GEN2 rings of an even number of slots (cqe + 1, doubled on GEN2, rounded to even since v64)",
        ),
        (
            101,
            " hw_rev=3",
            "entries=101: rdma-core allocates GEN3 rings of an even number of slots (cqe + 1, doubled on GEN2, rounded to even since v64)",
        ),
    ] {
        let e = parse_irdma_image(&format!("ring cqe_size=32 entries={entries} ci=0 vendor=irdma{hw_rev}\n")).unwrap_err();
        assert_eq!((e.line, e.msg.as_str()), (1, want), "entries={entries}{hw_rev}");
    }
    // The same from the words alone, as a shared parser hands them over.
    for entries in ["3", "7", "8388608"] {
        let words = [("cqe_size", "32"), ("entries", entries), ("ci", "0")];
        let e = header_from_words(&words, 7).unwrap_err();
        assert!(e.line == 7 && e.msg.starts_with(&format!("entries={entries}: ")), "entries={entries}: {e}");
    }
    for (entries, rev) in [("4194304", "2"), ("202", "2"), ("102", "3"), ("101", "1"), ("4", "1")] {
        let words = [("cqe_size", "32"), ("entries", entries), ("ci", "0"), ("hw_rev", rev)];
        assert_eq!(header_from_words(&words, 7).unwrap().entries.to_string(), entries, "GEN{rev}");
    }
    // A ring of a real size (E810, `ibv_create_cq(cqe = 100)`: 202 slots) decodes, its
    // counter running modulo twice its size: the CQE at slot 201 of the second lap (valid
    // bit 0) is the next one at ci=403.
    let mut slots = vec![z.clone(); 202];
    // A SEND completion of WQE 1 on the first qp line's QP, valid bit 0.
    slots[201] = ["0000000000000000", "0100000000000000", "0000000001000000", "0000000001000043"].concat();
    let text = format!(
        "ring cqe_size=32 entries=202 ci=403 vendor=irdma\nqp qpn=1 sq_wqe_cnt=8 rq_wqe_cnt=8\n{}\n",
        slots.join("\n")
    );
    let big = parse_irdma_image(&text).unwrap();
    assert_eq!(parse_irdma_image(&big.to_text()).unwrap(), big);
    let (items, end) = decode_image(&big, Compat::Current).unwrap();
    let idx: Vec<_> = items.iter().map(|i| if let DecodeItem::Wc(c) = i { Some(c.wqe_index) } else { None }).collect();
    assert_eq!((idx, end.ci), (vec![Some(1)], 404), "one slot consumed");
    // mlx5's line kinds (its WQE buffers) mean nothing here.
    let e = parse_irdma_image(&format!("{ring}\nwqe qpn=1 queue=rq index=0 bytes=00\n{zs}")).unwrap_err();
    assert_eq!(e.to_string(), "line 2: a wqe line has no meaning in an irdma ring");
    // At most 64 QPs.
    let qps = |n: u32| (1..=n).map(|k| ImageQp { qpn: k, sq_wqe_cnt: 4, rq_wqe_cnt: 4, ..Default::default() });
    let header = img.header;
    let slots = vec![0; 4 * 32];
    assert!(image_from_parts(header, qps(64).collect(), slots.clone()).is_ok());
    let e = image_from_parts(header, qps(65).collect(), slots).unwrap_err();
    assert!(e.msg.contains("65 qp lines"), "{e}");
}

/// A GEN3 SRQ receive names its QP in qword5 (qword1 carries the wr_id): an image decodes
/// it to the QP of that handle, here the second `qp` line (a UD QP, so its completion
/// carries the GRH flag that the first, RC, QP's would not), with the CQE's own wr_id.
#[test]
fn gen3_srq_receives_decode_to_the_qp_their_qword5_names() {
    let mut m = IrdmaModel::new(ModelConfig::new(HwRev::Gen3, 8)).unwrap();
    m.push(&ModelCqe::srq_recv(2, 0x22, 0xdead_beef, 77, rq_op::ROCE_SEND_ONLY)).unwrap();
    let qps = [
        ImageQp { qpn: 0x21, sq_wqe_cnt: 8, rq_wqe_cnt: 8, ..Default::default() },
        ImageQp { qpn: 0x22, sq_wqe_cnt: 8, rq_wqe_cnt: 8, ud: true, ..Default::default() },
    ];
    let img = m.export_image(0, &qps).unwrap();
    let (items, end) = decode_image(&parse_irdma_image(&img.to_text()).unwrap(), Compat::Current).unwrap();
    let [DecodeItem::Wc(wc)] = items.as_slice() else {
        panic!("{items:?}");
    };
    assert_eq!((wc.wr_id, wc.qp_num, wc.byte_len, wc.status as u8), (0xdead_beef, 0x22, 77, 0));
    assert!(wc.wc_flags.contains(WcFlags::GRH), "{wc:?}");
    assert_eq!(end.ci, 1);
}

/// An iWARP QP with connection WQEs (`transport=iwarp conn_wqes=3`) decodes as the live
/// poller polls it: the connection WQE's CQE gives no completion, and immediate data makes
/// a receive a write with immediate. Read as RoCE, the same ring gives other completions;
/// the words round-trip, and bad values are refused on their line.
#[test]
fn iwarp_qps_decode_as_the_live_poller_polls_them() {
    let gen = HwRev::Gen2;
    let mut m = IrdmaModel::new(ModelConfig::new(gen, 16)).unwrap();
    let iwarp = QpConfig { transport: dvcq_e810_dv::Transport::Iwarp, conn_wqes: 3, ..QpConfig::rc(0x31, 8, 8) };
    let mut qps = QpRegistry::new(gen);
    let id = qps.register(1, iwarp).unwrap();
    qps.preset_identity(id).unwrap();
    // The SQ as rdma-core leaves it once connected: past the connection WQEs, and empty
    // (the user's WR at 3 completes below without a post, as in any image).
    qps.qp_mut(id).unwrap().sq.set(3, 3);
    let mut cq = m.poller(qps, Compat::Current).unwrap();
    m.push(&ModelCqe::send(1, 0x31, 0, sq_op::SEND)).unwrap(); // a connection WQE
    m.push(&ModelCqe::recv(1, 0x31, 0, 0, rq_op::ROCE_SEND_ONLY, 8).with_imm(5)).unwrap();
    m.push(&ModelCqe::send(1, 0x31, 3, sq_op::SEND)).unwrap();
    let qp = ImageQp {
        qpn: 0x31,
        sq_wqe_cnt: 8,
        rq_wqe_cnt: 8,
        iwarp: true,
        conn_wqes: 3,
        sq_head: Some(3),
        sq_tail: Some(3),
        ..Default::default()
    };
    let img = m.export_image(0, &[qp]).unwrap();
    let text = img.to_text();
    assert!(text.contains("qp qpn=31 sq_wqe_cnt=8 rq_wqe_cnt=8 transport=iwarp conn_wqes=3 sq_head=3"), "{text}");
    assert_eq!(parse_irdma_image(&text).unwrap(), img);

    let mut out = [Completion::default(); 8];
    let n = cq.poll(&mut out);
    let (items, _) = decode_image(&img, Compat::Current).unwrap();
    let live: Vec<DecodeItem> = out[..n].iter().map(|wc| DecodeItem::from_completion(wc, 16)).collect();
    assert_eq!(items, live);
    let summary = |items: &[DecodeItem]| -> Vec<(u16, u8)> {
        items
            .iter()
            .map(|it| match it {
                DecodeItem::Wc(wc) => (wc.wqe_index, wc.opcode as u8),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    // RECV_RDMA_WITH_IMM (129), then the user's send (opcode 0) at WQE 3.
    assert_eq!(summary(&items), [(0, 129), (3, 0)]);

    // The same ring read as RoCE QP without connection WQEs.
    let mut roce = img.clone();
    roce.qps[0] = ImageQp { iwarp: false, conn_wqes: 0, ..qp };
    let (items, _) = decode_image(&roce, Compat::Current).unwrap();
    assert_eq!(summary(&items), [(0, 0), (0, 128), (3, 0)]);

    let z = "0".repeat(64);
    for (words, want) in [
        ("transport=ib", "transport=ib: must be roce or iwarp"),
        ("transport", "transport needs a value: roce or iwarp"),
        ("conn_wqes=8", "conn_wqes=8: must be below sq_wqe_cnt=8"),
        ("conn_wqes=70000", "conn_wqes=70000: must be below sq_wqe_cnt"),
        ("conn_wqes=x", "conn_wqes=x is not a decimal number"),
        ("conn_wqes=4294967296", "conn_wqes=4294967296 is out of range: 0 to 4294967295"),
    ] {
        let text = format!(
            "ring cqe_size=32 entries=4 ci=0\nqp qpn=1 sq_wqe_cnt=8 rq_wqe_cnt=8 {words}\n{}",
            format!("{z}\n").repeat(4)
        );
        let e = parse_irdma_image(&text).unwrap_err();
        assert_eq!((e.line, e.msg.as_str()), (2, want), "{words}");
    }
    let text = format!(
        "ring cqe_size=32 entries=4 ci=0\nqp qpn=1 sq_wqe_cnt=8 rq_wqe_cnt=8 transport=roce\n{}",
        format!("{z}\n").repeat(4)
    );
    assert!(!parse_irdma_image(&text).unwrap().qps[0].iwarp);
}
