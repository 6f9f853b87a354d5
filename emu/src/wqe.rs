//! mlx5 send WQEs as libmlx5 writes them into its SQ (`providers/mlx5/qp.c`, `mlx5dv.h`
//! `struct mlx5_wqe_ctrl_seg`, `mlx5_wqe_raddr_seg`, `mlx5_wqe_data_seg`,
//! `mlx5_wqe_inline_seg`): parsed from a copy of the WQE's 16-byte units, so a WQE that wraps
//! at the end of the ring reads as one.

/// `MLX5_WQE_CTRL_CQ_UPDATE` in `fm_ce_se`: the WQE asks for a CQE.
pub const CTRL_CQ_UPDATE: u8 = 0x08;
/// `MLX5_WQE_CTRL_SOLICITED` in `fm_ce_se`.
pub const CTRL_SOLICITED: u8 = 0x02;
/// `MLX5_INLINE_SEG`: the byte count of an inline segment has this bit.
pub const INLINE_SEG: u32 = 0x8000_0000;
/// The SQ's basic block.
pub const WQEBB: usize = 64;

/// The control segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctrl {
    pub opcode: u8,
    pub opmod: u8,
    /// The WQE's index (libmlx5's `cur_post & 0xffff`).
    pub wqe_index: u16,
    pub qpn: u32,
    /// The WQE's size in 16-byte units, control segment included.
    pub ds: u8,
    pub fm_ce_se: u8,
    /// Immediate data or the rkey to invalidate, big-endian as posted.
    pub imm: u32,
}

impl Ctrl {
    /// Parses the first 16 bytes of a WQE.
    pub fn parse(b: &[u8; 16]) -> Ctrl {
        let w0 = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let w1 = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        Ctrl {
            opcode: w0 as u8,
            opmod: (w0 >> 24) as u8,
            wqe_index: (w0 >> 8) as u16,
            qpn: w1 >> 8,
            ds: (w1 & 0x3f) as u8,
            fm_ce_se: b[11],
            imm: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
        }
    }

    /// How many 64-byte basic blocks the WQE takes.
    pub fn wqebbs(&self) -> u32 {
        (u32::from(self.ds) * 16).div_ceil(WQEBB as u32).max(1)
    }

    /// Whether the WQE asks for a CQE.
    pub fn signaled(&self) -> bool {
        self.fm_ce_se & CTRL_CQ_UPDATE != 0
    }
}

/// The remote address segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raddr {
    pub addr: u64,
    pub rkey: u32,
}

impl Raddr {
    /// Parses 16 bytes.
    pub fn parse(b: &[u8]) -> Raddr {
        Raddr {
            addr: u64::from_be_bytes(b[..8].try_into().unwrap_or_default()),
            rkey: u32::from_be_bytes(b[8..12].try_into().unwrap_or_default()),
        }
    }
}

/// Where a WQE's data comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gather {
    /// Scatter/gather entries: (address, length, lkey).
    Segs(Vec<(u64, u32, u32)>),
    /// The bytes, inline in the WQE.
    Inline(Vec<u8>),
}

impl Gather {
    /// The data segments or inline data in `units` (the 16-byte units after the fixed
    /// segments).
    ///
    /// # Errors
    ///
    /// An inline length beyond the WQE.
    pub fn parse(units: &[u8]) -> Result<Gather, &'static str> {
        if units.len() >= 4 {
            let bc = u32::from_be_bytes([units[0], units[1], units[2], units[3]]);
            if bc & INLINE_SEG != 0 {
                let n = (bc & !INLINE_SEG) as usize;
                let data = units.get(4..4 + n).ok_or("inline data longer than its WQE")?;
                return Ok(Gather::Inline(data.to_vec()));
            }
        }
        let segs = units
            .chunks_exact(16)
            .map(|s| {
                let len = u32::from_be_bytes([s[0], s[1], s[2], s[3]]);
                let lkey = u32::from_be_bytes([s[4], s[5], s[6], s[7]]);
                let addr = u64::from_be_bytes(s[8..16].try_into().unwrap_or_default());
                (addr, len, lkey)
            })
            // libmlx5 skips zero-length entries; a zero byte count never appears.
            .filter(|&(_, len, _)| len != 0)
            .collect();
        Ok(Gather::Segs(segs))
    }

    /// The total length.
    pub fn len(&self) -> u64 {
        match self {
            Gather::Segs(s) => s.iter().map(|&(_, l, _)| u64::from(l)).sum(),
            Gather::Inline(d) => d.len() as u64,
        }
    }

    /// Whether there is no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_segment_of_a_signaled_write() {
        // The control segment libmlx5 wrote for WQE 4 of QP 0x104: RDMA WRITE, 3 units.
        let mut b = [0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, CTRL_CQ_UPDATE, 0, 0, 0, 0];
        b[4..8].copy_from_slice(&((0x104u32 << 8) | 3).to_be_bytes());
        let c = Ctrl::parse(&b);
        assert_eq!((c.opcode, c.wqe_index, c.qpn, c.ds), (0x08, 4, 0x104, 3));
        assert!(c.signaled());
        assert_eq!(c.wqebbs(), 1);
        assert_eq!(Ctrl { ds: 5, ..c }.wqebbs(), 2);
    }

    #[test]
    fn data_segments_and_inline_data() {
        let mut u = Vec::new();
        u.extend_from_slice(&8u32.to_be_bytes());
        u.extend_from_slice(&0x15au32.to_be_bytes());
        u.extend_from_slice(&0x1000u64.to_be_bytes());
        u.extend_from_slice(&[0; 16]);
        assert_eq!(Gather::parse(&u).unwrap(), Gather::Segs(vec![(0x1000, 8, 0x15a)]));
        let mut i = (INLINE_SEG | 5).to_be_bytes().to_vec();
        i.extend_from_slice(b"hello");
        i.resize(16, 0);
        assert_eq!(Gather::parse(&i).unwrap(), Gather::Inline(b"hello".to_vec()));
        let mut bad = (INLINE_SEG | 40).to_be_bytes().to_vec();
        bad.resize(16, 0);
        assert!(Gather::parse(&bad).is_err());
    }
}
