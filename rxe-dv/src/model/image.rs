//! What the kernel writes and what rdma-core holds, as bytes: a [`Completion`] as the
//! `struct ib_uverbs_wc` rdma_rxe posts for it, and rdma-core's private `struct rxe_cq` for
//! a layout-table row, so attach paths can be tested without a kernel.

use crate::locate::RxeCqFields;
use dvcq_provider::Completion;
use dvcq_uapi::rxe::cq_layout::{IBV_CQ_CQE_OFFSET, IBV_CQ_HANDLE_OFFSET};
use dvcq_uapi::rxe::wc::UverbsWc;
use dvcq_uapi::rxe::RxeCqLayout;

/// The record rdma_rxe writes to report `c`: every `ibv_wc` field of `c`, with the
/// libibverbs numbers (which the kernel's `ib_wc_status` / `ib_wc_opcode` share), and
/// `port_num` 1 on receive completions only: the responder fills it in (`do_complete`),
/// the requester's send completions and the receive flushes leave it 0, as a capture from
/// the real driver shows (tests/data).
pub fn record(c: &Completion) -> UverbsWc {
    UverbsWc {
        wr_id: c.wr_id,
        status: c.status as u32,
        opcode: c.opcode as u32,
        vendor_err: c.vendor_err,
        byte_len: c.byte_len,
        ex: c.imm_data,
        qp_num: c.qp_num,
        src_qp: c.src_qp,
        wc_flags: c.wc_flags.bits(),
        pkey_index: c.pkey_index,
        slid: c.slid,
        sl: c.sl,
        dlid_path_bits: c.dlid_path_bits,
        port_num: u8::from(c.opcode.is_recv()),
        reserved: 0,
    }
}

/// The bytes of a `struct rxe_cq` of layout `layout` holding `f`, as `rxe_create_cq`
/// leaves it (`calloc`ed, so every other byte zero: an unlocked spinlock, no current record
/// `wc`, `cur_index` 0).
pub fn rxe_cq_bytes(layout: &RxeCqLayout, f: &RxeCqFields) -> Vec<u8> {
    let mut b = vec![0u8; layout.size];
    let mut put = |off: usize, bytes: &[u8]| {
        if let Some(dst) = b.get_mut(off..off + bytes.len()) {
            dst.copy_from_slice(bytes);
        }
    };
    put(IBV_CQ_HANDLE_OFFSET, &f.handle.to_ne_bytes());
    put(IBV_CQ_CQE_OFFSET, &f.cqe.to_ne_bytes());
    put(layout.mmap_info, &f.mmap_info.offset.to_ne_bytes());
    put(layout.mmap_info + 8, &f.mmap_info.size.to_ne_bytes());
    put(layout.mmap_info + 12, &f.mmap_info.pad.to_ne_bytes());
    put(layout.queue, &f.queue.to_ne_bytes());
    put(layout.wc_size, &f.wc_size.to_ne_bytes());
    b
}
