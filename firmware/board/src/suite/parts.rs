//! Micro-benchmarks of the decision's parts, each measured alone: AQL decode, GEMM
//! extension decode, candidate, one prediction, and `decide` over every candidate.

use core::fmt::Write;

use nmcp_firmware::cp::{decide, CpWork, GemmCandidate};
use nmcp_isa::aql::MAX_QUEUES;
use nmcp_isa::gemm_ext::{GemmExt, GEMM_EXT_BYTES};

use crate::board::{self, Board, LayoutError, DEVICE_BASE};
use crate::layout::{lay_out_blob, Variant};
use crate::report::{measured, Meter, RunError};

/// The per-GEMM steps of a queue scan, each measured alone on queue 0's head: decoding
/// the AQL packet, decoding the GEMM extension record, and computing the candidate
/// (features and kernel map).
///
/// # Errors
/// [`RunError`] from layout or decoding.
pub fn run_parts(
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    blob: &[u8],
    out: &mut impl Write,
) -> Result<(), RunError> {
    use nmcp_firmware::platform::DeviceMemory;
    use nmcp_isa::aql::{self, AQL_PACKET_BYTES};
    board.reset();
    let mut cfg = nmcp_firmware::cp::CpConfig::empty();
    lay_out_blob(board, blob, Variant::ALL, 0, Some(&mut cfg))?;
    let bad = |_| RunError::Layout(LayoutError::NoShapes);
    let mut pkt = [0u8; AQL_PACKET_BYTES];
    let ring = cfg.queues.first().map_or(0, |q| q.ring_base);
    board
        .read(ring, &mut pkt)
        .map_err(|e| RunError::Firmware(e.into()))?;
    let mut ext_bytes = [0u8; GEMM_EXT_BYTES];
    board
        .read(DEVICE_BASE + board::map::GEMM_EXTS as u64, &mut ext_bytes)
        .map_err(|e| RunError::Firmware(e.into()))?;

    meter.start();
    let packet = aql::decode(core::hint::black_box(&pkt));
    let m = meter.stop();
    packet.map_err(|_| RunError::Layout(LayoutError::Window))?;
    write!(out, "part_aql_decode")?;
    measured(out, m)?;
    writeln!(out)?;

    meter.start();
    let ext = GemmExt::decode(core::hint::black_box(&ext_bytes));
    let m = meter.stop();
    let ext = ext.map_err(bad)?;
    write!(out, "part_gemm_ext_decode")?;
    measured(out, m)?;
    writeln!(out)?;

    meter.start();
    let cand = GemmCandidate::new(core::hint::black_box(&ext), &cfg.resources);
    let m = meter.stop();
    let cand = cand.map_err(|_| RunError::Layout(LayoutError::NoShapes))?;
    write!(out, "part_gemm_candidate")?;
    measured(out, m)?;
    writeln!(out, " ko_cd8={:#x}", cand.kernel_object_for(8))?;

    meter.start();
    let cd = cfg
        .predictor
        .predict_cd(core::hint::black_box(&cand.features));
    let m = meter.stop();
    write!(out, "part_predict")?;
    measured(out, m)?;
    writeln!(out, " cd={cd}")?;
    Ok(())
}

/// The decision function alone over the candidates of the CP scenario (no queue scan,
/// no device memory): how much of a decision is the predictor.
///
/// # Errors
/// [`RunError`] from layout or candidate construction.
pub fn run_decide(
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    blob: &[u8],
    out: &mut impl Write,
) -> Result<(), RunError> {
    board.reset();
    let mut cfg = nmcp_firmware::cp::CpConfig::empty();
    let (queues, shapes) = lay_out_blob(board, blob, Variant::ALL, 0, Some(&mut cfg))?;
    let mut cands: heapless::Vec<GemmCandidate, MAX_QUEUES> = heapless::Vec::new();
    for q in 0..usize::from(queues) {
        let mut b = [0u8; GEMM_EXT_BYTES];
        let shape = q % shapes.max(1);
        let addr =
            DEVICE_BASE + (board::map::GEMM_EXTS + shape * board::map::GEMM_EXT_STRIDE) as u64;
        nmcp_firmware::platform::DeviceMemory::read(board, addr, &mut b)
            .map_err(|e| RunError::Firmware(e.into()))?;
        let ext = GemmExt::decode(&b).map_err(|_| RunError::Layout(LayoutError::NoShapes))?;
        let c = GemmCandidate::new(&ext, &cfg.resources)
            .map_err(|_| RunError::Layout(LayoutError::NoShapes))?;
        let _ = cands.push(c);
    }
    let mut work = CpWork::default();
    meter.start();
    let d = decide(&cands, &cfg.predictor, &mut work);
    let m = meter.stop();
    write!(out, "decide_{}", cands.len())?;
    measured(out, m)?;
    writeln!(
        out,
        " cd={} predicted={} mixed={} predictions={} predictor_macs={}",
        d.cd, d.predicted, d.mixed, work.predictions, work.predictor_macs
    )?;
    Ok(())
}
