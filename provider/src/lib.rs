//! The vendor-neutral core of dvcq.
//!
//! - [`Completion`], [`WcStatus`], [`WcOpcode`], [`WcFlags`]: a work completion with
//!   libibverbs' numeric values, plus the raw extras a direct poller can offer.
//! - [`CqeFault`]: a CQE that could not become a completion, returned in its place.
//! - [`StatusCounts`]: completions counted by status, as pollers keep them.
//! - [`CqDriver`]: the operations every backend implements.
//! - [`CqRing`] and [`DoorbellWord`]: the ring-memory primitive, the only place that reads
//!   an ownership byte, issues the acquire fence, and publishes an index with release order.
//! - [`DoorbellRegister`]: a device register the consumer rings after updating host memory
//!   (the mlx5 UAR's CQ doorbell, irdma's CQ doorbell): MMIO on a NIC, a page word in a model.
//! - [`WqBuffer`]: a work queue's WQEs, which a poller reads to scatter inline CQE data.
//! - [`MemoryRegion`], [`MemoryRegions`]: the registered memory that inline data may be
//!   written into, checked per write; [`MemoryRegion::new`] states the one promise.
//! - [`DmaBuffer`]: page-aligned memory for device models and image decoding.
//! - [`image`]: the ring-image text container and canonical completion lines.
//! - [`scrambled_qp`] (feature `model`): the benchmarks' fixed many-QPs order.
//! - [`eventfd`]: the non-blocking event fd models signal completion events on, and the
//!   readiness wait event mode sleeps in.
//! - [`cputime`]: the calling thread's CPU time, which the event-mode benchmark charges.
//!
//!   Both make their system calls through rustix's safe API: like the vendor crates, this
//!   crate declares no foreign function and calls none (dvcq's FFI is `dvcq::sys`).
//! - [`backoff`] (feature `model` or `testing`): how a model thread or a test waits on the
//!   other side of a ring without holding a core.
#![deny(missing_docs, missing_debug_implementations)]

#[cfg(any(feature = "model", feature = "testing"))]
pub mod backoff;
mod completion;
pub mod cputime;
mod dma;
mod doorbell;
mod driver;
mod error;
pub mod eventfd;
mod fault;
mod granule;
pub mod image;
mod pow2;
mod region;
mod register;
mod ring;
#[cfg(feature = "model")]
mod scramble;
mod status_counts;
#[cfg(feature = "testing")]
pub mod testing;
mod verbs_wc;
mod wq;

pub use completion::{Completion, WcFlags, WcHead, WcHeadWord, WcOpcode, WcStatus};
pub use dma::DmaBuffer;
pub use doorbell::{DoorbellQword, DoorbellWord};
pub use driver::{CqDriver, CqInfo};
pub use error::Error;
pub use fault::{CqErrorCell, CqErrorReason, CqeFault, FaultKind};
pub use pow2::{Pow2Ref, Pow2Table};
pub use region::{MemoryRegion, MemoryRegions};
pub use register::DoorbellRegister;
pub use ring::{CqRing, KeepAlive, RingView, SlotCursor, SlotGroup, SlotRef, SlotsAlong, StrideCursor, MAX_ENTRIES};
#[cfg(feature = "model")]
pub use scramble::scrambled_qp;
pub use status_counts::StatusCounts;
pub use verbs_wc::UverbsWc;
pub use wq::WqBuffer;
