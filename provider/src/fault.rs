//! CQEs that cannot become completions, and the CQ error a poll reports in their place.

use core::fmt;
use core::sync::atomic::{AtomicU8, Ordering};

/// Why a CQE could not be turned into a completion. The `word` is what ring-image decoding
/// prints after `reason=`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// Not a fault (internal marker for ordinary completions).
    #[default]
    None = 0,
    /// The CQE names a QP (or user index) nobody registered.
    UnknownQp = 1,
    /// The CQE names an SRQ nobody registered.
    UnknownSrq = 2,
    /// The opcode is not one the hardware defines for a CQE.
    BadOpcode = 3,
    /// The format bits select a layout the CQ was not created with (inline or compression).
    BadFormat = 4,
    /// A compressed session or extended CQE runs past what the ring holds.
    Truncated = 5,
    /// A field holds a value the layout does not allow (for example a WQE index beyond the
    /// work queue).
    BadField = 6,
    /// mlx5: an on-demand-paging page fault on a receive from an SRQ. The device consumed
    /// the SRQ WQE without data; rdma-core re-posts it itself and returns nothing, but the
    /// application owns the SRQ here and must post that receive again. The item's
    /// `qp_num` is the SRQ number (the fault's value) and `wqe_index` the consumed WQE.
    SrqPageFault = 7,
    /// mlx5: a signature error (SIG_ERR CQE) on a memory key nobody registered for
    /// signature errors. rdma-core records signature errors on the mkey and fails the poll
    /// when it does not know the mkey; here the error comes back in the CQE's place. The
    /// item's `qp_num` is the mkey index (the fault's value); mlx5-dv's `SigError::from_item`
    /// reads the rest (syndrome, expected and actual signatures, offset).
    SigErr = 8,
    /// Not a CQE: the CQ is in error and the device writes no more completions to it. A poll
    /// returns this item once, on the first poll that finds the ring empty after the error
    /// (every CQE written before it comes first). The item's `qp_num` holds the
    /// [`CqErrorReason`] (read it with [`CqeFault::cq_error`]) and `wr_id` the number of
    /// completions the CQ returned before it (the position of the completion that was
    /// lost, modulo 2^32).
    CqError = 9,
}

impl FaultKind {
    /// The one-word reason printed in ring-image decoding.
    pub const fn word(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::UnknownQp => "unknown_qp",
            Self::UnknownSrq => "unknown_srq",
            Self::BadOpcode => "bad_opcode",
            Self::BadFormat => "bad_format",
            Self::Truncated => "truncated",
            Self::BadField => "bad_field",
            Self::SrqPageFault => "srq_page_fault",
            Self::SigErr => "sig_err",
            Self::CqError => "cq_error",
        }
    }
}

/// A CQE that could not become a completion: what was wrong, where it sat (the running
/// consumer counter of the CQE), and the offending value (QPN, user index, opcode, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqeFault {
    /// What was wrong.
    pub kind: FaultKind,
    /// The consumer position at the CQE, `position mod entries` being the slot: mlx5's
    /// running counter, irdma's lap-parity position (below twice the ring size).
    pub position: u32,
    /// The offending value.
    pub value: u32,
}

impl fmt::Display for CqeFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            FaultKind::None => "no fault",
            FaultKind::UnknownQp => "unknown qp",
            FaultKind::UnknownSrq => "unknown srq",
            FaultKind::BadOpcode => "bad cqe opcode",
            FaultKind::BadFormat => "cqe format not enabled on this cq",
            FaultKind::Truncated => "truncated cqe session",
            FaultKind::BadField => "bad cqe field",
            FaultKind::SrqPageFault => "odp page fault, receive to post again on srq",
            FaultKind::SigErr => "signature error on unregistered mkey index",
            FaultKind::CqError => {
                return match self.cq_error() {
                    Some(r) => write!(f, "cq in error ({r}) after {} completions", self.position),
                    None => write!(f, "cq in error (reason {:#x}) after {} completions", self.value, self.position),
                };
            }
        };
        write!(f, "{what} {:#x} at ring position {}", self.value, self.position)
    }
}

impl CqeFault {
    /// The CQ error item a poll returns once the CQ is in error for `reason`, after
    /// `polled` completions (see [`FaultKind::CqError`]).
    pub const fn cq_error_item(reason: CqErrorReason, polled: u32) -> CqeFault {
        CqeFault { kind: FaultKind::CqError, position: polled, value: reason as u32 }
    }

    /// Why the CQ is in error, for a [`FaultKind::CqError`] item; `None` for any other.
    pub const fn cq_error(&self) -> Option<CqErrorReason> {
        match self.kind {
            FaultKind::CqError => CqErrorReason::from_u32(self.value),
            _ => None,
        }
    }
}

/// Why a CQ is in error: the device writes no more completions to it.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CqErrorReason {
    /// The device found the CQ full and could not write a CQE (a CQ overrun: mlx5 CQ error
    /// syndrome 0x1, irdma `IRDMA_AE_CQ_OPERATION_ERROR`; rdma-core reports
    /// `IBV_EVENT_CQ_ERR`). The CQEs written before it are all there.
    Overrun = 1,
    /// The device stopped working (`IBV_EVENT_DEVICE_FATAL`: a fatal error or a removed
    /// device); nothing more completes on any of its CQs.
    DeviceFatal = 2,
}

impl CqErrorReason {
    /// The reason for its number (the `value` of a [`FaultKind::CqError`] item).
    pub const fn from_u32(v: u32) -> Option<CqErrorReason> {
        match v {
            1 => Some(Self::Overrun),
            2 => Some(Self::DeviceFatal),
            _ => None,
        }
    }

    /// One word: `overrun`, `device_fatal`.
    pub const fn word(self) -> &'static str {
        match self {
            Self::Overrun => "overrun",
            Self::DeviceFatal => "device_fatal",
        }
    }
}

impl fmt::Display for CqErrorReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Overrun => "it overran: the device found it full (CQ error event)",
            Self::DeviceFatal => "the device reported a fatal error (device fatal event)",
        })
    }
}

/// Whether a CQ is in error, and why: set by whatever detects the error (a model device as
/// it refuses a CQE, the reader of a context's async events), read by the CQ's poller when a
/// poll finds the ring empty. One relaxed load; the first reason set stays.
#[derive(Debug, Default)]
pub struct CqErrorCell(AtomicU8);

impl CqErrorCell {
    /// A CQ not in error.
    pub const fn new() -> CqErrorCell {
        CqErrorCell(AtomicU8::new(0))
    }

    /// Records that the CQ is in error for `reason`, unless it already was.
    pub fn set(&self, reason: CqErrorReason) {
        let _ = self.0.compare_exchange(0, reason as u8, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Whether the CQ is in error: one relaxed load.
    #[inline(always)]
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }

    /// Why the CQ is in error, if it is.
    #[inline(always)]
    pub fn get(&self) -> Option<CqErrorReason> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            v => CqErrorReason::from_u32(u32::from(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CqErrorCell, CqErrorReason, CqeFault, FaultKind};

    const ALL: [FaultKind; 10] = [
        FaultKind::None,
        FaultKind::UnknownQp,
        FaultKind::UnknownSrq,
        FaultKind::BadOpcode,
        FaultKind::BadFormat,
        FaultKind::Truncated,
        FaultKind::BadField,
        FaultKind::SrqPageFault,
        FaultKind::SigErr,
        FaultKind::CqError,
    ];

    /// Ring-image decoding prints `reason=<word>`: one word per kind, each its own, that a
    /// reader splitting the line at spaces and `=` gets back whole.
    #[test]
    fn each_kind_has_its_own_word() {
        let words: Vec<&str> = ALL.iter().map(|k| k.word()).collect();
        assert_eq!(
            words,
            [
                "none",
                "unknown_qp",
                "unknown_srq",
                "bad_opcode",
                "bad_format",
                "truncated",
                "bad_field",
                "srq_page_fault",
                "sig_err",
                "cq_error"
            ]
        );
    }

    /// The message names the kind, the offending value in hex and where the CQE sat.
    #[test]
    fn a_fault_says_what_which_value_and_where() {
        let f = CqeFault { kind: FaultKind::UnknownQp, position: 25, value: 0x999 };
        assert_eq!(f.to_string(), "unknown qp 0x999 at ring position 25");
        let texts: Vec<String> = ALL.iter().map(|&kind| CqeFault { kind, position: 0, value: 0 }.to_string()).collect();
        for (i, t) in texts.iter().enumerate() {
            let k = ALL[i];
            assert!(k == FaultKind::CqError || t.ends_with(" 0x0 at ring position 0"), "{t}");
            assert!(!texts[..i].contains(t), "{t} twice");
        }
    }

    /// A CQ error item says why and after how many completions; its reason reads back.
    #[test]
    fn a_cq_error_item_carries_its_reason_and_count() {
        let f = CqeFault::cq_error_item(CqErrorReason::Overrun, 16);
        assert_eq!(f.cq_error(), Some(CqErrorReason::Overrun));
        assert_eq!(
            f.to_string(),
            "cq in error (it overran: the device found it full (CQ error event)) after 16 completions"
        );
        let fatal = CqeFault::cq_error_item(CqErrorReason::DeviceFatal, 0);
        assert_eq!(fatal.cq_error(), Some(CqErrorReason::DeviceFatal));
        assert_eq!(CqeFault { kind: FaultKind::UnknownQp, position: 0, value: 1 }.cq_error(), None);
        let odd = CqeFault { kind: FaultKind::CqError, position: 3, value: 7 };
        assert_eq!((odd.cq_error(), odd.to_string()), (None, "cq in error (reason 0x7) after 3 completions".into()));
        assert_eq!((CqErrorReason::Overrun.word(), CqErrorReason::DeviceFatal.word()), ("overrun", "device_fatal"));
    }

    /// The cell keeps the first reason set, and reads back nothing until one is.
    #[test]
    fn the_error_cell_keeps_the_first_reason() {
        let c = CqErrorCell::new();
        assert_eq!(c.get(), None);
        c.set(CqErrorReason::Overrun);
        c.set(CqErrorReason::DeviceFatal);
        assert_eq!(c.get(), Some(CqErrorReason::Overrun));
    }
}
