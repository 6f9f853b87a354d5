//! Poll cost as a CQ's QPs and a thread's CQs grow (`dvcq bench scale`).
//!
//! A *point* is a set of model rings polled by one thread. On the QP axis it is one ring
//! whose lap of CQEs belongs to N QPs, each its share, in a shuffled order (as `bench poll
//! --mix many-qps` scrambles 16), so that the poller's QP lookup runs with a working set
//! that grows with N. On the CQ axis it is M rings, one QP each, sharing the lap's completions, drained
//! round-robin one batch per CQ at a time until a round finds them all empty. Laps are
//! written by the models' CQE builders (not timed) and drained by dvcq's pollers (timed),
//! as [`super::run`] does for `bench poll`.

use dvcq_e810_dv::model::{IrdmaModel, ModelConfig as IrdmaConfig, ModelCqe};
use dvcq_e810_dv::{Compat, IrdmaCq, QpConfig as IrdmaQp, QpRegistry};
use dvcq_mlx5_dv::model::build::{self, Entry};
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig};
use dvcq_mlx5_dv::{CqConfig, Mlx5Cq, QpConfig, Registry};
use dvcq_provider::Completion;
use dvcq_uapi::irdma::codes::{rq_op, sq_op};
use dvcq_uapi::irdma::HwRev;
use dvcq_uapi::mlx5::opcode::{cqe_opcode, wqe_opcode};
use serde::Serialize;
use std::time::Instant;

/// The QP counts of the default QP axis.
pub const DEFAULT_QPS: [u32; 5] = [1, 16, 256, 1024, 4096];
/// The CQ counts of the default CQ axis.
pub const DEFAULT_CQS: [u32; 5] = [1, 4, 16, 64, 256];
/// The most QPs one CQ is given here (each lap gives every QP a completion, so the ring
/// grows with the QPs past `--entries`; this keeps it at most 65536 CQEs).
pub const MAX_QPS: u32 = 1 << 16;
/// The most CQs one thread polls here: each needs a ring of at least 4 slots out of the lap.
pub const MAX_CQS: u32 = 1024;
/// Send and receive queue depth of every QP (its tracking tables' size).
pub const WQ_DEPTH: u32 = 256;
/// Bytes of an mlx5 CQE in these rings.
const MLX5_CQE: usize = 64;
/// Bytes of an irdma (GEN2) CQE.
const IRDMA_CQE: usize = 32;

/// Which model ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum Device {
    /// The ConnectX model: 64-byte CQEs, QPs found by QPN.
    #[value(name = "model-mlx5")]
    #[serde(rename = "model-mlx5")]
    Mlx5,
    /// The E810 (GEN2) model: 32-byte CQEs, QPs found by completion context.
    #[value(name = "model-e810")]
    #[serde(rename = "model-e810")]
    E810,
}

impl Device {
    /// The model's device name (`model-mlx5`, `model-e810`).
    pub fn name(self) -> &'static str {
        match self {
            Device::Mlx5 => "model-mlx5",
            Device::E810 => "model-e810",
        }
    }

    /// The model named `name`, if it is one.
    pub fn of_name(name: &str) -> Option<Device> {
        [Device::Mlx5, Device::E810].into_iter().find(|d| d.name() == name)
    }

    /// The name the table's banner shows.
    pub fn describe(self) -> &'static str {
        match self {
            Device::Mlx5 => "mlx5 model, 64-byte CQEs",
            Device::E810 => "irdma model (GEN2), 32-byte CQEs",
        }
    }
}

/// What grows along a row's axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// QPs sharing one CQ.
    Qps,
    /// CQs polled by one thread (one QP each).
    Cqs,
}

impl Axis {
    /// The table's word for it.
    pub fn word(self) -> &'static str {
        match self {
            Axis::Qps => "qps",
            Axis::Cqs => "cqs",
        }
    }
}

/// The QPN (mlx5) of the point's QP `k`: as the many-QPs mix of `bench poll` numbers
/// them, 3 apart, so they are distinct in the low 12 bits up to 4096 QPs.
fn mlx5_qpn(k: u32) -> u32 {
    if k == 0 {
        0x1c7
    } else {
        0x2e8 + 3 * k
    }
}

/// The completion context and QP number (irdma) of QP `k`: contexts 64 bytes apart, as
/// pointers to rdma-core QP structures of one allocation size are.
fn irdma_qp(k: u32) -> (u64, u32) {
    (0x7f00_dead_0040 + u64::from(k) * 0x40, 0x2a + k)
}

/// The QP (0 to `qps - 1`) of each of `n` positions: each QP its share (`n / qps`, the first
/// `n % qps` one more), in a fixed shuffle (Fisher-Yates with a fixed xorshift generator:
/// the same order every run), so few consecutive positions share a QP. `bench drain -q`
/// spreads a fill with it too.
pub(crate) fn shuffled_shares(n: u32, qps: u32) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n).map(|i| i % qps.max(1)).collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

/// A lap of `n` CQEs on `qps` QPs: `(QP index, send, the QP's count of that kind so far)`
/// per position. Each QP takes its share (`n / qps`, the first `n % qps` one more), so a
/// lap of at least `qps` CQEs touches every QP; the order is a fixed shuffle, so few CQEs
/// in a row share a QP, as on a CQ shared by many connections. Sends and receives take
/// turns by position (even positions sends), so the mix stays half and half even when a
/// QP has one CQE a lap.
fn lap_order(n: u32, qps: u32) -> Vec<(u32, bool, u32)> {
    let order = shuffled_shares(n, qps);
    // Per QP: (sends, receives) so far.
    let mut seen = vec![(0u32, 0u32); qps as usize];
    order
        .into_iter()
        .enumerate()
        .map(|(i, k)| {
            let send = i % 2 == 0;
            let c = seen.get_mut(k as usize).map_or(0, |(s, r)| {
                let c = if send { s } else { r };
                *c += 1;
                *c - 1
            });
            (k, send, c)
        })
        .collect()
}

/// One model ring and its poller, with its lap precomputed.
#[derive(Debug)]
pub enum Ring {
    /// mlx5: the model, the poller, the lap.
    Mlx5(Box<Mlx5Model>, Box<Mlx5Cq<MLX5_CQE>>, Vec<Entry>),
    /// irdma: the model, the poller, the lap.
    Irdma(Box<IrdmaModel>, Box<IrdmaCq>, Vec<ModelCqe>),
}

impl Ring {
    /// A ring holding a lap of `lap` CQEs on QPs `first..first + qps`.
    fn new(device: Device, lap: u32, first: u32, qps: u32) -> Result<Ring, String> {
        let order = lap_order(lap, qps);
        let e = |e: &dyn std::fmt::Display| e.to_string();
        match device {
            Device::Mlx5 => {
                let mut mc = ModelConfig::new(lap.next_power_of_two().max(2));
                mc.cqe_size = MLX5_CQE as u32;
                // The prepare-only baseline writes laps it never polls.
                mc.overrun_ignore = true;
                let model = Mlx5Model::new(mc).map_err(|x| e(&x))?;
                let mut reg = Registry::new();
                for k in first..first + qps {
                    reg.add_qp(QpConfig::rc(mlx5_qpn(k), WQ_DEPTH, WQ_DEPTH)).map_err(|x| e(&x))?;
                }
                let cq = model.poller::<MLX5_CQE>(reg, CqConfig::default()).map_err(|x| e(&x))?;
                let lap = order
                    .iter()
                    .map(|&(k, send, c)| {
                        let (qpn, ctr) = (mlx5_qpn(first + k), c as u16);
                        if send {
                            build::req(qpn, ctr, wqe_opcode::SEND, 0)
                        } else {
                            build::resp(cqe_opcode::RESP_SEND, qpn, ctr, 64, 0)
                        }
                    })
                    .collect();
                Ok(Ring::Mlx5(Box::new(model), Box::new(cq), lap))
            }
            Device::E810 => {
                // rdma-core's E810 ring sizes: `cqe + 1`, even, at least 4; the model keeps
                // one slot free, so a lap of `lap` CQEs fills a ring of `lap + 1`.
                let slots = (lap + 1).max(4).next_multiple_of(2);
                let model = IrdmaModel::new(IrdmaConfig::new(HwRev::Gen2, slots)).map_err(|x| e(&x))?;
                let mut reg = QpRegistry::new(HwRev::Gen2);
                for k in first..first + qps {
                    let (ctx, qpn) = irdma_qp(k);
                    let id = reg.register(ctx, IrdmaQp::rc(qpn, WQ_DEPTH, WQ_DEPTH)).map_err(|x| e(&x))?;
                    reg.preset_identity(id).map_err(|x| e(&x))?;
                }
                let cq = model.poller(reg, Compat::Current).map_err(|x| e(&x))?;
                let lap = order
                    .iter()
                    .map(|&(k, send, c)| {
                        let (ctx, qpn) = irdma_qp(first + k);
                        let w = (c % WQ_DEPTH) as u16;
                        if send {
                            ModelCqe::send(ctx, qpn, w, sq_op::SEND)
                        } else {
                            ModelCqe::recv(ctx, qpn, w, 0, rq_op::ROCE_SEND_ONLY, 64)
                        }
                    })
                    .collect();
                Ok(Ring::Irdma(Box::new(model), Box::new(cq), lap))
            }
        }
    }

    /// CQEs per lap.
    pub fn lap_len(&self) -> usize {
        match self {
            Ring::Mlx5(_, _, lap) => lap.len(),
            Ring::Irdma(_, _, lap) => lap.len(),
        }
    }

    /// Writes the lap through the model.
    fn fill(&mut self) {
        match self {
            Ring::Mlx5(model, _, lap) => {
                for e in lap.iter() {
                    // overrun-ignore: the model never refuses.
                    let _ = model.push(e);
                }
            }
            Ring::Irdma(model, _, lap) => {
                // The previous lap was drained or discarded: it fits.
                let _ = model.push_all(lap.iter());
            }
        }
    }

    /// Frees the lap's slots without polling them (the prepare-only baseline).
    fn discard(&mut self) {
        if let Ring::Irdma(model, _, _) = self {
            model.release_all();
        }
    }

    /// One poll call into `out`.
    #[inline(always)]
    fn poll(&mut self, out: &mut [Completion]) -> usize {
        match self {
            Ring::Mlx5(_, cq, _) => cq.poll(out),
            Ring::Irdma(_, cq, _) => cq.poll(out),
        }
    }

    /// Bytes of the ring buffer.
    pub fn ring_bytes(&self) -> usize {
        match self {
            Ring::Mlx5(model, _, _) => model.config().entries as usize * MLX5_CQE,
            Ring::Irdma(model, _, _) => model.config().entries as usize * IRDMA_CQE,
        }
    }

    /// Bytes of the poller's QP table, its tracking tables and lookup.
    pub fn registry_bytes(&self) -> usize {
        match self {
            Ring::Mlx5(_, cq, _) => cq.registry().qp_table_bytes(),
            Ring::Irdma(_, cq, _) => cq.qps().qp_table_bytes(),
        }
    }

    /// Bytes of the poller itself.
    fn poller_bytes(&self) -> usize {
        match self {
            Ring::Mlx5(..) => core::mem::size_of::<Mlx5Cq<MLX5_CQE>>(),
            Ring::Irdma(..) => core::mem::size_of::<IrdmaCq>(),
        }
    }
}

/// One point of an axis: its rings and the poll batch.
#[derive(Debug)]
pub struct Point {
    /// The rings, polled round-robin.
    pub rings: Vec<Ring>,
    out: Vec<Completion>,
    axis: Axis,
    count: u32,
    device: Device,
}

/// Refuses a QP or CQ count this benchmark cannot give a meaning to.
///
/// # Errors
///
/// A message naming the option and the range.
pub fn check_count(axis: Axis, n: u32) -> Result<(), String> {
    match axis {
        Axis::Qps if !(1..=MAX_QPS).contains(&n) => {
            Err(format!("--qps {n}: a CQ is shared by 1 to {MAX_QPS} QPs here"))
        }
        Axis::Cqs if !(1..=MAX_CQS).contains(&n) => Err(format!("--cqs {n}: one thread polls 1 to {MAX_CQS} CQs here")),
        _ => Ok(()),
    }
}

impl Point {
    /// The point `count` on `axis`: on the QP axis one ring of `entries` CQEs a lap (irdma:
    /// one fewer, the slot it keeps free; at least one CQE a QP, mlx5 rounding up to a
    /// power of two) on `count` QPs; on the CQ axis `count` rings of
    /// one QP each sharing the same number of CQEs (at least 4 each).
    ///
    /// # Errors
    ///
    /// A count out of range, or a model or poller that cannot be set up.
    pub fn new(device: Device, axis: Axis, count: u32, entries: u32, batch: usize) -> Result<Point, String> {
        check_count(axis, count)?;
        let lap = |n: u32| if device == Device::E810 { n - 1 } else { n };
        let rings = match axis {
            // A ring of at least one CQE a QP, so that every lap touches every QP.
            Axis::Qps => {
                let n = match device {
                    Device::Mlx5 => entries.max(count.next_power_of_two()),
                    Device::E810 => lap(entries).max(count),
                };
                vec![Ring::new(device, n, 0, count)?]
            }
            Axis::Cqs => {
                let share = (entries / count).max(4).next_power_of_two();
                (0..count).map(|c| Ring::new(device, lap(share), c, 1)).collect::<Result<_, _>>()?
            }
        };
        Ok(Point { rings, out: vec![Completion::default(); batch.max(1)], axis, count, device })
    }

    /// CQEs per lap, all rings together.
    pub fn lap_len(&self) -> usize {
        self.rings.iter().map(Ring::lap_len).sum()
    }

    /// Writes a lap into every ring.
    pub fn fill(&mut self) {
        for r in &mut self.rings {
            r.fill();
        }
    }

    /// Frees every ring's lap without polling (the prepare-only baseline).
    pub fn discard(&mut self) {
        for r in &mut self.rings {
            r.discard();
        }
    }

    /// Drains every ring round-robin, one poll call of the batch per ring in turn, until a
    /// round finds all empty; hands each completion to `seen`; returns completions polled.
    #[inline(always)]
    pub fn drain_with(&mut self, mut seen: impl FnMut(&Completion)) -> usize {
        let mut total = 0;
        loop {
            let mut round = 0;
            for r in &mut self.rings {
                let n = r.poll(&mut self.out);
                for c in self.out.get(..n).unwrap_or_default() {
                    seen(c);
                }
                round += n;
            }
            if round == 0 {
                return total;
            }
            total += round;
        }
    }

    /// [`Point::drain_with`] seeing nothing: the timed drain.
    #[inline(never)]
    pub fn drain(&mut self) -> usize {
        self.drain_with(|_| {})
    }

    /// What the point's QPs and CQs take in memory.
    pub fn memory(&self) -> Memory {
        let empty = match self.device {
            Device::Mlx5 => Registry::new().qp_table_bytes(),
            Device::E810 => QpRegistry::new(HwRev::Gen2).qp_table_bytes(),
        };
        let qps: usize = match self.axis {
            Axis::Qps => self.count as usize,
            Axis::Cqs => self.rings.len(),
        };
        let registries: usize = self.rings.iter().map(Ring::registry_bytes).sum();
        let per_cq_fixed: usize =
            self.rings.iter().map(|r| r.ring_bytes() + r.poller_bytes() + empty).sum::<usize>() / self.rings.len();
        let per_qp = registries.saturating_sub(empty * self.rings.len()) / qps.max(1);
        Memory { per_qp, per_cq: per_cq_fixed }
    }
}

/// Memory of a point, in bytes.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Memory {
    /// Per QP: its share of the registry beyond an empty one (its entry in the QP table at
    /// the table's capacity, its send and receive tracking tables, its lookup entries).
    pub per_qp: usize,
    /// Per CQ: its ring buffer, the poller structure, and an empty registry (the fixed
    /// lookup tables).
    pub per_cq: usize,
}

/// Benchmark parameters.
#[derive(Debug, Clone, Copy)]
pub struct ScaleParams {
    /// Laps per repetition.
    pub laps: u32,
    /// Repetitions (the median is reported).
    pub reps: u32,
    /// Only prepare laps, never poll (the callgrind baseline).
    pub prepare_only: bool,
}

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRow {
    /// The model (`model-mlx5`, `model-e810`) or the device (`mlx5_0`, ...).
    pub device: String,
    /// What grows.
    pub axis: Axis,
    /// QPs (on the QP axis) or CQs (on the CQ axis).
    pub count: u32,
    /// Completions polled per repetition.
    pub completions: u64,
    /// Median over repetitions of ns per completion.
    pub ns_median: f64,
    /// Fastest repetition, ns per completion.
    pub ns_min: f64,
    /// Instructions per completion under callgrind, if measured.
    pub instr: Option<f64>,
    /// `ns_median` over the first point of the same axis.
    pub ratio: f64,
    /// Memory per QP and per CQ of dvcq's poller on a model ring (`None` on a device:
    /// its rings are the provider's).
    pub memory: Option<Memory>,
    /// rdma-core's `ibv_poll_cq` in the same harness, ns per completion: on a device
    /// ([`device_row`]); `None` on the models, which have no rdma-core poll.
    pub rdma_core_ns: Option<f64>,
}

/// Times `p` (ratio 1, no instructions: the caller fills those in).
///
/// # Errors
///
/// A lap that did not poll to the completions written.
pub fn run(point: &mut Point, p: &ScaleParams) -> Result<ScaleRow, String> {
    let mut per_rep = Vec::with_capacity(p.reps.max(1) as usize);
    let mut completions = 0u64;
    let lap = point.lap_len();
    for _ in 0..p.reps.max(1) {
        let (mut ns, mut got) = (0u128, 0u64);
        for _ in 0..p.laps.max(1) {
            point.fill();
            if p.prepare_only {
                point.discard();
                got += lap as u64;
                continue;
            }
            let t = Instant::now();
            let n = point.drain();
            ns += t.elapsed().as_nanos();
            if n != lap {
                return Err(format!(
                    "{} {}: a lap of {lap} CQEs polled to {n} completions",
                    point.count,
                    point.axis.word()
                ));
            }
            got += n as u64;
        }
        completions = got;
        per_rep.push(ns as f64 / got.max(1) as f64);
    }
    per_rep.sort_by(f64::total_cmp);
    Ok(ScaleRow {
        device: point.device.name().to_string(),
        axis: point.axis,
        count: point.count,
        completions,
        ns_median: per_rep[per_rep.len() / 2],
        ns_min: per_rep[0],
        instr: None,
        ratio: 1.0,
        memory: Some(point.memory()),
        rdma_core_ns: None,
    })
}

/// A QP-axis point on a device: `bench drain` with the fill spread over `qps` QPs sharing
/// the CQ, drained by dvcq's direct backend and by rdma-core's `ibv_poll_cq` (the same
/// fills, repetitions interleaved), so both polls meet the same QP working set.
///
/// # Errors
///
/// The drain failed (a CQ or QP could not be made, a fill did not complete), or the device
/// has no `ibv_poll_cq` row (a model).
pub fn device_row(
    ctx: &crate::Context,
    qps: u32,
    completions: u32,
    batch: usize,
    reps: u32,
) -> Result<ScaleRow, String> {
    let p = super::drain::DrainParams { completions, batch, reps, qps };
    let rows = super::drain::run(ctx, &p).map_err(|e| format!("{} QPs: {e}", qps))?;
    let get = |name: &str| rows.iter().find(|r| r.poller == name);
    let (Some(direct), Some(verbs)) = (get("direct"), get("ibv_poll_cq")) else {
        return Err(format!("{}: no ibv_poll_cq to compare with (a model: use --device model-mlx5)", ctx.name()));
    };
    Ok(ScaleRow {
        device: ctx.name().to_string(),
        axis: Axis::Qps,
        count: qps,
        completions: u64::from(completions) * u64::from(reps),
        ns_median: direct.ns_per_completion,
        ns_min: direct.ns_per_completion_min,
        instr: None,
        ratio: 1.0,
        memory: None,
        rdma_core_ns: Some(verbs.ns_per_completion),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_provider::{WcOpcode, WcStatus};
    use std::collections::HashMap;

    /// Every point polls to the completions it claims: a lap of successful sends and
    /// receives taking turns, half and half, on exactly the QPs (and CQs) the point names, no
    /// fault items; and the prepare-only baseline leaves the rings able to take the next lap.
    #[test]
    fn every_point_polls_to_the_completions_it_claims() {
        for device in [Device::Mlx5, Device::E810] {
            for (axis, count) in [(Axis::Qps, 1), (Axis::Qps, 16), (Axis::Qps, 300), (Axis::Cqs, 1), (Axis::Cqs, 16)] {
                let mut p = Point::new(device, axis, count, 512, 16).unwrap();
                let what = format!("{device:?} {count} {axis:?}");
                assert_eq!(p.rings.len(), if axis == Axis::Cqs { count as usize } else { 1 }, "{what}");
                let lap = p.lap_len();
                assert_eq!(lap, if device == Device::E810 { 512 - p.rings.len() } else { 512 }, "{what}");
                for round in 0..3 {
                    p.fill();
                    let mut per_qp: HashMap<u32, u32> = HashMap::new();
                    let (mut bad, mut sends, mut i) = (Vec::new(), 0, 0);
                    let n = p.drain_with(|c| {
                        *per_qp.entry(c.qp_num).or_insert(0) += 1;
                        // One ring: its lap's order, sends at even positions.
                        let want = match (axis, i % 2) {
                            (Axis::Cqs, _) => c.opcode,
                            (Axis::Qps, 0) => WcOpcode::Send,
                            _ => WcOpcode::Recv,
                        };
                        let kind = matches!(c.opcode, WcOpcode::Send | WcOpcode::Recv);
                        sends += usize::from(c.opcode == WcOpcode::Send);
                        if c.fault().is_some() || c.status != WcStatus::Success || !kind || c.opcode != want {
                            bad.push(*c);
                        }
                        i += 1;
                    });
                    assert_eq!(n, lap, "{what}, round {round}");
                    assert!(bad.is_empty(), "{what}, round {round}: {} wrong, the first {:?}", bad.len(), bad.first());
                    // Half sends: each ring's even positions (a ring of an odd lap has one more).
                    let odd = p.rings.iter().filter(|r| r.lap_len() % 2 == 1).count();
                    assert!((lap / 2..=lap / 2 + odd).contains(&sends), "{what}: {sends} sends of {lap}");
                    let qps = if axis == Axis::Qps { count } else { 1 };
                    assert_eq!(per_qp.len(), qps.max(p.rings.len() as u32) as usize, "{what}");
                    assert_eq!(per_qp.values().sum::<u32>() as usize, lap, "{what}");
                    p.fill();
                    p.discard();
                    // mlx5's overrun-ignore ring takes the next lap over the discarded one:
                    // drain what it holds so the next round starts empty.
                    p.drain();
                }
                let r = run(&mut p, &ScaleParams { laps: 2, reps: 3, prepare_only: false }).unwrap();
                assert_eq!(r.completions, 2 * lap as u64, "{what}");
                assert!(r.ns_min <= r.ns_median && r.ns_median > 0.0, "{what}: {r:?}");
            }
        }
    }

    /// Memory per QP counts each QP's tracking tables (at least 8 bytes a WQE each way)
    /// beside its lookup; per CQ at least the ring.
    #[test]
    fn memory_counts_the_tables_and_the_ring() {
        for device in [Device::Mlx5, Device::E810] {
            let p = Point::new(device, Axis::Qps, 64, 256, 16).unwrap();
            let m = p.memory();
            let tables = 2 * WQ_DEPTH as usize * 8;
            assert!((tables..tables * 4).contains(&m.per_qp), "{device:?}: {m:?}");
            let cqe = if device == Device::Mlx5 { 64 } else { 32 };
            assert!(m.per_cq >= 256 * cqe, "{device:?}: {m:?}");
        }
    }

    #[test]
    fn counts_out_of_range_are_refused_with_the_range() {
        assert_eq!(check_count(Axis::Qps, 0).unwrap_err(), "--qps 0: a CQ is shared by 1 to 65536 QPs here");
        assert!(check_count(Axis::Qps, 100_000).is_err());
        assert!(check_count(Axis::Qps, MAX_QPS).is_ok());
        assert_eq!(check_count(Axis::Cqs, 2000).unwrap_err(), "--cqs 2000: one thread polls 1 to 1024 CQs here");
    }
}
