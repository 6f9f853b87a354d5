//! Completions counted by status: what a poller keeps on the path that makes failed
//! completions, so counting them costs nothing on the path of the successful ones.

use crate::completion::WcStatus;

/// One counter per `enum ibv_wc_status` value, indexed by its number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StatusCounts([u64; WcStatus::ALL.len()]);

impl StatusCounts {
    /// Completions counted with `status`.
    pub fn get(&self, status: WcStatus) -> u64 {
        self.0.get(status as usize).copied().unwrap_or(0)
    }

    /// Counts one completion with `status`.
    #[inline]
    pub fn add(&mut self, status: WcStatus) {
        self.add_n(status, 1);
    }

    /// Counts `n` completions with `status`.
    #[inline]
    pub fn add_n(&mut self, status: WcStatus, n: u64) {
        // Every status indexes the array (one counter per value); `get_mut` keeps the poll
        // path free of a panic branch all the same.
        if let Some(c) = self.0.get_mut(status as usize) {
            *c = c.saturating_add(n);
        }
    }

    /// Adds every counter of `other`.
    pub fn merge(&mut self, other: &StatusCounts) {
        for (s, n) in other.iter() {
            self.add_n(s, n);
        }
    }

    /// The statuses counted at least once, in numeric order, with their counts.
    pub fn iter(&self) -> impl Iterator<Item = (WcStatus, u64)> + '_ {
        WcStatus::ALL.iter().zip(&self.0).filter(|(_, &n)| n != 0).map(|(&s, &n)| (s, n))
    }

    /// All counters together.
    pub fn total(&self) -> u64 {
        self.0.iter().fold(0u64, |a, &n| a.saturating_add(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_status_number() {
        let mut c = StatusCounts::default();
        c.add(WcStatus::WrFlushErr);
        c.add_n(WcStatus::RemAccessErr, 3);
        c.add(WcStatus::WrFlushErr);
        let mut d = StatusCounts::default();
        d.add(WcStatus::TmRndvIncomplete);
        c.merge(&d);
        assert_eq!(c.get(WcStatus::WrFlushErr), 2);
        assert_eq!(c.get(WcStatus::Success), 0);
        assert_eq!(c.total(), 6);
        let seen: Vec<_> = c.iter().collect();
        assert_eq!(seen, [(WcStatus::WrFlushErr, 2), (WcStatus::RemAccessErr, 3), (WcStatus::TmRndvIncomplete, 1)]);
    }
}
