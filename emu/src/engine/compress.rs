//! Compressed CQEs on the emulated ConnectX, for a CQ made with `mlx5dv_create_cq` asking
//! for them (`MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE`: libmlx5 sets `cqe_comp_en` and the
//! responder mini-CQE format in CREATE_CQ's udata).
//!
//! The device forms basic-layout sessions as the mlx5 hardware model does
//! (`dvcq_mlx5_dv::model::compress`): consecutive completions of one CQ that a mini-CQE of
//! the format can carry (`compressible`: same opcode, QP, immediate...; requester
//! completions keep their WQE counter, opcode and byte count, responder ones their byte
//! count and the format's hash or checksum) are held while the device executes one pass
//! of posted work, then written at `[t, t + N)`: the mini-CQE arrays at `t + 1` and
//! `t + 8k`, then the title (its `byte_cnt` = N, format 3) with its owner byte last. A
//! session of one is a regular CQE; an incompatible CQE, an error, the end of the pass or
//! [`MAX_SESSION`] completions end a session. The slots between arrays are never written,
//! as on a ConnectX. Only 64-byte CQEs compress (CREATE_CQ refuses compression with
//! 128-byte CQEs).

use super::write_cqe;
use crate::emulator::Emulator;
use crate::recv::load_be32;
use dvcq_mlx5_dv::mini::MiniFormat;
use dvcq_mlx5_dv::model::build::Entry;
use dvcq_mlx5_dv::model::compress::{compressible, mini_of};
use dvcq_uapi::mlx5::cqe::op_own;
use dvcq_uapi::mlx5::mini::{MiniCqe, MiniCqeArray, MINIS_PER_ARRAY};
use dvcq_uapi::mlx5::opcode::cqe_format;

/// The longest session (what the device reports as `cqe_comp_caps.max_num`).
pub const MAX_SESSION: u32 = 64;
/// The mini-CQE formats `mlx5dv_create_cq` may ask for (`MLX5DV_CQE_RES_FORMAT_HASH`,
/// `_CSUM`, `_CSUM_STRIDX`), as `cqe_comp_caps.supported_format` reports them.
pub const SUPPORTED_FORMATS: u32 = 0x1 | 0x2 | 0x4;

/// A compressing CQ: its mini-CQE format and the session it holds.
#[derive(Clone, Debug, Default)]
pub struct CompressedCq {
    pub format: MiniFormat,
    pending: Vec<Entry>,
}

impl CompressedCq {
    /// A CQ compressing with `format`.
    pub fn new(format: MiniFormat) -> CompressedCq {
        CompressedCq { format, pending: Vec::new() }
    }
}

/// The ring slot of mini-CQE array `k` of a session whose title is at `t`.
fn array_slot(t: u32, k: u32) -> u32 {
    if k == 0 {
        t.wrapping_add(1)
    } else {
        t.wrapping_add(8 * k)
    }
}

/// The mini-CQE arrays of a session: mini-CQE `i` describes completion `i` of the
/// session, the title's own included, as the poller expands them.
fn arrays(session: &[Entry], format: MiniFormat) -> Vec<MiniCqeArray> {
    session
        .chunks(MINIS_PER_ARRAY)
        .map(|chunk| {
            let mut arr: MiniCqeArray = [MiniCqe::default(); MINIS_PER_ARRAY];
            for (m, e) in arr.iter_mut().zip(chunk) {
                *m = mini_of(&e.cqe, format);
            }
            arr
        })
        .collect()
}

impl Emulator {
    /// Takes completion `e` (stamped) for compressing CQ `h` of context `fd`: into the open
    /// session when it can join, else the session is written and `e` opens the next one or
    /// is written as it is. True when `e` was taken (the caller writes nothing).
    pub(super) fn compress(&mut self, fd: i32, h: u32, e: &Entry) -> bool {
        let Some(c) = self.contexts.get_mut(&fd).and_then(|x| x.compressed_cqs.get_mut(&h)) else { return false };
        let format = c.format;
        if let Some(t) = c.pending.first() {
            let i = c.pending.len() as u32;
            if i < MAX_SESSION && compressible(&t.cqe, e, format, i) {
                c.pending.push(*e);
                if i + 1 == MAX_SESSION {
                    self.flush_session(fd, h);
                }
                return true;
            }
            self.flush_session(fd, h);
        }
        let Some(c) = self.contexts.get_mut(&fd).and_then(|x| x.compressed_cqs.get_mut(&h)) else { return false };
        if compressible(&e.cqe, e, format, 0) {
            c.pending.push(*e);
            return true;
        }
        false
    }

    /// Writes every open session: the end of a pass of the device.
    pub(crate) fn flush_sessions(&mut self) {
        let open: Vec<(i32, u32)> = self
            .contexts
            .iter()
            .flat_map(|(&fd, c)| {
                c.compressed_cqs.iter().filter(|(_, q)| !q.pending.is_empty()).map(move |(&h, _)| (fd, h))
            })
            .collect();
        for (fd, h) in open {
            self.flush_session(fd, h);
        }
    }

    /// Writes CQ `h`'s open session: one completion as a regular CQE; more as a session
    /// when the ring has room for all of them, else one by one (the last ones overrun the
    /// CQ as regular CQEs would).
    fn flush_session(&mut self, fd: i32, h: u32) {
        let Some(ctx) = self.contexts.get_mut(&fd) else { return };
        let Some(c) = ctx.compressed_cqs.get_mut(&h) else { return };
        let session = std::mem::take(&mut c.pending);
        let format = c.format;
        let Some(cq) = ctx.cqs.get_mut(&h) else { return };
        let n = session.len() as u32;
        // SAFETY: the CQ's doorbell record, live until DESTROY_CQ, which needs the lock this thread holds; word [0] is the consumer index.
        let ci = unsafe { load_be32(cq.dbrec) } & 0xff_ffff;
        let room = cq.ncqe.saturating_sub(cq.pi.wrapping_sub(ci) & 0xff_ffff);
        if n < 2 || n > room || cq.overrun || cq.cqe_size != 64 {
            for e in &session {
                self.put(fd, h, e);
            }
            return;
        }
        let t = cq.pi;
        for (k, arr) in arrays(&session, format).iter().enumerate() {
            let slot = array_slot(t, k as u32) & (cq.ncqe - 1);
            let at = cq.buf + u64::from(slot) * 64;
            // SAFETY: a 64-byte slot of the CQ's live ring (64-byte CQEs, checked), inside the session's slots, which the poller has consumed (room checked above).
            unsafe { super::copy(bytemuck::bytes_of(arr).as_ptr() as u64, at, 64) };
        }
        let mut title = session[0];
        title.cqe.byte_cnt = dvcq_uapi::Be32::new(n);
        title.cqe.op_own = (title.cqe.op_own & !op_own::FORMAT_MASK) | (cqe_format::COMPRESSED << op_own::FORMAT_SHIFT);
        // SAFETY: write_cqe's contract: the CQ's live ring; slot `t` is free (room checked above). The arrays were written first: the title's owner byte, stored last with release ordering, publishes them.
        unsafe { write_cqe(cq, &title) };
        cq.pi = t.wrapping_add(n);
        if title.cqe.op_own & 0x02 != 0 {
            cq.notify_pi = cq.pi;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dvcq_mlx5_dv::mini::expand;
    use dvcq_mlx5_dv::model::build;
    use dvcq_uapi::mlx5::opcode::wqe_opcode;

    #[test]
    fn arrays_sit_after_the_title_then_every_eighth_slot() {
        assert_eq!((array_slot(10, 0), array_slot(10, 1), array_slot(10, 2)), (11, 18, 26));
        assert_eq!(array_slot(u32::MAX, 0), 0, "wraps");
    }

    #[test]
    fn a_session_of_sends_expands_back_to_its_completions() {
        let s: Vec<Entry> = (0..10u16).map(|i| build::req(0x104, i, wqe_opcode::SEND, 0)).collect();
        assert!(s.iter().enumerate().all(|(i, e)| compressible(&s[0].cqe, e, MiniFormat::Hash, i as u32)));
        let a = arrays(&s, MiniFormat::Hash);
        assert_eq!(a.len(), 2);
        let back = expand(&s[0].cqe, a[1][1], MiniFormat::Hash, 9);
        assert_eq!(back.wqe_counter.get(), 9);
        // A SEND with immediate's receive does not join a session of plain receives.
        let plain = build::resp(dvcq_uapi::mlx5::opcode::cqe_opcode::RESP_SEND, 0x104, 0, 8, 0);
        let imm = build::resp(dvcq_uapi::mlx5::opcode::cqe_opcode::RESP_SEND_IMM, 0x104, 1, 8, 7);
        assert!(!compressible(&plain.cqe, &imm, MiniFormat::Hash, 1));
    }
}
