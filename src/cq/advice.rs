//! CQ depth advice: how deep a CQ should be, from the work that can be in flight on it and
//! from how full it was seen to get.
//!
//! # The rule
//!
//! Every work request posted to a queue whose completions land on a CQ can produce one CQE
//! there before the application polls it (a flush after an error too), so the CQ needs room
//! for the sum of those queues' depths: the send queues of the QPs whose `send_cq` it is
//! (with selective signaling, only the signaled ones count, but a flush reports them all),
//! and the receive queues (or SRQs) of those whose `recv_cq` it is. A CQ that overflows
//! loses completions and goes into error (`IBV_EVENT_CQ_ERR`). The advice is that sum times
//! a margin ([`DEFAULT_MARGIN`]), or the high-water mark observed times the margin when it
//! is larger; memory is about [`BYTES_PER_CQE`] per CQE.

use super::stats::{CqStats, HighWaterSource};
use serde::Serialize;

/// CQ memory per CQE, the rule of thumb: mlx5 CQEs are 64 bytes (128 with the large CQE
/// format), irdma GEN2 allocates two 32-byte slots per CQE asked for, rxe a 64-byte record
/// per slot.
pub const BYTES_PER_CQE: u64 = 64;

/// Headroom over the expected in-flight work requests (or the high-water mark): a quarter.
pub const DEFAULT_MARGIN: f64 = 1.25;

/// The depth to ask for so that `expected_in_flight` CQEs fit with `margin` headroom
/// (`expected_in_flight` × `margin`, rounded up; at least 1; a margin below 1 counts as 1).
///
/// `expected_in_flight` is the sum of the depths of the queues whose completions land on the
/// CQ (see the module's rule).
///
/// # Examples
///
/// ```
/// // Two QPs, each with a 128-deep send queue and a 256-deep receive queue, on one CQ.
/// assert_eq!(dvcq::cq::advise_depth(2 * (128 + 256), dvcq::cq::DEFAULT_MARGIN), 960);
/// ```
pub fn advise_depth(expected_in_flight: u64, margin: f64) -> u32 {
    let margin = if margin.is_finite() && margin > 1.0 { margin } else { 1.0 };
    let want = (expected_in_flight as f64 * margin).ceil();
    if want >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        (want as u32).max(1)
    }
}

/// What the advice says about the CQ's present depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The depth covers the advice.
    Fits,
    /// Smaller than the advice: raise it (the CQ may overflow).
    Raise,
    /// It overflowed: raise it.
    Overran,
    /// More than four times the advice, which rests on the expected in-flight work: memory
    /// could be saved.
    CanShrink,
}

/// Depth advice for one CQ ([`CqStats::advice`], [`crate::Cq::advice`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DepthAdvice {
    /// The CQ's depth now (what the device gave).
    pub depth: u32,
    /// The most CQEs seen outstanding ([`CqStats::high_water`]).
    pub high_water: u64,
    /// How that was observed.
    pub high_water_source: HighWaterSource,
    /// The in-flight work requests the advice was given for, if any.
    pub expected_in_flight: Option<u64>,
    /// The depth to ask for.
    pub suggested_depth: u32,
    /// About how much memory that is ([`BYTES_PER_CQE`] per CQE).
    pub suggested_bytes: u64,
    /// The present depth against the suggestion.
    pub verdict: Verdict,
}

impl CqStats {
    /// Depth advice for a CQ of `depth` with these statistics: the larger of
    /// `expected_in_flight` (the sum of the depths of the queues completing on it, if
    /// known) and the high-water mark, times [`DEFAULT_MARGIN`].
    pub fn advice(&self, depth: u32, expected_in_flight: Option<u64>) -> DepthAdvice {
        let base = expected_in_flight.unwrap_or(0).max(self.high_water);
        let suggested = advise_depth(base, DEFAULT_MARGIN);
        let verdict = if self.overruns.unwrap_or(0) > 0 {
            Verdict::Overran
        } else if suggested > depth {
            Verdict::Raise
        } else if expected_in_flight.is_some() && u64::from(depth) > 4 * u64::from(suggested) {
            Verdict::CanShrink
        } else {
            Verdict::Fits
        };
        DepthAdvice {
            depth,
            high_water: self.high_water,
            high_water_source: self.high_water_source,
            expected_in_flight,
            suggested_depth: suggested,
            suggested_bytes: u64::from(suggested) * BYTES_PER_CQE,
            verdict,
        }
    }
}

impl DepthAdvice {
    /// One short phrase: `high-water 12/63 (producer), suggest 15`.
    pub fn summary(&self) -> String {
        let source = match self.high_water_source {
            HighWaterSource::Producer => "producer",
            HighWaterSource::Batches => "batches, a lower bound",
        };
        format!("high-water {}/{} ({source}), suggest {}", self.high_water, self.depth, self.suggested_depth)
    }
}

impl std::fmt::Display for DepthAdvice {
    /// `high-water 12 of 63 CQEs (producer); depth 15 suggested (about 960 bytes): fits`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = match self.high_water_source {
            HighWaterSource::Producer => "seen at the producer",
            HighWaterSource::Batches => "largest batch, a lower bound",
        };
        write!(f, "high-water {} of {} CQEs ({source}); ", self.high_water, self.depth)?;
        if let Some(n) = self.expected_in_flight {
            write!(f, "{n} work requests in flight; ")?;
        }
        let verdict = match self.verdict {
            Verdict::Fits => "fits",
            Verdict::Raise => "raise it",
            Verdict::Overran => "it overran: raise it",
            Verdict::CanShrink => "it could shrink",
        };
        write!(f, "depth {} suggested (about {}): {verdict}", self.suggested_depth, human_bytes(self.suggested_bytes))
    }
}

/// `960 bytes`, `60 KiB`, `4 MiB`.
fn human_bytes(b: u64) -> String {
    match b {
        0..=4095 => format!("{b} bytes"),
        4096..=4_194_303 => format!("{} KiB", b.div_ceil(1024)),
        _ => format!("{} MiB", b.div_ceil(1024 * 1024)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(high_water: u64, source: HighWaterSource, overruns: Option<u64>) -> CqStats {
        CqStats { high_water, high_water_source: source, overruns, ..CqStats::default() }
    }

    #[test]
    fn the_depth_is_the_in_flight_work_times_the_margin() {
        assert_eq!(advise_depth(100, 1.25), 125);
        assert_eq!(advise_depth(3, 1.25), 4, "rounded up");
        assert_eq!(advise_depth(0, 1.25), 1, "never 0: verbs refuse a CQ of 0");
        assert_eq!(advise_depth(100, 0.5), 100, "a margin below 1 would not hold the work");
        assert_eq!(advise_depth(100, f64::NAN), 100);
        assert_eq!(advise_depth(u64::MAX, 2.0), u32::MAX);
    }

    #[test]
    fn the_advice_takes_the_larger_of_the_work_and_the_high_water_mark() {
        let s = stats(40, HighWaterSource::Producer, Some(0));
        let a = s.advice(63, Some(16));
        assert_eq!((a.suggested_depth, a.suggested_bytes, a.verdict), (50, 3200, Verdict::Fits));
        let a = s.advice(63, Some(100));
        assert_eq!((a.suggested_depth, a.verdict), (125, Verdict::Raise));
        assert_eq!(s.advice(32, None).verdict, Verdict::Raise, "the ring got fuller than the margin allows");
        assert_eq!(s.advice(4095, Some(16)).verdict, Verdict::CanShrink);
        assert_eq!(s.advice(4095, None).verdict, Verdict::Fits, "no shrinking on an observation alone");
        let over = stats(1, HighWaterSource::Producer, Some(1));
        assert_eq!(over.advice(1, None).verdict, Verdict::Overran);
    }

    #[test]
    fn the_advice_reads_as_one_line() {
        let a = stats(12, HighWaterSource::Batches, None).advice(63, Some(20));
        assert_eq!(a.summary(), "high-water 12/63 (batches, a lower bound), suggest 25");
        assert_eq!(
            a.to_string(),
            "high-water 12 of 63 CQEs (largest batch, a lower bound); 20 work requests in flight; \
             depth 25 suggested (about 1600 bytes): fits"
        );
        let big = stats(0, HighWaterSource::Producer, None).advice(1, Some(100_000));
        assert!(big.to_string().ends_with("depth 125000 suggested (about 8 MiB): raise it"), "{big}");
    }
}
