//! The part of an irdma send WQE a completion reader looks at: its header qword, whose
//! opcode rdma-core reads back on the flush path (`providers/irdma/defs.h`:
//! `IRDMAQPSQ_OPCODE`, `IRDMAQPSQ_VALID`; `uk.c`: `irdma_uk_cq_poll_cmpl`).

/// `IRDMA_QP_WQE_MIN_SIZE`: one quantum of a work queue, in bytes.
pub const QUANTUM_SIZE: usize = 32;
/// Byte offset of the header qword (qword 3) in a WQE's first quantum.
pub const HDR_OFFSET: usize = 24;
/// `IRDMAQPSQ_OPCODE`: bits 37:32 of the header qword.
pub const HDR_OPCODE_SHIFT: u32 = 32;
/// Width mask of [`HDR_OPCODE_SHIFT`]'s field.
pub const HDR_OPCODE_MASK: u64 = 0x3f;
/// `IRDMAQPSQ_VALID`: bit 63 of the header qword.
pub const HDR_VALID: u64 = 1 << 63;

/// The WQE opcode of a header qword (host order), as `FIELD_GET(IRDMAQPSQ_OPCODE, ..)`.
pub const fn hdr_opcode(qword3: u64) -> u8 {
    ((qword3 >> HDR_OPCODE_SHIFT) & HDR_OPCODE_MASK) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opcode_is_bits_37_to_32() {
        assert_eq!(hdr_opcode(0x0000_000c_0000_0000 | HDR_VALID), 0x0c);
        assert_eq!(hdr_opcode(0xffff_ffc0_ffff_ffff), 0);
        assert_eq!(hdr_opcode(u64::MAX), 0x3f);
    }
}
