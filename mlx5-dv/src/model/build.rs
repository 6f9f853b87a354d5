//! Builders for the CQEs a ConnectX writes, field by field as rdma-core reads them
//! (`providers/mlx5/mlx5dv.h` `struct mlx5_cqe64`, `providers/mlx5/cq.c` `mlx5_parse_cqe`):
//! the model's producer API takes these values and writes them into the ring in hardware
//! order.

use dvcq_uapi::mlx5::cqe::{flags_rqpn, op_own, Cqe64, QPN_MASK};
use dvcq_uapi::mlx5::err_cqe::ErrCqe;
use dvcq_uapi::mlx5::opcode::{cqe_format, cqe_opcode};
use dvcq_uapi::{Be16, Be32, Be64};

/// One CQE as the device will write it: the cqe64 and, for 128-byte CQEs, the first half
/// (inline-64 payload or GRH). The owner bit is filled in by the model at write time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The 64-byte CQE (owner bit ignored).
    pub cqe: Cqe64,
    /// First half of a 128-byte CQE; ignored on 64-byte CQs.
    pub first_half: [u8; 64],
}

impl From<Cqe64> for Entry {
    fn from(cqe: Cqe64) -> Self {
        Entry { cqe, first_half: [0; 64] }
    }
}

impl Entry {
    /// Sets the solicited-event bit.
    pub fn solicited(mut self, se: bool) -> Self {
        self.cqe.op_own = (self.cqe.op_own & !op_own::SE_MASK) | ((se as u8) << 1);
        self
    }
    /// Sets the raw timestamp.
    pub fn timestamp(mut self, ts: u64) -> Self {
        self.cqe.timestamp = Be64::new(ts);
        self
    }
    /// Sets `srqn_uidx` (SRQ number for version 0 CQEs, user index for version 1).
    pub fn srqn_uidx(mut self, v: u32) -> Self {
        self.cqe.srqn_uidx = Be32::new(v & QPN_MASK);
        self
    }
}

fn base(opcode: u8, qpn: u32, wqe_op: u8, wqe_counter: u16) -> Cqe64 {
    let mut c = Cqe64 {
        sop_drop_qpn: Be32::new(((wqe_op as u32) << 24) | (qpn & QPN_MASK)),
        wqe_counter: Be16::new(wqe_counter),
        ..Cqe64::default()
    };
    c.op_own = op_own::make(opcode, cqe_format::NO_INLINE, false, 0);
    c
}

/// A successful requester CQE for the WQE at `wqe_counter` whose opcode was `wqe_op`
/// (`MLX5_OPCODE_*`); `byte_cnt` matters for RDMA READ.
pub fn req(qpn: u32, wqe_counter: u16, wqe_op: u8, byte_cnt: u32) -> Entry {
    let mut c = base(cqe_opcode::REQ, qpn, wqe_op, wqe_counter);
    c.byte_cnt = Be32::new(byte_cnt);
    c.into()
}

/// A successful responder CQE (opcode `RESP_WR_IMM`, `RESP_SEND`, `RESP_SEND_IMM` or
/// `RESP_SEND_INV`) for `byte_cnt` bytes. `imm_inval_pkey` is the host-order value of the
/// immediate / rkey / P_Key word.
pub fn resp(opcode: u8, qpn: u32, wqe_counter: u16, byte_cnt: u32, imm_inval_pkey: u32) -> Entry {
    let mut c = base(opcode, qpn, 0, wqe_counter);
    c.byte_cnt = Be32::new(byte_cnt);
    c.imm_inval_pkey = Be32::new(imm_inval_pkey);
    c.into()
}

/// UD / responder address fields of a receive CQE.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvAddr {
    /// Source QPN.
    pub src_qp: u32,
    /// Source LID.
    pub slid: u16,
    /// SL (IB) or packet type (RoCE), 4 bits.
    pub sl: u8,
    /// DLID path bits, 7 bits.
    pub path_bits: u8,
    /// A GRH was received (sets `flags_rqpn` bit 28, or 29 with [`Entry`] first-half GRH).
    pub grh: bool,
}

impl Entry {
    /// Fills the UD/responder address fields.
    pub fn recv_addr(mut self, a: RecvAddr) -> Self {
        let grh = if a.grh { flags_rqpn::L3_IN_DATA } else { 0 };
        self.cqe.flags_rqpn = Be32::new(grh | ((a.sl as u32 & 0xf) << 24) | (a.src_qp & QPN_MASK));
        self.cqe.slid = Be16::new(a.slid);
        self.cqe.ml_path = a.path_bits & 0x7f;
        self
    }

    /// Puts a 40-byte GRH into the first half of a 128-byte CQE and flags it as in-CQE.
    pub fn grh_in_cqe(mut self, grh: [u8; 40]) -> Self {
        let f = self.cqe.flags_rqpn.get() & !(flags_rqpn::L3_IN_DATA) | flags_rqpn::L3_IN_CQE;
        self.cqe.flags_rqpn = Be32::new(f);
        self.first_half[dvcq_uapi::mlx5::cqe::GRH_OFFSET_IN_CQE128..].copy_from_slice(&grh);
        self
    }

    /// Ethernet offload results: header-OK bits, header types, checksum, RSS hash.
    pub fn offloads(mut self, hds_ip_ext: u8, l4_hdr_type_etc: u8, check_sum: u16, rss_hash: u32) -> Self {
        self.cqe.hds_ip_ext = hds_ip_ext;
        self.cqe.l4_hdr_type_etc = l4_hdr_type_etc;
        self.cqe.check_sum = Be16::new(check_sum);
        self.cqe.rss_hash_result = Be32::new(rss_hash);
        self
    }

    /// Inline-scattered payload: up to 32 bytes go into the cqe64 (format 1); up to 64 into
    /// the first half of a 128-byte CQE (format 2). Sets `byte_cnt` to the payload length.
    /// Longer payloads are truncated to 64 bytes.
    pub fn inline(mut self, data: &[u8]) -> Self {
        let n = data.len().min(64);
        let fmt = if n <= 32 {
            let mut bytes: [u8; 64] = bytemuck::cast(self.cqe);
            bytes[..n].copy_from_slice(&data[..n]);
            self.cqe = bytemuck::cast(bytes);
            cqe_format::INLINE_SCATTER_32
        } else {
            self.first_half[..n].copy_from_slice(&data[..n]);
            cqe_format::INLINE_SCATTER_64
        };
        self.cqe.byte_cnt = Be32::new(n as u32);
        self.cqe.op_own = (self.cqe.op_own & !op_own::FORMAT_MASK) | (fmt << op_own::FORMAT_SHIFT);
        self
    }
}

/// An error CQE: requester (`REQ_ERR`) or responder (`RESP_ERR`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrSpec {
    /// True for a requester error.
    pub requester: bool,
    /// QPN.
    pub qpn: u32,
    /// WQE counter of the failed or flushed WQE.
    pub wqe_counter: u16,
    /// `MLX5_CQE_SYNDROME_*`.
    pub syndrome: u8,
    /// Vendor syndrome.
    pub vendor_err_synd: u8,
    /// Hardware syndrome.
    pub hw_err_synd: u8,
    /// Hardware syndrome type.
    pub hw_synd_type: u8,
    /// WQE opcode of the failed send WQE (requester).
    pub wqe_opcode: u8,
    /// SRQ number / user index.
    pub srqn_uidx: u32,
}

/// Builds an error CQE.
pub fn err(s: ErrSpec) -> Entry {
    let e = ErrCqe {
        srqn: Be32::new(s.srqn_uidx & QPN_MASK),
        hw_err_synd: s.hw_err_synd,
        hw_synd_type: s.hw_synd_type,
        vendor_err_synd: s.vendor_err_synd,
        syndrome: s.syndrome,
        s_wqe_opcode_qpn: Be32::new(((s.wqe_opcode as u32) << 24) | (s.qpn & QPN_MASK)),
        wqe_counter: Be16::new(s.wqe_counter),
        op_own: op_own::make(
            if s.requester { cqe_opcode::REQ_ERR } else { cqe_opcode::RESP_ERR },
            cqe_format::NO_INLINE,
            // Error CQEs dumped in public bug reports have SE set (`op_own` 0xd2 and 0xd3 in
            // openucx/ucx#1569 and ofiwg/libfabric#4283).
            true,
            0,
        ),
        ..ErrCqe::default()
    };
    Entry::from(bytemuck::cast::<ErrCqe, Cqe64>(e))
}

/// A signature-error CQE (rdma-core consumes it without a completion).
pub fn sig_err(mkey: u32) -> Entry {
    let mut c = Cqe64::default();
    let mut b: [u8; 64] = bytemuck::cast(c);
    b[36..40].copy_from_slice(&mkey.to_be_bytes());
    c = bytemuck::cast(b);
    c.op_own = op_own::make(cqe_opcode::SIG_ERR, cqe_format::NO_INLINE, false, 0);
    c.into()
}

/// A signature-error CQE reporting `e` (`struct mlx5_sigerr_cqe`).
pub fn sig_error(e: &crate::sig::SigError) -> Entry {
    let c = dvcq_uapi::mlx5::err_cqe::SigErrCqe {
        expected_trans_sig: Be32::new((e.expected >> 32) as u32),
        actual_trans_sig: Be32::new((e.actual >> 32) as u32),
        expected_ref_tag: Be32::new(e.expected as u32),
        actual_ref_tag: Be32::new(e.actual as u32),
        syndrome: Be16::new(e.syndrome),
        sig_type: e.sig_type,
        domain: e.domain,
        mkey: Be32::new(e.mkey),
        sig_err_offset: Be64::new(e.offset),
        op_own: op_own::make(cqe_opcode::SIG_ERR, cqe_format::NO_INLINE, false, 0),
        ..Default::default()
    };
    Entry::from(bytemuck::cast::<_, Cqe64>(c))
}

/// The RESIZE CQE written into the old ring of a resized CQ.
pub fn resize() -> Entry {
    Cqe64 { op_own: op_own::make(cqe_opcode::RESIZE_CQ, cqe_format::NO_INLINE, false, 0), ..Cqe64::default() }.into()
}

/// Arbitrary bytes as a CQE (for garbage tests): only the owner bit is replaced at write.
pub fn raw(bytes: [u8; 64]) -> Entry {
    Entry::from(bytemuck::cast::<[u8; 64], Cqe64>(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GRH moved into the CQE replaces the in-data flag (GRH field 2, not 3); the address
    /// fields keep only their bits.
    #[test]
    fn address_fields_and_a_grh_in_the_cqe() {
        let a = RecvAddr { src_qp: 0xff12_3456, slid: 0xbeef, sl: 0x1f, path_bits: 0xff, grh: true };
        let e = resp(cqe_opcode::RESP_SEND, 7, 1, 64, 0).recv_addr(a);
        assert_eq!((e.cqe.grh(), e.cqe.sl(), e.cqe.src_qp()), (1, 0xf, 0x12_3456));
        assert_eq!((e.cqe.slid.get(), e.cqe.ml_path), (0xbeef, 0x7f));
        let e = e.grh_in_cqe([0x5a; 40]);
        assert_eq!((e.cqe.grh(), e.cqe.sl(), e.cqe.src_qp()), (2, 0xf, 0x12_3456));
        assert!(e.first_half[24..].iter().all(|&b| b == 0x5a) && e.first_half[..24].iter().all(|&b| b == 0));
    }

    /// An error CQE carries the posted WQE's opcode above its QPN (`s_wqe_opcode_qpn`).
    #[test]
    fn an_error_cqe_names_the_wqe_opcode_and_qp() {
        let s = ErrSpec {
            requester: true,
            qpn: 0xab_cdef,
            wqe_counter: 9,
            syndrome: 0x13,
            vendor_err_synd: 0x88,
            hw_err_synd: 1,
            hw_synd_type: 2,
            wqe_opcode: 0x10,
            srqn_uidx: 0x42,
        };
        let e = err(s);
        assert_eq!((e.cqe.wqe_opcode(), e.cqe.qpn(), e.cqe.opcode()), (0x10, 0xab_cdef, cqe_opcode::REQ_ERR));
    }
}
