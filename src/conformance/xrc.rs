//! `xrc_traffic`, after rdma-core's `tests/test_cqex.py` XRC traffic: sends from an XRC
//! initiator QP to XRC SRQs behind a target QP, through the extended CQ. dvcq's verbs layer
//! makes no XRC domain, XRC SRQ or XRC QP yet, so the check says why it cannot run on the
//! device named: that first where the device itself has no XRC.

use super::Outcome;
use crate::cq::BackendChoice;
use crate::error::Error;
use crate::Context;

/// Why XRC traffic does not run on `ctx`.
pub(super) fn xrc_traffic(ctx: &Context, _: BackendChoice) -> Result<Outcome, Error> {
    let name = ctx.name();
    let provider = ctx.info().map(|i| i.provider).unwrap_or_default();
    let kind = if ctx.is_model() && name.contains("mlx5") { "mlx5" } else { provider.as_str() };
    let why = match (ctx.xrc_and_max_mw().map(|(xrc, _)| xrc), kind) {
        (None, "mlx5") => format!(
            "{name} executes no XRC work: the model device makes no XRC domain, XRC SRQ or XRC QP (its mlx5 \
             poller resolves XRC SRQ completions, Registry::add_xrc_srq, which an attached CQ uses)"
        ),
        (None, _) => format!("{name} has no XRC: irdma devices have no XRC QPs"),
        (Some(false), _) => format!("{name} has no XRC: IBV_DEVICE_XRC is not in its device_cap_flags"),
        (Some(true), _) => format!("dvcq's verbs layer makes no XRC domain, XRC SRQ or XRC QP yet ({name} has XRC)"),
    };
    Ok(Outcome::skip(why))
}
