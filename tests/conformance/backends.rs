//! The backends the conformance cases run on, behind one small trait.

use dvcq::irdma::model::{IrdmaModel, ModelConfig as IrdmaConfig, ModelCqe};
use dvcq::irdma::{Compat, IrdmaCq, QpConfig as IrdmaQp, QpId};
use dvcq::mlx5::model::build::{self, ErrSpec};
use dvcq::mlx5::model::{Mlx5Model, ModelConfig};
use dvcq::mlx5::{CqConfig, Mlx5Cq, QpConfig, Registry};
use dvcq::uapi::mlx5::opcode::{cqe_opcode, syndrome, wqe_opcode};
use dvcq::Completion;
use dvcq_uapi::irdma::codes::{flush, rq_op, sq_op};
use dvcq_uapi::irdma::HwRev;

/// QP number every case uses.
pub const QPN: u32 = 0x2b;

/// What a case needs from a backend: a CQ with one registered QP, a way to post work and
/// to make the device complete it, and the poll API.
pub trait Backend: Sized {
    /// A fresh CQ of `entries` slots with QP [`QPN`] registered (64-entry queues).
    fn new(entries: u32) -> Self;
    /// Records a send; returns its WQE index.
    fn post_send(&mut self, wr_id: u64) -> u16;
    /// Records a receive; returns its WQE index.
    fn post_recv(&mut self, wr_id: u64) -> u16;
    /// The device completes the send at `idx` successfully.
    fn complete_send(&mut self, idx: u16);
    /// The device completes the receive at `idx` with `len` bytes and optional immediate.
    fn complete_recv(&mut self, idx: u16, len: u32, imm: Option<u32>);
    /// The device fails the send at `idx` (a non-flush error class).
    fn fail_send(&mut self, idx: u16);
    /// The device writes a CQE naming a QP nobody registered.
    fn unknown_qp(&mut self);
    /// Free CQE slots the device sees.
    fn room(&self) -> u32;
    /// Batch poll.
    fn poll(&mut self, out: &mut [Completion]) -> usize;
    /// Peek.
    fn peek(&self) -> Option<Completion>;
}

/// The mlx5 model with `S`-byte CQEs.
pub struct Mlx5<const S: usize> {
    model: Mlx5Model,
    cq: Mlx5Cq<S>,
}
/// mlx5, 64-byte CQEs.
pub type Mlx5Model64 = Mlx5<64>;
/// mlx5, 128-byte CQEs.
pub type Mlx5Model128 = Mlx5<128>;

impl<const S: usize> Backend for Mlx5<S> {
    fn new(entries: u32) -> Self {
        let mut mc = ModelConfig::new(entries);
        mc.cqe_size = S as u32;
        let model = Mlx5Model::new(mc).unwrap();
        let mut reg = Registry::new();
        reg.add_qp(QpConfig::rc(QPN, 64, 64)).unwrap();
        let cq = model.poller::<S>(reg, CqConfig::default()).unwrap();
        Self { model, cq }
    }
    fn post_send(&mut self, wr_id: u64) -> u16 {
        self.cq.registry_mut().qp_mut(QPN).unwrap().sq.post(wr_id, 1)
    }
    fn post_recv(&mut self, wr_id: u64) -> u16 {
        self.cq.registry_mut().qp_mut(QPN).unwrap().rq.post(wr_id)
    }
    fn complete_send(&mut self, idx: u16) {
        self.model.push(&build::req(QPN, idx, wqe_opcode::SEND, 0)).unwrap();
    }
    fn complete_recv(&mut self, idx: u16, len: u32, imm: Option<u32>) {
        let e = match imm {
            Some(v) => build::resp(cqe_opcode::RESP_SEND_IMM, QPN, idx, len, v),
            None => build::resp(cqe_opcode::RESP_SEND, QPN, idx, len, 0),
        };
        self.model.push(&e).unwrap();
    }
    fn fail_send(&mut self, idx: u16) {
        let spec = ErrSpec {
            requester: true,
            qpn: QPN,
            wqe_counter: idx,
            syndrome: syndrome::REMOTE_ACCESS_ERR,
            vendor_err_synd: 0x88,
            ..ErrSpec::default()
        };
        self.model.push(&build::err(spec)).unwrap();
    }
    fn unknown_qp(&mut self) {
        self.model.push(&build::req(0x777, 0, wqe_opcode::SEND, 0)).unwrap();
    }
    fn room(&self) -> u32 {
        self.model.config().entries - self.model.used()
    }
    fn poll(&mut self, out: &mut [Completion]) -> usize {
        self.cq.poll(out)
    }
    fn peek(&self) -> Option<Completion> {
        self.cq.peek()
    }
}

/// The irdma model of a hardware generation (`G` = 2 or 3). With `RDMA_CORE_SIZED`, a CQ
/// of `entries` gets the ring rdma-core allocates for `ibv_create_cq(cqe = entries)` (not
/// a power of two), otherwise exactly `entries` slots.
pub struct Irdma<const G: u8, const RDMA_CORE_SIZED: bool = false> {
    model: IrdmaModel,
    cq: IrdmaCq,
    qp: QpId,
}
/// E810 (GEN2), 32-byte CQEs.
pub type IrdmaGen2 = Irdma<2>;
/// E810 (GEN2) on the ring rdma-core sizes for the requested count (16 → 34 slots).
pub type IrdmaGen2RdmaCoreSized = Irdma<2, true>;
/// GEN3, 64-byte CQEs.
pub type IrdmaGen3 = Irdma<3>;

const CTX: u64 = 0x5151;

impl<const G: u8, const RDMA_CORE_SIZED: bool> Backend for Irdma<G, RDMA_CORE_SIZED> {
    fn new(entries: u32) -> Self {
        let rev = HwRev::from_u8(G).unwrap();
        let cfg = if RDMA_CORE_SIZED {
            IrdmaConfig::for_cqe(rev, entries, Compat::Current).unwrap()
        } else {
            IrdmaConfig::new(rev, entries)
        };
        let model = IrdmaModel::new(cfg).unwrap();
        let mut qps = dvcq::irdma::QpRegistry::new(rev);
        let qp = qps.register(CTX, IrdmaQp::rc(QPN, 64, 64)).unwrap();
        let cq = model.poller(qps, Compat::Current).unwrap();
        Self { model, cq, qp }
    }
    fn post_send(&mut self, wr_id: u64) -> u16 {
        self.cq.qps_mut().post_send(self.qp, wr_id, 0, 1, sq_op::SEND).unwrap()
    }
    fn post_recv(&mut self, wr_id: u64) -> u16 {
        self.cq.qps_mut().post_recv(self.qp, wr_id).unwrap()
    }
    fn complete_send(&mut self, idx: u16) {
        self.model.push(&ModelCqe::send(CTX, QPN, idx, sq_op::SEND)).unwrap();
    }
    fn complete_recv(&mut self, idx: u16, len: u32, imm: Option<u32>) {
        let c = match imm {
            Some(v) => ModelCqe::recv(CTX, QPN, idx, 0, rq_op::ROCE_SEND_ONLY_WITH_IMM, len).with_imm(v),
            None => ModelCqe::recv(CTX, QPN, idx, 0, rq_op::ROCE_SEND_ONLY, len),
        };
        self.model.push(&c).unwrap();
    }
    fn fail_send(&mut self, idx: u16) {
        // irdma reports errors as flush CQEs whose minor code names the class
        // (rdma-core `irdma_uk_cq_poll_cmpl`).
        self.model.push(&ModelCqe::flush(CTX, QPN, true, idx, flush::REM_ACCESS_ERR)).unwrap();
    }
    fn unknown_qp(&mut self) {
        self.model.push(&ModelCqe::send(0x999, 0x777, 0, sq_op::SEND)).unwrap();
    }
    fn room(&self) -> u32 {
        self.model.free_slots()
    }
    fn poll(&mut self, out: &mut [Completion]) -> usize {
        self.cq.poll(out)
    }
    fn peek(&self) -> Option<Completion> {
        self.cq.peek()
    }
}
