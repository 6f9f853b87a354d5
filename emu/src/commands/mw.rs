//! Memory windows: ALLOC_MW and DEALLOC_MW (`providers/mlx5/verbs.c` `mlx5_alloc_mw`,
//! `mlx5_dealloc_mw`: the core commands with no driver data). A window starts free; the
//! device binds and invalidates it (`crate::engine::window`).

use super::{Command, Errno, Numbers};
use crate::objects::{Context, Mw};
use bytemuck::{Pod, Zeroable};
use static_assertions::assert_eq_size;

/// `IBV_MW_TYPE_1`, `IBV_MW_TYPE_2`.
pub const TYPE_1: u8 = 1;
pub const TYPE_2: u8 = 2;

/// `struct ib_uverbs_alloc_mw`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AllocMw {
    pub response: u64,
    pub pd_handle: u32,
    pub mw_type: u8,
    pub reserved: [u8; 3],
}
assert_eq_size!(AllocMw, [u8; 16]);

/// `struct ib_uverbs_alloc_mw_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AllocMwResp {
    pub mw_handle: u32,
    pub rkey: u32,
}
assert_eq_size!(AllocMwResp, [u8; 8]);

/// ALLOC_MW: a free window of type 1 or 2 in the PD, with a key of its own.
///
/// # Errors
///
/// `EINVAL` for an unknown PD or another window type.
pub(crate) fn alloc_mw(ctx: &mut Context, n: &mut Numbers, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: AllocMw = c.request(true)?;
    if !ctx.pds.contains_key(&req.pd_handle) || !matches!(req.mw_type, TYPE_1 | TYPE_2) {
        return Err(libc::EINVAL);
    }
    let rkey = n.mkey();
    let handle = ctx.new_handle();
    c.respond(bytemuck::bytes_of(&AllocMwResp { mw_handle: handle, rkey }), &[])?;
    ctx.mws.insert(handle, Mw { pd: req.pd_handle, mw_type: req.mw_type, rkey, bound: None });
    Ok(())
}

/// DEALLOC_MW (bound or not, as the kernel allows).
///
/// # Errors
///
/// `EINVAL` for an unknown window.
pub(crate) fn dealloc_mw(ctx: &mut Context, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: crate::abi::Handle = c.request(false)?;
    ctx.mws.remove(&req.handle).map(|_| ()).ok_or(libc::EINVAL)
}
