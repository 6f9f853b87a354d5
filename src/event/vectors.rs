//! Completion vectors: spreading a set of CQs over the vectors a device has, so their
//! events are raised on different interrupt lines (and CPUs).

/// The vector for each of `count` CQs on a device with `vectors` completion vectors:
/// round-robin from vector 0, so no two CQs share a vector before every vector has one.
/// A device reporting no vectors gets vector 0 for all (every device accepts 0).
pub fn spread_comp_vectors(count: usize, vectors: u32) -> Vec<u32> {
    let v = vectors.max(1);
    (0..count).map(|i| (i as u64 % u64::from(v)) as u32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_over_every_vector() {
        assert_eq!(spread_comp_vectors(5, 2), [0, 1, 0, 1, 0]);
        assert_eq!(spread_comp_vectors(3, 8), [0, 1, 2]);
        assert_eq!(spread_comp_vectors(2, 0), [0, 0], "no vectors reported: vector 0");
        let s = spread_comp_vectors(64, 7);
        for v in 0..7 {
            let n = s.iter().filter(|&&x| x == v).count();
            assert!((9..=10).contains(&n), "vector {v} got {n} of 64");
        }
    }
}
