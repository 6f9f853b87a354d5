//! Mirroring rdma-core's posting: the application posts with `ibv_post_send` /
//! `ibv_post_recv`, rdma-core's irdma provider fills its private tables
//! (`irdma_qp_uk.sq_wrtrk_array`, `rq_wrid_array`) and moves its ring heads, and a
//! registered [`Qp`] mirrors them instead of recording posts itself.
//!
//! The mirror moves at poll-call granularity, never per CQE:
//!
//! 1. At attach, [`Qp::adopt`] copies rdma-core's whole tables, its ring heads and tails
//!    and whether connection WQEs are still outstanding.
//! 2. Before a poll call (after the caller has seen a CQE ready, so every post it
//!    completes is visible), [`Qp::sync_posted`] copies the entries posted since the
//!    previous call: the ring slots between the mirror's head and rdma-core's.
//! 3. After the poll, [`Qp::hand_back`] stores the tails the completions moved, as
//!    rdma-core's own poll does (`IRDMA_RING_SET_TAIL(sq_ring, wqe_idx + quanta)`,
//!    `IRDMA_RING_SET_TAIL(rq_ring, array_idx + 1)`; `uk.c`, `irdma_uk_cq_poll_cmpl`), so
//!    the post path's free-space test (`IRDMA_SQ_RING_FREE_QUANTA`,
//!    `IRDMA_RING_FULL_ERR`) sees the room the completions made, and clears `push_mode`
//!    after a CQE reported a dropped push WQE, as that poll does.
//!
//! The registry never touches rdma-core's memory: a [`ForeignQp`] (in dvcq, the facade's
//! rdma-core glue) reads and writes it.

use super::{Qp, WrTrk};

/// One rdma-core QP (`struct irdma_qp_uk` and the tables it points to) as the owner of its
/// memory reads and writes it. Indexes passed in are below the queue's size.
pub trait ForeignQp {
    /// `sq_ring.size`: SQ quanta (the entries of `sq_wrtrk_array`).
    fn sq_size(&self) -> u32;
    /// `rq_ring.size`: RQ WQEs (the entries of `rq_wrid_array`).
    fn rq_size(&self) -> u32;
    /// `sq_ring.head`: the next quantum a post takes.
    fn sq_head(&self) -> u32;
    /// `sq_ring.tail`: the oldest quantum not retired.
    fn sq_tail(&self) -> u32;
    /// `rq_ring.head`.
    fn rq_head(&self) -> u32;
    /// `rq_ring.tail`.
    fn rq_tail(&self) -> u32;
    /// `sq_wrtrk_array[idx]` (`wrid`, `wr_len`, `quanta`) with the opcode of the WQE
    /// header at quantum `idx` (`IRDMAQPSQ_OPCODE`), which the flush path reads.
    fn sq_entry(&self, idx: u32) -> WrTrk;
    /// `rq_wrid_array[idx]`.
    fn rq_wr_id(&self, idx: u32) -> u64;
    /// `first_sq_wq`: connection WQEs (iWARP) not all completed yet.
    fn first_sq_wq(&self) -> bool;
    /// Stores `sq_ring.tail`.
    fn set_sq_tail(&self, tail: u32);
    /// Stores `rq_ring.tail`.
    fn set_rq_tail(&self, tail: u32);
    /// Clears `push_mode` and sets `push_dropped`, as rdma-core's poll does for a CQE
    /// with `IRDMACQ_PSHDROP`.
    fn note_push_dropped(&self);
}

/// rdma-core's queue does not fit the registered QP, or its ring positions are not inside
/// its ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AdoptError {
    /// The queue sizes differ.
    #[error("rdma-core's {what} has {theirs} entries, the registry's {ours}")]
    Size {
        /// Which queue: "sq" or "rq".
        what: &'static str,
        /// rdma-core's ring size.
        theirs: u32,
        /// The registry's.
        ours: u32,
    },
    /// A head or tail at or past the ring's size.
    #[error("rdma-core's {what} head {head} or tail {tail} is not below its size {size}")]
    Position {
        /// Which queue.
        what: &'static str,
        /// `head`.
        head: u32,
        /// `tail`.
        tail: u32,
        /// The ring size.
        size: u32,
    },
}

impl Qp {
    /// Takes over rdma-core's queues as they are: every table entry, both rings' heads
    /// and tails, and `first_sq_wq`. On error nothing changed.
    ///
    /// # Errors
    ///
    /// [`AdoptError`] when a size differs from the registered one or a position is not
    /// inside its ring.
    pub fn adopt(&mut self, src: &impl ForeignQp) -> Result<(), AdoptError> {
        let (sq, rq) = (self.sq.size(), self.rq.size());
        for (what, theirs, ours, head, tail) in [
            ("sq", src.sq_size(), sq, src.sq_head(), src.sq_tail()),
            ("rq", src.rq_size(), rq, src.rq_head(), src.rq_tail()),
        ] {
            if theirs != ours {
                return Err(AdoptError::Size { what, theirs, ours });
            }
            if head >= ours || tail >= ours {
                return Err(AdoptError::Position { what, head, tail, size: ours });
            }
        }
        for idx in 0..sq {
            self.sq_trk[idx as usize] = src.sq_entry(idx);
        }
        for idx in 0..rq {
            self.rq_wrid[idx as usize] = src.rq_wr_id(idx);
        }
        self.sq.set(src.sq_head(), src.sq_tail());
        self.rq.set(src.rq_head(), src.rq_tail());
        self.first_sq_wq = src.first_sq_wq();
        Ok(())
    }

    /// Copies the entries rdma-core posted since the last call (the slots from the
    /// mirror's heads to rdma-core's, at most one lap less one slot, as a post never fills
    /// the last) and its heads. Returns the SQ quanta and RQ WQEs copied. Quanta inside
    /// multi-quantum WQEs are copied too; no CQE names them.
    pub fn sync_posted(&mut self, src: &impl ForeignQp) -> (u32, u32) {
        let sq_mask = self.sq.mask();
        let sq_head = src.sq_head() & sq_mask;
        let sq_n = sq_head.wrapping_sub(self.sq.head) & sq_mask;
        for i in 0..sq_n {
            let idx = self.sq.head.wrapping_add(i) & sq_mask;
            if let Some(slot) = self.sq_trk.get_mut(idx as usize) {
                *slot = src.sq_entry(idx);
            }
        }
        self.sq.head = sq_head;
        let rq_mask = self.rq.mask();
        let rq_head = src.rq_head() & rq_mask;
        let rq_n = rq_head.wrapping_sub(self.rq.head) & rq_mask;
        for i in 0..rq_n {
            let idx = self.rq.head.wrapping_add(i) & rq_mask;
            if let Some(slot) = self.rq_wrid.get_mut(idx as usize) {
                *slot = src.rq_wr_id(idx);
            }
        }
        self.rq.head = rq_head;
        (sq_n, rq_n)
    }

    /// Stores the mirror's tails in rdma-core's rings where they differ, and passes on a
    /// dropped push WQE the last poll saw (once).
    pub fn hand_back(&mut self, src: &impl ForeignQp) {
        if src.sq_tail() != self.sq.tail {
            src.set_sq_tail(self.sq.tail);
        }
        if src.rq_tail() != self.rq.tail {
            src.set_rq_tail(self.rq.tail);
        }
        if self.push_dropped {
            src.note_push_dropped();
            self.push_dropped = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{QpConfig, QpRegistry};
    use core::cell::Cell;
    use dvcq_uapi::irdma::codes::sq_op;
    use dvcq_uapi::irdma::HwRev;

    /// A QP as rdma-core keeps it, posting the way its post verbs do.
    struct Fake {
        trk: Vec<Cell<WrTrk>>,
        rq_wrid: Vec<Cell<u64>>,
        sq: Cell<(u32, u32)>,
        rq: Cell<(u32, u32)>,
        first_sq_wq: bool,
        push_dropped: Cell<u32>,
    }

    impl Fake {
        fn new(sq: u32, rq: u32) -> Fake {
            Fake {
                trk: (0..sq).map(|_| Cell::new(WrTrk { wr_id: 0xdead, wr_len: 0, quanta: 1, opcode: 0x3f })).collect(),
                rq_wrid: (0..rq).map(|_| Cell::new(0xdead)).collect(),
                sq: Cell::new((0, 0)),
                rq: Cell::new((0, 0)),
                first_sq_wq: false,
                push_dropped: Cell::new(0),
            }
        }
        /// `irdma_qp_get_next_send_wqe` without NOP padding: returns the WQE index.
        fn post_send(&self, wr_id: u64, quanta: u16) -> u16 {
            let (head, tail) = self.sq.get();
            self.trk[head as usize].set(WrTrk { wr_id, wr_len: 64, quanta, opcode: sq_op::SEND });
            self.sq.set(((head + u32::from(quanta)) % self.trk.len() as u32, tail));
            head as u16
        }
        fn post_recv(&self, wr_id: u64) -> u16 {
            let (head, tail) = self.rq.get();
            self.rq_wrid[head as usize].set(wr_id);
            self.rq.set(((head + 1) % self.rq_wrid.len() as u32, tail));
            head as u16
        }
    }

    impl ForeignQp for Fake {
        fn sq_size(&self) -> u32 {
            self.trk.len() as u32
        }
        fn rq_size(&self) -> u32 {
            self.rq_wrid.len() as u32
        }
        fn sq_head(&self) -> u32 {
            self.sq.get().0
        }
        fn sq_tail(&self) -> u32 {
            self.sq.get().1
        }
        fn rq_head(&self) -> u32 {
            self.rq.get().0
        }
        fn rq_tail(&self) -> u32 {
            self.rq.get().1
        }
        fn sq_entry(&self, idx: u32) -> WrTrk {
            self.trk[idx as usize].get()
        }
        fn rq_wr_id(&self, idx: u32) -> u64 {
            self.rq_wrid[idx as usize].get()
        }
        fn first_sq_wq(&self) -> bool {
            self.first_sq_wq
        }
        fn set_sq_tail(&self, tail: u32) {
            self.sq.set((self.sq.get().0, tail));
        }
        fn set_rq_tail(&self, tail: u32) {
            self.rq.set((self.rq.get().0, tail));
        }
        fn note_push_dropped(&self) {
            self.push_dropped.set(self.push_dropped.get() + 1);
        }
    }

    fn registered(sq: u32, rq: u32) -> (QpRegistry, crate::QpId) {
        let mut r = QpRegistry::new(HwRev::Gen2);
        let id = r.register(0x1000, QpConfig::rc(7, sq, rq)).unwrap();
        (r, id)
    }

    #[test]
    fn posts_before_and_after_the_adopt_are_mirrored_and_the_tails_go_back() {
        let f = Fake::new(8, 4);
        // Work rdma-core posted and polled before the attach.
        f.post_send(100, 2);
        f.set_sq_tail(2);
        let early = f.post_send(101, 1);
        f.post_recv(200);
        let (mut r, id) = registered(8, 4);
        let qp = r.qp_mut(id).unwrap();
        qp.adopt(&f).unwrap();
        assert_eq!((qp.sq.head, qp.sq.tail, qp.sq_entry(u32::from(early)).wr_id), (3, 2, 101));
        assert_eq!((qp.rq.head, qp.rq.tail, qp.rq_entry(0)), (1, 0, 200));
        // Posts after the attach wrap the SQ: 3, 4..7, then 7 wraps to 0.
        let w = [f.post_send(102, 4), f.post_send(103, 2)];
        f.post_recv(201);
        assert_eq!(qp.sync_posted(&f), (6, 1));
        assert_eq!(qp.sq_entry(u32::from(w[1])).wr_id, 103);
        assert_eq!(qp.sq.head, 1, "the head wrapped with rdma-core's");
        assert_eq!(qp.sync_posted(&f), (0, 0), "nothing new");
        // A poll retires up to the second WR; the tails go back where rdma-core reads them.
        qp.sq.tail = (u32::from(w[1]) + 2) % 8;
        qp.rq.tail = 2;
        qp.hand_back(&f);
        assert_eq!((f.sq_tail(), f.rq_tail()), (1, 2));
        assert_eq!(f.push_dropped.get(), 0);
        qp.push_dropped = true;
        qp.hand_back(&f);
        qp.hand_back(&f);
        assert_eq!(f.push_dropped.get(), 1, "a dropped push is passed on once");
    }

    #[test]
    fn queues_of_another_size_or_positions_outside_them_are_refused() {
        let f = Fake::new(16, 4);
        let (mut r, id) = registered(8, 4);
        let qp = r.qp_mut(id).unwrap();
        let e = qp.adopt(&f).unwrap_err();
        assert_eq!(e.to_string(), "rdma-core's sq has 16 entries, the registry's 8");
        let f = Fake::new(8, 4);
        f.rq.set((4, 0));
        let e = qp.adopt(&f).unwrap_err();
        assert_eq!(e, AdoptError::Position { what: "rq", head: 4, tail: 0, size: 4 });
        assert_eq!(qp.rq.head, 0, "nothing taken over");
    }
}
