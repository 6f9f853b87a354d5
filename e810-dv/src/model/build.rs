//! What the model writes: one CQE described by its fields, with constructors for every CQE
//! kind the hardware produces, and its encoding into qwords. Each field means what rdma-core
//! reads it as (`providers/irdma/defs.h` masks, `uk.c` `irdma_uk_cq_poll_cmpl`, `uverbs.c`
//! `irdma_process_cqe`).

use dvcq_uapi::irdma::codes::{flush, major};
use dvcq_uapi::irdma::cqe::{ext, q0, q2, q3};

/// The extension part of a CQE (qword4..7: `IRDMA_CQ_IMMDATALOW32`, `IRDMA_CQ_UDSMAC`,
/// `IRDMA_CQ_IMMVALID` and the rest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelExt {
    /// Immediate data as a host-order number (`ntohl` of the sender's `imm_data` in
    /// rdma-core's `irdma_upost_send`; `irdma_process_cqe` applies `htonl`).
    pub imm: Option<u32>,
    /// GEN3 SRQ completions: the QP context (qword5).
    pub srq_qp_ctx: u64,
    /// UD source MAC.
    pub smac: Option<[u8; 6]>,
    /// UD VLAN tag.
    pub vlan: Option<u16>,
}

/// One CQE as the model's producer API takes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelCqe {
    /// qword1: the QP completion context (GEN3 SRQ CQEs: the wr_id).
    pub ctx: u64,
    /// qword2 55:32: the local QP number.
    pub qp_num: u32,
    /// qword3 bit 62.
    pub sq: bool,
    /// qword3 61:56: SQ WQE opcode, or the received opcode.
    pub op: u8,
    /// qword3 46:32: WQE index in quanta.
    pub wqe_idx: u16,
    /// qword0 31:0.
    pub payload_len: u32,
    /// qword0 63:32: TCP sequence / PSN / RTT / GEN3 timestamp.
    pub tcp_seq_psn_rtt_ts: u32,
    /// qword2 31:0: UD source QPN or invalidated STag.
    pub src_qpn_or_stag: u32,
    /// `(major, minor)` of an error CQE.
    pub error: Option<(u16, u16)>,
    /// qword3 bit 54.
    pub solicited: bool,
    /// qword3 bit 53 (invalidate on RC, IPv4 on UD).
    pub stag_ipv4: bool,
    /// qword3 bit 52 (GEN3).
    pub srq: bool,
    /// qword3 bit 51.
    pub push_dropped: bool,
    /// The extension; `Some` sets EXTCQE.
    pub ext: Option<ModelExt>,
}

impl ModelCqe {
    /// A successful SQ completion of the signaled WQE at quanta index `wqe_idx` with SQ
    /// opcode `op` (`codes::sq_op`).
    pub fn send(ctx: u64, qp_num: u32, wqe_idx: u16, op: u8) -> Self {
        Self { ctx, qp_num, sq: true, op, wqe_idx, ..Self::default() }
    }

    /// A successful receive of `len` bytes into RQ WQE `rq_idx` of a QP whose RQ WQEs are
    /// `1 << rq_shift` quanta: hardware reports `rq_idx << rq_shift` (rdma-core divides by
    /// `rq_wqe_size_multiplier`). `op` is the received opcode (GEN2 RoCE: the IB opcode,
    /// `codes::rq_op`).
    pub fn recv(ctx: u64, qp_num: u32, rq_idx: u16, rq_shift: u8, op: u8, len: u32) -> Self {
        Self { ctx, qp_num, op, wqe_idx: rq_idx << rq_shift, payload_len: len, ..Self::default() }
    }

    /// Adds immediate data (extended CQE).
    pub fn with_imm(mut self, imm: u32) -> Self {
        self.ext.get_or_insert_with(ModelExt::default).imm = Some(imm);
        self
    }

    /// Marks a remote invalidate of `stag` (RC receive, bit 53).
    pub fn with_inv(mut self, stag: u32) -> Self {
        self.stag_ipv4 = true;
        self.src_qpn_or_stag = stag;
        self
    }

    /// UD receive details: source QPN, IPv4 bit, and the source MAC / VLAN in the extension.
    pub fn with_ud(mut self, src_qpn: u32, ipv4: bool, smac: [u8; 6], vlan: Option<u16>) -> Self {
        self.src_qpn_or_stag = src_qpn;
        self.stag_ipv4 = ipv4;
        let e = self.ext.get_or_insert_with(ModelExt::default);
        e.smac = Some(smac);
        e.vlan = vlan;
        self
    }

    /// Makes it an error CQE with `major`/`minor`.
    pub fn with_error(mut self, major_err: u16, minor_err: u16) -> Self {
        self.error = Some((major_err, minor_err));
        self
    }

    /// Sets the solicited-event bit.
    pub fn solicited(mut self) -> Self {
        self.solicited = true;
        self
    }

    /// Sets the push-dropped bit.
    pub fn push_dropped(mut self) -> Self {
        self.push_dropped = true;
        self
    }

    /// Sets qword0 63:32.
    pub fn with_tcp_seq(mut self, v: u32) -> Self {
        self.tcp_seq_psn_rtt_ts = v;
        self
    }

    /// A flush CQE for one queue (what `irdma_uk_cq_poll_cmpl`'s flush path reads): error,
    /// major 1, `minor` (GENERAL unless the QP has a specific flush code), payload length 0.
    pub fn flush(ctx: u64, qp_num: u32, sq: bool, wqe_idx: u16, minor: u16) -> Self {
        Self { ctx, qp_num, sq, wqe_idx, error: Some((major::FLUSH, minor)), ..Self::default() }
    }

    /// [`ModelCqe::flush`] with `FLUSH_GENERAL_ERR`.
    pub fn flush_general(ctx: u64, qp_num: u32, sq: bool, wqe_idx: u16) -> Self {
        Self::flush(ctx, qp_num, sq, wqe_idx, flush::GENERAL_ERR)
    }

    /// A GEN3 SRQ receive: qword1 carries `wr_id`, qword5 the QP context
    /// (`irdma_uk_cq_poll_cmpl`).
    pub fn srq_recv(qp_ctx: u64, qp_num: u32, wr_id: u64, len: u32, op: u8) -> Self {
        let mut c = Self { ctx: wr_id, qp_num, op, payload_len: len, srq: true, ..Self::default() };
        c.ext = Some(ModelExt { srq_qp_ctx: qp_ctx, ..ModelExt::default() });
        c
    }

    /// Whether the CQE has an extension part.
    pub fn extended(&self) -> bool {
        self.ext.is_some()
    }

    /// qwords 0..2 (host order).
    pub fn body(&self) -> [u64; 3] {
        [q0::make(self.payload_len, self.tcp_seq_psn_rtt_ts), self.ctx, q2::make(self.qp_num, self.src_qpn_or_stag)]
    }

    /// qword3 with the given valid bit.
    pub fn qword3(&self, valid: bool) -> u64 {
        let (maj, min) = self.error.unwrap_or((0, 0));
        let f = q3::Flags {
            sq: self.sq,
            error: self.error.is_some(),
            solicited: self.solicited,
            stag_ipv4: self.stag_ipv4,
            srq: self.srq,
            push_dropped: self.push_dropped,
            extended: self.ext.is_some(),
        };
        q3::make(valid, self.op, self.wqe_idx, maj, min, f)
    }

    /// Extension qwords 4..6 (host order); zeros without an extension.
    pub fn ext_body(&self) -> [u64; 3] {
        let Some(e) = self.ext else { return [0; 3] };
        let q6 = e.smac.map_or(0, ext::smac_bits) | u64::from(e.vlan.unwrap_or(0)) << ext::UDVLAN_SHIFT;
        [u64::from(e.imm.unwrap_or(0)), e.srq_qp_ctx, q6]
    }

    /// Extension qword7 with the given valid bit.
    pub fn ext_qword7(&self, valid: bool) -> u64 {
        let mut w = if valid { ext::VALID } else { 0 };
        if let Some(e) = self.ext {
            if e.imm.is_some() {
                w |= ext::IMMVALID;
            }
            if e.smac.is_some() {
                w |= ext::UDSMACVALID;
            }
            if e.vlan.is_some() {
                w |= ext::UDVLANVALID;
            }
        }
        w
    }
}

/// Little-endian bytes of three qwords.
pub(crate) fn le_bytes(w: [u64; 3]) -> [u8; 24] {
    let mut b = [0u8; 24];
    for (i, q) in w.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&q.to_le_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each constructor puts each argument where the layout reads it back.
    #[test]
    fn constructors_encode_every_argument() {
        let c = ModelCqe::recv(0xc0ffee, 0x12345, 3, 2, 0x0b, 700);
        let [w0, w1, w2] = c.body();
        assert_eq!((q0::payload_len(w0), w1, q2::qp_id(w2)), (700, 0xc0ffee, 0x12345));
        let w3 = c.qword3(true);
        assert_eq!((q3::op(w3), q3::wqe_idx(w3), w3 & q3::SQ), (0x0b, 12, 0));
        let c = ModelCqe::flush(7, 0x54321, true, 9, flush::LOC_LEN_ERR);
        let w3 = c.qword3(false);
        assert_eq!(q2::qp_id(c.body()[2]), 0x54321);
        assert_eq!((q3::major_err(w3), q3::minor_err(w3), q3::wqe_idx(w3), q3::valid(w3)), (1, 6, 9, false));
        assert!(w3 & q3::SQ != 0 && w3 & q3::ERROR != 0);
        let c = ModelCqe::srq_recv(0xabc0, 0x777, 0x5151, 64, 0x0d);
        let w3 = c.qword3(true);
        assert_eq!((q3::op(w3), c.body()[1], c.ext_body()[1]), (0x0d, 0x5151, 0xabc0));
        assert!(w3 & q3::SRQ != 0 && w3 & q3::EXTCQE != 0);
        // A UD receive's extension: source MAC and VLAN side by side in qword6.
        let mac = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
        let c = ModelCqe::recv(1, 2, 0, 0, 0x04, 8).with_ud(0x99, true, mac, Some(0x0abc));
        let q6 = c.ext_body()[2];
        assert_eq!((ext::smac(q6), ext::vlan(q6)), (mac, 0x0abc));
        assert_eq!(ModelCqe::send(1, 2, 3, 4).ext_body(), [0; 3]);
    }
}
