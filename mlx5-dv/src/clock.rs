//! mlx5 completion timestamps: the CQE's `timestamp` (bytes 48-55) in nanoseconds.
//!
//! A CQ's CQEs carry one of two formats, fixed when its QPs are made (the kernel's
//! `get_ts_format`, drivers/infiniband/hw/mlx5/qp.c, gives a QP the format of its CQ):
//!
//! - [`TimestampFormat::FreeRunning`]: cycles of the device's core clock, a free-running
//!   counter the kernel reads masked to 41 bits (`mlx5_timecounter_init`,
//!   drivers/net/ethernet/mellanox/mlx5/core/lib/clock.c). [`ClockInfo::ts_to_ns`] turns
//!   them into nanoseconds of the kernel's clock with a recent snapshot of it
//!   (`mlx5dv_get_clock_info`), exactly as rdma-core's `mlx5dv_ts_to_ns` (mlx5dv.h).
//! - [`TimestampFormat::RealTime`]: the device's real-time clock, seconds in bits 63:32 and
//!   nanoseconds in bits 31:0 (the kernel's `REAL_TIME_TO_NS`, lib/clock.h).
//!   [`real_time_to_ns`] converts it. rdma-core 65 hands this raw value out as
//!   `ibv_wc_read_completion_wallclock_ns` unconverted (providers/mlx5/cq.c); dvcq converts
//!   it, so that a wallclock timestamp is nanoseconds whatever the format.
//!
//! [`CoreClock`] is the kernel's set-up of the cycle counter for a device frequency, which the
//! hardware model uses to write cycles and snapshots that convert as a NIC's do.

/// How a CQ's CQEs carry their timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimestampFormat {
    /// Core-clock cycles (`MLX5_TIMESTAMP_FORMAT_FREE_RUNNING`): convert with a
    /// [`ClockInfo`].
    FreeRunning,
    /// Real time (`MLX5_TIMESTAMP_FORMAT_REAL_TIME`): seconds in bits 63:32, nanoseconds in
    /// bits 31:0; convert with [`real_time_to_ns`].
    RealTime,
}

/// A snapshot of the kernel's clock for the device (`struct mlx5dv_clock_info`, mlx5dv.h,
/// filled by `mlx5dv_get_clock_info` from the page the kernel updates): at cycle count
/// `last_cycles` the clock read `nsec` nanoseconds (and `frac` fractions of one, in units of
/// 2^-`shift`); a cycle lasts `mult / 2^shift` nanoseconds; the counter wraps at `mask`.
///
/// A snapshot converts timestamps within half the counter's period of it, and only while
/// `delta * mult` fits 64 bits: rdma-core tells applications to refresh it every
/// `max_clock_info_update_nsec` (`mlx5dv_get_clock_info(3)`), about 17 s for a 156.25 MHz
/// clock ([`CoreClock::overflow_period_ns`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ClockInfo {
    /// Nanoseconds at `last_cycles`.
    pub nsec: u64,
    /// The cycle count of the snapshot.
    pub last_cycles: u64,
    /// Sub-nanosecond remainder at the snapshot, in units of 2^-`shift` ns.
    pub frac: u64,
    /// Cycle-to-nanosecond multiplier.
    pub mult: u32,
    /// Cycle-to-nanosecond shift.
    pub shift: u32,
    /// The bits of the cycle counter.
    pub mask: u64,
}

impl ClockInfo {
    /// A free-running timestamp (cycles) in nanoseconds: `mlx5dv_ts_to_ns` (mlx5dv.h), with
    /// its 64-bit wrapping arithmetic. A timestamp more than half the counter's period
    /// after the snapshot is taken as one before it.
    pub const fn ts_to_ns(&self, ts: u64) -> u64 {
        let delta = ts.wrapping_sub(self.last_cycles) & self.mask;
        if delta > self.mask / 2 {
            let delta = self.last_cycles.wrapping_sub(ts) & self.mask;
            let ns = delta.wrapping_mul(self.mult as u64).wrapping_sub(self.frac) >> self.shift;
            self.nsec.wrapping_sub(ns)
        } else {
            let ns = delta.wrapping_mul(self.mult as u64).wrapping_add(self.frac) >> self.shift;
            self.nsec.wrapping_add(ns)
        }
    }
}

/// A real-time format timestamp in nanoseconds: seconds (bits 63:32) times 10^9 plus
/// nanoseconds (bits 31:0), the kernel's `REAL_TIME_TO_NS(hi, lo)`.
pub const fn real_time_to_ns(ts: u64) -> u64 {
    (ts >> 32).wrapping_mul(1_000_000_000).wrapping_add(ts & 0xffff_ffff)
}

/// Nanoseconds in the real-time format: the inverse of [`real_time_to_ns`].
pub const fn ns_to_real_time(ns: u64) -> u64 {
    ((ns / 1_000_000_000) << 32) | (ns % 1_000_000_000)
}

/// The bits the kernel reads of the free-running counter (`CLOCKSOURCE_MASK(41)`).
pub const CYCLES_MASK: u64 = (1 << 41) - 1;

/// The kernel's cycle counter for a device clock of `khz` (`mlx5_timecounter_init`): the
/// multiplier and shift that turn cycles into nanoseconds, and the 41-bit mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CoreClock {
    /// `device_frequency_khz`.
    pub khz: u32,
    /// `cycles.mult`.
    pub mult: u32,
    /// `cycles.shift`.
    pub shift: u32,
    /// `cycles.mask`.
    pub mask: u64,
}

impl CoreClock {
    /// The kernel's choice for `khz` (at least 1): `shift = min(ilog2(khz) + 16,
    /// ilog2(4294 * khz))` (`mlx5_ptp_shift_constant`), `mult = (10^6 << shift + khz / 2) /
    /// khz` (`clocksource_khz2mult`).
    pub const fn from_khz(khz: u32) -> CoreClock {
        let khz = if khz == 0 { 1 } else { khz };
        let a = khz.ilog2() + 16;
        let b = ((u32::MAX / 1_000_000) as u64 * khz as u64).ilog2();
        let shift = if a < b { a } else { b };
        let mult = ((1_000_000u64 << shift) + khz as u64 / 2) / khz as u64;
        CoreClock { khz, mult: mult as u32, shift, mask: CYCLES_MASK }
    }

    /// Nanoseconds of `cycles` (no wrap: the product is taken in 128 bits), and the
    /// sub-nanosecond remainder in units of 2^-`shift` ns.
    pub const fn cycles_to_ns(&self, cycles: u64) -> (u64, u64) {
        let p = cycles as u128 * self.mult as u128;
        ((p >> self.shift) as u64, (p & ((1u128 << self.shift) - 1)) as u64)
    }

    /// Cycles in `ns` nanoseconds, rounded down.
    pub const fn ns_to_cycles(&self, ns: u64) -> u64 {
        (ns as u128 * self.khz as u128 / 1_000_000) as u64
    }

    /// How often the kernel refreshes its snapshot (`mlx5_init_overflow_period`): the
    /// nanoseconds of `min((2^63 - 1) / mult, mask / 3)` cycles, beyond which `ts_to_ns`
    /// overflows.
    pub const fn overflow_period_ns(&self) -> u64 {
        let by_mult = (u64::MAX >> 1) / self.mult as u64;
        let by_mask = self.mask / 3;
        self.cycles_to_ns(if by_mult < by_mask { by_mult } else { by_mask }).0
    }

    /// The nanoseconds of one full turn of the counter.
    pub const fn period_ns(&self) -> u64 {
        self.cycles_to_ns(self.mask).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ConnectX core clock of 156.25 MHz (6.4 ns a cycle), as the kernel sets it up.
    const C: CoreClock = CoreClock::from_khz(156_250);

    fn info(nsec: u64, last_cycles: u64, frac: u64) -> ClockInfo {
        ClockInfo { nsec, last_cycles, frac, mult: C.mult, shift: C.shift, mask: C.mask }
    }

    #[test]
    fn the_kernel_s_multiplier_and_shift() {
        // shift = min(17 + 16, ilog2(4294 * 156250) = 29); mult = round(10^6 * 2^29 / 156250).
        assert_eq!((C.mult, C.shift, C.mask), (3_435_973_837, 29, (1 << 41) - 1));
        // 1 GHz: exactly a nanosecond a cycle.
        let g = CoreClock::from_khz(1_000_000);
        assert_eq!((g.mult, g.shift), (1 << 31, 31));
        assert_eq!(g.cycles_to_ns(12_345), (12_345, 0));
        assert_eq!(CoreClock::from_khz(54_000).shift, 27);
        assert_eq!(CoreClock::from_khz(0), CoreClock::from_khz(1));
    }

    #[test]
    fn cycles_convert_forward_and_back_of_the_snapshot() {
        // Vectors worked from mlx5dv_ts_to_ns by hand (u64 arithmetic throughout).
        let ci = info(1_000_000_000_000, 1_000_000, 0);
        assert_eq!(ci.ts_to_ns(1_001_000), 1_000_000_006_400, "1000 cycles after: 6400 ns later");
        assert_eq!(ci.ts_to_ns(999_000), 999_999_993_600, "1000 cycles before: 6400 ns earlier");
        assert_eq!(ci.ts_to_ns(1_000_000), 1_000_000_000_000);
        // The fraction rounds the same way as rdma-core: + frac forward, - frac backward.
        let ci = info(1_000_000_000_000_000_000, 500, 1 << 28);
        assert_eq!(ci.ts_to_ns(501), 1_000_000_000_000_000_006);
        assert_eq!(ci.ts_to_ns(499), 999_999_999_999_999_995);
    }

    #[test]
    fn the_41_bit_counter_wraps_and_upper_bits_are_ignored() {
        // Ten cycles before the wrap, then a timestamp six cycles after it: 16 cycles later.
        let ci = info(5_000, C.mask - 9, 0);
        assert_eq!(ci.ts_to_ns(6), 5_102);
        let ci = info(1_000_000_000_000_000_000, 7, 0);
        assert_eq!(ci.ts_to_ns(7 | (0xabc << 41)), 1_000_000_000_000_000_000);
        // Half the period after the snapshot is still after; one more cycle is before.
        // (That far, delta * mult no longer fits 64 bits: rdma-core's result wraps, which
        // is why the snapshot must be refreshed every overflow period.)
        let ci = info(1_000_000_000_000_000_000, 0, 0);
        assert_eq!(ci.ts_to_ns(C.mask / 2), 1_000_000_027_487_791_097);
        assert_eq!(ci.ts_to_ns(C.mask / 2 + 1), 999_999_972_512_208_896);
    }

    #[test]
    fn the_overflow_period_is_where_the_product_leaves_63_bits() {
        // min((2^63 - 1) / 3435973837, (2^41 - 1) / 3) = 2684354559 cycles = 17.18 s.
        assert_eq!(C.overflow_period_ns(), 17_179_869_178);
        assert_eq!(C.period_ns(), 14_073_748_836_345);
        let ci = info(0, 0, 0);
        let n = 2_684_354_559;
        assert_eq!(ci.ts_to_ns(n), C.cycles_to_ns(n).0, "within the period the u64 product is exact");
    }

    #[test]
    fn real_time_is_seconds_and_nanoseconds() {
        assert_eq!(real_time_to_ns(0x0000_0001_0000_0002), 1_000_000_002);
        assert_eq!(real_time_to_ns((1_700_000_000 << 32) | 999_999_999), 1_700_000_000_999_999_999);
        assert_eq!(ns_to_real_time(1_700_000_000_999_999_999), (1_700_000_000 << 32) | 999_999_999);
        for ns in [0, 1, 999_999_999, 1_000_000_000, 4_294_967_295_999_999_999] {
            assert_eq!(real_time_to_ns(ns_to_real_time(ns)), ns);
        }
    }

    #[test]
    fn nanoseconds_and_cycles_round_trip_within_a_cycle() {
        for ns in [0, 7, 6_400, 1_000_000_007, 17_000_000_000] {
            let c = C.ns_to_cycles(ns);
            let back = C.cycles_to_ns(c).0;
            assert!(back <= ns && ns - back < 7, "{ns} ns -> {c} cycles -> {back} ns");
        }
    }
}
