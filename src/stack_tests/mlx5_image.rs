//! The mlx5 attach without a NIC: for every row of the private-layout table, a byte image
//! of rdma-core's `struct mlx5_qp` exactly as that release lays it out (and the wr_id
//! tables, doorbell record and WQE buffer it points to), over the mlx5 model's CQ ring.
//! The attach goes through [`read_qp`] and [`Mlx5Backend::adopt`], the code that runs on
//! hardware after `mlx5dv_init_obj`; the test then plays rdma-core's post verbs on the
//! image and the device on the model, and checks completions, wr_ids and the tails
//! written back (what rdma-core's post-side free-slot test sees).
//!
//! The CQ the same way: a byte image of rdma-core's `struct mlx5_cq` over the model's ring
//! and doorbell record, read by [`read_cq`], and the poller opened by [`poller_on`] as after
//! `mlx5dv_init_obj`, its UAR register mapped as MMIO over the model's UAR page; an arm
//! then leaves in the record and the UAR exactly what rdma-core's `mlx5_arm_cq` would, with
//! dvcq's consumer counter and rdma-core's `arm_sn`.

use crate::backend::mlx5::Mlx5Backend;
use crate::sys::cq::VerbsCq;
use crate::sys::ffi;
use crate::sys::mlx5::ring::{cq_config, Ring};
use crate::sys::mlx5::*;
use core::mem::offset_of;
use dvcq_mlx5_dv::model::{build, Mlx5Model, ModelConfig};
use dvcq_mlx5_dv::ForeignWq;
use dvcq_provider::KeepAlive;
use dvcq_provider::{Completion, FaultKind, WcOpcode, WcStatus};
use dvcq_uapi::mlx5::opcode::{cqe_opcode, wqe_opcode};
use dvcq_uapi::mlx5::rdma_core::MLX5_LAYOUTS;
use dvcq_uapi::mlx5::rdma_core::{
    Mlx5Layout, Mlx5WqLayout, IBV_QP_QP_NUM_OFFSET, MLX5_CQ_FLAGS_DV_OWNED, MLX5_RSC_TYPE_QP,
};
use std::sync::Arc;

mod own;
mod srq;
mod wq;

const QPN: u32 = 0x1a2b;
const UIDX: u32 = 0x77;
const SQ: u32 = 16;
const RQ: u32 = 8;
const RQ_STRIDE: u32 = 16;
const IBV_QPT_RC: u32 = 2;

/// Memory rdma-core would own, zeroed, 8-aligned, reached only through the one pointer
/// taken from it (so the attach's raw reads and the test's raw writes never alias a
/// reference). The pointer is the start of a block of the C allocator, as rdma-core's
/// `calloc` gives (Rust's default allocator takes an 8-aligned zeroed `Vec` from
/// `calloc`), which the attach's `malloc_usable_size` check asks of it.
struct Block {
    _mem: Vec<u64>,
    ptr: *mut u8,
}

impl Block {
    fn new(bytes: usize) -> Block {
        let mut mem = vec![0u64; bytes.div_ceil(8).max(1)];
        let ptr = mem.as_mut_ptr().cast::<u8>();
        Block { _mem: mem, ptr }
    }
    fn addr(&self, off: usize) -> u64 {
        self.ptr.wrapping_add(off) as u64
    }
    fn put32(&self, off: usize, v: u32) {
        // SAFETY: a test-owned block, `off` inside it (the layout's fields fit the struct, checked in uapi), 4-aligned; nothing else uses the block concurrently.
        unsafe { self.ptr.add(off).cast::<u32>().write_volatile(v) }
    }
    fn put64(&self, off: usize, v: u64) {
        // SAFETY: as `put32`, 8-aligned.
        unsafe { self.ptr.add(off).cast::<u64>().write_volatile(v) }
    }
    fn get32(&self, off: usize) -> u32 {
        // SAFETY: as `put32`.
        unsafe { self.ptr.add(off).cast::<u32>().read_volatile() }
    }
    fn put16(&self, off: usize, v: u16) {
        // SAFETY: as `put32`, 2-aligned.
        unsafe { self.ptr.add(off).cast::<u16>().write_volatile(v) }
    }
    fn get16(&self, off: usize) -> u16 {
        // SAFETY: as `put16`.
        unsafe { self.ptr.add(off).cast::<u16>().read_volatile() }
    }
    fn get64(&self, off: usize) -> u64 {
        // SAFETY: as `put64`.
        unsafe { self.ptr.add(off).cast::<u64>().read_volatile() }
    }
}

/// One release's QP image with its tables, and rdma-core's post verbs over it.
struct QpImage {
    layout: &'static Mlx5Layout,
    qp: Block,
    sq_wrid: Block,
    sq_wqe_head: Block,
    sq_wr_data: Block,
    rq_wrid: Block,
    dbrec: Block,
    wqes: Block,
    /// Stand-ins for the `ibv_context` and `ibv_cq` the QP names.
    ctx: Block,
    cq: Block,
}

impl QpImage {
    fn new(layout: &'static Mlx5Layout, cqe_v1: bool) -> QpImage {
        let (l, w) = (&layout.qp, &layout.wq);
        let img = QpImage {
            layout,
            qp: Block::new(l.size),
            sq_wrid: Block::new(SQ as usize * 8),
            sq_wqe_head: Block::new(SQ as usize * 4),
            sq_wr_data: Block::new(SQ as usize * 4),
            rq_wrid: Block::new(RQ as usize * 8),
            dbrec: Block::new(8),
            wqes: Block::new((RQ * RQ_STRIDE + SQ * 64) as usize),
            ctx: Block::new(8),
            cq: Block::new(8),
        };
        let q = &img.qp;
        // The public ibv_qp inside the private struct.
        let pubf = |off: usize| l.ibv_qp + off;
        q.put64(pubf(IBV_QP_CONTEXT), img.ctx.addr(0));
        q.put64(pubf(IBV_QP_SEND_CQ), img.cq.addr(0));
        q.put64(pubf(IBV_QP_RECV_CQ), img.cq.addr(0));
        q.put32(pubf(IBV_QP_QP_NUM_OFFSET), QPN);
        q.put32(pubf(IBV_QP_TYPE), IBV_QPT_RC);
        // rdma-core's own fields, as create_qp leaves them.
        q.put32(l.rsc_type, MLX5_RSC_TYPE_QP);
        q.put32(l.rsn, if cqe_v1 { UIDX } else { QPN });
        q.put64(l.ibv_qp_ptr, q.addr(l.ibv_qp));
        q.put64(l.buf, img.wqes.addr(0));
        let sq_off = RQ * RQ_STRIDE;
        q.put64(l.sq_start, img.wqes.addr(sq_off as usize));
        q.put64(l.db, img.dbrec.addr(0));
        for (at, cnt, shift, offset, wrid, wqe_head) in [
            (l.sq, SQ, 6, sq_off, img.sq_wrid.addr(0), img.sq_wqe_head.addr(0)),
            (l.rq, RQ, RQ_STRIDE.trailing_zeros(), 0, img.rq_wrid.addr(0), 0),
        ] {
            q.put64(at + w.wrid, wrid);
            q.put64(at + w.wqe_head, wqe_head);
            q.put32(at + w.wqe_cnt, cnt);
            q.put32(at + w.max_post, cnt);
            q.put32(at + w.wqe_shift, shift);
            q.put32(at + w.offset, offset);
        }
        q.put64(l.sq + w.wr_data, img.sq_wr_data.addr(0));
        img
    }

    /// What `mlx5dv_init_obj(MLX5DV_OBJ_QP)` reports for this QP.
    fn dv(&self) -> DvQp {
        DvQp {
            dbrec: self.dbrec.addr(0) as usize,
            sq_buf: self.wqes.addr((RQ * RQ_STRIDE) as usize) as usize,
            sq_wqe_cnt: SQ,
            sq_stride: 64,
            rq_buf: self.wqes.addr(0) as usize,
            rq_wqe_cnt: RQ,
            rq_stride: RQ_STRIDE,
        }
    }

    fn ibv_qp(&self) -> *mut ffi::ibv_qp {
        self.qp.ptr.wrapping_add(self.layout.qp.ibv_qp).cast()
    }

    fn wq(&self, field: impl Fn(&Mlx5WqLayout) -> usize, send: bool) -> usize {
        (if send { self.layout.qp.sq } else { self.layout.qp.rq }) + field(&self.layout.wq)
    }

    /// `mlx5_post_send` for one WR of `bbs` blocks: `wrid[idx]`, `wqe_head[idx] = head`,
    /// `cur_post += bbs`, `head += 1`. Returns the WQE index its CQE will carry.
    fn post_send(&self, wr_id: u64, bbs: u32) -> u16 {
        let cur = self.qp.get32(self.wq(|w| w.cur_post, true));
        let head = self.qp.get32(self.wq(|w| w.head, true));
        let idx = cur & (SQ - 1);
        self.sq_wrid.put64(idx as usize * 8, wr_id);
        self.sq_wqe_head.put32(idx as usize * 4, head);
        self.sq_wr_data.put32(idx as usize * 4, 0);
        self.qp.put32(self.wq(|w| w.cur_post, true), cur + bbs);
        self.qp.put32(self.wq(|w| w.head, true), head + 1);
        cur as u16
    }

    /// `mlx5_post_recv` for one WR: `wrid[head & mask]`, `head += 1`. Returns the WQE
    /// counter its CQE will carry.
    fn post_recv(&self, wr_id: u64) -> u16 {
        let head = self.qp.get32(self.wq(|w| w.head, false));
        self.rq_wrid.put64((head & (RQ - 1)) as usize * 8, wr_id);
        self.qp.put32(self.wq(|w| w.head, false), head + 1);
        head as u16
    }

    /// What `mlx5_wq_overflow` lets a post add: `max_post - (head - tail)`.
    fn free_slots(&self, send: bool) -> u32 {
        let head = self.qp.get32(self.wq(|w| w.head, send));
        let tail = self.qp.get32(self.wq(|w| w.tail, send));
        let max = self.qp.get32(self.wq(|w| w.max_post, send));
        max - head.wrapping_sub(tail)
    }

    fn set_tail(&self, send: bool, v: u32) {
        self.qp.put32(self.wq(|w| w.tail, send), v);
    }

    /// The attach as on hardware after `mlx5dv_init_obj`.
    fn read(&self, dv: &DvQp, layout: &Mlx5Layout, cqe_v1: bool) -> Result<PrivateQp, String> {
        // SAFETY: the image is a `struct mlx5_qp` of `self.layout.qp.size` bytes around `ibv_qp()`; a `layout` of another row reads at most its own size, which the test only passes for rows no larger than the image (see `another_release_s_image`).
        unsafe { read_qp(self.ibv_qp(), dv, layout, self.ctx.ptr.cast(), self.cq.ptr.cast(), cqe_v1) }
    }
}

fn backend(model: &Mlx5Model, img: &QpImage, cqe_v1: bool) -> Mlx5Backend {
    let poller = model.poller::<64>(dvcq_mlx5_dv::Registry::new(), cq_config(cqe_v1)).unwrap();
    Mlx5Backend::new(Ring::C64(poller), img.ctx.addr(0) as usize, img.cq.addr(0) as usize, img.layout, cqe_v1, None)
}

fn poll_all(b: &mut Mlx5Backend) -> Vec<Completion> {
    let mut out = [Completion::default(); 8];
    let mut all = Vec::new();
    loop {
        let n = b.poll(&mut out);
        if n == 0 {
            return all;
        }
        all.extend_from_slice(&out[..n]);
    }
}

fn req(v1: bool, wqe: u16) -> build::Entry {
    let e = build::req(QPN, wqe, wqe_opcode::SEND, 0);
    if v1 {
        e.srqn_uidx(UIDX)
    } else {
        e
    }
}

fn resp(v1: bool, wqe: u16, len: u32) -> build::Entry {
    let e = build::resp(cqe_opcode::RESP_SEND, QPN, wqe, len, 0);
    if v1 {
        e.srqn_uidx(UIDX)
    } else {
        e
    }
}

#[test]
fn every_release_s_qp_image_attaches_and_its_posts_complete_with_their_wr_ids() {
    for layout in &MLX5_LAYOUTS {
        for v1 in [false, true] {
            let what = format!("v{}.{} cqe v{}", layout.first.0, layout.first.1, u8::from(v1));
            let img = QpImage::new(layout, v1);
            // Work rdma-core posted and polled before the attach: a send retired, a
            // receive still outstanding.
            img.post_send(0xa0, 1);
            img.set_tail(true, 1);
            let early_recv = img.post_recv(0xb0);
            let mut model = Mlx5Model::new(ModelConfig::new(32)).unwrap();
            let mut b = backend(&model, &img, v1);
            let private = img.read(&img.dv(), layout, v1).unwrap_or_else(|e| panic!("{what}: {e}"));
            b.adopt(private).unwrap();

            model.push(&resp(v1, early_recv, 7)).unwrap();
            let got = poll_all(&mut b);
            assert_eq!(got.len(), 1, "{what}");
            assert_eq!((got[0].wr_id, got[0].opcode, got[0].byte_len), (0xb0, WcOpcode::Recv, 7), "{what}");
            assert_eq!(img.free_slots(false), RQ, "{what}: the receive's slot is free again");

            // Many laps of both queues: an unsignaled send and a signaled two-block one
            // per round (one CQE retires both), and two receives.
            let mut next = 0x1000u64;
            for round in 0..40 {
                img.post_send(next, 1);
                let signaled = img.post_send(next + 1, 2);
                let r0 = img.post_recv(next + 2);
                let r1 = img.post_recv(next + 3);
                assert_eq!(img.free_slots(true), SQ - 2, "{what} round {round}: the posts took their slots");
                model.push(&req(v1, signaled)).unwrap();
                model.push(&resp(v1, r0, 64)).unwrap();
                model.push(&resp(v1, r1, 65)).unwrap();
                let got = poll_all(&mut b);
                let ids: Vec<(u64, WcStatus, u32)> = got.iter().map(|c| (c.wr_id, c.status, c.qp_num)).collect();
                assert_eq!(
                    ids,
                    [
                        (next + 1, WcStatus::Success, QPN),
                        (next + 2, WcStatus::Success, QPN),
                        (next + 3, WcStatus::Success, QPN)
                    ],
                    "{what} round {round}"
                );
                assert_eq!(img.free_slots(true), SQ, "{what} round {round}: sq.tail written back");
                assert_eq!(img.free_slots(false), RQ, "{what} round {round}: rq.tail written back");
                next += 0x10;
            }
        }
    }
}

#[test]
fn completions_wait_for_the_poll_that_sees_their_cqe_and_tails_only_move_for_completed_work() {
    let layout = &MLX5_LAYOUTS[1];
    let img = QpImage::new(layout, false);
    let mut model = Mlx5Model::new(ModelConfig::new(32)).unwrap();
    let mut b = backend(&model, &img, false);
    b.adopt(img.read(&img.dv(), layout, false).unwrap()).unwrap();
    let w: Vec<u16> = (0..4).map(|i| img.post_send(0x500 + i, 1)).collect();
    assert_eq!(poll_all(&mut b).len(), 0);
    assert_eq!(img.free_slots(true), SQ - 4, "nothing completed, nothing freed");
    // The second signaled WQE retires the first two; the other two stay outstanding.
    model.push(&req(false, w[1])).unwrap();
    let got = poll_all(&mut b);
    assert_eq!(got.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x501]);
    assert_eq!(img.free_slots(true), SQ - 2);
    // A post after the poll is picked up by the next one.
    let late = img.post_send(0x600, 1);
    model.push(&req(false, late)).unwrap();
    assert_eq!(poll_all(&mut b).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x600]);
    assert_eq!(img.free_slots(true), SQ);
}

#[test]
fn a_cqe_of_a_qp_nobody_attached_is_a_fault_item_and_the_rest_still_polls() {
    let layout = &MLX5_LAYOUTS[0];
    let img = QpImage::new(layout, false);
    let mut model = Mlx5Model::new(ModelConfig::new(32)).unwrap();
    let mut b = backend(&model, &img, false);
    b.adopt(img.read(&img.dv(), layout, false).unwrap()).unwrap();
    let w = img.post_send(0x77, 1);
    model.push(&build::req(QPN + 1, 0, wqe_opcode::SEND, 0)).unwrap();
    model.push(&req(false, w)).unwrap();
    let got = poll_all(&mut b);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].fault_kind, FaultKind::UnknownQp);
    assert_eq!(got[1].wr_id, 0x77);
}

/// Runs `read` on an image `spoil` changed after it was built; returns the error.
fn refused(layout: &'static Mlx5Layout, spoil: impl Fn(&QpImage, &mut DvQp)) -> String {
    let img = QpImage::new(layout, false);
    let mut dv = img.dv();
    spoil(&img, &mut dv);
    img.read(&dv, layout, false).expect_err("a spoiled image attaches")
}

#[test]
fn corrupted_images_are_refused_naming_the_qp_and_the_field() {
    for layout in &MLX5_LAYOUTS {
        let sq_cnt = layout.qp.sq + layout.wq.wqe_cnt;
        let e = refused(layout, |img, _| img.qp.put32(sq_cnt, 32));
        assert_eq!(e, "qp 0x1a2b: the private sq.wqe_cnt 32 is not mlx5dv_qp's (16)");
        let e = refused(layout, |_, dv| dv.rq_wqe_cnt = 16);
        assert_eq!(e, "qp 0x1a2b: the private rq.wqe_cnt 8 is not mlx5dv_qp's (16)");
        let e = refused(layout, |_, dv| dv.dbrec += 64);
        assert!(e.starts_with("qp 0x1a2b: the private doorbell record 0x"), "{e}");
        let e = refused(layout, |img, _| img.qp.put64(layout.qp.ibv_qp_ptr, 0x1000));
        assert!(e.contains("ibv_qp pointer is 0x1000, not the QP"), "{e}");
        assert!(
            e.ends_with(&format!(
                "not the struct mlx5_qp of rdma-core v{}.{}-v{}.{}",
                layout.first.0, layout.first.1, layout.last.0, layout.last.1
            )),
            "{e}"
        );
        let e = refused(layout, |_, dv| dv.rq_buf += 4096);
        assert!(e.contains("the private rq buffer 0x"), "{e}");
        let e = refused(layout, |img, _| img.qp.put32(layout.qp.sq + layout.wq.wqe_shift, 7));
        assert_eq!(e, "qp 0x1a2b: sq.wqe_shift 7 does not give mlx5dv_qp's stride 64");
        let e = refused(layout, |img, _| img.qp.put64(layout.qp.sq + layout.wq.wrid, 0));
        assert!(e.contains("sq's tables (wrid 0x0"), "{e}");
        let e = refused(layout, |img, _| img.qp.put32(layout.qp.rsn, QPN + 1));
        assert_eq!(e, "qp 0x1a2b: rsc.rsn 0x1a2c is not the QPN on a CQE-version-0 context");
        let e = refused(layout, |img, _| img.qp.put32(layout.qp.rsc_type, 4));
        assert_eq!(e, "qp 0x1a2b: rsc.type is 4, not MLX5_RSC_TYPE_QP (0)");
    }
}

#[test]
fn qps_of_another_context_or_cq_are_refused_and_one_on_an_srq_names_it() {
    let layout = &MLX5_LAYOUTS[2];
    let pubf = |off: usize| layout.qp.ibv_qp + off;
    let e = refused(layout, |img, _| img.qp.put64(pubf(IBV_QP_CONTEXT), 0x40));
    assert_eq!(e, "qp 0x1a2b: it belongs to another device context");
    let e = refused(layout, |img, _| {
        img.qp.put64(pubf(IBV_QP_SEND_CQ), 0x80);
        img.qp.put64(pubf(IBV_QP_RECV_CQ), 0x88);
    });
    assert!(e.starts_with("qp 0x1a2b: neither its send CQ (0x80) nor its receive CQ (0x88) is the attached CQ"), "{e}");
    // A QP on an SRQ is read (srq.rs adopts both); its SRQ is named for the attach.
    let img = QpImage::new(layout, false);
    img.qp.put64(pubf(IBV_QP_SRQ), 0x90);
    img.qp.put32(layout.qp.rq + layout.wq.wqe_cnt, 0);
    let p = img.read(&DvQp { rq_wqe_cnt: 0, ..img.dv() }, layout, false).unwrap();
    assert_eq!((p.srq, p.rq.is_none()), (Some(0x90), true));
}

#[test]
fn another_release_s_image_is_refused() {
    // Each row's image read with the QP layout of the row before it (which is no larger),
    // where the two differ (v45-v47 and v48-v63 differ in their SRQs only).
    for w in MLX5_LAYOUTS.windows(2) {
        let (older, newer) = (&w[0], &w[1]);
        assert!(older.qp.size <= newer.qp.size);
        if older.qp == newer.qp {
            assert_ne!(older.srq, newer.srq, "rows differ somewhere");
            continue;
        }
        let img = QpImage::new(newer, false);
        let e = img.read(&img.dv(), older, false).expect_err("a wrong release attaches");
        // v44 and v45 differ at the back pointer; v45 and v64 only from `buf` on, where
        // the doorbell record is the first field compared.
        let caught = e.contains("not the struct mlx5_qp of rdma-core") || e.contains("is not mlx5dv_qp's");
        assert!(caught, "v{}.{} read as v{}.{}: {e}", newer.first.0, newer.first.1, older.first.0, older.first.1);
    }
    assert!(Mlx5Layout::for_release(43).is_none() && Mlx5Layout::for_release(65).is_none());
    assert_eq!(crate::backend::mlx5::covered(), "v44.0-v44.12, v45.0-v47.9, v48.0-v63.1, v64.0-v64.0");
}

#[test]
fn a_qp_attached_twice_or_completing_on_one_queue_only() {
    let layout = &MLX5_LAYOUTS[1];
    let img = QpImage::new(layout, false);
    let model = Mlx5Model::new(ModelConfig::new(8)).unwrap();
    let mut b = backend(&model, &img, false);
    b.adopt(img.read(&img.dv(), layout, false).unwrap()).unwrap();
    let e = b.adopt(img.read(&img.dv(), layout, false).unwrap()).unwrap_err();
    assert_eq!(e, "qp 0x1a2b is attached to this CQ already");
    // A QP whose receive CQ is another one: only its send queue is adopted here.
    let other = QpImage::new(layout, false);
    other.qp.put64(layout.qp.ibv_qp + IBV_QP_RECV_CQ, 0x99);
    let p = other.read(&other.dv(), layout, false).unwrap();
    assert!(p.sq.is_some() && p.rq.is_none());
}

#[test]
fn the_generic_backend_may_take_over_only_until_the_first_cqe_is_consumed() {
    let layout = &MLX5_LAYOUTS[0];
    let img = QpImage::new(layout, false);
    let mut model = Mlx5Model::new(ModelConfig::new(8)).unwrap();
    let mut b = backend(&model, &img, false);
    assert!(!b.can_fall_back(), "BackendChoice::Direct: never");
    b.allow_fallback(true);
    b.adopt(img.read(&img.dv(), layout, false).unwrap()).unwrap();
    assert_eq!(poll_all(&mut b).len(), 0);
    assert!(b.can_fall_back(), "an empty poll consumes nothing");
    let w = img.post_send(1, 1);
    model.push(&req(false, w)).unwrap();
    assert_eq!(poll_all(&mut b).len(), 1);
    assert!(!b.can_fall_back(), "rdma-core's consumer index is stale now");
}

#[test]
fn inline_scattered_receives_land_in_the_attached_regions_only() {
    let layout = &MLX5_LAYOUTS[1];
    let img = QpImage::new(layout, false);
    let mut model = Mlx5Model::new(ModelConfig::new(8)).unwrap();
    // Declared before the backend, so it outlives the region the backend holds.
    let buf = Block::new(256);
    let mut b = backend(&model, &img, false);
    b.adopt(img.read(&img.dv(), layout, false).unwrap()).unwrap();
    const LKEY: u32 = 0x1234;
    // The receive WQE rdma-core writes: one data segment {byte_count, lkey, addr}, big
    // endian, in the RQ's slot.
    let post = |wr_id: u64, at: usize| {
        let w = img.post_recv(wr_id);
        let seg = (w as u32 & (RQ - 1)) as usize * RQ_STRIDE as usize;
        img.wqes.put32(seg, 64u32.to_be());
        img.wqes.put32(seg + 4, LKEY.to_be());
        img.wqes.put64(seg + 8, buf.addr(at).to_be());
        w
    };
    let data: Vec<u8> = (1..=20).collect();
    // No region named yet: the copy is refused, never made.
    let w = post(0x51, 0);
    model.push(&build::resp(cqe_opcode::RESP_SEND, QPN, w, 0, 0).inline(&data)).unwrap();
    let got = poll_all(&mut b);
    assert_eq!((got[0].wr_id, got[0].status), (0x51, WcStatus::LocProtErr));
    assert_eq!(buf.get32(0), 0, "nothing written outside a region");
    // SAFETY: the test's block outlives the backend (declared before it), and the test reads it only between polls, on the polling thread.
    let region = unsafe { dvcq_provider::MemoryRegion::new(buf.ptr, 256, LKEY) }.unwrap();
    b.add_region(region).unwrap();
    let w = post(0x52, 64);
    model.push(&build::resp(cqe_opcode::RESP_SEND, QPN, w, 0, 0).inline(&data)).unwrap();
    let got = poll_all(&mut b);
    assert_eq!((got[0].wr_id, got[0].status, got[0].byte_len), (0x52, WcStatus::Success, 20));
    assert_eq!(buf.get32(64), u32::from_ne_bytes([1, 2, 3, 4]), "the data is where the WQE pointed");
    assert_eq!(buf.get32(80), u32::from_ne_bytes([17, 18, 19, 20]));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

    /// Whatever bytes rdma-core's struct holds, reading it never panics, and what it
    /// accepts agrees with every public fact it was checked against.
    #[test]
    fn garbage_in_the_private_struct_is_refused_or_agrees_with_the_public_facts(
        row in 0..MLX5_LAYOUTS.len(),
        spoils in proptest::collection::vec((0usize..1024, proptest::prelude::any::<u8>()), 1..8),
        v1 in proptest::prelude::any::<bool>(),
    ) {
        let layout = &MLX5_LAYOUTS[row];
        let img = QpImage::new(layout, v1);
        for (at, byte) in spoils {
            let at = at % layout.qp.size;
            let word = img.qp.get32(at & !3);
            let shift = (at % 4) * 8;
            img.qp.put32(at & !3, (word & !(0xff << shift)) | (u32::from(byte) << shift));
        }
        let dv = img.dv();
        if let Ok(p) = img.read(&dv, layout, v1) {
            proptest::prop_assert_eq!(p.wqe_cnt, (dv.sq_wqe_cnt, dv.rq_wqe_cnt));
            if !v1 {
                proptest::prop_assert_eq!(p.rsn, p.qpn);
            }
            proptest::prop_assert!(p.rsn <= 0xff_ffff);
            let sq = p.sq.as_ref().map(|q| q.wqe_cnt);
            proptest::prop_assert!(sq.is_none() || sq == Some(dv.sq_wqe_cnt));
        }
    }
}

#[test]
fn an_unknown_or_unreadable_release_is_refused_with_the_ranges_covered() {
    use crate::backend::mlx5::layout_for;
    use crate::sys::release::Release;
    let e = layout_for("mlx5_0", Some(Release { major: 43, minor: 0 })).unwrap_err();
    assert_eq!(
        e.to_string(),
        "mlx5_0: rdma-core v43.0 is not in dvcq's mlx5 layout table (v44.0-v44.12, v45.0-v47.9, v48.0-v63.1, v64.0-v64.0)"
    );
    assert!(matches!(
        layout_for("mlx5_0", Some(Release { major: 65, minor: 0 })),
        Err(crate::Error::UnknownRelease { .. })
    ));
    let e = layout_for("mlx5_0", None).unwrap_err();
    assert!(
        e.to_string().starts_with("mlx5_0: direct mlx5 attach refused: the rdma-core release could not be read"),
        "{e}"
    );
    for (major, first) in [(44, (44, 0)), (46, (45, 0)), (52, (48, 0)), (64, (64, 0))] {
        assert_eq!(layout_for("mlx5_0", Some(Release { major, minor: 3 })).unwrap().first, first);
    }
}

#[test]
fn an_opcode_rdma_core_recorded_for_a_umr_wqe_is_the_completion_s() {
    let layout = &MLX5_LAYOUTS[2];
    let img = QpImage::new(layout, false);
    let mut model = Mlx5Model::new(ModelConfig::new(8)).unwrap();
    let mut b = backend(&model, &img, false);
    b.adopt(img.read(&img.dv(), layout, false).unwrap()).unwrap();
    // ibv_post_send of a local invalidate: a UMR WQE, `wr_data[idx] = IBV_WC_LOCAL_INV`.
    let w = img.post_send(0x61, 1);
    img.sq_wr_data.put32(w as usize * 4, WcOpcode::LocalInv as u32);
    let send = img.post_send(0x62, 1);
    model.push(&build::req(QPN, w, wqe_opcode::UMR, 0)).unwrap();
    model.push(&req(false, send)).unwrap();
    let got = poll_all(&mut b);
    assert_eq!(
        got.iter().map(|c| (c.wr_id, c.opcode)).collect::<Vec<_>>(),
        [(0x61, WcOpcode::LocalInv), (0x62, WcOpcode::Send)]
    );
}

/// rdma-core's `struct mlx5_cq` of one release around the model's ring, as `mlx5_create_cq`
/// leaves it, with the public `mlx5dv_cq` facts beside it.
struct CqImage {
    layout: &'static Mlx5Layout,
    cq: Block,
}

impl CqImage {
    /// The image over `model`'s ring (the active buffer `buf_b`, as after one resize), its
    /// record, `arm_sn` and a stale `cons_index` as the application left them.
    fn new(layout: &'static Mlx5Layout, model: &Mlx5Model, arm_sn: u32, cons_index: u32) -> CqImage {
        let l = &layout.cq;
        let cq = Block::new(l.size);
        cq.put32(l.cqn, model.config().cqn);
        cq.put32(l.cons_index, cons_index);
        cq.put64(l.dbrec, model.dbrec().as_ptr() as u64);
        cq.put64(l.buf_b, model.ring_mem().as_ptr() as u64);
        cq.put64(l.active_buf, cq.addr(l.buf_b));
        cq.put32(l.arm_sn, arm_sn);
        cq.put32(l.cqe_sz, model.config().cqe_size);
        // The public ibv_cq.cqe: the ring's slots less one.
        cq.put32(offset_of!(ffi::ibv_cq, cqe), model.config().entries - 1);
        CqImage { layout, cq }
    }

    /// `mlx5dv_init_obj(MLX5DV_OBJ_CQ)` on the image as rdma-core's `mlx5dv_get_cq` runs
    /// it: `flags |= MLX5_CQ_FLAGS_DV_OWNED`, then the public facts (here `dv`).
    fn init_obj(&self, dv: DvCq) -> Result<DvCq, String> {
        let at = self.layout.cq.flags;
        self.cq.put32(at, self.cq.get32(at) | MLX5_CQ_FLAGS_DV_OWNED);
        Ok(dv)
    }

    fn flags(&self) -> u32 {
        self.cq.get32(self.layout.cq.flags)
    }

    /// The attach's CQ side over the image, with `init` for `mlx5dv_init_obj`.
    fn attach(
        &self,
        model: &Mlx5Model,
        depth: u32,
        created: Option<crate::backend::mlx5::Created>,
        init: impl FnOnce() -> Result<DvCq, String>,
    ) -> Result<(Ring, RdmaCoreCq, DvCq), String> {
        let keep: KeepAlive = Arc::new((model.ring_mem().clone(), model.dbrec().clone(), model.uar().clone()));
        // SAFETY: the image is a `struct mlx5_cq` of `layout.cq.size` bytes in a block of the C allocator at `ibv_cq()`, over the model's ring, record and UAR, which `keep` holds; the image outlives what is returned (the tests drop it last).
        unsafe { attach_ring(self.ibv_cq(), depth, self.layout, false, created, init, keep) }
    }

    fn ibv_cq(&self) -> *mut ffi::ibv_cq {
        self.cq.ptr.cast()
    }

    /// `mlx5_cq_event`, which `ibv_get_cq_event` runs for an event of this CQ.
    fn cq_event(&self) {
        let at = self.layout.cq.arm_sn;
        self.cq.put32(at, self.cq.get32(at) + 1);
    }

    fn read(&self, dv: &DvCq) -> Result<RdmaCoreCq, String> {
        // SAFETY: the image is a `struct mlx5_cq` of `layout.cq.size` bytes at `ibv_cq()`, which outlives every use of what is returned (the tests drop it last).
        unsafe { read_cq(self.ibv_cq(), dv, self.layout) }
    }
}

/// What `mlx5dv_init_obj(MLX5DV_OBJ_CQ)` reports for the model's CQ.
fn dv_cq(model: &Mlx5Model) -> DvCq {
    DvCq {
        buf: model.ring_mem().as_ptr(),
        dbrec: model.dbrec().as_ptr(),
        cqe_cnt: model.config().entries,
        cqe_size: model.config().cqe_size,
        cqn: model.config().cqn,
        uar: model.uar().as_ptr(),
    }
}

/// The attach's poller over the model, through `poller_on` as on hardware.
fn attached(model: &Mlx5Model, img: &QpImage, cq: &CqImage) -> Mlx5Backend {
    let dv = dv_cq(model);
    let private = cq.read(&dv).unwrap();
    let keep: KeepAlive = Arc::new((model.ring_mem().clone(), model.dbrec().clone(), model.uar().clone()));
    let ring = poller_on(&dv, keep, cq_config(false)).unwrap();
    let Ring::C64(c) = &ring else { panic!("a 64-byte CQ") };
    assert!(c.arm_doorbell().is_some_and(|a| a.is_mmio()), "the UAR is mapped as a device register");
    let mut b = Mlx5Backend::new(ring, img.ctx.addr(0) as usize, cq.ibv_cq() as usize, img.layout, false, None);
    b.set_rdma_core_cq(private);
    b
}

#[test]
fn an_attached_cq_arms_through_dvcq_s_doorbells_with_rdma_core_s_arm_sn() {
    for layout in &MLX5_LAYOUTS {
        let what = format!("v{}.{}", layout.first.0, layout.first.1);
        let mut model = Mlx5Model::new(ModelConfig::new(16)).unwrap();
        let img = QpImage::new(layout, false);
        // The application armed and took six events before the attach; rdma-core's
        // cons_index is 0 and stays so, as dvcq polls.
        let cq = CqImage::new(layout, &model, 6, 0);
        let mut b = attached(&model, &img, &cq);
        b.adopt(img.read(&img.dv(), layout, false).unwrap()).unwrap();
        for i in 0..3 {
            let w = img.post_send(0x10 + i, 1);
            model.push(&req(false, w)).unwrap();
        }
        assert_eq!(poll_all(&mut b).len(), 3, "{what}");
        // Next, sn 6 & 3 = 2, dvcq's ci 3, cqn 0x406: record word 1 and the UAR, big-endian.
        let rung = b.arm(false).unwrap();
        assert_eq!(rung.word, 0x2000_0003, "{what}");
        let (uar, rec) = model.doorbell_bytes();
        assert_eq!(uar, [0x20, 0, 0, 3, 0, 0, 0x04, 0x06], "{what}: the UAR got BE32(word), BE32(cqn)");
        assert_eq!(rec, [0, 0, 0, 3, 0x20, 0, 0, 3], "{what}: set_ci, then the arm word");
        let a = model.take_arm().unwrap();
        assert_eq!((a.sn(), a.solicited(), a.ci(), a.past, a.record_matches()), (2, false, 3, 0, true), "{what}");
        // ibv_get_cq_event ran mlx5_cq_event: the next arm carries sn 3; solicited now.
        cq.cq_event();
        b.arm(true).unwrap();
        assert_eq!(model.doorbell_bytes().0, [0x31, 0, 0, 3, 0, 0, 0x04, 0x06], "{what}");
        // A CQE the poll has not taken lies past the armed index.
        let w = img.post_send(0x20, 1);
        model.push(&req(false, w)).unwrap();
        b.arm(false).unwrap();
        let a = model.take_arm().unwrap();
        assert_eq!((a.sn(), a.ci(), a.past), (3, 3, 1), "{what}");
        assert_eq!(poll_all(&mut b).len(), 1);
        // Four more events wrap the two bits on the wire.
        (0..4).for_each(|_| cq.cq_event());
        assert_eq!(b.arm(false).unwrap().word, 0x3000_0004, "{what}");
    }
}

#[test]
fn a_cq_image_that_disagrees_with_mlx5dv_cq_is_refused() {
    for layout in &MLX5_LAYOUTS {
        let model = Mlx5Model::new(ModelConfig::new(16)).unwrap();
        let release = format!("rdma-core v{}.{}-v{}.{}", layout.first.0, layout.first.1, layout.last.0, layout.last.1);
        let l = &layout.cq;
        let spoiled = |spoil: &dyn Fn(&CqImage)| {
            let cq = CqImage::new(layout, &model, 0, 0);
            spoil(&cq);
            cq.read(&dv_cq(&model)).expect_err("a spoiled image is read")
        };
        let e = spoiled(&|c| c.cq.put32(l.cqn, 0x407));
        assert_eq!(
            e,
            format!("cq 0x406: the private cqn is 0x407, not mlx5dv_cq's: not the struct mlx5_cq of {release}")
        );
        let e = spoiled(&|c| c.cq.put64(l.dbrec, 0x1000));
        assert!(e.starts_with("cq 0x406: the private doorbell record 0x1000 is not mlx5dv_cq's"), "{e}");
        let e = spoiled(&|c| c.cq.put64(l.active_buf, 0x2000));
        assert!(e.contains("active_buf 0x2000 is neither its buf_a nor its buf_b"), "{e}");
        let e = spoiled(&|c| c.cq.put64(l.buf_b, 0x3000));
        assert!(e.contains("the active buffer's address 0x3000 is not mlx5dv_cq.buf"), "{e}");
        assert!(CqImage::new(layout, &model, 0, 0).read(&dv_cq(&model)).is_ok());
    }
    // The UAR must be a page mapping before a register is made of it.
    let model = Mlx5Model::new(ModelConfig::new(16)).unwrap();
    let mut dv = dv_cq(&model);
    dv.uar = dv.uar.wrapping_add(8);
    let keep: KeepAlive = model.ring_mem().clone();
    let e = poller_on(&dv, keep, cq_config(false)).expect_err("a misaligned UAR is used");
    assert!(e.contains("is not a page-aligned UAR mapping"), "{e}");
}

/// A refused attach leaves the application's CQ as it was: checks that need no
/// `mlx5dv_init_obj` refuse before it runs, and one that refuses after it clears
/// `MLX5_CQ_FLAGS_DV_OWNED` again, unless the application had it set itself.
#[test]
fn a_refused_cq_attach_leaves_the_cq_s_flags_as_they_were() {
    // MLX5_CQ_FLAGS_SINGLE_THREADED, as an application's ibv_create_cq_ex may leave it.
    const BEFORE: u32 = 1 << 4;
    for layout in &MLX5_LAYOUTS {
        let what = format!("v{}.{}", layout.first.0, layout.first.1);
        let model = Mlx5Model::new(ModelConfig::new(16)).unwrap();
        let depth = model.config().entries - 1;
        let image = |flags: u32| {
            let cq = CqImage::new(layout, &model, 0, 0);
            cq.cq.put32(layout.cq.flags, flags);
            cq
        };
        // Refusals after mlx5dv_init_obj: each puts the flag back.
        let mut misaligned_uar = dv_cq(&model);
        misaligned_uar.uar = misaligned_uar.uar.wrapping_add(8);
        let mut other_cqn = dv_cq(&model);
        other_cqn.cqn += 1;
        let mut other_size = dv_cq(&model);
        other_size.cqe_size = 128;
        let created = crate::backend::mlx5::Created { cqe_size: 128, compression: None, ignore_overrun: false };
        let cases: [(&str, DvCq, u32, Option<crate::backend::mlx5::Created>); 5] = [
            ("not a page-aligned UAR mapping", misaligned_uar, depth, None),
            ("the private cqn is", other_cqn, depth, None),
            ("cqe_sz (after arm_sn) is 64, not mlx5dv_cq.cqe_size (128)", other_size, depth, None),
            ("is not the CQ's depth", dv_cq(&model), depth + 2, None),
            ("is not the 128 bytes mlx5dv_create_cq was asked for", dv_cq(&model), depth, Some(created)),
        ];
        for (why, dv, depth, created) in cases {
            let cq = image(BEFORE);
            let e = cq.attach(&model, depth, created, || cq.init_obj(dv)).expect_err(why);
            assert!(e.contains(why), "{what}: {e}");
            assert_eq!(cq.flags(), BEFORE, "{what}: {why}: DV_OWNED put back, nothing else touched");
            // An application that made the CQ DV-owned itself keeps it so.
            let cq = image(BEFORE | MLX5_CQ_FLAGS_DV_OWNED);
            cq.attach(&model, depth, created, || cq.init_obj(dv)).expect_err(why);
            assert_eq!(cq.flags(), BEFORE | MLX5_CQ_FLAGS_DV_OWNED, "{what}: {why}: the application's flag stays");
        }
        // Refusals before it: mlx5dv_init_obj is never called.
        type Spoil<'a> = (&'a str, &'a dyn Fn(&CqImage));
        let spoils: [Spoil; 4] = [
            ("is neither its buf_a nor its buf_b", &|c| c.cq.put64(layout.cq.active_buf, 0x2000)),
            ("is not a page-aligned ring", &|c| c.cq.put64(layout.cq.buf_b, 0x3008)),
            ("cqe_sz (after arm_sn) is 0", &|c| c.cq.put32(layout.cq.cqe_sz, 0)),
            ("is not a ring size", &|c| c.cq.put32(offset_of!(ffi::ibv_cq, cqe), 14)),
        ];
        for (why, spoil) in spoils {
            let cq = image(BEFORE);
            spoil(&cq);
            let called = std::cell::Cell::new(false);
            let e = cq
                .attach(&model, depth, None, || {
                    called.set(true);
                    cq.init_obj(dv_cq(&model))
                })
                .expect_err(why);
            assert!(e.contains(why), "{what}: {e}");
            assert!(!called.get(), "{what}: {why}: refused before mlx5dv_init_obj");
            assert_eq!(cq.flags(), BEFORE, "{what}: {why}");
        }
        // A flags word that does not gain DV_OWNED alone is not rdma-core's: refused.
        let cq = image(BEFORE);
        let e = cq.attach(&model, depth, None, || Ok(dv_cq(&model))).expect_err("flags not located");
        assert!(e.contains("not gaining MLX5_CQ_FLAGS_DV_OWNED alone"), "{what}: {e}");
        // Attached: the CQ is DV-owned, until a fallback to rdma-core's poll gives it back.
        let cq = image(BEFORE);
        let (ring, mut private, _) = cq.attach(&model, depth, None, || cq.init_obj(dv_cq(&model))).unwrap();
        assert!(private.set_dv_owned());
        assert_eq!(cq.flags(), BEFORE | MLX5_CQ_FLAGS_DV_OWNED, "{what}: attached");
        assert!(private.give_back());
        assert_eq!(cq.flags(), BEFORE, "{what}: given back");
        assert!(!private.give_back(), "{what}: once");
        drop(ring);
    }
}

/// The layout row must fit the allocation before a byte of it is read: a row larger than
/// the struct the loaded release allocates is refused, not read past the block.
#[test]
fn a_layout_row_larger_than_the_allocation_is_refused_before_reading() {
    let model = Mlx5Model::new(ModelConfig::new(16)).unwrap();
    // A row a page larger than the block: the allocator may hand out a reused chunk up to
    // 31 bytes larger than asked (malloc_usable_size counts them), which a real row only a
    // little larger (v64's struct mlx5_cq is 24 bytes more than v44's) would fall within.
    let small = &MLX5_LAYOUTS[0];
    let mut larger = *small;
    larger.cq.size = small.cq.size + 4096;
    let large = &larger;
    let cq = CqImage::new(small, &model, 0, 0);
    let dv = dv_cq(&model);
    // SAFETY: refused by the allocation check before any byte past the image is read.
    let e = unsafe { read_cq(cq.ibv_cq(), &dv, large) }.unwrap_err();
    assert!(e.contains("usable bytes, fewer than the"), "{e}");
    // SAFETY: as above.
    let e = unsafe { check_cq_before(cq.ibv_cq(), large) }.unwrap_err();
    assert!(e.contains("usable bytes, fewer than the"), "{e}");
}

/// The refused adoption that hands an attached CQ to rdma-core's `ibv_poll_cq` gives the
/// CQ back as it was before the attach.
#[test]
fn a_fallback_to_rdma_core_s_poll_gives_the_dv_owned_flag_back() {
    use crate::cq::{Backend, BackendKind, Cq, Poller};
    let layout = &MLX5_LAYOUTS[0];
    let model = Mlx5Model::new(ModelConfig::new(16)).unwrap();
    let img = QpImage::new(layout, false);
    let cq = CqImage::new(layout, &model, 0, 0);
    let (ring, private, _) =
        cq.attach(&model, model.config().entries - 1, None, || cq.init_obj(dv_cq(&model))).unwrap();
    assert_eq!(cq.flags(), MLX5_CQ_FLAGS_DV_OWNED);
    // A device and context struct for the CQ handle the fallback polls through.
    let mut dev = Box::new(ffi::ibv_device::default());
    let mut vctx = Box::new(ffi::ibv_context::default());
    vctx.device = &mut *dev;
    // SAFETY: a context struct naming a device whose name is all NULs; it outlives every handle (dropped last). No verb is called on it.
    let vctx_handle = unsafe { crate::sys::device::Context::borrowed(&mut *vctx) };
    // SAFETY: the image's ibv_cq, outliving the handle; dvcq never destroys a borrowed CQ, and the test never polls it through rdma-core.
    let verbs = unsafe { VerbsCq::borrowed(&vctx_handle, cq.ibv_cq()) };
    let mut b = Mlx5Backend::new(ring, img.ctx.addr(0) as usize, cq.ibv_cq() as usize, layout, false, None);
    b.set_rdma_core_cq(private);
    b.allow_fallback(true);
    let backend = Backend { kind: BackendKind::Mlx5, reason: "test".into() };
    let mut c = Cq::new(Poller::Mlx5(Box::new(b)), backend, "fake0".into(), 15);
    c.refused_or_fallback("mlx5", Err("qp 0x1: refused".into()), Some(verbs)).unwrap();
    assert_eq!(c.backend().kind, BackendKind::Generic);
    assert_eq!(cq.flags(), 0, "rdma-core cleans the CQ's destroyed QPs again");
    drop(c);
    drop((vctx_handle, vctx, dev));
}

/// The table readers stay inside rdma-core's tables whatever index they are handed: an
/// index past `wqe_cnt` reads the slot rdma-core's own `idx & (wqe_cnt - 1)` names.
#[test]
fn the_wq_table_readers_stay_inside_their_tables() {
    let layout = &MLX5_LAYOUTS[0];
    let img = QpImage::new(layout, false);
    (0..SQ).for_each(|i| {
        img.post_send(0x100 + u64::from(i), 1);
    });
    (0..RQ).for_each(|i| {
        img.post_recv(0x200 + u64::from(i));
    });
    let p = img.read(&img.dv(), layout, false).unwrap();
    let (sq, rq) = (p.sq.as_ref().unwrap(), p.rq.as_ref().unwrap());
    for i in [SQ, SQ + 5, u32::MAX] {
        let slot = i & (SQ - 1);
        assert_eq!(sq.wr_id(i), 0x100 + u64::from(slot), "{i}");
        assert_eq!(sq.wqe_head(i), slot, "{i}");
        assert_eq!(sq.wr_data(i), sq.wr_data(slot), "{i}");
    }
    for i in [RQ, RQ + 3, u32::MAX] {
        assert_eq!(rq.wr_id(i), 0x200 + u64::from(i & (RQ - 1)), "{i}");
    }
}
