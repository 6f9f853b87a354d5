//! Adopting rdma-core's posting (its `wrid`, `wqe_head` and `wr_data` tables are private,
//! `providers/mlx5/mlx5.h` `struct mlx5_wq`, and not in `struct mlx5dv_qp`): the application
//! posts with `ibv_post_send` / `ibv_post_recv` / `ibv_wr_*`, rdma-core fills its private
//! wr_id tables, and the registry mirrors them instead of recording posts itself.
//!
//! The mirror moves at poll-call granularity, never per CQE:
//!
//! 1. At attach, [`SendQueue::adopt`] / [`RecvQueue::adopt`] copy rdma-core's whole table
//!    and its head, tail and `cur_post`.
//! 2. Before a poll call (after the caller has seen that CQEs are ready, so every post
//!    they complete is visible), [`SendQueue::sync_posted`] / [`RecvQueue::sync_posted`]
//!    copy the entries posted since the previous call: the slots between the mirror's
//!    `cur_post` (send) or `head` (receive) and rdma-core's.
//! 3. After the poll, [`SendQueue::hand_back_tail`] / [`RecvQueue::hand_back_tail`] store
//!    the tails as rdma-core's own poll does (`sq.tail = wqe_head[idx] + 1`, `++rq.tail`),
//!    so the post path's free-slot test (`head - tail` against `max_post`) sees the room
//!    the completions made.
//!
//! The registry never touches rdma-core's memory: a [`ForeignWq`] (in dvcq, the facade's
//! rdma-core glue) reads and writes it.

use super::{RecvQueue, SendQueue, SqEntry, NO_WR_DATA};
use dvcq_provider::WcOpcode;

/// One rdma-core work queue (`struct mlx5_wq`) as the owner of its memory reads and writes
/// it. Indexes passed in are below [`ForeignWq::wqe_cnt`].
pub trait ForeignWq {
    /// `wqe_cnt`: entries in the tables (a power of two).
    fn wqe_cnt(&self) -> u32;
    /// `head`: work requests posted.
    fn head(&self) -> u32;
    /// `cur_post`: the next send WQE index in 64-byte blocks (a receive queue's is unused).
    fn cur_post(&self) -> u32;
    /// `tail`: work requests retired.
    fn tail(&self) -> u32;
    /// `wrid[idx]`.
    fn wr_id(&self, idx: u32) -> u64;
    /// `wqe_head[idx]` (send queues only).
    fn wqe_head(&self, idx: u32) -> u32;
    /// `wr_data[idx]` (send queues only): the `ibv_wc_opcode` rdma-core recorded for a WQE
    /// whose CQE cannot tell it (bind MW, local invalidate, `IBV_WC_DRIVER*`), 0 for others.
    fn wr_data(&self, idx: u32) -> u32;
    /// Stores `tail`.
    fn set_tail(&self, tail: u32);
}

/// The tables of an adopted queue do not have the size the registry gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("rdma-core's {what} has {theirs} entries, the registry's {ours}")]
pub struct AdoptError {
    /// Which queue: "sq" or "rq".
    pub what: &'static str,
    /// rdma-core's `wqe_cnt`.
    pub theirs: u32,
    /// The registry's.
    pub ours: u32,
}

impl SendQueue {
    /// Takes over rdma-core's send queue as it is: every table entry, `head`, `cur_post`
    /// and `tail`.
    ///
    /// # Errors
    ///
    /// [`AdoptError`] when the queue sizes differ.
    pub fn adopt(&mut self, src: &impl ForeignWq) -> Result<(), AdoptError> {
        if src.wqe_cnt() != self.wqe_cnt() {
            return Err(AdoptError { what: "sq", theirs: src.wqe_cnt(), ours: self.wqe_cnt() });
        }
        // Copy the whole ring: start one lap behind rdma-core's cur_post.
        self.cur_post = src.cur_post().wrapping_sub(self.wqe_cnt());
        self.sync_posted(src);
        self.tail.set(src.tail());
        Ok(())
    }

    /// Copies the entries rdma-core wrote since the last call (the WQE slots from the
    /// mirror's `cur_post` to rdma-core's; at most one lap) and its `head`. Returns the
    /// slots copied. Slots inside multi-block WQEs are copied too; no CQE names them.
    pub fn sync_posted(&mut self, src: &impl ForeignWq) -> u32 {
        let cur_post = src.cur_post();
        let n = cur_post.wrapping_sub(self.cur_post).min(self.wqe_cnt());
        let mask = self.table.mask() as u32;
        let from = cur_post.wrapping_sub(n);
        for i in 0..n {
            let idx = from.wrapping_add(i) & mask;
            // An opcode libibverbs does not define reads as none recorded.
            let wr_data = WcOpcode::from_u32(src.wr_data(idx)).map_or(NO_WR_DATA, |o| o as u8);
            *self.table.at_mut(idx as usize) = SqEntry::new(src.wr_id(idx), src.wqe_head(idx), wr_data);
        }
        self.cur_post = cur_post;
        self.head = src.head();
        n
    }

    /// Stores the mirror's tail in rdma-core's queue if the two differ.
    pub fn hand_back_tail(&self, src: &impl ForeignWq) {
        let tail = self.tail.get();
        if src.tail() != tail {
            src.set_tail(tail);
        }
    }

    /// Work requests retired (`sq.tail`).
    pub fn retired(&self) -> u32 {
        self.tail.get()
    }
}

impl RecvQueue {
    /// Takes over rdma-core's receive queue as it is: every wr_id, `head` and `tail`.
    ///
    /// # Errors
    ///
    /// [`AdoptError`] when the queue sizes differ.
    pub fn adopt(&mut self, src: &impl ForeignWq) -> Result<(), AdoptError> {
        if src.wqe_cnt() != self.wqe_cnt() {
            return Err(AdoptError { what: "rq", theirs: src.wqe_cnt(), ours: self.wqe_cnt() });
        }
        self.head = src.head().wrapping_sub(self.wqe_cnt());
        self.sync_posted(src);
        self.tail.set(src.tail());
        Ok(())
    }

    /// Copies the wr_ids of the receives rdma-core posted since the last call (at most
    /// one lap) and its `head`. Returns the entries copied.
    pub fn sync_posted(&mut self, src: &impl ForeignWq) -> u32 {
        let head = src.head();
        let n = head.wrapping_sub(self.head).min(self.wqe_cnt());
        let mask = self.wrid.mask() as u32;
        let from = head.wrapping_sub(n);
        for i in 0..n {
            let idx = from.wrapping_add(i) & mask;
            *self.wrid.at_mut(idx as usize) = src.wr_id(idx);
        }
        self.head = head;
        n
    }

    /// Stores the mirror's tail in rdma-core's queue if the two differ.
    pub fn hand_back_tail(&self, src: &impl ForeignWq) {
        let tail = self.tail.get();
        if src.tail() != tail {
            src.set_tail(tail);
        }
    }

    /// Receives completed (`rq.tail`).
    pub fn retired(&self) -> u32 {
        self.tail.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::Cell;

    /// A queue as rdma-core keeps it, posting the way its post verbs do.
    struct Fake {
        wrid: Vec<Cell<u64>>,
        wqe_head: Vec<Cell<u32>>,
        wr_data: Vec<Cell<u32>>,
        head: Cell<u32>,
        tail: Cell<u32>,
        cur_post: Cell<u32>,
    }

    impl Fake {
        fn new(n: u32) -> Fake {
            let cells = |v| (0..n).map(|_| Cell::new(v)).collect::<Vec<_>>();
            Fake {
                wrid: (0..n).map(|_| Cell::new(0xdead)).collect(),
                wqe_head: cells(0xffff),
                wr_data: cells(0),
                head: Cell::new(0),
                tail: Cell::new(0),
                cur_post: Cell::new(0),
            }
        }
        fn post_send(&self, wr_id: u64, bbs: u32) -> u16 {
            let mask = self.wrid.len() as u32 - 1;
            let idx = self.cur_post.get() & mask;
            self.wrid[idx as usize].set(wr_id);
            self.wqe_head[idx as usize].set(self.head.get());
            self.cur_post.set(self.cur_post.get() + bbs);
            self.head.set(self.head.get() + 1);
            idx as u16
        }
        fn post_recv(&self, wr_id: u64) {
            let mask = self.wrid.len() as u32 - 1;
            self.wrid[(self.head.get() & mask) as usize].set(wr_id);
            self.head.set(self.head.get() + 1);
        }
    }

    impl ForeignWq for Fake {
        fn wqe_cnt(&self) -> u32 {
            self.wrid.len() as u32
        }
        fn head(&self) -> u32 {
            self.head.get()
        }
        fn cur_post(&self) -> u32 {
            self.cur_post.get()
        }
        fn tail(&self) -> u32 {
            self.tail.get()
        }
        fn wr_id(&self, idx: u32) -> u64 {
            self.wrid[idx as usize].get()
        }
        fn wqe_head(&self, idx: u32) -> u32 {
            self.wqe_head[idx as usize].get()
        }
        fn wr_data(&self, idx: u32) -> u32 {
            self.wr_data[idx as usize].get()
        }
        fn set_tail(&self, tail: u32) {
            self.tail.set(tail);
        }
    }

    #[test]
    fn a_send_queue_mirrors_posts_and_hands_the_tail_back() {
        let f = Fake::new(8);
        // Posts made before the attach, one of them completed by rdma-core's own poll.
        f.post_send(100, 1);
        f.post_send(101, 2);
        f.tail.set(1);
        let mut sq = SendQueue::new(8).unwrap();
        sq.adopt(&f).unwrap();
        assert_eq!((sq.outstanding(), sq.retired()), (1, 1));
        let w2 = f.post_send(102, 1);
        assert_eq!(sq.sync_posted(&f), 1);
        assert_eq!(sq.outstanding(), 2);
        // One CQE for the newest WQE retires both outstanding ones (`sq.tail =
        // wqe_head[idx] + 1`).
        let (_, wr_id, _) = sq.complete(w2);
        assert_eq!(wr_id, 102);
        sq.hand_back_tail(&f);
        assert_eq!(f.tail.get(), 3);
        assert_eq!(sq.sync_posted(&f), 0, "nothing new");
    }

    #[test]
    fn a_mirror_more_than_a_lap_behind_copies_one_lap() {
        let f = Fake::new(4);
        let mut sq = SendQueue::new(4).unwrap();
        sq.adopt(&f).unwrap();
        let mut last = 0;
        for i in 0..10 {
            last = f.post_send(200 + i, 1);
            f.tail.set(f.head.get().saturating_sub(1));
        }
        assert_eq!(sq.sync_posted(&f), 4);
        assert_eq!(sq.peek(last).1, 209);
    }

    #[test]
    fn a_receive_queue_mirrors_posts_and_counts_completions_back() {
        let f = Fake::new(4);
        for i in 0..3 {
            f.post_recv(300 + i);
        }
        f.tail.set(1); // rdma-core's own poll completed the first
        let mut rq = RecvQueue::new(4).unwrap();
        rq.adopt(&f).unwrap();
        assert_eq!(rq.outstanding(), 2);
        f.post_recv(303);
        f.post_recv(304); // wraps onto slot 0
        assert_eq!(rq.sync_posted(&f), 2);
        let got: Vec<u64> = (1..5).map(|c| rq.complete(c).1).collect();
        assert_eq!(got, [301, 302, 303, 304]);
        rq.hand_back_tail(&f);
        assert_eq!(f.tail.get(), 5);
        assert_eq!(rq.outstanding(), 0);
    }

    #[test]
    fn recorded_opcodes_are_mirrored_and_unknown_ones_read_as_none() {
        let f = Fake::new(4);
        let mut sq = SendQueue::new(4).unwrap();
        sq.adopt(&f).unwrap();
        let bind = f.post_send(1, 1);
        f.wr_data[bind as usize].set(WcOpcode::BindMw as u32);
        let odd = f.post_send(2, 1);
        f.wr_data[odd as usize].set(77);
        sq.sync_posted(&f);
        assert_eq!(sq.peek(bind).2, WcOpcode::BindMw as u8);
        assert_eq!(sq.peek(odd).2, NO_WR_DATA);
    }

    #[test]
    fn queues_of_another_size_are_refused() {
        let f = Fake::new(8);
        let e = SendQueue::new(16).unwrap().adopt(&f).unwrap_err();
        assert_eq!(e.to_string(), "rdma-core's sq has 8 entries, the registry's 16");
        assert!(RecvQueue::new(4).unwrap().adopt(&f).is_err());
    }
}
