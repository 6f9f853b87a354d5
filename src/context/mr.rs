//! Memory regions: memory the device may read and write, owned by the region.

use super::{Pd, PdInner};
use crate::error::Error;
use crate::sys;
use crate::verbs::{Access, MrBuffer, MrSlice, RemoteRegion, Sge};

/// A registered memory region over memory it owns (page-aligned, zeroed).
///
/// The device writes into it at any time, so no Rust reference into it is ever handed
/// out: data goes in with [`Mr::write`] and out with [`Mr::read`], and work requests name
/// parts of it with [`Mr::slice`], which borrows it.
///
/// Dropping it deregisters it and frees its memory, unless a queue still holds it: a QP or
/// SRQ that a receive or an RDMA READ naming it was posted to keeps it until the queue is
/// destroyed, and a memory window bound over it keeps it while bound.
///
/// A region over the caller's memory ([`Pd::reg_mr_buffer`]) owns that buffer the same
/// way, and gives it back with [`Mr::into_buffer`].
pub struct Mr {
    pub(crate) inner: MrInner,
    access: Access,
    addr: u64,
    len: u64,
    lkey: u32,
    rkey: u32,
    device: String,
    /// On a model, the caller's buffer it was registered from ([`Pd::reg_mr_buffer`]);
    /// on rdma-core the registration owns it.
    model_buffer: Option<Box<dyn core::any::Any + Send + Sync>>,
}

impl core::fmt::Debug for Mr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Mr")
            .field("inner", &self.inner)
            .field("access", &self.access)
            .field("addr", &self.addr)
            .field("len", &self.len)
            .field("lkey", &self.lkey)
            .field("rkey", &self.rkey)
            .field("device", &self.device)
            .finish()
    }
}

#[derive(Debug, Clone)]
pub(crate) enum MrInner {
    Model(crate::model_device::ModelMr),
    /// Shared with the memory windows bound over it, which keep it registered (and its
    /// memory mapped) while they may answer through it.
    Verbs(std::sync::Arc<sys::qp::Mr>),
}

impl MrInner {
    /// Whether both hold the same registration.
    pub(crate) fn same(&self, other: &MrInner) -> bool {
        match (self, other) {
            (MrInner::Model(a), MrInner::Model(b)) => a.same(b),
            (MrInner::Verbs(a), MrInner::Verbs(b)) => std::sync::Arc::ptr_eq(a, b),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// Whether rdma-core registered it (not a model device).
    pub(crate) fn is_verbs(&self) -> bool {
        !matches!(self, MrInner::Model(_))
    }
}

impl Pd {
    /// Registers `len` fresh bytes with `access`.
    ///
    /// # Errors
    ///
    /// The device refused (rdma-core's errno) or memory ran out.
    pub fn reg_mr(&self, len: usize, access: Access) -> Result<Mr, Error> {
        match &self.inner {
            PdInner::Model(m) => {
                let mr = m.reg_mr(len, access).map_err(|e| super::model_error(&self.device, e))?;
                Ok(self.region(MrInner::Model(mr), access, len, None))
            }
            PdInner::Verbs { pd, .. } => {
                let mr = sys::qp::Mr::new(pd, len, access)
                    .map_err(|source| Error::Verbs { device: self.device.clone(), source })?;
                Ok(self.region(MrInner::Verbs(std::sync::Arc::new(mr)), access, len, None))
            }
        }
    }

    /// Registers the caller's memory `buf` with `access` (`ibv_reg_mr` over it): an
    /// existing buffer, or a mapping of hugepages. The region owns `buf` while it is
    /// registered, so nothing else can reach the memory the device writes, and
    /// [`Mr::into_buffer`] gives it back once no queue holds the region; dropping the
    /// region drops it after deregistration.
    ///
    /// On a model the device works on memory of its own: `buf`'s bytes are copied into it
    /// here and back by [`Mr::into_buffer`], which is what a program sees of a NIC writing
    /// the buffer itself ([`Mr::addr`] is then the model's address, not `buf`'s).
    ///
    /// ```
    /// # use dvcq::{verbs::Access, Context};
    /// # fn main() -> Result<(), dvcq::Error> {
    /// let ctx = Context::open("model-mlx5")?;
    /// let pd = ctx.alloc_pd()?;
    /// let mr = pd.reg_mr_buffer(b"hello".to_vec(), Access::ALL)?;
    /// mr.write(0, b"J")?;
    /// let back: Vec<u8> = mr.into_buffer().expect("no queue holds it");
    /// assert_eq!(back, b"Jello");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Mismatch`] for an empty buffer; the device refused (rdma-core's errno).
    pub fn reg_mr_buffer<B: MrBuffer>(&self, mut buf: B, access: Access) -> Result<Mr, Error> {
        let len = buf.len();
        if len == 0 {
            return Err(Error::Mismatch {
                device: self.device.clone(),
                what: "an empty buffer cannot be registered".into(),
            });
        }
        match &self.inner {
            PdInner::Model(m) => {
                let mr = m.reg_mr(len, access).map_err(|e| super::model_error(&self.device, e))?;
                mr.write(0, crate::verbs::buffer::bytes(&mut buf)).map_err(|e| super::model_error(&self.device, e))?;
                Ok(self.region(MrInner::Model(mr), access, len, Some(Box::new(buf))))
            }
            PdInner::Verbs { pd, .. } => {
                let mr = sys::qp::Mr::with_buffer(pd, buf, access)
                    .map_err(|(source, _buf)| Error::Verbs { device: self.device.clone(), source })?;
                Ok(self.region(MrInner::Verbs(std::sync::Arc::new(mr)), access, len, None))
            }
        }
    }
}

impl Pd {
    /// The handle of a region just registered on this PD, its keys read from `inner`.
    fn region(
        &self,
        inner: MrInner,
        access: Access,
        len: usize,
        model_buffer: Option<Box<dyn core::any::Any + Send + Sync>>,
    ) -> Mr {
        let (addr, lkey, rkey) = match &inner {
            MrInner::Model(m) => (m.addr(), m.lkey(), m.rkey()),
            MrInner::Verbs(v) => {
                let (addr, _, lkey, rkey) = v.keys();
                (addr, lkey, rkey)
            }
        };
        Mr { inner, access, addr, len: len as u64, lkey, rkey, device: self.device.clone(), model_buffer }
    }
}

impl Mr {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The local key.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    /// The remote key.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// The rights it was registered with.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The device it belongs to.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The virtual address of its first byte.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// What a peer needs to read or write it.
    pub fn remote(&self) -> RemoteRegion {
        RemoteRegion { addr: self.addr, len: self.len, rkey: self.rkey }
    }

    pub(crate) fn check(&self, offset: u64, len: u64) -> Result<(), Error> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::Mismatch {
                device: self.device.clone(),
                what: format!("bytes {offset}..+{len} are outside the {}-byte memory region", self.len),
            }),
        }
    }

    /// The scatter/gather entry for `len` bytes at `offset`, borrowing the region.
    ///
    /// # Errors
    ///
    /// The range is not inside the region.
    pub fn slice(&self, offset: u64, len: u32) -> Result<MrSlice<'_>, Error> {
        self.check(offset, u64::from(len))?;
        Ok(MrSlice::new(Sge { addr: self.addr + offset, len, lkey: self.lkey }, Some(self)))
    }

    /// A handle that keeps the region registered and its memory allocated (what a queue
    /// holds while the device may write into it).
    pub(crate) fn hold(&self) -> MrInner {
        self.inner.clone()
    }

    /// Copies `data` into the region at `offset`.
    ///
    /// # Errors
    ///
    /// The range is not inside the region.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), Error> {
        self.check(offset, data.len() as u64)?;
        match &self.inner {
            MrInner::Model(mr) => mr.write(offset, data).map_err(|e| super::model_error(&self.device, e)),
            MrInner::Verbs(mr) => mr.write_bytes(offset as usize, data).map_err(|e| self.memory_error(e)),
        }
    }

    /// Copies bytes from the region at `offset` into `out`.
    ///
    /// # Errors
    ///
    /// The range is not inside the region.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), Error> {
        self.check(offset, out.len() as u64)?;
        match &self.inner {
            MrInner::Model(mr) => mr.read(offset, out).map_err(|e| super::model_error(&self.device, e)),
            MrInner::Verbs(mr) => mr.read_bytes(offset as usize, out).map_err(|e| self.memory_error(e)),
        }
    }

    /// Deregisters a region made by [`Pd::reg_mr_buffer`] and gives its buffer back, with
    /// what the device and [`Mr::write`] left in it.
    ///
    /// # Errors
    ///
    /// The region itself, still registered, when a queue or a bound memory window still
    /// holds it (drop those first: the device may still write the memory), when it was not
    /// made from a caller's buffer, or from one of another type than `B`.
    pub fn into_buffer<B: MrBuffer>(mut self) -> Result<B, Mr> {
        match self.inner {
            MrInner::Model(ref mr) => {
                let held = mr.is_held_elsewhere();
                let Some(owner) = self.model_buffer.take() else { return Err(self) };
                let mut buf = match owner.downcast::<B>() {
                    Ok(b) if !held => *b,
                    Ok(b) => {
                        self.model_buffer = Some(b);
                        return Err(self);
                    }
                    Err(other) => {
                        self.model_buffer = Some(other);
                        return Err(self);
                    }
                };
                // The model's copy has the buffer's length: the read cannot fail.
                let _ = mr.read(0, crate::verbs::buffer::bytes_mut(&mut buf));
                Ok(buf)
            }
            MrInner::Verbs(ref arc) => {
                if std::sync::Arc::strong_count(arc) > 1 || !arc.owns::<B>() {
                    return Err(self);
                }
                let MrInner::Verbs(arc) = self.inner else { unreachable!("matched above") };
                let Ok(mr) = std::sync::Arc::try_unwrap(arc) else { unreachable!("the only handle") };
                let owner = mr.into_owner().expect("owns a buffer of B's type");
                Ok(*owner.downcast::<B>().expect("owns a buffer of B's type"))
            }
        }
    }

    #[allow(dead_code)]
    fn memory_error(&self, e: dvcq_provider::Error) -> Error {
        Error::Mismatch { device: self.device.clone(), what: e.to_string() }
    }
}
