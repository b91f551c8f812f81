//! The CP scenario blob laid out in the board's window as it is decoded: one field at a
//! time, cut to a [`Variant`] (queue count and shapes), configuring the CP in place.

use nmcp_firmware::Firmware;
use nmcp_isa::gemm_ext::GemmExt;

use crate::board::{self, Board, LayoutError};
use crate::report::RunError;
use crate::scenario;

/// Which part of the canned CP scenario a decision runs: its queue count (`None`: the
/// scenario's) and its first `shapes` GEMM shapes.
#[derive(Debug, Clone, Copy)]
pub struct Variant {
    /// Queues laid out (`None`: the scenario's count).
    pub queues: Option<u8>,
    /// The first this many GEMM shapes of the scenario are laid out.
    pub shapes: usize,
}

impl Variant {
    /// The whole scenario.
    pub const ALL: Self = Self {
        queues: None,
        shapes: usize::MAX,
    };
}

/// Takes one postcard-encoded value off the front of `rest`.
///
/// # Errors
/// [`RunError::Decode`].
fn take<'a, T: serde::Deserialize<'a>>(rest: &mut &'a [u8]) -> Result<T, RunError> {
    let (v, r) = postcard::take_from_bytes(rest).map_err(RunError::Decode)?;
    *rest = r;
    Ok(v)
}

/// Lays out the CP scenario `blob`, cut to `v`, in the window as dispatch id `id`; with
/// `cold`, the window is reset first and the CP configured in place for it. Returns the
/// variant's queue count.
///
/// # Errors
/// [`RunError`] from decoding, layout or configuration.
#[inline(never)]
pub(crate) fn lay_out_variant(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    blob: &[u8],
    v: Variant,
    id: u64,
    cold: bool,
) -> Result<u8, RunError> {
    if cold {
        board.reset();
        let mut laid = Ok((0, 0));
        fw.cp
            .configure_in_place(|cfg| laid = lay_out_blob(board, blob, v, id, Some(cfg)))
            .map_err(|e| RunError::Firmware(e.into()))?;
        Ok(laid?.0)
    } else {
        Ok(lay_out_blob(board, blob, v, id, None)?.0)
    }
}

/// Lays out the CP scenario `blob`, cut to `v`, in the window as dispatch id `id` and
/// fills `cfg` (queues, device, resources, predictor) when given. Returns the queue
/// count and the number of shapes laid out.
///
/// The blob is decoded as it is laid out, one field at a time: postcard writes a
/// [`scenario::CpScenario`] as its fields in order (`queues` a byte, `ring_packets` a varint, the
/// `shapes` as a varint count and then each record, then the predictor's arrays), so
/// `postcard::take_from_bytes` can read them one after another from the same bytes. At
/// most one [`GemmExt`] and one predictor row are on the stack, never a whole
/// `CpScenario` (1.3 KiB, and ~9 KiB of decoding frames on RV32 when decoded at once).
///
/// # Errors
/// [`RunError`] from decoding or layout.
pub(crate) fn lay_out_blob(
    board: &mut Board<'_>,
    blob: &[u8],
    v: Variant,
    id: u64,
    cfg: Option<&mut nmcp_firmware::cp::CpConfig>,
) -> Result<(u8, usize), RunError> {
    let mut rest = blob;
    let queues = take::<u8>(&mut rest)?;
    let queues = v.queues.unwrap_or(queues);
    let ring_packets: u32 = take(&mut rest)?;
    let n = usize::try_from(take::<u32>(&mut rest)?).unwrap_or(usize::MAX);
    let used = n.min(v.shapes);
    board.begin_cp(queues, ring_packets, used)?;
    let mut laid: heapless::Vec<board::LaidShape, { scenario::MAX_SHAPES }> = heapless::Vec::new();
    for si in 0..n {
        // Every record is read (the predictor follows them); the variant's are laid out.
        let mut g: GemmExt = take(&mut rest)?;
        if si < used {
            let l = board.lay_out_cp_shape(si, &mut g)?;
            laid.push(l).map_err(|_| LayoutError::NoShapes)?;
        }
    }
    match cfg {
        Some(cfg) => {
            board.lay_out_cp_queues(queues, ring_packets, &laid, id, Some(&mut *cfg))?;
            take_predictor(cfg, &mut rest)?;
        }
        None => board.lay_out_cp_queues(queues, ring_packets, &laid, id, None)?,
    }
    Ok((queues, laid.len()))
}

/// Reads the predictor's weights ([`scenario::PredictorWeights`], the rest of a CP
/// scenario blob) into the CP's configuration, one array at a time.
///
/// # Errors
/// [`RunError::Decode`].
fn take_predictor(c: &mut nmcp_firmware::cp::CpConfig, rest: &mut &[u8]) -> Result<(), RunError> {
    let p = &mut c.predictor;
    p.min_q16 = take(rest)?;
    p.inv_range_q32 = take(rest)?;
    for row in p.weight_q16.iter_mut() {
        *row = take(rest)?;
    }
    p.bias_q16 = take(rest)?;
    Ok(())
}
