//! Which of the application's rdma-core CQs dvcq polls, process-wide: an `ibv_cq`
//! attached twice would have two pollers, each replaying every completion (and, on mlx5,
//! each handing the same SRQ WQEs back to rdma-core's free list), so [`Claim::take`]
//! refuses the second attach while the first [`crate::Cq`] lives.
//!
//! A CQ is the unit: every QP, SRQ or WQ queue completes on exactly one CQ, and each
//! attached CQ refuses a queue attached to it already, so with one poller per CQ no
//! completion is seen twice. (A QP whose send and receive queues complete on two CQs is
//! attached to both, each taking its own queue; an SRQ shared by QPs on several CQs is
//! attached to each, each handing back the WQEs of its own completions.)

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// The addresses of the `ibv_cq`s attached now.
fn claimed() -> &'static Mutex<HashSet<usize>> {
    static CLAIMED: OnceLock<Mutex<HashSet<usize>>> = OnceLock::new();
    CLAIMED.get_or_init(Default::default)
}

/// One attached CQ's hold on its address; dropping it (with the last handle on the CQ)
/// lets the CQ be attached again.
#[derive(Debug)]
pub(crate) struct Claim {
    addr: usize,
}

impl Claim {
    /// Claims the `ibv_cq` at `addr` for one poller.
    ///
    /// # Errors
    ///
    /// Says so when another live `Cq` of this process polls it.
    pub(crate) fn take(addr: usize) -> Result<Claim, String> {
        // A poisoned lock only means a panic elsewhere while it was held; the set is
        // still whole (each operation is one insert or remove).
        let mut set = claimed().lock().unwrap_or_else(|p| p.into_inner());
        if !set.insert(addr) {
            return Err(format!(
                "the CQ {addr:#x} is attached already (another dvcq Cq of this process polls it; drop that one first)"
            ));
        }
        Ok(Claim { addr })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        claimed().lock().unwrap_or_else(|p| p.into_inner()).remove(&self.addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cq_is_claimed_once_until_its_claim_drops() {
        let cq = Box::new(0u64);
        let addr = &*cq as *const u64 as usize;
        let first = Claim::take(addr).unwrap();
        let e = Claim::take(addr).unwrap_err();
        assert!(e.contains(&format!("the CQ {addr:#x} is attached already")), "{e}");
        let other = Box::new(0u64);
        let second = Claim::take(&*other as *const u64 as usize).expect("another CQ is another claim");
        drop(first);
        let again = Claim::take(addr).expect("free again once the first Cq is gone");
        drop((again, second));
    }
}
