//! Address handles: CREATE_AH and DESTROY_AH. libmlx5 builds the address vector its UD
//! WQEs carry in user space; on a RoCE port it asks the kernel only for the destination MAC
//! (`mlx5_create_ah` with `MLX5_USER_CMDS_SUPP_UHW_CREATE_AH`), which the emulated port,
//! with no Ethernet under it, answers with a fixed locally administered address.

use super::{Command, Errno};
use crate::objects::{Ah, Context};
use bytemuck::{Pod, Zeroable};
use static_assertions::{assert_eq_size, const_assert_eq};
use std::mem::offset_of;

/// `struct ib_uverbs_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AhAttr {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reserved0: u8,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
    pub reserved: u8,
}
assert_eq_size!(AhAttr, [u8; 32]);
const_assert_eq!(offset_of!(AhAttr, dlid), 24);
const_assert_eq!(offset_of!(AhAttr, port_num), 30);

/// `struct ib_uverbs_create_ah`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateAh {
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub reserved: u32,
    pub attr: AhAttr,
}
assert_eq_size!(CreateAh, [u8; 56]);
const_assert_eq!(offset_of!(CreateAh, attr), 24);

/// `struct ib_uverbs_create_ah_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CreateAhResp {
    pub ah_handle: u32,
}

/// `struct mlx5_ib_create_ah_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct Mlx5CreateAhResp {
    pub response_length: u32,
    pub dmac: [u8; 6],
    pub reserved: [u8; 6],
}
assert_eq_size!(Mlx5CreateAhResp, [u8; 16]);
const_assert_eq!(offset_of!(Mlx5CreateAhResp, dmac), 4);

/// The destination MAC every address handle gets: locally administered, unicast.
pub const DMAC: [u8; 6] = [0x02, 0xd7, 0xc9, 0x00, 0x00, 0x01];

/// CREATE_AH: an address handle on a PD of the context, port 1, global (RoCE needs a GRH).
pub(super) fn create_ah(ctx: &mut Context, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: CreateAh = c.request(true)?;
    if !ctx.pds.contains_key(&req.pd_handle) || req.attr.port_num != 1 {
        return Err(libc::EINVAL);
    }
    if req.attr.is_global == 0 || usize::from(req.attr.sgid_index) >= crate::device::GIDS.len() {
        return Err(libc::EINVAL);
    }
    let handle = ctx.new_handle();
    let drv = Mlx5CreateAhResp { response_length: size_of::<Mlx5CreateAhResp>() as u32, dmac: DMAC, reserved: [0; 6] };
    c.respond(bytemuck::bytes_of(&CreateAhResp { ah_handle: handle }), bytemuck::bytes_of(&drv))?;
    ctx.ahs.insert(handle, Ah { pd: req.pd_handle, dgid: req.attr.dgid });
    Ok(())
}

/// DESTROY_AH.
pub(super) fn destroy_ah(ctx: &mut Context, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: crate::abi::Handle = c.request(false)?;
    ctx.ahs.remove(&req.handle).map(|_| ()).ok_or(libc::EINVAL)
}
