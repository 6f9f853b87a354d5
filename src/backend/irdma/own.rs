//! The irdma backend's side of dvcq's own QPs (`sys::irdma::own`): a poll call applies the
//! changes queued since the last one.

use super::IrdmaBackend;
pub(crate) use crate::sys::irdma::own::{Change, OwnQps};

impl IrdmaBackend {
    /// Applies the changes queued since the last poll call, in order (a QP number reused
    /// after a destroy is removed before it is added again). A change that fails (which
    /// the checks at creation leave to registry limits) is kept for
    /// [`IrdmaBackend::take_error`].
    pub(super) fn apply(&mut self, changes: &mut Vec<Change>) {
        for c in changes.drain(..) {
            let r = match c {
                Change::AddQp(p) => self.adopt(*p),
                Change::RemoveQp(qpn) => {
                    self.forget_qp(qpn);
                    Ok(())
                }
            };
            if let Err(e) = r {
                self.own_error.get_or_insert(e);
            }
        }
    }
}
