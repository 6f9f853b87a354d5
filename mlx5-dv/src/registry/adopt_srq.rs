//! Adopting rdma-core's SRQs: the application posts receives with `ibv_post_srq_recv`,
//! rdma-core fills its private wr_id table and takes WQEs off its free list, and the
//! registry mirrors the table and gives completed WQEs back to that list as rdma-core's own
//! poll does (`mlx5_free_srq_wqe` in rdma-core's `providers/mlx5/srq.c`, called from
//! `handle_responder` in `cq.c` for every SRQ receive).
//!
//! rdma-core's SRQ free list is threaded through the WQE buffer: each WQE begins with a
//! next segment naming the next free WQE, from `head` (the WQE the next post takes) to
//! `tail`. A post writes `wrid[head]` and follows the link, so the WQEs posted since the
//! mirror last looked are exactly the links from the mirror's `head` to rdma-core's.
//!
//! Per poll call, never per CQE:
//!
//! 1. Before the poll (after the caller has seen CQEs ready, so the posts they complete are
//!    visible), [`Srq::sync_posted`] walks the links from the mirror's head to rdma-core's,
//!    copying each WQE's wr_id.
//! 2. The poll completes SRQ receives from the mirror (unmasked WQE counter, as in
//!    rdma-core's `handle_responder`) and
//!    notes each completed WQE.
//! 3. After the poll, [`Srq::hand_back_freed`] frees the noted WQEs through
//!    [`ForeignSrq::free`], in completion order, the way the rdma-core release loaded
//!    frees them, so that `ibv_post_srq_recv` finds them again.
//!
//! The registry never touches rdma-core's memory: a [`ForeignSrq`] (the facade's glue)
//! reads and writes it.

use super::{AdoptError, Registry, Srq, NO_SQ_PATH, RECV_KIND_SHIFT};

/// One rdma-core SRQ (`struct mlx5_srq` and its WQE buffer) as the owner of its memory
/// reads and writes it. Indexes passed in are below [`ForeignSrq::max`].
pub trait ForeignSrq {
    /// `max`: WQEs in the buffer and entries in the wr_id table.
    fn max(&self) -> u32;
    /// `head`: the free list's first WQE, the one the next post takes.
    fn head(&self) -> u32;
    /// The `next_wqe_index` of WQE `idx`'s next segment: the free-list link a post
    /// followed from it.
    fn next(&self, idx: u32) -> u32;
    /// `wrid[idx]`.
    fn wr_id(&self, idx: u32) -> u64;
    /// Gives WQE `idx` back to the free list as the release loaded does
    /// (`mlx5_free_srq_wqe`).
    fn free(&self, idx: u32);
}

/// An adopted SRQ's mirror state.
#[derive(Debug, Clone)]
pub(crate) struct SrqAdoption {
    /// rdma-core's `head` when the mirror last copied posts.
    head: u32,
    /// WQEs completed since the last hand-back, in completion order; room for every WQE,
    /// reserved at adoption so that noting one never allocates.
    freed: Vec<u16>,
    /// Completions noted past that room (garbage naming a WQE twice between hand-backs).
    overflow: u64,
}

impl SrqAdoption {
    /// Notes that WQE `idx` completed.
    #[inline]
    pub(crate) fn freed(&mut self, idx: u16) {
        if self.freed.len() < self.freed.capacity() {
            self.freed.push(idx);
        } else {
            self.overflow += 1;
        }
    }
}

impl Registry {
    /// Takes over rdma-core's SRQ `srqn` as it is: every wr_id and the free list's head.
    /// From then on every QP (or XRC SRQ) registered on it, before or after this call,
    /// takes the slow receive path, which notes completed WQEs for
    /// [`Srq::hand_back_freed`]; a fast-path receive would leave them off rdma-core's
    /// free list, and rdma-core's posts would find the SRQ full.
    ///
    /// # Errors
    ///
    /// [`AdoptError`] when rdma-core's SRQ has another WQE count than the registry's, or
    /// when no SRQ `srqn` is registered (its `ours` is then 0).
    pub fn adopt_srq(&mut self, srqn: u32, src: &impl ForeignSrq) -> Result<(), AdoptError> {
        let slot = *self.by_srqn.get(&srqn).ok_or(AdoptError { what: "srq", theirs: src.max(), ours: 0 })?;
        self.srqs[slot as usize].adopt(src)?;
        for qp in self.qps.iter_mut().filter(|q| q.srq_slot() == Some(slot)) {
            qp.srq_adopted = true;
            let no_sq = qp.recv_path & NO_SQ_PATH;
            qp.recv_path = no_sq | (qp.recv_kind() as u32) << RECV_KIND_SHIFT | slot;
        }
        Ok(())
    }
}

impl Srq {
    /// Takes over rdma-core's SRQ as it is: every wr_id and the free list's head
    /// ([`Registry::adopt_srq`], which also moves the QPs already registered on it to the
    /// slow receive path).
    pub(crate) fn adopt(&mut self, src: &impl ForeignSrq) -> Result<(), AdoptError> {
        let ours = self.wrid.len() as u32;
        if src.max() != ours {
            return Err(AdoptError { what: "srq", theirs: src.max(), ours });
        }
        self.copy_all(src);
        let room = self.wrid.len();
        self.adoption = Some(Box::new(SrqAdoption { head: src.head(), freed: Vec::with_capacity(room), overflow: 0 }));
        Ok(())
    }

    /// Whether the SRQ is rdma-core's ([`Registry::adopt_srq`]).
    pub fn is_adopted(&self) -> bool {
        self.adoption.is_some()
    }

    fn copy_all(&mut self, src: &impl ForeignSrq) {
        for (i, w) in self.wrid.iter_mut().enumerate() {
            *w = src.wr_id(i as u32);
        }
    }

    /// Copies the wr_ids of the receives rdma-core posted since the last call: the WQEs
    /// linked from the mirror's head to rdma-core's. Returns how many. A chain that leaves
    /// the buffer or runs longer than the SRQ (garbage, or posts racing the poll against
    /// `ibv_post_srq_recv`'s contract) makes it copy the whole table instead, which holds
    /// every posted wr_id too.
    pub fn sync_posted(&mut self, src: &impl ForeignSrq) -> u32 {
        let max = self.wrid.len() as u32;
        let Some(a) = self.adoption.as_deref_mut() else {
            return 0;
        };
        let head = src.head();
        let (mut cur, mut n) = (a.head, 0u32);
        a.head = head;
        while cur != head {
            if cur >= max || n >= max {
                self.copy_all(src);
                self.posted = self.posted.wrapping_add(u64::from(n));
                return n;
            }
            self.wrid[cur as usize] = src.wr_id(cur);
            cur = src.next(cur);
            n += 1;
        }
        self.posted = self.posted.wrapping_add(u64::from(n));
        n
    }

    /// Gives the WQEs completed since the last call back to rdma-core's free list, in
    /// completion order. Returns how many.
    pub fn hand_back_freed(&mut self, src: &impl ForeignSrq) -> usize {
        let Some(a) = self.adoption.as_deref_mut() else {
            return 0;
        };
        let n = a.freed.len();
        for &idx in &a.freed {
            src.free(u32::from(idx));
        }
        a.freed.clear();
        n
    }

    /// Completions that could not be noted for the hand-back (more between two hand-backs
    /// than the SRQ has WQEs: garbage naming a WQE twice).
    pub fn frees_dropped(&self) -> u64 {
        self.adoption.as_ref().map_or(0, |a| a.overflow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{QpConfig, Registry};
    use core::cell::Cell;

    /// An SRQ as rdma-core v44 keeps it: a free list linked through the WQEs, posts
    /// refused when `head == tail`, frees linked behind the tail.
    struct Fake {
        wrid: Vec<Cell<u64>>,
        next: Vec<Cell<u32>>,
        head: Cell<u32>,
        tail: Cell<u32>,
    }

    impl Fake {
        fn new(max: u32) -> Fake {
            Fake {
                wrid: (0..max).map(|_| Cell::new(0xdead)).collect(),
                next: (0..max).map(|i| Cell::new((i + 1) % max)).collect(),
                head: Cell::new(0),
                tail: Cell::new(max - 1),
            }
        }
        /// `mlx5_post_srq_recv` for one WR; `None` when the SRQ is full.
        fn post(&self, wr_id: u64) -> Option<u16> {
            let head = self.head.get();
            if head == self.tail.get() {
                return None;
            }
            self.wrid[head as usize].set(wr_id);
            self.head.set(self.next[head as usize].get());
            Some(head as u16)
        }
    }

    impl ForeignSrq for Fake {
        fn max(&self) -> u32 {
            self.wrid.len() as u32
        }
        fn head(&self) -> u32 {
            self.head.get()
        }
        fn next(&self, idx: u32) -> u32 {
            self.next[idx as usize].get()
        }
        fn wr_id(&self, idx: u32) -> u64 {
            self.wrid[idx as usize].get()
        }
        fn free(&self, idx: u32) {
            self.next[self.tail.get() as usize].set(idx);
            self.tail.set(idx);
        }
    }

    fn adopted(f: &Fake) -> Registry {
        let mut r = Registry::new();
        r.add_srq(9, f.max()).unwrap();
        r.adopt_srq(9, f).unwrap();
        r.add_qp(QpConfig { srqn: Some(9), ..QpConfig::rc(1, 4, 0) }).unwrap();
        r
    }

    #[test]
    fn resources_registered_before_the_adoption_move_to_the_slow_path_too() {
        use crate::registry::RecvKind;
        let f = Fake::new(4);
        let mut r = Registry::new();
        r.add_srq(9, f.max()).unwrap();
        r.add_qp(QpConfig { srqn: Some(9), ..QpConfig::rc(1, 4, 0) }).unwrap();
        r.add_xrc_srq(0x30, 7, f.max()).unwrap();
        r.add_qp(QpConfig::rc(2, 4, 4)).unwrap();
        let kinds = |r: &Registry| r.qps().iter().map(|q| (q.srq_adopted, q.recorded_recv_kind())).collect::<Vec<_>>();
        assert_eq!(kinds(&r)[..2], [(false, RecvKind::Srq), (false, RecvKind::Srq)]);
        r.adopt_srq(9, &f).unwrap();
        r.adopt_srq(0x30, &f).unwrap();
        // The QP on SRQ 9 and the XRC SRQ's own entry now note freed WQEs; the QP with its
        // own receive queue is left alone.
        assert_eq!(kinds(&r), [(true, RecvKind::Slow), (true, RecvKind::Slow), (false, RecvKind::Rq)]);
        let path = |i: usize| r.qps()[i].recv_path;
        assert_eq!(path(0) & !(3 << RECV_KIND_SHIFT), r.qps()[0].srq_slot().unwrap(), "the SRQ slot is kept");
        assert_ne!(path(1) & NO_SQ_PATH, 0, "an XRC SRQ still has no send queue");
        assert!(r.adopt_srq(0x99, &f).is_err(), "an unknown SRQ is refused");
    }

    #[test]
    fn posts_are_mirrored_along_the_links_and_completions_go_back_to_the_tail() {
        let f = Fake::new(4);
        let before = f.post(100).unwrap();
        let mut r = adopted(&f);
        assert!(r.qps()[0].srq_adopted, "receives on an adopted SRQ take the slow path");
        let srq = r.srq_mut(9).unwrap();
        let w: Vec<u16> = (0..2).map(|i| f.post(200 + i).unwrap()).collect();
        assert_eq!(f.post(999), None, "three of four posted: rdma-core keeps one WQE back");
        assert_eq!(srq.sync_posted(&f), 2);
        // Out of order, as an SRQ shared by QPs completes.
        assert_eq!(srq.complete(w[1]), Some(201));
        assert_eq!(srq.complete(before), Some(100));
        assert_eq!(srq.hand_back_freed(&f), 2);
        assert_eq!(f.tail.get(), u32::from(before), "freed behind the tail, in completion order");
        // The post side finds exactly the two freed WQEs.
        let again: Vec<u16> = (0..2).map(|i| f.post(300 + i).unwrap()).collect();
        assert_eq!(f.post(999), None);
        assert_eq!(again, [3, w[1]], "the WQE kept back first, then the freed ones in order");
        assert_eq!(srq.sync_posted(&f), 2);
        assert_eq!((srq.complete(again[0]), srq.complete(again[1])), (Some(300), Some(301)));
        assert_eq!(srq.complete(w[0]), Some(200));
        assert_eq!(srq.hand_back_freed(&f), 3);
        assert_eq!(srq.hand_back_freed(&f), 0, "handed back once");
    }

    #[test]
    fn a_broken_chain_copies_the_whole_table() {
        let f = Fake::new(8);
        let mut r = adopted(&f);
        let srq = r.srq_mut(9).unwrap();
        let w = f.post(7).unwrap();
        f.next[0].set(77); // garbage where the walk goes next
        f.head.set(5);
        f.wrid[5].set(55);
        assert_eq!(srq.sync_posted(&f), 1);
        assert_eq!(srq.peek(w), Some(7));
        assert_eq!(srq.peek(5), Some(55), "copied with the rest of the table");
    }

    #[test]
    fn an_srq_of_another_size_is_refused_and_own_posting_srqs_hand_back_nothing() {
        let f = Fake::new(8);
        let mut r = Registry::new();
        let e = r.add_srq(9, 16).unwrap().adopt(&f).unwrap_err();
        assert_eq!(e.to_string(), "rdma-core's srq has 8 entries, the registry's 16");
        let srq = r.srq_mut(9).unwrap();
        assert!(!srq.is_adopted());
        srq.complete(3);
        assert_eq!(srq.hand_back_freed(&f), 0);
        assert_eq!(f.tail.get(), 7);
    }

    #[test]
    fn a_wqe_completed_twice_between_hand_backs_past_the_room_is_counted_not_stored() {
        let f = Fake::new(2);
        let mut r = adopted(&f);
        let srq = r.srq_mut(9).unwrap();
        for _ in 0..3 {
            srq.complete(0);
        }
        assert_eq!(srq.frees_dropped(), 1);
        assert_eq!(srq.hand_back_freed(&f), 2);
    }
}
