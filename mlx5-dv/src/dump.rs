//! rdma-core's text dump of an error CQE, byte for byte.
//!
//! When libmlx5 polls an error CQE (other than a flush or a transport-retry error) it writes
//! a header line, `mlx5: <hostname>: got completion with error:`, and then the 64 bytes of the
//! cqe64 as four lines of four 32-bit words, each word printed `%08x` after a big-endian load
//! (rdma-core `providers/mlx5/cq.c`, `dump_cqe` and its caller; `PFX` is `"mlx5: "` in
//! `providers/mlx5/mlx5.h`). Reading the words back therefore gives the bytes in memory order.
//! People grep logs for this exact text, so [`write_err_cqe_dump`] reproduces it exactly; the
//! `dvcq decode` tool reads it back.

use core::fmt;
use dvcq_uapi::mlx5::Cqe64;

/// The text rdma-core puts between `mlx5: <host>: ` and the four lines of words.
pub const HEADER_TAIL: &str = "got completion with error:";

/// rdma-core's prefix of every libmlx5 message (`PFX`).
pub const PREFIX: &str = "mlx5: ";

/// Writes the four `%08x %08x %08x %08x` lines of a 64-byte CQE, each ended by `\n`.
pub fn write_cqe_words(out: &mut impl fmt::Write, bytes: &[u8; 64]) -> fmt::Result {
    for row in bytes.chunks_exact(16) {
        let w = |i: usize| u32::from_be_bytes([row[i], row[i + 1], row[i + 2], row[i + 3]]);
        writeln!(out, "{:08x} {:08x} {:08x} {:08x}", w(0), w(4), w(8), w(12))?;
    }
    Ok(())
}

/// Writes rdma-core's whole error-CQE dump: the header line for `host`, then the four lines
/// of words. The output equals what libmlx5 writes to its debug stream for the same CQE.
pub fn write_err_cqe_dump(out: &mut impl fmt::Write, host: &str, cqe: &Cqe64) -> fmt::Result {
    writeln!(out, "{PREFIX}{host}: {HEADER_TAIL}")?;
    write_cqe_words(out, &cqe_bytes(cqe))
}

/// [`write_err_cqe_dump`] into a new `String`.
pub fn err_cqe_dump(host: &str, cqe: &Cqe64) -> String {
    let mut s = String::with_capacity(200 + host.len());
    // Writing into a String cannot fail.
    let _ = write_err_cqe_dump(&mut s, host, cqe);
    s
}

/// The 64 bytes of a CQE in memory order.
pub fn cqe_bytes(cqe: &Cqe64) -> [u8; 64] {
    bytemuck::cast(*cqe)
}

/// A CQE from its 64 bytes in memory order (as a dump gives them).
pub fn cqe_from_bytes(bytes: &[u8; 64]) -> Cqe64 {
    bytemuck::cast(*bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_rdma_core_layout() {
        let mut b = [0u8; 64];
        b[52..64].copy_from_slice(&[0x00, 0x00, 0x87, 0x16, 0x0a, 0x00, 0x1f, 0x8e, 0x00, 0x00, 0x27, 0xd2]);
        let text = err_cqe_dump("n136-096-142", &cqe_from_bytes(&b));
        let want = "mlx5: n136-096-142: got completion with error:\n\
                    00000000 00000000 00000000 00000000\n\
                    00000000 00000000 00000000 00000000\n\
                    00000000 00000000 00000000 00000000\n\
                    00000000 00008716 0a001f8e 000027d2\n";
        assert_eq!(text, want);
    }

    #[test]
    fn words_are_big_endian_reads() {
        let mut b = [0u8; 64];
        for (i, x) in b.iter_mut().enumerate() {
            *x = i as u8;
        }
        let mut s = String::new();
        write_cqe_words(&mut s, &b).unwrap();
        assert!(s.starts_with("00010203 04050607 08090a0b 0c0d0e0f\n"));
        assert!(s.ends_with("30313233 34353637 38393a3b 3c3d3e3f\n"));
        assert_eq!(cqe_bytes(&cqe_from_bytes(&b)), b);
    }
}
