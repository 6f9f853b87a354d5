//! Protection domains, memory regions, queue pairs, SRQs and address handles made by
//! rdma-core, and posting dvcq's work requests ([`crate::verbs`]) to them.

use super::cq::VerbsCq;
use super::device::Context;
use super::ffi;
use super::mlx5::own::{Change, SrqOwner};
use super::ops;
use super::own::OwnCq;
use crate::sys::error::VerbsError;
use crate::verbs::{Access, Endpoint, MrSlice, QpAttrs, QpCaps, QpType, RecvWr, SendOp, SendWr};
use core::mem::{offset_of, size_of};
use dvcq_provider::DmaBuffer;
use static_assertions::const_assert_eq;
use std::sync::Arc;

// The memory-window structs the glue fills and reads, as verbs.h lays them out on the
// 64-bit ABIs rdma-core supports (`struct ibv_mw`, `struct ibv_mw_bind_info`, and the
// `bind_mw` member of `struct ibv_send_wr`'s last union).
const_assert_eq!(size_of::<ffi::ibv_mw>(), 32);
const_assert_eq!(offset_of!(ffi::ibv_mw, context), 0);
const_assert_eq!(offset_of!(ffi::ibv_mw, pd), 8);
const_assert_eq!(offset_of!(ffi::ibv_mw, rkey), 16);
const_assert_eq!(offset_of!(ffi::ibv_mw, handle), 20);
const_assert_eq!(offset_of!(ffi::ibv_mw, type_), 24);
const_assert_eq!(size_of::<ffi::ibv_mw_bind_info>(), 32);
const_assert_eq!(offset_of!(ffi::ibv_mw_bind_info, mr), 0);
const_assert_eq!(offset_of!(ffi::ibv_mw_bind_info, addr), 8);
const_assert_eq!(offset_of!(ffi::ibv_mw_bind_info, length), 16);
const_assert_eq!(offset_of!(ffi::ibv_mw_bind_info, mw_access_flags), 24);
const_assert_eq!(size_of::<ffi::ibv_send_wr>(), 128);
const_assert_eq!(offset_of!(ffi::ibv_send_wr, __bindgen_anon_1), 36);
const_assert_eq!(offset_of!(ffi::ibv_send_wr, __bindgen_anon_2), 80);
const_assert_eq!(offset_of!(ffi::ibv_send_wr__bindgen_ty_4, bind_mw), 0);
const_assert_eq!(size_of::<ffi::ibv_send_wr__bindgen_ty_4__bindgen_ty_1>(), 48);
const_assert_eq!(offset_of!(ffi::ibv_send_wr__bindgen_ty_4__bindgen_ty_1, mw), 0);
const_assert_eq!(offset_of!(ffi::ibv_send_wr__bindgen_ty_4__bindgen_ty_1, rkey), 8);
const_assert_eq!(offset_of!(ffi::ibv_send_wr__bindgen_ty_4__bindgen_ty_1, bind_info), 16);
// The XRC structs the glue fills (verbs.h: `struct ibv_xrcd_init_attr`, `struct
// ibv_srq_init_attr_ex`, the XRC members of `struct ibv_qp_init_attr_ex`, and
// `wr.qp_type.xrc.remote_srqn` in `struct ibv_send_wr`).
const_assert_eq!(size_of::<ffi::ibv_xrcd_init_attr>(), 12);
const_assert_eq!(offset_of!(ffi::ibv_xrcd_init_attr, comp_mask), 0);
const_assert_eq!(offset_of!(ffi::ibv_xrcd_init_attr, fd), 4);
const_assert_eq!(offset_of!(ffi::ibv_xrcd_init_attr, oflags), 8);
const_assert_eq!(size_of::<ffi::ibv_srq_init_attr_ex>(), 64);
const_assert_eq!(offset_of!(ffi::ibv_srq_init_attr_ex, attr), 8);
const_assert_eq!(offset_of!(ffi::ibv_srq_init_attr_ex, comp_mask), 20);
const_assert_eq!(offset_of!(ffi::ibv_srq_init_attr_ex, srq_type), 24);
const_assert_eq!(offset_of!(ffi::ibv_srq_init_attr_ex, pd), 32);
const_assert_eq!(offset_of!(ffi::ibv_srq_init_attr_ex, xrcd), 40);
const_assert_eq!(offset_of!(ffi::ibv_srq_init_attr_ex, cq), 48);
const_assert_eq!(offset_of!(ffi::ibv_qp_init_attr_ex, comp_mask), 60);
const_assert_eq!(offset_of!(ffi::ibv_qp_init_attr_ex, pd), 64);
const_assert_eq!(offset_of!(ffi::ibv_qp_init_attr_ex, xrcd), 72);
const_assert_eq!(offset_of!(ffi::ibv_send_wr, qp_type), 72);
const_assert_eq!(offset_of!(ffi::ibv_send_wr__bindgen_ty_3__bindgen_ty_1, remote_srqn), 0);

/// A protection domain (`ibv_alloc_pd`).
#[derive(Debug)]
pub(crate) struct Pd {
    ptr: *mut ffi::ibv_pd,
    ctx: Arc<Context>,
}

// SAFETY: PDs are plain kernel handles; libibverbs allows their use from any thread.
unsafe impl Send for Pd {}
// SAFETY: as above; dvcq only passes the pointer to thread-safe verbs.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a PD on `ctx`.
    pub(crate) fn new(ctx: &Arc<Context>) -> Result<Arc<Pd>, VerbsError> {
        // SAFETY: a live context.
        let ptr = unsafe { ffi::ibv_alloc_pd(ctx.as_ptr()) };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_alloc_pd"));
        }
        Ok(Arc::new(Pd { ptr, ctx: Arc::clone(ctx) }))
    }

    /// The `struct ibv_pd`.
    pub(crate) fn as_ptr(&self) -> *mut ffi::ibv_pd {
        self.ptr
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: the last handle: every MR, QP, SRQ and AH in it held an Arc and is gone.
        unsafe { ffi::ibv_dealloc_pd(self.ptr) };
    }
}

/// A memory region over memory it owns (page-aligned, zeroed), so the device writes only
/// into a buffer no Rust reference points into; the data is copied in and out.
#[derive(Debug)]
pub(crate) struct Mr {
    ptr: *mut ffi::ibv_mr,
    mem: Memory,
    _pd: Arc<Pd>,
}

/// The memory under a region: a mapping of its own, or a caller's buffer it owns until it
/// is deregistered.
enum Memory {
    Own(Arc<DmaBuffer>),
    Caller { ptr: *mut u8, len: usize, owner: Option<Box<dyn core::any::Any + Send + Sync>> },
}

impl core::fmt::Debug for Memory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Memory::Own(b) => f.debug_tuple("Own").field(&b.len()).finish(),
            Memory::Caller { ptr, len, .. } => f.debug_struct("Caller").field("ptr", ptr).field("len", len).finish(),
        }
    }
}

// SAFETY: an MR is a kernel handle plus memory accessed only by copies (DmaBuffer's accessors, or relaxed byte atomics on a caller's buffer, whose owner is `Send + Sync`); both are usable from any thread.
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

/// The bytes `offset..offset + n` of `len`, or the provider's out-of-bounds error.
fn in_bounds(offset: usize, n: usize, len: usize) -> Result<(), dvcq_provider::Error> {
    match offset.checked_add(n) {
        Some(end) if end <= len => Ok(()),
        _ => Err(dvcq_provider::Error::OutOfBounds { what: "memory region", offset, len: n, limit: len }),
    }
}

impl Mr {
    /// Registers `len` fresh bytes with `access`.
    pub(crate) fn new(pd: &Arc<Pd>, len: usize, access: Access) -> Result<Mr, VerbsError> {
        let mem = Arc::new(DmaBuffer::new(len.max(1)).map_err(|_| VerbsError { call: "mmap", errno: libc::ENOMEM })?);
        let flags = i32::try_from(access.bits()).unwrap_or(0);
        // SAFETY: the buffer is live for the MR's lifetime (the MR holds its Arc and deregisters before the buffer is dropped: fields drop after `drop`).
        let ptr = unsafe { ffi::ibv_reg_mr(pd.ptr, mem.as_ptr().cast(), len.max(1), flags) };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_reg_mr"));
        }
        Ok(Mr { ptr, mem: Memory::Own(mem), _pd: Arc::clone(pd) })
    }

    /// Registers `buf` (a caller's buffer of at least one byte), which the region owns until
    /// [`Mr::into_owner`] or its drop, after deregistration. On failure the buffer comes
    /// back with the error.
    pub(crate) fn with_buffer<B: crate::verbs::MrBuffer>(
        pd: &Arc<Pd>,
        mut buf: B,
        access: Access,
    ) -> Result<Mr, (VerbsError, B)> {
        let (ptr, len) = (buf.as_mut_ptr(), buf.len());
        let flags = i32::try_from(access.bits()).unwrap_or(0);
        // SAFETY: `MrBuffer`'s contract: `len` bytes at `ptr`, valid and unmoved while `buf` lives; the MR owns `buf` from here and drops it only after `ibv_dereg_mr` (`Drop`, `into_owner`).
        let mr = unsafe { ffi::ibv_reg_mr(pd.ptr, ptr.cast(), len, flags) };
        if mr.is_null() {
            return Err((VerbsError::last("ibv_reg_mr"), buf));
        }
        let owner: Box<dyn core::any::Any + Send + Sync> = Box::new(buf);
        Ok(Mr { ptr: mr, mem: Memory::Caller { ptr, len, owner: Some(owner) }, _pd: Arc::clone(pd) })
    }

    /// Deregisters the region and gives back the caller's buffer it owned (`None` for
    /// memory of its own).
    pub(crate) fn into_owner(mut self) -> Option<Box<dyn core::any::Any + Send + Sync>> {
        let owner = match &mut self.mem {
            Memory::Caller { owner, .. } => owner.take(),
            Memory::Own(_) => None,
        };
        drop(self);
        owner
    }

    /// The `struct ibv_mr`.
    pub(crate) fn as_ptr(&self) -> *mut ffi::ibv_mr {
        self.ptr
    }

    /// Whether it owns a caller's buffer of type `B`.
    pub(crate) fn owns<B: 'static>(&self) -> bool {
        matches!(&self.mem, Memory::Caller { owner: Some(o), .. } if o.is::<B>())
    }

    /// Copies `data` into the region at `offset`.
    pub(crate) fn write_bytes(&self, offset: usize, data: &[u8]) -> Result<(), dvcq_provider::Error> {
        match &self.mem {
            Memory::Own(b) => b.write_bytes(offset, data),
            Memory::Caller { ptr, len, .. } => {
                in_bounds(offset, data.len(), *len)?;
                for (i, &v) in data.iter().enumerate() {
                    // SAFETY: inside the buffer (checked), which the region owns and keeps mapped; the device may write it at any time, so every CPU access is atomic.
                    let byte = unsafe { &*ptr.add(offset + i).cast::<core::sync::atomic::AtomicU8>() };
                    byte.store(v, core::sync::atomic::Ordering::Relaxed);
                }
                Ok(())
            }
        }
    }

    /// Copies bytes of the region at `offset` into `out`.
    pub(crate) fn read_bytes(&self, offset: usize, out: &mut [u8]) -> Result<(), dvcq_provider::Error> {
        match &self.mem {
            Memory::Own(b) => b.read_bytes(offset, out),
            Memory::Caller { ptr, len, .. } => {
                in_bounds(offset, out.len(), *len)?;
                for (i, v) in out.iter_mut().enumerate() {
                    // SAFETY: as in `write_bytes`.
                    let byte = unsafe { &*ptr.add(offset + i).cast::<core::sync::atomic::AtomicU8>() };
                    *v = byte.load(core::sync::atomic::Ordering::Relaxed);
                }
                Ok(())
            }
        }
    }

    /// The region's address, length, lkey and rkey.
    pub(crate) fn keys(&self) -> (u64, u64, u32, u32) {
        // SAFETY: a live MR.
        let mr = unsafe { &*self.ptr };
        (mr.addr as u64, mr.length as u64, mr.lkey, mr.rkey)
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered once, deregistered once, before its memory is unmapped.
        unsafe { ffi::ibv_dereg_mr(self.ptr) };
    }
}

/// A type-2 memory window (`ibv_alloc_mw(pd, IBV_MW_TYPE_2)`), deallocated on drop
/// (`ibv_dealloc_mw`) before the PD it holds.
#[derive(Debug)]
pub(crate) struct Mw {
    ptr: *mut ffi::ibv_mw,
    _pd: Arc<Pd>,
}

// SAFETY: a window is a kernel handle; libibverbs allows its use from any thread, and the one field dvcq writes (`rkey`) is written through `&mut self` only.
unsafe impl Send for Mw {}
// SAFETY: as above; `&self` only reads.
unsafe impl Sync for Mw {}

impl Mw {
    /// Allocates a type-2 window in `pd`.
    pub(crate) fn new(pd: &Arc<Pd>) -> Result<Mw, VerbsError> {
        // SAFETY: a live PD (held by the window until it is deallocated).
        let ptr = unsafe { ops::alloc_mw(pd.ptr, ffi::IBV_MW_TYPE_2) }
            .map_err(|errno| VerbsError { call: "ibv_alloc_mw", errno })?;
        Ok(Mw { ptr, _pd: Arc::clone(pd) })
    }

    /// `mw->rkey`: the key the window was allocated with, or the one its last bind posted.
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: a live window that rdma-core allocated; `rkey` is a plain field nobody writes concurrently (rdma-core writes it only inside calls on this window, which take `&mut self` here).
        unsafe { (*self.ptr).rkey }
    }

    /// Records the rkey a posted bind gives the window, as `ibv_bind_mw` does
    /// (`mw->rkey = wr.bind_mw.rkey` after a successful post).
    fn set_rkey(&mut self, rkey: u32) {
        // SAFETY: a live window; `&mut self` excludes every other access through dvcq.
        unsafe { (*self.ptr).rkey = rkey };
    }
}

impl Drop for Mw {
    fn drop(&mut self) {
        // SAFETY: allocated once, deallocated once, before the PD (a field, dropped after).
        unsafe { ops::dealloc_mw(self.ptr) };
    }
}

/// A bind of a type-2 window over a region, as [`Qp::post_bind`] posts it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bind {
    pub(crate) wr_id: u64,
    pub(crate) signaled: bool,
    pub(crate) new_rkey: u32,
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) access: Access,
}

/// An XRC domain (`ibv_open_xrcd` with no file: `fd` -1, `O_CREAT`), closed on drop
/// (`ibv_close_xrcd`) once every XRC SRQ and target QP made on it, which hold it, is gone.
#[derive(Debug)]
pub(crate) struct Xrcd {
    ptr: *mut ffi::ibv_xrcd,
    ctx: Arc<Context>,
}

// SAFETY: a domain is a kernel handle; libibverbs allows its use from any thread and dvcq writes nothing in it.
unsafe impl Send for Xrcd {}
// SAFETY: as above.
unsafe impl Sync for Xrcd {}

impl Xrcd {
    /// Opens a domain on `ctx` not shared through a file (rdma-core's tests open theirs on a
    /// temporary file; a process-private one is `fd = -1` with `O_CREAT`).
    pub(crate) fn open(ctx: &Arc<Context>) -> Result<Arc<Xrcd>, VerbsError> {
        let mut attr = ffi::ibv_xrcd_init_attr {
            comp_mask: ffi::IBV_XRCD_INIT_ATTR_FD | ffi::IBV_XRCD_INIT_ATTR_OFLAGS,
            fd: -1,
            oflags: libc::O_CREAT,
        };
        // SAFETY: a live context and a filled attribute struct.
        let ptr = unsafe { ops::open_xrcd(ctx.as_ptr(), &mut attr) }
            .map_err(|errno| VerbsError { call: "ibv_open_xrcd", errno })?;
        Ok(Arc::new(Xrcd { ptr, ctx: Arc::clone(ctx) }))
    }
}

impl Drop for Xrcd {
    fn drop(&mut self) {
        // SAFETY: the last handle: every XRC SRQ and target QP on it held an Arc and is gone; closed once, before the context (a field, dropped after).
        unsafe { ops::close_xrcd(self.ptr) };
    }
}

/// A shared receive queue (`ibv_create_srq`), or an XRC SRQ (`ibv_create_srq_ex` of type
/// `IBV_SRQT_XRC`), which also holds its domain and the CQ its receives complete on.
#[derive(Debug)]
pub(crate) struct Srq {
    ptr: *mut ffi::ibv_srq,
    _pd: Arc<Pd>,
    /// The direct mlx5 CQ that adopted it (`backend::mlx5::own`), if one did.
    owner: SrqOwner,
    /// An XRC SRQ's number (`ibv_get_srq_num`), domain and CQ.
    xrc: Option<(u32, Arc<Xrcd>, Arc<VerbsCq>)>,
}

// SAFETY: SRQs may be posted from any thread (the provider locks).
unsafe impl Send for Srq {}
// SAFETY: as above.
unsafe impl Sync for Srq {}

impl Srq {
    /// Creates an SRQ of `max_wr` receives with `max_sge` entries each.
    pub(crate) fn new(pd: &Arc<Pd>, max_wr: u32, max_sge: u32) -> Result<Arc<Srq>, VerbsError> {
        let mut init = ffi::ibv_srq_init_attr {
            srq_context: core::ptr::null_mut(),
            attr: ffi::ibv_srq_attr { max_wr, max_sge, srq_limit: 0 },
        };
        // SAFETY: a live PD and a filled attribute struct.
        let ptr = unsafe { ffi::ibv_create_srq(pd.ptr, &mut init) };
        if ptr.is_null() {
            return Err(VerbsError::last("ibv_create_srq"));
        }
        Ok(Arc::new(Srq { ptr, _pd: Arc::clone(pd), owner: SrqOwner::default(), xrc: None }))
    }

    /// Creates an XRC SRQ of `max_wr` receives with `max_sge` entries in `xrcd`, its
    /// receives completing on `cq` (`IBV_SRQ_INIT_ATTR_TYPE | PD | XRCD | CQ`, as rdma-core's
    /// tests make theirs), and reads its number.
    pub(crate) fn new_xrc(
        pd: &Arc<Pd>,
        xrcd: &Arc<Xrcd>,
        cq: &Arc<VerbsCq>,
        max_wr: u32,
        max_sge: u32,
    ) -> Result<Arc<Srq>, VerbsError> {
        let mut init = ffi::ibv_srq_init_attr_ex {
            srq_context: core::ptr::null_mut(),
            attr: ffi::ibv_srq_attr { max_wr, max_sge, srq_limit: 0 },
            comp_mask: ffi::IBV_SRQ_INIT_ATTR_TYPE
                | ffi::IBV_SRQ_INIT_ATTR_PD
                | ffi::IBV_SRQ_INIT_ATTR_XRCD
                | ffi::IBV_SRQ_INIT_ATTR_CQ,
            srq_type: ffi::IBV_SRQT_XRC,
            pd: pd.ptr,
            xrcd: xrcd.ptr,
            cq: cq.as_ptr(),
            tm_cap: ffi::ibv_tm_cap::default(),
        };
        // SAFETY: a live context; the PD, domain and CQ are live objects of it, held by the SRQ until it is destroyed.
        let ptr = unsafe { ops::create_srq_ex(pd.ctx.as_ptr(), &mut init) }
            .map_err(|errno| VerbsError { call: "ibv_create_srq_ex", errno })?;
        // SAFETY: the SRQ just made.
        let srqn = match unsafe { ops::get_srq_num(ptr) } {
            Ok(n) => n,
            Err(errno) => {
                // SAFETY: made above, used by nothing yet, destroyed once.
                unsafe { ffi::ibv_destroy_srq(ptr) };
                return Err(VerbsError { call: "ibv_get_srq_num", errno });
            }
        };
        let xrc = Some((srqn, Arc::clone(xrcd), Arc::clone(cq)));
        Ok(Arc::new(Srq { ptr, _pd: Arc::clone(pd), owner: SrqOwner::default(), xrc }))
    }

    /// An XRC SRQ's number (what an initiator's send names); `None` for a basic SRQ.
    pub(crate) fn xrc_srqn(&self) -> Option<u32> {
        self.xrc.as_ref().map(|x| x.0)
    }

    /// Has the direct mlx5 CQ `own`, which this XRC SRQ's receives complete on, adopt it
    /// (its private `struct mlx5_srq` read and checked as `Cq::attach_srq` reads an
    /// application's XRC SRQ), or on any other CQ notes that rdma-core's poll frees its
    /// WQEs. Queued for the CQ's next poll only if every check passed.
    pub(crate) fn adopt_xrc_on(&self, own: Option<&OwnCq>) -> Result<(), String> {
        let Some(srqn) = self.xrc_srqn() else { return Ok(()) };
        let what = |e: String| format!("xrc srq {srqn:#x}: {e}");
        let own = match own {
            None => return self.owner.claim_for_rdma_core().map_err(|e| what(e.into())),
            Some(OwnCq::Irdma(_)) => return Err(what("irdma's direct backend has no XRC SRQs".into())),
            Some(OwnCq::Mlx5(own)) => own,
        };
        if !self.owner.check_direct(own).map_err(|e| what(e.into()))? {
            return Ok(());
        }
        // SAFETY: a live SRQ of the mlx5 context the CQ belongs to (the CQ's backend is mlx5's and the SRQ was made on that context).
        let dv = unsafe { super::mlx5::init_srq(self.ptr) }.map_err(what)?;
        // SAFETY: an mlx5 SRQ, so it sits in a `struct mlx5_srq`; `own.layout` is the row of the release loaded, picked when the CQ was made; the SRQ queues its removal before it is destroyed (its drop).
        let private = unsafe {
            super::mlx5::read_srq(self.ptr, &dv, own.layout, own.ctx as *mut _, own.cq as *mut _, own.cqe_v1)
        }
        .map_err(what)?;
        self.owner.claim_direct(own).map_err(|e| what(e.into()))?;
        own.lock().push(Change::AddSrq(self.ptr as usize, private));
        Ok(())
    }

    /// The raw SRQ (`Srq::as_raw`, the direct attaches' tests).
    pub(crate) fn as_ptr(&self) -> *mut ffi::ibv_srq {
        self.ptr
    }

    /// Posts receives (ordered with the polls of the direct CQ that adopted it, if any).
    pub(crate) fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostFailure> {
        let own = self.owner.get();
        let _polls_wait = own.as_ref().map(|o| o.lock());
        with_recv_list(wrs, |head, bad| {
            // SAFETY: a live SRQ; the list and its SGEs live for the call.
            unsafe { ops::post_srq_recv(self.ptr, head, bad) }
        })
    }
}

impl Drop for Srq {
    fn drop(&mut self) {
        // The direct CQ that adopted it stops reading it before rdma-core frees it.
        if let Some(own) = self.owner.take() {
            own.forget_srq(self.ptr);
        }
        // SAFETY: the last handle: every QP using it held an Arc and is gone; destroyed before its PD, domain and CQ (fields, dropped after).
        unsafe { ffi::ibv_destroy_srq(self.ptr) };
    }
}

/// A post that rdma-core refused: which request of the list, and the errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PostFailure {
    /// Index of the first request not posted.
    pub(crate) index: usize,
    /// The provider's errno.
    pub(crate) errno: i32,
}

/// A queue pair (`ibv_create_qp`) with the CQs, SRQ and PD it uses, which it keeps alive;
/// an XRC target (`ibv_create_qp_ex` on a domain) keeps its domain instead (it has no PD
/// and no CQs).
#[derive(Debug)]
pub(crate) struct Qp {
    ptr: *mut ffi::ibv_qp,
    qp_type: QpType,
    port: u8,
    gid_index: u8,
    ahs: Vec<(Endpoint, *mut ffi::ibv_ah)>,
    ctx: Arc<Context>,
    pd: Option<Arc<Pd>>,
    _send_cq: Option<Arc<VerbsCq>>,
    _recv_cq: Option<Arc<VerbsCq>>,
    _srq: Option<Arc<Srq>>,
    _xrcd: Option<Arc<Xrcd>>,
    /// The direct CQs dvcq made that adopted its send and receive queues
    /// ([`Qp::adopt_on`]).
    own_send: Option<OwnCq>,
    own_recv: Option<OwnCq>,
}

// SAFETY: QPs may be used from any thread; posting takes `&mut self`, so one thread posts at a time, and the address-handle cache is only touched there.
unsafe impl Send for Qp {}

impl Qp {
    /// Creates a QP and brings it to INIT (UD: all the way to RTS, since a UD QP needs no
    /// peer). With `no_scatter_to_cqe` (a QP on a direct mlx5 CQ dvcq made) it is made by
    /// `mlx5dv_create_qp` with `MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE`: small receives
    /// and READ responses then land in their buffers, not inside the CQE, since dvcq's
    /// memory regions are not the direct poll's to copy into (rdma-core turns scatter-to-CQE
    /// on for RC QPs by default: `providers/mlx5/verbs.c` `create_qp`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        pd: &Arc<Pd>,
        qp_type: QpType,
        send_cq: &Arc<VerbsCq>,
        recv_cq: &Arc<VerbsCq>,
        srq: Option<&Arc<Srq>>,
        caps: QpCaps,
        sq_sig_all: bool,
        port: u8,
        gid_index: u8,
        no_scatter_to_cqe: bool,
    ) -> Result<Qp, VerbsError> {
        // An XRC initiator has no receive side: no receive CQ, SRQ or receive queue (the
        // kernel drops them; rdma-core's tests pass none).
        let initiator = qp_type == QpType::XrcSend;
        let no_recv = initiator || srq.is_some();
        let mut init = ffi::ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: send_cq.as_ptr(),
            recv_cq: if initiator { core::ptr::null_mut() } else { recv_cq.as_ptr() },
            srq: srq.filter(|_| !initiator).map_or(core::ptr::null_mut(), |s| s.ptr),
            cap: ffi::ibv_qp_cap {
                max_send_wr: caps.max_send_wr,
                max_recv_wr: if no_recv { 0 } else { caps.max_recv_wr },
                max_send_sge: caps.max_send_sge,
                max_recv_sge: if initiator { 0 } else { caps.max_recv_sge },
                max_inline_data: caps.max_inline_data,
            },
            qp_type: match qp_type {
                QpType::Rc => ffi::IBV_QPT_RC,
                QpType::Uc => ffi::IBV_QPT_UC,
                QpType::Ud => ffi::IBV_QPT_UD,
                QpType::XrcSend => ffi::IBV_QPT_XRC_SEND,
                // Made on a domain by `Qp::new_xrc_target`.
                QpType::XrcRecv => return Err(VerbsError { call: "ibv_create_qp", errno: libc::EINVAL }),
            },
            sq_sig_all: i32::from(sq_sig_all),
        };
        let ptr = if no_scatter_to_cqe {
            let mut ex = ffi::ibv_qp_init_attr_ex {
                send_cq: init.send_cq,
                recv_cq: init.recv_cq,
                srq: init.srq,
                cap: init.cap,
                qp_type: init.qp_type,
                sq_sig_all: init.sq_sig_all,
                comp_mask: ffi::IBV_QP_INIT_ATTR_PD,
                pd: pd.ptr,
                ..Default::default()
            };
            let mut dv = ffi::mlx5dv_qp_init_attr {
                comp_mask: u64::from(ffi::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS),
                create_flags: ffi::MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE,
                ..Default::default()
            };
            if super::loader::mlx5_loaded().is_err() {
                return Err(VerbsError { call: "mlx5dv_create_qp", errno: libc::ENOSYS });
            }
            // SAFETY: a live PD of a live context; the CQs and SRQ are live and held by the QP until it is destroyed; the attribute structs live across the call.
            let ptr = unsafe { ffi::mlx5dv_create_qp(pd.ctx.as_ptr(), &mut ex, &mut dv) };
            if ptr.is_null() {
                return Err(VerbsError::last("mlx5dv_create_qp"));
            }
            ptr
        } else {
            // SAFETY: a live PD; the CQs and SRQ are live and held by the QP until it is destroyed.
            let ptr = unsafe { ffi::ibv_create_qp(pd.ptr, &mut init) };
            if ptr.is_null() {
                return Err(VerbsError::last("ibv_create_qp"));
            }
            ptr
        };
        let qp = Qp {
            ptr,
            qp_type,
            port,
            gid_index,
            ahs: Vec::new(),
            ctx: Arc::clone(&pd.ctx),
            pd: Some(Arc::clone(pd)),
            _send_cq: Some(Arc::clone(send_cq)),
            _recv_cq: (!initiator).then(|| Arc::clone(recv_cq)),
            _srq: srq.filter(|_| !initiator).cloned(),
            _xrcd: None,
            own_send: None,
            own_recv: None,
        };
        qp.to_init()?;
        if qp_type == QpType::Ud {
            let mut a = ffi::ibv_qp_attr { qp_state: ffi::IBV_QPS_RTR, ..Default::default() };
            qp.modify(&mut a, ffi::IBV_QP_STATE)?;
            let mut a = ffi::ibv_qp_attr { qp_state: ffi::IBV_QPS_RTS, sq_psn: 0, ..Default::default() };
            qp.modify(&mut a, ffi::IBV_QP_STATE | ffi::IBV_QP_SQ_PSN)?;
        }
        Ok(qp)
    }

    /// Creates an XRC target QP on `xrcd` (`ibv_create_qp_ex`: `IBV_QPT_XRC_RECV`,
    /// `IBV_QP_INIT_ATTR_XRCD`; no CQs, no PD, no queues) and brings it to INIT.
    pub(crate) fn new_xrc_target(xrcd: &Arc<Xrcd>, port: u8, gid_index: u8) -> Result<Qp, VerbsError> {
        let mut ex = ffi::ibv_qp_init_attr_ex {
            qp_type: ffi::IBV_QPT_XRC_RECV,
            comp_mask: ffi::IBV_QP_INIT_ATTR_XRCD,
            xrcd: xrcd.ptr,
            ..Default::default()
        };
        // SAFETY: a live context and its live domain, held by the QP until it is destroyed.
        let ptr = unsafe { ops::create_qp_ex(xrcd.ctx.as_ptr(), &mut ex) }
            .map_err(|errno| VerbsError { call: "ibv_create_qp_ex", errno })?;
        let qp = Qp {
            ptr,
            qp_type: QpType::XrcRecv,
            port,
            gid_index,
            ahs: Vec::new(),
            ctx: Arc::clone(&xrcd.ctx),
            pd: None,
            _send_cq: None,
            _recv_cq: None,
            _srq: None,
            _xrcd: Some(Arc::clone(xrcd)),
            own_send: None,
            own_recv: None,
        };
        qp.to_init()?;
        Ok(qp)
    }

    /// RESET → INIT with the attributes the kernel requires of the type (verbs.c
    /// `qp_state_table`): the port, P_Key index, and the Q_Key (UD) or the access flags (RC,
    /// XRC; an initiator's are 0, as in rdma-core's tests: it is never a responder).
    fn to_init(&self) -> Result<(), VerbsError> {
        let mut a =
            ffi::ibv_qp_attr { qp_state: ffi::IBV_QPS_INIT, pkey_index: 0, port_num: self.port, ..Default::default() };
        let mut mask = ffi::IBV_QP_STATE | ffi::IBV_QP_PKEY_INDEX | ffi::IBV_QP_PORT;
        match self.qp_type {
            QpType::Rc | QpType::XrcRecv => {
                // Atomics too, where the device has them: a responder QP without the right
                // refuses them whatever the region grants (a device with none is not asked).
                let atomics = self.ctx.device_attr().is_ok_and(|d| d.atomic_cap != ffi::IBV_ATOMIC_NONE);
                let rights = if atomics { Access::ALL | Access::REMOTE_ATOMIC } else { Access::ALL };
                a.qp_access_flags = rights.bits();
                mask |= ffi::IBV_QP_ACCESS_FLAGS;
            }
            // UC responders take RDMA WRITEs only.
            QpType::Uc => {
                a.qp_access_flags = (Access::LOCAL_WRITE | Access::REMOTE_WRITE).bits();
                mask |= ffi::IBV_QP_ACCESS_FLAGS;
            }
            QpType::XrcSend => mask |= ffi::IBV_QP_ACCESS_FLAGS,
            QpType::Ud => {
                a.qkey = crate::verbs::DEFAULT_QKEY;
                mask |= ffi::IBV_QP_QKEY;
            }
        }
        self.modify(&mut a, mask)
    }

    fn modify(&self, attr: &mut ffi::ibv_qp_attr, mask: u32) -> Result<(), VerbsError> {
        let mask = i32::try_from(mask).unwrap_or(i32::MAX);
        // SAFETY: a live QP and a filled attribute struct.
        let rc = unsafe { ffi::ibv_modify_qp(self.ptr, attr, mask) };
        if rc != 0 {
            return Err(VerbsError::code("ibv_modify_qp", rc));
        }
        Ok(())
    }

    /// Has the direct CQs dvcq made (`send` and `recv`, for its send and receive CQs)
    /// adopt the QP, and on mlx5 its SRQ where receives complete there: each reads and
    /// checks rdma-core's private structs now, and all are queued for the CQs' next polls
    /// only if every check passed. From then on posts take the CQs' poll locks, and
    /// dropping the QP queues its removal first.
    pub(crate) fn adopt_on(&mut self, send: Option<OwnCq>, recv: Option<OwnCq>) -> Result<(), String> {
        let qpn = self.qpn();
        let what = |e: String| format!("qp {qpn:#x}: {e}");
        if let (Some(srq), None) = (&self._srq, &recv) {
            srq.owner.claim_for_rdma_core().map_err(|e| what(e.into()))?;
        }
        let owners = OwnCq::distinct(&send, &recv);
        if owners.iter().all(|o| matches!(o, OwnCq::Mlx5(_))) {
            self.adopt_on_mlx5(owners)?;
        } else {
            self.adopt_on_irdma(owners)?;
        }
        (self.own_send, self.own_recv) = (send, recv);
        Ok(())
    }

    /// [`Qp::adopt_on`] for direct irdma CQs (`owners`, distinct).
    fn adopt_on_irdma(&self, owners: Vec<OwnCq>) -> Result<(), String> {
        let qpn = self.qpn();
        let mut reads = Vec::new();
        for own in &owners {
            let OwnCq::Irdma(own) = own else {
                return Err(format!("qp {qpn:#x}: its CQs are polled by the mlx5 and the irdma direct backends"));
            };
            // SAFETY: a live QP of the context the CQ was attached on, which rdma-core's irdma provider serves (the CQ's backend was chosen by it), so it sits in a `struct irdma_uqp`; `own.layout` is the row of the release loaded, picked when the CQ was attached. The QP outlives what the CQ keeps of it: its drop queues the removal before destroying it, with the CQ's poll lock held.
            reads.push((own, unsafe { super::irdma::read_qp(self.ptr, &own.cq, own.layout) }?));
        }
        for (own, private) in reads {
            own.lock().push(super::irdma::own::Change::AddQp(Box::new(private)));
        }
        Ok(())
    }

    /// [`Qp::adopt_on`] for direct mlx5 CQs (`owners`, distinct).
    fn adopt_on_mlx5(&self, owners: Vec<OwnCq>) -> Result<(), String> {
        let qpn = self.qpn();
        let what = |e: String| format!("qp {qpn:#x}: {e}");
        let owners: Vec<_> = owners
            .into_iter()
            .filter_map(|o| match o {
                OwnCq::Mlx5(o) => Some(o),
                OwnCq::Irdma(_) => None,
            })
            .collect();
        if owners.is_empty() {
            return Ok(());
        }
        // SAFETY: a live QP of an mlx5 context (its CQs' backend is mlx5's).
        let dv = unsafe { super::mlx5::init_qp(self.ptr) }.map_err(what)?;
        let mut reads = Vec::new();
        for own in owners {
            // SAFETY: an mlx5 QP, so it sits in a `struct mlx5_qp`; `own.layout` is the row of the release loaded, picked when the CQ was attached. The QP outlives what the CQ keeps of it: its drop queues the removal before destroying it.
            let private = unsafe {
                super::mlx5::read_qp(self.ptr, &dv, own.layout, own.ctx as *mut _, own.cq as *mut _, own.cqe_v1)
            }?;
            let mut new_srq = None;
            if let (Some(ptr), Some(srq)) = (private.srq, &self._srq) {
                if ptr != srq.ptr as usize {
                    return Err(what(format!("ibv_qp.srq {ptr:#x} is not the SRQ it was made with")));
                }
                if srq.owner.check_direct(&own).map_err(|e| what(e.into()))? {
                    // SAFETY: the QP's live SRQ (held by the QP), of the same mlx5 context; its drop queues its removal before destroying it.
                    let dv = unsafe { super::mlx5::init_srq(srq.ptr) }.map_err(what)?;
                    // SAFETY: as above, read with the row of the release loaded.
                    let s = unsafe {
                        super::mlx5::read_srq(srq.ptr, &dv, own.layout, own.ctx as *mut _, own.cq as *mut _, own.cqe_v1)
                    };
                    new_srq = Some((ptr, s.map_err(what)?, srq));
                }
            }
            reads.push((own, private, new_srq));
        }
        // The one step that can still be refused (another QP on the SRQ made meanwhile),
        // before anything is queued.
        for (own, _, new_srq) in &reads {
            if let Some((_, _, srq)) = new_srq {
                srq.owner.claim_direct(own).map_err(|e| what(e.into()))?;
            }
        }
        for (own, private, new_srq) in reads {
            let mut changes = own.lock();
            if let Some((ptr, s, _)) = new_srq {
                changes.push(Change::AddSrq(ptr, s));
            }
            changes.push(Change::AddQp(private));
        }
        Ok(())
    }

    /// The QP number.
    pub(crate) fn qpn(&self) -> u32 {
        // SAFETY: a live QP.
        unsafe { (*self.ptr).qp_num }
    }

    /// The raw QP, for the direct attaches.
    #[allow(dead_code)]
    pub(crate) fn as_ptr(&self) -> *mut ffi::ibv_qp {
        self.ptr
    }

    /// This QP's endpoint: its number, the port's LID and the GID it sends from.
    pub(crate) fn endpoint(&self) -> Result<Endpoint, VerbsError> {
        let ctx = &self.ctx;
        let lid = ctx.port_attr(self.port)?.lid;
        let gid = ctx.gid(self.port, i32::from(self.gid_index))?;
        Ok(Endpoint { qpn: self.qpn(), lid, gid, gid_index: self.gid_index, psn: 0 })
    }

    fn ah_attr(&self, peer: &Endpoint) -> ffi::ibv_ah_attr {
        let mut ah = ffi::ibv_ah_attr { dlid: peer.lid, port_num: self.port, ..Default::default() };
        if peer.gid != [0; 16] {
            ah.is_global = 1;
            ah.grh.dgid.raw = peer.gid;
            ah.grh.sgid_index = self.gid_index;
            ah.grh.hop_limit = 1;
        }
        ah
    }

    /// Connects an RC QP or an XRC initiator to `peer` (INIT → RTR → RTS), an XRC target
    /// to its initiator (INIT → RTR: it never sends), with `attrs` (the port's active MTU
    /// unless they name one) and the
    /// attributes the kernel requires of each type (verbs.c `qp_state_table`: an initiator
    /// takes neither `MAX_DEST_RD_ATOMIC` nor `MIN_RNR_TIMER` at RTR, a target needs only
    /// the RC set; UC takes neither, nor the RTS retry attributes). UD: nothing to do.
    pub(crate) fn connect(&mut self, peer: &Endpoint, attrs: &QpAttrs) -> Result<(), VerbsError> {
        if self.qp_type == QpType::Ud {
            return Ok(());
        }
        let mtu = match attrs.path_mtu.and_then(QpAttrs::mtu_enum) {
            Some(m) => m,
            None => self.ctx.port_attr(self.port)?.active_mtu,
        };
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::IBV_QPS_RTR,
            path_mtu: mtu,
            dest_qp_num: peer.qpn,
            rq_psn: peer.psn,
            max_dest_rd_atomic: attrs.max_dest_rd_atomic,
            min_rnr_timer: attrs.min_rnr_timer,
            ah_attr: self.ah_attr(peer),
            ..Default::default()
        };
        let mut mask =
            ffi::IBV_QP_STATE | ffi::IBV_QP_AV | ffi::IBV_QP_PATH_MTU | ffi::IBV_QP_DEST_QPN | ffi::IBV_QP_RQ_PSN;
        if !matches!(self.qp_type, QpType::XrcSend | QpType::Uc) {
            mask |= ffi::IBV_QP_MAX_DEST_RD_ATOMIC | ffi::IBV_QP_MIN_RNR_TIMER;
        }
        self.modify(&mut a, mask)?;
        if self.qp_type == QpType::XrcRecv {
            return Ok(());
        }
        if self.qp_type == QpType::Uc {
            // UC has no acknowledgements and no READs: RTS takes the send PSN only
            // (`qp_state_table`: timeout, retries and `max_rd_atomic` are refused).
            let mut a = ffi::ibv_qp_attr { qp_state: ffi::IBV_QPS_RTS, sq_psn: 0, ..Default::default() };
            return self.modify(&mut a, ffi::IBV_QP_STATE | ffi::IBV_QP_SQ_PSN);
        }
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::IBV_QPS_RTS,
            timeout: attrs.timeout,
            retry_cnt: attrs.retry_cnt,
            rnr_retry: attrs.rnr_retry,
            sq_psn: 0,
            max_rd_atomic: attrs.max_rd_atomic,
            ..Default::default()
        };
        self.modify(
            &mut a,
            ffi::IBV_QP_STATE
                | ffi::IBV_QP_TIMEOUT
                | ffi::IBV_QP_RETRY_CNT
                | ffi::IBV_QP_RNR_RETRY
                | ffi::IBV_QP_SQ_PSN
                | ffi::IBV_QP_MAX_QP_RD_ATOMIC,
        )
    }

    /// Moves the QP to the error state: outstanding work completes with `WR_FLUSH_ERR`.
    pub(crate) fn enter_error_state(&mut self) -> Result<(), VerbsError> {
        let mut a = ffi::ibv_qp_attr { qp_state: ffi::IBV_QPS_ERR, ..Default::default() };
        self.modify(&mut a, ffi::IBV_QP_STATE)
    }

    /// The address handle for a UD destination, made once per endpoint.
    fn ah_for(&mut self, peer: &Endpoint) -> Result<*mut ffi::ibv_ah, VerbsError> {
        if let Some((_, ah)) = self.ahs.iter().find(|(e, _)| e.gid == peer.gid && e.lid == peer.lid) {
            return Ok(*ah);
        }
        let mut attr = self.ah_attr(peer);
        // Only a UD QP sends through address handles, and every UD QP has a PD.
        let Some(pd) = &self.pd else { return Err(VerbsError { call: "ibv_create_ah", errno: libc::EINVAL }) };
        // SAFETY: a live PD and a filled attribute struct.
        let ah = unsafe { ffi::ibv_create_ah(pd.ptr, &mut attr) };
        if ah.is_null() {
            return Err(VerbsError::last("ibv_create_ah"));
        }
        self.ahs.push((*peer, ah));
        Ok(ah)
    }

    /// Posts send work requests, in order, as one list (ordered with the polls of the
    /// direct CQ that adopted the send queue, if any).
    pub(crate) fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostFailure> {
        let own = self.own_send.clone();
        let _polls_wait = own.as_ref().map(|o| o.lock());
        let mut sges: Vec<Vec<ffi::ibv_sge>> = wrs.iter().map(|w| w.sg_list.iter().map(sge).collect()).collect();
        let mut list: Vec<ffi::ibv_send_wr> = Vec::with_capacity(wrs.len());
        for (i, (w, s)) in wrs.iter().zip(sges.iter_mut()).enumerate() {
            let mut flags = 0;
            if w.signaled {
                flags |= ffi::IBV_SEND_SIGNALED;
            }
            if w.solicited {
                flags |= ffi::IBV_SEND_SOLICITED;
            }
            if w.inline {
                flags |= ffi::IBV_SEND_INLINE;
            }
            let mut c = ffi::ibv_send_wr {
                wr_id: w.wr_id,
                sg_list: s.as_mut_ptr(),
                num_sge: i32::try_from(s.len()).unwrap_or(i32::MAX),
                opcode: w.op.wr_opcode(),
                send_flags: flags,
                ..Default::default()
            };
            if let Some(imm) = w.op.imm() {
                c.__bindgen_anon_1.imm_data = imm.to_be();
            }
            if let Some(rkey) = w.op.invalidate_rkey() {
                c.__bindgen_anon_1.invalidate_rkey = rkey;
            }
            if let Some(srqn) = w.xrc_srqn.filter(|_| self.qp_type == QpType::XrcSend) {
                c.qp_type.xrc = ffi::ibv_send_wr__bindgen_ty_3__bindgen_ty_1 { remote_srqn: srqn };
            }
            // A bind names the window and region by pointer: it is posted by `post_bind`,
            // which holds them.
            if let SendOp::BindMw(_) = w.op {
                return Err(PostFailure { index: i, errno: libc::EINVAL });
            }
            if let SendOp::Write(r) | SendOp::WriteWithImm(r, _) | SendOp::Read(r) = w.op {
                c.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr: r.addr, rkey: r.rkey };
            }
            let atomic = match w.op {
                SendOp::CompareSwap { remote, compare, swap } => Some((remote, compare, swap)),
                SendOp::FetchAdd { remote, add } => Some((remote, add, 0)),
                _ => None,
            };
            if let Some((r, compare_add, swap)) = atomic {
                // `wr.atomic`: for fetch-and-add, `compare_add` holds the value added.
                c.wr.atomic = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                    remote_addr: r.addr,
                    compare_add,
                    swap,
                    rkey: r.rkey,
                };
            }
            if self.qp_type == QpType::Ud {
                let Some(dest) = w.ud else {
                    return Err(PostFailure { index: i, errno: libc::EINVAL });
                };
                let ah = self.ah_for(&dest.endpoint).map_err(|e| PostFailure { index: i, errno: e.errno })?;
                c.wr.ud =
                    ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 { ah, remote_qpn: dest.qpn, remote_qkey: dest.qkey };
            }
            list.push(c);
        }
        link(&mut list, |w, next| w.next = next);
        if list.is_empty() {
            return Ok(());
        }
        let head = list.as_mut_ptr();
        let mut bad = core::ptr::null_mut();
        // SAFETY: a live QP; the list, its SGEs and the AHs live for the call.
        let rc = unsafe { ops::post_send(self.ptr, head, &mut bad) };
        failure(rc, bad, head)
    }

    /// Whether `mw`, `mr` and this QP were made in one PD (IB C10-72: a type-2 window is
    /// bound by a QP of its own PD).
    pub(crate) fn same_pd(&self, mw: &Mw, mr: &Mr) -> bool {
        self.pd.as_ref().is_some_and(|pd| Arc::ptr_eq(pd, &mw._pd) && Arc::ptr_eq(pd, &mr._pd))
    }

    /// Posts a bind of `mw` over `mr` (`IBV_WR_BIND_MW`: `bind_mw.mw`, `bind_mw.rkey`,
    /// `bind_info`), ordered with the polls of the direct CQ that adopted the send queue,
    /// and on success records the window's new rkey in `mw->rkey`, as `ibv_bind_mw` does.
    /// The caller checked the range and rights; the device checks them again.
    pub(crate) fn post_bind(&mut self, mw: &mut Mw, mr: &Mr, b: &Bind) -> Result<(), PostFailure> {
        let own = self.own_send.clone();
        let _polls_wait = own.as_ref().map(|o| o.lock());
        let mut c = ffi::ibv_send_wr {
            wr_id: b.wr_id,
            opcode: ffi::IBV_WR_BIND_MW,
            send_flags: if b.signaled { ffi::IBV_SEND_SIGNALED } else { 0 },
            ..Default::default()
        };
        c.__bindgen_anon_2.bind_mw = ffi::ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
            mw: mw.ptr,
            rkey: b.new_rkey,
            bind_info: ffi::ibv_mw_bind_info {
                mr: mr.ptr,
                addr: b.addr,
                length: b.len,
                mw_access_flags: b.access.bits(),
            },
        };
        let head: *mut ffi::ibv_send_wr = &mut c;
        let mut bad = core::ptr::null_mut();
        // SAFETY: a live QP; the request lives for the call and names a live window and a live region (both borrowed for the call; the caller keeps the region alive while the window is bound over it); it has no scatter list.
        let rc = unsafe { ops::post_send(self.ptr, head, &mut bad) };
        failure(rc, bad, head)?;
        mw.set_rkey(b.new_rkey);
        Ok(())
    }

    /// Posts receive work requests (a QP without an SRQ), ordered with the polls of the
    /// direct CQ that adopted the receive queue, if any.
    pub(crate) fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostFailure> {
        let _polls_wait = self.own_recv.as_ref().map(|o| o.lock());
        with_recv_list(wrs, |head, bad| {
            // SAFETY: a live QP; the list and its SGEs live for the call.
            unsafe { ops::post_recv(self.ptr, head, bad) }
        })
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // The direct CQs that adopted it stop reading it before rdma-core frees it: their
        // next poll calls forget it first, and none runs while rdma-core destroys it and
        // cleans its CQEs out of their rings (the locks taken in one order).
        let qpn = self.qpn();
        let owners = OwnCq::distinct(&self.own_send, &self.own_recv);
        let mut polls_wait: Vec<_> = owners.iter().map(OwnCq::lock).collect();
        for w in &mut polls_wait {
            w.forget_qp(qpn);
        }
        // SAFETY: the QP is destroyed once, before the CQs, SRQ and PD it holds (fields drop after this), and its address handles after it.
        unsafe { ffi::ibv_destroy_qp(self.ptr) };
        drop(polls_wait);
        for (_, ah) in self.ahs.drain(..) {
            // SAFETY: each AH was created once by this QP and no QP uses it any more.
            unsafe { ffi::ibv_destroy_ah(ah) };
        }
    }
}

/// The C entry of `s`: memory inside the region `s` borrows, alive for the post (the
/// provider may copy it on the CPU: an inline send).
fn sge(s: &MrSlice<'_>) -> ffi::ibv_sge {
    ffi::ibv_sge { addr: s.addr(), length: s.len(), lkey: s.lkey() }
}

/// Chains a list through its `next` pointers (the last one's stays null).
fn link<T>(list: &mut [T], mut set: impl FnMut(&mut T, *mut T)) {
    for i in 1..list.len() {
        let next: *mut T = &mut list[i];
        set(&mut list[i - 1], next);
    }
}

/// The index of `bad` in the list at `head`, when a post failed.
fn failure<T>(rc: i32, bad: *mut T, head: *mut T) -> Result<(), PostFailure> {
    if rc == 0 {
        return Ok(());
    }
    let index = if bad.is_null() { 0 } else { (bad as usize - head as usize) / core::mem::size_of::<T>() };
    Err(PostFailure { index, errno: rc.abs() })
}

fn with_recv_list(
    wrs: &[RecvWr<'_>],
    post: impl FnOnce(*mut ffi::ibv_recv_wr, *mut *mut ffi::ibv_recv_wr) -> i32,
) -> Result<(), PostFailure> {
    let mut sges: Vec<Vec<ffi::ibv_sge>> = wrs.iter().map(|w| w.sg_list.iter().map(sge).collect()).collect();
    let mut list: Vec<ffi::ibv_recv_wr> = wrs
        .iter()
        .zip(sges.iter_mut())
        .map(|(w, s)| ffi::ibv_recv_wr {
            wr_id: w.wr_id,
            next: core::ptr::null_mut(),
            sg_list: s.as_mut_ptr(),
            num_sge: i32::try_from(s.len()).unwrap_or(i32::MAX),
        })
        .collect();
    link(&mut list, |w, next| w.next = next);
    if list.is_empty() {
        return Ok(());
    }
    let head = list.as_mut_ptr();
    let mut bad = core::ptr::null_mut();
    let rc = post(head, &mut bad);
    failure(rc, bad, head)
}
