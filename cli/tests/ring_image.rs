//! Ring images end to end: model scenarios exported, round-tripped through text and decoded;
//! decoding an image equals polling the live ring; malformed images give line-numbered
//! errors; arbitrary input never panics.

use dvcq::image::decode_text;
use dvcq::mlx5::image::{decode_image, parse_mlx5_image, Mlx5Image};
use dvcq::mlx5::model::build::{self, ErrSpec};
use dvcq::mlx5::model::{Mlx5Model, ModelConfig};
use dvcq::mlx5::{CqConfig, CqeVersion, QpConfig, Registry};
use dvcq::provider::image::{format_decode, wc_line, DecodeItem};
use dvcq::uapi::mlx5::opcode::{cqe_opcode, syndrome, wqe_opcode};
use dvcq::Completion;
use dvcq_cli::decode::{decode_mlx5, Mlx5Options};
use dvcq_cli::scenario::{self, Scenario};
use proptest::prelude::*;

/// Every scenario's image survives the text round trip with all its completions: the text
/// decodes to what the image itself decodes to, the mlx5 consumer counter ends one slot past
/// the start per completion, and what the completions say does not depend on the slot size
/// (mlx5's 64 and 128 bytes) or, for sends, receives and flushes, on the irdma generation.
#[test]
fn every_scenario_round_trips_and_decodes() {
    use dvcq_uapi::irdma::HwRev;
    for sc in [Scenario::Mixed, Scenario::Errors, Scenario::Laps, Scenario::Stream, Scenario::Iwarp] {
        let mut by_size = Vec::new();
        for size in [64, 128] {
            if sc == Scenario::Iwarp {
                let e = scenario::mlx5(sc, 32, size, None).unwrap_err();
                assert_eq!(e, "the iwarp scenario is irdma only: ConnectX QPs are InfiniBand or RoCE");
                continue;
            }
            let img = scenario::mlx5(sc, 32, size, None).unwrap();
            let text = img.to_text();
            assert_eq!(parse_mlx5_image(&text).unwrap(), img, "{sc:?}/{size}");
            let out = decode_text(&text).unwrap();
            let (items, end) = decode_image(&img).unwrap();
            assert_eq!(out, format_decode(&items, &end), "{sc:?}/{size}: the text decodes as the image does");
            assert!(items.len() > 2, "{sc:?}/{size}: {out}");
            // One slot per completion, but in mixed, whose signature error CQE is consumed
            // without one.
            if sc != Scenario::Mixed {
                assert_eq!(end.ci, img.ci + items.len() as u32, "{sc:?}/{size}: one slot per completion");
            }
            by_size.push(out);
        }
        if let [a, b] = &by_size[..] {
            assert_eq!(a, b, "{sc:?}: 64- and 128-byte CQEs say the same");
        }
        let mut by_rev = Vec::new();
        for rev in [HwRev::Gen1, HwRev::Gen2, HwRev::Gen3] {
            let text = scenario::irdma(sc, 32, rev).unwrap();
            let img = dvcq::irdma::image::parse_irdma_image(&text).unwrap();
            assert_eq!(img.to_text(), text, "{sc:?}/{rev:?}: the text round trip");
            let out = decode_text(&text).unwrap();
            let (items, end) = dvcq::irdma::image::decode_image(&img, dvcq::irdma::Compat::Current).unwrap();
            assert_eq!(out, format_decode(&items, &end), "{sc:?}/{rev:?}: the text decodes as the image does");
            assert!(out.lines().filter(|l| l.starts_with("wc ")).count() > 1, "{sc:?}/{rev:?}: {out}");
            by_rev.push((rev, wc_summary(&out)));
        }
        // Sends, receives and flushes of one code complete alike on every generation
        // (mixed and iwarp differ by design: GEN3's op types, its flush per WR).
        if matches!(sc, Scenario::Laps | Scenario::Stream | Scenario::Errors) {
            for (rev, summary) in &by_rev[1..] {
                assert_eq!(summary, &by_rev[0].1, "{sc:?}: {rev:?} against GEN1");
            }
        }
    }
}

#[test]
fn compressed_rings_decode_like_uncompressed_ones() {
    use dvcq::mlx5::{CompLayout, CompressionConfig, MiniFormat};
    let plain = decode_text(&scenario::mlx5(Scenario::Stream, 64, 64, None).unwrap().to_text()).unwrap();
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        for format in [MiniFormat::Hash, MiniFormat::Csum, MiniFormat::CsumStridx] {
            let img = scenario::mlx5(Scenario::Stream, 64, 64, Some(CompressionConfig { layout, format })).unwrap();
            let text = img.to_text();
            assert!(
                text.starts_with(&format!(
                    "ring cqe_size=64 entries=64 ci=33 vendor=mlx5 comp={} mini={}",
                    layout.word(),
                    format.word()
                )),
                "{}",
                text.lines().next().unwrap()
            );
            assert_eq!(parse_mlx5_image(&text).unwrap(), img);
            assert_ne!(
                img.slots,
                scenario::mlx5(Scenario::Stream, 64, 64, None).unwrap().slots,
                "the model compressed something"
            );
            assert_eq!(decode_text(&text).unwrap(), plain, "{layout:?}/{format:?}");
        }
    }
}

#[test]
fn mixed_scenario_decodes_to_the_expected_lines() {
    let out = decode_text(&scenario::mlx5(Scenario::Mixed, 16, 64, None).unwrap().to_text()).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 10, "{out}");
    assert_eq!(lines[0], "wc wqe_idx=0 status=0 opcode=0 vendor_err=0x0 byte_len=0 imm=0x0 qp_num=0x1a2 src_qp=0x0 wc_flags=0x0 pkey_index=0 slid=0 sl=0 dlid_path_bits=0");
    assert_eq!(lines[1], "wc wqe_idx=1 status=0 opcode=2 vendor_err=0x0 byte_len=4096 imm=0x0 qp_num=0x1a2 src_qp=0x0 wc_flags=0x0 pkey_index=0 slid=0 sl=0 dlid_path_bits=0");
    // Immediate data prints as the host reading of network-order bytes (x86: swapped).
    let imm = u32::from_ne_bytes(0x1122_3344u32.to_be_bytes());
    assert!(lines[2].contains(&format!("opcode=129 vendor_err=0x0 byte_len=256 imm={imm:#x}")), "{}", lines[2]);
    assert!(lines[3].contains("opcode=128") && lines[3].contains("imm=0xabcdef") && lines[3].contains("wc_flags=0x8"));
    assert!(
        lines[4].contains("src_qp=0x4d2")
            && lines[4].contains("wc_flags=0x3")
            && lines[4].contains("slid=7 sl=3 dlid_path_bits=1")
    );
    assert!(lines[5].starts_with("wc wqe_idx=2 status=12 opcode=0 vendor_err=0x81"));
    assert!(lines[6].starts_with("wc wqe_idx=3 status=5") && lines[7].starts_with("wc wqe_idx=2 status=5"));
    assert!(lines[8].starts_with("bad slot=") && lines[8].ends_with("reason=unknown_qp"));
    assert_eq!(lines[9], "end ci=19 dbrec_ci=19");
}

/// The `key=value` fields of a canonical `wc` line.
fn wc_fields(line: &str) -> std::collections::HashMap<&str, &str> {
    assert!(line.starts_with("wc "), "{line}");
    line[3..].split(' ').filter_map(|kv| kv.split_once('=')).collect()
}

/// `(wqe_idx, status, opcode, byte_len, qp_num, vendor_err)` of a `wc` line.
type WcRow = (u32, u32, u32, u32, String, String);

/// The [`WcRow`] of every `wc` line, and the ci of the `end` line.
fn wc_summary(out: &str) -> (Vec<WcRow>, u32) {
    let num = |f: &std::collections::HashMap<&str, &str>, k: &str| f[k].parse::<u32>().unwrap();
    let wcs = out
        .lines()
        .filter(|l| l.starts_with("wc "))
        .map(|l| {
            let f = wc_fields(l);
            let (qp, ve) = (f["qp_num"].to_string(), f["vendor_err"].to_string());
            (num(&f, "wqe_idx"), num(&f, "status"), num(&f, "opcode"), num(&f, "byte_len"), qp, ve)
        })
        .collect();
    let end = out.lines().last().unwrap();
    let ci = end.strip_prefix("end ci=").and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    (wcs, ci)
}

/// Each scenario holds what `dvcq ring export --help` says it does, on both models: the
/// images start mid-ring (laps: after three and a half laps) and hold exactly the
/// completions the scenario writes, in order.
#[test]
fn every_scenario_holds_what_its_help_says() {
    use dvcq::irdma::status::flush_code_status;
    use dvcq::mlx5::status::syndrome_status;
    use dvcq::uapi::irdma::codes::flush;
    use dvcq_uapi::irdma::HwRev;
    let entries = 32u32;
    let mid = entries / 2 + 1;
    let laps = entries * 3 + entries / 2;
    let (send, recv) = (0, 128);
    for size in [64, 128] {
        let what = format!("mlx5 {size}-byte");
        // Errors: one error CQE per syndrome, requester and responder in turn, in syndrome
        // order, with vendor and hardware syndromes.
        let img = scenario::mlx5(Scenario::Errors, 64, size, None).unwrap();
        let (wcs, ci) = wc_summary(&decode_text(&img.to_text()).unwrap());
        assert_eq!((ci, wcs.len()), (64 / 2 + 1 + syndrome::ALL.len() as u32, syndrome::ALL.len()), "{what}");
        for (k, s) in syndrome::ALL.into_iter().enumerate() {
            let w = &wcs[k];
            assert_eq!((w.0, w.1), (k as u32, syndrome_status(s) as u32), "{what}: syndrome {s:#x}");
            assert_eq!(w.5, format!("{:#x}", 0x80 + k), "{what}: syndrome {s:#x}");
            let at = ((64 / 2 + 1 + k as u32) % 64 * size + size - 64) as usize;
            let cqe = decode_mlx5(img.slots[at..at + 64].try_into().unwrap(), Mlx5Options::default());
            let opcode = if k % 2 == 0 { cqe_opcode::REQ_ERR } else { cqe_opcode::RESP_ERR };
            assert_eq!((cqe.opcode, cqe.syndrome, cqe.qpn), (opcode, Some(s), 0x1a2), "{what}: syndrome {s:#x}");
            assert_eq!((cqe.hw_err_synd, cqe.hw_synd_type), (Some(1), Some(2)), "{what}: syndrome {s:#x}");
        }
        // Mixed: the error CQEs' sides and posted opcode (the wc lines are checked above).
        let img = scenario::mlx5(Scenario::Mixed, entries, size, None).unwrap();
        let raw = |k: u32| {
            let at = ((mid + k) % entries * size + size - 64) as usize;
            decode_mlx5(img.slots[at..at + 64].try_into().unwrap(), Mlx5Options::default())
        };
        let errs: Vec<_> = (6..9).map(raw).map(|c| (c.opcode, c.vendor_err_synd, c.wqe_opcode)).collect();
        let (req, resp, flush_synd) = (cqe_opcode::REQ_ERR, cqe_opcode::RESP_ERR, Some(0xf9));
        assert_eq!(
            errs,
            [(req, Some(0x81), Some(wqe_opcode::SEND)), (req, flush_synd, Some(0)), (resp, flush_synd, None)],
            "{what}"
        );
        // Laps: a full ring after three and a half laps, sends and receives in turn.
        let (wcs, ci) =
            wc_summary(&decode_text(&scenario::mlx5(Scenario::Laps, entries, size, None).unwrap().to_text()).unwrap());
        assert_eq!((ci, wcs.len()), (laps + entries, entries as usize), "{what}");
        for (i, w) in wcs.iter().enumerate() {
            let want = if i % 2 == 0 { (i as u32, 0, send, 0) } else { (i as u32, 0, recv, i as u32) };
            assert_eq!((w.0, w.1, w.2, w.3), want, "{what} laps: {i}");
        }
        // Stream: receives, then sends, then a local protection error after the last send.
        let (wcs, ci) = wc_summary(
            &decode_text(&scenario::mlx5(Scenario::Stream, entries, size, None).unwrap().to_text()).unwrap(),
        );
        let (recvs, sends) = ((entries - 1) / 2, entries - 1 - (entries - 1) / 2);
        assert_eq!((ci, wcs.len()), (mid + entries, entries as usize), "{what}");
        for (i, w) in wcs.iter().enumerate() {
            let i = i as u32;
            let want = match i {
                _ if i < recvs => (i, 0, recv, 100 + i, "0x0"),
                _ if i < recvs + sends => (i - recvs, 0, send, 0, "0x0"),
                _ => (sends, syndrome_status(syndrome::LOCAL_PROT_ERR) as u32, send, 0, "0x51"),
            };
            assert_eq!((w.0, w.1, w.2, w.3, w.5.as_str()), want, "{what} stream: {i}");
        }
        let img = scenario::mlx5(Scenario::Stream, entries, size, None).unwrap();
        let at = ((mid + entries - 1) % entries * size + size - 64) as usize;
        let cqe = decode_mlx5(img.slots[at..at + 64].try_into().unwrap(), Mlx5Options::default());
        assert_eq!(cqe.opcode, cqe_opcode::REQ_ERR, "{what}: the stream's error is the requester's");
        // A ring too small for the scenario is refused, saying how much it needs.
        let e = scenario::mlx5(Scenario::Mixed, 8, size, None).unwrap_err();
        assert_eq!(e, "the mixed scenario needs 10 free slots; use more --entries");
        let e = scenario::mlx5(Scenario::Errors, 8, size, None).unwrap_err();
        assert_eq!(e, format!("the errors scenario needs {} free slots; use more --entries", syndrome::ALL.len()));
    }
    for rev in [HwRev::Gen1, HwRev::Gen2, HwRev::Gen3] {
        let what = format!("irdma {rev:?}");
        // Errors: every flush code on a QP of its own, so every generation shows each one
        // (GEN1/GEN2 complete a QP's outstanding WQEs with its first flush's status).
        let text = scenario::irdma(Scenario::Errors, entries, rev).unwrap();
        // The qp lines name the QPs the CQEs do (a decode finds them by context, so only
        // this check sees a qp line that names another).
        let img = dvcq::irdma::image::parse_irdma_image(&text).unwrap();
        let qpns: Vec<u32> = img.qps[2..].iter().map(|q| q.qpn).collect();
        assert_eq!(qpns, (0..qpns.len() as u32).map(|k| 0x1c0 + k).collect::<Vec<_>>(), "{what}");
        let (wcs, ci) = wc_summary(&decode_text(&text).unwrap());
        let codes: Vec<u16> = flush::ALL.into_iter().filter(|&c| c != flush::INVALID).collect();
        assert_eq!((ci, wcs.len()), (mid + codes.len() as u32, codes.len()), "{what}");
        for (k, (w, &minor)) in wcs.iter().zip(&codes).enumerate() {
            let status = flush_code_status(minor, dvcq::irdma::Compat::Current) as u32;
            let want = (0, status, format!("{:#x}", 0x1c0 + k), format!("{:#x}", 0x1_0000 | u32::from(minor)));
            assert_eq!((w.0, w.1, w.4.clone(), w.5.clone()), want, "{what}: flush code {minor}");
        }
        // Laps and stream: a ring less one slot of sends and receives in turn; laps after
        // three and a half laps, stream from mid-ring.
        for (sc, start) in [(Scenario::Laps, laps), (Scenario::Stream, mid)] {
            let (wcs, ci) = wc_summary(&decode_text(&scenario::irdma(sc, entries, rev).unwrap()).unwrap());
            // The exported ci keeps only what irdma's position means: modulo two laps (the
            // valid bit's parity).
            let want_ci = start % (2 * entries) + entries - 1;
            assert_eq!((ci, wcs.len()), (want_ci, entries as usize - 1), "{what} {sc:?}");
            for (i, w) in wcs.iter().enumerate() {
                let i = i as u32;
                let want = if i % 2 == 0 { (i / 2, 0, send, 0) } else { (i / 2, 0, recv, i) };
                assert_eq!((w.0, w.1, w.2, w.3), want, "{what} {sc:?}: {i}");
            }
        }
        // A ring too small for the scenario is refused, saying how many slots it needs: on
        // GEN1/GEN2 an extended CQE takes two 32-byte slots (the immediates, mixed's UD
        // receive) and a flush CQE serves a whole queue; GEN3 writes one CQE per flushed WR.
        let need = if rev == HwRev::Gen3 { [7, 11] } else { [9, 10] };
        for (sc, need) in [(Scenario::Mixed, need[0]), (Scenario::Iwarp, need[1])] {
            let e = scenario::irdma(sc, 4, rev).unwrap_err();
            let name = format!("{sc:?}").to_lowercase();
            assert_eq!(e, format!("the {name} scenario needs {need} free slots; use more --entries"), "{what}");
        }
        // Mixed: the write with immediate data is one on every generation (GEN3 writes a
        // software op type where GEN1/GEN2 write the protocol opcode).
        let (wcs, _) = wc_summary(&decode_text(&scenario::irdma(Scenario::Mixed, entries, rev).unwrap()).unwrap());
        assert_eq!((wcs[2].0, wcs[2].2, wcs[2].3), (0, 129, 256), "{what} mixed");
        // iWARP: the connection WQE's CQE gives no completion, user WRs start after the
        // connection WQEs, immediate data alone makes a receive RDMA_WITH_IMM (GEN3: its
        // op type), and QP_B's SQ and RQ flush two WRs each, the first with the code.
        let text = scenario::irdma(Scenario::Iwarp, entries, rev).unwrap();
        let img = dvcq::irdma::image::parse_irdma_image(&text).unwrap();
        let conn = if rev == HwRev::Gen1 { 1 } else { 3 };
        assert!(img.qps.iter().all(|q| q.iwarp && u32::from(q.conn_wqes) == conn), "{what}: {text}");
        let (wcs, ci) = wc_summary(&decode_text(&text).unwrap());
        // Slots: 11 CQEs on GEN3; on GEN1/GEN2 9 CQEs, the immediate's extended CQE taking
        // two 32-byte slots.
        let cqes = if rev == HwRev::Gen3 { 11 } else { 10 };
        assert_eq!(ci, mid + cqes, "{what} iwarp");
        let retry = |code| (flush_code_status(code, dvcq::irdma::Compat::Current) as u32, 0x1_0000 | u32::from(code));
        let (first, rest) = (retry(flush::RETRY_EXC_ERR), retry(flush::GENERAL_ERR));
        let rest = if rev == HwRev::Gen3 { first } else { rest };
        let (write, read, imm) = (1, 2, 129);
        let flushed_recv = if rev == HwRev::Gen3 { imm } else { recv };
        let want: Vec<(u32, u32, u32, u32, &str, u32)> = vec![
            (conn, 0, send, 0, "0x1a2", 0),
            (conn + 1, 0, write, 0, "0x1a2", 0),
            (conn + 2, 0, read, 0, "0x1a2", 0),
            (0, 0, imm, 256, "0x1a2", 0),
            (1, 0, recv, 64, "0x1a2", 0),
            (2, 0, recv, 100, "0x1a2", 0),
            (conn, first.0, send, 0, "0x1b3", first.1),
            (conn + 1, rest.0, send, 0, "0x1b3", rest.1),
            (0, first.0, flushed_recv, 0, "0x1b3", first.1),
            (1, rest.0, flushed_recv, 0, "0x1b3", rest.1),
        ];
        let got: Vec<(u32, u32, u32, u32, &str, u32)> = wcs
            .iter()
            .map(|w| (w.0, w.1, w.2, w.3, w.4.as_str(), u32::from_str_radix(&w.5[2..], 16).unwrap()))
            .collect();
        assert_eq!(got, want, "{what} iwarp");
    }
}

#[test]
fn decoding_an_image_equals_polling_the_live_ring() {
    let mut m = Mlx5Model::new(ModelConfig::new(16)).unwrap();
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(0x10, 16, 16)).unwrap();
    let image_reg = reg.clone();
    let mut live = m.poller::<64>(reg, CqConfig::default()).unwrap();
    for i in 0..9u16 {
        m.push(&build::req(0x10, i, wqe_opcode::SEND, 0)).unwrap();
    }
    while live.poll_one().is_some() {}
    let kinds = [
        build::resp(cqe_opcode::RESP_SEND_IMM, 0x10, 0, 33, 0xdead_beef),
        build::req(0x10, 9, wqe_opcode::ATOMIC_FA, 0),
        build::err(ErrSpec {
            requester: false,
            qpn: 0x10,
            syndrome: syndrome::LOCAL_PROT_ERR,
            vendor_err_synd: 0x55,
            ..ErrSpec::default()
        }),
        build::req(0x11, 0, wqe_opcode::SEND, 0),
        build::req(0x10, 10, wqe_opcode::RDMA_WRITE_IMM, 0),
    ];
    for e in &kinds {
        m.push(e).unwrap();
    }
    let img = Mlx5Image::from_ring(64, live.ci(), CqeVersion::V0, None, &image_reg, m.snapshot());
    let (items, end) = decode_image(&img).unwrap();
    let mut want = Vec::new();
    loop {
        let mut c = [Completion::default()];
        if live.poll(&mut c) == 0 {
            break;
        }
        want.push(DecodeItem::from_completion(&c[0], 16));
    }
    assert_eq!(items, want);
    assert_eq!(end.ci, live.ci());
    assert_eq!(end.dbrec_ci, live.last_set_ci());
    assert!(format_decode(&items, &end).contains(&wc_line(match &want[1] {
        DecodeItem::Wc(w) => w,
        _ => unreachable!(),
    })));
}

#[test]
fn malformed_images_name_the_line_and_the_problem() {
    let s = "00".repeat(64);
    let i = "00".repeat(32);
    let cases = [
        ("", 0, "the input is empty"),
        ("\n# comment\n", 2, "no ring line: only comments"),
        ("qp qpn=1 sq_wqe_cnt=1 rq_wqe_cnt=1\n", 1, "ring line first"),
        ("ring cqe_size=64 entries=2\n", 1, "ci="),
        ("ring cqe_size=48 entries=2 ci=0\n", 1, "cqe_size=48"),
        ("ring cqe_size=64 entries=2 ci=0 vendor=foo\n", 1, "vendor=foo"),
        (&format!("ring cqe_size=64 entries=2 ci=0\n{s}\n{}\n", &s[2..]), 3, "expected 128 hex"),
        (&format!("ring cqe_size=64 entries=2 ci=0\n{s}\n{}g0\n", &s[2..]), 3, "non-hex"),
        (&format!("ring cqe_size=64 entries=2 ci=0\n{s}\n"), 2, "1 slot lines"),
        (
            &format!("ring cqe_size=64 entries=2 ci=0\n{s}\nqp qpn=1 sq_wqe_cnt=1 rq_wqe_cnt=1\n{s}\n"),
            3,
            "qp line after",
        ),
        (&format!("ring cqe_size=64 entries=2 ci=0\nqp qpn=zz sq_wqe_cnt=1 rq_wqe_cnt=1\n{s}\n{s}\n"), 2, "qpn=zz"),
        (
            &format!("ring cqe_size=64 entries=2 ci=0\nqp qpn=1 sq_wqe_cnt=3 rq_wqe_cnt=1\n{s}\n{s}\n"),
            2,
            "powers of two",
        ),
        (
            &format!("ring cqe_size=64 entries=2 ci=0\nqp qpn=1 sq_wqe_cnt=1 rq_wqe_cnt=0\n{s}\n{s}\n"),
            2,
            "rq_wqe_cnt=0",
        ),
        (&format!("ring cqe_size=64 entries=2 ci=0 cqe_ver=2\n{s}\n{s}\n"), 1, "cqe_ver=2"),
        (&format!("ring cqe_size=64 entries=2 ci=0 comp=zip\n{s}\n{s}\n"), 1, "comp=zip"),
        (&format!("ring cqe_size=64 entries=2 ci=0 comp=basic mini=md5\n{s}\n{s}\n"), 1, "mini=md5"),
        // A word given twice: neither the first nor the last may silently win.
        ("ring cqe_size=64 entries=2 ci=0 entries=3\n", 1, "ring line gives entries twice"),
        (&format!("ring cqe_size=32 entries=4 ci=0\nqp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 sq_wqe_cnt=8\n{i}\n{i}\n{i}\n{i}\n"), 2, "qp line gives sq_wqe_cnt twice"),
        (&format!("ring cqe_size=64 entries=2 ci=0\nqp qpn=1 qpn=2 sq_wqe_cnt=4 rq_wqe_cnt=4\n{s}\n{s}\n"), 2, "qp line gives qpn twice"),
        // Rust's integer parsing takes a leading '+'; the format does not.
        ("ring cqe_size=64 entries=+16 ci=0\n", 1, "entries=+16 is not a decimal number"),
        (&format!("ring cqe_size=32 entries=4 ci=+0\n{i}\n{i}\n{i}\n{i}\n"), 1, "ci=+0 is not a decimal number"),
        (&format!("ring cqe_size=32 entries=4 ci=4294967296\n{i}\n{i}\n{i}\n{i}\n"), 1, "ci=4294967296 is out of range: 0 to 4294967295"),
        // irdma rings have the sizes rdma-core allocates: from 4, even on GEN2 and GEN3.
        (&format!("ring cqe_size=32 entries=2 ci=0\n{i}\n{i}\n"), 1, "entries=2: an irdma ring has 4 to 4194304 slots"),
        ("ring cqe_size=32 entries=201 ci=0\n", 1, "entries=201: rdma-core allocates GEN2 rings of an even number of slots"),
        (&format!("ring cqe_size=64 entries=2 ci=0\nqp qpn=100000000 sq_wqe_cnt=4 rq_wqe_cnt=4\n{s}\n{s}\n"), 2, "qpn=100000000 is out of range: 0x0 to 0xffffffff"),
        (&format!("ring cqe_size=64 entries=2 ci=0\nqp qpn=+1a2 sq_wqe_cnt=4 rq_wqe_cnt=4\n{s}\n{s}\n"), 2, "qpn=+1a2"),
        // A registry error is reported at the qp line's own line, not line 0.
        (
            &format!("ring cqe_size=64 entries=2 ci=0\n# two QPs\nqp qpn=1a2 sq_wqe_cnt=4 rq_wqe_cnt=4\n\nqp qpn=1a2 sq_wqe_cnt=8 rq_wqe_cnt=8\n{s}\n{s}\n"),
            5,
            "0x1a2 is already registered",
        ),
        (&format!("ring cqe_size=64 entries=2 ci=0\nqp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=4 srq=1000000\n{s}\n{s}\n"), 2, "does not fit in 24 bits"),
        (&format!("ring cqe_size=64 entries=2 ci=0\n{s}\nring cqe_size=64 entries=2 ci=0\n{s}\n"), 3, "a second ring line"),
        // CR-only line endings make the file one line.
        (&format!("ring cqe_size=64 entries=2 ci=0\r{s}\r{s}\r"), 1, "lines must end in LF or CRLF"),
    ];
    for (text, line, what) in cases {
        let e = decode_text(text).unwrap_err();
        assert_eq!(e.line, line, "{text:?}: {e}");
        assert!(e.to_string().contains(what), "{text:?}: {e}");
    }
}

/// The text of a 64-byte mlx5 image of `entries` slots holding `cqes` as the model writes
/// them from slot 0 (consumer counter 0), with `ring_words` after the ring line's own and
/// the given qp lines.
fn image_with(ring_words: &str, qp_lines: &str, entries: u32, cqes: &[build::Entry]) -> String {
    let mut m = Mlx5Model::new(ModelConfig::new(entries)).unwrap();
    for e in cqes {
        m.push(e).unwrap();
    }
    let hex = |slot: &[u8]| slot.iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n";
    let slots: String = m.snapshot().chunks(64).map(hex).collect();
    format!("ring cqe_size=64 entries={entries} ci=0{ring_words}\n{qp_lines}{slots}")
}

/// `(wqe_idx, status, opcode, byte_len, qp_num)` of a `wc` line.
type Wc = (u32, u32, u32, u32, String);

/// The [`Wc`] of each `wc` line, and whether any line is not one (a fault item).
fn completions(out: &str) -> (Vec<Wc>, bool) {
    let (wcs, _) = wc_summary(out);
    let faults = out.lines().any(|l| !l.starts_with("wc ") && !l.starts_with("end "));
    (wcs.into_iter().map(|(w, s, o, b, q, _)| (w, s, o, b, q)).collect(), faults)
}

/// A QP on an SRQ has no RQ of its own: rdma-core creates it with `rq.wqe_cnt` 0, the
/// registry takes it, so an image declares it so, and its send and its receive from the
/// SRQ decode as completions of that QP.
#[test]
fn an_srq_qp_without_an_rq_decodes() {
    let text = image_with(
        "",
        "qp qpn=1 sq_wqe_cnt=4 rq_wqe_cnt=0 srq=5\n",
        2,
        &[build::req(1, 2, wqe_opcode::SEND, 0), build::resp(cqe_opcode::RESP_SEND, 1, 3, 77, 0).srqn_uidx(5)],
    );
    let out = decode_text(&text).unwrap();
    let want = vec![(2, 0, 0, 0, "0x1".to_owned()), (3, 0, 128, 77, "0x1".to_owned())];
    assert_eq!(completions(&out), (want, false), "{out}");
}

/// Slot lines are written in lowercase hex; a hand-edited image in uppercase reads as the
/// same bytes.
#[test]
fn uppercase_slot_hex_reads_as_the_same_bytes() {
    let mut m = Mlx5Model::new(ModelConfig::new(4)).unwrap();
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(0x1a2, 16, 16)).unwrap();
    // Byte count 0xabcdef puts every hex letter into the slot.
    m.push(&build::req(0x1a2, 3, wqe_opcode::RDMA_READ, 0xabcdef)).unwrap();
    let text = Mlx5Image::from_ring(64, 0, CqeVersion::V0, None, &reg, m.snapshot()).to_text();
    let upper: String = text
        .lines()
        .map(|l| if l.starts_with("ring") || l.starts_with("qp") { l.to_owned() } else { l.to_uppercase() } + "\n")
        .collect();
    assert!(upper.contains("ABCDEF") && text.contains("abcdef"), "{upper}");
    assert_eq!(parse_mlx5_image(&upper).unwrap(), parse_mlx5_image(&text).unwrap());
    assert_eq!(decode_text(&upper).unwrap(), decode_text(&text).unwrap());
}

/// The limits of a `qp` line are inclusive: a 24-bit QPN of all ones and work queues of
/// 65536 entries are what mlx5 allows, and the image takes them: CQEs of that QP at the
/// last WQE of each queue decode as its completions.
#[test]
fn qp_limits_are_inclusive() {
    let qp = "qp qpn=ffffff sq_wqe_cnt=65536 rq_wqe_cnt=65536\n";
    let text = image_with(
        "",
        qp,
        2,
        &[
            build::req(0xff_ffff, 0xffff, wqe_opcode::SEND, 0),
            build::resp(cqe_opcode::RESP_SEND, 0xff_ffff, 0xffff, 9, 0),
        ],
    );
    let img = parse_mlx5_image(&text).unwrap();
    assert_eq!((img.qps[0].qpn, img.qps[0].sq_wqe_cnt, img.qps[0].rq_wqe_cnt), (0xff_ffff, 1 << 16, 1 << 16));
    let out = decode_text(&text).unwrap();
    let want = vec![(0xffff, 0, 0, 0, "0xffffff".to_owned()), (0xffff, 0, 128, 9, "0xffffff".to_owned())];
    assert_eq!(completions(&out), (want, false), "{out}");
}

/// A bare `srq` gives each QP an SRQ of its own, numbered so that no two QPs share one and
/// every number fits in 24 bits: a receive of each QP (found by its user index, CQE
/// version 1) decodes as that QP's completion.
#[test]
fn bare_srq_words_give_each_qp_its_own_srq() {
    let qps: String = (0..4).map(|k| format!("qp qpn={:x} sq_wqe_cnt=4 rq_wqe_cnt=0 srq\n", 0x10 + k)).collect();
    let recvs: Vec<build::Entry> =
        (0..4u32).map(|k| build::resp(cqe_opcode::RESP_SEND, 0x10 + k, k as u16, 100 + k, 0).srqn_uidx(k)).collect();
    let text = image_with(" cqe_ver=1", &qps, 4, &recvs);
    let img = parse_mlx5_image(&text).unwrap();
    let mut reg = img.registry().unwrap();
    let srqs: std::collections::HashSet<u32> =
        (0..4).map(|k| reg.qp(0x10 + k).unwrap().config().srqn.unwrap()).collect();
    assert_eq!(srqs.len(), 4);
    assert!(srqs.iter().all(|&n| n <= 0xff_ffff && reg.srq_mut(n).is_some()), "{srqs:?}");
    let out = decode_text(&text).unwrap();
    let want: Vec<_> = (0..4u32).map(|k| (k, 0, 128, 100 + k, format!("{:#x}", 0x10 + k))).collect();
    assert_eq!(completions(&out), (want, false), "{out}");
}

/// A ring captured on a device carries the user indexes rdma-core gave its QPs: `uidx=`
/// on a `qp` line says which (the line's order otherwise). CQEs decode by those indexes,
/// the words round-trip, an image made from a registry writes them where they are not the
/// line's order, and an index given twice or wider than 24 bits is refused on its line.
#[test]
fn qp_lines_carry_the_user_indexes_rdma_core_gave() {
    let mut reg = Registry::new();
    reg.add_qp(QpConfig { uidx: Some(9), ..QpConfig::rc(0x100, 8, 8) }).unwrap();
    reg.add_qp(QpConfig { uidx: Some(1), ..QpConfig::rc(0x200, 8, 8) }).unwrap();
    let mut m = Mlx5Model::new(ModelConfig::new(4)).unwrap();
    m.push(&build::req(0x100, 2, wqe_opcode::SEND, 0).srqn_uidx(9)).unwrap();
    m.push(&build::req(0x200, 5, wqe_opcode::SEND, 0).srqn_uidx(1)).unwrap();
    let img = Mlx5Image::from_ring(64, 0, CqeVersion::V1, None, &reg, m.snapshot());
    let text = img.to_text();
    assert!(text.contains("qp qpn=100 sq_wqe_cnt=8 rq_wqe_cnt=8 uidx=9\n"), "{text}");
    assert!(text.contains("qp qpn=200 sq_wqe_cnt=8 rq_wqe_cnt=8\n"), "the line's order needs no word: {text}");
    assert_eq!(parse_mlx5_image(&text).unwrap(), img);
    let lines = decode_text(&text).unwrap();
    let wcs: Vec<&str> = lines.lines().filter(|l| l.starts_with("wc ")).collect();
    assert_eq!(wcs.len(), 2, "{lines}");
    assert!(wcs[0].starts_with("wc wqe_idx=2 status=0 ") && wcs[0].contains(" qp_num=0x100 "), "{lines}");
    assert!(wcs[1].starts_with("wc wqe_idx=5 status=0 ") && wcs[1].contains(" qp_num=0x200 "), "{lines}");
    // Without the word, uidx 9 names no QP.
    let bare = decode_text(&text.replace(" uidx=9", "")).unwrap();
    assert!(bare.contains("bad slot=0 reason=unknown_qp"), "{bare}");
    let refused = |edit: &str| decode_text(&text.replace(" uidx=9", edit)).unwrap_err().to_string();
    assert_eq!(refused(" uidx=1000000"), "line 2: uidx 0x1000000 is wider than 24 bits: out of range, 0x0 to 0xffffff");
    assert_eq!(refused(" uidx=1"), "line 3: uidx 0x1 is already registered");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn arbitrary_text_never_panics(text in "(ring|qp|[0-9a-f]{0,40}|cqe_size=|entries=|ci=|=| |\n|#){0,60}") {
        let _ = decode_text(&text);
    }

    #[test]
    fn arbitrary_slot_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 8 * 64), v1 in any::<bool>(), ci in any::<u32>()) {
        let mut text = format!("ring cqe_size=64 entries=8 ci={ci}{}\nqp qpn=10 sq_wqe_cnt=8 rq_wqe_cnt=8\nqp qpn=11 sq_wqe_cnt=8 rq_wqe_cnt=8 srq=5\n", if v1 { " cqe_ver=1" } else { "" });
        for slot in bytes.chunks(64) {
            for b in slot {
                text.push_str(&format!("{b:02x}"));
            }
            text.push('\n');
        }
        let out = decode_text(&text).unwrap();
        // At most one line per slot, plus the end line.
        prop_assert!(out.lines().count() <= 9);
    }
}
