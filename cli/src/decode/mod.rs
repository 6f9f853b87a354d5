//! Decoding CQE dumps found in logs: the library side of `dvcq decode`.
//!
//! [`scan()`] finds every dump in a text (whole log files included) and decodes each into a
//! [`Found`]; what cannot be decoded becomes a [`Problem`] with its line number and a reason,
//! and scanning goes on. [`decode_mlx5`] and [`decode_irdma`] decode one CQE an application
//! already holds. To print a CQE the way rdma-core does, see [`crate::mlx5::dump`].
//!
//! # Printers and eras
//!
//! Every error-CQE dump the public mlx5 printers have written, read from their code at the
//! releases named (rdma-core `providers/mlx5/cq.c`; Linux `drivers/infiniband/hw/mlx5/cq.c`
//! `dump_cqe` and `include/linux/mlx5/cq.h` `mlx5_dump_err_cqe`; DPDK `drivers/net/mlx5`
//! `mlx5_rxtx.h`/`mlx5_rxtx.c`/`mlx5_rx.c`/`mlx5_tx.c`, `mlx5_flow_aso.c`,
//! `drivers/compress/mlx5/mlx5_compress.c` and `lib/eal/common/eal_common_hexdump.c`). Any
//! log prefix (a time stamp, `kernel:`, a program's name or prompt such as `testpmd> `) may
//! precede a line; the [`DumpFormat`] each is reported as is in brackets.
//!
//! | printer | releases | first line | then | bytes |
//! |---|---|---|---|---|
//! | rdma-core libmlx5, error CQE ([`DumpFormat::RdmaCore`]) | v13 (2017) to today, and libmlx5 before it | `mlx5: <host>: got completion with error:` | 4 lines `%08x %08x %08x %08x` | `be32toh` words: memory order |
//! | rdma-core `MLX5_DEBUG` build, every CQE ([`DumpFormat::RdmaCoreDebug`]) | v13 to today | `<func>:<line>: dump cqe for cqn 0x<n>:` | the same 4 lines | the same |
//! | Linux mlx5_ib `dump_cqe` ([`DumpFormat::KernelWords`]) | v3.11 to at least v4.15 | `<ibdev>:dump_cqe:<line>:(pid <n>): dump error cqe` | 4 `pr_info` lines `%08x %08x %08x %08x` | `be32_to_cpu` words |
//! | Linux mlx5_ib `dump_cqe` + `mlx5_dump_err_cqe` ([`DumpFormat::Kernel`]) | by v4.19 to v6.1 | `... dump error cqe` (from v5.x after `WC error: <n>, Message: <text>`) | `print_hex_dump(.., "", DUMP_PREFIX_OFFSET, 16, 1, ..)`: `%.8x: ` and 16 `%02x` | memory order |
//! | Linux mlx5_ib `dump_cqe` ([`DumpFormat::Kernel`]) | v6.2 on | `... WC error: <n>, Message: <text>` | `print_hex_dump` with prefix `cqe_dump: ` | memory order |
//! | Linux mlx5e `mlx5e_dump_error_cqe`, Ethernet SQs ([`DumpFormat::Kernel`]) | by v4.19 on | `<netdev>: Error cqe on cqn 0x.., ci 0x.., sqn 0x.., [opcode 0x.., ]syndrome 0x.., vendor syndrome 0x..` | `print_hex_dump`, no prefix | memory order |
//! | DPDK debug builds, `check_cqe` ([`DumpFormat::Dpdk`]) | 17.11 to 19.05 | `MLX5 Error CQE: at [<ptr>], len=64` (to stderr, after `unexpected CQE error <op> (0x..) syndrome 0x..`) | `rte_hexdump`: `%08X:`, 16 ` %02X`, ` \| `, ASCII | one CQE; "seen" marker at byte 1 (to 18.05) or 17 |
//! | DPDK debug builds, `check_cqe` ([`DumpFormat::Dpdk`]) | 17.11 to 19.05 | `MLX5 CQE: at [<ptr>], len=64\|128` (an unexpected opcode) | `rte_hexdump` | one CQE; of 128 bytes, the second half |
//! | DPDK `mlx5_dump_debug_information` ([`DumpFormat::Dpdk`]) | 19.08 on | `MLX5 Error CQ: at [<ptr>], len=<n>` (in a `dpdk_mlx5_port_*` file, after `Unexpected CQE error syndrome 0x.. CQN = ..`) | `rte_hexdump` of the whole ring | the ring's error CQEs; marker at byte 36 (to 24.07) or 4 |
//! | DPDK flow age/ASO and compress ([`DumpFormat::DpdkWords`]) | 20.11 on (`mlx5_pci: `, from 21.05 `mlx5_net: ` or `mlx5_compress: `) | `<drv>: Error cqe:` | 4 lines `%08X %08X %08X %08X`; 8 from 24.11 with 128-byte cache lines | host-order (little-endian) loads; of 8 lines, the last 4 |
//!
//! `rte_hexdump` pads a short last line with ` \| ` once per missing byte before 19.05 and
//! with spaces from 19.05 on; both read the same. Dumps the same printers write that hold no
//! CQE are passed over: rdma-core's `dump wqe at <ptr>` words, DPDK's `Error wqe:` and
//! `Error opaq:` words, its `MLX5 Error SQ:`, `MLX5 Error RQ:` and `MLX5 TXQ:` WQE hexdumps,
//! and `Query CQ Dump:` (24.07 on), the CQ context a queue dump reads from the device.
//!
//! Where DPDK is built with 128-byte cache lines (arm64's generic build) its CQEs are 128
//! bytes, the cqe64 in the second half: the ring dumps hold such slots
//! ([`ScanOptions::ring_cqe_size`]), and before 24.11 its 64-byte single-CQE dumps hold the
//! padding, not the CQE; 64 zero bytes are reported as such, not decoded. DPDK's marker
//! offsets are listed with [`DPDK_MARKER_OFFSETS`].
//!
//! Besides these: a bare 64-byte hex string (one line, spaces optional); four lines of four
//! words without a header ([`DumpFormat::Words`]); and irdma CQEs as four or eight 64-bit
//! qwords ([`Vendor::Irdma`]).
//!
//! # Streaming
//!
//! [`scan_stream`] reads its input line by line and hands each finding over once its dump
//! has ended (at the line after it, or the end of the input), holding one dump's lines at a
//! time; [`scan`] and [`scan_with`] collect the same findings into a [`Report`].

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
    /// DPDK `Error cqe:` and four (or eight) lines of `%08X` words in host order.
    DpdkWords,
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
            Self::DpdkWords => "DPDK Error cqe words",
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
