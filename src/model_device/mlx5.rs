//! `model-mlx5`: how rdma-core's mlx5 provider sizes a QP's queues and WQEs
//! (`providers/mlx5/verbs.c` `mlx5_calc_sq_size`, `mlx5_calc_rq_size`; `qp.c`
//! `_mlx5_post_send`), and the CQEs a ConnectX writes for executed work.

use super::cq::Mlx5CqAttrs;
use super::DeviceError;
use crate::verbs::{QpCaps, QpType, SendOp, Sge};
use dvcq_mlx5_dv::model::build::{self, Entry, ErrSpec, RecvAddr};
use dvcq_mlx5_dv::model::compress::{Compression, Policy};
use dvcq_mlx5_dv::{CompLayout, MiniFormat};
use dvcq_provider::WcStatus;
use dvcq_uapi::mlx5::opcode::{cqe_opcode, syndrome, wqe_opcode};

/// Bytes of the WQE segments rdma-core counts (`struct mlx5_wqe_*`).
const CTRL: u32 = 16;
const RADDR: u32 = 16;
const DATAGRAM: u32 = 48;
const DATA_SEG: u32 = 16;
/// `struct mlx5_wqe_atomic_seg`.
const ATOMIC_SEG: u32 = 16;
const INLINE_HDR: u32 = 4;
/// `struct mlx5_wqe_xrc_seg`: the remote XRC SRQ number an XRC initiator's WQE carries.
const XRC_SEG: u32 = 16;
const UMR_CTRL: u32 = 48;
const MKEY_CTX: u32 = 64;
/// `max(sizeof(struct mlx5_wqe_umr_klm_seg), 64)`.
const KLM: u32 = 64;
/// A send WQE basic block.
pub(crate) const WQE_BB: u32 = 64;
/// `max_sq_desc_sz` and `max_rq_desc_sz` (model choice: the 512 bytes the kernel reports
/// device limits by).
const MAX_DESC: u32 = 512;
/// `max_send_wqebb` and `max_recv_wr`: `1 << log_max_qp_sz`.
const MAX_WQEBB: u32 = 1 << 15;

/// rdma-core's send overhead for an RC QP (`_sq_overhead` with every RC op: the memory
/// window bind WQE is the largest, ctrl + UMR ctrl + mkey context + KLM).
const RC_OVERHEAD: u32 = CTRL + UMR_CTRL + MKEY_CTX + KLM;
/// UD: ctrl + datagram segment.
const UD_OVERHEAD: u32 = CTRL + DATAGRAM;

/// The inline bytes a 512-byte RC WQE holds after the overhead and the inline header.
pub(crate) const MAX_RC_INLINE: u32 = MAX_DESC - RC_OVERHEAD - INLINE_HDR;

const fn align(v: u32, a: u32) -> u32 {
    v.div_ceil(a) * a
}

/// A QP's queues as rdma-core sized them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpLayout {
    /// `sq.wqe_cnt` in 64-byte blocks (at least 1 for the registry).
    pub(crate) sq_wqe_cnt: u32,
    /// `sq.max_post`: work requests outstanding at most.
    pub(crate) max_post_send: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_inline: u32,
    /// `rq.wqe_cnt` (at least 1 for the registry; unused with an SRQ).
    pub(crate) rq_wqe_cnt: u32,
    pub(crate) max_post_recv: u32,
    pub(crate) max_recv_sge: u32,
}

fn too_large(what: &'static str, value: u32, max: u32) -> DeviceError {
    DeviceError::TooLarge { what, value: value.into(), max: max.into(), device: "model-mlx5" }
}

/// Sizes the queues of a QP asking for `caps` (EINVAL cases as rdma-core refuses them).
pub(crate) fn layout(qp_type: QpType, caps: &QpCaps, srq: bool) -> Result<(QpLayout, QpCaps), DeviceError> {
    let overhead = match qp_type {
        QpType::Rc => RC_OVERHEAD,
        // `sq_overhead` for UC: ctrl + remote address.
        QpType::Uc => CTRL + RADDR,
        QpType::Ud => UD_OVERHEAD,
        // `sq_overhead`: the larger of ctrl + the bind WQE's segments and ctrl + XRC
        // segment + remote address; the first, so the RC number.
        QpType::XrcSend => RC_OVERHEAD.max(CTRL + XRC_SEG + RADDR),
        // A target has no send queue (and no receive queue: caps of 0 ask for none).
        QpType::XrcRecv => CTRL + XRC_SEG + RADDR,
    };
    let (mut sq_wqe_cnt, mut max_post_send, mut max_inline) = (0, 0, 0);
    if caps.max_send_wr > 0 {
        // More inline data than the largest WQE holds is refused before it is added to the
        // header and the overhead (where a number near u32::MAX would wrap).
        let max_inline_data = MAX_DESC - overhead - INLINE_HDR;
        if caps.max_inline_data > max_inline_data {
            return Err(too_large("max_inline_data", caps.max_inline_data, max_inline_data));
        }
        let inl_size =
            if caps.max_inline_data > 0 { overhead + align(INLINE_HDR + caps.max_inline_data, 16) } else { 0 };
        let max_gather = (MAX_DESC - overhead) / DATA_SEG;
        if caps.max_send_sge > max_gather {
            return Err(too_large("max_send_sge", caps.max_send_sge, max_gather));
        }
        let tot = (overhead + caps.max_send_sge * DATA_SEG).max(inl_size);
        if tot > MAX_DESC {
            return Err(too_large("max_inline_data", caps.max_inline_data, MAX_DESC - overhead - INLINE_HDR));
        }
        let wqe_size = align(tot, WQE_BB);
        // An RC WQE of no data segment is the overhead alone (three whole blocks), with no
        // room for the inline header: no inline data, not a negative amount.
        max_inline = wqe_size.saturating_sub(overhead + INLINE_HDR);
        if caps.max_send_wr > 0x7fff_ffff / MAX_DESC {
            return Err(too_large("max_send_wr", caps.max_send_wr, 0x7fff_ffff / MAX_DESC));
        }
        let wq_size = (caps.max_send_wr * wqe_size).next_power_of_two();
        sq_wqe_cnt = wq_size / WQE_BB;
        if sq_wqe_cnt > MAX_WQEBB {
            return Err(too_large("max_send_wr", caps.max_send_wr, MAX_WQEBB * WQE_BB / wqe_size));
        }
        max_post_send = wq_size / wqe_size;
    }
    let (mut rq_wqe_cnt, mut max_post_recv, mut max_recv_sge) = (0, 0, 0);
    if caps.max_recv_wr > 0 && !srq {
        if caps.max_recv_wr > MAX_WQEBB {
            return Err(too_large("max_recv_wr", caps.max_recv_wr, MAX_WQEBB));
        }
        if caps.max_recv_sge > MAX_DESC / DATA_SEG {
            return Err(too_large("max_recv_sge", caps.max_recv_sge, MAX_DESC / DATA_SEG));
        }
        let size = DATA_SEG * caps.max_recv_sge.max(1);
        let wqe_size = size.next_power_of_two();
        let wq_size = (caps.max_recv_wr.next_power_of_two() * wqe_size).max(WQE_BB);
        rq_wqe_cnt = wq_size / wqe_size;
        max_post_recv = rq_wqe_cnt;
        max_recv_sge = wqe_size / DATA_SEG;
    }
    let l = QpLayout {
        sq_wqe_cnt: sq_wqe_cnt.max(1),
        max_post_send,
        max_send_sge: caps.max_send_sge,
        max_inline,
        rq_wqe_cnt: rq_wqe_cnt.max(1),
        max_post_recv,
        max_recv_sge,
    };
    let granted = QpCaps {
        max_send_wr: max_post_send,
        max_recv_wr: max_post_recv,
        max_send_sge: caps.max_send_sge,
        max_recv_sge,
        max_inline_data: max_inline,
    };
    Ok((l, granted))
}

/// An SRQ's WQE count and scatter entries (`mlx5_create_srq`: `align_queue_size(max_wr +
/// 1)` WQEs of `next segment + max_sge data segments`, rounded up to a power of two).
pub(crate) fn srq_layout(max_wr: u32, max_sge: u32) -> (u32, u32) {
    let max = (max_wr + 1).next_power_of_two();
    let wqe = (16 + DATA_SEG * max_sge.max(1)).next_power_of_two().max(32);
    (max, (wqe - 16) / DATA_SEG)
}

/// The 64-byte blocks a send WQE takes (`_mlx5_post_send`: ctrl, the remote address for
/// RDMA, the datagram segment for UD, then one data segment per non-empty entry or the
/// inline data with its 4-byte header, in 16-byte units). A bind is a UMR WQE: ctrl, the
/// UMR control segment, the mkey context and one KLM padded to 64 bytes (`set_bind_wr`),
/// three blocks. An XRC initiator's WQE has the XRC segment after the ctrl segment.
pub(crate) fn wqebbs(qp_type: QpType, op: SendOp, sg: &[Sge], inline_len: Option<u64>) -> u32 {
    wqe_size(qp_type, op, sg, inline_len).div_ceil(WQE_BB)
}

/// The bytes of a send WQE's segments, as [`wqebbs`] counts them (a multiple of 16: the
/// control segment's `ds` is this in 16-byte units).
fn wqe_size(qp_type: QpType, op: SendOp, sg: &[Sge], inline_len: Option<u64>) -> u32 {
    if let SendOp::BindMw(_) = op {
        return CTRL + UMR_CTRL + MKEY_CTX + KLM;
    }
    let mut size = CTRL;
    if qp_type == QpType::XrcSend {
        size += XRC_SEG;
    }
    if op.remote().is_some() {
        size += RADDR;
    }
    if op.is_atomic() {
        // The atomic segment, then one data segment of 8 bytes for the response
        // (`set_data_ptr_seg_atomic`: the first entry only).
        return size + ATOMIC_SEG + DATA_SEG;
    }
    if qp_type == QpType::Ud {
        size += DATAGRAM;
    }
    size += match inline_len {
        Some(0) => 0,
        Some(n) => align(INLINE_HDR + n as u32, 16),
        None => DATA_SEG * sg.iter().filter(|s| s.len > 0).count() as u32,
    };
    size
}

/// `MLX5_WQE_CTRL_CQ_UPDATE` in the control segment's `fm_ce_se`: the WQE completes with
/// a CQE (every WQE of a QP made with `sq_sig_all`: rdma-core's `sq_signal_bits`).
const CTRL_CQ_UPDATE: u8 = 0x08;
/// `MLX5_WQE_CTRL_SOLICITED`.
const CTRL_SOLICITED: u8 = 0x02;

/// One send WQE of an RC QP as rdma-core's `_mlx5_post_send` writes it, in 16-byte
/// segments from its first basic block: the control segment (`opmod_idx_opcode` with the
/// WQE index and opcode, `qpn_ds` with the QP number and the size in 16-byte units,
/// `fm_ce_se`, the immediate or invalidated rkey), the remote address segment for RDMA
/// (`raddr`, `rkey`), then a data segment (`byte_count`, `lkey`, `addr`) per non-empty
/// entry of the list. The device reads these when it executes the WQE; the poll reads a
/// READ's data segments to copy a response that came in the CQE. An inline send's data
/// and a bind's UMR segments are not written (nothing reads them back: the model took the
/// data at post), only their size is counted in `ds`.
pub(crate) struct SendWqe<'a> {
    pub(crate) qpn: u32,
    pub(crate) wqe: u16,
    pub(crate) op: SendOp,
    pub(crate) sg: &'a [Sge],
    pub(crate) inline_len: Option<u64>,
    pub(crate) signaled: bool,
    pub(crate) solicited: bool,
}

impl SendWqe<'_> {
    /// The WQE's segments, 16 bytes each, in order.
    pub(crate) fn segments(&self) -> Vec<[u8; 16]> {
        let ds = wqe_size(QpType::Rc, self.op, self.sg, self.inline_len) / 16;
        let mut ctrl = [0u8; 16];
        ctrl[..4].copy_from_slice(&((u32::from(self.wqe) << 8) | u32::from(wqe_op(self.op))).to_be_bytes());
        ctrl[4..8].copy_from_slice(&((self.qpn << 8) | (ds & 0x3f)).to_be_bytes());
        let ce = if self.signaled { CTRL_CQ_UPDATE } else { 0 };
        let se = if self.solicited { CTRL_SOLICITED } else { 0 };
        ctrl[11] = ce | se;
        let imm = match self.op {
            SendOp::SendWithImm(i) | SendOp::WriteWithImm(_, i) => i,
            SendOp::SendWithInv(rkey) => rkey,
            _ => 0,
        };
        ctrl[12..].copy_from_slice(&imm.to_be_bytes());
        let mut segs = vec![ctrl];
        if let Some(r) = self.op.remote() {
            let mut raddr = [0u8; 16];
            raddr[..8].copy_from_slice(&r.addr.to_be_bytes());
            raddr[8..12].copy_from_slice(&r.rkey.to_be_bytes());
            segs.push(raddr);
        }
        let atomic = match self.op {
            SendOp::CompareSwap { compare, swap, .. } => Some((swap, compare)),
            SendOp::FetchAdd { add, .. } => Some((add, 0)),
            _ => None,
        };
        if let Some((swap_add, compare)) = atomic {
            // `struct mlx5_wqe_atomic_seg` {swap_add, compare}, then the response's data
            // segment: the first entry with a byte count of 8.
            let mut seg = [0u8; 16];
            seg[..8].copy_from_slice(&swap_add.to_be_bytes());
            seg[8..].copy_from_slice(&compare.to_be_bytes());
            segs.push(seg);
            if let Some(s) = self.sg.first() {
                let len = crate::verbs::ATOMIC_BYTES;
                segs.push(dvcq_mlx5_dv::model::wqe::DataSeg { addr: s.addr, len, lkey: s.lkey }.bytes());
            }
            return segs;
        }
        if self.inline_len.is_none() && !matches!(self.op, SendOp::BindMw(_)) {
            for s in self.sg.iter().filter(|s| s.len > 0) {
                let d = dvcq_mlx5_dv::model::wqe::DataSeg { addr: s.addr, len: s.len, lkey: s.lkey };
                segs.push(d.bytes());
            }
        }
        segs
    }

    /// Writes the WQE into an SQ of `buf.len() / 64` basic blocks at its index, wrapping
    /// to the SQ's start where a segment would pass its end (as rdma-core's post moves to
    /// `mlx5_get_send_wqe(qp, 0)` at `qend`).
    pub(crate) fn write(&self, buf: &dvcq_provider::DmaBuffer) -> Result<(), dvcq_provider::Error> {
        let bbs = buf.len() / WQE_BB as usize;
        let start = (usize::from(self.wqe) & bbs.wrapping_sub(1)) * WQE_BB as usize;
        for (i, seg) in self.segments().iter().enumerate() {
            buf.write_bytes((start + 16 * i) % buf.len(), seg)?;
        }
        Ok(())
    }
}

/// `MLX5_OPCODE_*` of a send WQE.
pub(crate) const fn wqe_op(op: SendOp) -> u8 {
    match op {
        SendOp::Send => wqe_opcode::SEND,
        SendOp::SendWithImm(_) => wqe_opcode::SEND_IMM,
        SendOp::Write(_) => wqe_opcode::RDMA_WRITE,
        SendOp::WriteWithImm(..) => wqe_opcode::RDMA_WRITE_IMM,
        SendOp::Read(_) => wqe_opcode::RDMA_READ,
        SendOp::SendWithInv(_) => wqe_opcode::SEND_INVAL,
        SendOp::BindMw(_) => wqe_opcode::UMR,
        SendOp::CompareSwap { .. } => wqe_opcode::ATOMIC_CS,
        SendOp::FetchAdd { .. } => wqe_opcode::ATOMIC_FA,
    }
}

/// The CQE syndrome for a status (`MLX5_CQE_SYNDROME_*`).
const fn syndrome_of(s: WcStatus) -> u8 {
    match s {
        WcStatus::LocLenErr => syndrome::LOCAL_LENGTH_ERR,
        WcStatus::LocQpOpErr => syndrome::LOCAL_QP_OP_ERR,
        WcStatus::LocProtErr => syndrome::LOCAL_PROT_ERR,
        WcStatus::RemInvReqErr => syndrome::REMOTE_INVAL_REQ_ERR,
        WcStatus::RemAccessErr => syndrome::REMOTE_ACCESS_ERR,
        WcStatus::RemOpErr => syndrome::REMOTE_OP_ERR,
        WcStatus::RetryExcErr => syndrome::TRANSPORT_RETRY_EXC_ERR,
        WcStatus::RnrRetryExcErr => syndrome::RNR_RETRY_EXC_ERR,
        WcStatus::MwBindErr => syndrome::MW_BIND_ERR,
        _ => syndrome::WR_FLUSH_ERR,
    }
}

/// The vendor syndrome the model writes (model choice; rdma-core only copies it into
/// `vendor_err`): 0xf9 for flushes, as seen in flush CQE dumps, 0x88 otherwise.
const fn vendor_syndrome(s: WcStatus) -> u8 {
    match s {
        WcStatus::WrFlushErr => 0xf9,
        _ => 0x88,
    }
}

/// The compression an mlx5 CQ of `attrs` gets, after the checks `mlx5dv_create_cq` and the
/// kernel make (rdma-core `providers/mlx5/verbs.c` `create_cq`, `get_cqe_size`; kernel
/// `mlx5_ib` `mini_cqe_res_format_to_hw`): a CQE size of 64 or 128, padding only with
/// 128-byte CQEs, one responder mini-CQE format (HASH, CSUM or CSUM_STRIDX), each refused
/// with `EINVAL` otherwise. The device compresses in the basic layout (what the kernel sets
/// for a `mlx5dv_create_cq` CQ) whenever completions allow it (constant back-pressure).
pub(crate) fn check_cq_attrs(attrs: &Mlx5CqAttrs) -> Result<Option<Compression>, DeviceError> {
    if attrs.cqe_size != 64 && attrs.cqe_size != 128 {
        return Err(DeviceError::BadSize {
            what: "cqe_size",
            value: attrs.cqe_size.into(),
            why: "mlx5 CQEs are 64 or 128 bytes (EINVAL)",
        });
    }
    if attrs.pad && attrs.cqe_size != 128 {
        return Err(DeviceError::BadSize {
            what: "cqe_size",
            value: attrs.cqe_size.into(),
            why: "CQE padding needs 128-byte CQEs (EINVAL)",
        });
    }
    if attrs.comp_res_format == 0 {
        return Ok(None);
    }
    match MiniFormat::from_dv_res_format(attrs.comp_res_format) {
        Some(format @ (MiniFormat::Hash | MiniFormat::Csum | MiniFormat::CsumStridx)) => {
            Ok(Some(Compression { layout: CompLayout::Basic, format, policy: Policy::Always }))
        }
        _ => Err(DeviceError::BadSize {
            what: "cqe_comp_res_format",
            value: attrs.comp_res_format.into(),
            why: "one responder format: HASH (1), CSUM (2) or CSUM_STRIDX (4) (EINVAL)",
        }),
    }
}

/// A signaled send's CQE. `byte_cnt` is the bytes read for READ (what rdma-core reports),
/// 8 for an atomic;
/// 0 for the rest, whose `byte_len` verbs leave undefined. A bind's CQE names the UMR
/// opcode, which tells the poller nothing: its `IBV_WC_BIND_MW` comes from what the poster
/// recorded (`wr_data`).
pub(crate) fn req_ok(qpn: u32, wqe: u16, op: SendOp, len: u64) -> Entry {
    let bytes = if op.writes_local() { len as u32 } else { 0 };
    build::req(qpn, wqe, wqe_op(op), bytes)
}

/// A READ's (or an atomic's: `op`) CQE on a QP whose responses the device scatters to the CQE (requester
/// scatter-to-CQE): `data`, the whole response (1 to 32 bytes, or to 64 with a send CQ of
/// 128-byte CQEs), goes inside the CQE and not to the READ's buffers; `byte_cnt` is its
/// length. A send CQ of 128-byte CQEs has `cs_req` = DATA64 and gets format 2 (the data at
/// the start of the CQE's first half) for every size up to 64, 32 bytes or less included;
/// one of 64-byte CQEs has DATA32, format 1 (the data at the start of the cqe64). That a
/// DATA64 QP's short responses also take format 2 is inferred: the kernel sets one mode
/// per QP from the send CQ's CQE size, and rdma-core's poll copies either format.
pub(crate) fn req_read_inline(qpn: u32, wqe: u16, op: SendOp, data: &[u8], cqe_size: u32) -> Entry {
    use dvcq_uapi::mlx5::cqe::op_own;
    use dvcq_uapi::mlx5::opcode::cqe_format;
    let e = build::req(qpn, wqe, wqe_op(op), data.len() as u32);
    if cqe_size != 128 {
        return e.inline(data);
    }
    let mut e = e;
    let n = data.len().min(64);
    e.first_half[..n].copy_from_slice(&data[..n]);
    e.cqe.op_own = (e.cqe.op_own & !op_own::FORMAT_MASK) | (cqe_format::INLINE_SCATTER_64 << op_own::FORMAT_SHIFT);
    e
}

/// A send's error (or flush) CQE.
pub(crate) fn req_err(qpn: u32, wqe: u16, op: SendOp, status: WcStatus) -> Entry {
    build::err(ErrSpec {
        requester: true,
        qpn,
        wqe_counter: wqe,
        syndrome: syndrome_of(status),
        vendor_err_synd: vendor_syndrome(status),
        wqe_opcode: wqe_op(op),
        ..ErrSpec::default()
    })
}

/// A receive's error (or flush) CQE; `srqn` for a receive taken from an SRQ.
pub(crate) fn resp_err(qpn: u32, wqe: u16, status: WcStatus, srqn: Option<u32>) -> Entry {
    build::err(ErrSpec {
        requester: false,
        qpn,
        wqe_counter: wqe,
        syndrome: syndrome_of(status),
        vendor_err_synd: vendor_syndrome(status),
        srqn_uidx: srqn.unwrap_or(0),
        ..ErrSpec::default()
    })
}

/// What arrived at a receive.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival {
    /// The operation that consumed it (SEND, SEND_WITH_IMM or WRITE_WITH_IMM).
    pub(crate) op: SendOp,
    /// `byte_len`: bytes placed (UD: with the 40-byte GRH).
    pub(crate) byte_len: u32,
    pub(crate) src_qp: u32,
    pub(crate) ud: bool,
    pub(crate) solicited: bool,
}

/// A successful receive's CQE: opcode by operation, the immediate in `imm_inval_pkey`,
/// the source QP (and for UD the GRH-in-buffer flag, RoCE always carries one), the SRQ
/// number for an SRQ receive.
pub(crate) fn resp_ok(qpn: u32, wqe: u16, a: &Arrival, srqn: Option<u32>) -> Entry {
    let (opcode, imm) = match a.op {
        SendOp::SendWithImm(i) => (cqe_opcode::RESP_SEND_IMM, i),
        SendOp::WriteWithImm(_, i) => (cqe_opcode::RESP_WR_IMM, i),
        // The invalidated rkey in the immediate's place (`handle_responder` reports it as
        // `invalidated_rkey`, byte-swapped to host order).
        SendOp::SendWithInv(rkey) => (cqe_opcode::RESP_SEND_INV, rkey),
        _ => (cqe_opcode::RESP_SEND, 0),
    };
    let addr = RecvAddr { src_qp: a.src_qp, grh: a.ud, ..RecvAddr::default() };
    let e = build::resp(opcode, qpn, wqe, a.byte_len, imm).recv_addr(addr).solicited(a.solicited);
    match srqn {
        Some(s) => e.srqn_uidx(s),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A READ's WQE as rdma-core writes it: the control segment (index and opcode, QPN and
    /// size in 16-byte units, CQ_UPDATE), the remote address, a data segment per non-empty
    /// entry; one starting in the SQ's last block wraps to its start.
    #[test]
    fn a_send_wqe_has_rdma_cores_segments_and_wraps_the_queue() {
        use crate::verbs::RemoteAddr;
        let sg = [
            Sge { addr: 0x1000, len: 8, lkey: 0x205 },
            Sge { addr: 0x2000, len: 0, lkey: 0x205 },
            Sge { addr: 0x3000, len: 4, lkey: 0x305 },
            Sge { addr: 0x4000, len: 2, lkey: 0x305 },
        ];
        let w = SendWqe {
            qpn: 0x108,
            wqe: 0x1237,
            op: SendOp::Read(RemoteAddr { addr: 0xaabb_ccdd_0011_2233, rkey: 0x4455 }),
            sg: &sg,
            inline_len: None,
            signaled: true,
            solicited: false,
        };
        let segs = w.segments();
        assert_eq!(segs.len(), 5);
        assert_eq!(&segs[0][..8], &[0, 0x12, 0x37, wqe_opcode::RDMA_READ, 0, 0x01, 0x08, 5]);
        assert_eq!(segs[0][11], 0x08);
        assert_eq!(&segs[1][..12], &[0xaa, 0xbb, 0xcc, 0xdd, 0, 0x11, 0x22, 0x33, 0, 0, 0x44, 0x55]);
        assert_eq!(&segs[2][..8], &[0, 0, 0, 8, 0, 0, 2, 5]);
        assert_eq!(&segs[4][8..], &0x4000u64.to_be_bytes());
        // An SQ of 8 blocks: WQE 0x1237 fills block 7 with its first four segments, and
        // its last one goes to the start of block 0.
        let buf = dvcq_provider::DmaBuffer::new(8 * 64).unwrap();
        w.write(&buf).unwrap();
        let mut b = [0u8; 16];
        for (i, off) in [(0, 7 * 64), (3, 7 * 64 + 48), (4, 0)] {
            buf.read_bytes(off, &mut b).unwrap();
            assert_eq!(b, segs[i], "segment {i}");
        }
    }

    /// An atomic WQE as rdma-core writes it: ctrl, remote address, the atomic segment
    /// {swap_add, compare}, one data segment of 8 bytes; one basic block, opcode
    /// ATOMIC_CS/FA. Its data segment is the fourth, where the poll's copy of a response in
    /// the CQE looks for it.
    #[test]
    fn an_atomic_wqe_has_its_segment_and_an_eight_byte_data_segment() {
        let r = crate::verbs::RemoteAddr { addr: 0x1000, rkey: 0x44 };
        let s = Sge { addr: 0x2000, len: 64, lkey: 0x55 };
        let op = SendOp::CompareSwap { remote: r, compare: 0x0102, swap: 0x0304 };
        assert_eq!(wqebbs(QpType::Rc, op, &[s], None), 1);
        let w = SendWqe { qpn: 0x12, wqe: 1, op, sg: &[s], inline_len: None, signaled: true, solicited: false };
        let segs = w.segments();
        assert_eq!(segs.len(), 4);
        assert_eq!((segs[0][3], segs[0][7] & 0x3f), (wqe_opcode::ATOMIC_CS, 4));
        assert_eq!((&segs[2][..8], &segs[2][8..]), (&0x0304u64.to_be_bytes()[..], &0x0102u64.to_be_bytes()[..]));
        let d = dvcq_mlx5_dv::model::wqe::DataSeg { addr: 0x2000, len: 8, lkey: 0x55 };
        assert_eq!(segs[3], d.bytes());
        assert_eq!(wqe_op(SendOp::FetchAdd { remote: r, add: 1 }), wqe_opcode::ATOMIC_FA);
        assert_eq!(req_ok(0x12, 1, op, 8).cqe.byte_cnt.get(), 8);
    }

    /// A READ response in the CQE: format 2 in a 128-byte CQE (the data in its first
    /// half), format 1 in a 64-byte one (the data in the cqe64); `byte_cnt` its length.
    #[test]
    fn a_read_response_in_the_cqe_takes_the_format_of_the_cqe_size() {
        use dvcq_uapi::mlx5::cqe::op_own;
        let data = [7u8; 20];
        let read = SendOp::Read(crate::verbs::RemoteAddr { addr: 0, rkey: 1 });
        let e = req_read_inline(0x108, 3, read, &data, 128);
        assert_eq!((op_own::format(e.cqe.op_own), e.cqe.byte_cnt.get()), (2, 20));
        assert_eq!(&e.first_half[..20], &data);
        let e = req_read_inline(0x108, 3, read, &data, 64);
        assert_eq!((op_own::format(e.cqe.op_own), e.cqe.byte_cnt.get()), (1, 20));
        assert_eq!(&e.cqe.inline32()[..20], &data);
    }

    /// rdma-core's numbers for the QPs dvcq's workloads create: an RC QP of 64 sends of one
    /// entry has 256-byte WQEs (the bind-MW overhead), 256 basic blocks, 60 inline bytes;
    /// a UD QP 128-byte WQEs; receive queues of 16-byte WQEs, at least one basic block.
    #[test]
    fn queues_are_sized_as_rdma_core_sizes_them() {
        let caps = QpCaps::default();
        let (l, g) = layout(QpType::Rc, &caps, false).unwrap();
        assert_eq!((l.sq_wqe_cnt, l.max_post_send, l.max_inline), (256, 64, 60));
        assert_eq!((l.rq_wqe_cnt, l.max_post_recv, l.max_recv_sge), (64, 64, 1));
        assert_eq!((g.max_send_wr, g.max_recv_wr, g.max_inline_data), (64, 64, 60));
        let (l, _) = layout(QpType::Ud, &caps, false).unwrap();
        assert_eq!((l.sq_wqe_cnt, l.max_post_send, l.max_inline), (128, 64, 60));
        let one = QpCaps { max_send_wr: 1, max_recv_wr: 1, ..caps };
        let (l, _) = layout(QpType::Rc, &one, false).unwrap();
        assert_eq!((l.sq_wqe_cnt, l.max_post_send, l.rq_wqe_cnt, l.max_post_recv), (4, 1, 4, 4));
        // 21 entries do not fit beside the RC overhead; 317 inline bytes neither.
        assert!(layout(QpType::Rc, &QpCaps { max_send_sge: 21, ..caps }, false).is_err());
        assert!(layout(QpType::Rc, &QpCaps { max_inline_data: MAX_RC_INLINE + 1, ..caps }, false).is_err());
        // No data segment and no inline data: a WQE of the overhead alone, holding no
        // inline byte.
        let (l, g) = layout(QpType::Rc, &QpCaps { max_send_sge: 0, max_inline_data: 0, ..caps }, false).unwrap();
        assert_eq!((l.max_inline, g.max_inline_data, l.sq_wqe_cnt), (0, 0, 256));
        // Sizes near u32::MAX are refused, not wrapped into a small WQE (EINVAL, as
        // model-e810 refuses them).
        for ty in [QpType::Rc, QpType::Ud, QpType::XrcSend] {
            for big in [u32::MAX, u32::MAX - 3, u32::MAX - 15, 1 << 31] {
                let e = layout(ty, &QpCaps { max_inline_data: big, ..caps }, false).unwrap_err();
                assert!(e.to_string().contains("max_inline_data"), "{ty:?} {big}: {e}");
                let e = layout(ty, &QpCaps { max_recv_sge: big, ..caps }, false).unwrap_err();
                assert!(e.to_string().contains("max_recv_sge"), "{ty:?} {big}: {e}");
            }
        }
        assert_eq!(
            layout(QpType::Rc, &QpCaps { max_inline_data: MAX_RC_INLINE, ..caps }, false).unwrap().0.max_inline,
            316
        );
        assert_eq!(srq_layout(16, 1), (32, 1));
        assert_eq!(srq_layout(1, 3), (2, 3));
    }

    /// mlx5dv_create_cq's attributes as rdma-core and the kernel take them: 64 or 128-byte
    /// CQEs, padding with 128 only, one responder format; anything else is EINVAL.
    #[test]
    fn cq_attributes_are_checked_as_mlx5_checks_them() {
        let a = |cqe_size, comp_res_format, pad| Mlx5CqAttrs { cqe_size, comp_res_format, pad };
        assert_eq!(check_cq_attrs(&a(64, 0, false)), Ok(None));
        assert_eq!(check_cq_attrs(&a(128, 0, true)), Ok(None));
        for (bit, format) in [(1, MiniFormat::Hash), (2, MiniFormat::Csum), (4, MiniFormat::CsumStridx)] {
            let c = check_cq_attrs(&a(64, bit, false)).unwrap().unwrap();
            assert_eq!((c.format, c.layout, c.policy), (format, CompLayout::Basic, Policy::Always));
        }
        for bad in
            [a(100, 0, false), a(32, 0, false), a(256, 0, false), a(64, 0, true), a(64, 3, false), a(64, 8, false)]
        {
            let e = check_cq_attrs(&bad).unwrap_err();
            assert!(e.to_string().contains("(EINVAL)"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_wqe_takes_the_blocks_its_segments_fill() {
        let s = Sge { addr: 0, len: 8, lkey: 1 };
        let r = crate::verbs::RemoteAddr { addr: 0, rkey: 1 };
        assert_eq!(wqebbs(QpType::Rc, SendOp::Send, &[s], None), 1);
        assert_eq!(wqebbs(QpType::Rc, SendOp::Write(r), &[s; 3], None), 2);
        assert_eq!(wqebbs(QpType::Ud, SendOp::Send, &[s], None), 2);
        assert_eq!(wqebbs(QpType::Rc, SendOp::Send, &[], Some(44)), 1);
        assert_eq!(wqebbs(QpType::Rc, SendOp::Send, &[], Some(45)), 2);
        assert_eq!(wqebbs(QpType::Rc, SendOp::Send, &[Sge { len: 0, ..s }], None), 1);
        assert_eq!(wqebbs(QpType::Rc, SendOp::SendWithInv(7), &[s], None), 1);
        // ctrl 16 + XRC 16 + raddr 16 + 2 data 32: 80 bytes, two blocks (RC: 64, one).
        assert_eq!(wqebbs(QpType::XrcSend, SendOp::Write(r), &[s; 2], None), 2);
        assert_eq!(wqebbs(QpType::Rc, SendOp::Write(r), &[s; 2], None), 1);
        assert_eq!(wqebbs(QpType::XrcSend, SendOp::Send, &[s], None), 1);
        let b = crate::verbs::MwBind {
            mw_rkey: 1,
            new_rkey: 2,
            mr_lkey: 3,
            addr: 0,
            len: 8,
            access: crate::verbs::Access::REMOTE_WRITE,
        };
        assert_eq!(wqebbs(QpType::Rc, SendOp::BindMw(b), &[], None), 3);
        assert_eq!(
            (wqe_op(SendOp::BindMw(b)), wqe_op(SendOp::SendWithInv(7))),
            (wqe_opcode::UMR, wqe_opcode::SEND_INVAL)
        );
    }
}
