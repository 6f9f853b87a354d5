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

/// Polls an rdma-core CQ with `ibv_poll_cq`, or an extended CQ made for completion
/// timestamps with `ibv_start_poll` and its readers, the timestamp included.
pub(crate) struct GenericCq {
    cq: Arc<VerbsCq>,
    scratch: Box<[ffi::ibv_wc; CHUNK]>,
    /// The timestamps of an extended poll (a CQ made with a timestamp flag).
    stamps: Option<Box<[u64; CHUNK]>>,
    /// Polled with the extended poll even without a timestamp ([`GenericCq::extended`]).
    ex_poll: bool,
    /// Completions returned so far: the position a fault item names.
    polled: u32,
    last_error: Option<VerbsError>,
    /// Poll calls that failed inside rdma-core.
    failures: u64,
}

impl std::fmt::Debug for GenericCq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenericCq").field("cq", &self.cq).field("polled", &self.polled).finish_non_exhaustive()
    }
}

impl GenericCq {
    /// Polls `cq` with rdma-core's own poll: `ibv_poll_cq`, or for an extended CQ made with
    /// a timestamp flag the extended poll.
    pub(crate) fn new(cq: Arc<VerbsCq>) -> Self {
        let timestamps = cq.ex_flags().is_some_and(|f| f & crate::sys::cq_ex::TIMESTAMP_FLAGS != 0);
        GenericCq {
            cq,
            scratch: Box::new([ffi::ibv_wc::default(); CHUNK]),
            stamps: timestamps.then(|| Box::new([0; CHUNK])),
            ex_poll: false,
            polled: 0,
            last_error: None,
            failures: 0,
        }
    }

    /// Polls an extended CQ with the extended poll (`ibv_start_poll`, `ibv_next_poll`,
    /// every `ibv_wc_read_*` its flags allow), timestamp or not.
    pub(crate) fn extended(cq: Arc<VerbsCq>) -> Self {
        let ex_poll = cq.ex_flags().is_some();
        GenericCq { ex_poll, ..GenericCq::new(cq) }
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
            let (n, failed) = match &mut self.stamps {
                None if self.ex_poll => {
                    let r = self.cq.poll_ex(&mut self.scratch[..want], None);
                    (r.n.min(want), r.error)
                }
                None => match self.cq.poll_raw(&mut self.scratch[..want]) {
                    Ok(n) => (n.min(want), None),
                    Err(e) => (0, Some(e)),
                },
                Some(stamps) => {
                    let r = self.cq.poll_ex(&mut self.scratch[..want], Some(&mut stamps[..want]));
                    (r.n.min(want), r.error)
                }
            };
            for (slot, wc) in out[done..done + n].iter_mut().zip(&self.scratch[..n]) {
                *slot = completion_of(wc, self.polled);
                self.polled = self.polled.wrapping_add(1);
            }
            if let Some(stamps) = &self.stamps {
                for (slot, &t) in out[done..done + n].iter_mut().zip(&stamps[..n]) {
                    slot.timestamp = t;
                }
            }
            done += n;
            if let Some(e) = failed {
                self.last_error = Some(e);
                self.failures += 1;
                break;
            }
            if n < want {
                break;
            }
        }
        done
    }

    /// Poll calls that failed inside rdma-core so far, whether or not their error was taken.
    pub(crate) fn failures(&self) -> u64 {
        self.failures
    }

    /// The error of the last failed poll, if any, cleared by reading it.
    pub(crate) fn take_error(&mut self) -> Option<VerbsError> {
        self.last_error.take()
    }
}
