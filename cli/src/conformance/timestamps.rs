//! The timestamp check of a validation: the completions one CQ returned carry timestamps
//! that go forward per QP, each step less than half the clock's period (the most a wrapping
//! counter can order), on the clock the CQ says they are on ([`crate::Cq::clock`]).
//!
//! A QP's completions on one CQ come out in the order its work completed, so their
//! timestamps must not go back; completions of different QPs may interleave in any order
//! and are not compared. Error completions carry no timestamp (an mlx5 error CQE holds its
//! syndromes where a success holds the time) and are skipped.

use crate::cq::CqClock;
use crate::Completion;
use std::collections::HashMap;

/// Where the timestamps broke the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimestampViolation {
    /// No successful completion carries a timestamp at all: the backend does not stamp
    /// them, or the CQ was made without.
    #[error("none of the {completions} successful completions carries a timestamp (all are 0)")]
    Missing {
        /// Successful completions looked at.
        completions: usize,
    },
    /// A QP's completion is stamped before the one it followed.
    #[error(
        "completion {index} (qp {qpn:#x}) is stamped {current:#x}, before completion {previous_index} of the same \
         QP ({previous:#x}) on {clock:?}"
    )]
    Backwards {
        /// Its position in the completions checked.
        index: usize,
        /// The QP.
        qpn: u32,
        /// Its raw timestamp.
        current: u64,
        /// The position of the QP's completion before it.
        previous_index: usize,
        /// That one's raw timestamp.
        previous: u64,
        /// The clock they were read on.
        clock: CqClock,
    },
}

/// What a passing check looked at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimestampSummary {
    /// Successful completions checked.
    pub completions: usize,
    /// QPs among them.
    pub qps: usize,
    /// Consecutive pairs of one QP compared.
    pub pairs: usize,
    /// Nanoseconds from the earliest to the latest stamp, where the clock converts.
    pub span_ns: Option<u64>,
}

/// Checks the completions one CQ returned, in the order it returned them, on `clock` (the
/// CQ's [`crate::Cq::clock`], taken after the polls): per QP, each successful completion's
/// timestamp is at or after the one before ([`CqClock::forward`]).
///
/// # Errors
///
/// The first violation, naming both completions by position.
///
/// # Examples
///
/// ```
/// use dvcq_cli::conformance::timestamps_monotonic;
/// use dvcq::cq::CqClock;
/// use dvcq::Completion;
///
/// let at = |qp_num, timestamp| Completion { qp_num, timestamp, ..Completion::default() };
/// let ok = [at(1, 100), at(2, 90), at(1, 130)];
/// assert_eq!(timestamps_monotonic(&ok, &CqClock::Nanoseconds).unwrap().pairs, 1);
/// let bad = [at(1, 100), at(1, 99)];
/// assert!(timestamps_monotonic(&bad, &CqClock::Nanoseconds).is_err());
/// ```
pub fn timestamps_monotonic(
    completions: &[Completion],
    clock: &CqClock,
) -> Result<TimestampSummary, TimestampViolation> {
    let mut last: HashMap<u32, (usize, u64)> = HashMap::new();
    let mut s = TimestampSummary::default();
    let mut stamped = false;
    let (mut lo, mut hi): (Option<u64>, Option<u64>) = (None, None);
    for (index, c) in completions.iter().enumerate() {
        if !c.is_ok() {
            continue;
        }
        s.completions += 1;
        stamped |= c.timestamp != 0;
        if let Some(&(previous_index, previous)) = last.get(&c.qp_num) {
            if !clock.forward(previous, c.timestamp) {
                return Err(TimestampViolation::Backwards {
                    index,
                    qpn: c.qp_num,
                    current: c.timestamp,
                    previous_index,
                    previous,
                    clock: *clock,
                });
            }
            s.pairs += 1;
        }
        last.insert(c.qp_num, (index, c.timestamp));
        if let Some(ns) = clock.to_ns(c.timestamp) {
            lo = Some(lo.map_or(ns, |l| l.min(ns)));
            hi = Some(hi.map_or(ns, |h| h.max(ns)));
        }
    }
    if s.completions > 0 && !stamped {
        return Err(TimestampViolation::Missing { completions: s.completions });
    }
    s.qps = last.len();
    s.span_ns = lo.zip(hi).map(|(l, h)| h - l);
    Ok(s)
}

/// Refuses a clock the device reported that converts nothing: rdma-core's clock snapshot
/// comes from the device, and a shift of 64 bits or more overflows the conversion.
fn usable_clock(ctx: &crate::Context, clock: &CqClock) -> Result<(), crate::Error> {
    match clock {
        CqClock::Cycles(ci) if ci.shift >= 64 => Err(super::limits::reported(
            ctx,
            "mlx5dv_clock_info.shift",
            ci.shift,
            "a cycle-to-nanosecond shift of 64 bits or more: no timestamp converts",
        )),
        _ => Ok(()),
    }
}

/// The `cq_timestamps` check (after rdma-core's `test_mlx5_timestamp.py` and the extended
/// CQ's completion timestamp in `test_cqex.py`): RDMA WRITEs from both QPs of a pair on a
/// CQ made to report timestamps ([`crate::cq::Timestamps::Raw`]); each QP's successful
/// completions carry timestamps that go forward within the clock's period. A device whose
/// CQs carry none (rxe, an E810) skips, saying why.
pub(super) fn cq_timestamps(
    ctx: &crate::Context,
    choice: crate::cq::BackendChoice,
) -> Result<super::Outcome, crate::Error> {
    use super::workloads::{caps, check_data, ok, outcome, pattern, rig};
    use crate::cq::{CqOptions, Timestamps};
    use crate::verbs::{QpType, SendOp, SendWr};
    use crate::{Error, WcOpcode};
    let skip_unsupported = |e: Error| match e {
        Error::Unsupported { why, .. } => Ok(super::Outcome::skip(why)),
        e => Err(e),
    };
    let mut cq = match ctx.create_cq(CqOptions::new(64).backend(choice).timestamps(Timestamps::Raw)) {
        Ok(cq) => cq,
        Err(e) => return skip_unsupported(e),
    };
    let clock = match cq.clock() {
        Ok(c) => c,
        Err(e) => return skip_unsupported(e),
    };
    usable_clock(ctx, &clock)?;
    let mut r = rig(ctx, QpType::Rc, &cq, &cq, caps(16, 16), 2)?;
    let mut expected = Vec::new();
    for i in 0..8u64 {
        for (from, to) in [(0, 1), (1, 0)] {
            r.mrs[from].write(i * 128, &pattern(40 + i, 64))?;
            let sg = [r.mrs[from].slice(i * 128, 64)?];
            let dest = r.mrs[to].remote().at(4096 + i * 128);
            r.qps[from].post_send(&[SendWr::new(i, SendOp::Write(dest), &sg)])?;
            expected.push(ok(from as u8, i, WcOpcode::RdmaWrite));
        }
    }
    super::poll_n(&mut cq, &mut r.rec, expected.len());
    for i in 0..8u64 {
        check_data(&mut r.rec, "write", &r.mrs[1], 4096 + i * 128, &pattern(40 + i, 64));
    }
    let summary = match timestamps_monotonic(r.rec.raw(), &clock) {
        Ok(s) => format!(
            "{} completions of {} QPs stamped in order ({}){}",
            s.completions,
            s.qps,
            clock.name(),
            s.span_ns.map_or(String::new(), |ns| format!(", over {ns} ns"))
        ),
        Err(v) => {
            r.rec.problem(v.to_string());
            String::new()
        }
    };
    let mut o = outcome(vec![(cq, 2 * 16)], r.rec, expected);
    o.summary = (!summary.is_empty()).then_some(summary);
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WcStatus;
    use dvcq_mlx5_dv::clock::{ClockInfo, CoreClock};

    fn at(qp_num: u32, timestamp: u64) -> Completion {
        Completion { qp_num, timestamp, ..Completion::default() }
    }

    fn cycles() -> CqClock {
        let c = CoreClock::from_khz(156_250);
        CqClock::Cycles(ClockInfo {
            nsec: 1 << 40,
            last_cycles: c.mask - 5,
            frac: 0,
            mult: c.mult,
            shift: c.shift,
            mask: c.mask,
        })
    }

    #[test]
    fn each_qp_goes_forward_on_its_own() {
        // QP 2 is stamped earlier than QP 1's first completion: other QPs are not compared.
        let run = [at(1, 100), at(2, 50), at(1, 100), at(2, 60), at(1, 150)];
        let s = timestamps_monotonic(&run, &CqClock::Nanoseconds).unwrap();
        assert_eq!(s, TimestampSummary { completions: 5, qps: 2, pairs: 3, span_ns: Some(100) });
        let back = [at(1, 100), at(2, 50), at(1, 99)];
        assert_eq!(
            timestamps_monotonic(&back, &CqClock::Nanoseconds).unwrap_err(),
            TimestampViolation::Backwards {
                index: 2,
                qpn: 1,
                current: 99,
                previous_index: 0,
                previous: 100,
                clock: CqClock::Nanoseconds
            }
        );
    }

    #[test]
    fn a_wrapping_counter_is_ordered_across_its_wrap_and_not_beyond_half_a_period() {
        let c = cycles();
        let mask = c.mask();
        let run = [at(1, mask - 3), at(1, mask), at(1, 4), at(1, 1000)];
        let s = timestamps_monotonic(&run, &c).unwrap();
        assert_eq!(s.pairs, 3);
        // 1004 cycles of 6.4 ns, each end converted (and rounded down) on its own:
        // 1006 cycles after the snapshot (6438 ns) less 2 cycles (12 ns).
        assert_eq!(s.span_ns, Some(6_426));
        assert!(timestamps_monotonic(&[at(1, 4), at(1, mask - 3)], &c).is_err(), "back across the wrap");
        assert!(timestamps_monotonic(&[at(1, 0), at(1, mask / 2 + 1)], &c).is_err(), "more than half a period");
        let raw = CqClock::RawCycles { mask: 0xffff_ffff };
        assert_eq!(timestamps_monotonic(&[at(1, 0xffff_fff0), at(1, 3)], &raw).unwrap().span_ns, None);
    }

    #[test]
    fn errors_are_skipped_and_unstamped_runs_refused() {
        let err = Completion { status: WcStatus::WrFlushErr, ..at(1, 0) };
        let run = [at(1, 500), err, at(1, 600)];
        assert_eq!(timestamps_monotonic(&run, &CqClock::Nanoseconds).unwrap().completions, 2);
        assert_eq!(
            timestamps_monotonic(&[at(1, 0), at(2, 0)], &CqClock::Nanoseconds).unwrap_err(),
            TimestampViolation::Missing { completions: 2 }
        );
        assert_eq!(timestamps_monotonic(&[err], &CqClock::Nanoseconds).unwrap(), TimestampSummary::default());
    }

    #[test]
    fn a_clock_whose_shift_converts_nothing_is_refused_naming_it() {
        let ctx = crate::Context::open("model-mlx5").unwrap();
        assert!(usable_clock(&ctx, &cycles()).is_ok());
        let CqClock::Cycles(ci) = cycles() else { unreachable!() };
        let bad = CqClock::Cycles(ClockInfo { shift: 64, ..ci });
        let e = usable_clock(&ctx, &bad).unwrap_err().to_string();
        assert!(e.starts_with("model-mlx5:") && e.contains("mlx5dv_clock_info.shift = 64"), "{e}");
    }
}
