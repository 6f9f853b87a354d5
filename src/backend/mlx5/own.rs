//! The mlx5 backend's side of dvcq's own QPs and SRQs (`sys::mlx5::own`): a poll call
//! applies the changes queued since the last one.

use super::Mlx5Backend;
pub(crate) use crate::sys::mlx5::own::{Change, OwnQps};

impl Mlx5Backend {
    /// Applies the changes queued since the last poll call, in order (a QP number reused
    /// after a destroy is removed before it is added again). A change that fails (which
    /// the checks at creation leave to registry limits) is kept for [`Mlx5Backend::take_error`].
    pub(super) fn apply(&mut self, changes: &mut Vec<Change>) {
        for c in changes.drain(..) {
            let r = match c {
                Change::AddQp(p) => self.adopt(p),
                Change::AddSrq(ptr, s) => self.adopt_srq(ptr, s).map(|_| ()),
                Change::RemoveQp(qpn) => {
                    self.forget_qp(qpn);
                    Ok(())
                }
                Change::RemoveSrq(ptr) => {
                    self.forget_srq(ptr);
                    Ok(())
                }
            };
            if let Err(e) = r {
                self.own_error.get_or_insert(e);
            }
        }
    }
}
