//! Making a CQ on a context: [`Context::create_cq`] and the model and rdma-core paths it
//! takes (the event-mode variant is `Context::create_cq_on`, in `event`).

use super::{model_cq, BackendChoice, BackendKind, Cq, CqOptions, Poller, Timestamps};
use crate::backend::backend;
use crate::context::{Context, Inner};
use crate::device::MODEL_COMP_VECTORS;
use crate::error::Error;
use crate::model_device::{Mlx5CqAttrs, ModelDevice, ModelVendor};
use crate::sys;
use std::sync::Arc;

impl Context {
    /// Makes a CQ of at least `opts.depth` completions, polled by the backend `opts.backend`
    /// allows (see [`Cq::backend`] for which one runs and why).
    ///
    /// # Errors
    ///
    /// [`Error::CqDepth`] outside 1 ..= the device's maximum, [`Error::CompVector`] for a
    /// vector it lacks, [`Error::Attach`] when `BackendChoice::Direct` was asked and no
    /// direct backend could attach, [`Error::Verbs`] when rdma-core fails.
    pub fn create_cq(&self, opts: CqOptions) -> Result<Cq, Error> {
        match &self.inner {
            Inner::Model(m) => self.create_model_cq(m, opts),
            Inner::Verbs { ctx, .. } => self.create_verbs_cq(ctx, opts, None),
        }
    }

    pub(crate) fn create_model_cq(&self, m: &ModelDevice, opts: CqOptions) -> Result<Cq, Error> {
        let mlx5 = if opts.has_mlx5_format() {
            let unsupported = |why: String| Error::Unsupported { device: self.name.clone(), what: "cq format", why };
            if let Some(why) = opts.format_error() {
                return Err(unsupported(why));
            }
            if m.vendor() != ModelVendor::Mlx5 {
                return Err(unsupported(format!(
                    "CQE size, compression, padding and overrun-ignore are mlx5 creation attributes; {} is an E810",
                    self.name
                )));
            }
            if opts.ignore_overrun {
                return Err(unsupported("model-mlx5 does not model overrun-ignore CQs on the device".into()));
            }
            Some(Mlx5CqAttrs {
                cqe_size: u32::from(opts.cqe_size),
                comp_res_format: opts.compression.map_or(0, |f| f.dv_res_format()),
                pad: opts.cqe_pad,
            })
        } else {
            None
        };
        self.model_cq(m, opts, mlx5)
    }

    fn model_cq(&self, m: &ModelDevice, opts: CqOptions, mlx5: Option<Mlx5CqAttrs>) -> Result<Cq, Error> {
        let max = m.attrs().max_cqe;
        if opts.depth == 0 || opts.depth > max {
            return Err(Error::CqDepth { device: self.name.clone(), asked: opts.depth, max });
        }
        if opts.comp_vector >= MODEL_COMP_VECTORS {
            return Err(Error::CompVector {
                device: self.name.clone(),
                asked: opts.comp_vector,
                count: MODEL_COMP_VECTORS,
            });
        }
        if matches!(opts.backend, BackendChoice::Generic | BackendChoice::Extended) {
            return Err(Error::Mismatch {
                device: self.name.clone(),
                what: "a model has no rdma-core poll: its CQs are always polled by its vendor's dvcq poller".into(),
            });
        }
        let cq = model_cq(m, opts.depth, mlx5, opts.timestamps, &self.name)?;
        let depth = cq.cqe();
        let why = match m.vendor() {
            ModelVendor::Mlx5 => "dvcq's mlx5 poller on the model's ConnectX CQ ring",
            ModelVendor::Irdma => "dvcq's irdma poller on the model's E810 CQ ring",
        };
        Ok(Cq::new(Poller::Model(cq), backend(BackendKind::Model, why), self.name.clone(), depth))
    }

    /// Refuses, as rdma-core's `ibv_create_cq` would, a depth of 0 or above the device's
    /// `max_cqe` and a completion vector the device does not have.
    pub(crate) fn check_cq_request(&self, ctx: &sys::device::Context, opts: &CqOptions) -> Result<(), Error> {
        let attr = ctx.device_attr().map_err(|source| Error::Verbs { device: self.name.clone(), source })?;
        let max = u32::try_from(attr.max_cqe).unwrap_or(0);
        if opts.depth == 0 || opts.depth > max {
            return Err(Error::CqDepth { device: self.name.clone(), asked: opts.depth, max });
        }
        let vectors = ctx.num_comp_vectors();
        if opts.comp_vector >= vectors.max(1) {
            return Err(Error::CompVector { device: self.name.clone(), asked: opts.comp_vector, count: vectors });
        }
        Ok(())
    }

    pub(crate) fn create_verbs_cq(
        &self,
        ctx: &Arc<sys::device::Context>,
        opts: CqOptions,
        channel: Option<&Arc<sys::cq::CompChannel>>,
    ) -> Result<Cq, Error> {
        if opts.backend == BackendChoice::Extended {
            return self.extended_polled_cq(ctx, opts, channel);
        }
        if opts.timestamps != Timestamps::Default {
            return self.timestamped_verbs_cq(ctx, opts, channel);
        }
        self.check_cq_request(ctx, &opts)?;
        let verbs = |source| Error::Verbs { device: self.name.clone(), source };
        let unsupported = |why: String| Error::Unsupported { device: self.name.clone(), what: "cq format", why };
        if let Some(why) = opts.format_error() {
            return Err(unsupported(why));
        }
        // On mlx5 dvcq makes the CQ with mlx5dv_create_cq, naming the CQE size (else the
        // MLX5_CQE_SIZE environment variable picks it) and any compression, so that the
        // direct poller is told the format; elsewhere the mlx5 attributes do not exist.
        let provider = crate::backend::provider_of(ctx);
        let created = (provider.as_deref() == Some("mlx5")).then_some(crate::backend::mlx5::Created {
            cqe_size: opts.cqe_size,
            compression: opts.compression,
            ignore_overrun: opts.ignore_overrun,
        });
        let cq = match created {
            Some(c) => {
                let attrs = sys::cq::Mlx5CqAttrs {
                    cqe_size: c.cqe_size,
                    comp_res_format: c.compression.map(dv_res_format),
                    pad: opts.cqe_pad,
                    ignore_overrun: c.ignore_overrun,
                };
                sys::cq::VerbsCq::create_mlx5(ctx, opts.depth, opts.comp_vector, channel, &attrs)
            }
            None if opts.has_mlx5_format() => {
                let p = provider.unwrap_or_else(|| "unknown".into());
                return Err(unsupported(format!(
                    "CQE size, compression, padding and overrun-ignore are mlx5 creation attributes; this device's \
                     provider is {p}"
                )));
            }
            None => sys::cq::VerbsCq::create(ctx, opts.depth, opts.comp_vector, channel),
        }
        .map_err(verbs)?;
        let depth = cq.depth();
        let origin = crate::backend::Origin::Dvcq { created };
        let (poller, backend) = crate::backend::choose_for(&self.name, ctx, cq, opts.backend, origin)?;
        Ok(Cq::new(poller, backend, self.name.clone(), depth))
    }
}

/// `MLX5DV_CQE_RES_FORMAT_*` for a mini-CQE format `mlx5dv_create_cq` takes
/// (`CqOptions::format_error` refused the others).
fn dv_res_format(f: dvcq_mlx5_dv::MiniFormat) -> u8 {
    use dvcq_mlx5_dv::MiniFormat;
    let bit = match f {
        MiniFormat::Hash => sys::ffi::MLX5DV_CQE_RES_FORMAT_HASH,
        MiniFormat::Csum => sys::ffi::MLX5DV_CQE_RES_FORMAT_CSUM,
        _ => sys::ffi::MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX,
    };
    bit as u8
}
