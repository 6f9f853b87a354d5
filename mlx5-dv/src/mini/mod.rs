//! CQE compression: mini-CQE sessions in the poller. The layouts are read from the consumers
//! that decompress them: the kernel's mlx5e
//! (`drivers/net/ethernet/mellanox/mlx5/core/en_rx.c`), DPDK (`drivers/net/mlx5/mlx5_rx.c`
//! `mlx5_rx_poll_len`, `drivers/common/mlx5/mlx5_common.h` `check_cqe_iteration`) and UCX
//! (`src/uct/ib/mlx5/ib_mlx5.c`).
//!
//! A ConnectX under PCIe back-pressure packs consecutive completions of the same kind into
//! 8-byte mini-CQEs. rdma-core's own poll cannot read such a CQ (`providers/mlx5/cq.c` has no
//! case for format 3); dvcq decompresses in the same poller, on the same ring as regular
//! CQEs:
//!
//! - **Basic layout** (what `mlx5dv_create_cq` gives; kernel `mlx5e_decompress_cqes_start`,
//!   `mlx5e_cqes_update_owner`): a *title* CQE with format 3
//!   whose `byte_cnt` is the number N of completions; the session occupies the N slots
//!   `[t, t + N)`. Mini-CQE array 0 (minis 0..7) sits in slot `t + 1`, array k ≥ 1 in slot
//!   `t + 8k`; the other slots are holes the device never writes. Only the title carries an
//!   owner bit, so after consuming a session software re-invalidates `[t + 1, t + N)`.
//! - **Enhanced layout** (DevX CQs; kernel `mlx5e_decompress_enhanced_cqe`): every CQE's
//!   validity is the 8-bit iteration count in byte 62. A *block* is one format-3 slot whose
//!   opcode nibble is n − 1 (n ≤ 7) with n minis in bytes `0..8n`, standing for the n slots
//!   `[m, m + n)`; its title is the most recent regular CQE, which was itself an ordinary
//!   completion. The device never writes the slots after a block, so software sets their byte
//!   62 back to the previous lap's count once consumed: a count left from a lap 256 laps back
//!   would otherwise match.
//!
//! Completion i of a session is exactly the completion an uncompressed CQE would give
//! whose content is the title's with the mini-CQE's fields put in ([`expand`]). What a
//! mini-CQE keeps, per format, and so what the poller reports of each completion; the rest
//! is the title's, whatever the completion's own was (the device compresses completions
//! that differ there, and the difference is lost: the model's `compress` module says which):
//!
//! | format | from the mini-CQE | from the title |
//! |---|---|---|
//! | requester (any) | byte count, WQE counter, WQE opcode | everything else: QP, timestamp, ... |
//! | HASH | byte count, RSS hash result | timestamp, L4 checksum, header bytes, ... |
//! | CSUM, CSUM_STRIDX | byte count, L4 checksum | timestamp, RSS hash result, ... |
//! | FTAG_STRIDX | 24-bit byte count, flow tag (`sop_drop_qpn` 23:0) | timestamp, hash, checksum, ... |
//! | L34H_STRIDX | byte count, header types (byte 29) | timestamp, hash, checksum, ... |
//!
//! A responder's WQE counter is the title's plus i (a cyclic RQ); stride indexes are not
//! reported (dvcq drives no striding RQ).
//!
//! A session can straddle poll batches and the ring end: the poller keeps the title and the
//! current mini-CQE array in its compression state and drains an open session first on the next
//! call. On a CQ created without compression, `poll` never comes here (one flag test per
//! call), and the uncompressed loop in `cq.rs` only sees a format-3 CQE in its slow path.

use crate::fields::CqeFields;
use dvcq_uapi::mlx5::cqe::{op_own, Cqe64, QPN_MASK};
use dvcq_uapi::mlx5::mini::{mini_format, MiniCqe};
use dvcq_uapi::mlx5::opcode::cqe_opcode;
use dvcq_uapi::{Be16, Be32};

/// Where a compressed CQ puts its mini-CQEs (CQ context `cqe_comp_layout`: the kernel's
/// `MLX5_CQE_COMPRESS_LAYOUT_BASIC`/`_ENHANCED`, `include/linux/mlx5/device.h`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CompLayout {
    /// Title CQE + 8-mini arrays + holes: `mlx5dv_create_cq` CQs.
    #[default]
    Basic,
    /// Blocks of up to seven minis validated by the 8-bit iteration count: DevX CQs
    /// created with `cqe_comp_layout = 1`.
    Enhanced,
}

impl CompLayout {
    /// The ring-image word (`comp=basic|enhanced`, docs/ring-image.md).
    pub const fn word(self) -> &'static str {
        match self {
            Self::Basic => "basic",
            Self::Enhanced => "enhanced",
        }
    }
    /// Parses a ring-image word.
    pub fn from_word(w: &str) -> Option<Self> {
        match w {
            "basic" => Some(Self::Basic),
            "enhanced" => Some(Self::Enhanced),
            _ => None,
        }
    }
}

/// The responder mini-CQE format a CQ was created with (`mini_cqe_res_format`; DPDK
/// `drivers/common/mlx5/mlx5_prm.h`). Requester mini-CQEs have one layout whatever the CQ's
/// format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum MiniFormat {
    /// RX hash result + byte count (`MLX5DV_CQE_RES_FORMAT_HASH`).
    #[default]
    Hash,
    /// Checksum + byte count (`MLX5DV_CQE_RES_FORMAT_CSUM`).
    Csum,
    /// Checksum + stride index + byte count (`MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX`).
    CsumStridx,
    /// Flow tag + stride index + 24-bit byte count (DevX only).
    FtagStridx,
    /// L3/L4 header type + stride index + byte count (DevX only).
    L34hStridx,
}

impl MiniFormat {
    /// Every format.
    pub const ALL: [MiniFormat; 5] = [Self::Hash, Self::Csum, Self::CsumStridx, Self::FtagStridx, Self::L34hStridx];

    /// The hardware code (`mini_cqe_res_format`, with 4 standing for `_ext = 1`).
    pub const fn hw_code(self) -> u8 {
        match self {
            Self::Hash => mini_format::HASH,
            Self::Csum => mini_format::CSUM,
            Self::CsumStridx => mini_format::CSUM_STRIDX,
            Self::FtagStridx => mini_format::FTAG_STRIDX,
            Self::L34hStridx => mini_format::L34H_STRIDX,
        }
    }
    /// The format for a hardware code.
    pub const fn from_hw_code(code: u8) -> Option<Self> {
        match code {
            mini_format::HASH => Some(Self::Hash),
            mini_format::CSUM => Some(Self::Csum),
            mini_format::CSUM_STRIDX => Some(Self::CsumStridx),
            mini_format::FTAG_STRIDX => Some(Self::FtagStridx),
            mini_format::L34H_STRIDX => Some(Self::L34hStridx),
            _ => None,
        }
    }
    /// The ring-image word (`mini=hash|csum|csum_stridx|ftag_stridx|l34h_stridx`).
    pub const fn word(self) -> &'static str {
        match self {
            Self::Hash => "hash",
            Self::Csum => "csum",
            Self::CsumStridx => "csum_stridx",
            Self::FtagStridx => "ftag_stridx",
            Self::L34hStridx => "l34h_stridx",
        }
    }
    /// Parses a ring-image word.
    pub fn from_word(w: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.word() == w)
    }
    /// The format for `mlx5dv_cq_init_attr.cqe_comp_res_format` (one of
    /// `MLX5DV_CQE_RES_FORMAT_HASH (1 << 0)`, `_CSUM (1 << 1)`, `_CSUM_STRIDX (1 << 2)`,
    /// rdma-core `providers/mlx5/mlx5dv.h`).
    pub const fn from_dv_res_format(bit: u8) -> Option<Self> {
        match bit {
            0x1 => Some(Self::Hash),
            0x2 => Some(Self::Csum),
            0x4 => Some(Self::CsumStridx),
            _ => None,
        }
    }

    /// The `cqe_comp_res_format` bit of this format ([`MiniFormat::from_dv_res_format`]'s
    /// inverse); 0 for the formats `mlx5dv_create_cq` does not take (DevX only).
    pub const fn dv_res_format(self) -> u8 {
        match self {
            Self::Hash => 0x1,
            Self::Csum => 0x2,
            Self::CsumStridx => 0x4,
            _ => 0,
        }
    }
}

/// CQE compression settings of a CQ: part of its creation attributes, so the poller is
/// told, not guessing (a mini-CQE does not say which format it has).
///
/// On a real device the facade fills this from what the CQ was created with:
/// `mlx5dv_create_cq` with `MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE` in `comp_mask` gives
/// the basic layout in `cqe_comp_res_format` ([`CompressionConfig::from_dv_attr`]); a DevX
/// CQ context with `cqe_comp_en = 1` gives `cqe_comp_layout` and `mini_cqe_res_format`
/// (+ `_ext`). A CQ without compression is `CqConfig::compression = None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CompressionConfig {
    /// Basic or enhanced layout.
    pub layout: CompLayout,
    /// The responder mini-CQE format.
    pub format: MiniFormat,
}

impl CompressionConfig {
    /// `MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE`.
    pub const DV_MASK_COMPRESSED_CQE: u64 = 1 << 0;

    /// The setting a CQ made by `mlx5dv_create_cq` has: `None` without the compressed-CQE
    /// mask bit; the basic layout otherwise, since the kernel never sets `cqe_comp_layout`
    /// (`drivers/infiniband/hw/mlx5/cq.c` `create_cq_user`). `None` also for a format bit
    /// rdma-core rejects.
    pub const fn from_dv_attr(comp_mask: u64, cqe_comp_res_format: u8) -> Option<Self> {
        if comp_mask & Self::DV_MASK_COMPRESSED_CQE == 0 {
            return None;
        }
        match MiniFormat::from_dv_res_format(cqe_comp_res_format) {
            Some(format) => Some(Self { layout: CompLayout::Basic, format }),
            None => None,
        }
    }
}

/// Is `opcode` one a session can carry: a successful requester or responder completion?
const fn session_opcode(opcode: u8) -> bool {
    matches!(opcode, cqe_opcode::REQ | cqe_opcode::RESP_WR_IMM..=cqe_opcode::RESP_SEND_INV)
}

/// The uncompressed CQE that completion `i` of a session stands for: the title's content
/// (format cleared) with the mini-CQE's fields put in (kernel
/// `mlx5e_decompress_cqe`, DPDK `rxq_cq_decompress_v`, UCX `uct_ib_mlx5_iface_cqe_unzip`):
///
/// - every session: `byte_cnt` from the mini;
/// - requester title (opcode REQ): `wqe_counter` and the WQE opcode (`sop_drop_qpn` bits
///   31:24) from the mini, placed as kernel and UCX place them (bytes 0-1 and byte 2; DPDK's
///   `mlx5_prm.h` declares byte 3) since UCX is the one consumer that reads requester minis;
/// - responder title: `wqe_counter = title.wqe_counter + i` (a cyclic RQ; for the enhanced
///   layout `i` counts from the title, which is completion 0), and per format the RSS hash
///   (HASH), the L4 checksum (CSUM, CSUM_STRIDX), the flow tag in `sop_drop_qpn` bits 23:0
///   with a 24-bit byte count (FTAG_STRIDX), or the header-type byte 29 (L34H_STRIDX).
///
/// Stride indexes are for striding RQs, which dvcq does not drive; a [`Completion`](dvcq_provider::Completion) has no
/// field for them, so they are not carried over.
pub fn expand(title: &Cqe64, mini: MiniCqe, format: MiniFormat, i: u32) -> Cqe64 {
    let mut c = *title;
    c.op_own = title.op_own & !op_own::FORMAT_MASK;
    c.byte_cnt = Be32::new(mini.byte_cnt());
    if title.opcode() == cqe_opcode::REQ {
        c.wqe_counter = Be16::new(mini.wqe_counter());
        c.sop_drop_qpn = Be32::new((title.sop_drop_qpn.get() & QPN_MASK) | ((mini.s_wqe_opcode() as u32) << 24));
        return c;
    }
    c.wqe_counter = Be16::new(title.wqe_counter.get().wrapping_add(i as u16));
    match format {
        MiniFormat::Hash => c.rss_hash_result = Be32::new(mini.rx_hash_result()),
        MiniFormat::Csum | MiniFormat::CsumStridx => c.check_sum = Be16::new(mini.checksum()),
        MiniFormat::FtagStridx => {
            c.byte_cnt = Be32::new(mini.byte_cnt24());
            c.sop_drop_qpn = Be32::new((title.sop_drop_qpn.get() & !QPN_MASK) | mini.flow_tag());
        }
        MiniFormat::L34hStridx => c.l4_hdr_type_etc = mini.hdr_type(),
    }
    c
}

/// One decompressed completion as [`CqeFields`], read lazily from the title copy and the
/// mini-CQE: the same translation as [`expand`] without building the CQE. `REQ` is the
/// title's kind (requester or responder), fixed for a session.
struct MiniFields<'a, const REQ: bool> {
    title: &'a Cqe64,
    mini: MiniCqe,
    format: MiniFormat,
    wqe_counter: u16,
}

impl<const REQ: bool> CqeFields for MiniFields<'_, REQ> {
    #[inline(always)]
    fn op_own(&self) -> u8 {
        self.title.op_own & !op_own::FORMAT_MASK
    }
    #[inline(always)]
    fn sop_drop_qpn(&self) -> u32 {
        let t = self.title.sop_drop_qpn.get();
        if REQ {
            (t & QPN_MASK) | ((self.mini.s_wqe_opcode() as u32) << 24)
        } else if self.format == MiniFormat::FtagStridx {
            (t & !QPN_MASK) | self.mini.flow_tag()
        } else {
            t
        }
    }
    #[inline(always)]
    fn wqe_counter(&self) -> u16 {
        self.wqe_counter
    }
    #[inline(always)]
    fn byte_cnt(&self) -> u32 {
        if !REQ && self.format == MiniFormat::FtagStridx {
            self.mini.byte_cnt24()
        } else {
            self.mini.byte_cnt()
        }
    }
    #[inline(always)]
    fn timestamp(&self) -> u64 {
        self.title.timestamp.get()
    }
    #[inline(always)]
    fn srqn_uidx_word(&self) -> u32 {
        self.title.srqn_uidx.get()
    }
    #[inline(always)]
    fn imm_inval_pkey(&self) -> Be32 {
        self.title.imm_inval_pkey
    }
    #[inline(always)]
    fn flags_rqpn(&self) -> u32 {
        self.title.flags_rqpn.get()
    }
    #[inline(always)]
    fn slid(&self) -> u16 {
        self.title.slid.get()
    }
    #[inline(always)]
    fn ml_path(&self) -> u8 {
        self.title.ml_path
    }
    #[inline(always)]
    fn hds_ip_ext(&self) -> u8 {
        self.title.hds_ip_ext
    }
    #[inline(always)]
    fn l4_hdr_type_etc(&self) -> u8 {
        if !REQ && self.format == MiniFormat::L34hStridx {
            self.mini.hdr_type()
        } else {
            self.title.l4_hdr_type_etc
        }
    }
    #[inline(always)]
    fn check_sum(&self) -> u16 {
        if !REQ && matches!(self.format, MiniFormat::Csum | MiniFormat::CsumStridx) {
            self.mini.checksum()
        } else {
            self.title.check_sum.get()
        }
    }
    #[inline(always)]
    fn rss_hash_result(&self) -> u32 {
        if !REQ && self.format == MiniFormat::Hash {
            self.mini.rx_hash_result()
        } else {
            self.title.rss_hash_result.get()
        }
    }
}

mod requester;
mod session;
mod single;

pub(crate) use session::MiniState;

#[cfg(test)]
mod tests {
    use super::session::*;
    use super::*;
    use crate::cqe::{self, Parsed, Peek};
    use crate::registry::{QpConfig, Registry};
    use dvcq_provider::{Completion, FaultKind, WcStatus};
    use dvcq_uapi::mlx5::opcode::cqe_format;
    use dvcq_uapi::mlx5::opcode::wqe_opcode;

    fn title(opcode: u8, ctr: u16) -> Cqe64 {
        let mut t = Cqe64 {
            sop_drop_qpn: Be32::new(0x77 << 24 | 0x42),
            wqe_counter: Be16::new(ctr),
            rss_hash_result: Be32::new(0x1111_2222),
            check_sum: Be16::new(0x3333),
            l4_hdr_type_etc: 0x08,
            timestamp: dvcq_uapi::Be64::new(0xabc),
            byte_cnt: Be32::new(9),
            ..Cqe64::default()
        };
        t.op_own = op_own::make(opcode, cqe_format::COMPRESSED, false, 1);
        t
    }

    #[test]
    fn expand_puts_each_format_field_in_place() {
        let t = title(cqe_opcode::RESP_SEND, 0xfffe);
        let e = expand(&t, MiniCqe::hash(0xfeed, 100), MiniFormat::Hash, 3);
        assert_eq!((e.rss_hash_result.get(), e.byte_cnt.get(), e.wqe_counter.get()), (0xfeed, 100, 1));
        assert_eq!((e.format(), e.opcode(), e.owner(), e.timestamp.get()), (0, cqe_opcode::RESP_SEND, 1, 0xabc));
        let e = expand(&t, MiniCqe::csum(0x5a5a, 4, 7), MiniFormat::CsumStridx, 0);
        assert_eq!((e.check_sum.get(), e.byte_cnt.get(), e.rss_hash_result.get()), (0x5a5a, 7, 0x1111_2222));
        let e = expand(&t, MiniCqe::ftag(0xabcdef, 0, 0x10_0000), MiniFormat::FtagStridx, 0);
        assert_eq!((e.sop_drop_qpn.get(), e.byte_cnt.get()), (0x77ab_cdef, 0x10_0000));
        let e = expand(&t, MiniCqe::l34h(0x26, 0, 5), MiniFormat::L34hStridx, 0);
        assert_eq!(e.l4_hdr_type_etc, 0x26);
        let r = expand(
            &title(cqe_opcode::REQ, 5),
            MiniCqe::requester(0x99, wqe_opcode::RDMA_READ, 64),
            MiniFormat::Csum,
            4,
        );
        assert_eq!(
            (r.wqe_counter.get(), r.wqe_opcode(), r.qpn(), r.byte_cnt.get()),
            (0x99, wqe_opcode::RDMA_READ, 0x42, 64)
        );
        assert_eq!(r.check_sum.get(), 0x3333);
    }

    /// The lazy field reader and [`expand`] give the same completion for every format,
    /// requester and responder, on a QP with the RX checksum capability (so the Ethernet
    /// extras are read too).
    #[test]
    fn lazy_fields_match_expand() {
        let mut reg = Registry::new();
        let mut qp = QpConfig::rc(0x42, 64, 64);
        qp.rx_csum = true;
        reg.add_qp(qp).unwrap();
        for format in MiniFormat::ALL {
            for (opcode, mini) in [
                (cqe_opcode::REQ, MiniCqe::requester(7, wqe_opcode::RDMA_READ, 4096)),
                (cqe_opcode::RESP_SEND, MiniCqe { bytes: [0x12, 0x34, 0x56, 0x78, 0x00, 0x42, 0x01, 0x00] }),
                (cqe_opcode::RESP_SEND_IMM, MiniCqe { bytes: [0xff, 0x01, 0, 3, 0x42, 0, 0, 9] }),
            ] {
                let t = title(opcode, 10);
                let req = opcode == cqe_opcode::REQ;
                let mut a = Completion::default();
                let mut b = Completion::default();
                decompress(&mut Peek(&reg), &t, req, format, mini, 12, false, 0, &mut a);
                let full = expand(&t, mini, format, 2);
                let parsed = cqe::parse_slow(&mut Peek(&reg), full, None, false, 64, 0, &mut b);
                assert!(matches!(parsed, Parsed::Wc), "{format:?} opcode {opcode}");
                // FTAG_STRIDX puts the flow tag (0x421234 here) where the QPN was: no such
                // QP. Everything else is a completion of QP 0x42.
                let ftag = format == MiniFormat::FtagStridx && !req;
                assert_eq!(b.fault().is_some(), ftag, "{format:?} opcode {opcode}: {b:?}");
                if !ftag {
                    assert_eq!((b.qp_num, b.status), (0x42, WcStatus::Success), "{format:?} opcode {opcode}");
                }
                assert_eq!(a, b, "{format:?} opcode {opcode}");
            }
        }
    }

    #[test]
    fn config_words_and_dv_attrs() {
        for f in MiniFormat::ALL {
            assert_eq!(MiniFormat::from_word(f.word()), Some(f));
            assert_eq!(MiniFormat::from_hw_code(f.hw_code()), Some(f));
        }
        for l in [CompLayout::Basic, CompLayout::Enhanced] {
            assert_eq!(CompLayout::from_word(l.word()), Some(l));
        }
        assert_eq!((CompLayout::Basic.word(), CompLayout::Enhanced.word()), ("basic", "enhanced"));
        assert_eq!(CompLayout::from_word("zip"), None);
        // The one-hot MLX5DV_CQE_RES_FORMAT_* bits, and nothing else.
        let dv: Vec<_> = (0..=255).filter_map(|b| MiniFormat::from_dv_res_format(b).map(|f| (b, f))).collect();
        assert_eq!(dv, [(1, MiniFormat::Hash), (2, MiniFormat::Csum), (4, MiniFormat::CsumStridx)]);
        for f in MiniFormat::ALL {
            let bit = f.dv_res_format();
            assert_eq!(MiniFormat::from_dv_res_format(bit), (bit != 0).then_some(f), "{f:?}: the bit names it back");
        }
        assert_eq!(CompressionConfig::from_dv_attr(0, 1), None);
        assert_eq!(
            CompressionConfig::from_dv_attr(CompressionConfig::DV_MASK_COMPRESSED_CQE, 4),
            Some(CompressionConfig { layout: CompLayout::Basic, format: MiniFormat::CsumStridx })
        );
        assert_eq!(CompressionConfig::from_dv_attr(1, 3), None);
    }

    #[test]
    fn title_and_block_checks() {
        let mut t = title(cqe_opcode::RESP_SEND, 0);
        assert_eq!(check_title(&t, 16), Open::Session { count: 9 });
        assert!(matches!(check_title(&t, 8), Open::Fault { kind: FaultKind::Truncated, consume: 1, .. }));
        t.byte_cnt = Be32::new(1);
        assert!(matches!(check_title(&t, 8), Open::Fault { kind: FaultKind::BadField, .. }));
        let e = title(cqe_opcode::REQ_ERR, 0);
        assert!(matches!(check_title(&e, 16), Open::Fault { kind: FaultKind::BadOpcode, consume: 9, .. }));
        let block = op_own::make(6, cqe_format::COMPRESSED, false, 0);
        assert_eq!(check_block(block, Some(&t), 16), Open::Session { count: 7 });
        assert!(matches!(check_block(block, None, 16), Open::Fault { kind: FaultKind::Truncated, consume: 7, .. }));
        let big = op_own::make(7, cqe_format::COMPRESSED, false, 0);
        assert!(matches!(check_block(big, Some(&t), 16), Open::Fault { kind: FaultKind::BadField, .. }));
    }
}
