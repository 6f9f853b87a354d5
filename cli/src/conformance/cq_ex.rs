//! `cq_ex_fields`, after rdma-core's `tests/test_cqex.py`: RC and UD traffic, an SRQ, errors
//! and flushes polled through rdma-core's extended CQ (`ibv_create_cq_ex` with every
//! standard field, `ibv_start_poll` / `ibv_next_poll` / `ibv_wc_read_*`), compared with the
//! same workloads polled by the run's own backend: the direct one (dvcq validate's first
//! run) or `ibv_poll_cq` (its second). Every field the extended CQ reports is compared
//! against `ibv_poll_cq` and rxe's reader; against a NIC's direct poller, every field verbs
//! define for the completion.

use super::{diff, run, Outcome, Recorder, Workload, WORKLOADS};
use crate::cq::{BackendChoice, BackendKind};
use crate::{Completion, Context, WcFlags, WcStatus};
use dvcq::Error;

/// The workloads run both ways: every opcode with and without immediate data, UD, an SRQ,
/// several QPs on one CQ, a memory window's bind and SEND_WITH_INV, XRC (where the device
/// has it), an error and flushes.
const TRAFFIC: &[&str] = &[
    "rc_send_imm",
    "rc_write_imm",
    "rc_read",
    "ud_send_imm",
    "rc_srq",
    "rc_many_qps",
    "rc_send_inv",
    "xrc_traffic",
    "rc_bad_rkey",
    "rc_flush",
];

/// What the extended CQ reports of `c`: wr_id, status, vendor_err and qp_num always; for a
/// success the opcode, wc_flags, byte_len, the immediate or invalidated rkey (when wc_flags
/// say one is there), src_qp, slid, sl and dlid_path_bits (`ibv_poll_cq(3)`: of an error
/// completion only wr_id, status, qp_num and vendor_err are valid). The extended CQ has no
/// reader for pkey_index, and the rest of [`Completion`] is dvcq's own.
pub fn extended_fields(c: &Completion) -> Completion {
    let mut v = Completion {
        wr_id: c.wr_id,
        status: c.status,
        vendor_err: c.vendor_err,
        qp_num: c.qp_num,
        ..Completion::default()
    };
    if c.status == WcStatus::Success {
        v.opcode = c.opcode;
        v.wc_flags = c.wc_flags;
        v.byte_len = c.byte_len;
        if c.wc_flags.intersects(WcFlags::WITH_IMM | WcFlags::WITH_INV) {
            v.imm_data = c.imm_data;
        }
        v.src_qp = c.src_qp;
        v.slid = c.slid;
        v.sl = c.sl;
        v.dlid_path_bits = c.dlid_path_bits;
    }
    v
}

/// Runs each of [`TRAFFIC`] polled through the extended CQ and through `choice`, and
/// compares them: the normalised records always, and every field the extended CQ reports
/// where the other poller reads the same records (`ibv_poll_cq`, rxe's reader).
pub(super) fn cq_ex_fields(ctx: &Context, choice: BackendChoice) -> Result<Outcome, Error> {
    if ctx.is_model() {
        return Ok(Outcome::skip(format!(
            "{} has no rdma-core extended CQ (a model's CQs are polled by its vendor's dvcq poller only)",
            ctx.name()
        )));
    }
    let mut rec = Recorder::default();
    let mut compared = 0usize;
    let mut skipped = Vec::new();
    let rxe = ctx.info().is_ok_and(|i| i.provider == "rxe");
    for name in TRAFFIC {
        let Some(w): Option<&Workload> = WORKLOADS.iter().find(|w| w.name == *name) else { continue };
        if rxe && *name == "rc_send_inv" {
            // rdma_rxe marks the receive with the kernel's IB_WC_WITH_INVALIDATE (1 << 2),
            // which libibverbs reads as IBV_WC_IP_CSUM_OK: the extended CQ, which reports an
            // invalidated rkey only under IBV_WC_WITH_INV, has none to compare.
            skipped.push(format!(
                "{name} (rxe flags the receive 1 << 2, IBV_WC_IP_CSUM_OK to libibverbs, not IBV_WC_WITH_INV, so the \
                 extended CQ reports no invalidated rkey)"
            ));
            continue;
        }
        let ex = run(ctx, w, BackendChoice::Extended);
        if let Some(why) = &ex.skipped {
            skipped.push(format!("{name} ({why})"));
            continue;
        }
        if ex.backend != BackendKind::Generic || !ex.reason.contains("ibv_start_poll") {
            // The extended CQ could not be made: the first workload says why, once.
            if let Some(p) = ex.problems.first() {
                return Ok(Outcome::skip(format!("no extended CQ on {}: {p}", ctx.name())));
            }
        }
        let other = run(ctx, w, choice);
        let who = match other.backend {
            BackendKind::Generic => "ibv_poll_cq".to_string(),
            b => b.name().to_string(),
        };
        for p in ex.problems.iter() {
            rec.problem(format!("[cq_ex] {p}"));
        }
        for p in other.problems.iter() {
            rec.problem(format!("[{who}] {p}"));
        }
        let what = format!("{name} cq_ex vs {who}");
        for p in diff(&what, &other.records, &ex.records) {
            rec.problem(p);
        }
        let differences = if matches!(other.backend, BackendKind::Generic | BackendKind::Rxe) {
            let view = |v: &[Completion]| v.iter().map(extended_fields).collect::<Vec<_>>();
            super::diff_raw(&what, &view(&other.raw), &view(&ex.raw))
        } else {
            // A direct poller of a NIC writes only what verbs define (rdma-core's extended CQ
            // reads every field from the CQE): compared on those ([`super::defined_fields`]).
            super::diff_raw(&what, &other.defined, &ex.defined)
        };
        for p in differences {
            rec.problem(p);
        }
        compared += ex.raw.len();
    }
    let fields = "opcode, status, vendor_err, byte_len, imm/inv, qp_num, src_qp, wc_flags, slid, sl, dlid_path_bits";
    let mut summary = format!("{compared} completions through the extended CQ equal, field by field ({fields})");
    if !skipped.is_empty() {
        summary.push_str(&format!("; not run: {}", skipped.join(", ")));
    }
    Ok(Outcome::checked(rec, summary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WcOpcode;

    /// The comparison keeps exactly what the extended CQ reports: a field verbs leave
    /// undefined (an error's opcode, an immediate without WITH_IMM) or that it has no reader
    /// for (pkey_index) cannot make two pollers differ; any field it reports can.
    #[test]
    fn only_the_fields_the_extended_cq_reports_are_compared() {
        let ok = Completion {
            wr_id: 7,
            qp_num: 0x11,
            opcode: WcOpcode::Recv,
            byte_len: 64,
            imm_data: 0xdead,
            src_qp: 0x12,
            slid: 3,
            sl: 1,
            dlid_path_bits: 2,
            pkey_index: 5,
            vendor_err: 0,
            ..Completion::default()
        };
        let v = extended_fields(&ok);
        assert_eq!(
            (v.wr_id, v.qp_num, v.byte_len, v.src_qp, v.slid, v.sl, v.dlid_path_bits),
            (7, 0x11, 64, 0x12, 3, 1, 2)
        );
        assert_eq!((v.imm_data, v.pkey_index), (0, 0), "no WITH_IMM/WITH_INV: no immediate; no pkey reader");
        let with_imm = Completion { wc_flags: WcFlags::WITH_IMM, ..ok };
        assert_eq!(extended_fields(&with_imm).imm_data, 0xdead);
        let inv = Completion { wc_flags: WcFlags::WITH_INV, ..ok };
        assert_eq!(extended_fields(&inv).imm_data, 0xdead, "the invalidated rkey");
        for changed in [
            Completion { opcode: WcOpcode::RecvRdmaWithImm, ..ok },
            Completion { byte_len: 65, ..ok },
            Completion { src_qp: 0x13, ..ok },
            Completion { wc_flags: WcFlags::GRH, ..ok },
            Completion { sl: 2, ..ok },
            Completion { slid: 4, ..ok },
            Completion { dlid_path_bits: 1, ..ok },
            Completion { vendor_err: 1, ..ok },
        ] {
            assert_ne!(extended_fields(&changed), v, "{changed:?}");
        }
        let err = Completion { status: WcStatus::WrFlushErr, vendor_err: 0x249, ..ok };
        let e = extended_fields(&err);
        assert_eq!((e.wr_id, e.qp_num, e.vendor_err, e.status), (7, 0x11, 0x249, WcStatus::WrFlushErr));
        assert_eq!(e, extended_fields(&Completion { opcode: WcOpcode::Send, byte_len: 0, src_qp: 0, ..err }));
    }
}
