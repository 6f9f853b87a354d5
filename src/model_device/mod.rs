//! Model devices that execute posted work: `model-mlx5` (a ConnectX-6) and `model-e810`
//! (an E810, irdma GEN2).
//!
//! A [`ModelDevice`] owns memory regions, completion queues, queue pairs and shared receive
//! queues. Work posted to a QP runs at the doorbell, in order per QP: the device copies the
//! bytes between registered regions, checks keys, ranges and rights, and writes the CQEs
//! the vendor's hardware writes into the vendor model's ring (`dvcq_mlx5_dv::model`,
//! `dvcq_e810_dv::model`). [`ModelCq::poll`] runs dvcq's real poller for that vendor over
//! the ring, so completions come out of the same parse code as on a NIC.
//!
//! Layer: above the vocabulary (`verbs`, `id`) and `error` (the library's error, for what a
//! model refuses in the API's terms), which it may import with the vendor crates; it names no
//! other module of the crate (a backend polls its CQs, `context` opens it).
//!
//! The bookkeeping an application keeps on hardware is kept here the same way: every post
//! is recorded in the poller's registry (mlx5 `Registry`, irdma `QpRegistry`) the way
//! rdma-core records it, so the wr_ids of unsignaled sends are recovered by the pollers as
//! rdma-core recovers them, and a send queue's room is freed only when the poller consumes
//! the covering CQE.
//!
//! # Execution rules
//!
//! - SEND, SEND_WITH_IMM and SEND_WITH_INV take the peer's next receive (its RQ or SRQ);
//!   WRITE_WITH_IMM too. SEND_WITH_INV frees the type-2 memory window it names as the
//!   receive completes (`IBV_WC_WITH_INV` with that rkey).
//! - A memory-window bind is local work on the QP that posts it: the window then answers
//!   remote reads and writes arriving on that QP, within its range and rights, until it is
//!   invalidated (or deallocated).
//!   An RC message with no receive posted waits (receiver not ready, retried forever) until
//!   one is; later work on the same QP waits behind it.
//! - Remote operations check the rkey, the range and the rights; a local list checks the
//!   lkey, the range and, where the device writes, `LOCAL_WRITE`.
//! - A failing operation puts the QP (and, where the responder detected it, the responder)
//!   in error, and the outstanding work flushes as each vendor flushes: mlx5 writes one flush
//!   CQE per WQE; irdma GEN2 writes one flush CQE per queue and rdma-core's poller makes the
//!   completions from its own queue state.
//! - A CQ the device finds full overruns: the CQE is dropped, the CQ is in error for good
//!   (a CQ error event on its channel, [`ModelCq::error`]), and it takes no more CQEs. The
//!   QP whose CQE was dropped goes to error, and so does any QP whose CQE it refuses later;
//!   their work flushes. A post to such a QP succeeds (the provider only writes the WQE and
//!   rings the doorbell) and flushes at once, into the CQ in error: nothing executes, no
//!   completion arrives, and the send queue's room, freed only by polled CQEs, runs out
//!   ([`PostErrorKind::QueueFull`]) as it does under rdma-core.
//! - UD: the 40-byte GRH slot at the start of the receive buffer, the source QP, a Q_Key
//!   check (a mismatch is dropped without a completion) and messages up to the MTU.
//!
//! # Locking
//!
//! The device's state sits behind one mutex. A poll takes it once per call, never per CQE;
//! the poll loop inside is the vendor poller's, without locks.
//!
//! Resources live as long as the device: dropping a handle does not destroy the QP or CQ
//! (a dropped memory region's keys stop working, as after `ibv_dereg_mr`).
//!
//! # Example
//!
//! A send between two connected RC QPs of `model-e810`:
//!
//! ```
//! use dvcq::model_device::{ModelDevice, ModelVendor};
//! use dvcq::verbs::{Access, QpCaps, QpType, RecvWr, SendOp, SendWr};
//! use dvcq::{Completion, WcOpcode};
//!
//! let dev = ModelDevice::new(ModelVendor::Irdma);
//! let mut cq = dev.create_cq(16)?;
//! let a = dev.create_qp(QpType::Rc, &cq, &cq, QpCaps::default(), None)?;
//! let b = dev.create_qp(QpType::Rc, &cq, &cq, QpCaps::default(), None)?;
//! a.connect(&b.endpoint())?;
//! b.connect(&a.endpoint())?;
//! let mr = dev.reg_mr(4096, Access::ALL)?;
//! mr.write(0, b"ping")?;
//! b.post_recv(&[RecvWr { wr_id: 2, sg_list: &[mr.slice(1024, 64)?] }])?;
//! a.post_send(&[SendWr::new(1, SendOp::Send, &[mr.slice(0, 4)?])])?;
//!
//! let mut wcs = [Completion::default(); 4];
//! let polled = cq.poll(&mut wcs); // the completions it filled, at the front of wcs
//! assert_eq!(polled.len(), 2);
//! assert_eq!((polled[0].wr_id, polled[0].opcode, polled[0].byte_len), (2, WcOpcode::Recv, 4));
//! assert_eq!((polled[1].wr_id, polled[1].opcode), (1, WcOpcode::Send));
//! let mut got = [0u8; 4];
//! mr.read(1024, &mut got)?;
//! assert_eq!(&got, b"ping");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod clock;
mod cq;
mod event;
mod exec;
mod fabric;
mod flush;
mod irdma;
mod memory;
mod mlx5;
mod post;
mod qp;
mod xrc;

pub use cq::{Mlx5CqAttrs, ModelCq, ModelCqStats};
pub use event::{
    ArmState, ArmStats, ChannelEvent, ChannelEventKind, ModelChannel, Moderation, MAX_MODERATION_PERIOD_US,
};
pub use memory::{ModelMr, ModelMw};
pub use qp::{ModelQp, ModelSrq, PostError, PostErrorKind, QpState};
pub use xrc::ModelXrcd;

use crate::verbs::Endpoint;
use std::sync::{Arc, Mutex, MutexGuard};

/// Which vendor's device a [`ModelDevice`] plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModelVendor {
    /// A ConnectX-6 (`model-mlx5`): mlx5 CQEs of 64 bytes, per-WQE flushes.
    Mlx5,
    /// An E810 (`model-e810`): irdma GEN2 CQEs of 32 bytes, per-queue flushes completed by
    /// the poller, no SRQ.
    Irdma,
}

impl ModelVendor {
    /// The device name, as `dvcq devices` lists the models.
    pub const fn device_name(self) -> &'static str {
        match self {
            ModelVendor::Mlx5 => "model-mlx5",
            ModelVendor::Irdma => "model-e810",
        }
    }
}

/// What the device reports (`struct ibv_device_attr`, the fields dvcq's workloads size
/// themselves by), plus the path MTU its ports run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceAttrs {
    /// `max_cqe`: the largest `cqe` [`ModelDevice::create_cq`] accepts.
    pub max_cqe: u32,
    /// `max_qp_wr`.
    pub max_qp_wr: u32,
    /// `max_sge`: scatter/gather entries per WR (the device's; an mlx5 RC send queue holds
    /// fewer, as rdma-core sizes its WQEs).
    pub max_sge: u32,
    /// `max_srq` (0: no SRQ).
    pub max_srq: u32,
    /// `max_srq_wr`.
    pub max_srq_wr: u32,
    /// `max_srq_sge`.
    pub max_srq_sge: u32,
    /// The largest `max_inline_data` a QP may ask for.
    pub max_inline_data: u32,
    /// Path MTU in bytes (model choice: both models run IBV_MTU_4096).
    pub mtu: u32,
    /// `max_msg_sz`: the longest message a QP sends, reads or writes; a longer request
    /// completes with `IBV_WC_LOC_LEN_ERR` before any byte is gathered.
    pub max_msg_sz: u64,
}

impl DeviceAttrs {
    /// What each model reports.
    ///
    /// ConnectX-6, as the kernel's `mlx5_ib_query_device` derives them from the device
    /// capabilities (`log_max_cq_sz` 22, `log_max_qp_sz` 15, `log_max_srq_sz` 15,
    /// `max_wqe_sz_sq`/`_rq` 512): `max_cqe = 2^22 - 1`, `max_qp_wr = 2^15`, `max_sge =
    /// min((512 - ctrl - raddr) / 16, 512 / 16) = 30`, `max_srq_wr = 2^15 - 1`,
    /// `max_srq_sge = 512 / 16 - 1 = 31`. `max_srq` 2^23 (`log_max_srq` 23). The inline
    /// limit is what rdma-core's WQE sizing leaves in a 512-byte RC WQE (316 bytes).
    /// `max_msg_sz = 2^30` (`log_max_msg` 30, what `mlx5_ib_query_port` reports).
    ///
    /// E810: rdma-core v44's irdma limits (`IRDMA_MAX_WQ_FRAGMENT_COUNT` 13,
    /// `IRDMA_MAX_INLINE_DATA_SIZE` 101), `max_qp_wr = (32768 quanta - 258 reserved) / 8
    /// quanta per WR = 4063`, no SRQ on GEN2, `max_msg_sz = 2^31 - 1` (the kernel's
    /// `IRDMA_MAX_OUTBOUND_MSG_SIZE`). `max_cqe` is a model choice: the E810 reports
    /// 1048575, but a CQ that large needs a ring of 2^21 slots, beyond the 20-bit CQE index
    /// of the shadow area and the irdma model's 2^20 slots; the model reports the largest
    /// request whose ring it holds, 2^19 - 1.
    pub const fn of(vendor: ModelVendor) -> DeviceAttrs {
        match vendor {
            ModelVendor::Mlx5 => DeviceAttrs {
                max_cqe: (1 << 22) - 1,
                max_qp_wr: 1 << 15,
                max_sge: 30,
                max_srq: 1 << 23,
                max_srq_wr: (1 << 15) - 1,
                max_srq_sge: 31,
                max_inline_data: mlx5::MAX_RC_INLINE,
                mtu: 4096,
                max_msg_sz: 1 << 30,
            },
            ModelVendor::Irdma => DeviceAttrs {
                max_cqe: (1 << 19) - 1,
                max_qp_wr: 4063,
                max_sge: 13,
                max_srq: 0,
                max_srq_wr: 0,
                max_srq_sge: 0,
                max_inline_data: 101,
                mtu: 4096,
                max_msg_sz: (1 << 31) - 1,
            },
        }
    }
}

/// Errors creating model resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// Device memory could not be set up.
    #[error(transparent)]
    Memory(#[from] dvcq_provider::Error),
    /// The mlx5 model refused its configuration.
    #[error(transparent)]
    Mlx5(#[from] dvcq_mlx5_dv::model::ModelError),
    /// The mlx5 poller could not be opened.
    #[error(transparent)]
    Mlx5Cq(#[from] dvcq_mlx5_dv::Mlx5Error),
    /// The mlx5 registry refused a QP or SRQ.
    #[error(transparent)]
    Mlx5Registry(#[from] dvcq_mlx5_dv::RegistryError),
    /// The irdma model refused its configuration.
    #[error(transparent)]
    Irdma(#[from] dvcq_e810_dv::model::ModelError),
    /// The irdma registry refused a QP.
    #[error(transparent)]
    IrdmaRegistry(#[from] dvcq_e810_dv::RegistryError),
    /// A size outside what the device accepts (`EINVAL` from rdma-core).
    #[error("{what} of {value} is outside what {device} accepts (at most {max})")]
    TooLarge {
        /// Which attribute.
        what: &'static str,
        /// The value asked for.
        value: u64,
        /// The most the device takes.
        max: u64,
        /// The device.
        device: &'static str,
    },
    /// A size the device refuses for another reason.
    #[error("{what} of {value} is not accepted: {why}")]
    BadSize {
        /// Which attribute.
        what: &'static str,
        /// The value asked for.
        value: u64,
        /// Why.
        why: &'static str,
    },
    /// Memory-region rights verbs refuse.
    #[error("access {bits:#x} is refused: {why}")]
    BadAccess {
        /// The `IBV_ACCESS_*` bits asked for.
        bits: u32,
        /// Why.
        why: &'static str,
    },
    /// The device does not have this feature (`EOPNOTSUPP`).
    #[error("{what} is not supported by {device}")]
    Unsupported {
        /// The feature.
        what: &'static str,
        /// The device.
        device: &'static str,
    },
    /// A handle from another device.
    #[error("the {what} belongs to another device")]
    ForeignHandle {
        /// What was passed.
        what: &'static str,
    },
    /// An endpoint naming no QP of this device.
    #[error("no qp {qpn:#x} on this device (gid {gid:02x?})")]
    NoSuchQp {
        /// The QP number asked for.
        qpn: u32,
        /// The GID it was asked at.
        gid: [u8; 16],
    },
    /// A QP in a state that does not allow the operation.
    #[error("qp {qpn:#x} is {state:?}: {what}")]
    BadState {
        /// The QP.
        qpn: u32,
        /// Its state.
        state: QpState,
        /// What could not be done.
        what: &'static str,
    },
    /// A connect attribute out of its range ([`crate::verbs::QpAttrs::out_of_range`]).
    #[error("qp {qpn:#x}: QP attribute {attr} = {value} is out of range")]
    BadAttr {
        /// The QP.
        qpn: u32,
        /// The attribute.
        attr: &'static str,
        /// Its value.
        value: u32,
    },
    /// An RC QP connected to a QP of another type.
    #[error("qp {qpn:#x} is {ours}, the peer {peer:#x} is {theirs}")]
    TypeMismatch {
        /// This QP.
        qpn: u32,
        /// Its type name.
        ours: &'static str,
        /// The peer QP.
        peer: u32,
        /// The peer's type name.
        theirs: &'static str,
    },
    /// A memory-region access outside the region.
    #[error("{what}: offset {offset} + {len} bytes is outside the region of {region_len} bytes")]
    OutOfRange {
        /// Read or write.
        what: &'static str,
        /// Offset asked for.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// The region's length.
        region_len: u64,
    },
}

/// State shared by every handle of one device.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) vendor: ModelVendor,
    pub(crate) attrs: DeviceAttrs,
    /// This device's port GID (an IPv4-mapped address, model choice: 192.0.2.x, the
    /// documentation range, x from a per-process device counter).
    pub(crate) gid: [u8; 16],
    pub(crate) fabric: Mutex<fabric::Fabric>,
    /// Whether the moderation timer thread runs (started by the first CQ given a period).
    pub(crate) timer: Mutex<bool>,
    /// The async events (the context's async fd), made with the first channel.
    pub(crate) async_events: Mutex<Option<Arc<event::AsyncEvents>>>,
}

impl Shared {
    /// The device state. A poisoned lock (a panic in another thread while it held the
    /// state) still hands the state out: nothing in the model leaves it half-changed.
    pub(crate) fn lock(&self) -> MutexGuard<'_, fabric::Fabric> {
        self.fabric.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A model device: `model-mlx5` or `model-e810`.
#[derive(Debug, Clone)]
pub struct ModelDevice {
    shared: Arc<Shared>,
}

impl ModelDevice {
    /// A new device of `vendor`, with nothing created on it yet.
    pub fn new(vendor: ModelVendor) -> Self {
        Self::with_attrs(vendor, DeviceAttrs::of(vendor))
    }

    /// A new device of `vendor` that reports `attrs` ([`ModelDevice::attrs`],
    /// [`crate::Context::info`]) instead of its own, as a faulty or emulated device might (a
    /// kernel that answers `ibv_query_device` with zeros, say): for showing that what a
    /// device reports is checked where it is used. What the model itself accepts stays its
    /// own, as a device's limits do not change with what its driver answers.
    pub fn with_attrs(vendor: ModelVendor, attrs: DeviceAttrs) -> Self {
        use std::sync::atomic::{AtomicU8, Ordering};
        static NEXT: AtomicU8 = AtomicU8::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[192, 0, 2, n]);
        let fabric = Mutex::new(fabric::Fabric::new(vendor, DeviceAttrs::of(vendor), gid));
        ModelDevice {
            shared: Arc::new(Shared {
                vendor,
                attrs,
                gid,
                fabric,
                timer: Mutex::new(false),
                async_events: Mutex::new(None),
            }),
        }
    }

    /// The vendor it plays.
    pub fn vendor(&self) -> ModelVendor {
        self.shared.vendor
    }

    /// The device name (`model-mlx5`, `model-e810`).
    pub fn name(&self) -> &'static str {
        self.shared.vendor.device_name()
    }

    /// What the device reports ([`DeviceAttrs::of`] its vendor, unless made
    /// [`ModelDevice::with_attrs`]).
    pub fn attrs(&self) -> DeviceAttrs {
        self.shared.attrs
    }

    /// What the device counts, as `dvcq stat` shows it: `cqs` and `qps` made, `cqes_written`
    /// into CQ rings, `cqes_dropped` because a CQ was full, `cq_overflow` (CQs an overrun put
    /// in error, named as mlx5's queue counter is), and `qps_in_error`.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let f = self.shared.lock();
        let sum = |g: fn(&cq::CqState) -> u64| f.cqs.iter().map(g).sum::<u64>();
        vec![
            ("cqs", f.cqs.len() as u64),
            ("cqes_written", sum(|c| c.written)),
            ("cqes_dropped", sum(|c| c.dropped)),
            ("cq_overflow", sum(|c| u64::from(c.overrun.is_some()))),
            ("qps", f.qps.len() as u64),
            ("qps_in_error", f.qps.iter().filter(|q| q.state == QpState::Error).count() as u64),
        ]
    }

    /// The port's GID (what [`Endpoint::gid`] of this device's QPs holds).
    pub fn gid(&self) -> [u8; 16] {
        self.shared.gid
    }

    fn same(&self, other: &Arc<Shared>, what: &'static str) -> Result<(), DeviceError> {
        if Arc::ptr_eq(&self.shared, other) {
            Ok(())
        } else {
            Err(DeviceError::ForeignHandle { what })
        }
    }

    /// Registers `len` bytes of device-owned, zeroed memory with `access` rights
    /// (`ibv_reg_mr`). The region's bytes are read and written through the handle.
    ///
    /// # Errors
    ///
    /// [`DeviceError::Memory`] if the memory cannot be mapped; [`DeviceError::BadSize`] for
    /// a length of 0 or beyond 2^32 - 1 bytes (the most one scatter entry names);
    /// [`DeviceError::BadAccess`] for remote write without local write, which
    /// `ibv_reg_mr` refuses (`EINVAL`).
    pub fn reg_mr(&self, len: usize, access: crate::verbs::Access) -> Result<ModelMr, DeviceError> {
        use crate::verbs::Access;
        if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE) {
            return Err(DeviceError::BadAccess { bits: access.bits(), why: "REMOTE_WRITE needs LOCAL_WRITE" });
        }
        if len == 0 || len as u64 > u64::from(u32::MAX) {
            return Err(DeviceError::BadSize {
                what: "memory region length",
                value: len as u64,
                why: "1 to 2^32 - 1 bytes",
            });
        }
        let mut f = self.shared.lock();
        f.mrs.register(len, access)
    }

    /// Allocates a type-2 memory window (`ibv_alloc_mw(pd, IBV_MW_TYPE_2)`), free until a
    /// bind ([`crate::verbs::SendOp::BindMw`]) executes on a QP. The model has one
    /// protection domain, so any QP may bind it.
    pub fn alloc_mw(&self) -> ModelMw {
        self.shared.lock().mrs.alloc_mw()
    }

    /// The current rkey of `mw` (each bind gives it a new key tag), or `None` for a window
    /// of another device.
    pub fn mw_rkey(&self, mw: &ModelMw) -> Option<u32> {
        self.shared.lock().mrs.mw_rkey(mw)
    }

    /// Creates a CQ for at least `cqe` completions (`ibv_create_cq`), its ring sized as
    /// rdma-core sizes it: mlx5 `cqe + 1` rounded up to a power of two; irdma `2 (cqe + 1)`
    /// (room for two-slot extended CQEs; even, at least 4).
    ///
    /// # Errors
    ///
    /// [`DeviceError::TooLarge`] for 0 or more than [`DeviceAttrs::max_cqe`]; the vendor
    /// model's and poller's own errors.
    pub fn create_cq(&self, cqe: u32) -> Result<ModelCq, DeviceError> {
        let id = self.shared.lock().create_cq(cqe, None)?;
        Ok(ModelCq::new(self.shared.clone(), id))
    }

    /// Creates a CQ as [`ModelDevice::create_cq`] does, with mlx5 attributes
    /// (`mlx5dv_create_cq`): 128-byte CQEs, padding, CQE compression. The device writes
    /// compressed sessions in the basic layout whenever consecutive completions allow it
    /// (as under constant PCIe back-pressure), and writes a session out when the CQ is
    /// polled. The only data it puts in a CQE's first half is a READ response scattered to
    /// the CQE (an RC QP made with `sq_sig_all`, [`ModelDevice::create_qp_ex`]); a padded CQ
    /// looks like a 128-byte-CQE one.
    ///
    /// # Errors
    ///
    /// As [`ModelDevice::create_cq`]; [`DeviceError::BadSize`] for the attributes rdma-core
    /// or the kernel refuse (`EINVAL`): a CQE size other than 64 or 128, padding without
    /// 128-byte CQEs, a compression format that is not exactly one of HASH, CSUM,
    /// CSUM_STRIDX; [`DeviceError::Unsupported`] on `model-e810`.
    pub fn create_cq_mlx5(&self, cqe: u32, attrs: Mlx5CqAttrs) -> Result<ModelCq, DeviceError> {
        let id = self.shared.lock().create_cq(cqe, Some(attrs))?;
        Ok(ModelCq::new(self.shared.clone(), id))
    }

    /// Creates an SRQ of at least `max_wr` receives with `max_sge` entries each
    /// (`ibv_create_srq`).
    ///
    /// # Errors
    ///
    /// [`DeviceError::Unsupported`] on `model-e810` (GEN2 has no SRQ);
    /// [`DeviceError::TooLarge`] beyond the device's SRQ limits.
    pub fn create_srq(&self, max_wr: u32, max_sge: u32) -> Result<ModelSrq, DeviceError> {
        let id = self.shared.lock().create_srq(max_wr, max_sge)?;
        Ok(ModelSrq::new(self.shared.clone(), id))
    }

    /// Creates a QP of `qp_type` (`ibv_create_qp`) whose send completions go to `send_cq` and
    /// receive completions to `recv_cq` (the same CQ or two), receiving from `srq` if given.
    /// The queues are sized as rdma-core sizes them ([`ModelQp::caps`] reports what they
    /// hold). The QP starts in [`QpState::Init`]: receives may be posted, sends after
    /// [`ModelQp::connect`].
    ///
    /// # Errors
    ///
    /// [`DeviceError::ForeignHandle`] for a CQ or SRQ of another device; size errors as
    /// rdma-core refuses them; [`DeviceError::Unsupported`] for an SRQ on `model-e810`.
    pub fn create_qp(
        &self,
        qp_type: crate::verbs::QpType,
        send_cq: &ModelCq,
        recv_cq: &ModelCq,
        caps: crate::verbs::QpCaps,
        srq: Option<&ModelSrq>,
    ) -> Result<ModelQp, DeviceError> {
        self.create_qp_ex(&ModelQpInit { qp_type, send_cq, recv_cq, caps, srq, sq_sig_all: false })
    }

    /// Creates a QP as [`ModelDevice::create_qp`] does, from all of `init` (rdma-core's
    /// `ibv_qp_init_attr`). With `sq_sig_all` every send completes with a CQE, whether the
    /// request asked for one or not. On `model-mlx5` an RC QP made so gets small READ responses
    /// inside its send CQE (requester scatter-to-CQE, as the kernel configures it for such a
    /// QP): up to 64 bytes with a send CQ of 128-byte CQEs, up to 32 with 64-byte CQEs; the
    /// poll copies them into the READ's scatter list.
    ///
    /// # Errors
    ///
    /// As [`ModelDevice::create_qp`].
    pub fn create_qp_ex(&self, init: &ModelQpInit<'_>) -> Result<ModelQp, DeviceError> {
        let ModelQpInit { qp_type, send_cq, recv_cq, caps, srq, sq_sig_all } = *init;
        self.same(send_cq.shared(), "send cq")?;
        self.same(recv_cq.shared(), "recv cq")?;
        if let Some(s) = srq {
            self.same(s.shared(), "srq")?;
        }
        let srq = srq.map(ModelSrq::id);
        let id = self.shared.lock().create_qp(qp_type, send_cq.id(), recv_cq.id(), caps, srq, sq_sig_all)?;
        Ok(ModelQp::new(self.shared.clone(), id))
    }
}

/// What [`ModelDevice::create_qp_ex`] makes: rdma-core's `ibv_qp_init_attr` for a model QP.
#[derive(Debug, Clone, Copy)]
pub struct ModelQpInit<'a> {
    /// RC, UD, or an XRC initiator.
    pub qp_type: crate::verbs::QpType,
    /// Where its send completions go.
    pub send_cq: &'a ModelCq,
    /// Where its receive completions go (the same CQ or another).
    pub recv_cq: &'a ModelCq,
    /// Queue sizes.
    pub caps: crate::verbs::QpCaps,
    /// Receives come from this SRQ instead of the QP's own receive queue.
    pub srq: Option<&'a ModelSrq>,
    /// Every send completes with a CQE, signaled or not.
    pub sq_sig_all: bool,
}

/// The Q_Key a UD QP accepts until told otherwise (the value `ibv_ud_pingpong` uses).
pub const DEFAULT_QKEY: u32 = 0x1111_1111;

/// The endpoint facts of a QP on a device with `gid`.
pub(crate) fn endpoint_of(qpn: u32, gid: [u8; 16]) -> Endpoint {
    // Model choice: RoCE (no LID), GID index 0, a starting PSN derived from the QPN.
    Endpoint { qpn, lid: 0, gid, gid_index: 0, psn: (qpn.wrapping_mul(0x9e37_79b9)) & 0xff_ffff }
}
