//! CQE compression in the mlx5 model: forming mini-CQE sessions the way a ConnectX does
//! under PCIe back-pressure, in the layouts the kernel's mlx5e, DPDK and UCX decompress (see
//! [`crate::mini`]).
//!
//! The device compresses consecutive completions *of the same kind*, and what a mini-CQE
//! does not carry comes from the title for every completion of the session: a difference
//! there is lost. Which differences end a session and which are lost is not public; the
//! model follows what the consumers show, so the table below is an inference from them:
//!
//! | mini format | the mini-CQE keeps | lost (the title's value) |
//! |---|---|---|
//! | requester (any format) | WQE counter, WQE opcode, byte count | timestamp |
//! | HASH | byte count, RSS hash result | timestamp, L4 checksum |
//! | CSUM, CSUM_STRIDX | byte count, L4 checksum (stride index) | timestamp, RSS hash result |
//! | FTAG_STRIDX | 24-bit byte count, flow tag (stride index) | timestamp, RSS hash result, L4 checksum |
//! | L34H_STRIDX | byte count, header types (stride index) | timestamp, RSS hash result, L4 checksum |
//!
//! Everything else must be equal for a completion to join (opcode, QP, user index or SRQ,
//! source QP and flags, immediate, SLID, path bits, VLAN, header OK bits, header types and
//! flow tag where the format does not carry them, the RSS hash type), with consecutive
//! responder WQE counters and no inline data. The evidence: DPDK turns compression off when
//! it needs hardware timestamps (a mini-CQE has none, and DPDK gives every completion the
//! title's); the flow-tag and header-type formats were added "to keep the compression
//! session alive" for traffic differing in flow marks or packet types (DPDK's mlx5 PMD,
//! 20.11), so those end a session when the format does not carry them; and the default
//! formats (HASH without multi-packet RQ, CSUM with it) compress traffic whose checksums,
//! or whose RSS hashes, differ from packet to packet, and DPDK then reports the title's.
//!
//! So completion `e` joins a session iff [`expand`] of the title and `e`'s mini-CQE gives
//! back what the device keeps of `e` ([`kept`]). A compressed ring polls to the completions
//! the kept CQEs give uncompressed ([`Mlx5Model::record_kept`] logs them), which is what
//! the equivalence tests check.
//!
//! When it compresses is a [`Policy`], standing in for back-pressure: never, always (as
//! long sessions as allowed), or random run lengths from a seed. Errors, RESIZE and any
//! CQE that is not a successful completion end a session and are written as they are.
//!
//! - Basic layout: a session of N ≥ 2 completions is buffered, then written at
//!   `[t, t + N)`: the mini-CQE arrays at `t + 1` and `t + 8k`, then the title (its
//!   `byte_cnt` = N, format 3) with its owner byte last. Holes are never written.
//! - Enhanced layout: every CQE carries the 8-bit iteration count in byte 62, which
//!   the model publishes last. A regular CQE is written at once and becomes the title;
//!   following compressible completions are buffered into blocks of up to seven minis.
//!
//! Buffered completions reach the ring when their session or block is full, when an
//! incompatible CQE arrives, or at [`Mlx5Model::flush`].

use super::build::Entry;
use super::{Mlx5Model, ModelError};
use crate::mini::{expand, CompLayout, CompressionConfig, MiniFormat};
use dvcq_uapi::mlx5::cqe::{op_own, Cqe64};
use dvcq_uapi::mlx5::mini::{MiniCqe, MiniCqeArray, MAX_ENHANCED_MINIS, MINIS_PER_ARRAY};
use dvcq_uapi::mlx5::opcode::{cqe_format, cqe_opcode, wqe_opcode};
use dvcq_uapi::Be16;

/// Longest basic-layout session the model writes. A device bounds it by
/// `cqe_comp_caps.max_num` (`mlx5dv_query_device`); 64 is the model's choice.
pub const BASIC_MAX_SESSION: u32 = 64;

/// When the model compresses: a stand-in for PCIe back-pressure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Policy {
    /// Every completion is written as a regular CQE (no back-pressure).
    #[default]
    Never,
    /// Sessions as long as allowed: basic up to [`BASIC_MAX_SESSION`] (and the ring),
    /// enhanced blocks of seven for as long as completions are compatible.
    Always,
    /// Runs of random length 1..=`max` (a run of 1 is a regular CQE; a run of L is a title
    /// plus L − 1 compressed completions), enhanced blocks of random size 1..=7; the same
    /// seed gives the same ring.
    RandomRuns {
        /// Seed of the model's generator.
        seed: u64,
        /// Longest run (at least 1).
        max: u32,
    },
}

/// The model's compression setting: the CQ creation attributes (layout, mini format) and
/// the back-pressure policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compression {
    /// Basic or enhanced layout.
    pub layout: CompLayout,
    /// Responder mini-CQE format.
    pub format: MiniFormat,
    /// When sessions form.
    pub policy: Policy,
}

impl Compression {
    /// The creation attributes a poller of this CQ is opened with.
    pub fn cq_config(&self) -> CompressionConfig {
        CompressionConfig { layout: self.layout, format: self.format }
    }
}

/// The mini-CQE that carries `cqe`'s own fields in `format` (the inverse of [`expand`]).
/// Stride indexes are written as 0: the model has no striding RQs.
pub fn mini_of(cqe: &Cqe64, format: MiniFormat) -> MiniCqe {
    let byte_cnt = cqe.byte_cnt.get();
    if cqe.opcode() == cqe_opcode::REQ {
        return MiniCqe::requester(cqe.wqe_counter.get(), cqe.wqe_opcode(), byte_cnt);
    }
    match format {
        MiniFormat::Hash => MiniCqe::hash(cqe.rss_hash_result.get(), byte_cnt),
        MiniFormat::Csum | MiniFormat::CsumStridx => MiniCqe::csum(cqe.check_sum.get(), 0, byte_cnt),
        MiniFormat::FtagStridx => MiniCqe::ftag(cqe.qpn(), 0, byte_cnt),
        MiniFormat::L34hStridx => MiniCqe::l34h(cqe.l4_hdr_type_etc, 0, byte_cnt),
    }
}

/// What the device keeps of completion `e` compressed into a session whose title is
/// `title`, mini-CQEs of `format`: `e` with the fields no mini-CQE of the format carries and
/// that may differ within a session replaced by the title's (the module's table): the
/// timestamp always, the RSS hash result unless HASH, the L4 checksum unless CSUM or
/// CSUM_STRIDX. The title itself (completion 0) keeps everything.
pub fn kept(title: &Cqe64, e: &Cqe64, format: MiniFormat) -> Cqe64 {
    let mut k = *e;
    k.timestamp = title.timestamp;
    if format != MiniFormat::Hash {
        k.rss_hash_result = title.rss_hash_result;
    }
    if !matches!(format, MiniFormat::Csum | MiniFormat::CsumStridx) {
        k.check_sum = title.check_sum;
    }
    k
}

/// Can `e` be completion `i` of a session whose title (completion 0) is `title`? True iff
/// its mini-CQE expands back to what the device keeps of it ([`kept`]; owner bit aside),
/// and neither carries data a mini-CQE cannot: inline payload or a 128-byte CQE's first
/// half.
pub fn compressible(title: &Cqe64, e: &Entry, format: MiniFormat, i: u32) -> bool {
    let plain = |c: &Cqe64| c.format() == cqe_format::NO_INLINE;
    let op = title.opcode();
    if !(op == cqe_opcode::REQ || (cqe_opcode::RESP_WR_IMM..=cqe_opcode::RESP_SEND_INV).contains(&op)) {
        return false;
    }
    if !plain(title) || !plain(&e.cqe) || e.first_half != [0; 64] {
        return false;
    }
    let mut back = expand(title, mini_of(&e.cqe, format), format, i);
    let mut want = kept(title, &e.cqe, format);
    back.op_own &= !op_own::OWNER_MASK;
    want.op_own &= !op_own::OWNER_MASK;
    back == want
}

/// A lap of `entries` completions that compress completely (for benchmarks): successful
/// receives on `qpn` with consecutive WQE counters (`send = false`), or signaled SENDs
/// (`send = true`). Polled uncompressed, the same lap gives the same completions.
pub fn bench_lap(entries: u32, qpn: u32, send: bool) -> Vec<Entry> {
    (0..entries)
        .map(|i| {
            if send {
                super::build::req(qpn, i as u16, wqe_opcode::SEND, 0)
            } else {
                super::build::resp(cqe_opcode::RESP_SEND, qpn, i as u16, 64, 0)
            }
        })
        .collect()
}

/// The producer's session-forming state.
#[derive(Debug, Clone)]
pub(super) struct Compressor {
    pub(super) cfg: Compression,
    rng: u64,
    /// Buffered completions: basic, the open session (the first is the title); enhanced,
    /// the open block.
    pending: Vec<Entry>,
    /// Basic: the open session's target length.
    target: u32,
    /// Enhanced: the last regular CQE written, if a session can follow it.
    title: Option<Cqe64>,
    /// Enhanced: index (from the title) of the next compressed completion.
    next_i: u32,
    /// Enhanced: completions the current run may still compress.
    run_left: u32,
    /// Enhanced: size of the open block when full.
    block_target: u32,
}

impl Compressor {
    pub(super) fn new(cfg: Compression) -> Self {
        let seed = match cfg.policy {
            Policy::RandomRuns { seed, .. } => seed,
            _ => 0,
        };
        Self { cfg, rng: seed, pending: Vec::new(), target: 0, title: None, next_i: 0, run_left: 0, block_target: 0 }
    }

    /// splitmix64.
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Length of the next run (title included).
    fn draw_run(&mut self, cap: u32) -> u32 {
        match self.cfg.policy {
            Policy::Never => 1,
            Policy::Always => cap,
            Policy::RandomRuns { max, .. } => (1 + self.next() % max.max(1) as u64).min(cap as u64) as u32,
        }
    }

    /// Size of the next enhanced block, at most `cap` (the ring size).
    fn draw_block(&mut self, cap: u32) -> u32 {
        let n = match self.cfg.policy {
            Policy::RandomRuns { .. } => 1 + (self.next() % MAX_ENHANCED_MINIS as u64) as u32,
            _ => MAX_ENHANCED_MINIS as u32,
        };
        n.min(cap)
    }

    /// Completions buffered and not yet in the ring.
    pub(super) fn pending(&self) -> u32 {
        self.pending.len() as u32
    }
}

impl Mlx5Model {
    /// Writes every buffered completion of an open session or block (a shorter session
    /// than planned; a basic session of one is a regular CQE).
    ///
    /// # Errors
    ///
    /// As [`Mlx5Model::push`].
    pub fn flush(&mut self) -> Result<(), ModelError> {
        let Some(c) = self.comp.as_mut() else {
            return Ok(());
        };
        if c.pending.is_empty() {
            return Ok(());
        }
        let pending = core::mem::take(&mut c.pending);
        let r = match c.cfg.layout {
            CompLayout::Basic => self.write_session(&pending),
            CompLayout::Enhanced => self.write_block(&pending),
        };
        if let Some(c) = self.comp.as_mut() {
            // Hand the buffer back for reuse.
            c.pending = pending;
            c.pending.clear();
        }
        r
    }

    /// Pushes every entry, then [`Mlx5Model::flush`]es.
    ///
    /// # Errors
    ///
    /// As [`Mlx5Model::push`].
    pub fn push_all<'a>(&mut self, entries: impl IntoIterator<Item = &'a Entry>) -> Result<(), ModelError> {
        for e in entries {
            self.push(e)?;
        }
        self.flush()
    }

    /// [`Mlx5Model::push`] on a compressing CQ: returns the running position `e` will take
    /// (buffered completions take theirs in order when written).
    pub(super) fn push_compressed(&mut self, e: &Entry) -> Result<u32, ModelError> {
        let Some(c) = self.comp.as_ref() else {
            return self.push_regular(e);
        };
        match c.cfg.layout {
            CompLayout::Basic => self.push_basic(e),
            CompLayout::Enhanced => self.push_enhanced(e),
        }
    }

    fn push_basic(&mut self, e: &Entry) -> Result<u32, ModelError> {
        let pi = self.pi;
        let cap = BASIC_MAX_SESSION.min(self.cfg.entries);
        let Some(c) = self.comp.as_mut() else {
            return self.push_regular(e);
        };
        let format = c.cfg.format;
        if let Some(t) = c.pending.first() {
            let i = c.pending.len() as u32;
            if i < c.target && compressible(&t.cqe, e, format, i) {
                c.pending.push(*e);
                if c.pending.len() as u32 == c.target {
                    self.flush()?;
                }
                return Ok(pi.wrapping_add(i));
            }
            self.flush()?;
        }
        let Some(c) = self.comp.as_mut() else {
            return self.push_regular(e);
        };
        if compressible(&e.cqe, e, format, 0) {
            let target = c.draw_run(cap);
            if target >= 2 {
                c.target = target;
                c.pending.push(*e);
                return Ok(self.pi);
            }
        }
        self.push_regular(e)
    }

    fn push_enhanced(&mut self, e: &Entry) -> Result<u32, ModelError> {
        let (pi, entries) = (self.pi, self.cfg.entries);
        let Some(c) = self.comp.as_mut() else {
            return self.push_regular(e);
        };
        let format = c.cfg.format;
        if let Some(t) = c.title {
            let queued = c.pending.len() as u32;
            if c.run_left > 0 && compressible(&t, e, format, c.next_i + queued) {
                c.pending.push(*e);
                c.run_left -= 1;
                if queued + 1 >= c.block_target || c.run_left == 0 {
                    self.flush()?;
                }
                return Ok(pi.wrapping_add(queued));
            }
        }
        self.flush()?;
        let pos = self.push_regular(e)?;
        if let Some(c) = self.comp.as_mut() {
            c.title = compressible(&e.cqe, e, format, 0).then_some(e.cqe);
            c.next_i = 1;
            c.run_left = c.draw_run(u32::MAX).saturating_sub(1);
            c.block_target = c.draw_block(entries);
        }
        Ok(pos)
    }

    /// Writes a basic-layout session of `s.len()` completions at `pi`: arrays first, the
    /// title last (inferred: DPDK reads the arrays with no ownership test of their own); one
    /// completion is written as a regular CQE.
    fn write_session(&mut self, s: &[Entry]) -> Result<(), ModelError> {
        let Some(first) = s.first() else {
            return Ok(());
        };
        if s.len() == 1 {
            return self.push_regular(first).map(|_| ());
        }
        let n = s.len() as u32;
        self.check_room(n)?;
        let format = self.cfg.compression.unwrap_or_default().format;
        let t = self.pi;
        let off = self.cfg.cqe_size as usize - 64;
        for (k, chunk) in s.chunks(MINIS_PER_ARRAY).enumerate() {
            let mut arr: MiniCqeArray = [MiniCqe::default(); MINIS_PER_ARRAY];
            for (m, e) in arr.iter_mut().zip(chunk) {
                *m = mini_of(&e.cqe, format);
            }
            let slot = if k == 0 { t.wrapping_add(1) } else { t.wrapping_add(8 * k as u32) };
            let bytes = bytemuck::bytes_of(&arr);
            self.ring.write(slot, off, &bytes[..62])?;
            // Bytes 62-63 of an array are mini #7's data, yet they are where a poller looks
            // for an iteration count and an owner byte: stored atomically like them.
            self.ring.publish(slot, off + 62, bytes[62])?;
            self.ring.publish(slot, off + 63, bytes[63])?;
        }
        let mut title = *first;
        title.cqe.byte_cnt = dvcq_uapi::Be32::new(n);
        title.cqe.op_own = (first.cqe.op_own & !op_own::FORMAT_MASK) | (cqe_format::COMPRESSED << op_own::FORMAT_SHIFT);
        self.write_slot(t, &title, self.cfg.entries)?;
        self.pi = t.wrapping_add(n);
        if let Some(log) = self.kept.as_mut() {
            log.push(*first);
            log.extend(s[1..].iter().map(|e| Entry::from(kept(&first.cqe, &e.cqe, format))));
        }
        Ok(())
    }

    /// Writes an enhanced-layout block of `b.len()` (≤ 7) completions at `pi`:
    /// the minis, the first completion's WQE counter in bytes 60-61 (where DPDK reads it),
    /// opcode nibble = count − 1, format 3; the iteration count last.
    fn write_block(&mut self, b: &[Entry]) -> Result<(), ModelError> {
        if b.is_empty() {
            return Ok(());
        }
        let n = b.len().min(MAX_ENHANCED_MINIS) as u32;
        self.check_room(n)?;
        let format = self.cfg.compression.unwrap_or_default().format;
        let mut block = Cqe64::default();
        {
            let bytes: &mut [u8; 64] = bytemuck::cast_mut(&mut block);
            for (i, e) in b.iter().take(MAX_ENHANCED_MINIS).enumerate() {
                bytes[8 * i..8 * i + 8].copy_from_slice(&mini_of(&e.cqe, format).bytes);
            }
        }
        block.wqe_counter = Be16::new(b[0].cqe.wqe_counter.get());
        block.op_own = op_own::make(n as u8 - 1, cqe_format::COMPRESSED, false, 0);
        let pi = self.pi;
        self.write_slot(pi, &Entry::from(block), self.cfg.entries)?;
        self.pi = pi.wrapping_add(n);
        let entries = self.cfg.entries;
        let title = self.comp.as_ref().and_then(|c| c.title);
        if let (Some(log), Some(t)) = (self.kept.as_mut(), title) {
            log.extend(b.iter().take(n as usize).map(|e| Entry::from(kept(&t, &e.cqe, format))));
        }
        if let Some(c) = self.comp.as_mut() {
            c.next_i += n;
            c.block_target = c.draw_block(entries);
        }
        Ok(())
    }
}
