//! An open device and what is made on it: protection domains, memory regions, CQs, QPs and
//! SRQs, the same API on a real device (through rdma-core) and on a model.
//!
//! Ownership encodes the verbs lifetimes: every object holds a reference-counted handle of
//! what it was made on (an MR its PD, a QP its CQs, SRQ and PD, a CQ its context), so a
//! context outlives its CQs, QPs are destroyed before their CQs, and a mapped CQ ring is never
//! read after the CQ is destroyed, whatever order the application drops things in.

pub(crate) mod mr;
mod mw;
mod qp;
mod raw;
mod xrc;

pub use mr::Mr;
pub use mw::Mw;
pub use qp::{Qp, QpInit, Srq};
pub use xrc::Xrcd;

use crate::cq::{BackendKind, Cq, CqOptions, Poller};
use crate::device::{self, DeviceInfo};
use crate::error::Error;
use crate::model_device::{DeviceError, Mlx5CqAttrs, ModelDevice, ModelVendor};
use crate::sys;
use std::sync::Arc;

/// An open device: a real one through rdma-core, or a built-in model.
#[derive(Debug)]
pub struct Context {
    pub(crate) inner: Inner,
    pub(crate) name: String,
}

#[derive(Debug)]
pub(crate) enum Inner {
    Model(ModelDevice),
    Verbs { ctx: Arc<sys::device::Context>, port: u8, gid_index: u8 },
}

impl Context {
    /// Opens a device by name: `model-mlx5`, `model-e810`, or an RDMA device rdma-core lists
    /// (`rxe0`, `mlx5_0`, ...).
    ///
    /// # Errors
    ///
    /// [`Error::UnknownDevice`] naming the devices that exist; [`Error::NoRdmaCore`] for a
    /// hardware name where rdma-core cannot be loaded; [`Error::Verbs`] when rdma-core fails.
    pub fn open(name: &str) -> Result<Context, Error> {
        let vendor = match name {
            "model-mlx5" => ModelVendor::Mlx5,
            "model-e810" => ModelVendor::Irdma,
            _ => return Self::open_verbs(name),
        };
        Ok(Context { inner: Inner::Model(ModelDevice::new(vendor)), name: name.to_string() })
    }

    /// A context on a model device made by the caller (one whose attributes were set with
    /// [`ModelDevice::with_attrs`], say), named as the model is.
    pub fn from_model(model: ModelDevice) -> Context {
        let name = model.name().to_string();
        Context { inner: Inner::Model(model), name }
    }

    fn open_verbs(name: &str) -> Result<Context, Error> {
        let ctx = sys::device::Context::open(name).map_err(|e| match e {
            sys::device::OpenError::Unknown { name } => Error::UnknownDevice { name, available: device::names() },
            sys::device::OpenError::NoRdmaCore(e) => Error::NoRdmaCore {
                what: format!("opening {name:?} (only model-mlx5 and model-e810 exist here)"),
                why: e.why,
            },
            // No device list at all (a kernel without RDMA): the name is simply unknown.
            sys::device::OpenError::Verbs(source) if source.call == "ibv_get_device_list" => {
                Error::UnknownDevice { name: name.to_string(), available: device::names() }
            }
            sys::device::OpenError::Verbs(source) => Error::Verbs { device: name.to_string(), source },
        })?;
        let (port, gid_index) = device::default_port_and_gid(&ctx);
        Ok(Context { inner: Inner::Verbs { ctx, port, gid_index }, name: name.to_string() })
    }

    /// The name it was opened by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What `ibv_query_device` says of XRC and memory windows: `IBV_DEVICE_XRC` in
    /// `device_cap_flags`, and `max_mw`; `None` on a model.
    pub(crate) fn xrc_and_max_mw(&self) -> Option<(bool, u32)> {
        match &self.inner {
            Inner::Model(_) => None,
            Inner::Verbs { ctx, .. } => Some(ctx.device_attr().map_or((false, 0), |a| {
                (a.device_cap_flags & sys::ffi::IBV_DEVICE_XRC != 0, u32::try_from(a.max_mw).unwrap_or(0))
            })),
        }
    }

    /// Whether the device binds type-2 memory windows: `Ok` on a model (both model them);
    /// on a real device, what `ibv_query_device` says (`max_mw` above 0 and
    /// `IBV_DEVICE_MEM_WINDOW_TYPE_2A` or `_2B` in `device_cap_flags`), else why not.
    pub(crate) fn type2_windows(&self) -> Result<(), String> {
        match &self.inner {
            Inner::Model(_) => Ok(()),
            Inner::Verbs { ctx, .. } => {
                let a = ctx.device_attr().map_err(|e| format!("{}: {e}", self.name))?;
                let type2 = sys::ffi::IBV_DEVICE_MEM_WINDOW_TYPE_2A | sys::ffi::IBV_DEVICE_MEM_WINDOW_TYPE_2B;
                if a.max_mw <= 0 {
                    Err(format!("{} has no memory windows (max_mw {})", self.name, a.max_mw))
                } else if a.device_cap_flags & type2 == 0 {
                    Err(format!(
                        "{} has memory windows (max_mw {}) but no type-2 ones (device_cap_flags {:#x} has neither \
                         MEM_WINDOW_TYPE_2A nor _2B)",
                        self.name, a.max_mw, a.device_cap_flags
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Whether the device runs atomics (compare-and-swap, fetch-and-add): `model-mlx5`
    /// does, `model-e810` not (irdma GEN2 has none); on a real device, whether
    /// `ibv_query_device` gives an `atomic_cap` other than `IBV_ATOMIC_NONE`. `Err` says
    /// why not.
    pub(crate) fn atomics(&self) -> Result<(), String> {
        match &self.inner {
            Inner::Model(m) if m.vendor() == crate::model_device::ModelVendor::Mlx5 => Ok(()),
            Inner::Model(_) => Err(format!("{} (irdma GEN2) has no atomics", self.name)),
            Inner::Verbs { ctx, .. } => {
                let a = ctx.device_attr().map_err(|e| format!("{}: {e}", self.name))?;
                if a.atomic_cap == sys::ffi::IBV_ATOMIC_NONE {
                    Err(format!("{} has no atomics (atomic_cap IBV_ATOMIC_NONE)", self.name))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Whether it is a built-in model (`model-mlx5`, `model-e810`).
    pub fn is_model(&self) -> bool {
        matches!(self.inner, Inner::Model(_))
    }

    /// The device's own counters (`dvcq stat`): the kernel's, read from the sysfs tree at
    /// `sysfs_root` (normally [`crate::device::counters::SYSFS_ROOT`]), or a model's.
    ///
    /// # Errors
    ///
    /// The device is not under `sysfs_root`, or its directory cannot be listed.
    pub fn counters(
        &self,
        sysfs_root: &std::path::Path,
    ) -> Result<device::counters::DeviceCounters, device::counters::CountersError> {
        match &self.inner {
            Inner::Model(m) => Ok(device::counters::of_model(&self.name, &m.counters())),
            Inner::Verbs { .. } => device::counters::read_sysfs(sysfs_root, &self.name),
        }
    }

    /// What `dvcq devices` says about it.
    ///
    /// # Errors
    ///
    /// rdma-core failed a query.
    pub fn info(&self) -> Result<DeviceInfo, Error> {
        match &self.inner {
            Inner::Model(m) => Ok(device::model_info(m)),
            Inner::Verbs { ctx, .. } => device::verbs_info(ctx),
        }
    }

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
        if matches!(opts.backend, crate::cq::BackendChoice::Generic | crate::cq::BackendChoice::Extended) {
            return Err(Error::Mismatch {
                device: self.name.clone(),
                what: "a model has no rdma-core poll: its CQs are always polled by its vendor's dvcq poller".into(),
            });
        }
        let cq = crate::cq::model_cq(m, opts.depth, mlx5, opts.timestamps, &self.name)?;
        let depth = cq.cqe();
        let why = match m.vendor() {
            ModelVendor::Mlx5 => "dvcq's mlx5 poller on the model's ConnectX CQ ring",
            ModelVendor::Irdma => "dvcq's irdma poller on the model's E810 CQ ring",
        };
        Ok(Cq::new(Poller::Model(cq), backend(BackendKind::Model, why), self.name.clone(), depth))
    }

    pub(crate) fn create_verbs_cq(
        &self,
        ctx: &Arc<sys::device::Context>,
        opts: CqOptions,
        channel: Option<&Arc<sys::cq::CompChannel>>,
    ) -> Result<Cq, Error> {
        if opts.backend == crate::cq::BackendChoice::Extended {
            return self.extended_polled_cq(ctx, opts, channel);
        }
        if opts.timestamps != crate::cq::Timestamps::Default {
            return self.timestamped_verbs_cq(ctx, opts, channel);
        }
        let verbs = |source| Error::Verbs { device: self.name.clone(), source };
        let attr = ctx.device_attr().map_err(verbs)?;
        let max = u32::try_from(attr.max_cqe).unwrap_or(0);
        if opts.depth == 0 || opts.depth > max {
            return Err(Error::CqDepth { device: self.name.clone(), asked: opts.depth, max });
        }
        let vectors = ctx.num_comp_vectors();
        if opts.comp_vector >= vectors.max(1) {
            return Err(Error::CompVector { device: self.name.clone(), asked: opts.comp_vector, count: vectors });
        }
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

    /// What rdma-core itself answers to `ibv_create_cq(depth, comp_vector)`, without the
    /// argument checks [`Context::create_cq`] makes first (the CQ, if made, is destroyed at
    /// once): how `dvcq validate` sees the device's own refusals. `None` on a model.
    pub(crate) fn verbs_create_cq_unchecked(&self, depth: u32, comp_vector: u32) -> Option<Result<(), String>> {
        match &self.inner {
            Inner::Model(_) => None,
            Inner::Verbs { ctx, .. } => {
                Some(sys::cq::VerbsCq::create(ctx, depth, comp_vector, None).map(drop).map_err(|e| e.to_string()))
            }
        }
    }

    /// Allocates a protection domain.
    ///
    /// # Errors
    ///
    /// rdma-core failed.
    pub fn alloc_pd(&self) -> Result<Pd, Error> {
        match &self.inner {
            Inner::Model(m) => Ok(Pd { inner: PdInner::Model(m.clone()), device: self.name.clone() }),
            Inner::Verbs { ctx, port, gid_index } => {
                let pd = sys::qp::Pd::new(ctx).map_err(|source| Error::Verbs { device: self.name.clone(), source })?;
                Ok(Pd { inner: PdInner::Verbs { pd, port: *port, gid_index: *gid_index }, device: self.name.clone() })
            }
        }
    }
}

/// A protection domain: where memory regions, QPs and SRQs are made.
#[derive(Debug)]
pub struct Pd {
    pub(crate) inner: PdInner,
    pub(crate) device: String,
}

#[derive(Debug)]
pub(crate) enum PdInner {
    Model(ModelDevice),
    Verbs { pd: Arc<sys::qp::Pd>, port: u8, gid_index: u8 },
}

impl Pd {
    /// The device it belongs to.
    pub fn device(&self) -> &str {
        &self.device
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

pub(crate) use crate::backend::backend;

/// Completion vectors a model device reports (model choice: one, as a one-queue device).
pub(crate) const MODEL_COMP_VECTORS: u32 = 1;

/// A model device's refusal as the API's error.
pub(crate) fn model_error(device: &str, e: DeviceError) -> Error {
    Error::Model { device: device.to_string(), what: e.to_string() }
}
