//! The verbs lifetimes held by ownership, as one workload any device runs: a context, PD,
//! CQ and QP dropped in any order by the application, and what is still held keeps working
//! (every object holds what it depends on, so the device objects are destroyed in the order
//! verbs requires). Included with `#[path]` by the model test and the real-device test.

use dvcq::verbs::{Access, QpType, SendOp, SendWr};
use dvcq::{Completion, Context, CqOptions, QpInit};

/// One RC loopback WRITE after dropping `drop_first` (`nothing`, `context`, `pd`, or
/// `context and pd`), then the CQ before the QP that completes on it.
pub fn one_write(device: &str, drop_first: &str) {
    let ctx = Context::open(device).unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    match drop_first {
        "context" => drop(ctx),
        "pd" => drop(pd),
        "context and pd" => {
            drop(ctx);
            drop(pd);
        }
        _ => {}
    }
    let sg = [mr.slice(0, 8).unwrap()];
    qp.post_send(&[SendWr::new(7, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
    let mut wcs = [Completion::default(); 4];
    // A real device completes asynchronously (rxe in an emulated VM slowly): poll for a while.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let n = std::iter::repeat_with(|| cq.poll_count(&mut wcs))
        .find(|&n| n > 0 || std::time::Instant::now() > deadline)
        .unwrap_or(0);
    assert_eq!((n, wcs[0].wr_id, wcs[0].is_ok()), (1, 7, true), "{device}, {drop_first} dropped first");
    // The CQ may go before the QP that completes on it: the QP keeps it alive.
    drop(cq);
    qp.post_send(&[SendWr::new(8, SendOp::Write(mr.remote().at(64)), &sg)]).unwrap();
    drop(qp);
    drop(mr);
}

/// Polls `cq` for one completion (a real device completes asynchronously).
fn one(cq: &mut dvcq::Cq) -> Completion {
    let mut wcs = [Completion::default(); 1];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while cq.poll_count(&mut wcs) == 0 {
        assert!(std::time::Instant::now() < deadline, "no completion within 10 s");
    }
    wcs[0]
}

/// A memory window bound over a region keeps the region registered: the application drops
/// the `Mr` first, and a write through the window still lands in live memory (read back
/// through the window); then the window goes, and the region with it.
pub fn window_outlives_its_region(device: &str) {
    let ctx = Context::open(device).unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let local = pd.reg_mr(4096, Access::ALL).unwrap();
    let target = pd.reg_mr(4096, Access::ALL.union(Access::MW_BIND)).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    let mut mw = pd.alloc_mw().unwrap();
    let rw = Access::REMOTE_READ.union(Access::REMOTE_WRITE);
    let rkey = qp.bind_mw(1, &mut mw, &target, 1024, 256, rw).unwrap();
    assert_eq!(rkey, mw.rkey());
    let c = one(&mut cq);
    assert_eq!((c.wr_id, c.status, c.opcode), (1, dvcq::WcStatus::Success, dvcq::WcOpcode::BindMw), "{device}");
    let through = dvcq::verbs::RemoteAddr { addr: target.addr() + 1024, rkey };
    drop(target);
    local.write(0, b"window").unwrap();
    let sg = [local.slice(0, 6).unwrap()];
    qp.post_send(&[SendWr::new(2, SendOp::Write(through), &sg)]).unwrap();
    assert!(one(&mut cq).is_ok(), "{device}: the write through the window");
    let back = [local.slice(100, 6).unwrap()];
    qp.post_send(&[SendWr::new(3, SendOp::Read(through), &back)]).unwrap();
    assert!(one(&mut cq).is_ok(), "{device}: the read through the window");
    let mut got = [0u8; 6];
    local.read(100, &mut got).unwrap();
    assert_eq!(&got, b"window", "{device}");
    drop(mw);
    drop(qp);
}

/// The binds `Qp::bind_mw` refuses before posting, each with `Error::MwBind` saying why,
/// and a raw `SendOp::BindMw` given to `post_send`.
pub fn bind_refusals(device: &str) {
    let ctx = Context::open(device).unwrap();
    let cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let plain = pd.reg_mr(4096, Access::ALL).unwrap();
    let bindable = pd.reg_mr(4096, Access::ALL.union(Access::MW_BIND)).unwrap();
    let read_only = pd.reg_mr(4096, Access::MW_BIND.union(Access::REMOTE_READ)).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let mut ud = pd.create_qp(&QpInit::new(QpType::Ud, &cq)).unwrap();
    let mut mw = pd.alloc_mw().unwrap();
    let rkey = mw.rkey();
    let rw = Access::REMOTE_READ.union(Access::REMOTE_WRITE);
    let refused = |r: Result<u32, dvcq::Error>, says: &str| match r {
        Err(e @ dvcq::Error::MwBind { .. }) => assert!(e.to_string().contains(says), "{device}: {e}"),
        other => panic!("{device}: expected a refusal saying {says:?}, got {other:?}"),
    };
    refused(qp.bind_mw(1, &mut mw, &bindable, 4000, 200, rw), "outside the 4096-byte memory region");
    refused(qp.bind_mw(1, &mut mw, &bindable, u64::MAX, 2, rw), "outside");
    refused(qp.bind_mw(1, &mut mw, &bindable, 0, 0, rw), "0 bytes");
    refused(qp.bind_mw(1, &mut mw, &plain, 0, 64, rw), "without Access::MW_BIND");
    refused(qp.bind_mw(1, &mut mw, &bindable, 0, 64, Access::LOCAL_WRITE), "remote read and write");
    refused(qp.bind_mw(1, &mut mw, &read_only, 0, 64, rw), "without Access::LOCAL_WRITE");
    refused(ud.bind_mw(1, &mut mw, &bindable, 0, 64, rw), "RC");
    assert_eq!(mw.rkey(), rkey, "{device}: nothing was posted");
    let raw = dvcq::verbs::MwBind {
        mw_rkey: rkey,
        new_rkey: dvcq::verbs::inc_rkey(rkey),
        mr_lkey: bindable.lkey(),
        addr: bindable.addr(),
        len: 64,
        access: rw,
    };
    match qp.post_send(&[SendWr::new(1, SendOp::BindMw(raw), &[])]) {
        Err(dvcq::Error::MwBind { why, .. }) => assert!(why.contains("Qp::bind_mw"), "{device}: {why}"),
        other => panic!("{device}: {other:?}"),
    }
}

/// Sends 6 bytes from `from` (a fresh RC loopback SEND) and returns the receive's
/// completion (the send's must succeed).
fn send_to_self(device: &str, cq: &mut dvcq::Cq, qp: &mut dvcq::Qp, from: &dvcq::Mr) -> Completion {
    from.write(0, b"posted").unwrap();
    let sg = [from.slice(0, 6).unwrap()];
    qp.post_send(&[SendWr::new(1, SendOp::Send, &sg)]).unwrap();
    let (a, b) = (one(cq), one(cq));
    let (send, recv) = if a.wr_id == 1 { (a, b) } else { (b, a) };
    assert!(send.is_ok(), "{device}: the send: {send:?}");
    recv
}

/// A receive keeps the region it names registered and allocated: the application drops the
/// `Mr` after posting, and the message still lands (the device, or mlx5's copy of data
/// scattered to the CQE, writes into memory the QP holds) and completes successfully. The
/// same for a receive posted to an SRQ that is dropped too, where the device has SRQs.
pub fn receive_outlives_its_region(device: &str) {
    use dvcq::verbs::RecvWr;
    let ctx = Context::open(device).unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let from = pd.reg_mr(4096, Access::ALL).unwrap();
    let into = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    qp.post_recv(&[RecvWr { wr_id: 2, sg_list: &[into.slice(0, 64).unwrap()] }]).unwrap();
    drop(into);
    let recv = send_to_self(device, &mut cq, &mut qp, &from);
    assert_eq!((recv.wr_id, recv.status, recv.byte_len), (2, dvcq::WcStatus::Success, 6), "{device}: {recv:?}");

    let srq = match pd.create_srq(4, 1) {
        Ok(srq) => srq,
        // E810 has no SRQ (irdma: EOPNOTSUPP); nothing more to run there.
        Err(e) if device == "model-e810" => return assert!(e.to_string().contains("srq"), "{device}: {e}"),
        Err(e) => panic!("{device}: create_srq: {e}"),
    };
    let mut qp = pd.create_qp(&QpInit { srq: Some(&srq), ..QpInit::new(QpType::Rc, &cq) }).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    let into = pd.reg_mr(4096, Access::ALL).unwrap();
    srq.post_recv(&[RecvWr { wr_id: 3, sg_list: &[into.slice(0, 64).unwrap()] }]).unwrap();
    drop(into);
    drop(srq);
    let recv = send_to_self(device, &mut cq, &mut qp, &from);
    assert_eq!((recv.wr_id, recv.status, recv.byte_len), (3, dvcq::WcStatus::Success, 6), "{device}: {recv:?}");
}

/// Where the device or the provider writes (a receive list, a READ's local list), a slice
/// of memory registered elsewhere (a bare model device's region, another context's) is
/// refused before anything is posted: the QP could not hold it while it may be written.
pub fn foreign_buffers_are_refused_where_written(device: &str) {
    use dvcq::verbs::RecvWr;
    let ctx = Context::open(device).unwrap();
    let cq = ctx.create_cq(CqOptions::new(16)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    let mine = pd.reg_mr(4096, Access::ALL).unwrap();
    let bare = dvcq::model_device::ModelDevice::new(dvcq::model_device::ModelVendor::Mlx5);
    let bare_mr = bare.reg_mr(4096, Access::ALL).unwrap();
    let other_ctx = Context::open(if device == "model-mlx5" { "model-e810" } else { "model-mlx5" }).unwrap();
    let other_pd = other_ctx.alloc_pd().unwrap();
    let other_mr = other_pd.reg_mr(4096, Access::ALL).unwrap();
    let refused = |r: Result<(), dvcq::Error>, what: &str| match r {
        Err(e @ dvcq::Error::Mismatch { .. }) => {
            assert!(e.to_string().contains("entry 1"), "{device}, {what}: {e}");
        }
        other => panic!("{device}, {what}: expected a refusal, got {other:?}"),
    };
    for (what, foreign) in
        [("a bare model region", bare_mr.slice(0, 8).unwrap()), ("another context's", other_mr.slice(0, 8).unwrap())]
    {
        let list = [mine.slice(0, 8).unwrap(), foreign];
        refused(qp.post_recv(&[RecvWr { wr_id: 1, sg_list: &list }]), what);
        let read = SendOp::Read(mine.remote().at(64));
        refused(qp.post_send(&[SendWr::new(2, read, &list)]), what);
    }
    // Nothing was posted: a send from foreign memory is the device's to check (a gather by
    // lkey), and the QP's receive queue is still empty, so a SEND to itself finds no receive.
    let mut cq = cq;
    qp.post_recv(&[RecvWr { wr_id: 5, sg_list: &[mine.slice(100, 8).unwrap()] }]).unwrap();
    let recv = send_to_self(device, &mut cq, &mut qp, &mine);
    assert_eq!((recv.wr_id, recv.status), (5, dvcq::WcStatus::Success), "{device}: {recv:?}");
}
