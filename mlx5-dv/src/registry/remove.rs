//! Forgetting resources: a QP or SRQ destroyed while its CQ lives on (rdma-core's
//! `ibv_destroy_qp` of a QP whose CQ dvcq polls). Its CQEs still in the ring then come back
//! as unknown-resource fault items, as rdma-core's poll fails on a QPN it no longer knows
//! (`mlx5dv_init_obj` marks the CQ `MLX5_CQ_FLAGS_DV_OWNED`, and `__mlx5_cq_clean` in
//! `providers/mlx5/cq.c` returns at once for such a CQ, so they stay), and a new QP or
//! SRQ may take the same number.

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
    /// index are free again. The QPs registered after it move down one slot, so a poller
    /// holding slots must forget them (`Mlx5Cq::remove_qp` does). False if there is none.
    pub fn remove_qp(&mut self, qpn: u32) -> bool {
        let Some(slot) = self.by_qpn.get(qpn) else {
            return false;
        };
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
        true
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
}
