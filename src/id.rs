//! The identity of a CQ in this process, which events, errors and logs name: a leaf that
//! every layer may use.
//!
//! Layer: the bottom (the vocabulary, with `verbs`): it imports nothing of the crate.

use std::sync::atomic::{AtomicU64, Ordering};

/// A CQ's identity in this process: what its events on a channel carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CqId(pub(crate) u64);

impl CqId {
    /// A fresh id (never 0, never repeated in this process).
    pub(crate) fn next() -> CqId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        CqId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The number, as events and logs show it.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for CqId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cq#{}", self.0)
    }
}
