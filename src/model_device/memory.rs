//! Memory regions of a model device: device-owned memory with keys and rights, and the
//! checks a device makes before it touches them (lkey, rkey, range, access).

use super::DeviceError;
use crate::verbs::{Access, MrSlice, RemoteAddr, RemoteRegion};
use dvcq_provider::DmaBuffer;
use std::sync::{Arc, Weak};

/// Where a region's keys start: index 2 up, so no key is rdma-core's mlx5
/// `MLX5_INVALID_LKEY` (0x100) or a small number a test might guess.
const FIRST_INDEX: u32 = 2;

/// The memory and facts of one registered region.
#[derive(Debug)]
pub(crate) struct MrMem {
    buf: DmaBuffer,
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

    /// A scatter/gather entry for `len` bytes at `offset`.
    ///
    /// # Errors
    ///
    /// [`DeviceError::OutOfRange`] if the bytes leave the region.
    pub fn slice(&self, offset: u64, len: u32) -> Result<MrSlice, DeviceError> {
        self.check("slice", offset, u64::from(len))?;
        Ok(MrSlice { addr: self.mem.addr + offset, len, lkey: self.mem.key })
    }

    /// The whole region as one scatter/gather entry (regions up to 2^32 - 1 bytes).
    pub fn all(&self) -> MrSlice {
        MrSlice { addr: self.mem.addr, len: self.mem.len as u32, lkey: self.mem.key }
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

/// The device's regions, by key index.
#[derive(Debug, Default)]
pub(crate) struct MrTable {
    entries: Vec<(u32, Weak<MrMem>)>,
    tag: u8,
}

impl MrTable {
    pub(crate) fn register(&mut self, len: usize, access: Access) -> Result<ModelMr, DeviceError> {
        let buf = DmaBuffer::new(len)?;
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

    fn by_key(&self, key: u32) -> Option<Arc<MrMem>> {
        let index = (key >> 8).checked_sub(FIRST_INDEX)?;
        let (k, w) = self.entries.get(index as usize)?;
        if *k != key {
            return None;
        }
        w.upgrade()
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

    /// Appends the bytes of `list` to `out` (a gather for a send, a write or a read
    /// response).
    pub(crate) fn gather(&self, list: &[MrSlice], out: &mut Vec<u8>) -> Result<(), LocalFault> {
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
    pub(crate) fn gather_by_addr(&self, list: &[MrSlice], out: &mut Vec<u8>) -> bool {
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
    pub(crate) fn scatter(&self, list: &[MrSlice], data: &[u8]) -> Result<(), LocalFault> {
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
    pub(crate) fn check_writable(&self, list: &[MrSlice]) -> Result<(), LocalFault> {
        for s in list.iter().filter(|s| s.len > 0) {
            self.resolve(s.lkey, s.addr, u64::from(s.len), Access::LOCAL_WRITE).ok_or(LocalFault::Protection)?;
        }
        Ok(())
    }

    /// Writes `data` at a remote address (an RDMA WRITE's target); `false` for a bad key,
    /// range or missing `REMOTE_WRITE`. A zero-length write checks nothing, as on IB.
    pub(crate) fn write_remote(&self, to: RemoteAddr, data: &[u8]) -> bool {
        if data.is_empty() {
            return true;
        }
        match self.resolve(to.rkey, to.addr, data.len() as u64, Access::REMOTE_WRITE) {
            Some((mr, off)) => mr.buf.write_bytes(off, data).is_ok(),
            None => false,
        }
    }

    /// Reads `len` bytes at a remote address into `out` (an RDMA READ's source); `false`
    /// for a bad key, range or missing `REMOTE_READ`.
    pub(crate) fn read_remote(&self, from: RemoteAddr, len: usize, out: &mut Vec<u8>) -> bool {
        out.clear();
        if len == 0 {
            return true;
        }
        match self.resolve(from.rkey, from.addr, len as u64, Access::REMOTE_READ) {
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
        t.gather(&[a.slice(60, 4).unwrap()], &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        // A read-only region takes no receive; a list too short is a length fault.
        assert_eq!(t.scatter(&[ro.slice(0, 8).unwrap()], &[0; 4]), Err(LocalFault::Protection));
        assert_eq!(t.scatter(&[a.slice(0, 2).unwrap()], &[0; 4]), Err(LocalFault::Length));
        // Remote rights.
        assert!(t.write_remote(a.remote().at(0), &[9]));
        assert!(!t.write_remote(ro.remote().at(0), &[9]));
        assert!(!t.write_remote(a.remote().at(64), &[9]));
        assert!(!t.write_remote(RemoteAddr { addr: a.addr(), rkey: a.rkey() ^ 1 }, &[9]));
        assert!(t.write_remote(ro.remote().at(1000), &[]), "zero-length writes check nothing");
        // A dropped region's keys stop working, and its index comes back with a new key.
        let key = a.lkey();
        let remote = a.remote();
        drop(a);
        assert!(!t.write_remote(remote.at(0), &[1]));
        let b = t.register(8, Access::ALL).unwrap();
        assert_eq!(b.lkey() >> 8, key >> 8);
        assert_ne!(b.lkey(), key);
    }
}
