//! `sq_sig_all` on the model devices, and requester scatter-to-CQE on `model-mlx5`: an RC
//! QP made with `sq_sig_all` gets a READ's response inside its CQE (up to 64 bytes in a
//! 128-byte CQE, format 2; up to 32 in a 64-byte one, format 1), and the poll copies it
//! into the READ's list, read from the WQE the device wrote
//! (`test_dv_cq_rdma_read_small_msg_128_cqe`). The CQEs are read back from the ring image.

use dvcq::model_device::{Mlx5CqAttrs, ModelCq, ModelDevice, ModelMr, ModelQp, ModelQpInit, ModelVendor};
use dvcq::verbs::{Access, QpCaps, QpType, RecvWr, SendOp, SendWr};
use dvcq::{Completion, WcOpcode, WcStatus};

fn drain(cq: &mut ModelCq) -> Vec<Completion> {
    let mut all = Vec::new();
    let mut wcs = [Completion::default(); 16];
    loop {
        let polled = cq.poll(&mut wcs);
        if polled.is_empty() {
            return all;
        }
        all.extend_from_slice(polled);
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) | 1).collect()
}

fn read(mr: &ModelMr, off: u64, n: usize) -> Vec<u8> {
    let mut v = vec![0; n];
    mr.read(off, &mut v).unwrap();
    v
}

/// The ring's slots as bytes, in ring order (the hex lines of its ring image).
fn slots(cq: &ModelCq) -> Vec<Vec<u8>> {
    let image = cq.ring_image().unwrap();
    image
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(|l| (0..l.len()).step_by(2).map(|i| u8::from_str_radix(&l[i..i + 2], 16).unwrap()).collect())
        .collect()
}

/// A slot's format bits (bits 3:2 of `op_own`, the last byte).
fn format(slot: &[u8]) -> u8 {
    (slot[slot.len() - 1] >> 2) & 3
}

/// A connected RC pair on one model-mlx5 CQ of `cqe_size`-byte CQEs, the QPs made with
/// `sq_sig_all` or not, and a region each.
struct Pair {
    cq: ModelCq,
    a: ModelQp,
    ma: ModelMr,
    mb: ModelMr,
    b: ModelQp,
    _dev: ModelDevice,
}

fn pair(vendor: ModelVendor, cqe_size: u32, sig_all: bool, caps: QpCaps) -> Pair {
    let dev = ModelDevice::new(vendor);
    let cq = match vendor {
        ModelVendor::Mlx5 => dev.create_cq_mlx5(64, Mlx5CqAttrs { cqe_size, ..Mlx5CqAttrs::default() }).unwrap(),
        _ => dev.create_cq(64).unwrap(),
    };
    let init = ModelQpInit { qp_type: QpType::Rc, send_cq: &cq, recv_cq: &cq, caps, srq: None, sq_sig_all: sig_all };
    let a = dev.create_qp_ex(&init).unwrap();
    let b = dev.create_qp_ex(&init).unwrap();
    a.connect(&b.endpoint()).unwrap();
    b.connect(&a.endpoint()).unwrap();
    let ma = dev.reg_mr(8192, Access::ALL).unwrap();
    let mb = dev.reg_mr(8192, Access::ALL).unwrap();
    Pair { cq, a, ma, mb, b, _dev: dev }
}

const SIZES: [u32; 9] = [1, 8, 31, 32, 33, 63, 64, 65, 200];

/// READs of [`SIZES`] bytes on a model-mlx5 pair with `sq_sig_all` (or not) on a CQ of
/// `cqe_size`-byte CQEs, each in its own 256 bytes of `ma`, unflagged with `sq_sig_all`.
/// Checks every completion and the data, and returns each READ's CQE format and whether
/// its data was in the buffer before the poll.
fn reads(cqe_size: u32, sig_all: bool) -> Vec<(u32, u8, bool)> {
    let p = pair(ModelVendor::Mlx5, cqe_size, sig_all, QpCaps::default());
    let mut cq = p.cq;
    let remote = p.mb.remote();
    let lists: Vec<_> = (0u64..)
        .zip(SIZES)
        .map(|(i, len)| {
            p.mb.write(4096 + i * 256, &pattern(len as usize, i as u8)).unwrap();
            [p.ma.slice(i * 256, len).unwrap()]
        })
        .collect();
    let wrs: Vec<_> = (0u64..)
        .zip(&lists)
        .map(|(i, sg)| SendWr::new(i, SendOp::Read(remote.at(4096 + i * 256)), sg).signaled(!sig_all))
        .collect();
    p.a.post_send(&wrs).unwrap();
    let ring = slots(&cq);
    let before: Vec<bool> = (0u64..)
        .zip(SIZES)
        .map(|(i, len)| read(&p.ma, i * 256, len as usize) == pattern(len as usize, i as u8))
        .collect();
    let mut out = Vec::new();
    for (i, len) in (0u64..).zip(SIZES) {
        let slot = &ring[i as usize];
        assert_eq!(slot.len(), cqe_size as usize);
        let f = format(slot);
        let want = pattern(len as usize, i as u8);
        // Where the data is: format 2 at the start of the 128-byte CQE's first half, format 1
        // at the start of the cqe64; byte_cnt (cqe64 bytes 44..48) says how much.
        let cqe64 = &slot[slot.len() - 64..];
        assert_eq!(u32::from_be_bytes(cqe64[44..48].try_into().unwrap()), len, "byte_cnt of the {len}-byte READ");
        match f {
            2 => assert_eq!(&slot[..len as usize], &want[..], "format 2 data of the {len}-byte READ"),
            1 => assert_eq!(&cqe64[..len as usize], &want[..], "format 1 data of the {len}-byte READ"),
            _ => {}
        }
        out.push((len, f, before[i as usize]));
    }
    let wcs = drain(&mut cq);
    assert_eq!(wcs.len(), SIZES.len());
    for ((i, len), w) in (0u64..).zip(SIZES).zip(&wcs) {
        assert_eq!((w.wr_id, w.status, w.opcode, w.byte_len), (i, WcStatus::Success, WcOpcode::RdmaRead, len));
        assert_eq!(read(&p.ma, i * 256, len as usize), pattern(len as usize, i as u8), "the {len}-byte READ's data");
    }
    assert_eq!(cq.stats().mlx5.map(|s| s.inline_not_copied), Some(0));
    out
}

#[test]
fn reads_of_up_to_64_bytes_travel_in_128_byte_cqes_and_the_poll_copies_them() {
    for (len, f, before) in reads(128, true) {
        // Up to 64 bytes: format 2, and the buffer holds nothing until the poll copies it.
        let inline = len <= 64;
        assert_eq!((f, before), if inline { (2, false) } else { (0, true) }, "the {len}-byte READ");
    }
}

#[test]
fn reads_of_up_to_32_bytes_travel_in_64_byte_cqes() {
    for (len, f, before) in reads(64, true) {
        let inline = len <= 32;
        assert_eq!((f, before), if inline { (1, false) } else { (0, true) }, "the {len}-byte READ");
    }
}

#[test]
fn without_sq_sig_all_every_response_goes_to_the_buffer() {
    for cqe_size in [64, 128] {
        for (len, f, before) in reads(cqe_size, false) {
            assert_eq!((f, before), (0, true), "{cqe_size}-byte CQEs, the {len}-byte READ");
        }
    }
}

/// A READ whose WQE starts in the SQ's last basic block has its data segments wrap to the
/// SQ's start (rdma-core's post and `mlx5_copy_to_send_wqe` both wrap at `qend`); the
/// poll's copy follows them.
#[test]
fn a_reads_scatter_list_that_wraps_the_send_queue_is_followed() {
    // Two WRs of four entries: an RC WQE of 256 bytes each, eight 64-byte blocks.
    let caps = QpCaps { max_send_wr: 2, max_send_sge: 4, ..QpCaps::default() };
    let p = pair(ModelVendor::Mlx5, 128, true, caps);
    let mut cq = p.cq;
    let remote = p.mb.remote();
    // Seven one-block WRITEs move the SQ to its last block.
    let sg = [p.ma.slice(0, 8).unwrap()];
    for i in 0..7 {
        p.a.post_send(&[SendWr::new(i, SendOp::Write(remote.at(0)), &sg).signaled(false)]).unwrap();
        assert_eq!(drain(&mut cq).len(), 1, "sq_sig_all: the unflagged WRITE {i} completes");
    }
    // A READ of 4 entries (ctrl, raddr and 4 data segments: two blocks) from block 7.
    let want = pattern(40, 3);
    p.mb.write(512, &want).unwrap();
    let list: Vec<_> = (0..4).map(|k| p.ma.slice(1024 + 100 * k, 10).unwrap()).collect();
    p.a.post_send(&[SendWr::new(9, SendOp::Read(remote.at(512)), &list).signaled(false)]).unwrap();
    assert_eq!(format(&slots(&cq)[7]), 2);
    let wcs = drain(&mut cq);
    assert_eq!((wcs.len(), wcs[0].wr_id, wcs[0].status, wcs[0].byte_len), (1, 9, WcStatus::Success, 40));
    for k in 0..4u64 {
        assert_eq!(read(&p.ma, 1024 + 100 * k, 10), want[10 * k as usize..][..10], "entry {k}");
    }
}

/// `sq_sig_all` on both models: every send completes, flagged or not, with its own wr_id;
/// without it only the flagged ones do.
#[test]
fn sq_sig_all_completes_every_send_on_both_models() {
    for v in [ModelVendor::Mlx5, ModelVendor::Irdma] {
        for sig_all in [true, false] {
            let p = pair(v, 64, sig_all, QpCaps::default());
            let mut cq = p.cq;
            let remote = p.mb.remote();
            p.ma.write(0, &pattern(64, 7)).unwrap();
            p.b.post_recv(&[RecvWr { wr_id: 100, sg_list: &[p.mb.slice(2048, 64).unwrap()] }]).unwrap();
            let sg = [p.ma.slice(0, 64).unwrap()];
            let into = [p.ma.slice(512, 64).unwrap()];
            let wrs = [
                SendWr::new(1, SendOp::Write(remote.at(0)), &sg).signaled(false),
                SendWr::new(2, SendOp::Send, &sg).signaled(false),
                SendWr::new(3, SendOp::Read(remote.at(0)), &into).signaled(false),
                SendWr::new(4, SendOp::Write(remote.at(256)), &sg),
            ];
            p.a.post_send(&wrs).unwrap();
            let wcs = drain(&mut cq);
            let sends: Vec<_> = wcs.iter().filter(|w| w.qp_num == p.a.qpn()).map(|w| (w.wr_id, w.opcode)).collect();
            let want: &[(u64, WcOpcode)] = if sig_all {
                &[(1, WcOpcode::RdmaWrite), (2, WcOpcode::Send), (3, WcOpcode::RdmaRead), (4, WcOpcode::RdmaWrite)]
            } else {
                &[(4, WcOpcode::RdmaWrite)]
            };
            assert_eq!(sends, want, "{v:?} sq_sig_all {sig_all}");
            assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{v:?}: {wcs:?}");
            assert_eq!(read(&p.mb, 2048, 64), pattern(64, 7), "{v:?}: the SEND's data");
            assert_eq!(read(&p.ma, 512, 64), pattern(64, 7), "{v:?}: the READ's data");
        }
    }
}
