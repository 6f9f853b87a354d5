//! The `dvcq` binary end to end: good runs produce the documented output, bad arguments and
//! files give one clear error line, `dvcq <subcommand>: [<file>:<line>: ]...`, and exit
//! status 2.

#[path = "../../tests/support/skip.rs"]
mod skip;
mod support;

use std::process::Output;
use support::dvcq;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What a subcommand's error line starts with: `dvcq bench poll: `, `dvcq decode: `.
fn prefix(args: &[&str]) -> String {
    match args {
        [top @ ("bench" | "ring"), sub, ..] => format!("dvcq {top} {sub}: "),
        [top, ..] => format!("dvcq {top}: "),
        [] => "dvcq: ".into(),
    }
}

#[test]
fn bench_prints_json_rows() {
    let o = dvcq(
        &["bench", "poll", "--mode", "full", "--batch", "4", "--reps", "1", "--laps", "1", "--entries", "64", "--json"],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let line = String::from_utf8(o.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(v["mode"], "full");
    assert_eq!(v["batch"], 4);
    assert_eq!(v["per_rep"], 64);
    assert!(v["ns_median"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_table_has_the_perftest_layout() {
    // 202 slots: what rdma-core allocates for a 100-entry GEN2 CQ (not a power of two).
    let o = dvcq(&["bench", "poll", "--vendor", "irdma", "--reps", "1", "--laps", "1", "--entries", "202"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains(" #mode   #batch   #cqes/rep   ns/CQE[median]"), "{out}");
    assert!(out.contains("irdma model (GEN2)"), "{out}");
    let rows: Vec<(&str, &str)> = out
        .lines()
        .filter(|l| l.split_whitespace().nth(1).is_some_and(|b| b.parse::<u32>().is_ok()))
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().unwrap_or(""), w.nth(1).unwrap_or(""))
        })
        .collect();
    // One slot stays free: a lap is 201 CQEs.
    let want = [("full", "201"), ("full", "201"), ("view", "201"), ("empty*", "201")];
    assert_eq!(rows, want, "{out}");
    // One banner; a short device name shares its line with the CQE size.
    assert_eq!(out.matches("dvcq poll benchmark").count(), 1, "{out}");
    assert!(out.contains("\n Device         : irdma model (GEN2), 32-byte CQEs   CQE size       : 32[B]\n"), "{out}");
    // The footer: the closing rule, what `empty*` means, and how to count instructions.
    let tail: Vec<&str> = out.lines().rev().take(3).collect();
    assert_eq!(
        tail,
        [" add --callgrind for instructions per CQE (valgrind, poll path only)", tail[1], &"-".repeat(88),],
        "{out}"
    );
    assert!(tail[1].starts_with(" empty*: one poll call on an empty ring, "), "{out}");
}

#[test]
fn bench_on_a_compressed_cq_compares_sessions_regular_cqes_and_no_compression() {
    let args = [
        "bench",
        "poll",
        "--mix",
        "send",
        "--compression",
        "enhanced",
        "--reps",
        "1",
        "--laps",
        "1",
        "--entries",
        "64",
    ];
    let o = dvcq(&args, None);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("enhanced compression") && out.contains("#ring"), "{out}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.split_whitespace().nth(1).is_some_and(|b| b.parse::<u32>().is_ok()))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let got: Vec<(&str, &str, &str)> = rows.iter().map(|w| (w[0], w[1], *w.last().unwrap())).collect();
    let want = [
        ("full", "16", "sessions"),
        ("full", "16", "regular"),
        ("full", "16", "uncompressed"),
        ("full", "1", "sessions"),
        ("empty*", "16", "sessions"),
    ];
    assert_eq!(got, want, "{out}");
    // Every row polled the whole lap of 64 completions.
    assert!(rows.iter().all(|w| w[2] == "64"), "{out}");
    // A long device name gets a line of its own; the footer explains the #ring column.
    assert!(
        out.contains("\n Device         : mlx5 model, 64-byte CQEs, enhanced compression\n CQE size       : 64[B]\n"),
        "{out}"
    );
    assert!(out.contains("\n #ring: the same completions as compressed sessions"), "{out}");
    // Each row polled its own ring: sessions and regular CQEs on the compression CQ (idle
    // without back-pressure), and a CQ created without compression.
    let mut json = args.to_vec();
    json.push("--json");
    let o = dvcq(&json, None);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<(String, String)> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| (v["ring"].as_str().unwrap().to_string(), v["target"].as_str().unwrap().to_string()))
        .collect();
    let base = "mlx5 model, 64-byte CQEs";
    let targets = |ring: &str| rows.iter().filter(|r| r.0 == ring).map(|r| r.1.as_str()).collect::<Vec<_>>();
    let enhanced = format!("{base}, enhanced compression");
    assert!(targets("sessions").iter().all(|t| *t == enhanced), "{rows:?}");
    assert_eq!(targets("regular"), [format!("{enhanced}, idle")], "{rows:?}");
    assert_eq!(targets("uncompressed"), [base], "{rows:?}");
    // JSON rows say which ring they polled; one mode alone has no comparison rows.
    let mut json = args.to_vec();
    json.extend(["--mode", "full", "--back-pressure", "never", "--json"]);
    let o = dvcq(&json, None);
    assert!(o.status.success(), "{}", stderr(&o));
    let line = String::from_utf8(o.stdout).unwrap();
    assert_eq!(line.lines().count(), 1, "{line}");
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(v["per_rep"], 64);
    assert!(v["target"].as_str().unwrap().ends_with("enhanced compression, idle"), "{v}");
}

#[test]
fn bad_arguments_are_one_clear_line_and_status_2() {
    let cases: Vec<(&[&str], &str)> = vec![
        (&["bench", "poll", "--entries", "3"], "--entries 3"),
        // Powers of two outside the sizes an mlx5 CQ can have.
        (&["bench", "poll", "--entries", "1"], "--entries 1: mlx5 rings are powers of two from 2 to 4194304"),
        (&["bench", "poll", "--entries", "8388608"], "--entries 8388608: mlx5 rings are powers of two from 2 to"),
        (&["bench", "poll", "--vendor", "irdma", "--entries", "3"], "--entries 3: irdma rings have 4 to"),
        (&["bench", "poll", "--vendor", "irdma", "--entries", "1048577"], "--entries 1048577: irdma rings have 4"),
        (&["bench", "poll", "--cqe-size", "32"], "--cqe-size 32"),
        (&["bench", "poll", "--compression", "basic"], "--compression needs --mix send or --mix recv"),
        (&["bench", "poll", "--back-pressure", "never"], "--back-pressure never needs --compression"),
        (&["bench", "poll", "--back-pressure", "always"], "--back-pressure always needs --compression"),
        (&["ring", "export", "--vendor", "irdma", "--compression", "basic"], "mlx5 rings only"),
        // A batch larger than a lap was polled as a lap and printed as asked.
        (
            &["bench", "poll", "--mode", "full", "--batch", "8192", "--entries", "4096"],
            "--batch 8192: larger than a lap",
        ),
        (&["bench", "poll", "--vendor", "irdma", "--mode", "empty", "--batch", "64", "--entries", "64"], "(63 CQEs)"),
        // The table's default batch was reported as if the user had given `--batch`.
        (
            &["bench", "poll", "--entries", "8"],
            "batch 16 (the table's; --mode with --batch picks another): larger than a lap of this ring (8",
        ),
        (&["bench", "poll", "--mode", "view", "--batch", "4"], "--batch 4: a view walk has no batch"),
        (&["bench", "poll", "--laps", "10000", "--entries", "4194304"], "CQEs per repetition, at most 1073741824"),
        (&["bench", "poll", "--compression", "none", "--mini", "csum"], "--mini csum needs --compression basic or"),
        // Inline receives: a payload the CQE cannot carry, or one without the mix.
        (&["bench", "poll", "--mix", "recv", "--payload", "8"], "--payload 8 needs --mix recv-inline"),
        (
            &["bench", "poll", "--mix", "recv-inline", "--payload", "33"],
            "--payload 33: a 64-byte CQE carries 1 to 32 bytes of inline data (--cqe-size 128: 64)",
        ),
        (
            &["bench", "poll", "--mix", "recv-inline", "--payload", "65", "--cqe-size", "128"],
            "--payload 65: a 128-byte CQE carries 1 to 64 bytes",
        ),
        (&["bench", "poll", "--mix", "recv-inline", "--payload", "0"], "--payload 0: a 64-byte CQE carries 1 to 32"),
        (
            &["bench", "poll", "--mix", "recv-inline", "--entries", "131072"],
            "--entries 131072: --mix recv-inline posts one receive per entry, at most 65536",
        ),
        (&["bench", "poll", "--mix", "recv-inline", "--compression", "basic"], "--compression needs --mix send or"),
        // Options the vendor does not use were ignored.
        (
            &["ring", "export", "--vendor", "irdma", "--cqe-size", "128"],
            "--cqe-size 128: irdma --hw-rev 2 writes 32-byte",
        ),
        (&["ring", "export", "--vendor", "irdma", "--hw-rev", "1", "--cqe-size", "64"], "--hw-rev 1 writes 32-byte"),
        (&["ring", "export", "--cqe-size", "32"], "--cqe-size 32: mlx5 CQEs are 64 or 128"),
        (&["ring", "export", "--hw-rev", "3"], "--hw-rev 3: applies to irdma rings only"),
        (&["ring", "export", "--compression", "none", "--mini", "csum"], "--mini csum needs --compression"),
        (&["ring", "export", "--vendor", "irdma", "--compression", "none", "--mini", "csum"], "--mini csum needs"),
        (
            &["ring", "export", "--vendor", "irdma", "--entries", "2"],
            "--entries 2: an irdma ring has 4 to 1048576 slots",
        ),
        (&["ring", "export", "--entries", "1"], "--entries 1: mlx5 rings are powers of two from 2 to 4194304"),
        (&["ring", "export", "--entries", "24"], "--entries 24: mlx5 rings are powers of two"),
        (&["ring", "export", "--entries", "8388608"], "--entries 8388608: mlx5 rings are powers of two from 2 to"),
        (&["ring", "export", "--scenario", "iwarp"], "the iwarp scenario is irdma only"),
        (&["decode", "--vendor", "irdma", "--cqe-size", "128"], "--cqe-size applies to mlx5 rings; an irdma CQE"),
        // Every subcommand says which it is, then what (and where) went wrong.
        (&["decode", "no-such-log.txt"], "no-such-log.txt: cannot read: "),
        (&["devices", "-d", "no-such-device"], "no device named \"no-such-device\""),
        // (Its reason depends on the build: no such device, or no rdma-core to open it with.)
        (&["validate", "-d", "no-such-device"], "\"no-such-device\""),
        (&["validate", "--only", "no-such-check"], "no check's name contains \"no-such-check\""),
        (&["bench", "drain", "-d", "no-such-device"], "\"no-such-device\""),
        (&["bench", "decode", "--log", "/nonexistent-dir/log"], "/nonexistent-dir/log: cannot write: "),
        (&["ring", "decode", "no-such-image.txt"], "no-such-image.txt: cannot read: "),
    ];
    for (args, what) in cases {
        let o = dvcq(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(e.starts_with(&prefix(args)) && e.contains(what), "{args:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
    }
    // The smallest ring of each device is exported: two slots on mlx5, four on irdma.
    for (vendor, entries) in [("mlx5", "2"), ("irdma", "4")] {
        let o = dvcq(&["ring", "export", "--vendor", vendor, "--entries", entries, "--scenario", "laps"], None);
        assert_eq!(o.status.code(), Some(0), "{vendor}: {}", stderr(&o));
        let text = String::from_utf8(o.stdout).unwrap();
        assert!(text.contains(&format!(" entries={entries} ")), "{vendor}: {text}");
        // And the image decodes.
        let o = dvcq(&["ring", "decode", "-"], Some(&text));
        assert_eq!(o.status.code(), Some(0), "{vendor}: {}", stderr(&o));
    }
    // A number too large for its field is out of range, and the range is given.
    for (args, what) in [
        (&["bench", "poll", "--entries", "99999999999"][..], "99999999999 is not in 0..=4294967295"),
        (&["ring", "export", "--entries", "4294967296"][..], "4294967296 is not in 0..=4294967295"),
        (&["bench", "poll", "--cqe-size", "4294967296"][..], "4294967296 is not in 0..=4294967295"),
    ] {
        let o = dvcq(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(what), "{args:?}: {}", stderr(&o));
    }
    // Ranges and dependencies clap checks: its usage error, status 2.
    let usage: [(&[&str], &str); 9] = [
        (&["bench", "poll", "--mode", "fast"], "'fast'"),
        (&["bench", "poll", "--mode", "full", "--batch", "0"], "'0' for '--batch <BATCH>': 0 is not in 1..=4194304"),
        (&["bench", "poll", "-d", "cx7"], "'cx7' for '--device <DEVICE>'"),
        (&["bench", "poll", "--reps", "0"], "'0' for '--reps <REPS>': 0 is not in 1..=10000"),
        (&["bench", "poll", "--reps", "4294967295", "--laps", "4294967295"], "is not in 1..=10000"),
        (&["bench", "poll", "--laps", "0"], "'0' for '--laps <LAPS>': 0 is not in 1..=10000"),
        (&["bench", "poll", "--mini", "csum"], "--compression <COMPRESSION>"),
        (&["ring", "export", "--vendor", "irdma", "--hw-rev", "7"], "'7' for '--hw-rev <HW_REV>': 7 is not in 1..=3"),
        (&["ring", "export", "--mini", "csum"], "--compression <COMPRESSION>"),
    ];
    for (args, what) in usage {
        let o = dvcq(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert!(e.starts_with("error: ") && e.contains(what), "{args:?}: {e}");
    }
}

#[test]
fn options_that_apply_are_used() {
    // A batch of a whole lap, a GEN3 ring of 64-byte CQEs, a format with compression.
    let o =
        dvcq(&["bench", "poll", "--mode", "full", "--batch", "64", "--entries", "64", "--reps", "1", "--json"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["batch"].as_u64(), v["per_rep"].as_u64()), (Some(64), Some(64 * 16)));
    let o = dvcq(&["ring", "export", "--vendor", "irdma", "--hw-rev", "3", "--cqe-size", "64"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.starts_with(b"ring cqe_size=64 entries=32 ci=17 vendor=irdma hw_rev=3\n"));
    let o = dvcq(&["ring", "export", "--compression", "basic", "--mini", "csum", "--scenario", "stream"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).lines().next().unwrap().ends_with("comp=basic mini=csum"));
    // A DPDK ring dump of two 128-byte slots whose first halves hold data: read as 64-byte
    // CQEs unless `--cqe-size 128` says otherwise (its error CQE is then slot 1).
    let mut ring = [0x11u8; 256];
    ring[128..].fill(0);
    ring[255] = 0xd0; // REQ_ERR
    ring[248..252].copy_from_slice(&[0x0a, 0x00, 0x01, 0x23]);
    let mut dump = format!("MLX5 Error CQ: at [0x1000], len={}\n", ring.len());
    for (r, row) in ring.chunks(16).enumerate() {
        let bytes: String = row.iter().map(|b| format!(" {b:02X}")).collect();
        dump += &format!("{:08X}:{bytes} | ................\n", r * 16);
    }
    for (size, slot, cqe_size) in [("auto", 3, 64), ("128", 1, 128)] {
        let o = dvcq(&["decode", "--json", "--cqe-size", size, "-"], Some(&dump));
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!((v["slot"].as_u64(), v["ring_cqe_size"].as_u64()), (Some(slot), Some(cqe_size)), "{size}");
    }
}

#[test]
fn ring_export_pipes_into_ring_decode() {
    let img = dvcq(&["ring", "export", "--scenario", "stream", "--entries", "32", "--compression", "enhanced"], None);
    assert!(img.status.success(), "{}", stderr(&img));
    let text = String::from_utf8(img.stdout).unwrap();
    assert!(text.starts_with("ring cqe_size=64 entries=32 ci=17 vendor=mlx5 comp=enhanced mini=hash"));
    let dec = dvcq(&["ring", "decode", "-"], Some(&text));
    assert!(dec.status.success(), "{}", stderr(&dec));
    let out = String::from_utf8(dec.stdout).unwrap();
    assert!(out.lines().last().unwrap().starts_with("end ci="), "{out}");
    assert!(out.lines().filter(|l| l.starts_with("wc ")).count() >= 10, "{out}");
}

/// `ring export` makes irdma rings of the sizes rdma-core allocates, rarely powers of two
/// (an E810's `ibv_create_cq(cqe = 100)` has 202 slots; a GEN1's `cqe + 1` may be odd),
/// which `ring decode` reads back; a size the provider never allocates is refused.
#[test]
fn irdma_rings_of_real_sizes_export_and_decode() {
    for (hw_rev, entries) in [("2", "202"), ("3", "102"), ("1", "101")] {
        let o = dvcq(&["ring", "export", "--vendor", "irdma", "--hw-rev", hw_rev, "--entries", entries], None);
        assert!(o.status.success(), "GEN{hw_rev} {entries}: {}", stderr(&o));
        let text = String::from_utf8(o.stdout).unwrap();
        assert!(text.starts_with(&format!("ring cqe_size={} entries={entries} ", if hw_rev == "3" { 64 } else { 32 })));
        let dec = dvcq(&["ring", "decode", "-"], Some(&text));
        assert!(dec.status.success(), "{}", stderr(&dec));
        assert!(String::from_utf8(dec.stdout).unwrap().lines().filter(|l| l.starts_with("wc ")).count() > 3);
    }
    let o = dvcq(&["ring", "export", "--vendor", "irdma", "--entries", "201"], None);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--entries 201: rdma-core allocates GEN2 rings of an even number of slots"),
        "{}",
        stderr(&o)
    );
}

/// `ring decode --rdma-core` decodes an irdma ring as that release polls it: each release
/// of a range gives its range's lines, the ranges differ where rdma-core changed, and no
/// release is the current one.
#[test]
fn ring_decode_reproduces_the_rdma_core_release_it_is_given() {
    let image = |scenario: &str, hw_rev: &str| {
        let o = dvcq(&["ring", "export", "--vendor", "irdma", "--hw-rev", hw_rev, "--scenario", scenario], None);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let decode = |text: &str, release: Option<&str>| {
        let mut args = vec!["ring", "decode", "-"];
        args.extend(release.iter().flat_map(|r| ["--rdma-core", r]));
        let o = dvcq(&args, Some(text));
        assert!(o.status.success(), "{release:?}: {}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    // The lines where `a` and `b` differ, as (a's, b's).
    let changed = |a: &str, b: &str| -> Vec<(String, String)> {
        a.lines().zip(b.lines()).filter(|(x, y)| x != y).map(|(x, y)| (x.to_owned(), y.to_owned())).collect()
    };
    for scenario in ["mixed", "errors", "iwarp"] {
        let text = image(scenario, "2");
        let [v44, v52, v64] = [Some("v44"), Some("v52"), None].map(|r| decode(&text, r));
        // A point release of v44 to v51 from the one that took v52's receive opcodes on
        // polls as v52 does; one before it as v44 did.
        let releases = [
            ("51", &v44),
            ("v44.6", &v44),
            ("50.1", &v44),
            ("v44.7", &v52),
            ("v51.2", &v52),
            ("48.3", &v52),
            ("v63", &v52),
            ("v52", &v52),
            ("v64", &v64),
            ("99", &v64),
        ];
        for (release, want) in releases {
            assert_eq!(&decode(&text, Some(release)), want, "{scenario}, {release}");
        }
        let (old, new) = (changed(&v44, &v52), changed(&v52, &v64));
        if scenario == "iwarp" {
            // iWARP receives follow the immediate data in every release (v44's overwrite
            // of the receive opcode mattered only to RoCE), and the retry code is the same.
            assert!(old.is_empty() && new.is_empty(), "{old:?} {new:?}");
            assert!(v44.contains(" opcode=129 vendor_err=0x0 byte_len=256 "), "{v44}");
        } else if scenario == "mixed" {
            // v52: a RoCE write-with-immediate receive is RECV_RDMA_WITH_IMM, no longer RECV.
            assert_eq!(old.len(), 1, "{old:?}");
            assert!(old[0].0.contains(" opcode=128 ") && old[0].0.contains(" wc_flags=0x2 "), "{old:?}");
            assert!(old[0].1.contains(" opcode=129 ") && old[0].1.contains(" wc_flags=0x2 "), "{old:?}");
            assert!(new.is_empty(), "{new:?}");
        } else {
            // v64: flush code 11 is RNR_RETRY_EXC_ERR (13), no longer FATAL_ERR (19).
            assert!(old.is_empty(), "{old:?}");
            assert_eq!(new.len(), 1, "{new:?}");
            assert!(new[0].0.contains(" status=19 ") && new[0].0.contains(" vendor_err=0x1000b "), "{new:?}");
            assert!(new[0].1.contains(" status=13 ") && new[0].1.contains(" vendor_err=0x1000b "), "{new:?}");
        }
    }
    // Refused: a release before v44, a word that is no release, an mlx5 ring, and a GEN3
    // ring with a release that had no GEN3.
    let mixed = image("mixed", "2");
    for (release, what) in [
        ("v43", "'v43' for '--rdma-core <vN[.M]>': v43: the irdma poll is reproduced from rdma-core v44 on"),
        ("v5x", "\"v5x\" is not an rdma-core release: give it as v44.7, v52 or 52"),
        ("+52", "\"+52\" is not an rdma-core release"),
        ("v44.", "\"v44.\" is not an rdma-core release"),
        ("v44.7.1", "\"v44.7.1\" is not an rdma-core release"),
        ("v43.9", "v43: the irdma poll is reproduced from rdma-core v44 on"),
    ] {
        let o = dvcq(&["ring", "decode", "-", "--rdma-core", release], Some(&mixed));
        assert_eq!(o.status.code(), Some(2), "{release}");
        assert!(stderr(&o).starts_with("error: invalid value ") && stderr(&o).contains(what), "{}", stderr(&o));
    }
    let mlx5 = String::from_utf8(dvcq(&["ring", "export"], None).stdout).unwrap();
    let o = dvcq(&["ring", "decode", "-", "--rdma-core", "v64"], Some(&mlx5));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "dvcq ring decode: --rdma-core v64: applies to irdma rings only, and <stdin> holds an mlx5 ring\n"
    );
    // The refusal names the ring line, after a comment line here.
    let gen3 = format!("# captured on a GEN3 device\n{}", image("mixed", "3"));
    let o = dvcq(&["ring", "decode", "-", "--rdma-core", "v44"], Some(&gen3));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "dvcq ring decode: <stdin>:2: a GEN3 ring decodes only as rdma-core v64 and later poll it: v44 to v51 (before v44.7, \
         v45.6, v46.5, v47.4, v48.3, v49.3, v50.2, v51.2) had no GEN3\n"
    );
}

#[test]
fn unreadable_and_malformed_images_name_the_file_and_line() {
    let o = dvcq(&["ring", "decode", "no-such-image.txt"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("dvcq ring decode: no-such-image.txt: cannot read: "), "{}", stderr(&o));
    let o = dvcq(&["ring", "decode", "-"], Some("ring cqe_size=64 entries=2 ci=0\nzz\n"));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("dvcq ring decode: <stdin>:2: slot 0: "), "{}", stderr(&o));
    // Nothing to read is said so, not "line 0".
    let o = dvcq(&["ring", "decode", "-"], Some(""));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o), "dvcq ring decode: <stdin>: the input is empty: a ring image starts with its ring line\n");
}

/// Runs `dvcq` with standard output on `/dev/full`, where every write fails with ENOSPC.
#[cfg(target_os = "linux")]
fn dvcq_to_full_disk(args: &[&str], stdin: Option<&str>) -> Output {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("open /dev/full");
    support::dvcq_with_stdout(args, stdin, full.into())
}

#[test]
#[cfg(target_os = "linux")]
fn output_that_cannot_be_written_is_an_error_not_a_panic() {
    let export = dvcq(&["ring", "export"], None);
    assert!(export.status.success(), "{}", stderr(&export));
    let image = String::from_utf8(export.stdout).unwrap();
    let bench = ["bench", "poll", "--reps", "1", "--laps", "1", "--entries", "64"];
    let json = ["bench", "poll", "--reps", "1", "--laps", "1", "--entries", "64", "--json"];
    let cases: [(&[&str], Option<&str>); 5] = [
        (&["ring", "export"], None),
        (&["ring", "decode", "-"], Some(&image)),
        (&bench, None),
        (&json, None),
        (&["decode", "-"], Some(&"00".repeat(64))),
    ];
    for (args, stdin) in cases {
        let o = dvcq_to_full_disk(args, stdin);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.starts_with(&format!("{}cannot write output: ", prefix(args))), "{args:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    // `dvcq ring export --entries 65536 | head -c1`: megabytes of image, one byte read.
    let mut child = Command::new(env!("CARGO_BIN_EXE_dvcq"))
        .args(["ring", "export", "--entries", "65536"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dvcq");
    let mut first = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(&first, b"r");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

#[test]
#[cfg(target_os = "linux")]
fn an_error_that_cannot_be_written_still_exits_2() {
    use std::process::{Command, Stdio};
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("open /dev/full");
    let status = Command::new(env!("CARGO_BIN_EXE_dvcq"))
        .args(["ring", "decode", "no-such-image.txt"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(full)
        .status()
        .expect("spawn dvcq");
    assert_eq!(status.code(), Some(2));
}

#[test]
#[cfg(target_os = "linux")]
fn a_ring_header_does_not_reserve_the_memory_it_announces() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    // 41 bytes announcing 2^22 slots of 128 bytes (512 MiB), none of which follow. Under a
    // 128 MiB address-space limit, reserving them up front aborts the process.
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -v 131072 && exec \"$0\" ring decode -", env!("CARGO_BIN_EXE_dvcq")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    child.stdin.take().unwrap().write_all(b"ring cqe_size=128 entries=4194304 ci=0\n").unwrap();
    let o = child.wait_with_output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e, "dvcq ring decode: <stdin>:1: 0 slot lines, expected entries=4194304\n");
}

/// `--callgrind` counts the poll path alone: two runs under valgrind, their difference per
/// CQE (per call for the empty mode). Both runs must do the same work outside the poll, or
/// a small ring shows it: an extra argument parsed by one run once made an irdma empty call
/// on 64 entries read 0.0. Skips where valgrind is not installed (in CI, a failure).
#[test]
fn callgrind_counts_the_poll_path_even_on_a_small_ring() {
    if std::process::Command::new("valgrind").arg("--version").output().is_err() {
        skip::skip_check("valgrind is not installed; --callgrind not tested");
        return;
    }
    for (vendor, mode, batch, range) in
        [("mlx5", "empty", "16", 5.0..40.0), ("irdma", "empty", "16", 2.0..40.0), ("irdma", "full", "16", 30.0..150.0)]
    {
        let args = ["bench", "poll", "--callgrind", "--json", "--vendor", vendor, "--mode", mode, "--batch", batch];
        let o = dvcq(&[&args[..], &["--entries", "64", "--laps", "8", "--reps", "1"]].concat(), None);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let instr = v["instr"].as_f64().unwrap_or(f64::NAN);
        // The upper bounds are for optimized code; an unoptimized poll costs many times more.
        let range = if cfg!(debug_assertions) { range.start..f64::INFINITY } else { range };
        assert!(range.contains(&instr), "{vendor} {mode}: {instr} instructions, expected {range:?}");
    }
}

/// `bench decode` decodes a generated log of every printer, says how fast and how much memory
/// it took, and passes only when every CQE decoded under the memory limit.
#[test]
fn bench_decode_reports_throughput_and_peak_memory() {
    let o = dvcq(&["bench", "decode", "--size", "2", "--json"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["mb"].as_f64().unwrap() >= 2.0, "{v}");
    assert!(v["cqes"].as_u64().unwrap() > 100, "{v}");
    assert_eq!(v["decoded"].as_u64(), v["cqes"].as_u64(), "{v}");
    assert_eq!(v["problems"], 0, "{v}");
    assert!(v["mb_per_s"].as_f64().unwrap() > 0.0, "{v}");
    let peak = v["peak_mib"].as_f64().unwrap();
    assert!(peak > 0.0 && peak < v["peak_limit_mib"].as_f64().unwrap(), "{v}");
    // The table names the same figures.
    let o = dvcq(&["bench", "decode", "--size", "1"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    for what in [" throughput     : ", " peak memory    : ", "the limit is 64 MiB", " 0 problems"] {
        assert!(out.contains(what), "{what}: {out}");
    }
}

/// `ring decode --names` prints libibverbs' names where the canonical line has numbers (the
/// status, opcode and flags), line for line, and the canonical line stays the default.
#[test]
fn ring_decode_names_the_status_opcode_and_flags_on_request() {
    for (vendor, scenario) in [("mlx5", "errors"), ("mlx5", "mixed"), ("irdma", "mixed"), ("irdma", "errors")] {
        let img = dvcq(&["ring", "export", "--vendor", vendor, "--scenario", scenario], None);
        assert!(img.status.success(), "{}", stderr(&img));
        let text = String::from_utf8(img.stdout).unwrap();
        let plain = String::from_utf8(dvcq(&["ring", "decode", "-"], Some(&text)).stdout).unwrap();
        let named = dvcq(&["ring", "decode", "--names", "-"], Some(&text));
        assert!(named.status.success(), "{}", stderr(&named));
        let named = String::from_utf8(named.stdout).unwrap();
        assert_eq!(plain.lines().count(), named.lines().count(), "{vendor} {scenario}");
        let word = |line: &str, key: &str| -> String {
            line.split(' ').find_map(|w| w.strip_prefix(&format!("{key}="))).unwrap_or_default().to_string()
        };
        let mut errors = 0;
        for (p, n) in plain.lines().zip(named.lines()) {
            if !p.starts_with("wc ") {
                assert_eq!(p, n, "{vendor} {scenario}: only wc lines change");
                continue;
            }
            let status = dvcq::WcStatus::from_u32(word(p, "status").parse().unwrap()).unwrap();
            let opcode = dvcq::WcOpcode::from_u32(word(p, "opcode").parse().unwrap()).unwrap();
            assert_eq!(word(n, "status"), status.name(), "{p}\n{n}");
            assert_eq!(word(n, "opcode"), opcode.name(), "{p}\n{n}");
            errors += usize::from(status != dvcq::WcStatus::Success);
            let bits = u32::from_str_radix(word(p, "wc_flags").trim_start_matches("0x"), 16).unwrap();
            let flags = word(n, "wc_flags");
            if bits == 0 {
                assert_eq!(flags, "0", "{n}");
            } else {
                let named_bits = flags.split('|').fold(0, |acc, f| {
                    acc | dvcq::WcFlags::from_name(f.trim_start_matches("IBV_WC_"))
                        .unwrap_or_else(|| panic!("{f}"))
                        .bits()
                });
                assert_eq!(named_bits, bits, "{p}\n{n}");
            }
            // Every other word is the canonical line's.
            let other = |l: &str| -> Vec<String> {
                l.split(' ')
                    .filter(|w| !["status=", "opcode=", "wc_flags="].iter().any(|k| w.starts_with(k)))
                    .map(String::from)
                    .collect()
            };
            assert_eq!(other(p), other(n));
        }
        if scenario == "errors" {
            assert!(errors > 0, "{vendor}: {named}");
            assert!(named.contains(" status=IBV_WC_"), "{named}");
        }
    }
}

/// Each completion mix says in `bench poll --help` which vendors run it, and exactly those
/// run it (`many-qps` was once labelled mlx5 only, though irdma runs it).
#[test]
fn bench_mix_help_names_the_vendors_that_run_each_mix() {
    let help = String::from_utf8(dvcq(&["bench", "poll", "--help"], None).stdout).unwrap();
    let mixes: Vec<(String, String)> = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("--mix"))
        .take_while(|l| !l.contains("[default:"))
        .filter_map(|l| l.trim_start().strip_prefix("- "))
        .filter_map(|l| l.split_once(':'))
        .map(|(name, doc)| (name.to_string(), doc.trim().to_string()))
        .collect();
    assert!(mixes.len() >= 7, "{help}");
    for (mix, doc) in &mixes {
        let label = doc.rsplit_once('(').map_or("", |(_, l)| l.trim_end_matches(')'));
        for vendor in ["mlx5", "irdma"] {
            let args = ["bench", "poll", "--vendor", vendor, "--mix", mix, "--mode", "full", "--batch", "4"];
            let o = dvcq(&[&args[..], &["--reps", "1", "--laps", "1", "--entries", "64", "--json"]].concat(), None);
            let labelled = label.split(" and ").any(|v| v == vendor);
            assert_eq!(o.status.success(), labelled, "--mix {mix} --vendor {vendor}: label ({label}): {}", stderr(&o));
        }
    }
}

/// `bench cq` polls the same laps both ways on a model and reports the CQ it ran; other
/// devices are refused with one line.
#[test]
fn bench_cq_polls_counting_and_not() {
    for dev in ["model-mlx5", "model-e810"] {
        let args = ["bench", "cq", "-d", dev, "-n", "64", "--laps", "2", "--reps", "3", "--batch", "8", "--json"];
        let o = dvcq(&args, None);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.iter().map(|r| r["stats"].as_bool().unwrap()).collect::<Vec<_>>(), [false, true]);
        assert!(rows.iter().all(|r| r["completions"] == 128), "{v}");
        assert!(v["instr_per_completion"].is_null(), "no --callgrind: {v}");
        // Three repetitions counted of 128 completions, in batches of 8.
        assert_eq!(
            (v["cq_stats"]["completions"].as_u64(), v["cq_stats"]["largest_batch"].as_u64()),
            (Some(384), Some(8))
        );
        assert_eq!(v["cq_stats"]["high_water"], 64, "{v}");
    }
    let o = dvcq(&["bench", "cq", "-d", "rxe0"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: invalid value 'rxe0' for '--device <DEVICE>': this runs on the models only"),
        "{}",
        stderr(&o)
    );
}

/// `bench drain` on a model: one direct row, and the CQ's depth advice beside it (each fill
/// puts every completion in the ring before the drain, so the high-water mark is the fill).
#[test]
fn bench_drain_reports_the_cq_beside_the_figures() {
    let o = dvcq(&["bench", "drain", "-d", "model-e810", "-n", "40", "--reps", "2", "--json"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "a model has only its direct poller: {v}");
    let cq = &rows[0]["cq"];
    assert_eq!((cq["high_water"].as_u64(), cq["depth"].as_u64()), (Some(40), Some(40)), "{v}");
    assert_eq!((cq["suggested_depth"].as_u64(), cq["verdict"].as_str()), (Some(52), Some("raise")), "{v}");
}

/// `validate --keep-rings DIR` saves the ring image of each CQ of a failing check (failed
/// here on purpose through the test hook), `ring decode` reads it back to the completions
/// the check polled, and a check without a ring image says why.
#[test]
fn a_failing_checks_ring_is_kept_for_ring_decode() {
    let dir = std::env::temp_dir().join(format!("dvcq-keep-rings-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let args = ["validate", "-d", "model-mlx5", "--only", "rc_send_imm", "--fail-check", "rc_send_imm"];
    let o = dvcq(&[&args[..], &["--keep-rings", d, "--json"]].concat(), None);
    assert_eq!(o.status.code(), Some(1), "a failed check exits 1: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let check = &v["checks"][0];
    assert_eq!((check["name"].as_str(), check["result"].as_str()), (Some("rc_send_imm"), Some("fail")), "{v}");
    let ring = check["rings"][0].as_str().unwrap();
    assert_eq!(ring, dir.join("rc_send_imm-cq0.ring").to_str().unwrap());
    assert!(check["reason"].as_str().unwrap().contains(ring), "{check}");
    let decoded = dvcq(&["ring", "decode", ring], None);
    assert!(decoded.status.success(), "{}", stderr(&decoded));
    let text = String::from_utf8(decoded.stdout).unwrap();
    // Eight SEND_WITH_IMMs: each a send completion and a receive with its immediate.
    assert_eq!(text.lines().filter(|l| l.starts_with("wc ")).count(), 16, "{text}");
    assert_eq!(
        text.lines().filter(|l| l.contains(" opcode=128 ") && l.contains(" wc_flags=0x2 ")).count(),
        8,
        "{text}"
    );
    assert!(text.lines().last().unwrap().starts_with("end ci=16 "), "{text}");
    // Passing checks keep nothing; the E810 model's rings have no image yet, and say so.
    let o = dvcq(&["validate", "-d", "model-mlx5", "--only", "rc_write_imm", "--keep-rings", d], None);
    assert!(o.status.success());
    assert!(!dir.join("rc_write_imm-cq0.ring").exists());
    let o = dvcq(
        &["validate", "-d", "model-e810", "--only", "rc_send_imm", "--fail-check", "rc_send_imm", "--keep-rings", d],
        None,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no ring image of cq0: the irdma ring-image format"));
    let _ = std::fs::remove_dir_all(&dir);
}
