//! Making completion channels and CQs on them.

use super::CompletionChannel;
use crate::channel::Source;
use crate::context::{Context, Inner};
use crate::cq::{Cq, CqOptions, Poller};
use crate::error::Error;

impl Context {
    /// Makes a completion channel (`ibv_create_comp_channel`; an eventfd on a model). Its fd
    /// is non-blocking.
    ///
    /// # Errors
    ///
    /// [`Error::Verbs`] when rdma-core fails (or setting `O_NONBLOCK` does),
    /// [`Error::Event`] when a model's eventfd cannot be made.
    pub fn create_channel(&self) -> Result<CompletionChannel, Error> {
        match &self.inner {
            Inner::Model(m) => {
                let ch = m.create_channel().map_err(|e| Error::Event {
                    device: self.name.clone(),
                    what: format!("the channel's eventfd could not be made: {e}"),
                })?;
                Ok(CompletionChannel::new(Source::Model(ch), &self.name))
            }
            Inner::Verbs { ctx, .. } => {
                let ch = crate::sys::cq::CompChannel::new(ctx)
                    .map_err(|source| Error::Verbs { device: self.name.clone(), source })?;
                Ok(CompletionChannel::new(Source::Verbs(ch), &self.name))
            }
        }
    }

    /// Makes a CQ as [`Context::create_cq`] does, whose events go to `channel` (tagged
    /// with [`Cq::id`]). Many CQs may share one channel.
    ///
    /// # Errors
    ///
    /// [`Error::Mismatch`] for a channel of another device; otherwise as
    /// [`Context::create_cq`].
    pub fn create_cq_on(&self, channel: &CompletionChannel, opts: CqOptions) -> Result<Cq, Error> {
        let foreign = || Error::Mismatch {
            device: self.name.clone(),
            what: format!("the completion channel was made on {}, not on this device", channel.device()),
        };
        match (&self.inner, channel.source()) {
            (Inner::Model(m), Source::Model(ch)) => {
                if channel.device() != self.name {
                    return Err(foreign());
                }
                let mut cq = self.create_model_cq(m, opts)?;
                if let Poller::Model(mcq) = &cq.poller {
                    mcq.bind_channel(ch, cq.id().get());
                }
                cq.bind(channel);
                Ok(cq)
            }
            (Inner::Verbs { ctx, .. }, Source::Verbs(ch)) => {
                if !ch.belongs_to(ctx) {
                    return Err(foreign());
                }
                let mut cq = self.create_verbs_cq(ctx, opts, Some(ch))?;
                let vcq = match &cq.poller {
                    Poller::Generic(g) => Some(g.verbs_cq()),
                    Poller::Rxe(r) => Some(r.verbs_cq()),
                    Poller::Mlx5(m) => m.verbs_cq(),
                    Poller::Irdma(m) => m.verbs_cq(),
                    Poller::Model(_) => None,
                };
                if let Some(vcq) = vcq {
                    ch.register(vcq, cq.id().get());
                }
                cq.bind(channel);
                Ok(cq)
            }
            #[allow(unreachable_patterns)]
            _ => Err(foreign()),
        }
    }

    /// How many completion vectors the device has ([`crate::CqOptions::comp_vector`] is
    /// below it); spread CQs over them with [`super::spread_comp_vectors`].
    pub fn comp_vectors(&self) -> u32 {
        match &self.inner {
            Inner::Model(_) => crate::device::MODEL_COMP_VECTORS,
            Inner::Verbs { ctx, .. } => ctx.num_comp_vectors().max(1),
        }
    }
}
