//! Finding a CQ's queue buffer through rdma-core's private `struct rxe_cq`: the fields the
//! attach needs, read from a copy of the struct's bytes at a layout-table row's offsets
//! ([`RxeCqLayout`]), with the checks the kernel's own values must pass.
//!
//! The glue copies `layout.size` bytes from the `struct ibv_cq *` (the `rxe_cq` starts with
//! it), calls [`RxeCqFields::read`], compares [`RxeCqFields::cqe`] and
//! [`RxeCqFields::handle`] with what bindgen's `ibv_cq` says, and passes
//! [`RxeCqFields::queue_desc`] to [`crate::RxeCq::attach`].
//!
//! # Examples
//!
//! The whole attach, with a model's image of `struct rxe_cq` standing in for the bytes
//! the glue copies from the CQ pointer:
//!
//! ```
//! use dvcq_rxe_dv::model::{ModelConfig, RxeModel};
//! use dvcq_rxe_dv::{RxeCq, RxeCqFields};
//! use dvcq_uapi::rxe::RxeCqLayout;
//!
//! let kernel = RxeModel::new(ModelConfig::new(16))?;
//! # if cfg!(target_arch = "x86_64") {
//! let release_major = 44; // from the loaded libibverbs' file name
//! let layout = RxeCqLayout::for_release(release_major).ok_or("rdma-core release not in the table")?;
//! let bytes = kernel.rxe_cq_image(layout); // the glue: `layout.size` bytes copied from the ibv_cq
//! let fields = RxeCqFields::read(layout, &bytes)?;
//! // SAFETY: the queue is the model's buffer, which outlives `cq`; nothing else polls it.
//! let cq = unsafe { RxeCq::attach(fields.queue_desc()) }?;
//! assert_eq!(cq.geometry().slots(), 32);
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::error::AttachError;
use crate::queue::{QueueDesc, PAGE_SIZE};
use dvcq_uapi::rxe::cq_layout::{IBV_CQ_CQE_OFFSET, IBV_CQ_HANDLE_OFFSET};
use dvcq_uapi::rxe::{MmInfo, RxeCqLayout};

/// What rdma-core's `struct rxe_cq` says about a CQ's queue buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxeCqFields {
    /// `vcq.cq.cqe`: the CQ depth the kernel granted.
    pub cqe: i32,
    /// `vcq.cq.handle`: the kernel's CQ handle.
    pub handle: u32,
    /// `mmap_info`: the `mmap` offset and the bytes mapped.
    pub mmap_info: MmInfo,
    /// `queue`: the address of the mapped `struct rxe_queue_buf`.
    pub queue: u64,
    /// `wc_size`: `1 << log2_elem_size`, recorded by `rxe_create_cq`.
    pub wc_size: u64,
}

impl RxeCqFields {
    /// Reads the fields from `bytes`, a copy of a `struct rxe_cq` of layout `layout`, and
    /// checks them against what the kernel and `mmap` hand out: a non-null, page-aligned
    /// `queue`; an `mmap_info` with a non-zero page-aligned offset (`rxe_create_mmap_info`
    /// starts at one page) and a non-zero page-aligned size (`PAGE_ALIGN`).
    ///
    /// # Errors
    ///
    /// [`AttachError::ShortStruct`], [`AttachError::NullQueue`],
    /// [`AttachError::Misaligned`], [`AttachError::BadMmapInfo`].
    pub fn read(layout: &RxeCqLayout, bytes: &[u8]) -> Result<Self, AttachError> {
        if bytes.len() < layout.size {
            return Err(AttachError::ShortStruct { need: layout.size, have: bytes.len() });
        }
        let mmap_info = MmInfo {
            offset: u64_at(bytes, layout.mmap_info),
            size: u32_at(bytes, layout.mmap_info + 8),
            pad: u32_at(bytes, layout.mmap_info + 12),
        };
        let f = Self {
            cqe: u32_at(bytes, IBV_CQ_CQE_OFFSET) as i32,
            handle: u32_at(bytes, IBV_CQ_HANDLE_OFFSET),
            mmap_info,
            queue: u64_at(bytes, layout.queue),
            wc_size: u64_at(bytes, layout.wc_size),
        };
        if f.queue == 0 {
            return Err(AttachError::NullQueue);
        }
        if f.queue % PAGE_SIZE as u64 != 0 {
            return Err(AttachError::Misaligned { addr: f.queue as usize, page: PAGE_SIZE });
        }
        let (offset, size) = (mmap_info.offset, mmap_info.size);
        let page = PAGE_SIZE as u64;
        if offset == 0 || offset % page != 0 || size == 0 || u64::from(size) % page != 0 {
            return Err(AttachError::BadMmapInfo { offset, size, page: PAGE_SIZE });
        }
        Ok(f)
    }

    /// The descriptor [`crate::RxeCq::attach`] takes: the queue address, the mapped size,
    /// the CQ depth and `wc_size` to check against the queue's stride.
    pub fn queue_desc(&self) -> QueueDesc {
        QueueDesc {
            base: self.queue as usize as *mut u8,
            map_size: self.mmap_info.size as usize,
            cqe: self.cqe,
            wc_size: Some(self.wc_size),
        }
    }
}

/// The host-order `u64` at `off` (the caller checked `off + 8 <= bytes.len()`).
fn u64_at(bytes: &[u8], off: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = bytes.get(off..off + 8) {
        b.copy_from_slice(s);
    }
    u64::from_ne_bytes(b)
}

/// The host-order `u32` at `off`.
fn u32_at(bytes: &[u8], off: usize) -> u32 {
    let mut b = [0u8; 4];
    if let Some(s) = bytes.get(off..off + 4) {
        b.copy_from_slice(s);
    }
    u32::from_ne_bytes(b)
}
