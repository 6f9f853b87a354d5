//! Traffic whose completions are taken in event mode, after rdma-core's
//! `tests/test_cq_events.py` (UD and RC traffic on a CQ with a completion channel): every
//! completion comes through [`crate::Cq::wait`] (poll, arm, poll again, sleep on the
//! channel, drain).

use super::workloads::{both_ways, caps, check_data, ok, outcome, pattern, post_recvs, recv, rig};
use super::{Outcome, Record, WAIT};
use crate::cq::{BackendChoice, CqOptions};
use crate::verbs::{QpType, SendOp, SendWr, UdDest, DEFAULT_QKEY, UD_GRH_BYTES};
use crate::{Completion, Context, WcFlags};
use dvcq::Error;

/// Round trips, as in rdma-core's test (`self.iters = 100`).
const ITERS: u64 = 100;

/// How long after the wait begins each send is posted.
const SEND_DELAY: std::time::Duration = std::time::Duration::from_millis(1);

/// `ITERS` SENDs from QP 0 to QP 1 (RC, or UD with the GRH slot in each receive), each
/// message's two completions taken through `Cq::wait` before the next is sent. At least one
/// completion must have come by an event, not by the wait's first poll.
fn events(ctx: &Context, choice: BackendChoice, qp_type: QpType) -> Result<Outcome, Error> {
    let channel = ctx.create_channel()?;
    let mut cq = ctx.create_cq_on(&channel, CqOptions::new(64).backend(choice))?;
    let c = caps(16, 16);
    let mut r = rig(ctx, qp_type, &cq, &cq, c, 2)?;
    let ud = qp_type == QpType::Ud;
    let dest = if ud {
        Some(UdDest { qpn: r.qps[1].qpn(), qkey: DEFAULT_QKEY, endpoint: r.qps[1].endpoint()? })
    } else {
        None
    };
    let grh = if ud { UD_GRH_BYTES } else { 0 };
    let slot = u64::from(grh) + 64;
    let mut expected: Vec<Record> = Vec::new();
    let mut wcs = [Completion::default(); 2];
    for i in 0..ITERS {
        let len = 1 + (i % 60) as u32;
        // Each round trip receives at offset 0, cleared first so old data cannot pass.
        r.mrs[1].write(0, &vec![0u8; slot as usize])?;
        post_recvs(&mut r.qps[1], &r.mrs[1], 2000 + i, 1, slot as u32)?;
        r.mrs[0].write(0, &pattern(i, len as usize))?;
        let sg = [r.mrs[0].slice(0, len)?];
        let wr = SendWr::new(i, SendOp::Send, &sg);
        let wr = match dest {
            Some(d) => wr.to(d),
            None => wr,
        };
        expected.push(ok(0, i, crate::WcOpcode::Send));
        let mut rv = recv(1, 2000 + i, len + grh);
        if ud {
            rv.flags = WcFlags::GRH.bits();
            rv.src = Some(0);
        }
        expected.push(rv);
        // The send is posted from another thread a little later, so the wait below usually
        // finds the CQ empty, arms it and sleeps until the completion's event (a model
        // completes work at the doorbell: posted first, it would always be polled at once).
        let (sender, rec) = (&mut r.qps[0], &mut r.rec);
        let (got, posted) = std::thread::scope(|s| {
            let post = s.spawn(move || {
                std::thread::sleep(SEND_DELAY);
                sender.post_send(&[wr])
            });
            let mut got = 0;
            while got < 2 {
                match cq.wait(&mut wcs[..2 - got], Some(WAIT)) {
                    Ok([]) => {
                        rec.problem(format!("round trip {i}: no completion event within {WAIT:?}"));
                        break;
                    }
                    Ok(polled) => {
                        for w in polled {
                            rec.record(w);
                        }
                        got += polled.len();
                    }
                    Err(e) => {
                        rec.problem(format!("round trip {i}: {e}"));
                        break;
                    }
                }
            }
            (got, post.join())
        });
        match posted {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => r.rec.problem(format!("round trip {i}: the posting thread panicked")),
        }
        if got < 2 {
            break;
        }
        check_data(&mut r.rec, "event-mode receive", &r.mrs[1], u64::from(grh), &pattern(i, len as usize));
    }
    let taken = cq.events_taken();
    if taken == 0 {
        r.rec.problem("no completion event was taken: every completion was found by polling");
    }
    let mut o = outcome(vec![(cq, both_ways(2, c))], r.rec, expected);
    o.summary = Some(format!("{} completions as expected, taken through Cq::wait ({taken} events)", 2 * ITERS));
    Ok(o)
}

/// RC traffic in event mode (`test_cq_events_rc`).
pub(super) fn rc_events(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    events(ctx, choice, QpType::Rc)
}

/// UD traffic in event mode (`test_cq_events_ud`).
pub(super) fn ud_events(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    events(ctx, choice, QpType::Ud)
}
