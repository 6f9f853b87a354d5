//! Requester sessions of a registered QP: the steady state of a send-heavy compressed CQ.
//!
//! The session's QP is resolved once, when its title (basic) or first block (enhanced)
//! opens, so a poll call inside the session goes straight to one loop over its slots:
//! no registry lookup, no sink set-up, no lap runs. A session whose QP is not registered
//! takes the general drain in `session.rs`, which reports each completion's fault.

use super::session::{next_block, truncated, REINVALID};
use crate::cq::Mlx5Cq;
use crate::fast;
use crate::registry::SqEntry;
use dvcq_provider::{Completion, Pow2Ref, SlotRef};
use dvcq_uapi::mlx5::mini::{MiniCqe, MiniCqeArray, MINIS_PER_ARRAY};

/// Runs `$body` with `$j` bound to 1, then 2, up to 7 (the holes of a group or block),
/// written out so that every step's slot and item offsets are constants: a `for` loop over
/// the same range is not always unrolled.
macro_rules! for_holes_1_to_7 {
    ($j:ident => $body:block) => {{
        for_holes_1_to_7!(@ $j $body 1 2 3 4 5 6 7)
    }};
    (@ $j:ident $body:block $($k:literal)*) => {{
        $({
            let $j: usize = $k;
            $body
        })*
    }};
}
const _: () = assert!(MINIS_PER_ARRAY == 8, "for_holes_1_to_7 covers the holes of an 8-slot group");

/// [`Mlx5Cq::take_array`] out of line, for the slot-by-slot walk: it keeps that loop
/// straight.
#[cold]
#[inline(never)]
fn next_array<const STRIDE: usize>(s: SlotRef<'_, STRIDE>, arr: &mut MiniCqeArray) {
    Mlx5Cq::<STRIDE>::take_array(s, arr);
}

/// The QP of an open requester session, resolved when the session opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReqSession {
    /// The QP's registry slot.
    pub(crate) slot: u32,
    /// The title's QPN: every completion's `qp_num`.
    pub(crate) qpn: u32,
    /// The title's timestamp: every completion's `timestamp`.
    pub(crate) timestamp: u64,
}

/// The per-completion work of a requester session: the SQ lookup and the completion head
/// of each mini-CQE's WQE opcode, as the uncompressed fast path (fast.rs) does them.
pub(super) struct ReqFill<'a> {
    pub(super) sq: Pow2Ref<'a, SqEntry>,
    pub(super) qpn: u32,
    pub(super) timestamp: u64,
}

impl ReqFill<'_> {
    /// The completion of mini-CQE `mini`, into `wc`.
    #[inline(always)]
    pub(super) fn fill(&self, mini: &MiniCqe, wc: &mut Completion) {
        let idx = mini.wqe_counter() as usize & self.sq.mask();
        let e = self.sq.at(idx);
        wc.wr_id = e.wr_id;
        wc.qp_num = self.qpn;
        wc.wqe_index = idx as u16;
        wc.timestamp = self.timestamp;
        if fast::req_head(wc, mini.s_wqe_opcode(), e.wr_data) {
            fast::req_special(wc, mini.s_wqe_opcode(), e.wr_data, mini.byte_cnt());
        }
    }
}

impl<const STRIDE: usize> Mlx5Cq<STRIDE> {
    /// `poll` inside a requester session whose QP was resolved at open (the steady state
    /// of a send-heavy compressed CQ): the session's own loop, without the general set-up;
    /// the general poll takes over if the session ends with room left in `out`.
    #[inline(never)]
    pub(crate) fn poll_requester_session(&mut self, out: &mut [Completion]) -> usize {
        let before = self.ci;
        let n = if self.resize_pending() {
            None
        } else if self.mini.enhanced {
            self.drain_req::<true>(out)
        } else {
            self.drain_req::<false>(out)
        };
        let n = n.unwrap_or(0);
        if n < out.len() {
            return self.poll_compressed(&mut out[n..], before, n);
        }
        if self.ci != before {
            self.after_batch(n as u32);
        }
        n
    }

    /// Drains the open requester session into `out` when its QP was resolved at open:
    /// the items written (a truncated session ends with its fault item). `None` when the
    /// session is not one (the general drain then takes it).
    #[inline(never)]
    pub(crate) fn drain_requester(&mut self, out: &mut [Completion]) -> Option<usize> {
        if self.mini.enhanced {
            self.drain_req::<true>(out)
        } else {
            self.drain_req::<false>(out)
        }
    }

    /// [`Mlx5Cq::drain_requester`] for one layout. Each slot of the session is the title
    /// or block (index 0: nothing to check), array 0 (basic index 1, read when the session
    /// opened), a later array (basic, a multiple of 8) or a hole, checked for a CQE the
    /// device wrote there. Every slot but a title or block is made hardware-owned again, as
    /// the general walk does.
    #[inline(always)]
    fn drain_req<const ENH: bool>(&mut self, out: &mut [Completion]) -> Option<usize> {
        let r = self.mini.req.filter(|_| ENH || self.mini.left > 0)?;
        // The last consumer index the device saw bounds a continuing block (enhanced).
        let seen = if ENH { self.device_seen() } else { None };
        let qp = self.registry.qp_at(r.slot)?;
        let ring = self.ring.view();
        let (entries, shift) = (ring.entries(), ring.entries().trailing_zeros());
        let st = &mut self.mini;
        let stats = &mut self.stats;
        let sink = ReqFill { sq: qp.sq.table().by_value(), qpn: r.qpn, timestamp: r.timestamp };
        let (mut start, mut count, mut i, mut left) = (st.start, st.count, st.idx, st.left);
        // The next slot: every CQE consumed outside the session ended it (`req` is `None`).
        let first = start.wrapping_add(i);
        // `n` never passes `out.len()`; slices of `out` are taken with `get_mut` so that the
        // compiler, which cannot see that, leaves no panic branch in the walk.
        let mut n = 0;
        if ENH {
            // The walk tracks the next slot's position; the open block's start and count
            // live in the state, written when a block opens.
            let mut pos = first;
            'enh: {
                if left > 0 {
                    // A call that begins inside a block. Its first slot (a block the general
                    // path opened) has nothing to check.
                    if i == 0 {
                        let Some(wc) = out.first_mut() else {
                            break 'enh;
                        };
                        sink.fill(&st.arr[0], wc);
                        (pos, left, n) = (pos.wrapping_add(1), left - 1, 1);
                    }
                    // The rest of the block, when it lies in one lap (else the walk below
                    // takes it): fixed offsets from the block's slot.
                    if let Some(g) = ring.slot_group::<MINIS_PER_ARRAY>(st.start) {
                        let (i0, lap) = (pos.wrapping_sub(st.start) as usize, pos >> shift);
                        let take = (left as usize).min(out.len() - n);
                        for (k, wc) in out.get_mut(n..n + take).unwrap_or_default().iter_mut().enumerate() {
                            let j = i0 + k;
                            if !Self::session_hole::<true>(g.get(j), lap) {
                                *wc = truncated(stats, st.start, st.count);
                                (pos, left, n) = (pos.wrapping_add(k as u32), 0, n + k + 1);
                                break 'enh;
                            }
                            sink.fill(&st.arr[j % MINIS_PER_ARRAY], wc);
                        }
                        (pos, left, n) = (pos.wrapping_add(take as u32), left - take as u32, n + take);
                    }
                }
                while n < out.len() {
                    let lap = pos >> shift;
                    if left == 0 {
                        if let Some(g) = ring.slot_group::<MINIS_PER_ARRAY>(pos) {
                            // A block in one lap: the block that continues the session, then
                            // as many of its holes as `out` has room for, at fixed offsets.
                            let Some(next) = next_block(g.get(0), pos, lap, entries, seen) else {
                                break;
                            };
                            g.get(0).read_into(Self::CQE_OFF, &mut st.arr);
                            stats.sessions += 1;
                            (st.start, st.count) = (pos, next);
                            let take = (next as usize).min(out.len() - n);
                            let Some(wcs) = out.get_mut(n..n + take) else {
                                break;
                            };
                            sink.fill(&st.arr[0], &mut wcs[0]);
                            'holes: {
                                for_holes_1_to_7!(j => {
                                    if j >= take {
                                        break 'holes;
                                    }
                                    if !Self::session_hole::<true>(g.get(j), lap) {
                                        wcs[j] = truncated(stats, pos, next);
                                        (pos, left, n) = (pos.wrapping_add(j as u32), 0, n + j + 1);
                                        break 'enh;
                                    }
                                    sink.fill(&st.arr[j], &mut wcs[j]);
                                });
                            }
                            (pos, left, n) = (pos.wrapping_add(take as u32), next - take as u32, n + take);
                            continue;
                        }
                    }
                    // Otherwise slot by slot, one lap at a time: near the ring's end, holes and
                    // the blocks that continue the session.
                    let run = if left > 0 { n + (left as usize).min(out.len() - n) } else { out.len() };
                    let Some(wcs) = out.get_mut(n..run) else {
                        break;
                    };
                    for (s, wc) in ring.slots_along(pos, wcs) {
                        if left == 0 {
                            let Some(next) = next_block(s, pos, lap, entries, seen) else {
                                break 'enh;
                            };
                            s.read_into(Self::CQE_OFF, &mut st.arr);
                            stats.sessions += 1;
                            (st.start, st.count, left) = (pos, next, next);
                        } else if !Self::session_hole::<true>(s, lap) {
                            *wc = truncated(stats, st.start, st.count);
                            (left, n) = (0, n + 1);
                            break 'enh;
                        }
                        sink.fill(&st.arr[pos.wrapping_sub(st.start) as usize % MINIS_PER_ARRAY], wc);
                        (pos, left, n) = (pos.wrapping_add(1), left - 1, n + 1);
                    }
                }
            }
            (start, count, i) = (st.start, st.count, pos.wrapping_sub(st.start));
        } else {
            'walk: while n < out.len() && left > 0 {
                let pos = start.wrapping_add(i);
                if i <= 1 {
                    // The session's first slots: the title (nothing to check) and array 0
                    // (read when the session opened).
                    if i == 1 {
                        ring.slot_ref::<STRIDE>(pos).store_u8(Self::OWN_OFF, REINVALID);
                    }
                    sink.fill(&st.arr[i as usize], &mut out[n]);
                    (i, left, n) = (i + 1, left - 1, n + 1);
                    continue;
                }
                // Then whole groups where they lie in one lap, else slot by slot: holes and
                // later arrays.
                let lap = pos >> shift;
                const G: usize = MINIS_PER_ARRAY;
                let k = i as usize % G;
                if k == 0 && left as usize >= G && out.len() - n >= G {
                    if let Some(g) = ring.slot_group::<G>(pos) {
                        // A whole group in one lap: the array, then its seven holes.
                        let Some(wcs) = out.get_mut(n..n + G) else {
                            break;
                        };
                        Self::take_array(g.get(0), &mut st.arr);
                        sink.fill(&st.arr[0], &mut wcs[0]);
                        for_holes_1_to_7!(j => {
                            if !Self::session_hole::<false>(g.get(j), lap) {
                                wcs[j] = truncated(stats, start, count);
                                (i, left, n) = (i + j as u32, 0, n + j + 1);
                                break 'walk;
                            }
                            sink.fill(&st.arr[j], &mut wcs[j]);
                        });
                        (i, left, n) = (i + G as u32, left - G as u32, n + G);
                        continue;
                    }
                }
                // Otherwise slot by slot: holes up to the next group, or to the session's
                // or `out`'s end with any array on the way.
                let room = if k == 0 { left as usize } else { (left as usize).min(G - k) };
                let run = n + room.min(out.len() - n);
                let (i0, mut d, mut cut) = (i as usize, 0, false);
                let Some(wcs) = out.get_mut(n..run) else {
                    break;
                };
                for (s, wc) in ring.slots_along(pos, wcs) {
                    let k = (i0 + d) % MINIS_PER_ARRAY;
                    if k == 0 {
                        next_array::<STRIDE>(s, &mut st.arr);
                    } else if !Self::session_hole::<false>(s, lap) {
                        *wc = truncated(stats, start, count);
                        cut = true;
                        break;
                    }
                    sink.fill(&st.arr[k], wc);
                    d += 1;
                }
                (i, left, n) = (i + d as u32, left - d as u32, n + d);
                if cut {
                    (left, n) = (0, n + 1);
                    break;
                }
            }
        }
        let taken = start.wrapping_add(i).wrapping_sub(first);
        if taken > 0 {
            // Retire the SQ through the last completed WQE, once per call: the last mini
            // taken is in the array or block still held (a call never ends on a fresh one).
            let last = st.arr[i.wrapping_sub(1) as usize % MINIS_PER_ARRAY];
            qp.sq.retire_through((last.wqe_counter() as usize & sink.sq.mask()) as u32);
        }
        (st.start, st.count, st.idx, st.left) = (start, count, i, left);
        st.next_ctr = st.next_ctr.wrapping_add(taken as u16);
        // The next unconsumed slot: a truncation's fault item consumes nothing.
        self.ci = start.wrapping_add(i);
        Some(n)
    }
}
