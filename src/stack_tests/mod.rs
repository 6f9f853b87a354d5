//! Tests of the whole stack on rdma-core's structures: the ring images (rdma-core's private
//! structs laid out by hand around a hardware model, read by `sys` and polled by the
//! backends through `Cq`), and the lab tests on real devices. They sit above every layer
//! they exercise, so that the layers themselves import only downwards.
#![allow(unsafe_code)] // the images are rdma-core's structs made by hand; each block says why it is sound

mod irdma_image;
mod lab;
mod lab_irdma;
mod lab_mlx5;
mod mlx5_image;
