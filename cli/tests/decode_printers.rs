//! `dvcq decode` on the error-CQE dumps of every printer and era: each dump below is written
//! the way its printer's code writes it (the format strings and the loads are quoted from
//! rdma-core `providers/mlx5`, Linux `drivers/infiniband/hw/mlx5/cq.c` and
//! `drivers/net/ethernet/mellanox/mlx5/core`, DPDK `drivers/net/mlx5`, `drivers/compress/mlx5`
//! and `lib/eal/common/eal_common_hexdump.c` at the releases named), not from the layout
//! alone. Each must decode after a prompt or program name on its first line, and without
//! the input's final newline.

mod support;

use dvcq_cli::decode::{scan, Decoded, DumpFormat, Mlx5Cqe, Report, Vendor};

/// The error CQE every printer below dumps: a requester remote access error (syndrome 0x13,
/// vendor syndrome 0x88) on QP 0x2a8af, WQE counter 0x1234, SRQ/user index 0x77.
fn err_cqe() -> [u8; 64] {
    let mut b = [0u8; 64];
    b[32..36].copy_from_slice(&0x77u32.to_be_bytes());
    b[52] = 0x03; // hw_err_synd
    b[53] = 0x01; // hw_synd_type
    b[54] = 0x88;
    b[55] = 0x13;
    b[56..60].copy_from_slice(&((0x0a << 24) | 0x2_a8afu32).to_be_bytes());
    b[60..62].copy_from_slice(&0x1234u16.to_be_bytes());
    b[63] = 0xd1; // MLX5_CQE_REQ_ERR, owner 1
    b
}

/// `%08x %08x %08x %08x\n` of each 16 bytes, every word a big-endian load (`be32toh`,
/// `be32_to_cpu`), after `prefix`.
fn be_words(prefix: &str, b: &[u8]) -> String {
    b.chunks(16)
        .map(|r| {
            let w = |i: usize| u32::from_be_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
            format!("{prefix}{:08x} {:08x} {:08x} {:08x}\n", w(0), w(4), w(8), w(12))
        })
        .collect()
}

/// Linux `print_hex_dump(level, prefix_str, DUMP_PREFIX_OFFSET, 16, 1, buf, len, false)`:
/// `printk("%s%s%.8x: %s\n", level, prefix_str, i, linebuf)` with `hex_dump_to_buffer`'s
/// `%02x` bytes joined by single spaces; `stamp` is what the log adds before it.
fn print_hex_dump(stamp: &str, prefix: &str, b: &[u8]) -> String {
    b.chunks(16)
        .enumerate()
        .map(|(r, row)| {
            let bytes: Vec<String> = row.iter().map(|x| format!("{x:02x}")).collect();
            format!("{stamp}{prefix}{:08x}: {}\n", r * 16, bytes.join(" "))
        })
        .collect()
}

/// DPDK `rte_hexdump(f, title, buf, len)`: `"%s at [%p], len=%u\n"`, then per 16 bytes
/// `"%08X:"`, `" %02X"` each, the `" | "` separator and the printable characters. Before
/// 19.05 (commit d0885cb781) a short last line repeats `" | "` once per missing byte and
/// once more; from 19.05 it pads the missing bytes with spaces and prints one.
fn rte_hexdump(title: &str, addr: u64, b: &[u8], before_19_05: bool) -> String {
    let mut s = format!("{title} at [0x{addr:x}], len={}\n", b.len());
    for (r, row) in b.chunks(16).enumerate() {
        s += &format!("{:08X}:", r * 16);
        for x in row {
            s += &format!(" {x:02X}");
        }
        if before_19_05 {
            s += &" | ".repeat(17 - row.len());
        } else {
            s += &"   ".repeat(16 - row.len());
            s += " | ";
        }
        s.extend(row.iter().map(|&x| if (b' '..=b'~').contains(&x) { x as char } else { '.' }));
        s.push('\n');
    }
    s
}

/// DPDK `DRV_LOG(ERR, "%08X %08X %08X %08X", cqe[i], ...)` over `volatile uint32_t *cqe`:
/// plain loads, so on a little-endian host each word is its four bytes reversed; `prefix`
/// is what `DRV_LOG` puts before the message (`mlx5_net: `).
fn dpdk_words(prefix: &str, b: &[u8]) -> String {
    b.chunks(16)
        .map(|r| {
            let w = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
            format!("{prefix}{:08X} {:08X} {:08X} {:08X}\n", w(0), w(4), w(8), w(12))
        })
        .collect()
}

/// One printer's dump: its name, the text, the format `dvcq decode` names, the 1-based line
/// its CQE is reported at.
struct Case {
    era: &'static str,
    text: String,
    format: DumpFormat,
    line: usize,
}

fn cases() -> Vec<Case> {
    let e = err_cqe();
    // DPDK's marker, `"seen"` and its NUL, where each release writes it (the bytes are
    // reserved in an error CQE, and the decoder ignores them).
    let marked = |off: usize| {
        let mut m = e;
        m[off..off + 5].copy_from_slice(b"seen\0");
        m
    };
    let mut ok = [0u8; 64]; // a good CQE of the ring around the error CQE
    ok[44..48].copy_from_slice(&64u32.to_be_bytes());
    ok[56..60].copy_from_slice(&0x0a02_a8afu32.to_be_bytes());
    let ring = |cqe: [u8; 64]| [ok, cqe, ok, ok].concat();
    let stamp = "[ 4321.123456] ";
    vec![
        Case {
            era: "rdma-core v13 on: libmlx5 error CQE (mlx5_err / fprintf, PFX)",
            text: format!("mlx5: {}: got completion with error:\n{}", "node-7", be_words("", &e)),
            format: DumpFormat::RdmaCore,
            line: 1,
        },
        Case {
            era: "rdma-core v13 on: MLX5_DEBUG build, mlx5_dbg(\"%s:%d: \" \"dump cqe for cqn 0x%x:\\n\")",
            text: format!("mlx5_parse_cqe:565: dump cqe for cqn 0x406:\n{}", be_words("", &e)),
            format: DumpFormat::RdmaCoreDebug,
            line: 1,
        },
        Case {
            era: "Linux v3.11 to v4.15+: mlx5_ib_warn + pr_info words",
            text: format!(
                "{stamp}mlx5_0:dump_cqe:262:(pid 0): dump error cqe\n{}",
                be_words(stamp, &e)
            ),
            format: DumpFormat::KernelWords,
            line: 1,
        },
        Case {
            era: "Linux v4.19 to v6.1: dump error cqe + mlx5_dump_err_cqe (print_hex_dump, no prefix)",
            text: format!(
                "{stamp}infiniband mlx5_0: dump_cqe:273:(pid 811): dump error cqe\n{}",
                print_hex_dump(stamp, "", &e)
            ),
            format: DumpFormat::Kernel,
            line: 2,
        },
        Case {
            era: "Linux v5.x to v6.1: WC error line, then dump error cqe and print_hex_dump",
            text: format!(
                "{stamp}infiniband mlx5_0: mlx5_handle_error_cqe:334:(pid 811): WC error: 10, Message: remote access error\n\
                 {stamp}infiniband mlx5_0: dump_cqe:272:(pid 811): dump error cqe\n{}",
                print_hex_dump(stamp, "", &e)
            ),
            format: DumpFormat::Kernel,
            line: 3,
        },
        Case {
            era: "Linux v6.2 on: mlx5_ib_log WC error + print_hex_dump(\"cqe_dump: \")",
            text: format!(
                "{stamp}infiniband mlx5_0: dump_cqe:276:(pid 811): WC error: 10, Message: remote access error\n{}",
                print_hex_dump(stamp, "cqe_dump: ", &e)
            ),
            format: DumpFormat::Kernel,
            line: 2,
        },
        Case {
            era: "Linux mlx5e Ethernet SQ: netdev_err Error cqe on cqn + mlx5_dump_err_cqe",
            text: format!(
                "{stamp}mlx5_core 0000:3b:00.0 eth2: Error cqe on cqn 0x4a7, ci 0x15, sqn 0x8a, opcode 0xd, syndrome 0x13, vendor syndrome 0x88\n{}",
                print_hex_dump(stamp, "", &e)
            ),
            format: DumpFormat::Kernel,
            line: 2,
        },
        Case {
            era: "DPDK 17.11 to 18.05 debug: ERROR(unexpected CQE error) + rte_hexdump(stderr, \"MLX5 Error CQE:\"), marker at 1",
            text: format!(
                "PMD: mlx5_rxtx.h:390: check_cqe(): unexpected CQE error 13 (0x0d) syndrome 0x13\n{}",
                rte_hexdump("MLX5 Error CQE:", 0x7f5e_1c3f_f040, &marked(1), true)
            ),
            format: DumpFormat::Dpdk,
            line: 2,
        },
        Case {
            era: "DPDK 18.08 to 19.05 debug: the same, marker at 17",
            text: format!(
                "PMD: mlx5_rxtx.h:496: check_cqe(): unexpected CQE error 13 (0x0d) syndrome 0x13\n{}",
                rte_hexdump("MLX5 Error CQE:", 0x7f5e_1c3f_f040, &marked(17), true)
            ),
            format: DumpFormat::Dpdk,
            line: 2,
        },
        Case {
            era: "DPDK 19.08 to 24.07: dump file, err_str, MLX5 Error CQ ring, marker at 36",
            text: format!(
                "Unexpected CQE error syndrome 0x13 CQN = 4 SQN = 291 wqe_counter = 4660 wq_ci = 9 cq_ci = 1\n\n\n{}\n\n\n",
                rte_hexdump("MLX5 Error CQ:", 0x17fe_3c000, &ring(marked(36)), false)
            ),
            format: DumpFormat::Dpdk,
            line: 4 + 4 + 1,
        },
        Case {
            era: "DPDK 24.11 on: the same, struct mlx5_error_cqe, marker at 4",
            text: format!(
                "Unexpected CQE error syndrome 0x13 CQN = 4 SQN = 291 wqe_counter = 4660 wq_ci = 9 cq_ci = 1\n\n\n{}\n\n\n",
                rte_hexdump("MLX5 Error CQ:", 0x17fe_3c000, &ring(marked(4)), false)
            ),
            format: DumpFormat::Dpdk,
            line: 4 + 4 + 1,
        },
        Case {
            era: "DPDK 20.11: flow age, DRV_LOG \"Error cqe:\" + host-order words (mlx5_pci)",
            text: format!("mlx5_pci: Error cqe:\n{}mlx5_pci: \nError wqe:\n", dpdk_words("mlx5_pci: ", &e)),
            format: DumpFormat::DpdkWords,
            line: 1,
        },
        Case {
            era: "DPDK 21.05 on: ASO and compress, DRV_LOG \"Error cqe:\" (mlx5_net), debug build",
            text: format!(
                "mlx5_net: mlx5_flow_aso.c:489: mlx5_aso_dump_err_objs(): Error cqe:\n{}mlx5_net: mlx5_flow_aso.c:493: mlx5_aso_dump_err_objs(): \nError wqe:\n{}",
                dpdk_words("mlx5_net: mlx5_flow_aso.c:491: mlx5_aso_dump_err_objs(): ", &e),
                dpdk_words("mlx5_net: mlx5_flow_aso.c:495: mlx5_aso_dump_err_objs(): ", &[0x5a; 64])
            ),
            format: DumpFormat::DpdkWords,
            line: 1,
        },
    ]
}

fn only_cqe(r: &Report) -> &Mlx5Cqe {
    assert_eq!(r.dumps.len(), 1, "{:?}", r.dumps.iter().map(|d| (d.line, d.format)).collect::<Vec<_>>());
    match &r.dumps[0].cqe {
        Decoded::Mlx5(c) => c,
        Decoded::Irdma(_) => panic!("not mlx5"),
    }
}

/// The decoded CQE is [`err_cqe`], field by field.
fn check(c: &Mlx5Cqe, era: &str) {
    assert_eq!((c.opcode, c.owner, c.syndrome, c.vendor_err_synd), (13, 1, Some(0x13), Some(0x88)), "{era}");
    assert_eq!((c.qpn, c.wqe_counter, c.srqn_uidx), (0x2_a8af, 0x1234, 0x77), "{era}");
    assert_eq!((c.hw_err_synd, c.hw_synd_type), (Some(3), Some(1)), "{era}");
    let status = c.status.as_ref().unwrap();
    assert_eq!((status.value, status.text), (10, "remote access error"), "{era}");
    assert!(!c.notes.iter().any(|n| n.contains("reserved")), "{era}: {:?}", c.notes);
}

#[test]
fn every_printer_of_every_era_decodes() {
    for case in cases() {
        let r = scan(&case.text, Vendor::Mlx5);
        assert!(r.problems.is_empty(), "{}: {:?}", case.era, r.problems);
        check(only_cqe(&r), case.era);
        assert_eq!((r.dumps[0].format, r.dumps[0].line), (case.format, case.line), "{}", case.era);
        // DPDK's marker is named where a release writes it.
        if case.era.contains("marker at") {
            let c = only_cqe(&r);
            assert!(c.notes.iter().any(|n| n.contains("\"seen\" marker")), "{}: {:?}", case.era, c.notes);
        }
    }
}

#[test]
fn a_prompt_before_a_dump_and_a_missing_final_newline_do_not_stop_it() {
    for case in cases() {
        // An interactive program's prompt (testpmd writes its dumps to standard error, where
        // they land after `testpmd> `) or a program name, on the dump's first line.
        for prompt in ["testpmd> ", "app> ", "[app] "] {
            let text = format!("{prompt}{}", case.text);
            let r = scan(&text, Vendor::Mlx5);
            assert!(r.problems.is_empty(), "{} after {prompt:?}: {:?}", case.era, r.problems);
            check(only_cqe(&r), case.era);
        }
        // The log ends without its final newline (blank lines after a DPDK dump file's last
        // dump too).
        let text = case.text.trim_end_matches('\n');
        let r = scan(text, Vendor::Mlx5);
        assert!(r.problems.is_empty(), "{} without its final newline: {:?}", case.era, r.problems);
        check(only_cqe(&r), case.era);
        // And through the CLI, which reads the input as a stream.
        let o = support::dvcq(&["decode", "--json"], Some(text));
        assert_eq!(o.status.code(), Some(0), "{}: {}", case.era, String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!((v["qpn"].as_u64(), v["syndrome"].as_u64()), (Some(0x2_a8af), Some(0x13)), "{}", case.era);
    }
}

/// DPDK 17.11 to 19.05 also dumped a CQE with an unexpected opcode (`MLX5 CQE:`,
/// `sizeof(*cqe)` bytes): 128 where DPDK was built with 128-byte cache lines, the cqe64 in
/// the second half. Their `MLX5 Error CQE:` dumps took `sizeof(struct mlx5_err_cqe)`, 64
/// bytes, from the start of such a CQE: the padding, which holds no CQE.
#[test]
fn old_dpdk_single_cqe_dumps_of_128_byte_cqes() {
    let mut resp = [0u8; 64];
    resp[44..48].copy_from_slice(&1500u32.to_be_bytes());
    resp[56..60].copy_from_slice(&0x0000_0042u32.to_be_bytes());
    resp[63] = 0x11; // MLX5_CQE_RESP_WR_IMM: not one check_cqe expects on Rx
    let padded = [[0u8; 64], resp].concat();
    let text = format!(
        "PMD: mlx5_rxtx.h:400: check_cqe(): unexpected CQE opcode 1 (0x01)\n{}",
        rte_hexdump("MLX5 CQE:", 0x7f5e_1c3f_f000, &padded, true)
    );
    let r = scan(&text, Vendor::Mlx5);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let c = only_cqe(&r);
    assert_eq!((c.opcode, c.qpn, c.byte_cnt), (1, 0x42, Some(1500)));
    assert_eq!((r.dumps[0].slot, r.dumps[0].line), (None, 2));
    // The padding alone, as a 128-byte-cache-line build dumped it for an error CQE.
    let text = rte_hexdump("MLX5 Error CQE:", 0x7f5e_1c3f_f000, &[0u8; 64], true);
    let r = scan(&text, Vendor::Mlx5);
    assert!(r.dumps.is_empty());
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(r.problems[0].reason.contains("64 zero bytes, not a CQE"), "{}", r.problems[0]);
    // A single-CQE title that announces more than one CQE (neither 64 nor 128 bytes) keeps
    // the first 64 and says so.
    let text = rte_hexdump("MLX5 Error CQE:", 0x7f5e_1c3f_f000, &[err_cqe(), [0x11; 64], [0x22; 64]].concat(), false);
    let r = scan(&text, Vendor::Mlx5);
    check(only_cqe(&r), "three CQEs under a single-CQE title");
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(
        r.problems[0].reason.contains("dump longer than one 64-byte CQE: 192 bytes, the last 128 not decoded"),
        "{}",
        r.problems[0]
    );
}

/// DPDK 24.11 on prints `sizeof(struct mlx5_error_cqe)` after `Error cqe:`: 128 bytes, eight
/// lines, where it is built with 128-byte cache lines, the cqe64 in the last four. Before,
/// such a build printed the first 64 bytes, the padding.
#[test]
fn dpdk_error_cqe_words_of_128_byte_cqes() {
    let padded = [[0u8; 64], err_cqe()].concat();
    let text = format!("mlx5_net: Error cqe:\n{}mlx5_net: \nError wqe:\n", dpdk_words("mlx5_net: ", &padded));
    let r = scan(&text, Vendor::Mlx5);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    check(only_cqe(&r), "eight lines");
    let text = format!("mlx5_net: Error cqe:\n{}", dpdk_words("mlx5_net: ", &[0u8; 64]));
    let r = scan(&text, Vendor::Mlx5);
    assert!(r.dumps.is_empty());
    assert!(r.problems.len() == 1 && r.problems[0].reason.contains("64 zero bytes"), "{:?}", r.problems);
}

/// Dumps of words and bytes that are not CQEs are passed over, not decoded as CQEs: rdma-core's
/// debug WQE dump, DPDK's WQE and opaque-data words after `Error cqe:`, its SQ, RQ and TXQ
/// hexdumps, and the CQ context a DPDK queue dump reads from the device (`Query CQ Dump:`,
/// 24.07 on: 272 bytes of `query_cq_out`), even where their bytes look like an error CQE.
#[test]
fn dumps_that_are_not_cqes_are_passed_over() {
    let looks_like_error = err_cqe();
    let query_cq_out: Vec<u8> = [&[0u8; 16][..], &looks_like_error, &[0u8; 192]].concat();
    let texts = [
        format!("dump wqe at 0x55d1c7a2e000\n{}", be_words("", &looks_like_error)),
        format!("mlx5_net: \nError wqe:\n{}", dpdk_words("mlx5_net: ", &looks_like_error)),
        format!("mlx5_compress: \nError opaq:\n{}", dpdk_words("mlx5_compress: ", &looks_like_error)),
        rte_hexdump("MLX5 Error SQ:", 0x17fe_40000, &looks_like_error, false),
        rte_hexdump("MLX5 Error RQ:", 0x17fe_40000, &looks_like_error, false),
        rte_hexdump("MLX5 TXQ:", 0x17fe_40000, &looks_like_error, true),
        format!(
            "CQ DevX ID = 1031 Port = 0 Queue index = 2 \n\n\n{}\n\n\n",
            rte_hexdump("Query CQ Dump:", 0x7ffd_1234_5670, &query_cq_out, false)
        ),
    ];
    for text in texts {
        let r = scan(&text, Vendor::Mlx5);
        assert!(r.dumps.is_empty() && r.problems.is_empty(), "{text}\n{:?} {:?}", r.dumps, r.problems);
        // An error CQE dumped after it is still found.
        let both = format!("{text}{}", rte_hexdump("MLX5 Error CQE:", 0x7f5e_1c3f_f040, &err_cqe(), true));
        check(only_cqe(&scan(&both, Vendor::Mlx5)), &text);
    }
}
