//! The canned scenarios the board feeds the firmware, as plain data.
//!
//! `build.rs` serialises [`canned_cp`] and [`canned_lamb`] with postcard at build time (it
//! includes this file with `#[path]`, so it names only `nmcp_isa`, `heapless` and `serde`);
//! the board binary decodes the bytes at run time, as it would decode a scenario a host
//! sent over a link. Changing a scenario here changes the expected output.

use heapless::Vec;
use nmcp_isa::gemm_ext::{sample_record, GemmExt, CONCURRENCY_DEGREES};
use serde::{Deserialize, Serialize};

/// Distinct GEMM shapes a CP scenario can hold.
pub const MAX_SHAPES: usize = 4;
/// Tensors a LAMB scenario can hold.
pub const MAX_TENSORS: usize = 8;
/// Features of the CD predictor (mirrors `nmcp_firmware::cp::FEATURE_COUNT`; a unit test
/// checks they agree).
pub const PREDICTOR_FEATURES: usize = 15;
/// Classes of the CD predictor (one per concurrency degree).
pub const PREDICTOR_CLASSES: usize = CONCURRENCY_DEGREES.len();
/// Bytes a serialised scenario may take (the board decodes from a buffer this big).
pub const MAX_SCENARIO_BYTES: usize = 2048;

/// The CD predictor's fixed-point weights (the fields of `CdPredictor`), so a scenario can
/// carry a trained model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PredictorWeights {
    /// Per-feature minimum, Q16.16.
    pub min_q16: [i64; PREDICTOR_FEATURES],
    /// Per-feature `2^32 / (max - min)`.
    pub inv_range_q32: [i64; PREDICTOR_FEATURES],
    /// Per-class weights, Q16.16.
    pub weight_q16: [[i64; PREDICTOR_FEATURES]; PREDICTOR_CLASSES],
    /// Per-class bias, Q16.16.
    pub bias_q16: [i64; PREDICTOR_CLASSES],
}

/// One CP decision: `queues` queues, queue `q` holding one GEMM of shape
/// `shapes[q % shapes.len()]` at its head, then a doorbell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpScenario {
    /// Active queues (1..=32).
    pub queues: u8,
    /// Ring size of every queue, packets (a power of two).
    pub ring_packets: u32,
    /// GEMM extension records, one per shape; their kernel objects are rebased by the
    /// layout into the device window.
    pub shapes: Vec<GemmExt, MAX_SHAPES>,
    /// The predictor the CP runs.
    pub predictor: PredictorWeights,
}

/// One tensor of a LAMB step: its element count (rows are laid out by the board).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSpec {
    /// FP32 elements.
    pub elements: u64,
}

/// One LAMB step over a few tensors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LambScenario {
    /// Tensors, in table order.
    pub tensors: Vec<TensorSpec, MAX_TENSORS>,
    /// Pseudo-channels.
    pub pseudo_channels: u16,
    /// Banks per pseudo-channel.
    pub banks_per_pc: u16,
    /// Columns per row.
    pub cols_per_row: u32,
    /// Bytes per column access.
    pub column_bytes: u32,
    /// TS entries per bank ALU.
    pub ts_entries: u16,
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Epsilon.
    pub eps: f32,
    /// Weight decay.
    pub weight_decay: f32,
    /// Gradient-norm clipping threshold.
    pub max_grad_norm: f32,
    /// Step number.
    pub step: u32,
    /// Run the three-slot stage-1 program instead of the default four-slot one.
    pub three_slot: bool,
    /// What every cross-bank reduction returns (the board has no banks; a constant keeps
    /// the run deterministic and exercises the clip path when its root exceeds
    /// `max_grad_norm`).
    pub reduction_sum: f32,
}

/// Q16.16 one.
const ONE_Q16: i64 = 1 << 16;

/// The emulator's sample kernel map ([`sample_record`]: 128x128, 128x64, 64x64 for CD
/// 1-2, 4, 8-16). Kernel objects are placeholders (0, 1, 2); the layout rebases them.
fn gemm(m: u32, n: u32, k: u32) -> GemmExt {
    sample_record(m, n, k, 0, 1)
}

/// 32 queues, alternating two BERT-like shapes (3072x1024x1024 and 1024x4096x1024).
///
/// The predictor is a stand-in for a trained one: its logits depend on M only, through
/// feature 0 = log2 M (`xn = (log2 M - 9.25) / 6`, which puts the two shapes where the
/// linear `M / 8192` of the earlier linear features put them: 0.375 and 0.125; CD 1: 1,
/// CD 4: 8 xn, CD 8: 12 xn - 1, CD 16: 16 xn - 3), so the 3072-row GEMMs ask for CD 8
/// and the 1024-row ones for CD 1. The firmware evaluates every multiply-accumulate of
/// all 15 features whatever the weights are, so the instruction count is that of a
/// trained model of the same shape.
pub fn canned_cp() -> CpScenario {
    let mut shapes = Vec::new();
    let _ = shapes.push(gemm(3072, 1024, 1024));
    let _ = shapes.push(gemm(1024, 4096, 1024));
    let mut weight_q16 = [[0i64; PREDICTOR_FEATURES]; PREDICTOR_CLASSES];
    weight_q16[2][0] = 8 * ONE_Q16;
    weight_q16[3][0] = 12 * ONE_Q16;
    weight_q16[4][0] = 16 * ONE_Q16;
    let mut inv_range_q32 = [0i64; PREDICTOR_FEATURES];
    inv_range_q32[0] = (1i64 << 32) / 6;
    let mut min_q16 = [0i64; PREDICTOR_FEATURES];
    min_q16[0] = 37 * ONE_Q16 / 4;
    CpScenario {
        queues: 32,
        ring_packets: 2,
        shapes,
        predictor: PredictorWeights {
            min_q16,
            inv_range_q32,
            weight_q16,
            bias_q16: [ONE_Q16, 0, 0, -ONE_Q16, -3 * ONE_Q16],
        },
    }
}

/// [`canned_cp`] with rings one packet deep: the HiFive1 build's window (16 KiB of RAM)
/// holds 32 such rings. The decisions are the same (each queue holds one GEMM).
pub fn canned_cp_one_deep() -> CpScenario {
    let mut s = canned_cp();
    s.ring_packets = 1;
    s
}

/// A LAMB step over `tensors` tensors of BERT-large-like sizes (1024x1024, 1024x4096,
/// 1024, 4096x1024, ...) on one HBM2 stack (32 pseudo-channels x 16 banks, 32 B columns,
/// 32 columns per row), the NVIDIA defaults of `FusedLAMB`, and a gradient norm of 2
/// (clipped to 1).
pub fn canned_lamb(tensors: usize) -> LambScenario {
    const SIZES: [u64; 4] = [1024 * 1024, 1024 * 4096, 1024, 4096 * 1024];
    let mut t = Vec::new();
    for &elements in SIZES.iter().cycle().take(tensors.min(MAX_TENSORS)) {
        let _ = t.push(TensorSpec { elements });
    }
    LambScenario {
        tensors: t,
        pseudo_channels: 32,
        banks_per_pc: 16,
        cols_per_row: 32,
        column_bytes: 32,
        ts_entries: 16,
        lr: 1e-3,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-6,
        weight_decay: 0.01,
        max_grad_norm: 1.0,
        step: 1,
        three_slot: false,
        reduction_sum: 4.0,
    }
}

/// [`canned_lamb`] without weight decay (stage 1 drops its weight phase: two instruction
/// words fewer) or with the three-slot stage-1 program: more points for the sequencer's
/// cost model.
pub fn canned_lamb_variant(tensors: usize, weight_decay: bool, three_slot: bool) -> LambScenario {
    let mut s = canned_lamb(tensors);
    if !weight_decay {
        s.weight_decay = 0.0;
    }
    s.three_slot = three_slot;
    s
}

/// The LAMB scenarios of the board report, in order: report name and scenario.
pub fn lamb_scenarios() -> [(&'static str, LambScenario); 5] {
    [
        ("lamb_1t", canned_lamb(1)),
        ("lamb_4t", canned_lamb(4)),
        ("lamb_8t", canned_lamb(8)),
        ("lamb_4t_nodecay", canned_lamb_variant(4, false, false)),
        ("lamb_4t_3slot", canned_lamb_variant(4, true, true)),
    ]
}
