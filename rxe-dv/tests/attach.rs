//! Every self-check of the attach refuses what it should, says what it saw, and a
//! descriptor found through rdma-core's `struct rxe_cq` bytes (each layout-table row)
//! attaches and polls.

use dvcq_provider::{Completion, CqDriver};
use dvcq_rxe_dv::model::{record, rxe_cq_bytes, ModelConfig, RxeModel, MODEL_MMAP_OFFSET};
use dvcq_rxe_dv::{AttachError, QueueDesc, RxeCq, RxeCqFields};
use dvcq_uapi::rxe::cq_layout::RXE_CQ_LAYOUTS;
use dvcq_uapi::rxe::RxeCqLayout;

fn attach(_owner: &RxeModel, desc: QueueDesc) -> Result<RxeCq, AttachError> {
    // SAFETY: every descriptor here points into `_owner`'s queue buffer (or is refused before any access: null, misaligned or too small), which outlives the returned poller in each test, and only dvcq's primitives touch it.
    unsafe { RxeCq::attach(desc) }
}

fn model(cqe: u32) -> RxeModel {
    RxeModel::new(ModelConfig::new(cqe)).unwrap()
}

/// A descriptor that is right passes, and so does the model's own poller path.
#[test]
fn the_models_descriptor_attaches_and_polls() {
    let mut m = model(16);
    let desc = m.desc();
    assert_eq!((desc.cqe, desc.map_size, desc.wc_size), (31, 8192, Some(128)));
    let mut cq = attach(&m, desc).unwrap();
    let c = Completion { wr_id: 77, qp_num: 3, byte_len: 9, ..Completion::default() };
    m.push(&record(&c)).unwrap();
    let mut out = [Completion::default(); 2];
    assert_eq!(cq.poll(&mut out), 1);
    assert_eq!(out[0], c);
    assert_eq!(m.consumer_index(), 1);
}

/// The descriptor's own facts: the pointer, the mapping size, the CQ depth, `wc_size`.
#[test]
fn bad_descriptors_are_refused() {
    use AttachError as E;
    let m = model(16);
    let d = m.desc();
    let base = d.base as usize;
    let cases = [
        (QueueDesc { base: std::ptr::null_mut(), ..d }, E::NullQueue),
        (QueueDesc { base: d.base.wrapping_add(64), ..d }, E::Misaligned { addr: base + 64, page: 4096 }),
        (QueueDesc { map_size: 383, ..d }, E::MapTooSmall { need: 384, slots: 0, elem_size: 0, have: 383 }),
        (QueueDesc { cqe: 0, ..d }, E::BadCqe { cqe: 0 }),
        (QueueDesc { cqe: -1, ..d }, E::BadCqe { cqe: -1 }),
        (QueueDesc { cqe: 32, ..d }, E::RingSmallerThanCq { slots: 32, cqe: 32 }),
        (QueueDesc { wc_size: Some(64), ..d }, E::WcSizeMismatch { wc_size: 64, elem_size: 128 }),
        (
            QueueDesc { map_size: 384 + 32 * 128 - 1, ..d },
            E::MapTooSmall { need: 384 + 32 * 128, slots: 32, elem_size: 128, have: 384 + 32 * 128 - 1 },
        ),
    ];
    for (desc, want) in cases {
        assert_eq!(attach(&m, desc).unwrap_err(), want, "{desc:?}");
    }
    // A CQ smaller than the ring, and no wc_size to compare, are fine.
    assert!(attach(&m, QueueDesc { cqe: 1, wc_size: None, ..d }).is_ok());
}

/// The header's facts, corrupted in the buffer itself, through both attach paths.
#[test]
fn bad_headers_are_refused() {
    use AttachError as E;
    let cases: [(u32, u32, AttachError); 5] = [
        (7, 30, E::SlotsNotPowerOfTwo { index_mask: 30 }),
        (7, 15, E::RingSmallerThanCq { slots: 16, cqe: 31 }),
        (5, 31, E::ElemSize { log2_elem_size: 5, min: 64, max: 65536 }),
        (40, 31, E::ElemSize { log2_elem_size: 40, min: 64, max: 65536 }),
        (7, 63, E::MapTooSmall { need: 384 + 64 * 128, slots: 64, elem_size: 128, have: 8192 }),
    ];
    for (log2, mask, want) in cases {
        let m = model(16);
        m.write_header(log2, mask);
        assert_eq!(m.poller().unwrap_err(), want, "log2 {log2} mask {mask}");
        assert_eq!(attach(&m, m.desc()).unwrap_err(), want, "log2 {log2} mask {mask}");
    }
}

/// Indexes outside the mask, which neither side ever stores.
#[test]
fn indexes_outside_the_mask_are_refused() {
    let m = model(16);
    m.write_producer_raw(32);
    let e = m.poller().unwrap_err();
    assert_eq!(e, AttachError::IndexOutsideMask { which: "producer", index: 32, index_mask: 31 });
    assert_eq!(e.to_string(), "rxe queue producer index 0x20 is outside index_mask 0x1f");
    m.restore_producer();
    m.write_consumer_raw(u32::MAX);
    let e = attach(&m, m.desc()).unwrap_err();
    assert_eq!(e, AttachError::IndexOutsideMask { which: "consumer", index: u32::MAX, index_mask: 31 });
    m.write_consumer_raw(31);
    assert!(m.poller().is_ok());
}

/// Messages say what failed and the values seen.
#[test]
fn messages_name_the_values() {
    let texts = [
        (AttachError::NullQueue, "rxe queue buffer is a null pointer"),
        (
            AttachError::Misaligned { addr: 0x1040, page: 4096 },
            "rxe queue buffer at 0x1040 is not page aligned (4096 bytes)",
        ),
        (
            AttachError::RingSmallerThanCq { slots: 16, cqe: 31 },
            "rxe queue of 16 slots cannot hold a cq of 31 entries (needs cqe + 1)",
        ),
        (
            AttachError::WcSizeMismatch { wc_size: 64, elem_size: 128 },
            "rxe_cq.wc_size 64 is not the queue's element stride 128",
        ),
        (
            AttachError::MapTooSmall { need: 8576, slots: 64, elem_size: 128, have: 8192 },
            "rxe queue needs 8576 bytes (header + 64 slots of 128) but 8192 are mapped",
        ),
        (AttachError::ShortStruct { need: 344, have: 288 }, "struct rxe_cq: 288 bytes given, the layout has 344"),
    ];
    for (e, want) in texts {
        assert_eq!(e.to_string(), want);
    }
}

/// For every layout row: the image of rdma-core's struct reads back as the model's fields,
/// and its descriptor attaches and polls what the model posts.
#[test]
fn every_layout_row_finds_the_queue() {
    for row in &RXE_CQ_LAYOUTS {
        let mut m = model(100);
        let bytes = m.rxe_cq_image(row);
        assert_eq!(bytes.len(), row.size);
        let f = RxeCqFields::read(row, &bytes).unwrap();
        assert_eq!(f, m.rxe_cq_fields());
        assert_eq!(f.queue_desc(), m.desc());
        assert_eq!((f.mmap_info.offset, f.mmap_info.size as usize, f.cqe), (MODEL_MMAP_OFFSET, m.map_size(), 127));
        let mut cq = attach(&m, f.queue_desc()).unwrap();
        for k in 0..200u64 {
            let c = Completion { wr_id: k, ..Completion::default() };
            m.push(&record(&c)).unwrap();
            let mut out = [Completion::default()];
            assert_eq!((cq.poll(&mut out), out[0].wr_id), (1, k));
        }
    }
    let row = RxeCqLayout::for_release(44);
    assert_eq!(row.is_some(), cfg!(target_arch = "x86_64"));
}

/// The private struct's own facts: its length, the queue pointer, `mmap_info`, `wc_size`.
#[test]
fn bad_private_structs_are_refused() {
    use AttachError as E;
    let row = &RXE_CQ_LAYOUTS[0];
    let m = model(16);
    let good = m.rxe_cq_fields();
    let bytes = rxe_cq_bytes(row, &good);
    assert_eq!(RxeCqFields::read(row, &bytes[..row.size - 1]), Err(E::ShortStruct { need: 344, have: 343 }));
    let read = |f: RxeCqFields| RxeCqFields::read(row, &rxe_cq_bytes(row, &f));
    let info = |offset, size| dvcq_uapi::rxe::MmInfo { offset, size, pad: 0 };
    let cases = [
        (RxeCqFields { queue: 0, ..good }, E::NullQueue),
        (RxeCqFields { queue: good.queue + 8, ..good }, E::Misaligned { addr: good.queue as usize + 8, page: 4096 }),
        (RxeCqFields { mmap_info: info(0, 8192), ..good }, E::BadMmapInfo { offset: 0, size: 8192, page: 4096 }),
        (RxeCqFields { mmap_info: info(4100, 8192), ..good }, E::BadMmapInfo { offset: 4100, size: 8192, page: 4096 }),
        (RxeCqFields { mmap_info: info(4096, 0), ..good }, E::BadMmapInfo { offset: 4096, size: 0, page: 4096 }),
        (RxeCqFields { mmap_info: info(4096, 4480), ..good }, E::BadMmapInfo { offset: 4096, size: 4480, page: 4096 }),
    ];
    for (f, want) in cases {
        assert_eq!(read(f), Err(want), "{f:?}");
    }
    // Fields that read fine but disagree with the queue itself fail at attach.
    let f = read(RxeCqFields { wc_size: 64, ..good }).unwrap();
    assert_eq!(attach(&m, f.queue_desc()).unwrap_err(), E::WcSizeMismatch { wc_size: 64, elem_size: 128 });
    let f = read(RxeCqFields { mmap_info: info(4096, 4096), ..good }).unwrap();
    assert!(matches!(attach(&m, f.queue_desc()), Err(E::MapTooSmall { need: 4480, have: 4096, .. })));
    let f = read(RxeCqFields { cqe: 40, ..good }).unwrap();
    assert_eq!(attach(&m, f.queue_desc()).unwrap_err(), E::RingSmallerThanCq { slots: 32, cqe: 40 });
}
