//! The device's engine: creating resources, recording posts as the provider records them,
//! executing work against memory, and writing the CQEs each vendor writes (success,
//! error, flush).

use super::cq::{CqHw, CqState};
use super::irdma::{self as ird, UdSource};
use super::memory::{LocalFault, MrTable};
use super::mlx5::{self as mx, Arrival};
use super::qp::{Payload, PostError, PostErrorKind, Qp, QpHw, QpState, Recv, Send, Srq, EINVAL, ENOMEM};
use super::{endpoint_of, DeviceAttrs, DeviceError, ModelVendor, DEFAULT_QKEY};
use crate::verbs::{Endpoint, MrSlice, QpCaps, QpType, RecvWr, SendOp, SendWr, UdDest, UD_GRH_BYTES};
use dvcq_e810_dv::model::{IrdmaModel, ModelConfig as IrdmaConfig, ModelCqe};
use dvcq_e810_dv::ring::{ring_slots, Rounding};
use dvcq_e810_dv::{Compat, QpConfig as IrdmaQpConfig, QpRegistry, QpType as IrdmaQpType, RegistryError, Transport};
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig as Mlx5Config};
use dvcq_mlx5_dv::{CqConfig, QpConfig as Mlx5QpConfig, Registry};
use dvcq_provider::{Completion, WcStatus};
use dvcq_uapi::irdma::HwRev;

/// Model choices for the numbers a device hands out.
const MLX5_FIRST_QPN: u32 = 0x108;
const MLX5_FIRST_CQN: u32 = 0x406;
const MLX5_FIRST_SRQN: u32 = 0x20;
const IRDMA_FIRST_QPN: u32 = 3;
const IRDMA_FIRST_CQ_ID: u32 = 3;
/// irdma completion contexts: QP structures 1 KiB apart (the provider `memalign`s them to
/// 1024).
const IRDMA_CTX_BASE: u64 = 0x7f3a_5c00_0000;
const IRDMA_CTX_STRIDE: u64 = 0x400;

/// What executing one send did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Done: the bytes it moved.
    Done(u64),
    /// The peer has no receive for it yet (RNR): retry when one is posted.
    Wait,
    /// Failed with this status at the requester.
    Fail(WcStatus),
}

/// A send as the engine executes it, borrowed from the post or from the waiting queue.
#[derive(Debug, Clone, Copy)]
struct Work<'a> {
    op: SendOp,
    data: Data<'a>,
    signaled: bool,
    solicited: bool,
    ud: Option<UdDest>,
    wqe: u16,
    len: u64,
}

#[derive(Debug, Clone, Copy)]
enum Data<'a> {
    Gather(&'a [MrSlice]),
    Inline(&'a [u8]),
}

impl Send {
    fn work(&self) -> Work<'_> {
        let data = match &self.payload {
            Payload::Gather(v) => Data::Gather(v),
            Payload::Inline(b) => Data::Inline(b),
        };
        Work {
            op: self.op,
            data,
            signaled: self.signaled,
            solicited: self.solicited,
            ud: self.ud,
            wqe: self.wqe,
            len: self.len,
        }
    }
}

/// irdma bookkeeping of what the flushes must cover (GEN2 writes one flush CQE per queue,
/// and the provider completes every WR it still holds from it).
#[derive(Debug, Clone, Copy, Default)]
struct IrdmaFlush {
    /// Send WRs posted after the last one a CQE completed.
    sq_uncovered: u32,
    /// Receives posted and not completed by a CQE.
    rq_uncovered: u32,
    /// A flush CQE was written for the queue (posts to an errored QP then need none until
    /// the provider drained it).
    sq_flushed: bool,
    rq_flushed: bool,
}

/// Everything a device holds.
#[derive(Debug)]
pub(crate) struct Fabric {
    vendor: ModelVendor,
    attrs: DeviceAttrs,
    gid: [u8; 16],
    pub(crate) mrs: MrTable,
    pub(crate) cqs: Vec<CqState>,
    pub(crate) qps: Vec<Qp>,
    pub(crate) srqs: Vec<Srq>,
    /// irdma flush bookkeeping, by QP.
    flush: Vec<IrdmaFlush>,
    /// Responders that found a fault: put in error once the requester's completion is
    /// written (status of the receive that failed).
    deferred: Vec<(usize, WcStatus)>,
    /// Scratch: a message's bytes, and a UD receive's GRH plus bytes.
    data: Vec<u8>,
    ud_buf: Vec<u8>,
    /// Emptied scatter lists, reused by later posts.
    sg_pool: Vec<Vec<MrSlice>>,
}

fn post_err(index: usize, kind: PostErrorKind, errno: i32, what: &'static str) -> PostError {
    PostError { index, kind, errno, what }
}

fn is_ipv4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

// The GRH slot a UD receive starts with is the one every RDMA device uses.
const _: () = assert!(UD_GRH_BYTES == 40);

/// The 40 bytes a UD receive starts with. RoCEv2 over IPv4 (both GIDs IPv4-mapped): 20
/// undefined bytes (zero here) and the IPv4 header; otherwise an IB GRH
/// (`struct ibv_grh`). Header values beyond the addresses and lengths are model choices.
fn grh(src: &[u8; 16], dst: &[u8; 16], payload: usize) -> [u8; 40] {
    const BTH: usize = 12;
    const DETH: usize = 8;
    const ICRC: usize = 4;
    let mut g = [0u8; 40];
    if is_ipv4_mapped(src) && is_ipv4_mapped(dst) {
        let total = (20 + 8 + BTH + DETH + payload + ICRC) as u16;
        let h = &mut g[20..];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[6] = 0x40; // don't fragment
        h[8] = 64; // TTL
        h[9] = 17; // UDP
        h[12..16].copy_from_slice(&src[12..]);
        h[16..20].copy_from_slice(&dst[12..]);
        let sum: u32 = h.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        let folded = (sum & 0xffff) + (sum >> 16);
        let csum = !(((folded & 0xffff) + (folded >> 16)) as u16);
        h[10..12].copy_from_slice(&csum.to_be_bytes());
    } else {
        g[..4].copy_from_slice(&(6u32 << 28).to_be_bytes());
        g[4..6].copy_from_slice(&((BTH + DETH + payload + ICRC) as u16).to_be_bytes());
        g[6] = 0x1b; // next header: BTH
        g[7] = 64; // hop limit
        g[8..24].copy_from_slice(src);
        g[24..40].copy_from_slice(dst);
    }
    g
}

impl Fabric {
    pub(crate) fn new(vendor: ModelVendor, attrs: DeviceAttrs, gid: [u8; 16]) -> Self {
        Fabric {
            vendor,
            attrs,
            gid,
            mrs: MrTable::default(),
            cqs: Vec::new(),
            qps: Vec::new(),
            srqs: Vec::new(),
            flush: Vec::new(),
            deferred: Vec::new(),
            data: Vec::new(),
            ud_buf: Vec::new(),
            sg_pool: Vec::new(),
        }
    }

    fn too_large(&self, what: &'static str, value: u32, max: u32) -> DeviceError {
        DeviceError::TooLarge { what, value: value.into(), max: max.into(), device: self.vendor.device_name() }
    }

    // ---- creation -------------------------------------------------------------------

    pub(crate) fn create_cq(&mut self, cqe: u32) -> Result<usize, DeviceError> {
        if cqe == 0 || cqe > self.attrs.max_cqe {
            return Err(DeviceError::TooLarge {
                what: "cqe",
                value: cqe.into(),
                max: self.attrs.max_cqe.into(),
                device: self.vendor.device_name(),
            });
        }
        let n = self.cqs.len() as u32;
        let state = match self.vendor {
            ModelVendor::Mlx5 => {
                // mlx5_create_cq: ncqe = align_queue_size(cqe + 1); ibv_cq.cqe = ncqe - 1.
                let entries = (cqe + 1).next_power_of_two();
                let mut mc = Mlx5Config::new(entries);
                mc.cqn = MLX5_FIRST_CQN + n;
                let model = Mlx5Model::new(mc)?;
                let poller = Box::new(model.poller::<64>(Registry::new(), CqConfig::default())?);
                CqState::new(CqHw::Mlx5 { model, poller }, entries - 1)
            }
            ModelVendor::Irdma => {
                let entries = ring_slots(cqe, HwRev::Gen2, 32, Rounding::Even).ok_or(DeviceError::BadSize {
                    what: "cqe",
                    value: cqe.into(),
                    why: "the ring size overflows",
                })?;
                let cfg = IrdmaConfig { entries, hw_rev: HwRev::Gen2, cqe_size: 32, cq_id: IRDMA_FIRST_CQ_ID + n };
                let model = IrdmaModel::new(cfg)?;
                let poller = Box::new(model.poller(QpRegistry::new(HwRev::Gen2), Compat::Current)?);
                CqState::new(CqHw::Irdma { model, poller }, cqe)
            }
        };
        self.cqs.push(state);
        Ok(self.cqs.len() - 1)
    }

    pub(crate) fn create_srq(&mut self, max_wr: u32, max_sge: u32) -> Result<usize, DeviceError> {
        if self.attrs.max_srq == 0 {
            return Err(DeviceError::Unsupported { what: "srq", device: self.vendor.device_name() });
        }
        if max_wr == 0 || max_wr > self.attrs.max_srq_wr {
            return Err(self.too_large("srq max_wr", max_wr, self.attrs.max_srq_wr));
        }
        if max_sge > self.attrs.max_srq_sge {
            return Err(self.too_large("srq max_sge", max_sge, self.attrs.max_srq_sge));
        }
        let (max, gs) = mx::srq_layout(max_wr, max_sge);
        let srqn = MLX5_FIRST_SRQN + self.srqs.len() as u32;
        self.srqs.push(Srq::new(srqn, max, gs));
        Ok(self.srqs.len() - 1)
    }

    /// Makes SRQ `s` known to CQ `cq`'s registry, with the receives already posted.
    fn srq_into_registry(&mut self, s: usize, cq: usize) -> Result<(), DeviceError> {
        let srq = &mut self.srqs[s];
        if srq.cqs.contains(&cq) {
            return Ok(());
        }
        let CqHw::Mlx5 { poller, .. } = &mut self.cqs[cq].hw else { return Ok(()) };
        let reg = poller.registry_mut();
        let r = reg.add_srq(srq.srqn, srq.next.len() as u32)?;
        for p in &srq.posted {
            r.post(p.wqe, p.wr_id);
        }
        srq.cqs.push(cq);
        Ok(())
    }

    pub(crate) fn create_qp(
        &mut self,
        qp_type: QpType,
        send_cq: usize,
        recv_cq: usize,
        caps: QpCaps,
        srq: Option<usize>,
    ) -> Result<usize, DeviceError> {
        if srq.is_some() && self.attrs.max_srq == 0 {
            return Err(DeviceError::Unsupported { what: "srq", device: self.vendor.device_name() });
        }
        for (what, v) in [("max_send_wr", caps.max_send_wr), ("max_recv_wr", caps.max_recv_wr)] {
            if v > self.attrs.max_qp_wr {
                return Err(self.too_large(what, v, self.attrs.max_qp_wr));
            }
        }
        for (what, v) in [("max_send_sge", caps.max_send_sge), ("max_recv_sge", caps.max_recv_sge)] {
            if v > self.attrs.max_sge {
                return Err(self.too_large(what, v, self.attrs.max_sge));
            }
        }
        let index = self.qps.len() as u32;
        let (qpn, hw, mut granted) = match self.vendor {
            ModelVendor::Mlx5 => {
                let qpn = MLX5_FIRST_QPN + index;
                let (l, granted) = mx::layout(qp_type, &caps, srq.is_some())?;
                let srqn = srq.map(|s| self.srqs[s].srqn);
                if let Some(s) = srq {
                    self.srq_into_registry(s, recv_cq)?;
                }
                let cfg = Mlx5QpConfig {
                    srqn,
                    ud: qp_type == QpType::Ud,
                    ..Mlx5QpConfig::rc(qpn, l.sq_wqe_cnt, l.rq_wqe_cnt)
                };
                if send_cq != recv_cq {
                    // The send CQ sees only requester CQEs of the QP.
                    self.mlx5_registry(send_cq).add_qp(Mlx5QpConfig { srqn: None, ..cfg })?;
                }
                self.mlx5_registry(recv_cq).add_qp(cfg)?;
                (qpn, QpHw::Mlx5(l), granted)
            }
            ModelVendor::Irdma => {
                let qpn = IRDMA_FIRST_QPN + index;
                let (mut l, granted) = ird::layout(&caps)?;
                l.ctx = IRDMA_CTX_BASE + u64::from(index + 1) * IRDMA_CTX_STRIDE;
                let cfg = IrdmaQpConfig {
                    qp_num: qpn,
                    qp_type: if qp_type == QpType::Ud { IrdmaQpType::Ud } else { IrdmaQpType::Rc },
                    transport: Transport::Roce,
                    sq_quanta: l.sq_quanta,
                    rq_wqes: l.rq_wqes,
                    rq_shift: l.rq_shift,
                    conn_wqes: 0,
                };
                l.send_id = self.irdma_registry(send_cq).register(l.ctx, cfg)?;
                l.recv_id =
                    if send_cq == recv_cq { l.send_id } else { self.irdma_registry(recv_cq).register(l.ctx, cfg)? };
                (qpn, QpHw::Irdma(l), granted)
            }
        };
        if srq.is_some() {
            granted.max_recv_wr = 0;
            granted.max_recv_sge = 0;
        }
        self.qps.push(Qp {
            qpn,
            qp_type,
            state: QpState::Init,
            send_cq,
            recv_cq,
            srq,
            caps: granted,
            qkey: DEFAULT_QKEY,
            peer: None,
            endpoint: endpoint_of(qpn, self.gid),
            hw,
            rq: Default::default(),
            sq: Default::default(),
        });
        self.flush.push(IrdmaFlush::default());
        Ok(self.qps.len() - 1)
    }

    /// CQ `cq`'s mlx5 registry (the device creates mlx5 CQs only on `model-mlx5`).
    fn mlx5_registry(&mut self, cq: usize) -> &mut Registry {
        match &mut self.cqs[cq].hw {
            CqHw::Mlx5 { poller, .. } => poller.registry_mut(),
            CqHw::Irdma { .. } => unreachable!("an mlx5 device has mlx5 CQs only"),
        }
    }

    fn irdma_registry(&mut self, cq: usize) -> &mut QpRegistry {
        match &mut self.cqs[cq].hw {
            CqHw::Irdma { poller, .. } => poller.qps_mut(),
            CqHw::Mlx5 { .. } => unreachable!("an irdma device has irdma CQs only"),
        }
    }

    pub(crate) fn connect(&mut self, q: usize, peer: &Endpoint) -> Result<(), DeviceError> {
        let qp = &self.qps[q];
        if qp.state != QpState::Init {
            return Err(DeviceError::BadState { qpn: qp.qpn, state: qp.state, what: "connect needs a QP in INIT" });
        }
        if qp.qp_type == QpType::Rc {
            let p = self.find_qp(peer.qpn, &peer.gid).ok_or(DeviceError::NoSuchQp { qpn: peer.qpn, gid: peer.gid })?;
            if self.qps[p].qp_type != QpType::Rc {
                return Err(DeviceError::TypeMismatch {
                    qpn: qp.qpn,
                    ours: qp.qp_type.name(),
                    peer: peer.qpn,
                    theirs: self.qps[p].qp_type.name(),
                });
            }
            self.qps[q].peer = Some(p);
        }
        self.qps[q].state = QpState::Rts;
        self.progress();
        Ok(())
    }

    fn find_qp(&self, qpn: u32, gid: &[u8; 16]) -> Option<usize> {
        if *gid != self.gid {
            return None;
        }
        self.qps.iter().position(|x| x.qpn == qpn)
    }

    // ---- posting ------------------------------------------------------------------

    fn take_sg(&mut self, from: &[MrSlice]) -> Vec<MrSlice> {
        let mut v = self.sg_pool.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(from);
        v
    }

    fn give_sg(&mut self, v: Vec<MrSlice>) {
        if self.sg_pool.len() < 256 {
            self.sg_pool.push(v);
        }
    }

    /// The post-side checks of one send (`ibv_post_send`'s refusals).
    fn check_send(&self, q: usize, wr: &SendWr<'_>) -> Result<(), PostErrorKind> {
        let qp = &self.qps[q];
        if qp.state == QpState::Init {
            return Err(PostErrorKind::BadState(qp.state));
        }
        if qp.qp_type == QpType::Ud && (wr.ud.is_none() || wr.op.remote().is_some()) {
            return Err(PostErrorKind::BadOpcode);
        }
        let (max_sge, max_inline) = match &qp.hw {
            QpHw::Mlx5(l) => (l.max_send_sge, l.max_inline),
            QpHw::Irdma(l) => (l.max_send_sge, l.max_inline),
        };
        if wr.sg_list.len() > max_sge as usize {
            return Err(PostErrorKind::TooManySge { num_sge: wr.sg_list.len(), max: max_sge });
        }
        if wr.inline && wr.len() > u64::from(max_inline) {
            return Err(PostErrorKind::InlineTooLong { len: wr.len(), max: max_inline });
        }
        Ok(())
    }

    fn send_errno(&self, kind: PostErrorKind) -> i32 {
        match (self.vendor, kind) {
            (_, PostErrorKind::QueueFull) => ENOMEM,
            (_, PostErrorKind::BadOpcode) => EINVAL,
            // mlx5 refuses oversized lists and inline data, and sends before RTS (through
            // `qp_state_max_gs`), with ENOMEM.
            (ModelVendor::Mlx5, _) => ENOMEM,
            (ModelVendor::Irdma, _) => EINVAL,
        }
    }

    /// Records a send in the send CQ's registry as the provider does; the WQE index its CQE
    /// will name.
    fn record_send(&mut self, q: usize, wr: &SendWr<'_>) -> Result<u16, PostErrorKind> {
        let (qpn, qp_type, send_cq, hw) = {
            let qp = &self.qps[q];
            (qp.qpn, qp.qp_type, qp.send_cq, qp.hw)
        };
        let inline_len = wr.inline.then(|| wr.len());
        match hw {
            QpHw::Mlx5(l) => {
                let sq = &mut self.mlx5_registry(send_cq).qp_mut(qpn).ok_or(PostErrorKind::QueueFull)?.sq;
                if sq.outstanding() >= l.max_post_send {
                    return Err(PostErrorKind::QueueFull);
                }
                Ok(sq.post(wr.wr_id, mx::wqebbs(qp_type, wr.op, wr.sg_list, inline_len)))
            }
            QpHw::Irdma(l) => {
                let quanta = ird::quanta(wr.op, wr.sg_list.len(), inline_len);
                let op = ird::sq_opcode(wr.op, wr.solicited);
                let reg = self.irdma_registry(send_cq);
                let idx = reg.post_send(l.send_id, wr.wr_id, wr.len() as u32, quanta, op).map_err(|e| match e {
                    RegistryError::Full => PostErrorKind::QueueFull,
                    _ => PostErrorKind::BadOpcode,
                })?;
                self.flush[q].sq_uncovered += 1;
                Ok(idx)
            }
        }
    }

    pub(crate) fn post_send(&mut self, q: usize, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        let mut result = Ok(());
        for (i, wr) in wrs.iter().enumerate() {
            if let Err(kind) = self.check_send(q, wr) {
                result = Err(post_err(i, kind, self.send_errno(kind), "send"));
                break;
            }
            let used_before = self.irdma_sq_used(q);
            let wqe = match self.record_send(q, wr) {
                Ok(w) => w,
                Err(kind) => {
                    result = Err(post_err(i, kind, self.send_errno(kind), "send"));
                    break;
                }
            };
            if self.qps[q].state == QpState::Error {
                self.flush_posted_send(q, wqe, wr.op, used_before);
                continue;
            }
            let mut inline = None;
            if wr.inline {
                let mut bytes = Vec::with_capacity(wr.len() as usize);
                if self.mrs.gather_by_addr(wr.sg_list, &mut bytes) {
                    inline = Some(bytes);
                }
            }
            let data = match &inline {
                Some(b) => Data::Inline(b),
                None => Data::Gather(wr.sg_list),
            };
            let work =
                Work { op: wr.op, data, signaled: wr.signaled, solicited: wr.solicited, ud: wr.ud, wqe, len: wr.len() };
            let step = if self.qps[q].sq.is_empty() { self.execute(q, &work) } else { Step::Wait };
            match step {
                Step::Wait => {
                    let payload = match inline {
                        Some(b) => Payload::Inline(b),
                        None => Payload::Gather(self.take_sg(wr.sg_list)),
                    };
                    let s = Send {
                        op: wr.op,
                        payload,
                        signaled: wr.signaled,
                        solicited: wr.solicited,
                        ud: wr.ud,
                        wqe,
                        len: wr.len(),
                    };
                    self.qps[q].sq.push_back(s);
                }
                Step::Done(n) => self.complete_send(q, &work, n),
                Step::Fail(status) => self.fail_send(q, &work, status),
            }
            self.apply_deferred();
        }
        self.progress();
        result
    }

    fn recv_errno(&self, kind: PostErrorKind) -> i32 {
        match kind {
            PostErrorKind::QueueFull => ENOMEM,
            _ => EINVAL,
        }
    }

    pub(crate) fn post_recv(&mut self, q: usize, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let mut result = Ok(());
        for (i, wr) in wrs.iter().enumerate() {
            let (qpn, recv_cq, hw, state, srq) = {
                let qp = &self.qps[q];
                (qp.qpn, qp.recv_cq, qp.hw, qp.state, qp.srq)
            };
            let fail = |kind| post_err(i, kind, self.recv_errno(kind), "recv");
            if srq.is_some() {
                result = Err(fail(PostErrorKind::QueueFull));
                break;
            }
            let used_before = self.irdma_rq_used(q);
            let recorded = match hw {
                QpHw::Mlx5(l) => {
                    if wr.sg_list.len() > l.max_recv_sge as usize {
                        Err(PostErrorKind::TooManySge { num_sge: wr.sg_list.len(), max: l.max_recv_sge })
                    } else {
                        match self.mlx5_registry(recv_cq).qp_mut(qpn) {
                            Some(r) if r.rq.outstanding() < l.max_post_recv => Ok(r.rq.post(wr.wr_id)),
                            _ => Err(PostErrorKind::QueueFull),
                        }
                    }
                }
                QpHw::Irdma(l) => {
                    if wr.sg_list.len() > l.max_recv_sge as usize {
                        Err(PostErrorKind::TooManySge { num_sge: wr.sg_list.len(), max: l.max_recv_sge })
                    } else {
                        self.irdma_registry(recv_cq)
                            .post_recv(l.recv_id, wr.wr_id)
                            .map_err(|_| PostErrorKind::QueueFull)
                    }
                }
            };
            let wqe = match recorded {
                Ok(w) => w,
                Err(kind) => {
                    result = Err(post_err(i, kind, self.recv_errno(kind), "recv"));
                    break;
                }
            };
            self.flush[q].rq_uncovered += 1;
            if state == QpState::Error {
                self.flush_posted_recv(q, wqe, used_before);
                continue;
            }
            let sg = self.take_sg(wr.sg_list);
            self.qps[q].rq.push_back(Recv { wr_id: wr.wr_id, sg, wqe });
        }
        self.progress();
        result
    }

    pub(crate) fn post_srq_recv(&mut self, s: usize, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let mut result = Ok(());
        for (i, wr) in wrs.iter().enumerate() {
            let max = self.srqs[s].max_sge;
            if wr.sg_list.len() > max as usize {
                let kind = PostErrorKind::TooManySge { num_sge: wr.sg_list.len(), max };
                result = Err(post_err(i, kind, EINVAL, "srq recv"));
                break;
            }
            let Some(idx) = self.srqs[s].take() else {
                result = Err(post_err(i, PostErrorKind::QueueFull, ENOMEM, "srq recv"));
                break;
            };
            let srqn = self.srqs[s].srqn;
            for k in 0..self.srqs[s].cqs.len() {
                let cq = self.srqs[s].cqs[k];
                if let Some(r) = self.mlx5_registry(cq).srq_mut(srqn) {
                    r.post(idx, wr.wr_id);
                }
            }
            let sg = self.take_sg(wr.sg_list);
            self.srqs[s].posted.push_back(Recv { wr_id: wr.wr_id, sg, wqe: idx });
        }
        self.progress();
        result
    }

    // ---- executing ----------------------------------------------------------------

    /// Runs the sends that wait, in order per QP, until none can move.
    fn progress(&mut self) {
        loop {
            let mut moved = false;
            for q in 0..self.qps.len() {
                while self.qps[q].state == QpState::Rts {
                    let Some(s) = self.qps[q].sq.pop_front() else { break };
                    let step = self.execute(q, &s.work());
                    match step {
                        Step::Wait => {
                            self.qps[q].sq.push_front(s);
                            break;
                        }
                        Step::Done(n) => self.complete_send(q, &s.work(), n),
                        Step::Fail(status) => self.fail_send(q, &s.work(), status),
                    }
                    moved = true;
                    self.apply_deferred();
                    self.recycle(s);
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn recycle(&mut self, s: Send) {
        if let Payload::Gather(v) = s.payload {
            self.give_sg(v);
        }
    }

    /// Gathers a send's bytes into the scratch buffer.
    fn gather(&mut self, data: Data<'_>) -> Result<(), LocalFault> {
        self.data.clear();
        match data {
            Data::Gather(list) => self.mrs.gather(list, &mut self.data),
            Data::Inline(b) => {
                self.data.extend_from_slice(b);
                Ok(())
            }
        }
    }

    fn execute(&mut self, q: usize, w: &Work<'_>) -> Step {
        match self.qps[q].qp_type {
            QpType::Rc => self.execute_rc(q, w),
            QpType::Ud => self.execute_ud(q, w),
        }
    }

    fn execute_rc(&mut self, q: usize, w: &Work<'_>) -> Step {
        let Some(p) = self.qps[q].peer else { return Step::Fail(WcStatus::RetryExcErr) };
        match (self.qps[p].state, self.qps[p].peer == Some(q)) {
            // The peer does not answer yet: the requester retries.
            (QpState::Init, _) => return Step::Wait,
            (QpState::Rts, true) => {}
            // A peer in error, or connected elsewhere, never acknowledges.
            _ => return Step::Fail(WcStatus::RetryExcErr),
        }
        let src_qp = self.qps[q].qpn;
        match w.op {
            SendOp::Send | SendOp::SendWithImm(_) => {
                if self.gather(w.data).is_err() {
                    return Step::Fail(WcStatus::LocProtErr);
                }
                let Some((recv, srq)) = self.take_recv(p) else { return Step::Wait };
                let a =
                    Arrival { op: w.op, byte_len: self.data.len() as u32, src_qp, ud: false, solicited: w.solicited };
                let data = std::mem::take(&mut self.data);
                let placed = self.deliver(p, recv, srq, &a, Some(&data), None);
                self.data = data;
                match placed {
                    Ok(()) => Step::Done(a.byte_len.into()),
                    // The responder NAKs: an invalid request for a message too long, a
                    // remote operational error for a buffer it may not write.
                    Err(LocalFault::Length) => Step::Fail(WcStatus::RemInvReqErr),
                    Err(LocalFault::Protection) => Step::Fail(WcStatus::RemOpErr),
                }
            }
            SendOp::Write(to) | SendOp::WriteWithImm(to, _) => {
                if self.gather(w.data).is_err() {
                    return Step::Fail(WcStatus::LocProtErr);
                }
                let imm = matches!(w.op, SendOp::WriteWithImm(..));
                if imm && !self.has_recv(p) {
                    return Step::Wait;
                }
                if !self.mrs.write_remote(to, &self.data) {
                    self.remote_access_fault(p, q);
                    return Step::Fail(WcStatus::RemAccessErr);
                }
                let n = self.data.len() as u64;
                if imm {
                    if let Some((recv, srq)) = self.take_recv(p) {
                        let a = Arrival { op: w.op, byte_len: n as u32, src_qp, ud: false, solicited: w.solicited };
                        // The data went to the remote address; the receive's list is unused.
                        let _ = self.deliver(p, recv, srq, &a, None, None);
                    }
                }
                Step::Done(n)
            }
            SendOp::Read(from) => {
                let Data::Gather(list) = w.data else { return Step::Fail(WcStatus::LocQpOpErr) };
                if self.mrs.check_writable(list).is_err() {
                    return Step::Fail(WcStatus::LocProtErr);
                }
                let mut data = std::mem::take(&mut self.data);
                let ok = self.mrs.read_remote(from, w.len as usize, &mut data);
                let step = if !ok {
                    self.remote_access_fault(p, q);
                    Step::Fail(WcStatus::RemAccessErr)
                } else if self.mrs.scatter(list, &data).is_err() {
                    Step::Fail(WcStatus::LocProtErr)
                } else {
                    Step::Done(w.len)
                };
                self.data = data;
                step
            }
        }
    }

    fn execute_ud(&mut self, q: usize, w: &Work<'_>) -> Step {
        let Some(dest) = w.ud else { return Step::Fail(WcStatus::LocQpOpErr) };
        if self.gather(w.data).is_err() {
            return Step::Fail(WcStatus::LocProtErr);
        }
        if self.data.len() > self.attrs.mtu as usize {
            return Step::Fail(WcStatus::LocLenErr);
        }
        let n = self.data.len();
        // Unreliable: the sender completes whatever happens at the destination.
        let target = self.find_qp(dest.qpn, &dest.endpoint.gid).filter(|&p| {
            let d = &self.qps[p];
            d.qp_type == QpType::Ud && d.state == QpState::Rts && d.qkey == dest.qkey
        });
        if let Some(p) = target {
            if let Some((recv, srq)) = self.take_recv(p) {
                let g = grh(&self.gid, &self.gid, n);
                let mut buf = std::mem::take(&mut self.ud_buf);
                buf.clear();
                buf.extend_from_slice(&g);
                buf.extend_from_slice(&self.data);
                let src_qp = self.qps[q].qpn;
                let a = Arrival { op: w.op, byte_len: buf.len() as u32, src_qp, ud: true, solicited: w.solicited };
                let src = UdSource {
                    src_qp,
                    ipv4: is_ipv4_mapped(&self.gid),
                    smac: [0x02, 0x00, self.gid[12], self.gid[13], self.gid[14], self.gid[15]],
                };
                let _ = self.deliver(p, recv, srq, &a, Some(&buf), Some(src));
                self.ud_buf = buf;
            }
        }
        Step::Done(n as u64)
    }

    fn has_recv(&self, p: usize) -> bool {
        match self.qps[p].srq {
            Some(s) => !self.srqs[s].posted.is_empty(),
            None => !self.qps[p].rq.is_empty(),
        }
    }

    /// The next receive of QP `p` (its RQ's or its SRQ's), and the SRQ it came from.
    fn take_recv(&mut self, p: usize) -> Option<(Recv, Option<usize>)> {
        match self.qps[p].srq {
            Some(s) => self.srqs[s].posted.pop_front().map(|r| (r, Some(s))),
            None => self.qps[p].rq.pop_front().map(|r| (r, None)),
        }
    }

    /// Places a message in receive `recv` of QP `p` and writes its CQE: `data` is what the
    /// receive's list takes (none for WRITE_WITH_IMM). A fault writes the receive's error
    /// (mlx5) and puts the responder in error once the requester's completion is written.
    fn deliver(
        &mut self,
        p: usize,
        recv: Recv,
        srq: Option<usize>,
        a: &Arrival,
        data: Option<&[u8]>,
        ud: Option<UdSource>,
    ) -> Result<(), LocalFault> {
        let placed = match data {
            Some(d) => self.mrs.scatter(&recv.sg, d),
            None => Ok(()),
        };
        let (qpn, recv_cq, hw) = (self.qps[p].qpn, self.qps[p].recv_cq, self.qps[p].hw);
        let srqn = srq.map(|s| self.srqs[s].srqn);
        let tag = srq.map(|s| (s, recv.wqe));
        match (placed, hw) {
            (Ok(()), QpHw::Mlx5(_)) => self.cqs[recv_cq].push_mlx5(&mx::resp_ok(qpn, recv.wqe, a, srqn), tag),
            (Ok(()), QpHw::Irdma(l)) => {
                let len = data.map_or(u64::from(a.byte_len), |d| d.len() as u64);
                let c = ird::recv_ok(&l, qpn, recv.wqe, a.op, len, a.byte_len, self.attrs.mtu, a.solicited, ud);
                self.cqs[recv_cq].push_irdma(&c);
                self.flush[p].rq_uncovered = self.flush[p].rq_uncovered.saturating_sub(1);
            }
            (Err(f), hw) => {
                let status = match f {
                    LocalFault::Length => WcStatus::LocLenErr,
                    LocalFault::Protection => WcStatus::LocProtErr,
                };
                if let QpHw::Mlx5(_) = hw {
                    self.cqs[recv_cq].push_mlx5(&mx::resp_err(qpn, recv.wqe, status, srqn), tag);
                }
                // irdma: no CQE for the receive itself; the responder's flush reports it first
                // with this status (its RQ flush code).
                self.deferred.push((p, status));
            }
        }
        self.give_sg(recv.sg);
        placed
    }

    /// The responder of a request with a bad rkey or range goes to error too (IB: a
    /// responder-detected access violation is an affiliated error of the responder's QP);
    /// after the requester's completion, unless it is the requester itself.
    fn remote_access_fault(&mut self, p: usize, q: usize) {
        if p != q {
            self.deferred.push((p, WcStatus::WrFlushErr));
        }
    }

    fn apply_deferred(&mut self) {
        while let Some((p, status)) = self.deferred.pop() {
            if self.qps[p].state != QpState::Error {
                self.qp_error(p, WcStatus::WrFlushErr, status);
            }
        }
    }

    /// Writes the CQE of a send that completed.
    fn complete_send(&mut self, q: usize, w: &Work<'_>, n: u64) {
        if !w.signaled {
            return;
        }
        let (qpn, send_cq, hw) = (self.qps[q].qpn, self.qps[q].send_cq, self.qps[q].hw);
        match hw {
            QpHw::Mlx5(_) => self.cqs[send_cq].push_mlx5(&mx::req_ok(qpn, w.wqe, w.op, n), None),
            QpHw::Irdma(l) => {
                let c = ModelCqe::send(l.ctx, qpn, w.wqe, ird::sq_opcode(w.op, w.solicited));
                self.cqs[send_cq].push_irdma(&c);
                // The CQE retires this WR and every older one; the ones behind it wait.
                self.flush[q].sq_uncovered = self.qps[q].sq.len() as u32;
            }
        }
    }

    /// A send failed: mlx5 writes its error CQE (signaled or not), then the QP flushes;
    /// irdma moves the QP to error with the status as its SQ flush code.
    fn fail_send(&mut self, q: usize, w: &Work<'_>, status: WcStatus) {
        let (qpn, send_cq, hw) = (self.qps[q].qpn, self.qps[q].send_cq, self.qps[q].hw);
        match hw {
            QpHw::Mlx5(_) => {
                self.cqs[send_cq].push_mlx5(&mx::req_err(qpn, w.wqe, w.op, status), None);
                self.qp_error(q, WcStatus::WrFlushErr, WcStatus::WrFlushErr);
            }
            QpHw::Irdma(_) => self.qp_error(q, status, WcStatus::WrFlushErr),
        }
    }

    // ---- errors and flushes ---------------------------------------------------------

    pub(crate) fn qp_to_error(&mut self, q: usize) {
        if self.qps[q].state != QpState::Error {
            self.qp_error(q, WcStatus::WrFlushErr, WcStatus::WrFlushErr);
        }
        self.progress();
    }

    /// Moves QP `q` to error and flushes what it holds. mlx5: one flush CQE per waiting
    /// send and per posted receive, in order. irdma GEN2: one flush CQE per queue that holds
    /// work the provider has not seen completed, with the queue's flush code (`sq_code`,
    /// `rq_code`); the provider makes a completion for each WR it holds from it.
    fn qp_error(&mut self, q: usize, sq_code: WcStatus, rq_code: WcStatus) {
        self.qps[q].state = QpState::Error;
        let sends: Vec<Send> = self.qps[q].sq.drain(..).collect();
        let recvs: Vec<Recv> = self.qps[q].rq.drain(..).collect();
        let (qpn, send_cq, recv_cq, hw) = {
            let qp = &self.qps[q];
            (qp.qpn, qp.send_cq, qp.recv_cq, qp.hw)
        };
        match hw {
            QpHw::Mlx5(_) => {
                for s in &sends {
                    self.cqs[send_cq].push_mlx5(&mx::req_err(qpn, s.wqe, s.op, WcStatus::WrFlushErr), None);
                }
                for r in &recvs {
                    self.cqs[recv_cq].push_mlx5(&mx::resp_err(qpn, r.wqe, WcStatus::WrFlushErr, None), None);
                }
            }
            QpHw::Irdma(l) => {
                if self.flush[q].sq_uncovered > 0 {
                    self.irdma_flush(q, &l, true, sq_code);
                }
                if self.flush[q].rq_uncovered > 0 {
                    self.irdma_flush(q, &l, false, rq_code);
                }
            }
        }
        for s in sends {
            self.recycle(s);
        }
        for r in recvs {
            self.give_sg(r.sg);
        }
    }

    /// Writes one irdma flush CQE for the SQ (`sq`) or RQ of QP `q`.
    fn irdma_flush(&mut self, q: usize, l: &ird::QpLayout, sq: bool, code: WcStatus) {
        let (qpn, cq) =
            if sq { (self.qps[q].qpn, self.qps[q].send_cq) } else { (self.qps[q].qpn, self.qps[q].recv_cq) };
        let wqe_idx = if sq { self.irdma_registry(cq).qp(l.send_id).map_or(0, |x| x.sq.tail as u16) } else { 0 };
        self.cqs[cq].push_irdma(&ModelCqe::flush(l.ctx, qpn, sq, wqe_idx, ird::flush_code(code)));
        let f = &mut self.flush[q];
        if sq {
            (f.sq_uncovered, f.sq_flushed) = (0, true);
        } else {
            (f.rq_uncovered, f.rq_flushed) = (0, true);
        }
    }

    /// The SQ quanta irdma's provider holds for QP `q` (0 on mlx5).
    fn irdma_sq_used(&mut self, q: usize) -> u32 {
        let (cq, hw) = (self.qps[q].send_cq, self.qps[q].hw);
        match hw {
            QpHw::Irdma(l) => self.irdma_registry(cq).qp(l.send_id).map_or(0, |x| x.sq.used()),
            QpHw::Mlx5(_) => 0,
        }
    }

    fn irdma_rq_used(&mut self, q: usize) -> u32 {
        let (cq, hw) = (self.qps[q].recv_cq, self.qps[q].hw);
        match hw {
            QpHw::Irdma(l) => self.irdma_registry(cq).qp(l.recv_id).map_or(0, |x| x.rq.used()),
            QpHw::Mlx5(_) => 0,
        }
    }

    /// A send posted to a QP in error: mlx5 flushes its WQE at once; irdma's provider asks
    /// for a new flush when its queue was empty (or no flush is outstanding), else the
    /// pending flush covers it (rdma-core `irdma_upost_send`'s re-flush).
    fn flush_posted_send(&mut self, q: usize, wqe: u16, op: SendOp, used_before: u32) {
        let (qpn, send_cq, hw) = (self.qps[q].qpn, self.qps[q].send_cq, self.qps[q].hw);
        match hw {
            QpHw::Mlx5(_) => self.cqs[send_cq].push_mlx5(&mx::req_err(qpn, wqe, op, WcStatus::WrFlushErr), None),
            QpHw::Irdma(l) => {
                if used_before == 0 || !self.flush[q].sq_flushed {
                    self.irdma_flush(q, &l, true, WcStatus::WrFlushErr);
                }
            }
        }
    }

    /// A receive posted to a QP in error, as [`Fabric::flush_posted_send`].
    fn flush_posted_recv(&mut self, q: usize, wqe: u16, used_before: u32) {
        let (qpn, recv_cq, hw) = (self.qps[q].qpn, self.qps[q].recv_cq, self.qps[q].hw);
        match hw {
            QpHw::Mlx5(_) => {
                self.cqs[recv_cq].push_mlx5(&mx::resp_err(qpn, wqe, WcStatus::WrFlushErr, None), None);
            }
            QpHw::Irdma(l) => {
                if used_before == 0 || !self.flush[q].rq_flushed {
                    self.irdma_flush(q, &l, false, WcStatus::WrFlushErr);
                }
            }
        }
    }

    // ---- polling --------------------------------------------------------------------

    /// One poll of CQ `cq`. On mlx5, the SRQ WQEs whose completions it returned go back
    /// to their SRQ's free list, as rdma-core's poll frees them.
    pub(crate) fn poll_cq(&mut self, cq: usize, out: &mut [Completion]) -> usize {
        let n = self.cqs[cq].poll(out);
        if matches!(self.cqs[cq].hw, CqHw::Mlx5 { .. }) {
            for _ in 0..n {
                if let Some(Some((s, idx))) = self.cqs[cq].srq_tags.pop_front() {
                    self.srqs[s].free(idx);
                }
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roce_v2_grh_holds_a_valid_ipv4_header() {
        let mut a = [0u8; 16];
        a[10..].copy_from_slice(&[0xff, 0xff, 192, 0, 2, 1]);
        let g = grh(&a, &a, 100);
        assert!(g[..20].iter().all(|&b| b == 0));
        let h = &g[20..];
        assert_eq!((h[0], h[9], &h[12..16], &h[16..20]), (0x45, 17, &[192, 0, 2, 1][..], &[192, 0, 2, 1][..]));
        assert_eq!(u16::from_be_bytes([h[2], h[3]]), 20 + 8 + 12 + 8 + 100 + 4);
        // The header's one's-complement sum, checksum included, is 0xffff.
        let sum: u32 = h.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff);
        // Without IPv4 GIDs: an IB GRH, IP version 6, the GIDs at 8 and 24.
        let b = [0x11u8; 16];
        let g = grh(&b, &a, 0);
        assert_eq!((g[0] >> 4, g[6], &g[8..24], &g[24..40]), (6, 0x1b, &b[..], &a[..]));
    }
}
