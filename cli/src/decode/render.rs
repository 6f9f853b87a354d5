//! Human-readable rendering of a decoded dump.

use super::mlx5::{Meaning, StatusInfo};
use super::{Decoded, Finding, Found, IrdmaCqe, Mlx5Cqe};
use core::fmt::Write;

fn kv(out: &mut String, k: &str, v: impl core::fmt::Display) {
    let _ = writeln!(out, "  {k:<16} {v}");
}

fn status(out: &mut String, s: &StatusInfo) {
    kv(out, "ibv_wc_status", format_args!("{} {} \"{}\"", s.value, s.name, s.text));
}

fn meaning(out: &mut String, m: &Meaning) {
    kv(out, "meaning", format_args!("{} side: {}", m.side, m.summary));
    for c in &m.causes {
        let _ = writeln!(out, "  {:<16} - {c}", "");
    }
}

fn notes(out: &mut String, n: &[String]) {
    for x in n {
        kv(out, "note", x);
    }
}

/// The text `dvcq decode` prints for one dump; `index` counts from 1.
pub fn render_text(index: usize, f: &Found) -> String {
    let mut out = String::new();
    let slot = match (f.slot, f.ring_cqe_size) {
        (Some(s), Some(128)) => format!(", CQE {s} of the ring; 128-byte CQEs, its cqe64 shown"),
        (Some(s), _) => format!(", CQE {s} of the ring"),
        (None, _) => String::new(),
    };
    let _ = writeln!(out, "dump {index}: line {} ({}{slot})", f.line, f.format.describe());
    match &f.cqe {
        Decoded::Mlx5(c) => mlx5(&mut out, c),
        Decoded::Irdma(c) => irdma(&mut out, c),
    }
    out
}

/// The JSON object `dvcq decode --json` prints for one finding, without a newline: a CQE's
/// fields and `"type":"cqe"`, or a problem's (`line`, `printer`, `reason`) and
/// `"type":"problem"`.
///
/// # Errors
///
/// A [`serde_json::Error`] if the value cannot be encoded (it always can).
pub fn render_json(f: &Finding) -> serde_json::Result<String> {
    let (mut v, kind) = match f {
        Finding::Cqe(d) => (serde_json::to_value(d)?, "cqe"),
        Finding::Problem(p) => (serde_json::to_value(p)?, "problem"),
    };
    if let Some(o) = v.as_object_mut() {
        o.insert("type".into(), kind.into());
    }
    serde_json::to_string(&v)
}

/// `0x13 NAME`: a number and its name (`unknown` where no table names it).
fn named(v: u8, n: Option<&str>) -> String {
    format!("{v:#04x} {}", n.unwrap_or("unknown"))
}

fn mlx5(out: &mut String, c: &Mlx5Cqe) {
    for (i, row) in c.raw.as_bytes().chunks(32).enumerate() {
        let words: Vec<&str> = row.chunks(8).map(|w| core::str::from_utf8(w).unwrap_or("?")).collect();
        kv(out, if i == 0 { "bytes" } else { "" }, words.join(" "));
    }
    kv(out, "opcode", format_args!("{} {}", c.opcode, c.opcode_name));
    kv(out, "owner", c.owner);
    kv(out, "se", c.se);
    kv(out, "format", format_args!("{} ({})", c.format, c.format_name));
    if let Some(s) = c.syndrome {
        kv(out, "syndrome", named(s, c.syndrome_name));
        kv(out, "vendor_err_synd", c.vendor_err_meaning.as_deref().unwrap_or("-"));
        kv(out, "hw_err_synd", format_args!("{:#04x}", c.hw_err_synd.unwrap_or(0)));
        kv(out, "hw_synd_type", format_args!("{:#04x}", c.hw_synd_type.unwrap_or(0)));
    }
    if let Some(w) = c.wqe_opcode {
        kv(out, "wqe_opcode", named(w, c.wqe_opcode_name));
    }
    kv(out, "qpn", format_args!("{:#x}", c.qpn));
    kv(out, "wqe_counter", format_args!("{} ({:#06x})", c.wqe_counter, c.wqe_counter));
    kv(out, "signature", format_args!("{:#04x}", c.signature));
    kv(out, "srqn/uidx", format_args!("{:#x}", c.srqn_uidx));
    if let Some(b) = c.byte_cnt {
        kv(out, "byte_cnt", b);
    }
    if let Some(q) = c.src_qp {
        kv(out, "src_qp", format_args!("{q:#x}"));
    }
    if let Some(s) = c.slid {
        kv(out, "slid", format_args!("{s:#x}"));
    }
    if let Some(v) = c.imm_inval_pkey {
        kv(out, "imm_inval_pkey", format_args!("{v:#010x}"));
    }
    if let Some(t) = c.timestamp.filter(|&t| t != 0) {
        kv(out, "timestamp", format_args!("{t:#x}"));
    }
    match &c.status {
        Some(s) => status(out, s),
        None => kv(out, "ibv_wc_status", "none (rdma-core returns no work completion)"),
    }
    if let Some(m) = &c.meaning {
        meaning(out, m);
    }
    notes(out, &c.notes);
}

fn irdma(out: &mut String, c: &IrdmaCqe) {
    kv(out, "qwords", c.qwords.join(" "));
    kv(out, "valid", c.valid);
    kv(out, "error", c.error);
    kv(out, "queue", c.queue);
    kv(out, "opcode", format_args!("{:#04x} {}", c.opcode, c.opcode_name.unwrap_or("")));
    kv(out, "wqe_idx", c.wqe_idx);
    kv(out, "qp_id", format_args!("{:#x}", c.qp_id));
    if c.error {
        kv(out, "major_err", format_args!("{:#06x}", c.major_err));
        kv(out, "minor_err", format_args!("{:#06x} {}", c.minor_err, c.minor_err_name.unwrap_or("")));
        kv(out, "vendor_err", format_args!("{:#010x}", c.vendor_err.unwrap_or(0)));
    }
    kv(out, "payload_len", c.payload_len);
    kv(out, "src_qpn/stag", format_args!("{:#x}", c.src_qpn_or_stag));
    kv(out, "comp_ctx", &c.comp_ctx);
    let flags: Vec<&str> = [
        (c.extended, "EXTCQE"),
        (c.push_dropped, "PSHDROP"),
        (c.srq, "SRQ"),
        (c.stag_or_ipv4, "STAG/IPV4"),
        (c.solicited, "SOEVENT"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, n)| *n)
    .collect();
    if !flags.is_empty() {
        kv(out, "flags", flags.join(" "));
    }
    if let Some(i) = c.imm_data {
        kv(out, "imm_data", format_args!("{i:#010x}"));
    }
    status(out, &c.status);
    if let Some(m) = &c.meaning {
        meaning(out, m);
    }
    notes(out, &c.notes);
}
