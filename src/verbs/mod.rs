//! The work a device executes, in the terms every backend shares: queue pair types and
//! capabilities, scatter/gather entries, send and receive work requests, and the endpoint
//! facts two queue pairs exchange to connect.
//!
//! These are plain values with libibverbs' meanings (`struct ibv_send_wr`, `struct
//! ibv_recv_wr`, `struct ibv_sge`, `struct ibv_qp_cap`). The rdma-core glue translates them
//! into the C structures; the device models execute them themselves. Scatter/gather entries
//! name a [`MrSlice`] (a memory region, an offset and a length) rather than a raw address, so
//! a safe caller can only point a device at memory it registered.
//!
//! Layer: the bottom (the vocabulary, with `id`): it imports nothing of the crate, so that
//! `sys` and the models can speak it.

use core::any::Any;

/// Queue pair transport types (`enum ibv_qp_type`, the ones dvcq drives). More may come, as
/// XRC did: match with a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QpType {
    /// Reliable connected (`IBV_QPT_RC`).
    Rc,
    /// Unreliable connected (`IBV_QPT_UC`): SEND and RDMA WRITE (with or without
    /// immediate) to one connected peer, with no acknowledgements: no READ, no atomics,
    /// and a message the responder cannot take (no receive posted, a bad key) is dropped
    /// there while the requester completes it successfully.
    Uc,
    /// Unreliable datagram (`IBV_QPT_UD`): every receive buffer starts with the 40-byte GRH
    /// slot, as on every RDMA device.
    Ud,
    /// XRC initiator (`IBV_QPT_XRC_SEND`): a send queue only, completing on its send CQ;
    /// each send names the XRC SRQ it lands in at the peer ([`SendWr::to_srq`]).
    XrcSend,
    /// XRC target (`IBV_QPT_XRC_RECV`): made on an XRC domain (`Xrcd::create_target_qp`),
    /// with no queues and no CQs; what arrives lands in the SRQ of that domain the sender
    /// names, and completes on that SRQ's CQ.
    XrcRecv,
}

impl QpType {
    /// The transport's short name, as `ibv_devinfo` and perftest print it.
    pub const fn name(self) -> &'static str {
        match self {
            QpType::Rc => "RC",
            QpType::Uc => "UC",
            QpType::Ud => "UD",
            QpType::XrcSend => "XRC_SEND",
            QpType::XrcRecv => "XRC_RECV",
        }
    }

    /// Whether it is one of the two XRC types.
    pub const fn is_xrc(self) -> bool {
        matches!(self, QpType::XrcSend | QpType::XrcRecv)
    }

    /// Whether it is a connected type whose sends need a connected peer (RC, UC, XRC
    /// initiator).
    pub const fn is_connected_sender(self) -> bool {
        matches!(self, QpType::Rc | QpType::Uc | QpType::XrcSend)
    }

    /// Whether it carries `op` (`ibv_post_send` refuses the rest with `EINVAL`): UC only
    /// SEND, SEND with immediate and RDMA WRITE with or without immediate; UD only the
    /// SENDs; RC and the XRC initiator everything; an XRC target nothing.
    pub const fn carries(self, op: SendOp) -> bool {
        match self {
            QpType::Rc | QpType::XrcSend => true,
            QpType::Uc => {
                matches!(op, SendOp::Send | SendOp::SendWithImm(_) | SendOp::Write(_) | SendOp::WriteWithImm(..))
            }
            QpType::Ud => matches!(op, SendOp::Send | SendOp::SendWithImm(_)),
            QpType::XrcRecv => false,
        }
    }
}

/// Queue sizes asked for at QP creation (`struct ibv_qp_cap`). A device may grant more
/// (rdma-core rounds queues up); [`QpCaps::default`] asks for 64 send and 64 receive work
/// requests of one scatter/gather entry each and no inline data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Send work requests outstanding at most.
    pub max_send_wr: u32,
    /// Receive work requests outstanding at most (0 with an SRQ).
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Bytes a send may carry inline in its WQE.
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    /// `max_send_wr` 64, `max_recv_wr` 64, `max_send_sge` 1, `max_recv_sge` 1,
    /// `max_inline_data` 0.
    fn default() -> Self {
        QpCaps { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }
    }
}

/// The Q_Key every UD QP dvcq creates accepts (a UD send names it in [`UdDest::qkey`]).
pub const DEFAULT_QKEY: u32 = 0x1111_1111;

/// A UD receive buffer's first 40 bytes hold the GRH (or nothing useful on IB without one).
pub const UD_GRH_BYTES: u32 = 40;

/// Access a memory region grants (`enum ibv_access_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Access(u32);

impl Access {
    /// Local read only (the base right every region has).
    pub const LOCAL_READ: Access = Access(0);
    /// `IBV_ACCESS_LOCAL_WRITE`: the device may write the region for local work (receives,
    /// RDMA READ responses).
    pub const LOCAL_WRITE: Access = Access(1);
    /// `IBV_ACCESS_REMOTE_WRITE`.
    pub const REMOTE_WRITE: Access = Access(1 << 1);
    /// `IBV_ACCESS_REMOTE_READ`.
    pub const REMOTE_READ: Access = Access(1 << 2);
    /// `IBV_ACCESS_REMOTE_ATOMIC`: a peer may run compare-and-swap and fetch-and-add on
    /// the region ([`SendOp::CompareSwap`], [`SendOp::FetchAdd`]). Not part of
    /// [`Access::ALL`]: add it with `|` where atomics are wanted.
    pub const REMOTE_ATOMIC: Access = Access(1 << 3);
    /// `IBV_ACCESS_MW_BIND`: memory windows may be bound over the region (a region made
    /// without it refuses every bind).
    pub const MW_BIND: Access = Access(1 << 4);
    /// Every right dvcq's workloads use.
    pub const ALL: Access = Access(1 | (1 << 1) | (1 << 2));

    /// libibverbs' bit value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every right in `other` is granted here.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets of rights.
    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;

    /// Both sets of rights ([`Access::union`]).
    fn bitor(self, other: Access) -> Access {
        self.union(other)
    }
}

impl core::ops::BitOrAssign for Access {
    fn bitor_assign(&mut self, other: Access) {
        *self = self.union(other);
    }
}

pub(crate) mod buffer;
pub use buffer::MrBuffer;

/// The keys and address of a registered memory region, as a peer learns them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteRegion {
    /// Virtual address of the region's first byte (the address RDMA operations name).
    pub addr: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The remote key.
    pub rkey: u32,
}

/// A remote buffer an RDMA operation reads or writes: an address and the rkey that
/// covers it. Any numbers may be given; a device checks them (a bad key or range is a
/// `REM_ACCESS_ERR` completion, not an error here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteAddr {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
}

impl RemoteRegion {
    /// The remote address `offset` bytes into the region.
    pub const fn at(&self, offset: u64) -> RemoteAddr {
        RemoteAddr { addr: self.addr.wrapping_add(offset), rkey: self.rkey }
    }
}

/// One scatter/gather entry: `len` bytes at `offset` in a registered memory region, by the
/// region's local key and address (`struct ibv_sge`).
///
/// It borrows the region it was cut from ([`crate::Mr::slice`],
/// [`crate::model_device::ModelMr::slice`]), and only those make one: a device or a provider
/// that copies its bytes on the CPU (an inline send, data scattered from a CQE) reaches
/// only memory the region owns, and the region outlives every request that names it. A
/// slice cannot be forged:
///
/// ```compile_fail,E0560
/// let forged = dvcq::verbs::MrSlice { addr: 0x10, len: 64, lkey: 1 };
/// ```
///
/// nor outlive its region (dropping it deregisters it and frees its memory):
///
/// ```compile_fail,E0505
/// # use dvcq::{verbs::Access, Context};
/// # fn main() -> Result<(), dvcq::Error> {
/// let ctx = Context::open("model-mlx5")?;
/// let pd = ctx.alloc_pd()?;
/// let mr = pd.reg_mr(4096, Access::ALL)?;
/// let sg = [mr.slice(0, 64)?];
/// drop(mr);
/// assert_eq!(sg[0].len(), 64);
/// # Ok(())
/// # }
/// ```
///
/// while the same without the `drop` compiles:
///
/// ```
/// # use dvcq::{verbs::Access, Context};
/// # fn main() -> Result<(), dvcq::Error> {
/// let ctx = Context::open("model-mlx5")?;
/// let pd = ctx.alloc_pd()?;
/// let mr = pd.reg_mr(4096, Access::ALL)?;
/// let sg = [mr.slice(0, 64)?];
/// assert_eq!((sg[0].len(), sg[0].lkey(), sg[0].addr()), (64, mr.lkey(), mr.addr()));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy)]
pub struct MrSlice<'a> {
    sge: Sge,
    /// The region of a context ([`crate::Mr`]) it was cut from, which a QP holds while the
    /// device may write into it; `None` for a model device's own region. Type-erased so
    /// that this vocabulary module does not depend on the context layer that reads it back
    /// ([`MrSlice::region`]); read once per post, never per completion.
    region: Option<&'a (dyn Any + Send + Sync)>,
}

impl<'a> MrSlice<'a> {
    /// An entry of `sge` cut from `region`. Only the regions make slices: `sge` lies inside
    /// the region the caller borrows for `'a`.
    pub(crate) const fn new(sge: Sge, region: Option<&'a (dyn Any + Send + Sync)>) -> Self {
        MrSlice { sge, region }
    }

    /// Virtual address of the first byte.
    pub const fn addr(&self) -> u64 {
        self.sge.addr
    }

    /// Bytes.
    pub const fn len(&self) -> u32 {
        self.sge.len
    }

    /// Whether it holds no byte.
    pub const fn is_empty(&self) -> bool {
        self.sge.len == 0
    }

    /// The region's local key.
    pub const fn lkey(&self) -> u32 {
        self.sge.lkey
    }

    /// The raw entry, as a device reads it.
    pub(crate) const fn sge(&self) -> Sge {
        self.sge
    }

    /// The region it was cut from, as the `T` that made it (`None` for a model device's
    /// own region, or another type).
    pub(crate) fn region<T: Any>(&self) -> Option<&'a T> {
        self.region.and_then(|r| r.downcast_ref())
    }
}

impl core::fmt::Debug for MrSlice<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MrSlice")
            .field("addr", &self.sge.addr)
            .field("len", &self.sge.len)
            .field("lkey", &self.sge.lkey)
            .finish()
    }
}

impl PartialEq for MrSlice<'_> {
    /// The same bytes under the same key.
    fn eq(&self, other: &Self) -> bool {
        self.sge == other.sge
    }
}

impl Eq for MrSlice<'_> {}

/// A scatter/gather entry as a device holds it once posted (`struct ibv_sge`): numbers only,
/// which the device checks against its regions. Crate-private: a safe caller names memory
/// with an [`MrSlice`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Sge {
    /// Virtual address of the first byte.
    pub(crate) addr: u64,
    /// Bytes.
    pub(crate) len: u32,
    /// The local key.
    pub(crate) lkey: u32,
}

/// What a send work request does (`enum ibv_wr_opcode` with its operands).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// `IBV_WR_SEND`.
    Send,
    /// `IBV_WR_SEND_WITH_IMM`, with the immediate data (host order).
    SendWithImm(u32),
    /// `IBV_WR_RDMA_WRITE` to a remote buffer.
    Write(RemoteAddr),
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`: the write, then a receive completion at the peer.
    WriteWithImm(RemoteAddr, u32),
    /// `IBV_WR_RDMA_READ` from a remote buffer into the local scatter list.
    Read(RemoteAddr),
    /// `IBV_WR_SEND_WITH_INV`: a SEND whose receiver invalidates the memory window (or
    /// fast-registration region) with this rkey (`invalidate_rkey`) as it takes the message.
    SendWithInv(u32),
    /// `IBV_WR_BIND_MW` of a type-2 window, as the device executes it. Applications bind
    /// with [`crate::Qp::bind_mw`], which checks the window and region first; this value is
    /// what the models execute, unchecked, as hardware does.
    BindMw(MwBind),
    /// `IBV_WR_ATOMIC_CMP_AND_SWP` (RC only): at the 8-byte aligned remote address, if the
    /// 64-bit value there equals `compare`, `swap` replaces it. The value found there before
    /// lands in the local list's first 8 bytes (the list must carry 8 bytes, in memory the
    /// device may write); the completion is `IBV_WC_COMP_SWAP` with `byte_len` 8. The
    /// remote region needs [`Access::REMOTE_ATOMIC`].
    CompareSwap {
        /// The 8-byte aligned remote address and its rkey.
        remote: RemoteAddr,
        /// The value the remote one is compared with.
        compare: u64,
        /// The value written on a match.
        swap: u64,
    },
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD` (RC only): `add` is added (wrapping) to the 64-bit
    /// value at the 8-byte aligned remote address; the value before lands in the local
    /// list as for [`SendOp::CompareSwap`]; the completion is `IBV_WC_FETCH_ADD`.
    FetchAdd {
        /// The 8-byte aligned remote address and its rkey.
        remote: RemoteAddr,
        /// The value added.
        add: u64,
    },
}

/// The bytes an atomic operation reads and writes, at both ends.
pub const ATOMIC_BYTES: u32 = 8;

/// A type-2 memory window bind as the work request carries it to the device
/// (`wr.bind_mw`: the window by its current rkey, the rkey it gets, and `bind_info`: the
/// region by its lkey, the address range and the window's rights). The keys identify the
/// window and region the way the kernel's soft-RoCE driver reads them from the WQE
/// (`mw_rkey`, `mr_lkey`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MwBind {
    /// The window's rkey before the bind (`wr.bind_mw.mw->rkey`).
    pub mw_rkey: u32,
    /// The rkey it has once bound: only its low byte, the key tag, is taken
    /// (`ibv_inc_rkey(mw->rkey)`).
    pub new_rkey: u32,
    /// The region's local key (`bind_info.mr->lkey`).
    pub mr_lkey: u32,
    /// The window's first byte (`bind_info.addr`, a virtual address inside the region).
    pub addr: u64,
    /// Its length (`bind_info.length`).
    pub len: u64,
    /// What a peer may do through it (`bind_info.mw_access_flags`: `REMOTE_READ`,
    /// `REMOTE_WRITE`).
    pub access: Access,
}

/// `ibv_inc_rkey(rkey)` (verbs.h): the same key index with the next key tag (the low
/// byte, wrapping), the rkey a window gets at each bind.
pub const fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

impl SendOp {
    /// The libibverbs `IBV_WR_*` number.
    pub const fn wr_opcode(self) -> u32 {
        match self {
            SendOp::Write(_) => 0,
            SendOp::WriteWithImm(..) => 1,
            SendOp::Send => 2,
            SendOp::SendWithImm(_) => 3,
            SendOp::Read(_) => 4,
            SendOp::BindMw(_) => 8,
            SendOp::CompareSwap { .. } => 5,
            SendOp::FetchAdd { .. } => 6,
            SendOp::SendWithInv(_) => 9,
        }
    }

    /// The immediate data the op carries, if any.
    pub const fn imm(self) -> Option<u32> {
        match self {
            SendOp::SendWithImm(i) | SendOp::WriteWithImm(_, i) => Some(i),
            _ => None,
        }
    }

    /// The rkey a SEND_WITH_INV asks its receiver to invalidate.
    pub const fn invalidate_rkey(self) -> Option<u32> {
        match self {
            SendOp::SendWithInv(k) => Some(k),
            _ => None,
        }
    }

    /// Whether it is a SEND of any kind (one that takes a receive at the peer).
    pub const fn is_send(self) -> bool {
        matches!(self, SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_))
    }

    /// The remote buffer an RDMA or atomic op names.
    pub const fn remote(self) -> Option<RemoteAddr> {
        match self {
            SendOp::Write(r) | SendOp::WriteWithImm(r, _) | SendOp::Read(r) => Some(r),
            SendOp::CompareSwap { remote, .. } | SendOp::FetchAdd { remote, .. } => Some(remote),
            _ => None,
        }
    }

    /// Whether it is an atomic (compare-and-swap or fetch-and-add).
    pub const fn is_atomic(self) -> bool {
        matches!(self, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }

    /// Whether the device writes the local list (a READ's response, an atomic's original
    /// value).
    pub const fn writes_local(self) -> bool {
        matches!(self, SendOp::Read(_)) || self.is_atomic()
    }
}

/// Where a UD send goes: the destination QP, its Q_Key, and the address handle's facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdDest {
    /// Destination QP number.
    pub qpn: u32,
    /// The Q_Key the destination QP accepts.
    pub qkey: u32,
    /// The destination's endpoint (its GID and LID), from which the address handle is made.
    pub endpoint: Endpoint,
}

/// A send work request (`struct ibv_send_wr`, one of a list).
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation and its operands.
    pub op: SendOp,
    /// The local buffers: gathered for SEND/WRITE, scattered for READ.
    pub sg_list: &'a [MrSlice<'a>],
    /// `IBV_SEND_SIGNALED`: write a completion for this request even without `sq_sig_all`.
    pub signaled: bool,
    /// `IBV_SEND_SOLICITED`.
    pub solicited: bool,
    /// `IBV_SEND_INLINE`: the data is copied into the WQE at post time.
    pub inline: bool,
    /// The destination of a UD send (ignored on RC).
    pub ud: Option<UdDest>,
    /// The XRC SRQ number a send from an XRC initiator lands in at the peer
    /// (`wr.qp_type.xrc.remote_srqn`); required on an XRC initiator, refused elsewhere.
    pub xrc_srqn: Option<u32>,
}

impl<'a> SendWr<'a> {
    /// A signaled request of `op` over `sg_list`.
    pub const fn new(wr_id: u64, op: SendOp, sg_list: &'a [MrSlice<'a>]) -> Self {
        SendWr { wr_id, op, sg_list, signaled: true, solicited: false, inline: false, ud: None, xrc_srqn: None }
    }

    /// The same request, signaled or not.
    pub const fn signaled(mut self, yes: bool) -> Self {
        self.signaled = yes;
        self
    }

    /// The same request with its data copied into the WQE at post time (`IBV_SEND_INLINE`,
    /// up to the QP's `max_inline_data`): the list's memory may be reused once the post
    /// returns.
    pub const fn inline(mut self, yes: bool) -> Self {
        self.inline = yes;
        self
    }

    /// The same request solicited or not (`IBV_SEND_SOLICITED`: the receiver's CQ, armed
    /// for solicited completions only, raises an event for it).
    pub const fn solicited(mut self, yes: bool) -> Self {
        self.solicited = yes;
        self
    }

    /// The same request sent to a UD destination.
    pub const fn to(mut self, dest: UdDest) -> Self {
        self.ud = Some(dest);
        self
    }

    /// The same request from an XRC initiator, landing in the peer's XRC SRQ `srqn`
    /// (`wr.qp_type.xrc.remote_srqn`; the number `Srq::xrc_srqn` gives).
    pub const fn to_srq(mut self, srqn: u32) -> Self {
        self.xrc_srqn = Some(srqn);
        self
    }

    /// Total bytes of the scatter/gather list.
    pub fn len(&self) -> u64 {
        self.sg_list.iter().map(|s| u64::from(s.len())).sum()
    }

    /// Whether the list carries no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A receive work request (`struct ibv_recv_wr`).
///
/// The device writes into its buffers after the post returns, and on mlx5 the provider
/// copies small messages into them from the CQE (scatter-to-CQE): the QP (or SRQ) it is
/// posted to keeps each region it names registered and allocated until the queue is
/// destroyed, even if the [`crate::Mr`] is dropped first.
#[derive(Clone, Copy, Debug)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where the message lands.
    pub sg_list: &'a [MrSlice<'a>],
}

/// The attributes a connected QP is given as it connects (`struct ibv_qp_attr`, the
/// fields `ibv_modify_qp` takes at RTR and RTS). [`QpAttrs::default`] is what
/// [`crate::Qp::connect`] uses: the values `ibv_rc_pingpong` sets.
///
/// On a model device the requester and responder run inside the post, so time is
/// compressed to nothing: with `rnr_retry` below 7 a SEND (or RDMA WRITE with immediate)
/// that finds no receive at the peer has spent its retries at once and completes with
/// `IBV_WC_RNR_RETRY_EXC_ERR` (a receive posted later is too late, as one posted after the
/// last retry is on a NIC); with 7 it waits for a receive however long that takes. The
/// other values are kept and checked; a model never loses a packet, so `timeout` and
/// `retry_cnt` only matter for a peer that never answers (in error, or connected to
/// another QP), which fails at once with `IBV_WC_RETRY_EXC_ERR`, and it runs one READ or
/// atomic at a time, within any `max_rd_atomic`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttrs {
    /// Local ACK timeout, 0 to 31: 4.096 µs × 2^timeout, 0 for infinite (default 14,
    /// about 67 ms).
    pub timeout: u8,
    /// Transport retries before `IBV_WC_RETRY_EXC_ERR`, 0 to 7 (default 7).
    pub retry_cnt: u8,
    /// RNR retries before `IBV_WC_RNR_RETRY_EXC_ERR`, 0 to 7; 7 retries for ever
    /// (default 7).
    pub rnr_retry: u8,
    /// The RNR NAK timer this QP asks its requesters to wait, the IB spec's 5-bit code
    /// (default 12, 0.64 ms).
    pub min_rnr_timer: u8,
    /// Path MTU in bytes (256, 512, 1024, 2048 or 4096); `None` (default) takes the
    /// port's active MTU.
    pub path_mtu: Option<u32>,
    /// RDMA READs and atomics this QP has in flight as a requester, at least 1 (default 1).
    pub max_rd_atomic: u8,
    /// RDMA READs and atomics it answers at once as a responder, at least 1 (default 1).
    pub max_dest_rd_atomic: u8,
}

impl Default for QpAttrs {
    fn default() -> Self {
        QpAttrs {
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            path_mtu: None,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
        }
    }
}

/// The RNR retry count that retries for ever (IB spec: 7 means infinite).
pub const RNR_RETRY_FOREVER: u8 = 7;

impl QpAttrs {
    /// The same attributes with `rnr_retry` RNR retries (7: for ever).
    pub const fn rnr_retry(mut self, n: u8) -> Self {
        self.rnr_retry = n;
        self
    }

    /// `IBV_MTU_*` (1 to 5) of a path MTU in bytes.
    pub const fn mtu_enum(bytes: u32) -> Option<u32> {
        match bytes {
            256 => Some(1),
            512 => Some(2),
            1024 => Some(3),
            2048 => Some(4),
            4096 => Some(5),
            _ => None,
        }
    }

    /// The first field out of its range, by name, with its value; `None` when all fit
    /// (`timeout` and `min_rnr_timer` 0 to 31, `retry_cnt` and `rnr_retry` 0 to 7, the
    /// two `*rd_atomic` at least 1, `path_mtu` a power of two from 256 to 4096).
    pub fn out_of_range(&self) -> Option<(&'static str, u32)> {
        let fields = [
            ("timeout", self.timeout, 0, 31),
            ("retry_cnt", self.retry_cnt, 0, 7),
            ("rnr_retry", self.rnr_retry, 0, 7),
            ("min_rnr_timer", self.min_rnr_timer, 0, 31),
            ("max_rd_atomic", self.max_rd_atomic, 1, u8::MAX),
            ("max_dest_rd_atomic", self.max_dest_rd_atomic, 1, u8::MAX),
        ];
        if let Some(&(name, v, ..)) = fields.iter().find(|(_, v, lo, hi)| !(lo..=hi).contains(&v)) {
            return Some((name, u32::from(v)));
        }
        self.path_mtu.filter(|&m| Self::mtu_enum(m).is_none()).map(|m| ("path_mtu", m))
    }
}

impl<'a> RecvWr<'a> {
    /// A receive of `wr_id` into `sg_list`.
    pub const fn new(wr_id: u64, sg_list: &'a [MrSlice<'a>]) -> Self {
        RecvWr { wr_id, sg_list }
    }
}

/// What a peer needs to reach a queue pair: its number, the port's LID and the GID in use,
/// and the first packet sequence number (the facts `ibv_rc_pingpong` exchanges).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// QP number.
    pub qpn: u32,
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// GID (all zero when the port needs none).
    pub gid: [u8; 16],
    /// GID table index the QP sends with.
    pub gid_index: u8,
    /// Starting packet sequence number.
    pub psn: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wr_opcodes_have_libibverbs_numbers() {
        let r = RemoteAddr { addr: 0x1000, rkey: 7 };
        assert_eq!(SendOp::Write(r).wr_opcode(), 0);
        assert_eq!(SendOp::WriteWithImm(r, 1).wr_opcode(), 1);
        assert_eq!(SendOp::Send.wr_opcode(), 2);
        assert_eq!(SendOp::SendWithImm(1).wr_opcode(), 3);
        assert_eq!(SendOp::Read(r).wr_opcode(), 4);
        assert_eq!(SendOp::WriteWithImm(r, 9).imm(), Some(9));
        assert_eq!(SendOp::Read(r).remote(), Some(r));
        assert_eq!(SendOp::Send.remote(), None);
        assert_eq!(SendOp::SendWithInv(0x1234).wr_opcode(), 9);
        let cas = SendOp::CompareSwap { remote: r, compare: 1, swap: 2 };
        let fa = SendOp::FetchAdd { remote: r, add: 3 };
        assert_eq!((cas.wr_opcode(), fa.wr_opcode()), (5, 6));
        assert_eq!((cas.remote(), fa.remote()), (Some(r), Some(r)));
        assert!(cas.is_atomic() && fa.writes_local() && SendOp::Read(r).writes_local());
        assert!(!SendOp::Write(r).writes_local() && !SendOp::Read(r).is_atomic());
        assert_eq!(SendOp::SendWithInv(0x1234).invalidate_rkey(), Some(0x1234));
        assert_eq!(SendOp::SendWithInv(0x1234).imm(), None);
        let b = MwBind { mw_rkey: 1, new_rkey: 2, mr_lkey: 3, addr: 0, len: 1, access: Access::REMOTE_WRITE };
        assert_eq!(SendOp::BindMw(b).wr_opcode(), 8);
        assert!(SendOp::SendWithInv(1).is_send() && !SendOp::BindMw(b).is_send());
    }

    #[test]
    fn transports_carry_the_operations_ib_defines_for_them() {
        let r = RemoteAddr { addr: 0, rkey: 1 };
        let cas = SendOp::CompareSwap { remote: r, compare: 0, swap: 1 };
        assert!(QpType::Rc.carries(cas) && QpType::XrcSend.carries(SendOp::Read(r)));
        assert!(QpType::Uc.carries(SendOp::WriteWithImm(r, 1)) && QpType::Uc.carries(SendOp::SendWithImm(1)));
        assert!(!QpType::Uc.carries(SendOp::Read(r)) && !QpType::Uc.carries(cas));
        assert!(!QpType::Ud.carries(SendOp::Write(r)) && QpType::Ud.carries(SendOp::Send));
        assert!(!QpType::XrcRecv.carries(SendOp::Send));
        assert!(QpType::Uc.is_connected_sender() && !QpType::Ud.is_connected_sender());
    }

    #[test]
    fn qp_attrs_name_the_first_value_out_of_range() {
        assert_eq!(QpAttrs::default().out_of_range(), None);
        assert_eq!(QpAttrs::default().rnr_retry, RNR_RETRY_FOREVER);
        assert_eq!(QpAttrs { min_rnr_timer: 32, ..QpAttrs::default() }.out_of_range(), Some(("min_rnr_timer", 32)));
        assert_eq!(
            QpAttrs { max_dest_rd_atomic: 0, ..QpAttrs::default() }.out_of_range(),
            Some(("max_dest_rd_atomic", 0))
        );
        assert_eq!(QpAttrs { path_mtu: Some(2048), ..QpAttrs::default() }.out_of_range(), None);
        assert_eq!(
            (QpAttrs::mtu_enum(256), QpAttrs::mtu_enum(4096), QpAttrs::mtu_enum(9000)),
            (Some(1), Some(5), None)
        );
    }

    #[test]
    fn inc_rkey_steps_the_key_tag_only() {
        assert_eq!(inc_rkey(0x0012_3400), 0x0012_3401);
        assert_eq!(inc_rkey(0x0012_34ff), 0x0012_3400);
        assert_eq!(inc_rkey(0xffff_ffff), 0xffff_ff00);
    }

    #[test]
    fn access_bits_are_libibverbs_bits() {
        assert_eq!(Access::LOCAL_WRITE.bits(), 1);
        assert_eq!(Access::REMOTE_WRITE.bits(), 2);
        assert_eq!(Access::REMOTE_READ.bits(), 4);
        assert_eq!(Access::MW_BIND.bits(), 16);
        assert_eq!(Access::REMOTE_ATOMIC.bits(), 8);
        assert!(!Access::ALL.contains(Access::REMOTE_ATOMIC));
        assert!(Access::ALL.contains(Access::REMOTE_READ));
        assert!(!Access::LOCAL_WRITE.contains(Access::REMOTE_WRITE));
    }

    #[test]
    fn a_request_sums_its_list() {
        let raw = |addr, len| MrSlice::new(Sge { addr, len, lkey: 1 }, None);
        let sg = [raw(0, 3), raw(8, 5)];
        let wr = SendWr::new(1, SendOp::Send, &sg);
        assert_eq!(wr.len(), 8);
        assert!(!wr.is_empty());
        assert!(wr.signaled);
        assert!(!wr.signaled(false).signaled);
    }
}
