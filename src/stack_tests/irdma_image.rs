//! The irdma attach without a NIC: for every row of the private-layout table, byte images
//! of rdma-core's `struct irdma_ucq`, `irdma_uvcontext` (after its `ibv_context`) and
//! `irdma_uqp` exactly as that release lays them out, with the tables and WQE buffer they
//! point to, over the irdma model's ring and shadow area. The attach goes through
//! [`read_cq`], [`poller_on`], [`read_qp`] and [`IrdmaBackend::adopt`], the code that runs
//! on hardware; the test then plays rdma-core's post verbs on the images and the device on
//! the model, and checks completions, wr_ids, and the tails and CQ state written back
//! (what rdma-core's post-side free-space test and its CQ clean-up see).

use crate::backend::irdma::{covered, layout_for, IrdmaBackend};
use crate::sys::ffi;
use crate::sys::irdma::*;
use crate::sys::release::Release;
use dvcq_e810_dv::model::{IrdmaModel, ModelConfig, ModelCqe};
use dvcq_e810_dv::ring::{ring_slots, Rounding};
use dvcq_e810_dv::Compat;
use dvcq_provider::{Completion, FaultKind, WcFlags, WcOpcode, WcStatus};
use dvcq_uapi::irdma::codes::{flush, rq_op, sq_op};
use dvcq_uapi::irdma::gen::FEATURE_RTS_AE;
use dvcq_uapi::irdma::gen::{FEATURE_64_BYTE_CQE, FEATURE_CQ_RESIZE};
use dvcq_uapi::irdma::rdma_core::{IrdmaLayout, IBV_MR_CONTEXT, IBV_MR_PD};
use dvcq_uapi::irdma::rdma_core::{
    IRDMA_LAYOUTS, QP_FLAG_FIRST_SQ_WQ, QP_FLAG_PUSH_DROPPED, QP_FLAG_PUSH_MODE, SQ_WRTRK_QUANTA, SQ_WRTRK_SIZE,
    SQ_WRTRK_WR_LEN,
};
use dvcq_uapi::irdma::wqe::{HDR_OFFSET, HDR_VALID, QUANTUM_SIZE};
use dvcq_uapi::irdma::HwRev;

const QPN: u32 = 0x2b;
const CQ_ID: u32 = 0x11;
/// `ibv_create_cq(cqe = 20)`: 42 slots on GEN2, 21 (v44-v63) or 22 (v64) on GEN1, 22 on
/// GEN3: never a power of two.
const REQUESTED: u32 = 20;
/// SQ quanta and RQ WQEs as rdma-core sizes them for a few WRs (`irdma_get_sqdepth`
/// rounds `WRs + 258` up to a power of two).
const SQ: u32 = 512;
const RQ: u32 = 64;
/// `IRDMA_SQ_RING_FREE_QUANTA` keeps 257 quanta back.
const SQ_RESERVE: u32 = 257;
/// Image sizes that every row's reads fit in (an image of one row is read with another's
/// layout in `another_release_s_image_is_refused`).
const CTX_BYTES: usize = 512;
const UQP_BYTES: usize = 512;
const IBV_QPT_RC: u32 = 2;
const IBV_QPT_UC: u32 = 3;
/// `IRDMA_WRITE_WITH_IMM | IRDMA_SEND_WITH_IMM | IRDMA_ROCE`: a RoCE RC QP.
const ROCE_CAPS: u32 = 7;
/// `IRDMA_WRITE_WITH_IMM`: an iWARP QP.
const IWARP_CAPS: u32 = 1;

/// Memory rdma-core would own, zeroed, reached only through the one pointer taken from it
/// (so the attach's raw reads and the test's raw writes never alias a reference). An
/// 8-aligned block's pointer is the start of a block of the C allocator (Rust's default
/// allocator takes a zeroed `Vec<u64>` from `calloc`), as the CQ read's
/// `malloc_usable_size` check asks.
struct Block {
    _mem: Vec<u64>,
    ptr: *mut u8,
}

impl Block {
    fn new(bytes: usize) -> Block {
        Block::aligned(bytes, 8)
    }
    fn aligned(bytes: usize, align: usize) -> Block {
        let mut mem = vec![0u64; (bytes + align).div_ceil(8)];
        let base = mem.as_mut_ptr().cast::<u8>();
        let ptr = base.wrapping_add(base.align_offset(align));
        Block { _mem: mem, ptr }
    }
    fn addr(&self, off: usize) -> u64 {
        self.ptr.wrapping_add(off) as u64
    }
    fn put8(&self, off: usize, v: u8) {
        // SAFETY: a test-owned block, `off` inside it (the layout's fields fit the structs, checked in uapi); nothing else uses the block concurrently.
        unsafe { self.ptr.add(off).write_volatile(v) }
    }
    fn put16(&self, off: usize, v: u16) {
        // SAFETY: as `put8`, 2-aligned.
        unsafe { self.ptr.add(off).cast::<u16>().write_volatile(v) }
    }
    fn put32(&self, off: usize, v: u32) {
        // SAFETY: as `put8`, 4-aligned.
        unsafe { self.ptr.add(off).cast::<u32>().write_volatile(v) }
    }
    fn put64(&self, off: usize, v: u64) {
        // SAFETY: as `put8`, 8-aligned.
        unsafe { self.ptr.add(off).cast::<u64>().write_volatile(v) }
    }
    fn get8(&self, off: usize) -> u8 {
        // SAFETY: as `put8`.
        unsafe { self.ptr.add(off).read_volatile() }
    }
    fn get32(&self, off: usize) -> u32 {
        // SAFETY: as `put32`.
        unsafe { self.ptr.add(off).cast::<u32>().read_volatile() }
    }
    fn get64(&self, off: usize) -> u64 {
        // SAFETY: as `put64`.
        unsafe { self.ptr.add(off).cast::<u64>().read_volatile() }
    }
}

/// Which rdma-core and which device: a layout row, the release loaded, the generation.
#[derive(Clone, Copy, Debug)]
struct Setup {
    layout: &'static IrdmaLayout,
    release: (u32, u32),
    hw_rev: HwRev,
}

impl Setup {
    fn compat(&self) -> Compat {
        Compat::for_release(self.release.0, self.release.1).expect("a release of the table")
    }
    /// The kernel's feature flags for the generation (`icrdma_init_hw`, `ig3rdma_init_hw`;
    /// GEN1 sets none).
    fn features(&self) -> u64 {
        match self.hw_rev {
            HwRev::Gen1 => 0,
            HwRev::Gen2 => FEATURE_RTS_AE | FEATURE_CQ_RESIZE,
            HwRev::Gen3 => FEATURE_RTS_AE | FEATURE_CQ_RESIZE | FEATURE_64_BYTE_CQE,
        }
    }
    /// 64-byte CQEs: GEN3 with a provider that knows them (v64).
    fn cqe_size(&self) -> u32 {
        if self.hw_rev == HwRev::Gen3 && self.compat() == Compat::Current {
            64
        } else {
            32
        }
    }
    fn entries(&self) -> u32 {
        ring_slots(REQUESTED, self.hw_rev, self.cqe_size(), Rounding::from(self.compat())).unwrap()
    }
    fn what(&self) -> String {
        format!("v{}.{} {:?}", self.release.0, self.release.1, self.hw_rev)
    }
}

/// Every row, at its first and last release, on GEN2 and GEN1; and GEN3 where the row's
/// provider handles it (v64).
fn setups() -> Vec<Setup> {
    let mut v = Vec::new();
    for layout in &IRDMA_LAYOUTS {
        for release in [layout.first, layout.last] {
            for hw_rev in [HwRev::Gen2, HwRev::Gen1, HwRev::Gen3] {
                let s = Setup { layout, release, hw_rev };
                if hw_rev != HwRev::Gen3 || s.compat() == Compat::Current {
                    v.push(s);
                }
            }
        }
    }
    v
}

/// The model's ring, and images of the context and the CQ that describe it as rdma-core's
/// provider of `setup` would.
struct World {
    setup: Setup,
    model: IrdmaModel,
    ctx: Block,
    pd: Block,
    db: Block,
    ucq: Block,
}

impl World {
    fn new(setup: Setup) -> World {
        let l = setup.layout;
        let entries = setup.entries();
        let cfg = ModelConfig { entries, hw_rev: setup.hw_rev, cqe_size: setup.cqe_size(), cq_id: CQ_ID };
        let model = IrdmaModel::new(cfg).unwrap();
        let w = World {
            setup,
            model,
            ctx: Block::new(CTX_BYTES),
            pd: Block::new(64),
            db: Block::aligned(4096, 4096),
            ucq: Block::new(l.cq.size),
        };
        // The context: irdma_uvcontext after its ibv_context.
        let attrs = l.ctx.uk_attrs;
        w.ctx.put64(attrs + l.uk_attrs.feature_flags, setup.features());
        w.ctx.put32(attrs + l.uk_attrs.max_hw_cq_size, 1 << 20);
        // The fields around hw_rev, as the kernel fills them (`max_hw_sq_chunk` just
        // before it; v48 puts `min_hw_wq_size` between): what a wrong row reads instead.
        w.ctx.put16(attrs + l.uk_attrs.max_hw_sq_chunk, setup.hw_rev.sq_chunk_quanta() as u16);
        if l.uk_attrs.max_hw_sq_chunk + 2 < l.uk_attrs.hw_rev {
            w.ctx.put16(attrs + l.uk_attrs.max_hw_sq_chunk + 2, 8);
        }
        w.ctx.put8(attrs + l.uk_attrs.hw_rev, setup.hw_rev as u8);
        w.ctx.put64(l.ctx.iwupd, w.pd.addr(0));
        w.ctx.put64(l.ctx.db, w.db.addr(0));
        // The CQ, as ucreate_cq and irdma_uk_cq_init leave it.
        let c = &l.cq;
        let q = &w.ucq;
        let resize = setup.features() & FEATURE_CQ_RESIZE != 0;
        let pages = (entries as usize * setup.cqe_size() as usize).div_ceil(4096) * 4096;
        let (shadow_mem, shadow_off) = w.model.shadow_area();
        q.put64(IBV_CQ_CONTEXT, w.ctx.addr(0));
        q.put32(IBV_CQ_CQE, REQUESTED);
        q.put64(c.vmr + IBV_MR_CONTEXT, w.ctx.addr(0));
        q.put64(c.vmr + IBV_MR_PD, w.pd.addr(0));
        if resize {
            q.put64(c.vmr_shadow_area + IBV_MR_CONTEXT, w.ctx.addr(0));
            q.put64(c.vmr_shadow_area + IBV_MR_PD, w.pd.addr(0));
        }
        q.put64(c.buf_size, (pages + if resize { 0 } else { 64 }) as u64);
        q.put64(c.cq_base, w.model.ring_mem().as_ptr() as u64);
        q.put64(c.cqe_alloc_db, w.db.addr(0x40));
        q.put64(c.shadow_area, shadow_mem.as_ptr().wrapping_add(shadow_off) as u64);
        q.put32(c.cq_id, CQ_ID);
        q.put32(c.cq_size, entries);
        q.put32(c.cq_ring + 8, entries);
        q.put8(c.polarity, 1);
        q.put8(c.avoid_mem_cflct, u8::from(setup.cqe_size() == 64));
        q.put64(c.resize_list, q.addr(c.resize_list));
        q.put64(c.resize_list + 8, q.addr(c.resize_list));
        w
    }

    fn cq_ptr(&self) -> *mut ffi::ibv_cq {
        self.ucq.ptr.cast()
    }

    /// The attach's first step, as on hardware, with another layout row or release if
    /// asked.
    fn read_with(&self, layout: &'static IrdmaLayout, compat: Compat) -> Result<(PrivateCq, RdmaCoreCqState), String> {
        // SAFETY: the images are a `struct irdma_ucq` of `cq.size` bytes (the same in every row) and a context block of `CTX_BYTES`, more than any row's `ctx_span()`.
        unsafe { read_cq(self.cq_ptr(), self.ctx.ptr.cast(), layout, compat) }
    }

    fn read(&self) -> Result<(PrivateCq, RdmaCoreCqState), String> {
        self.read_with(self.setup.layout, self.setup.compat())
    }

    /// The whole CQ attach: read, open the poller, make the backend.
    fn attach(&self) -> Result<IrdmaBackend, String> {
        let (cq, state) = self.read()?;
        let poller = poller_on(&cq, None, self.setup.compat())?;
        Ok(IrdmaBackend::new(poller, cq, state, self.setup.layout, None))
    }

    /// rdma-core's copy of the consumer state: `cq_ring.head`, `.tail`, `polarity`.
    fn cq_state(&self) -> (u32, u32, u8) {
        let c = &self.setup.layout.cq;
        (self.ucq.get32(c.cq_ring), self.ucq.get32(c.cq_ring + 4), self.ucq.get8(c.polarity))
    }
}

/// One QP's images: its `irdma_uqp`, its tables and WQE buffer, and rdma-core's post verbs
/// over them.
struct QpImage {
    layout: &'static IrdmaLayout,
    hw_rev: HwRev,
    uqp: Block,
    trk: Block,
    rq_wrid: Block,
    wqes: Block,
    rq_shift: u8,
    iwarp: bool,
}

impl QpImage {
    /// A QP of `w`'s context whose send and receive queues complete on `send_cq` and
    /// `recv_cq`, as `irdma_ucreate_qp` leaves it. GEN1 (X722) QPs are iWARP with one
    /// connection WQE and 128-byte receive WQEs; others RoCE with 64-byte receive WQEs.
    fn new(w: &World, send_cq: u64, recv_cq: u64) -> QpImage {
        let l = w.setup.layout;
        let iwarp = w.setup.hw_rev == HwRev::Gen1;
        let rq_shift = if iwarp { 2 } else { 1 };
        let img = QpImage {
            layout: l,
            hw_rev: w.setup.hw_rev,
            uqp: Block::aligned(UQP_BYTES, 1024),
            trk: Block::new(SQ as usize * SQ_WRTRK_SIZE),
            rq_wrid: Block::new(RQ as usize * 8),
            wqes: Block::aligned((SQ as usize + ((RQ as usize) << rq_shift)) * QUANTUM_SIZE, 4096),
            rq_shift,
            iwarp,
        };
        let (u, q) = (&l.uqp, &l.qp);
        let b = &img.uqp;
        let at = |off: usize| u.qp + off;
        b.put64(IBV_QP_CONTEXT, w.ctx.addr(0));
        b.put64(IBV_QP_SEND_CQ, send_cq);
        b.put64(IBV_QP_RECV_CQ, recv_cq);
        b.put32(IBV_QP_QP_NUM, QPN);
        b.put32(IBV_QP_TYPE, IBV_QPT_RC);
        b.put64(u.send_cq, send_cq);
        b.put64(u.recv_cq, recv_cq);
        b.put64(at(q.sq_base), img.wqes.addr(0));
        b.put64(at(q.rq_base), img.wqes.addr(SQ as usize * QUANTUM_SIZE));
        b.put64(at(q.uk_attrs), w.ctx.addr(l.ctx.uk_attrs));
        b.put64(at(q.wqe_alloc_db), w.db.addr(0));
        b.put64(at(q.sq_wrtrk_array), img.trk.addr(0));
        b.put64(at(q.rq_wrid_array), img.rq_wrid.addr(0));
        b.put32(at(q.sq_ring + 8), SQ);
        b.put32(at(q.rq_ring + 8), RQ);
        b.put32(at(q.qp_id), QPN);
        b.put32(at(q.qp_caps), if iwarp { IWARP_CAPS } else { ROCE_CAPS });
        b.put32(at(q.sq_size), SQ >> 2);
        b.put32(at(q.rq_size), RQ);
        b.put8(at(q.rq_wqe_size), rq_shift);
        b.put8(at(q.rq_wqe_size_multiplier), 1 << rq_shift);
        b.put64(at(q.back_qp), b.addr(0));
        b.put64(at(q.lock), b.addr(u.lock));
        if iwarp {
            // `irdma_setup_connection_wqes` (legacy GEN1: one).
            b.put16(at(q.conn_wqes), 1);
            b.put32(at(q.sq_ring), 1);
            b.put32(at(q.sq_ring + 4), 1);
            b.put8(at(q.flags), QP_FLAG_FIRST_SQ_WQ);
        }
        img
    }

    fn ibv_qp(&self) -> *mut ffi::ibv_qp {
        self.uqp.ptr.cast()
    }

    /// The completion context CQEs carry.
    fn handle(&self) -> u64 {
        self.uqp.addr(self.layout.uqp.qp)
    }

    fn field(&self, off: usize) -> usize {
        self.layout.uqp.qp + off
    }

    fn ring(&self, send: bool) -> (u32, u32, u32) {
        let r = self.field(if send { self.layout.qp.sq_ring } else { self.layout.qp.rq_ring });
        (self.uqp.get32(r), self.uqp.get32(r + 4), self.uqp.get32(r + 8))
    }

    fn set_head(&self, send: bool, head: u32) {
        let r = self.field(if send { self.layout.qp.sq_ring } else { self.layout.qp.rq_ring });
        self.uqp.put32(r, head);
    }

    fn used(&self, send: bool) -> u32 {
        let (head, tail, size) = self.ring(send);
        (head + size - tail) % size
    }

    /// `IRDMA_SQ_RING_FREE_QUANTA`.
    fn sq_free(&self) -> u32 {
        SQ - self.used(true) - SQ_RESERVE
    }

    /// What `IRDMA_RING_FULL_ERR` leaves a receive.
    fn rq_free(&self) -> u32 {
        RQ - self.used(false) - 1
    }

    /// One SQ quantum's tracking entry and WQE header, as a post writes them.
    fn write_wqe(&self, idx: u32, wr_id: u64, wr_len: u32, quanta: u16, opcode: u8) {
        let e = idx as usize * SQ_WRTRK_SIZE;
        self.trk.put64(e, wr_id);
        self.trk.put32(e + SQ_WRTRK_WR_LEN, wr_len);
        self.trk.put16(e + SQ_WRTRK_QUANTA, quanta);
        let hdr = (u64::from(opcode) << 32) | HDR_VALID;
        self.wqes.put64(idx as usize * QUANTUM_SIZE + HDR_OFFSET, hdr.to_le());
    }

    /// `irdma_qp_get_next_send_wqe` and the WQE it fills: NOP pads up to the chunk
    /// boundary a WR would straddle, then the WR. Returns its WQE index, or `None` where
    /// rdma-core returns ENOMEM.
    fn post_send(&self, wr_id: u64, quanta: u16, opcode: u8, wr_len: u32) -> Option<u16> {
        let chunk = self.hw_rev.sq_chunk_quanta();
        let (mut head, _, _) = self.ring(true);
        let avail = chunk - head % chunk;
        let q = u32::from(quanta);
        let pad = if q > avail { avail } else { 0 };
        if q + pad > self.sq_free() {
            return None;
        }
        for _ in 0..pad {
            // `irdma_nop_1` sets only the quanta of the entry.
            let e = head as usize * SQ_WRTRK_SIZE;
            self.trk.put16(e + SQ_WRTRK_QUANTA, 1);
            self.wqes
                .put64(head as usize * QUANTUM_SIZE + HDR_OFFSET, ((u64::from(sq_op::NOP) << 32) | HDR_VALID).to_le());
            head = (head + 1) % SQ;
        }
        self.write_wqe(head, wr_id, wr_len, quanta, opcode);
        self.set_head(true, (head + q) % SQ);
        Some(head as u16)
    }

    /// `irdma_uk_post_receive`: the wr_id at the head, which moves on. Returns the RQ
    /// index, or `None` when the ring is full.
    fn post_recv(&self, wr_id: u64) -> Option<u16> {
        if self.rq_free() == 0 {
            return None;
        }
        let (head, _, _) = self.ring(false);
        self.rq_wrid.put64(head as usize * 8, wr_id);
        self.set_head(false, (head + 1) % RQ);
        Some(head as u16)
    }

    /// The attach's QP step, as on hardware, with another row if asked.
    fn read_with(&self, cq: &PrivateCq, layout: &'static IrdmaLayout) -> Result<PrivateQp, String> {
        // SAFETY: the image block has `UQP_BYTES`, more than any row's `uqp_span()`.
        unsafe { read_qp(self.ibv_qp(), cq, layout) }
    }

    fn read(&self, cq: &PrivateCq) -> Result<PrivateQp, String> {
        self.read_with(cq, self.layout)
    }

    fn recv_cqe(&self, idx: u16, op: u8, len: u32) -> ModelCqe {
        ModelCqe::recv(self.handle(), QPN, idx, self.rq_shift, op, len)
    }
}

fn poll_all(b: &mut IrdmaBackend) -> Vec<Completion> {
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

/// A backend on `w` with `qp` adopted.
fn attached(w: &World, qp: &QpImage) -> IrdmaBackend {
    let mut b = w.attach().unwrap_or_else(|e| panic!("{}: {e}", w.setup.what()));
    let cq = *b.expect().0;
    b.adopt(qp.read(&cq).unwrap_or_else(|e| panic!("{}: {e}", w.setup.what()))).unwrap();
    b
}

#[test]
fn every_release_s_images_attach_and_posts_complete_with_their_wr_ids() {
    for s in setups() {
        let what = s.what();
        let mut w = World::new(s);
        let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
        // A receive rdma-core posted before the attach.
        let early = qp.post_recv(0xb0).unwrap();
        let mut b = attached(&w, &qp);
        assert_eq!(b.qpns(), [QPN]);
        w.model.push(&qp.recv_cqe(early, rq_op::ROCE_SEND_ONLY, 7)).unwrap();
        let got = poll_all(&mut b);
        assert_eq!(got.len(), 1, "{what}");
        assert_eq!((got[0].wr_id, got[0].opcode, got[0].byte_len, got[0].qp_num), (0xb0, WcOpcode::Recv, 7, QPN));
        assert_eq!(qp.rq_free(), RQ - 1, "{what}: the receive's slot is free again");

        // Many laps of the CQ ring and the SQ: per round an unsignaled send and a signaled
        // 3-quanta (GEN1: 2) write (one CQE retires both, NOP pads on chunk boundaries), a receive
        // and a receive with immediate data (an extended CQE: two ring slots in 32-byte
        // mode).
        let sq_full = qp.sq_free();
        let entries = w.setup.entries();
        // GEN1's WQEs are at most one 2-quanta chunk.
        let wr_quanta = if s.hw_rev == HwRev::Gen1 { 2 } else { 3 };
        let mut next = 0x1000u64;
        for round in 0..(3 * SQ / 4) {
            qp.post_send(next, 1, sq_op::SEND, 10).unwrap();
            let sig = qp.post_send(next + 1, wr_quanta, sq_op::RDMA_WRITE, 20).unwrap();
            let r0 = qp.post_recv(next + 2).unwrap();
            let r1 = qp.post_recv(next + 3).unwrap();
            assert!(
                qp.sq_free() <= sq_full - 1 - u32::from(wr_quanta),
                "{what} round {round}: the posts took their quanta"
            );
            w.model.push(&ModelCqe::send(qp.handle(), QPN, sig, sq_op::RDMA_WRITE)).unwrap();
            w.model.push(&qp.recv_cqe(r0, rq_op::ROCE_SEND_ONLY, 64)).unwrap();
            w.model.push(&qp.recv_cqe(r1, rq_op::ROCE_SEND_ONLY_WITH_IMM, 65).with_imm(round)).unwrap();
            let got = poll_all(&mut b);
            let ids: Vec<(u64, WcStatus, WcOpcode, u32)> =
                got.iter().map(|c| (c.wr_id, c.status, c.opcode, c.byte_len)).collect();
            // iWARP: a receive with immediate data is RECV_RDMA_WITH_IMM (`set_ib_wc_op_rq`).
            let imm_op = if qp.iwarp { WcOpcode::RecvRdmaWithImm } else { WcOpcode::Recv };
            assert_eq!(
                ids,
                [
                    (next + 1, WcStatus::Success, WcOpcode::RdmaWrite, 20),
                    (next + 2, WcStatus::Success, WcOpcode::Recv, 64),
                    (next + 3, WcStatus::Success, imm_op, 65),
                ],
                "{what} round {round}"
            );
            assert_eq!((got[2].wc_flags & WcFlags::WITH_IMM, got[2].imm_data), (WcFlags::WITH_IMM, round.to_be()));
            assert_eq!(qp.sq_free(), sq_full, "{what} round {round}: sq_ring.tail written back");
            assert_eq!(qp.rq_free(), RQ - 1, "{what} round {round}: rq_ring.tail written back");
            // rdma-core's consumer state follows the poll: head = tail = the model's
            // producer slot, polarity its lap's.
            let prod = w.model.prod();
            let (head, tail, pol) = w.cq_state();
            assert_eq!((head, tail, u32::from(pol)), (prod % entries, prod % entries, u32::from(prod < entries)));
            assert_eq!(w.model.shadow_head(), head, "{what} round {round}: the shadow area has the head");
            next += 0x10;
        }
    }
}

#[test]
fn a_cq_rdma_core_polled_before_is_picked_up_where_it_stopped() {
    for s in setups() {
        let mut w = World::new(s);
        let entries = s.entries();
        // rdma-core consumed more than a lap of CQEs of a destroyed QP (context 0), and
        // wrote its head and polarity.
        for _ in 0..entries + 5 {
            w.model.push(&ModelCqe::send(0, 0, 0, sq_op::SEND)).unwrap();
            w.model.release_all();
        }
        let c = &s.layout.cq;
        w.ucq.put32(c.cq_ring, 5);
        w.ucq.put32(c.cq_ring + 4, 5);
        w.ucq.put8(c.polarity, 0);
        let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
        let mut b = attached(&w, &qp);
        let r = qp.post_recv(0x77).unwrap();
        w.model.push(&qp.recv_cqe(r, rq_op::ROCE_SEND_ONLY, 1)).unwrap();
        let got = poll_all(&mut b);
        assert_eq!(got.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x77], "{}", s.what());
        assert_eq!(w.cq_state(), (6, 6, 0));
    }
}

#[test]
fn a_flushed_send_queue_reports_every_wr_and_skips_the_nop_pads_rdma_core_wrote() {
    let s = Setup { layout: &IRDMA_LAYOUTS[1], release: (52, 0), hw_rev: HwRev::Gen2 };
    let mut w = World::new(s);
    let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
    let mut b = attached(&w, &qp);
    // 3 + 3 quanta, then a 3-quanta WR that would straddle the 8-quanta chunk: two NOPs.
    let first = qp.post_send(0x1, 3, sq_op::SEND, 30).unwrap();
    qp.post_send(0x2, 3, sq_op::SEND, 31).unwrap();
    assert_eq!(qp.post_send(0x3, 3, sq_op::RDMA_WRITE, 32), Some(8));
    let sq_full = qp.sq_free() + 8 + 3;
    // The QP went to error: GEN2 writes one flush CQE for the first outstanding WR.
    assert_eq!(w.model.flush(qp.handle(), QPN, true, flush::LOC_LEN_ERR, &[first]).unwrap(), 1);
    let got = poll_all(&mut b);
    let ids: Vec<(u64, WcStatus, u32)> = got.iter().map(|c| (c.wr_id, c.status, c.byte_len)).collect();
    assert_eq!(ids, [(0x1, WcStatus::LocLenErr, 30), (0x2, WcStatus::WrFlushErr, 31), (0x3, WcStatus::WrFlushErr, 32)]);
    assert_eq!(qp.sq_free(), sq_full, "every flushed quantum, pads included, is free again");
}

#[test]
fn a_dropped_push_wqe_clears_rdma_core_s_push_mode() {
    let s = Setup { layout: &IRDMA_LAYOUTS[0], release: (44, 0), hw_rev: HwRev::Gen2 };
    let mut w = World::new(s);
    let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
    let flags = qp.field(s.layout.qp.flags);
    qp.uqp.put8(flags, QP_FLAG_PUSH_MODE);
    let mut b = attached(&w, &qp);
    let i = qp.post_send(0x9, 1, sq_op::SEND, 1).unwrap();
    w.model.push(&ModelCqe::send(qp.handle(), QPN, i, sq_op::SEND).push_dropped()).unwrap();
    assert_eq!(poll_all(&mut b).len(), 1);
    assert_eq!(qp.uqp.get8(flags), QP_FLAG_PUSH_DROPPED, "push_mode off, push_dropped on, as rdma-core's poll");
}

#[test]
fn only_the_queue_that_completes_here_has_its_tail_written() {
    let s = Setup { layout: &IRDMA_LAYOUTS[2], release: (64, 0), hw_rev: HwRev::Gen2 };
    let mut w = World::new(s);
    // Sends complete here, receives on another CQ, whose poller moves the RQ tail.
    let qp = QpImage::new(&w, w.ucq.addr(0), 0x5000);
    let mut b = attached(&w, &qp);
    let r = qp.field(s.layout.qp.rq_ring);
    qp.post_recv(1).unwrap();
    qp.post_recv(2).unwrap();
    qp.uqp.put32(r + 4, 2);
    let i = qp.post_send(0x9, 1, sq_op::SEND, 1).unwrap();
    w.model.push(&ModelCqe::send(qp.handle(), QPN, i, sq_op::SEND)).unwrap();
    assert_eq!(poll_all(&mut b).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x9]);
    assert_eq!(qp.ring(false), (2, 2, RQ), "the other CQ's RQ tail is left alone");
    assert_eq!(qp.ring(true).1, 1, "the SQ tail moved");
}

#[test]
fn a_cqe_of_a_qp_nobody_attached_is_a_fault_item_and_the_rest_still_polls() {
    let s = Setup { layout: &IRDMA_LAYOUTS[1], release: (48, 0), hw_rev: HwRev::Gen2 };
    let mut w = World::new(s);
    let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
    let mut b = attached(&w, &qp);
    let i = qp.post_send(0x5, 1, sq_op::SEND, 1).unwrap();
    w.model.push(&ModelCqe::send(0xdead_0000, QPN + 1, 0, sq_op::SEND)).unwrap();
    w.model.push(&ModelCqe::send(qp.handle(), QPN, i, sq_op::SEND)).unwrap();
    let got = poll_all(&mut b);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].fault_kind, FaultKind::UnknownQp);
    assert_eq!(got[1].wr_id, 0x5);
}

#[test]
fn the_generic_backend_may_take_over_only_until_the_first_cqe_is_consumed() {
    let s = Setup { layout: &IRDMA_LAYOUTS[0], release: (44, 0), hw_rev: HwRev::Gen2 };
    let mut w = World::new(s);
    let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
    let mut b = attached(&w, &qp);
    assert!(!b.can_fall_back(), "BackendChoice::Direct: never");
    b.allow_fallback(true);
    assert_eq!(poll_all(&mut b).len(), 0);
    assert!(b.can_fall_back(), "an empty poll consumes nothing");
    assert_eq!(w.cq_state(), (0, 0, 1), "and writes nothing back");
    let i = qp.post_send(1, 1, sq_op::SEND, 1).unwrap();
    w.model.push(&ModelCqe::send(qp.handle(), QPN, i, sq_op::SEND)).unwrap();
    assert_eq!(poll_all(&mut b).len(), 1);
    assert!(!b.can_fall_back(), "rdma-core's consumer state is dvcq's now");
}

/// Runs the CQ attach on an image `spoil` changed after it was built; returns the error.
fn cq_refused(s: Setup, spoil: impl Fn(&World)) -> String {
    let w = World::new(s);
    spoil(&w);
    w.attach().map(|_| ()).expect_err("a spoiled CQ image attaches")
}

#[test]
fn corrupted_cq_images_are_refused_naming_the_cq_and_the_field() {
    for s in setups() {
        let (l, c) = (s.layout, &s.layout.cq);
        let rel = format!("rdma-core v{}.{}-v{}.{}", l.first.0, l.first.1, l.last.0, l.last.1);
        let entries = s.entries();
        let e = cq_refused(s, |w| {
            w.ucq.put32(c.cq_size, entries + 2);
            w.ucq.put32(c.cq_ring + 8, entries + 2);
        });
        assert!(
            e.starts_with(&format!(
                "cq 0x11: cq_size {} is not the ring {rel} allocates for ibv_cq.cqe 20",
                entries + 2
            )),
            "{e}"
        );
        let e = cq_refused(s, |w| w.ucq.put32(c.cq_size, entries + 2));
        assert!(e.contains("does not fit cq_size"), "{e}");
        let e = cq_refused(s, |w| w.ctx.put8(l.ctx.uk_attrs + l.uk_attrs.hw_rev, 7));
        assert_eq!(
            e,
            format!(
                "cq 0x11: the context's uk_attrs.hw_rev is 7, not 1, 2 or 3: not the struct irdma_uvcontext of {rel}"
            )
        );
        let e = cq_refused(s, |w| w.ucq.put64(c.vmr + IBV_MR_CONTEXT, 0x40));
        assert!(e.contains("the CQ buffer's registration names context 0x40") && e.ends_with(&rel), "{e}");
        let e = cq_refused(s, |w| w.ucq.put64(c.resize_list, 0x1000));
        assert!(e.contains("resize_list.next is 0x1000, not the list itself"), "{e}");
        let e = cq_refused(s, |w| w.ucq.put64(c.cq_ack_db, 0x1000));
        assert!(e.contains("cq_ack_db is 0x1000"), "{e}");
        let e = cq_refused(s, |w| w.ucq.put64(c.cqe_alloc_db, w.db.addr(0x80)));
        assert!(e.contains("cqe_alloc_db 0x") && e.contains("is not the context's doorbell page"), "{e}");
        let e = cq_refused(s, |w| w.ucq.put64(c.cq_base, w.model.ring_mem().as_ptr() as u64 + 64));
        assert!(e.contains("is not a page-aligned ring"), "{e}");
        let e = cq_refused(s, |w| w.ucq.put8(c.polarity, 2));
        assert_eq!(e, "cq 0x11: polarity is 2, not 0 or 1");
        let e = cq_refused(s, |w| w.ucq.put8(c.avoid_mem_cflct, u8::from(s.cqe_size() == 32)));
        assert!(e.starts_with("cq 0x11: avoid_mem_cflct (64-byte CQEs) is"), "{e}");
        let e = cq_refused(s, |w| w.ucq.put64(c.buf_size, 4096 * 9 + 8));
        assert!(e.starts_with("cq 0x11: buf_size 36872 is not"), "{e}");
        if s.features() & FEATURE_CQ_RESIZE == 0 {
            let e = cq_refused(s, |w| w.ucq.put64(c.buf_size, 4096 * 9));
            assert!(e.starts_with("cq 0x11: buf_size 36864 is not the 4160 bytes"), "{e}");
        }
        let e = cq_refused(s, |w| w.ucq.put64(c.shadow_area, w.model.ring_mem().as_ptr() as u64));
        assert!(e.starts_with("cq 0x11: shadow_area 0x"), "{e}");
        // The head rdma-core published is not the one its struct says.
        let e = cq_refused(s, |w| {
            w.ucq.put32(c.cq_ring, 3);
            w.ucq.put32(c.cq_ring + 4, 3);
        });
        assert_eq!(e, "cq 0x11: the shadow area's head 0 is not cq_ring.head 3 (rdma-core writes its head there after every CQE it consumes)");
        let e = cq_refused(s, |w| w.ucq.put64(IBV_CQ_CONTEXT, 0x40));
        assert_eq!(e, "cq 0x11: it belongs to another device context");
    }
}

#[test]
fn a_cq_resized_before_the_attach_attaches_with_its_new_ring() {
    // `irdma_uresize_cq` to cqe 100 on GEN2: a new ring of 202 slots (two pages),
    // `ibv_cq.cqe` 100, the head and polarity reset, and `buf_size` left at the first
    // buffer's one page; the
    // old buffer drained (resize_list empty), the shadow area's head written for the new
    // ring.
    let s = Setup { layout: &IRDMA_LAYOUTS[2], release: (64, 0), hw_rev: HwRev::Gen2 };
    let c = &s.layout.cq;
    let mut model =
        IrdmaModel::new(ModelConfig { entries: 202, hw_rev: HwRev::Gen2, cqe_size: 32, cq_id: CQ_ID }).unwrap();
    let w = World::new(s);
    w.ucq.put32(IBV_CQ_CQE, 100);
    w.ucq.put32(c.cq_size, 202);
    w.ucq.put32(c.cq_ring + 8, 202);
    assert_eq!(w.ucq.get64(c.buf_size), 4096);
    w.ucq.put64(c.cq_base, model.ring_mem().as_ptr() as u64);
    let (shadow_mem, shadow_off) = model.shadow_area();
    w.ucq.put64(c.shadow_area, shadow_mem.as_ptr().wrapping_add(shadow_off) as u64);
    let (cq, state) = w.read().unwrap();
    assert_eq!((cq.entries, cq.cqe_size), (202, 32));
    let mut b = IrdmaBackend::new(poller_on(&cq, None, s.compat()).unwrap(), cq, state, s.layout, None);
    let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
    b.adopt(qp.read(&cq).unwrap()).unwrap();
    let r = qp.post_recv(0x31).unwrap();
    model.push(&qp.recv_cqe(r, rq_op::ROCE_SEND_ONLY, 3)).unwrap();
    assert_eq!(poll_all(&mut b).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x31]);
}

#[test]
fn a_gen3_cq_of_a_provider_before_v64_is_refused() {
    // rdma-core v63 knows no 64-byte CQEs: its ring for a GEN3 device is laid out as
    // GEN2's, and dvcq's poller only reproduces v64's GEN3 handling.
    let s = Setup { layout: &IRDMA_LAYOUTS[1], release: (63, 1), hw_rev: HwRev::Gen3 };
    let e = cq_refused(s, |_| {});
    assert!(e.starts_with("cq 0x11: a GEN3 CQ needs Compat::Current"), "{e}");
}

/// Runs the QP read on an image `spoil` changed after it was built; returns the error.
fn qp_refused(s: Setup, spoil: impl Fn(&World, &QpImage)) -> String {
    let w = World::new(s);
    let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
    spoil(&w, &qp);
    let (cq, _) = w.read().unwrap();
    qp.read(&cq).map(|_| ()).expect_err("a spoiled QP image attaches")
}

#[test]
fn corrupted_qp_images_are_refused_naming_the_qp_and_the_field() {
    for s in setups() {
        let (l, q) = (s.layout, &s.layout.qp);
        let rel = format!("rdma-core v{}.{}-v{}.{}", l.first.0, l.first.1, l.last.0, l.last.1);
        let at = |off: usize| l.uqp.qp + off;
        let e = qp_refused(s, |_, qp| qp.uqp.put64(at(q.back_qp), 0x1000));
        assert!(e.starts_with("qp 0x2b: back_qp is 0x1000, not the QP") && e.ends_with(&rel), "{e}");
        let e = qp_refused(s, |_, qp| qp.uqp.put64(at(q.lock), 0x1000));
        assert!(e.starts_with("qp 0x2b: lock is 0x1000"), "{e}");
        let e = qp_refused(s, |_, qp| qp.uqp.put64(at(q.uk_attrs), 0x1000));
        assert!(e.starts_with("qp 0x2b: uk_attrs 0x1000 is not its context's"), "{e}");
        let e = qp_refused(s, |_, qp| qp.uqp.put64(at(q.wqe_alloc_db), 0x1000));
        assert!(e.starts_with("qp 0x2b: wqe_alloc_db 0x1000 is not its context's doorbell page"), "{e}");
        let e = qp_refused(s, |_, qp| qp.uqp.put32(at(q.qp_id), 0x99));
        assert_eq!(e, "qp 0x2b: qp_id 0x99 is not ibv_qp.qp_num");
        let e = qp_refused(s, |_, qp| qp.uqp.put32(at(q.sq_ring + 8), 500));
        assert!(e.starts_with("qp 0x2b: sq_ring.size 500 is not a power of two"), "{e}");
        let e = qp_refused(s, |_, qp| qp.uqp.put32(at(q.rq_size), 32));
        assert!(e.starts_with("qp 0x2b: rq_ring.size 64 is not rq_size 32"), "{e}");
        let e = qp_refused(s, |_, qp| qp.uqp.put32(at(q.rq_ring), RQ));
        assert!(e.starts_with("qp 0x2b: a ring position is outside its ring"), "{e}");
        let e = qp_refused(s, |_, qp| qp.uqp.put8(at(q.rq_wqe_size_multiplier), 3));
        assert!(e.contains("rq_wqe_size_multiplier 3 disagree"), "{e}");
        let e = qp_refused(s, |_, qp| qp.uqp.put16(at(q.conn_wqes), 2));
        assert_eq!(e, "qp 0x2b: conn_wqes is 2, not 0, 1 or 3");
        let e = qp_refused(s, |_, qp| qp.uqp.put64(at(q.sq_base), qp.wqes.addr(32)));
        assert!(e.contains("are not one page-aligned buffer"), "{e}");
        let e = qp_refused(s, |_, qp| qp.uqp.put64(at(q.rq_base), qp.wqes.addr(4096)));
        assert!(e.contains("are not one page-aligned buffer with the SQ's 512 quanta first"), "{e}");
        let e = qp_refused(s, |_, qp| qp.uqp.put64(at(q.rq_wrid_array), 0));
        assert!(e.contains("rq_wrid_array 0x0) are null or misaligned"), "{e}");
        let e = qp_refused(s, |_, qp| qp.uqp.put64(l.uqp.recv_cq, 0x1000));
        assert!(e.contains("the private send_cq/recv_cq") && e.ends_with(&rel), "{e}");
    }
}

#[test]
fn qps_of_another_context_or_cq_type_or_on_an_srq_are_refused() {
    let s = Setup { layout: &IRDMA_LAYOUTS[2], release: (64, 0), hw_rev: HwRev::Gen2 };
    let e = qp_refused(s, |_, qp| qp.uqp.put64(IBV_QP_CONTEXT, 0x40));
    assert_eq!(e, "qp 0x2b: it belongs to another device context");
    let e = qp_refused(s, |_, qp| {
        qp.uqp.put64(IBV_QP_SEND_CQ, 0x80);
        qp.uqp.put64(IBV_QP_RECV_CQ, 0x88);
    });
    assert!(e.starts_with("qp 0x2b: neither its send CQ (0x80) nor its receive CQ (0x88) is the attached CQ"), "{e}");
    let e = qp_refused(s, |_, qp| qp.uqp.put64(IBV_QP_SRQ, 0x90));
    assert_eq!(e, "qp 0x2b: it receives from an SRQ; adopting rdma-core's SRQs is not built yet");
    let e = qp_refused(s, |_, qp| qp.uqp.put32(IBV_QP_TYPE, IBV_QPT_UC));
    assert_eq!(e, "qp 0x2b: its type 3 is neither RC nor UD, the QPs rdma-core's irdma provider makes");
}

#[test]
fn a_qp_attached_twice_is_refused_and_nothing_changes() {
    let s = Setup { layout: &IRDMA_LAYOUTS[1], release: (50, 0), hw_rev: HwRev::Gen2 };
    let mut w = World::new(s);
    let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
    let mut b = attached(&w, &qp);
    let cq = *b.expect().0;
    let e = b.adopt(qp.read(&cq).unwrap()).unwrap_err();
    assert_eq!(e, "qp 0x2b is attached to this CQ already");
    let i = qp.post_send(0x42, 1, sq_op::SEND, 1).unwrap();
    w.model.push(&ModelCqe::send(qp.handle(), QPN, i, sq_op::SEND)).unwrap();
    assert_eq!(poll_all(&mut b).iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0x42]);
}

#[test]
fn another_release_s_image_is_refused() {
    for (right, wrong) in [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)] {
        let (lr, lw) = (&IRDMA_LAYOUTS[right], &IRDMA_LAYOUTS[wrong]);
        for hw_rev in [HwRev::Gen1, HwRev::Gen2] {
            let s = Setup { layout: lr, release: lr.first, hw_rev };
            let what = format!("{} read as v{}.{}", s.what(), lw.first.0, lw.first.1);
            let w = World::new(s);
            // The CQ structs are one text in every row; the context's hw_rev and db moved.
            let compat = Compat::for_release(lw.first.0, lw.first.1).unwrap();
            let e = w.read_with(lw, compat).map(|_| ()).expect_err(&what);
            assert!(
                e.contains("not the struct irdma_uvcontext of")
                    || e.contains("is not the context's doorbell page")
                    || e.contains("is not the ring"),
                "{what}: {e}"
            );
            // The QP structs: v64 moved every field after rq_base; v44 and v48 share one.
            let (cq, _) = w.read().unwrap();
            let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
            let got = qp.read_with(&cq, lw);
            if lr.qp == lw.qp {
                assert!(got.is_ok(), "{what}: the same struct irdma_qp_uk");
            } else {
                let e = got.map(|_| ()).expect_err(&what);
                assert!(e.contains("not the struct irdma_qp_uk of"), "{what}: {e}");
            }
        }
    }
    assert!(IrdmaLayout::for_release(43).is_none() && IrdmaLayout::for_release(65).is_none());
    assert_eq!(covered(), "v44.0-v47.9, v48.0-v63.1, v64.0-v64.0");
}

#[test]
fn an_unknown_or_unreadable_release_is_refused_with_the_ranges_covered() {
    let e = layout_for("irdma0", Some(Release { major: 43, minor: 0 })).unwrap_err();
    assert_eq!(
        e.to_string(),
        "irdma0: rdma-core v43.0 is not in dvcq's irdma layout table (v44.0-v47.9, v48.0-v63.1, v64.0-v64.0)"
    );
    assert!(matches!(
        layout_for("irdma0", Some(Release { major: 65, minor: 0 })),
        Err(crate::Error::UnknownRelease { .. })
    ));
    let e = layout_for("irdma0", None).unwrap_err();
    assert!(
        e.to_string().starts_with("irdma0: direct irdma attach refused: the rdma-core release could not be read"),
        "{e}"
    );
    for (major, minor, first, compat) in [
        (44, 0, (44, 0), Compat::V44),
        (47, 9, (44, 0), Compat::V52),
        (52, 3, (48, 0), Compat::V52),
        (64, 0, (64, 0), Compat::Current),
    ] {
        let (row, c) = layout_for("irdma0", Some(Release { major, minor })).unwrap();
        assert_eq!((row.first, c), (first, compat), "v{major}.{minor}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

    /// Whatever bytes rdma-core's CQ and context structs hold, reading them never panics
    /// (and follows no pointer), and what it accepts agrees with the public facts.
    #[test]
    fn garbage_in_the_private_cq_structs_is_refused_or_agrees_with_the_public_facts(
        row in 0..setups().len(),
        spoils in proptest::collection::vec((0usize..1024, proptest::prelude::any::<u8>(), proptest::prelude::any::<bool>()), 1..8),
    ) {
        let s = setups()[row];
        let w = World::new(s);
        for (at, byte, in_ctx) in spoils {
            let b = if in_ctx { &w.ctx } else { &w.ucq };
            let len = if in_ctx { s.layout.ctx_span() } else { s.layout.cq.size };
            b.put8(at % len, byte);
        }
        if let Ok((cq, _)) = w.read() {
            let requested = w.ucq.get32(IBV_CQ_CQE);
            proptest::prop_assert_eq!(cq.ctx, w.ctx.addr(0) as usize);
            proptest::prop_assert_eq!(Some(cq.entries), ring_slots(requested, cq.hw_rev, cq.cqe_size, Rounding::from(s.compat())));
            proptest::prop_assert!(cq.head < cq.entries && cq.ring % 4096 == 0);
            proptest::prop_assert_eq!(cq.arm_db, cq.db + 0x40);
            proptest::prop_assert_eq!(cq.cqe_size == 64, s.compat() == Compat::Current && cq.features & FEATURE_64_BYTE_CQE != 0);
        }
    }

    /// The same for the QP's `irdma_uqp`.
    #[test]
    fn garbage_in_the_private_qp_struct_is_refused_or_agrees_with_the_public_facts(
        row in 0..setups().len(),
        spoils in proptest::collection::vec((0usize..1024, proptest::prelude::any::<u8>()), 1..8),
    ) {
        let s = setups()[row];
        let w = World::new(s);
        let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
        for (at, byte) in spoils {
            qp.uqp.put8(at % s.layout.uqp_span(), byte);
        }
        let (cq, _) = w.read().unwrap();
        if let Ok(p) = qp.read(&cq) {
            proptest::prop_assert_eq!(p.qpn, qp.uqp.get32(IBV_QP_QP_NUM));
            proptest::prop_assert_eq!(p.handle, qp.handle());
            let c = p.config;
            proptest::prop_assert!(c.sq_quanta.is_power_of_two() && c.sq_quanta <= 1 << 15);
            proptest::prop_assert!(c.rq_wqes.is_power_of_two() && c.rq_wqes <= 1 << 15);
            proptest::prop_assert!(matches!(c.conn_wqes, 0 | 1 | 3) && c.rq_shift <= 3);
            let this = w.ucq.addr(0);
            proptest::prop_assert!(qp.uqp.get64(IBV_QP_SEND_CQ) == this || qp.uqp.get64(IBV_QP_RECV_CQ) == this);
            proptest::prop_assert_eq!(qp.uqp.get64(IBV_QP_CONTEXT), w.ctx.addr(0));
        }
    }
}

mod own;

/// The QP's table readers stay inside rdma-core's tables whatever index they are handed:
/// an index past the ring reads the slot `idx & (size - 1)` names.
#[test]
fn the_qp_table_readers_stay_inside_their_tables() {
    use dvcq_e810_dv::ForeignQp;
    let s = setups().remove(0);
    let w = World::new(s);
    let qp = QpImage::new(&w, w.ucq.addr(0), w.ucq.addr(0));
    let recvs: Vec<u16> = (0..3).map(|i| qp.post_recv(0x400 + i).unwrap()).collect();
    let send = qp.post_send(0x500, 1, sq_op::SEND, 10).unwrap();
    let (cq, _) = w.read().unwrap();
    let p = qp.read(&cq).unwrap();
    let (sq_size, rq_size) = (p.qp.sq_size(), p.qp.rq_size());
    for (k, r) in recvs.iter().enumerate() {
        for lap in [1, 3] {
            assert_eq!(p.qp.rq_wr_id(u32::from(*r) + lap * rq_size), 0x400 + k as u64);
        }
    }
    let e = p.qp.sq_entry(u32::from(send) + sq_size);
    assert_eq!((e.wr_id, e.wr_len, e.quanta), (0x500, 10, 1));
    assert_eq!(p.qp.sq_entry(u32::MAX).wr_id, p.qp.sq_entry(sq_size - 1).wr_id, "u32::MAX masks to the last slot");
}

/// A CQ row larger than the block that holds the `struct irdma_ucq` is refused before a
/// byte of it is read (the irdma rows share one CQ struct, so the larger row is made up).
#[test]
fn a_cq_row_larger_than_the_allocation_is_refused_before_reading() {
    let s = setups().remove(0);
    let compat = s.compat();
    let mut big = *s.layout;
    big.cq.size += 64;
    let big: &'static IrdmaLayout = Box::leak(Box::new(big));
    let w = World::new(s);
    let e = w.read_with(big, compat).map(|_| ()).unwrap_err();
    assert!(e.contains("usable bytes, fewer than the") && e.contains("not the struct irdma_ucq"), "{e}");
}
