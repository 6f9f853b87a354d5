//! The operations every CQ backend implements.

use crate::completion::Completion;
use crate::error::Error;

/// What a backend says about its CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqInfo {
    /// Backend name (`"mlx5"`, `"irdma"`, ...).
    pub vendor: &'static str,
    /// Ring entries.
    pub entries: u32,
    /// Bytes per CQE slot.
    pub cqe_size: u32,
    /// CQ number (0 when unknown, as for models without one).
    pub cqn: u32,
}

/// Driver operations of a CQ backend: what rdma-core calls the provider's CQ ops.
///
/// Implementors are `Send` but not `Sync`: one consumer per CQ. `poll` fills a slice and
/// returns a count, like `ibv_poll_cq`; a CQE that cannot become a completion is returned as
/// a fault item in its place (see [`Completion`]), never dropped and never a panic.
pub trait CqDriver: Send {
    /// Static facts about the CQ.
    fn info(&self) -> CqInfo;

    /// Moves up to `out.len()` completions out of the ring, in order, and publishes the
    /// consumer index according to the backend's policy. Returns how many were written.
    fn poll(&mut self, out: &mut [Completion]) -> usize;

    /// The next completion without consuming it.
    fn peek(&self) -> Option<Completion>;

    /// The consumer counter, `ci mod entries` being the next slot: mlx5's running counter,
    /// irdma's lap-parity position (below twice the ring size, since irdma rings need not
    /// be powers of two).
    fn ci(&self) -> u32;

    /// Publishes the consumer index to the device now.
    fn update_ci(&mut self);

    /// Requests a completion event (solicited only, or any).
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] until the backend implements event mode.
    fn arm(&mut self, solicited_only: bool) -> Result<(), Error> {
        let _ = solicited_only;
        Err(Error::Unsupported { op: "arm", vendor: self.info().vendor })
    }

    /// Switches to a resized ring.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] until the backend implements resize.
    fn resize(&mut self, entries: u32) -> Result<(), Error> {
        let _ = entries;
        Err(Error::Unsupported { op: "resize", vendor: self.info().vendor })
    }
}
