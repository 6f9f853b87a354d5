//! Forgetting resources: a QP, SRQ or receive WQ destroyed while its CQ lives on
//! (rdma-core's `ibv_destroy_qp` of a QP whose CQ dvcq polls). Its CQEs still in the ring then come back
//! as unknown-resource fault items, as rdma-core's poll fails on a QPN it no longer knows
//! (`mlx5dv_init_obj` marks the CQ `MLX5_CQ_FLAGS_DV_OWNED`, and `__mlx5_cq_clean` in
//! `providers/mlx5/cq.c` returns at once for such a CQ, so they stay), and a new QP, SRQ
//! or WQ may take the same number.

use super::{KeyIndex, Registry};

impl KeyIndex {
    /// The index of `keys` (key, slot) pairs, entered in slot order as registration does.
    fn rebuilt(mut keys: Vec<(u32, u32)>) -> KeyIndex {
        keys.sort_unstable_by_key(|&(_, s)| s);
        let mut index = KeyIndex::default();
        for (k, s) in keys {
            index.insert(k, s);
        }
        index
    }
}

impl Registry {
    /// Removes the QP numbered `qpn` (not an XRC SRQ or receive WQ entry): its QPN and user
    /// index are free again. The entries registered after it move down one slot, so a poller
    /// holding slots must forget them (`Mlx5Cq::remove_qp` does). False if there is none.
    pub fn remove_qp(&mut self, qpn: u32) -> bool {
        let Some(slot) = self.by_qpn.get(qpn) else {
            return false;
        };
        self.remove_entry(slot);
        true
    }

    /// Removes the receive WQ numbered `wqn` (rdma-core's `ibv_destroy_wq`): its number and
    /// user index are free again, and a CQE that still names it finds nothing. The entries
    /// registered after it move down one slot, as [`Registry::remove_qp`]'s do. False if
    /// there is none.
    pub fn remove_rwq(&mut self, wqn: u32) -> bool {
        let Some(slot) = self.by_wqn.remove(&wqn) else {
            return false;
        };
        self.remove_entry(slot);
        true
    }

    /// Removes the entry of the QP table in `slot` (a QP, or a receive WQ already out of
    /// `by_wqn`) and renumbers the lookups of the entries after it.
    fn remove_entry(&mut self, slot: u32) {
        let s = slot as usize;
        self.qps.remove(s);
        self.forget_one();
        if s < self.qp_wqes.len() {
            self.qp_wqes.remove(s);
        }
        let down = |v: u32| if v > slot { v - 1 } else { v };
        for v in self.by_wqn.values_mut() {
            *v = down(*v);
        }
        let qpns = self.qps.iter().enumerate().filter(|(_, q)| q.kind == super::ResourceKind::Qp);
        self.by_qpn = KeyIndex::rebuilt(qpns.map(|(i, q)| (q.cfg.qpn, i as u32)).collect());
        self.by_uidx = KeyIndex::rebuilt(self.qps.iter().enumerate().map(|(i, q)| (q.uidx(), i as u32)).collect());
    }

    /// Removes the SRQ numbered `srqn` from lookups: its number is free again. Refused
    /// (false) while a registered QP receives from it, or if there is none. Its slot is
    /// kept, so the slots QPs hold stay valid.
    pub fn remove_srq(&mut self, srqn: u32) -> bool {
        let Some(&slot) = self.by_srqn.get(&srqn) else {
            return false;
        };
        if self.qps.iter().any(|q| q.srq_slot() == Some(slot)) {
            return false;
        }
        self.by_srqn.remove(&srqn);
        if let Some(w) = self.srq_wqes.get_mut(slot as usize) {
            *w = None;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::registry::{QpConfig, Registry};

    #[test]
    fn a_removed_qp_is_not_found_and_its_numbers_can_be_taken_again() {
        let mut r = Registry::new();
        for (qpn, uidx) in [(0x10, 5), (0x11, 6), (0x12, 7)] {
            r.add_qp(QpConfig { uidx: Some(uidx), ..QpConfig::rc(qpn, 4, 4) }).unwrap();
        }
        assert!(r.remove_qp(0x11));
        assert!(!r.remove_qp(0x11), "once");
        assert_eq!((r.slot_by_qpn(0x11), r.slot_by_uidx(6)), (None, None));
        assert_eq!((r.slot_by_qpn(0x12), r.slot_by_uidx(7)), (Some(1), Some(1)), "moved down a slot");
        assert_eq!(r.slot_by_qpn(0x10), Some(0));
        let again = r.add_qp(QpConfig { uidx: Some(6), ..QpConfig::rc(0x11, 8, 8) }).unwrap();
        assert_eq!(again.sq.wqe_cnt(), 8);
        assert_eq!(r.slot_by_qpn(0x11), Some(2));
    }

    #[test]
    fn an_srq_goes_only_after_its_qps() {
        let mut r = Registry::new();
        r.add_srq(0x30, 8).unwrap();
        r.add_qp(QpConfig { srqn: Some(0x30), ..QpConfig::rc(0x10, 4, 0) }).unwrap();
        assert!(!r.remove_srq(0x30), "a QP receives from it");
        assert!(r.remove_qp(0x10));
        assert!(r.remove_srq(0x30));
        assert!(r.srq(0x30).is_none());
        assert_eq!(r.add_srq(0x30, 4).map(|s| s.srqn()).ok(), Some(0x30), "the number is free again");
    }

    #[test]
    fn a_removed_wq_is_not_found_and_the_entries_after_it_move_down() {
        let mut r = Registry::new();
        r.add_qp(QpConfig { uidx: Some(5), ..QpConfig::rc(0x10, 4, 4) }).unwrap();
        r.add_rwq(0x20, 6, 8).unwrap();
        r.add_qp(QpConfig { uidx: Some(7), ..QpConfig::rc(0x11, 4, 4) }).unwrap();
        r.add_rwq(0x21, 8, 16).unwrap();
        assert!(!r.remove_rwq(0x10), "a QP is not a WQ");
        assert!(!r.remove_qp(0x20), "a WQ is not a QP");
        assert!(r.remove_rwq(0x20));
        assert!(!r.remove_rwq(0x20), "once");
        assert!(r.rwq_mut(0x20).is_none());
        assert_eq!(r.slot_by_uidx(6), None, "its user index names nothing");
        assert_eq!((r.slot_by_qpn(0x11), r.slot_by_uidx(7)), (Some(1), Some(1)), "moved down a slot");
        assert_eq!(r.slot_by_uidx(8), Some(2));
        assert_eq!(r.rwq_mut(0x21).map(|q| q.wqe_cnt()), Some(16), "the other WQ's entry moved with it");
        assert!(r.remove_qp(0x10));
        assert_eq!(r.rwq_mut(0x21).map(|q| q.wqe_cnt()), Some(16), "and again after a QP went");
        assert_eq!(r.slot_by_uidx(8), Some(1));
        let again = r.add_rwq(0x20, 6, 4).unwrap();
        assert_eq!(again.wqe_cnt(), 4, "the number and user index are free again");
        assert_eq!(r.slot_by_uidx(6), Some(2));
    }
}
