//! A CQ's identity and its binding to a completion channel: what its events carry and where
//! they go. The waits that use them are in `event` (`Cq::wait`, `Cq::arm`).

use super::Cq;
use crate::channel::{Binding, CompletionChannel};
use crate::id::CqId;

impl Cq {
    /// This CQ's id: what its events carry ([`crate::CqEvent::cq`]).
    pub fn id(&self) -> CqId {
        self.id
    }

    /// The channel its events go to, if it was made on one.
    pub fn channel(&self) -> Option<&CompletionChannel> {
        self.binding.as_ref().map(|b| &b.channel)
    }

    pub(crate) fn bind(&mut self, channel: &CompletionChannel) {
        self.binding = Some(Binding::new(channel, self.id));
    }
}
