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
    /// [`crate::Error::Unsupported`] saying why this CQ's ring has no image: rdma-core's `ibv_poll_cq` (the generic backend) and
    /// rxe's queue of work-completion records have no ring-image format; irdma rings (the
    /// model's and attached ones) are not written yet.
    pub fn ring_image(&self) -> Result<String, crate::Error> {
        let why: String = match &self.poller {
            Poller::Model(m) => return m.ring_image(),
            Poller::Mlx5(m) => return Ok(m.ring_image()),
            Poller::Irdma(_) => "the irdma ring-image format names QPs by their line in the image, and an attached \
                                 CQ's CQEs carry rdma-core's QP context addresses: no image yet"
                .into(),
            Poller::Rxe(_) => "rxe's queue holds work-completion records, not CQEs: no ring-image format".into(),
            Poller::Generic(_) => "rdma-core's ibv_poll_cq reads this ring, not dvcq: no ring image".into(),
        };
        Err(self.no_image(why))
    }

    fn no_image(&self, why: String) -> crate::Error {
        crate::Error::Unsupported { device: self.device().to_string(), what: "a ring image", why }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Context, CqOptions, Error};

    /// A CQ whose ring has no image says so with a typed error naming the device and why;
    /// an mlx5 model's ring has one.
    #[test]
    fn a_ring_without_an_image_is_an_unsupported_error() {
        let cq = Context::open("model-e810").unwrap().create_cq(CqOptions::new(16)).unwrap();
        match cq.ring_image() {
            Err(Error::Unsupported { device, what: "a ring image", why }) => {
                assert_eq!(device, "model-e810");
                assert!(why.contains("irdma"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        let cq = Context::open("model-mlx5").unwrap().create_cq(CqOptions::new(16)).unwrap();
        assert!(cq.ring_image().unwrap().contains("mlx5"), "an mlx5 model ring has an image");
    }
}
