//! CQs made with rdma-core's extended verb (`ibv_create_cq_ex`), polled by the generic
//! backend: what the extended-CQ row of `dvcq bench traffic` polls with `ibv_start_poll`,
//! and the CQs made for completion timestamps ([`super::Timestamps`]), whose generic poll
//! reads them with `ibv_wc_read_completion_ts` or `_wallclock_ns`.

use super::{Cq, CqOptions};
use crate::channel::CompletionChannel;
use crate::context::{Context, Inner};
use crate::error::Error;

impl Context {
    /// Makes a CQ with `ibv_create_cq_ex` and `wc_flags` (`IBV_WC_EX_WITH_*`), on
    /// `channel` if given, polled by the generic backend (its `Cq::poll` is `ibv_poll_cq`,
    /// which rdma-core serves on extended CQs too, or the extended poll when `wc_flags` ask
    /// for a timestamp; the bench's extended row calls the glue's `poll_ex` itself).
    /// `opts.backend` and `opts.timestamps` are ignored.
    ///
    /// # Errors
    ///
    /// As [`Context::create_cq`]; [`Error::Mismatch`] on a model (it has no rdma-core
    /// poll) or for a channel of another device; [`Error::Verbs`] with `EOPNOTSUPP` when the
    /// provider has no extended CQ or cannot report a field `wc_flags` asks for.
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
            Inner::Verbs { ctx, .. } => {
                use crate::channel::Source;
                use crate::cq::Poller;
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
                let why = "rdma-core's extended CQ (ibv_create_cq_ex), as asked";
                let mut cq = self.extended_verbs_cq(ctx, opts, wc_flags, ch, why)?;
                if let (Some(ch), Some(channel), Poller::Generic(g)) = (ch, channel, &cq.poller) {
                    ch.register(g.verbs_cq(), cq.id().get());
                    cq.bind(channel);
                }
                Ok(cq)
            }
        }
    }

    /// `ibv_create_cq_ex` with `wc_flags` on `ctx`, checked as `ibv_create_cq` is, on
    /// `channel` (which the caller registers the CQ with), polled by the generic backend.
    fn extended_verbs_cq(
        &self,
        ctx: &std::sync::Arc<crate::sys::device::Context>,
        opts: CqOptions,
        wc_flags: u64,
        channel: Option<&std::sync::Arc<crate::sys::cq::CompChannel>>,
        why: &str,
    ) -> Result<Cq, Error> {
        use crate::backend::backend;
        use crate::cq::{BackendKind, Poller};
        self.check_cq_request(ctx, &opts)?;
        let verbs = |source| Error::Verbs { device: self.name.clone(), source };
        let ex = crate::sys::cq_ex::ExCq { wc_flags, end_poll_after_enoent: end_poll_after_enoent(&self.name, ctx)? };
        let vcq = crate::sys::cq::VerbsCq::create_ex(ctx, opts.depth, opts.comp_vector, channel, ex).map_err(verbs)?;
        let depth = vcq.depth();
        let generic = if opts.backend == super::BackendChoice::Extended {
            crate::backend::generic::GenericCq::extended(vcq)
        } else {
            crate::backend::generic::GenericCq::new(vcq)
        };
        Ok(Cq::new(Poller::Generic(generic), backend(BackendKind::Generic, why), self.name.clone(), depth))
    }

    /// A CQ for [`super::BackendChoice::Extended`]: an extended CQ with every standard field
    /// (and the timestamp `opts.timestamps` asks for), polled with `ibv_start_poll` and the
    /// `ibv_wc_read_*` readers.
    ///
    /// # Errors
    ///
    /// As [`Context::create_cq`]; [`Error::Unsupported`] when the provider has no extended
    /// CQ, or none reporting what was asked (`EOPNOTSUPP`), or for mlx5 creation attributes.
    pub(crate) fn extended_polled_cq(
        &self,
        ctx: &std::sync::Arc<crate::sys::device::Context>,
        opts: CqOptions,
        channel: Option<&std::sync::Arc<crate::sys::cq::CompChannel>>,
    ) -> Result<Cq, Error> {
        use crate::sys::ffi::{IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK};
        let unsupported = |why: String| Error::Unsupported { device: self.name.clone(), what: "extended CQ", why };
        if opts.has_mlx5_format() {
            return Err(unsupported(
                "mlx5 creation attributes are made by mlx5dv_create_cq, not ibv_create_cq_ex".into(),
            ));
        }
        let stamp = match opts.timestamps {
            super::Timestamps::Default => 0,
            super::Timestamps::Raw => IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
            super::Timestamps::Wallclock => IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
        };
        let flags = crate::sys::cq_ex::STANDARD_FLAGS | u64::from(stamp);
        let why = "rdma-core's extended CQ (ibv_create_cq_ex), polled with ibv_start_poll and ibv_wc_read_*, as asked";
        self.extended_verbs_cq(ctx, opts, flags, channel, why).map_err(|e| match e {
            Error::Verbs { source, .. } if source.errno == libc::EOPNOTSUPP => {
                let provider = crate::backend::provider_of(ctx).unwrap_or_else(|| "this".into());
                unsupported(format!("rdma-core's {provider} provider refused ibv_create_cq_ex ({source})"))
            }
            e => e,
        })
    }

    /// A CQ reporting `opts.timestamps` (not the default) on an rdma-core device: an
    /// extended CQ with `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP` (`Raw`) or `_WALLCLOCK`
    /// (`Wallclock`) besides the standard fields, polled by the generic backend.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] for `BackendChoice::Direct` (dvcq's direct backends do not
    /// make such CQs) or when the provider cannot report the timestamp (`EOPNOTSUPP`, as
    /// rxe and irdma before GEN3 answer); otherwise as [`Context::create_cq`].
    pub(crate) fn timestamped_verbs_cq(
        &self,
        ctx: &std::sync::Arc<crate::sys::device::Context>,
        opts: CqOptions,
        channel: Option<&std::sync::Arc<crate::sys::cq::CompChannel>>,
    ) -> Result<Cq, Error> {
        use crate::sys::ffi::{IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK};
        let unsupported =
            |why: String| Error::Unsupported { device: self.name.clone(), what: "completion timestamps", why };
        if opts.backend == super::BackendChoice::Direct {
            return Err(unsupported(
                "dvcq reads them through rdma-core's extended CQ, which the generic backend polls; \
                 BackendChoice::Direct was asked"
                    .into(),
            ));
        }
        let (flag, name) = match opts.timestamps {
            super::Timestamps::Raw => (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP"),
            _ => (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK"),
        };
        let flags = crate::sys::cq_ex::STANDARD_FLAGS | u64::from(flag);
        let why = "rdma-core's extended CQ (ibv_create_cq_ex) for its completion timestamps";
        self.extended_verbs_cq(ctx, opts, flags, channel, why).map_err(|e| match e {
            Error::Verbs { source, .. } if source.errno == libc::EOPNOTSUPP => {
                let provider = crate::backend::provider_of(ctx).unwrap_or_else(|| "this".into());
                unsupported(format!("rdma-core's {provider} provider refused ibv_create_cq_ex with {name} ({source})"))
            }
            e => e,
        })
    }
}

/// Whether `ibv_end_poll` may follow an `ibv_next_poll` that returned `ENOENT` on this
/// device (`sys::cq_ex::ExCq::end_poll_after_enoent`): not on rxe before rdma-core v55.
///
/// # Errors
///
/// [`Error::Unsupported`] for rxe when the loaded release cannot be read: either choice
/// would lose or repeat completions on one side of v55.
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
