//! The log `dvcq bench decode` reads: a busy application's prose lines with error-CQE dumps
//! of every printer `dvcq decode` reads mixed in, written as those printers write them
//! (rdma-core libmlx5, Linux mlx5_ib `print_hex_dump`, DPDK `rte_hexdump` of a whole CQ ring,
//! a bare hex string).
//!
//! The log is made from a fixed seed, so every run reads the same text, and is written as it
//! is generated: its size costs no memory.

use crate::mlx5::dump::{cqe_from_bytes, write_err_cqe_dump};
use core::fmt::Write as _;
use std::io::{self, Write};

/// What [`write_log`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Bytes written.
    pub bytes: u64,
    /// Lines written.
    pub lines: u64,
    /// Dumps written.
    pub dumps: u64,
    /// Error CQEs in them: what `dvcq decode` must find.
    pub cqes: u64,
}

/// A small deterministic generator (a 64-bit LCG, Knuth's MMIX constants): the log needs
/// variety, not statistical quality.
#[derive(Clone, Debug)]
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u32) -> u32 {
        self.next() % n
    }
}

/// The error syndromes the dumps carry (rdma-core prints every one but flush and
/// retry-exceeded errors, and the others print them all).
const SYNDROMES: [u8; 8] = [0x01, 0x02, 0x04, 0x10, 0x12, 0x13, 0x14, 0x22];

/// An error CQE (`struct mlx5_err_cqe`): syndrome, vendor syndrome, QP and WQE counter set.
fn err_cqe(rng: &mut Lcg) -> [u8; 64] {
    let mut b = [0u8; 64];
    let qpn = 0x100 + rng.below(0xf_ff00);
    b[32..36].copy_from_slice(&0x00ff_ffffu32.to_be_bytes()); // srqn/uidx: none
    b[54] = rng.below(0x100) as u8; // vendor_err_synd
    b[55] = SYNDROMES[rng.below(SYNDROMES.len() as u32) as usize];
    b[56..60].copy_from_slice(&((0x0a << 24) | qpn).to_be_bytes()); // SEND on the QP
    b[60..62].copy_from_slice(&(rng.below(0x1_0000) as u16).to_be_bytes());
    b[63] = 0xd0 | (rng.below(2) as u8); // REQ_ERR, either owner
    b
}

/// A successful requester CQE, as the rest of a dumped ring holds.
fn good_cqe(rng: &mut Lcg) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[44..48].copy_from_slice(&(64 + rng.below(4096)).to_be_bytes()); // byte_cnt
    b[56..60].copy_from_slice(&((0x0a_u32 << 24) | 0x42).to_be_bytes());
    b[60..62].copy_from_slice(&(rng.below(0x1_0000) as u16).to_be_bytes());
    b[63] = rng.below(2) as u8; // REQ
    b
}

/// One prose line: a timestamped message with numbers, paths and addresses, none of them a
/// dump.
fn prose(out: &mut String, rng: &mut Lcg, second: u64) {
    const WHAT: [&str; 6] = [
        "request served",
        "connection accepted from 10.0.3.17:5201",
        "flushed 4096 records to /var/lib/app/segment-0007",
        "rebalanced 12 partitions across 3 workers",
        "heartbeat from peer node-b (lag 3 ms)",
        "cache hit ratio 97.1% over the last 60 s",
    ];
    let what = WHAT[rng.below(WHAT.len() as u32) as usize];
    let _ = writeln!(
        out,
        "Mar  3 10:{:02}:{:02} host-a app[{}]: worker {} {what} in {} us",
        (second / 60) % 60,
        second % 60,
        1000 + rng.below(9000),
        rng.below(64),
        rng.below(100_000)
    );
}

/// One dump of the printer `kind` picks (0 to 3); returns the error CQEs it holds.
fn dump(out: &mut String, rng: &mut Lcg, kind: u32, second: u64) -> u64 {
    match kind {
        // rdma-core libmlx5 (`providers/mlx5/cq.c`): its header and four lines of words.
        0 => {
            let _ = write_err_cqe_dump(out, "host-a", &cqe_from_bytes(&err_cqe(rng)));
            1
        }
        // Linux mlx5_ib from v6.2 (`dump_cqe`): a `WC error` line, then `print_hex_dump`
        // with the `cqe_dump: ` prefix, after the kernel's time stamp.
        1 => {
            let stamp = format!("[{second:>6}.{:06}]", rng.below(1_000_000));
            let _ = writeln!(
                out,
                "{stamp} infiniband mlx5_0: dump_cqe:276:(pid {}): WC error: 10, Message: remote access error",
                rng.below(30_000)
            );
            for (r, row) in err_cqe(rng).chunks(16).enumerate() {
                let _ = write!(out, "{stamp} cqe_dump: {:08x}:", r * 16);
                for b in row {
                    let _ = write!(out, " {b:02x}");
                }
                out.push('\n');
            }
            1
        }
        // DPDK (`mlx5_dump_debug_information` → `rte_hexdump`): a ring of 8 CQEs, two of
        // them errors.
        2 => {
            let errors = [rng.below(8), rng.below(8)];
            let mut ring = Vec::with_capacity(8 * 64);
            for slot in 0..8 {
                let cqe = if errors.contains(&slot) { err_cqe(rng) } else { good_cqe(rng) };
                ring.extend_from_slice(&cqe);
            }
            let _ = writeln!(out, "MLX5 Error CQ: at [0x17fe3c000], len={}", ring.len());
            for (r, row) in ring.chunks(16).enumerate() {
                let _ = write!(out, "{:08X}:", r * 16);
                for b in row {
                    let _ = write!(out, " {b:02X}");
                }
                out.push_str(" | ");
                out.extend(row.iter().map(|&b| if (b' '..=b'~').contains(&b) { b as char } else { '.' }));
                out.push('\n');
            }
            if errors[0] == errors[1] {
                1
            } else {
                2
            }
        }
        // A bare 64-byte hex string.
        _ => {
            for b in err_cqe(rng) {
                let _ = write!(out, "{b:02x}");
            }
            out.push('\n');
            1
        }
    }
}

/// Writes a log of at least `size` bytes (it ends after the dump or line that reaches it)
/// to `out`.
///
/// # Errors
///
/// The error of a write to `out`.
pub fn write_log<W: Write>(mut out: W, size: u64) -> io::Result<LogStats> {
    let mut rng = Lcg(0x6476_6371); // "dvcq"
    let mut stats = LogStats::default();
    let mut text = String::with_capacity(64 << 10);
    let mut second = 0u64;
    while stats.bytes < size {
        text.clear();
        // A few dozen lines of prose, then a dump, in 64 KiB writes.
        while text.len() < 60 << 10 {
            for _ in 0..8 + rng.below(40) {
                prose(&mut text, &mut rng, second);
                second += u64::from(rng.below(2));
            }
            stats.cqes += dump(&mut text, &mut rng, (stats.dumps % 4) as u32, second);
            stats.dumps += 1;
        }
        out.write_all(text.as_bytes())?;
        stats.bytes += text.len() as u64;
        stats.lines += text.bytes().filter(|&b| b == b'\n').count() as u64;
    }
    out.flush()?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{scan, Vendor};

    /// The log is what `dvcq decode` reads: every dump it holds decodes, nothing else is
    /// taken for one, and no problem is reported.
    #[test]
    fn every_dump_of_the_log_decodes_and_nothing_else() {
        let mut log = Vec::new();
        let stats = write_log(&mut log, 200 << 10).unwrap();
        assert!(stats.bytes >= 200 << 10 && stats.bytes == log.len() as u64);
        assert!(stats.dumps >= 8, "{stats:?}");
        let text = String::from_utf8(log).unwrap();
        assert_eq!(stats.lines, text.lines().count() as u64);
        let r = scan(&text, Vendor::Mlx5);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.dumps.len() as u64, stats.cqes);
        // Each printer is in it.
        let printers: std::collections::HashSet<_> = r.dumps.iter().map(|d| d.format).collect();
        assert_eq!(printers.len(), 4, "{printers:?}");
    }
}
