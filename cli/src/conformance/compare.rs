//! Comparing completions: a workload's records with what it expects ([`diff`]), and two
//! pollers of one device with each other, field by field ([`cross`], [`diff_raw`]).
//!
//! Two pollers of one device compare on every field of `struct ibv_wc` that verbs define
//! for the completion ([`defined_fields`], after `ibv_poll_cq(3)`), less the fields the
//! device's provider never writes ([`provider_exceptions`]); where both read the same
//! kernel records (rxe's reader and `ibv_poll_cq`), on every field of [`Completion`].

use super::{Record, Run, ROLE_MARK};
use crate::cq::BackendKind;
use crate::{Completion, WcFlags, WcOpcode, WcStatus};

impl Record {
    /// The fields in which `self` and `other` differ, by name (none: they are equal).
    pub fn differences(&self, other: &Record) -> Vec<&'static str> {
        // Destructured, so that a field added to `Record` must be compared here too.
        let Record { qp, wr_id, status, opcode, byte_len, imm, flags, src } = *self;
        let mut d = Vec::new();
        let mut field = |name: &'static str, same: bool| {
            if !same {
                d.push(name);
            }
        };
        field("qp", qp == other.qp);
        field("wr_id", wr_id == other.wr_id);
        field("status", status == other.status);
        field("opcode", opcode == other.opcode);
        field("byte_len", byte_len == other.byte_len);
        field("imm", imm == other.imm);
        field("flags", flags == other.flags);
        field("src", src == other.src);
        d
    }
}

/// The fields in which two completions differ, by name: every field of [`Completion`] (none:
/// they are equal).
pub fn completion_differences(a: &Completion, b: &Completion) -> Vec<&'static str> {
    // Destructured, so that a field added to `Completion` must be compared here too.
    let Completion {
        wr_id,
        byte_len,
        imm_data,
        qp_num,
        wc_flags,
        status,
        opcode,
        fault_kind,
        sl,
        wqe_index,
        pkey_index,
        src_qp,
        vendor_err,
        slid,
        dlid_path_bits,
        hdr_ok,
        hdr_type,
        checksum,
        timestamp,
        flow_tag_hash,
    } = *a;
    let mut d = Vec::new();
    let mut field = |name: &'static str, same: bool| {
        if !same {
            d.push(name);
        }
    };
    field("wr_id", wr_id == b.wr_id);
    field("status", status == b.status);
    field("opcode", opcode == b.opcode);
    field("vendor_err", vendor_err == b.vendor_err);
    field("byte_len", byte_len == b.byte_len);
    field("imm_data", imm_data == b.imm_data);
    field("qp_num", qp_num == b.qp_num);
    field("src_qp", src_qp == b.src_qp);
    field("wc_flags", wc_flags == b.wc_flags);
    field("pkey_index", pkey_index == b.pkey_index);
    field("slid", slid == b.slid);
    field("sl", sl == b.sl);
    field("dlid_path_bits", dlid_path_bits == b.dlid_path_bits);
    field("wqe_index", wqe_index == b.wqe_index);
    field("fault", fault_kind == b.fault_kind);
    field("hdr_ok", hdr_ok == b.hdr_ok);
    field("hdr_type", hdr_type == b.hdr_type);
    field("checksum", checksum == b.checksum);
    field("timestamp", timestamp == b.timestamp);
    field("flow_tag_hash", flow_tag_hash == b.flow_tag_hash);
    d
}

/// What verbs define of `c` (`ibv_poll_cq(3)`), every other field zero: `wr_id`, `status`,
/// `qp_num` (and dvcq's fault marker) always; `vendor_err` of an error (of an error nothing
/// else is valid); of a success the `opcode` and `wc_flags`, `byte_len` of a receive, an
/// RDMA READ or an atomic (a send's or write's is left undefined: mlx5 does not write it),
/// and of a receive the immediate or invalidated rkey (when `inv`, or when `wc_flags` say
/// one is there), `slid`, `sl` and `dlid_path_bits`, and `src_qp` on a UD QP (`ud`; verbs
/// define it for UD only). `pkey_index` is defined for GSI QPs only, which no workload makes
/// (mlx5 fills it from the word that holds the immediate or rkey, so two runs of a workload
/// differ there). Requester completions carry no receive fields: mlx5 sets `WITH_IMM` on a
/// SEND_WITH_IMM's but writes no immediate.
pub fn defined_fields(c: &Completion, ud: bool, inv: bool) -> Completion {
    let mut v = Completion {
        wr_id: c.wr_id,
        status: c.status,
        qp_num: c.qp_num,
        fault_kind: c.fault_kind,
        ..Completion::default()
    };
    if c.status != WcStatus::Success {
        v.vendor_err = c.vendor_err;
        return v;
    }
    v.opcode = c.opcode;
    v.wc_flags = c.wc_flags;
    let recv = c.opcode.is_recv();
    if recv || matches!(c.opcode, WcOpcode::RdmaRead | WcOpcode::CompSwap | WcOpcode::FetchAdd) {
        v.byte_len = c.byte_len;
    }
    if recv {
        if inv || c.wc_flags.intersects(WcFlags::WITH_IMM | WcFlags::WITH_INV) {
            v.imm_data = c.imm_data;
        }
        if ud {
            v.src_qp = c.src_qp;
        }
        v.slid = c.slid;
        v.sl = c.sl;
        v.dlid_path_bits = c.dlid_path_bits;
    }
    v
}

/// Clears from `v` (a [`defined_fields`] view) the fields `provider`'s `ibv_poll_cq` never
/// writes, which two pollers of its devices therefore cannot agree on: on `irdma`, `slid`,
/// `sl` and `dlid_path_bits` (rdma-core's `irdma_process_cqe` writes none of them, so
/// `ibv_poll_cq` leaves what the caller's array held; dvcq's irdma poller writes `sl` as 0
/// and leaves the other two, as [`Completion`] documents). Every other provider writes every
/// field [`defined_fields`] keeps.
pub fn provider_exceptions(provider: &str, v: &mut Completion) {
    if provider == "irdma" {
        v.slid = 0;
        v.sl = 0;
        v.dlid_path_bits = 0;
    }
}

/// Sorts records into per-QP order, keeping each QP's own order.
fn per_qp(records: &[Record]) -> Vec<Record> {
    let mut v = records.to_vec();
    v.sort_by_key(|r| r.qp);
    v
}

/// The differences between two record lists (per QP, in order), one line each, naming the
/// fields that differ.
pub fn diff(what: &str, want: &[Record], got: &[Record]) -> Vec<String> {
    let (want, got) = (per_qp(want), per_qp(got));
    let mut out = Vec::new();
    for i in 0..want.len().max(got.len()) {
        match (want.get(i), got.get(i)) {
            (Some(w), Some(g)) => {
                let d = w.differences(g);
                if !d.is_empty() {
                    out.push(format!("{what} #{i}: expected {w}, got {g} (differs in {})", d.join(", ")));
                }
            }
            (Some(w), None) => out.push(format!("{what} #{i}: expected {w}, got nothing")),
            (None, Some(g)) => out.push(format!("{what} #{i}: unexpected {g}")),
            (None, None) => {}
        }
    }
    out
}

/// The differences between two pollers' completions of the same workload on the same
/// device, field by field, per QP in the order each polled them (the order across QPs on one
/// CQ is the device's), one line each naming the fields that differ. Every field of
/// [`Completion`] is compared: pass [`defined_fields`] views where some are undefined.
pub fn diff_raw(what: &str, want: &[Completion], got: &[Completion]) -> Vec<String> {
    let show = |c: &Completion| {
        format!(
            "wr_id={} {} {} byte_len={} imm={:#x} flags={:#x} src_qp={:#x} vendor_err={:#x} \
             pkey={} slid={} sl={} path_bits={} wqe_index={} fault={:?}",
            c.wr_id,
            c.status.name(),
            c.opcode.name(),
            c.byte_len,
            c.imm_data,
            c.wc_flags.bits(),
            c.src_qp,
            c.vendor_err,
            c.pkey_index,
            c.slid,
            c.sl,
            c.dlid_path_bits,
            c.wqe_index,
            c.fault(),
        )
    };
    let mut qps: Vec<u32> = want.iter().chain(got).map(|c| c.qp_num).collect();
    qps.sort_unstable();
    qps.dedup();
    let mut out = Vec::new();
    for qp in qps {
        let of = |v: &[Completion]| v.iter().filter(|c| c.qp_num == qp).copied().collect::<Vec<_>>();
        let (w, g) = (of(want), of(got));
        let name = if qp & ROLE_MARK == ROLE_MARK { format!("qp{}", qp & !ROLE_MARK) } else { format!("qp {qp:#x}") };
        for i in 0..w.len().max(g.len()) {
            match (w.get(i), g.get(i)) {
                (Some(a), Some(b)) => {
                    let d = completion_differences(a, b);
                    if !d.is_empty() {
                        out.push(format!(
                            "{what} {name} #{i}: expected {}, got {} (differs in {})",
                            show(a),
                            show(b),
                            d.join(", ")
                        ));
                    }
                }
                (Some(a), None) => out.push(format!("{what} {name} #{i}: expected {}, got nothing", show(a))),
                (None, Some(b)) => out.push(format!("{what} {name} #{i}: unexpected {}", show(b))),
                (None, None) => {}
            }
        }
    }
    out
}

/// Where the direct run of a workload differs from its `ibv_poll_cq` run on the same device:
/// the normalised records, and the completions field by field, every field where both
/// pollers read the same kernel records (rxe's reader and `ibv_poll_cq` both copy the
/// kernel's `ib_uverbs_wc`), else every field verbs define ([`Run::defined`]). Nothing when
/// either run was skipped: a device may refuse a check to one poller only (dvcq's direct
/// mlx5 CQ cannot be resized, say), and the skip says so.
pub fn cross(what: &str, generic: &Run, direct: &Run) -> Vec<String> {
    if generic.skipped.is_some() || direct.skipped.is_some() {
        return Vec::new();
    }
    let mut out = diff(what, &generic.records, &direct.records);
    if direct.backend == BackendKind::Rxe && generic.backend == BackendKind::Generic {
        out.extend(diff_raw(what, &generic.raw, &direct.raw));
    } else {
        out.extend(diff_raw(what, &generic.defined, &direct.defined));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            qp: 1,
            wr_id: 7,
            status: WcStatus::Success,
            opcode: Some(WcOpcode::Recv),
            byte_len: Some(64),
            imm: Some(0xdead),
            flags: WcFlags::WITH_IMM.bits(),
            src: Some(0),
        }
    }

    /// A record differing from another in any one field is a difference, and the line names
    /// that field alone; equal records are none.
    #[test]
    fn records_differing_in_any_one_field_differ() {
        let r = record();
        let table: [(&str, Record); 8] = [
            ("qp", Record { qp: 2, ..r }),
            ("wr_id", Record { wr_id: 8, ..r }),
            ("status", Record { status: WcStatus::RemAccessErr, ..r }),
            ("opcode", Record { opcode: Some(WcOpcode::RecvRdmaWithImm), ..r }),
            ("byte_len", Record { byte_len: Some(65), ..r }),
            ("imm", Record { imm: Some(0xbeef), ..r }),
            ("flags", Record { flags: WcFlags::GRH.bits() | WcFlags::WITH_IMM.bits(), ..r }),
            ("src", Record { src: Some(1), ..r }),
        ];
        assert!(diff("w", &[r], &[r]).is_empty());
        for (field, other) in table {
            assert_eq!(r.differences(&other), [field]);
            let d = diff("w", &[r], &[other]);
            assert_eq!(d.len(), 1, "{field}: {d:?}");
            assert!(d[0].ends_with(&format!("(differs in {field})")), "{field}: {}", d[0]);
            // A field that is there against one that is not differs too.
            let absent = match field {
                "opcode" => Some(Record { opcode: None, ..r }),
                "byte_len" => Some(Record { byte_len: None, ..r }),
                "imm" => Some(Record { imm: None, ..r }),
                "src" => Some(Record { src: None, ..r }),
                _ => None,
            };
            if let Some(a) = absent {
                assert_eq!(diff("w", &[r], &[a]).len(), 1, "{field} left out");
            }
        }
        let two = diff("w", &[r], &[Record { wr_id: 9, byte_len: None, ..r }]);
        assert!(two[0].ends_with("(differs in wr_id, byte_len)"), "{}", two[0]);
        assert_eq!(
            diff("w", &[r, r], &[r]),
            ["w #1: expected qp1 wr_id=7 IBV_WC_SUCCESS IBV_WC_RECV byte_len=64 \
                    imm=0xdead flags=0x2 src=qp0, got nothing"]
        );
    }

    fn completion() -> Completion {
        Completion {
            wr_id: 7,
            byte_len: 64,
            imm_data: 0xdead,
            qp_num: ROLE_MARK | 1,
            wc_flags: WcFlags::WITH_IMM | WcFlags::GRH,
            status: WcStatus::Success,
            opcode: WcOpcode::Recv,
            sl: 3,
            wqe_index: 5,
            pkey_index: 2,
            src_qp: ROLE_MARK,
            vendor_err: 0,
            slid: 9,
            dlid_path_bits: 4,
            timestamp: 1000,
            ..Completion::default()
        }
    }

    /// Every field of `struct ibv_wc` (and dvcq's own) in the whole-record comparison: a
    /// completion differing in any one of them is one line naming it.
    #[test]
    fn completions_differing_in_any_one_field_differ() {
        let c = completion();
        let table: [(&str, Completion); 20] = [
            ("wr_id", Completion { wr_id: 8, ..c }),
            ("status", Completion { status: WcStatus::WrFlushErr, ..c }),
            ("opcode", Completion { opcode: WcOpcode::RecvRdmaWithImm, ..c }),
            ("vendor_err", Completion { vendor_err: 0x244, ..c }),
            ("byte_len", Completion { byte_len: 65, ..c }),
            ("imm_data", Completion { imm_data: 0xbeef, ..c }),
            ("qp_num", Completion { qp_num: ROLE_MARK | 2, ..c }),
            ("src_qp", Completion { src_qp: ROLE_MARK | 2, ..c }),
            ("wc_flags", Completion { wc_flags: WcFlags::WITH_IMM, ..c }),
            ("pkey_index", Completion { pkey_index: 3, ..c }),
            ("slid", Completion { slid: 10, ..c }),
            ("sl", Completion { sl: 4, ..c }),
            ("dlid_path_bits", Completion { dlid_path_bits: 5, ..c }),
            ("wqe_index", Completion { wqe_index: 6, ..c }),
            ("fault", Completion { fault_kind: provider_fault(), ..c }),
            ("hdr_ok", Completion { hdr_ok: 1, ..c }),
            ("hdr_type", Completion { hdr_type: 1, ..c }),
            ("checksum", Completion { checksum: 1, ..c }),
            ("timestamp", Completion { timestamp: 1001, ..c }),
            ("flow_tag_hash", Completion { flow_tag_hash: 1, ..c }),
        ];
        assert!(diff_raw("w", &[c], &[c]).is_empty());
        for (field, other) in table {
            assert_eq!(completion_differences(&c, &other), [field]);
            let d = diff_raw("w", &[c], &[other]);
            // A different QP is two lines: one QP's completion missing, the other's extra.
            let lines = if field == "qp_num" { 2 } else { 1 };
            assert_eq!(d.len(), lines, "{field}: {d:?}");
            if lines == 1 {
                assert!(d[0].ends_with(&format!("(differs in {field})")), "{field}: {}", d[0]);
            }
        }
    }

    fn provider_fault() -> crate::FaultKind {
        crate::FaultKind::UnknownQp
    }

    /// The view two pollers of a device compare on: each field verbs define for the
    /// completion can make them differ, and a field verbs leave undefined cannot.
    #[test]
    fn the_defined_fields_are_those_verbs_define_for_the_completion() {
        let recv = completion();
        let v = |c: &Completion| defined_fields(c, true, false);
        let base = v(&recv);
        // A successful UD receive: every ibv_wc field but pkey_index (GSI only).
        for (field, other) in [
            ("wr_id", Completion { wr_id: 8, ..recv }),
            ("status", Completion { status: WcStatus::LocLenErr, ..recv }),
            ("opcode", Completion { opcode: WcOpcode::RecvRdmaWithImm, ..recv }),
            ("byte_len", Completion { byte_len: 65, ..recv }),
            ("imm_data", Completion { imm_data: 0xbeef, ..recv }),
            ("qp_num", Completion { qp_num: ROLE_MARK | 2, ..recv }),
            ("src_qp", Completion { src_qp: ROLE_MARK | 2, ..recv }),
            ("wc_flags", Completion { wc_flags: WcFlags::WITH_IMM, ..recv }),
            ("slid", Completion { slid: 10, ..recv }),
            ("sl", Completion { sl: 4, ..recv }),
            ("dlid_path_bits", Completion { dlid_path_bits: 5, ..recv }),
        ] {
            assert_ne!(v(&other), base, "{field} is compared on a receive");
        }
        for (field, other) in [
            ("pkey_index", Completion { pkey_index: 3, ..recv }),
            ("vendor_err", Completion { vendor_err: 0x244, ..recv }),
            ("wqe_index", Completion { wqe_index: 6, ..recv }),
            ("timestamp", Completion { timestamp: 1001, ..recv }),
        ] {
            assert_eq!(v(&other), base, "{field} is not compared on a successful receive");
        }
        // No WITH_IMM/WITH_INV: the immediate is undefined, unless the device marks an
        // invalidation with a bit of its own (`inv`).
        let plain = Completion { wc_flags: WcFlags::empty(), ..recv };
        assert_eq!(v(&Completion { imm_data: 1, ..plain }), v(&plain));
        assert_ne!(
            defined_fields(&Completion { imm_data: 1, ..plain }, true, true),
            defined_fields(&plain, true, true)
        );
        assert_ne!(
            v(&Completion { wc_flags: WcFlags::WITH_INV, imm_data: 1, ..plain }),
            v(&Completion { wc_flags: WcFlags::WITH_INV, ..plain })
        );
        // src_qp is defined on UD only.
        let rc = |c: &Completion| defined_fields(c, false, false);
        assert_eq!(rc(&Completion { src_qp: 1, ..recv }), rc(&recv));
        // A send: its byte_len and every receive field undefined.
        let send = Completion { opcode: WcOpcode::Send, wc_flags: WcFlags::WITH_IMM, ..recv };
        for other in [
            Completion { byte_len: 1, ..send },
            Completion { imm_data: 1, ..send },
            Completion { src_qp: 1, ..send },
            Completion { slid: 1, ..send },
            Completion { sl: 1, ..send },
            Completion { dlid_path_bits: 1, ..send },
        ] {
            assert_eq!(v(&other), v(&send), "{other:?}");
        }
        assert_ne!(v(&Completion { wc_flags: WcFlags::empty(), ..send }), v(&send), "a send's flags are compared");
        // RDMA READ and atomics: byte_len defined.
        for op in [WcOpcode::RdmaRead, WcOpcode::CompSwap, WcOpcode::FetchAdd] {
            let c = Completion { opcode: op, ..send };
            assert_ne!(v(&Completion { byte_len: 1, ..c }), v(&c), "{op:?}");
        }
        // An error: wr_id, status, qp_num and vendor_err only.
        let err = Completion { status: WcStatus::WrFlushErr, vendor_err: 0x249, ..recv };
        assert_ne!(v(&Completion { vendor_err: 0x244, ..err }), v(&err));
        assert_ne!(v(&Completion { wr_id: 1, ..err }), v(&err));
        for other in [
            Completion { opcode: WcOpcode::Send, ..err },
            Completion { byte_len: 1, ..err },
            Completion { wc_flags: WcFlags::empty(), ..err },
            Completion { imm_data: 1, ..err },
            Completion { src_qp: 1, ..err },
            Completion { slid: 1, ..err },
        ] {
            assert_eq!(v(&other), v(&err), "{other:?}");
        }
    }

    /// irdma's `ibv_poll_cq` writes no slid, sl or dlid_path_bits: they are left out there,
    /// and kept for every other provider.
    #[test]
    fn irdma_leaves_out_the_path_fields_it_never_writes() {
        let c = completion();
        let with = |provider: &str, c: &Completion| {
            let mut v = defined_fields(c, true, false);
            provider_exceptions(provider, &mut v);
            v
        };
        for other in [Completion { slid: 1, ..c }, Completion { sl: 1, ..c }, Completion { dlid_path_bits: 1, ..c }] {
            assert_eq!(with("irdma", &other), with("irdma", &c));
            for provider in ["mlx5", "rxe", "model"] {
                assert_ne!(with(provider, &other), with(provider, &c), "{provider}");
            }
        }
        assert_ne!(with("irdma", &Completion { byte_len: 1, ..c }), with("irdma", &c));
    }

    fn run(backend: BackendKind, defined: Vec<Completion>, raw: Vec<Completion>) -> Run {
        Run {
            workload: "w",
            backend,
            reason: String::new(),
            records: Vec::new(),
            raw,
            defined,
            problems: Vec::new(),
            skipped: None,
            cqs: Vec::new(),
            summary: None,
        }
    }

    /// The direct run against ibv_poll_cq's: whole records on rxe, defined fields elsewhere,
    /// nothing when either was skipped.
    #[test]
    fn cross_compares_what_both_pollers_define() {
        let c = completion();
        let other = Completion { byte_len: 65, ..c };
        let stale = Completion { wqe_index: 9, ..c };
        let g = run(BackendKind::Generic, vec![c], vec![c]);
        for kind in [BackendKind::Mlx5, BackendKind::Irdma, BackendKind::Generic] {
            assert_eq!(cross("w", &g, &run(kind, vec![other], vec![other])).len(), 1, "{kind:?}");
            assert!(cross("w", &g, &run(kind, vec![c], vec![stale])).is_empty(), "{kind:?}");
        }
        let d = cross("w", &g, &run(BackendKind::Rxe, vec![c], vec![stale]));
        assert!(d.len() == 1 && d[0].ends_with("(differs in wqe_index)"), "{d:?}");
        let mut skipped = run(BackendKind::Mlx5, Vec::new(), Vec::new());
        skipped.skipped = Some("cannot resize".into());
        assert!(cross("w", &g, &skipped).is_empty());
        assert!(cross("w", &skipped, &g).is_empty());
    }
}
