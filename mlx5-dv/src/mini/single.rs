//! One completion per `poll` call inside an open compressed session, the way UCX polls:
//! the slot's check and the completion's fill, without a drain's set-up. Through the
//! drains such a call cost about twice an uncompressed CQE's one-at-a-time poll.

use super::requester::ReqFill;
use super::session::{fill_from_template, next_block, template_imm, REINVALID};
use crate::cq::Mlx5Cq;
use crate::cqe::RecvTarget;
use dvcq_provider::Completion;
use dvcq_uapi::mlx5::mini::MINIS_PER_ARRAY;

impl<const STRIDE: usize> Mlx5Cq<STRIDE> {
    /// `poll` with room for one completion while a session is open (`mini.left > 0`), or,
    /// in the enhanced layout, at a block that may continue the last one: the
    /// one-completion path below, else the drain (which also opens any new session).
    #[inline(never)]
    pub(crate) fn poll_session_single(&mut self, wc: &mut Completion) -> usize {
        match self.session_one(wc) {
            Some(n) => n,
            None => self.poll_session_drain(core::slice::from_mut(wc)),
        }
    }

    /// The open session's next completion (enhanced: first opening the block at the
    /// counter when it continues the session), when the session's QP is already resolved:
    /// a requester session, or a responder session on the QP's own RQ whose title has a
    /// template. `None`, with nothing consumed, for any other session, a block that does
    /// not continue one, and a hole the device wrote (a truncated session): the drain then
    /// writes the item.
    ///
    /// The slot is checked as the drains check it: the title or block (index 0) has
    /// nothing to check, array 0 (basic index 1) was read when the session opened, a later
    /// array (basic, a multiple of 8) is read here, and a hole must not hold a CQE the
    /// device wrote. Every slot but a title or block is made hardware-owned again.
    #[inline(always)]
    fn session_one(&mut self, wc: &mut Completion) -> Option<usize> {
        // Both are reset when a regular CQE becomes the title, so either names the QP of
        // the session the counter is in.
        let st = &self.mini;
        let slot = match (st.req, &st.template) {
            (Some(r), _) => r.slot,
            (None, Some(Some((RecvTarget::Rq(q), _)))) if !st.requester => *q,
            _ => return None,
        };
        if self.mini.left == 0 && !self.continue_session() {
            return None;
        }
        let st = &mut self.mini;
        // Resolved before the slot is touched: an array read here cannot be read twice.
        let qp = self.registry.qp_at(slot)?;
        let ring = self.ring.view();
        let (i, pos) = (st.idx, st.start.wrapping_add(st.idx));
        let s = ring.slot_ref::<STRIDE>(pos);
        let lap = pos >> ring.entries().trailing_zeros();
        let fresh = match (st.enhanced, i) {
            (_, 0) => true,
            (true, _) => Self::session_hole::<true>(s, lap),
            (false, 1) => {
                // Array 0, read when the session opened. A constant offset in the slot:
                // the store cannot fail.
                let _ = s.store_u8(Self::OWN_OFF, REINVALID);
                true
            }
            (false, _) if i % MINIS_PER_ARRAY as u32 == 0 => {
                Self::take_array(s, &mut st.arr);
                true
            }
            (false, _) => Self::session_hole::<false>(s, lap),
        };
        if !fresh {
            return None;
        }
        let mini = st.arr[i as usize % MINIS_PER_ARRAY];
        if let Some(r) = st.req {
            let sq = qp.sq.table().by_value();
            let mask = sq.mask();
            ReqFill { sq, qpn: r.qpn, timestamp: r.timestamp }.fill(&mini, wc);
            // Every older unsignaled WQE retires with this one (rdma-core `mlx5_parse_cqe` sets
            // `sq.tail = wqe_head[idx] + 1`).
            qp.sq.retire_through((mini.wqe_counter() as usize & mask) as u32);
        } else if let Some(Some((_, tpl))) = &st.template {
            let tail = qp.rq.tail();
            let rq = qp.rq.wrids();
            let idx = st.next_ctr as usize & rq.mask();
            let wr_id = *rq.at(idx);
            qp.rq.set_tail(tail.wrapping_add(1));
            fill_from_template(tpl, template_imm(tpl), wr_id, idx as u16, mini.byte_cnt(), wc);
        }
        st.idx = i + 1;
        st.left -= 1;
        st.next_ctr = st.next_ctr.wrapping_add(1);
        self.ci = pos.wrapping_add(1);
        self.after_batch(1);
        Some(1)
    }

    /// Enhanced layout, the open block drained: opens the block at the counter if it
    /// continues the session (the title is still the last regular CQE passed), as the
    /// drains' walks do. False, with nothing changed, for anything else there: the
    /// general path opens it or writes its fault item.
    #[inline(always)]
    fn continue_session(&mut self) -> bool {
        if !self.mini.enhanced {
            return false;
        }
        let seen = self.device_seen();
        let ring = self.ring.view();
        let pos = self.ci;
        let s = ring.slot_ref::<STRIDE>(pos);
        let lap = pos >> ring.entries().trailing_zeros();
        let Some(next) = next_block(s, pos, lap, ring.entries(), seen) else {
            return false;
        };
        let st = &mut self.mini;
        s.read_into(Self::CQE_OFF, &mut st.arr);
        self.stats.sessions += 1;
        (st.start, st.count, st.idx, st.left) = (pos, next, 0, next);
        true
    }
}
