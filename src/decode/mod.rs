//! Decoding CQE dumps found in logs: the library side of `dvcq decode`.
//!
//! [`scan()`] finds every dump in a text (whole log files included) and decodes each into a
//! [`Found`]; what cannot be decoded becomes a [`Problem`] with its line number and a reason,
//! and scanning goes on. [`decode_mlx5`] and [`decode_irdma`] decode one CQE an application
//! already holds. To print a CQE the way rdma-core does, see [`crate::mlx5::dump`].
//!
//! Printers whose output is recognised (formats read from their public sources):
//! * rdma-core libmlx5 (`providers/mlx5/cq.c`): `mlx5: <host>: got completion with error:`
//!   then four lines `%08x %08x %08x %08x`, each word a big-endian load, so the words give the
//!   bytes in memory order; debug builds print `<func>:<line>: dump cqe for cqn 0x<n>:` and
//!   the same four lines for every CQE. Old kernels (`dump_cqe` before `print_hex_dump`)
//!   print `dump error cqe` and the same words.
//! * Linux mlx5_ib (`drivers/infiniband/hw/mlx5/cq.c` `dump_cqe`, `mlx5_dump_err_cqe`):
//!   `print_hex_dump(level, "cqe_dump: " or "", DUMP_PREFIX_OFFSET, 16, 1, cqe, 64, false)`,
//!   i.e. `cqe_dump: 00000010: 00 11 ...`, 16 bytes a line, after any kernel log stamp.
//! * DPDK mlx5 (`mlx5_dump_debug_information` → `rte_hexdump`): `MLX5 Error CQ: at [0x..],
//!   len=<n>`, then `%08X:` and ` %02X` bytes, ` | ` and an ASCII column; the whole CQ ring is
//!   dumped, so only its error CQEs are decoded; before dumping, the Tx path writes `"seen"`
//!   into reserved bytes of the error CQE, which are ignored. DPDK built with 128-byte cache
//!   lines (arm64's generic build among them) creates 128-byte CQEs and dumps 128-byte
//!   slots (`struct mlx5_cqe` pads 64 bytes before the cqe64); [`ScanOptions::ring_cqe_size`]
//!   says how such a ring is read.
//! * a bare 64-byte hex string (one line, spaces optional);
//! * irdma CQEs as four or eight 64-bit qwords ([`Vendor::Irdma`]).

mod irdma;
mod lines;
mod mlx5;
mod render;
mod scan;

pub use irdma::{decode_irdma, IrdmaCqe};
pub use mlx5::{decode_mlx5, Meaning, Mlx5Cqe, Mlx5Options, StatusInfo, DPDK_MARKER, DPDK_MARKER_OFFSETS};
pub use scan::{scan, scan_stream, scan_with, RingCqeSize, ScanOptions};

use serde::Serialize;

/// Which vendor's formats to look for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Vendor {
    /// ConnectX (mlx5): rdma-core, kernel, DPDK and bare-hex dumps.
    #[default]
    Mlx5,
    /// Intel E810 / X722 (irdma): qwords.
    Irdma,
}

/// The printer a dump came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DumpFormat {
    /// rdma-core libmlx5 `got completion with error` dump.
    RdmaCore,
    /// rdma-core debug build `dump cqe for cqn` dump.
    RdmaCoreDebug,
    /// Old Linux mlx5_ib `dump error cqe` followed by words.
    KernelWords,
    /// Four lines of four words without a header.
    Words,
    /// Linux `print_hex_dump` (mlx5_ib `cqe_dump:`).
    Kernel,
    /// DPDK `rte_hexdump`.
    Dpdk,
    /// A bare 64-byte hex string.
    BareHex,
    /// irdma qwords.
    IrdmaQwords,
}

impl DumpFormat {
    /// A short description for people.
    pub const fn describe(self) -> &'static str {
        match self {
            Self::RdmaCore => "rdma-core libmlx5 dump",
            Self::RdmaCoreDebug => "rdma-core debug CQE dump",
            Self::KernelWords => "Linux mlx5_ib word dump",
            Self::Words => "words without header",
            Self::Kernel => "Linux mlx5_ib print_hex_dump",
            Self::Dpdk => "DPDK rte_hexdump",
            Self::BareHex => "bare hex string",
            Self::IrdmaQwords => "irdma qwords",
        }
    }
}

/// A decoded CQE of either vendor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "vendor", rename_all = "lowercase")]
pub enum Decoded {
    /// An mlx5 CQE.
    Mlx5(Box<Mlx5Cqe>),
    /// An irdma CQE.
    Irdma(Box<IrdmaCqe>),
}

/// One dump found and decoded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Found {
    /// 1-based line where the dump (or, in a ring dump, this CQE's first row) starts.
    pub line: usize,
    /// The printer (JSON key `printer`, since a CQE has a `format` field of its own).
    #[serde(rename = "printer")]
    pub format: DumpFormat,
    /// Index of the CQE in a dump of several (a DPDK ring), else `None`.
    pub slot: Option<usize>,
    /// With `slot`: the ring's CQE size in bytes, 64 or 128 (the cqe64 is a 128-byte slot's
    /// second half).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ring_cqe_size: Option<u32>,
    /// The decoded CQE.
    #[serde(flatten)]
    pub cqe: Decoded,
}

/// A dump that could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// 1-based line the problem is reported at.
    pub line: usize,
    /// The printer the dump looked like, when known (JSON key `printer`).
    #[serde(rename = "printer")]
    pub format: Option<DumpFormat>,
    /// Why it was not decoded.
    pub reason: String,
}

impl Problem {
    /// The reason and, when known, the printer: `truncated dump: ... (DPDK rte_hexdump)`.
    pub fn message(&self) -> String {
        match self.format {
            Some(fm) => format!("{} ({})", self.reason, fm.describe()),
            None => self.reason.clone(),
        }
    }
}

impl core::fmt::Display for Problem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message())
    }
}

/// Everything [`scan()`] found, in line order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Dumps decoded.
    pub dumps: Vec<Found>,
    /// Dumps that could not be decoded.
    pub problems: Vec<Problem>,
}

/// What [`scan_stream`] hands over: a decoded CQE or a problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// A dump decoded.
    Cqe(Found),
    /// A dump that could not be decoded.
    Problem(Problem),
}

impl Finding {
    /// The 1-based line it is reported at.
    pub fn line(&self) -> usize {
        match self {
            Self::Cqe(f) => f.line,
            Self::Problem(p) => p.line,
        }
    }

    /// The order findings are reported in: by line, CQEs before problems, a ring's CQEs
    /// by slot.
    pub(crate) fn order(&self) -> (usize, bool, Option<usize>) {
        match self {
            Self::Cqe(f) => (f.line, false, f.slot),
            Self::Problem(p) => (p.line, true, None),
        }
    }
}

/// What a [`scan_stream`] read and found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanSummary {
    /// CQEs handed over.
    pub dumps: usize,
    /// Problems handed over.
    pub problems: usize,
    /// Bytes of input read.
    pub bytes: u64,
    /// Every line read was blank (an empty input too).
    pub blank: bool,
    /// The sink stopped the scan before the end of the input.
    pub stopped: bool,
}

pub use render::{render_json, render_text};
