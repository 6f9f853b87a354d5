//! Memory regions and type-2 memory windows of a model device: device-owned memory with
//! keys and rights, the checks a device makes before it touches them (lkey, rkey, range,
//! access), and a window's bind and invalidation.

use super::DeviceError;
use crate::verbs::{Access, MrSlice, MwBind, RemoteAddr, RemoteRegion, Sge};
use dvcq_provider::{DmaBuffer, MemoryRegion};
use std::sync::{Arc, Weak};

/// Where a region's keys start: index 2 up, so no key is rdma-core's mlx5
/// `MLX5_INVALID_LKEY` (0x100) or a small number a test might guess.
const FIRST_INDEX: u32 = 2;

/// The memory and facts of one registered region.
#[derive(Debug)]
pub(crate) struct MrMem {
    /// Shared with the memory regions an mlx5 poller's registry holds for inline scatter
    /// ([`MrTable::region`]).
    buf: Arc<DmaBuffer>,
    len: u64,
    addr: u64,
    key: u32,
    access: Access,
}

impl MrMem {
    fn offset_of(&self, addr: u64, len: u64) -> Option<usize> {
        let off = addr.checked_sub(self.addr)?;
        (off.checked_add(len)? <= self.len).then_some(off as usize)
    }
}

/// A registered memory region (`struct ibv_mr`). Its memory is owned by the device model and
/// read and written only through [`ModelMr::read`] and [`ModelMr::write`] (the device writes
/// it too, so no `&mut [u8]` to it is ever handed out). Dropping the handle deregisters it:
/// its keys stop working.
#[derive(Debug, Clone)]
pub struct ModelMr {
    mem: Arc<MrMem>,
}

impl ModelMr {
    /// Whether anything else holds the region (a queue's or a window's handle).
    pub(crate) fn is_held_elsewhere(&self) -> bool {
        Arc::strong_count(&self.mem) > 1
    }

    /// The address of the first byte (what scatter entries and remote addresses name).
    pub fn addr(&self) -> u64 {
        self.mem.addr
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.mem.len
    }

    /// Always false: a region has at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The local key.
    pub fn lkey(&self) -> u32 {
        self.mem.key
    }

    /// The remote key (the same number, as on mlx5 and irdma).
    pub fn rkey(&self) -> u32 {
        self.mem.key
    }

    /// The rights it was registered with.
    pub fn access(&self) -> Access {
        self.mem.access
    }

    /// What a peer needs to name this region in RDMA operations.
    pub fn remote(&self) -> RemoteRegion {
        RemoteRegion { addr: self.mem.addr, len: self.mem.len, rkey: self.mem.key }
    }

    fn check(&self, what: &'static str, offset: u64, len: u64) -> Result<usize, DeviceError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.mem.len => Ok(offset as usize),
            _ => Err(DeviceError::OutOfRange { what, offset, len, region_len: self.mem.len }),
        }
    }

    /// A scatter/gather entry for `len` bytes at `offset`, borrowing the region.
    ///
    /// # Errors
    ///
    /// [`DeviceError::OutOfRange`] if the bytes leave the region.
    pub fn slice(&self, offset: u64, len: u32) -> Result<MrSlice<'_>, DeviceError> {
        self.check("slice", offset, u64::from(len))?;
        Ok(MrSlice::new(Sge { addr: self.mem.addr + offset, len, lkey: self.mem.key }, None))
    }

    /// The whole region as one scatter/gather entry, borrowing it.
    ///
    /// # Errors
    ///
    /// [`DeviceError::OutOfRange`] for a region longer than an entry holds (2^32 - 1
    /// bytes).
    pub fn all(&self) -> Result<MrSlice<'_>, DeviceError> {
        let len = u32::try_from(self.mem.len).map_err(|_| DeviceError::OutOfRange {
            what: "slice",
            offset: 0,
            len: self.mem.len,
            region_len: self.mem.len,
        })?;
        self.slice(0, len)
    }

    /// Whether both handles name the same registration.
    pub(crate) fn same(&self, other: &ModelMr) -> bool {
        Arc::ptr_eq(&self.mem, &other.mem)
    }

    /// Copies `data` into the region at `offset`.
    ///
    /// # Errors
    ///
    /// [`DeviceError::OutOfRange`] if the bytes leave the region.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let off = self.check("write", offset, data.len() as u64)?;
        Ok(self.mem.buf.write_bytes(off, data)?)
    }

    /// Copies bytes at `offset` out of the region into `out`.
    ///
    /// # Errors
    ///
    /// [`DeviceError::OutOfRange`] if the bytes leave the region.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        let off = self.check("read", offset, out.len() as u64)?;
        Ok(self.mem.buf.read_bytes(off, out)?)
    }
}

/// Why a device could not use a local scatter/gather list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LocalFault {
    /// An lkey that names no region, bytes outside it, or a write without `LOCAL_WRITE`.
    Protection,
    /// The list holds fewer bytes than the message.
    Length,
}

/// Why a responder refused an atomic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtomicFault {
    /// A bad rkey or range, or no `REMOTE_ATOMIC` right: a remote access error.
    Access,
    /// A remote address that is not 8-byte aligned: an invalid request.
    Misaligned,
}

/// Where a window's keys start (model choice: windows and regions take key indexes from
/// one space on mlx5 and irdma; here windows sit far above any region index, so a key says
/// which table it names).
const FIRST_MW_INDEX: u32 = 0x1_0000;

/// A type-2 memory window (`struct ibv_mw` from `ibv_alloc_mw(pd, IBV_MW_TYPE_2)`): a key
/// that, once a bind executes, lets a peer reach part of a region through one QP. Dropping
/// the handle deallocates it (`ibv_dealloc_mw`): its key stops working.
#[derive(Debug)]
pub struct ModelMw {
    alive: Arc<()>,
    rkey: u32,
}

impl ModelMw {
    /// The rkey it was allocated with (key tag included). Each bind keeps the key index and
    /// takes the low byte of the bind's new rkey.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
}

/// What a bound window maps: a range of a region, the rights a peer has through it, and
/// the QP it is bound to (a type-2 window answers only requests arriving on that QP).
#[derive(Debug, Clone)]
struct Binding {
    mr: Arc<MrMem>,
    addr: u64,
    len: u64,
    access: Access,
    qp: usize,
}

/// A window's state in the device: its current key and, while valid, its binding (free
/// otherwise, as a type-2 window is after allocation and after an invalidation).
#[derive(Debug)]
struct MwEntry {
    alive: Weak<()>,
    key: u32,
    bound: Option<Binding>,
}

/// Why a bind failed (the requester's `IBV_WC_MW_BIND_ERR` completion in every case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BindFault {
    /// The rkey names no allocated window, or the window has another key now.
    NoWindow,
    /// A type-2 window must be free (unbound or invalidated) to be bound (IB o10-37.2.30).
    NotFree,
    /// The lkey names no region.
    NoRegion,
    /// The region was registered without `MW_BIND` (IB C10-73).
    NoBindRight,
    /// A writable window over a region without `LOCAL_WRITE` (IB C10-74).
    WriteWithoutLocalWrite,
    /// The range is empty or leaves the region (IB C10-75, o10-37.2.40).
    Range,
    /// Rights other than remote read and write.
    Rights,
}

/// The device's regions, by key index, and its memory windows.
#[derive(Debug, Default)]
pub(crate) struct MrTable {
    entries: Vec<(u32, Weak<MrMem>)>,
    windows: Vec<MwEntry>,
    tag: u8,
}

impl MrTable {
    pub(crate) fn register(&mut self, len: usize, access: Access) -> Result<ModelMr, DeviceError> {
        let buf = Arc::new(DmaBuffer::new(len)?);
        // Reuse the index of a dropped region, with a new tag byte, as devices reuse mkey
        // indexes with a new key byte.
        let index = match self.entries.iter().position(|(_, w)| w.strong_count() == 0) {
            Some(i) => i as u32,
            None => {
                self.entries.push((0, Weak::new()));
                self.entries.len() as u32 - 1
            }
        };
        self.tag = self.tag.wrapping_add(0x5b);
        let key = ((index + FIRST_INDEX) << 8) | u32::from(self.tag);
        let addr = buf.as_ptr() as u64;
        let mem = Arc::new(MrMem { buf, len: len as u64, addr, key, access });
        self.entries[index as usize] = (key, Arc::downgrade(&mem));
        Ok(ModelMr { mem })
    }

    /// Allocates a type-2 window, free (`ibv_alloc_mw(pd, IBV_MW_TYPE_2)`).
    pub(crate) fn alloc_mw(&mut self) -> ModelMw {
        let index = match self.windows.iter().position(|w| w.alive.strong_count() == 0) {
            Some(i) => i,
            None => {
                self.windows.push(MwEntry { alive: Weak::new(), key: 0, bound: None });
                self.windows.len() - 1
            }
        };
        self.tag = self.tag.wrapping_add(0x5b);
        let key = ((index as u32 + FIRST_MW_INDEX) << 8) | u32::from(self.tag);
        let alive = Arc::new(());
        self.windows[index] = MwEntry { alive: Arc::downgrade(&alive), key, bound: None };
        ModelMw { alive, rkey: key }
    }

    fn window_mut(&mut self, key: u32) -> Option<&mut MwEntry> {
        let index = (key >> 8).checked_sub(FIRST_MW_INDEX)?;
        let w = self.windows.get_mut(index as usize)?;
        (w.alive.strong_count() > 0 && w.key == key).then_some(w)
    }

    fn window(&self, key: u32) -> Option<&MwEntry> {
        let index = (key >> 8).checked_sub(FIRST_MW_INDEX)?;
        let w = self.windows.get(index as usize)?;
        (w.alive.strong_count() > 0 && w.key == key).then_some(w)
    }

    /// Executes a bind posted on QP `qp`, with the checks the IB spec puts on a type-2
    /// bind (the ones the kernel's soft-RoCE driver makes in `rxe_check_bind_mw`). On
    /// success the window takes the new key tag and answers remote requests on `qp` only.
    pub(crate) fn bind(&mut self, b: &MwBind, qp: usize) -> Result<u32, BindFault> {
        let rights = Access::REMOTE_READ.union(Access::REMOTE_WRITE);
        if rights.union(b.access) != rights {
            return Err(BindFault::Rights);
        }
        let mr = self.by_key(b.mr_lkey).ok_or(BindFault::NoRegion)?;
        let w = self.window_mut(b.mw_rkey).ok_or(BindFault::NoWindow)?;
        if w.bound.is_some() {
            return Err(BindFault::NotFree);
        }
        if !mr.access.contains(Access::MW_BIND) {
            return Err(BindFault::NoBindRight);
        }
        if b.access.contains(Access::REMOTE_WRITE) && !mr.access.contains(Access::LOCAL_WRITE) {
            return Err(BindFault::WriteWithoutLocalWrite);
        }
        if b.len == 0 || mr.offset_of(b.addr, b.len).is_none() {
            return Err(BindFault::Range);
        }
        w.key = (w.key & !0xff) | (b.new_rkey & 0xff);
        w.bound = Some(Binding { mr, addr: b.addr, len: b.len, access: b.access, qp });
        Ok(w.key)
    }

    /// A SEND_WITH_INV's invalidation at the responder: the window `key` names becomes free
    /// (its key stays; the next bind gives it a new tag). `false` when `key` names no
    /// window that is bound (a region's rkey included: `ibv_reg_mr` regions cannot be
    /// invalidated remotely).
    pub(crate) fn invalidate(&mut self, key: u32) -> bool {
        match self.window_mut(key) {
            Some(w) if w.bound.is_some() => {
                w.bound = None;
                true
            }
            _ => false,
        }
    }

    /// The current rkey of the window `mw` is (allocated keys change with each bind).
    pub(crate) fn mw_rkey(&self, mw: &ModelMw) -> Option<u32> {
        self.windows.iter().find(|w| w.alive.upgrade().is_some_and(|a| Arc::ptr_eq(&a, &mw.alive))).map(|w| w.key)
    }

    fn by_key(&self, key: u32) -> Option<Arc<MrMem>> {
        let index = (key >> 8).checked_sub(FIRST_INDEX)?;
        let (k, w) = self.entries.get(index as usize)?;
        if *k != key {
            return None;
        }
        w.upgrade()
    }

    /// The live region of `key` as a poller's registry takes it
    /// (`Registry::add_memory_region`, what `Cq::attach_mr` gives an attached CQ): its
    /// address, length and lkey over the same memory. `None` for a key that names no live
    /// region.
    pub(crate) fn region(&self, key: u32) -> Option<MemoryRegion> {
        let mr = self.by_key(key)?;
        mr.buf.memory_region(0, mr.len as usize, key).ok()
    }

    /// Whether `key` names a live region of `len` bytes at `addr` (a registry's copy of
    /// it is current).
    pub(crate) fn is_live(&self, key: u32, addr: u64, len: usize) -> bool {
        self.by_key(key).is_some_and(|mr| mr.addr == addr && mr.len == len as u64)
    }

    /// The region and offset of `len` bytes at `addr` under `key` with `rights`.
    fn resolve(&self, key: u32, addr: u64, len: u64, rights: Access) -> Option<(Arc<MrMem>, usize)> {
        let mr = self.by_key(key)?;
        if !mr.access.contains(rights) {
            return None;
        }
        let off = mr.offset_of(addr, len)?;
        Some((mr, off))
    }

    /// The region and offset of `len` bytes at `addr` that a request arriving on QP
    /// `responder` reaches with `rkey` and `rights`: a region's own rkey, or a valid window
    /// bound to that QP, whose range and rights bound the access.
    fn resolve_remote(
        &self,
        rkey: u32,
        addr: u64,
        len: u64,
        rights: Access,
        responder: usize,
    ) -> Option<(Arc<MrMem>, usize)> {
        if (rkey >> 8) < FIRST_MW_INDEX {
            return self.resolve(rkey, addr, len, rights);
        }
        let b = self.window(rkey)?.bound.as_ref()?;
        let inside = addr.checked_sub(b.addr).and_then(|o| o.checked_add(len)).is_some_and(|end| end <= b.len);
        if b.qp != responder || !b.access.contains(rights) || !inside {
            return None;
        }
        let off = b.mr.offset_of(addr, len)?;
        Some((Arc::clone(&b.mr), off))
    }

    /// Appends the bytes of `list` to `out` (a gather for a send, a write or a read
    /// response).
    pub(crate) fn gather(&self, list: &[Sge], out: &mut Vec<u8>) -> Result<(), LocalFault> {
        for s in list.iter().filter(|s| s.len > 0) {
            let (mr, off) =
                self.resolve(s.lkey, s.addr, u64::from(s.len), Access::LOCAL_READ).ok_or(LocalFault::Protection)?;
            let start = out.len();
            out.resize(start + s.len as usize, 0);
            mr.buf.read_bytes(off, &mut out[start..]).map_err(|_| LocalFault::Protection)?;
        }
        Ok(())
    }

    /// Appends the bytes of `list` found by address alone, whatever the keys say: an inline
    /// send's data, which the provider copies from the application's memory at post time.
    /// `false` when an entry lies in no registered region (memory the model cannot read).
    pub(crate) fn gather_by_addr(&self, list: &[Sge], out: &mut Vec<u8>) -> bool {
        for s in list.iter().filter(|s| s.len > 0) {
            let found = self.entries.iter().filter_map(|(_, w)| w.upgrade()).find_map(|mr| {
                let off = mr.offset_of(s.addr, u64::from(s.len))?;
                Some((mr, off))
            });
            let Some((mr, off)) = found else { return false };
            let start = out.len();
            out.resize(start + s.len as usize, 0);
            if mr.buf.read_bytes(off, &mut out[start..]).is_err() {
                return false;
            }
        }
        true
    }

    /// Writes `data` across `list` in order; the list must hold all of it, and every entry
    /// the data reaches must allow local writes.
    pub(crate) fn scatter(&self, list: &[Sge], data: &[u8]) -> Result<(), LocalFault> {
        let room: u64 = list.iter().map(|s| u64::from(s.len)).sum();
        if room < data.len() as u64 {
            return Err(LocalFault::Length);
        }
        let mut rest = data;
        for s in list.iter().filter(|s| s.len > 0) {
            if rest.is_empty() {
                break;
            }
            let n = rest.len().min(s.len as usize);
            let (mr, off) =
                self.resolve(s.lkey, s.addr, n as u64, Access::LOCAL_WRITE).ok_or(LocalFault::Protection)?;
            mr.buf.write_bytes(off, &rest[..n]).map_err(|_| LocalFault::Protection)?;
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Checks that every entry of `list` could be written (a READ's local list, before the
    /// request goes out).
    pub(crate) fn check_writable(&self, list: &[Sge]) -> Result<(), LocalFault> {
        for s in list.iter().filter(|s| s.len > 0) {
            self.resolve(s.lkey, s.addr, u64::from(s.len), Access::LOCAL_WRITE).ok_or(LocalFault::Protection)?;
        }
        Ok(())
    }

    /// Writes `data` at a remote address (an RDMA WRITE's target, arriving on QP
    /// `responder`); `false` for a bad key, range or missing `REMOTE_WRITE`. A zero-length
    /// write checks nothing, as on IB.
    pub(crate) fn write_remote(&self, to: RemoteAddr, data: &[u8], responder: usize) -> bool {
        if data.is_empty() {
            return true;
        }
        match self.resolve_remote(to.rkey, to.addr, data.len() as u64, Access::REMOTE_WRITE, responder) {
            Some((mr, off)) => mr.buf.write_bytes(off, data).is_ok(),
            None => false,
        }
    }

    /// Runs an atomic at a remote address (arriving on QP `responder`): compare-and-swap
    /// when `compare` is given, else fetch-and-add of `operand`; the 64-bit value in memory
    /// is big-endian when `big_endian` (ConnectX), else in host order (rxe). The 8 bytes
    /// found there before, as memory held them (what the requester's list receives).
    pub(crate) fn atomic(
        &self,
        at: RemoteAddr,
        compare: Option<u64>,
        operand: u64,
        big_endian: bool,
        responder: usize,
    ) -> Result<[u8; 8], AtomicFault> {
        if at.addr % u64::from(crate::verbs::ATOMIC_BYTES) != 0 {
            return Err(AtomicFault::Misaligned);
        }
        let (mr, off) =
            self.resolve_remote(at.rkey, at.addr, 8, Access::REMOTE_ATOMIC, responder).ok_or(AtomicFault::Access)?;
        let mut found = [0u8; 8];
        mr.buf.read_bytes(off, &mut found).map_err(|_| AtomicFault::Access)?;
        let old = if big_endian { u64::from_be_bytes(found) } else { u64::from_ne_bytes(found) };
        let new = match compare {
            Some(c) if c == old => operand,
            Some(_) => old,
            None => old.wrapping_add(operand),
        };
        let b = if big_endian { new.to_be_bytes() } else { new.to_ne_bytes() };
        mr.buf.write_bytes(off, &b).map_err(|_| AtomicFault::Access)?;
        Ok(found)
    }

    /// Reads `len` bytes at a remote address into `out` (an RDMA READ's source, arriving on
    /// QP `responder`); `false` for a bad key, range or missing `REMOTE_READ`.
    pub(crate) fn read_remote(&self, from: RemoteAddr, len: usize, out: &mut Vec<u8>, responder: usize) -> bool {
        out.clear();
        if len == 0 {
            return true;
        }
        match self.resolve_remote(from.rkey, from.addr, len as u64, Access::REMOTE_READ, responder) {
            Some((mr, off)) => {
                out.resize(len, 0);
                mr.buf.read_bytes(off, out).is_ok()
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_ranges_and_rights_are_checked() {
        let mut t = MrTable::default();
        let a = t.register(64, Access::ALL).unwrap();
        let ro = t.register(64, Access::LOCAL_READ).unwrap();
        assert_ne!(a.lkey(), ro.lkey());
        assert!(a.lkey() >= 0x200);
        a.write(60, &[1, 2, 3, 4]).unwrap();
        assert!(matches!(a.write(61, &[0; 4]), Err(DeviceError::OutOfRange { offset: 61, len: 4, .. })));
        assert!(a.slice(0, 65).is_err());
        let mut out = Vec::new();
        t.gather(&[a.slice(60, 4).unwrap().sge()], &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        // A read-only region takes no receive; a list too short is a length fault.
        assert_eq!(t.scatter(&[ro.slice(0, 8).unwrap().sge()], &[0; 4]), Err(LocalFault::Protection));
        assert_eq!(t.scatter(&[a.slice(0, 2).unwrap().sge()], &[0; 4]), Err(LocalFault::Length));
        // Remote rights.
        assert!(t.write_remote(a.remote().at(0), &[9], 0));
        assert!(!t.write_remote(ro.remote().at(0), &[9], 0));
        assert!(!t.write_remote(a.remote().at(64), &[9], 0));
        assert!(!t.write_remote(RemoteAddr { addr: a.addr(), rkey: a.rkey() ^ 1 }, &[9], 0));
        assert!(t.write_remote(ro.remote().at(1000), &[], 0), "zero-length writes check nothing");
        // A dropped region's keys stop working, and its index comes back with a new key.
        let key = a.lkey();
        let remote = a.remote();
        drop(a);
        assert!(!t.write_remote(remote.at(0), &[1], 0));
        let b = t.register(8, Access::ALL).unwrap();
        assert_eq!(b.lkey() >> 8, key >> 8);
        assert_ne!(b.lkey(), key);
    }

    fn bind_of(mw: u32, mr: &ModelMr, offset: u64, len: u64, access: Access) -> MwBind {
        MwBind {
            mw_rkey: mw,
            new_rkey: crate::verbs::inc_rkey(mw),
            mr_lkey: mr.lkey(),
            addr: mr.addr() + offset,
            len,
            access,
        }
    }

    /// A type-2 window: free after allocation; a bind gives it the new key tag and a range
    /// of the region a peer reaches on the bound QP only, within its rights; an invalidation
    /// frees it again (its key then fails); the bind's checks refuse what the IB spec
    /// refuses.
    #[test]
    fn windows_bind_answer_on_their_qp_and_invalidate() {
        let mut t = MrTable::default();
        let mr = t.register(4096, Access::ALL.union(Access::MW_BIND)).unwrap();
        let plain = t.register(4096, Access::ALL).unwrap();
        let ro = t.register(4096, Access::MW_BIND).unwrap();
        let mw = t.alloc_mw();
        let k0 = mw.rkey();
        assert!(k0 >> 8 >= FIRST_MW_INDEX);
        assert!(!t.write_remote(RemoteAddr { addr: mr.addr(), rkey: k0 }, &[1], 3), "a free window answers nothing");
        let rw = Access::REMOTE_READ.union(Access::REMOTE_WRITE);
        assert_eq!(t.bind(&bind_of(k0, &plain, 0, 64, rw), 3), Err(BindFault::NoBindRight));
        assert_eq!(t.bind(&bind_of(k0, &ro, 0, 64, rw), 3), Err(BindFault::WriteWithoutLocalWrite));
        assert_eq!(t.bind(&bind_of(k0, &mr, 4000, 200, rw), 3), Err(BindFault::Range));
        assert_eq!(t.bind(&bind_of(k0, &mr, 0, 0, rw), 3), Err(BindFault::Range));
        assert_eq!(t.bind(&bind_of(k0, &mr, 0, 64, Access::LOCAL_WRITE), 3), Err(BindFault::Rights));
        assert_eq!(t.bind(&bind_of(k0 ^ 0x100, &mr, 0, 64, rw), 3), Err(BindFault::NoWindow));
        let k1 = t.bind(&bind_of(k0, &mr, 1024, 64, Access::REMOTE_WRITE), 3).unwrap();
        assert_eq!(k1, crate::verbs::inc_rkey(k0));
        assert_eq!(t.mw_rkey(&mw), Some(k1));
        assert_eq!(t.bind(&bind_of(k1, &mr, 0, 64, rw), 3), Err(BindFault::NotFree), "bound: not free");
        let at = |off| RemoteAddr { addr: mr.addr() + off, rkey: k1 };
        assert!(t.write_remote(at(1024 + 60), &[7, 8, 9, 10], 3));
        let mut got = [0u8; 4];
        mr.read(1084, &mut got).unwrap();
        assert_eq!(got, [7, 8, 9, 10]);
        assert!(!t.write_remote(at(1024 + 61), &[0; 4], 3), "past the window's end");
        assert!(!t.write_remote(at(1020), &[0; 4], 3), "before its start");
        assert!(!t.write_remote(at(1024), &[0], 4), "another QP");
        assert!(!t.write_remote(RemoteAddr { addr: mr.addr() + 1024, rkey: k0 }, &[0], 3), "the old key");
        let mut out = Vec::new();
        assert!(!t.read_remote(at(1024), 4, &mut out, 3), "no REMOTE_READ through it");
        assert!(!t.invalidate(mr.rkey()), "a region is not invalidated remotely");
        assert!(t.invalidate(k1));
        assert!(!t.invalidate(k1), "already free");
        assert!(!t.write_remote(at(1024), &[0], 3), "invalidated");
        // Free again: bound anew with the next tag.
        let k2 = t.bind(&bind_of(k1, &mr, 0, 8, rw), 3).unwrap();
        assert_eq!(k2, crate::verbs::inc_rkey(k1));
        // Deallocated: its key stops working, its index comes back with another key.
        drop(mw);
        assert!(!t.write_remote(RemoteAddr { addr: mr.addr(), rkey: k2 }, &[0], 3));
        let again = t.alloc_mw();
        assert_eq!(again.rkey() >> 8, k0 >> 8);
        assert_ne!(again.rkey(), k2);
    }
}
