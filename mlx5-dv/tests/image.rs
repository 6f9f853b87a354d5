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
