//! SRQ adoption without a NIC: for every row of the layout table, a byte image of
//! rdma-core's `struct mlx5_srq` as that release lays it out, with its wr_id table, WQE
//! buffer (the free list threaded through the WQEs' next segments), doorbell record and
//! (v48 on) free bitmap, and a QP image receiving from it, over the mlx5 model's CQ. The
//! attach goes through [`read_srq`], [`read_qp`] and the backend's adoption, as on
//! hardware after `mlx5dv_init_obj`; the test plays the release's `mlx5_post_srq_recv` on
//! the image and the device on the model, and checks completions, wr_ids, and that the
//! WQEs the poll gave back let the post side fill the SRQ again.

use super::*;
use dvcq_uapi::mlx5::rdma_core::{SrqFree, MLX5_RSC_TYPE_SRQ, MLX5_RSC_TYPE_XSRQ};

const SRQN: u32 = 0x55;
/// WQEs in the buffer: 8 in the free list and 8 in the ODP wait queue, as
/// `mlx5_alloc_srq_buf` lays out an SRQ of 7 receives on a device with room for both.
const MAX: u32 = 16;
const NWQES: u32 = 8;
const STRIDE: u32 = 32;

/// One release's SRQ image with its tables, and the release's post verb over it.
struct SrqImage {
    layout: &'static Mlx5Layout,
    srq: Block,
    wrid: Block,
    wqes: Block,
    bitmap: Block,
    dbrec: Block,
}

impl SrqImage {
    /// The SRQ as `mlx5_create_srq` leaves it, on the context `ctx`.
    fn new(layout: &'static Mlx5Layout, ctx: &Block) -> SrqImage {
        let l = &layout.srq;
        let img = SrqImage {
            layout,
            srq: Block::new(l.size),
            wrid: Block::new(MAX as usize * 8),
            wqes: Block::new((MAX * STRIDE) as usize),
            bitmap: Block::new(MAX.div_ceil(64) as usize * 8),
            dbrec: Block::new(8),
        };
        let s = &img.srq;
        s.put64(l.ibv_srq + crate::sys::mlx5::srq::IBV_SRQ_CONTEXT, ctx.addr(0));
        s.put32(l.rsc_type, MLX5_RSC_TYPE_SRQ);
        s.put32(l.rsn, SRQN);
        s.put32(l.srqn, SRQN);
        s.put64(l.buf, img.wqes.addr(0));
        s.put64(l.wrid, img.wrid.addr(0));
        s.put32(l.max, MAX);
        s.put32(l.wqe_shift, STRIDE.trailing_zeros());
        s.put32(l.head, 0);
        s.put32(l.tail, NWQES - 1);
        s.put32(l.waitq_head, NWQES);
        s.put32(l.waitq_tail, MAX - 1);
        s.put64(l.db, img.dbrec.addr(0));
        // `set_srq_buf_ll` over the free list and over the wait queue.
        for i in (0..NWQES - 1).chain(NWQES..MAX - 1) {
            img.set_link(i, i + 1);
        }
        if let SrqFree::Bitmap { bitmap, nwqes } = l.free {
            s.put64(bitmap, img.bitmap.addr(0));
            s.put32(nwqes, NWQES);
        }
        img
    }

    /// What `mlx5dv_init_obj(MLX5DV_OBJ_SRQ)` reports.
    fn dv(&self) -> DvSrq {
        DvSrq {
            buf: self.wqes.addr(0) as usize,
            dbrec: self.dbrec.addr(0) as usize,
            stride: STRIDE,
            head: self.head(),
            tail: self.tail(),
            srqn: SRQN,
        }
    }

    fn ibv_srq(&self) -> *mut ffi::ibv_srq {
        self.srq.ptr.wrapping_add(self.layout.srq.ibv_srq).cast()
    }

    fn head(&self) -> u32 {
        self.srq.get32(self.layout.srq.head)
    }
    fn tail(&self) -> u32 {
        self.srq.get32(self.layout.srq.tail)
    }
    fn link(&self, i: u32) -> u32 {
        u32::from(u16::from_be(self.wqes.get16((i * STRIDE) as usize + 2)))
    }
    fn set_link(&self, i: u32, next: u32) {
        self.wqes.put16((i * STRIDE) as usize + 2, (next as u16).to_be());
    }
    fn bit(&self, i: u32) -> bool {
        self.bitmap.get64(i as usize / 64 * 8) & (1 << (i % 64)) != 0
    }
    fn clear_bit(&self, i: u32) {
        let at = i as usize / 64 * 8;
        self.bitmap.put64(at, self.bitmap.get64(at) & !(1 << (i % 64)));
    }

    /// v48's `set_next_tail`: link `next` behind the tail and take it off the bitmap.
    fn set_next_tail(&self, next: u32) {
        self.set_link(self.tail(), next);
        self.srq.put32(self.layout.srq.tail, next);
        self.clear_bit(next);
    }

    /// v48's `get_next_contig_wqes`: the first run of set bits in `first..last`.
    fn contig(&self, first: u32, last: u32) -> (u32, u32) {
        let mut count = 0;
        let mut i = first;
        while i < last {
            if self.bit(i) {
                count += 1;
            } else if count > 0 {
                break;
            }
            i += 1;
        }
        (i - count, count)
    }

    /// v48's `set_next_contig_wqes`: links the freed run nearest after the head in;
    /// false when there is none (the SRQ is full).
    fn link_contig(&self) -> bool {
        let head = self.head();
        let (mut at, mut count) = self.contig(head + 1, NWQES);
        if count == 0 {
            (at, count) = self.contig(0, head);
            if count == 0 {
                return false;
            }
        }
        self.set_link(self.tail(), at);
        let tail = at + count - 1;
        self.srq.put32(self.layout.srq.tail, tail);
        self.clear_bit(tail);
        for i in at..tail {
            self.set_link(i, i + 1);
            self.clear_bit(i);
        }
        true
    }

    /// The release's `mlx5_post_srq_recv` for one WR; `None` when the SRQ is full.
    fn post(&self, wr_id: u64) -> Option<u16> {
        if self.head() == self.tail() {
            match self.layout.srq.free {
                SrqFree::LinkTail => return None,
                SrqFree::Bitmap { .. } => {
                    let next = (self.tail() + 1) % NWQES;
                    if self.bit(next) {
                        self.set_next_tail(next);
                    } else if !self.link_contig() {
                        return None;
                    }
                }
            }
        }
        let head = self.head();
        self.wrid.put64(head as usize * 8, wr_id);
        self.srq.put32(self.layout.srq.head, self.link(head));
        let counter = self.layout.srq.counter;
        self.srq.put16(counter, self.srq.get16(counter).wrapping_add(1));
        Some(head as u16)
    }

    /// Posts until the SRQ is full; the WQE indexes taken.
    fn fill(&self, first_wr_id: u64) -> Vec<u16> {
        (0..).map_while(|i| self.post(first_wr_id + i)).collect()
    }

    fn read(&self, dv: &DvSrq, layout: &Mlx5Layout, ctx: &Block) -> Result<PrivateSrq, String> {
        // SAFETY: the image is a `struct mlx5_srq` of `self.layout.srq.size` bytes around `ibv_srq()`; another row's layout is only passed when it is no larger.
        unsafe { read_srq(self.ibv_srq(), dv, layout, ctx.ptr.cast(), core::ptr::null_mut(), false) }
    }
}

/// Makes the QP image `qp` receive from `srq` (no receive queue of its own, as rdma-core
/// makes such a QP); returns what `mlx5dv_init_obj` reports for it then.
fn on_srq(qp: &QpImage, srq: &SrqImage) -> DvQp {
    let layout = qp.layout;
    qp.qp.put64(layout.qp.ibv_qp + IBV_QP_SRQ, srq.ibv_srq() as u64);
    qp.qp.put32(layout.qp.rq + layout.wq.wqe_cnt, 0);
    DvQp { rq_wqe_cnt: 0, ..qp.dv() }
}

/// A receive completion of WQE `wqe` on the SRQ, named as the CQE version names it.
fn srq_resp(v1: bool, wqe: u16, len: u32) -> build::Entry {
    build::resp(cqe_opcode::RESP_SEND, QPN, wqe, len, 0).srqn_uidx(if v1 { UIDX } else { SRQN })
}

/// The model, the backend with the QP and its SRQ adopted, and the two images.
fn attached(
    layout: &'static Mlx5Layout,
    v1: bool,
    before: impl Fn(&SrqImage),
) -> (Mlx5Model, Mlx5Backend, QpImage, SrqImage) {
    let model = Mlx5Model::new(ModelConfig::new(64)).unwrap();
    let qp = QpImage::new(layout, v1);
    let srq = SrqImage::new(layout, &qp.ctx);
    before(&srq);
    let dv = on_srq(&qp, &srq);
    let mut b = backend(&model, &qp, v1);
    let private = srq.read(&srq.dv(), layout, &qp.ctx).unwrap();
    assert_eq!(b.adopt_srq(srq.ibv_srq() as usize, private), Ok(SRQN));
    let p = qp.read(&dv, layout, v1).unwrap();
    assert_eq!(p.srq, Some(srq.ibv_srq() as usize));
    b.adopt(p).unwrap();
    (model, b, qp, srq)
}

#[test]
fn every_release_s_srq_image_attaches_and_freed_wqes_are_posted_again() {
    for layout in &MLX5_LAYOUTS {
        for v1 in [false, true] {
            let what = format!("v{}.{} cqe v{}", layout.first.0, layout.first.1, u8::from(v1));
            // Two receives posted before the attach.
            let (mut model, mut b, _qp, srq) = attached(layout, v1, |s| {
                s.post(0xe0).unwrap();
                s.post(0xe1).unwrap();
            });
            model.push(&srq_resp(v1, 1, 9)).unwrap();
            model.push(&srq_resp(v1, 0, 8)).unwrap();
            let got = poll_all(&mut b);
            let ids: Vec<(u64, u32, WcOpcode)> = got.iter().map(|c| (c.wr_id, c.byte_len, c.opcode)).collect();
            assert_eq!(ids, [(0xe1, 9, WcOpcode::Recv), (0xe0, 8, WcOpcode::Recv)], "{what}");
            // Rounds: fill the SRQ, complete everything in a scrambled order, and check that
            // the post side can fill it again with as many receives.
            let mut full = None;
            for round in 0..12u64 {
                let base = 0x1000 * (round + 1);
                let posted = srq.fill(base);
                let n = *full.get_or_insert(posted.len());
                assert!(n >= NWQES as usize - 1, "{what} round {round}: {posted:?}");
                assert_eq!(posted.len(), n, "{what} round {round}: the freed WQEs were found again");
                let mut order: Vec<usize> = (0..n).collect();
                order.rotate_left(round as usize % n);
                order.reverse();
                for &i in &order {
                    model.push(&srq_resp(v1, posted[i], i as u32)).unwrap();
                }
                let got = poll_all(&mut b);
                let want: Vec<(u64, u16)> = order.iter().map(|&i| (base + i as u64, posted[i])).collect();
                let seen: Vec<(u64, u16)> = got.iter().map(|c| (c.wr_id, c.wqe_index)).collect();
                assert_eq!(seen, want, "{what} round {round}");
                assert!(got.iter().all(|c| c.status == WcStatus::Success && c.qp_num == QPN), "{what}");
                if let SrqFree::Bitmap { .. } = layout.srq.free {
                    assert!(posted.iter().all(|&w| srq.bit(u32::from(w))), "{what} round {round}: freed to the bitmap");
                }
            }
        }
    }
}

#[test]
fn a_poll_gives_back_only_what_completed_and_a_post_after_it_is_seen_by_the_next() {
    let layout = &MLX5_LAYOUTS[1];
    let (mut model, mut b, _qp, srq) = attached(layout, false, |_| {});
    let w: Vec<u16> = (0..3).map(|i| srq.post(0x70 + i).unwrap()).collect();
    let tail = srq.tail();
    model.push(&srq_resp(false, w[1], 1)).unwrap();
    assert_eq!(poll_all(&mut b).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x71]);
    // v45-v47: linked behind the old tail at once.
    assert_eq!((srq.link(tail), srq.tail()), (u32::from(w[1]), u32::from(w[1])));
    assert_eq!(poll_all(&mut b).len(), 0);
    assert_eq!(srq.tail(), u32::from(w[1]), "an empty poll frees nothing");
    let late = srq.post(0x80).unwrap();
    model.push(&srq_resp(false, late, 2)).unwrap();
    model.push(&srq_resp(false, w[0], 3)).unwrap();
    let got: Vec<u64> = poll_all(&mut b).iter().map(|c| c.wr_id).collect();
    assert_eq!(got, [0x80, 0x70]);
}

#[test]
fn an_odp_page_fault_on_the_srq_is_a_fault_item_and_its_wqe_goes_back() {
    let layout = &MLX5_LAYOUTS[3];
    let (mut model, mut b, _qp, srq) = attached(layout, false, |_| {});
    let w = srq.post(0x90).unwrap();
    let e = build::ErrSpec {
        qpn: QPN,
        wqe_counter: w,
        syndrome: 0x22,
        vendor_err_synd: 0x93,
        srqn_uidx: SRQN,
        ..Default::default()
    };
    model.push(&build::err(e)).unwrap();
    let got = poll_all(&mut b);
    assert_eq!(got.len(), 1);
    let f = got[0].fault().expect("a fault item");
    assert_eq!((f.kind, f.value), (FaultKind::SrqPageFault, SRQN));
    assert!(srq.bit(u32::from(w)), "the WQE is free again, as rdma-core frees it before posting it again");
}

/// Runs `read_srq` on an image `spoil` changed after it was built; returns the error.
fn srq_refused(layout: &'static Mlx5Layout, spoil: impl Fn(&SrqImage, &mut DvSrq)) -> String {
    let ctx = Block::new(8);
    let img = SrqImage::new(layout, &ctx);
    let mut dv = img.dv();
    spoil(&img, &mut dv);
    img.read(&dv, layout, &ctx).expect_err("a spoiled image attaches")
}

#[test]
fn corrupted_srq_images_are_refused_naming_the_srq_and_the_field() {
    for layout in &MLX5_LAYOUTS {
        let l = &layout.srq;
        let e = srq_refused(layout, |img, _| img.srq.put64(l.ibv_srq + crate::sys::mlx5::srq::IBV_SRQ_CONTEXT, 0x40));
        assert_eq!(e, "srq 0x55: it belongs to another device context");
        let e = srq_refused(layout, |img, _| img.srq.put32(l.rsc_type, MLX5_RSC_TYPE_XSRQ));
        assert!(e.starts_with("srq 0x55: rsc.type 1 and verbs_srq.srq_type 0 disagree: not the struct"), "{e}");
        let e = srq_refused(layout, |img, _| img.srq.put32(l.rsc_type, 0));
        assert!(e.starts_with("srq 0x55: rsc.type is 0, not MLX5_RSC_TYPE_SRQ (2) or MLX5_RSC_TYPE_XSRQ (1)"), "{e}");
        let e = srq_refused(layout, |img, _| img.srq.put32(l.rsn, 0x56));
        assert_eq!(e, "srq 0x55: the private rsc.rsn 0x56 is not mlx5dv_srq's SRQ number");
        let e = srq_refused(layout, |_, dv| dv.buf += 4096);
        assert!(e.starts_with("srq 0x55: the private buffer 0x"), "{e}");
        let e = srq_refused(layout, |_, dv| dv.dbrec += 64);
        assert!(e.starts_with("srq 0x55: the private doorbell record 0x"), "{e}");
        let e = srq_refused(layout, |_, dv| dv.stride = 64);
        assert_eq!(e, "srq 0x55: wqe_shift 5 does not give mlx5dv_srq's stride 64");
        let e = srq_refused(layout, |_, dv| dv.head = 3);
        assert_eq!(e, "srq 0x55: the private free list (0..7) is not mlx5dv_srq's (3..7)");
        let e = srq_refused(layout, |img, _| img.srq.put64(l.cmd_qp, 0x1000));
        assert_eq!(e, "srq 0x55: a tag-matching SRQ; only basic and XRC SRQs are adopted");
        let e = srq_refused(layout, |img, _| img.srq.put32(l.max, 4));
        assert_eq!(e, "srq 0x55: max 4 is not 1 to 65536 WQEs holding the free list (0..7)");
        let e = srq_refused(layout, |img, _| img.srq.put32(l.waitq_tail, MAX));
        assert_eq!(e, "srq 0x55: the wait queue (8..16) is outside the 16 WQEs");
        let e = srq_refused(layout, |img, _| img.srq.put32(l.wq_sig, 1));
        assert_eq!(e, "srq 0x55: WQE signatures are on (MLX5_SRQ_SIGNATURE); not adopted");
        let e = srq_refused(layout, |img, _| img.srq.put64(l.wrid, 0));
        assert_eq!(e, "srq 0x55: the wr_id table pointer 0x0 is null or misaligned");
        if let SrqFree::Bitmap { bitmap, nwqes } = l.free {
            let e = srq_refused(layout, |img, _| img.srq.put64(bitmap, 0));
            assert_eq!(e, "srq 0x55: free_wqe_bitmap 0x0 is null or misaligned");
            let e = srq_refused(layout, |img, _| img.srq.put32(nwqes, MAX + 1));
            assert_eq!(e, "srq 0x55: nwqes 17 is not 1 to max (16) past the tail (7)");
        }
    }
}

#[test]
fn a_refused_srq_leaves_the_backend_as_it_was_and_its_qps_are_refused_too() {
    let layout = &MLX5_LAYOUTS[2];
    let model = Mlx5Model::new(ModelConfig::new(8)).unwrap();
    let qp = QpImage::new(layout, false);
    let srq = SrqImage::new(layout, &qp.ctx);
    let mut b = backend(&model, &qp, false);
    b.allow_fallback(true);
    srq.srq.put32(layout.srq.wq_sig, 1);
    assert!(srq.read(&srq.dv(), layout, &qp.ctx).is_err());
    // The QP on it cannot be adopted without its SRQ; the CQ may still fall back.
    let dv = on_srq(&qp, &srq);
    let e = b.adopt(qp.read(&dv, layout, false).unwrap()).unwrap_err();
    assert!(e.starts_with("qp 0x1a2b: its SRQ (0x") && e.ends_with(") is not attached to this CQ"), "{e}");
    assert!(b.can_fall_back());
    // A QP naming an SRQ while keeping a receive queue of its own is garbage.
    qp.qp.put32(layout.qp.rq + layout.wq.wqe_cnt, 8);
    let e = qp.read(&DvQp { rq_wqe_cnt: 8, ..dv }, layout, false).unwrap_err();
    assert_eq!(e, "qp 0x1a2b: it receives from an SRQ but has a receive queue of 8 entries");
}

#[test]
fn an_srq_image_of_another_buffer_layout_is_refused() {
    // v64's struct mlx5_buf is 8 bytes longer: read as v48, the SRQ number is not there.
    // (v44-v47 and v48-v63 lay the fields out alike and differ in how a WQE is freed, which
    // the bytes cannot tell: the row is chosen by the release loaded, never by guessing.)
    let (v48, v64) = (&MLX5_LAYOUTS[2], &MLX5_LAYOUTS[3]);
    assert!(v48.srq.size <= v64.srq.size);
    let ctx = Block::new(8);
    let img = SrqImage::new(v64, &ctx);
    let e = img.read(&img.dv(), v48, &ctx).expect_err("a wrong release attaches");
    assert!(e.contains("not mlx5dv_srq's") || e.contains("not the struct mlx5_srq of rdma-core"), "{e}");
}

/// `IBV_SRQT_XRC`.
const IBV_SRQT_XRC: u32 = 1;
const XRC_UIDX: u32 = 0x66;
/// The XRC target QP a receive arrived on: what its CQE names as the QPN.
const XRC_TGT_QPN: u32 = 0x4f;

/// Makes `srq` an XRC SRQ of the CQ at `cq`, as `mlx5_create_xrc_srq` and libibverbs'
/// `set_vsrq` leave it on a CQE-version-1 context.
fn make_xrc(srq: &SrqImage, cq: u64) {
    let l = &srq.layout.srq;
    srq.srq.put32(l.rsc_type, MLX5_RSC_TYPE_XSRQ);
    srq.srq.put32(l.rsn, XRC_UIDX);
    srq.srq.put32(l.srq_type, IBV_SRQT_XRC);
    srq.srq.put64(l.cq, cq);
    srq.srq.put32(l.srq_num, SRQN);
}

impl SrqImage {
    /// The XRC attach's read, against the CQ at `cq` on a context of CQE version `v1`.
    fn read_xrc(&self, dv: &DvSrq, ctx: &Block, cq: u64, v1: bool) -> Result<PrivateSrq, String> {
        // SAFETY: as `read`.
        unsafe { read_srq(self.ibv_srq(), dv, self.layout, ctx.ptr.cast(), cq as *mut _, v1) }
    }
}

#[test]
fn every_release_s_xrc_srq_attaches_by_user_index_and_its_wqes_are_posted_again() {
    for layout in &MLX5_LAYOUTS {
        let what = format!("v{}.{}", layout.first.0, layout.first.1);
        let mut model = Mlx5Model::new(ModelConfig::new(64)).unwrap();
        let qp = QpImage::new(layout, true);
        let srq = SrqImage::new(layout, &qp.ctx);
        make_xrc(&srq, qp.cq.addr(0));
        let early = srq.post(0xe0).unwrap();
        let mut b = backend(&model, &qp, true);
        let private = srq.read_xrc(&srq.dv(), &qp.ctx, qp.cq.addr(0), true).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(private.xrc_uidx, Some(XRC_UIDX));
        assert_eq!(b.adopt_srq(srq.ibv_srq() as usize, private), Ok(SRQN), "{what}");
        let xrc_resp =
            |wqe: u16, len: u32| build::resp(cqe_opcode::RESP_SEND, XRC_TGT_QPN, wqe, len, 0).srqn_uidx(XRC_UIDX);
        model.push(&xrc_resp(early, 3)).unwrap();
        let got = poll_all(&mut b);
        assert_eq!(got.iter().map(|c| (c.wr_id, c.qp_num)).collect::<Vec<_>>(), [(0xe0, XRC_TGT_QPN)], "{what}");
        // Rounds that fill the SRQ and complete it all: the post side finds every WQE again.
        let mut full = None;
        for round in 0..8u64 {
            let base = 0x1000 * (round + 1);
            let posted = srq.fill(base);
            let n = *full.get_or_insert(posted.len());
            assert!(n >= NWQES as usize - 1, "{what} round {round}: {posted:?}");
            assert_eq!(posted.len(), n, "{what} round {round}: the freed WQEs were found again");
            for (i, &w) in posted.iter().enumerate().rev() {
                model.push(&xrc_resp(w, i as u32)).unwrap();
            }
            let got = poll_all(&mut b);
            let want: Vec<u64> = (0..n as u64).rev().map(|i| base + i).collect();
            assert_eq!(got.iter().map(|c| c.wr_id).collect::<Vec<_>>(), want, "{what} round {round}");
            assert!(got.iter().all(|c| c.status == WcStatus::Success), "{what} round {round}");
        }
    }
}

#[test]
fn xrc_srqs_of_another_cq_or_number_or_on_a_version_0_context_are_refused() {
    for layout in &MLX5_LAYOUTS {
        let l = &layout.srq;
        let qp = QpImage::new(layout, true);
        let cq = qp.cq.addr(0);
        let refused = |spoil: &dyn Fn(&SrqImage), cq: u64, v1: bool| {
            let srq = SrqImage::new(layout, &qp.ctx);
            make_xrc(&srq, qp.cq.addr(0));
            spoil(&srq);
            srq.read_xrc(&srq.dv(), &qp.ctx, cq, v1).map(|_| ()).expect_err("a spoiled XRC SRQ is read")
        };
        let e = refused(&|_| {}, cq + 8, true);
        assert_eq!(e, format!("srq 0x55: its CQ ({cq:#x}) is not the attached CQ ({:#x})", cq + 8));
        let e = refused(&|_| {}, cq, false);
        assert!(e.starts_with("srq 0x55: an XRC SRQ on a context with CQEs of version 0"), "{e}");
        let e = refused(&|s| s.srq.put32(l.srq_num, 0x56), cq, true);
        assert_eq!(e, "srq 0x55: the private vsrq.srq_num 0x56 is not mlx5dv_srq's SRQ number");
        let e = refused(&|s| s.srq.put32(l.srqn, 0x57), cq, true);
        assert_eq!(e, "srq 0x55: the private srqn 0x57 is not mlx5dv_srq's SRQ number");
        let e = refused(&|s| s.srq.put32(l.rsn, 1 << 24), cq, true);
        assert_eq!(e, "srq 0x55: the user index rsc.rsn 0x1000000 is wider than 24 bits");
        let e = refused(&|s| s.srq.put32(l.srq_type, 0), cq, true);
        assert!(e.starts_with("srq 0x55: rsc.type 1 and verbs_srq.srq_type 0 disagree"), "{e}");
        let e = refused(&|s| s.srq.put32(l.srq_type, 2), cq, true);
        assert_eq!(e, "srq 0x55: a tag-matching SRQ; only basic and XRC SRQs are adopted");
    }
    // A backend of a version-0 context refuses one read for version 1.
    let layout = &MLX5_LAYOUTS[2];
    let qp = QpImage::new(layout, false);
    let srq = SrqImage::new(layout, &qp.ctx);
    make_xrc(&srq, qp.cq.addr(0));
    let model = Mlx5Model::new(ModelConfig::new(64)).unwrap();
    let mut b = backend(&model, &qp, false);
    let private = srq.read_xrc(&srq.dv(), &qp.ctx, qp.cq.addr(0), true).unwrap();
    let e = b.adopt_srq(srq.ibv_srq() as usize, private).unwrap_err();
    assert!(e.contains("CQEs of version 0"), "{e}");
}

/// The SRQ's readers stay inside its tables whatever index they are handed (`max` need
/// not be a power of two: an index past it reads the last WQE's entry).
#[test]
fn the_srq_table_readers_stay_inside_their_tables() {
    use dvcq_mlx5_dv::registry::ForeignSrq;
    for layout in &MLX5_LAYOUTS {
        let ctx = Block::new(8);
        let img = SrqImage::new(layout, &ctx);
        let posted = img.fill(0x300);
        assert!(!posted.is_empty());
        let p = img.read(&img.dv(), layout, &ctx).unwrap();
        let max = p.max;
        let last = p.srq.wr_id(max - 1);
        for i in [max, max + 7, u32::MAX] {
            assert_eq!(p.srq.wr_id(i), last, "{i}");
            assert_eq!(p.srq.next(i), p.srq.next(max - 1), "{i}");
        }
    }
}
