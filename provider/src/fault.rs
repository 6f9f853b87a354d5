//! CQEs that cannot become completions.

use core::fmt;

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
        };
        write!(f, "{what} {:#x} at ring position {}", self.value, self.position)
    }
}

#[cfg(test)]
mod tests {
    use super::{CqeFault, FaultKind};

    const ALL: [FaultKind; 9] = [
        FaultKind::None,
        FaultKind::UnknownQp,
        FaultKind::UnknownSrq,
        FaultKind::BadOpcode,
        FaultKind::BadFormat,
        FaultKind::Truncated,
        FaultKind::BadField,
        FaultKind::SrqPageFault,
        FaultKind::SigErr,
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
                "sig_err"
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
            assert!(t.ends_with(" 0x0 at ring position 0"), "{t}");
            assert!(!texts[..i].contains(t), "{t} twice");
        }
    }
}
