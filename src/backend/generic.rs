//! The generic backend: `ibv_poll_cq` through the provider's ops into dvcq's
//! [`Completion`], for every provider without a direct backend. It is also the reference
//! every direct backend is compared with.

use crate::error::VerbsError;
use crate::sys::cq::{completion_of, VerbsCq};
use crate::sys::ffi;
use dvcq_provider::Completion;
use std::sync::Arc;

/// Completions taken from rdma-core per call of its poll (the scratch array's length).
const CHUNK: usize = 32;

/// Polls an rdma-core CQ with `ibv_poll_cq`.
pub(crate) struct GenericCq {
    cq: Arc<VerbsCq>,
    scratch: Box<[ffi::ibv_wc; CHUNK]>,
    /// Completions returned so far: the position a fault item names.
    polled: u32,
    last_error: Option<VerbsError>,
}

impl std::fmt::Debug for GenericCq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenericCq").field("cq", &self.cq).field("polled", &self.polled).finish_non_exhaustive()
    }
}

impl GenericCq {
    /// Polls `cq` with rdma-core's own poll.
    pub(crate) fn new(cq: Arc<VerbsCq>) -> Self {
        GenericCq { cq, scratch: Box::new([ffi::ibv_wc::default(); CHUNK]), polled: 0, last_error: None }
    }

    /// The CQ it polls.
    pub(crate) fn verbs_cq(&self) -> &Arc<VerbsCq> {
        &self.cq
    }

    /// Up to `out.len()` completions, in order. A failed `ibv_poll_cq` ends the call with
    /// what was already converted; the error is kept for [`GenericCq::take_error`].
    #[inline]
    pub(crate) fn poll(&mut self, out: &mut [Completion]) -> usize {
        let mut done = 0;
        while done < out.len() {
            let want = (out.len() - done).min(CHUNK);
            let n = match self.cq.poll_raw(&mut self.scratch[..want]) {
                Ok(n) => n.min(want),
                Err(e) => {
                    self.last_error = Some(e);
                    break;
                }
            };
            for (slot, wc) in out[done..done + n].iter_mut().zip(&self.scratch[..n]) {
                *slot = completion_of(wc, self.polled);
                self.polled = self.polled.wrapping_add(1);
            }
            done += n;
            if n < want {
                break;
            }
        }
        done
    }

    /// The error of the last failed poll, if any, cleared by reading it.
    pub(crate) fn take_error(&mut self) -> Option<VerbsError> {
        self.last_error.take()
    }
}
