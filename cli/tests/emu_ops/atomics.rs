//! Atomics on the emulated ConnectX-6 Dx, posted by rdma-core's real libmlx5: fetch-and-add
//! and compare-and-swap update the responder's 8 bytes (kept big-endian, as a ConnectX
//! keeps them), the requester's entry gets the value found, and a region without
//! `IBV_ACCESS_REMOTE_ATOMIC` refuses them with `REM_ACCESS_ERR` (the next WR flushed):
//! between two QPs of one process and between two processes over the emulator's wire.

use crate::emu::{self, ep_parse, ep_text, poll_n, put_file, wait_file};
use dvcq::verbs::{Access, QpType, RemoteAddr, SendOp, SendWr};
use dvcq::{BackendChoice, Context, CqOptions, Mr, Qp, QpInit, WcOpcode, WcStatus};
use std::path::Path;

const X: u64 = 0x0102_0304_0506_0708;
const Y: u64 = 0x1112_1314_1516_1718;
const Z: u64 = 0x2122_2324_2526_2728;

fn read8(mr: &Mr, at: u64) -> [u8; 8] {
    let mut b = [0u8; 8];
    mr.read(at, &mut b).unwrap();
    b
}

/// The requester's part, the same in one process and across two: fetch-and-add of X to
/// zero, compare-and-swap of X for Y (hits), of X for Z (misses), on `target`; the
/// results land in `local` at 0, 8, 16; then an atomic to `plain` (no remote atomic
/// access) fails and flushes the WR after it.
fn atomics(qp: &mut Qp, cq: &mut dvcq::Cq, local: &Mr, target: RemoteAddr, plain: RemoteAddr) {
    local.write(0, &[0xee; 24]).unwrap();
    let ops = [
        SendOp::FetchAdd { remote: target, add: X },
        SendOp::CompareSwap { remote: target, compare: X, swap: Y },
        SendOp::CompareSwap { remote: target, compare: X, swap: Z },
    ];
    for (i, op) in ops.into_iter().enumerate() {
        let sg = [local.slice(i as u64 * 8, 8).unwrap()];
        qp.post_send(&[SendWr::new(i as u64 + 1, op, &sg)]).unwrap();
        let got = poll_n(cq, 1, 30);
        let opcode = if i == 0 { WcOpcode::FetchAdd } else { WcOpcode::CompSwap };
        assert_eq!((got[0].wr_id, got[0].status, got[0].opcode), (i as u64 + 1, WcStatus::Success, opcode));
        assert_eq!(got[0].byte_len, 8);
    }
    assert_eq!(read8(local, 0), [0; 8], "fetch-and-add found 0");
    assert_eq!(read8(local, 8), X.to_be_bytes(), "compare-and-swap found X, big-endian");
    assert_eq!(read8(local, 16), Y.to_be_bytes(), "the missed compare-and-swap found Y");
    let sg = [local.slice(24, 8).unwrap()];
    qp.post_send(&[
        SendWr::new(4, SendOp::FetchAdd { remote: plain, add: 1 }, &sg),
        SendWr::new(5, SendOp::FetchAdd { remote: target, add: 1 }, &sg),
    ])
    .unwrap();
    let got: Vec<_> = poll_n(cq, 2, 30).iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(got, [(4, WcStatus::RemAccessErr), (5, WcStatus::WrFlushErr)]);
}

fn one_process(backend: BackendChoice) {
    let ctx = Context::open("mlx5_0").unwrap();
    let mut cq = ctx.create_cq(CqOptions { backend, ..CqOptions::new(16) }).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let local = pd.reg_mr(4096, Access::ALL).unwrap();
    let target = pd.reg_mr(4096, Access::ALL | Access::REMOTE_ATOMIC).unwrap();
    target.write(64, &[0; 8]).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    atomics(&mut qp, &mut cq, &local, target.remote().at(64), local.remote().at(64));
    assert_eq!(read8(&target, 64), Y.to_be_bytes(), "the responder's value, big-endian");
}

#[test]
fn atomics_between_two_qps_of_one_process() {
    if !emu::in_emulated_child(module_path!(), "atomics_between_two_qps_of_one_process", "emu-atomic") {
        return;
    }
    // ibv_poll_cq, then dvcq's direct poller (where the release has a layout row).
    one_process(BackendChoice::Generic);
    one_process(BackendChoice::Auto);
    println!("emu-atomic: done");
}

#[test]
fn atomics_between_two_processes() {
    match emu::role() {
        Some((role, dir)) if role == "responder" => responder(&dir),
        Some((role, dir)) if role == "requester" => requester(&dir),
        Some((role, _)) => panic!("no role {role}"),
        None => {
            emu::two_processes(module_path!(), "atomics_between_two_processes", "emu-atomic", "dvcq-emu-atomic", &[])
        }
    }
}

/// The responder: an atomic region (its operand at 64 zeroed) and a plain one; after the
/// requester is done, its operand is Y, big-endian.
fn responder(dir: &Path) {
    let ctx = Context::open("mlx5_0").unwrap();
    let cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let target = pd.reg_mr(4096, Access::ALL | Access::REMOTE_ATOMIC).unwrap();
    let plain = pd.reg_mr(4096, Access::ALL).unwrap();
    target.write(64, &[0; 8]).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let (t, p) = (target.remote().at(64), plain.remote().at(64));
    let text = format!("{}\n{} {} {} {}\n", ep_text(&qp.endpoint().unwrap()), t.addr, t.rkey, p.addr, p.rkey);
    put_file(dir, "responder", &text);
    qp.connect(&ep_parse(&wait_file(dir, "requester"))).unwrap();
    put_file(dir, "ready", "");
    wait_file(dir, "done");
    assert_eq!(read8(&target, 64), Y.to_be_bytes(), "the responder's value, big-endian");
    println!("emu-atomic: responder done");
}

fn requester(dir: &Path) {
    let ctx = Context::open("mlx5_0").unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let local = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    put_file(dir, "requester", &ep_text(&qp.endpoint().unwrap()));
    let peer = wait_file(dir, "responder");
    let lines: Vec<&str> = peer.lines().collect();
    let r = ep_parse(lines[0]);
    assert_ne!(r.qpn >> 17, qp.qpn() >> 17, "the two processes' QPNs carry different slots");
    let w: Vec<u64> = lines[1].split_whitespace().map(|v| v.parse().unwrap()).collect();
    qp.connect(&r).unwrap();
    wait_file(dir, "ready");
    let target = RemoteAddr { addr: w[0], rkey: w[1] as u32 };
    let plain = RemoteAddr { addr: w[2], rkey: w[3] as u32 };
    atomics(&mut qp, &mut cq, &local, target, plain);
    put_file(dir, "done", "");
    println!("emu-atomic: requester done");
}
