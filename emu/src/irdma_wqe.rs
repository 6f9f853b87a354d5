//! The irdma WQEs the device reads from libirdma's own rings (`providers/irdma/defs.h`
//! masks, builders in `uk.c`): 32-byte quanta, the header in qword 3 of the first quantum
//! (written last, its valid bit the ring pass's polarity), fragments of 16 bytes (qword 0
//! the address, qword 1 the length in bits 62:32 and the key in 31:0), the first in qwords
//! 0-1 unless qword 0 holds immediate data, the others from byte 32; inline data in bytes
//! 8-15 and then 31 bytes of each following quantum (its last byte is that quantum's valid
//! byte). Everything is little-endian.

use crate::wqe::Gather;

/// `IRDMAQPSQ_OPCODE` values the device executes or skips.
pub mod op {
    pub const RDMA_WRITE: u8 = 0x00;
    pub const RDMA_READ: u8 = 0x01;
    pub const SEND: u8 = 0x03;
    pub const SEND_INV: u8 = 0x04;
    pub const SEND_SOL: u8 = 0x05;
    pub const SEND_SOL_INV: u8 = 0x06;
    pub const NOP: u8 = 0x0c;
    pub const RDMA_WRITE_SOL: u8 = 0x0d;
}

/// `IRDMAQPSQ_VALID`.
pub const VALID: u64 = 1 << 63;
const SIGCOMPL: u64 = 1 << 62;
const INLINE_FLAG: u64 = 1 << 57;
const IMM_FLAG: u64 = 1 << 47;
/// The largest WQE, in quanta.
pub const MAX_QUANTA: u32 = 8;

/// The opcode of a header.
pub fn opcode(hdr: u64) -> u8 {
    ((hdr >> 32) & 0x3f) as u8
}

/// `IRDMAQPSQ_ADDFRAGCNT`: the fragment slots after the first.
fn addl_frags(hdr: u64) -> u32 {
    ((hdr >> 38) & 0xf) as u32
}

/// `IRDMAQPSQ_INLINEDATALEN`.
fn inline_len(hdr: u64) -> u32 {
    ((hdr >> 48) & 0xff) as u32
}

/// How many quanta the WQE with header `hdr` takes (`irdma_fragcnt_to_quanta_sq`, or
/// `irdma_inline_data_size_to_quanta` for inline data; a NOP takes one).
pub fn quanta(hdr: u64) -> u32 {
    if opcode(hdr) == op::NOP {
        1
    } else if hdr & INLINE_FLAG != 0 {
        let n = inline_len(hdr);
        if n <= 8 {
            1
        } else {
            (2 + (n - 9) / 31).min(MAX_QUANTA)
        }
    } else {
        // Slots: the first (a fragment or the immediate) and the additional ones, padded
        // to an odd count on GEN_2; two slots a quantum after the first.
        addl_frags(hdr).div_ceil(2) + 1
    }
}

/// One send WQE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqWqe {
    pub op: u8,
    pub signaled: bool,
    /// Immediate data as libirdma stores it (`ntohl` of the WR's).
    pub imm: Option<u32>,
    /// qword 2: the remote address of a WRITE or READ.
    pub remote_addr: u64,
    /// `IRDMAQPSQ_REMSTAG`: the rkey of a WRITE or READ, the key a SEND invalidates.
    pub stag: u32,
    pub data: Gather,
}

fn qword(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8).map_or(0, |s| u64::from_le_bytes(s.try_into().unwrap_or_default()))
}

/// A fragment at byte `off`: address, length, key; `None` for an empty one.
fn fragment(b: &[u8], off: usize) -> Option<(u64, u32, u32)> {
    let addr = qword(b, off);
    let w = qword(b, off + 8);
    let len = ((w >> 32) & 0x7fff_ffff) as u32;
    (len != 0).then_some((addr, len, w as u32))
}

/// The fragments of a WQE whose first slot is at byte 0 (or holds the immediate), the
/// others at 32, 48, ...
fn fragments(b: &[u8], hdr: u64, first_is_imm: bool) -> Vec<(u64, u32, u32)> {
    let mut f = Vec::new();
    if !first_is_imm {
        f.extend(fragment(b, 0));
    }
    for k in 0..addl_frags(hdr) as usize {
        f.extend(fragment(b, 32 + 16 * k));
    }
    f
}

/// Parses the send WQE in `b` (its quanta, [`quanta`] of them) with header `hdr`.
///
/// # Errors
///
/// Inline data beyond the bytes given.
pub fn parse_sq(b: &[u8], hdr: u64) -> Result<SqWqe, &'static str> {
    let imm_flag = hdr & IMM_FLAG != 0;
    let data = if hdr & INLINE_FLAG != 0 {
        let n = inline_len(hdr) as usize;
        let mut d = Vec::with_capacity(n);
        d.extend_from_slice(b.get(8..16).ok_or("short WQE")?);
        let mut q = 1;
        while d.len() < n {
            d.extend_from_slice(b.get(32 * q..32 * q + 31).ok_or("inline data longer than its WQE")?);
            q += 1;
        }
        d.truncate(n);
        Gather::Inline(d)
    } else {
        Gather::Segs(fragments(b, hdr, imm_flag))
    };
    Ok(SqWqe {
        op: opcode(hdr),
        signaled: hdr & SIGCOMPL != 0,
        imm: imm_flag.then_some(qword(b, 0) as u32),
        remote_addr: qword(b, 16),
        stag: hdr as u32,
        data,
    })
}

/// The scatter entries of a receive WQE (`irdma_uk_post_receive`): fragment 0 in qwords
/// 0-1, the others from byte 32.
pub fn parse_rq(b: &[u8], hdr: u64) -> Vec<(u64, u32, u32)> {
    fragments(b, hdr, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(op: u8, addl: u64, valid: bool) -> u64 {
        (u64::from(op) << 32) | (addl << 38) | if valid { VALID } else { 0 }
    }

    fn frag(b: &mut [u8], off: usize, addr: u64, len: u32, key: u32) {
        b[off..off + 8].copy_from_slice(&addr.to_le_bytes());
        let w = (u64::from(len) << 32) | u64::from(key) | VALID;
        b[off + 8..off + 16].copy_from_slice(&w.to_le_bytes());
    }

    #[test]
    fn quanta_follow_the_fragment_count_as_libirdma_pads_it() {
        // One fragment: one quantum; two (ADDFRAGCNT 2 with the GEN_2 pad): two; a send
        // with immediate and one fragment: 2 slots, padded to 3: two quanta.
        assert_eq!(quanta(hdr(op::SEND, 0, true)), 1);
        assert_eq!(quanta(hdr(op::SEND, 2, true)), 2);
        assert_eq!(quanta(hdr(op::SEND, 4, true)), 3);
        assert_eq!(quanta(hdr(op::NOP, 0, true)), 1);
        let inline = |n: u64| hdr(op::SEND, 0, true) | INLINE_FLAG | (n << 48);
        assert_eq!((quanta(inline(8)), quanta(inline(9)), quanta(inline(39)), quanta(inline(40))), (1, 2, 2, 3));
        assert_eq!(quanta(inline(101)), 4);
    }

    #[test]
    fn a_write_with_immediate_puts_its_fragments_after_the_first_quantum() {
        let mut b = vec![0u8; 64];
        b[..8].copy_from_slice(&0x1234_5678u64.to_le_bytes());
        b[16..24].copy_from_slice(&0xdead_0000u64.to_le_bytes());
        frag(&mut b, 32, 0x7000, 64, 0x55);
        let h = hdr(op::RDMA_WRITE, 2, true) | IMM_FLAG | SIGCOMPL | 0xabcd;
        let w = parse_sq(&b, h).unwrap();
        assert_eq!(w.imm, Some(0x1234_5678));
        assert_eq!((w.remote_addr, w.stag, w.signaled), (0xdead_0000, 0xabcd, true));
        assert_eq!(w.data, Gather::Segs(vec![(0x7000, 64, 0x55)]));
    }

    #[test]
    fn inline_data_skips_the_header_and_each_quantums_valid_byte() {
        let mut b = vec![0u8; 96];
        let msg: Vec<u8> = (0..50u8).collect();
        b[8..16].copy_from_slice(&msg[..8]);
        b[32..63].copy_from_slice(&msg[8..39]);
        b[64..75].copy_from_slice(&msg[39..50]);
        b[63] = 0x80;
        let h = hdr(op::SEND, 0, true) | INLINE_FLAG | (50 << 48);
        assert_eq!(quanta(h), 3);
        assert_eq!(parse_sq(&b, h).unwrap().data, Gather::Inline(msg));
    }

    #[test]
    fn a_receive_lists_its_fragments_and_skips_the_pad() {
        let mut b = vec![0u8; 64];
        frag(&mut b, 0, 0x1000, 16, 1);
        frag(&mut b, 32, 0x2000, 32, 2);
        // Two fragments: ADDFRAGCNT 1 plus the zero pad at byte 48.
        assert_eq!(parse_rq(&b, hdr(0, 2, true)), vec![(0x1000, 16, 1), (0x2000, 32, 2)]);
    }
}
