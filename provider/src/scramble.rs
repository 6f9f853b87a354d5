//! The fixed QP order of the benchmarks' many-QPs mix, shared by every backend's bench so
//! their figures compare like with like.

/// Which of `qps` QPs completes the lap's `i`-th CQE: a fixed multiplicative scramble in
/// which a QP seldom completes twice in a row. `qps` of 0 gives 0.
#[must_use]
pub fn scrambled_qp(i: u32, qps: u32) -> u32 {
    (i.wrapping_mul(0x9e37_79b9) >> 7).checked_rem(qps).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::scrambled_qp;

    #[test]
    fn every_qp_takes_a_fair_share_and_seldom_twice_in_a_row() {
        let qps = 16;
        let order: Vec<u32> = (0..4096).map(|i| scrambled_qp(i, qps)).collect();
        let mut share = [0u32; 16];
        for &k in &order {
            share[k as usize] += 1;
        }
        // Each QP gets its 256 within a quarter; a QP repeats in under 1 in 8 turns.
        assert!(share.iter().all(|&s| (192..=320).contains(&s)), "{share:?}");
        let repeats = order.windows(2).filter(|w| w[0] == w[1]).count();
        assert!(repeats < order.len() / 8, "{repeats} repeats");
        assert_eq!(scrambled_qp(7, 0), 0);
    }
}
