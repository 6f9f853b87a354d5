//! Model scenarios: short, realistic CQ histories played on the hardware models, so a ring
//! can be exported as an image (`dvcq ring export`) and decoded anywhere.
//!
//! Each scenario first moves the consumer part-way round the ring (so the image starts
//! mid-ring and wraps), then leaves a mix of completions unconsumed.

use crate::mlx5::image::Mlx5Image;
use crate::mlx5::model::build::{self, ErrSpec, RecvAddr};
use crate::mlx5::model::compress::{Compression, Policy};
use crate::mlx5::model::{Mlx5Model, ModelConfig};
use crate::mlx5::{CompressionConfig, CqConfig, CqeVersion, QpConfig, Registry};
use crate::provider::Completion;
use crate::uapi::mlx5::opcode::{cqe_opcode, syndrome, wqe_opcode};
use dvcq_e810_dv::image::ImageQp as IrdmaImageQp;
use dvcq_e810_dv::model::{IrdmaModel, ModelConfig as IrdmaModelConfig, ModelCqe};
use dvcq_e810_dv::{Compat, QpRegistry};
use dvcq_uapi::irdma::codes::{flush, rq_op, sq_op};
use dvcq_uapi::irdma::HwRev;

/// The scenarios `dvcq ring export` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Sends, RDMA read, receives with immediate / invalidate, UD with GRH, an error and its
    /// flushes, and a CQE from a QP nobody registered.
    Mixed,
    /// Error completions of every class the device reports (mlx5: one CQE per syndrome;
    /// irdma: a flush CQE with every minor code, each on a QP of its own).
    Errors,
    /// A ring that wrapped several times, with the last lap part-consumed.
    Laps,
    /// Runs of same-kind completions (receives, then sends, then an error): what a device
    /// under PCIe back-pressure compresses (use with `--compression`).
    Stream,
    /// irdma only: two iWARP QPs. A connection WQE's CQE (consumed without a completion),
    /// a send, an RDMA write and read, receives with immediate data, with an invalidate and
    /// plain, then one QP's SQ and RQ flushed with a retry error.
    Iwarp,
}

const QP_A: u32 = 0x1a2;
const QP_B: u32 = 0x1b3;
/// irdma's errors scenario: the first of its QPs, one per flush code, and its context (the
/// image's qp line: contexts 1 and 2 are QP_A and QP_B).
const QP_ERR: u32 = 0x1c0;
const IRDMA_ERR_CTX: u64 = 3;

/// What a ring too small for `scenario` is told: the free slots it needs.
fn too_small(scenario: Scenario, need: usize) -> String {
    let name = clap::ValueEnum::to_possible_value(&scenario).map(|v| v.get_name().to_owned()).unwrap_or_default();
    format!("the {name} scenario needs {need} free slots; use more --entries")
}

/// Every flush minor code irdma reports (the table's 0 is no code).
fn irdma_flush_codes() -> impl Iterator<Item = u16> {
    flush::ALL.into_iter().filter(|&c| c != flush::INVALID)
}

/// Plays `scenario` on an mlx5 model with `entries` slots of `cqe_size` bytes, on a CQ
/// created with `compression` (the model then compresses every run it can), and returns the
/// ring image.
///
/// # Errors
///
/// A message when the model cannot be set up or the ring is too small for the scenario.
pub fn mlx5(
    scenario: Scenario,
    entries: u32,
    cqe_size: u32,
    compression: Option<CompressionConfig>,
) -> Result<Mlx5Image, String> {
    let mut mc = ModelConfig::new(entries);
    mc.cqe_size = cqe_size;
    mc.compression = compression.map(|c| Compression { layout: c.layout, format: c.format, policy: Policy::Always });
    let mut model = Mlx5Model::new(mc).map_err(|e| e.to_string())?;
    let mut reg = Registry::new();
    reg.add_qp(QpConfig::rc(QP_A, 64, 64)).map_err(|e| e.to_string())?;
    let mut ud = QpConfig::rc(QP_B, 64, 64);
    ud.qp_type = dvcq_mlx5_dv::QpType::Ud;
    reg.add_qp(ud).map_err(|e| e.to_string())?;
    if matches!(scenario, Scenario::Mixed) {
        // The signature mkey the mixed scenario's SIG_ERR CQE names (0x5500: index 0x55):
        // recorded on it, no item.
        reg.add_sig_mkey(0x55).map_err(|e| e.to_string())?;
    }
    let image_reg = reg.clone();
    let v = CqeVersion::V0;
    let ci = match cqe_size {
        64 => drive::<64>(&mut model, reg, scenario)?,
        128 => drive::<128>(&mut model, reg, scenario)?,
        s => return Err(format!("cqe size {s}: mlx5 CQEs are 64 or 128 bytes")),
    };
    Ok(Mlx5Image::from_ring(cqe_size, ci, v, compression, &image_reg, model.snapshot()))
}

fn drive<const S: usize>(m: &mut Mlx5Model, reg: Registry, scenario: Scenario) -> Result<u32, String> {
    let mut cq = m.poller::<S>(reg, CqConfig::default()).map_err(|e| e.to_string())?;
    let compressed = m.config().compression.is_some();
    let entries = m.config().entries;
    let push =
        |m: &mut Mlx5Model, e: build::Entry| m.push(&e).map(|_| ()).map_err(|e| format!("{e} (use more --entries)"));
    let mut buf = [Completion::default(); 16];
    // Consume a part of the ring first so the image starts mid-ring.
    let warm = match scenario {
        Scenario::Laps => entries * 3 + entries / 2,
        _ => entries / 2 + 1,
    };
    for i in 0..warm {
        push(m, build::req(QP_A, i as u16, wqe_opcode::SEND, 0))?;
        if compressed {
            m.flush().map_err(|e| e.to_string())?;
        }
        while cq.poll(&mut buf) > 0 {}
    }
    let entries_left = |m: &Mlx5Model| entries - m.used();
    match scenario {
        Scenario::Mixed => {
            let addr = RecvAddr { src_qp: 0x4d2, slid: 7, sl: 3, path_bits: 1, grh: true };
            let items = [
                build::req(QP_A, 0, wqe_opcode::SEND, 0),
                build::req(QP_A, 1, wqe_opcode::RDMA_READ, 4096),
                build::resp(cqe_opcode::RESP_WR_IMM, QP_A, 0, 256, 0x1122_3344),
                build::resp(cqe_opcode::RESP_SEND_INV, QP_A, 1, 64, 0x00ab_cdef),
                build::resp(cqe_opcode::RESP_SEND_IMM, QP_B, 0, 512, 0xcafe).recv_addr(addr),
                build::sig_err(0x5500),
                build::err(ErrSpec {
                    requester: true,
                    qpn: QP_A,
                    wqe_counter: 2,
                    syndrome: syndrome::TRANSPORT_RETRY_EXC_ERR,
                    vendor_err_synd: 0x81,
                    wqe_opcode: wqe_opcode::SEND,
                    ..ErrSpec::default()
                }),
                build::err(ErrSpec {
                    requester: true,
                    qpn: QP_A,
                    wqe_counter: 3,
                    syndrome: syndrome::WR_FLUSH_ERR,
                    vendor_err_synd: 0xf9,
                    ..ErrSpec::default()
                }),
                build::err(ErrSpec {
                    requester: false,
                    qpn: QP_A,
                    wqe_counter: 2,
                    syndrome: syndrome::WR_FLUSH_ERR,
                    vendor_err_synd: 0xf9,
                    ..ErrSpec::default()
                }),
                build::req(0x999, 0, wqe_opcode::SEND, 0),
            ];
            if items.len() as u32 > entries_left(m) {
                return Err(too_small(scenario, items.len()));
            }
            for e in items {
                push(m, e)?;
            }
        }
        Scenario::Iwarp => return Err("the iwarp scenario is irdma only: ConnectX QPs are InfiniBand or RoCE".into()),
        Scenario::Errors => {
            let all = syndrome::ALL;
            if all.len() as u32 > entries_left(m) {
                return Err(too_small(scenario, all.len()));
            }
            for (i, s) in all.into_iter().enumerate() {
                push(
                    m,
                    build::err(ErrSpec {
                        requester: i % 2 == 0,
                        qpn: QP_A,
                        wqe_counter: i as u16,
                        syndrome: s,
                        vendor_err_synd: 0x80 + i as u8,
                        hw_err_synd: 1,
                        hw_synd_type: 2,
                        ..ErrSpec::default()
                    }),
                )?;
            }
        }
        Scenario::Laps => {
            for i in 0..entries_left(m) {
                let e = if i % 2 == 0 {
                    build::req(QP_A, i as u16, wqe_opcode::SEND, 0)
                } else {
                    build::resp(cqe_opcode::RESP_SEND, QP_A, i as u16, i, 0)
                };
                push(m, e)?;
            }
        }
        Scenario::Stream => {
            let n = entries_left(m).saturating_sub(1);
            let recvs = n / 2;
            for i in 0..recvs {
                push(m, build::resp(cqe_opcode::RESP_SEND, QP_A, i as u16, 100 + i, 0))?;
            }
            for i in 0..n - recvs {
                push(m, build::req(QP_A, i as u16, wqe_opcode::SEND, 0))?;
            }
            push(
                m,
                build::err(ErrSpec {
                    requester: true,
                    qpn: QP_A,
                    wqe_counter: (n - recvs) as u16,
                    syndrome: syndrome::LOCAL_PROT_ERR,
                    vendor_err_synd: 0x51,
                    ..ErrSpec::default()
                }),
            )?;
        }
    }
    if compressed {
        m.flush().map_err(|e| e.to_string())?;
    }
    Ok(cq.ci())
}

/// Plays `scenario` on an irdma model (GEN2 unless `hw_rev` says otherwise) with `entries`
/// 32-byte slots (64 on GEN3) and returns the ring image text.
///
/// # Errors
///
/// A message when the model cannot be set up or the ring is too small for the scenario.
pub fn irdma(scenario: Scenario, entries: u32, hw_rev: HwRev) -> Result<String, String> {
    let mut m = IrdmaModel::new(IrdmaModelConfig::new(hw_rev, entries)).map_err(|e| e.to_string())?;
    let (items, img_qps) = irdma_plan(scenario, entries, hw_rev);
    // The live poller only consumes the warm-up, whose CQEs name no QP: it needs none. The
    // image's qp lines describe the QPs to whoever decodes it.
    let qps = QpRegistry::new(hw_rev);
    let mut cq = m.poller(qps, Compat::Current).map_err(|e| e.to_string())?;
    let mut buf = [Completion::default(); 16];
    let warm = match scenario {
        Scenario::Laps => entries * 3 + entries / 2,
        _ => entries / 2 + 1,
    };
    // Warm-up CQEs name no QP (comp_ctx 0): the provider skips them, as for a destroyed QP.
    for _ in 0..warm {
        m.push(&ModelCqe::send(0, 0, 0, sq_op::SEND)).map_err(|e| e.to_string())?;
        while cq.poll(&mut buf) > 0 {}
    }
    let need: u32 = items.iter().map(|c| m.slots_for(c)).sum();
    if need > m.free_slots() {
        return Err(too_small(scenario, need as usize));
    }
    for c in &items {
        m.push(c).map_err(|e| format!("{e} (use more --entries)"))?;
    }
    Ok(m.export_image(cq.ci(), &img_qps).map_err(|e| e.to_string())?.to_text())
}

/// The receive opcode hardware writes for an RDMA write with immediate data: the IB
/// protocol opcode on GEN1/GEN2, a software op type on GEN3 (rdma-core `set_ib_wc_op_rq`,
/// `set_ib_wc_op_rq_gen_3`).
fn irdma_write_imm_op(hw_rev: HwRev) -> u8 {
    if hw_rev == HwRev::Gen3 {
        rq_op::GEN3_WRITE_IMM
    } else {
        rq_op::ROCE_WRITE_ONLY_WITH_IMM
    }
}

/// A scenario's CQEs and qp lines (context k + 1 is the k-th qp line).
fn irdma_plan(scenario: Scenario, entries: u32, hw_rev: HwRev) -> (Vec<ModelCqe>, Vec<IrdmaImageQp>) {
    let items: Vec<ModelCqe> = match scenario {
        Scenario::Iwarp => return irdma_iwarp(hw_rev),
        Scenario::Mixed => vec![
            ModelCqe::send(1, QP_A, 0, sq_op::SEND),
            ModelCqe::send(1, QP_A, 1, sq_op::RDMA_READ),
            ModelCqe::recv(1, QP_A, 0, 0, irdma_write_imm_op(hw_rev), 256).with_imm(0x1122_3344),
            ModelCqe::recv(1, QP_A, 1, 0, rq_op::ROCE_SEND_ONLY, 64).with_inv(0xabcdef),
            ModelCqe::recv(2, QP_B, 0, 0, rq_op::ROCE_SEND_ONLY_WITH_IMM, 512).with_imm(0xcafe).with_ud(
                0x4d2,
                true,
                [2, 0, 0, 0, 0, 1],
                None,
            ),
            ModelCqe::flush(1, QP_A, true, 2, flush::RETRY_EXC_ERR),
            ModelCqe::send(7, 0x999, 0, sq_op::SEND),
        ],
        // Each on a QP of its own: GEN1/GEN2 complete every outstanding WQE of a QP with its
        // first flush CQE's status, so flushes on one QP would show one code only.
        Scenario::Errors => irdma_flush_codes()
            .enumerate()
            .map(|(k, minor)| ModelCqe::flush(IRDMA_ERR_CTX + k as u64, QP_ERR + k as u32, true, 0, minor))
            .collect(),
        Scenario::Laps | Scenario::Stream => (0..entries - 1)
            .map(|i| {
                if i % 2 == 0 {
                    ModelCqe::send(1, QP_A, (i / 2 % 64) as u16, sq_op::SEND)
                } else {
                    ModelCqe::recv(1, QP_A, (i / 2 % 64) as u16, 0, rq_op::ROCE_SEND_ONLY, i)
                }
            })
            .collect(),
    };
    // Work-queue positions the flushes walk (GEN1/GEN2 generate one completion per
    // outstanding WQE from them).
    let mut qps = vec![
        IrdmaImageQp {
            qpn: QP_A,
            sq_wqe_cnt: 64,
            rq_wqe_cnt: 64,
            sq_head: Some(3),
            rq_head: Some(2),
            ..Default::default()
        },
        IrdmaImageQp { qpn: QP_B, sq_wqe_cnt: 64, rq_wqe_cnt: 64, ud: true, ..Default::default() },
    ];
    // One SQ WQE outstanding on each QP of the errors scenario: its flush completes it.
    if scenario == Scenario::Errors {
        qps.extend(irdma_flush_codes().enumerate().map(|(k, _)| IrdmaImageQp {
            qpn: QP_ERR + k as u32,
            sq_wqe_cnt: 64,
            rq_wqe_cnt: 64,
            sq_head: Some(1),
            ..Default::default()
        }));
    }
    (items, qps)
}

/// The iWARP scenario's CQEs and qp lines: QP_A is connected and works, QP_B is flushed.
///
/// rdma-core reserves the first SQ quanta of an iWARP QP for the connection (one in GEN1
/// legacy mode, three otherwise: `irdma_setup_connection_wqes`); user WRs start after them.
/// An image holds one SQ position per QP, so the connection CQE (skipped only while the SQ is
/// empty) and the flushes (which walk outstanding WRs) are on different QPs.
fn irdma_iwarp(hw_rev: HwRev) -> (Vec<ModelCqe>, Vec<IrdmaImageQp>) {
    let conn: u16 = if hw_rev == HwRev::Gen1 { 1 } else { 3 };
    // Receives: an iWARP QP has no send-with-immediate, so immediate data alone makes a
    // receive RDMA_WITH_IMM on GEN1/GEN2; GEN3 reads its op type as on RoCE.
    let (wimm, send) = (irdma_write_imm_op(hw_rev), rq_op::ROCE_SEND_ONLY);
    let mut items = vec![
        ModelCqe::send(1, QP_A, 0, sq_op::SEND),
        ModelCqe::send(1, QP_A, conn, sq_op::SEND),
        ModelCqe::send(1, QP_A, conn + 1, sq_op::RDMA_WRITE),
        ModelCqe::send(1, QP_A, conn + 2, sq_op::RDMA_READ),
        ModelCqe::recv(1, QP_A, 0, 0, wimm, 256).with_imm(0x1122_3344),
        ModelCqe::recv(1, QP_A, 1, 0, send, 64).with_inv(0xabcdef),
        ModelCqe::recv(1, QP_A, 2, 0, send, 100),
    ];
    // Two WRs outstanding on each of QP_B's queues. GEN1/GEN2 write one flush CQE per queue
    // and rdma-core completes the rest from it; GEN3 writes one per WR.
    let per_queue = if hw_rev.parks_flush() { 1 } else { 2 };
    for k in 0..per_queue {
        items.push(ModelCqe::flush(2, QP_B, true, conn + k, flush::RETRY_EXC_ERR));
    }
    for k in 0..per_queue {
        items.push(ModelCqe::flush(2, QP_B, false, k, flush::RETRY_EXC_ERR));
    }
    let iwarp = |qpn| IrdmaImageQp {
        qpn,
        sq_wqe_cnt: 64,
        rq_wqe_cnt: 64,
        iwarp: true,
        conn_wqes: conn,
        sq_head: Some(conn.into()),
        sq_tail: Some(conn.into()),
        ..Default::default()
    };
    let qps = vec![
        iwarp(QP_A),
        IrdmaImageQp { sq_head: Some(u32::from(conn) + 2), rq_head: Some(2), rq_tail: Some(0), ..iwarp(QP_B) },
    ];
    (items, qps)
}
