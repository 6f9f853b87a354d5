//! The one CQ handle an application polls, whatever the device: a backend chosen when the
//! CQ is made or attached, dispatched once per poll call (never per CQE).
//!
//! Layer: above `context` (CQs are made on one: `Context::create_cq` is in `create.rs`,
//! `Cq::attach` in `attach.rs`), `channel` (a CQ's binding, `binding.rs`), `device`,
//! `backend`, `model_device`, `sys`, `error` and the vocabulary (`verbs`, `id`), which it
//! may import; below `qp` and `event` (`Cq::wait` and `Cq::arm` are in `event`).

mod advice;
mod attach;
mod binding;
mod create;
mod detach;
mod extended;
mod image;
mod raw;
mod stats;
mod timestamp;
pub mod views;

pub use advice::{advise_depth, DepthAdvice, Verdict, BYTES_PER_CQE, DEFAULT_MARGIN};
pub use dvcq_provider::StatusCounts;
pub use stats::{CqStats, HighWaterSource};
pub(crate) use timestamp::model_cq;
pub use timestamp::{CqClock, Timestamps};
pub use views::{CqViews, CqeView};

pub(crate) use crate::backend::Poller;
pub use crate::backend::{Backend, BackendChoice, BackendKind};
use crate::error::Error;
use dvcq_provider::{Completion, CqErrorCell, CqErrorReason, CqeFault};
use std::sync::Arc;

/// Empty polls between two reads of a device context's async events by a CQ's poll (where
/// nothing else read them: [`Cq::stats`], [`Cq::error`] and the waits read them too). A
/// read is a non-blocking `read(2)` of the async fd, about a microsecond; one in 4096 empty
/// polls keeps it under a nanosecond per empty poll.
const EVENT_READ_EVERY: u32 = 4096;
use stats::{BackendCounters, PollCounters};

/// How to make a CQ.
///
/// The mlx5 creation attributes (`cqe_size`, `compression`, `cqe_pad`) are what dvcq
/// passes to `mlx5dv_create_cq` when it makes a CQ on an mlx5 device, so that the direct
/// poller knows the CQ's format instead of assuming it (rdma-core records none of them where
/// a program can read them back). Other devices and the models refuse anything but the
/// defaults with [`crate::Error::Unsupported`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqOptions {
    /// Completions the CQ must hold at least (the device may round up).
    pub depth: u32,
    /// The completion vector its events are delivered on.
    pub comp_vector: u32,
    /// Which backends may poll it.
    pub backend: BackendChoice,
    /// Bytes per CQE: 64 (the default) or 128 (mlx5: `MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE`;
    /// the CQE's second half is the 64-byte CQE, the first holds inline-scattered data up
    /// to 64 bytes or a GRH).
    pub cqe_size: u16,
    /// CQE compression with this responder mini-CQE format (mlx5:
    /// `MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE`, basic layout). rdma-core's own poll cannot
    /// read a compressed CQ, so such a CQ is polled directly or not made.
    pub compression: Option<dvcq_mlx5_dv::MiniFormat>,
    /// 128-byte CQEs padded to whole 128-byte lines (mlx5:
    /// `MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD`, for 128-byte cache lines); needs `cqe_size` 128.
    pub cqe_pad: bool,
    /// The device writes CQEs even past a full CQ instead of raising a CQ error
    /// (`IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`; mlx5 only here). The caller sizes the CQ for
    /// its outstanding work.
    pub ignore_overrun: bool,
    /// The completion timestamps it reports ([`Timestamps`], the device's default unless
    /// set).
    pub timestamps: Timestamps,
}

impl CqOptions {
    /// A CQ of `depth` on vector 0 with the automatic backend choice and the device's
    /// default CQE format.
    pub const fn new(depth: u32) -> Self {
        CqOptions {
            depth,
            comp_vector: 0,
            backend: BackendChoice::Auto,
            cqe_size: 64,
            compression: None,
            cqe_pad: false,
            ignore_overrun: false,
            timestamps: Timestamps::Default,
        }
    }

    /// The same, reporting `timestamps` (see [`Timestamps`]: on an rdma-core device,
    /// anything but the default makes an extended CQ polled by the generic backend).
    pub const fn timestamps(mut self, timestamps: Timestamps) -> Self {
        self.timestamps = timestamps;
        self
    }

    /// The same with another backend choice.
    pub const fn backend(mut self, choice: BackendChoice) -> Self {
        self.backend = choice;
        self
    }

    /// The same on another completion vector.
    pub const fn comp_vector(mut self, vector: u32) -> Self {
        self.comp_vector = vector;
        self
    }

    /// The same with `bytes`-byte CQEs (64 or 128).
    pub const fn cqe_size(mut self, bytes: u16) -> Self {
        self.cqe_size = bytes;
        self
    }

    /// The same with CQE compression in responder mini-CQE format `format` (`Hash`,
    /// `Csum` or `CsumStridx`: the ones `mlx5dv_create_cq` takes).
    pub const fn compressed(mut self, format: dvcq_mlx5_dv::MiniFormat) -> Self {
        self.compression = Some(format);
        self
    }

    /// The same with padded 128-byte CQEs.
    pub const fn padded(mut self) -> Self {
        self.cqe_pad = true;
        self
    }

    /// The same with overrun ignored.
    pub const fn ignoring_overrun(mut self) -> Self {
        self.ignore_overrun = true;
        self
    }

    /// Whether any mlx5 creation attribute differs from the defaults.
    pub(crate) const fn has_mlx5_format(&self) -> bool {
        self.cqe_size != 64 || self.compression.is_some() || self.cqe_pad || self.ignore_overrun
    }

    /// The first attribute that no CQ can have, whatever the device.
    pub(crate) fn format_error(&self) -> Option<String> {
        use dvcq_mlx5_dv::MiniFormat;
        if self.cqe_size != 64 && self.cqe_size != 128 {
            return Some(format!("{}-byte CQEs: mlx5 CQEs are 64 or 128 bytes", self.cqe_size));
        }
        if self.cqe_pad && self.cqe_size != 128 {
            return Some("padded CQEs need 128-byte CQEs".into());
        }
        if let Some(f @ (MiniFormat::FtagStridx | MiniFormat::L34hStridx)) = self.compression {
            return Some(format!(
                "mini-CQE format {}: mlx5dv_create_cq takes hash, csum or csum_stridx (the others need DevX)",
                f.word()
            ));
        }
        if self.compression.is_some() && self.backend == BackendChoice::Generic {
            return Some("a compressed CQ with BackendChoice::Generic: rdma-core's poll cannot read one".into());
        }
        None
    }
}

/// Scans the `n` completions a copying backend just wrote for failures; returns `n`.
#[inline(always)]
fn scanned(stats: &mut PollCounters, out: &[Completion], n: usize) -> usize {
    // A backend returns at most `out.len()`; `get` keeps a wrong count from panicking.
    stats.scan(out.get(..n).unwrap_or(out));
    n
}

/// A completion queue on a device or a model.
///
/// `poll` works the same on every backend and returns completions with libibverbs' meanings
/// (a CQE a direct backend cannot turn into a completion comes back as a fault item, see
/// [`Completion::fault`]). A `Cq` is `Send` but not `Sync`: one consumer.
///
/// # A CQ in error
///
/// A CQ the device found full (it overran) or whose device failed is in error: the device
/// writes nothing more to it, and the QPs whose completions it cannot take go to error.
/// A busy poller learns of it from `poll` itself: once every completion written before the
/// error was returned, the first poll that finds the ring empty returns one *CQ error
/// item*, a fault item of [`crate::FaultKind::CqError`] whose [`Completion::cq_error`] says
/// why ([`CqErrorReason`]) and whose `wr_id` is the number of completions returned before
/// it. The item comes once; from then on [`Cq::error`] and [`Cq::take_error`] answer
/// [`Error::CqInError`] every time they are asked, and [`Cq::wait`] returns that error at
/// once instead of sleeping.
///
/// How soon a poll sees the error: on the models at once (the device sets the CQ's error
/// state as it drops the CQE). On a device dvcq opened (mlx5, irdma, rxe, the generic
/// backend) the error is the context's async event (`IBV_EVENT_CQ_ERR`,
/// `IBV_EVENT_DEVICE_FATAL`): every poll reads the CQ's error state (one relaxed load and
/// a test; a CQ in error takes a cold path), and every 4096th empty poll reads the async
/// events itself, so a busy poller sees the error within that many empty polls, or at once
/// after [`Cq::stats`], [`Cq::error`] or a wait read them. On an application's CQ (`Cq::attach`) the async events are the
/// application's: `poll` cannot see the error there.
///
/// What a post answers once its QP's CQ is in error: `Ok`, as on the hardware, where a post
/// only writes the WQE and rings the doorbell (mlx5, irdma; rxe's kernel queues it). The QP
/// is in error by then (the device moved it there when its completion could not be
/// written), so the work flushes instead of executing and no completion arrives on the CQ
/// in error; the send queue's room, given back only by polled completions, runs out after
/// as many posts as it holds, and posts then fail with [`Error::QueueFull`]. The models do
/// the same.
#[derive(Debug)]
pub struct Cq {
    pub(crate) poller: Poller,
    backend: Backend,
    device: String,
    depth: u32,
    stats: PollCounters,
    /// Event mode (`crate::event`): its id on a channel, the channel, events taken.
    pub(crate) id: crate::id::CqId,
    pub(crate) binding: Option<crate::channel::Binding>,
    pub(crate) events_taken: u64,
    /// A CQ error event (overrun) was taken, or the CQ error item returned: the CQ is in
    /// error and writes nothing more.
    pub(crate) in_error: bool,
    /// The reason the CQ error item was returned with (it comes once).
    reported: Option<CqErrorReason>,
    /// Where the backend's detector puts the CQ's error (a cell nobody sets where there
    /// is no detector).
    error_cell: Arc<CqErrorCell>,
    /// Empty polls since the async events were last read (devices dvcq opened).
    empty_streak: u32,
}

impl Cq {
    pub(crate) fn new(poller: Poller, backend: Backend, device: String, depth: u32) -> Cq {
        let id = crate::id::CqId::next();
        Cq {
            poller,
            backend,
            device,
            depth,
            stats: PollCounters::default(),
            id,
            binding: None,
            events_taken: 0,
            in_error: false,
            reported: None,
            error_cell: Arc::default(),
            empty_streak: 0,
        }
        .watching_errors()
    }

    /// Takes the error cell of the poller's detector.
    fn watching_errors(mut self) -> Cq {
        self.error_cell = self.detector_cell();
        self
    }

    /// The cell the poller's error detector sets: the model device's, or the one the
    /// reader of the context's async events sets (a cell nobody sets on an application's
    /// CQ, whose events dvcq does not read).
    fn detector_cell(&self) -> Arc<CqErrorCell> {
        match &self.poller {
            Poller::Model(m) => Arc::clone(m.error_cell()),
            Poller::Generic(g) => Arc::clone(g.verbs_cq().error_cell()),
            Poller::Rxe(r) => Arc::clone(r.verbs_cq().error_cell()),
            Poller::Mlx5(m) => m.verbs_cq().map_or_else(Arc::default, |v| Arc::clone(v.error_cell())),
            Poller::Irdma(m) => m.verbs_cq().map_or_else(Arc::default, |v| Arc::clone(v.error_cell())),
        }
    }

    /// A poll found the ring empty: counts toward the next read of the device's async
    /// events (a CQ on a device dvcq opened), which may find the CQ in error.
    #[inline(always)]
    fn found_empty(&mut self) {
        self.empty_streak = self.empty_streak.wrapping_add(1);
        if self.empty_streak % EVENT_READ_EVERY == 0 {
            self.read_device_events();
        }
    }

    /// A poll of a CQ whose error cell is set: what the ring still holds, then the CQ error
    /// item, once, on the first poll that finds it empty.
    #[cold]
    #[inline(never)]
    fn poll_in_error(&mut self, out: &mut [Completion]) -> usize {
        let n = self.dispatch(out);
        let n = match (n, self.reported, self.error_cell.get()) {
            (0, None, Some(reason)) => self.report(reason, out),
            _ => n,
        };
        self.stats.count(n);
        n
    }

    /// Reads the context's async events now (a device dvcq opened), which sets the CQ's
    /// error cell if an error event for it came.
    #[cold]
    #[inline(never)]
    fn read_device_events(&self) {
        match &self.poller {
            Poller::Model(_) => {}
            Poller::Generic(g) => {
                let _ = g.verbs_cq().overruns();
            }
            Poller::Rxe(r) => {
                let _ = r.verbs_cq().overruns();
            }
            Poller::Mlx5(m) => {
                let _ = m.verbs_cq().and_then(|v| v.overruns());
            }
            Poller::Irdma(m) => {
                let _ = m.verbs_cq().and_then(|v| v.overruns());
            }
        }
    }

    /// Writes the CQ error item (see [`Cq`]'s docs) into `out[0]`.
    #[cold]
    #[inline(never)]
    fn report(&mut self, reason: CqErrorReason, out: &mut [Completion]) -> usize {
        let Some(slot) = out.first_mut() else { return 0 };
        let polled = self.stats.completions() as u32;
        *slot = Completion::from_fault(CqeFault::cq_error_item(reason, polled));
        self.reported = Some(reason);
        self.in_error = true;
        self.stats.error_item();
        1
    }

    /// Why the CQ is in error, if it is, as known now (reading nothing).
    fn error_reason(&self) -> Option<CqErrorReason> {
        self.reported.or_else(|| self.error_cell.get()).or_else(|| {
            // A CQ error event taken from the channel says the CQ overran.
            self.in_error.then_some(CqErrorReason::Overrun)
        })
    }

    /// Whether this CQ is in error, and why ([`Error::CqInError`]): the device writes no
    /// more completions to it (see "A CQ in error" above). It stays in error: once `Some`,
    /// always `Some`. On a device dvcq opened, the context's queued async events are read
    /// first (without blocking).
    pub fn error(&self) -> Option<Error> {
        if self.error_reason().is_none() {
            self.read_device_events();
        }
        self.known_error()
    }

    /// [`Cq::error`] as known now, reading nothing.
    fn known_error(&self) -> Option<Error> {
        let reason = self.error_reason()?;
        Some(Error::CqInError { device: self.device.clone(), cq: self.id, reason })
    }

    /// Moves up to `out.len()` completions out of the CQ, in order, into the front of
    /// `out`, and returns that part of it: empty when the CQ had none. Nothing is
    /// allocated; `out` is the caller's batch buffer, reused from call to call. Counted in
    /// [`Cq::stats`].
    ///
    /// ```
    /// # use dvcq::{Completion, Context, CqOptions};
    /// # let mut cq = Context::open("model-mlx5")?.create_cq(CqOptions::new(64))?;
    /// let mut wcs = [Completion::default(); 16];
    /// for wc in cq.poll(&mut wcs) {
    ///     println!("wr_id {} {}", wc.wr_id, wc.status);
    /// }
    /// # Ok::<(), dvcq::Error>(())
    /// ```
    #[inline]
    pub fn poll<'a>(&mut self, out: &'a mut [Completion]) -> &'a [Completion] {
        let n = self.poll_count(out);
        // A backend fills at most `out.len()`; `min` keeps a wrong count from panicking
        // (and lets the compiler drop the bounds check).
        &out[..n.min(out.len())]
    }

    /// [`Cq::poll`] returning how many completions it moved to the front of `out` instead
    /// of that slice: for loops that keep their own position in a larger buffer.
    #[inline]
    pub fn poll_count(&mut self, out: &mut [Completion]) -> usize {
        // An empty ring of a direct backend is answered here, inlined into the caller: a
        // busy-polling program (perftest) finds the ring empty on nearly every call, and
        // the full poll's frame and the backend's per-call bookkeeping cost more than the
        // one CQE read that tells.
        if self.idle_poll() {
            return 0;
        }
        self.poll_any(out)
    }

    /// The empty poll, when that is what a poll now would be: if a direct backend's ring
    /// holds nothing to take (one CQE or index read) and the CQ is not in error, counts an
    /// empty poll as [`Cq::poll`] would and returns true; otherwise changes nothing and
    /// returns false, and the caller polls. For poll loops with per-call work of their own
    /// around the poll (a lock, a conversion) that an empty ring need not pay. Always false
    /// on the generic backend and the models.
    #[inline(always)]
    pub fn idle_poll(&mut self) -> bool {
        if self.error_cell.is_set() || !self.poller.nothing_ready() {
            return false;
        }
        self.found_empty();
        self.stats.count_empty();
        true
    }

    /// [`Cq::poll_count`] past its empty-ring test.
    #[inline(never)]
    fn poll_any(&mut self, out: &mut [Completion]) -> usize {
        // A CQ in error takes the cold path; the others pay one load and a test here, and
        // the test of an empty poll below.
        if self.error_cell.is_set() {
            return self.poll_in_error(out);
        }
        let n = self.dispatch(out);
        if n == 0 {
            self.found_empty();
        }
        self.stats.count(n);
        n
    }

    /// One poll of the backend, with the failure scan of the generic backend (rdma-core's
    /// `ibv_poll_cq` copies records and has no failure path of dvcq's).
    #[inline(always)]
    fn dispatch(&mut self, out: &mut [Completion]) -> usize {
        match &mut self.poller {
            // rdma-core's poll copies records and counts nothing: the handle scans.
            Poller::Generic(g) => {
                let n = g.poll(out);
                scanned(&mut self.stats, out, n)
            }
            // dvcq's rxe, mlx5 and irdma pollers count failures on their slow path.
            Poller::Rxe(r) => r.poll(out),
            Poller::Mlx5(m) => m.poll(out),
            Poller::Irdma(m) => m.poll(out),
            Poller::Model(m) => m.poll_count(out),
        }
    }

    /// [`Cq::poll`] without the statistics: what `dvcq bench cq` compares it with.
    #[inline]
    pub(crate) fn poll_uncounted(&mut self, out: &mut [Completion]) -> usize {
        match &mut self.poller {
            Poller::Generic(g) => g.poll(out),
            Poller::Rxe(r) => r.poll(out),
            Poller::Mlx5(m) => m.poll(out),
            Poller::Irdma(m) => m.poll(out),
            Poller::Model(m) => m.poll_count(out),
        }
    }

    /// Hands the CQ to another poller (a direct attach refused before it consumed any
    /// CQE), saying why.
    pub(crate) fn fall_back(&mut self, poller: Poller, backend: Backend) {
        self.poller = poller;
        self.backend = backend;
        self.error_cell = self.detector_cell();
    }

    /// Resizes the CQ to hold at least `depth` completions (`ibv_resize_cq`); returns the
    /// depth it has after ([`Cq::depth`]). Nothing is lost: completions waiting in the CQ
    /// come out of later polls in order, before those that arrive after.
    ///
    /// - A model resizes as its vendor's provider and device do (model-mlx5: a RESIZE CQE in
    ///   the old ring, the poller switches rings there; model-e810: a new ring, the old
    ///   ring's completions returned first).
    /// - rdma-core's poll (the generic backend): `ibv_resize_cq`, rdma-core's own business.
    /// - rxe: `ibv_resize_cq`, then dvcq's reader follows the queue to its new mapping (see
    ///   the rxe backend); should that fail, rdma-core's poll takes over, and
    ///   [`Cq::backend`] says why.
    /// - A CQ dvcq polls directly on mlx5 or irdma is refused ([`Error::Unsupported`]): the
    ///   providers' resizes move the ring under the poller with rdma-core's own poll state.
    ///   mlx5's `mlx5_resize_cq` copies the CQEs waiting from rdma-core's consumer index,
    ///   which dvcq's poll never advances, and frees the ring dvcq reads; irdma's
    ///   `irdma_uresize_cq` leaves the old ring on a list that only rdma-core's poll drains.
    ///
    /// # Errors
    ///
    /// [`Error::CqDepth`] for 0 or more than the device allows; the device's refusal
    /// (a new size below the completions waiting, on rxe and model-mlx5); the refusal above.
    pub fn resize(&mut self, depth: u32) -> Result<u32, Error> {
        let device = self.device.clone();
        let got = match &mut self.poller {
            Poller::Model(m) => m.resize(depth).map_err(|e| match e {
                crate::model_device::DeviceError::TooLarge { what: "cqe", max, .. } => {
                    Error::CqDepth { device: device.clone(), asked: depth, max: u32::try_from(max).unwrap_or(u32::MAX) }
                }
                e => crate::context::model_error(&device, e),
            })?,
            Poller::Generic(g) => {
                let cq = g.verbs_cq();
                let max = cq.context().device_attr().map_or(i32::MAX, |a| a.max_cqe);
                if depth == 0 || i64::from(depth) > i64::from(max) {
                    return Err(Error::CqDepth { device, asked: depth, max: u32::try_from(max).unwrap_or(0) });
                }
                cq.resize(depth).map_err(|source| Error::Verbs { device, source })?
            }
            Poller::Rxe(r) => {
                let cq = std::sync::Arc::clone(r.verbs_cq());
                let max = cq.context().device_attr().map_or(i32::MAX, |a| a.max_cqe);
                if depth == 0 || i64::from(depth) > i64::from(max) {
                    return Err(Error::CqDepth { device, asked: depth, max: u32::try_from(max).unwrap_or(0) });
                }
                let (got, attached) = r.resize(&device, depth);
                match attached {
                    Ok(why) => self.backend.reason = why,
                    Err(why) => {
                        self.poller = Poller::Generic(crate::backend::generic::GenericCq::new(cq));
                        self.backend = Backend {
                            kind: BackendKind::Generic,
                            reason: format!(
                                "rdma-core's ibv_poll_cq: after ibv_resize_cq dvcq's rxe reader could not follow the \
                                 queue: {why}"
                            ),
                        };
                    }
                }
                got?
            }
            Poller::Mlx5(_) => {
                return Err(Error::Unsupported {
                    device,
                    what: "resize",
                    why: "dvcq polls this mlx5 CQ directly, and rdma-core's mlx5_resize_cq copies the waiting CQEs \
                          from its own consumer index, which dvcq's poll does not advance, then frees the ring dvcq \
                          reads: make a new CQ, or one polled by rdma-core (BackendChoice::Generic)"
                        .into(),
                });
            }
            Poller::Irdma(_) => {
                return Err(Error::Unsupported {
                    device,
                    what: "resize",
                    why: "dvcq polls this irdma CQ directly, and rdma-core's irdma_uresize_cq moves the device to a \
                          new ring while leaving the old one on a list only rdma-core's poll drains: make a new CQ"
                        .into(),
                });
            }
        };
        self.depth = got;
        Ok(got)
    }

    /// The backend polling this CQ, and why.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The device it was made on.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The depth the device gave (at least what was asked for).
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Counters since the CQ was made: the handle's own, counted on every poll call, and
    /// what the backend knows (see [`CqStats`] for which backend knows what).
    pub fn stats(&self) -> CqStats {
        self.stats.with(self.backend_counters())
    }

    /// How deep this CQ should be, from its statistics so far and, if known, the work
    /// requests that can be in flight on it (the sum of the depths of the send and receive
    /// queues completing here); see [`advise_depth`] for the rule.
    pub fn advice(&self, expected_in_flight: Option<u64>) -> DepthAdvice {
        self.stats().advice(self.depth, expected_in_flight)
    }

    fn backend_counters(&self) -> BackendCounters {
        match &self.poller {
            // On rdma-core devices an overrun is the CQ error event dvcq reads from the
            // context's async fd (`sys::async_event`), on contexts it opened.
            Poller::Generic(g) => BackendCounters {
                overruns: g.verbs_cq().overruns(),
                poll_failures: Some(g.failures()),
                ..BackendCounters::default()
            },
            Poller::Rxe(r) => BackendCounters {
                failures: Some({
                    let f = r.failures();
                    (f.errors, f.faults)
                }),
                high_water: Some(u64::from(r.high_water())),
                doorbell_writes: Some(r.consumer_writes()),
                overruns: r.verbs_cq().overruns(),
                ..BackendCounters::default()
            },
            Poller::Mlx5(m) => {
                let s = m.poller_stats();
                BackendCounters {
                    failures: Some((s.errors, s.faults)),
                    compression_sessions: Some(s.sessions),
                    doorbell_writes: Some(s.doorbell_writes),
                    overruns: m.verbs_cq().and_then(|v| v.overruns()),
                    ..BackendCounters::default()
                }
            }
            Poller::Irdma(m) => {
                let (s, head_writes) = m.poller_stats();
                BackendCounters {
                    failures: Some((s.errors, s.faults)),
                    doorbell_writes: Some(head_writes),
                    overruns: m.verbs_cq().and_then(|v| v.overruns()),
                    ..BackendCounters::default()
                }
            }
            Poller::Model(m) => {
                let s = m.stats();
                BackendCounters {
                    failures: Some((s.errors, s.faults)),
                    high_water: Some(s.high_water),
                    overruns: Some(u64::from(m.overrun().is_some())),
                    compression_sessions: s.mlx5.map(|x| x.sessions),
                    doorbell_writes: Some(s.doorbell_writes),
                    poll_failures: None,
                }
            }
        }
    }

    /// What went wrong with this CQ, first what happened once, then what lasts:
    ///
    /// 1. the error of the last poll call that failed inside the backend (rdma-core's
    ///    `ibv_poll_cq` returning an error: [`Error::Verbs`]), or a QP or SRQ dvcq made on a
    ///    direct mlx5 or irdma CQ that its poll could not adopt ([`Error::Attach`]); cleared
    ///    by reading it. Such a poll call returned the completions it had; none is lost.
    /// 2. otherwise the CQ's error ([`Cq::error`]) as known now: not cleared, since the CQ
    ///    stays in error, so every call answers it again.
    ///
    /// Unlike [`Cq::error`] it reads nothing from the device, so a loop may call it after
    /// every poll: the polls themselves read the device's events now and then (an empty
    /// poll in 4096), and a CQ error reaches the poll as its error item first.
    pub fn take_error(&mut self) -> Option<Error> {
        self.take_backend_error().or_else(|| self.known_error())
    }

    fn take_backend_error(&mut self) -> Option<Error> {
        match &mut self.poller {
            Poller::Generic(g) => {
                let e = g.take_error()?;
                Some(Error::Verbs { device: self.device.clone(), source: e })
            }
            // A QP or SRQ dvcq made on a direct mlx5 or irdma CQ that its poll could not
            // adopt.
            Poller::Mlx5(m) => {
                let reason = m.take_error()?;
                Some(Error::Attach { device: self.device.clone(), backend: "mlx5", reason })
            }
            Poller::Irdma(m) => {
                let reason = m.take_error()?;
                Some(Error::Attach { device: self.device.clone(), backend: "irdma", reason })
            }
            Poller::Rxe(_) => None,
            Poller::Model(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_mlx5_dv::MiniFormat;

    #[test]
    fn cq_formats_no_cq_can_have_are_refused_before_any_device_is_asked() {
        let ok = [
            CqOptions::new(8),
            CqOptions::new(8).cqe_size(128).padded(),
            CqOptions::new(8).compressed(MiniFormat::CsumStridx).ignoring_overrun(),
        ];
        for o in ok {
            assert_eq!(o.format_error(), None, "{o:?}");
        }
        let bad = [
            (CqOptions::new(8).cqe_size(32), "32-byte CQEs: mlx5 CQEs are 64 or 128 bytes"),
            (CqOptions::new(8).padded(), "padded CQEs need 128-byte CQEs"),
            (
                CqOptions::new(8).compressed(MiniFormat::FtagStridx),
                "mini-CQE format ftag_stridx: mlx5dv_create_cq takes hash, csum or csum_stridx (the others need DevX)",
            ),
            (
                CqOptions::new(8).compressed(MiniFormat::Hash).backend(BackendChoice::Generic),
                "a compressed CQ with BackendChoice::Generic: rdma-core's poll cannot read one",
            ),
        ];
        for (o, why) in bad {
            assert_eq!(o.format_error().as_deref(), Some(why), "{o:?}");
        }
        assert!(!CqOptions::new(8).has_mlx5_format());
        assert!(CqOptions::new(8).ignoring_overrun().has_mlx5_format());
    }

    /// The way a device's error reaches a busy poll, whoever detects it: the reader of the
    /// context's async events sets the CQ's error cell (here by hand, as no device is
    /// present), and the next poll that finds the ring empty returns the item with that
    /// reason, once; `error` and `take_error` then keep answering it.
    #[test]
    fn an_error_set_in_the_cell_by_an_event_reader_reaches_the_next_empty_poll() {
        let ctx = crate::Context::open("model-e810").unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(8)).unwrap();
        let cell = Arc::new(CqErrorCell::new());
        cq.error_cell = Arc::clone(&cell);
        let mut out = [Completion::default(); 4];
        assert_eq!((cq.poll_count(&mut out), cq.error(), cq.take_error()), (0, None, None));
        cell.set(CqErrorReason::DeviceFatal);
        assert_eq!(cq.poll_count(&mut out), 1);
        assert_eq!((out[0].cq_error(), out[0].wr_id), (Some(CqErrorReason::DeviceFatal), 0));
        assert_eq!(cq.poll_count(&mut out), 0, "the item comes once");
        let e = Error::CqInError { device: "model-e810".into(), cq: cq.id(), reason: CqErrorReason::DeviceFatal };
        assert_eq!((cq.error(), cq.take_error(), cq.take_error()), (Some(e.clone()), Some(e.clone()), Some(e)));
        let s = cq.stats();
        assert_eq!((s.completions, s.faults, s.errors, s.empty_polls), (1, 1, 1, 2));
    }

    /// model-mlx5 makes the CQs `mlx5dv_create_cq` makes (128-byte, padded, compressed) from
    /// the same options, and refuses what it does not model; model-e810 has no mlx5
    /// attributes at all.
    #[test]
    fn models_take_the_mlx5_creation_attributes_they_model() {
        let ctx = crate::Context::open("model-mlx5").unwrap();
        for o in [
            CqOptions::new(8).cqe_size(128),
            CqOptions::new(8).cqe_size(128).padded(),
            CqOptions::new(8).compressed(MiniFormat::Csum),
        ] {
            assert!(ctx.create_cq(o).is_ok(), "{o:?}");
        }
        let e = ctx.create_cq(CqOptions::new(8).ignoring_overrun()).unwrap_err();
        assert!(matches!(e, Error::Unsupported { what: "cq format", .. }), "{e}");
        let e = ctx.create_cq(CqOptions::new(8).cqe_size(32)).unwrap_err();
        assert!(e.to_string().contains("64 or 128"), "{e}");
        let e810 = crate::Context::open("model-e810").unwrap();
        let e = e810.create_cq(CqOptions::new(8).cqe_size(128)).unwrap_err();
        assert!(e.to_string().contains("mlx5 creation attributes"), "{e}");
        assert!(e810.create_cq(CqOptions::new(8)).is_ok());
    }
}
