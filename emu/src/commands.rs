//! The command layer: one `write()` on a command fd is one uverbs command. This parses the
//! framing (legacy and extended), checks sizes against the structures, runs the handler,
//! and writes the core and driver responses back, never more than the caller's buffer holds
//! (response sizes differ between rdma-core releases).

use crate::abi::{self, cmd, qp_attr, CmdHdr, ExCmdHdr};
use crate::emulator::Emulator;
use crate::events::{EventFd, Owner};
use crate::fd_table::FdKind;
use crate::objects::{Context, Cq, Device, Mlx5Wq, Mr, Pd, Qp, QpPath, QpState, QpType, Srq};
use crate::{device, mlx5, mlx5_abi};
use bytemuck::{Pod, Zeroable};
use dvcq_mlx5_dv::mini::MiniFormat;

mod ah;
pub(crate) mod mw;
mod resize_cq;
mod wq;

/// An errno.
pub type Errno = i32;

/// A parsed command: its number, request bytes (core then udata), and where the response
/// goes.
#[derive(Debug)]
pub struct Command<'a> {
    pub number: u32,
    pub extended: bool,
    core: &'a [u8],
    udata: &'a [u8],
    /// The response pointer (legacy: the request's first word, read by the handler).
    response: u64,
    /// Legacy: the whole response (core + driver) in bytes; extended: the core's.
    out_len: usize,
    /// Extended: the driver response in bytes.
    udata_out_len: usize,
}

impl<'a> Command<'a> {
    /// Splits one write into its command.
    ///
    /// # Errors
    ///
    /// `EINVAL` when the header's word counts disagree with the write's length.
    pub fn parse(buf: &'a [u8]) -> Result<Command<'a>, Errno> {
        let hdr: CmdHdr = read_prefix(buf).ok_or(libc::EINVAL)?;
        let rest = &buf[size_of::<CmdHdr>()..];
        if hdr.command & abi::CMD_FLAG_EXTENDED != 0 {
            let ex: ExCmdHdr = read_prefix(rest).ok_or(libc::EINVAL)?;
            let body = &rest[size_of::<ExCmdHdr>()..];
            let core_len = usize::from(hdr.in_words) * 8;
            let udata_len = usize::from(ex.provider_in_words) * 8;
            if body.len() != core_len + udata_len {
                return Err(libc::EINVAL);
            }
            Ok(Command {
                number: hdr.command & abi::CMD_COMMAND_MASK,
                extended: true,
                core: &body[..core_len],
                udata: &body[core_len..],
                response: ex.response,
                out_len: usize::from(hdr.out_words) * 8,
                udata_out_len: usize::from(ex.provider_out_words) * 8,
            })
        } else {
            if usize::from(hdr.in_words) * 4 != buf.len() {
                return Err(libc::EINVAL);
            }
            Ok(Command {
                number: hdr.command,
                extended: false,
                core: rest,
                udata: &[],
                response: 0,
                out_len: usize::from(hdr.out_words) * 4,
                udata_out_len: 0,
            })
        }
    }

    /// The core request as `T`, the rest as driver udata (legacy) or the udata already split
    /// (extended); a legacy request whose first word is the response pointer records it.
    pub(crate) fn request<T: Pod>(&mut self, has_response: bool) -> Result<T, Errno> {
        let req: T = read_prefix(self.core).ok_or(libc::EINVAL)?;
        if !self.extended {
            self.udata = &self.core[size_of::<T>()..];
            if has_response {
                self.response = read_prefix::<u64>(self.core).ok_or(libc::EINVAL)?;
            }
        }
        Ok(req)
    }

    /// The driver udata as `T`, missing bytes read as zero (older libraries send less).
    pub(crate) fn udata<T: Pod>(&self) -> T {
        read_zero_extended(self.udata)
    }

    /// The core request as `T` without taking it (`None` when shorter).
    pub(crate) fn peek<T: Pod>(&self) -> Option<T> {
        read_prefix(self.core)
    }

    /// The core request's bytes (a legacy command's driver udata follows its struct).
    pub(crate) fn core_bytes(&self) -> &[u8] {
        self.core
    }

    /// The driver udata (extended commands; a legacy command's is known after `request`).
    pub(crate) fn udata_bytes(&self) -> &[u8] {
        self.udata
    }

    /// Legacy: the whole response's room in bytes; extended: the core response's.
    pub(crate) fn out_len(&self) -> usize {
        self.out_len
    }

    /// Writes the core response `core` and the driver response `driver`, each cut to what
    /// the caller's buffer holds.
    ///
    /// # Errors
    ///
    /// `ENOSPC` when the buffer cannot hold the core response's mandatory part; `EFAULT`
    /// for a null response pointer.
    pub(crate) fn respond(&self, core: &[u8], driver: &[u8]) -> Result<(), Errno> {
        if self.response == 0 {
            return Err(libc::EFAULT);
        }
        let (core_room, driver_room) = if self.extended {
            (self.out_len, self.udata_out_len)
        } else {
            if self.out_len < core.len() {
                return Err(libc::ENOSPC);
            }
            (core.len(), self.out_len - core.len())
        };
        let c = core.len().min(core_room);
        let d = driver.len().min(driver_room);
        // SAFETY: the response pointer is the application's buffer of out_words (and, for an extended command, provider_out_words) words, as libibverbs sizes it for this command: `c` bytes fit the core part and `d` bytes the driver part after it (the driver part starts after the core part's room). A kernel would copy_to_user there.
        unsafe {
            let out = self.response as usize as *mut u8;
            std::ptr::copy_nonoverlapping(core.as_ptr(), out, c);
            std::ptr::copy_nonoverlapping(driver.as_ptr(), out.add(core_room), d);
        }
        Ok(())
    }
}

/// The first `size_of::<T>()` bytes of `bytes` as a `T`; `None` if there are fewer.
fn read_prefix<T: Pod>(bytes: &[u8]) -> Option<T> {
    bytes.get(..size_of::<T>()).map(bytemuck::pod_read_unaligned)
}

/// `bytes` as a `T`, zero-extended or cut to its size.
fn read_zero_extended<T: Pod>(bytes: &[u8]) -> T {
    let mut v = T::zeroed();
    let dst = bytemuck::bytes_of_mut(&mut v);
    let n = dst.len().min(bytes.len());
    dst[..n].copy_from_slice(&bytes[..n]);
    v
}

impl Emulator {
    /// Runs one command written to context fd `fd`.
    ///
    /// # Errors
    ///
    /// The errno the kernel would return.
    pub fn command(&mut self, fd: i32, buf: &[u8]) -> Result<(), Errno> {
        let mut c = Command::parse(buf)?;
        if self.contexts.get(&fd).is_some_and(|x| x.device == Device::Irdma) {
            return crate::irdma::command(self, fd, &mut c);
        }
        if c.number == cmd::GET_CONTEXT && !c.extended {
            return self.get_context(fd, &mut c);
        }
        if c.number == cmd::CREATE_COMP_CHANNEL && !c.extended {
            return self.create_comp_channel(fd, &mut c);
        }
        if c.number == cmd::DESTROY_QP {
            self.drain_wire();
        }
        let ctx = self.contexts.get_mut(&fd).filter(|x| x.ready).ok_or(libc::EINVAL)?;
        match (c.number, c.extended) {
            (cmd::QUERY_DEVICE, false) => query_device(&mut c),
            (cmd::QUERY_DEVICE, true) => query_device_ex(&mut c),
            (cmd::QUERY_PORT, false) => query_port(&mut c),
            (cmd::ALLOC_PD, false) => alloc_pd(ctx, &mut self.numbers, &mut c),
            (cmd::DEALLOC_PD, false) => dealloc_pd(ctx, &mut c),
            (cmd::REG_MR, false) => reg_mr(ctx, &mut self.numbers, &mut c),
            (cmd::DEREG_MR, false) => dereg_mr(ctx, &mut c),
            (cmd::CREATE_CQ, false) => create_cq(ctx, &self.events, &mut self.numbers, &mut c),
            (cmd::RESIZE_CQ, false) => resize_cq::resize_cq(ctx, &mut c),
            (cmd::ALLOC_MW, false) => mw::alloc_mw(ctx, &mut self.numbers, &mut c),
            (cmd::DEALLOC_MW, false) => mw::dealloc_mw(ctx, &mut c),
            (cmd::DESTROY_CQ, false) => {
                let owner = |h| Owner::Cq(fd, h);
                destroy_cq(ctx, &mut self.events, owner, &mut c)
            }
            (cmd::CREATE_QP, false) => create_qp(ctx, &mut self.numbers, &mut c),
            (cmd::MODIFY_QP, ext) => modify_qp(ctx, ext, &mut c),
            (cmd::DESTROY_QP, false) => destroy_qp(ctx, fd, &mut self.events, &mut c),
            (cmd::CREATE_SRQ, false) => create_srq(ctx, &mut self.numbers, &mut c),
            (cmd::MODIFY_SRQ, false) => modify_srq(ctx, &mut c),
            (cmd::DESTROY_SRQ, false) => destroy_srq(ctx, fd, &mut self.events, &mut c),
            (cmd::CREATE_AH, false) => ah::create_ah(ctx, &mut c),
            (cmd::DESTROY_AH, false) => ah::destroy_ah(ctx, &mut c),
            (abi::ex_cmd::CREATE_WQ, true) => wq::create_wq(ctx, &mut self.numbers, &mut c),
            (abi::ex_cmd::MODIFY_WQ, true) => wq::modify_wq(ctx, &mut c),
            (abi::ex_cmd::DESTROY_WQ, true) => wq::destroy_wq(ctx, fd, &mut self.events, &mut c),
            // Everything else (XRC, flows, RSS indirection tables, ...) is not
            // emulated yet: the same answer as a kernel without the command.
            _ => Err(libc::EOPNOTSUPP),
        }
    }

    fn get_context(&mut self, fd: i32, c: &mut Command<'_>) -> Result<(), Errno> {
        let _: abi::ResponseOnly = c.request(true)?;
        let ctx = self.contexts.get_mut(&fd).ok_or(libc::EINVAL)?;
        if ctx.ready {
            return Err(libc::EINVAL);
        }
        let req: mlx5_abi::AllocUcontextReq = c.udata();
        let drv = mlx5::ucontext(&req)?;
        let async_fd = EventFd::new(FdKind::Async)?;
        let core = abi::GetContextResp { async_fd: async_fd.fd() as u32, num_comp_vectors: device::NUM_COMP_VECTORS };
        if let Err(e) = c.respond(bytemuck::bytes_of(&core), bytemuck::bytes_of(&drv)) {
            // SAFETY: the fd was just made and never handed out.
            unsafe { crate::real::close(async_fd.fd()) };
            return Err(e);
        }
        ctx.ready = true;
        ctx.async_fd = Some(async_fd.fd());
        ctx.tot_bfregs = drv.tot_bfregs;
        self.events.insert(async_fd.fd(), async_fd);
        Ok(())
    }

    pub(crate) fn create_comp_channel(&mut self, fd: i32, c: &mut Command<'_>) -> Result<(), Errno> {
        let _: abi::ResponseOnly = c.request(true)?;
        if !self.contexts.get(&fd).is_some_and(|x| x.ready) {
            return Err(libc::EINVAL);
        }
        let ch = EventFd::new(FdKind::CompChannel)?;
        let resp = abi::CreateCompChannelResp { fd: ch.fd() as u32 };
        if let Err(e) = c.respond(bytemuck::bytes_of(&resp), &[]) {
            // SAFETY: the fd was just made and never handed out.
            unsafe { crate::real::close(ch.fd()) };
            return Err(e);
        }
        self.events.insert(ch.fd(), ch);
        Ok(())
    }
}

/// Device-wide numbers (PD, CQ, QP, SRQ, RQ numbers and memory keys), unique in the process.
#[derive(Debug)]
pub struct Numbers {
    next_pdn: u32,
    next_cqn: u32,
    next_qpn: u32,
    next_srqn: u32,
    next_rqn: u32,
    next_mkey_index: u32,
}

impl Default for Numbers {
    fn default() -> Numbers {
        // QPN 0 and 1 are the special QPs; start where a real device's first user objects
        // land, so the numbers look like hardware's.
        Numbers { next_pdn: 1, next_cqn: 0x400, next_qpn: 0x100, next_srqn: 0x80, next_rqn: 0x80, next_mkey_index: 1 }
    }
}

impl Numbers {
    fn take(n: &mut u32, mask: u32) -> u32 {
        let v = *n & mask;
        *n = n.wrapping_add(1);
        v
    }
    pub(crate) fn pdn(&mut self) -> u32 {
        Self::take(&mut self.next_pdn, 0xff_ffff)
    }
    pub(crate) fn cqn(&mut self) -> u32 {
        Self::take(&mut self.next_cqn, 0xff_ffff)
    }
    /// A QPN: the process's wire slot in the high bits, so QPNs are unique across the
    /// host's processes and name the process that owns them.
    pub(crate) fn qpn(&mut self) -> u32 {
        let slot = crate::wire::process_slot().map_or(0, |s| s.number);
        crate::wire::qpn_in(slot, Self::take(&mut self.next_qpn, crate::wire::LOCAL_QPN_MASK))
    }
    pub(crate) fn srqn(&mut self) -> u32 {
        Self::take(&mut self.next_srqn, 0xff_ffff)
    }
    /// A receive WQ's number: the device's RQ numbers, a space apart from QPNs.
    pub(crate) fn rqn(&mut self) -> u32 {
        Self::take(&mut self.next_rqn, 0xff_ffff)
    }
    /// A memory key: index in the upper 24 bits, a nonzero tag in the low byte, so no key is
    /// ever `MLX5_INVALID_LKEY` (0x100, libmlx5's scatter-list terminator).
    pub(crate) fn mkey(&mut self) -> u32 {
        let index = Self::take(&mut self.next_mkey_index, 0xff_ffff);
        (index << 8) | 0x5a
    }
}

/// Whether a doorbell record address is one the device can read and write as aligned
/// 32-bit words (libmlx5 hands out cache-line aligned records).
fn dbrec_ok(addr: u64) -> bool {
    addr != 0 && addr % 4 == 0
}

fn query_device(c: &mut Command<'_>) -> Result<(), Errno> {
    let _: abi::ResponseOnly = c.request(true)?;
    c.respond(bytemuck::bytes_of(&device::attributes()), &[])
}

fn query_device_ex(c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::ExQueryDevice = c.request(false)?;
    if req.comp_mask != 0 || req.reserved != 0 {
        return Err(libc::EINVAL);
    }
    let mut resp = device::attributes_ex();
    let core_len = c.out_len.min(size_of::<abi::ExQueryDeviceResp>());
    if core_len < size_of::<abi::QueryDeviceResp>() {
        return Err(libc::ENOSPC);
    }
    resp.response_length = core_len as u32;
    let mut drv = mlx5_abi::QueryDeviceResp::zeroed();
    drv.response_length = c.udata_out_len.min(size_of::<mlx5_abi::QueryDeviceResp>()) as u32;
    // 64-byte CQEs padded in 128-byte entries, as a ConnectX-6 Dx offers.
    drv.flags = mlx5_abi::QUERY_DEV_RESP_FLAGS_CQE_128B_PAD;
    // CQE compression, in the formats mlx5dv_create_cq takes.
    drv.cqe_comp_max_num = crate::engine::compress::MAX_SESSION;
    drv.cqe_comp_supported_format = crate::engine::compress::SUPPORTED_FORMATS;
    c.respond(bytemuck::bytes_of(&resp), bytemuck::bytes_of(&drv))
}

fn query_port(c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::QueryPort = c.request(true)?;
    if req.port_num != 1 {
        return Err(libc::EINVAL);
    }
    c.respond(bytemuck::bytes_of(&device::port()), &[])
}

fn alloc_pd(ctx: &mut Context, n: &mut Numbers, c: &mut Command<'_>) -> Result<(), Errno> {
    let _: abi::ResponseOnly = c.request(true)?;
    let pd = Pd { pdn: n.pdn() };
    let handle = ctx.new_handle();
    c.respond(
        bytemuck::bytes_of(&abi::AllocPdResp { pd_handle: handle }),
        bytemuck::bytes_of(&mlx5_abi::AllocPdResp { pdn: pd.pdn }),
    )?;
    ctx.pds.insert(handle, pd);
    Ok(())
}

pub(crate) fn dealloc_pd(ctx: &mut Context, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::Handle = c.request(false)?;
    if !ctx.pds.contains_key(&req.handle) {
        return Err(libc::EINVAL);
    }
    let used = ctx.mrs.values().any(|m| m.pd == req.handle)
        || ctx.qps.values().any(|q| q.pd == req.handle)
        || ctx.srqs.values().any(|s| s.pd == req.handle)
        || ctx.wqs.values().any(|w| w.pd == req.handle)
        || ctx.ahs.values().any(|a| a.pd == req.handle)
        || ctx.mws.values().any(|w| w.pd == req.handle);
    if used {
        return Err(libc::EBUSY);
    }
    ctx.pds.remove(&req.handle);
    Ok(())
}

/// `IBV_ACCESS_*` bits a region may ask for (local write through relaxed ordering).
const MR_ACCESS_KNOWN: u32 = 0x1f | (1 << 5) | (1 << 20);
const ACCESS_LOCAL_WRITE: u32 = 1;
const ACCESS_REMOTE_WRITE: u32 = 2;
const ACCESS_REMOTE_ATOMIC: u32 = 8;

pub(crate) fn reg_mr(ctx: &mut Context, n: &mut Numbers, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::RegMr = c.request(true)?;
    if !ctx.pds.contains_key(&req.pd_handle) {
        return Err(libc::EINVAL);
    }
    if req.length == 0 || req.start.checked_add(req.length).is_none() || req.access_flags & !MR_ACCESS_KNOWN != 0 {
        return Err(libc::EINVAL);
    }
    // Remote write and atomics need local write (ib_check_mr_access).
    if req.access_flags & (ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC) != 0
        && req.access_flags & ACCESS_LOCAL_WRITE == 0
    {
        return Err(libc::EINVAL);
    }
    let key = n.mkey();
    let mr = Mr {
        pd: req.pd_handle,
        start: req.start,
        length: req.length,
        iova: req.hca_va,
        access: req.access_flags,
        lkey: key,
        rkey: key,
    };
    let handle = ctx.new_handle();
    c.respond(bytemuck::bytes_of(&abi::RegMrResp { mr_handle: handle, lkey: key, rkey: key }), &[])?;
    ctx.mrs.insert(handle, mr);
    Ok(())
}

fn dereg_mr(ctx: &mut Context, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::Handle = c.request(false)?;
    ctx.mrs.remove(&req.handle).map(|_| ()).ok_or(libc::EINVAL)
}

fn create_cq(
    ctx: &mut Context,
    events: &std::collections::HashMap<i32, EventFd>,
    n: &mut Numbers,
    c: &mut Command<'_>,
) -> Result<(), Errno> {
    let req: abi::CreateCq = c.request(true)?;
    let drv: mlx5_abi::CreateCq = c.udata();
    if req.cqe == 0 || req.cqe > device::limits::MAX_CQE || req.comp_vector >= device::NUM_COMP_VECTORS {
        return Err(libc::EINVAL);
    }
    // libmlx5 sizes its ring as a power of two and passes one less: the ring is cqe + 1.
    let ncqe = req.cqe.checked_add(1).filter(|v| v.is_power_of_two()).ok_or(libc::EINVAL)?;
    if !mlx5::cqe_size_ok(drv.cqe_size) || drv.buf_addr == 0 || !dbrec_ok(drv.db_addr) {
        return Err(libc::EINVAL);
    }
    // Of the flags, only the padding of 128-byte entries (whose CQE is their second half
    // either way). Compression: one format the device reports, 64-byte CQEs.
    let pad_ok = drv.flags == mlx5_abi::CREATE_CQ_FLAG_CQE_128B_PAD && drv.cqe_size == 128;
    if drv.flags != 0 && !pad_ok {
        return Err(libc::EINVAL);
    }
    let compression = match drv.cqe_comp_en {
        0 => None,
        1 if drv.cqe_size == 64
            && u32::from(drv.cqe_comp_res_format) & crate::engine::compress::SUPPORTED_FORMATS != 0 =>
        {
            Some(MiniFormat::from_dv_res_format(drv.cqe_comp_res_format).ok_or(libc::EINVAL)?)
        }
        _ => return Err(libc::EINVAL),
    };
    let channel = match req.comp_channel {
        -1 => None,
        fd if events.get(&fd).is_some_and(|e| e.record_len() == 8) => Some(fd),
        _ => return Err(libc::EINVAL),
    };
    let cq = Cq {
        user_handle: req.user_handle,
        cqn: n.cqn(),
        ncqe,
        cqe_size: drv.cqe_size,
        buf: drv.buf_addr,
        dbrec: drv.db_addr,
        channel,
        comp_vector: req.comp_vector,
        arm_seen: crate::engine::ARM_SENTINEL,
        ..Cq::default()
    };
    let handle = ctx.new_handle();
    // The entry count echoes the request: libmlx5 uses it as its index mask.
    let core = abi::CreateCqResp { cq_handle: handle, cqe: req.cqe };
    let drv_resp = mlx5_abi::CreateCqResp { cqn: cq.cqn, reserved: 0 };
    c.respond(bytemuck::bytes_of(&core), bytemuck::bytes_of(&drv_resp))?;
    // SAFETY: db_addr is the 8-byte doorbell record libmlx5 allocated for this CQ and passed in the udata (checked non-null and aligned); it zeroed it before the command and writes the arm word only when it arms, which it cannot before this returns.
    unsafe { crate::engine::seed_arm_word(drv.db_addr) };
    ctx.cqs.insert(handle, cq);
    if let Some(format) = compression {
        ctx.compressed_cqs.insert(handle, crate::engine::compress::CompressedCq::new(format));
    }
    Ok(())
}

pub(crate) fn destroy_cq(
    ctx: &mut Context,
    events: &mut std::collections::HashMap<i32, EventFd>,
    owner: impl Fn(u32) -> Owner,
    c: &mut Command<'_>,
) -> Result<(), Errno> {
    let req: abi::Destroy = c.request(true)?;
    let cq = *ctx.cqs.get(&req.handle).ok_or(libc::EINVAL)?;
    if ctx.qps.values().any(|q| q.send_cq == req.handle || q.recv_cq == req.handle)
        || ctx.wqs.values().any(|w| w.cq == req.handle)
    {
        return Err(libc::EBUSY);
    }
    let resp =
        abi::DestroyCqResp { comp_events_reported: cq.comp_events_read, async_events_reported: cq.async_events_read };
    c.respond(bytemuck::bytes_of(&resp), &[])?;
    forget_events(events, owner(req.handle));
    ctx.cqs.remove(&req.handle);
    ctx.compressed_cqs.remove(&req.handle);
    Ok(())
}

/// Marks the unread events about `owner` on every event fd as gone.
fn forget_events(events: &mut std::collections::HashMap<i32, EventFd>, owner: Owner) {
    for e in events.values_mut() {
        e.forget(owner);
    }
}

fn create_qp(ctx: &mut Context, n: &mut Numbers, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::CreateQp = c.request(true)?;
    let drv: mlx5_abi::CreateQp = c.udata();
    let qp_type = QpType::from_abi(req.qp_type).ok_or(libc::EOPNOTSUPP)?;
    if !ctx.pds.contains_key(&req.pd_handle)
        || !ctx.cqs.contains_key(&req.send_cq_handle)
        || !ctx.cqs.contains_key(&req.recv_cq_handle)
    {
        return Err(libc::EINVAL);
    }
    let srq = if req.is_srq != 0 {
        Some(ctx.srqs.contains_key(&req.srq_handle).then_some(req.srq_handle).ok_or(libc::EINVAL)?)
    } else {
        None
    };
    use device::limits::*;
    if req.max_send_wr > MAX_QP_WR
        || req.max_recv_wr > MAX_QP_WR
        || req.max_send_sge > MAX_SGE
        || req.max_recv_sge > MAX_SGE
        || req.max_inline_data > MAX_INLINE
    {
        return Err(libc::EINVAL);
    }
    // libmlx5's rings: a power-of-two SQ of 64-byte blocks, a power-of-two RQ of at least
    // 16-byte strides (none with an SRQ), one buffer, a doorbell record.
    let sq_ok = drv.sq_wqe_count == 0 || drv.sq_wqe_count.is_power_of_two();
    let rq_ok = drv.rq_wqe_count == 0 || (drv.rq_wqe_count.is_power_of_two() && (4..=15).contains(&drv.rq_wqe_shift));
    if !sq_ok || !rq_ok || drv.buf_addr == 0 || !dbrec_ok(drv.db_addr) || drv.sq_buf_addr != 0 {
        return Err(libc::EINVAL);
    }
    let wq = Mlx5Wq {
        buf: drv.buf_addr,
        dbrec: drv.db_addr,
        sq_wqe_count: drv.sq_wqe_count,
        rq_wqe_count: drv.rq_wqe_count,
        rq_wqe_shift: drv.rq_wqe_shift,
        flags: drv.flags,
        uidx: drv.uidx,
    };
    let qp = Qp {
        user_handle: req.user_handle,
        qpn: n.qpn(),
        qp_type,
        pd: req.pd_handle,
        send_cq: req.send_cq_handle,
        recv_cq: req.recv_cq_handle,
        srq,
        max_send_wr: req.max_send_wr,
        max_recv_wr: req.max_recv_wr,
        max_send_sge: req.max_send_sge,
        max_recv_sge: req.max_recv_sge,
        max_inline_data: req.max_inline_data,
        sq_sig_all: req.sq_sig_all != 0,
        wq,
        state: QpState::Reset,
        path: QpPath::default(),
        events_read: 0,
        sq_ci: 0,
        rq_ci: 0,
    };
    let handle = ctx.new_handle();
    // The capabilities echo the request: libibverbs hands max_inline_data and the SGE
    // counts back to the application, and libmlx5 keeps its own ring sizes.
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
    // BlueFlame register 0: the plain doorbell at uar[0] + 0x800.
    let drv_resp = mlx5_abi::CreateQpResp::zeroed();
    c.respond(bytemuck::bytes_of(&core), bytemuck::bytes_of(&drv_resp))?;
    ctx.qps.insert(handle, qp);
    Ok(())
}

/// The attributes a transition requires, for `t` (the kernel's `qp_state_table`, for the
/// types and transitions emulated), or `None` for a transition that does not exist.
fn required_attrs(t: QpType, from: QpState, to: QpState) -> Option<u32> {
    use QpState::*;
    Some(match (from, to) {
        (_, Reset) | (_, Err) => 0,
        (Reset, Init) => match t {
            QpType::Ud => qp_attr::PKEY_INDEX | qp_attr::PORT | qp_attr::QKEY,
            _ => qp_attr::PKEY_INDEX | qp_attr::PORT | qp_attr::ACCESS_FLAGS,
        },
        (Init, Init) => 0,
        (Init, Rtr) => match t {
            QpType::Ud => 0,
            QpType::Uc => qp_attr::AV | qp_attr::PATH_MTU | qp_attr::DEST_QPN | qp_attr::RQ_PSN,
            QpType::Rc => {
                qp_attr::AV
                    | qp_attr::PATH_MTU
                    | qp_attr::DEST_QPN
                    | qp_attr::RQ_PSN
                    | qp_attr::MAX_DEST_RD_ATOMIC
                    | qp_attr::MIN_RNR_TIMER
            }
        },
        (Rtr, Rts) => match t {
            QpType::Rc => {
                qp_attr::SQ_PSN | qp_attr::TIMEOUT | qp_attr::RETRY_CNT | qp_attr::RNR_RETRY | qp_attr::MAX_QP_RD_ATOMIC
            }
            _ => qp_attr::SQ_PSN,
        },
        (Rts, Rts) | (Sqd, Rts) | (Sqe, Rts) | (Rts, Sqd) | (Sqd, Sqd) => 0,
        _ => return None,
    })
}

pub(crate) fn modify_qp(ctx: &mut Context, extended: bool, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::ModifyQp = c.request(false)?;
    if extended && c.response != 0 {
        // The extended form's response (`ib_uverbs_ex_modify_qp_resp`): comp_mask 0 and
        // its length.
        let resp: [u32; 2] = [0, 8];
        c.respond(bytemuck::bytes_of(&resp), &[])?;
    }
    let qp = ctx.qps.get_mut(&req.qp_handle).ok_or(libc::EINVAL)?;
    let mask = req.attr_mask;
    let cur = if mask & qp_attr::CUR_STATE != 0 {
        QpState::from_abi(req.cur_qp_state).ok_or(libc::EINVAL)?
    } else {
        qp.state
    };
    let next = if mask & qp_attr::STATE != 0 { QpState::from_abi(req.qp_state).ok_or(libc::EINVAL)? } else { cur };
    let need = required_attrs(qp.qp_type, cur, next).ok_or(libc::EINVAL)?;
    if mask & need != need {
        return Err(libc::EINVAL);
    }
    if mask & qp_attr::PORT != 0 && req.port_num != 1 {
        return Err(libc::EINVAL);
    }
    let p = &mut qp.path;
    let set = |bit: u32| mask & bit != 0;
    if set(qp_attr::PORT) {
        p.port = req.port_num;
    }
    if set(qp_attr::ACCESS_FLAGS) {
        p.access = req.qp_access_flags;
    }
    if set(qp_attr::PKEY_INDEX) {
        p.pkey_index = req.pkey_index;
    }
    if set(qp_attr::QKEY) {
        p.qkey = req.qkey;
    }
    if set(qp_attr::AV) {
        p.dgid = req.dest.dgid;
        p.sgid_index = req.dest.sgid_index;
    }
    if set(qp_attr::PATH_MTU) {
        p.path_mtu = req.path_mtu;
    }
    if set(qp_attr::DEST_QPN) {
        p.dest_qpn = req.dest_qp_num & 0xff_ffff;
    }
    if set(qp_attr::RQ_PSN) {
        p.rq_psn = req.rq_psn;
    }
    if set(qp_attr::SQ_PSN) {
        p.sq_psn = req.sq_psn;
    }
    if set(qp_attr::TIMEOUT) {
        p.timeout = req.timeout;
    }
    if set(qp_attr::RETRY_CNT) {
        p.retry_cnt = req.retry_cnt;
    }
    if set(qp_attr::RNR_RETRY) {
        p.rnr_retry = req.rnr_retry;
    }
    if set(qp_attr::MIN_RNR_TIMER) {
        p.min_rnr_timer = req.min_rnr_timer;
    }
    if set(qp_attr::MAX_QP_RD_ATOMIC) {
        p.max_rd_atomic = req.max_rd_atomic;
    }
    if set(qp_attr::MAX_DEST_RD_ATOMIC) {
        p.max_dest_rd_atomic = req.max_dest_rd_atomic;
    }
    if next == QpState::Reset {
        // libmlx5 zeroes both doorbell records on a reset: the device starts over too.
        qp.sq_ci = 0;
        qp.rq_ci = 0;
    }
    qp.state = next;
    // A QP that can receive needs the device too: requests from other processes come to it.
    if matches!(next, QpState::Rtr | QpState::Rts) {
        crate::engine::start();
    }
    Ok(())
}

pub(crate) fn destroy_qp(
    ctx: &mut Context,
    fd: i32,
    events: &mut std::collections::HashMap<i32, EventFd>,
    c: &mut Command<'_>,
) -> Result<(), Errno> {
    let req: abi::Destroy = c.request(true)?;
    let qp = *ctx.qps.get(&req.handle).ok_or(libc::EINVAL)?;
    c.respond(bytemuck::bytes_of(&abi::DestroyEventsResp { events_reported: qp.events_read }), &[])?;
    forget_events(events, Owner::Qp(fd, req.handle));
    ctx.qps.remove(&req.handle);
    Ok(())
}

fn create_srq(ctx: &mut Context, n: &mut Numbers, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::CreateSrq = c.request(true)?;
    let drv: mlx5_abi::CreateSrq = c.udata();
    if !ctx.pds.contains_key(&req.pd_handle) {
        return Err(libc::EINVAL);
    }
    use device::limits::*;
    if req.max_wr == 0 || req.max_wr > MAX_SRQ_WR || req.max_sge > MAX_SRQ_SGE || req.srq_limit > req.max_wr {
        return Err(libc::EINVAL);
    }
    // libmlx5 sizes the ring as a power of two and passes one less; a signature segment
    // (MLX5_SRQ_SIGNATURE) is not emulated.
    let wqe_cnt = req.max_wr.checked_add(1).filter(|n| n.is_power_of_two()).ok_or(libc::EINVAL)?;
    if drv.buf_addr == 0 || !dbrec_ok(drv.db_addr) || drv.flags != 0 {
        return Err(libc::EINVAL);
    }
    // libmlx5's stride: the next segment and the data segments, at least 32 bytes, a power
    // of two (its max_sge is what that stride holds).
    let stride = (16 + 16 * req.max_sge).max(32).next_power_of_two();
    let srq = Srq {
        user_handle: req.user_handle,
        srqn: n.srqn(),
        pd: req.pd_handle,
        max_wr: req.max_wr,
        max_sge: req.max_sge,
        limit: req.srq_limit,
        buf: drv.buf_addr,
        dbrec: drv.db_addr,
        uidx: drv.uidx,
        events_read: 0,
        wqe_shift: stride.trailing_zeros(),
        wqe_cnt,
        head: 0,
        consumed: 0,
    };
    let handle = ctx.new_handle();
    let core = abi::CreateSrqResp { srq_handle: handle, max_wr: req.max_wr, max_sge: req.max_sge, srqn: srq.srqn };
    let drv_resp = mlx5_abi::CreateSrqResp { srqn: srq.srqn, reserved: 0 };
    c.respond(bytemuck::bytes_of(&core), bytemuck::bytes_of(&drv_resp))?;
    ctx.srqs.insert(handle, srq);
    Ok(())
}

/// `IBV_SRQ_MAX_WR` and `IBV_SRQ_LIMIT`.
const SRQ_MAX_WR: u32 = 1;
const SRQ_LIMIT: u32 = 2;

fn modify_srq(ctx: &mut Context, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: abi::ModifySrq = c.request(false)?;
    let srq = ctx.srqs.get_mut(&req.srq_handle).ok_or(libc::EINVAL)?;
    // Resizing an SRQ is not supported by mlx5.
    if req.attr_mask & SRQ_MAX_WR != 0 || req.attr_mask & !(SRQ_MAX_WR | SRQ_LIMIT) != 0 {
        return Err(libc::EINVAL);
    }
    if req.attr_mask & SRQ_LIMIT != 0 {
        if req.srq_limit > srq.max_wr {
            return Err(libc::EINVAL);
        }
        srq.limit = req.srq_limit;
    }
    Ok(())
}

fn destroy_srq(
    ctx: &mut Context,
    fd: i32,
    events: &mut std::collections::HashMap<i32, EventFd>,
    c: &mut Command<'_>,
) -> Result<(), Errno> {
    let req: abi::Destroy = c.request(true)?;
    let srq = *ctx.srqs.get(&req.handle).ok_or(libc::EINVAL)?;
    if ctx.qps.values().any(|q| q.srq == Some(req.handle)) {
        return Err(libc::EBUSY);
    }
    c.respond(bytemuck::bytes_of(&abi::DestroyEventsResp { events_reported: srq.events_read }), &[])?;
    forget_events(events, Owner::Srq(fd, req.handle));
    ctx.srqs.remove(&req.handle);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A legacy command: header, then `body`; `out_words` of response.
    fn legacy(command: u32, body: &[u8], out_words: u16) -> Vec<u8> {
        let hdr = CmdHdr { command, in_words: ((8 + body.len()) / 4) as u16, out_words };
        let mut b = bytemuck::bytes_of(&hdr).to_vec();
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn a_legacy_write_whose_length_disagrees_with_its_header_is_refused() {
        let mut b = legacy(cmd::ALLOC_PD, &[0; 8], 2);
        assert!(Command::parse(&b).is_ok());
        b.push(0);
        assert_eq!(Command::parse(&b).unwrap_err(), libc::EINVAL);
        assert_eq!(Command::parse(&b[..4]).unwrap_err(), libc::EINVAL);
    }

    #[test]
    fn an_extended_write_counts_core_and_driver_words() {
        let hdr = CmdHdr { command: cmd::QUERY_DEVICE | abi::CMD_FLAG_EXTENDED, in_words: 1, out_words: 38 };
        let ex = ExCmdHdr { response: 0x1000, provider_in_words: 0, provider_out_words: 13, cmd_hdr_reserved: 0 };
        let mut b = bytemuck::bytes_of(&hdr).to_vec();
        b.extend_from_slice(bytemuck::bytes_of(&ex));
        b.extend_from_slice(&[0; 8]);
        let c = Command::parse(&b).unwrap();
        assert!(c.extended);
        assert_eq!((c.number, c.out_len, c.udata_out_len, c.response), (cmd::QUERY_DEVICE, 304, 104, 0x1000));
        b.extend_from_slice(&[0; 8]);
        assert_eq!(Command::parse(&b).unwrap_err(), libc::EINVAL, "a word the header does not count");
    }

    #[test]
    fn a_response_never_writes_past_the_callers_buffer() {
        // A caller whose buffer holds the 8-byte core response and 8 bytes of driver data
        // (an older library's shorter struct), followed by memory that must stay untouched.
        let mut out = [0xeeu8; 32];
        let body = (out.as_mut_ptr() as u64).to_ne_bytes();
        let b = legacy(cmd::GET_CONTEXT, &body, 4);
        let mut c = Command::parse(&b).unwrap();
        let _: abi::ResponseOnly = c.request(true).unwrap();
        let core = abi::GetContextResp { async_fd: 7, num_comp_vectors: 8 };
        c.respond(bytemuck::bytes_of(&core), &[0x11; 72]).unwrap();
        assert_eq!(&out[..8], bytemuck::bytes_of(&core));
        assert_eq!(out[8..16], [0x11; 8]);
        assert_eq!(out[16..], [0xee; 16], "nothing past out_words");
        // A buffer too small for the core response is refused, not overrun.
        let b = legacy(cmd::GET_CONTEXT, &body, 1);
        let mut c = Command::parse(&b).unwrap();
        let _: abi::ResponseOnly = c.request(true).unwrap();
        assert_eq!(c.respond(bytemuck::bytes_of(&core), &[]).unwrap_err(), libc::ENOSPC);
    }

    #[test]
    fn driver_data_shorter_than_the_struct_reads_as_zero() {
        let req: mlx5_abi::AllocUcontextReq = read_zero_extended(&16u32.to_ne_bytes());
        assert_eq!((req.total_num_bfregs, req.max_cqe_version, req.lib_caps), (16, 0, 0));
    }

    #[test]
    fn memory_keys_never_equal_the_scatter_list_terminator() {
        let mut n = Numbers::default();
        for _ in 0..1000 {
            let k = n.mkey();
            assert_ne!(k, 0x100);
            assert_ne!(k & 0xff, 0);
        }
    }

    #[test]
    fn transitions_require_what_the_kernel_requires() {
        use QpState::*;
        let rtr = required_attrs(QpType::Rc, Init, Rtr).unwrap();
        assert_ne!(rtr & qp_attr::DEST_QPN, 0);
        assert_ne!(required_attrs(QpType::Rc, Rtr, Rts).unwrap() & qp_attr::SQ_PSN, 0);
        assert_eq!(required_attrs(QpType::Ud, Init, Rtr), Some(0));
        assert_eq!(required_attrs(QpType::Rc, Reset, Rts), None, "RESET to RTS skips states");
        assert_eq!(required_attrs(QpType::Rc, Rts, Err), Some(0));
    }
}
