//! CQs and QPs dvcq makes itself on an mlx5 device, without a NIC: the backend as
//! `Context::create_cq` attaches it (the poller told the CQ's format: CQE size,
//! compression), and QPs made on it queued for adoption, adopted by the next poll call
//! before it reads a CQE, and forgotten before they are destroyed, over the model's ring
//! and rdma-core's private structs laid out as each release lays them out.

use super::*;
use crate::backend::mlx5::own::Change;
use dvcq_mlx5_dv::model::compress::{Compression, Policy};
use dvcq_mlx5_dv::{CompLayout, CompressionConfig, MiniFormat};

/// The backend `attach_created` makes for a CQ made with `compression` and CQEs of
/// `STRIDE` bytes, sharing with dvcq's own QPs.
fn created<const STRIDE: usize>(
    model: &Mlx5Model,
    img: &QpImage,
    compression: Option<MiniFormat>,
) -> (Mlx5Backend, std::sync::Arc<crate::backend::mlx5::own::OwnQps>) {
    let mut cfg = cq_config(false);
    cfg.compression = compression.map(|format| CompressionConfig { layout: CompLayout::Basic, format });
    let ring = if STRIDE == 64 {
        Ring::C64(model.poller::<64>(dvcq_mlx5_dv::Registry::new(), cfg).unwrap())
    } else {
        Ring::C128(model.poller::<128>(dvcq_mlx5_dv::Registry::new(), cfg).unwrap())
    };
    let mut b = Mlx5Backend::new(ring, img.ctx.addr(0) as usize, img.cq.addr(0) as usize, img.layout, false, None);
    let own = b.share_with_own_qps();
    (b, own)
}

fn poll_by(b: &mut Mlx5Backend, batch: usize) -> Vec<Completion> {
    let mut out = vec![Completion::default(); batch];
    let mut all = Vec::new();
    loop {
        let n = b.poll(&mut out);
        if n == 0 {
            return all;
        }
        all.extend_from_slice(&out[..n]);
    }
}

#[test]
fn a_compressed_cq_polls_its_sessions_with_the_adopted_wr_ids_across_batches() {
    for layout in &MLX5_LAYOUTS {
        for format in [MiniFormat::Hash, MiniFormat::Csum, MiniFormat::CsumStridx] {
            let what = format!("v{}.{} {}", layout.first.0, layout.first.1, format.word());
            let img = QpImage::new(layout, false);
            let compression = Compression { layout: CompLayout::Basic, format, policy: Policy::Always };
            let mut model =
                Mlx5Model::new(ModelConfig { compression: Some(compression), ..ModelConfig::new(64) }).unwrap();
            let (mut b, own) = created::<64>(&model, &img, Some(format));
            own.lock().push(Change::AddQp(img.read(&img.dv(), layout, false).unwrap()));
            let mut next = 0x100u64;
            for round in 0..6 {
                // Two laps of the 8-deep RQ per round: the session outgrows the RQ and
                // the poll batch, and posts are made between polls.
                let mut want = Vec::new();
                for _ in 0..2 {
                    let w: Vec<u16> = (0..RQ as u64).map(|i| img.post_recv(next + i)).collect();
                    for (i, &w) in w.iter().enumerate() {
                        model.push(&resp(false, w, 100 + i as u32)).unwrap();
                    }
                    model.flush().unwrap();
                    want.extend((0..RQ as u64).map(|i| next + i));
                    let got = poll_by(&mut b, 5);
                    assert_eq!(
                        got.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
                        want[want.len() - 8..],
                        "{what} round {round}"
                    );
                    assert!(got.iter().all(|c| c.status == WcStatus::Success && c.opcode == WcOpcode::Recv), "{what}");
                    next += 0x10;
                }
                assert_eq!(img.free_slots(false), RQ, "{what} round {round}: rq.tail written back");
            }
        }
    }
}

#[test]
fn a_cq_of_128_byte_cqes_polls_adopted_qps() {
    let layout = &MLX5_LAYOUTS[3];
    let img = QpImage::new(layout, false);
    let mut model = Mlx5Model::new(ModelConfig { cqe_size: 128, ..ModelConfig::new(16) }).unwrap();
    let (mut b, own) = created::<128>(&model, &img, None);
    own.lock().push(Change::AddQp(img.read(&img.dv(), layout, false).unwrap()));
    for round in 0..10u64 {
        let s = img.post_send(0x40 + round, 1);
        let r = img.post_recv(0x80 + round);
        model.push(&req(false, s)).unwrap();
        model.push(&resp(false, r, 3)).unwrap();
        let got: Vec<u64> = poll_by(&mut b, 4).iter().map(|c| c.wr_id).collect();
        assert_eq!(got, [0x40 + round, 0x80 + round]);
    }
}

#[test]
fn queued_qps_are_adopted_before_the_poll_reads_a_cqe_and_forgotten_before_destroy() {
    let layout = &MLX5_LAYOUTS[2];
    let img = QpImage::new(layout, false);
    let mut model = Mlx5Model::new(ModelConfig::new(32)).unwrap();
    let (mut b, own) = created::<64>(&model, &img, None);
    // Posted and completed before any poll: the queued adoption comes first.
    own.lock().push(Change::AddQp(img.read(&img.dv(), layout, false).unwrap()));
    let w = img.post_send(0x11, 1);
    model.push(&req(false, w)).unwrap();
    assert_eq!(poll_by(&mut b, 4).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x11]);
    assert_eq!(img.free_slots(true), SQ);
    // Destroyed: forgotten first, so its late CQE is an unknown QP and its memory is not
    // touched (the image is dropped before the poll).
    let w = img.post_send(0x12, 1);
    own.forget_qp(QPN);
    drop(img);
    model.push(&req(false, w)).unwrap();
    let got = poll_by(&mut b, 4);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].fault().map(|f| (f.kind, f.value)), Some((FaultKind::UnknownQp, QPN)));
    // A new QP may take the same number: removed, then added, in queue order.
    let again = QpImage::new(layout, false);
    // The new image has another context and CQ: a backend expects its own; here the
    // check is the registry's, so read it against the new image's own stand-ins.
    let p = again.read(&again.dv(), layout, false).unwrap();
    own.lock().push(Change::AddQp(p));
    let w = again.post_send(0x13, 1);
    model.push(&req(false, w)).unwrap();
    assert_eq!(poll_by(&mut b, 4).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x13]);
    assert!(b.take_error().is_none());
    // A QP queued twice: the second adoption fails at the poll and is reported once.
    own.lock().push(Change::AddQp(again.read(&again.dv(), layout, false).unwrap()));
    poll_by(&mut b, 4);
    assert_eq!(b.take_error().as_deref(), Some("qp 0x1a2b is attached to this CQ already"));
    assert!(b.take_error().is_none());
}
