//! A CQ in error, seen where a busy poller looks: 64 RDMA WRITEs on a CQ of 15 entries, as
//! a new user writes them, on both models. The poll loop gets every completion that landed,
//! in order, then one CQ error item with its reason; `Cq::error` and `Cq::take_error` keep
//! answering; posting afterwards answers what the hardware answers (`Ok`, then a full
//! queue), and nothing more executes or completes.

use dvcq::verbs::{Access, QpType, SendOp, SendWr};
use dvcq::{Completion, Context, Cq, CqErrorReason, CqOptions, Error, FaultKind, Mr, Qp, QpInit, WcOpcode, WcStatus};
use std::time::Duration;

const MODELS: [&str; 2] = ["model-mlx5", "model-e810"];
/// The depth a new user asks for.
const DEPTH: u32 = 15;
/// The WRITEs they post (the QP's default send queue takes 64).
const POSTED: u64 = 64;

/// The CQEs a CQ of [`DEPTH`] holds before it overruns: mlx5 rounds `depth + 1` up to a
/// power of two and fills every slot; irdma GEN2 gives `2 (depth + 1)` slots and keeps one
/// free.
fn capacity(dev: &str) -> u64 {
    match dev {
        "model-mlx5" => u64::from(DEPTH + 1).next_power_of_two(),
        _ => 2 * u64::from(DEPTH + 1) - 1,
    }
}

/// An RC QP connected to itself, completing into `cq`, and a region of 4096 bytes whose
/// first half holds each WRITE's source bytes (8 per WRITE) and second half its target.
fn rig(ctx: &Context, cq: &Cq) -> (Qp, Mr, dvcq::Pd) {
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    let src: Vec<u8> = (0..2048u32).map(|i| (i % 251) as u8 + 1).collect();
    mr.write(0, &src).unwrap();
    (qp, mr, pd)
}

/// WRITE `i`: 8 source bytes at `8 i` to `2048 + 8 i`.
fn write(qp: &mut Qp, mr: &Mr, i: u64) -> Result<(), Error> {
    let sg = [mr.slice(8 * i, 8)?];
    qp.post_send(&[SendWr::new(i, SendOp::Write(mr.remote().at(2048 + 8 * i)), &sg)])
}

/// Whether WRITE `i`'s bytes reached their target.
fn landed(mr: &Mr, i: u64) -> bool {
    let (mut src, mut dst) = ([0u8; 8], [0u8; 8]);
    mr.read(8 * i, &mut src).unwrap();
    mr.read(2048 + 8 * i, &mut dst).unwrap();
    assert!(dst == src || dst == [0; 8], "WRITE {i}: target holds {dst:?}");
    dst == src
}

/// A busy poll loop, as a new user writes it: until a poll returns the CQ error item.
/// Returns the completions before it and the item; panics after a million polls.
fn poll_until_error(cq: &mut Cq) -> (Vec<Completion>, Completion) {
    let mut got = Vec::new();
    let mut out = [Completion::default(); 8];
    for _ in 0..1_000_000 {
        let n = cq.poll_count(&mut out);
        for (k, c) in out[..n].iter().enumerate() {
            if c.cq_error().is_some() {
                assert_eq!(k + 1, n, "the CQ error item is the last of its batch");
                return (got, *c);
            }
            got.push(*c);
        }
    }
    panic!("a busy poll loop never learned that its CQ is in error ({} completions polled)", got.len())
}

#[test]
fn a_busy_poll_loop_sees_its_cq_overrun_with_the_reason_after_everything_that_landed() {
    for dev in MODELS {
        let ctx = Context::open(dev).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(DEPTH)).unwrap();
        let (mut qp, mr, _pd) = rig(&ctx, &cq);
        for i in 0..POSTED {
            // The hardware takes every post: the WQE is written, the doorbell rung.
            write(&mut qp, &mr, i).unwrap_or_else(|e| panic!("{dev}: post {i}: {e}"));
        }
        let (got, item) = poll_until_error(&mut cq);
        let cap = capacity(dev);
        // Nothing polled is lost: the first `cap` WRITEs, in order, all successful.
        let ids: Vec<u64> = got.iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, (0..cap).collect::<Vec<_>>(), "{dev}");
        assert!(got.iter().all(|c| c.is_ok() && c.opcode == WcOpcode::RdmaWrite), "{dev}: {got:?}");
        // The item: a fault item saying why, after how many completions.
        assert_eq!(item.cq_error(), Some(CqErrorReason::Overrun), "{dev}");
        assert_eq!(item.fault().map(|f| (f.kind, f.position)), Some((FaultKind::CqError, cap as u32)), "{dev}");
        assert_eq!(item.status, WcStatus::GeneralErr, "{dev}: code that checks only the status sees a failure");
        // It came once: the CQ writes nothing more, and polls return nothing.
        let mut out = [Completion::default(); 8];
        for _ in 0..100 {
            assert_eq!(cq.poll_count(&mut out), 0, "{dev}");
        }
        // The handle keeps answering, typed, whoever asks and however often.
        let expected = Error::CqInError { device: dev.into(), cq: cq.id(), reason: CqErrorReason::Overrun };
        assert_eq!(cq.error(), Some(expected.clone()), "{dev}");
        assert_eq!(cq.take_error(), Some(expected.clone()), "{dev}");
        assert_eq!(cq.take_error(), Some(expected.clone()), "{dev}: the CQ stays in error");
        assert!(expected.to_string().contains("overran"), "{expected}");
        let s = cq.stats();
        assert_eq!((s.overruns, s.completions, s.faults, s.errors), (Some(1), cap + 1, 1, 1), "{dev}");
        assert_eq!(s.errors_by_status.get(WcStatus::GeneralErr), 1, "{dev}");
        // The WRITE whose CQE overran executed; the QP went to error there, so the ones
        // after it flushed and wrote nothing.
        let executed: Vec<u64> = (0..POSTED).filter(|&i| landed(&mr, i)).collect();
        assert_eq!(executed, (0..=cap).collect::<Vec<_>>(), "{dev}");
        let counters = ctx.counters(std::path::Path::new("/nonexistent")).unwrap();
        assert_eq!(counters.get("model", "model", "qps_in_error"), Some(1), "{dev}");
        assert_eq!(counters.get("model", "model", "cq_overflow"), Some(1), "{dev}");
    }
}

/// Posting to the QP after its CQ went into error answers what the hardware answers: the
/// post succeeds (the work flushes, nothing executes, no completion arrives) until the send
/// queue, whose room only polled completions give back, is full; then a typed
/// `Error::QueueFull`.
#[test]
fn posting_after_the_cq_error_succeeds_flushes_and_then_finds_the_queue_full() {
    for dev in MODELS {
        let ctx = Context::open(dev).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(DEPTH)).unwrap();
        let (mut qp, mr, _pd) = rig(&ctx, &cq);
        for i in 0..POSTED {
            write(&mut qp, &mr, i).unwrap();
        }
        poll_until_error(&mut cq);
        let mut accepted = 0;
        let refusal = loop {
            // Rewrites of WRITEs that flushed: had one executed, its target would change.
            match write(&mut qp, &mr, POSTED - 1 - accepted % 8) {
                Ok(()) => accepted += 1,
                Err(e) => break e,
            }
            assert!(accepted <= 4096, "{dev}: posts never ran out of room");
        };
        assert!(accepted > 0, "{dev}: the first post after the error is taken, as on the hardware");
        assert!(matches!(refusal, Error::QueueFull { index: 0, qpn, .. } if qpn == qp.qpn()), "{dev}: {refusal:?}");
        assert!(refusal.to_string().contains("the queue is full"), "{refusal}");
        let mut out = [Completion::default(); 8];
        assert_eq!(cq.poll_count(&mut out), 0, "{dev}: nothing completes on a CQ in error");
        assert!((POSTED - 8..POSTED).all(|i| !landed(&mr, i)), "{dev}: a post after the error executed");
        assert!(matches!(cq.error(), Some(Error::CqInError { reason: CqErrorReason::Overrun, .. })), "{dev}");
    }
}

/// The error reaches a waiter the same way: `wait` returns what landed, then the item,
/// then the typed error at once, every time.
#[test]
fn a_waiter_gets_what_landed_then_the_item_then_the_typed_error() {
    for dev in MODELS {
        let ctx = Context::open(dev).unwrap();
        let ch = ctx.create_channel().unwrap();
        let mut cq = ctx.create_cq_on(&ch, CqOptions::new(DEPTH)).unwrap();
        let (mut qp, mr, _pd) = rig(&ctx, &cq);
        for i in 0..POSTED {
            write(&mut qp, &mr, i).unwrap();
        }
        let cap = capacity(dev);
        let mut out = vec![Completion::default(); 64];
        let got = cq.wait(&mut out, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(got.len() as u64, cap, "{dev}: one wait takes what landed");
        assert!(got.iter().all(|c| c.cq_error().is_none()), "{dev}");
        let got = cq.wait(&mut out, Some(Duration::from_secs(5))).unwrap();
        assert_eq!((got.len(), got[0].cq_error()), (1, Some(CqErrorReason::Overrun)), "{dev}");
        for _ in 0..2 {
            let t = std::time::Instant::now();
            let e = cq.wait(&mut out, Some(Duration::from_secs(5))).unwrap_err();
            assert!(matches!(e, Error::CqInError { reason: CqErrorReason::Overrun, .. }), "{dev}: {e}");
            assert!(t.elapsed() < Duration::from_secs(2), "{dev}: the error came at once");
        }
    }
}

/// Failed completions become typed errors a program matches on: a remote access error (a
/// WRITE with a wrong rkey) and the flush behind it.
#[test]
fn failed_completions_are_typed_errors() {
    for dev in MODELS {
        let ctx = Context::open(dev).unwrap();
        let mut cq = ctx.create_cq(CqOptions::new(64)).unwrap();
        let (mut qp, mr, _pd) = rig(&ctx, &cq);
        let sg = [mr.slice(0, 8).unwrap()];
        let mut to = mr.remote().at(2048);
        to.rkey ^= 0x00ff_ff00;
        qp.post_send(&[SendWr::new(1, SendOp::Write(to), &sg)]).unwrap();
        write(&mut qp, &mr, 2).unwrap();
        let mut out = [Completion::default(); 8];
        let n = cq.poll_count(&mut out);
        let errors: Vec<Error> = out[..n].iter().filter_map(|c| Error::of_completion(dev, cq.id(), c)).collect();
        assert_eq!(errors.len(), 2, "{dev}: {errors:?}");
        assert!(
            matches!(&errors[0], Error::WorkFailed { wr_id: 1, status: WcStatus::RemAccessErr, qpn, .. } if *qpn == qp.qpn()),
            "{dev}: {:?}",
            errors[0]
        );
        assert!(
            matches!(&errors[1], Error::WorkFailed { wr_id: 2, status: WcStatus::WrFlushErr, .. }),
            "{dev}: {:?}",
            errors[1]
        );
        assert_eq!(cq.error(), None, "{dev}: a failed completion does not put the CQ in error");
        assert_eq!(cq.take_error(), None, "{dev}");
    }
}

/// A poll into an empty slice cannot hold the item, so it keeps it for the next poll.
#[test]
fn the_item_waits_for_a_poll_with_room() {
    let ctx = Context::open("model-mlx5").unwrap();
    let mut cq = ctx.create_cq(CqOptions::new(1)).unwrap();
    let (mut qp, mr, _pd) = rig(&ctx, &cq);
    for i in 0..4 {
        write(&mut qp, &mr, i).unwrap();
    }
    let mut out = [Completion::default(); 2];
    assert_eq!(cq.poll_count(&mut out), 2);
    assert_eq!(cq.poll_count(&mut []), 0);
    assert_eq!(cq.poll_count(&mut out), 1);
    assert_eq!(out[0].cq_error(), Some(CqErrorReason::Overrun));
    assert_eq!(out[0].wr_id, 2, "two completions came before it");
}
