//! RESIZE_CQ on the ConnectX, as libmlx5 drives it (`providers/mlx5/verbs.c`
//! `mlx5_resize_cq`, `cq.c` `mlx5_cq_resize_copy_cqes`): libmlx5 allocates the new ring
//! (same CQE size) and passes it in the udata; when the command returns, it copies the
//! CQEs waiting in the old ring, from its consumer index up to a RESIZE CQE (opcode
//! `MLX5_CQE_RESIZE_CQ`) it expects the device to have written there, into the new ring one
//! index further on, takes the RESIZE CQE as consumed and frees the old ring. So the device
//! writes the RESIZE CQE at its producer index in the old ring, with that pass's owner bit,
//! and from then on writes into the new ring at the next index.

use super::{Command, Errno};
use crate::objects::Context;
use crate::recv::load_be32;
use bytemuck::{Pod, Zeroable};
use static_assertions::{assert_eq_size, const_assert_eq};
use std::mem::offset_of;

/// `struct ib_uverbs_resize_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ResizeCq {
    pub response: u64,
    pub cq_handle: u32,
    pub cqe: u32,
}
assert_eq_size!(ResizeCq, [u8; 16]);

/// `struct ib_uverbs_resize_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ResizeCqResp {
    pub cqe: u32,
    pub reserved: u32,
}
assert_eq_size!(ResizeCqResp, [u8; 8]);

/// `struct mlx5_ib_resize_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct Mlx5ResizeCq {
    /// The new ring.
    pub buf_addr: u64,
    pub cqe_size: u16,
    pub reserved0: u16,
    pub reserved1: u32,
}
assert_eq_size!(Mlx5ResizeCq, [u8; 16]);
const_assert_eq!(offset_of!(Mlx5ResizeCq, cqe_size), 8);

/// Whether a ring of `new_ncqe` entries takes `waiting` CQEs copied one index on.
fn fits(waiting: u32, new_ncqe: u32) -> bool {
    waiting < new_ncqe
}

/// RESIZE_CQ: the new ring takes over once the RESIZE CQE is in the old one.
///
/// # Errors
///
/// `EINVAL` for an unknown CQ, a depth out of range or not what libmlx5 computes (one less
/// than a power of two), another CQE size, a null ring, or fewer entries than the CQEs
/// waiting need (as firmware refuses); `EAGAIN` when the old ring is full (no room for the
/// RESIZE CQE until the consumer polls).
pub(crate) fn resize_cq(ctx: &mut Context, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: ResizeCq = c.request(true)?;
    let drv: Mlx5ResizeCq = c.udata();
    let cq = ctx.cqs.get_mut(&req.cq_handle).ok_or(libc::EINVAL)?;
    if req.cqe == 0 || req.cqe > crate::device::limits::MAX_CQE {
        return Err(libc::EINVAL);
    }
    let ncqe = req.cqe.checked_add(1).filter(|v| v.is_power_of_two()).ok_or(libc::EINVAL)?;
    if ncqe == cq.ncqe {
        // The kernel answers a resize to the same size at once (libmlx5 does not send it).
        return c.respond(bytemuck::bytes_of(&ResizeCqResp { cqe: req.cqe, reserved: 0 }), &[]);
    }
    if u32::from(drv.cqe_size) != cq.cqe_size || drv.buf_addr == 0 || drv.reserved0 != 0 || drv.reserved1 != 0 {
        return Err(libc::EINVAL);
    }
    // SAFETY: the CQ's doorbell record, live until DESTROY_CQ, which needs the lock the caller holds; word [0] is the consumer index.
    let ci = unsafe { load_be32(cq.dbrec) } & 0xff_ffff;
    let waiting = cq.pi.wrapping_sub(ci) & 0xff_ffff;
    if waiting >= cq.ncqe && !cq.overrun {
        return Err(libc::EAGAIN);
    }
    if !fits(waiting, ncqe) {
        return Err(libc::EINVAL);
    }
    c.respond(bytemuck::bytes_of(&ResizeCqResp { cqe: req.cqe, reserved: 0 }), &[])?;
    if !cq.overrun {
        // SAFETY: write_cqe's contract: the CQ's current ring as libmlx5 allocated it, live until the provider frees it after this command returns; the slot at `pi` is free (the ring is not full, checked above).
        unsafe { crate::engine::write_cqe(cq, &dvcq_mlx5_dv::model::build::resize()) };
    }
    cq.pi = cq.pi.wrapping_add(1);
    cq.buf = drv.buf_addr;
    cq.ncqe = ncqe;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_ring_must_hold_what_waits_one_index_on() {
        assert!(fits(18, 32));
        assert!(!fits(18, 16));
        assert!(!fits(16, 16), "the copies start one index past the consumer");
        assert!(fits(0, 2));
    }
}
