//! The three ways a traffic run polls, each one function the callgrind count can name
//! (`--toggle-collect`), so that only the poll calls are counted:
//!
//! - [`traffic_poll_direct`]: [`Cq::poll`] on the backend `BackendChoice::Auto` picked, into
//!   dvcq's [`Completion`]s;
//! - `traffic_poll_ibv_poll_cq`: rdma-core's `ibv_poll_cq` into `struct ibv_wc`s;
//! - `traffic_poll_cq_ex`: rdma-core's extended CQ (`ibv_start_poll`, `ibv_next_poll`,
//!   `ibv_wc_read_*`, `ibv_end_poll`) into the same `struct ibv_wc`s.
//!
//! The two rdma-core rows fill what an application of rdma-core gets and nothing more, so
//! their ratio to each other is rdma-core's own; the direct row's is dvcq's complete
//! answer, its conversion included.

use super::PollerKind;
use crate::cq::Cq;
use dvcq::Error;
use dvcq_provider::Completion;

/// What one poll call took: completions, each reduced to the wr_id and whether it
/// succeeded (the status named when not).
#[derive(Debug, Default)]
pub(super) struct Taken {
    /// `(wr_id, None)` for a success, `(wr_id, Some(status))` otherwise.
    pub(super) items: Vec<(u64, Option<String>)>,
}

/// Per-lane buffers, sized once for the largest batch.
pub(super) struct Scratch {
    wcs: Vec<Completion>,
    verbs: Vec<dvcq::tool_support::IbvWc>,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch").field("batch", &self.wcs.len()).finish_non_exhaustive()
    }
}

impl Scratch {
    pub(super) fn new(batch: usize) -> Scratch {
        Scratch {
            wcs: vec![Completion::default(); batch.max(1)],
            verbs: vec![dvcq::tool_support::IbvWc::default(); batch.max(1)],
        }
    }

    /// The batch it holds room for.
    pub(super) fn len(&self) -> usize {
        self.wcs.len()
    }
}

/// The symbol names of the poll functions, for `valgrind --toggle-collect`.
pub(crate) const fn symbol(kind: PollerKind) -> &'static str {
    match kind {
        PollerKind::Direct => "traffic_poll_direct",
        PollerKind::IbvPollCq => "traffic_poll_ibv_poll_cq",
        PollerKind::CqEx => "traffic_poll_cq_ex",
    }
}

/// `Cq::poll` into `out`.
#[inline(never)]
pub(super) fn traffic_poll_direct(cq: &mut Cq, out: &mut [Completion]) -> usize {
    cq.poll_count(out)
}

/// `ibv_poll_cq` on the CQ behind a generic-backend `cq`.
#[inline(never)]
pub(super) fn traffic_poll_ibv_poll_cq(cq: &Cq, out: &mut [dvcq::tool_support::IbvWc]) -> Result<usize, Error> {
    dvcq::tool_support::ibv_poll_cq(cq, out, "ibv_poll_cq")
}

/// The extended poll on the CQ behind a generic-backend `cq` made by `ibv_create_cq_ex`.
#[inline(never)]
pub(super) fn traffic_poll_cq_ex(cq: &Cq, out: &mut [dvcq::tool_support::IbvWc]) -> Result<usize, Error> {
    match dvcq::tool_support::ibv_poll_cq_ex(cq, out, "cq_ex")? {
        // Completions polled before the failure were consumed: they are not dropped here,
        // the run stops on the error anyway.
        (0, Some(e)) => Err(e),
        (n, _) => Ok(n),
    }
}

/// One poll call of up to `batch` completions the `kind` way, into `taken`.
///
/// # Errors
///
/// The rdma-core poll failed.
#[inline]
pub(super) fn poll(
    kind: PollerKind,
    cq: &mut Cq,
    batch: usize,
    s: &mut Scratch,
    taken: &mut Taken,
) -> Result<usize, Error> {
    taken.items.clear();
    match kind {
        PollerKind::Direct => {
            let n = traffic_poll_direct(cq, &mut s.wcs[..batch]);
            taken
                .items
                .extend(s.wcs[..n].iter().map(|c| (c.wr_id, (!c.is_ok()).then(|| c.status.as_str().to_string()))));
            if let Some(e) = cq.take_error() {
                return Err(e);
            }
            Ok(n)
        }
        PollerKind::IbvPollCq | PollerKind::CqEx => {
            let out = &mut s.verbs[..batch];
            let n = if kind == PollerKind::IbvPollCq {
                traffic_poll_ibv_poll_cq(cq, out)?
            } else {
                traffic_poll_cq_ex(cq, out)?
            };
            taken.items.extend(out[..n].iter().map(|w| {
                let bad = (w.status != dvcq::tool_support::IBV_WC_SUCCESS)
                    .then(|| format!("{} ({})", crate::WcStatus::str_of(w.status), w.status));
                (w.wr_id, bad)
            }));
            Ok(n)
        }
    }
}
