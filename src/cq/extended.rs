//! CQs made with rdma-core's extended verb (`ibv_create_cq_ex`), polled by the generic
//! backend: what the extended-CQ row of `dvcq bench traffic` polls with `ibv_start_poll`.

use super::{Cq, CqOptions};
use crate::context::{Context, Inner};
use crate::error::Error;
use crate::event::CompletionChannel;

impl Context {
    /// Makes a CQ with `ibv_create_cq_ex` and `wc_flags` (`IBV_WC_EX_WITH_*`), on
    /// `channel` if given, polled by the generic backend (its `Cq::poll` is `ibv_poll_cq`,
    /// which rdma-core serves on extended CQs too; the extended poll is the glue's
    /// `poll_ex`). `opts.backend` is ignored.
    ///
    /// # Errors
    ///
    /// As [`Context::create_cq`]; [`Error::Mismatch`] on a model (it has no rdma-core
    /// poll) or for a channel of another device; [`Error::Verbs`] with `EOPNOTSUPP` when the
    /// provider has no extended CQ or cannot report a field `wc_flags` asks for.
    #[cfg_attr(not(dvcq_rdma_core), allow(unused_variables))]
    pub(crate) fn create_extended_cq(
        &self,
        opts: CqOptions,
        wc_flags: u64,
        channel: Option<&CompletionChannel>,
    ) -> Result<Cq, Error> {
        match &self.inner {
            Inner::Model(_) => Err(Error::Mismatch {
                device: self.name.clone(),
                what: "a model has no rdma-core extended CQ: its CQs are always polled by its vendor's dvcq poller"
                    .into(),
            }),
            #[cfg(dvcq_rdma_core)]
            Inner::Verbs { ctx, .. } => {
                use crate::context::backend;
                use crate::cq::{BackendKind, Poller};
                use crate::event::channel::Source;
                let verbs = |source| Error::Verbs { device: self.name.clone(), source };
                let attr = ctx.device_attr().map_err(verbs)?;
                let max = u32::try_from(attr.max_cqe).unwrap_or(0);
                if opts.depth == 0 || opts.depth > max {
                    return Err(Error::CqDepth { device: self.name.clone(), asked: opts.depth, max });
                }
                let vectors = ctx.num_comp_vectors();
                if opts.comp_vector >= vectors.max(1) {
                    return Err(Error::CompVector {
                        device: self.name.clone(),
                        asked: opts.comp_vector,
                        count: vectors,
                    });
                }
                let ch = match channel.map(|c| (c, c.source())) {
                    None => None,
                    Some((_, Source::Verbs(ch))) if ch.belongs_to(ctx) => Some(ch),
                    Some((c, _)) => {
                        return Err(Error::Mismatch {
                            device: self.name.clone(),
                            what: format!("the completion channel was made on {}, not on this device", c.device()),
                        })
                    }
                };
                let ex = crate::sys::cq_ex::ExCq {
                    wc_flags,
                    end_poll_after_enoent: end_poll_after_enoent(&self.name, ctx)?,
                };
                let vcq =
                    crate::sys::cq::VerbsCq::create_ex(ctx, opts.depth, opts.comp_vector, ch, ex).map_err(verbs)?;
                let depth = vcq.depth();
                let why = "rdma-core's extended CQ (ibv_create_cq_ex), as asked";
                let poller = Poller::Generic(crate::backend::generic::GenericCq::new(std::sync::Arc::clone(&vcq)));
                let mut cq = Cq::new(poller, backend(BackendKind::Generic, why), self.name.clone(), depth);
                if let (Some(ch), Some(channel)) = (ch, channel) {
                    ch.register(&vcq, cq.id().get());
                    cq.bind(channel);
                }
                Ok(cq)
            }
        }
    }
}

/// Whether `ibv_end_poll` may follow an `ibv_next_poll` that returned `ENOENT` on this
/// device (`sys::cq_ex::ExCq::end_poll_after_enoent`): not on rxe before rdma-core v55.
///
/// # Errors
///
/// [`Error::Unsupported`] for rxe when the loaded release cannot be read: either choice
/// would lose or repeat completions on one side of v55.
#[cfg(dvcq_rdma_core)]
fn end_poll_after_enoent(device: &str, ctx: &crate::sys::device::Context) -> Result<bool, Error> {
    use crate::device::Release;
    if crate::backend::provider_of(ctx).as_deref() != Some("rxe") {
        return Ok(true);
    }
    match crate::device::rdma_core_release() {
        Some(r) => Ok(r >= Release { major: 55, minor: 0 }),
        None => Err(Error::Unsupported {
            device: device.to_string(),
            what: "polling rdma-core's extended CQ",
            why: "rxe's ibv_next_poll changed how it ends a poll in rdma-core v55, and the release \
                  loaded could not be read from libibverbs' file name"
                .into(),
        }),
    }
}
