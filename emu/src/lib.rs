//! An emulated ConnectX-6 Dx (`mlx5_0`, one RoCE port) under an unmodified libibverbs and
//! libmlx5: preloaded into a program (`LD_PRELOAD=libdvcq_emu.so`), this library plays the
//! kernel's part. It writes a sysfs tree for the device and points `SYSFS_PATH` at it,
//! answers the uverbs `write()` commands on `/dev/infiniband/uverbs0`, refuses the ioctl ABI
//! and RDMA netlink (so libibverbs falls back to what it emulates), and maps the UAR and
//! clock pages. rdma-core's own code then creates the PDs, regions, CQs, QPs and SRQs, with
//! their rings and doorbell records in the application's memory, where the emulator records
//! them.
//!
//! A device thread executes the work they post and writes the CQEs (`engine`); QPs of
//! different processes reach each other over a wire of UNIX sockets (`wire`). Beside the
//! ConnectX, an E810 (`irdma0`) under an unmodified libirdma (`irdma.rs`, the device in
//! `irdma_engine.rs`), on the same wire. `docs/emulated-devices.md` says what is emulated
//! and what is not.

pub mod abi;
pub mod commands;
pub mod config_dir;
pub mod device;
pub mod emulator;
pub mod engine;
pub mod events;
pub mod fd_table;
// Unit tests run without interposing their own process's C library.
#[cfg(not(test))]
pub mod interpose;
pub mod irdma;
pub mod irdma_abi;
pub mod irdma_engine;
pub mod irdma_wqe;
pub mod mlx5;
pub mod mlx5_abi;
pub mod objects;
pub mod real;
pub mod recv;
pub mod sysfs;
pub mod wire;
pub mod wqe;

/// Runs when the library is loaded, before `main`: writes the sysfs tree, points
/// `SYSFS_PATH` at it, and sets the libmlx5 environment the emulation needs.
#[cfg(not(test))]
extern "C" fn load() {
    // Clear what would make libmlx5 sleep forever on an error CQE, and keep it from reading
    // a host sysfs path that ignores SYSFS_PATH.
    std::env::remove_var("MLX5_FREEZE_ON_ERROR_CQE");
    if std::env::var_os("MLX5_STALL_CQ_POLL").is_none() {
        std::env::set_var("MLX5_STALL_CQ_POLL", "0");
    }
    config_dir::init();
    match sysfs::SysfsTree::create(&std::env::temp_dir()) {
        Ok(tree) => {
            std::env::set_var("SYSFS_PATH", tree.root());
        }
        Err(e) => eprintln!("dvcq-emu: cannot write the emulated sysfs tree: {e}; no device will be listed"),
    }
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static LOAD: extern "C" fn() = load;

/// Runs when the process exits normally: the requests other processes' QPs sent this
/// process's QPs, and that reached it, are answered first (a NIC acknowledges what it
/// received; the kernel then destroys what the program did not).
#[cfg(not(test))]
extern "C" fn unload() {
    emulator::with(emulator::Emulator::drain_wire);
}

#[cfg(not(test))]
#[used]
#[link_section = ".fini_array"]
static UNLOAD: extern "C" fn() = unload;
