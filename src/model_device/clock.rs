//! The clock of `model-mlx5` (shared by all its CQs): the mlx5 model's clocks
//! ([`dvcq_mlx5_dv::model::clock::ModelClock`]) run from this process's monotonic clock,
//! started at the real time the device was made. Every CQE the device writes for a success
//! carries the time it was written in its CQ's format; error CQEs have no timestamp field
//! (those bytes hold the syndromes). `model-e810` is an E810 (irdma GEN2), whose CQEs carry
//! no timestamp: rdma-core reports completion timestamps on GEN3 only
//! (`IRDMA_GEN3_WC_FLAGS_EX`, providers/irdma/umain.h).

use dvcq_mlx5_dv::clock::{ClockInfo, TimestampFormat};
use dvcq_mlx5_dv::model::clock::ModelClock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A device's clock: when it started, and the model clock it runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeviceClock {
    started: Instant,
    clock: ModelClock,
}

impl DeviceClock {
    /// A clock started now, at the real time now.
    pub(crate) fn new() -> DeviceClock {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        DeviceClock { started: Instant::now(), clock: ModelClock::new(now) }
    }

    fn elapsed_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// What a CQE of `format` written now carries.
    pub(crate) fn stamp(&self, format: TimestampFormat) -> u64 {
        self.clock.timestamp_at(format, self.elapsed_ns())
    }

    /// The kernel's snapshot now (`mlx5dv_get_clock_info`).
    pub(crate) fn clock_info(&self) -> ClockInfo {
        self.clock.clock_info_at(self.elapsed_ns())
    }
}

impl super::ModelDevice {
    /// The device clock's snapshot now, as `mlx5dv_get_clock_info` gives it: what turns the
    /// free-running timestamps of its CQEs into nanoseconds of real time
    /// ([`ClockInfo::ts_to_ns`]). `None` on `model-e810`, whose CQEs carry no timestamp.
    pub fn clock_info(&self) -> Option<ClockInfo> {
        let f = self.shared.lock();
        (f.vendor == super::ModelVendor::Mlx5).then(|| f.clock.clock_info())
    }

    /// Creates a CQ as [`super::ModelDevice::create_cq`] does, whose CQEs carry
    /// timestamps in `format` (`model-mlx5`; a CQ made without a format is free-running,
    /// the kernel's default where the device has it).
    ///
    /// # Errors
    ///
    /// [`super::DeviceError::Unsupported`] on `model-e810`; otherwise as `create_cq`.
    pub fn create_cq_with_timestamps(
        &self,
        cqe: u32,
        mlx5: Option<super::Mlx5CqAttrs>,
        format: TimestampFormat,
    ) -> Result<super::ModelCq, super::DeviceError> {
        let mut f = self.shared.lock();
        if f.vendor != super::ModelVendor::Mlx5 {
            return Err(super::DeviceError::Unsupported {
                what: "completion timestamps (E810 CQEs carry none; irdma reports them on GEN3 only)",
                device: f.vendor.device_name(),
            });
        }
        let id = f.create_cq(cqe, mlx5)?;
        let clock = f.clock;
        f.cqs[id].stamps = Some((clock, format));
        drop(f);
        Ok(super::ModelCq::new(self.shared.clone(), id))
    }
}

impl super::ModelCq {
    /// The format of this CQ's CQE timestamps; `None` on `model-e810`.
    pub fn timestamp_format(&self) -> Option<TimestampFormat> {
        self.shared().lock().cqs[self.id()].stamps.map(|(_, f)| f)
    }

    /// The device clock's snapshot now ([`super::ModelDevice::clock_info`]); `None` on
    /// `model-e810`.
    pub fn clock_info(&self) -> Option<ClockInfo> {
        self.shared().lock().cqs[self.id()].stamps.map(|(c, _)| c.clock_info())
    }
}
