//! The command's tests of single operations on the emulated devices, one binary: each test
//! runs itself again as a child process under the preload (`dvcq-emu`), where rdma-core's
//! real libibverbs and providers drive the emulated ConnectX-6 Dx or E810.

#[path = "../../../emu/tests/support/preload.rs"]
mod preload;

#[path = "../support/emu.rs"]
mod emu;
#[path = "../../../tests/support/loopback.rs"]
mod loopback;

mod atomics;
mod compression;
mod cq_resize;
mod windows;
mod wire;
