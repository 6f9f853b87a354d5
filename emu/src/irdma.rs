//! The emulated E810 (`irdma0`, Intel 8086:1592, one RoCE v2 port) and the irdma driver's
//! side of the commands, under an unmodified libirdma: the context response (a GEN_2
//! device, never the zero `max_hw_sq_chunk` libirdma takes a modulo by nor the zero
//! `hw_rev` that means a legacy i40iw), the doorbell page, REG_MR's `reg_type` bookkeeping
//! (libirdma registers each CQ ring, CQ shadow area and QP buffer before it creates the
//! object, and the create commands name them only by address), CREATE_CQ and CREATE_QP
//! with the ring geometry recovered from those registrations, and the extended MODIFY_QP
//! libirdma sends to flush a QP in the error state.
//!
//! The objects go into the context's common tables (so MODIFY_QP, the destroy commands and
//! the busy checks are the ones the ConnectX uses); what only irdma has is in [`IrdmaCtx`].
//! `irdma_engine.rs` is the device that executes the work.

use crate::abi::{self, cmd, QueryDeviceResp, QueryPortResp};
use crate::commands::{self, Command, Errno};
use crate::emulator::Emulator;
use crate::events::{EventFd, Owner};
use crate::fd_table::FdKind;
use crate::irdma_abi::{self as iabi, reg_type};
use crate::objects::{Context, Cq, Mlx5Wq, Qp, QpPath, QpState, QpType};
use std::collections::HashMap;

/// The RDMA device name.
pub const IBDEV: &str = "irdma0";
/// Its uverbs node (`/dev/infiniband/uverbs1`).
pub const UVERBS: &str = "uverbs1";
/// The path rdma-core opens for it.
pub const UVERBS_PATH: &[u8] = b"/dev/infiniband/uverbs1";
/// The PCI modalias libibverbs matches libirdma's table with: Intel, E810-C QSFP.
pub const MODALIAS: &str = "pci:v00008086d00001592sv00008086sd00000002bc02sc00i00";
/// The port's MAC address; the node GUID and the link-local GID derive from it (EUI-64).
pub const NODE_GUID_TEXT: &str = "b696:91ff:fea5:3c10";
/// The node GUID as a number.
pub const NODE_GUID: u64 = 0xb696_91ff_fea5_3c10;
/// The port's one GID (an E810 speaks RoCE v2 only).
pub const GID: &str = "fe80:0000:0000:0000:b696:91ff:fea5:3c10";
/// Firmware 1.3 as the kernel driver packs it (major << 32 | minor).
pub const FW_VER: u64 = (1 << 32) | 3;
/// `max_hw_sq_chunk`: WQEs never straddle an 8-quantum chunk (libirdma pads with NOPs).
pub const SQ_CHUNK: u16 = 8;
/// `max_hw_wq_quanta` and `max_hw_rq_quanta`.
pub const MAX_WQ_QUANTA: u32 = 32768;
/// `max_hw_wq_frags`, `max_hw_read_sges`.
pub const MAX_FRAGS: u32 = 13;
/// `max_hw_inline`.
pub const MAX_INLINE: u32 = 101;
/// `max_hw_cq_size`.
pub const MAX_CQ_SIZE: u32 = 1_048_575;
/// `IRDMA_MAX_QP_WRS`: the largest WQE is 8 quanta and 258 are reserved.
pub const MAX_QP_WR: u32 = (MAX_WQ_QUANTA - 258) / 8;
/// The mmap offset of the doorbell page (`db_mmap_key`).
pub const DB_MMAP_KEY: u64 = 0x1000;
/// The page size of every mapping and registration.
pub const PAGE: u64 = 4096;
/// A CQE (32 bytes; an extended one takes two slots on GEN_2).
pub const CQE_SIZE: u64 = 32;
/// A shadow area.
pub const SHADOW_SIZE: u64 = 64;

/// The device attributes of QUERY_DEVICE, as the kernel's `irdma_query_device` reports an
/// E810's.
pub fn attributes() -> QueryDeviceResp {
    QueryDeviceResp {
        fw_ver: FW_VER,
        node_guid: NODE_GUID.to_be(),
        sys_image_guid: NODE_GUID.to_be(),
        max_mr_size: 0x7f_ffff_ffff,
        page_size_cap: 0x4020_1000,
        vendor_id: 0x8086,
        vendor_part_id: 0x1592,
        hw_ver: 2,
        max_qp: 262_141,
        max_qp_wr: MAX_QP_WR,
        // IB_DEVICE_MEM_WINDOW | IB_DEVICE_MEM_MGT_EXTENSIONS | IB_DEVICE_RC_RNR_NAK_GEN.
        device_cap_flags: (1 << 17) | (1 << 21) | (1 << 12),
        max_sge: MAX_FRAGS,
        max_sge_rd: MAX_FRAGS,
        max_cq: 1 << 19,
        max_cqe: MAX_CQ_SIZE - 1,
        max_mr: 1 << 21,
        max_pd: 262_144,
        max_qp_rd_atom: 127,
        max_ee_rd_atom: 0,
        max_res_rd_atom: 0,
        max_qp_init_rd_atom: 127,
        max_ee_init_rd_atom: 0,
        // IBV_ATOMIC_NONE: a GEN_2 device has no atomics.
        atomic_cap: 0,
        max_ee: 0,
        max_rdd: 0,
        max_mw: 1 << 21,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        max_mcast_grp: 0,
        max_mcast_qp_attach: 0,
        max_total_mcast_qp_attach: 0,
        max_ah: 131_072,
        max_fmr: 0,
        max_map_per_fmr: 0,
        // No SRQ before GEN_3.
        max_srq: 0,
        max_srq_wr: 0,
        max_srq_sge: 0,
        max_pkeys: 1,
        local_ca_ack_delay: 0,
        phys_port_cnt: 1,
        reserved: [0; 4],
    }
}

/// Port 1: active, RoCE (Ethernet), 4096-byte MTU, 100 Gb/s, one GID.
pub fn port() -> QueryPortResp {
    QueryPortResp { gid_tbl_len: 1, pkey_tbl_len: 1, ..crate::device::port() }
}

/// One ring registration (REG_MR with `reg_type` QP or CQ): what CREATE_QP and CREATE_CQ
/// find by address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingReg {
    pub pd: u32,
    pub start: u64,
    pub length: u64,
    pub reg_type: u16,
    pub cq_pages: u16,
    pub rq_pages: u16,
    pub sq_pages: u16,
}

/// A CQ's irdma geometry and the device's progress in it.
#[derive(Clone, Copy, Debug)]
pub struct IrdmaCq {
    /// The ring: `size` 32-byte slots.
    pub ring: u64,
    /// The 64-byte shadow area: word 0 the consumer's head, word 4 the arm word.
    pub shadow: u64,
    pub size: u32,
    /// Slots written since creation: the slot is `written % size`, and the valid bit is 1 on
    /// even passes (libirdma's polarity starts at 1).
    pub written: u64,
    /// `written` just after the last solicited or error CQE.
    pub notify_at: u64,
    /// The arm word as the device last saw it.
    pub arm_seen: u64,
    /// The arm in force: solicited only, and the consumer's position when it was made.
    pub armed: Option<(bool, u64)>,
}

/// A QP's irdma work queues and the device's progress in them.
#[derive(Clone, Copy, Debug)]
pub struct IrdmaQp {
    /// The SQ: `sq_quanta` 32-byte quanta at the buffer's start.
    pub sq: u64,
    pub sq_quanta: u32,
    /// The RQ: `rq_size` WQEs of `1 << rq_shift` quanta after the SQ's pages.
    pub rq: u64,
    pub rq_size: u32,
    pub rq_shift: u32,
    /// The completion context every CQE carries (libirdma's `struct irdma_qp_uk *`).
    pub compl_ctx: u64,
    /// The next SQ quantum the device reads, and the valid bit it expects there.
    pub sq_head: u32,
    pub sq_valid: bool,
    /// The next RQ WQE, and its expected valid bit.
    pub rq_head: u32,
    pub rq_valid: bool,
    /// A WQE was consumed with no CQE after it: libirdma still counts it outstanding, so a
    /// flush must report it.
    pub sq_uncovered: bool,
    /// The position (in the send or receive CQ's `written`) of a flush CQE libirdma may not
    /// have consumed yet: while it has not, it reports every newly flushed WR from it.
    pub sq_flush_at: Option<u64>,
    pub rq_flush_at: Option<u64>,
}

/// What only an irdma context has.
#[derive(Debug, Default)]
pub struct IrdmaCtx {
    /// Ring registrations by MR handle.
    pub rings: HashMap<u32, RingReg>,
    pub cqs: HashMap<u32, IrdmaCq>,
    pub qps: HashMap<u32, IrdmaQp>,
    /// The doorbell page the context mapped.
    pub db_page: Option<usize>,
    /// Address handles: handle to (`ah_id`, PD handle).
    pub ahs: HashMap<u32, (u32, u32)>,
}

/// `irdma_get_wqe_shift` for GEN_2: log2 of the quanta of a WQE with `sge` fragments (the
/// SQ counts one more) and `inline` bytes of inline data.
pub fn wqe_shift(sge: u32, inline: u32) -> u32 {
    if sge <= 1 && inline <= 8 {
        0
    } else if sge < 4 && inline <= 39 {
        1
    } else if sge < 8 && inline <= 101 {
        2
    } else {
        3
    }
}

/// Runs one command on irdma context `fd`.
///
/// # Errors
///
/// The errno the kernel would return.
pub fn command(e: &mut Emulator, fd: i32, c: &mut Command<'_>) -> Result<(), Errno> {
    match (c.number, c.extended) {
        (cmd::GET_CONTEXT, false) => return get_context(e, fd, c),
        (cmd::CREATE_COMP_CHANNEL, false) => return e.create_comp_channel(fd, c),
        // What reached the QP over the wire is answered before it goes.
        (cmd::DESTROY_QP, false) => e.drain_wire(),
        _ => {}
    }
    let Emulator { contexts, events, numbers, .. } = e;
    let ctx = contexts.get_mut(&fd).filter(|x| x.ready).ok_or(libc::EINVAL)?;
    match (c.number, c.extended) {
        (cmd::QUERY_DEVICE, false) => {
            let _: abi::ResponseOnly = c.request(true)?;
            c.respond(bytemuck::bytes_of(&attributes()), &[])
        }
        (cmd::QUERY_DEVICE, true) => query_device_ex(c),
        (cmd::QUERY_PORT, false) => {
            let req: abi::QueryPort = c.request(true)?;
            if req.port_num != 1 {
                return Err(libc::EINVAL);
            }
            c.respond(bytemuck::bytes_of(&port()), &[])
        }
        (cmd::ALLOC_PD, false) => {
            let _: abi::ResponseOnly = c.request(true)?;
            let pdn = numbers.pdn();
            let handle = ctx.new_handle();
            c.respond(
                bytemuck::bytes_of(&abi::AllocPdResp { pd_handle: handle }),
                bytemuck::bytes_of(&iabi::AllocPdResp { pd_id: pdn, rsvd: [0; 4] }),
            )?;
            ctx.pds.insert(handle, crate::objects::Pd { pdn });
            Ok(())
        }
        (cmd::DEALLOC_PD, false) => {
            // The rings registered on the PD go before it (libirdma deregisters them first).
            commands::dealloc_pd(ctx, c)
        }
        (cmd::REG_MR, false) => reg_mr(ctx, numbers, c),
        (cmd::DEREG_MR, false) => {
            let req: abi::Handle = c.request(false)?;
            if ctx.irdma.rings.remove(&req.handle).is_some() {
                return Ok(());
            }
            ctx.mrs.remove(&req.handle).map(|_| ()).ok_or(libc::EINVAL)
        }
        (cmd::CREATE_CQ, false) => create_cq(ctx, events, numbers, c),
        (cmd::DESTROY_CQ, false) => {
            let h = destroyed_handle(c);
            commands::destroy_cq(ctx, events, |h| Owner::Cq(fd, h), c)?;
            ctx.irdma.cqs.remove(&h);
            Ok(())
        }
        (cmd::CREATE_QP, false) => create_qp(ctx, numbers, c),
        (cmd::MODIFY_QP, ext) => modify_qp(ctx, ext, c),
        (cmd::DESTROY_QP, false) => {
            let h = destroyed_handle(c);
            commands::destroy_qp(ctx, fd, events, c)?;
            ctx.irdma.qps.remove(&h);
            Ok(())
        }
        (iabi::CMD_CREATE_AH, false) => {
            let req: iabi::CreateAh = c.request(true)?;
            if !ctx.pds.contains_key(&req.pd_handle) || req.port_num != 1 || req.sgid_index != 0 {
                return Err(libc::EINVAL);
            }
            let handle = ctx.new_handle();
            // The AH id is the handle: unique in the context, as UD WQEs need it.
            c.respond(&handle.to_ne_bytes(), bytemuck::bytes_of(&iabi::CreateAhResp { ah_id: handle, rsvd: [0; 4] }))?;
            ctx.irdma.ahs.insert(handle, (handle, req.pd_handle));
            Ok(())
        }
        (iabi::CMD_DESTROY_AH, false) => {
            let req: abi::Handle = c.request(false)?;
            ctx.irdma.ahs.remove(&req.handle).map(|_| ()).ok_or(libc::EINVAL)
        }
        // Windows, resize and the rest are not emulated yet; irdma has no SRQ on GEN_2.
        _ => Err(libc::EOPNOTSUPP),
    }
}

/// The handle a destroy command names (0 if the request is short; the command itself then
/// fails).
fn destroyed_handle(c: &Command<'_>) -> u32 {
    c.peek::<abi::Destroy>().map_or(0, |d| d.handle)
}

fn get_context(e: &mut Emulator, fd: i32, c: &mut Command<'_>) -> Result<(), Errno> {
    let _: abi::ResponseOnly = c.request(true)?;
    let ctx = e.contexts.get_mut(&fd).ok_or(libc::EINVAL)?;
    if ctx.ready {
        return Err(libc::EINVAL);
    }
    let req: iabi::AllocUcontextReq = c.udata();
    // ABI 4 and 5 are the user-space versions libirdma offers (it retries with 4).
    if !(4..=5).contains(&req.userspace_ver) {
        return Err(libc::EINVAL);
    }
    let drv = ucontext(req.userspace_ver);
    let async_fd = EventFd::new(FdKind::Async)?;
    let core = abi::GetContextResp { async_fd: async_fd.fd() as u32, num_comp_vectors: 8 };
    if let Err(err) = c.respond(bytemuck::bytes_of(&core), bytemuck::bytes_of(&drv)) {
        // SAFETY: the fd was just made and never handed out.
        unsafe { crate::real::close(async_fd.fd()) };
        return Err(err);
    }
    ctx.ready = true;
    ctx.async_fd = Some(async_fd.fd());
    e.events.insert(async_fd.fd(), async_fd);
    Ok(())
}

/// The GET_CONTEXT driver response: a GEN_2 device, no field libirdma divides by or sizes
/// with at zero.
pub fn ucontext(userspace_ver: u8) -> iabi::AllocUcontextResp {
    iabi::AllocUcontextResp {
        max_pds: 262_144,
        max_qps: 262_143,
        wq_size: 0,
        kernel_ver: userspace_ver,
        rsvd: [0; 3],
        feature_flags: iabi::FEATURE_FLAGS,
        db_mmap_key: DB_MMAP_KEY,
        max_hw_wq_frags: MAX_FRAGS,
        max_hw_read_sges: MAX_FRAGS,
        max_hw_inline: MAX_INLINE,
        max_hw_rq_quanta: MAX_WQ_QUANTA,
        max_hw_wq_quanta: MAX_WQ_QUANTA,
        min_hw_cq_size: 1,
        max_hw_cq_size: MAX_CQ_SIZE,
        max_hw_sq_chunk: SQ_CHUNK,
        hw_rev: iabi::HW_REV_GEN2,
        rsvd2: 0,
    }
}

fn query_device_ex(c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::ExQueryDevice = c.request(false)?;
    if req.comp_mask != 0 || req.reserved != 0 {
        return Err(libc::EINVAL);
    }
    let core_len = c.out_len().min(size_of::<abi::ExQueryDeviceResp>());
    if core_len < size_of::<QueryDeviceResp>() {
        return Err(libc::ENOSPC);
    }
    let resp = abi::ExQueryDeviceResp {
        base: attributes(),
        response_length: core_len as u32,
        device_cap_flags_ex: u64::from(attributes().device_cap_flags),
        ..abi::ExQueryDeviceResp::default()
    };
    c.respond(bytemuck::bytes_of(&resp), &[])
}

/// REG_MR: an application's region goes to the common table; a QP or CQ ring is recorded
/// for the create command that names it (no key: the device reaches rings by address).
fn reg_mr(ctx: &mut Context, n: &mut commands::Numbers, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::RegMr = c.peek().ok_or(libc::EINVAL)?;
    let drv: iabi::MemRegReq = read_after::<abi::RegMr, _>(c);
    match drv.reg_type {
        reg_type::MEM => commands::reg_mr(ctx, n, c),
        reg_type::QP | reg_type::CQ => {
            let _: abi::RegMr = c.request(true)?;
            if !ctx.pds.contains_key(&req.pd_handle) || req.length == 0 || req.start % PAGE != 0 {
                return Err(libc::EINVAL);
            }
            let reg = RingReg {
                pd: req.pd_handle,
                start: req.start,
                length: req.length,
                reg_type: drv.reg_type,
                cq_pages: drv.cq_pages,
                rq_pages: drv.rq_pages,
                sq_pages: drv.sq_pages,
            };
            let pages = match drv.reg_type {
                reg_type::QP => u64::from(drv.sq_pages) + u64::from(drv.rq_pages),
                _ => u64::from(drv.cq_pages),
            };
            // The pages named must lie in the region (a CQ's shadow area alone is 64 bytes
            // in a one-page registration).
            if pages == 0 || (pages - 1) * PAGE >= req.length {
                return Err(libc::EINVAL);
            }
            let handle = ctx.new_handle();
            c.respond(bytemuck::bytes_of(&abi::RegMrResp { mr_handle: handle, lkey: 0, rkey: 0 }), &[])?;
            ctx.irdma.rings.insert(handle, reg);
            Ok(())
        }
        _ => Err(libc::EINVAL),
    }
}

/// The driver udata of a legacy command whose core request is `T`, zero-extended.
fn read_after<T: bytemuck::Pod, U: bytemuck::Pod>(c: &Command<'_>) -> U {
    let mut v = <U as bytemuck::Zeroable>::zeroed();
    let raw = c.core_bytes().get(size_of::<T>()..).unwrap_or(&[]);
    let dst = bytemuck::bytes_of_mut(&mut v);
    let k = dst.len().min(raw.len());
    dst[..k].copy_from_slice(&raw[..k]);
    v
}

/// The ring registration of `ctx` that starts at `addr`, of type `ty`.
fn ring_at(ctx: &Context, addr: u64, ty: u16) -> Option<RingReg> {
    ctx.irdma.rings.values().find(|r| r.start == addr && r.reg_type == ty).copied()
}

fn create_cq(
    ctx: &mut Context,
    events: &HashMap<i32, EventFd>,
    n: &mut commands::Numbers,
    c: &mut Command<'_>,
) -> Result<(), Errno> {
    let req: abi::CreateCq = c.request(true)?;
    let drv: iabi::CreateCqReq = c.udata();
    // libirdma passes the ring's slot count: (cqe + 1) * 2, at least 4. rdma-core 44 lets
    // a cqe of max_hw_cq_size through (47 refuses it); the device takes rings for what it
    // reports as max_cqe, as its kernel driver sizes the hardware CQ from the count.
    if req.cqe < 4 || req.cqe > 2 * MAX_CQ_SIZE || req.comp_vector >= 8 {
        return Err(libc::EINVAL);
    }
    // The kernel finds both buffers among the CQ registrations (EPROTO when absent).
    let ring = ring_at(ctx, drv.user_cq_buf, reg_type::CQ).ok_or(libc::EPROTO)?;
    if u64::from(ring.cq_pages) * PAGE < u64::from(req.cqe) * CQE_SIZE {
        return Err(libc::EINVAL);
    }
    let shadow_ok = ring_at(ctx, drv.user_shadow_area, reg_type::CQ).is_some()
        || (drv.user_shadow_area == ring.start + u64::from(ring.cq_pages) * PAGE
            && ring.length >= u64::from(ring.cq_pages) * PAGE + SHADOW_SIZE);
    if !shadow_ok || drv.user_shadow_area % 8 != 0 {
        return Err(libc::EPROTO);
    }
    let channel = match req.comp_channel {
        -1 => None,
        fd if events.get(&fd).is_some_and(|e| e.record_len() == 8) => Some(fd),
        _ => return Err(libc::EINVAL),
    };
    let cq = Cq {
        user_handle: req.user_handle,
        cqn: n.cqn(),
        ncqe: req.cqe,
        cqe_size: CQE_SIZE as u32,
        buf: drv.user_cq_buf,
        dbrec: drv.user_shadow_area,
        channel,
        comp_vector: req.comp_vector,
        ..Cq::default()
    };
    let handle = ctx.new_handle();
    let core = abi::CreateCqResp { cq_handle: handle, cqe: req.cqe };
    let drv_resp = iabi::CreateCqResp { cq_id: cq.cqn, cq_size: req.cqe };
    c.respond(bytemuck::bytes_of(&core), bytemuck::bytes_of(&drv_resp))?;
    // SAFETY: the shadow area is the 64 bytes libirdma registered for this CQ (checked above) and zeroed; it writes the arm word only when it arms, which it cannot before this returns.
    let arm = unsafe { crate::irdma_engine::load_le64(drv.user_shadow_area + 32) };
    ctx.irdma.cqs.insert(
        handle,
        IrdmaCq {
            ring: drv.user_cq_buf,
            shadow: drv.user_shadow_area,
            size: req.cqe,
            written: 0,
            notify_at: 0,
            arm_seen: arm,
            armed: None,
        },
    );
    ctx.cqs.insert(handle, cq);
    Ok(())
}

fn create_qp(ctx: &mut Context, n: &mut commands::Numbers, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::CreateQp = c.request(true)?;
    let drv: iabi::CreateQpReq = c.udata();
    // libirdma creates RC and UD QPs only.
    let qp_type = match QpType::from_abi(req.qp_type) {
        Some(t @ (QpType::Rc | QpType::Ud)) => t,
        _ => return Err(libc::EOPNOTSUPP),
    };
    if !ctx.pds.contains_key(&req.pd_handle)
        || !ctx.cqs.contains_key(&req.send_cq_handle)
        || !ctx.cqs.contains_key(&req.recv_cq_handle)
        || req.is_srq != 0
    {
        return Err(libc::EINVAL);
    }
    if req.max_send_sge > MAX_FRAGS || req.max_recv_sge > MAX_FRAGS || req.max_inline_data > MAX_INLINE {
        return Err(libc::EINVAL);
    }
    let reg = ring_at(ctx, drv.user_wqe_bufs, reg_type::QP).ok_or(libc::EPROTO)?;
    // libirdma's geometry: it passes the ring depths already divided by the WQE sizes.
    let sq_shift = wqe_shift(req.max_send_sge + 1, req.max_inline_data);
    let rq_shift = wqe_shift(req.max_recv_sge, 0);
    let sq_quanta = req.max_send_wr.checked_shl(sq_shift).ok_or(libc::EINVAL)?;
    let rq_quanta = req.max_recv_wr.checked_shl(rq_shift).ok_or(libc::EINVAL)?;
    let sq_bytes = u64::from(reg.sq_pages) * PAGE;
    let rq_bytes = u64::from(reg.rq_pages) * PAGE;
    if !(8..=MAX_WQ_QUANTA).contains(&sq_quanta)
        || sq_quanta % u32::from(SQ_CHUNK) != 0
        || u64::from(sq_quanta) * CQE_SIZE > sq_bytes
        || rq_quanta > MAX_WQ_QUANTA
        || u64::from(rq_quanta) * CQE_SIZE > rq_bytes
        || sq_bytes + rq_bytes + SHADOW_SIZE > reg.length
        || drv.user_compl_ctx == 0
    {
        return Err(libc::EINVAL);
    }
    let qp = Qp {
        user_handle: req.user_handle,
        qpn: n.qpn(),
        qp_type,
        pd: req.pd_handle,
        send_cq: req.send_cq_handle,
        recv_cq: req.recv_cq_handle,
        srq: None,
        max_send_wr: req.max_send_wr,
        max_recv_wr: req.max_recv_wr,
        max_send_sge: req.max_send_sge,
        max_recv_sge: req.max_recv_sge,
        max_inline_data: req.max_inline_data,
        sq_sig_all: req.sq_sig_all != 0,
        // No mlx5 queues: the irdma geometry is in the context's irdma table.
        wq: Mlx5Wq {
            buf: drv.user_wqe_bufs,
            dbrec: 0,
            sq_wqe_count: 0,
            rq_wqe_count: 0,
            rq_wqe_shift: 0,
            flags: 0,
            uidx: 0,
        },
        state: QpState::Reset,
        path: QpPath::default(),
        events_read: 0,
        sq_ci: 0,
        rq_ci: 0,
    };
    let handle = ctx.new_handle();
    let core = abi::CreateQpResp {
        qp_handle: handle,
        qpn: qp.qpn,
        max_send_wr: req.max_send_wr,
        max_recv_wr: req.max_recv_wr,
        max_send_sge: req.max_send_sge,
        max_recv_sge: req.max_recv_sge,
        max_inline_data: req.max_inline_data,
        reserved: 0,
    };
    // The actual sizes replace libirdma's ring sizes: they echo what it asked for. lsmm 0
    // (RoCE: no connection WQEs), so its first SQ pass writes valid bit 1.
    let drv_resp = iabi::CreateQpResp {
        qp_id: qp.qpn,
        actual_sq_size: req.max_send_wr,
        actual_rq_size: req.max_recv_wr,
        irdma_drv_opt: 0,
        push_idx: 0,
        lsmm: 0,
        rsvd: 0,
        qp_caps: iabi::QP_CAPS,
    };
    c.respond(bytemuck::bytes_of(&core), bytemuck::bytes_of(&drv_resp))?;
    ctx.irdma.qps.insert(
        handle,
        IrdmaQp {
            sq: drv.user_wqe_bufs,
            sq_quanta,
            rq: drv.user_wqe_bufs + sq_bytes,
            rq_size: req.max_recv_wr,
            rq_shift,
            compl_ctx: drv.user_compl_ctx,
            sq_head: 0,
            sq_valid: true,
            rq_head: 0,
            rq_valid: true,
            sq_uncovered: false,
            sq_flush_at: None,
            rq_flush_at: None,
        },
    );
    ctx.qps.insert(handle, qp);
    Ok(())
}

/// MODIFY_QP, legacy or extended (libirdma sends the extended one, with `sq_flush` and
/// `rq_flush` in its udata, to flush WRs posted to a QP already in the error state): the
/// common transition checks. The device flushes whatever a QP in the error state holds
/// without being asked, so the udata needs no more than its size checked.
fn modify_qp(ctx: &mut Context, extended: bool, c: &mut Command<'_>) -> Result<(), Errno> {
    if extended && !c.udata_bytes().is_empty() && c.udata_bytes().len() != size_of::<iabi::ModifyQpReq>() {
        return Err(libc::EINVAL);
    }
    commands::modify_qp(ctx, extended, c)
}

/// `mmap(len, off)` of the context's doorbell page (the only page an irdma context maps:
/// no push pages, as no QP reports push mode).
///
/// # Errors
///
/// `EINVAL` for another offset or size.
pub fn mmap(ctx: &mut Context, len: usize, off: u64) -> Result<usize, Errno> {
    if off != DB_MMAP_KEY || len as u64 != PAGE {
        return Err(libc::EINVAL);
    }
    let addr = crate::mlx5::map_page(len)?;
    ctx.irdma.db_page = Some(addr);
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_response_has_no_field_libirdma_divides_by_or_reads_as_legacy_at_zero() {
        let r = ucontext(5);
        assert_ne!(r.max_hw_sq_chunk, 0, "uk.c takes a modulo by it");
        assert_eq!(r.hw_rev, 2, "0 would be legacy i40iw mode");
        assert!(r.max_hw_wq_quanta >= 512, "258 quanta of every SQ are reserved");
        assert_eq!(r.db_mmap_key % PAGE, 0, "an mmap offset is page aligned");
        assert_eq!(r.kernel_ver, 5);
        assert_eq!(r.feature_flags, 3);
    }

    #[test]
    fn wqe_shifts_follow_libirdmas_gen2_table() {
        // irdma_get_wqe_shift: one fragment (the SQ counts one more) and 8 inline bytes fit
        // one quantum.
        assert_eq!(wqe_shift(1, 0), 0);
        assert_eq!(wqe_shift(2, 0), 1);
        assert_eq!(wqe_shift(1, 9), 1);
        assert_eq!(wqe_shift(4, 0), 2);
        assert_eq!(wqe_shift(3, 64), 2);
        assert_eq!(wqe_shift(8, 0), 3);
        assert_eq!(wqe_shift(2, 102), 3);
    }

    /// A legacy command `number` with core request `core` and udata `udata`, whose
    /// response goes to `out`.
    fn legacy(number: u32, core: &[u8], udata: &[u8], out: &mut [u8]) -> Vec<u8> {
        let mut body = core.to_vec();
        // Every core request with a response starts with the response pointer.
        body[..8].copy_from_slice(&(out.as_mut_ptr() as u64).to_ne_bytes());
        body.extend_from_slice(udata);
        let hdr =
            abi::CmdHdr { command: number, in_words: ((8 + body.len()) / 4) as u16, out_words: (out.len() / 4) as u16 };
        let mut b = bytemuck::bytes_of(&hdr).to_vec();
        b.extend_from_slice(&body);
        b
    }

    /// A ready context with one PD (handle 1).
    fn ctx() -> Context {
        let mut c = Context::default();
        c.ready = true;
        let h = c.new_handle();
        c.pds.insert(h, crate::objects::Pd { pdn: 1 });
        c
    }

    fn reg(c: &mut Context, start: u64, length: u64, drv: iabi::MemRegReq) -> Result<(), Errno> {
        let req = abi::RegMr { response: 0, start, length, hca_va: start, pd_handle: 1, access_flags: 1 };
        let mut out = [0u8; 12];
        let b = legacy(cmd::REG_MR, bytemuck::bytes_of(&req), bytemuck::bytes_of(&drv), &mut out);
        reg_mr(c, &mut commands::Numbers::default(), &mut Command::parse(&b).unwrap())
    }

    fn cq(c: &mut Context, cqe: u32, ring: u64, shadow: u64) -> Result<(), Errno> {
        let req = abi::CreateCq { response: 0, user_handle: 7, cqe, comp_vector: 0, comp_channel: -1, reserved: 0 };
        let drv = iabi::CreateCqReq { user_cq_buf: ring, user_shadow_area: shadow };
        let mut out = [0u8; 16];
        let b = legacy(cmd::CREATE_CQ, bytemuck::bytes_of(&req), bytemuck::bytes_of(&drv), &mut out);
        create_cq(c, &HashMap::new(), &mut commands::Numbers::default(), &mut Command::parse(&b).unwrap())
    }

    /// Two zeroed, page-aligned pages that live as long as the test process.
    fn pages() -> (u64, u64) {
        let layout = std::alloc::Layout::from_size_align(8192, 4096).unwrap();
        // SAFETY: a non-zero size; the memory is never freed (the test's CQ points at it).
        let p = unsafe { std::alloc::alloc_zeroed(layout) } as u64;
        assert_ne!(p, 0);
        (p, p + 4096)
    }

    #[test]
    fn a_cq_is_made_only_on_registered_ring_and_shadow_memory() {
        let mut c = ctx();
        let (ring, shadow) = pages();
        let cq_reg = |pages| iabi::MemRegReq { reg_type: reg_type::CQ, cq_pages: pages, ..Default::default() };
        // Not registered: the kernel driver's EPROTO.
        assert_eq!(cq(&mut c, 34, ring, shadow), Err(libc::EPROTO));
        reg(&mut c, ring, 4096, cq_reg(1)).unwrap();
        assert_eq!(cq(&mut c, 34, ring, shadow), Err(libc::EPROTO), "the shadow area is not registered");
        reg(&mut c, shadow, 64, cq_reg(1)).unwrap();
        // 200 slots of 32 bytes do not fit one page.
        assert_eq!(cq(&mut c, 200, ring, shadow), Err(libc::EINVAL));
        assert_eq!(cq(&mut c, 34, ring, shadow), Ok(()));
        let icq = c.irdma.cqs.values().next().unwrap();
        assert_eq!((icq.ring, icq.shadow, icq.size, icq.written), (ring, shadow, 34, 0));
    }

    #[test]
    fn ring_registrations_name_pages_inside_the_region() {
        let mut c = ctx();
        let qp_reg = iabi::MemRegReq { reg_type: reg_type::QP, sq_pages: 4, rq_pages: 1, ..Default::default() };
        assert_eq!(reg(&mut c, 0x10000, 4096, qp_reg), Err(libc::EINVAL), "5 pages in one");
        assert_eq!(reg(&mut c, 0x10000, 5 * 4096 + 64, qp_reg), Ok(()));
        assert_eq!(reg(&mut c, 0x10010, 5 * 4096 + 64, qp_reg), Err(libc::EINVAL), "not page aligned");
        let bad = iabi::MemRegReq { reg_type: 9, ..Default::default() };
        assert_eq!(reg(&mut c, 0x30000, 4096, bad), Err(libc::EINVAL));
        assert_eq!(c.irdma.rings.len(), 1);
        assert!(c.mrs.is_empty(), "rings are not regions a WQE may name");
    }

    #[test]
    fn the_attributes_are_an_e810s() {
        let a = attributes();
        assert_eq!((a.vendor_id, a.vendor_part_id), (0x8086, 0x1592));
        assert_eq!(a.max_qp_wr, 4063);
        assert_eq!((a.max_sge, a.atomic_cap, a.max_srq), (13, 0, 0));
        assert_eq!(port().gid_tbl_len, 1);
    }
}
