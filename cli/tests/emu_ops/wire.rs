//! The emulator's wire between processes, through dvcq's own verbs API on the emulated
//! ConnectX-6 Dx and on the emulated E810: a responder process and a requester process, each with the preload, whose
//! RC QPs are connected to each other. What must cross: WRITE, SEND with immediate and READ
//! with their data, an RNR that runs out (the requester's `rnr_retry` of 1 against a QP with
//! no receive posted) as `RNR_RETRY_EXC_ERR`, a bad rkey as `REM_ACCESS_ERR` checked on the
//! remote side, each followed by a flushed WR, in posting order.

use crate::emu::{self, ep_parse, ep_text, poll_n, put_file, wait_file};
use dvcq::verbs::{Access, QpAttrs, QpType, RecvWr, RemoteAddr, SendOp, SendWr};
use dvcq::{BackendChoice, Context, CqOptions, QpInit, WcOpcode, WcStatus};
use std::path::Path;

const DEVICE: &str = "DVCQ_EMU_WIRE_DEVICE";

#[test]
fn rc_work_and_its_remote_errors_cross_between_two_processes() {
    two_processes("rc_work_and_its_remote_errors_cross_between_two_processes", "mlx5_0");
}

#[test]
fn rc_work_and_its_remote_errors_cross_between_two_processes_on_irdma0() {
    two_processes("rc_work_and_its_remote_errors_cross_between_two_processes_on_irdma0", "irdma0");
}

/// Runs test `test` (this function's caller) as a responder and a requester process on
/// `device`, or, in such a process, plays its role.
fn two_processes(test: &str, device: &str) {
    match emu::role() {
        Some((role, dir)) if role == "responder" => responder(&dir, &std::env::var(DEVICE).unwrap()),
        Some((role, dir)) if role == "requester" => requester(&dir, &std::env::var(DEVICE).unwrap()),
        Some((role, _)) => panic!("no role {role}"),
        None => emu::two_processes(
            module_path!(),
            test,
            "emu-wire",
            &format!("dvcq-emu-wire.{device}"),
            &[(DEVICE, device)],
        ),
    }
}

/// Two QPs: `r1` with a receive posted and a region the requester writes and reads, `r2`
/// with no receive (and a short RNR timer).
fn responder(dir: &Path, device: &str) {
    let ctx = Context::open(device).unwrap();
    let mut cq = ctx.create_cq(CqOptions { backend: BackendChoice::Generic, ..CqOptions::new(64) }).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    mr.write(0, b"preset!!").unwrap();
    let mut r1 = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let mut r2 = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let remote = mr.remote();
    put_file(
        dir,
        "responder",
        &format!(
            "{}\n{}\n{} {}\n",
            ep_text(&r1.endpoint().unwrap()),
            ep_text(&r2.endpoint().unwrap()),
            remote.addr,
            remote.rkey
        ),
    );
    let peer = wait_file(dir, "requester");
    let mut lines = peer.lines();
    r1.connect(&ep_parse(lines.next().unwrap())).unwrap();
    // The RNR timer the requester's one retry waits for: 0.01 ms.
    let short = QpAttrs { min_rnr_timer: 1, ..QpAttrs::default() };
    r2.connect_with(&ep_parse(lines.next().unwrap()), &short).unwrap();
    let sg = [mr.slice(512, 64).unwrap()];
    r1.post_recv(&[RecvWr::new(40, &sg)]).unwrap();
    put_file(dir, "ready", "");
    let got = poll_n(&mut cq, 1, 30);
    assert_eq!((got[0].wr_id, got[0].status, got[0].opcode), (40, WcStatus::Success, WcOpcode::Recv), "{got:?}");
    assert_eq!((got[0].byte_len, got[0].imm_data), (5, 0x1234u32.to_be()), "{got:?}");
    assert_eq!(got[0].qp_num, r1.qpn());
    let mut back = [0u8; 5];
    mr.read(512, &mut back).unwrap();
    assert_eq!(&back, b"hello");
    wait_file(dir, "done");
    let mut written = [0u8; 8];
    mr.read(256, &mut written).unwrap();
    assert_eq!(&written, b"written!", "the requester's WRITE landed");
    println!("emu-wire: responder done");
}

fn requester(dir: &Path, device: &str) {
    let ctx = Context::open(device).unwrap();
    let mut cq = ctx.create_cq(CqOptions { backend: BackendChoice::Direct, ..CqOptions::new(64) }).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut q1 = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let mut q2 = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    put_file(
        dir,
        "requester",
        &format!("{}\n{}\n", ep_text(&q1.endpoint().unwrap()), ep_text(&q2.endpoint().unwrap())),
    );
    let peer = wait_file(dir, "responder");
    let lines: Vec<&str> = peer.lines().collect();
    let (r1, r2) = (ep_parse(lines[0]), ep_parse(lines[1]));
    assert_ne!(r1.qpn >> 17, q1.qpn() >> 17, "the two processes' QPNs carry different slots");
    let w: Vec<u64> = lines[2].split_whitespace().map(|v| v.parse().unwrap()).collect();
    let remote = RemoteAddr { addr: w[0], rkey: w[1] as u32 };
    q1.connect(&r1).unwrap();
    q2.connect_with(&r2, &QpAttrs { rnr_retry: 1, ..QpAttrs::default() }).unwrap();
    wait_file(dir, "ready");

    // WRITE, SEND with immediate and READ, in order on one QP, each with its data.
    mr.write(0, b"written!hello").unwrap();
    let at = |off: u64| RemoteAddr { addr: remote.addr + off, rkey: remote.rkey };
    let (w8, h5, r8) = ([mr.slice(0, 8).unwrap()], [mr.slice(8, 5).unwrap()], [mr.slice(1024, 8).unwrap()]);
    q1.post_send(&[
        SendWr::new(1, SendOp::Write(at(256)), &w8),
        SendWr::new(2, SendOp::SendWithImm(0x1234), &h5),
        SendWr::new(3, SendOp::Read(at(0)), &r8),
    ])
    .unwrap();
    let got: Vec<_> = poll_n(&mut cq, 3, 30).iter().map(|c| (c.wr_id, c.status, c.opcode)).collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::Success, WcOpcode::Send),
            (3, WcStatus::Success, WcOpcode::RdmaRead)
        ]
    );
    let mut read = [0u8; 8];
    mr.read(1024, &mut read).unwrap();
    assert_eq!(&read, b"preset!!", "the READ brought the responder's data");

    // No receive at r2 and one RNR retry: the SEND fails, the next is flushed.
    q2.post_send(&[SendWr::new(4, SendOp::Send, &h5), SendWr::new(5, SendOp::Send, &h5)]).unwrap();
    let got: Vec<_> = poll_n(&mut cq, 2, 30).iter().map(|c| (c.wr_id, c.status)).collect();
    // libirdma before rdma-core v64 has no status for the E810's RNR flush code: it (and
    // dvcq's poller of such a release) reports IBV_WC_FATAL_ERR.
    let old_irdma = device == "irdma0" && dvcq::device::rdma_core_release().is_some_and(|r| r.major < 64);
    let rnr = if old_irdma { WcStatus::FatalErr } else { WcStatus::RnrRetryExcErr };
    assert_eq!(got, [(4, rnr), (5, WcStatus::WrFlushErr)]);

    // A WRITE to a key the responder does not have: refused there, the next flushed.
    let bad = RemoteAddr { addr: remote.addr, rkey: remote.rkey ^ 0x100 };
    q1.post_send(&[SendWr::new(6, SendOp::Write(bad), &w8), SendWr::new(7, SendOp::Write(at(0)), &w8)]).unwrap();
    let got: Vec<_> = poll_n(&mut cq, 2, 30).iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(got, [(6, WcStatus::RemAccessErr), (7, WcStatus::WrFlushErr)]);
    put_file(dir, "done", "");
    println!("emu-wire: requester done");
}
