//! An open device, its protection domains and memory regions, the same API on a real device
//! (through rdma-core) and on a model. What is made on it further sits in the layers above:
//! CQs (`Context::create_cq`, in `cq/create.rs`), QPs, SRQs, XRC domains and memory windows
//! (`qp`), completion channels (`event`).
//!
//! Layer: above `device` (what a context says of itself is a `DeviceInfo`), `backend`,
//! `model_device`, `sys`, `error` and the vocabulary (`verbs`, `id`), which it may import;
//! below `cq`, `qp` and `event`, which it must not name.
//!
//! Ownership encodes the verbs lifetimes: every object holds a reference-counted handle of
//! what it was made on (an MR its PD, a QP its CQs, SRQ and PD, a CQ its context), so a
//! context outlives its CQs, QPs are destroyed before their CQs, and a mapped CQ ring is never
//! read after the CQ is destroyed, whatever order the application drops things in.

pub(crate) mod mr;
mod raw;

pub use mr::Mr;

use crate::device::{self, DeviceInfo};
use crate::error::Error;
use crate::model_device::{DeviceError, ModelDevice, ModelVendor};
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
        let ctx = sys::device::Context::open(name).map_err(|e| device::open_error(name, e))?;
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

/// A model device's refusal as the API's error.
pub(crate) fn model_error(device: &str, e: DeviceError) -> Error {
    Error::Model { device: device.to_string(), what: e.to_string() }
}
