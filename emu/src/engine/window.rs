//! Memory windows on the emulated ConnectX: the UMR WQE libmlx5 posts for a bind
//! (`IBV_WR_BIND_MW`, and `ibv_bind_mw` for a type-1 window) and a local invalidation
//! (`IBV_WR_LOCAL_INV`), rkey checks through a bound window, and SEND with invalidate.
//!
//! libmlx5 (`providers/mlx5/qp.c` `set_bind_wr`) writes, after the control segment (whose
//! immediate is the window's current key, or the key to invalidate): the UMR control
//! segment (`struct mlx5_wqe_umr_ctrl_seg`, 48 bytes: flags, KLM count, mkey mask), the
//! mkey context (`struct mlx5_wqe_mkey_context_seg`, 64 bytes: the free flag, access flags,
//! `qpn_mkey` = the QP (type 2) or `0xffffff` (type 1) above the new key's low byte, start
//! address, length) and, for a bind, one KLM (64 bytes: length, the region's lkey, address).
//! A bind of 0 bytes, or a local invalidation, frees the window. The requester's CQE has the
//! UMR opcode, which libmlx5 reports as the WR's own (`IBV_WC_BIND_MW`, `IBV_WC_LOCAL_INV`).

use super::Outcome;
use crate::commands::mw::{TYPE_1, TYPE_2};
use crate::emulator::Emulator;
use crate::objects::{Context, Mr, MwBinding, Qp};
use crate::wqe::Ctrl;
use dvcq_uapi::mlx5::opcode::syndrome;

/// `MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE`: a type-2 bind needs a free window.
const CHECK_FREE: u8 = 1 << 5;
/// `MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN`: a type-2 invalidation needs the window bound to the
/// posting QP.
const CHECK_QPN: u8 = 1 << 3;
/// `MLX5_WQE_MKEY_CONTEXT_FREE`.
const MKEY_FREE: u8 = 1 << 6;
/// `MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_*` and the `IBV_ACCESS_*` bit each stands for.
const ACCESS_BITS: [(u8, u32); 4] = [(1 << 3, 1), (1 << 5, 2), (1 << 4, 4), (1 << 6, 8)];
/// `IBV_ACCESS_LOCAL_WRITE`, `_REMOTE_WRITE`, `_REMOTE_ATOMIC`, `_MW_BIND`.
const LOCAL_WRITE: u32 = 1;
const REMOTE_WRITE: u32 = 2;
const REMOTE_ATOMIC: u32 = 8;
const MW_BIND: u32 = 0x10;

/// A UMR WQE as libmlx5 writes it for a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Umr {
    pub flags: u8,
    pub free: bool,
    /// `IBV_ACCESS_*` bits.
    pub access: u32,
    /// The QP a type-2 bind names (`0xffffff` for type 1).
    pub qpn: u32,
    /// The low byte of the window's new key.
    pub key_byte: u8,
    pub start: u64,
    pub length: u64,
    /// The KLM: the region's lkey and the address in it (a bind only).
    pub mr_lkey: u32,
    pub mr_addr: u64,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    (u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4))
}

impl Umr {
    /// Parses the WQE's units after the control segment: `None` when it is too short.
    pub(crate) fn parse(units: &[u8]) -> Option<Umr> {
        if units.len() < 128 {
            return None;
        }
        let mkey = 64;
        let qpn_mkey = be32(units, mkey + 4);
        let mut u = Umr {
            flags: units[16],
            free: units[mkey] & MKEY_FREE != 0,
            access: ACCESS_BITS.iter().filter(|(m, _)| units[mkey + 2] & m != 0).map(|&(_, a)| a).sum(),
            qpn: qpn_mkey >> 8,
            key_byte: qpn_mkey as u8,
            start: be64(units, mkey + 16),
            length: be64(units, mkey + 24),
            mr_lkey: 0,
            mr_addr: 0,
        };
        if !u.free && u.length != 0 {
            let klm = units.get(128..144)?;
            u.mr_lkey = be32(klm, 4);
            u.mr_addr = be64(klm, 8);
        }
        Some(u)
    }
}

/// The regions a remote request to QP `qpn` of `ctx` may name: the registered regions and
/// the windows bound where that QP reaches them (a type-1 window from any QP of its PD, a
/// type-2 one from its own QP only, and only while the region under it is registered),
/// each as a region keyed by its rkey. The copies'
/// lkeys are 0: only rkey look-ups use them.
pub(crate) fn remote_regions(ctx: &Context, qpn: u32) -> Vec<Mr> {
    let windows = ctx.mws.values().filter_map(|w| {
        let b = w.bound?;
        if b.qpn.is_some_and(|q| q != qpn) || !ctx.mrs.values().any(|m| m.lkey == b.mr_lkey) {
            return None;
        }
        Some(Mr { pd: w.pd, start: b.start, length: b.length, iova: b.iova, access: b.access, lkey: 0, rkey: w.rkey })
    });
    ctx.mrs.values().copied().chain(windows).collect()
}

/// SEND with invalidate of `rkey` arriving at QP `qpn`: frees the type-2 window of that key
/// bound to that QP. False when there is none (the message lands all the same).
pub(crate) fn invalidate(ctx: &mut Context, qpn: u32, rkey: u32) -> bool {
    let hit = ctx.mws.values_mut().find(|w| w.rkey == rkey && w.bound.is_some_and(|b| b.qpn == Some(qpn)));
    match hit {
        Some(w) => {
            w.bound = None;
            true
        }
        None => false,
    }
}

impl Emulator {
    /// A UMR WQE on `qp`: binds, unbinds or invalidates the window its control segment's
    /// key names. `MW_BIND_ERR` for what a ConnectX refuses: no such window, a type-2 bind of
    /// a window not free or through another QP, a window or region of another PD, a region
    /// without `IBV_ACCESS_MW_BIND` or too short, remote write or atomics over a region
    /// without local write, an invalidation of a key not bound to this QP.
    pub(super) fn umr(&mut self, fd: i32, qp: &Qp, ctrl: &Ctrl, units: &[u8]) -> Outcome {
        let end = (usize::from(ctrl.ds) * 16).min(units.len());
        let Some(u) = Umr::parse(&units[..end]) else { return Outcome::Failed(syndrome::LOCAL_LENGTH_ERR) };
        let Some(ctx) = self.contexts.get_mut(&fd) else { return Outcome::Failed(syndrome::LOCAL_QP_OP_ERR) };
        let key = ctrl.imm;
        let Some(w) = ctx.mws.values().find(|w| w.rkey >> 8 == key >> 8).copied() else {
            return Outcome::Failed(syndrome::MW_BIND_ERR);
        };
        if w.pd != qp.pd {
            return Outcome::Failed(syndrome::MW_BIND_ERR);
        }
        let new_key = (w.rkey & !0xff) | u32::from(u.key_byte);
        let bound = if u.free || u.length == 0 {
            if u.flags & CHECK_QPN != 0 && (w.rkey != key || w.bound.and_then(|b| b.qpn) != Some(qp.qpn)) {
                return Outcome::Failed(syndrome::MW_BIND_ERR);
            }
            None
        } else {
            let type2 = w.mw_type == TYPE_2;
            if type2 && (w.bound.is_some() || u.flags & CHECK_FREE == 0 || u.qpn != qp.qpn) {
                return Outcome::Failed(syndrome::MW_BIND_ERR);
            }
            if w.mw_type == TYPE_1 && u.qpn != 0xff_ffff {
                return Outcome::Failed(syndrome::MW_BIND_ERR);
            }
            let Some(mr) = ctx.mrs.values().find(|m| m.lkey == u.mr_lkey && m.pd == qp.pd) else {
                return Outcome::Failed(syndrome::MW_BIND_ERR);
            };
            let inside =
                u.mr_addr.checked_sub(mr.iova).filter(|off| off.checked_add(u.length).is_some_and(|e| e <= mr.length));
            let writes = u.access & (REMOTE_WRITE | REMOTE_ATOMIC) != 0;
            let Some(off) = inside else { return Outcome::Failed(syndrome::MW_BIND_ERR) };
            if mr.access & MW_BIND == 0 || (writes && mr.access & LOCAL_WRITE == 0) {
                return Outcome::Failed(syndrome::MW_BIND_ERR);
            }
            Some(MwBinding {
                qpn: type2.then_some(qp.qpn),
                start: mr.start + off,
                iova: u.start,
                length: u.length,
                access: u.access,
                mr_lkey: mr.lkey,
            })
        };
        if let Some(m) = ctx.mws.values_mut().find(|m| m.rkey == w.rkey) {
            m.rkey = new_key;
            m.bound = bound;
        }
        Outcome::Done(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The units libmlx5's `set_bind_wr` writes after the control segment for a type-2
    /// bind of 1024 bytes at `0x5000` of the region with lkey `0x1234` by QP `0x20100`,
    /// remote read and write, new key byte `0x5b`.
    fn type2_bind() -> Vec<u8> {
        let mut u = vec![0u8; 192];
        u[16] = 0x80 | 0x10 | CHECK_FREE;
        u[66] = (1 << 4) | (1 << 5);
        u[68..72].copy_from_slice(&((0x20100u32 << 8) | 0x5b).to_be_bytes());
        u[80..88].copy_from_slice(&0x5000u64.to_be_bytes());
        u[88..96].copy_from_slice(&1024u64.to_be_bytes());
        u[128..132].copy_from_slice(&1024u32.to_be_bytes());
        u[132..136].copy_from_slice(&0x1234u32.to_be_bytes());
        u[136..144].copy_from_slice(&0x5000u64.to_be_bytes());
        u
    }

    #[test]
    fn a_bind_reads_as_set_bind_wr_writes_it() {
        let u = Umr::parse(&type2_bind()).unwrap();
        assert_eq!(
            u,
            Umr {
                flags: 0x80 | 0x10 | CHECK_FREE,
                free: false,
                access: 2 | 4,
                qpn: 0x20100,
                key_byte: 0x5b,
                start: 0x5000,
                length: 1024,
                mr_lkey: 0x1234,
                mr_addr: 0x5000,
            }
        );
        // A local invalidation: the free flag, no KLM.
        let mut inv = vec![0u8; 128];
        inv[16] = 0x80 | 0x10 | CHECK_QPN;
        inv[64] = MKEY_FREE;
        let u = Umr::parse(&inv).unwrap();
        assert!(u.free && u.flags & CHECK_QPN != 0);
        assert_eq!((u.length, u.mr_lkey), (0, 0));
        assert!(Umr::parse(&inv[..100]).is_none());
    }

    #[test]
    fn a_type2_window_is_reached_from_its_own_qp_only_and_send_with_invalidate_frees_it() {
        let mut ctx = Context::default();
        let b = MwBinding { qpn: Some(7), start: 0x9000, iova: 0x5000, length: 1024, access: 2, mr_lkey: 0x205a };
        let mr = Mr { pd: 1, start: 0x8000, length: 8192, iova: 0x4000, access: 0x13, lkey: 0x205a, rkey: 0x205a };
        ctx.mrs.insert(2, mr);
        ctx.mws.insert(1, crate::objects::Mw { pd: 1, mw_type: TYPE_2, rkey: 0x305b, bound: Some(b) });
        let through = |ctx: &Context, qpn| remote_regions(ctx, qpn).iter().any(|m| m.rkey == 0x305b);
        assert!(through(&ctx, 7));
        assert!(!through(&ctx, 8), "another QP");
        assert!(!invalidate(&mut ctx, 8, 0x305b));
        assert!(!invalidate(&mut ctx, 7, 0x305a), "another key");
        ctx.mrs.remove(&2);
        assert!(!through(&ctx, 7), "the region under it deregistered");
        ctx.mrs.insert(2, mr);
        assert!(invalidate(&mut ctx, 7, 0x305b));
        assert!(!through(&ctx, 7), "freed");
    }
}
