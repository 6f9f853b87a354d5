//! Adopting a completion channel the application made with rdma-core.
#![allow(unsafe_code)] // the entry point takes the application's `struct ibv_comp_channel *`

use super::CompletionChannel;
use crate::channel::Source;
use crate::context::{Context, Inner};
use crate::error::Error;
use core::ffi::c_void;
use core::ptr::NonNull;

impl CompletionChannel {
    /// Adopts a completion channel the application made on `ctx` with
    /// `ibv_create_comp_channel` (`struct ibv_comp_channel *`), for the CQs it created on
    /// it and attached: bind each with [`crate::Cq::bind_channel`], then [`crate::Cq::wait`] sleeps on it
    /// and routes its events as on a channel dvcq made. dvcq makes its fd non-blocking and
    /// never destroys it.
    ///
    /// # Errors
    ///
    /// [`Error::Mismatch`] for a model context or a channel of another context;
    /// [`Error::Verbs`] when its fd cannot be made non-blocking.
    ///
    /// # Safety
    ///
    /// `channel` points to a live `struct ibv_comp_channel` that the application destroys
    /// only after this channel and every `Cq` bound to it are gone, and from which it reads
    /// no events meanwhile (dvcq reads and acknowledges them).
    pub unsafe fn from_raw(ctx: &Context, channel: NonNull<c_void>) -> Result<CompletionChannel, Error> {
        let Inner::Verbs { ctx: vctx, .. } = &ctx.inner else {
            return Err(Error::Mismatch {
                device: ctx.name().to_string(),
                what: "a model context has no rdma-core completion channels to adopt".into(),
            });
        };
        let ptr = channel.as_ptr().cast::<crate::sys::ffi::ibv_comp_channel>();
        // SAFETY: the caller's live channel; a read of its public `context` field.
        if unsafe { (*ptr).context } != vctx.as_ptr() {
            return Err(Error::Mismatch {
                device: ctx.name().to_string(),
                what: "the completion channel to adopt belongs to another device context".into(),
            });
        }
        // SAFETY: the caller's promise: a live channel of this context, destroyed only after every handle (each holds the Arc) is gone.
        let ch = unsafe { crate::sys::cq::CompChannel::borrowed(vctx, ptr) }
            .map_err(|source| Error::Verbs { device: ctx.name().to_string(), source })?;
        Ok(CompletionChannel::new(Source::Verbs(ch), ctx.name()))
    }
}
