//! Queue pairs and shared receive queues of a model device: the handles, the post-side
//! errors, and the work each queue holds.

use super::{irdma, mlx5, DeviceError, Shared};
use crate::verbs::{Endpoint, QpAttrs, QpCaps, QpType, RecvWr, SendOp, SendWr, Sge, UdDest};
use dvcq_provider::DmaBuffer;
use std::collections::VecDeque;
use std::sync::Arc;

/// A QP's state (`enum ibv_qp_state`, the ones a model QP passes through); more may come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QpState {
    /// Created (`IBV_QPS_INIT`): receives may be posted, sends not yet.
    Init,
    /// Ready to receive (`IBV_QPS_RTR`): where an XRC target QP works (it never sends).
    Rtr,
    /// Connected and sending (`IBV_QPS_RTS`).
    Rts,
    /// In error (`IBV_QPS_ERR`): posted work completes with `IBV_WC_WR_FLUSH_ERR`.
    Error,
}

impl QpState {
    /// The state as libibverbs names it (`IBV_QPS_RTS`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            QpState::Init => "IBV_QPS_INIT",
            QpState::Rtr => "IBV_QPS_RTR",
            QpState::Rts => "IBV_QPS_RTS",
            QpState::Error => "IBV_QPS_ERR",
        }
    }
}

/// Why a post was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostErrorKind {
    /// The queue holds as many work requests as it can (`ENOMEM`).
    QueueFull,
    /// More scatter/gather entries than the queue was created for.
    TooManySge {
        /// Entries in the request.
        num_sge: usize,
        /// The queue's limit.
        max: u32,
    },
    /// An inline send longer than the QP's `max_inline_data`.
    InlineTooLong {
        /// Bytes in the request.
        len: u64,
        /// The QP's limit.
        max: u32,
    },
    /// The QP is not in a state that takes this work (sends before connect).
    BadState(QpState),
    /// An operation the QP type does not carry (RDMA on UD), a UD send without a
    /// destination, an XRC initiator's send naming no XRC SRQ.
    BadOpcode,
    /// The QP has no such queue (an XRC target has none; an XRC initiator has no receive
    /// queue).
    NoQueue,
}

/// A refused post: which request of the list and why. The requests before it were posted
/// and execute; the failing one and those after it were not (`*bad_wr` semantics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("post {what} refused at request {index} (errno {errno}): {kind:?}")]
pub struct PostError {
    /// The index of the refused request in the list.
    pub index: usize,
    /// Why.
    pub kind: PostErrorKind,
    /// The errno the vendor's provider returns for it.
    pub errno: i32,
    /// "send" or "recv".
    pub what: &'static str,
}

/// `ENOMEM`.
pub(crate) const ENOMEM: i32 = 12;
/// `EINVAL`.
pub(crate) const EINVAL: i32 = 22;

/// A receive posted and not yet consumed.
#[derive(Debug)]
pub(crate) struct Recv {
    pub(crate) wr_id: u64,
    pub(crate) sg: Vec<Sge>,
    /// The WQE index its completion names (mlx5 RQ: the RQ position; SRQ: the free-list
    /// index; irdma: the RQ ring index).
    pub(crate) wqe: u16,
}

/// Where a send's bytes come from.
#[derive(Debug)]
pub(crate) enum Payload {
    /// Gathered when the request executes.
    Gather(Vec<Sge>),
    /// Copied into the WQE at post time.
    Inline(Vec<u8>),
}

/// A send posted and waiting to execute (an RC send or write-with-immediate whose peer had
/// no receive, and everything posted behind it).
#[derive(Debug)]
pub(crate) struct Send {
    pub(crate) op: SendOp,
    pub(crate) payload: Payload,
    pub(crate) signaled: bool,
    pub(crate) solicited: bool,
    pub(crate) ud: Option<UdDest>,
    /// The XRC SRQ number an XRC initiator's send names.
    pub(crate) xrc_srqn: Option<u32>,
    /// The WQE index its CQE names.
    pub(crate) wqe: u16,
    /// Bytes of the request (sum of its list).
    pub(crate) len: u64,
}

/// The vendor side of a QP: how rdma-core sized its queues and where its posts are
/// recorded.
#[derive(Debug, Clone, Copy)]
pub(crate) enum QpHw {
    Mlx5(mlx5::QpLayout),
    Irdma(irdma::QpLayout),
}

/// One QP's state inside the device.
#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    pub(crate) qp_type: QpType,
    pub(crate) state: QpState,
    pub(crate) send_cq: usize,
    pub(crate) recv_cq: usize,
    pub(crate) srq: Option<usize>,
    pub(crate) caps: QpCaps,
    pub(crate) qkey: u32,
    /// The RC peer, once connected.
    pub(crate) peer: Option<usize>,
    /// The attributes it connected with ([`QpAttrs::default`] until then).
    pub(crate) attrs: QpAttrs,
    pub(crate) endpoint: Endpoint,
    pub(crate) hw: QpHw,
    /// The XRC domain of an XRC target QP.
    pub(crate) xrcd: Option<usize>,
    /// Made with `sq_sig_all`: every send completes with a CQE, signaled or not.
    pub(crate) sig_all: bool,
    /// mlx5 requester scatter-to-CQE: where the QP's send WQEs are written for the poller.
    pub(crate) req_scatter: Option<ReqScatter>,
    /// Receives posted to its own RQ, oldest first.
    pub(crate) rq: VecDeque<Recv>,
    /// Sends posted and not yet executed, oldest first.
    pub(crate) sq: VecDeque<Send>,
}

/// A model-mlx5 QP whose READ responses the device places in the CQE (requester
/// scatter-to-CQE, the QP context's `cs_req`): an RC QP made with `sq_sig_all` (the kernel's
/// `configure_requester_scat_cqe`; rdma-core asks for scatter-to-CQE on every QP by
/// default). The device writes its send WQEs into `wqes` as rdma-core's post does, since
/// the poll reads a READ's scatter list from its WQE (`mlx5_copy_to_send_wqe`).
#[derive(Debug, Clone)]
pub(crate) struct ReqScatter {
    /// The SQ: `sq_wqe_cnt` basic blocks of 64 bytes, registered with the send CQ's poller
    /// (`Registry::set_send_wqes`).
    pub(crate) wqes: Arc<DmaBuffer>,
    /// The send CQ's CQE size.
    pub(crate) cqe_size: u32,
}

impl ReqScatter {
    /// The most bytes of a response a CQE carries: 64 with a send CQ of 128-byte CQEs
    /// (`MLX5_REQ_SCAT_DATA64_CQE`, format 2), 32 with 64-byte CQEs
    /// (`MLX5_REQ_SCAT_DATA32_CQE`, format 1).
    pub(crate) fn max(&self) -> u64 {
        if self.cqe_size == 128 {
            64
        } else {
            32
        }
    }
}

/// One SRQ's state inside the device.
#[derive(Debug)]
pub(crate) struct Srq {
    pub(crate) srqn: u32,
    pub(crate) max_sge: u32,
    /// mlx5's WQE free list (`mlx5_wqe_srq_next_seg.next_wqe_index`), head and tail.
    pub(crate) next: Vec<u16>,
    pub(crate) head: u16,
    pub(crate) tail: u16,
    /// Receives posted and not consumed, in the order the device takes them.
    pub(crate) posted: VecDeque<Recv>,
    /// The CQs whose registries know this SRQ (the receive CQs of the QPs on it; an XRC
    /// SRQ's own CQ).
    pub(crate) cqs: Vec<usize>,
    /// An XRC SRQ's domain and CQ.
    pub(crate) xrc: Option<XrcSrq>,
}

/// What makes an SRQ an XRC SRQ: the domain whose target QPs deliver into it, and the CQ
/// its receives complete on (`ibv_srq_init_attr_ex.xrcd`, `.cq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct XrcSrq {
    pub(crate) xrcd: usize,
    pub(crate) cq: usize,
}

impl Srq {
    /// rdma-core's SRQ of `max` WQEs (`align_queue_size(max_wr + 1)`): the free list links
    /// every WQE to the next, head 0, tail the last; one WQE always stays in the list.
    pub(crate) fn new(srqn: u32, max: u32, max_sge: u32) -> Self {
        let next = (0..max).map(|i| ((i + 1) % max) as u16).collect();
        Srq {
            srqn,
            max_sge,
            next,
            head: 0,
            tail: (max - 1) as u16,
            posted: VecDeque::new(),
            cqs: Vec::new(),
            xrc: None,
        }
    }

    /// Takes a free WQE index (`None`: full, rdma-core's `srq->head == srq->tail`).
    pub(crate) fn take(&mut self) -> Option<u16> {
        if self.head == self.tail {
            return None;
        }
        let i = self.head;
        self.head = self.next[i as usize];
        Some(i)
    }

    /// Returns a consumed WQE to the list's tail (`mlx5_free_srq_wqe`).
    pub(crate) fn free(&mut self, i: u16) {
        if let Some(n) = self.next.get_mut(self.tail as usize) {
            *n = i;
            self.tail = i;
        }
    }
}

/// A queue pair of a model device (`struct ibv_qp`).
#[derive(Debug)]
pub struct ModelQp {
    shared: Arc<Shared>,
    id: usize,
}

impl ModelQp {
    pub(crate) fn new(shared: Arc<Shared>, id: usize) -> Self {
        ModelQp { shared, id }
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.shared.lock().qps[self.id].qpn
    }

    /// The transport type.
    pub fn qp_type(&self) -> QpType {
        self.shared.lock().qps[self.id].qp_type
    }

    /// What a peer needs to reach this QP.
    pub fn endpoint(&self) -> Endpoint {
        self.shared.lock().qps[self.id].endpoint
    }

    /// The queue sizes the QP was given (`ibv_qp_init_attr.cap` after create): the work
    /// requests each queue holds, as rdma-core sized them.
    pub fn caps(&self) -> QpCaps {
        self.shared.lock().qps[self.id].caps
    }

    /// The QP's state.
    pub fn state(&self) -> QpState {
        self.shared.lock().qps[self.id].state
    }

    /// The Q_Key a UD QP accepts ([`super::DEFAULT_QKEY`] until set).
    pub fn qkey(&self) -> u32 {
        self.shared.lock().qps[self.id].qkey
    }

    /// Sets the Q_Key a UD QP accepts (`ibv_modify_qp` with `IBV_QP_QKEY`).
    pub fn set_qkey(&self, qkey: u32) {
        self.shared.lock().qps[self.id].qkey = qkey;
    }

    /// Connects the QP (INIT → RTR → RTS). RC: to the QP `peer` names on this device (itself
    /// included); sends wait until the peer connects back. UD: ready to send and receive
    /// (`peer` is not used).
    ///
    /// # Errors
    ///
    /// [`DeviceError::NoSuchQp`] for an endpoint of no QP here, [`DeviceError::TypeMismatch`]
    /// for a UD peer, [`DeviceError::BadState`] unless the QP is in INIT.
    pub fn connect(&self, peer: &Endpoint) -> Result<(), DeviceError> {
        self.connect_with(peer, &QpAttrs::default())
    }

    /// [`ModelQp::connect`] with the attributes `attrs` ([`QpAttrs`] says what a model
    /// does with each).
    ///
    /// # Errors
    ///
    /// As [`ModelQp::connect`]; [`DeviceError::BadAttr`] for an attribute out of its
    /// range (the port's MTU is 4096, above every valid path MTU).
    pub fn connect_with(&self, peer: &Endpoint, attrs: &QpAttrs) -> Result<(), DeviceError> {
        self.shared.lock().connect(self.id, peer, attrs)
    }

    /// The attributes the QP connected with.
    pub fn attrs(&self) -> QpAttrs {
        self.shared.lock().qps[self.id].attrs
    }

    /// Posts send work requests (`ibv_post_send`); they execute now, in order, or (RC) wait
    /// for the peer's receives.
    ///
    /// # Errors
    ///
    /// [`PostError`] names the first request refused; the ones before it were posted.
    pub fn post_send(&self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        self.shared.lock().post_send(self.id, wrs)
    }

    /// Posts receive work requests (`ibv_post_recv`) to the QP's own receive queue.
    ///
    /// # Errors
    ///
    /// [`PostError`] as for sends; a QP on an SRQ has no receive queue to post to.
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        self.shared.lock().post_recv(self.id, wrs)
    }

    /// Moves the QP to the error state (`ibv_modify_qp` to `IBV_QPS_ERR`): the work it holds
    /// flushes with `IBV_WC_WR_FLUSH_ERR`, as the vendor flushes (mlx5: a CQE per WQE;
    /// irdma GEN2: a CQE per queue, the poller completes each WR).
    pub fn to_error(&self) {
        self.shared.lock().qp_to_error(self.id);
    }
}

/// A shared receive queue of a model device (`struct ibv_srq`).
#[derive(Debug)]
pub struct ModelSrq {
    shared: Arc<Shared>,
    id: usize,
}

impl ModelSrq {
    pub(crate) fn new(shared: Arc<Shared>, id: usize) -> Self {
        ModelSrq { shared, id }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub(crate) fn id(&self) -> usize {
        self.id
    }

    /// The SRQ number.
    pub fn srqn(&self) -> u32 {
        self.shared.lock().srqs[self.id].srqn
    }

    /// Whether it is an XRC SRQ ([`super::ModelDevice::create_xrc_srq`]).
    pub fn is_xrc(&self) -> bool {
        self.shared.lock().srqs[self.id].xrc.is_some()
    }

    /// Posts receives (`ibv_post_srq_recv`); any QP on the SRQ may take them.
    ///
    /// # Errors
    ///
    /// [`PostError`] for a full SRQ or too many entries.
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        self.shared.lock().post_srq_recv(self.id, wrs)
    }
}
