//! The model's clocks (rdma-core `providers/mlx5/mlx5dv.h` `mlx5dv_ts_to_ns`,
//! `struct mlx5dv_clock_info`): the free-running core-clock counter a ConnectX stamps
//! CQEs with, the real-time clock of the real-time format, and the kernel's snapshot of the
//! counter (`mlx5dv_get_clock_info`) that converts one into the other.
//!
//! Time is given as nanoseconds since the clock started, so the model is deterministic;
//! the device model that runs it reads a monotonic clock.
//!
//! Model choices: a 156.25 MHz core clock (6.4 ns a cycle, so the conversion is not the
//! identity), whose counter starts 2^24 cycles (about 107 ms) before its 41-bit wrap, so
//! that a run soon crosses the wrap the conversion must handle; the snapshot is taken at
//! the moment it is asked for, as if the kernel had just refreshed it.

use crate::clock::{ns_to_real_time, ClockInfo, CoreClock, TimestampFormat, CYCLES_MASK};

/// A device's clocks, started at `start_ns` nanoseconds of real time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelClock {
    /// The core clock's counter set-up.
    pub core: CoreClock,
    /// The counter's value when the clock started.
    pub start_cycles: u64,
    /// The real time when the clock started, in nanoseconds.
    pub start_ns: u64,
}

impl ModelClock {
    /// The model's core clock, in kHz.
    pub const KHZ: u32 = 156_250;

    /// The model's clocks, started at real time `start_ns`.
    pub const fn new(start_ns: u64) -> ModelClock {
        ModelClock { core: CoreClock::from_khz(Self::KHZ), start_cycles: CYCLES_MASK + 1 - (1 << 24), start_ns }
    }

    /// The counter `elapsed_ns` after the start, masked as the device's.
    pub const fn cycles_at(&self, elapsed_ns: u64) -> u64 {
        self.start_cycles.wrapping_add(self.core.ns_to_cycles(elapsed_ns)) & self.core.mask
    }

    /// The real-time format timestamp `elapsed_ns` after the start.
    pub const fn real_time_at(&self, elapsed_ns: u64) -> u64 {
        ns_to_real_time(self.start_ns.wrapping_add(elapsed_ns))
    }

    /// What a CQE of `format` written `elapsed_ns` after the start carries.
    pub const fn timestamp_at(&self, format: TimestampFormat, elapsed_ns: u64) -> u64 {
        match format {
            TimestampFormat::FreeRunning => self.cycles_at(elapsed_ns),
            TimestampFormat::RealTime => self.real_time_at(elapsed_ns),
        }
    }

    /// The kernel's snapshot `elapsed_ns` after the start: the counter then, and the clock's
    /// nanoseconds at that count (start plus the whole cycles' time, with its fraction).
    pub const fn clock_info_at(&self, elapsed_ns: u64) -> ClockInfo {
        let cycles = self.core.ns_to_cycles(elapsed_ns);
        let (ns, frac) = self.core.cycles_to_ns(cycles);
        ClockInfo {
            nsec: self.start_ns.wrapping_add(ns),
            last_cycles: self.start_cycles.wrapping_add(cycles) & self.core.mask,
            frac,
            mult: self.core.mult,
            shift: self.core.shift,
            mask: self.core.mask,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::real_time_to_ns;

    const START: u64 = 1_700_000_000_000_000_000;

    #[test]
    fn the_counter_advances_at_the_core_clock_and_wraps_at_41_bits() {
        let c = ModelClock::new(START);
        assert_eq!(c.cycles_at(0), (1 << 41) - (1 << 24));
        assert_eq!(c.cycles_at(64), c.cycles_at(0) + 10, "6.4 ns a cycle");
        // 2^24 cycles after the start (107.37 ms) the counter is back at zero.
        let wrap_ns = c.core.cycles_to_ns(1 << 24).0;
        assert_eq!(wrap_ns, 107_374_182);
        assert_eq!(c.cycles_at(wrap_ns + 7), 1);
        assert!(c.cycles_at(wrap_ns + 7) < c.cycles_at(wrap_ns - 7));
    }

    #[test]
    fn a_snapshot_converts_stamps_before_and_after_it_across_the_wrap() {
        let c = ModelClock::new(START);
        for snap in [0, 50_000_000, 107_000_000, 200_000_000, 5_000_000_000] {
            let ci = c.clock_info_at(snap);
            for at in [snap.saturating_sub(30_000_000), snap, snap + 1, snap + 90_000_000] {
                let ts = c.timestamp_at(TimestampFormat::FreeRunning, at);
                let ns = ci.ts_to_ns(ts);
                let want = START + at;
                // Within a cycle (6.4 ns): rounded down after the snapshot, and before it as
                // rdma-core's backward branch rounds.
                assert!(ns.abs_diff(want) < 7, "snapshot at {snap}, stamp at {at}: {ns} for {want}");
            }
        }
    }

    #[test]
    fn real_time_stamps_are_the_time_in_seconds_and_nanoseconds() {
        let c = ModelClock::new(START);
        let ts = c.timestamp_at(TimestampFormat::RealTime, 1_500_000_123);
        assert_eq!(ts >> 32, 1_700_000_001);
        assert_eq!(ts & 0xffff_ffff, 500_000_123);
        assert_eq!(real_time_to_ns(ts), START + 1_500_000_123);
    }
}
