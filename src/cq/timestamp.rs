//! Completion timestamps: what a CQ is made to report ([`Timestamps`]), and how to read
//! [`Completion::timestamp`] as nanoseconds ([`Cq::clock`], [`Cq::timestamp_ns`]).
//!
//! The poll path copies the device's raw value into `Completion::timestamp` and nothing
//! more; converting is the caller's choice, off the hot path, with the [`CqClock`] the CQ
//! hands out:
//!
//! | backend | `Completion::timestamp` | [`CqClock`] |
//! |---|---|---|
//! | mlx5 (direct, and `model-mlx5`) | the CQE's timestamp: free-running cycles, or real time for a CQ made with [`Timestamps::Wallclock`] on a device that has it | [`CqClock::Cycles`] with the device's clock snapshot (`mlx5dv_get_clock_info`), or [`CqClock::RealTime`] |
//! | generic, made with [`Timestamps::Raw`] | `ibv_wc_read_completion_ts` | mlx5: `Cycles`; irdma GEN3: [`CqClock::RawCycles`] of 32 bits (rdma-core gives no conversion); others: `RawCycles` |
//! | generic, made with [`Timestamps::Wallclock`] | `ibv_wc_read_completion_wallclock_ns` | [`CqClock::Nanoseconds`], or on an mlx5 CQ of real-time format `RealTime`: rdma-core returns that format's raw value as "nanoseconds", dvcq converts it |
//! | generic, made without, rxe, `model-e810` | 0 | none: [`Cq::clock`] says why |
//!
//! An attached mlx5 CQ is taken to be free-running, the kernel's default where the device
//! has that format: an application CQ made for real-time timestamps is not told apart.

use super::{Cq, Poller};
use crate::error::Error;
use dvcq_mlx5_dv::clock::{real_time_to_ns, ClockInfo, TimestampFormat};
use dvcq_provider::Completion;

/// The completion timestamps a CQ is made to report ([`super::CqOptions::timestamps`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Timestamps {
    /// The device's default: a ConnectX (and `model-mlx5`) stamps every successful CQE with
    /// its free-running clock, which dvcq's mlx5 poller reads; rdma-core's `ibv_poll_cq`
    /// reports none.
    #[default]
    Default,
    /// The device's own clock (`IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`): on an rdma-core
    /// device, an extended CQ polled by the generic backend.
    Raw,
    /// Wall-clock nanoseconds (`IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK`): on an mlx5
    /// device with real-time support (and `model-mlx5`), a CQ of the real-time format.
    Wallclock,
}

/// The clock a CQ's [`Completion::timestamp`] values are on, and how to read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqClock {
    /// mlx5 free-running cycles, converted with this snapshot of the device clock
    /// ([`ClockInfo::ts_to_ns`]); ask again for a fresh one within the snapshot's overflow
    /// period (about 17 s on a 156.25 MHz clock).
    Cycles(ClockInfo),
    /// mlx5 real-time format: seconds in bits 63:32, nanoseconds in bits 31:0.
    RealTime,
    /// Nanoseconds already.
    Nanoseconds,
    /// Device clock units that wrap at `mask`, with no conversion to nanoseconds known
    /// (irdma GEN3 through rdma-core: 32 bits of "HCA clock units").
    RawCycles {
        /// The bits of the counter.
        mask: u64,
    },
}

impl CqClock {
    /// A short name of the clock, for tables: `free-running cycles`, `real time`, ...
    pub const fn name(&self) -> &'static str {
        match self {
            CqClock::Cycles(_) => "free-running cycles",
            CqClock::RealTime => "real time",
            CqClock::Nanoseconds => "nanoseconds",
            CqClock::RawCycles { .. } => "raw device cycles",
        }
    }

    /// `raw` in nanoseconds, where the clock can say.
    pub const fn to_ns(&self, raw: u64) -> Option<u64> {
        match self {
            CqClock::Cycles(ci) => Some(ci.ts_to_ns(raw)),
            CqClock::RealTime => Some(real_time_to_ns(raw)),
            CqClock::Nanoseconds => Some(raw),
            CqClock::RawCycles { .. } => None,
        }
    }

    /// The bits a raw value wraps at.
    pub const fn mask(&self) -> u64 {
        match self {
            CqClock::Cycles(ci) => ci.mask,
            CqClock::RawCycles { mask } => *mask,
            CqClock::RealTime | CqClock::Nanoseconds => u64::MAX,
        }
    }

    /// Whether `later` is at or after `earlier` on this clock: for a wrapping counter, a
    /// masked step of at most half its period forward (the most a wrapping counter can
    /// order, as `mlx5dv_ts_to_ns` decides it); otherwise the time in nanoseconds does not
    /// go back.
    pub const fn forward(&self, earlier: u64, later: u64) -> bool {
        match self {
            CqClock::Cycles(ci) => later.wrapping_sub(earlier) & ci.mask <= ci.mask / 2,
            CqClock::RawCycles { mask } => later.wrapping_sub(earlier) & *mask <= *mask / 2,
            CqClock::RealTime => real_time_to_ns(later) >= real_time_to_ns(earlier),
            CqClock::Nanoseconds => later >= earlier,
        }
    }
}

/// Makes a model CQ of `depth` reporting `t`: `model-mlx5` stamps every CQ's successful
/// CQEs, free-running by default and for [`Timestamps::Raw`], in the real-time format for
/// [`Timestamps::Wallclock`]; `model-e810` (irdma GEN2) has no timestamps to report.
pub(crate) fn model_cq(
    m: &crate::model_device::ModelDevice,
    depth: u32,
    mlx5: Option<crate::model_device::Mlx5CqAttrs>,
    t: Timestamps,
    device: &str,
) -> Result<crate::model_device::ModelCq, Error> {
    use crate::model_device::{DeviceError, ModelVendor};
    let unsupported = |e: DeviceError| Error::Unsupported {
        device: device.to_string(),
        what: "completion timestamps",
        why: format!("{e}"),
    };
    match (t, m.vendor()) {
        (Timestamps::Default, _) | (Timestamps::Raw, ModelVendor::Mlx5) => match mlx5 {
            Some(a) => m.create_cq_mlx5(depth, a),
            None => m.create_cq(depth),
        }
        .map_err(|e| crate::context::model_error(device, e)),
        (Timestamps::Raw, ModelVendor::Irdma) => Err(unsupported(DeviceError::Unsupported {
            what: "completion timestamps (E810 CQEs carry none; irdma reports them on GEN3 only)",
            device: m.name(),
        })),
        (Timestamps::Wallclock, _) => {
            m.create_cq_with_timestamps(depth, mlx5, TimestampFormat::RealTime).map_err(|e| match e {
                DeviceError::Unsupported { .. } => unsupported(e),
                e => crate::context::model_error(device, e),
            })
        }
    }
}

/// A CQ without completion timestamps, saying why.
fn none(cq: &Cq, why: String) -> Error {
    Error::Unsupported { device: cq.device().to_string(), what: "completion timestamps", why }
}

/// `ci` if its conversion can run: a shift of 64 bits or more would overflow the shift in
/// [`ClockInfo::ts_to_ns`], so such a snapshot from the kernel is refused, naming the value.
fn usable_clock(device: &str, ci: ClockInfo) -> Result<ClockInfo, Error> {
    if ci.shift < u64::BITS {
        return Ok(ci);
    }
    Err(Error::DeviceReport {
        device: device.to_string(),
        what: "mlx5dv_clock_info.shift",
        value: ci.shift.to_string(),
        why: "a shift of 64 bits or more converts no timestamp to nanoseconds".into(),
    })
}

impl Cq {
    /// The clock its completions' [`Completion::timestamp`] values are on (see the module
    /// table). A [`CqClock::Cycles`] snapshot is taken now: ask again after its overflow
    /// period.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] for a CQ whose completions carry no timestamp (rxe,
    /// `model-e810`, a generic CQ made without [`Timestamps`]), saying why;
    /// [`Error::Verbs`] when `mlx5dv_get_clock_info` fails.
    pub fn clock(&self) -> Result<CqClock, Error> {
        match &self.poller {
            Poller::Model(m) => match m.timestamp_format() {
                Some(TimestampFormat::RealTime) => Ok(CqClock::RealTime),
                Some(TimestampFormat::FreeRunning) => match m.clock_info() {
                    Some(ci) => Ok(CqClock::Cycles(ci)),
                    None => Err(none(self, "the model has no clock".into())),
                },
                None => Err(none(
                    self,
                    "model-e810 plays an E810 (irdma GEN2), whose CQEs carry no timestamp; rdma-core \
                     reports irdma timestamps on GEN3 only"
                        .into(),
                )),
            },
            Poller::Generic(g) => verbs_clock(self, g.verbs_cq()),
            Poller::Rxe(_) => Err(none(
                self,
                "rxe reports no completion timestamps (its provider accepts no \
                 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)"
                    .into(),
            )),
            Poller::Mlx5(m) => match m.verbs_cq() {
                Some(v) => crate::sys::clock::mlx5_clock_info(v.context())
                    .map_err(|source| Error::Verbs { device: self.device().to_string(), source })
                    .and_then(|ci| usable_clock(self.device(), ci))
                    .map(CqClock::Cycles),
                None => Err(none(self, "this mlx5 CQ has no rdma-core context to read the clock of".into())),
            },
            // An attached irdma CQ: GEN3 CQEs carry 32 bits of device clock (what rdma-core's
            // own poll reports, without a conversion); GEN1 and GEN2 CQEs none.
            Poller::Irdma(m) => match m.expect().0.hw_rev {
                dvcq_uapi::irdma::HwRev::Gen3 => Ok(CqClock::RawCycles { mask: u64::from(u32::MAX) }),
                rev => Err(none(self, format!("irdma {rev:?} CQEs carry no timestamp (GEN3 ones do)"))),
            },
        }
    }

    /// A completion's timestamp in nanoseconds, on the clock [`Cq::clock`] gives (read
    /// fresh at each call: for many completions, take the clock once and use
    /// [`CqClock::to_ns`]). Error completions carry no timestamp.
    ///
    /// # Errors
    ///
    /// As [`Cq::clock`], and [`Error::Unsupported`] for a clock without a conversion
    /// (irdma GEN3's raw units).
    pub fn timestamp_ns(&self, c: &Completion) -> Result<u64, Error> {
        let clock = self.clock()?;
        clock.to_ns(c.timestamp).ok_or_else(|| {
            none(self, format!("its clock ({clock:?}) has no conversion to nanoseconds that rdma-core knows"))
        })
    }
}

/// The clock of a generic-backend CQ: what its extended flags asked rdma-core for.
fn verbs_clock(cq: &Cq, v: &crate::sys::cq::VerbsCq) -> Result<CqClock, Error> {
    use crate::sys::ffi::{
        IBV_WC_EX_WITH_COMPLETION_TIMESTAMP as RAW, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK as WALL,
    };
    let flags = v.ex_flags().unwrap_or(0);
    let provider = crate::backend::provider_of(v.context());
    if flags & u64::from(RAW) != 0 {
        return match provider.as_deref() {
            Some("mlx5") => crate::sys::clock::mlx5_clock_info(v.context())
                .map(CqClock::Cycles)
                .map_err(|source| Error::Verbs { device: cq.device().to_string(), source }),
            // providers/irdma/uverbs.c irdma_wc_read_completion_ts: the CQE's 32-bit field,
            // "in HCA clock units".
            Some("irdma") => Ok(CqClock::RawCycles { mask: u64::from(u32::MAX) }),
            _ => Ok(CqClock::RawCycles { mask: u64::MAX }),
        };
    }
    if flags & u64::from(WALL) != 0 {
        let real_time = provider.as_deref() == Some("mlx5") && crate::sys::clock::mlx5_real_time(v.context());
        return Ok(if real_time { CqClock::RealTime } else { CqClock::Nanoseconds });
    }
    Err(none(
        cq,
        "it was made without them: rdma-core's ibv_poll_cq reports none; make it with \
         CqOptions::timestamps (Timestamps::Raw or Timestamps::Wallclock)"
            .into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_mlx5_dv::clock::CoreClock;

    fn cycles() -> CqClock {
        let c = CoreClock::from_khz(156_250);
        CqClock::Cycles(ClockInfo {
            nsec: 1_000,
            last_cycles: 100,
            frac: 0,
            mult: c.mult,
            shift: c.shift,
            mask: c.mask,
        })
    }

    #[test]
    fn each_clock_converts_as_its_format_says() {
        assert_eq!(cycles().to_ns(110), Some(1_064));
        assert_eq!(CqClock::RealTime.to_ns((2 << 32) | 5), Some(2_000_000_005));
        assert_eq!(CqClock::Nanoseconds.to_ns(77), Some(77));
        assert_eq!(CqClock::RawCycles { mask: 0xffff_ffff }.to_ns(77), None);
    }

    #[test]
    fn forward_tells_a_wrap_from_a_step_back() {
        let c = cycles();
        let mask = c.mask();
        assert!(c.forward(mask - 3, 2), "across the 41-bit wrap");
        assert!(!c.forward(2, mask - 3), "back across it");
        assert!(c.forward(5, 5));
        assert!(!c.forward(6, 5));
        let raw = CqClock::RawCycles { mask: 0xffff_ffff };
        assert!(raw.forward(0xffff_fff0, 0x10));
        assert!(!raw.forward(0x10, 0xffff_fff0));
        // Real time: 1 s + 999999999 ns is before 2 s + 0 ns, though its raw value is larger
        // in the low word.
        assert!(CqClock::RealTime.forward((1 << 32) | 999_999_999, 2 << 32));
        assert!(!CqClock::RealTime.forward(2 << 32, (1 << 32) | 999_999_999));
        assert!(!CqClock::Nanoseconds.forward(10, 9));
    }

    #[test]
    fn a_kernel_clock_whose_shift_converts_nothing_is_refused_naming_it() {
        let CqClock::Cycles(ci) = cycles() else { unreachable!() };
        assert_eq!(usable_clock("mlx5_0", ci).ok(), Some(ci));
        let bad = ClockInfo { shift: 64, ..ci };
        let e = usable_clock("mlx5_0", bad).unwrap_err().to_string();
        assert!(e.contains("mlx5_0") && e.contains("shift = 64"), "{e}");
    }
}
