//! Per-CQ counters every backend keeps the same way.

use dvcq_provider::{Completion, WcStatus};
use serde::Serialize;

/// What a [`crate::Cq`] has seen since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CqStats {
    /// Poll calls.
    pub polls: u64,
    /// Poll calls that returned nothing.
    pub empty_polls: u64,
    /// Completions returned (fault items included).
    pub completions: u64,
    /// Completions whose status is not success (fault items included).
    pub errors: u64,
    /// Fault items: CQEs that could not become a completion.
    pub faults: u64,
    /// Poll calls the backend failed (the generic backend's `ibv_poll_cq` returned an
    /// error); nothing was lost, the call returned what it had.
    pub poll_failures: u64,
    /// The most completions one poll call returned.
    pub largest_batch: u64,
}

impl CqStats {
    /// Counts one poll call that returned `got`.
    #[inline]
    pub(crate) fn count(&mut self, got: &[Completion]) {
        self.polls += 1;
        let n = got.len() as u64;
        self.completions += n;
        self.empty_polls += u64::from(n == 0);
        self.largest_batch = self.largest_batch.max(n);
        for c in got {
            if c.status != WcStatus::Success {
                self.errors += 1;
                self.faults += u64::from(c.fault().is_some());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_provider::{CqeFault, FaultKind};

    #[test]
    fn a_poll_counts_completions_errors_and_faults() {
        let mut s = CqStats::default();
        s.count(&[]);
        let ok = Completion::default();
        let err = Completion { status: WcStatus::WrFlushErr, ..Completion::default() };
        let fault = Completion::from_fault(CqeFault { kind: FaultKind::UnknownQp, position: 3, value: 9 });
        s.count(&[ok, err, fault]);
        assert_eq!(
            s,
            CqStats {
                polls: 2,
                empty_polls: 1,
                completions: 3,
                errors: 2,
                faults: 1,
                poll_failures: 0,
                largest_batch: 3
            }
        );
    }
}
