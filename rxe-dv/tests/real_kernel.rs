//! A queue buffer and a `struct rxe_cq` the real driver and rdma-core 44 wrote (captured in
//! a qemu guest, tests/data/rxe-linux-6.1-rdma-core-44.txt): the poller returns exactly what
//! `ibv_poll_cq` returned for it, the layout-table row reads the struct, and the model
//! writes the same bytes and sizes as the kernel.

use dvcq_provider::{Completion, CqDriver, DmaBuffer, WcFlags, WcOpcode, WcStatus};
use dvcq_rxe_dv::model::{record, ModelConfig, RxeModel, MODEL_MMAP_OFFSET};
use dvcq_rxe_dv::{RxeCq, RxeCqFields};
use dvcq_uapi::rxe::cq_layout::RXE_CQ_LAYOUTS;
use std::collections::HashMap;
use std::sync::Arc;

const CAPTURE: &str = include_str!("data/rxe-linux-6.1-rdma-core-44.txt");

/// The capture's lines of one kind, without the tag.
fn lines(tag: &str) -> impl Iterator<Item = &'static str> + '_ {
    CAPTURE.lines().filter_map(move |l| l.strip_prefix(tag)?.strip_prefix(' '))
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn fields(line: &str) -> HashMap<&str, u64> {
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            let n = match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => v.parse(),
            };
            (k, n.unwrap())
        })
        .collect()
}

/// The queue buffer as dumped before the poll.
fn queue_bytes(map_size: usize) -> Vec<u8> {
    let mut mem = vec![0u8; map_size];
    for l in lines("rxe-mem") {
        let (off, bytes) = l.split_once(' ').unwrap();
        let off: usize = off.parse().unwrap();
        mem[off..off + 64].copy_from_slice(&hex(bytes));
    }
    mem
}

/// What `ibv_poll_cq` returned, as completions.
fn ibv_poll_cq_results() -> Vec<Completion> {
    lines("rxe-wc")
        .map(|l| {
            let f = fields(l);
            Completion {
                wr_id: f["wr_id"],
                status: WcStatus::from_u32(f["status"] as u32).unwrap(),
                opcode: WcOpcode::from_u32(f["opcode"] as u32).unwrap(),
                vendor_err: f["vendor_err"] as u32,
                byte_len: f["byte_len"] as u32,
                imm_data: f["imm_data"] as u32,
                qp_num: f["qp_num"] as u32,
                src_qp: f["src_qp"] as u32,
                wc_flags: WcFlags::from_bits_retain(f["wc_flags"] as u32),
                pkey_index: f["pkey_index"] as u16,
                slid: f["slid"] as u16,
                sl: f["sl"] as u8,
                dlid_path_bits: f["dlid_path_bits"] as u8,
                ..Completion::default()
            }
        })
        .collect()
}

fn cq_line() -> HashMap<&'static str, u64> {
    fields(lines("rxe-cq").next().unwrap())
}

#[test]
fn the_poller_returns_what_ibv_poll_cq_returned() {
    let cq_info = cq_line();
    let map_size = cq_info["mmap_size"] as usize;
    let buf = Arc::new(DmaBuffer::new(map_size).unwrap());
    buf.write_bytes(0, &queue_bytes(map_size)).unwrap();
    let mut cq = RxeCq::on_dma_buffer(&buf, cq_info["cqe"] as i32).unwrap();
    let g = cq.geometry();
    assert_eq!((g.log2_elem_size, g.index_mask, g.producer, g.consumer), (7, 31, 11, 0));
    let want = ibv_poll_cq_results();
    assert_eq!(want.len(), 11);
    let mut out = [Completion::default(); 32];
    let n = cq.poll(&mut out);
    assert_eq!(&out[..n], &want[..]);
    // The error and the flushes are there as the kernel wrote them.
    assert_eq!((out[8].status, out[8].wr_id), (WcStatus::LocQpOpErr, 0x2ee));
    assert_eq!((out[9].status, out[10].status), (WcStatus::WrFlushErr, WcStatus::WrFlushErr));
    // rdma-core left the consumer index at 11 after its poll; so does this one.
    let after = fields(lines("rxe-hdr").last().unwrap());
    assert_eq!(cq.stored_ci(), after["consumer"] as u32);
    assert_eq!(cq.poll(&mut out), 0);
}

#[test]
fn the_layout_row_reads_the_real_struct() {
    let cq_info = cq_line();
    let bytes = hex(lines("rxe-struct").next().unwrap());
    let row = &RXE_CQ_LAYOUTS[0];
    assert_eq!(bytes.len(), row.size);
    let f = RxeCqFields::read(row, &bytes).unwrap();
    assert_eq!(f.cqe as u64, cq_info["cqe"]);
    assert_eq!(f.handle as u64, cq_info["handle"]);
    assert_eq!((f.mmap_info.offset, u64::from(f.mmap_info.size)), (cq_info["mmap_offset"], cq_info["mmap_size"]));
    assert_eq!((f.queue, f.wc_size), (cq_info["queue"], cq_info["wc_size"]));
    assert_eq!(f.queue_desc().map_size, 8192);
}

/// The model sizes the CQ as the kernel did, and posting what `ibv_poll_cq` returned
/// writes the kernel's bytes, element for element.
#[test]
fn the_model_writes_what_the_kernel_wrote() {
    let cq_info = cq_line();
    let mut m = RxeModel::new(ModelConfig::new(16)).unwrap();
    assert_eq!(
        (m.cqe() as u64, m.map_size() as u64, m.elem_size() as u64),
        (31, cq_info["mmap_size"], cq_info["wc_size"])
    );
    assert_eq!(m.rxe_cq_fields().mmap_info.offset, MODEL_MMAP_OFFSET);
    assert_eq!(MODEL_MMAP_OFFSET, cq_info["mmap_offset"]);
    for c in ibv_poll_cq_results() {
        m.push(&record(&c)).unwrap();
    }
    let kernel = queue_bytes(m.map_size());
    let model = m.snapshot();
    for off in (0..kernel.len()).step_by(64) {
        assert_eq!(&model[off..off + 64], &kernel[off..off + 64], "bytes {off}..{}", off + 64);
    }
}
