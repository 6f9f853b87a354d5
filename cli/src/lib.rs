//! The `dvcq` command's tools, built on the `dvcq` library: the CLI, the benchmarks, the
//! conformance workloads `validate` runs, the CQE dump decoder and the model scenarios that
//! `ring export` writes.
//!
//! This is not an API: the library target exists so that the `dvcq` binary and this crate's
//! integration tests share the code. Programs use the `dvcq` library.
#![warn(missing_docs, missing_debug_implementations)]
#![deny(unsafe_code)]

// The library items the tools name through `crate::`, as they did when they were modules of
// the library's crate.
use dvcq::{
    cq, device, event, image, verbs, ArmMode, Backend, BackendKind, Completion, Context, Cq, CqErrorReason, Error, Mr,
    Pd, Qp, QpInit, WcFlags, WcOpcode, WcStatus,
};
use dvcq::{irdma, mlx5, provider, uapi};
#[cfg(test)]
use dvcq::{model_device, CqOptions, FaultKind};

pub mod bench;
pub mod cli;
pub mod conformance;
pub mod decode;
pub mod scenario;
