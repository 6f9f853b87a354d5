//! Property tests of `dvcq decode`'s scanner: arbitrary text never panics, mutated dumps never
//! panic, and valid dumps embedded in noise are still found with their fields intact.

use dvcq::mlx5::dump::{cqe_from_bytes, err_cqe_dump};
use dvcq_cli::decode::{scan, Decoded, Vendor};
use proptest::prelude::*;

fn err_cqe(synd: u8, vendor: u8, qpn: u32, ctr: u16) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[54] = vendor;
    b[55] = synd;
    b[56..60].copy_from_slice(&((0x0a << 24) | (qpn & 0xff_ffff)).to_be_bytes());
    b[60..62].copy_from_slice(&ctr.to_be_bytes());
    b[63] = 0xd2;
    b
}

fn kernel(b: &[u8; 64]) -> String {
    b.chunks(16)
        .enumerate()
        .map(|(r, row)| {
            let v: Vec<String> = row.iter().map(|x| format!("{x:02x}")).collect();
            format!("[  7.0] cqe_dump: {:08x}: {}\n", r * 16, v.join(" "))
        })
        .collect()
}

/// Noise lines that contain no dump (no hex words, offsets or long hex strings).
fn noise() -> impl Strategy<Value = String> {
    prop::collection::vec("[ a-zA-Z.,:\\[\\]=()_-]{0,60}", 0..6).prop_map(|v| {
        let mut s = v.join("\n");
        s.push('\n');
        s
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(s in any::<String>()) {
        let _ = scan(&s, Vendor::Mlx5);
        let _ = scan(&s, Vendor::Irdma);
    }

    #[test]
    fn hexish_text_never_panics(s in "([0-9a-fA-F]{1,9}[ :|\n]{1,2}|mlx5: h: got completion with error:\n|cqe_dump: |MLX5 Error CQ: at \\[0x1\\], len=[0-9]{1,3}\n|0x){0,80}") {
        let _ = scan(&s, Vendor::Mlx5);
        let _ = scan(&s, Vendor::Irdma);
    }

    #[test]
    fn mutated_dumps_never_panic(
        synd in any::<u8>(),
        cut in 0usize..400,
        pos in 0usize..400,
        ch in any::<char>(),
    ) {
        let b = err_cqe(synd, 0x88, 0x1234, 5);
        for mut text in [err_cqe_dump("h", &cqe_from_bytes(&b)), kernel(&b)] {
            let p = text.char_indices().nth(pos % text.chars().count()).map_or(0, |(i, _)| i);
            text.insert(p, ch);
            let c = text.char_indices().nth(cut % text.chars().count()).map_or(0, |(i, _)| i);
            let _ = scan(&text[..c], Vendor::Mlx5);
            let _ = scan(&text, Vendor::Mlx5);
        }
    }

    #[test]
    fn dumps_in_noise_are_found(
        synd in any::<u8>(),
        vendor in any::<u8>(),
        qpn in 0u32..0x100_0000,
        ctr in any::<u16>(),
        before in noise(),
        between in noise(),
        after in noise(),
        prefix in "[a-z]{0,8}( [0-9]{2}:[0-9]{2})?",
        glue in "[g-z ]{0,12}",
    ) {
        let b = err_cqe(synd, vendor, qpn, ctr);
        let rc = err_cqe_dump("host", &cqe_from_bytes(&b));
        let n = rc.lines().count();
        let rc: String = rc
            .lines()
            .enumerate()
            .map(|(i, l)| {
                let tail = if i + 1 == n { glue.as_str() } else { "" };
                if prefix.is_empty() { format!("{l}{tail}\n") } else { format!("{prefix}: {l}{tail}\n") }
            })
            .collect();
        let text = format!("{before}{rc}{between}{}{after}", kernel(&b));
        let r = scan(&text, Vendor::Mlx5);
        prop_assert!(r.problems.is_empty(), "{:?}\n{}", r.problems, text);
        prop_assert_eq!(r.dumps.len(), 2);
        for d in &r.dumps {
            let Decoded::Mlx5(c) = &d.cqe else { panic!("vendor") };
            prop_assert_eq!(c.syndrome, Some(synd));
            prop_assert_eq!(c.vendor_err_synd, Some(vendor));
            prop_assert_eq!(c.qpn, qpn);
            prop_assert_eq!(c.wqe_counter, ctr);
        }
        prop_assert_eq!(r.dumps[0].line, before.lines().count() + 1);
    }
}
