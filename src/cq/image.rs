//! A CQ's ring as a ring image (the text format `dvcq ring decode` reads), for the
//! backends whose ring dvcq parses: offline decoding of a ring that misbehaved.

use super::{Cq, Poller};

impl Cq {
    /// The ring as a ring image: its bytes now, with the settings and QPs the poller reads it
    /// with, positioned so that decoding replays the CQEs already polled that are still in
    /// the ring (up to a lap) and then those waiting.
    ///
    /// # Errors
    ///
    /// Why this CQ's ring has no image: rdma-core's `ibv_poll_cq` (the generic backend) and
    /// rxe's queue of work-completion records have no ring-image format; irdma rings (the
    /// model's and attached ones) are not written yet.
    pub fn ring_image(&self) -> Result<String, String> {
        match &self.poller {
            Poller::Model(m) => m.ring_image(),
            Poller::Mlx5(m) => Ok(m.ring_image()),
            Poller::Irdma(_) => Err("the irdma ring-image format names QPs by their line in the image, and an \
                                     attached CQ's CQEs carry rdma-core's QP context addresses: no image yet"
                .into()),
            Poller::Rxe(_) => Err("rxe's queue holds work-completion records, not CQEs: no ring-image format".into()),
            Poller::Generic(_) => Err("rdma-core's ibv_poll_cq reads this ring, not dvcq: no ring image".into()),
        }
    }
}
