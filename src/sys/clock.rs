//! The mlx5 device clock as rdma-core shows it: `mlx5dv_get_clock_info`, the snapshot that
//! turns free-running CQE timestamps into nanoseconds, and the context's
//! `MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS`, which says whether CQs may carry real-time ones.

use super::device::Context;
use super::ffi;
use crate::sys::error::VerbsError;
use dvcq_mlx5_dv::clock::ClockInfo;

/// Tries of `mlx5dv_get_clock_info` while the kernel is updating the page (`EBUSY` after
/// rdma-core's own ten reads of the sequence word; the update takes microseconds).
const BUSY_TRIES: u32 = 100;

/// `MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS` (`enum mlx5dv_context_flags`, mlx5dv.h).
const MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS: u64 = 1 << 7;

/// The device clock's snapshot now (`mlx5dv_get_clock_info`).
///
/// # Errors
///
/// `EOPNOTSUPP` for a device that is not mlx5, `EINVAL` when the kernel mapped no clock
/// page, `EBUSY` if the kernel kept updating it.
pub(crate) fn mlx5_clock_info(ctx: &Context) -> Result<ClockInfo, VerbsError> {
    if super::loader::mlx5_loaded().is_err() {
        return Err(VerbsError { call: "mlx5dv_get_clock_info", errno: libc::ENOSYS });
    }
    for _ in 0..BUSY_TRIES {
        let mut ci = ffi::mlx5dv_clock_info::default();
        // SAFETY: a live context and an output struct on our stack.
        let rc = unsafe { ffi::mlx5dv_get_clock_info(ctx.as_ptr(), &mut ci) };
        match rc {
            0 => {
                return Ok(ClockInfo {
                    nsec: ci.nsec,
                    last_cycles: ci.last_cycles,
                    frac: ci.frac,
                    mult: ci.mult,
                    shift: ci.shift,
                    mask: ci.mask,
                })
            }
            libc::EBUSY => std::thread::yield_now(),
            e => return Err(VerbsError::code("mlx5dv_get_clock_info", e)),
        }
    }
    Err(VerbsError { call: "mlx5dv_get_clock_info", errno: libc::EBUSY })
}

/// Whether the context lets CQs carry real-time timestamps (`mlx5dv_query_device`'s
/// `MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS`): rdma-core then makes a CQ asked for wallclock
/// timestamps alone a real-time one (providers/mlx5/verbs.c, `create_cq`).
pub(crate) fn mlx5_real_time(ctx: &Context) -> bool {
    if super::loader::mlx5_loaded().is_err() {
        return false;
    }
    let mut attr = ffi::mlx5dv_context::default();
    // SAFETY: a live context and an output struct that lives across the call.
    let rc = unsafe { ffi::mlx5dv_query_device(ctx.as_ptr(), &mut attr) };
    rc == 0 && attr.flags & MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS != 0
}
