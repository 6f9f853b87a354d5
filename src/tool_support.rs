//! What the `dvcq` command (crate `dvcq-cli`) needs from the library beyond its API: rdma-core's
//! own polls for the benchmarks' comparison rows, the poll without statistics `bench cq`
//! measures against, and the device queries `validate` reports. Hidden from the docs and not
//! part of the API: it follows the tools and may change in any release.
//!
//! Each function forwards to a crate-private method next to the code it belongs to; the
//! list here is the whole of what the tools reach below the API.
//!
//! Layer: above the whole library (it may import any module), for the tools only; no module
//! of the library imports it.

use crate::cq::{Cq, CqOptions, Poller};
use crate::{CompletionChannel, Context, Error};

/// rdma-core's `struct ibv_wc`, as `ibv_poll_cq` fills it.
pub use crate::sys::ffi::ibv_wc as IbvWc;

/// `IBV_WC_SUCCESS`: the status of an `IbvWc` that succeeded.
pub const IBV_WC_SUCCESS: u32 = crate::sys::ffi::IBV_WC_SUCCESS;

/// `IBV_WC_STANDARD_FLAGS`: an extended CQ's `wc_flags` that give every field of
/// `struct ibv_wc`.
pub const IBV_WC_STANDARD_FLAGS: u64 = crate::sys::cq_ex::STANDARD_FLAGS;

/// [`Cq::poll`] without the statistics (`bench cq` measures what they cost).
#[inline]
pub fn poll_uncounted(cq: &mut Cq, out: &mut [crate::Completion]) -> usize {
    cq.poll_uncounted(out)
}

/// The rdma-core CQ behind a generic-backend `cq`; [`Error::Mismatch`] naming `row` when
/// another backend polls it.
fn verbs_cq<'c>(cq: &'c Cq, row: &str) -> Result<&'c crate::sys::cq::VerbsCq, Error> {
    match &cq.poller {
        Poller::Generic(g) => Ok(g.verbs_cq()),
        _ => Err(Error::Mismatch {
            device: cq.device().to_string(),
            what: format!("the {row} row's CQ is polled by {}", cq.backend().kind.name()),
        }),
    }
}

/// `ibv_poll_cq` on the CQ behind a generic-backend `cq`, into `IbvWc`s without dvcq's
/// conversion; `row` names the caller in the error for a CQ another backend polls.
///
/// # Errors
///
/// [`Error::Mismatch`] for a CQ of another backend, [`Error::Verbs`] when `ibv_poll_cq`
/// fails.
#[inline]
pub fn ibv_poll_cq(cq: &Cq, out: &mut [IbvWc], row: &str) -> Result<usize, Error> {
    verbs_cq(cq, row)?.poll_raw(out).map_err(|source| Error::Verbs { device: cq.device().to_string(), source })
}

/// The extended poll (`ibv_start_poll`, `ibv_next_poll`, `ibv_wc_read_*`, `ibv_end_poll`)
/// on a CQ made by [`create_extended_cq`], into `IbvWc`s: how many it wrote, and the error
/// that ended the poll early, if one did (the completions before it were consumed).
///
/// # Errors
///
/// [`Error::Mismatch`] for a CQ of another backend.
#[inline]
pub fn ibv_poll_cq_ex(cq: &Cq, out: &mut [IbvWc], row: &str) -> Result<(usize, Option<Error>), Error> {
    let r = verbs_cq(cq, row)?.poll_ex(out, None);
    Ok((r.n, r.error.map(|source| Error::Verbs { device: cq.device().to_string(), source })))
}

/// A CQ made with `ibv_create_cq_ex` and `wc_flags`, polled by the generic backend (the
/// extended-CQ row of `bench traffic`).
///
/// # Errors
///
/// As `Context::create_cq`; [`Error::Mismatch`] on a model.
pub fn create_extended_cq(
    ctx: &Context,
    opts: CqOptions,
    wc_flags: u64,
    channel: Option<&CompletionChannel>,
) -> Result<Cq, Error> {
    ctx.create_extended_cq(opts, wc_flags, channel)
}

/// What rdma-core itself answers to `ibv_create_cq(depth, comp_vector)`, without the
/// library's argument checks; `None` on a model (`validate`'s CQ-depth checks).
pub fn verbs_create_cq_unchecked(ctx: &Context, depth: u32, comp_vector: u32) -> Option<Result<(), String>> {
    ctx.verbs_create_cq_unchecked(depth, comp_vector)
}

/// `IBV_DEVICE_XRC` and `max_mw` as `ibv_query_device` gives them; `None` on a model.
pub fn xrc_and_max_mw(ctx: &Context) -> Option<(bool, u32)> {
    ctx.xrc_and_max_mw()
}

/// Whether the device binds type-2 memory windows; `Err` says why not.
///
/// # Errors
///
/// The device has no type-2 windows, or could not be queried.
pub fn type2_windows(ctx: &Context) -> Result<(), String> {
    ctx.type2_windows()
}

/// Whether the device runs atomics; `Err` says why not.
///
/// # Errors
///
/// The device has no atomics, or could not be queried.
pub fn atomics(ctx: &Context) -> Result<(), String> {
    ctx.atomics()
}
