//! The verbs objects the emulated kernel holds per context: what each create command
//! recorded (the provider's buffers and doorbell records included), for the commands that
//! follow and for the device side that will execute the work they post.

use std::collections::HashMap;

/// A protection domain.
#[derive(Clone, Copy, Debug)]
pub struct Pd {
    pub pdn: u32,
}

/// A registered memory region.
#[derive(Clone, Copy, Debug)]
pub struct Mr {
    pub pd: u32,
    pub start: u64,
    pub length: u64,
    pub iova: u64,
    pub access: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// A memory window (`ibv_alloc_mw`): free, or bound over part of a region.
#[derive(Clone, Copy, Debug)]
pub struct Mw {
    pub pd: u32,
    /// `IBV_MW_TYPE_1` or `IBV_MW_TYPE_2`.
    pub mw_type: u8,
    /// Its key: the index part fixed, the low byte the last bind's.
    pub rkey: u32,
    pub bound: Option<MwBinding>,
}

/// What a bound window reaches.
#[derive(Clone, Copy, Debug)]
pub struct MwBinding {
    /// A type-2 window's QP: remote requests through it must arrive there.
    pub qpn: Option<u32>,
    /// The host address of the window's first byte.
    pub start: u64,
    /// The address a peer names for it (0 for a zero-based window).
    pub iova: u64,
    pub length: u64,
    /// `IBV_ACCESS_REMOTE_*` bits.
    pub access: u32,
    /// The lkey of the region under it: the window reaches nothing once that is gone.
    pub mr_lkey: u32,
}

/// A completion queue: libmlx5's ring and doorbell record. `Default` is the running state
/// of a new CQ (no CQE written, no arm, no events read), to complete a literal with.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cq {
    pub user_handle: u64,
    pub cqn: u32,
    /// Entries in the ring (a power of two; the `cqe` of the command plus one).
    pub ncqe: u32,
    pub cqe_size: u32,
    pub buf: u64,
    pub dbrec: u64,
    /// The completion channel's fd, if any.
    pub channel: Option<i32>,
    pub comp_vector: u32,
    pub comp_events_read: u32,
    pub async_events_read: u32,
    /// The device's producer index: CQEs written so far.
    pub pi: u32,
    /// The arm word of the doorbell record as the device last saw it (a sentinel at
    /// creation: libmlx5's first arm writes the zero it started from).
    pub arm_seen: u32,
    /// The arm in force: solicited-only, and the consumer index it was made at.
    pub armed: Option<(bool, u32)>,
    /// The producer index just after the last solicited or error CQE.
    pub notify_pi: u32,
    /// The CQ overran: it is in the error state and takes no more CQEs.
    pub overrun: bool,
}

/// QP states (`enum ib_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    Reset,
    Init,
    Rtr,
    Rts,
    Sqd,
    Sqe,
    Err,
}

impl QpState {
    /// The state a MODIFY_QP names, if valid.
    pub fn from_abi(v: u8) -> Option<QpState> {
        Some(match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            _ => return None,
        })
    }
}

/// QP types the emulator creates (`enum ib_qp_type` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    Rc,
    Uc,
    Ud,
}

impl QpType {
    /// The type CREATE_QP names, if supported.
    pub fn from_abi(v: u8) -> Option<QpType> {
        Some(match v {
            2 => QpType::Rc,
            3 => QpType::Uc,
            4 => QpType::Ud,
            _ => return None,
        })
    }
}

/// A QP's mlx5 work queues, as libmlx5 laid them out.
#[derive(Clone, Copy, Debug)]
pub struct Mlx5Wq {
    /// The buffer: RQ at 0, SQ at `rq_wqe_count << rq_wqe_shift`.
    pub buf: u64,
    /// be32 `[0]` RQ, `[1]` SQ doorbell record.
    pub dbrec: u64,
    pub sq_wqe_count: u32,
    pub rq_wqe_count: u32,
    pub rq_wqe_shift: u32,
    pub flags: u32,
    pub uidx: u32,
}

/// What the QP was connected to and with (RTR/RTS attributes).
#[derive(Clone, Copy, Debug, Default)]
pub struct QpPath {
    pub port: u8,
    pub access: u32,
    pub pkey_index: u16,
    pub qkey: u32,
    pub dest_qpn: u32,
    pub dgid: [u8; 16],
    pub sgid_index: u8,
    pub path_mtu: u8,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
}

/// A queue pair.
#[derive(Clone, Copy, Debug)]
pub struct Qp {
    pub user_handle: u64,
    pub qpn: u32,
    pub qp_type: QpType,
    pub pd: u32,
    pub send_cq: u32,
    pub recv_cq: u32,
    pub srq: Option<u32>,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub sq_sig_all: bool,
    pub wq: Mlx5Wq,
    pub state: QpState,
    pub path: QpPath,
    pub events_read: u32,
    /// SQ basic blocks the device has consumed (compared with the SQ doorbell record's
    /// 16-bit counter).
    pub sq_ci: u32,
    /// RQ WQEs the device has consumed.
    pub rq_ci: u32,
}

/// A shared receive queue.
#[derive(Clone, Copy, Debug)]
pub struct Srq {
    pub user_handle: u64,
    pub srqn: u32,
    pub pd: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub limit: u32,
    pub buf: u64,
    pub dbrec: u64,
    pub uidx: u32,
    pub events_read: u32,
    /// log2 of the WQE stride libmlx5 laid the SRQ out with.
    pub wqe_shift: u32,
    /// WQEs in the ring (`max_wr + 1`, a power of two).
    pub wqe_cnt: u32,
    /// The WQE the device takes next (it follows each WQE's `next_wqe_index`).
    pub head: u32,
    /// WQEs the device has taken (compared with the doorbell record's counter).
    pub consumed: u32,
}

/// A receive work queue (`ibv_create_wq`, `IBV_WQT_RQ`): libmlx5's ring and doorbell
/// record, kept for the commands that name it. No packet reaches it: only an RSS or raw
/// packet QP steers packets to WQs, and the emulated device has neither.
#[derive(Clone, Copy, Debug)]
pub struct Wq {
    pub user_handle: u64,
    /// Its RQ number (`wq_num`): a number space of its own, as the device's RQs have.
    pub wqn: u32,
    pub pd: u32,
    pub cq: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub buf: u64,
    pub dbrec: u64,
    pub wqe_cnt: u32,
    pub wqe_shift: u32,
    /// The index libmlx5 stored it under (`mlx5_store_uidx`).
    pub uidx: u32,
    pub state: WqState,
    pub events_read: u32,
}

/// `enum ib_wq_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WqState {
    Reset,
    Ready,
    Error,
}

impl WqState {
    /// The command's value (`IB_WQS_RESET`, `_RDY`, `_ERR`); `None` beyond them.
    pub fn from_abi(v: u32) -> Option<WqState> {
        match v {
            0 => Some(WqState::Reset),
            1 => Some(WqState::Ready),
            2 => Some(WqState::Error),
            _ => None,
        }
    }
}

/// An address handle (UD): what CREATE_AH named.
#[derive(Clone, Copy, Debug)]
pub struct Ah {
    pub pd: u32,
    pub dgid: [u8; 16],
}

/// A page the application mapped from the command fd.
#[derive(Clone, Copy, Debug)]
pub struct Mapping {
    pub cmd: u32,
    pub idx: u32,
    pub addr: usize,
    pub len: usize,
}

/// Which emulated device a context was opened on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    /// The ConnectX-6 Dx, `mlx5_0`.
    #[default]
    Mlx5,
    /// The E810, `irdma0`.
    Irdma,
}

/// One opened uverbs fd: its context (after GET_CONTEXT) and the objects made on it.
#[derive(Debug, Default)]
pub struct Context {
    /// The device the fd opened.
    pub device: Device,
    /// What only an irdma context has (ring registrations, ring geometry, device progress).
    pub irdma: crate::irdma::IrdmaCtx,
    /// Whether GET_CONTEXT has run.
    pub ready: bool,
    pub async_fd: Option<i32>,
    /// The static BlueFlame registers libmlx5 asked for (`total_num_bfregs`).
    pub tot_bfregs: u32,
    next_handle: u32,
    pub pds: HashMap<u32, Pd>,
    pub mrs: HashMap<u32, Mr>,
    pub mws: HashMap<u32, Mw>,
    pub cqs: HashMap<u32, Cq>,
    /// The CQs made with compressed CQEs, by handle.
    pub compressed_cqs: HashMap<u32, crate::engine::compress::CompressedCq>,
    pub qps: HashMap<u32, Qp>,
    pub srqs: HashMap<u32, Srq>,
    pub wqs: HashMap<u32, Wq>,
    pub ahs: HashMap<u32, Ah>,
    pub mappings: Vec<Mapping>,
}

impl Context {
    /// A handle no live object of this context has.
    pub fn new_handle(&mut self) -> u32 {
        self.next_handle = self.next_handle.wrapping_add(1);
        self.next_handle
    }
}
