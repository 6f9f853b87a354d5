//! Receive work queues: the extended CREATE_WQ, MODIFY_WQ and DESTROY_WQ commands
//! (`ibv_create_wq`, `ibv_modify_wq`, `ibv_destroy_wq`). libibverbs tries the ioctl
//! methods first and, on this fd's `ENOTTY`, sends these writes. The checks are the
//! kernel's (`ib_uverbs_ex_create_wq` and the rest in uverbs_cmd.c, mlx5_ib's
//! `prepare_user_rq`, `set_user_rq_size`, `create_user_rq`, `mlx5_ib_modify_wq`) and the
//! firmware's RQ state machine.
//!
//! A WQ holds libmlx5's ring and doorbell record and nothing the device thread executes:
//! packets reach WQs only through RSS or raw packet QPs, which the emulated device does not
//! have, so receives posted to a WQ stay posted until the WQ is destroyed.

use super::{dbrec_ok, forget_events, Command, Errno, Numbers};
use crate::abi::{self, ExCreateWq, ExDestroyWq, ExModifyWq};
use crate::events::{EventFd, Owner};
use crate::objects::{Context, Wq, WqState};
use crate::{device, mlx5_abi};
use std::collections::HashMap;

/// `IB_WQT_RQ`: the only WQ type.
const WQT_RQ: u32 = 0;
/// `IB_WQ_STATE`, `IB_WQ_CUR_STATE`, `IB_WQ_FLAGS`.
const WQ_STATE: u32 = 1 << 0;
const WQ_CUR_STATE: u32 = 1 << 1;
const WQ_FLAGS: u32 = 1 << 2;
/// log2 of the largest receive WQE: the context's `max_rq_desc_sz`, 512 bytes.
const MAX_RQ_WQE_SHIFT: u32 = 9;
/// The smallest receive WQE: one 16-byte data segment.
const MIN_RQ_WQE_SHIFT: u32 = 4;

/// CREATE_WQ: a receive WQ on a PD, completing to a CQ, in the reset state.
pub(super) fn create_wq(ctx: &mut Context, n: &mut Numbers, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: ExCreateWq = c.request(false)?;
    if req.comp_mask != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // The core response through `wqn` is mandatory; a driver response, when asked for,
    // must hold mlx5_ib_create_wq_resp's first two words.
    if c.out_len < size_of::<abi::ExCreateWqResp>() {
        return Err(libc::ENOSPC);
    }
    if c.udata_out_len != 0 && c.udata_out_len < size_of::<mlx5_abi::CreateWqResp>() {
        return Err(libc::EINVAL);
    }
    if !ctx.pds.contains_key(&req.pd_handle) || !ctx.cqs.contains_key(&req.cq_handle) {
        return Err(libc::EINVAL);
    }
    if req.wq_type != WQT_RQ {
        return Err(libc::EINVAL);
    }
    // VLAN stripping, FCS scatter, delay drop and end padding act on packets, and the
    // device reports none of them (raw_packet_caps 0): a kernel refuses each without its
    // capability.
    if req.create_flags != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let drv = driver_request(c)?;
    // Striding RQs: the device reports no striding caps, as a kernel without the capability.
    if drv.comp_mask != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // mlx5_ib checks max_wr against the device's largest WQ (and not max_sge: the ring's
    // entries are libmlx5's to size).
    use device::limits::MAX_QP_WR;
    if req.max_wr > MAX_QP_WR {
        return Err(libc::EINVAL);
    }
    // libmlx5's ring, in one buffer, and a doorbell record. The firmware takes the ring's
    // size as a log: a count that is not a power of two is refused here (mlx5_ib would pass
    // the power of two below it, describing a ring smaller than the one allocated).
    let shape_ok = drv.rq_wqe_count.is_power_of_two()
        && drv.rq_wqe_count <= MAX_QP_WR
        && (MIN_RQ_WQE_SHIFT..=MAX_RQ_WQE_SHIFT).contains(&drv.rq_wqe_shift);
    if !shape_ok || drv.buf_addr == 0 || !dbrec_ok(drv.db_addr) {
        return Err(libc::EINVAL);
    }
    let wq = Wq {
        user_handle: req.user_handle,
        wqn: n.rqn(),
        pd: req.pd_handle,
        cq: req.cq_handle,
        max_wr: req.max_wr,
        max_sge: req.max_sge,
        buf: drv.buf_addr,
        dbrec: drv.db_addr,
        wqe_cnt: drv.rq_wqe_count,
        wqe_shift: drv.rq_wqe_shift,
        uidx: drv.user_index,
        state: WqState::Reset,
        events_read: 0,
    };
    let handle = ctx.new_handle();
    let core = abi::ExCreateWqResp {
        comp_mask: 0,
        response_length: c.out_len.min(size_of::<abi::ExCreateWqResp>()) as u32,
        wq_handle: handle,
        max_wr: req.max_wr,
        max_sge: req.max_sge,
        wqn: wq.wqn,
    };
    // mlx5_ib fills only the length word, and says so in it.
    let drv_resp = mlx5_abi::CreateWqResp { response_length: 4, reserved: 0 };
    c.respond(bytemuck::bytes_of(&core), bytemuck::bytes_of(&drv_resp))?;
    ctx.wqs.insert(handle, wq);
    Ok(())
}

/// The driver's `mlx5_ib_create_wq`: at least through `single_stride_log_num_of_bytes`,
/// anything past the struct zero.
fn driver_request(c: &Command<'_>) -> Result<mlx5_abi::CreateWq, Errno> {
    let bytes = c.udata_bytes();
    if bytes.len() < mlx5_abi::CREATE_WQ_MIN_LEN {
        return Err(libc::EINVAL);
    }
    if bytes.iter().skip(size_of::<mlx5_abi::CreateWq>()).any(|&b| b != 0) {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(c.udata())
}

/// Whether the device's RQ moves from `from` to `to` (MODIFY_RQ's transitions).
fn transition_ok(from: WqState, to: WqState) -> bool {
    use WqState::*;
    matches!((from, to), (Reset, Ready) | (Ready, Ready) | (Ready, Error) | (Ready, Reset) | (Error, Reset))
}

/// MODIFY_WQ: a state change (flags none: the device reports no VLAN stripping or end
/// padding).
pub(super) fn modify_wq(ctx: &mut Context, c: &mut Command<'_>) -> Result<(), Errno> {
    let req: ExModifyWq = c.request(false)?;
    let mask = req.attr_mask;
    if mask == 0 || mask > (WQ_STATE | WQ_CUR_STATE | WQ_FLAGS) {
        return Err(libc::EINVAL);
    }
    let wq = ctx.wqs.get_mut(&req.wq_handle).ok_or(libc::EINVAL)?;
    let cur =
        if mask & WQ_CUR_STATE != 0 { WqState::from_abi(req.curr_wq_state).ok_or(libc::EINVAL)? } else { wq.state };
    let next = if mask & WQ_STATE != 0 { WqState::from_abi(req.wq_state).ok_or(libc::EINVAL)? } else { cur };
    let drv = c.udata_bytes();
    if drv.len() < size_of::<mlx5_abi::ModifyWq>() {
        return Err(libc::EINVAL);
    }
    let drv_req: mlx5_abi::ModifyWq = c.udata();
    if drv_req.comp_mask != 0
        || drv_req.reserved != 0
        || drv.iter().skip(size_of::<mlx5_abi::ModifyWq>()).any(|&b| b != 0)
    {
        return Err(libc::EOPNOTSUPP);
    }
    if mask & WQ_FLAGS != 0 && req.flags_mask != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // The firmware checks the state the command names against the RQ's own.
    if cur != wq.state || !transition_ok(cur, next) {
        return Err(libc::EINVAL);
    }
    wq.state = next;
    Ok(())
}

/// DESTROY_WQ: answers how many async events about the WQ the application read.
pub(super) fn destroy_wq(
    ctx: &mut Context,
    fd: i32,
    events: &mut HashMap<i32, EventFd>,
    c: &mut Command<'_>,
) -> Result<(), Errno> {
    let req: ExDestroyWq = c.request(false)?;
    if req.comp_mask != 0 {
        return Err(libc::EINVAL);
    }
    if c.out_len < size_of::<abi::ExDestroyWqResp>() {
        return Err(libc::ENOSPC);
    }
    let wq = *ctx.wqs.get(&req.wq_handle).ok_or(libc::EINVAL)?;
    let resp = abi::ExDestroyWqResp {
        comp_mask: 0,
        response_length: size_of::<abi::ExDestroyWqResp>() as u32,
        events_reported: wq.events_read,
        reserved: 0,
    };
    c.respond(bytemuck::bytes_of(&resp), &[])?;
    forget_events(events, Owner::Wq(fd, req.wq_handle));
    ctx.wqs.remove(&req.wq_handle);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{cmd, CmdHdr, ExCmdHdr, CMD_FLAG_EXTENDED};
    use crate::objects::{Cq, Pd};
    use bytemuck::{Pod, Zeroable};

    const PD: u32 = 100;
    const CQ: u32 = 200;

    /// A context with one PD and one CQ (handles [`PD`], [`CQ`]).
    fn context() -> Context {
        let mut ctx = Context::default();
        ctx.ready = true;
        ctx.pds.insert(PD, Pd { pdn: 1 });
        let cq = Cq {
            user_handle: 0,
            cqn: 0x400,
            ncqe: 64,
            cqe_size: 64,
            buf: 0x1000,
            dbrec: 0x2000,
            channel: None,
            comp_vector: 0,
            ..Cq::default()
        };
        ctx.cqs.insert(CQ, cq);
        ctx
    }

    /// The response buffer of one command: room for `words` 8-byte words, read back as `T`.
    struct Out(Vec<u64>);

    impl Out {
        fn new(words: usize) -> Out {
            Out(vec![0; words])
        }
        fn ptr(&mut self) -> u64 {
            self.0.as_mut_ptr() as u64
        }
        fn get<T: Pod>(&self) -> T {
            bytemuck::pod_read_unaligned(&bytemuck::cast_slice::<u64, u8>(&self.0)[..size_of::<T>()])
        }
        fn driver<T: Pod>(&self, core_words: usize) -> T {
            let b = bytemuck::cast_slice::<u64, u8>(&self.0);
            bytemuck::pod_read_unaligned(&b[core_words * 8..core_words * 8 + size_of::<T>()])
        }
    }

    /// An extended command: `core` then `udata`, `out`/`drv_out` words of core and driver
    /// response at `response`.
    fn ex(number: u32, core: &[u8], udata: &[u8], response: u64, out: u16, drv_out: u16) -> Vec<u8> {
        let hdr = CmdHdr { command: number | CMD_FLAG_EXTENDED, in_words: (core.len() / 8) as u16, out_words: out };
        let exh = ExCmdHdr {
            response,
            provider_in_words: (udata.len() / 8) as u16,
            provider_out_words: drv_out,
            cmd_hdr_reserved: 0,
        };
        let mut b = bytemuck::bytes_of(&hdr).to_vec();
        b.extend_from_slice(bytemuck::bytes_of(&exh));
        b.extend_from_slice(core);
        b.extend_from_slice(udata);
        b
    }

    fn create_req(max_wr: u32) -> ExCreateWq {
        ExCreateWq {
            wq_type: WQT_RQ,
            user_handle: 0x77,
            pd_handle: PD,
            cq_handle: CQ,
            max_wr,
            max_sge: 1,
            ..Zeroable::zeroed()
        }
    }

    fn ring(count: u32, shift: u32) -> mlx5_abi::CreateWq {
        mlx5_abi::CreateWq {
            buf_addr: 0x10_0000,
            db_addr: 0x20_0000,
            rq_wqe_count: count,
            rq_wqe_shift: shift,
            user_index: 5,
            ..Zeroable::zeroed()
        }
    }

    /// Runs CREATE_WQ; the new WQ's handle and number.
    fn create(ctx: &mut Context, n: &mut Numbers, req: ExCreateWq, drv: &[u8]) -> Result<(u32, u32), Errno> {
        let mut out = Out::new(4);
        let b = ex(abi::ex_cmd::CREATE_WQ, bytemuck::bytes_of(&req), drv, out.ptr(), 3, 1);
        let mut c = Command::parse(&b).unwrap();
        create_wq(ctx, n, &mut c)?;
        let r: abi::ExCreateWqResp = out.get();
        let d: mlx5_abi::CreateWqResp = out.driver(3);
        assert_eq!((r.response_length, r.max_wr, r.max_sge, d.response_length), (24, req.max_wr, req.max_sge, 4));
        Ok((r.wq_handle, r.wqn))
    }

    fn modify(ctx: &mut Context, handle: u32, mask: u32, state: u32, cur: u32) -> Result<(), Errno> {
        let req = ExModifyWq {
            attr_mask: mask,
            wq_handle: handle,
            wq_state: state,
            curr_wq_state: cur,
            ..Zeroable::zeroed()
        };
        let b = ex(abi::ex_cmd::MODIFY_WQ, bytemuck::bytes_of(&req), &[0; 8], 0, 0, 0);
        modify_wq(ctx, &mut Command::parse(&b).unwrap())
    }

    fn destroy(ctx: &mut Context, handle: u32) -> Result<u32, Errno> {
        let mut out = Out::new(2);
        let req = ExDestroyWq { comp_mask: 0, wq_handle: handle };
        let b = ex(abi::ex_cmd::DESTROY_WQ, bytemuck::bytes_of(&req), &[], out.ptr(), 2, 0);
        destroy_wq(ctx, 3, &mut HashMap::new(), &mut Command::parse(&b).unwrap())?;
        let r: abi::ExDestroyWqResp = out.get();
        assert_eq!(r.response_length, 16);
        Ok(r.events_reported)
    }

    #[test]
    fn a_wq_is_created_in_reset_with_its_ring_and_a_number_of_its_own() {
        let (mut ctx, mut n) = (context(), Numbers::default());
        let (h, wqn) = create(&mut ctx, &mut n, create_req(16), bytemuck::bytes_of(&ring(16, 4))).unwrap();
        let wq = ctx.wqs[&h];
        assert_eq!((wq.pd, wq.cq, wq.wqe_cnt, wq.wqe_shift, wq.uidx, wq.state), (PD, CQ, 16, 4, 5, WqState::Reset));
        assert_eq!((wq.buf, wq.dbrec, wq.user_handle), (0x10_0000, 0x20_0000, 0x77));
        let (h2, wqn2) = create(&mut ctx, &mut n, create_req(16), bytemuck::bytes_of(&ring(16, 4))).unwrap();
        assert_ne!(h, h2);
        assert_eq!(wqn2, wqn + 1);
        // RQ numbers are a space of their own: QPs and SRQs made in between take none.
        let (_, _) = (n.srqn(), n.cqn());
        let (_, wqn3) = create(&mut ctx, &mut n, create_req(16), bytemuck::bytes_of(&ring(16, 4))).unwrap();
        assert_eq!(wqn3, wqn + 2);
    }

    #[test]
    fn create_refuses_bad_handles_types_flags_and_rings() {
        let (mut ctx, mut n) = (context(), Numbers::default());
        let good = ring(16, 4);
        let mut run =
            |req: ExCreateWq, drv: mlx5_abi::CreateWq| create(&mut ctx, &mut n, req, bytemuck::bytes_of(&drv));
        assert_eq!(run(ExCreateWq { pd_handle: 9, ..create_req(16) }, good), Err(libc::EINVAL), "no such PD");
        assert_eq!(run(ExCreateWq { cq_handle: 9, ..create_req(16) }, good), Err(libc::EINVAL), "no such CQ");
        assert_eq!(run(ExCreateWq { wq_type: 1, ..create_req(16) }, good), Err(libc::EINVAL), "not an RQ");
        assert_eq!(run(ExCreateWq { comp_mask: 1, ..create_req(16) }, good), Err(libc::EOPNOTSUPP));
        assert_eq!(
            run(ExCreateWq { create_flags: 1, ..create_req(16) }, good),
            Err(libc::EOPNOTSUPP),
            "VLAN stripping"
        );
        assert_eq!(run(create_req(32769), ring(32768, 4)), Err(libc::EINVAL), "max_wr past max_qp_wr");
        assert_eq!(run(create_req(16), ring(0, 4)), Err(libc::EINVAL), "no entries");
        assert_eq!(run(create_req(16), ring(24, 4)), Err(libc::EINVAL), "not a power of two");
        assert_eq!(run(create_req(16), ring(65536, 4)), Err(libc::EINVAL), "past the largest WQ");
        assert_eq!(run(create_req(16), ring(16, 3)), Err(libc::EINVAL), "entry below a data segment");
        assert_eq!(run(create_req(16), ring(16, 10)), Err(libc::EINVAL), "entry past max_rq_desc_sz");
        assert_eq!(run(create_req(16), mlx5_abi::CreateWq { buf_addr: 0, ..good }), Err(libc::EINVAL));
        assert_eq!(run(create_req(16), mlx5_abi::CreateWq { db_addr: 0x20_0002, ..good }), Err(libc::EINVAL));
        let striding = mlx5_abi::CreateWq { comp_mask: mlx5_abi::CREATE_WQ_STRIDING_RQ, ..good };
        assert_eq!(run(create_req(16), striding), Err(libc::EOPNOTSUPP), "no striding RQ caps");
        assert!(ctx.wqs.is_empty());
        // A driver request shorter than the kernel's minimum, and one with unknown nonzero
        // bytes past the struct.
        let short = &bytemuck::bytes_of(&good)[..32];
        assert_eq!(create(&mut ctx, &mut n, create_req(16), short), Err(libc::EINVAL));
        let mut long = bytemuck::bytes_of(&good).to_vec();
        long.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(create(&mut ctx, &mut n, create_req(16), &long), Err(libc::EOPNOTSUPP));
        long.truncate(size_of::<mlx5_abi::CreateWq>());
        long.extend_from_slice(&[0; 8]);
        assert!(create(&mut ctx, &mut n, create_req(16), &long).is_ok(), "zeros past the struct are fine");
        // The signature flag is the kernel's to take.
        let sig = mlx5_abi::CreateWq { flags: mlx5_abi::WQ_FLAG_SIGNATURE, rq_wqe_shift: 5, ..good };
        assert!(create(&mut ctx, &mut n, create_req(16), bytemuck::bytes_of(&sig)).is_ok());
    }

    #[test]
    fn a_response_too_short_for_the_wq_number_is_refused() {
        let (mut ctx, mut n) = (context(), Numbers::default());
        let mut out = Out::new(4);
        let req = create_req(16);
        let b = ex(abi::ex_cmd::CREATE_WQ, bytemuck::bytes_of(&req), bytemuck::bytes_of(&ring(16, 4)), out.ptr(), 2, 1);
        assert_eq!(create_wq(&mut ctx, &mut n, &mut Command::parse(&b).unwrap()), Err(libc::ENOSPC));
        assert!(ctx.wqs.is_empty());
    }

    #[test]
    fn modify_follows_the_rq_state_machine() {
        let (mut ctx, mut n) = (context(), Numbers::default());
        let (h, _) = create(&mut ctx, &mut n, create_req(16), bytemuck::bytes_of(&ring(16, 4))).unwrap();
        let state = |ctx: &Context| ctx.wqs[&h].state;
        assert_eq!(modify(&mut ctx, h, WQ_STATE, 2, 0), Err(libc::EINVAL), "RESET to ERR");
        assert_eq!(modify(&mut ctx, h, WQ_STATE | WQ_CUR_STATE, 1, 1), Err(libc::EINVAL), "current state named wrong");
        assert_eq!(modify(&mut ctx, h, 0, 1, 0), Err(libc::EINVAL), "empty mask");
        assert_eq!(modify(&mut ctx, h, 8 | WQ_STATE, 1, 0), Err(libc::EINVAL), "unknown mask bit");
        assert_eq!(modify(&mut ctx, h, WQ_STATE, 3, 0), Err(libc::EINVAL), "no such state");
        assert_eq!(modify(&mut ctx, h + 1, WQ_STATE, 1, 0), Err(libc::EINVAL), "no such WQ");
        assert_eq!(state(&ctx), WqState::Reset);
        modify(&mut ctx, h, WQ_STATE, 1, 0).unwrap();
        assert_eq!(state(&ctx), WqState::Ready);
        modify(&mut ctx, h, WQ_STATE | WQ_CUR_STATE, 2, 1).unwrap();
        assert_eq!(state(&ctx), WqState::Error);
        assert_eq!(modify(&mut ctx, h, WQ_STATE, 1, 0), Err(libc::EINVAL), "ERR to RDY");
        modify(&mut ctx, h, WQ_STATE, 0, 0).unwrap();
        assert_eq!(state(&ctx), WqState::Reset);
        // Flags the device has no capability for.
        let req = ExModifyWq { attr_mask: WQ_FLAGS, wq_handle: h, flags: 1, flags_mask: 1, ..Zeroable::zeroed() };
        let b = ex(abi::ex_cmd::MODIFY_WQ, bytemuck::bytes_of(&req), &[0; 8], 0, 0, 0);
        assert_eq!(modify_wq(&mut ctx, &mut Command::parse(&b).unwrap()), Err(libc::EOPNOTSUPP));
        // mlx5_ib_modify_wq's driver data: present, and its words zero.
        let req = ExModifyWq { attr_mask: WQ_STATE, wq_handle: h, wq_state: 1, ..Zeroable::zeroed() };
        let b = ex(abi::ex_cmd::MODIFY_WQ, bytemuck::bytes_of(&req), &[], 0, 0, 0);
        assert_eq!(modify_wq(&mut ctx, &mut Command::parse(&b).unwrap()), Err(libc::EINVAL));
        let b = ex(abi::ex_cmd::MODIFY_WQ, bytemuck::bytes_of(&req), &[1, 0, 0, 0, 0, 0, 0, 0], 0, 0, 0);
        assert_eq!(modify_wq(&mut ctx, &mut Command::parse(&b).unwrap()), Err(libc::EOPNOTSUPP));
        assert_eq!(state(&ctx), WqState::Reset);
    }

    #[test]
    fn destroy_answers_events_once_and_frees_the_cq_and_pd() {
        let (mut ctx, mut n) = (context(), Numbers::default());
        let (h, _) = create(&mut ctx, &mut n, create_req(16), bytemuck::bytes_of(&ring(16, 4))).unwrap();
        ctx.wqs.get_mut(&h).unwrap().events_read = 2;
        // The CQ and PD are the WQ's while it lives (their usecnt in the kernel).
        let mut out = Out::new(1);
        let d = abi::Destroy { response: out.ptr(), handle: CQ, reserved: 0 };
        let legacy = |number: u32, body: &[u8], out_words: u16| {
            let hdr = CmdHdr { command: number, in_words: ((8 + body.len()) / 4) as u16, out_words };
            let mut b = bytemuck::bytes_of(&hdr).to_vec();
            b.extend_from_slice(body);
            b
        };
        let b = legacy(cmd::DESTROY_CQ, bytemuck::bytes_of(&d), 2);
        let owner = |h| Owner::Cq(3, h);
        let destroy_cq = |ctx: &mut Context| {
            super::super::destroy_cq(ctx, &mut HashMap::new(), owner, &mut Command::parse(&b).unwrap())
        };
        assert_eq!(destroy_cq(&mut ctx), Err(libc::EBUSY));
        let p = legacy(cmd::DEALLOC_PD, bytemuck::bytes_of(&abi::Handle { handle: PD }), 0);
        let dealloc = |ctx: &mut Context| super::super::dealloc_pd(ctx, &mut Command::parse(&p).unwrap());
        assert_eq!(dealloc(&mut ctx), Err(libc::EBUSY));
        // Bad requests leave it.
        let req = ExDestroyWq { comp_mask: 1, wq_handle: h };
        let b2 = ex(abi::ex_cmd::DESTROY_WQ, bytemuck::bytes_of(&req), &[], out.ptr(), 2, 0);
        assert_eq!(destroy_wq(&mut ctx, 3, &mut HashMap::new(), &mut Command::parse(&b2).unwrap()), Err(libc::EINVAL));
        assert_eq!(destroy(&mut ctx, h + 1), Err(libc::EINVAL));
        assert_eq!(destroy(&mut ctx, h), Ok(2));
        assert_eq!(destroy(&mut ctx, h), Err(libc::EINVAL), "destroyed twice");
        assert_eq!(destroy_cq(&mut ctx), Ok(()));
        assert_eq!(dealloc(&mut ctx), Ok(()));
    }
}
