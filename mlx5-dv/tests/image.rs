//! mlx5 ring images beyond the format's first words: what a ring captured from a poller
//! with signature mkeys (and, below, XRC SRQs, receive WQs and registered WQE buffers)
//! needs to decode as that poller polled it, written out and read back.

use dvcq_mlx5_dv::image::{decode_image, parse_mlx5_image, Mlx5Image};
use dvcq_mlx5_dv::model::build;
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig};
use dvcq_mlx5_dv::{CqConfig, CqeVersion, QpConfig, Registry, SigError};
use dvcq_provider::image::{format_decode, DecodeItem};
use dvcq_provider::testing::drain;
use dvcq_provider::FaultKind;
use dvcq_uapi::mlx5::opcode::wqe_opcode;

const QPN: u32 = 0x1a2;

/// Items with their completions' wr_ids cleared: what a ring image's decode (identity wr_id
/// tables) and a live poll of the same ring share.
fn without_wr_ids(items: &[DecodeItem]) -> Vec<DecodeItem> {
    items
        .iter()
        .map(|i| match *i {
            DecodeItem::Wc(c) => DecodeItem::Wc(dvcq_provider::Completion { wr_id: 0, ..c }),
            bad => bad,
        })
        .collect()
}

/// Plays `entries` on a model CQ of `reg`'s QPs, polls them, and exports the ring as it
/// was before the poll; returns the image and what the live poll gave.
fn capture(reg: Registry, version: CqeVersion, entries: &[build::Entry]) -> (Mlx5Image, Vec<DecodeItem>) {
    let m_cfg = ModelConfig::new(16);
    let mut m = Mlx5Model::new(m_cfg).unwrap();
    let image_reg = reg.clone();
    let mut cq = m.poller::<64>(reg, CqConfig { cqe_version: version, ..CqConfig::default() }).unwrap();
    for e in entries {
        m.push(e).unwrap();
    }
    let img = Mlx5Image::from_ring(64, 0, version, None, &image_reg, m.snapshot());
    let live = drain(&mut cq, 4).iter().map(|c| DecodeItem::from_completion(c, 16)).collect();
    (img, live)
}

/// The signature mkeys a registry holds go on the ring line (`sig_mkeys=`): a SIG_ERR of
/// one is recorded without an item when the image decodes, one of another mkey is a
/// `sig_err` item, as the live poll gave; the text reads back to the same image.
#[test]
fn signature_mkeys_round_trip() {
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 8, 8)).unwrap();
    reg.add_sig_mkey(0x55).unwrap();
    reg.add_sig_mkey(0x3).unwrap();
    let e = |mkey| SigError { mkey, syndrome: 1 << 13, ..SigError::default() };
    let entries = [
        build::req(QPN, 0, wqe_opcode::SEND, 0),
        build::sig_error(&e(0x5501)),
        build::sig_error(&e(0x7700)),
        build::req(QPN, 1, wqe_opcode::SEND, 0),
    ];
    let (img, live) = capture(reg, CqeVersion::V0, &entries);
    assert_eq!(img.sig_mkeys, [0x3, 0x55]);
    let text = img.to_text();
    assert!(text.starts_with("ring cqe_size=64 entries=16 ci=0 vendor=mlx5 sig_mkeys=3,55\n"), "{text}");
    assert_eq!(parse_mlx5_image(&text).unwrap(), img);
    let (items, end) = decode_image(&img).unwrap();
    assert_eq!(items, live);
    let out = format_decode(&items, &end);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "bad slot=2 reason=sig_err", "{out}");
    assert_eq!(lines.len(), 4, "two completions, one item, the end line: {out}");
    assert_eq!(items[1], DecodeItem::Bad { slot: 2, reason: FaultKind::SigErr });

    // Without the word (an older writer), every SIG_ERR is an item.
    let bare = text.replace(" sig_mkeys=3,55", "");
    let (items, _) = decode_image(&parse_mlx5_image(&bare).unwrap()).unwrap();
    assert_eq!(items.iter().filter(|i| matches!(i, DecodeItem::Bad { .. })).count(), 2);
    for (bad, msg) in [
        ("sig_mkeys=3,zz", "line 1: sig_mkeys: \"zz\" is not a hex mkey index"),
        ("sig_mkeys=1000000", "line 1: sig_mkeys: mkey index 0x1000000 is wider than 24 bits"),
        ("sig_mkeys=3,3", "sig_mkeys: mkey index 0x3 is already registered"),
    ] {
        let img = parse_mlx5_image(&text.replace("sig_mkeys=3,55", bad));
        let e = img.and_then(|i| decode_image(&i).map(|_| ())).unwrap_err();
        assert_eq!(e.to_string(), msg);
    }
}

/// A receive queue consumed out of order, then flushed: the device filled WQE 1 before
/// WQE 0, and the QP's error flushed 0, 2 and 3. rdma-core takes each receive's wr_id from
/// the WQE its CQE's counter names (v55 and later: `rq.wrid[wqe_counter & (wqe_cnt - 1)]`
/// in `handle_responder` and in the error branch), so the canonical lines retire WQEs
/// 1, 0, 2, 3; v44 to v54, which took the RQ tail, would have said 0, 1, 2, 3, and handed
/// WQE 0's wr_id to the receive that landed in WQE 1.
#[test]
fn an_rq_consumed_out_of_order_then_flushed_polls_as_rdma_core_v55() {
    use dvcq_mlx5_dv::model::build::ErrSpec;
    use dvcq_uapi::mlx5::opcode::{cqe_opcode, syndrome};
    let text = "\
ring cqe_size=64 entries=8 ci=0 vendor=mlx5
qp qpn=1a2 sq_wqe_cnt=8 rq_wqe_cnt=4
0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000400000000000000000000001a200010020
000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000f905000001a2000000e2
000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000f905000001a2000200e2
000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000f905000001a2000300e2
000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000f0
000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000f0
000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000f0
000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000f0
";
    let wc = |idx, status, opcode, vendor_err, len| {
        format!("wc wqe_idx={idx} status={status} opcode={opcode} vendor_err={vendor_err} byte_len={len} imm=0x0 qp_num=0x1a2 src_qp=0x0 wc_flags=0x0 pkey_index=0 slid=0 sl=0 dlid_path_bits=0")
    };
    let want = [
        wc(1, 0, 128, "0x0", 64),
        wc(0, 5, 0, "0xf9", 0),
        wc(2, 5, 0, "0xf9", 0),
        wc(3, 5, 0, "0xf9", 0),
        "end ci=4 dbrec_ci=4".to_string(),
    ]
    .join("\n")
        + "\n";
    let img = parse_mlx5_image(text).unwrap();
    let (items, end) = decode_image(&img).unwrap();
    assert_eq!(format_decode(&items, &end), want);

    // The same ring from the model, polled live with posted wr_ids, in batches and one at a
    // time: each receive gets the wr_id of the WQE its CQE names.
    let flush = |wqe_counter| {
        build::err(ErrSpec {
            qpn: QPN,
            wqe_counter,
            syndrome: syndrome::WR_FLUSH_ERR,
            vendor_err_synd: 0xf9,
            ..ErrSpec::default()
        })
    };
    let entries = [build::resp(cqe_opcode::RESP_SEND, QPN, 1, 64, 0), flush(0), flush(2), flush(3)];
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QPN, 8, 4)).unwrap();
    let rq = &mut reg.qp_mut(QPN).unwrap().rq;
    for w in 0xb0..0xb4 {
        rq.post(w);
    }
    for batch in [1, 16] {
        let mut m = Mlx5Model::new(ModelConfig::new(8)).unwrap();
        let mut cq = m.poller::<64>(reg.clone(), CqConfig::default()).unwrap();
        for e in &entries {
            m.push(e).unwrap();
        }
        let got: Vec<(u64, u16)> = drain(&mut cq, batch).iter().map(|c| (c.wr_id, c.wqe_index)).collect();
        assert_eq!(got, [(0xb1, 1), (0xb0, 0), (0xb2, 2), (0xb3, 3)], "batch {batch}");
        assert_eq!(cq.registry().qp(QPN).unwrap().rq.outstanding(), 0);
        // The model wrote the ring the text above holds.
        let snap = Mlx5Image::from_ring(64, 0, CqeVersion::V0, None, &Registry::new(), m.snapshot());
        assert_eq!(snap.slots, img.slots);
    }
}

/// Every registry case the poller handles, captured from a live poller and replayed from
/// the image: QPs of several types (an RC QP with registered receive and send WQEs, a UC
/// QP whose inline READ response is refused, a raw Ethernet QP with the checksum flag), a
/// QP on an SRQ with registered WQEs, an XRC SRQ and a receive WQ named by user index, the
/// memory regions inline data goes into, what is posted in each queue, and signature
/// mkeys. The image's text reads back to the same image, and decodes to what the live
/// poll gave, copies that succeed and fail included; without its `mr` lines every copy is
/// a protection error, so they carry what matters.
#[test]
fn every_registry_case_round_trips() {
    use dvcq_mlx5_dv::model::wqe::{self, DataSeg};
    use dvcq_mlx5_dv::QpType;
    use dvcq_provider::{DmaBuffer, WcStatus};
    use dvcq_uapi::mlx5::opcode::cqe_opcode;
    use std::sync::Arc;
    const LKEY: u32 = 0x1234;
    let dst = Arc::new(DmaBuffer::new(4096).unwrap());
    let seg = |off: u64, len| DataSeg { addr: dst.as_ptr() as u64 + off, len, lkey: LKEY };
    let wq = |len: usize, wqes: &[(usize, Vec<u8>)]| {
        let mem = Arc::new(DmaBuffer::new(len).unwrap());
        for (off, b) in wqes {
            mem.write_bytes(*off, b).unwrap();
        }
        mem.wq_buffer(0, len).unwrap()
    };
    let mut reg = Registry::new();
    reg.add_memory_region(dst.memory_region(0, 4096, LKEY).unwrap()).unwrap();
    reg.set_null_lkey(Some(0x99));
    reg.add_sig_mkey(0x12).unwrap();
    // Slot 0: an RC QP, its RQ's WQEs of 32 bytes, a READ posted in its SQ.
    reg.add_qp(QpConfig::rc(0x10, 4, 4)).unwrap();
    let rq = wq(4 * 32, &[(0, wqe::recv_wqe(None, &[seg(0, 16)], 32)), (32, wqe::recv_wqe(None, &[seg(64, 4)], 32))]);
    reg.set_recv_wqes(0x10, rq, 32, false).unwrap();
    reg.set_send_wqes(0x10, wq(4 * 64, &[(0, wqe::send_wqe(wqe_opcode::RDMA_READ, 0, 0x10, &[seg(128, 8)]))])).unwrap();
    let qp = reg.qp_mut(0x10).unwrap();
    qp.rq.post(0xa0);
    qp.rq.post(0xa1);
    qp.sq.post(0xa2, 1);
    // Slot 1: a QP on an SRQ of 8 entries, with the SRQ's WQEs registered.
    reg.add_srq(0x31, 8).unwrap();
    reg.add_qp(QpConfig { srqn: Some(0x31), ..QpConfig::rc(0x20, 4, 0) }).unwrap();
    let srq = wq(8 * 32, &[(2 * 32, wqe::recv_wqe(Some(wqe::srq_next(3)), &[seg(256, 8)], 32))]);
    reg.set_srq_wqes(0x31, srq, 32).unwrap();
    reg.srq_mut(0x31).unwrap().post(2, 0xb2);
    // Slots 2 and 3: an XRC SRQ and a receive WQ.
    reg.add_xrc_srq(0x44, 2, 16).unwrap().post(3, 0xc3);
    reg.add_rwq(0x55, 3, 4).unwrap().post(0xd0);
    // Slot 4: a UC QP with a READ posted (its inline response is refused).
    reg.add_qp(QpConfig { qp_type: QpType::Uc, ..QpConfig::rc(0x60, 4, 4) }).unwrap();
    reg.set_send_wqes(0x60, wq(4 * 64, &[(0, wqe::send_wqe(wqe_opcode::RDMA_READ, 0, 0x60, &[seg(384, 8)]))])).unwrap();
    reg.qp_mut(0x60).unwrap().sq.post(0xe0, 1);
    // Slot 5: a raw Ethernet QP with the RX checksum capability.
    reg.add_qp(QpConfig { qp_type: QpType::RawPacket, rx_csum: true, ..QpConfig::rc(0x70, 4, 4) }).unwrap();
    reg.qp_mut(0x70).unwrap().rq.post(0xf0);

    let recv = |qpn, ctr, uidx| build::resp(cqe_opcode::RESP_SEND, qpn, ctr, 0, 0).srqn_uidx(uidx);
    let sig = |mkey| build::sig_error(&SigError { mkey, syndrome: 1 << 13, ..SigError::default() });
    let entries = [
        recv(0x10, 0, 0).inline(&[1; 10]),
        recv(0x10, 1, 0).inline(&[2; 8]),
        build::req(0x10, 0, wqe_opcode::RDMA_READ, 0).srqn_uidx(0).inline(&[3; 8]),
        recv(0x20, 2, 1).inline(&[4; 6]),
        recv(0x300, 3, 2),
        recv(0x400, 0, 3),
        build::req(0x60, 0, wqe_opcode::RDMA_READ, 0).srqn_uidx(4).inline(&[5; 8]),
        build::req(0x10, 1, wqe_opcode::SEND, 0).srqn_uidx(2),
        recv(0x70, 0, 5).offloads(0x06, 0x08, 0xabcd, 0x1111),
        sig(0x1234),
        sig(0x9900),
    ];
    let (img, live) = capture(reg, CqeVersion::V1, &entries);
    let statuses: Vec<_> = live
        .iter()
        .map(|i| match i {
            DecodeItem::Wc(c) => Ok(c.status),
            DecodeItem::Bad { reason, .. } => Err(*reason),
        })
        .collect();
    let ok = Ok(WcStatus::Success);
    assert_eq!(
        statuses,
        [
            ok,
            Ok(WcStatus::LocLenErr),
            ok,
            ok,
            ok,
            ok,
            Ok(WcStatus::GeneralErr),
            Err(FaultKind::UnknownQp),
            ok,
            Err(FaultKind::SigErr)
        ]
    );
    let text = img.to_text();
    let back = parse_mlx5_image(&text).unwrap();
    assert_eq!(back, img, "{text}");
    assert_eq!(back.to_text(), text);
    let (items, _) = decode_image(&back).unwrap();
    // The image's queues are identity tables: everything but the wr_ids is the live poll's.
    assert_eq!(without_wr_ids(&items), without_wr_ids(&live), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    for want in [
        "ring cqe_size=64 entries=16 ci=0 vendor=mlx5 cqe_ver=1 sig_mkeys=12 null_lkey=99",
        "qp qpn=10 sq_wqe_cnt=4 rq_wqe_cnt=4 rq_stride=32 rq_posted=2 sq_wqes sq_tail=0 sq_posted=1",
        "qp qpn=20 sq_wqe_cnt=4 rq_wqe_cnt=0 srq=31 srq_wqe_cnt=8 srq_stride=32 srq_posted=1",
        "qp qpn=44 sq_wqe_cnt=1 rq_wqe_cnt=0 srq=44 kind=xrc_srq srq_wqe_cnt=16 srq_posted=1",
        "qp qpn=55 sq_wqe_cnt=1 rq_wqe_cnt=4 kind=rwq rq_posted=1",
        "qp qpn=60 sq_wqe_cnt=4 rq_wqe_cnt=4 qp_type=uc sq_wqes sq_tail=0 sq_posted=1",
        "qp qpn=70 sq_wqe_cnt=4 rq_wqe_cnt=4 qp_type=raw_packet rx_csum rq_posted=1",
        &format!("mr lkey=1234 addr={:x} len=4096", dst.as_ptr() as u64),
    ] {
        assert!(lines.contains(&want), "{want:?} not in\n{text}");
    }
    assert_eq!(lines.iter().filter(|l| l.starts_with("wqe ")).count(), 5, "{text}");

    // Without its memory regions, every copy is refused.
    let no_mr: String = text.lines().filter(|l| !l.starts_with("mr ")).map(|l| format!("{l}\n")).collect();
    let (items, _) = decode_image(&parse_mlx5_image(&no_mr).unwrap()).unwrap();
    let prot = items.iter().filter(|i| matches!(i, DecodeItem::Wc(c) if c.status == WcStatus::LocProtErr)).count();
    assert_eq!(prot, 4, "the three receives and the READ that wrote into the region");
}

/// The new line kinds and words are checked; a line kind mlx5 does not know is refused,
/// as a reader that predates `mr` and `wqe` refuses those.
#[test]
fn malformed_extensions_name_the_line_and_the_problem() {
    let zero = "00".repeat(64);
    let slots = format!("{zero}\n{zero}\n");
    let img = |head: &str| parse_mlx5_image(&format!("ring cqe_size=64 entries=2 ci=0\n{head}{slots}"));
    let cases = [
        (
            "qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 qp_type=rd\n",
            "line 2: qp_type=rd: must be rc, uc, ud, raw_packet, xrc_send, xrc_recv or driver",
        ),
        ("qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 ud qp_type=uc\n", "line 2: ud and qp_type=uc disagree"),
        ("qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 kind=srq\n", "line 2: kind=srq: must be qp, xrc_srq or rwq"),
        (
            "qp qpn=1 sq_wqe_cnt=1 rq_wqe_cnt=0 srq=2 kind=xrc_srq\n",
            "line 2: kind=xrc_srq: its srq= is its own number (qpn=)",
        ),
        ("qp qpn=1 sq_wqe_cnt=1 rq_wqe_cnt=4 srq=2 kind=rwq\n", "line 2: kind=rwq: a receive WQ has no SRQ"),
        ("qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 rq_stride=24\n", "line 2: rq_stride=24: a power of two from 16"),
        ("qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 rq_sig\n", "line 2: rq_sig without rq_stride="),
        ("qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 rq_posted=5\n", "line 2: rq_posted=5: more than the receive queue holds"),
        (
            "qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 sq_tail=4 sq_posted=1\n",
            "line 2: sq_tail=4 sq_posted=1: outside a send queue of 4 entries",
        ),
        (
            "qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 srq_stride=32\n",
            "line 2: srq_wqe_cnt=, srq_stride= and srq_posted= need an srq",
        ),
        ("qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=0 srq=2 srq_stride=16\n", "line 2: srq_stride=16: a power of two from 32"),
        ("mr lkey=1 addr=1000 len=0\n", "line 2: mr of 0 bytes at 0x1000: at least 1 byte, inside the address space"),
        ("mr lkey=1 addr=1000 len=8\nmr lkey=1 addr=2000 len=8\n", "line 3: lkey 0x1 is given twice"),
        (
            "qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4\nwqe qpn=1 queue=rq index=0 bytes=00\n",
            "line 3: no qp line 1 has a registered rq buffer",
        ),
        (
            "qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 rq_stride=16\nwqe qpn=1 queue=rq index=4 bytes=00\n",
            "line 3: wqe 4 of 1 bytes: the queue has 4 wqes of 16 bytes",
        ),
        (
            "qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 sq_wqes\nwqe qpn=1 queue=sq index=0 bytes=0\n",
            "line 3: bytes= is not whole bytes of hex",
        ),
        ("srq srqn=1 stride=32\n", "line 2: unknown line kind \"srq\": mlx5 rings know qp, mr and wqe lines"),
    ];
    for (head, msg) in cases {
        assert_eq!(img(head).unwrap_err().to_string(), msg, "{head}");
    }
}
