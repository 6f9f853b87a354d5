//! The public verbs API over extreme arguments on both models (`Context::open`): CQ depths,
//! completion vectors and CQE formats, QP capabilities, region lengths, slice and
//! read/write ranges, long scatter lists, oversize inline data, SRQ and XRC SRQ sizes,
//! remote addresses and window binds at the limits of their integer types. Nothing panics;
//! every refusal is an `Err` that starts with the device's name and says what; every object
//! made works (a CQ polls and resizes, a QP carries a message to itself).

use dvcq::verbs::{Access, Endpoint, QpCaps, QpType, RecvWr, RemoteAddr, SendOp, SendWr, UdDest, DEFAULT_QKEY};
use dvcq::{Completion, Context, Cq, CqOptions, Error, Mr, Qp, QpInit, WcStatus};
use proptest::prelude::*;

const DEVICES: [&str; 2] = ["model-mlx5", "model-e810"];

/// The bytes of the region every traffic case works in.
const REGION: u64 = 1 << 20;

fn device() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&DEVICES[..])
}

/// Numbers at and around the edges of `u32`, and small ones that a device accepts.
fn ext_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0),
        Just(1),
        Just(u32::MAX),
        Just(u32::MAX - 1),
        Just(u32::MAX - 15),
        Just(1 << 31),
        Just((1 << 31) - 1),
        Just(1 << 16),
        0u32..64,
        any::<u32>(),
    ]
}

/// A QP or SRQ size: mostly one a device grants (so that the QP is made and carries
/// traffic), else an extreme one.
fn cap() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0u32..70, 1 => Just(0), 1 => ext_u32()]
}

fn ext_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0),
        Just(1),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        Just(u64::from(u32::MAX)),
        Just(u64::from(u32::MAX) + 1),
        Just(1 << 63),
        0u64..REGION,
        any::<u64>(),
    ]
}

fn qp_type() -> impl Strategy<Value = QpType> {
    prop::sample::select(vec![QpType::Rc, QpType::Ud])
}

/// A refusal names the device first and says what after it.
fn refused(device: &str, e: &Error, what: &str) -> Result<(), TestCaseError> {
    let m = e.to_string();
    prop_assert!(m.starts_with(&format!("{device}: ")), "{what}: {m:?} does not start with the device");
    prop_assert!(m.len() > device.len() + 8, "{what}: {m:?} says too little");
    Ok(())
}

/// Everything `cq` holds now (a model executes work as it is posted).
fn drain(cq: &mut Cq) -> Vec<Completion> {
    let mut out = Vec::new();
    let mut wcs = [Completion::default(); 16];
    loop {
        let n = cq.poll_count(&mut wcs);
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&wcs[..n]);
    }
}

/// A QP's peer: itself, through its own endpoint (RC connects to it, UD sends to it).
fn to_self(qp: &mut Qp) -> Result<Endpoint, Error> {
    let me = qp.endpoint()?;
    if qp.qp_type() == QpType::Rc {
        qp.connect(&me)?;
    }
    Ok(me)
}

/// A SEND of `n` slices of `len` bytes each (spread over the region) from `qp` to itself.
fn send_wr<'a>(qp_type: QpType, me: &Endpoint, sg: &'a [dvcq::verbs::MrSlice<'a>], inline: bool) -> SendWr<'a> {
    let mut wr = SendWr::new(1, SendOp::Send, sg);
    wr.inline = inline;
    if qp_type == QpType::Ud {
        wr = wr.to(UdDest { qpn: me.qpn, qkey: DEFAULT_QKEY, endpoint: *me });
    }
    wr
}

fn slices(mr: &Mr, n: usize, len: u32) -> Vec<dvcq::verbs::MrSlice<'_>> {
    let room = REGION / 2 - u64::from(len);
    (0..n as u64).map(|i| mr.slice((i * 4096) % room, len).unwrap()).collect()
}

proptest! {
    /// CQs of any depth, vector and CQE format: made (and then as deep as asked, empty,
    /// resizable to any depth or refusing it) or refused.
    #[test]
    fn cq_depths_vectors_and_formats(
        device in device(),
        depth in ext_u32(),
        comp_vector in prop_oneof![Just(0u32), ext_u32()],
        cqe_size in prop_oneof![Just(64u16), Just(128), Just(0), Just(1), Just(u16::MAX), any::<u16>()],
        cqe_pad in any::<bool>(),
        resize in ext_u32(),
        in_flight in prop_oneof![Just(None), ext_u64().prop_map(Some)],
    ) {
        let ctx = Context::open(device).unwrap();
        let opts = CqOptions { comp_vector, cqe_size, cqe_pad, ..CqOptions::new(depth) };
        match ctx.create_cq(opts) {
            Ok(mut cq) => {
                prop_assert!(cq.depth() >= depth, "{}: depth {} for {}", device, cq.depth(), depth);
                prop_assert_eq!(cq.poll_count(&mut []), 0);
                prop_assert!(drain(&mut cq).is_empty());
                match cq.resize(resize) {
                    Ok(d) => prop_assert!(d >= resize && cq.depth() == d, "{}: resized to {} for {}", device, d, resize),
                    Err(e) => refused(device, &e, "resize")?,
                }
                prop_assert!(drain(&mut cq).is_empty());
                let advice = cq.advice(in_flight);
                prop_assert!(advice.suggested_depth >= 1 && advice.depth == cq.depth(), "{}: {:?}", device, advice);
            }
            Err(e) => {
                refused(device, &e, "create_cq")?;
                let plain = comp_vector == 0 && cqe_size == 64 && !cqe_pad;
                prop_assert!(!(plain && (1..=4096).contains(&depth)), "{}: a plain CQ of {} refused: {}", device, depth, e);
            }
        }
    }

    /// QPs of any capabilities: made, and then a SEND to itself (inline where asked for)
    /// lands in a posted receive; or refused. What was asked for is granted: a post within
    /// it is not refused.
    #[test]
    fn qp_capabilities(
        device in device(),
        qp_type in qp_type(),
        max_send_wr in cap(),
        max_recv_wr in cap(),
        max_send_sge in cap(),
        max_recv_sge in cap(),
        max_inline_data in cap(),
        sq_sig_all in any::<bool>(),
    ) {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(64)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.reg_mr(REGION as usize, Access::ALL).unwrap();
        let caps = QpCaps { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data };
        let mut qp = match pd.create_qp(&QpInit { caps, sq_sig_all, ..QpInit::new(qp_type, &cq) }) {
            Ok(qp) => qp,
            Err(e) => return refused(device, &e, "create_qp"),
        };
        let me = to_self(&mut qp).unwrap();
        let recv_sg = [mr.slice(REGION / 2, 4096).unwrap()];
        let recv = qp.post_recv(&[RecvWr { wr_id: 2, sg_list: &recv_sg }]);
        // A device may grant more than asked (mlx5 gives a receive queue one entry at
        // least): only a refusal is checked against what was asked.
        match &recv {
            Ok(()) => {}
            Err(e) => {
                refused(device, e, "post_recv")?;
                prop_assert!(max_recv_wr == 0 || max_recv_sge == 0, "{}: {:?} refused a receive: {}", device, caps, e);
            }
        }
        let inline = max_inline_data >= 8;
        let sg = slices(&mr, 1, 8);
        let sent = qp.post_send(&[send_wr(qp_type, &me, &sg, inline)]);
        match &sent {
            Ok(()) => {}
            Err(e) => {
                refused(device, e, "post_send")?;
                prop_assert!(max_send_wr == 0 || max_send_sge == 0, "{}: {:?} refused a send: {}", device, caps, e);
            }
        }
        let got = drain(&mut cq);
        if recv.is_ok() && sent.is_ok() {
            let grh = if qp_type == QpType::Ud { dvcq::verbs::UD_GRH_BYTES } else { 0 };
            let recv = got.iter().find(|c| c.wr_id == 2);
            prop_assert!(recv.is_some_and(|c| c.status == WcStatus::Success && c.byte_len == 8 + grh), "{}: {:?}", device, got);
            prop_assert!(got.iter().any(|c| c.wr_id == 1 && c.status == WcStatus::Success), "{}: {:?}", device, got);
        }
        prop_assert!(got.iter().all(|c| c.wr_id == 1 || c.wr_id == 2), "{}: {:?}", device, got);
    }

    /// Regions of any length: made (and then every slice, write and read inside it works
    /// and every one outside it is refused) or refused.
    #[test]
    fn region_lengths_and_ranges(
        device in device(),
        len in prop_oneof![Just(0usize), Just(1), Just(4096), Just(u32::MAX as usize), Just(u32::MAX as usize + 1), Just(usize::MAX), 1usize..(1 << 16)],
        offset in ext_u64(),
        slice_len in ext_u32(),
        bytes in 0usize..64,
    ) {
        let ctx = Context::open(device).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = match pd.reg_mr(len, Access::ALL) {
            Ok(mr) => mr,
            Err(e) => {
                refused(device, &e, "reg_mr")?;
                prop_assert!(!(1..=1 << 20).contains(&len), "{}: a region of {} bytes refused: {}", device, len, e);
                return Ok(());
            }
        };
        prop_assert_eq!(mr.len(), len as u64);
        let inside = |n: u64| offset.checked_add(n).is_some_and(|end| end <= mr.len());
        match mr.slice(offset, slice_len) {
            Ok(s) => {
                prop_assert!(inside(u64::from(slice_len)));
                prop_assert_eq!((s.addr(), s.len(), s.lkey()), (mr.addr() + offset, slice_len, mr.lkey()));
            }
            Err(e) => {
                refused(device, &e, "slice")?;
                prop_assert!(!inside(u64::from(slice_len)));
            }
        }
        let data: Vec<u8> = (0..bytes as u8).collect();
        match mr.write(offset, &data) {
            Ok(()) => {
                prop_assert!(inside(bytes as u64));
                let mut back = vec![0xffu8; bytes];
                mr.read(offset, &mut back).unwrap();
                prop_assert_eq!(back, data);
            }
            Err(e) => {
                refused(device, &e, "write")?;
                prop_assert!(!inside(bytes as u64));
                let mut back = vec![0u8; bytes];
                prop_assert!(mr.read(offset, &mut back).is_err());
            }
        }
    }

    /// Scatter lists longer than any device takes and inline data longer than any QP holds
    /// are refused; what is posted completes, with the wr_ids posted.
    #[test]
    fn long_lists_and_oversize_inline(
        device in device(),
        qp_type in qp_type(),
        max_sge in 0u32..40,
        max_inline_data in prop_oneof![0u32..600, ext_u32()],
        n_send in prop_oneof![0usize..40, Just(1000)],
        n_recv in prop_oneof![0usize..40, Just(1000)],
        slice_len in prop_oneof![0u32..700, Just(4096)],
        inline in any::<bool>(),
    ) {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(64)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.reg_mr(REGION as usize, Access::ALL).unwrap();
        let caps = QpCaps { max_send_wr: 8, max_recv_wr: 8, max_send_sge: max_sge, max_recv_sge: max_sge, max_inline_data };
        let mut qp = match pd.create_qp(&QpInit { caps, ..QpInit::new(qp_type, &cq) }) {
            Ok(qp) => qp,
            Err(e) => return refused(device, &e, "create_qp"),
        };
        let me = to_self(&mut qp).unwrap();
        let recv_sg: Vec<_> = (0..n_recv as u64).map(|i| mr.slice(REGION / 2 + (i * 64) % (REGION / 4), 64).unwrap()).collect();
        match qp.post_recv(&[RecvWr { wr_id: 2, sg_list: &recv_sg }]) {
            Ok(()) => prop_assert!(n_recv <= 32, "{}: a receive of {} entries posted", device, n_recv),
            Err(e) => refused(device, &e, "post_recv")?,
        }
        let sg = slices(&mr, n_send, slice_len);
        let total = u64::from(slice_len) * n_send as u64;
        match qp.post_send(&[send_wr(qp_type, &me, &sg, inline)]) {
            Ok(()) => {
                prop_assert!(n_send <= 32, "{}: a send of {} entries posted", device, n_send);
                prop_assert!(!inline || total <= 1024, "{}: {} inline bytes posted", device, total);
            }
            Err(e) => refused(device, &e, "post_send")?,
        }
        let got = drain(&mut cq);
        prop_assert!(got.iter().all(|c| c.wr_id == 1 || c.wr_id == 2), "{}: {:?}", device, got);
    }

    /// Any device name opens a model or is refused with an error that quotes it.
    #[test]
    fn device_names(name in prop_oneof![Just(String::new()), Just("model-mlx5\0".to_string()), ".{0,40}", "\\PC{200,300}"]) {
        match Context::open(&name) {
            Ok(ctx) => prop_assert!(DEVICES.contains(&ctx.name()), "{:?} opened", name),
            Err(e) => prop_assert!(e.to_string().contains(&format!("{name:?}")), "{:?}: {}", name, e),
        }
    }

    /// A list of any number of requests posts in order until the queue is full: the error
    /// names the first request not posted, and every request before it completes.
    #[test]
    fn long_request_lists(device in device(), depth in 1u32..40, n in prop_oneof![0usize..80, Just(1000)]) {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(4096)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.reg_mr(REGION as usize, Access::ALL).unwrap();
        let caps = QpCaps { max_send_wr: depth, max_recv_wr: depth, ..QpCaps::default() };
        let mut qp = pd.create_qp(&QpInit { caps, ..QpInit::new(QpType::Rc, &cq) }).unwrap();
        to_self(&mut qp).unwrap();
        let sg = [mr.slice(0, 8).unwrap()];
        let recvs: Vec<RecvWr<'_>> = (0..n as u64).map(|i| RecvWr { wr_id: 1 << 32 | i, sg_list: &sg }).collect();
        let recv_posted = match qp.post_recv(&recvs) {
            Ok(()) => n,
            Err(Error::QueueFull { index, .. }) => {
                prop_assert!(index < n && index >= depth as usize, "{}: refused at {} of {} (depth {})", device, index, n, depth);
                index
            }
            Err(e) => return Err(TestCaseError::fail(format!("{device}: {e}"))),
        };
        let to = mr.remote().at(64);
        let sends: Vec<SendWr<'_>> = (0..n as u64).map(|i| SendWr::new(i, SendOp::Write(to), &sg)).collect();
        let mut sent = 0;
        while sent < n {
            match qp.post_send(&sends[sent..]) {
                Ok(()) => sent = n,
                Err(Error::QueueFull { index, .. }) => {
                    prop_assert!(index < n - sent, "{}: refused at {} of {}", device, index, n - sent);
                    sent += index;
                    let done = drain(&mut cq);
                    prop_assert!(index > 0 || !done.is_empty(), "{}: a full queue with nothing completed", device);
                    prop_assert!(done.iter().all(Completion::is_ok), "{}: {:?}", device, done);
                }
                Err(e) => return Err(TestCaseError::fail(format!("{device}: {e}"))),
            }
        }
        let done = drain(&mut cq);
        prop_assert!(done.iter().all(Completion::is_ok), "{}: {:?}", device, done);
        prop_assert!(recv_posted <= n);
    }

    /// SRQs and XRC SRQs of any size: made (and then a receive of up to the entries asked
    /// for posts) or refused.
    #[test]
    fn srq_sizes(device in device(), max_wr in cap(), max_sge in cap(), n in 0usize..40, xrc in any::<bool>()) {
        let ctx = Context::open(device).unwrap();
        let cq = ctx.create_cq(CqOptions::new(64)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.reg_mr(REGION as usize, Access::ALL).unwrap();
        let made = if xrc {
            match ctx.open_xrcd() {
                Ok(xrcd) => pd.create_xrc_srq(&xrcd, &cq, max_wr, max_sge),
                Err(e) => return refused(device, &e, "open_xrcd"),
            }
        } else {
            pd.create_srq(max_wr, max_sge)
        };
        let srq = match made {
            Ok(srq) => srq,
            Err(e) => return refused(device, &e, "create_srq"),
        };
        let sg = slices(&mr, n, 64);
        match srq.post_recv(&[RecvWr { wr_id: 3, sg_list: &sg }]) {
            Ok(()) => prop_assert!(n <= 32, "{}: a receive of {} entries posted", device, n),
            Err(e) => {
                refused(device, &e, "srq post_recv")?;
                prop_assert!(n as u64 > u64::from(max_sge), "{}: {} entries refused by an SRQ of {}: {}", device, n, max_sge, e);
            }
        }
    }

    /// RDMA WRITEs and READs to any remote address and key, and binds of any range: each
    /// posts and completes (successfully only inside the region, under its key) or is
    /// refused.
    #[test]
    fn remote_addresses_and_binds(
        device in device(),
        addr in prop_oneof![ext_u64().prop_map(|a| (false, a)), (0u64..REGION + 8192).prop_map(|o| (true, o))],
        rkey in prop_oneof![Just(None), ext_u32().prop_map(Some)],
        len in prop_oneof![0u32..4096, Just(4096)],
        read in any::<bool>(),
        bind_offset in ext_u64(),
        bind_len in ext_u64(),
    ) {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(64)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.reg_mr(REGION as usize, Access::ALL.union(Access::MW_BIND)).unwrap();
        let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
        to_self(&mut qp).unwrap();
        let addr = match addr {
            (true, offset) => mr.addr() + offset,
            (false, a) => a,
        };
        let to = RemoteAddr { addr, rkey: rkey.unwrap_or(mr.rkey()) };
        let sg = [mr.slice(0, len).unwrap()];
        let op = if read { SendOp::Read(to) } else { SendOp::Write(to) };
        qp.post_send(&[SendWr::new(1, op, &sg)]).unwrap();
        let got = drain(&mut cq);
        prop_assert_eq!(got.len(), 1, "{}: {:?}", device, got);
        let inside = addr.checked_sub(mr.addr()).and_then(|o| o.checked_add(u64::from(len))).is_some_and(|end| end <= REGION);
        if got[0].status == WcStatus::Success {
            prop_assert!(len == 0 || (inside && to.rkey == mr.rkey()), "{}: {:?} succeeded", device, to);
        } else {
            prop_assert!(!inside || to.rkey != mr.rkey(), "{}: {:?} failed: {:?}", device, to, got[0]);
        }
        // The QP may be in error now: a fresh one binds.
        let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq)).unwrap();
        to_self(&mut qp).unwrap();
        let mut mw = pd.alloc_mw().unwrap();
        let rw = Access::REMOTE_READ.union(Access::REMOTE_WRITE);
        match qp.bind_mw(5, &mut mw, &mr, bind_offset, bind_len, rw) {
            Ok(rkey) => {
                prop_assert!(bind_len > 0 && bind_offset.checked_add(bind_len).is_some_and(|e| e <= REGION));
                prop_assert_eq!(rkey, mw.rkey());
                let done = drain(&mut cq);
                prop_assert!(done.len() == 1 && done[0].wr_id == 5 && done[0].is_ok(), "{}: {:?}", device, done);
            }
            Err(e) => refused(device, &e, "bind_mw")?,
        }
    }
}

/// `Pd::create_qp` makes a UD QP ready at once, on the models as on rdma-core: it sends and
/// receives with no `connect` (which has nothing to do for UD).
#[test]
fn a_ud_qp_is_ready_without_connect() {
    for device in DEVICES {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(16)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.reg_mr(REGION as usize, Access::ALL).unwrap();
        let mut qp = pd.create_qp(&QpInit::new(QpType::Ud, &cq)).unwrap();
        let me = qp.endpoint().unwrap();
        qp.post_recv(&[RecvWr { wr_id: 2, sg_list: &[mr.slice(REGION / 2, 4096).unwrap()] }]).unwrap();
        let sg = slices(&mr, 1, 8);
        qp.post_send(&[send_wr(QpType::Ud, &me, &sg, false)]).unwrap();
        let got = drain(&mut cq);
        assert!(got.len() == 2 && got.iter().all(Completion::is_ok), "{device}: {got:?}");
        qp.connect(&me).unwrap();
    }
}

/// A message longer than the device's `max_msg_sz` (or, on UD, its MTU) completes with a
/// local length error, without the model gathering it: a SEND, WRITE and READ of
/// `max_msg_sz + 1` bytes in two entries of a region of 2^32 - 1 (mapped, never touched).
#[test]
fn messages_longer_than_the_device_sends_fail_with_a_length_error() {
    use dvcq::model_device::{DeviceAttrs, ModelVendor};
    for (device, vendor) in [("model-mlx5", ModelVendor::Mlx5), ("model-e810", ModelVendor::Irdma)] {
        let ctx = Context::open(device).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(16)).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mr = pd.reg_mr(u32::MAX as usize, Access::ALL).unwrap();
        let max = u32::try_from(DeviceAttrs::of(vendor).max_msg_sz).unwrap();
        let sg = [mr.slice(0, max).unwrap(), mr.slice(u64::from(max), 1).unwrap()];
        let caps = QpCaps { max_send_sge: 2, max_recv_sge: 2, ..QpCaps::default() };
        for (qp_type, op) in [
            (QpType::Rc, SendOp::Send),
            (QpType::Rc, SendOp::Write(mr.remote().at(0))),
            (QpType::Rc, SendOp::Read(mr.remote().at(0))),
            (QpType::Ud, SendOp::Send),
        ] {
            let mut qp = pd.create_qp(&QpInit { caps, ..QpInit::new(qp_type, &cq) }).unwrap();
            let me = to_self(&mut qp).unwrap();
            qp.post_recv(&[RecvWr { wr_id: 2, sg_list: &sg }]).unwrap();
            let mut wr = send_wr(qp_type, &me, &sg, false);
            wr.op = op;
            qp.post_send(&[wr]).unwrap();
            let got = drain(&mut cq);
            let send = got.iter().find(|c| c.wr_id == 1);
            assert!(send.is_some_and(|c| c.status == WcStatus::LocLenErr), "{device} {qp_type:?} {op:?}: {got:?}");
        }
    }
}
