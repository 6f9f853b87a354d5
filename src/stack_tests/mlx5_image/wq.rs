//! Receive WQs (`ibv_create_wq`) without a NIC: for every row of the layout table, a byte
//! image of rdma-core's `struct mlx5_rwq` exactly as that release lays it out (with the
//! wr_id table, doorbell record and WQE buffer it points to), read by [`read_rwq`] and
//! adopted by [`Mlx5Backend::adopt_rwq`] as after `mlx5dv_init_obj`, next to a QP on the
//! same CQ; the model plays the device, and the test checks completions, wr_ids and the
//! tail written back (what `mlx5_post_wq_recv`'s free-slot test sees). Corrupted images
//! are refused with the WQ and the field named.

use super::*;
use crate::sys::mlx5::{read_rwq, DvRwq, PrivateRwq};
use dvcq_mlx5_dv::model::build::ErrSpec;
use dvcq_uapi::mlx5::opcode::syndrome;
use dvcq_uapi::mlx5::rdma_core::MLX5_RSC_TYPE_RWQ;

const WQN: u32 = 0x3c4d;
const WQ_UIDX: u32 = 0x91;
/// The receive side of the RSS QP the WQ serves: what its CQEs name as the QPN.
const RSS_QPN: u32 = 0x2e;
const WQ: u32 = 16;
const WQ_STRIDE: u32 = 32;
/// `rq.offset`: where the WQEs start in the buffer (rdma-core puts them first).
const WQ_OFFSET: u32 = 0;
const IBV_WQT_RQ: u32 = 0;
/// Bytes of every WQ image: more than any row's `struct mlx5_rwq`, so that an image of one
/// row may be read with another's layout.
const RWQ_BYTES: usize = 512;

/// One release's receive-WQ image with its table, and `mlx5_post_wq_recv` over it.
struct RwqImage {
    layout: &'static Mlx5Layout,
    rwq: Block,
    wrid: Block,
    dbrec: Block,
    wqes: Block,
}

impl RwqImage {
    /// A WQ of the context and CQ at `ctx` and `cq`, as `create_wq` leaves it.
    fn new(layout: &'static Mlx5Layout, ctx: u64, cq: u64) -> RwqImage {
        let (l, w) = (&layout.rwq, &layout.wq);
        let img = RwqImage {
            layout,
            rwq: Block::new(RWQ_BYTES),
            wrid: Block::new(WQ as usize * 8),
            dbrec: Block::new(8),
            wqes: Block::new((WQ * WQ_STRIDE + WQ_OFFSET) as usize),
        };
        let r = &img.rwq;
        let pubf = |off: usize| l.ibv_wq + off;
        r.put64(pubf(crate::sys::mlx5::rwq::IBV_WQ_CONTEXT), ctx);
        r.put64(pubf(crate::sys::mlx5::rwq::IBV_WQ_CQ), cq);
        r.put32(pubf(crate::sys::mlx5::rwq::IBV_WQ_NUM), WQN);
        r.put32(pubf(crate::sys::mlx5::rwq::IBV_WQ_TYPE), IBV_WQT_RQ);
        r.put32(l.rsc_type, MLX5_RSC_TYPE_RWQ);
        r.put32(l.rsn, WQ_UIDX);
        r.put64(l.buf, img.wqes.addr(0));
        r.put64(l.rq + w.wrid, img.wrid.addr(0));
        r.put32(l.rq + w.wqe_cnt, WQ);
        r.put32(l.rq + w.max_post, WQ);
        r.put32(l.rq + w.wqe_shift, WQ_STRIDE.trailing_zeros());
        r.put32(l.rq + w.offset, WQ_OFFSET);
        r.put64(l.db, img.dbrec.addr(0));
        r.put64(l.pbuff, img.wqes.addr(WQ_OFFSET as usize));
        r.put64(l.recv_db, img.dbrec.addr(0));
        img
    }

    /// What `mlx5dv_init_obj(MLX5DV_OBJ_RWQ)` reports for this WQ.
    fn dv(&self) -> DvRwq {
        DvRwq {
            buf: self.wqes.addr(WQ_OFFSET as usize) as usize,
            dbrec: self.dbrec.addr(0) as usize,
            wqe_cnt: WQ,
            stride: WQ_STRIDE,
        }
    }

    fn ibv_wq(&self) -> *mut ffi::ibv_wq {
        self.rwq.ptr.wrapping_add(self.layout.rwq.ibv_wq).cast()
    }

    fn rq(&self, field: impl Fn(&Mlx5WqLayout) -> usize) -> usize {
        self.layout.rwq.rq + field(&self.layout.wq)
    }

    /// `mlx5_post_wq_recv` for one WR: `wrid[head & mask]`, `head += 1`. Returns the WQE
    /// counter its CQE will carry.
    fn post_recv(&self, wr_id: u64) -> u16 {
        let head = self.rwq.get32(self.rq(|w| w.head));
        self.wrid.put64((head & (WQ - 1)) as usize * 8, wr_id);
        self.rwq.put32(self.rq(|w| w.head), head + 1);
        head as u16
    }

    /// What `mlx5_post_wq_recv`'s overflow test lets a post add: `max_post - (head - tail)`.
    fn free_slots(&self) -> u32 {
        let head = self.rwq.get32(self.rq(|w| w.head));
        let tail = self.rwq.get32(self.rq(|w| w.tail));
        WQ - head.wrapping_sub(tail)
    }

    /// The attach as on hardware after `mlx5dv_init_obj`, against the CQ at `cq`.
    fn read(&self, dv: &DvRwq, layout: &Mlx5Layout, ctx: u64, cq: u64, cqe_v1: bool) -> Result<PrivateRwq, String> {
        // SAFETY: the image is a `struct mlx5_rwq` of `RWQ_BYTES` bytes around `ibv_wq()`, more than any row's `rwq.size`, the most `read_rwq` copies.
        unsafe { read_rwq(self.ibv_wq(), dv, layout, ctx as *mut _, cq as *mut _, cqe_v1) }
    }

    fn cqe(&self, wqe: u16, len: u32) -> build::Entry {
        wq_cqe(wqe, len)
    }
}

/// A CQE-version-1 backend with `qp` and `wq` adopted.
fn with_wq(model: &Mlx5Model, qp: &QpImage, wq: &RwqImage) -> Mlx5Backend {
    let mut b = backend(model, qp, true);
    b.adopt(qp.read(&qp.dv(), qp.layout, true).unwrap()).unwrap();
    let (ctx, cq) = (qp.ctx.addr(0), qp.cq.addr(0));
    let private = wq.read(&wq.dv(), wq.layout, ctx, cq, true).unwrap_or_else(|e| panic!("{e}"));
    b.adopt_rwq(wq.ibv_wq() as usize, private).unwrap();
    b
}

#[test]
fn every_release_s_wq_image_attaches_and_its_receives_complete_with_their_wr_ids() {
    for layout in &MLX5_LAYOUTS {
        let what = format!("v{}.{}", layout.first.0, layout.first.1);
        let qp = QpImage::new(layout, true);
        let wq = RwqImage::new(layout, qp.ctx.addr(0), qp.cq.addr(0));
        // A receive rdma-core posted before the attach.
        let early = wq.post_recv(0xe0);
        let mut model = Mlx5Model::new(ModelConfig::new(32)).unwrap();
        let mut b = with_wq(&model, &qp, &wq);
        assert_eq!(b.wqns(), [WQN], "{what}");
        model.push(&wq.cqe(early, 5)).unwrap();
        let got = poll_all(&mut b);
        let first: Vec<_> = got.iter().map(|c| (c.wr_id, c.opcode, c.byte_len, c.qp_num)).collect();
        assert_eq!(first, [(0xe0, WcOpcode::Recv, 5, RSS_QPN)], "{what}");
        assert_eq!(wq.free_slots(), WQ, "{what}: the receive's slot is free again");
        // Many laps of the WQ, its receives interleaved with the QP's.
        let mut next = 0x2000u64;
        for round in 0..3 * WQ {
            let w0 = wq.post_recv(next);
            let q0 = qp.post_recv(next + 1);
            let w1 = wq.post_recv(next + 2);
            assert_eq!(wq.free_slots(), WQ - 2, "{what} round {round}: the posts took their slots");
            model.push(&wq.cqe(w0, 10)).unwrap();
            model.push(&resp(true, q0, 11)).unwrap();
            model.push(&wq.cqe(w1, 12)).unwrap();
            let got = poll_all(&mut b);
            let ids: Vec<_> = got.iter().map(|c| (c.wr_id, c.status, c.byte_len, c.qp_num)).collect();
            assert_eq!(
                ids,
                [
                    (next, WcStatus::Success, 10, RSS_QPN),
                    (next + 1, WcStatus::Success, 11, QPN),
                    (next + 2, WcStatus::Success, 12, RSS_QPN)
                ],
                "{what} round {round}"
            );
            assert_eq!(wq.free_slots(), WQ, "{what} round {round}: rq.tail written back");
            assert_eq!(qp.free_slots(false), RQ, "{what} round {round}: the QP's rq.tail too");
            next += 0x10;
        }
    }
}

#[test]
fn a_wq_s_flushed_receives_complete_with_their_wr_ids_and_free_their_slots() {
    let layout = &MLX5_LAYOUTS[2];
    let qp = QpImage::new(layout, true);
    let wq = RwqImage::new(layout, qp.ctx.addr(0), qp.cq.addr(0));
    let mut model = Mlx5Model::new(ModelConfig::new(32)).unwrap();
    let mut b = with_wq(&model, &qp, &wq);
    let w: Vec<u16> = (0..3).map(|i| wq.post_recv(0x70 + i)).collect();
    model.push(&wq.cqe(w[0], 1)).unwrap();
    for &wqe_counter in &w[1..] {
        let spec = ErrSpec {
            qpn: RSS_QPN,
            wqe_counter,
            syndrome: syndrome::WR_FLUSH_ERR,
            srqn_uidx: WQ_UIDX,
            ..ErrSpec::default()
        };
        model.push(&build::err(spec)).unwrap();
    }
    let got = poll_all(&mut b);
    let ids: Vec<_> = got.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(ids, [(0x70, WcStatus::Success), (0x71, WcStatus::WrFlushErr), (0x72, WcStatus::WrFlushErr)]);
    assert_eq!(wq.free_slots(), WQ);
}

#[test]
fn a_wq_attached_twice_is_refused_and_nothing_changes() {
    let layout = &MLX5_LAYOUTS[3];
    let qp = QpImage::new(layout, true);
    let wq = RwqImage::new(layout, qp.ctx.addr(0), qp.cq.addr(0));
    let model = Mlx5Model::new(ModelConfig::new(32)).unwrap();
    let mut b = with_wq(&model, &qp, &wq);
    let again = wq.read(&wq.dv(), layout, qp.ctx.addr(0), qp.cq.addr(0), true).unwrap();
    assert_eq!(b.adopt_rwq(wq.ibv_wq() as usize, again).unwrap_err(), "wq 0x3c4d is attached to this CQ already");
    assert_eq!(b.wqns(), [WQN]);
}

/// Runs `read` on a WQ image `spoil` changed after it was built (and on what
/// `mlx5dv_init_obj` reported); returns the error.
fn wq_refused(layout: &'static Mlx5Layout, spoil: impl Fn(&RwqImage, &mut DvRwq)) -> String {
    let qp = QpImage::new(layout, true);
    let wq = RwqImage::new(layout, qp.ctx.addr(0), qp.cq.addr(0));
    let mut dv = wq.dv();
    spoil(&wq, &mut dv);
    wq.read(&dv, layout, qp.ctx.addr(0), qp.cq.addr(0), true).map(|_| ()).expect_err("a spoiled WQ image is read")
}

#[test]
fn corrupted_wq_images_are_refused_naming_the_wq_and_the_field() {
    for layout in &MLX5_LAYOUTS {
        let (l, w) = (&layout.rwq, &layout.wq);
        let rel = format!("rdma-core v{}.{}-v{}.{}", layout.first.0, layout.first.1, layout.last.0, layout.last.1);
        let e = wq_refused(layout, |_, dv| dv.wqe_cnt = 32);
        assert_eq!(e, "wq 0x3c4d: the private rq.wqe_cnt 16 is not mlx5dv_rwq's (32)");
        let e = wq_refused(layout, |wq, dv| {
            wq.rwq.put32(l.rq + w.wqe_cnt, 12);
            dv.wqe_cnt = 12;
        });
        assert_eq!(e, "wq 0x3c4d: rq.wqe_cnt 12 is not a power of two up to 65536");
        let e = wq_refused(layout, |_, dv| dv.dbrec += 8);
        assert!(e.starts_with("wq 0x3c4d: the private doorbell record (recv_db 0x") && e.ends_with(&rel), "{e}");
        let e = wq_refused(layout, |wq, _| wq.rwq.put64(l.db, wq.dbrec.addr(0) + 64));
        assert!(e.contains("is not mlx5dv_rwq's"), "{e}");
        let e = wq_refused(layout, |_, dv| dv.buf += 64);
        assert!(e.starts_with("wq 0x3c4d: the private WQE buffer (pbuff 0x"), "{e}");
        let e = wq_refused(layout, |wq, _| wq.rwq.put32(l.rq + w.offset, 64));
        assert!(e.starts_with("wq 0x3c4d: the private WQE buffer"), "{e}");
        let e = wq_refused(layout, |_, dv| dv.stride = 64);
        assert_eq!(e, "wq 0x3c4d: rq.wqe_shift 5 does not give mlx5dv_rwq's stride 64");
        let e = wq_refused(layout, |wq, _| wq.rwq.put32(l.rsc_type, 0));
        assert_eq!(e, format!("wq 0x3c4d: rsc.type is 0, not MLX5_RSC_TYPE_RWQ (3): not the struct mlx5_rwq of {rel}"));
        let e = wq_refused(layout, |wq, _| wq.rwq.put32(l.rsn, 1 << 24));
        assert_eq!(e, "wq 0x3c4d: the user index rsc.rsn 0x1000000 is wider than 24 bits");
        let e = wq_refused(layout, |wq, _| wq.rwq.put32(l.rq + w.head, WQ + 1));
        assert_eq!(e, "wq 0x3c4d: rq.head 17 and rq.tail 0 hold more than its 16 entries");
        let e = wq_refused(layout, |wq, _| wq.rwq.put64(l.rq + w.wrid, 0));
        assert_eq!(e, "wq 0x3c4d: the wr_id table pointer 0x0 is null or misaligned");
        let e = wq_refused(layout, |wq, _| wq.rwq.put32(l.ibv_wq + crate::sys::mlx5::rwq::IBV_WQ_TYPE, 1));
        assert!(e.starts_with("wq 0x3c4d: its type 1 is not IBV_WQT_RQ"), "{e}");
    }
}

#[test]
fn wqs_of_another_context_or_cq_or_on_a_version_0_context_are_refused() {
    let layout = &MLX5_LAYOUTS[0];
    let qp = QpImage::new(layout, true);
    let wq = RwqImage::new(layout, qp.ctx.addr(0), qp.cq.addr(0));
    let (ctx, cq) = (qp.ctx.addr(0), qp.cq.addr(0));
    let e = wq.read(&wq.dv(), layout, ctx + 8, cq, true).unwrap_err();
    assert_eq!(e, "wq 0x3c4d: it belongs to another device context");
    let e = wq.read(&wq.dv(), layout, ctx, cq + 8, true).unwrap_err();
    assert_eq!(e, format!("wq 0x3c4d: its CQ ({cq:#x}) is not the attached CQ ({:#x})", cq + 8));
    let e = wq.read(&wq.dv(), layout, ctx, cq, false).unwrap_err();
    assert!(e.starts_with("wq 0x3c4d: the context's CQEs are of version 0"), "{e}");
    // A backend of a version-0 context refuses one read for version 1.
    let model = Mlx5Model::new(ModelConfig::new(32)).unwrap();
    let mut b = backend(&model, &qp, false);
    let e = b.adopt_rwq(wq.ibv_wq() as usize, wq.read(&wq.dv(), layout, ctx, cq, true).unwrap()).unwrap_err();
    assert!(e.contains("CQEs of version 0"), "{e}");
    assert!(b.wqns().is_empty());
}

#[test]
fn another_release_s_wq_image_is_refused() {
    // Rows before v64 share one layout; v64's fields after `buf` are 8 bytes further on.
    for (a, b) in [(0, 3), (3, 0), (2, 3), (3, 2)] {
        let (built, read) = (&MLX5_LAYOUTS[a], &MLX5_LAYOUTS[b]);
        let qp = QpImage::new(built, true);
        let wq = RwqImage::new(built, qp.ctx.addr(0), qp.cq.addr(0));
        let e = wq.read(&wq.dv(), read, qp.ctx.addr(0), qp.cq.addr(0), true).unwrap_err();
        let rel = format!(
            "not the struct mlx5_rwq of rdma-core v{}.{}-v{}.{}",
            read.first.0, read.first.1, read.last.0, read.last.1
        );
        assert!(e.starts_with("wq 0x3c4d: ") && e.ends_with(&rel), "v{:?} read as v{:?}: {e}", built.first, read.first);
    }
}

#[test]
fn a_detached_wq_s_late_cqe_is_an_unknown_qp_and_a_new_wq_may_take_its_number() {
    for layout in &MLX5_LAYOUTS {
        let what = format!("v{}.{}", layout.first.0, layout.first.1);
        let qp = QpImage::new(layout, true);
        let wq = RwqImage::new(layout, qp.ctx.addr(0), qp.cq.addr(0));
        let mut model = Mlx5Model::new(ModelConfig::new(32)).unwrap();
        let mut b = with_wq(&model, &qp, &wq);
        let w = wq.post_recv(0x40);
        model.push(&wq.cqe(w, 3)).unwrap();
        assert_eq!(poll_all(&mut b).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x40], "{what}");
        // `ibv_destroy_wq` with a receive completed in the ring: forgotten first, so its
        // CQE names nothing and the WQ's memory is not read (the image is dropped first).
        let late = wq.post_recv(0x41);
        b.forget_rwq(wq.ibv_wq() as usize);
        assert!(b.wqns().is_empty(), "{what}");
        drop(wq);
        model.push(&wq_cqe(late, 4)).unwrap();
        // The QP adopted before the WQ keeps its slot and its receives.
        let q = qp.post_recv(0x42);
        model.push(&resp(true, q, 5)).unwrap();
        let got = poll_all(&mut b);
        assert_eq!(got.len(), 2, "{what}: {got:?}");
        assert_eq!(got[0].fault().map(|f| f.kind), Some(FaultKind::UnknownQp), "{what}: {got:?}");
        assert_eq!((got[1].wr_id, got[1].status, got[1].qp_num), (0x42, WcStatus::Success, QPN), "{what}");
        // A WQ made next takes the same number and user index, and completes as the first.
        let again = RwqImage::new(layout, qp.ctx.addr(0), qp.cq.addr(0));
        let p = again.read(&again.dv(), layout, qp.ctx.addr(0), qp.cq.addr(0), true).unwrap();
        b.adopt_rwq(again.ibv_wq() as usize, p).unwrap_or_else(|e| panic!("{what}: {e}"));
        let w = again.post_recv(0x43);
        model.push(&again.cqe(w, 6)).unwrap();
        let got = poll_all(&mut b);
        assert_eq!(got.iter().map(|c| (c.wr_id, c.qp_num)).collect::<Vec<_>>(), [(0x43, RSS_QPN)], "{what}");
        assert_eq!(again.free_slots(), WQ, "{what}: the new WQ's tail written back");
        // Forgetting a WQ never adopted changes nothing.
        b.forget_rwq(0x1000);
        assert_eq!(b.wqns(), [WQN], "{what}");
    }
}

/// A receive CQE of the WQ (by its user index) without an image to build it from.
fn wq_cqe(wqe: u16, len: u32) -> build::Entry {
    build::resp(cqe_opcode::RESP_SEND, RSS_QPN, wqe, len, 0).srqn_uidx(WQ_UIDX)
}
