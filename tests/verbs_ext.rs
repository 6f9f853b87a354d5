//! The verbs a workload needs beyond SEND, WRITE and READ, on both models: atomics,
//! connect attributes with RNR retry exhaustion, UC QPs, and the builder helpers.

use dvcq::verbs::{Access, QpAttrs, QpCaps, QpType, RecvWr, SendOp, SendWr};
use dvcq::{Completion, Context, Cq, CqOptions, Error, Mr, PostRefusal, Qp, QpInit, WcOpcode, WcStatus};

const MODELS: [&str; 2] = ["model-mlx5", "model-e810"];

fn poll(cq: &mut Cq, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    let mut wcs = [Completion::default(); 16];
    for _ in 0..1000 {
        let k = cq.poll_count(&mut wcs);
        out.extend_from_slice(&wcs[..k]);
        if out.len() >= n {
            break;
        }
    }
    out
}

/// Two QPs of `qp_type` on one CQ, connected to each other with `attrs`.
fn pair(ctx: &Context, pd: &dvcq::Pd, cq: &Cq, qp_type: QpType, sig_all: bool, attrs: &QpAttrs) -> (Qp, Qp) {
    let caps = QpCaps { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 64 };
    let init = QpInit { caps, sq_sig_all: sig_all, ..QpInit::new(qp_type, cq) };
    let mut a = pd.create_qp(&init).unwrap_or_else(|e| panic!("{}: create_qp: {e}", ctx.name()));
    let mut b = pd.create_qp(&init).unwrap();
    let (ea, eb) = (a.endpoint().unwrap(), b.endpoint().unwrap());
    a.connect_with(&eb, attrs).unwrap();
    b.connect_with(&ea, attrs).unwrap();
    (a, b)
}

fn u64_at(mr: &Mr, offset: u64) -> [u8; 8] {
    let mut b = [0u8; 8];
    mr.read(offset, &mut b).unwrap();
    b
}

fn refusal_of(e: &Error) -> PostRefusal {
    match e {
        Error::Post { reason, .. } => *reason,
        other => panic!("not a post error: {other}"),
    }
}

/// Fetch-and-add and compare-and-swap on model-mlx5 run at the responder and bring the
/// value found back, with ConnectX's completions (`IBV_WC_FETCH_ADD`, `IBV_WC_COMP_SWAP`,
/// `byte_len` 8); the value in memory is big-endian, as ConnectX keeps it. With and
/// without requester scatter-to-CQE (every send signaled makes the response go inside the
/// CQE, which the poll copies into the list).
#[test]
fn atomics_run_at_the_responder_and_return_the_old_value() {
    for sig_all in [false, true] {
        let ctx = Context::open("model-mlx5").unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(32)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let (mut a, _b) = pair(&ctx, &pd, &cq, QpType::Rc, sig_all, &QpAttrs::default());
        let local = pd.reg_mr(4096, Access::ALL).unwrap();
        let target = pd.reg_mr(4096, Access::ALL | Access::REMOTE_ATOMIC).unwrap();
        target.write(64, &40u64.to_be_bytes()).unwrap();
        let at = target.remote().at(64);
        let fa = SendOp::FetchAdd { remote: at, add: 2 };
        let hit = SendOp::CompareSwap { remote: at, compare: 42, swap: 7 };
        let miss = SendOp::CompareSwap { remote: at, compare: 42, swap: 9 };
        let sg = [local.slice(0, 8).unwrap(), local.slice(8, 8).unwrap(), local.slice(16, 8).unwrap()];
        a.post_send(&[SendWr::new(1, fa, &sg[..1]), SendWr::new(2, hit, &sg[1..2]), SendWr::new(3, miss, &sg[2..3])])
            .unwrap();
        let wcs = poll(&mut cq, 3);
        let got: Vec<_> = wcs.iter().map(|c| (c.wr_id, c.status, c.opcode, c.byte_len)).collect();
        assert_eq!(
            got,
            [
                (1, WcStatus::Success, WcOpcode::FetchAdd, 8),
                (2, WcStatus::Success, WcOpcode::CompSwap, 8),
                (3, WcStatus::Success, WcOpcode::CompSwap, 8),
            ],
            "sq_sig_all {sig_all}"
        );
        // Each list got the value before its operation; the swap that missed left 7.
        assert_eq!(u64_at(&local, 0), 40u64.to_be_bytes(), "sq_sig_all {sig_all}");
        assert_eq!(u64_at(&local, 8), 42u64.to_be_bytes());
        assert_eq!(u64_at(&local, 16), 7u64.to_be_bytes());
        assert_eq!(u64_at(&target, 64), 7u64.to_be_bytes());
    }
}

/// An atomic on a region without `REMOTE_ATOMIC` is a remote access error; one at an
/// address that is not 8-byte aligned an invalid request; the memory is untouched and the
/// requester's QP goes to error, flushing what follows.
#[test]
fn atomics_without_the_right_or_alignment_fail_as_hardware_does() {
    for (offset, access, want) in
        [(64, Access::ALL, WcStatus::RemAccessErr), (68, Access::ALL | Access::REMOTE_ATOMIC, WcStatus::RemInvReqErr)]
    {
        let ctx = Context::open("model-mlx5").unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(32)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let (mut a, _b) = pair(&ctx, &pd, &cq, QpType::Rc, false, &QpAttrs::default());
        let local = pd.reg_mr(4096, Access::ALL).unwrap();
        let target = pd.reg_mr(4096, access).unwrap();
        target.write(64, &[5; 8]).unwrap();
        let sg = [local.slice(0, 8).unwrap()];
        let op = SendOp::FetchAdd { remote: target.remote().at(offset), add: 1 };
        a.post_send(&[SendWr::new(1, op, &sg), SendWr::new(2, SendOp::Send, &sg)]).unwrap();
        let got: Vec<_> = poll(&mut cq, 2).iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(got, [(1, want), (2, WcStatus::WrFlushErr)], "offset {offset}");
        assert_eq!(u64_at(&target, 64), [5; 8]);
    }
}

/// Atomics are refused at post where the transport or device has none: on UD and UC
/// (mlx5), and on the E810, whose rdma-core provider has no atomic opcode (EINVAL).
#[test]
fn atomics_are_refused_where_the_transport_or_device_has_none() {
    let cases = [("model-mlx5", QpType::Ud), ("model-mlx5", QpType::Uc), ("model-e810", QpType::Rc)];
    for (device, qp_type) in cases {
        let ctx = Context::open(device).unwrap();
        let cq = ctx.create_cq(CqOptions::new(32)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let (mut a, _b) = pair(&ctx, &pd, &cq, qp_type, false, &QpAttrs::default());
        let mr = pd.reg_mr(4096, Access::ALL | Access::REMOTE_ATOMIC).unwrap();
        let sg = [mr.slice(0, 8).unwrap()];
        let op = SendOp::CompareSwap { remote: mr.remote().at(64), compare: 0, swap: 1 };
        let e = a.post_send(&[SendWr::new(1, op, &sg)]).unwrap_err();
        assert_eq!(refusal_of(&e), PostRefusal::UnsupportedOperation, "{device} {qp_type:?}: {e}");
    }
}

/// A SEND that finds no receive with `rnr_retry` below 7 completes with
/// `IBV_WC_RNR_RETRY_EXC_ERR` once its retries are spent, and the QP flushes the rest; with
/// 7 (the default) it waits for the receive.
#[test]
fn a_send_with_no_receive_ends_in_rnr_retry_exceeded_unless_retries_are_endless() {
    for device in MODELS {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(32)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.reg_mr(4096, Access::ALL).unwrap();
        let sg = [mr.slice(0, 16).unwrap()];
        let attrs = QpAttrs::default().rnr_retry(3);
        let (mut a, b) = pair(&ctx, &pd, &cq, QpType::Rc, false, &attrs);
        assert_eq!(attrs.rnr_retry, 3);
        a.post_send(&[SendWr::new(1, SendOp::Send, &sg), SendWr::new(2, SendOp::Send, &sg)]).unwrap();
        let got: Vec<_> = poll(&mut cq, 2).iter().map(|c| (c.wr_id, c.status, c.qp_num)).collect();
        assert_eq!(got, [(1, WcStatus::RnrRetryExcErr, a.qpn()), (2, WcStatus::WrFlushErr, a.qpn())], "{device}");
        drop(b);

        // Endless retries: the SEND waits, then lands once the receive is posted.
        let (mut a, mut b) = pair(&ctx, &pd, &cq, QpType::Rc, false, &QpAttrs::default());
        a.post_send(&[SendWr::new(3, SendOp::Send, &sg)]).unwrap();
        assert!(poll(&mut cq, 1).is_empty(), "{device}: the SEND waits for a receive");
        b.post_recv(&[RecvWr::new(4, &[mr.slice(1024, 64).unwrap()])]).unwrap();
        let mut got: Vec<_> = poll(&mut cq, 2).iter().map(|c| (c.wr_id, c.status)).collect();
        got.sort_by_key(|g| g.0);
        assert_eq!(got, [(3, WcStatus::Success), (4, WcStatus::Success)], "{device}");
    }
}

/// Attributes out of range are refused before anything reaches the device, naming the
/// attribute (the models' port MTU is 4096, the largest: any valid path MTU fits).
#[test]
fn connect_attributes_out_of_range_are_refused_by_name() {
    let ctx = Context::open("model-mlx5").unwrap();
    let cq = ctx.create_cq(CqOptions::new(8)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut a = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let ea = a.endpoint().unwrap();
    for (attrs, name) in [
        (QpAttrs { rnr_retry: 8, ..QpAttrs::default() }, "rnr_retry = 8"),
        (QpAttrs { retry_cnt: 9, ..QpAttrs::default() }, "retry_cnt = 9"),
        (QpAttrs { timeout: 32, ..QpAttrs::default() }, "timeout = 32"),
        (QpAttrs { max_rd_atomic: 0, ..QpAttrs::default() }, "max_rd_atomic = 0"),
        (QpAttrs { path_mtu: Some(1500), ..QpAttrs::default() }, "path_mtu = 1500"),
    ] {
        let e = a.connect_with(&ea, &attrs).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }) && e.to_string().contains(name), "{e}");
    }
    let ok = QpAttrs { path_mtu: Some(1024), min_rnr_timer: 1, timeout: 0, ..QpAttrs::default() };
    a.connect_with(&ea, &ok).unwrap();
}

/// UC on model-mlx5: SEND and WRITE with immediate arrive as on RC; a SEND with no receive
/// is dropped at the responder while the requester completes it (no RNR, no error); READ
/// is refused at post. The E810 makes no UC QP.
#[test]
fn uc_sends_and_writes_and_drops_what_has_no_receive() {
    let ctx = Context::open("model-mlx5").unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(32)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let (mut a, mut b) = pair(&ctx, &pd, &cq, QpType::Uc, false, &QpAttrs::default().rnr_retry(0));
    assert_eq!(a.qp_type().name(), "UC");
    let mr = pd.reg_mr(8192, Access::ALL).unwrap();
    mr.write(0, b"dropped!").unwrap();
    mr.write(8, b"arrives!").unwrap();
    // No receive: dropped, and the requester completes it successfully.
    a.post_send(&[SendWr::new(1, SendOp::Send, &[mr.slice(0, 8).unwrap()])]).unwrap();
    let got: Vec<_> = poll(&mut cq, 2).iter().map(|c| (c.wr_id, c.status, c.qp_num)).collect();
    assert_eq!(got, [(1, WcStatus::Success, a.qpn())]);
    // The next SEND takes the receive posted now, not the dropped one's bytes.
    b.post_recv(&[RecvWr::new(10, &[mr.slice(4096, 64).unwrap()])]).unwrap();
    a.post_send(&[SendWr::new(2, SendOp::Send, &[mr.slice(8, 8).unwrap()])]).unwrap();
    let mut got: Vec<_> = poll(&mut cq, 2).iter().map(|c| (c.wr_id, c.status, c.byte_len)).collect();
    got.sort_by_key(|g| g.0);
    assert_eq!(got[1], (10, WcStatus::Success, 8));
    let mut buf = [0u8; 8];
    mr.read(4096, &mut buf).unwrap();
    assert_eq!(&buf, b"arrives!");
    // WRITE with immediate: the data lands and a receive completes with the immediate.
    b.post_recv(&[RecvWr::new(11, &[mr.slice(4096, 64).unwrap()])]).unwrap();
    let w = SendOp::WriteWithImm(mr.remote().at(6000), 0x77);
    a.post_send(&[SendWr::new(3, w, &[mr.slice(0, 8).unwrap()])]).unwrap();
    let wcs = poll(&mut cq, 2);
    let recv = wcs.iter().find(|c| c.wr_id == 11).expect("the WRITE_WITH_IMM's receive");
    assert_eq!(
        (recv.status, recv.opcode, u32::from_be(recv.imm_data)),
        (WcStatus::Success, WcOpcode::RecvRdmaWithImm, 0x77)
    );
    mr.read(6000, &mut buf).unwrap();
    assert_eq!(&buf, b"dropped!");
    // No READ on UC.
    let e = a.post_send(&[SendWr::new(4, SendOp::Read(mr.remote().at(0)), &[mr.slice(0, 8).unwrap()])]).unwrap_err();
    assert_eq!(refusal_of(&e), PostRefusal::UnsupportedOperation, "{e}");

    let e810 = Context::open("model-e810").unwrap();
    let cq = e810.create_cq(CqOptions::new(8)).unwrap();
    let e = e810.alloc_pd().unwrap().create_qp(&QpInit::new(QpType::Uc, &cq)).unwrap_err();
    assert!(e.to_string().contains("UC"), "{e}");
}

/// The builder helpers set what they say: inline data is taken at post (the buffer may
/// change afterwards), a solicited SEND arrives solicited, `Access` combines with `|`.
#[test]
fn builders_set_inline_solicited_and_access_rights() {
    assert_eq!(Access::LOCAL_WRITE | Access::REMOTE_ATOMIC, Access::LOCAL_WRITE.union(Access::REMOTE_ATOMIC));
    assert_eq!(Access::REMOTE_ATOMIC.bits(), 8);
    let mut acc = Access::LOCAL_WRITE;
    acc |= Access::REMOTE_READ;
    assert!(acc.contains(Access::REMOTE_READ) && acc.contains(Access::LOCAL_WRITE));
    assert_eq!(QpCaps::default().max_send_wr, 64);
    for device in MODELS {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(32)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let (mut a, mut b) = pair(&ctx, &pd, &cq, QpType::Rc, false, &QpAttrs::default());
        let mr = pd.reg_mr(8192, Access::ALL).unwrap();
        b.post_recv(&[RecvWr::new(10, &[mr.slice(4096, 64).unwrap()])]).unwrap();
        mr.write(0, b"inline").unwrap();
        let sg = [mr.slice(0, 6).unwrap()];
        let wr = SendWr::new(1, SendOp::Send, &sg).inline(true).solicited(true);
        assert!(wr.inline && wr.solicited);
        a.post_send(&[wr]).unwrap();
        let wcs = poll(&mut cq, 2);
        let recv = wcs.iter().find(|c| c.wr_id == 10).expect("the receive");
        assert_eq!((recv.status, recv.byte_len), (WcStatus::Success, 6), "{device}");
        let mut buf = [0u8; 6];
        mr.read(4096, &mut buf).unwrap();
        assert_eq!(&buf, b"inline", "{device}");
    }
}

/// A region over the caller's buffer (a vector, a boxed slice, an anonymous mapping as
/// hugepages come) carries traffic like any other, and gives the buffer back with what
/// the device wrote; while a queue holds the region (a receive was posted into it) the
/// buffer stays with it.
#[test]
fn caller_buffers_register_carry_traffic_and_come_back() {
    for device in MODELS {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(32)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let (mut a, mut b) = pair(&ctx, &pd, &cq, QpType::Rc, false, &QpAttrs::default());
        let src = pd.reg_mr_buffer(b"from a vec".to_vec(), Access::ALL).unwrap();
        let dst = pd.reg_mr_buffer(vec![0u8; 64].into_boxed_slice(), Access::ALL).unwrap();
        let mut map = memmap2::MmapMut::map_anon(4096).unwrap();
        map[..4].copy_from_slice(b"mmap");
        let mapped = pd.reg_mr_buffer(map, Access::ALL).unwrap();
        assert_eq!((src.len(), dst.len(), mapped.len()), (10, 64, 4096));
        let mut seen = [0u8; 4];
        mapped.read(0, &mut seen).unwrap();
        assert_eq!(&seen, b"mmap", "{device}: the buffer's bytes are the region's");

        // A WRITE from the vector's region into the boxed slice's, a SEND into the mapping.
        let w = SendOp::Write(dst.remote().at(8));
        a.post_send(&[SendWr::new(1, w, &[src.slice(0, 10).unwrap()])]).unwrap();
        b.post_recv(&[RecvWr::new(2, &[mapped.slice(100, 64).unwrap()])]).unwrap();
        a.post_send(&[SendWr::new(3, SendOp::Send, &[src.slice(5, 5).unwrap()])]).unwrap();
        let got: Vec<_> = poll(&mut cq, 3).iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(got.len(), 3, "{device}: {got:?}");
        assert!(got.iter().all(|g| g.1 == WcStatus::Success), "{device}: {got:?}");

        let boxed: Box<[u8]> = dst.into_buffer().unwrap();
        assert_eq!(&boxed[8..18], b"from a vec", "{device}");
        // The receive's queue holds the mapping's region: it does not come back yet.
        let mapped = mapped.into_buffer::<memmap2::MmapMut>().unwrap_err();
        // Nor does a buffer of another type.
        let src = src.into_buffer::<Box<[u8]>>().unwrap_err();
        let v: Vec<u8> = src.into_buffer().unwrap();
        assert_eq!(v, b"from a vec");
        // Once the QP that holds it is gone, it comes back with the SEND's bytes.
        drop(b);
        let map: memmap2::MmapMut = mapped.into_buffer().unwrap();
        assert_eq!(&map[..4], b"mmap", "{device}");
        assert_eq!(&map[100..105], b"a vec", "{device}");
        assert!(pd.reg_mr_buffer(Vec::new(), Access::ALL).is_err(), "{device}: an empty buffer");
    }
}

/// A model has no rdma-core objects: every `as_raw` is `None` there.
#[test]
fn as_raw_is_none_on_the_models() {
    for device in MODELS {
        let ctx = Context::open(device).unwrap();
        let cq = ctx.create_cq(CqOptions::new(8)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.reg_mr(64, Access::ALL).unwrap();
        let qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
        let srq = pd.create_srq(4, 1).ok();
        assert!(ctx.as_raw().is_none() && pd.as_raw().is_none() && mr.as_raw().is_none(), "{device}");
        assert!(cq.as_raw().is_none() && qp.as_raw().is_none(), "{device}");
        assert!(srq.is_none_or(|s| s.as_raw().is_none()), "{device}");
    }
}
