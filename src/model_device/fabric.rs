//! The device's state: every region, CQ, QP and SRQ it holds, how each is created as
//! the vendor's provider creates it, and the poll that hands CQEs to the vendor's poller.

use super::cq::{CqHw, CqState, Mlx5CqAttrs, Mlx5Poller};
use super::irdma as ird;
use super::memory::MrTable;
use super::mlx5 as mx;
use super::qp::{Qp, QpHw, QpState, ReqScatter, Srq};
use super::{endpoint_of, DeviceAttrs, DeviceError, ModelVendor, DEFAULT_QKEY};
use crate::verbs::{Endpoint, QpAttrs, QpCaps, QpType, Sge};
use dvcq_e810_dv::model::{IrdmaModel, ModelConfig as IrdmaConfig};
use dvcq_e810_dv::ring::{ring_slots, Rounding};
use dvcq_e810_dv::{Compat, QpConfig as IrdmaQpConfig, QpRegistry, QpType as IrdmaQpType, Transport};
use dvcq_mlx5_dv::clock::TimestampFormat;
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig as Mlx5Config};
use dvcq_mlx5_dv::{CqConfig, QpConfig as Mlx5QpConfig, Registry};
use dvcq_provider::{Completion, DmaBuffer, WcStatus};
use dvcq_uapi::irdma::HwRev;
use std::sync::Arc;

/// Model choices for the numbers a device hands out.
pub(super) const MLX5_FIRST_QPN: u32 = 0x108;
const MLX5_FIRST_CQN: u32 = 0x406;
const MLX5_FIRST_SRQN: u32 = 0x20;
const IRDMA_FIRST_QPN: u32 = 3;
const IRDMA_FIRST_CQ_ID: u32 = 3;
/// irdma completion contexts: QP structures 1 KiB apart (the provider `memalign`s them to
/// 1024).
const IRDMA_CTX_BASE: u64 = 0x7f3a_5c00_0000;
const IRDMA_CTX_STRIDE: u64 = 0x400;

/// A CQ of the other vendor (a device creates only its own, so this is never returned).
const OTHER_VENDOR: DeviceError = DeviceError::ForeignHandle { what: "cq of another vendor" };

/// irdma bookkeeping of what the flushes must cover (GEN2 writes one flush CQE per queue,
/// and the provider completes every WR it still holds from it).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct IrdmaFlush {
    /// Send WRs posted after the last one a CQE completed.
    pub(super) sq_uncovered: u32,
    /// Receives posted and not completed by a CQE.
    pub(super) rq_uncovered: u32,
    /// A flush CQE was written for the queue (posts to an errored QP then need none until
    /// the provider drained it).
    pub(super) sq_flushed: bool,
    pub(super) rq_flushed: bool,
}

/// Everything a device holds.
#[derive(Debug)]
pub(crate) struct Fabric {
    pub(super) vendor: ModelVendor,
    pub(super) attrs: DeviceAttrs,
    pub(super) gid: [u8; 16],
    pub(crate) mrs: MrTable,
    pub(crate) cqs: Vec<CqState>,
    pub(crate) qps: Vec<Qp>,
    pub(crate) srqs: Vec<Srq>,
    /// irdma flush bookkeeping, by QP.
    pub(super) flush: Vec<IrdmaFlush>,
    /// Responders that found a fault: put in error once the requester's completion is
    /// written (status of the receive that failed).
    pub(super) deferred: Vec<(usize, WcStatus)>,
    /// Scratch: a message's bytes, and a UD receive's GRH plus bytes.
    pub(super) data: Vec<u8>,
    pub(super) ud_buf: Vec<u8>,
    /// Emptied scatter lists, reused by later posts.
    pub(super) sg_pool: Vec<Vec<Sge>>,
    /// Sends waiting on every QP together (0: nothing for [`Fabric::progress`] to do).
    pub(super) waiting: usize,
    /// The device clock its mlx5 CQEs are stamped with.
    pub(super) clock: super::clock::DeviceClock,
    /// XRC domains opened (a domain is its index).
    pub(super) xrcds: usize,
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
            waiting: 0,
            clock: super::clock::DeviceClock::new(),
            xrcds: 0,
        }
    }

    fn too_large(&self, what: &'static str, value: u32, max: u32) -> DeviceError {
        DeviceError::TooLarge { what, value: value.into(), max: max.into(), device: self.vendor.device_name() }
    }

    pub(crate) fn create_cq(&mut self, cqe: u32, mlx5: Option<Mlx5CqAttrs>) -> Result<usize, DeviceError> {
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
                let attrs = mlx5.unwrap_or_default();
                let compression = mx::check_cq_attrs(&attrs)?;
                // mlx5_create_cq: ncqe = align_queue_size(cqe + 1); ibv_cq.cqe = ncqe - 1.
                let entries = (cqe + 1).next_power_of_two();
                let mut mc = Mlx5Config::new(entries);
                mc.cqn = MLX5_FIRST_CQN + n;
                mc.cqe_size = attrs.cqe_size;
                mc.compression = compression;
                let model = Mlx5Model::new(mc)?;
                let poller = match attrs.cqe_size {
                    128 => Mlx5Poller::C128(Box::new(model.poller::<128>(Registry::new(), CqConfig::default())?)),
                    _ => Mlx5Poller::C64(Box::new(model.poller::<64>(Registry::new(), CqConfig::default())?)),
                };
                let mut state = CqState::new(CqHw::Mlx5 { model, poller }, entries - 1);
                // Free-running unless made for another format: the kernel's default where the
                // device has it (get_ts_format, drivers/infiniband/hw/mlx5/qp.c).
                state.stamps = Some((self.clock, TimestampFormat::FreeRunning));
                state
            }
            ModelVendor::Irdma => {
                if mlx5.is_some() {
                    return Err(DeviceError::Unsupported { what: "mlx5 CQ attributes", device: "model-e810" });
                }
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
    pub(super) fn srq_into_registry(&mut self, s: usize, cq: usize) -> Result<(), DeviceError> {
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
        sq_sig_all: bool,
    ) -> Result<usize, DeviceError> {
        if srq.is_some() && self.attrs.max_srq == 0 {
            return Err(DeviceError::Unsupported { what: "srq", device: self.vendor.device_name() });
        }
        match qp_type {
            // irdma makes RC and UD QPs only (the kernel's `irdma_create_qp` refuses the
            // rest with EOPNOTSUPP).
            QpType::Uc if self.vendor == ModelVendor::Irdma => {
                return Err(DeviceError::Unsupported {
                    what: "a UC QP (irdma has RC and UD only)",
                    device: self.vendor.device_name(),
                })
            }
            QpType::XrcSend if self.vendor == ModelVendor::Irdma => {
                return Err(DeviceError::Unsupported {
                    what: "an XRC initiator QP (irdma has no XRC)",
                    device: self.vendor.device_name(),
                })
            }
            // An initiator has a send queue only (the kernel drops its receive side).
            QpType::XrcSend if srq.is_some() => {
                return Err(DeviceError::BadSize { what: "srq", value: 1, why: "an XRC initiator QP receives nothing" })
            }
            QpType::XrcRecv => {
                return Err(DeviceError::BadSize {
                    what: "qp_type",
                    value: 10,
                    why: "an XRC target QP is made on its XRC domain, without CQs",
                })
            }
            _ => {}
        }
        // An initiator's receive side does not exist: its CQEs all go to the send CQ.
        let recv_cq = if qp_type == QpType::XrcSend { send_cq } else { recv_cq };
        let caps = if qp_type == QpType::XrcSend { QpCaps { max_recv_wr: 0, max_recv_sge: 0, ..caps } } else { caps };
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
        let mut req_scatter = None;
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
                    qp_type: match qp_type {
                        QpType::Rc => dvcq_mlx5_dv::QpType::Rc,
                        QpType::Uc => dvcq_mlx5_dv::QpType::Uc,
                        QpType::Ud => dvcq_mlx5_dv::QpType::Ud,
                        QpType::XrcSend => dvcq_mlx5_dv::QpType::XrcSend,
                        QpType::XrcRecv => dvcq_mlx5_dv::QpType::XrcRecv,
                    },
                    ..Mlx5QpConfig::rc(qpn, l.sq_wqe_cnt, l.rq_wqe_cnt)
                };
                if send_cq != recv_cq {
                    // The send CQ sees only requester CQEs of the QP.
                    self.mlx5_registry(send_cq).ok_or(OTHER_VENDOR)?.add_qp(Mlx5QpConfig { srqn: None, ..cfg })?;
                }
                self.mlx5_registry(recv_cq).ok_or(OTHER_VENDOR)?.add_qp(cfg)?;
                if qp_type == QpType::Rc && sq_sig_all && l.max_post_send > 0 {
                    req_scatter = Some(self.req_scatter_of(send_cq, qpn, &l)?);
                }
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
                l.send_id = self.irdma_registry(send_cq).ok_or(OTHER_VENDOR)?.register(l.ctx, cfg)?;
                l.recv_id = if send_cq == recv_cq {
                    l.send_id
                } else {
                    self.irdma_registry(recv_cq).ok_or(OTHER_VENDOR)?.register(l.ctx, cfg)?
                };
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
            attrs: QpAttrs::default(),
            endpoint: endpoint_of(qpn, self.gid),
            hw,
            xrcd: None,
            sig_all: sq_sig_all,
            req_scatter,
            rq: Default::default(),
            sq: Default::default(),
        });
        self.flush.push(IrdmaFlush::default());
        Ok(self.qps.len() - 1)
    }

    /// Requester scatter-to-CQE for RC QP `qpn` of layout `l` on send CQ `send_cq`, as the
    /// kernel configures it for an RC QP made with `sq_sig_all` (`configure_requester_scat_cqe`:
    /// `cs_req` is DATA64 with a send CQ of 128-byte CQEs, DATA32 otherwise): the SQ buffer
    /// the device writes the QP's WQEs into, registered with the send CQ's poller so that
    /// its copy finds a READ's scatter list (as `Cq::attach_qp` registers `mlx5dv_qp`'s
    /// `sq.buf` for an attached QP).
    fn req_scatter_of(&mut self, send_cq: usize, qpn: u32, l: &mx::QpLayout) -> Result<ReqScatter, DeviceError> {
        let cqe_size = match &self.cqs[send_cq].hw {
            CqHw::Mlx5 { model, .. } => model.config().cqe_size,
            CqHw::Irdma { .. } => return Err(OTHER_VENDOR),
        };
        let wqes = Arc::new(DmaBuffer::new(l.sq_wqe_cnt as usize * mx::WQE_BB as usize)?);
        let buf = wqes.wq_buffer(0, wqes.len())?;
        self.mlx5_registry(send_cq).ok_or(OTHER_VENDOR)?.set_send_wqes(qpn, buf)?;
        Ok(ReqScatter { wqes, cqe_size })
    }

    /// CQ `cq`'s mlx5 registry (`None` never happens: a device creates CQs of its own
    /// vendor only).
    pub(super) fn mlx5_registry(&mut self, cq: usize) -> Option<&mut Registry> {
        self.cqs.get_mut(cq)?.mlx5_registry_mut()
    }

    /// CQ `cq`'s irdma registry, as [`Fabric::mlx5_registry`].
    pub(super) fn irdma_registry(&mut self, cq: usize) -> Option<&mut QpRegistry> {
        match &mut self.cqs.get_mut(cq)?.hw {
            CqHw::Irdma { poller, .. } => Some(poller.qps_mut()),
            CqHw::Mlx5 { .. } => None,
        }
    }

    pub(crate) fn connect(&mut self, q: usize, peer: &Endpoint, attrs: &QpAttrs) -> Result<(), DeviceError> {
        let qp = &self.qps[q];
        if let Some((attr, value)) = attrs.out_of_range() {
            return Err(DeviceError::BadAttr { qpn: qp.qpn, attr, value });
        }
        if qp.state != QpState::Init {
            return Err(DeviceError::BadState { qpn: qp.qpn, state: qp.state, what: "connect needs a QP in INIT" });
        }
        // The peer type each connected type pairs with: RC with RC, an XRC initiator with
        // an XRC target and back.
        let pairs_with = match qp.qp_type {
            QpType::Ud => None,
            QpType::Rc => Some(QpType::Rc),
            QpType::Uc => Some(QpType::Uc),
            QpType::XrcSend => Some(QpType::XrcRecv),
            QpType::XrcRecv => Some(QpType::XrcSend),
        };
        if let Some(want) = pairs_with {
            let p = self.find_qp(peer.qpn, &peer.gid).ok_or(DeviceError::NoSuchQp { qpn: peer.qpn, gid: peer.gid })?;
            if self.qps[p].qp_type != want {
                return Err(DeviceError::TypeMismatch {
                    qpn: qp.qpn,
                    ours: qp.qp_type.name(),
                    peer: peer.qpn,
                    theirs: self.qps[p].qp_type.name(),
                });
            }
            self.qps[q].peer = Some(p);
        }
        self.qps[q].attrs = *attrs;
        // A target goes to RTR only: it never sends (rdma-core's tests move it no further
        // than they must).
        self.qps[q].state = if self.qps[q].qp_type == QpType::XrcRecv { QpState::Rtr } else { QpState::Rts };
        self.progress();
        Ok(())
    }

    pub(super) fn find_qp(&self, qpn: u32, gid: &[u8; 16]) -> Option<usize> {
        if *gid != self.gid {
            return None;
        }
        self.qps.iter().position(|x| x.qpn == qpn)
    }

    /// One poll of CQ `cq`. On mlx5, the SRQ WQEs whose completions it returned go back
    /// to their SRQ's free list, as rdma-core's poll frees them.
    /// Resizes CQ `cq` for at least `cqe` completions ([`CqState::resize`]).
    pub(crate) fn resize_cq(&mut self, cq: usize, cqe: u32) -> Result<u32, DeviceError> {
        if cqe == 0 || cqe > self.attrs.max_cqe {
            return Err(self.too_large("cqe", cqe, self.attrs.max_cqe));
        }
        self.cqs[cq].resize(cqe)
    }

    pub(crate) fn poll_cq(&mut self, cq: usize, out: &mut [Completion]) -> usize {
        let c = &mut self.cqs[cq];
        let n = c.poll(out);
        while let Some(&(seq, s, idx)) = c.srq_tags.front() {
            if seq >= c.completions {
                break;
            }
            c.srq_tags.pop_front();
            if let Some(srq) = self.srqs.get_mut(s) {
                srq.free(idx);
            }
        }
        n
    }
}
