//! Per-CQ statistics: the counters the [`crate::Cq`] handle keeps on every poll call, the
//! same way on every backend, and what the backend itself knows on top (how full the ring
//! got, overruns, compression sessions, consumer-index doorbell writes).
//!
//! # Cost on the poll path
//!
//! The handle counts once per poll call: polls, empty polls, completions and the largest
//! batch. Failed completions are counted by whoever makes them cheaply: dvcq's mlx5, irdma
//! and rxe pollers (the models' and the direct backends') count them on the slow path that
//! makes every failed completion, so a successful one pays nothing; for rdma-core's
//! `ibv_poll_cq` (the generic backend), which only copies records, the handle ORs the
//! batch's status bytes (success is 0), one instruction a completion, and walks a batch
//! again, out of line, only when one failed. The backends' figures are read when [`crate::Cq::stats`] is called,
//! never while polling. `dvcq bench cq --callgrind` measures what counting costs per
//! completion on a model.

use dvcq_provider::Completion;
use dvcq_provider::StatusCounts;
use dvcq_provider::WcStatus;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// `errors_by_status` as an object of the statuses seen: `{"IBV_WC_WR_FLUSH_ERR": 8}`.
fn status_map<S: Serializer>(c: &StatusCounts, s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(c.iter().count()))?;
    for (status, n) in c.iter() {
        m.serialize_entry(status.name(), &n)?;
    }
    m.end()
}

/// Where [`CqStats::high_water`] comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HighWaterSource {
    /// The backend compares the producer's position with the consumer's at every poll call
    /// (rxe: the producer index in the mapped queue; the models: the device's own count of
    /// CQEs written). CQEs only accumulate between poll calls, so the most found waiting at
    /// a call is how full the ring got, up to what arrived after the last call.
    Producer,
    /// The backend cannot see the producer (rdma-core's `ibv_poll_cq`; mlx5 hardware, whose
    /// CQEs carry ownership bits but no producer index): the largest number of completions
    /// one poll call returned. A lower bound, capped by the length of the slices polled into.
    #[default]
    Batches,
}

/// What a [`crate::Cq`] has seen since it was made ([`crate::Cq::stats`]).
///
/// Figures a backend cannot know are `None` (`null` in JSON), never a guessed zero.
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
    /// The same by status.
    #[serde(serialize_with = "status_map")]
    pub errors_by_status: StatusCounts,
    /// Fault items: CQEs that could not become a completion, and the CQ error item (see
    /// [`crate::Cq`]: the CQ is in error).
    pub faults: u64,
    /// Poll calls the backend failed (the generic backend's `ibv_poll_cq` returned an
    /// error); nothing was lost, the call returned what it had.
    pub poll_failures: u64,
    /// The most completions one poll call returned.
    pub largest_batch: u64,
    /// The most CQEs outstanding in the ring (written by the device, not yet polled) that
    /// was observed; see [`CqStats::high_water_source`] for how exact it is.
    pub high_water: u64,
    /// How [`CqStats::high_water`] was observed.
    pub high_water_source: HighWaterSource,
    /// Times the device found the CQ full (it then puts the CQ in error): on the models, and
    /// on a device dvcq opened, the CQ error events (`IBV_EVENT_CQ_ERR`) it read from the
    /// context's async fd; `None` on a CQ of the application's own context (`Cq::attach`),
    /// whose async events are the application's to read (the kernel's counters, `dvcq
    /// stat`, may still show the overflow).
    pub overruns: Option<u64>,
    /// CQE compression sessions the mlx5 poller opened (basic titles, enhanced blocks);
    /// `None` on backends without CQE compression.
    pub compression_sessions: Option<u64>,
    /// Consumer-index publications to the device (mlx5 `set_ci` stores, the irdma
    /// shadow-area head, rxe's consumer index), at most one per poll call; `None` where
    /// rdma-core publishes it out of sight (the generic backend).
    pub doorbell_writes: Option<u64>,
}

/// The counters the handle keeps itself, on the poll path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PollCounters {
    polls: u64,
    empty_polls: u64,
    completions: u64,
    largest_batch: u64,
    /// Failed completions of the backends the handle scans ([`PollCounters::scan`]).
    errors: StatusCounts,
    faults: u64,
    /// CQ error items the handle returned (at most one: see [`crate::Cq`]).
    error_items: u64,
}

/// What a backend knows beyond the completions it returned (read off the poll path).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BackendCounters {
    /// Failed completions (fault items included) and fault items, where the backend counts
    /// them itself; `None`: the handle scanned them.
    pub(crate) failures: Option<(StatusCounts, u64)>,
    /// The most CQEs found waiting at a poll call, where the backend sees the producer.
    pub(crate) high_water: Option<u64>,
    pub(crate) overruns: Option<u64>,
    pub(crate) compression_sessions: Option<u64>,
    pub(crate) doorbell_writes: Option<u64>,
    /// Poll calls that failed inside the backend, where it can fail (the generic backend).
    pub(crate) poll_failures: Option<u64>,
}

impl PollCounters {
    /// Counts a poll call that found nothing ([`PollCounters::count`] of 0, in fewer steps).
    #[inline(always)]
    pub(crate) fn count_empty(&mut self) {
        self.polls += 1;
        self.empty_polls += 1;
    }

    /// Counts one poll call that returned `n` completions: a few additions, once per call.
    #[inline(always)]
    pub(crate) fn count(&mut self, n: usize) {
        let n = n as u64;
        self.polls += 1;
        self.completions += n;
        self.empty_polls += u64::from(n == 0);
        self.largest_batch = self.largest_batch.max(n);
    }

    /// Completions returned so far (CQ error items included).
    pub(crate) fn completions(&self) -> u64 {
        self.completions
    }

    /// Counts the CQ error item the handle itself wrote (a fault item with a general-error
    /// status, which no backend counted).
    pub(crate) fn error_item(&mut self) {
        self.error_items += 1;
    }

    /// Counts the failed completions of `got`, for a backend that does not count its own:
    /// one OR per completion finds whether any failed (success is status 0).
    #[inline(always)]
    pub(crate) fn scan(&mut self, got: &[Completion]) {
        if any_failed(got) {
            self.count_failures(got);
        }
    }

    /// Errors by status and fault items of a batch that holds at least one failure.
    #[cold]
    #[inline(never)]
    fn count_failures(&mut self, got: &[Completion]) {
        for c in got.iter().filter(|c| c.status != WcStatus::Success) {
            self.errors.add(c.status);
            self.faults += u64::from(c.fault().is_some());
        }
    }

    /// The statistics, with what the backend knows.
    pub(crate) fn with(&self, b: BackendCounters) -> CqStats {
        let (high_water, high_water_source) = match b.high_water {
            // A producer count can lag a batch only if the backend lost count; take the
            // larger so the mark never claims less than a poll call returned.
            Some(h) => (h.max(self.largest_batch), HighWaterSource::Producer),
            None => (self.largest_batch, HighWaterSource::Batches),
        };
        let (mut errors_by_status, mut faults) = b.failures.unwrap_or((self.errors, self.faults));
        errors_by_status.add_n(WcStatus::GeneralErr, self.error_items);
        faults += self.error_items;
        CqStats {
            polls: self.polls,
            empty_polls: self.empty_polls,
            completions: self.completions,
            errors: errors_by_status.total(),
            errors_by_status,
            faults,
            poll_failures: b.poll_failures.unwrap_or(0),
            largest_batch: self.largest_batch,
            high_water,
            high_water_source,
            overruns: b.overruns,
            compression_sessions: b.compression_sessions,
            doorbell_writes: b.doorbell_writes,
        }
    }
}

/// Whether a completion of `got` failed: success is status 0, so the OR of the status bytes
/// is 0 unless one did. Four at a time: about one instruction a completion (an OR from
/// memory) plus a share of the loop's own.
#[inline(always)]
fn any_failed(got: &[Completion]) -> bool {
    let mut any = 0u8;
    let mut rest = got;
    while let [a, b, c, d, more @ ..] = rest {
        any |= a.status as u8 | b.status as u8 | c.status as u8 | d.status as u8;
        rest = more;
    }
    for c in rest {
        any |= c.status as u8;
    }
    any != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_provider::{CqeFault, FaultKind};

    #[test]
    fn a_poll_counts_completions_errors_by_status_and_faults() {
        let mut s = PollCounters::default();
        let ok = Completion::default();
        let flush = Completion { status: WcStatus::WrFlushErr, ..Completion::default() };
        let fault = Completion::from_fault(CqeFault { kind: FaultKind::UnknownQp, position: 3, value: 9 });
        for got in [&[][..], &[ok, flush, fault, flush], &[ok, ok]] {
            s.count(got.len());
            s.scan(got);
        }
        let st = s.with(BackendCounters::default());
        assert_eq!(
            (st.polls, st.empty_polls, st.completions, st.errors, st.faults, st.largest_batch),
            (3, 1, 6, 3, 1, 4)
        );
        assert_eq!(st.errors_by_status.get(WcStatus::WrFlushErr), 2);
        assert_eq!(st.errors_by_status.get(WcStatus::GeneralErr), 1, "a fault item is a general error");
        assert_eq!(st.errors_by_status.get(WcStatus::Success), 0, "successes are not errors");
        assert_eq!(st.errors_by_status.total(), st.errors);
        let seen: Vec<_> = st.errors_by_status.iter().collect();
        assert_eq!(seen, [(WcStatus::WrFlushErr, 2), (WcStatus::GeneralErr, 1)]);
    }

    /// A failure anywhere in a batch is found, whatever its status number: the OR of the
    /// status bytes is non-zero for every status but success.
    #[test]
    fn every_failure_status_is_counted_in_any_position() {
        for status in WcStatus::ALL.into_iter().skip(1) {
            for pos in 0..5 {
                let mut batch = [Completion::default(); 5];
                batch[pos].status = status;
                let mut s = PollCounters::default();
                s.scan(&batch);
                assert_eq!(s.with(BackendCounters::default()).errors_by_status.get(status), 1, "{status:?} at {pos}");
            }
        }
    }

    /// A backend that counts its own failures is believed over the handle's scan.
    #[test]
    fn a_backends_own_failure_counts_are_used() {
        let mut s = PollCounters::default();
        s.count(2);
        let mut own = StatusCounts::default();
        own.add_n(WcStatus::RetryExcErr, 2);
        let st = s.with(BackendCounters { failures: Some((own, 0)), ..BackendCounters::default() });
        assert_eq!((st.errors, st.errors_by_status.get(WcStatus::RetryExcErr), st.faults), (2, 2, 0));
    }

    #[test]
    fn the_high_water_mark_says_where_it_comes_from() {
        let mut s = PollCounters::default();
        s.count(3);
        let batches = s.with(BackendCounters::default());
        assert_eq!((batches.high_water, batches.high_water_source), (3, HighWaterSource::Batches));
        let producer = s.with(BackendCounters { high_water: Some(40), ..BackendCounters::default() });
        assert_eq!((producer.high_water, producer.high_water_source), (40, HighWaterSource::Producer));
        let lagging = s.with(BackendCounters { high_water: Some(1), ..BackendCounters::default() });
        assert_eq!(lagging.high_water, 3, "never below a batch a poll returned");
    }

    #[test]
    fn json_names_statuses_and_leaves_unknowns_null() {
        let mut s = PollCounters::default();
        s.scan(&[Completion { status: WcStatus::RemAccessErr, ..Completion::default() }]);
        let v =
            serde_json::to_value(s.with(BackendCounters { doorbell_writes: Some(1), ..Default::default() })).unwrap();
        assert_eq!(v["errors_by_status"], serde_json::json!({ "IBV_WC_REM_ACCESS_ERR": 1 }));
        assert_eq!(v["high_water_source"], "batches");
        assert_eq!((v["overruns"].is_null(), v["doorbell_writes"].as_u64()), (true, Some(1)));
    }
}
