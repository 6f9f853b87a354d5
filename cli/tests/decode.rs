//! `dvcq decode`: vectors built from the layout (rdma-core `providers/mlx5/mlx5dv.h`
//! `struct mlx5_err_cqe`; statuses from `providers/mlx5/cq.c` `mlx5_handle_error_cqe`) for
//! every syndrome and every printer format, bad input, and the CLI contract.

mod support;

use dvcq::mlx5::dump::{cqe_from_bytes, err_cqe_dump};
use dvcq::uapi::mlx5::opcode::syndrome;
use dvcq_cli::decode::{
    decode_mlx5, scan, scan_with, Decoded, DumpFormat, Mlx5Options, Report, RingCqeSize, ScanOptions, Vendor,
};

/// (syndrome, ibv_wc_status value, ibv_wc_status_str) per rdma-core `mlx5_handle_error_cqe`.
const TABLE: [(u8, u32, &str); 14] = [
    (0x01, 1, "local length error"),
    (0x02, 2, "local QP operation error"),
    (0x04, 4, "local protection error"),
    (0x05, 5, "Work Request Flushed Error"),
    (0x06, 6, "memory management operation error"),
    (0x10, 7, "bad response error"),
    (0x11, 8, "local access error"),
    (0x12, 9, "remote invalid request error"),
    (0x13, 10, "remote access error"),
    (0x14, 11, "remote operation error"),
    (0x15, 12, "transport retry counter exceeded"),
    (0x16, 13, "RNR retry counter exceeded"),
    (0x22, 16, "aborted error"),
    (0x7f, 21, "general error"),
];

/// An error CQE built field by field from the layout.
fn err_cqe(op_own: u8, synd: u8, vendor: u8, qpn: u32, wqe_op: u8, ctr: u16) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[32..36].copy_from_slice(&0x0000_1234u32.to_be_bytes()); // srqn / uidx
    b[52] = 0x03; // hw_err_synd
    b[53] = 0x01; // hw_synd_type
    b[54] = vendor;
    b[55] = synd;
    b[56..60].copy_from_slice(&(((wqe_op as u32) << 24) | qpn).to_be_bytes());
    b[60..62].copy_from_slice(&ctr.to_be_bytes());
    b[62] = 0x5a;
    b[63] = op_own;
    b
}

/// The error CQE most tests decode: a requester REMOTE_ACCESS_ERR (syndrome 0x13) on QP
/// 0xabcdef, WQE 0x1234.
fn remote_access_err() -> [u8; 64] {
    err_cqe(0xd2, 0x13, 0x88, 0xab_cdef, 0x10, 0x1234)
}

/// Checks every field of [`remote_access_err`] as decoded.
fn check_remote_access(c: &dvcq_cli::decode::Mlx5Cqe) {
    check_fields(c, 0x13, 10, "remote access error");
}

fn rdma_core(host: &str, b: &[u8; 64]) -> String {
    err_cqe_dump(host, &cqe_from_bytes(b))
}

fn kernel(b: &[u8; 64], prefix: &str) -> String {
    let mut s = String::new();
    for (r, row) in b.chunks(16).enumerate() {
        let bytes: Vec<String> = row.iter().map(|x| format!("{x:02x}")).collect();
        s += &format!("{prefix}{:08x}: {}\n", r * 16, bytes.join(" "));
    }
    s
}

fn dpdk(ring: &[u8]) -> String {
    let mut s = format!("MLX5 Error CQ: at [0x17fe3c000], len={}\n", ring.len());
    for (r, row) in ring.chunks(16).enumerate() {
        let mut l = format!("{:08X}:", r * 16);
        for x in row {
            l += &format!(" {x:02X}");
        }
        l += " | ";
        for &x in row {
            l.push(if (b' '..=b'~').contains(&x) { x as char } else { '.' });
        }
        s += &l;
        s.push('\n');
    }
    s
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `text` with its line `n` (0-based) rewritten by `edit`; every line ends in `\n`.
fn edit_line(text: &str, n: usize, edit: impl Fn(&str) -> String) -> String {
    text.lines().enumerate().map(|(i, l)| if i == n { edit(l) } else { l.to_owned() } + "\n").collect()
}

fn only_mlx5(r: &Report, i: usize) -> &dvcq_cli::decode::Mlx5Cqe {
    match &r.dumps[i].cqe {
        Decoded::Mlx5(c) => c,
        Decoded::Irdma(_) => panic!("not mlx5"),
    }
}

fn check_fields(c: &dvcq_cli::decode::Mlx5Cqe, synd: u8, status: u32, text: &str) {
    assert_eq!(c.syndrome, Some(synd));
    assert_eq!(c.status.as_ref().unwrap().value, status, "syndrome {synd:#x}");
    assert_eq!(c.status.as_ref().unwrap().text, text);
    assert_eq!(c.qpn, 0x00ab_cdef);
    assert_eq!(c.wqe_counter, 0x1234);
    assert_eq!(c.srqn_uidx, 0x1234);
    assert_eq!(c.hw_err_synd, Some(3));
    assert_eq!(c.hw_synd_type, Some(1));
    assert_eq!(c.signature, 0x5a);
    assert!(c.meaning.is_some());
}

#[test]
fn every_syndrome_in_every_format() {
    for (synd, status, text) in TABLE {
        let b = err_cqe(0xd3, synd, 0x88, 0xabcdef, 0x08, 0x1234);
        let spaced: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
        let inputs = [
            (rdma_core("node-7", &b), DumpFormat::RdmaCore),
            (kernel(&b, "[ 4021.118290] cqe_dump: "), DumpFormat::Kernel),
            (kernel(&b, ""), DumpFormat::Kernel),
            (dpdk(&b), DumpFormat::Dpdk),
            (hex(&b), DumpFormat::BareHex),
            (spaced.join(" "), DumpFormat::BareHex),
        ];
        for (text_in, fmt) in inputs {
            let r = scan(&format!("noise before\n{text_in}\nnoise after\n"), Vendor::Mlx5);
            assert!(r.problems.is_empty(), "{fmt:?} {synd:#x}: {:?}", r.problems);
            assert_eq!(r.dumps.len(), 1, "{fmt:?} {synd:#x}");
            assert_eq!(r.dumps[0].format, fmt);
            assert_eq!(r.dumps[0].line, 2);
            let c = only_mlx5(&r, 0);
            check_fields(c, synd, status, text);
            assert_eq!(c.opcode_name, "MLX5_CQE_REQ_ERR");
            assert_eq!(c.wqe_opcode_name, Some("MLX5_OPCODE_RDMA_WRITE"));
            assert_eq!(c.owner, 1);
            assert_eq!(c.se, 1);
        }
    }
}

#[test]
fn real_dump_with_log_prefixes_blank_lines_and_glued_text() {
    // A dump published in a public write-up: an RNR retry error on a SEND.
    let text = "\
2024-05-01T10:00:00.123 app[77]: mlx5: n136-096-142: got completion with error:
2024-05-01T10:00:00.123 app[77]: 00000000 00000000 00000000 00000000

2024-05-01T10:00:00.123 app[77]: 00000000 00000000 00000000 00000000

2024-05-01T10:00:00.123 app[77]: 00000000 00000000 00000000 00000000

2024-05-01T10:00:00.123 app[77]: 00000000 00008716 0a001f8e 000027d2completion was found in CQ with status 0xd
got bad completion with status: 0xd, vendor syndrome: 0x87
";
    let r = scan(text, Vendor::Mlx5);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.dumps.len(), 1);
    let c = only_mlx5(&r, 0);
    assert_eq!(c.syndrome_name, Some("MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR"));
    assert_eq!(c.vendor_err_synd, Some(0x87));
    assert!(c.vendor_err_meaning.as_ref().unwrap().contains("undocumented"));
    assert_eq!(c.status.as_ref().unwrap().name, "IBV_WC_RNR_RETRY_EXC_ERR");
    assert_eq!(c.qpn, 0x1f8e);
    assert_eq!(c.wqe_opcode_name, Some("MLX5_OPCODE_SEND"));
    assert_eq!((c.signature, c.owner, c.se), (0x27, 0, 1));
}

/// The text report prints a number no table names with the number.
#[test]
fn the_text_report_keeps_numbers_without_a_name() {
    // Syndrome 0x30 and WQE opcode 0x3f are in no table.
    let line = remote_access_err().iter().map(|b| format!("{b:02x}")).collect::<String>();
    let mut b = remote_access_err();
    b[55] = 0x30;
    b[56] = 0x3f;
    let text = format!("{line}\n{}\n", b.iter().map(|b| format!("{b:02x}")).collect::<String>());
    let r = scan(&text, Vendor::Mlx5);
    assert_eq!(r.dumps.len(), 2, "{:?}", r.problems);
    let known = dvcq_cli::decode::render_text(1, &r.dumps[0]);
    assert!(known.contains("0x13 MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR"), "{known}");
    let out = dvcq_cli::decode::render_text(2, &r.dumps[1]);
    let field = |name: &str| {
        out.lines().find_map(|l| l.trim_start().strip_prefix(name)).map(|v| v.trim_start_matches(':').trim()).unwrap()
    };
    assert_eq!((field("syndrome"), field("wqe_opcode")), ("0x30 unknown", "0x3f unknown"), "{out}");
}

#[test]
fn responder_error_and_documented_vendor_syndromes() {
    let b = err_cqe(0xe0, syndrome::REMOTE_ABORTED_ERR, 0x93, 0x55, 0, 7);
    let c = decode_mlx5(&b, Mlx5Options::default());
    assert_eq!(c.opcode_name, "MLX5_CQE_RESP_ERR");
    assert_eq!(c.wqe_opcode, None);
    let v = c.vendor_err_meaning.as_ref().unwrap();
    assert!(v.contains("ODP_PFAULT") && v.contains("page fault on the receive side"), "{v}");
    assert!(c.notes.iter().any(|n| n.contains("swallows")));
    let c = decode_mlx5(&err_cqe(0xe0, 0x22, 0x99, 1, 0, 0), Mlx5Options::default());
    assert!(c.vendor_err_meaning.as_ref().unwrap().contains("UCT_IB_MLX5_CQE_VENDOR_SYND_PSN"));
    let c = decode_mlx5(&err_cqe(0xd0, 0x05, 0xf9, 1, 0x0a, 0), Mlx5Options::default());
    assert!(c.notes.iter().any(|n| n.contains("does not print")));
    // rdma-core reads 0x93 as an ODP fault only on a responder REMOTE_ABORTED CQE: any other
    // pairing gets neither the page-fault reading nor the swallow note.
    for (op_own, synd, vendor) in [(0xd0, 0x22, 0x93), (0xe0, 0x13, 0x93), (0xe0, 0x22, 0x92)] {
        let c = decode_mlx5(&err_cqe(op_own, synd, vendor, 1, 0, 0), Mlx5Options::default());
        let v = c.vendor_err_meaning.unwrap();
        assert!(!v.contains("page fault on the receive side"), "{op_own:#x} {synd:#x} {vendor:#x}: {v}");
        assert!(!c.notes.iter().any(|n| n.contains("swallows")), "{op_own:#x} {synd:#x} {vendor:#x}");
    }
    let c = decode_mlx5(&err_cqe(0xd0, 0x22, 0x93, 1, 0, 0), Mlx5Options::default());
    assert!(c.vendor_err_meaning.unwrap().contains("only interprets it with syndrome REMOTE_ABORTED_ERR"));
    let c = decode_mlx5(&err_cqe(0xd0, 0x22, 0x42, 1, 0, 0), Mlx5Options::default());
    assert_eq!(c.vendor_err_meaning.as_deref(), Some("0x42: undocumented (no public source states its meaning)"));
}

#[test]
fn every_syndrome_says_which_side_failed() {
    // The IB completion-error semantics: which side's resources or state the error points at.
    let sides = [
        (0x01, "local"),
        (0x02, "local"),
        (0x04, "local"),
        (0x05, "local"),
        (0x06, "local"),
        (0x10, "network or remote"),
        (0x11, "local"),
        (0x12, "remote"),
        (0x13, "remote"),
        (0x14, "remote"),
        (0x15, "network or remote"),
        (0x16, "remote"),
        (0x22, "remote"),
    ];
    let mut summaries = Vec::new();
    for (synd, side) in sides {
        let m = decode_mlx5(&err_cqe(0xd0, synd, 0, 1, 0x0a, 0), Mlx5Options::default()).meaning.unwrap();
        assert_eq!(m.side, side, "syndrome {synd:#04x}");
        assert!(!m.causes.is_empty(), "syndrome {synd:#04x}");
        summaries.push(m.summary);
    }
    summaries.sort_unstable();
    summaries.dedup();
    assert_eq!(summaries.len(), sides.len(), "each syndrome has its own meaning");
    let m = decode_mlx5(&err_cqe(0xd0, 0x30, 0, 1, 0x0a, 0), Mlx5Options::default()).meaning.unwrap();
    assert_eq!(m.side, "unknown");
    assert!(m.summary.contains("IBV_WC_GENERAL_ERR"));
}

#[test]
fn dpdk_ring_with_marker_bytes() {
    // A 4-CQE ring: success, the error CQE (marked "seen" by the PMD, new and old offsets
    // and bytes 1-5), success, never written.
    let mut ok = [0u8; 64];
    ok[44..48].copy_from_slice(&64u32.to_be_bytes());
    ok[56..60].copy_from_slice(&0x0a00_0123u32.to_be_bytes());
    ok[63] = 0x00;
    let mut e = err_cqe(0xd0, syndrome::LOCAL_PROT_ERR, 0x51, 0xabcdef, 0x0a, 0x1234);
    e[1..6].copy_from_slice(b"xxxxx");
    e[4..9].copy_from_slice(b"seen\0");
    e[36..41].copy_from_slice(b"seen\0");
    let mut inv = [0u8; 64];
    inv[63] = 0xf0;
    let ring: Vec<u8> = [ok, e, ok, inv].concat();
    let text = format!(
        "Unexpected CQE error syndrome 0x04 CQN = 1 SQN = 291 wqe_counter = 4660 wq_ci = 9 cq_ci = 1\n\n\n\n{}\n\n\nMLX5 Error SQ: at [0x17fe40000], len=64\n{}",
        dpdk(&ring),
        dpdk(&[0x11u8; 64]).lines().skip(1).collect::<Vec<_>>().join("\n")
    );
    let r = scan(&text, Vendor::Mlx5);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.dumps.len(), 1, "only the error CQE of the ring, not the SQ dump");
    assert_eq!(r.dumps[0].slot, Some(1));
    assert_eq!(r.dumps[0].line, 5 + 1 + 4);
    let c = only_mlx5(&r, 0);
    check_fields(c, 0x04, 4, "local protection error");
    assert!(c.notes.iter().any(|n| n.contains("marker")), "{:?}", c.notes);
    assert!(!c.notes.iter().any(|n| n.contains("reserved")), "{:?}", c.notes);
}

#[test]
fn success_cqes_in_bare_hex() {
    let mut b = [0u8; 64];
    b[24..28].copy_from_slice(&0x0000_0777u32.to_be_bytes());
    b[36..40].copy_from_slice(&0xdead_beefu32.to_be_bytes());
    b[44..48].copy_from_slice(&4096u32.to_be_bytes());
    b[56..60].copy_from_slice(&0x0000_0042u32.to_be_bytes());
    b[63] = 0x31; // RESP_SEND_IMM, owner 1
    let r = scan(&hex(&b), Vendor::Mlx5);
    let c = only_mlx5(&r, 0);
    assert_eq!(c.opcode_name, "MLX5_CQE_RESP_SEND_IMM");
    assert_eq!(c.status.as_ref().unwrap().value, 0);
    assert_eq!(c.byte_cnt, Some(4096));
    assert_eq!(c.src_qp, Some(0x777));
    assert_eq!(c.imm_inval_pkey, Some(0xdead_beef));
    assert_eq!(c.syndrome, None);
}

#[test]
fn several_dumps_and_bad_ones_in_one_log() {
    let good = err_cqe(0xd2, 0x13, 0x88, 0x2a8af, 0x10, 3);
    let mut text = String::new();
    text += "boot\n"; // 1
    text += &rdma_core("a", &good); // 2-6
    text += "mlx5: b: got completion with error:\n"; // 7: truncated by the next header
    text += "00000000 00000000 00000000 00000000\n"; // 8
    text += &rdma_core("c", &good); // 9-13
    text += "mlx5: d: got completion with error:\n"; // 14
    text += "00000000 00000000 00000000 00000000\n"; // 15
    text += "0000z000 00000000 00000000 00000000\n"; // 16: non-hex
    text += "00000000 00000000 00000000 00000000\n"; // 17
    text += "00000000 00000000 00000000 00000000\n"; // 18
    text += &kernel(&good, "cqe_dump: ").lines().take(3).map(|l| format!("{l}\n")).collect::<String>(); // 19-21 truncated
    text += "unrelated\n"; // 22
    text += &hex(&good)[..120]; // 23: bare string too short
    text += "\n";
    text += &kernel(&good, "cqe_dump: "); // 24-27
    let r = scan(&text, Vendor::Mlx5);
    let lines: Vec<usize> = r.dumps.iter().map(|d| d.line).collect();
    assert_eq!(lines, vec![2, 9, 24]);
    let bad: Vec<usize> = r.problems.iter().map(|p| p.line).collect();
    assert_eq!(bad, vec![7, 16, 19, 23], "{:#?}", r.problems);
    assert!(r.problems[0].reason.contains("truncated"));
    assert!(r.problems[1].reason.contains("non-hex character 'z'"));
    assert!(r.problems[2].reason.contains("truncated"));
    assert!(r.problems[3].reason.contains("120 hex digits"));
}

/// A bad rdma-core dump claims the word lines left of its four, and no line after them: a
/// dump that follows the text after it still decodes.
#[test]
fn a_bad_dump_claims_only_its_own_word_lines() {
    let good = err_cqe(0xd2, 0x13, 0x88, 0x2a8af, 0x10, 3);
    let mut text = String::new();
    text += "mlx5: d: got completion with error:\n"; // 1
    text += "00000000 00000000 00000000 00000000\n"; // 2
    text += "0000z000 00000000 00000000 00000000\n"; // 3: non-hex; two lines left
    text += "unrelated\n"; // 4: no words, not the dump's
    text += &hex(&good); // 5: a bare dump
    text += "\n";
    let r = scan(&text, Vendor::Mlx5);
    let lines: Vec<usize> = r.dumps.iter().map(|d| d.line).collect();
    assert_eq!(lines, [5], "{:#?}", r.problems);
    assert_eq!(r.problems.iter().map(|p| p.line).collect::<Vec<_>>(), [3]);
}

/// After a blank line, a hexdump goes on only with its next offset: a line at another
/// offset is a dump of its own (reported: it does not start at 0), and the first is whole.
#[test]
fn a_hexdump_goes_on_after_a_blank_line_only_with_its_next_offset() {
    let good = err_cqe(0xd2, 0x13, 0x88, 0x2a8af, 0x10, 3);
    let dump = kernel(&good, "cqe_dump: "); // 1-4
    let text = format!("{dump}\n{}\n", dump.lines().nth(1).unwrap().replace("00000010:", "00000100:")); // 6
    let r = scan(&text, Vendor::Mlx5);
    assert_eq!(r.dumps.iter().map(|d| d.line).collect::<Vec<_>>(), [1], "{:#?}", r.problems);
    assert_eq!(r.problems.len(), 1, "{:#?}", r.problems);
    assert_eq!(r.problems[0].line, 6);
    assert!(r.problems[0].reason.starts_with("dump starting at line 6: offset 0x100"), "{}", r.problems[0].reason);
    // With its next offset it is one dump: a fifth row of a 64-byte CQE.
    let text = format!("{dump}\n{}\n", dump.lines().nth(1).unwrap().replace("00000010:", "00000040:"));
    let r = scan(&text, Vendor::Mlx5);
    assert!(r.problems.iter().all(|p| p.line != 6), "{:#?}", r.problems);
    // Words after a blank line go on a headerless run the same way.
    let words = rdma_core("h", &good).lines().skip(1).map(|l| format!("{l}\n")).collect::<Vec<_>>();
    let text = format!("{}{}\n\n{}{}", words[0], words[1], words[2], words[3]);
    let r = scan(&text, Vendor::Mlx5);
    assert_eq!((r.dumps.len(), r.problems.len()), (1, 0), "{:#?}", r.problems);
}

#[test]
fn wrong_line_counts_and_overlapping_formats() {
    let good = err_cqe(0xd2, 0x13, 0x88, 1, 0x10, 3);
    // Five lines of words after a header.
    let mut t = rdma_core("h", &good);
    t += "00000000 00000000 00000000 00000000\n";
    let r = scan(&t, Vendor::Mlx5);
    assert_eq!(r.dumps.len(), 1);
    assert_eq!(r.problems.len(), 1);
    assert!(r.problems[0].reason.contains("wrong line count"));
    assert_eq!(r.problems[0].line, 6);
    // Header followed by a kernel hexdump: the header is reported, the hexdump decoded.
    let t = format!("mlx5: h: got completion with error:\n{}", kernel(&good, ""));
    let r = scan(&t, Vendor::Mlx5);
    assert_eq!(r.dumps.len(), 1);
    assert_eq!(r.dumps[0].format, DumpFormat::Kernel);
    assert_eq!(r.problems[0].line, 1);
    // DPDK and kernel lines in one block.
    let k = kernel(&good, "");
    let d = dpdk(&good);
    let mixed: Vec<&str> = k.lines().take(2).chain(d.lines().skip(3)).chain(std::iter::once("")).collect();
    let r = scan(&mixed.join("\n"), Vendor::Mlx5);
    assert!(r.dumps.is_empty());
    assert!(r.problems[0].reason.contains("overlapping"), "{:?}", r.problems);
    // Offsets out of order.
    let mut lines: Vec<String> = kernel(&good, "").lines().map(String::from).collect();
    lines.swap(1, 2);
    let r = scan(&lines.join("\n"), Vendor::Mlx5);
    assert!(r.problems[0].reason.contains("offset"), "{:?}", r.problems);
    // Headerless words: 3 lines.
    let r = scan("00000000 00000000 00000000 00000000\n".repeat(3).as_str(), Vendor::Mlx5);
    assert!(r.problems[0].reason.contains("wrong line count"));
    // DPDK title with fewer bytes than announced.
    let d = dpdk(&good).replace("len=64", "len=128");
    let r = scan(&d, Vendor::Mlx5);
    assert!(r.problems[0].reason.contains("128"), "{:?}", r.problems);
}

#[test]
fn headerless_and_old_kernel_words() {
    let good = err_cqe(0xd2, 0x01, 0x00, 9, 0x0a, 3);
    let words: String = rdma_core("x", &good).lines().skip(1).map(|l| format!("{l}\n")).collect();
    let r = scan(&words, Vendor::Mlx5);
    assert_eq!(r.dumps[0].format, DumpFormat::Words);
    let t = format!(
        "[ 5.1] mlx5_0:dump_cqe:262:(pid 0): dump error cqe\n{}",
        words.lines().map(|l| format!("[ 5.1] {l}\n")).collect::<String>()
    );
    let r = scan(&t, Vendor::Mlx5);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.dumps[0].format, DumpFormat::KernelWords);
    assert_eq!(only_mlx5(&r, 0).syndrome, Some(1));
    let t = format!("mlx5_poll_one:1040: dump cqe for cqn 0x406:\n{words}");
    let r = scan(&t, Vendor::Mlx5);
    assert_eq!(r.dumps[0].format, DumpFormat::RdmaCoreDebug);
    // Current kernels print the same header, then print_hex_dump rows (after a blank line
    // here): one kernel dump, no problem.
    let t = format!("[ 5.1] mlx5_0:dump_cqe:294:(pid 0): dump error cqe\n\n{}", kernel(&good, "[ 5.1] "));
    let r = scan(&t, Vendor::Mlx5);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!((r.dumps.len(), r.dumps[0].line, r.dumps[0].format), (1, 3, DumpFormat::Kernel));
    assert_eq!(only_mlx5(&r, 0).syndrome, Some(1));
}

#[test]
fn irdma_qwords() {
    let text = "\
E810 CQE:
0x0000000000000040 0x00007f00deadbeef 0x0000001200000000 0xc080000500010003
one per line:
0000000000000000
0000000000000000
0000000000000000
c300000500000000
bad: 0x00000000000000zz 0 0 0
five: 0x0 0x0000000000000000 0x0000000000000000 0x0000000000000000 0x0000000000000000
";
    let r = scan(text, Vendor::Irdma);
    assert_eq!(r.dumps.len(), 2, "{:?}", r.problems);
    let Decoded::Irdma(c) = &r.dumps[0].cqe else { panic!() };
    assert_eq!(r.dumps[0].line, 2);
    assert!(c.error);
    assert_eq!(c.status.name, "IBV_WC_REM_ACCESS_ERR");
    assert_eq!(c.vendor_err, Some(0x0001_0003));
    assert_eq!(c.qp_id, 0x12);
    assert_eq!(c.wqe_idx, 5);
    assert_eq!(c.queue, "SQ");
    let Decoded::Irdma(c) = &r.dumps[1].cqe else { panic!() };
    assert_eq!(r.dumps[1].line, 4);
    assert_eq!(c.opcode_name, Some("IRDMA_OP_TYPE_SEND"));
    assert_eq!(c.status.value, 0);
    let bad: Vec<usize> = r.problems.iter().map(|p| p.line).collect();
    assert_eq!(bad, vec![8, 9], "{:?}", r.problems);
}

fn run_cli(args: &[&str], stdin: &str) -> (i32, String, String) {
    let out = support::dvcq(args, Some(stdin));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn cli_exit_codes_text_and_json() {
    let good = rdma_core("h", &err_cqe(0xd2, 0x13, 0x88, 0x2a8af, 0x10, 3));
    let (rc, out, _) = run_cli(&["decode"], &good);
    assert_eq!(rc, 0);
    assert!(out.contains("MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR"));
    assert!(out.contains("10 IBV_WC_REM_ACCESS_ERR \"remote access error\""));
    assert!(out.contains("remote side"));

    let (rc, out, _) = run_cli(&["decode", "-", "--json"], &good);
    assert_eq!(rc, 0);
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(v["type"], "cqe");
    assert_eq!(v["vendor"], "mlx5");
    assert_eq!(v["printer"], "rdma-core");
    assert_eq!(v["format"], 0);
    assert_eq!(v["line"], 1);
    assert_eq!(v["syndrome"], 0x13);
    assert_eq!(v["vendor_err_synd"], 0x88);
    assert_eq!(v["qpn"], 0x2a8af);
    assert_eq!(v["status"]["value"], 10);
    assert_eq!(v["status"]["text"], "remote access error");

    let bad = format!("{good}mlx5: h: got completion with error:\n00000000\n");
    let (rc, out, err) = run_cli(&["decode"], &bad);
    assert_eq!(rc, 1);
    assert!(out.contains("dump 1: line 1"));
    // `dvcq decode: <file>:<line>: ...`, as every subcommand names a place.
    assert!(err.starts_with("dvcq decode: <stdin>:7: "), "{err}");
    let (rc, out, _) = run_cli(&["decode", "--json"], &bad);
    assert_eq!(rc, 1);
    let kinds: Vec<String> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, vec!["cqe", "problem"]);

    let (rc, _, err) = run_cli(&["decode"], "nothing here\n");
    assert_eq!(rc, 1);
    assert!(err.contains("no CQE dump found"));
    let (rc, _, err) = run_cli(&["decode", "/nonexistent/dvcq-decode-input"], "");
    assert_eq!(rc, 2);
    assert!(err.contains("cannot read"));
    let (rc, _, _) = run_cli(&["decode", "--vendor", "bogus"], "");
    assert_eq!(rc, 2);
    let (rc, out, _) = run_cli(&["decode", "--help"], "");
    assert_eq!(rc, 0);
    assert!(out.contains("Exit status"));
    // "0 0 0 0" is not a CQE; unpadded 0x numbers, four on a line, are.
    let (rc, out, err) = run_cli(&["decode", "--vendor", "irdma"], "0 0 0 0\n0x0 0x0 0x0 0xc080000000010001\n");
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("line 2") && out.contains("IBV_WC_WR_FLUSH_ERR"), "{out}");
    assert!(!out.contains("line 1"), "{out}");
    let (rc, out, _) = run_cli(
        &["decode", "--vendor", "irdma"],
        "0000000000000000 0000000000000000 0000000000000000 c080000000010001\n",
    );
    assert_eq!(rc, 0);
    assert!(out.contains("IBV_WC_WR_FLUSH_ERR"));
}

#[test]
fn a_megabyte_line_of_offsets_is_scanned_in_linear_time() {
    // 104858 offsets with nothing after them: no hexdump line. Trying every offset and
    // splitting the rest of the line each time took minutes on this; one pass takes
    // milliseconds.
    let noise = "00000000: ".repeat(104_858);
    assert!(noise.len() >= 1 << 20);
    let good = remote_access_err();
    let text = format!("{noise}\n{}", kernel(&good, "cqe_dump: "));
    let r = scan(&text, Vendor::Mlx5);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.dumps.len(), 1);
    assert_eq!((r.dumps[0].line, r.dumps[0].format), (2, DumpFormat::Kernel));
    check_remote_access(only_mlx5(&r, 0));
    // The same offsets followed by one line's worth of bytes: the line is a hexdump line
    // with too much on it, reported once.
    let text = format!("{noise}00000000: {}\n", "00 ".repeat(16));
    let r = scan(&text, Vendor::Mlx5);
    assert!(r.dumps.is_empty());
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert_eq!(r.problems[0].line, 1);
}

#[test]
fn irdma_good_cqes_survive_a_bad_line_after_them() {
    let good = "0x0000000000000000 0x00007f00deadbeef 0x0000001200000000 0xc080000500010003\n";
    let text = format!("{good}{good}{good}0x0000000000000001 0x0000000000000002 0x0000000000000003\n");
    let r = scan(&text, Vendor::Irdma);
    let lines: Vec<usize> = r.dumps.iter().map(|d| d.line).collect();
    assert_eq!(lines, vec![1, 2, 3]);
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert_eq!(r.problems[0].line, 4);
    assert!(r.problems[0].reason.contains("found 3 qwords"), "{}", r.problems[0]);
    // The same through the CLI: the good CQEs are printed, the bad line is named.
    let (rc, out, err) = run_cli(&["decode", "--vendor", "irdma"], &text);
    assert_eq!(rc, 1);
    assert_eq!(out.matches("IBV_WC_REM_ACCESS_ERR").count(), 3, "{out}");
    assert!(err.contains("<stdin>:4: found 3 qwords") && !err.contains(":1: "), "{err}");
    // Short lines still join into one CQE, and a short run between good lines is reported
    // at its own first line.
    let halves = "0x0000000000000000 0x00007f00deadbeef\n0x0000001200000000 0xc080000500010003\n";
    let text = format!("{halves}{good}0x0000000000000001 0x0000000000000002\n{good}");
    let r = scan(&text, Vendor::Irdma);
    let lines: Vec<usize> = r.dumps.iter().map(|d| d.line).collect();
    assert_eq!(lines, vec![1, 3, 5]);
    let bad: Vec<usize> = r.problems.iter().map(|p| p.line).collect();
    assert_eq!(bad, vec![4]);
}

#[test]
fn irdma_tokens_that_are_not_qwords_are_named() {
    let cases = [
        // 15 and 17 digits, with and without 0x.
        (
            "0x000000000000000 0x0007f00deadbeef 0x0000001200000000 0xc080000500010003",
            "'0x000000000000000' at column 1: 15 hex digits",
        ),
        (
            "11111111111111111 0x0000000000000000 0x00007f00deadbeef 0x0000001200000000",
            "'11111111111111111' at column 1: 17 hex digits",
        ),
        (
            "0x0000000000000000 0x00007f00deadbeeg 0x0000001200000000 0xc080000500010003",
            "'0x00007f00deadbeeg' at column 20: non-hex character 'g'",
        ),
        (
            "+000000000000000a 0x0000000000000000 0x00007f00deadbeef 0x0000001200000000",
            "'+000000000000000a' at column 1: non-hex character '+'",
        ),
        (
            "0x0000000000000000 0x00007é00deadbeef 0x0000001200000000 0xc080000500010003",
            "at column 20: non-hex character 'é'",
        ),
        // A short 0x number among qwords, on a line that is not one unpadded CQE.
        (
            "0x0 0x0000000000000000 0x0000000000000000 0x0000000000000000 0x0000000000000000",
            "'0x0' at column 1: 1 hex digits, a qword has 16 (numbers without zero padding are read only as a line \
             that ends in exactly 4 or 8 of them)",
        ),
        ("0x0000000000000000 0x12, 0x0000000000000000", "'0x12' at column 20: 2 hex digits"),
    ];
    for (line, why) in cases {
        let r = scan(&format!("cqe:\n{line}\n"), Vendor::Irdma);
        assert!(r.dumps.is_empty(), "{line}");
        assert_eq!(r.problems.len(), 1, "{line}: {:?}", r.problems);
        assert_eq!(r.problems[0].line, 2, "{line}");
        assert!(r.problems[0].reason.contains(why), "{line}: {}", r.problems[0].reason);
    }
    // Short 0x numbers in prose are not qwords and not problems.
    let r = scan("flags 0x3 mask 0xff\n", Vendor::Irdma);
    assert!(r.dumps.is_empty() && r.problems.is_empty(), "{:?}", r.problems);
}

#[test]
fn overlong_dumps_keep_the_cqes_they_announce() {
    let good = remote_access_err();
    // A DPDK title announcing one CQE, followed by two.
    let mut two = good.to_vec();
    two.extend_from_slice(&good);
    let text = dpdk(&two).replace("len=128", "len=64");
    let r = scan(&text, Vendor::Mlx5);
    assert_eq!(r.dumps.len(), 1, "{:?}", r.problems);
    check_remote_access(only_mlx5(&r, 0));
    assert_eq!(r.problems.len(), 1);
    assert_eq!(r.problems[0].line, 1);
    assert!(
        r.problems[0]
            .reason
            .contains("longer than announced: 128 bytes where its title announces 64 (the first 64 decoded)"),
        "{}",
        r.problems[0]
    );
    // A kernel dump with a fifth row.
    let text = format!("{}cqe_dump: 00000040: {}\n", kernel(&good, "cqe_dump: "), ["00"; 16].join(" "));
    let r = scan(&text, Vendor::Mlx5);
    assert_eq!(r.dumps.len(), 1, "{:?}", r.problems);
    check_remote_access(only_mlx5(&r, 0));
    assert_eq!(r.problems.len(), 1);
    assert!(
        r.problems[0].reason.contains("dump longer than one 64-byte CQE: 80 bytes, the last 16 not decoded"),
        "{}",
        r.problems[0]
    );
    // Through the CLI: the CQE is printed, the problem named, status 1.
    let (rc, out, err) = run_cli(&["decode"], &text);
    assert_eq!(rc, 1);
    assert!(out.contains("MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR"), "{out}");
    assert!(err.contains("<stdin>:1: dump longer than one 64-byte CQE"), "{err}");
    // Fewer bytes than announced is still truncation, and the whole CQEs there decode.
    let text = dpdk(&good).replace("len=64", "len=128");
    let r = scan(&text, Vendor::Mlx5);
    assert_eq!(r.dumps.len(), 1);
    assert!(r.problems[0].reason.starts_with("truncated dump: 64 of the 128 bytes"), "{}", r.problems[0]);
}

#[test]
fn malformed_dpdk_titles_are_reported() {
    let good = remote_access_err();
    for len in ["-64", "1000000000000000000000000000000"] {
        let text = dpdk(&good).replace("len=64", &format!("len={len}"));
        let r = scan(&text, Vendor::Mlx5);
        assert_eq!(r.problems.len(), 1, "{len}: {:?}", r.problems);
        assert_eq!(r.problems[0].line, 1);
        assert!(
            r.problems[0].reason.contains(&format!("malformed title: len={len} is not a byte count")),
            "{}",
            r.problems[0]
        );
        // The lines under it still decode.
        assert_eq!(r.dumps.len(), 1, "{len}");
        check_remote_access(only_mlx5(&r, 0));
    }
}

#[test]
fn cr_only_line_endings_and_empty_input_are_named() {
    let good = remote_access_err();
    for text in [rdma_core("h", &good), kernel(&good, "cqe_dump: ")] {
        let r = scan(&text.replace('\n', "\r"), Vendor::Mlx5);
        assert!(r.dumps.is_empty());
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(r.problems[0].reason.contains("lines must end in LF or CRLF, not CR alone"), "{}", r.problems[0]);
        // CRLF is fine.
        let r = scan(&text.replace('\n', "\r\n"), Vendor::Mlx5);
        assert!(r.problems.is_empty() && r.dumps.len() == 1, "{:?}", r.problems);
    }
    // Headerless words with CRs decoded to nothing at all; that is a problem now.
    let words: String = rdma_core("h", &good).lines().skip(1).map(|l| format!("{l}\r")).collect();
    let r = scan(&words, Vendor::Mlx5);
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(r.problems[0].reason.starts_with("no CQE dump found; the line holds a carriage return"));
    let (rc, _, err) = run_cli(&["decode"], "");
    assert_eq!(rc, 1);
    assert_eq!(err, "dvcq decode: <stdin>: the input is empty: no CQE dump found\n");
}

/// Binary input is named as such, as `ring decode` names it: a NUL byte, or bytes that are
/// not UTF-8 even where there is no NUL (whose carriage returns were once blamed instead).
#[test]
fn binary_input_is_said_not_to_be_text() {
    // Bytes without a NUL: invalid UTF-8, carriage returns and newlines among them.
    let mut bin: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8 | 1).collect();
    bin[..10].copy_from_slice(b"#!binary: ");
    bin[10] = 0xff;
    bin[20] = b'\r';
    bin[30] = b'\n';
    assert!(!bin.contains(&0) && std::str::from_utf8(&bin).is_err());
    let path = std::env::temp_dir().join(format!("dvcq-decode-binary-{}.bin", std::process::id()));
    std::fs::write(&path, &bin).unwrap();
    let o = support::dvcq(&["decode", path.to_str().unwrap()], None);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    let want = format!(
        "dvcq decode: {}:1: no CQE dump found: the input is not text (bytes that are not UTF-8 at line 1, column 11); \
         decode reads logs and other text\n",
        path.display()
    );
    assert_eq!(err, want);
    // With a NUL byte, the NUL is named.
    bin[5] = 0;
    std::fs::write(&path, &bin).unwrap();
    let o = support::dvcq(&["decode", path.to_str().unwrap()], None);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(err.contains("the input is not text (a NUL byte at line 1, column 6)"), "{err}");
    // `ring decode` says the same of the same bytes.
    bin[5] = 1;
    std::fs::write(&path, &bin).unwrap();
    let o = support::dvcq(&["ring", "decode", path.to_str().unwrap()], None);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(":1: the input is not text (bytes that are not UTF-8 at column 11)"), "{err}");
    let _ = std::fs::remove_file(&path);
    // A dump on a line that is not UTF-8 is reported with that said.
    let mut text = rdma_core("h", &remote_access_err()).into_bytes();
    text.truncate(text.len() - 10);
    text.extend_from_slice(b"\xff\xfe\n");
    let r = dvcq_cli::decode::scan_stream(&text[..], Vendor::Mlx5, ScanOptions::default(), |f| {
        if let dvcq_cli::decode::Finding::Problem(p) = f {
            assert!(p.reason.contains("(the line is not text: bytes that are not UTF-8 at column 27)"), "{p}");
        }
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!((r.dumps, r.problems), (0, 1));
}

#[test]
fn each_dump_is_shown_with_the_printer_it_came_from() {
    let b = err_cqe(0xd2, 0x05, 0x00, 7, 0x0a, 1);
    let words: String = rdma_core("x", &b).lines().skip(1).map(|l| format!("{l}\n")).collect();
    let inputs = [
        (rdma_core("h", &b), "rdma-core libmlx5 dump"),
        (format!("mlx5_poll_one:1040: dump cqe for cqn 0x406:\n{words}"), "rdma-core debug CQE dump"),
        (format!("mlx5_0:dump_cqe:262:(pid 0): dump error cqe\n{words}"), "Linux mlx5_ib word dump"),
        (words.clone(), "words without header"),
        (kernel(&b, "cqe_dump: "), "Linux mlx5_ib print_hex_dump"),
        (dpdk(&b), "DPDK rte_hexdump"),
        (format!("{}\n", hex(&b)), "bare hex string"),
    ];
    for (text, printer) in inputs {
        let (rc, out, err) = run_cli(&["decode"], &text);
        assert_eq!(rc, 0, "{printer}: {err}");
        assert!(out.starts_with("dump 1: line "), "{printer}: {out}");
        assert!(out.lines().next().unwrap().ends_with(&format!("({printer})")), "{printer}: {out}");
        // A flush error's remark is printed too.
        assert!(out.contains("\n  note             rdma-core does not print its"), "{printer}: {out}");
    }
    let (rc, out, _) = run_cli(
        &["decode", "--vendor", "irdma"],
        "0000000000000000 0000000000000000 0000000000000000 c300000000000000\n",
    );
    assert_eq!(rc, 0);
    assert_eq!(out.lines().next(), Some("dump 1: line 1 (irdma qwords)"));
    // A problem names the format it was read as: a DPDK dump cut short.
    let cut: String = dpdk(&b).lines().take(3).map(|l| format!("{l}\n")).collect();
    let (_, _, err) = run_cli(&["decode"], &cut);
    assert!(err.contains("(DPDK rte_hexdump)"), "{err}");
}

#[test]
fn requester_success_and_every_format_show_their_fields() {
    // A requester SEND completion: byte count, timestamp, the posted opcode, the raw bytes.
    let mut b = [0u8; 64];
    b[44..48].copy_from_slice(&512u32.to_be_bytes());
    b[48..56].copy_from_slice(&0x0011_2233_4455_6677u64.to_be_bytes());
    b[56..60].copy_from_slice(&0x0a00_0042u32.to_be_bytes()); // MLX5_OPCODE_SEND, QPN 0x42
    b[60..62].copy_from_slice(&7u16.to_be_bytes());
    b[63] = 0x01; // REQ, format 0, owner 1
    let c = decode_mlx5(&b, Mlx5Options::default());
    assert_eq!((c.opcode_name, c.status.as_ref().map(|s| s.value)), ("MLX5_CQE_REQ", Some(0)));
    assert_eq!((c.byte_cnt, c.timestamp), (Some(512), Some(0x0011_2233_4455_6677)));
    assert_eq!((c.wqe_opcode, c.wqe_opcode_name), (Some(0x0a), Some("MLX5_OPCODE_SEND")));
    assert_eq!((c.qpn, c.wqe_counter, c.owner), (0x42, 7, 1));
    assert_eq!(c.raw, hex(&b));
    assert_eq!((c.format, c.format_name), (0, "no inline data"));
    assert!(c.notes.is_empty(), "{:?}", c.notes);
    // The format bits (op_own 3:2) by name; format 3 says what it is.
    for (format, name) in [(1, "MLX5_INLINE_SCATTER_32"), (2, "MLX5_INLINE_SCATTER_64"), (3, "MLX5_COMPRESSED")] {
        b[63] = 0x20 | format << 2; // RESP_SEND
        let c = decode_mlx5(&b, Mlx5Options::default());
        assert_eq!((c.format, c.format_name), (format, name));
        assert_eq!(c.notes.iter().any(|n| n.starts_with("format 3")), format == 3, "{:?}", c.notes);
    }
    // The CQEs rdma-core returns no work completion for: no status, and a note saying why.
    let special =
        [(5, "resize marker"), (12, "signature error"), (15, "invalid: "), (6, "tag-matching"), (9, "opcode 9")];
    for (op, note) in special {
        b[63] = op << 4 | 1;
        let c = decode_mlx5(&b, Mlx5Options::default());
        assert_eq!(c.status, None, "opcode {op}");
        assert!(c.notes.iter().any(|n| n.starts_with(note)), "opcode {op}: {:?}", c.notes);
        assert_eq!(c.notes.len(), 1, "opcode {op}: {:?}", c.notes);
    }
    // An error CQE has no timestamp: bytes 48-55 are reserved and syndromes there.
    let e = decode_mlx5(&err_cqe(0xd2, 0x05, 0, 1, 0x0a, 1), Mlx5Options::default());
    assert_eq!(e.timestamp, None);
}

#[test]
fn reserved_bytes_of_an_error_cqe_are_exactly_struct_mlx5_err_cqe_s() {
    // `struct mlx5_err_cqe`: rsvd0[32], srqn, rsvd1[16], then the syndrome bytes.
    for i in 0..64 {
        let mut b = err_cqe(0xd2, 0x05, 0, 1, 0x0a, 1);
        if b[i] != 0 {
            continue;
        }
        b[i] = 0x80;
        let c = decode_mlx5(&b, Mlx5Options::default());
        let noted = c.notes.iter().any(|n| n.contains(&format!("(offsets {i})")));
        assert_eq!(noted, i < 32 || (36..52).contains(&i), "byte {i}: {:?}", c.notes);
    }
}

#[test]
fn text_shows_a_timestamp_and_irdma_flags_only_when_set() {
    let mut b = [0u8; 64];
    b[63] = 0x21; // RESP_SEND, owner 1, timestamp 0
    let (_, out, _) = run_cli(&["decode"], &format!("{}\n", hex(&b)));
    assert!(out.contains("\n  byte_cnt ") && !out.contains("timestamp"), "{out}");
    b[48..56].copy_from_slice(&0xabcdu64.to_be_bytes());
    let (_, out, _) = run_cli(&["decode"], &format!("{}\n", hex(&b)));
    assert!(out.contains("\n  timestamp        0xabcd\n"), "{out}");
    // The 64 bytes as four rows of four words, labelled once.
    let rows: Vec<&str> = out.lines().skip(1).take(4).collect();
    assert_eq!(rows[0], format!("  bytes            {}", ["00000000"; 4].join(" ")), "{out}");
    assert_eq!(rows[1], rows[2]);
    assert_eq!(rows[2], format!("{:19}{}", "", ["00000000"; 4].join(" ")), "{out}");
    assert_eq!(rows[3], format!("{:19}00000000 0000abcd 00000000 00000021", ""), "{out}");
    // irdma: the set flag bits by name (qword3 bits 50 EXTCQE, 54 SOEVENT), none: no line.
    let q = |w3: u64| format!("0000000000000000 0000000000000000 0000000000000000 {w3:016x}\n");
    let (_, out, _) = run_cli(&["decode", "--vendor", "irdma"], &q(0xc300_0000_0000_0000));
    assert!(!out.contains("flags"), "{out}");
    let (_, out, _) = run_cli(&["decode", "--vendor", "irdma"], &q(0xc344_0000_0000_0000));
    assert!(out.contains("\n  flags            EXTCQE SOEVENT\n"), "{out}");
}

#[test]
fn text_separates_dumps_and_sums_up_only_when_something_was_wrong() {
    let one = rdma_core("h", &err_cqe(0xd2, 0x13, 0, 1, 0x0a, 1));
    let two = rdma_core("h", &err_cqe(0xd2, 0x05, 0, 2, 0x0a, 2));
    // Two good dumps: two blocks with one blank line between, no summary, nothing on stderr.
    let (rc, out, err) = run_cli(&["decode"], &format!("{one}{two}"));
    assert_eq!((rc, err.as_str()), (0, ""));
    let blocks: Vec<&str> = out.split("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{out}");
    assert!(blocks[0].starts_with("dump 1: line 1 ") && blocks[1].starts_with("dump 2: line 6 "), "{out}");
    assert!(!out.contains("decoded"), "{out}");
    // A dump and a problem: the summary says how many of each and where to look.
    let cut: String = one.lines().take(3).map(|l| format!("{l}\n")).collect();
    let (rc, out, err) = run_cli(&["decode"], &format!("{two}\n{cut}"));
    assert_eq!(rc, 1);
    assert!(out.ends_with("\n\n1 dump(s) decoded, 1 problem(s) in <stdin> (see standard error)\n"), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // Only problems: no summary, the problem on stderr.
    let (rc, out, err) = run_cli(&["decode"], &cut);
    assert_eq!((rc, out.as_str()), (1, ""));
    assert!(err.starts_with("dvcq decode: <stdin>:1: ") && !err.contains("no CQE dump found"), "{err}");
}

#[test]
fn irdma_qword_counts_other_than_four_or_eight_are_noted() {
    for n in [1, 3, 4, 5, 7, 8] {
        let mut q = vec![0u64; n];
        if let Some(w) = q.get_mut(3) {
            *w = 0xc300_0000_0000_0000;
        }
        let d = dvcq_cli::decode::decode_irdma(&q);
        let noted = d.notes.iter().any(|x| x == &format!("{n} qwords given; 4 or 8 expected"));
        assert_eq!(noted, n != 4 && n != 8, "{n} qwords: {:?}", d.notes);
    }
}

/// The reason `dvcq decode` gives for line 2 of an rdma-core dump whose first row is `row`.
fn first_row_problem(row: &str) -> String {
    let tail = "00000000 00000000 00000000 00000000\n".repeat(2) + "00000000 00008716 0a001f8e 000027d2\n";
    let r = scan(&format!("mlx5: h: got completion with error:\n{row}\n{tail}"), Vendor::Mlx5);
    assert!(r.dumps.is_empty(), "{row}");
    assert_eq!(r.problems.len(), 1, "{row}: {:?}", r.problems);
    assert_eq!(r.problems[0].line, 2, "{row}");
    r.problems[0].reason.clone()
}

#[test]
fn malformed_word_rows_are_diagnosed_precisely() {
    let cases = [
        // A word glued to text before it is no word.
        ("id_00000000 00000000 00000000 00000000", "found 3 hex word(s), expected 4"),
        // An offset is no word, nor is a word with text glued after it alone.
        ("00000010: 00 01 02", "expected 4 hex words, found \"00000010: 00 01 02\""),
        ("12345678x", "expected 4 hex words, found \"12345678x\""),
        // Seven digits are a short word, not a word with a bad character.
        ("0000000 00000000 00000000 00000000", "found 3 hex word(s), expected 4"),
        ("0000z000 00000000 00000000 00000000", "non-hex character 'z' at column 5 in word '0000z000'"),
        ("00000000 00000000 000000\t0 00000000", "found 2 hex word(s), expected 4"),
        ("00000000 000000g0 00000000 00000000", "non-hex character 'g' at column 16 in word '000000g0'"),
    ];
    for (row, why) in cases {
        let reason = first_row_problem(row);
        assert!(reason.contains(why), "{row}: {reason}");
    }
    // Quoted rows are cut at 48 characters, marked with "...".
    let reason = first_row_problem(&"x".repeat(48));
    assert!(reason.ends_with(&format!("found \"{}\"", "x".repeat(48))), "{reason}");
    let reason = first_row_problem(&"x".repeat(49));
    assert!(reason.ends_with(&format!("found \"{}...\"", "x".repeat(48))), "{reason}");
}

#[test]
fn words_after_a_header_are_the_last_four_of_the_row_and_without_one_exactly_four() {
    let b = remote_access_err();
    let dump = rdma_core("h", &b);
    // A hex log prefix before each row: the row's last four words are the CQE's.
    let mut lines = dump.lines();
    let prefixed: String =
        lines.next().map(|h| format!("{h}\n")).into_iter().chain(lines.map(|l| format!("cafe0001 {l}\n"))).collect();
    let r = scan(&prefixed, Vendor::Mlx5);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    check_remote_access(only_mlx5(&r, 0));
    // Without a header, a row of five words is not a row: three rows are left, too few.
    let words: Vec<&str> = dump.lines().skip(1).collect();
    let text = format!("{} 00000000\n{}\n{}\n{}\n", words[0], words[1], words[2], words[3]);
    let r = scan(&text, Vendor::Mlx5);
    assert!(r.dumps.is_empty());
    assert!(
        r.problems.iter().any(|p| p.reason.contains("3 lines of 4 hex words without a header")),
        "{:?}",
        r.problems
    );
}

#[test]
fn an_offset_line_is_a_hexdump_row_when_mostly_bytes_follow() {
    let b = remote_access_err();
    // Half the tokens after the offset are bytes: a row, and the rest are bad bytes.
    let bad = edit_line(&kernel(&b, "cqe_dump: "), 1, |l| format!("{}{}", &l[..l.len() - 23], ["zzz"; 8].join(" ")));
    let r = scan(&bad, Vendor::Mlx5);
    assert!(r.dumps.is_empty());
    assert!(r.problems.iter().any(|p| p.reason.contains("non-hex byte 'zzz' at column 45")), "{:?}", r.problems);
    // A DPDK row's bytes end at a lone `|`; a byte of one digit is a bad byte, not the column.
    let mut d = dpdk(&b);
    d = d.replacen("00000010: 00 00", "00000010: 00 0", 1);
    let r = scan(&d, Vendor::Mlx5);
    assert!(r.problems.iter().any(|p| p.reason.contains("non-hex byte '0' at column")), "{:?}", r.problems);
    // Upper-case bytes in one row and lower-case in another: no single printer wrote that.
    let mut c = b;
    c[0] = 0xab;
    let k = kernel(&c, "").replacen(" d2", " D2", 1);
    let r = scan(&k, Vendor::Mlx5);
    assert!(r.problems.iter().any(|p| p.reason.contains("upper- and lower-case hex mixed")), "{:?}", r.problems);
    // Prose after an offset, or a `|` with no bytes before it, is no row at all.
    let text = "note 00000000: 00 01 02 03 and then some five more words\nx 00000000: | abc\n";
    let r = scan(text, Vendor::Mlx5);
    assert!(r.dumps.is_empty() && r.problems.is_empty(), "{:?}", r.problems);
}

#[test]
fn a_dump_cut_by_the_header_of_another_is_reported_and_the_other_decoded() {
    let b = remote_access_err();
    let dump = rdma_core("h", &b);
    let words: String = dump.lines().skip(1).map(|l| format!("{l}\n")).collect();
    let first: String = dump.lines().take(2).map(|l| format!("{l}\n")).collect();
    let headers = [
        ("mlx5_poll_one:1040: dump cqe for cqn 0x406:", DumpFormat::RdmaCoreDebug),
        ("mlx5_0:dump_cqe:262:(pid 0): dump error cqe", DumpFormat::KernelWords),
        ("mlx5: h: got completion with error:", DumpFormat::RdmaCore),
    ];
    for (header, format) in headers {
        let r = scan(&format!("{first}{header}\n{words}"), Vendor::Mlx5);
        assert_eq!(r.dumps.len(), 1, "{header}: {:?}", r.problems);
        assert_eq!((r.dumps[0].line, r.dumps[0].format), (3, format), "{header}");
        check_remote_access(only_mlx5(&r, 0));
        assert_eq!(r.problems.len(), 1, "{header}: {:?}", r.problems);
        let p = &r.problems[0];
        assert_eq!(p.line, 1, "{header}");
        assert!(p.reason.contains("1 of 4 lines of words, then line 3 starts another dump"), "{header}: {p:?}");
    }
}

#[test]
fn a_hexdump_row_of_more_than_sixteen_bytes_is_named() {
    let b = remote_access_err();
    let k = edit_line(&kernel(&b, ""), 2, |l| format!("{l} 00"));
    let r = scan(&k, Vendor::Mlx5);
    assert!(r.dumps.is_empty());
    assert!(
        r.problems.iter().any(|p| p.line == 3 && p.reason.contains("17 bytes on one line, at most 16 expected")),
        "{:?}",
        r.problems
    );
}

#[test]
fn a_bad_row_keeps_its_dump_s_remaining_rows_and_no_more() {
    let b = remote_access_err();
    let dump = rdma_core("h", &b);
    let header = dump.lines().next().unwrap();
    let rows: Vec<&str> = dump.lines().skip(1).collect();
    let words = rows.join("\n");
    let bad = "00000000 zz";
    // (text, the line of the problem, the dumps decoded: line and format)
    let cases = [
        // The bad row first: its dump's three other rows are its own; a headerless dump follows.
        (format!("{header}\n{bad}\n{}\n{words}\n", rows[1..].join("\n")), 2, vec![(6, DumpFormat::Words)]),
        // The bad row second: two rows are left to it.
        (format!("{header}\n{}\n{bad}\n{}\n{words}\n", rows[0], rows[2..].join("\n")), 3, vec![(6, DumpFormat::Words)]),
        // The bad row last: nothing is left to it.
        (format!("{header}\n{}\n{bad}\n{words}\n", rows[..3].join("\n")), 5, vec![(6, DumpFormat::Words)]),
        // A header ends the rows left to a bad one.
        (format!("{header}\n{bad}\n{}\n{dump}", rows[1]), 2, vec![(4, DumpFormat::RdmaCore)]),
    ];
    for (text, problem_line, want) in cases {
        let r = scan(&text, Vendor::Mlx5);
        let got: Vec<(usize, DumpFormat)> = r.dumps.iter().map(|d| (d.line, d.format)).collect();
        assert_eq!(got, want, "{text}\n{:?}", r.problems);
        assert_eq!(
            r.problems.iter().map(|p| p.line).collect::<Vec<_>>(),
            vec![problem_line],
            "{text}\n{:?}",
            r.problems
        );
        check_remote_access(only_mlx5(&r, 0));
    }
}

#[test]
fn blank_lines_inside_a_dump_and_dumps_back_to_back() {
    let b = remote_access_err();
    let rows: Vec<String> = rdma_core("h", &b).lines().skip(1).map(str::to_owned).collect();
    let k: Vec<String> = kernel(&b, "").lines().map(str::to_owned).collect();
    let lines = |v: &[String]| v.iter().map(|l| format!("{l}\n")).collect::<String>();
    let formats = |text: &str| {
        let r = scan(text, Vendor::Mlx5);
        for i in 0..r.dumps.len() {
            check_remote_access(only_mlx5(&r, i));
        }
        (
            r.dumps.iter().map(|d| (d.line, d.format)).collect::<Vec<_>>(),
            r.problems.iter().map(|p| p.line).collect::<Vec<_>>(),
        )
    };
    // Headerless words: a blank line between rows is inside the dump; a line of text is not.
    let text = format!("{}\n{}", lines(&rows[..2]), lines(&rows[2..]));
    assert_eq!(formats(&text), (vec![(1, DumpFormat::Words)], vec![]));
    let text = format!("{}some text\n{}", lines(&rows[..2]), lines(&rows[2..]));
    assert_eq!(formats(&text), (vec![], vec![1, 4]));
    // One line of four words alone is no dump and no problem.
    assert_eq!(formats(&format!("x\n{}y\n", lines(&rows[..1]))), (vec![], vec![]));
    // A hexdump: a blank line between rows is inside; offset 0 again starts the next dump.
    let text = format!("{}\n{}", lines(&k[..2]), lines(&k[2..]));
    assert_eq!(formats(&text), (vec![(1, DumpFormat::Kernel)], vec![]));
    let text = format!("{}{}", lines(&k), lines(&k));
    assert_eq!(formats(&text), (vec![(1, DumpFormat::Kernel), (5, DumpFormat::Kernel)], vec![]));
    let text = format!("{}\n{}", lines(&k), lines(&k));
    assert_eq!(formats(&text), (vec![(1, DumpFormat::Kernel), (6, DumpFormat::Kernel)], vec![]));
    // DPDK rows without their title line are still DPDK's (the ` | ` column says so).
    let d: String = dpdk(&b).lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert_eq!(formats(&d), (vec![(1, DumpFormat::Dpdk)], vec![]));
}

#[test]
fn a_dpdk_title_s_length_decides_ring_or_single_cqe() {
    let err = remote_access_err();
    let mut ok = [0u8; 64];
    ok[63] = 0x21; // RESP_SEND
    let announce = |bytes: &[u8], len: usize| {
        let d = dpdk(bytes);
        d.replacen(&format!("len={}", bytes.len()), &format!("len={len}"), 1)
    };
    // Two CQEs announced and given, neither an error: a ring dump with nothing to show.
    let r = scan(&announce(&[ok, ok].concat(), 128), Vendor::Mlx5);
    assert!(r.dumps.is_empty());
    let why: Vec<&str> = r.problems.iter().map(|p| p.reason.as_str()).collect();
    assert_eq!(why, ["ring dump of 2 64-byte CQEs holds no error CQE (opcode 13 or 14)"]);
    // Two announced, one given: still a ring (its error CQE is slot 0), and the cut is named.
    let r = scan(&announce(&err, 128), Vendor::Mlx5);
    assert_eq!(r.dumps.iter().map(|d| d.slot).collect::<Vec<_>>(), [Some(0)]);
    let why: Vec<&str> = r.problems.iter().map(|p| p.reason.as_str()).collect();
    assert_eq!(why, ["truncated dump: 64 of the 128 bytes its title announces (the first 64 searched: 1 error CQE)"]);
    // Three announced, two given, both errors: the count says what the output holds.
    let r = scan(&announce(&[err, err].concat(), 192), Vendor::Mlx5);
    assert_eq!(r.dumps.iter().map(|d| d.slot).collect::<Vec<_>>(), [Some(0), Some(1)]);
    let why: Vec<&str> = r.problems.iter().map(|p| p.reason.as_str()).collect();
    assert_eq!(
        why,
        ["truncated dump: 128 of the 192 bytes its title announces (the first 128 searched: 2 error CQEs)"]
    );
    // Two announced, one given, no error: nothing is shown, and the message does not say
    // "decoded" as if something were.
    let r = scan(&announce(&ok, 128), Vendor::Mlx5);
    assert!(r.dumps.is_empty());
    let why: Vec<&str> = r.problems.iter().map(|p| p.reason.as_str()).collect();
    assert_eq!(
        why,
        ["truncated dump: 64 of the 128 bytes its title announces (the first 64 searched: no error CQE, opcode 13 or 14)"]
    );
    // Less than one CQE given: nothing decoded, and the message does not claim otherwise.
    let r = scan(&announce(&err[..32], 128), Vendor::Mlx5);
    assert!(r.dumps.is_empty());
    let why: Vec<&str> = r.problems.iter().map(|p| p.reason.as_str()).collect();
    assert_eq!(why, ["truncated dump: 32 of the 128 bytes its title announces"]);
}

/// The slots and ring CQE sizes `scan_with` reports for `text` read with `size`.
fn ring_slots(text: &str, size: RingCqeSize) -> Vec<(Option<usize>, Option<u32>, usize)> {
    let r = scan_with(text, Vendor::Mlx5, ScanOptions { ring_cqe_size: size });
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    r.dumps.iter().map(|d| (d.slot, d.ring_cqe_size, d.line)).collect()
}

/// DPDK built with 128-byte cache lines (arm64's generic build) creates 128-byte CQEs and
/// dumps whole 128-byte slots, `struct mlx5_cqe` padding 64 bytes before the cqe64.
#[test]
fn dpdk_rings_of_128_byte_cqes() {
    let err = remote_access_err();
    let mut ok = [0u8; 64];
    ok[44..48].copy_from_slice(&64u32.to_be_bytes());
    ok[56..60].copy_from_slice(&0x0a00_0123u32.to_be_bytes());
    let mut unwritten = [0u8; 64];
    unwritten[63] = 0xf1; // DPDK's initial op_own
    let slot = |first: [u8; 64], cqe64: [u8; 64]| [first, cqe64].concat();
    let zero = [0u8; 64];
    // Slot 1 of four is the error CQE; every slot's first half is zero.
    let ring: Vec<u8> = [slot(zero, ok), slot(zero, err), slot(zero, ok), slot(zero, unwritten)].concat();
    let text = format!("noise\n{}", dpdk(&ring));
    // Found as slot 1, at its slot's first row (title on line 2, 8 rows a slot), whole.
    let want = vec![(Some(1), Some(128), 2 + 1 + 8)];
    assert_eq!(ring_slots(&text, RingCqeSize::Auto), want);
    assert_eq!(ring_slots(&text, RingCqeSize::Bytes128), want);
    let r = scan(&text, Vendor::Mlx5);
    check_remote_access(only_mlx5(&r, 0));
    assert!(dvcq_cli::decode::render_text(1, &r.dumps[0])
        .starts_with("dump 1: line 11 (DPDK rte_hexdump, CQE 1 of the ring; 128-byte CQEs, its cqe64 shown)\n"));
    // Read as 64-byte CQEs, the same bytes put the error CQE in slot 3.
    assert_eq!(ring_slots(&text, RingCqeSize::Bytes64), vec![(Some(3), Some(64), 2 + 1 + 12)]);

    // First halves holding inline data (format 2 receives): not detected, so 64-byte CQEs;
    // one of them even reads as an error CQE there. `--cqe-size 128` reads the ring right.
    let mut inline = [0x5au8; 64];
    inline[63] = 0xd0;
    let ring: Vec<u8> = [slot(inline, ok), slot(zero, err)].concat();
    let text = dpdk(&ring);
    assert_eq!(ring_slots(&text, RingCqeSize::Auto), vec![(Some(0), Some(64), 2), (Some(3), Some(64), 2 + 12)]);
    assert_eq!(ring_slots(&text, RingCqeSize::Bytes128), vec![(Some(1), Some(128), 2 + 8)]);

    // A ring of 64-byte CQEs is never taken for one of 128: DPDK initialises every op_own.
    let ring: Vec<u8> = [unwritten, err, unwritten, ok].concat();
    assert_eq!(ring_slots(&dpdk(&ring), RingCqeSize::Auto), vec![(Some(1), Some(64), 2 + 4)]);

    // One 64-byte CQE is that CQE whatever the ring's size: no slot, nothing cut.
    for size in [RingCqeSize::Auto, RingCqeSize::Bytes64, RingCqeSize::Bytes128] {
        assert_eq!(ring_slots(&dpdk(&err), size), vec![(None, None, 1)], "{size:?}");
        assert_eq!(ring_slots(&kernel(&err, "cqe_dump: "), size), vec![(None, None, 1)], "{size:?}");
    }

    // Messages count 128-byte CQEs: a ring without an error, a cut ring, a cut slot.
    let why = |text: &str| -> Vec<String> { scan(text, Vendor::Mlx5).problems.into_iter().map(|p| p.reason).collect() };
    let ring: Vec<u8> = [slot(zero, ok), slot(zero, unwritten)].concat();
    assert_eq!(why(&dpdk(&ring)), ["ring dump of 2 128-byte CQEs holds no error CQE (opcode 13 or 14)"]);
    let ring: Vec<u8> = [slot(zero, ok), slot(zero, err)].concat();
    let cut = dpdk(&ring).replacen("len=256", "len=512", 1);
    assert_eq!(
        why(&cut),
        ["truncated dump: 256 of the 512 bytes its title announces (the first 256 searched: 1 error CQE)"]
    );
    let r = scan(&cut, Vendor::Mlx5);
    assert_eq!(r.dumps.iter().map(|d| d.slot).collect::<Vec<_>>(), [Some(1)]);
    let ring: Vec<u8> = [slot(zero, err), zero.to_vec()].concat();
    let text = dpdk(&ring);
    assert_eq!(why(&text), ["dump longer than one 128-byte CQE: 192 bytes, the last 64 not decoded"]);
    assert_eq!(scan(&text, Vendor::Mlx5).dumps.len(), 1);
}

#[test]
fn irdma_qwords_printed_without_zero_padding_make_a_cqe_only_four_or_eight_to_a_line() {
    let padded = "0000000000000000 00007f00deadbeef 0000001200000000 c080000500010003";
    let want = scan(padded, Vendor::Irdma);
    assert_eq!(want.dumps.len(), 1, "{:?}", want.problems);
    // `0x%llx`, `%#llx` (zero printed as a bare 0), upper case, commas, and a label first.
    for line in [
        "0x0 0x7f00deadbeef 0x1200000000 0xc080000500010003",
        "cqe[5]: 0 0x7f00deadbeef 0x1200000000 0xc080000500010003",
        "0X0, 0X7F00DEADBEEF, 0X1200000000, 0XC080000500010003",
        "0 00007f00deadbeef 0x1200000000 c080000500010003",
    ] {
        let r = scan(line, Vendor::Irdma);
        assert!(r.problems.is_empty(), "{line}: {:?}", r.problems);
        assert_eq!(r.dumps.iter().map(|d| &d.cqe).collect::<Vec<_>>(), [&want.dumps[0].cqe], "{line}");
    }
    // Eight of them: an extended CQE, the same as its padded form.
    let eight_padded = format!("{padded} 0000000000000000 0000000000000000 0000000000000000 8000000000000abc");
    let eight = "0x0 0x7f00deadbeef 0x1200000000 0xc080000500010003 0 0 0 0x8000000000000abc";
    let (a, b) = (scan(&eight_padded, Vendor::Irdma), scan(eight, Vendor::Irdma));
    assert_eq!(b.dumps.len(), 1, "{:?}", b.problems);
    assert_eq!(a.dumps[0].cqe, b.dumps[0].cqe);
    // Not a CQE, and not a problem: no 0x at all, too few or too many numbers, numbers that
    // do not end the line, a 0x number in the label.
    for line in [
        "0 0 0 0",
        "0x0 0x1 0x2",
        "0x0 0x1 0x2 0x3 0x4",
        "0x0 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8",
        "0x0 0x1 0x2 0x3 done",
        "wqe 0x5 regs 0x0 0x1 0x2 0x3",
    ] {
        let r = scan(line, Vendor::Irdma);
        assert!(r.dumps.is_empty() && r.problems.is_empty(), "{line}: {:?} {:?}", r.dumps, r.problems);
    }
    // A leading zero is not printf's unpadded output: such a number is a qword cut short.
    let r = scan("0x0 0x07f00deadbeef 0x1200000000 0xc080000500010003", Vendor::Irdma);
    assert!(r.dumps.is_empty(), "{:?}", r.dumps);
    assert!(r.problems[0].reason.contains("'0x07f00deadbeef' at column 5: 13 hex digits"), "{:?}", r.problems);
    // Unpadded numbers are not joined across lines: one a line is prose, as before.
    let r = scan("0x0\n0x7f00deadbeef\n0x1200000000\n0xc080000500010003\n", Vendor::Irdma);
    assert!(r.dumps.is_empty(), "{:?}", r.dumps);
}

#[test]
fn irdma_qwords_short_of_a_cqe_are_reported_where_they_are() {
    let z = "0000000000000000";
    let text = format!("cqe:\n{z}\n{z}\n{z}\nend\n{z} {z} {z}\nend\n");
    let r = scan(&text, Vendor::Irdma);
    assert!(r.dumps.is_empty());
    let got: Vec<(usize, &str)> = r.problems.iter().map(|p| (p.line, p.reason.as_str())).collect();
    assert_eq!(
        got,
        [(2, "found 3 qwords (lines 2 to 4), expected 4 or 8 per CQE"), (6, "found 3 qwords, expected 4 or 8 per CQE")]
    );
    // Words of 12 to 20 characters that are mostly not hex, and hex runs far from 16 digits,
    // are prose, not broken qwords.
    let r = scan("completion_status: ok\nid 0123456789abcdef01234567\n", Vendor::Irdma);
    assert!(r.dumps.is_empty() && r.problems.is_empty(), "{:?}", r.problems);
}
