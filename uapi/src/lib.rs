//! Hardware ABI layouts for dvcq.
//!
//! Layouts only, no logic: every structure here mirrors a block of bytes that a NIC (or a
//! model of one) writes, with big- or little-endian newtypes so a wire field cannot be read
//! without conversion. Sizes and field offsets are pinned with `static_assertions` next to
//! each struct. The crate is `no_std` and free of `unsafe`: byte views go through
//! [`bytemuck`], whose derives check that every struct is padding-free plain data.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs, missing_debug_implementations)]

#[macro_use]
mod code_table;
pub mod endian;
pub mod irdma;
pub mod mlx5;
pub mod rxe;

pub use endian::{Be16, Be32, Be64, Le16, Le32, Le64};
