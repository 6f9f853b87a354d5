//! Arming a CQ through the backend that polls it, and the race-free wait: the one place
//! that orders poll, arm, poll again, sleep and drain.
//!
//! # Why the second poll
//!
//! An arm produces an event only for a completion the device writes after it (or, on
//! hardware that checks, one already past the consumer index). A completion written between
//! the last empty poll and the arm may therefore raise no event at all: sleeping then would
//! wait for the next completion, possibly forever. Polling once more after the arm closes
//! that window: whatever landed before the arm is found by that poll, whatever lands after
//! it raises the event the sleep wakes on.

use super::CqEventKind;
use crate::channel::deadline_after;
use crate::cq::{Cq, Poller};
use crate::error::Error;
use crate::model_device::Moderation;
use dvcq_provider::Completion;
use std::time::{Duration, Instant};

/// What an arm waits for (`ibv_req_notify_cq`'s `solicited_only`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ArmMode {
    /// An event on the next completion.
    #[default]
    Next,
    /// An event on the next completion of a solicited receive or with an error status.
    Solicited,
}

/// How [`Cq::wait_with`] waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitOptions {
    /// Busy-poll this long before arming and sleeping (the hybrid mode; zero: arm at once).
    pub spin: Duration,
    /// What the arm waits for.
    pub arm: ArmMode,
}

impl WaitOptions {
    /// Event mode: arm and sleep as soon as a poll finds nothing.
    pub const fn events() -> Self {
        WaitOptions { spin: Duration::ZERO, arm: ArmMode::Next }
    }

    /// Hybrid mode: busy-poll for `spin`, then arm and sleep.
    pub const fn hybrid(spin: Duration) -> Self {
        WaitOptions { spin, arm: ArmMode::Next }
    }
}

impl Cq {
    /// The model device's CQ under it (`None` on a device), for tests that drive the
    /// model's event emulation (say [`crate::model_device::ModelCq::before_next_arm`]).
    pub fn model(&self) -> Option<&crate::model_device::ModelCq> {
        match &self.poller {
            Poller::Model(m) => Some(m),
            _ => None,
        }
    }

    /// Requests one event for the next completion (or the next solicited or error one),
    /// through the backend that polls the CQ: `ibv_req_notify_cq` for the generic and rxe
    /// backends; dvcq's own arm doorbell where dvcq polls the ring (the mlx5 direct
    /// backend, a model: the vendor's doorbell record or shadow-area arm word, then its
    /// doorbell register, as rdma-core's provider rings them). An arm is one-shot.
    ///
    /// # Errors
    ///
    /// [`Error::Verbs`] when rdma-core refuses the arm; [`Error::Unsupported`] when the
    /// mlx5 direct backend cannot arm the CQ (no arm doorbell, as in an image test).
    pub fn arm(&mut self, mode: ArmMode) -> Result<(), Error> {
        let solicited = mode == ArmMode::Solicited;
        let (device, id) = (self.device().to_string(), self.id);
        let verbs = |source| Error::Verbs { device: device.clone(), source };
        match &mut self.poller {
            Poller::Model(m) => {
                m.arm(solicited).map_err(|e| Error::Event { device, what: format!("{id}: arming failed: {e}") })
            }
            Poller::Generic(g) => g.verbs_cq().req_notify(solicited).map_err(verbs),
            Poller::Rxe(r) => r.verbs_cq().req_notify(solicited).map_err(verbs),
            // rdma-core's arm would use its own consumer index, which a direct poller never
            // advances (`mlx5_arm_cq` in `providers/mlx5/cq.c` reads `cq->cons_index`), so
            // only dvcq's own arm doorbell is used.
            Poller::Mlx5(m) => m.arm(solicited).map(drop).map_err(|why| Error::Unsupported {
                device,
                what: "arming a CQ polled by the mlx5 direct backend",
                why,
            }),
            // irdma's arm carries no consumer index: rdma-core's own (irdma_uarm_cq) keeps
            // its bookkeeping (is_armed, skip_arm, arm_sol) in step with the events
            // ibv_get_cq_event reads (irdma_cq_event), and the attach writes the ring state
            // back after each poll, so rdma-core arms the attached CQ correctly.
            Poller::Irdma(m) => match m.verbs_cq() {
                Some(cq) => cq.req_notify(solicited).map_err(verbs),
                None => Err(Error::Unsupported {
                    device: self.device().to_string(),
                    what: "arming an irdma CQ",
                    why: "this irdma CQ has no rdma-core CQ to arm".into(),
                }),
            },
        }
    }

    /// Sets CQ moderation: an event waits for `count` completions or `period_us`
    /// microseconds, whichever comes first (`ibv_modify_cq`; 0 and 0 turn it off).
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] when the device does not moderate CQs or refuses the values;
    /// [`Error::Verbs`] for other rdma-core failures.
    pub fn set_moderation(&mut self, count: u16, period_us: u16) -> Result<(), Error> {
        let device = self.device().to_string();
        match &mut self.poller {
            Poller::Model(m) => m.set_moderation(Moderation { count, period_us }).map_err(|e| Error::Unsupported {
                device,
                what: "cq moderation",
                why: e.to_string(),
            }),
            Poller::Generic(g) => moderate_verbs(g.verbs_cq(), device, count, period_us),
            Poller::Rxe(r) => moderate_verbs(r.verbs_cq(), device, count, period_us),
            Poller::Mlx5(m) => match m.verbs_cq() {
                Some(cq) => moderate_verbs(cq, device, count, period_us),
                None => Err(Error::Unsupported {
                    device,
                    what: "cq moderation",
                    why: "this mlx5 CQ has no rdma-core CQ to modify".into(),
                }),
            },
            Poller::Irdma(m) => match m.verbs_cq() {
                Some(cq) => moderate_verbs(cq, device, count, period_us),
                None => Err(Error::Unsupported {
                    device,
                    what: "cq moderation",
                    why: "this irdma CQ has no rdma-core CQ to modify".into(),
                }),
            },
        }
    }

    /// Waits up to `timeout` (`None`: no limit) for completions, moves up to `out.len()` of
    /// them out, in order, into the front of `out`, and returns that part of it (as
    /// [`Cq::poll`] does); empty at the timeout. Event mode: see [`Cq::wait_with`].
    ///
    /// ```
    /// # use dvcq::{Completion, Context, CqOptions};
    /// # use std::time::Duration;
    /// # let ctx = Context::open("model-mlx5")?;
    /// # let channel = ctx.create_channel()?;
    /// # let mut cq = ctx.create_cq_on(&channel, CqOptions::new(64))?;
    /// let mut wcs = [Completion::default(); 16];
    /// for wc in cq.wait(&mut wcs, Some(Duration::from_millis(1)))? {
    ///     println!("wr_id {} {}", wc.wr_id, wc.status);
    /// }
    /// # Ok::<(), dvcq::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Cq::wait_with`].
    pub fn wait<'a>(
        &mut self,
        out: &'a mut [Completion],
        timeout: Option<Duration>,
    ) -> Result<&'a [Completion], Error> {
        self.wait_with(out, timeout, WaitOptions::events())
    }

    /// [`Cq::wait`] returning how many completions it moved to the front of `out` instead
    /// of that slice: for loops that keep their own position in a larger buffer.
    ///
    /// # Errors
    ///
    /// As [`Cq::wait_with`].
    pub fn wait_count(&mut self, out: &mut [Completion], timeout: Option<Duration>) -> Result<usize, Error> {
        self.wait_with_count(out, timeout, WaitOptions::events())
    }

    /// Waits for completions the race-free way: poll (busy-polling for `opts.spin` first,
    /// the hybrid mode); arm; poll again, for a completion that landed before the arm; sleep
    /// on the channel until this CQ's event; then drain with a poll. Returns the part of
    /// `out` the first non-empty poll filled, or an empty slice at `timeout`.
    ///
    /// # Errors
    ///
    /// [`Error::Event`] for a CQ made without a channel; [`Error::CqInError`] for a CQ in
    /// error (an error event, or the CQ error item a poll returned) when nothing is left to
    /// poll, and from then on whenever nothing is; arming and channel errors. Completions
    /// polled are returned before any error is.
    pub fn wait_with<'a>(
        &mut self,
        out: &'a mut [Completion],
        timeout: Option<Duration>,
        opts: WaitOptions,
    ) -> Result<&'a [Completion], Error> {
        let n = self.wait_with_count(out, timeout, opts)?;
        Ok(&out[..n.min(out.len())])
    }

    /// [`Cq::wait_with`] returning how many completions it moved to the front of `out`.
    ///
    /// # Errors
    ///
    /// As [`Cq::wait_with`].
    pub fn wait_with_count(
        &mut self,
        out: &mut [Completion],
        timeout: Option<Duration>,
        opts: WaitOptions,
    ) -> Result<usize, Error> {
        let start = Instant::now();
        let deadline = deadline_after(start, timeout);
        let Some(channel) = self.channel().cloned() else {
            return Err(Error::Event {
                device: self.device().to_string(),
                what: format!("{} was made without a completion channel: make it with create_cq_on", self.id),
            });
        };
        if !opts.spin.is_zero() {
            // `None`: a spin too long to end (it ends with a completion).
            let spin_end = match (deadline, deadline_after(start, Some(opts.spin))) {
                (Some(d), Some(s)) => Some(d.min(s)),
                (d, s) => d.or(s),
            };
            loop {
                let n = self.poll_count(out);
                if n > 0 {
                    return Ok(n);
                }
                if spin_end.is_some_and(|end| Instant::now() >= end) {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        loop {
            let n = self.poll_count(out);
            if n > 0 {
                return Ok(n);
            }
            if self.in_error {
                // Its error event came once; the CQ writes nothing more, so sleeping would
                // never end.
                return Err(self.overran());
            }
            self.arm(opts.arm)?;
            let n = self.poll_count(out);
            if n > 0 {
                return Ok(n);
            }
            match channel.wait_for(self.id, deadline)? {
                None => return Ok(self.poll_count(out)),
                Some(CqEventKind::Completion) => {
                    self.events_taken += 1;
                }
                Some(CqEventKind::CqError) => {
                    self.in_error = true;
                    let n = self.poll_count(out);
                    if n > 0 {
                        return Ok(n);
                    }
                    return Err(self.overran());
                }
            }
        }
    }

    /// The error of a wait on a CQ in error (it overran): [`Error::CqInError`].
    pub(crate) fn overran(&self) -> Error {
        self.error().unwrap_or(Error::CqInError {
            device: self.device().to_string(),
            cq: self.id,
            reason: dvcq_provider::CqErrorReason::Overrun,
        })
    }

    /// Completion events this CQ's waits have taken from its channel.
    pub fn events_taken(&self) -> u64 {
        self.events_taken
    }
}

/// `ibv_modify_cq` with the refusals as [`Error::Unsupported`].
fn moderate_verbs(cq: &crate::sys::cq::VerbsCq, device: String, count: u16, period_us: u16) -> Result<(), Error> {
    cq.moderate(count, period_us).map_err(|source| match source.errno {
        libc::EOPNOTSUPP | libc::ENOSYS => Error::Unsupported {
            device,
            what: "cq moderation",
            why: format!("the provider has no ibv_modify_cq ({source})"),
        },
        libc::EINVAL => Error::Unsupported {
            device,
            what: "cq moderation",
            why: format!("count {count}, period {period_us} us refused ({source})"),
        },
        _ => Error::Verbs { device, source },
    })
}
