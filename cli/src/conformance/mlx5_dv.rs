//! mlx5 direct-verbs CQ checks, after rdma-core's `tests/test_mlx5_cq.py`: traffic on CQs
//! of 128-byte CQEs, padded CQEs and compressed CQEs (each responder mini-CQE format), and
//! the attributes mlx5 refuses. They need a CQ made with `mlx5dv_create_cq`'s attributes
//! (the mlx5 ones of [`CqOptions`]): a ConnectX and `model-mlx5` make them; any other device
//! skips, saying why.

use super::workloads::{caps, check_data, ok, outcome, pattern, post_recvs, recv, rig};
use super::{Outcome, Recorder};
use crate::cq::{BackendChoice, Cq, CqOptions};
use crate::verbs::{QpType, SendOp, SendWr};
use crate::{Context, QpInit, WcOpcode};
use dvcq::Error;
use dvcq_mlx5_dv::MiniFormat;

/// The responder mini-CQE formats `mlx5dv_create_cq` takes, by their `MLX5DV_CQE_RES_FORMAT_*`
/// names.
const FORMATS: [(&str, MiniFormat); 3] =
    [("HASH", MiniFormat::Hash), ("CSUM", MiniFormat::Csum), ("CSUM_STRIDX", MiniFormat::CsumStridx)];

/// A CQ of `opts` with `choice`, `Ok(Err(why))` when the device makes no mlx5 DV CQs (the
/// check skips), `Err` when it refused these attributes.
fn dv_cq(ctx: &Context, choice: BackendChoice, opts: CqOptions) -> Result<Result<Cq, String>, Error> {
    let info = ctx.info()?;
    let mlx5 = info.provider == "mlx5" || (info.driver == "model" && info.vendor_id == 0x15b3);
    if !mlx5 {
        return Ok(Err(format!("{} is not an mlx5 device: no mlx5dv_create_cq attributes", ctx.name())));
    }
    ctx.create_cq(opts.backend(choice)).map(Ok)
}

/// 64 completions' CQ with `cqe_size`-byte CQEs.
fn sized(cqe_size: u16) -> CqOptions {
    CqOptions::new(64).cqe_size(cqe_size)
}

/// Messages of 1 to 8·41 bytes, four SENDs and four SENDs with (the same) immediate data,
/// then RDMA WRITEs and READs, from QP 0 to QP 1, on `scq` for sends and `rcq` for receives (the same CQ or two);
/// posted all at once (one doorbell each way), then polled, so the device writes the CQEs
/// back to back (where a compressed CQ forms its sessions).
fn traffic(ctx: &Context, scq: Cq, rcq: Option<Cq>) -> Result<Outcome, Error> {
    let c = caps(32, 32);
    let recv_cq = rcq.as_ref().unwrap_or(&scq);
    let mut r = rig(ctx, QpType::Rc, &scq, recv_cq, c, 2)?;
    let mut expected = Vec::new();
    post_recvs(&mut r.qps[1], &r.mrs[1], 100, 8, 512)?;
    let mut sends = Vec::new();
    for i in 0..8u64 {
        let len = 1 + 41 * i as u32;
        r.mrs[0].write(i * 512, &pattern(i, len as usize))?;
        // Runs of like receives: a compressed CQ can put each run in a session.
        let op = if i >= 4 { SendOp::SendWithImm(0x0200_0000) } else { SendOp::Send };
        sends.push((i, op, [r.mrs[0].slice(i * 512, len)?]));
        expected.push(ok(0, i, WcOpcode::Send));
        let mut rv = recv(1, 100 + i, len);
        if let SendOp::SendWithImm(imm) = op {
            rv.imm = Some(imm.to_be());
            rv.flags = crate::WcFlags::WITH_IMM.bits();
        }
        expected.push(rv);
    }
    let wrs: Vec<SendWr<'_>> = sends.iter().map(|(i, op, sg)| SendWr::new(*i, *op, sg)).collect();
    r.qps[0].post_send(&wrs)?;
    let remote = r.mrs[1].remote();
    let mut rdma = Vec::new();
    for i in 8..12u64 {
        r.mrs[0].write(i * 512, &pattern(i, 100))?;
        rdma.push((i, SendOp::Write(remote.at(8192 + i * 512)), [r.mrs[0].slice(i * 512, 100)?]));
        expected.push(ok(0, i, WcOpcode::RdmaWrite));
    }
    for i in 12..16u64 {
        r.mrs[1].write(16384 + i * 64, &pattern(i, 48))?;
        rdma.push((i, SendOp::Read(remote.at(16384 + i * 64)), [r.mrs[0].slice(i * 512, 48)?]));
        expected.push(super::Record { byte_len: Some(48), ..ok(0, i, WcOpcode::RdmaRead) });
    }
    let wrs: Vec<SendWr<'_>> = rdma.iter().map(|(i, op, sg)| SendWr::new(*i, *op, sg)).collect();
    r.qps[0].post_send(&wrs)?;
    let mut scq = scq;
    let mut rcq = rcq;
    let n_recv = 8;
    super::poll_n(&mut scq, &mut r.rec, if rcq.is_some() { expected.len() - n_recv } else { expected.len() });
    if let Some(rcq) = rcq.as_mut() {
        super::poll_n(rcq, &mut r.rec, n_recv);
    }
    for i in 0..8u64 {
        check_data(&mut r.rec, "send", &r.mrs[1], i * 512, &pattern(i, 1 + 41 * i as usize));
    }
    for i in 8..12u64 {
        check_data(&mut r.rec, "write", &r.mrs[1], 8192 + i * 512, &pattern(i, 100));
    }
    for i in 12..16u64 {
        check_data(&mut r.rec, "read", &r.mrs[0], i * 512, &pattern(i, 48));
    }
    let quiet = std::time::Duration::from_millis(20);
    super::drain_extra(&mut scq, &mut r.rec, quiet);
    let mut cqs = vec![(scq, 2 * 32)];
    if let Some(mut rcq) = rcq {
        super::drain_extra(&mut rcq, &mut r.rec, quiet);
        cqs = vec![(cqs.remove(0).0, 2 * 32), (rcq, 2 * 32)];
    }
    Ok(outcome(cqs, r.rec, expected))
}

/// Traffic on a CQ of 128-byte CQEs (`test_dv_cq_cqe_size_128`).
pub(super) fn mlx5_cqe_128(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    match dv_cq(ctx, choice, sized(128))? {
        Ok(cq) => traffic(ctx, cq, None),
        Err(why) => Ok(Outcome::skip(why)),
    }
}

/// Traffic on a padded CQ of 128-byte CQEs; padding with 64-byte CQEs is refused
/// (`test_dv_cq_padding`, `test_dv_cq_padding_not_aligned_cqe_size`).
pub(super) fn mlx5_cqe_pad(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let cq = match dv_cq(ctx, choice, sized(128).padded())? {
        Ok(cq) => cq,
        Err(why) => return Ok(Outcome::skip(why)),
    };
    let mut o = traffic(ctx, cq, None)?;
    if let Ok(Ok(_)) = dv_cq(ctx, choice, sized(64).padded()) {
        o.recorder.problem("a padded CQ of 64-byte CQEs was made (mlx5 pads 128-byte CQEs only: EINVAL)");
    }
    Ok(o)
}

/// A CQE size mlx5 does not have is refused (`test_dv_cq_cqe_size_with_bad_size`).
pub(super) fn mlx5_cqe_size_bad(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let mut rec = Recorder::default();
    for size in [100, 32, 256] {
        match dv_cq(ctx, choice, sized(size)) {
            Ok(Err(why)) => return Ok(Outcome::skip(why)),
            Ok(Ok(_)) => rec.problem(format!("a CQ of {size}-byte CQEs was made (mlx5 has 64 and 128: EINVAL)")),
            Err(_) => {}
        }
    }
    Ok(Outcome::checked(rec, "CQEs of 100, 32 and 256 bytes refused".into()))
}

/// Traffic on CQs with CQE compression in each responder mini-CQE format, which must form
/// sessions (`test_dv_cq_compression_flags`; its two-formats-at-once refusal cannot be asked
/// for: `CqOptions::compressed` takes one format).
pub(super) fn mlx5_compression(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    if choice == BackendChoice::Generic && ctx.info()?.provider == "mlx5" {
        // libmlx5's ibv_poll_cq does not expand mini-CQEs: dvcq refuses the combination,
        // and the check stands on the direct run.
        return Ok(Outcome::skip("rdma-core's ibv_poll_cq cannot read compressed CQEs (libmlx5 does not expand them)"));
    }
    let attrs = |format| CqOptions::new(64).compressed(format);
    let mut all: Option<Outcome> = None;
    let mut sessions = Vec::new();
    for (name, format) in FORMATS {
        // A compressed CQ is polled directly or not at all: a release the direct backend
        // refuses (never guessed) has none to make.
        let made = |ctx: &Context| match dv_cq(ctx, choice, attrs(format)) {
            Err(e @ (Error::UnknownRelease { .. } | Error::Attach { .. })) => Ok(Err(e.to_string())),
            other => other,
        };
        let (scq, rcq) = match (made(ctx)?, made(ctx)?) {
            (Ok(s), Ok(r)) => (s, r),
            (Err(why), _) | (_, Err(why)) => return Ok(Outcome::skip(why)),
        };
        let mut o = traffic(ctx, scq, Some(rcq))?;
        let n: Vec<u64> = o.cqs.iter().map(|c| c.cq.stats().compression_sessions.unwrap_or(0)).collect();
        sessions.push(format!("{name} {}+{}", n[0], n[1]));
        for (which, k) in [("send (requester)", n[0]), ("receive (responder)", n[1])] {
            if k == 0 {
                o.recorder
                    .problem(format!("{name}: no session formed on the {which} CQ: compression was not exercised"));
            }
        }
        all = Some(match all {
            None => o,
            Some(mut a) => {
                // Later formats' records follow, under QP roles of their own.
                let base = a.recorder.qps_len() as u8;
                a.recorder.absorb(o.recorder, base);
                a.expected.extend(o.expected.into_iter().map(|mut r| {
                    r.qp += base;
                    r
                }));
                a.cqs.extend(o.cqs);
                a
            }
        });
    }
    let Some(mut o) = all else {
        return Ok(Outcome::skip("no compression format to run"));
    };
    o.summary = Some(format!(
        "{} completions as expected on compressed CQs; sessions send+receive: {}",
        o.expected.len(),
        sessions.join(", ")
    ));
    Ok(o)
}

/// The READ sizes of [`mlx5_read_inline_128`]: around the 32 bytes a cqe64 carries and the
/// 64 a 128-byte CQE carries, and one that goes to the buffer.
const READ_SIZES: [u32; 8] = [1, 8, 31, 32, 33, 63, 64, 200];

/// Small RDMA READs whose data the device places in 128-byte CQEs
/// (`test_dv_cq_rdma_read_small_msg_128_cqe`, scatter-to-CQE): RC QPs made with
/// `sq_sig_all` (what turns requester scatter-to-CQE on) on a CQ of 128-byte CQEs, READs of
/// [`READ_SIZES`] bytes posted unflagged, each completing as an RDMA READ of its length
/// with the data in its local buffer. The poll copies a response that came in the CQE
/// where the READ's WQE says. dvcq's own direct QPs on a ConnectX are made with
/// scatter-to-CQE disabled, so there every response lands in the buffer; the `ibv_poll_cq`
/// run exercises rdma-core's copy.
pub(super) fn mlx5_read_inline_128(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    let cq = match dv_cq(ctx, choice, sized(128))? {
        Ok(cq) => cq,
        Err(why) => return Ok(Outcome::skip(why)),
    };
    let n = READ_SIZES.len() as u32;
    let init = QpInit { caps: caps(2 * n, 1), sq_sig_all: true, ..QpInit::new(QpType::Rc, &cq) };
    let mut r = super::workloads::rig_of(ctx, &init, 2)?;
    let remote = r.mrs[1].remote();
    let mut expected = Vec::new();
    let mut reads = Vec::new();
    for (i, len) in (0u64..).zip(READ_SIZES) {
        r.mrs[1].write(16384 + i * 256, &pattern(i, len as usize))?;
        reads.push((i, SendOp::Read(remote.at(16384 + i * 256)), [r.mrs[0].slice(i * 256, len)?]));
        expected.push(super::Record { byte_len: Some(len), ..ok(0, i, WcOpcode::RdmaRead) });
    }
    // Unflagged: `sq_sig_all` makes each one complete.
    let wrs: Vec<SendWr<'_>> = reads.iter().map(|(i, op, sg)| SendWr::new(*i, *op, sg).signaled(false)).collect();
    r.qps[0].post_send(&wrs)?;
    let mut cq = cq;
    super::poll_n(&mut cq, &mut r.rec, expected.len());
    for (i, len) in (0u64..).zip(READ_SIZES) {
        check_data(&mut r.rec, &format!("read of {len} bytes"), &r.mrs[0], i * 256, &pattern(i, len as usize));
    }
    let in_cqe = cq.ring_image().ok().map(|image| inline_cqes(&image));
    let direct_mlx5 = cq.backend().kind == crate::BackendKind::Mlx5;
    // The model scatters every READ of up to 64 bytes into its CQE: one that did not
    // exercised nothing of what the check is for.
    let small = READ_SIZES.iter().filter(|&&l| l <= 64).count();
    if cq.backend().kind == crate::BackendKind::Model && in_cqe != Some(small) {
        r.rec.problem(format!(
            "{small} READs of up to 64 bytes, {} CQEs carrying data: the responses did not travel in the CQEs",
            in_cqe.unwrap_or(0)
        ));
    }
    super::drain_extra(&mut cq, &mut r.rec, std::time::Duration::from_millis(20));
    let mut o = outcome(vec![(cq, u64::from(n))], r.rec, expected);
    let how = match in_cqe {
        _ if direct_mlx5 => {
            "dvcq's direct QPs are made with scatter-to-CQE disabled: every response went to its buffer".to_string()
        }
        Some(k) => format!("{k} of them inside the CQE"),
        None => "rdma-core's poll copied those that came in the CQE".to_string(),
    };
    o.summary = Some(format!("{} RDMA READs of 1 to 200 bytes completed with their data; {how}", READ_SIZES.len()));
    Ok(o)
}

/// The CQEs of a ring image that carry inline data: successful requester or responder
/// CQEs (opcodes 0 to 4) of format 1 or 2, by their `op_own` byte (the last of a slot).
fn inline_cqes(image: &str) -> usize {
    use dvcq_uapi::mlx5::cqe::op_own;
    image
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_hexdigit()))
        .filter_map(|l| u8::from_str_radix(l.get(l.len() - 2..)?, 16).ok())
        .filter(|&b| b >> op_own::OPCODE_SHIFT <= 4 && matches!(op_own::format(b), 1 | 2))
        .count()
}
