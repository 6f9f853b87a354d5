//! CQE compression (the basic and enhanced layouts of the kernel's mlx5e, DPDK and UCX): the
//! model forms mini-CQE sessions in the basic and enhanced layouts with every mini format,
//! and the poller must return exactly the completions the same stream gives uncompressed,
//! over many laps, across poll batches and the ring end, mixed with errors, SIG_ERR and
//! RESIZE; garbage gives fault items.

use dvcq_mlx5_dv::model::build::{self, Entry, ErrSpec, RecvAddr};
use dvcq_mlx5_dv::model::compress::{self, Compression, Policy};
use dvcq_mlx5_dv::model::{Mlx5Model, ModelConfig};
use dvcq_mlx5_dv::{
    CompLayout, CompressionConfig, CqConfig, CqStats, CqeVersion, MiniFormat, Mlx5Cq, QpConfig, Registry,
};
use dvcq_provider::testing::threaded::ProducerWatch;
use dvcq_provider::{Completion, FaultKind, WcFlags, WcOpcode, WcStatus};
use dvcq_uapi::mlx5::cqe::{op_own, Cqe64};
use dvcq_uapi::mlx5::opcode::{cqe_format, cqe_opcode, syndrome, wqe_opcode};
use dvcq_uapi::{Be16, Be32};
use proptest::prelude::*;

/// RC QP, receives on its own RQ.
const QP_RC: u32 = 0x100;
/// Raw Ethernet QP with RX checksum: completions carry hash, checksum and header bytes.
const QP_ETH: u32 = 0x200;
/// QP on the SRQ.
const QP_SRQ: u32 = 0x300;
const SRQN: u32 = 0x55;

fn registry() -> Registry {
    let mut r = Registry::new();
    r.add_srq(SRQN, 1 << 16).unwrap();
    r.add_qp(QpConfig::rc(QP_RC, 256, 256)).unwrap();
    r.add_qp(QpConfig { rx_csum: true, ..QpConfig::rc(QP_ETH, 64, 256) }).unwrap();
    r.add_qp(QpConfig { srqn: Some(SRQN), ..QpConfig::rc(QP_SRQ, 64, 64) }).unwrap();
    // The signature mkey the streams' SIG_ERR CQEs name (index 0): recorded, no item.
    r.add_sig_mkey(0).unwrap();
    r
}

/// splitmix64, for deterministic streams.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Per-QP WQE counters, continued across runs.
#[derive(Default)]
struct Counters {
    rc_rq: u16,
    eth_rq: u16,
    srq: u16,
    sq: u16,
}

/// One run of completions of one kind: within a run only what a mini-CQE of `format`
/// carries varies, so the model may compress it; runs differ in kind and timestamp.
fn run(kind: u8, len: u32, seed: u64, format: MiniFormat, ctr: &mut Counters) -> Vec<Entry> {
    let mut rng = Rng(seed);
    let ts = rng.next();
    let imm = rng.next() as u32;
    let mut v = Vec::new();
    match kind % 8 {
        // Receives on the RC QP, with or without immediate data, with the address fields
        // a UD receive has (the title carries them for the whole session).
        0 | 1 => {
            let op = if kind % 8 == 0 { cqe_opcode::RESP_SEND } else { cqe_opcode::RESP_SEND_IMM };
            let addr = RecvAddr {
                src_qp: rng.next() as u32 & 0xff_ffff,
                slid: rng.next() as u16,
                sl: rng.below(16) as u8,
                path_bits: rng.below(128) as u8,
                grh: rng.below(2) == 0,
            };
            // Checksum-OK header bits too, which only a QP with the RX checksum capability
            // reports (the hash is the run's own, whatever the mini-CQE format).
            let hash = rng.next() as u32;
            for _ in 0..len {
                v.push(
                    build::resp(op, QP_RC, ctr.rc_rq, rng.below(9000) as u32, imm)
                        .recv_addr(addr)
                        .offloads(0x07, 0x28, 0x1234, hash)
                        .timestamp(ts),
                );
                ctr.rc_rq = ctr.rc_rq.wrapping_add(1);
            }
        }
        // Ethernet receives: the field the format carries varies per completion.
        2 | 3 => {
            let (mut hds, mut hdr, mut csum, mut hash) = (0x07, 0x28u8, 0x1234u16, 0xabcd_0000u32);
            for _ in 0..len {
                match format {
                    MiniFormat::Hash => hash = rng.next() as u32,
                    MiniFormat::Csum | MiniFormat::CsumStridx => csum = rng.next() as u16,
                    MiniFormat::L34hStridx => hdr = rng.next() as u8,
                    MiniFormat::FtagStridx => {}
                }
                if rng.below(16) == 0 {
                    // A header flag no mini-CQE carries: ends any session.
                    hds ^= 0x04;
                }
                let bytes = rng.below(1 << 14) as u32;
                v.push(
                    build::resp(cqe_opcode::RESP_SEND, QP_ETH, ctr.eth_rq, bytes, 0)
                        .offloads(hds, hdr, csum, hash)
                        .timestamp(ts),
                );
                ctr.eth_rq = ctr.eth_rq.wrapping_add(1);
            }
        }
        // Receives on the SRQ (wr_id indexed by the WQE counter), with immediate data or
        // an invalidated rkey in some runs.
        4 => {
            let op =
                [cqe_opcode::RESP_SEND, cqe_opcode::RESP_SEND_IMM, cqe_opcode::RESP_SEND_INV][rng.below(3) as usize];
            for _ in 0..len {
                v.push(build::resp(op, QP_SRQ, ctr.srq, rng.below(4096) as u32, imm).srqn_uidx(SRQN).timestamp(ts));
                ctr.srq = ctr.srq.wrapping_add(1);
            }
        }
        // Sends: requester minis carry the WQE counter and opcode.
        5 | 6 => {
            for _ in 0..len {
                let op = [
                    wqe_opcode::SEND,
                    wqe_opcode::RDMA_WRITE,
                    wqe_opcode::RDMA_READ,
                    wqe_opcode::ATOMIC_FA,
                    wqe_opcode::SEND_IMM,
                ][rng.below(5) as usize];
                ctr.sq = ctr.sq.wrapping_add(1 + rng.below(3) as u16);
                // Byte counts past 24 bits: a requester mini-CQE's count is 32 bits in
                // every format (the flow-tag format's 24-bit count is the responder's).
                v.push(build::req(QP_RC, ctr.sq, op, rng.below(1 << 26) as u32).timestamp(ts));
            }
        }
        // An error (always a regular CQE, ending any session), or a swallowed SIG_ERR.
        _ => {
            if rng.below(4) == 0 {
                v.push(build::sig_err(0x77));
            } else {
                let requester = rng.below(2) == 0;
                let (qpn, wqe_counter) = if requester { (QP_RC, ctr.sq) } else { (QP_RC, ctr.rc_rq) };
                if !requester {
                    ctr.rc_rq = ctr.rc_rq.wrapping_add(1);
                }
                v.push(build::err(ErrSpec {
                    requester,
                    qpn,
                    wqe_counter,
                    syndrome: syndrome::WR_FLUSH_ERR,
                    vendor_err_synd: 0xf9,
                    ..ErrSpec::default()
                }));
            }
        }
    }
    v
}

/// `entries` as version 1 CQEs: `srqn_uidx` holds the QP's user index (its registry slot,
/// in the order [`registry`] adds them) instead of an SRQ number.
fn as_version_1(entries: &[Entry]) -> Vec<Entry> {
    let uidx = |qpn: u32| [QP_RC, QP_ETH, QP_SRQ].iter().position(|&q| q == qpn).map_or(0x00ff_ffff, |i| i as u32);
    entries.iter().map(|e| e.srqn_uidx(uidx(e.cqe.sop_drop_qpn.get() & 0x00ff_ffff))).collect()
}

fn stream(runs: &[(u8, u32, u64)], format: MiniFormat) -> Vec<Entry> {
    let mut ctr = Counters::default();
    runs.iter().flat_map(|&(k, len, seed)| run(k, len, seed, format, &mut ctr)).collect()
}

fn model<const S: usize>(entries: u32, comp: Option<Compression>, start: u32) -> Mlx5Model {
    let mut mc = ModelConfig::new(entries);
    mc.cqe_size = S as u32;
    mc.compression = comp;
    let mut m = Mlx5Model::new(mc).unwrap();
    m.start_at(start).unwrap();
    m
}

/// What every poll buffer slot holds before the poll: a poll writes only the fields defined
/// for the completion it returns, so the compressed and uncompressed paths must leave
/// exactly the same fields of this pattern untouched.
const PATTERN: Completion = Completion {
    wr_id: 0xdead_0000_beef,
    byte_len: 0xbeef,
    imm_data: 0x0123_4567,
    qp_num: 0x777,
    wc_flags: WcFlags::TM_MATCH,
    status: WcStatus::RemAbortErr,
    opcode: WcOpcode::Driver3,
    fault_kind: FaultKind::None,
    sl: 9,
    wqe_index: 0x5555,
    pkey_index: 0x6666,
    src_qp: 0x888,
    vendor_err: 0x99,
    slid: 0xaaa,
    dlid_path_bits: 0x7b,
    hdr_ok: 0xcc,
    hdr_type: 0xdd,
    checksum: 0xeeee,
    timestamp: 0x1111,
    flow_tag_hash: 0x2222,
};

/// Polls one batch of up to `b` into slots holding [`PATTERN`] (so batch boundaries cannot
/// show in the result, and undefined fields are compared too).
fn poll_batch<const S: usize>(cq: &mut Mlx5Cq<S>, b: usize, out: &mut Vec<Completion>) -> usize {
    let mut buf = [PATTERN; 32];
    let n = cq.poll(&mut buf[..b.clamp(1, 32)]);
    out.extend_from_slice(&buf[..n]);
    n
}

/// [`poll_batch`], checking first that `peek` shows the item the call then returns first
/// (by the fields every kind of item defines, and the byte count where it has one).
fn poll_batch_peeking<const S: usize>(cq: &mut Mlx5Cq<S>, b: usize, out: &mut Vec<Completion>) -> usize {
    let id = |c: &Completion| (c.wr_id, c.status, c.qp_num, c.fault());
    let peeked = cq.peek();
    let before = out.len();
    let n = poll_batch(cq, b, out);
    let polled = out.get(before);
    assert_eq!(peeked.map(|c| id(&c)), polled.map(id), "peek before item {before}");
    // A byte count the poll wrote (not the pattern's), peek shows too.
    if let (Some(p), Some(c)) = (peeked, polled) {
        if c.byte_len != PATTERN.byte_len {
            assert_eq!(p.byte_len, c.byte_len, "peek's byte count before item {before}");
        }
    }
    n
}

/// Pushes `entries`, polling in batches of `batch` whenever the model has no room, then
/// flushes the compressor and drains the ring into `got`.
fn push_and_drain<const S: usize>(
    m: &mut Mlx5Model,
    cq: &mut Mlx5Cq<S>,
    entries: &[Entry],
    batch: usize,
    got: &mut Vec<Completion>,
) {
    for e in entries {
        while !m.can_push() {
            poll_batch(cq, batch, got);
        }
        m.push(e).unwrap();
    }
    m.flush().unwrap();
    while poll_batch(cq, batch, got) > 0 {}
}

/// Feeds `entries` through a model (compressing per `comp`) and a poller with random batch
/// sizes, polling whenever the model has no room and peeking before every poll; returns
/// every item and the stats.
fn drive<const S: usize>(
    entries: &[Entry],
    ring: u32,
    comp: Option<Compression>,
    start: u32,
    batch_seed: u64,
) -> (Vec<Completion>, CqStats) {
    drive_as::<S>(entries, ring, comp, start, batch_seed, CqeVersion::V0)
}

/// [`drive`] for CQEs of `version`.
fn drive_as<const S: usize>(
    entries: &[Entry],
    ring: u32,
    comp: Option<Compression>,
    start: u32,
    batch_seed: u64,
    version: CqeVersion,
) -> (Vec<Completion>, CqStats) {
    let (out, stats, _) = drive_kept::<S>(entries, ring, comp, start, batch_seed, version);
    (out, stats)
}

/// [`drive_as`], with what the model kept of each completion it wrote
/// ([`Mlx5Model::record_kept`]): the CQEs whose uncompressed poll this poll must equal.
fn drive_kept<const S: usize>(
    entries: &[Entry],
    ring: u32,
    comp: Option<Compression>,
    start: u32,
    batch_seed: u64,
    version: CqeVersion,
) -> (Vec<Completion>, CqStats, Vec<Entry>) {
    let mut rng = Rng(batch_seed);
    let (out, cq, kept) = drive_batches::<S>(entries, ring, comp, start, version, || 1 + rng.below(20) as usize, 16);
    (out, cq.stats(), kept)
}

/// Polls `entries` compressed per `comp` and checks the result against the uncompressed
/// poll of what the device kept of them (the fields a mini-CQE does not carry are the
/// title's): the decoder reports what the hardware kept, and nothing it did not.
fn assert_polls_as_kept<const S: usize>(
    entries: &[Entry],
    ring: u32,
    comp: Option<Compression>,
    start: u32,
    batch_seed: u64,
    version: CqeVersion,
    what: &str,
) -> CqStats {
    let (got, stats, kept) = drive_kept::<S>(entries, ring, comp, start, batch_seed, version);
    assert_eq!(kept.len(), entries.len(), "{what}: one kept CQE per completion");
    let (want, _) = drive_as::<S>(&kept, ring, None, start, batch_seed ^ 7, version);
    assert_same(&got, &want, what);
    stats
}

/// [`drive`] polling exactly one completion per call, the way UCX polls; returns every
/// item and each QP's outstanding sends and receives after the last.
fn drive_one_at_a_time<const S: usize>(
    entries: &[Entry],
    ring: u32,
    comp: Option<Compression>,
    start: u32,
) -> (Vec<Completion>, Vec<(u32, u32)>, Vec<Entry>) {
    let (out, cq, kept) = drive_batches::<S>(entries, ring, comp, start, CqeVersion::V0, || 1, 1);
    let queues = cq.registry().qps().iter().map(|q| (q.sq.outstanding(), q.rq.outstanding())).collect();
    (out, queues, kept)
}

/// [`drive_as`] with the batch sizes `batch` gives while the model waits for room, and
/// `last` for draining the ring at the end.
fn drive_batches<const S: usize>(
    entries: &[Entry],
    ring: u32,
    comp: Option<Compression>,
    start: u32,
    version: CqeVersion,
    mut batch: impl FnMut() -> usize,
    last: usize,
) -> (Vec<Completion>, Mlx5Cq<S>, Vec<Entry>) {
    let mut m = model::<S>(ring, comp, start);
    m.record_kept();
    let mut cq = m.poller::<S>(registry(), CqConfig { cqe_version: version, ..CqConfig::default() }).unwrap();
    let mut out = Vec::new();
    let mut make_room = |m: &Mlx5Model, cq: &mut Mlx5Cq<S>, out: &mut Vec<Completion>| {
        let mut idle = 0;
        while !m.can_push() {
            if poll_batch_peeking(cq, batch(), out) == 0 {
                idle += 1;
                assert!(idle < 1000, "no progress: model pi {} ci {}", m.pi(), cq.ci());
            }
        }
    };
    for e in entries {
        make_room(&m, &mut cq, &mut out);
        m.push(e).unwrap();
    }
    make_room(&m, &mut cq, &mut out);
    m.flush().unwrap();
    while poll_batch_peeking(&mut cq, last, &mut out) > 0 {}
    assert_eq!(cq.session_left(), 0);
    (out, cq, m.take_kept())
}

/// The fields a peek and a poll both define (peek starts from a zeroed completion).
fn key(c: &Completion) -> (u64, u32, WcStatus, u32, u16, Option<dvcq_provider::CqeFault>) {
    (c.wr_id, c.byte_len, c.status, c.qp_num, c.wqe_index, c.fault())
}

fn assert_same(a: &[Completion], b: &[Completion], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: item counts differ");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x, y, "{what}: item {i} differs");
    }
}

fn comp(layout: CompLayout, format: MiniFormat, policy: Policy) -> Option<Compression> {
    Some(Compression { layout, format, policy })
}

fn arb_runs() -> impl Strategy<Value = Vec<(u8, u32, u64)>> {
    prop::collection::vec((0u8..8, 1u32..40, any::<u64>()), 1..40)
}

fn arb_layout() -> impl Strategy<Value = CompLayout> {
    prop_oneof![Just(CompLayout::Basic), Just(CompLayout::Enhanced)]
}

fn arb_format() -> impl Strategy<Value = MiniFormat> {
    prop::sample::select(MiniFormat::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// The same stream, compression off and on, polls to identical items in order: every
    /// layout and format, random session lengths, small rings (many laps), random batches
    /// and one completion per call, and a start position near the 32-bit counter wrap.
    #[test]
    fn compressed_and_uncompressed_streams_poll_identically(
        runs in arb_runs(),
        layout in arb_layout(),
        format in arb_format(),
        seed in any::<u64>(),
        max in 1u32..80,
        ring_log in 3u32..8,
        near_wrap in any::<bool>(),
        batch_seed in any::<u64>(),
    ) {
        let entries = stream(&runs, format);
        let ring = 1 << ring_log;
        let start = if near_wrap { u32::MAX - 3 * ring } else { 0 };
        let (want, _) = drive::<64>(&entries, ring, None, start, batch_seed);
        for policy in [Policy::Always, Policy::RandomRuns { seed, max }, Policy::Never] {
            let what = format!("{layout:?}/{format:?}/{policy:?}");
            assert_polls_as_kept::<64>(&entries, ring, comp(layout, format, policy), start, batch_seed ^ 1, CqeVersion::V0, &what);
        }
        // Never compressing: the very completions of the entries.
        let (never, _) = drive::<64>(&entries, ring, comp(layout, format, Policy::Never), start, batch_seed ^ 3);
        assert_same(&never, &want, "never compressed");
        // One completion per call (UCX's way), where each QP's outstanding sends and
        // receives must match too.
        let (one, want_queues, _) = drive_one_at_a_time::<64>(&entries, ring, None, start);
        assert_same(&one, &want, "uncompressed, one completion per call");
        for policy in [Policy::Always, Policy::RandomRuns { seed, max }] {
            let (got, queues, kept) = drive_one_at_a_time::<64>(&entries, ring, comp(layout, format, policy), start);
            let what = format!("{layout:?}/{format:?}/{policy:?}, one completion per call");
            let (want_kept, _, _) = drive_one_at_a_time::<64>(&kept, ring, None, start);
            assert_same(&got, &want_kept, &what);
            assert_eq!(queues, want_queues, "{what}: outstanding sends and receives per QP");
        }
    }

    /// CQE version 1 (QPs named by user index, sessions keyed by it): the same identity.
    #[test]
    fn version_1_streams_poll_identically(
        runs in arb_runs(),
        layout in arb_layout(),
        format in arb_format(),
        seed in any::<u64>(),
        batch_seed in any::<u64>(),
    ) {
        let entries = as_version_1(&stream(&runs, format));
        let v1 = CqeVersion::V1;
        let (want, _) = drive_as::<64>(&entries, 32, None, 0, batch_seed, v1);
        for policy in [Policy::Always, Policy::RandomRuns { seed, max: 30 }, Policy::Never] {
            let what = format!("v1 {layout:?}/{format:?}/{policy:?}");
            assert_polls_as_kept::<64>(&entries, 32, comp(layout, format, policy), 0, batch_seed ^ 1, v1, &what);
        }
        // Version 1 names every QP, so nothing in a clean stream is a fault.
        prop_assert!(want.iter().all(|c| c.fault().is_none()));
    }

    /// 128-byte CQEs: mini-CQE arrays and blocks sit in the cqe64 half of the slot.
    #[test]
    fn compressed_128_byte_cqes_poll_identically(runs in arb_runs(), layout in arb_layout(), format in arb_format(), seed in any::<u64>()) {
        let entries = stream(&runs, format);
        let policy = Policy::RandomRuns { seed, max: 20 };
        assert_polls_as_kept::<128>(&entries, 16, comp(layout, format, policy), 0, seed, CqeVersion::V0, "128-byte");
    }

    /// Garbage on a compressed CQ (arbitrary raw CQEs in the stream): no panic, and every
    /// item before the first garbage CQE is the one the clean stream gives.
    #[test]
    fn garbage_never_panics_and_loses_nothing_before_it(
        runs in arb_runs(),
        layout in arb_layout(),
        format in arb_format(),
        junk in prop::collection::vec((any::<usize>(), prop::array::uniform32(any::<u8>()), prop::array::uniform32(any::<u8>()), 0u8..4), 1..4),
    ) {
        let clean = stream(&runs, format);
        let mut dirty = clean.clone();
        let mut first = usize::MAX;
        for (at, a, b, fmt) in junk {
            let mut bytes = [0u8; 64];
            bytes[..32].copy_from_slice(&a);
            bytes[32..].copy_from_slice(&b);
            // Mostly format 3 (titles and blocks with random counts).
            bytes[63] = (bytes[63] & !op_own::FORMAT_MASK) | (fmt.max(2) << op_own::FORMAT_SHIFT);
            let at = at % (dirty.len() + 1);
            dirty.insert(at, build::raw(bytes));
            first = first.min(at);
        }
        let mut m = model::<64>(32, comp(layout, format, Policy::Always), 0);
        m.record_kept();
        let mut cq = m.poller::<64>(registry(), CqConfig::default()).unwrap();
        let mut got = Vec::new();
        for e in &dirty {
            let mut tries = 0;
            while !m.can_push() && tries < 200 {
                poll_batch(&mut cq, 5, &mut got);
                tries += 1;
            }
            if !m.can_push() {
                // Garbage can run the poller past the producer (a count it could not
                // refute); the model then sees no room. Stop feeding there.
                break;
            }
            m.push(e).unwrap();
        }
        if m.can_push() {
            m.flush().unwrap();
        }
        for _ in 0..100 {
            poll_batch(&mut cq, 7, &mut got);
        }
        // Every clean entry before the first garbage CQE gives one item (SIG_ERR none),
        // the one what the device kept of it gives uncompressed.
        let sig_err = |e: &Entry| e.cqe.opcode() == cqe_opcode::SIG_ERR;
        let n = dirty[..first].iter().filter(|e| !sig_err(e)).count();
        let kept = m.take_kept();
        let (want, _) = drive::<64>(&kept[..first.min(kept.len())], 32, None, 0, 7);
        prop_assert!(got.len() >= n);
        prop_assert_eq!(&got[..n], &want[..n]);
        // Every fault item is counted once, whichever path wrote it.
        prop_assert_eq!(cq.stats().faults, got.iter().filter(|c| c.fault().is_some()).count() as u64);
        // Every failed completion is counted once, by its status.
        let mut failed = dvcq_provider::StatusCounts::default();
        got.iter().filter(|c| c.status != dvcq_provider::WcStatus::Success).for_each(|c| failed.add(c.status));
        prop_assert_eq!(cq.stats().errors, failed);
        let _ = cq.peek();
    }
}

/// Every layout and mini format, deterministic, on long streams over many laps: the
/// sessions really form (most completions are compressed) and poll identically.
#[test]
fn every_layout_and_format_over_many_laps() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        for format in MiniFormat::ALL {
            let runs: Vec<_> = (0..200u64).map(|i| ((i % 7) as u8, 1 + (i * 37 % 60) as u32, i)).collect();
            let entries = stream(&runs, format);
            let what = format!("{layout:?}/{format:?}");
            let stats = assert_polls_as_kept::<64>(
                &entries,
                16,
                comp(layout, format, Policy::Always),
                0,
                5,
                CqeVersion::V0,
                &what,
            );
            assert!(stats.sessions > 100, "{layout:?}/{format:?}: only {} sessions", stats.sessions);
            assert!(entries.len() > 16 * 300, "enough laps to wrap the 8-bit iteration count");
        }
    }
}

/// A fully compressed receive stream: after the first lap every completion but the titles
/// is decompressed from a mini-CQE.
#[test]
fn fully_compressed_lap_helper() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        let lap = compress::bench_lap(256, QP_RC, false);
        let (want, _) = drive::<64>(&lap, 256, None, 0, 1);
        let (got, stats) = drive::<64>(&lap, 256, comp(layout, MiniFormat::Hash, Policy::Always), 0, 1);
        assert_same(&got, &want, "bench lap");
        let expect = if layout == CompLayout::Basic { 4 } else { 255 / 7 + 1 };
        assert_eq!(stats.sessions, expect, "{layout:?}");
        let sends = compress::bench_lap(256, QP_RC, true);
        let (want, _) = drive::<64>(&sends, 256, None, 0, 1);
        let (got, _) = drive::<64>(&sends, 256, comp(layout, MiniFormat::Csum, Policy::Always), 0, 1);
        assert_same(&got, &want, "bench lap, sends");
    }
}

fn poller<const S: usize>(m: &Mlx5Model) -> Mlx5Cq<S> {
    m.poller::<S>(registry(), CqConfig::default()).unwrap()
}

/// `e` marked as a completion of run `run`: its timestamp, and a field no mini-CQE carries
/// and a device compares (the immediate / P_Key word; a send's completion does not report
/// it), so that consecutive runs never share a session. A timestamp alone does not part
/// them: the device compresses completions that differ there, and the difference is lost.
fn in_run(mut e: Entry, run: u64) -> Entry {
    e.cqe.imm_inval_pkey = dvcq_uapi::Be32::new(run as u32);
    e.timestamp(run)
}

fn recv(i: u16, bytes: u32) -> Entry {
    build::resp(cqe_opcode::RESP_SEND, QP_RC, i, bytes, 0).timestamp(99)
}

/// Receives whose WQE counters do not start at the RQ tail (a device consuming receive WQEs
/// out of order, or a poller opened mid-stream): every completion of a session takes the
/// wr_id of the WQE its counter names (`title + i`, as the kernel's
/// `mlx5e_decompress_cqe` and DPDK's `mlx5_rx_poll_len` number them), as the same CQEs give
/// uncompressed. Both layouts; the QP's own-RQ template path and the per-completion path
/// (a raw Ethernet QP); batches of 1 (the one-completion path), 3 and 16.
#[test]
fn session_receives_take_the_wr_id_of_their_counter() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        for qpn in [QP_RC, QP_ETH] {
            for batch in [1, 3, 16] {
                let what = format!("{layout:?}, QP {qpn:#x}, batch {batch}");
                let entries: Vec<_> =
                    (0..20u16).map(|i| build::resp(cqe_opcode::RESP_SEND, qpn, 40 + i, 64 + u32::from(i), 0)).collect();
                let mut m = model::<64>(64, comp(layout, MiniFormat::Csum, Policy::Always), 0);
                let mut cq = poller::<64>(&m);
                let mut got = Vec::new();
                push_and_drain(&mut m, &mut cq, &entries, batch, &mut got);
                assert!(cq.stats().sessions > 0, "{what}: no session formed");
                let ids: Vec<_> = got.iter().map(|c| (c.wr_id, c.wqe_index, c.byte_len)).collect();
                let want: Vec<_> = (0..20u16).map(|i| (u64::from(40 + i), 40 + i, 64 + u32::from(i))).collect();
                assert_eq!(ids, want, "{what}");
                let mut m = model::<64>(64, None, 0);
                let mut plain = poller::<64>(&m);
                let mut want = Vec::new();
                push_and_drain(&mut m, &mut plain, &entries, batch, &mut want);
                assert_same(&got, &want, &what);
                let outstanding = |cq: &Mlx5Cq<64>| cq.registry().qp(qpn).unwrap().rq.outstanding();
                assert_eq!(outstanding(&cq), outstanding(&plain), "{what}: RQ tail");
            }
        }
    }
}

/// A basic session split over poll batches of 1 and 3 and across the ring end; afterwards
/// its holes and arrays are INVALID again and the title keeps its own bytes.
#[test]
fn basic_session_across_batches_and_ring_end_then_holes_are_reinvalidated() {
    let ring = 32;
    let mut m = model::<64>(ring, comp(CompLayout::Basic, MiniFormat::Csum, Policy::Always), 25);
    let mut cq = poller::<64>(&m);
    let entries: Vec<_> = (0..20).map(|i| recv(i, 100 + i as u32)).collect();
    m.push_all(&entries).unwrap();
    assert_eq!(m.pi(), 45);
    let mut got = Vec::new();
    assert_eq!(poll_batch(&mut cq, 1, &mut got), 1);
    assert_eq!(cq.session_left(), 19);
    let peeked = cq.peek().unwrap();
    assert_eq!(poll_batch(&mut cq, 3, &mut got), 3);
    assert_eq!(key(&got[1]), key(&peeked));
    while poll_batch(&mut cq, 3, &mut got) > 0 {}
    assert_eq!(got.len(), 20);
    for (i, c) in got.iter().enumerate() {
        assert_eq!(
            (c.status, c.byte_len, c.wqe_index as usize, c.timestamp),
            (WcStatus::Success, 100 + i as u32, i, 99)
        );
    }
    assert_eq!(cq.ci(), 45);
    let snap = m.snapshot();
    let own = |pos: u32| snap[(pos % ring) as usize * 64 + 63];
    assert_eq!(op_own::format(own(25)), cqe_format::COMPRESSED, "the title keeps its bytes");
    for pos in 26..45 {
        assert_eq!(own(pos), 0xf0, "slot of position {pos} re-invalidated");
    }
    // The next lap reuses those slots for regular CQEs without confusion.
    let more: Vec<_> = (20..60).map(|i| recv(i, 7)).collect();
    let mut got = Vec::new();
    push_and_drain(&mut m, &mut cq, &more, 4, &mut got);
    assert_eq!(got.len(), 40);
    assert!(got.iter().enumerate().all(|(i, c)| c.is_ok() && c.wqe_index as usize == (20 + i) % 256));
}

/// One poll call takes every ready completion up to its buffer's length, across the ring's
/// end: the fast runs stop at the end of their lap, and the poll goes on in the next one
/// rather than returning short. Regular CQEs on CQs without compression and with either
/// layout (whose enhanced run tests the lap count, so it must stop there), both CQE sizes,
/// in lap 0 and in lap 255 (the enhanced count wraps to 0).
fn one_poll_takes_all_across_the_ring_end<const S: usize>() {
    let ring = 16;
    for comp in [
        None,
        comp(CompLayout::Basic, MiniFormat::Hash, Policy::Never),
        comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Never),
    ] {
        for lap in [0, 255] {
            let what = format!("{S}-byte CQEs, {comp:?}, lap {lap}");
            let start = lap * ring + ring - 3;
            let mut m = model::<S>(ring, comp, start);
            let mut cq = poller::<S>(&m);
            let entries: Vec<_> = (0..8).map(|i| recv(i, 10 + u32::from(i))).collect();
            m.push_all(&entries).unwrap();
            let mut got = Vec::new();
            assert_eq!(poll_batch(&mut cq, 16, &mut got), 8, "{what}");
            assert!(got.iter().enumerate().all(|(i, c)| c.is_ok() && c.byte_len == 10 + i as u32), "{what}: {got:?}");
            assert_eq!(cq.ci(), start + 8, "{what}");
            // A full ring: a buffer that ends exactly at the ring's end, then one that
            // starts there.
            m.push_all(&(8..24).map(|i| recv(i, 10 + u32::from(i))).collect::<Vec<_>>()).unwrap();
            assert_eq!(poll_batch(&mut cq, 11, &mut got), 11, "{what}");
            assert_eq!(cq.ci() % ring, 0, "{what}");
            assert_eq!(poll_batch(&mut cq, 20, &mut got), 5, "{what}");
            assert_eq!(poll_batch(&mut cq, 20, &mut got), 0, "{what}");
            assert!(got.iter().enumerate().all(|(i, c)| c.is_ok() && c.byte_len == 10 + i as u32), "{what}: {got:?}");
        }
    }
}

#[test]
fn one_poll_takes_all_across_the_ring_end_64() {
    one_poll_takes_all_across_the_ring_end::<64>();
}

#[test]
fn one_poll_takes_all_across_the_ring_end_128() {
    one_poll_takes_all_across_the_ring_end::<128>();
}

/// The enhanced layout's ownership test is byte 62 alone: when the lap count wraps from
/// 255 to 0, the regular CQEs lap 255 left in the ring (whose other bytes are mostly
/// zeros, the new lap's count) are not taken, whatever the batch.
#[test]
fn enhanced_cqes_of_lap_255_are_stale_in_lap_0() {
    let ring = 16;
    for batch in [1, 4, 16] {
        let m_comp = comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Never);
        let mut m = model::<64>(ring, m_comp, 255 * ring);
        let mut cq = poller::<64>(&m);
        let mut got = Vec::new();
        // Bounded polls: a poller that took stale CQEs would go on taking them.
        let drain = |cq: &mut Mlx5Cq<64>, got: &mut Vec<Completion>| {
            for _ in 0..40 {
                poll_batch(cq, batch, got);
            }
        };
        m.push_all(&(0..16).map(|i| recv(i, 1)).collect::<Vec<_>>()).unwrap();
        drain(&mut cq, &mut got);
        assert_eq!(got.len(), 16, "batch {batch}");
        m.push_all(&(16..18).map(|i| recv(i, 2)).collect::<Vec<_>>()).unwrap();
        drain(&mut cq, &mut got);
        assert_eq!(got.len(), 18, "batch {batch}: only the two CQEs of lap 0");
        assert_eq!(cq.ci(), 256 * ring + 2, "batch {batch}");
    }
}

/// The enhanced layout: the title is the previous regular CQE, blocks of up to seven
/// follow, the 8-bit iteration count wraps, and a block straddles the ring end.
#[test]
fn enhanced_blocks_follow_their_title_across_the_ring_end() {
    let ring = 8;
    let mut m = model::<64>(ring, comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Always), 255 * ring + 5);
    let mut cq = poller::<64>(&m);
    let entries: Vec<_> = (0..15).map(|i| recv(i, 10 + i as u32)).collect();
    // Title at 255*8+5, then blocks of 7 (the first straddles the ring end and the lap
    // count's wrap from 255 to 0), then one of 7.
    let mut got = Vec::new();
    push_and_drain(&mut m, &mut cq, &entries, 2, &mut got);
    assert_eq!(got.len(), 15);
    assert!(got.iter().enumerate().all(|(i, c)| c.is_ok() && c.byte_len == 10 + i as u32));
    assert_eq!(cq.stats().sessions, 2);
}

/// An enhanced title polled while the ring is empty behind it, the block written later:
/// the title must have been kept when it was polled, whatever the next slot held. In lap
/// 255 a never-written slot reads byte 62 = 0xFF, the lap's own count, with the INVALID
/// opcode; in lap 3 the count does not match. Sends and receives, batches 1 and 4.
#[test]
fn enhanced_title_polled_before_its_block_is_written() {
    for (lap, send, batch) in [(255u32, true, 1), (255, false, 4), (3, true, 4), (3, false, 1)] {
        let what = format!("lap {lap}, send {send}, batch {batch}");
        let ring = 8;
        let mut m = model::<64>(ring, comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Always), lap * ring);
        let mut cq = poller::<64>(&m);
        let entry = |i: u16, ts: u64| {
            if send {
                in_run(build::req(QP_RC, 40 + i, wqe_opcode::SEND, 0), ts)
            } else {
                in_run(build::resp(cqe_opcode::RESP_SEND, QP_RC, i, 100 + i as u32, 0), ts)
            }
        };
        // A completion of another run first, so the QP is cached and the title takes the
        // fast path; then the title alone (flushed: nothing follows it yet).
        let mut got = Vec::new();
        for (i, ts) in [(0, 6), (1, 7)] {
            m.push(&entry(i, ts)).unwrap();
            m.flush().unwrap();
            assert_eq!(poll_batch(&mut cq, batch, &mut got), 1, "{what}");
            assert_eq!(poll_batch(&mut cq, batch, &mut got), 0, "{what}");
        }
        // Then a block of five that uses it as its title.
        let more: Vec<_> = (2..7).map(|i| entry(i, 7)).collect();
        push_and_drain(&mut m, &mut cq, &more, batch, &mut got);
        assert_eq!(cq.stats().sessions, 1, "{what}: the five came as one block");
        assert_eq!(got.len(), 7, "{what}");
        for (i, c) in got.iter().enumerate() {
            assert!(c.is_ok(), "{what}: item {i}: {c:?}");
            assert_eq!((c.qp_num, c.timestamp), (QP_RC, 6 + (i > 0) as u64), "{what}: item {i}");
            if send {
                assert_eq!(c.wqe_index as usize, 40 + i, "{what}: item {i}");
            } else {
                assert_eq!((c.wqe_index as usize, c.byte_len), (i, 100 + i as u32), "{what}: item {i}");
            }
        }
    }
}

/// An enhanced title in the ring's last slot, polled by a call that ends exactly there:
/// the next slot (the next lap's first) still holds this lap's CQE, with this lap's count,
/// so it must not be taken for a regular CQE that makes the title unneeded.
#[test]
fn enhanced_title_in_the_last_slot_of_a_full_batch() {
    for send in [true, false] {
        let ring = 8;
        let mut m = model::<64>(ring, comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Always), 3 * ring);
        let mut cq = poller::<64>(&m);
        let entry = |i: u16, ts: u64| {
            if send {
                in_run(build::req(QP_RC, i, wqe_opcode::SEND, 0), ts)
            } else {
                in_run(build::resp(cqe_opcode::RESP_SEND, QP_RC, i, 100 + i as u32, 0), ts)
            }
        };
        // A lap of regular CQEs (each its own run), drained by one call of eight.
        let lap: Vec<_> = (0..8).map(|i| entry(i, 10 + i as u64)).collect();
        m.push_all(&lap).unwrap();
        m.flush().unwrap();
        let mut got = Vec::new();
        assert_eq!(poll_batch(&mut cq, 8, &mut got), 8);
        // A block of five after the last of them, in the next lap's first slot.
        let block: Vec<_> = (8..13).map(|i| entry(i, 17)).collect();
        push_and_drain(&mut m, &mut cq, &block, 8, &mut got);
        assert_eq!(cq.stats().sessions, 1, "send {send}");
        assert_eq!(got.len(), 13, "send {send}");
        for (i, c) in got.iter().enumerate() {
            assert!(c.is_ok(), "send {send}: item {i}: {c:?}");
            let ts = if i < 8 { 10 + i as u64 } else { 17 };
            assert_eq!((c.qp_num, c.timestamp), (QP_RC, ts), "send {send}: item {i}");
            if !send {
                assert_eq!(c.byte_len, 100 + i as u32, "send {send}: item {i}");
            }
        }
    }
}

/// Enhanced holes the device never writes again: a first lap of regular CQEs (each its own
/// run) leaves lap 0's count and a valid opcode in every slot; then each lap of the ring of
/// 16 holds two runs (a regular CQE, then a block of seven), so slots 2-7 and 10-15 are
/// holes in every lap. What the poller leaves in byte 62 of a hole must never match a later
/// lap's count, or 256 laps on the slot would read as a CQE. Sends (the requester session
/// loop) and receives (the general drain), over 300 laps, at batch sizes that start calls
/// inside blocks; afterwards every hole holds the previous lap's count.
#[test]
fn enhanced_holes_never_match_a_later_lap() {
    let ring = 16;
    for send in [true, false] {
        for batch in [3, 16] {
            let mut m = model::<64>(ring, comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Always), 0);
            let mut cq = poller::<64>(&m);
            let (mut got, mut ctr) = (Vec::new(), 0u16);
            for run in 0..616u64 {
                let len = if run < 16 { 1 } else { 8 };
                let entries: Vec<_> = (0..len)
                    .map(|_| {
                        ctr = ctr.wrapping_add(1);
                        let e = if send {
                            build::req(QP_RC, ctr, wqe_opcode::SEND, 0)
                        } else {
                            build::resp(cqe_opcode::RESP_SEND, QP_RC, ctr, 64, 0)
                        };
                        // A new run: a regular CQE, then a block.
                        in_run(e, run)
                    })
                    .collect();
                push_and_drain(&mut m, &mut cq, &entries, batch, &mut got);
            }
            let what = format!("send {send}, batch {batch}");
            assert_eq!(got.len(), 4816, "{what}");
            for (i, c) in got.iter().enumerate() {
                // The WQE counter, from 1, for sends and receives alike.
                let want = (i as u16).wrapping_add(1);
                let run = if i < 16 { i } else { 16 + (i - 16) / 8 };
                assert!(c.is_ok(), "{what}: item {i}: {c:?}");
                assert_eq!((c.wqe_index, c.timestamp), (want % 256, run as u64), "{what}: item {i}");
            }
            assert_eq!(cq.stats().sessions, 600, "{what}");
            let snap = m.snapshot();
            let last_lap = (cq.ci() - 1) / ring;
            for slot in (2..8).chain(10..16) {
                let vic = snap[slot * 64 + 62];
                assert_eq!(vic, last_lap.wrapping_sub(1) as u8, "{what}: byte 62 of hole slot {slot}");
            }
        }
    }
}

/// On a compressed CQ too, a view walk ends at a RESIZE CQE and `poll` takes it.
#[test]
fn views_on_a_compressed_cq_stop_at_a_resize() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        let mut m = model::<64>(16, comp(layout, MiniFormat::Hash, Policy::Never), 0);
        let mut cq = poller::<64>(&m);
        m.push_all(&(0..3).map(|i| build::req(QP_RC, i, wqe_opcode::SEND, 0)).collect::<Vec<_>>()).unwrap();
        let new_ring = m.resize::<64>(32).unwrap();
        {
            let mut v = cq.views();
            for i in 0..3 {
                assert_eq!(v.next().map(|x| x.wqe_counter()), Some(i), "{layout:?}");
            }
            assert!(v.next().is_none(), "{layout:?}: the walk ends at the RESIZE");
        }
        let mut got = Vec::new();
        assert_eq!(poll_batch(&mut cq, 4, &mut got), 0);
        assert!(cq.resize_pending(), "{layout:?}: poll consumed the RESIZE");
        cq.switch_ring(new_ring).unwrap();
        m.push(&build::req(QP_RC, 3, wqe_opcode::SEND, 0)).unwrap();
        m.flush().unwrap();
        assert_eq!(poll_batch(&mut cq, 4, &mut got), 1);
        assert_eq!(got[0].wqe_index, 3, "{layout:?}");
    }
}

/// A compressed CQ also carrying errors, SIG_ERR and a RESIZE: sessions end at each, and
/// the stream after the resize compresses again in the new ring.
#[test]
fn errors_sig_err_and_resize_on_a_compressed_cq() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        let mut m = model::<64>(64, comp(layout, MiniFormat::Hash, Policy::Always), 0);
        let mut cq = poller::<64>(&m);
        let flush = |wqe_counter| {
            build::err(ErrSpec {
                requester: false,
                qpn: QP_RC,
                wqe_counter,
                syndrome: syndrome::LOCAL_PROT_ERR,
                ..ErrSpec::default()
            })
        };
        let mut ctr = 0u16;
        let mut next = |n: u16| {
            let v: Vec<_> = (ctr..ctr + n).map(|i| recv(i, i as u32)).collect();
            ctr += n;
            v
        };
        m.push_all(&next(10)).unwrap();
        m.push(&flush(99)).unwrap();
        m.push_all(&next(9)).unwrap();
        m.push(&build::sig_err(3)).unwrap();
        m.push_all(&next(5)).unwrap();
        let new_ring = m.resize::<64>(16).unwrap();
        let mut got = Vec::new();
        while poll_batch(&mut cq, 6, &mut got) > 0 {}
        assert!(cq.resize_pending());
        cq.switch_ring(new_ring).unwrap();
        m.push_all(&next(12)).unwrap();
        while poll_batch(&mut cq, 6, &mut got) > 0 {}
        assert_eq!(got.len(), 37, "{layout:?}");
        assert_eq!(got[10].status, WcStatus::LocProtErr);
        let ok: Vec<_> = got.iter().filter(|c| c.is_ok()).map(|c| c.byte_len).collect();
        assert_eq!(ok, (0..36).collect::<Vec<_>>());
        let s = cq.stats();
        assert_eq!((s.resizes, s.swallowed, s.faults), (1, 1, 0));
        assert!(s.sessions >= 4, "{layout:?}: {s:?}");
    }
}

/// A format-3 CQE on a CQ created without compression is a BadFormat fault item; what came
/// before is intact and nothing panics.
#[test]
fn compressed_cqes_on_a_cq_without_compression_are_bad_format() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        let mut m = model::<64>(64, comp(layout, MiniFormat::Csum, Policy::Always), 0);
        let mut cq = m.poller_as::<64>(registry(), CqConfig::default(), 0).unwrap();
        m.push(&build::err(ErrSpec {
            requester: true,
            qpn: QP_RC,
            syndrome: syndrome::WR_FLUSH_ERR,
            ..ErrSpec::default()
        }))
        .unwrap();
        m.push_all(&(0..20).map(|i| recv(i, 1)).collect::<Vec<_>>()).unwrap();
        let mut got = Vec::new();
        for _ in 0..10 {
            poll_batch(&mut cq, 8, &mut got);
        }
        assert_eq!(got[0].status, WcStatus::WrFlushErr, "{layout:?}");
        let first_fault = got.iter().position(|c| c.fault().is_some()).expect("a fault item");
        assert!(got[1..first_fault].iter().all(|c| c.is_ok()));
        assert_eq!(got[first_fault].fault().unwrap().kind, FaultKind::BadFormat, "{layout:?}");
    }
}

/// On a 64-byte CQ created with compression, a regular CQE in a format that size cannot
/// hold (inline-64 data, format 2) is a BadFormat fault item, as it is without compression,
/// and its neighbours are intact: neither the entry's uncompressed loop nor the loop that
/// goes on after a session in the same call takes it for a responder CQE.
#[test]
fn inline_64_on_a_64_byte_compressed_cq_is_bad_format() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        for policy in [Policy::Never, Policy::Always] {
            let mut m = model::<64>(64, comp(layout, MiniFormat::Hash, policy), 0);
            let mut cq = poller::<64>(&m);
            let mut inline64 = recv(20, 4);
            inline64.cqe.op_own |= 2 << op_own::FORMAT_SHIFT;
            m.push_all(&(0..20).map(|i| recv(i, i.into())).collect::<Vec<_>>()).unwrap();
            m.push(&inline64).unwrap();
            m.push_all(&(20..30).map(|i| recv(i, i.into())).collect::<Vec<_>>()).unwrap();
            let mut got = Vec::new();
            while poll_batch(&mut cq, 64, &mut got) > 0 {}
            let what = format!("{layout:?} {policy:?}");
            assert_eq!(got.len(), 31, "{what}");
            assert_eq!(got[20].fault().map(|f| f.kind), Some(FaultKind::BadFormat), "{what}");
            let ok: Vec<u32> = got.iter().filter(|c| c.is_ok()).map(|c| c.byte_len).collect();
            assert_eq!(ok, (0..30).collect::<Vec<_>>(), "{what}");
            if policy == Policy::Always {
                assert!(cq.stats().sessions > 0, "{what}: the inline-64 CQE must follow a session");
            }
        }
    }
}

/// A CQ told the wrong mini format (the device writes CSUM, the poller was told HASH): the
/// format is not in the CQE, so this is not detectable; the completions are all there,
/// with the hash taken from the wrong bytes, and nothing panics.
#[test]
fn wrong_mini_format_is_undetectable_but_harmless() {
    let mut m = model::<64>(64, comp(CompLayout::Basic, MiniFormat::Csum, Policy::Always), 0);
    let told = CompressionConfig { layout: CompLayout::Basic, format: MiniFormat::Hash };
    let mut cq = m.poller_as::<64>(registry(), CqConfig { compression: Some(told), ..CqConfig::default() }, 0).unwrap();
    let entries: Vec<_> = (0..20)
        .map(|i| build::resp(cqe_opcode::RESP_SEND, QP_ETH, i, 60, 0).offloads(7, 0x28, 0x1000 + i, 0x5555))
        .collect();
    m.push_all(&entries).unwrap();
    let mut got = Vec::new();
    while poll_batch(&mut cq, 8, &mut got) > 0 {}
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|c| c.is_ok() && c.byte_len == 60));
    assert_eq!(got[3].checksum, 0x1000, "the title's checksum, not the mini's");
}

fn title(opcode: u8, qpn: u32, ctr: u16, count: u32) -> Entry {
    let mut c = Cqe64 {
        sop_drop_qpn: Be32::new(qpn),
        wqe_counter: Be16::new(ctr),
        byte_cnt: Be32::new(count),
        ..Cqe64::default()
    };
    c.op_own = op_own::make(opcode, cqe_format::COMPRESSED, false, 0);
    Entry::from(c)
}

fn array(byte_cnts: [u32; 8]) -> Entry {
    build::raw(responder_minis(byte_cnts))
}

/// Eight hash-format responder mini-CQEs with these byte counts, as one 64-byte slot.
fn responder_minis(byte_cnts: [u32; 8]) -> [u8; 64] {
    let mut b = [0u8; 64];
    for (i, n) in byte_cnts.iter().enumerate() {
        b[8 * i + 4..8 * i + 8].copy_from_slice(&n.to_be_bytes());
    }
    b
}

/// A basic title whose count exceeds the free slots is a Truncated fault item: count 55 at
/// position 10 of a 64-slot ring whose device still sees consumer index 0 (54 free), while
/// 54 is a session. Counts of 0 or 1 are BadField.
#[test]
fn session_count_beyond_free_slots_is_truncated() {
    let told = CompressionConfig { layout: CompLayout::Basic, format: MiniFormat::Hash };
    // The consumer index is published only after 1000 CQEs: the device still sees 0.
    let cfg = CqConfig {
        compression: Some(told),
        ci_update: dvcq_mlx5_dv::CiUpdate::EveryN(std::num::NonZeroU32::new(1000).unwrap()),
        ..CqConfig::default()
    };
    for (count, want) in [
        (55, Some(FaultKind::Truncated)),
        (1000, Some(FaultKind::Truncated)),
        (1, Some(FaultKind::BadField)),
        (0, Some(FaultKind::BadField)),
        (54, None),
    ] {
        let mut m = model::<64>(64, None, 0);
        let mut cq = m.poller_as::<64>(registry(), cfg, 0).unwrap();
        for i in 0..10 {
            m.push(&recv(i, 5)).unwrap();
        }
        m.push(&title(cqe_opcode::RESP_SEND, QP_RC, 10, count)).unwrap();
        m.push(&array([1, 2, 3, 4, 5, 6, 7, 8])).unwrap();
        let mut got = Vec::new();
        assert_eq!(poll_batch(&mut cq, 10, &mut got), 10);
        let peeked = cq.peek();
        assert_eq!(poll_batch(&mut cq, 1, &mut got), 1);
        assert_eq!(peeked.as_ref().map(key), got.last().map(key), "count {count}");
        match want {
            Some(kind) => {
                let f = got[10].fault().expect("fault item");
                assert_eq!((f.kind, f.position), (kind, 10), "count {count}");
                assert_eq!(cq.ci(), 11);
            }
            None => {
                assert!(got[10].is_ok() && got[10].byte_len == 1);
                assert_eq!(cq.session_left(), 53);
            }
        }
    }
}

/// CQE version 1: a requester session resolves its QP by the title's user index, not by
/// its QPN, and reports the title's own QPN (as uncompressed version-1 CQEs do). The title
/// names user index 0 (QP 1) with QPN 0x100 (the QP at user index 1): the wr_ids and the
/// SQ retirement are QP 1's, where a lookup by QPN would have taken QP 0x100's.
#[test]
fn version_1_requester_session_resolves_its_qp_by_user_index() {
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(1, 16, 16)).unwrap();
    reg.add_qp(QpConfig::rc(0x100, 16, 16)).unwrap();
    for i in 0..8 {
        reg.qp_mut(1).unwrap().sq.post(1000 + i, 1);
        reg.qp_mut(0x100).unwrap().sq.post(2000 + i, 1);
    }
    let cfg = CqConfig {
        compression: Some(CompressionConfig { layout: CompLayout::Basic, format: MiniFormat::Hash }),
        cqe_version: CqeVersion::V1,
        ..CqConfig::default()
    };
    let mut m = model::<64>(16, None, 0);
    let mut cq = m.poller_as::<64>(reg, cfg, 0).unwrap();
    m.push(&title(cqe_opcode::REQ, 0x100, 0, 8).srqn_uidx(0)).unwrap();
    m.push(&build::raw(requester_minis(0))).unwrap();
    m.skip(6).unwrap();
    let mut got = Vec::new();
    while poll_batch(&mut cq, 16, &mut got) > 0 {}
    let ids: Vec<_> = got.iter().map(|c| (c.is_ok(), c.wr_id, c.qp_num)).collect();
    assert_eq!(ids, (0..8).map(|i| (true, 1000 + i, 0x100)).collect::<Vec<_>>());
    assert_eq!(cq.registry().qp(1).unwrap().sq.outstanding(), 0, "QP 1's SQ retired");
    assert_eq!(cq.registry().qp(0x100).unwrap().sq.outstanding(), 8, "QP 0x100's untouched");
}

/// A basic title with an opcode no session carries and a plausible count is one BadOpcode
/// fault item that consumes the whole session: its array and holes are made hardware-owned
/// again (so they cannot pass the ownership test two laps on), then the CQE after it.
#[test]
fn bad_opcode_title_consumes_and_reinvalidates_its_session() {
    let cfg = CompressionConfig { layout: CompLayout::Basic, format: MiniFormat::Hash };
    let mut m = model::<64>(16, None, 0);
    let mut cq = m.poller_as::<64>(registry(), CqConfig { compression: Some(cfg), ..CqConfig::default() }, 0).unwrap();
    m.push(&title(cqe_opcode::REQ_ERR, QP_RC, 0, 8)).unwrap();
    m.push(&array([1, 2, 3, 4, 5, 6, 7, 8])).unwrap();
    m.skip(6).unwrap();
    m.push(&build::req(QP_RC, 8, wqe_opcode::SEND, 0)).unwrap();
    let mut got = Vec::new();
    while poll_batch(&mut cq, 4, &mut got) > 0 {}
    assert_eq!(got.len(), 2, "one fault item, then the send");
    let f = got[0].fault().expect("fault item");
    assert_eq!((f.kind, f.position, f.value), (FaultKind::BadOpcode, 0, cqe_opcode::REQ_ERR as u32));
    assert!(got[1].is_ok() && got[1].wqe_index == 8);
    assert_eq!((cq.ci(), cq.stats().faults), (9, 1));
    let snap = m.snapshot();
    assert_eq!(op_own::format(snap[63]), cqe_format::COMPRESSED, "the title keeps its bytes");
    for pos in 1..8 {
        assert_eq!(snap[pos * 64 + 63], 0xf0, "slot {pos} re-invalidated");
    }
}

/// A truncated basic session (the device wrote a regular CQE where the session has a
/// hole): the completions before it, one Truncated fault item, then that CQE.
#[test]
fn hole_holding_a_cqe_truncates_the_session() {
    let mut m = model::<64>(64, None, 0);
    let cq_cfg = CompressionConfig { layout: CompLayout::Basic, format: MiniFormat::Hash };
    let mut cq =
        m.poller_as::<64>(registry(), CqConfig { compression: Some(cq_cfg), ..CqConfig::default() }, 0).unwrap();
    m.push(&title(cqe_opcode::RESP_SEND, QP_RC, 0, 20)).unwrap();
    m.push(&array([10, 11, 12, 13, 14, 15, 16, 17])).unwrap();
    m.skip(3).unwrap();
    m.push(&recv(77, 4242)).unwrap();
    let mut got = Vec::new();
    while poll_batch(&mut cq, 3, &mut got) > 0 {}
    assert_eq!(got.len(), 7);
    assert_eq!(got[..5].iter().map(|c| c.byte_len).collect::<Vec<_>>(), [10, 11, 12, 13, 14]);
    let f = got[5].fault().unwrap();
    assert_eq!((f.kind, f.position, f.value), (FaultKind::Truncated, 0, 20));
    assert_eq!(got[6].byte_len, 4242);
    assert_eq!(cq.session_left(), 0);
    assert_eq!(cq.ci(), 6);
}

/// Mini-CQEs of requester completions `first..first + 8` (SEND, no byte count), as one
/// 64-byte slot: a basic array or an enhanced block, whose last two bytes (byte 62 and
/// `op_own`) the caller sets.
fn requester_minis(first: u16) -> [u8; 64] {
    let mut b = [0u8; 64];
    for k in 0..8u16 {
        let m = dvcq_uapi::mlx5::mini::MiniCqe::requester(first + k, wqe_opcode::SEND, 0);
        b[8 * k as usize..8 * k as usize + 8].copy_from_slice(&m.bytes);
    }
    b
}

/// An enhanced block of `count` minis from the 64 bytes `minis`, written at running
/// position `pos` of a ring of `entries`: byte 62 is that lap's count, `op_own` says
/// COMPRESSED and the count.
fn enhanced_block(mut minis: [u8; 64], pos: u32, entries: u32, count: u8) -> Entry {
    minis[62] = (pos / entries) as u8;
    minis[63] = op_own::make(count - 1, cqe_format::COMPRESSED, false, 0);
    build::raw(minis)
}

/// An enhanced-layout CQ whose device keeps seeing consumer index 0: the doorbell is
/// written only every 1000 CQEs.
fn enhanced_unpublished() -> CqConfig {
    CqConfig {
        compression: Some(CompressionConfig { layout: CompLayout::Enhanced, format: MiniFormat::Hash }),
        ci_update: dvcq_mlx5_dv::CiUpdate::EveryN(std::num::NonZeroU32::new(1000).unwrap()),
        ..CqConfig::default()
    }
}

/// The items a truncated requester session gives: `good` sends with WQE indexes from
/// `first`, one Truncated fault for the session (or block) at `at` of `count`, then the
/// regular send (WQE index 200) the device wrote into the hole.
fn assert_truncated_sends(got: &[Completion], first: u16, good: usize, at: u32, count: u32, what: &str) {
    assert_eq!(got.len(), good + 2, "{what}: items");
    for (k, c) in got[..good].iter().enumerate() {
        assert!(c.is_ok() && c.opcode == WcOpcode::Send, "{what}: item {k} is a send");
        assert_eq!(c.wqe_index, first + k as u16, "{what}: item {k}");
    }
    let f = got[good].fault().expect("fault item");
    assert_eq!((f.kind, f.position, f.value), (FaultKind::Truncated, at, count), "{what}");
    assert_eq!(got[good + 1].wqe_index, 200, "{what}: the CQE in the hole comes after");
}

/// Polls everything in batches of `batch`, checking before every call that `peek` shows
/// the item the call then returns first (the fields a send completion defines: a SEND
/// leaves `byte_len` as the slot held it).
fn drain_peeking<const S: usize>(cq: &mut Mlx5Cq<S>, batch: usize, what: &str) -> Vec<Completion> {
    let send_key = |c: &Completion| (c.wr_id, c.status, c.opcode, c.qp_num, c.wqe_index, c.timestamp, c.fault());
    let mut got = Vec::new();
    loop {
        let peeked = cq.peek();
        let before = got.len();
        if poll_batch(cq, batch, &mut got) == 0 {
            assert_eq!(peeked.map(|c| send_key(&c)), None, "{what}: peek shows an item poll does not return");
            return got;
        }
        assert_eq!(peeked.map(|c| send_key(&c)), Some(send_key(&got[before])), "{what}: peek before item {before}");
    }
}

/// A requester session with a CQE the device wrote into a hole, in each layout, starting
/// at the ring's start and just before its end, at poll batch sizes that reach the hole
/// slot by slot, inside a whole basic group of eight, inside a block a call began in, and
/// inside a block a call opened: the completions before it, one Truncated fault, then that
/// CQE; the session's other slots are not consumed, and `peek` agrees before every call.
#[test]
fn requester_session_truncated_by_a_written_hole() {
    for (batch, at) in [1, 3, 5, 16].into_iter().flat_map(|b| [(b, 0), (b, 60)]) {
        // Basic: title (40 completions), array 0, six holes, an array, three holes, and a
        // regular send written into the next hole.
        let mut m = model::<64>(64, None, at);
        let cfg = CompressionConfig { layout: CompLayout::Basic, format: MiniFormat::Hash };
        let mut cq =
            m.poller_as::<64>(registry(), CqConfig { compression: Some(cfg), ..CqConfig::default() }, at).unwrap();
        m.push(&title(cqe_opcode::REQ, QP_RC, 0, 40)).unwrap();
        m.push(&build::raw(requester_minis(0))).unwrap();
        m.skip(6).unwrap();
        m.push(&build::raw(requester_minis(8))).unwrap();
        m.skip(3).unwrap();
        m.push(&build::req(QP_RC, 200, wqe_opcode::SEND, 0)).unwrap();
        let what = format!("basic, batch {batch}, at {at}");
        let got = drain_peeking(&mut cq, batch, &what);
        assert_truncated_sends(&got, 0, 12, at, 40, &what);
        assert_eq!(cq.ci(), at + 13);
        assert_eq!((cq.stats().faults, cq.stats().sessions), (1, 1), "{what}: one fault, one session counted");

        // Enhanced: a regular send (the title), a block of two (one hole), a block of seven,
        // two of its holes, and a regular send written into the next.
        let enh = comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Always);
        let mut m = model::<64>(64, enh, at);
        let mut cq = poller::<64>(&m);
        m.push(&build::req(QP_RC, 0, wqe_opcode::SEND, 0)).unwrap();
        m.flush().unwrap();
        let block = |pos: u32, first: u16, count: u8| enhanced_block(requester_minis(first), pos, 64, count);
        m.push(&block(at + 1, 1, 2)).unwrap();
        m.flush().unwrap();
        m.skip(1).unwrap();
        m.push(&block(at + 3, 3, 7)).unwrap();
        m.flush().unwrap();
        m.skip(2).unwrap();
        m.push(&build::req(QP_RC, 200, wqe_opcode::SEND, 0)).unwrap();
        let what = format!("enhanced, batch {batch}, at {at}");
        let got = drain_peeking(&mut cq, batch, &what);
        // The title, the block of two, then the block of seven up to the written hole.
        assert_truncated_sends(&got, 0, 6, at + 3, 7, &what);
        assert_eq!(cq.ci(), at + 7);
        assert_eq!((cq.stats().faults, cq.stats().sessions), (1, 2), "{what}: one fault, two blocks counted");
    }
}

/// An enhanced receive session with a CQE the device wrote into a hole of its block: the
/// title, the completions before the hole, one Truncated fault, then that CQE, whatever the
/// batch, also when the hole is met in the same call that opened the block.
#[test]
fn enhanced_receive_session_truncated_by_a_written_hole() {
    for batch in [1, 2, 3, 16] {
        let enh = comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Always);
        let mut m = model::<64>(64, enh, 0);
        let mut cq = poller::<64>(&m);
        // The title, then a block of seven at position 1 and two of its holes.
        m.push(&recv(0, 100)).unwrap();
        m.flush().unwrap();
        m.push(&enhanced_block(responder_minis([101, 102, 103, 104, 105, 106, 107, 0]), 1, 64, 7)).unwrap();
        m.flush().unwrap();
        m.skip(2).unwrap();
        m.push(&recv(4, 4242)).unwrap();
        let mut got = Vec::new();
        for _ in 0..20 {
            poll_batch_peeking(&mut cq, batch, &mut got);
        }
        let what = format!("batch {batch}");
        assert_eq!(got.len(), 6, "{what}: {got:?}");
        let bytes: Vec<_> = got[..4].iter().map(|c| c.byte_len).collect();
        assert_eq!(bytes, [100, 101, 102, 103], "{what}");
        let f = got[4].fault().unwrap();
        assert_eq!((f.kind, f.position, f.value), (FaultKind::Truncated, 1, 7), "{what}");
        assert_eq!(got[5].byte_len, 4242, "{what}: the CQE in the hole comes after");
        assert_eq!(cq.ci(), 5, "{what}");
    }
}

/// A basic requester session polled to its exact end, then a title that is a fault item
/// (count 1) at the start of the next call: that call returns the fault item first, then
/// the send after it. The session's resolved QP, still held from the session before, must
/// not take the call past the fault item (which the requester loop would overwrite).
#[test]
fn fault_title_right_after_a_requester_session_is_kept() {
    let mut m = model::<64>(64, None, 0);
    let cfg = CompressionConfig { layout: CompLayout::Basic, format: MiniFormat::Hash };
    let mut cq = m.poller_as::<64>(registry(), CqConfig { compression: Some(cfg), ..CqConfig::default() }, 0).unwrap();
    m.push(&title(cqe_opcode::REQ, QP_RC, 0, 8)).unwrap();
    m.push(&build::raw(requester_minis(0))).unwrap();
    m.skip(6).unwrap();
    m.push(&title(cqe_opcode::REQ, QP_RC, 8, 1)).unwrap();
    m.push(&build::req(QP_RC, 9, wqe_opcode::SEND, 0)).unwrap();
    let mut got = Vec::new();
    assert_eq!(poll_batch(&mut cq, 8, &mut got), 8, "the session, to its end");
    assert!(got.iter().enumerate().all(|(k, c)| c.is_ok() && c.wqe_index == k as u16));
    assert_eq!(poll_batch(&mut cq, 4, &mut got), 2, "the fault item and the send after it");
    let f = got[8].fault().expect("the bad title is a fault item");
    assert_eq!((f.kind, f.position), (FaultKind::BadField, 8));
    assert!(got[9].is_ok() && got[9].wqe_index == 9, "then the regular send");
    assert_eq!(cq.ci(), 10);
}

/// Enhanced layout, the device shown consumer index 0 (the doorbell is written only every
/// 1000 CQEs) on a ring of 16: a title, two blocks of seven that continue its session, and
/// in the last slot a block claiming two minis, one more than the device could have
/// written. That block is a Truncated fault, not a session, for sends and receives at every
/// batch size (batch 1 continues sessions on its own path).
#[test]
fn enhanced_block_beyond_what_the_device_could_write_is_truncated() {
    let cfg = enhanced_unpublished();
    for (send, batch) in [true, false].into_iter().flat_map(|s| [(s, 1), (s, 3), (s, 16)]) {
        let what = format!("send {send}, batch {batch}");
        let mut m = model::<64>(16, comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Always), 0);
        let mut cq = m.poller_as::<64>(registry(), cfg, 0).unwrap();
        let block = |pos: u32, first: u16, count: u8| {
            let mut b = if send { requester_minis(first) } else { [0u8; 64] };
            if !send {
                for k in 0..8 {
                    let mini = dvcq_uapi::mlx5::mini::MiniCqe::hash(0, 100 + first as u32 + k as u32);
                    b[8 * k..8 * k + 8].copy_from_slice(&mini.bytes);
                }
            }
            enhanced_block(b, pos, 16, count)
        };
        m.push(&if send { build::req(QP_RC, 0, wqe_opcode::SEND, 0) } else { recv(0, 100) }).unwrap();
        m.flush().unwrap();
        for (pos, first) in [(1, 1), (8, 8)] {
            m.push(&block(pos, first, 7)).unwrap();
            m.flush().unwrap();
            m.skip(6).unwrap();
        }
        m.push(&block(15, 15, 2)).unwrap();
        m.flush().unwrap();
        let mut got = Vec::new();
        while poll_batch(&mut cq, batch, &mut got) > 0 {}
        assert_eq!(got.len(), 16, "{what}: the title, two blocks of seven, one fault item");
        for (k, c) in got[..15].iter().enumerate() {
            assert!(c.is_ok(), "{what}: item {k}");
            if send {
                assert_eq!(c.wqe_index, k as u16, "{what}: item {k}");
            } else {
                assert_eq!(c.byte_len, 100 + k as u32, "{what}: item {k}");
            }
        }
        let f = got[15].fault().expect("fault item");
        assert_eq!((f.kind, f.position, f.value), (FaultKind::Truncated, 15, 2), "{what}");
        assert_eq!(cq.ci(), 16, "{what}");
    }
}

/// Enhanced sends on a ring of 8 whose device was shown consumer index 0: the title and a
/// block of seven fill the lap and are polled; then a block of one is written in the next
/// lap's first slot (only a CQ created overrun-ignore lets the model write it). The
/// requester loop meets it as the block that continues its session, and the device could
/// have written no slot there: a Truncated fault that consumes it, as through the general
/// path, at every batch size.
#[test]
fn requester_loop_truncates_a_block_beyond_what_the_device_could_write() {
    let cfg = enhanced_unpublished();
    for batch in [1, 3, 16] {
        let mut mc = ModelConfig::new(8);
        mc.compression = comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Always);
        mc.overrun_ignore = true;
        let mut m = Mlx5Model::new(mc).unwrap();
        let mut cq = m.poller_as::<64>(registry(), cfg, 0).unwrap();
        let block = |pos: u32, first: u16, count: u8| enhanced_block(requester_minis(first), pos, 8, count);
        m.push(&build::req(QP_RC, 0, wqe_opcode::SEND, 0)).unwrap();
        m.flush().unwrap();
        m.push(&block(1, 1, 7)).unwrap();
        m.flush().unwrap();
        m.skip(6).unwrap();
        let mut got = Vec::new();
        while poll_batch(&mut cq, batch, &mut got) > 0 {}
        assert_eq!(got.len(), 8, "batch {batch}: the title and the block of seven");
        m.push(&block(8, 8, 1)).unwrap();
        m.flush().unwrap();
        while poll_batch(&mut cq, batch, &mut got) > 0 {}
        assert!(got[..8].iter().enumerate().all(|(k, c)| c.is_ok() && c.wqe_index == k as u16), "batch {batch}");
        assert_eq!(got.len(), 9, "batch {batch}: then one fault item");
        let f = got[8].fault().expect("fault item");
        assert_eq!((f.kind, f.position, f.value), (FaultKind::Truncated, 8, 1), "batch {batch}");
        assert_eq!((cq.ci(), cq.stats().faults), (9, 1), "batch {batch}");
    }
}

/// Enhanced garbage: a block with no title before it (the poller opened mid-session) is a
/// Truncated fault that consumes the block; a block count above seven is BadField; an
/// error CQE as title is BadOpcode.
#[test]
fn enhanced_blocks_without_a_usable_title_are_faults() {
    let enh = comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Always);
    // Poller opened at the block, after the title.
    let mut m = model::<64>(64, enh, 0);
    m.push_all(&(0..5).map(|i| recv(i, 1)).collect::<Vec<_>>()).unwrap();
    m.push(&in_run(recv(5, 1), 1)).unwrap();
    m.flush().unwrap();
    let mut cq = m.poller_at::<64>(registry(), CqConfig::default(), 1).unwrap();
    let mut got = Vec::new();
    while poll_batch(&mut cq, 4, &mut got) > 0 {}
    let f = got[0].fault().unwrap();
    assert_eq!((f.kind, f.value), (FaultKind::Truncated, 4));
    assert_eq!(got.len(), 2);
    assert_eq!((got[1].status, got[1].timestamp), (WcStatus::Success, 1));
    // The fault consumed the block's slots: the holes got the previous lap's count back.
    let snap = m.snapshot();
    for pos in 2..5 {
        assert_eq!(snap[pos * 64 + 62], 0xff, "hole at {pos}: lap 0's stale count is 255");
    }
    // A block claiming eight minis (opcode nibble 7).
    let mut m = model::<64>(64, enh, 0);
    let mut cq = m.poller::<64>(registry(), CqConfig::default()).unwrap();
    m.push(&recv(0, 1)).unwrap();
    m.flush().unwrap();
    let mut b = Cqe64 { op_own: op_own::make(7, cqe_format::COMPRESSED, false, 0), ..Cqe64::default() };
    m.push(&Entry::from(b)).unwrap();
    m.push(&build::err(ErrSpec {
        requester: true,
        qpn: QP_RC,
        syndrome: syndrome::WR_FLUSH_ERR,
        ..ErrSpec::default()
    }))
    .unwrap();
    b.op_own = op_own::make(1, cqe_format::COMPRESSED, false, 0);
    m.push(&Entry::from(b)).unwrap();
    m.skip(1).unwrap();
    m.push(&recv(1, 1)).unwrap();
    let mut got = Vec::new();
    while poll_batch(&mut cq, 4, &mut got) > 0 {}
    let kinds: Vec<_> = got.iter().map(|c| c.fault().map(|f| f.kind)).collect();
    assert_eq!(kinds, [None, Some(FaultKind::BadField), None, Some(FaultKind::BadOpcode), None]);
}

/// `RandomRuns { max }` keeps every run (title included) to `max` completions, in both
/// layouts, and the same seed writes the same ring.
#[test]
fn random_runs_are_no_longer_than_their_max_and_repeat_with_their_seed() {
    let lap = compress::bench_lap(200, QP_RC, false);
    // Returns the ring as written (a poll rewrites the slots of the sessions it consumes)
    // and the sessions the poller counted.
    let ring = |layout, seed, max| {
        let mut m = model::<64>(256, comp(layout, MiniFormat::Hash, Policy::RandomRuns { seed, max }), 0);
        let mut cq = poller::<64>(&m);
        m.push_all(lap.iter()).unwrap();
        // A session of L completions takes L slots in either layout (holes included).
        assert_eq!(m.pi(), 200);
        let snap = m.snapshot();
        let mut got = Vec::new();
        while poll_batch(&mut cq, 16, &mut got) > 0 {}
        let ids: Vec<u16> = got.iter().map(|c| c.wqe_index).collect();
        assert_eq!(ids, (0..200).collect::<Vec<u16>>(), "{layout:?} seed {seed} max {max}");
        (snap, cq.stats().sessions)
    };
    // Byte 63 of each written slot.
    let last_bytes = |snap: &[u8]| snap.chunks(64).take(200).map(|s| s[63]).collect::<Vec<u8>>();
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        // Runs of one are regular CQEs (RESP_SEND, format 0): nothing is compressed.
        let (snap, sessions) = ring(layout, 7, 1);
        assert!(last_bytes(&snap).iter().all(|&b| b == 0x20), "{layout:?}");
        assert_eq!(sessions, 0);
        // Runs of one or two: every session is a title and one mini-CQE. Basic: the title
        // (format 3) and an array whose last byte is unused; enhanced: a regular title and
        // a block of one (format 3, count − 1 = 0 in the opcode bits).
        let (snap, sessions) = ring(layout, 7, 2);
        let kinds: &[u8] = if layout == CompLayout::Basic { &[0x20, 0x2c, 0x00] } else { &[0x20, 0x0c] };
        let bytes = last_bytes(&snap);
        assert!(bytes.iter().all(|b| kinds.contains(b)), "{layout:?}: {bytes:x?}");
        let regular = bytes.iter().filter(|&&b| b >> 4 == cqe_opcode::RESP_SEND).count() as u64;
        assert_eq!(regular + sessions, 200, "{layout:?}: each session saves one regular CQE");
        assert!(sessions > 20, "{layout:?}: {sessions} sessions");
        // The same seed writes the same ring; another seed, another.
        let (snap, sessions) = ring(layout, 7, 8);
        assert!(sessions > 20, "{layout:?}: {sessions} sessions");
        assert_eq!(snap, ring(layout, 7, 8).0, "{layout:?}");
        assert_ne!(snap, ring(layout, 8, 8).0, "{layout:?}");
    }
}

/// The producer on its own thread compresses (random runs) while the consumer polls: the
/// completions match the uncompressed reference in order.
#[test]
fn threaded_producer_with_compression() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        let runs: Vec<_> = (0..3000u64).map(|i| ((i * 5 % 7) as u8, 1 + (i * 13 % 30) as u32, i)).collect();
        let entries = stream(&runs, MiniFormat::CsumStridx);
        let (want, _) = drive::<64>(&entries, 64, None, 0, 9);
        let m = model::<64>(64, comp(layout, MiniFormat::CsumStridx, Policy::RandomRuns { seed: 42, max: 40 }), 0);
        let mut cq = poller::<64>(&m);
        let total = want.len();
        let h = m.spawn_producer(entries, std::time::Duration::from_secs(20));
        // The consumer backs off while the ring is empty and stops as soon as the producer
        // fails, or after a minute without a completion.
        let mut h = ProducerWatch::new(h, std::time::Duration::from_secs(60));
        let mut got = Vec::with_capacity(total);
        while got.len() < total {
            if poll_batch(&mut cq, 16, &mut got) == 0 {
                h.idle(got.len() as u64).unwrap_or_else(|e| panic!("{layout:?}: {e}"));
            } else {
                h.progress();
            }
        }
        h.finish().unwrap_or_else(|e| panic!("{layout:?}: {e}"));
        assert_same(&got, &want, &format!("threaded {layout:?}"));
        assert!(cq.stats().sessions > 1000);
    }
}

#[global_allocator]
static GLOBAL: dvcq_provider::testing::CountingAlloc = dvcq_provider::testing::CountingAlloc;

/// Polling and peeking compressed sessions (receives and sends) allocates nothing.
#[test]
fn compressed_poll_does_not_allocate() {
    for (layout, send) in [CompLayout::Basic, CompLayout::Enhanced].into_iter().flat_map(|l| [(l, false), (l, true)]) {
        let mut m = model::<64>(256, comp(layout, MiniFormat::Hash, Policy::Always), 0);
        let mut cq = poller::<64>(&m);
        let lap = compress::bench_lap(256, QP_RC, send);
        let mut buf = [Completion::default(); 16];
        let mut total = 0;
        for _ in 0..20 {
            m.push_all(&lap).unwrap();
            let before = dvcq_provider::testing::allocations();
            loop {
                let _ = cq.peek();
                let n = cq.poll(&mut buf);
                total += n;
                if n == 0 {
                    break;
                }
            }
            assert_eq!(dvcq_provider::testing::allocations(), before, "{layout:?}, sends {send}");
        }
        assert_eq!(total, 20 * 256);
    }
}

/// An empty poll of a compressed CQ (decided before the poll proper) returns nothing and
/// writes nothing, in either layout, before any CQE, between sessions and one lap on; an
/// open session is never mistaken for an empty ring, even when its next slot is a hole.
#[test]
fn empty_polls_of_a_compressed_cq_consume_and_write_nothing() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        let ring = 16;
        let mut m = model::<64>(ring, comp(layout, MiniFormat::Csum, Policy::Always), 0);
        let mut cq = poller::<64>(&m);
        let mut got = Vec::new();
        assert_eq!(poll_batch(&mut cq, 4, &mut got), 0);
        assert_eq!(cq.last_set_ci(), None, "{layout:?}: nothing consumed, nothing written");
        let mut next = 0u16;
        for _lap in 0..3 {
            let entries: Vec<_> = (0..10).map(|i| recv(next.wrapping_add(i), 5)).collect();
            next = next.wrapping_add(10);
            m.push_all(&entries).unwrap();
            m.flush().unwrap();
            // One completion, then the open session's next slot is a hole or array: the
            // poll must go on with the session, not call the ring empty.
            assert!(!cq.idle(), "{layout:?}: a compressed CQ is never called idle");
            assert_eq!(poll_batch(&mut cq, 1, &mut got), 1);
            while poll_batch(&mut cq, 3, &mut got) > 0 {}
            let ci = cq.ci();
            let written = cq.last_set_ci();
            assert_eq!(poll_batch(&mut cq, 4, &mut got), 0);
            assert_eq!((cq.ci(), cq.last_set_ci(), m.device_ci()), (ci, written, ci), "{layout:?}");
        }
        assert_eq!(got.len(), 30, "{layout:?}");
        assert!(got.iter().enumerate().all(|(i, c)| c.is_ok() && c.wqe_index as usize == i), "{layout:?}");
    }
}

/// What identifies one completion of [`views_and_poll_take_turns_on_a_compressed_cq`]'s
/// stream: receives by their byte count, sends by their WQE counter (masked as the SQ of
/// 256 masks it).
fn turn_key_of_completion(c: &Completion) -> (bool, u32) {
    assert!(c.is_ok(), "{c:?}");
    match c.opcode {
        WcOpcode::Recv => (true, c.byte_len),
        _ => (false, u32::from(c.wqe_index)),
    }
}

/// A consumer that takes turns between zero-copy views and `poll` on a compressed CQ whose
/// small ring the producer keeps full: views show only regular CQEs and stop at a title or
/// block (and show nothing while a session is open); `poll` decompresses from there. In the
/// enhanced layout the last CQE views consumed may be the next block's title, and the
/// device may reuse its slot as soon as the views publish the consumer index. Every
/// completion comes out once, in order, whichever side took it.
#[test]
fn views_and_poll_take_turns_on_a_compressed_cq() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        take_turns::<64>(layout);
        take_turns::<128>(layout);
    }
}

/// [`views_and_poll_take_turns_on_a_compressed_cq`] for one CQE size and layout.
fn take_turns<const S: usize>(layout: CompLayout) {
    let (mut viewed_total, mut total, mut sessions) = (0, 0, 0);
    for seed in 0..24u64 {
        let what = format!("{layout:?}, {S}-byte CQEs, seed {seed}");
        let mut rng = Rng(seed);
        // Runs of sends and receives on one QP, each run marked as its own.
        let (mut entries, mut sq, mut rq, mut want) = (Vec::new(), 0u16, 0u16, Vec::new());
        for run in 0..40u64 {
            let send = rng.below(2) == 0;
            for _ in 0..1 + rng.below(12) {
                let e = if send {
                    sq = sq.wrapping_add(1);
                    want.push((false, u32::from(sq % 256)));
                    build::req(QP_RC, sq, wqe_opcode::SEND, 0)
                } else {
                    let bytes = 1000 + want.len() as u32;
                    want.push((true, bytes));
                    rq = rq.wrapping_add(1);
                    build::resp(cqe_opcode::RESP_SEND, QP_RC, rq, bytes, 0)
                };
                entries.push(in_run(e, run));
            }
        }
        let policy = Policy::RandomRuns { seed, max: 2 + seed as u32 % 3 };
        let start = (rng.below(256) * 16 + rng.below(16)) as u32;
        let mut m = model::<S>(16, comp(layout, MiniFormat::Hash, policy), start);
        let mut cq = poller::<S>(&m);
        let (mut got, mut viewed) = (Vec::new(), 0usize);
        let mut take_turn = |cq: &mut Mlx5Cq<S>, rng: &mut Rng, got: &mut Vec<(bool, u32)>| -> usize {
            let limit = 1 + rng.below(8) as usize;
            if rng.below(2) == 0 {
                let mut views = cq.views();
                let mut n = 0;
                while n < limit {
                    let Some(v) = views.next() else { break };
                    assert_ne!(v.format(), cqe_format::COMPRESSED, "{what}: a view of a title or block");
                    got.push(match v.opcode() {
                        cqe_opcode::REQ => (false, u32::from(v.wqe_counter() % 256)),
                        _ => (true, v.byte_cnt()),
                    });
                    n += 1;
                }
                viewed += n;
                n
            } else {
                let mut buf = [PATTERN; 8];
                let n = cq.poll(&mut buf[..limit]);
                got.extend(buf[..n].iter().map(turn_key_of_completion));
                n
            }
        };
        for e in &entries {
            let mut idle = 0;
            while !m.can_push() {
                idle = if take_turn(&mut cq, &mut rng, &mut got) == 0 { idle + 1 } else { 0 };
                assert!(idle < 64, "{what}: the consumer stalled at {} on a full ring", cq.ci());
            }
            m.push(e).unwrap();
        }
        m.flush().unwrap();
        let mut idle = 0;
        while idle < 8 {
            idle = if take_turn(&mut cq, &mut rng, &mut got) == 0 { idle + 1 } else { 0 };
        }
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{what}: completion {i}");
        }
        assert_eq!(cq.stats().faults, 0, "{what}");
        (viewed_total, total, sessions) = (viewed_total + viewed, total + want.len(), sessions + cq.stats().sessions);
    }
    assert!(
        viewed_total > total / 50 && sessions > 500,
        "{layout:?}, {S}-byte CQEs: views and sessions both had a share"
    );
}

/// Polls until a call returns nothing (at most 64 calls, so a poller that never stops
/// fails here), `batch` at a time, peeking before each call ([`poll_batch_peeking`]);
/// returns what was polled.
fn poll_dry<const S: usize>(cq: &mut Mlx5Cq<S>, batch: usize) -> Vec<Completion> {
    let mut got = Vec::new();
    for _ in 0..64 {
        if poll_batch_peeking(cq, batch, &mut got) == 0 {
            return got;
        }
    }
    panic!("the poller never ran dry: {got:?}");
}

/// Garbage after an enhanced requester session: a block of an impossible count ends the
/// session like a regular CQE. The consumer index only moves forward, each garbage block
/// is one fault item, and the poller runs dry (it went back to the session's old position
/// and returned the same fault for ever).
#[test]
fn a_fault_block_after_an_enhanced_requester_session_ends_it() {
    for batch in [1, 4, 32] {
        let mut m = model::<64>(16, comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Never), 0);
        let mut cq = poller::<64>(&m);
        m.push(&build::req(QP_RC, 0, wqe_opcode::SEND, 0)).unwrap(); // the title, at 0
        m.push(&enhanced_block(requester_minis(1), 1, 16, 3)).unwrap(); // sends 1-3, slots 1-3
        m.skip(2).unwrap();
        m.push(&enhanced_block(requester_minis(4), 4, 16, 10)).unwrap(); // a count of 10
        m.push(&enhanced_block(requester_minis(5), 5, 16, 11)).unwrap(); // and 11
        let got = poll_dry(&mut cq, batch);
        let what: Vec<_> = got.iter().map(|c| c.fault().map(|f| (f.kind, f.position)).ok_or(c.wqe_index)).collect();
        let want = [Err(0), Err(1), Err(2), Err(3), Ok((FaultKind::BadField, 4)), Ok((FaultKind::BadField, 5))];
        assert_eq!(what, want, "batch {batch}");
        assert_eq!((cq.ci(), cq.stats().faults), (6, 2), "batch {batch}");
    }
}

/// After a RESIZE CQE a compressed CQ polls nothing more from the old ring until
/// `switch_ring`, as one without compression does: the device writes nothing there after
/// it, and taking what garbage does would leave the counter off in the new ring.
#[test]
fn a_compressed_cq_polls_nothing_after_a_resize_until_it_switches() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        let mut m = model::<64>(16, comp(layout, MiniFormat::Hash, Policy::Never), 0);
        let mut cq = poller::<64>(&m);
        m.push(&build::resize()).unwrap();
        m.push(&build::req(QP_RC, 0, wqe_opcode::SEND, 0)).unwrap();
        for call in 0..3 {
            // The first call takes the RESIZE, which gives no completion.
            assert!(poll_dry(&mut cq, 8).is_empty(), "{layout:?}, call {call}");
            assert!(cq.resize_pending() && cq.ci() == 1, "{layout:?}, call {call}: the RESIZE and nothing after it");
        }
    }
}

/// On an overrun-ignore CQ a block that continues a session is bounded by the ring's size,
/// as a block that opens one is: a block of 7 on a ring of 4 is truncated garbage, for
/// peek and for poll, whatever the batch.
#[test]
fn a_block_larger_than_the_ring_is_truncated_wherever_it_is_met() {
    for batch in [1, 3, 32] {
        let mut mc = ModelConfig::new(4);
        mc.overrun_ignore = true;
        mc.compression = comp(CompLayout::Enhanced, MiniFormat::Hash, Policy::Never);
        let mut m = Mlx5Model::new(mc).unwrap();
        let cfg = CqConfig { ci_update: dvcq_mlx5_dv::CiUpdate::Never, ..CqConfig::default() };
        let mut cq = m.poller::<64>(registry(), cfg).unwrap();
        m.push(&build::req(QP_RC, 0, wqe_opcode::SEND, 0)).unwrap(); // title, 0
        m.push(&enhanced_block(requester_minis(1), 1, 4, 2)).unwrap(); // sends 1-2, slots 1-2
        m.skip(1).unwrap();
        m.push(&enhanced_block(requester_minis(3), 3, 4, 7)).unwrap(); // 7 in a ring of 4
        let got = poll_dry(&mut cq, batch);
        let what: Vec<_> =
            got.iter().map(|c| c.fault().map(|f| (f.kind, f.position, f.value)).ok_or(c.wqe_index)).collect();
        assert_eq!(what, [Err(0), Err(1), Err(2), Ok((FaultKind::Truncated, 3, 7))], "batch {batch}");
    }
}

/// The device compresses completions that differ in what no mini-CQE of the format
/// carries, and what differs there is lost: every completion of a session reports the
/// title's timestamp, the title's RSS hash unless the format is HASH, the title's checksum
/// unless it is CSUM or CSUM_STRIDX; and its own byte count, and its own hash or checksum
/// where the format keeps it. Raw Ethernet receives (which report hash and checksum) whose
/// timestamp, hash and checksum all differ, in every format and layout; sends, whose
/// timestamps differ, likewise keep only the title's.
#[test]
fn compressed_completions_report_what_the_mini_cqe_kept_and_the_titles_rest() {
    for layout in [CompLayout::Basic, CompLayout::Enhanced] {
        for format in MiniFormat::ALL {
            let what = format!("{layout:?}/{format:?}");
            let recv = |i: u16| {
                build::resp(cqe_opcode::RESP_SEND, QP_ETH, i, 100 + u32::from(i), 0)
                    .offloads(0x07, 0x28, 0x1000 + i, 0xabc0_0000 + u32::from(i))
                    .timestamp(5000 + u64::from(i))
            };
            let mut m = model::<64>(64, comp(layout, format, Policy::Always), 0);
            let mut cq = poller::<64>(&m);
            m.push_all(&(0..20).map(recv).collect::<Vec<_>>()).unwrap();
            let mut got = Vec::new();
            while poll_batch(&mut cq, 7, &mut got) > 0 {}
            assert!(cq.stats().sessions > 0, "{what}: compressed");
            assert_eq!(got.len(), 20, "{what}");
            let keeps_hash = format == MiniFormat::Hash;
            let keeps_csum = matches!(format, MiniFormat::Csum | MiniFormat::CsumStridx);
            for (i, c) in got.iter().enumerate() {
                let own = i as u32;
                assert!(c.is_ok(), "{what}: item {i}: {c:?}");
                assert_eq!(c.byte_len, 100 + own, "{what}: item {i}: its own byte count");
                assert_eq!(c.timestamp, 5000, "{what}: item {i}: the title's timestamp");
                let hash = if keeps_hash { 0xabc0_0000 + own } else { 0xabc0_0000 };
                let csum = if keeps_csum { 0x1000 + own as u16 } else { 0x1000 };
                assert_eq!((c.flow_tag_hash, c.checksum), (hash, csum), "{what}: item {i}");
            }
            // Sends: the WQE counter and opcode are the mini's, the timestamp the title's.
            let mut m = model::<64>(64, comp(layout, format, Policy::Always), 0);
            let mut cq = poller::<64>(&m);
            let sends: Vec<_> =
                (0..12).map(|i| build::req(QP_RC, i, wqe_opcode::SEND, 0).timestamp(7000 + u64::from(i))).collect();
            m.push_all(&sends).unwrap();
            let mut got = Vec::new();
            while poll_batch(&mut cq, 5, &mut got) > 0 {}
            assert!(cq.stats().sessions > 0, "{what}: sends compressed");
            let seen: Vec<_> = got.iter().map(|c| (c.wqe_index, c.timestamp)).collect();
            assert_eq!(seen, (0..12).map(|i| (i, 7000)).collect::<Vec<_>>(), "{what}: sends");
        }
    }
}
