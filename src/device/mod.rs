//! Devices: the RDMA devices rdma-core finds and the built-in models, listed and opened by
//! name.

mod info;
mod release;

pub use info::{DeviceInfo, GidInfo, PortInfo};
pub use release::{provider_name, Release};
