//! GEMM workloads: the networks of dissertation Table 7.3 expanded through their layer
//! GEMM formulas, the predictor's dataset, multi-instance and heterogeneous mixes, and
//! user GEMM lists from CSV.
//!
//! Storage is column-major (rocBLAS). A layer `Y = W X` with weights `W` (out x in) and
//! activations `X` (in x tokens) gives, for one layer:
//! - forward: `out x tokens x in`, NN;
//! - backward activation: `dX = W^T dY`, `in x tokens x out`, TN;
//! - backward weight: `dW = dY X^T`, `out x in x tokens`, NT.
//!
//! Transformers (BERT, GPT, ...): d_model = H, d_ff = 4H; the Q/K/V/O linears (H x H),
//! FC-1 (4H x H) and FC-2 (H x 4H); attention adds batched GEMMs (sequence length
//! [`TRANSFORMER_SEQ_LEN`], head size [`HEAD_DIM`]) which enter the predictor's dataset.
//! RNNs: LSTM (4 gates: GNMT, RNN-T) or GRU (3 gates: DeepSpeech2) with the recurrent
//! GEMM per time step (`gates*H x B x H`), the input projection over all time steps and
//! their backward GEMMs, plus the output projection (vocabulary) where the network has one.

use super::gemm::GemmShape;
use nmcp_isa::gemm_ext::GemmDataType;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Sequence length used to split Transformer tokens into sequences for attention.
pub const TRANSFORMER_SEQ_LEN: u32 = 512;
/// Attention head size.
pub const HEAD_DIM: u32 = 64;
/// Size of the predictor's dataset in the dissertation (7.3.3).
pub const DATASET_SIZE: usize = 1072;
/// Seed of the extra dataset GEMMs.
pub const DATASET_SEED: u64 = 0x601D_110C;

/// The structure of a network's layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetKind {
    /// A recurrent network.
    Rnn {
        /// Gates per cell (4 for LSTM, 3 for GRU).
        gates: u32,
        /// Time steps per sequence.
        seq: u32,
        /// Output vocabulary (0 = none).
        vocab: u32,
        /// Input-projection width multiplier (2 for bidirectional inputs).
        input_mult: u32,
    },
    /// A Transformer: the `inputs` are tokens.
    Transformer,
}

/// One network of Table 7.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Network {
    /// Short name used in reports.
    pub name: &'static str,
    /// Layer structure.
    pub kind: NetKind,
    /// Hidden sizes H.
    pub hidden: &'static [u32],
    /// Batch sizes (RNNs) or token counts (Transformers).
    pub inputs: &'static [u32],
}

/// The networks of Table 7.3.
pub const NETWORKS: &[Network] = &[
    Network {
        name: "gnmt",
        kind: NetKind::Rnn {
            gates: 4,
            seq: 47,
            vocab: 36549,
            input_mult: 1,
        },
        hidden: &[512, 1024],
        inputs: &[64, 128, 256, 512],
    },
    Network {
        name: "ds2",
        kind: NetKind::Rnn {
            gates: 3,
            seq: 50,
            vocab: 29,
            input_mult: 2,
        },
        hidden: &[800],
        inputs: &[64, 128, 256],
    },
    Network {
        name: "rnnt",
        kind: NetKind::Rnn {
            gates: 4,
            seq: 50,
            vocab: 0,
            input_mult: 1,
        },
        hidden: &[2048],
        inputs: &[64, 128, 256, 512],
    },
    Network {
        name: "transformer",
        kind: NetKind::Transformer,
        hidden: &[512, 1024],
        inputs: &[512, 1024, 2048, 3072, 4096, 8192],
    },
    Network {
        name: "bert",
        kind: NetKind::Transformer,
        hidden: &[768, 1024],
        inputs: &[2048, 3072, 4096, 8192],
    },
    Network {
        name: "gpt2",
        kind: NetKind::Transformer,
        hidden: &[1280, 1600],
        inputs: &[2048, 3072, 4096, 8192],
    },
    Network {
        name: "gpt3",
        kind: NetKind::Transformer,
        hidden: &[4096, 5140],
        inputs: &[2048, 3072, 4096, 8192],
    },
    Network {
        name: "mega_bert",
        kind: NetKind::Transformer,
        hidden: &[1024, 2048, 2560],
        inputs: &[2048, 3072, 4096, 8192],
    },
    Network {
        name: "mega_gpt",
        kind: NetKind::Transformer,
        hidden: &[1920, 3072],
        inputs: &[2048, 3072, 4096, 8192],
    },
    Network {
        name: "tnlg",
        kind: NetKind::Transformer,
        hidden: &[4256],
        inputs: &[2048, 3072, 4096, 8192],
    },
];

/// Which pass a GEMM belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Pass {
    /// Forward.
    Forward,
    /// Backward, gradient of the activations.
    BackwardActivation,
    /// Backward, gradient of the weights.
    BackwardWeight,
}

/// A GEMM of an application.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppGemm {
    /// Network name.
    pub app: String,
    /// The problem.
    pub shape: GemmShape,
}

/// The three GEMMs of a layer with weights `out x inp` over `tokens` columns.
fn layer(out: u32, inp: u32, tokens: u32, dtype: GemmDataType) -> [(Pass, GemmShape); 3] {
    [
        (
            Pass::Forward,
            GemmShape::new(out, tokens, inp, false, false, dtype),
        ),
        (
            Pass::BackwardActivation,
            GemmShape::new(inp, tokens, out, true, false, dtype),
        ),
        (
            Pass::BackwardWeight,
            GemmShape::new(out, inp, tokens, false, true, dtype),
        ),
    ]
}

/// Dense GEMMs of one network configuration (no batched attention).
pub fn config_gemms(net: &Network, h: u32, input: u32, dtype: GemmDataType) -> Vec<GemmShape> {
    let mut out = Vec::new();
    match net.kind {
        NetKind::Transformer => {
            for (o, i) in [(h, h), (4 * h, h), (h, 4 * h)] {
                out.extend(layer(o, i, input, dtype).map(|x| x.1));
            }
        }
        NetKind::Rnn {
            gates,
            seq,
            vocab,
            input_mult,
        } => {
            let b = input;
            // Recurrent GEMM per time step: forward and backward activation; its weight
            // gradient is accumulated over all steps at once.
            let rec = layer(gates * h, h, b, dtype);
            out.push(rec[0].1);
            out.push(rec[1].1);
            let all = layer(gates * h, h, b * seq, dtype);
            out.push(all[2].1);
            // Input projection over all time steps.
            let inp = layer(gates * h, input_mult * h, b * seq, dtype);
            out.extend(inp.map(|x| x.1));
            if vocab > 0 {
                out.extend(layer(vocab, input_mult * h, b * seq, dtype).map(|x| x.1));
            }
        }
    }
    out
}

/// Batched attention GEMMs of a Transformer configuration: score and output, forward
/// and backward.
pub fn attention_gemms(h: u32, tokens: u32, dtype: GemmDataType) -> Vec<GemmShape> {
    let n = TRANSFORMER_SEQ_LEN.min(tokens);
    let batch = (tokens / n).max(1) * (h / HEAD_DIM).max(1);
    let d = HEAD_DIM;
    let mk = |m, nn, k, ta, tb| GemmShape {
        m,
        n: nn,
        k,
        batch,
        trans_a: ta,
        trans_b: tb,
        dtype,
    };
    vec![
        mk(n, n, d, true, false),
        mk(d, n, n, false, false),
        mk(n, d, n, false, true),
        mk(d, n, n, false, true),
        mk(n, n, d, true, false),
    ]
}

/// The evaluated GEMMs: per network, the unique dense GEMMs over all its H and input
/// values, in f16.
pub fn evaluated_gemms() -> Vec<AppGemm> {
    let mut out = Vec::new();
    for net in NETWORKS {
        let mut seen = BTreeSet::new();
        for &h in net.hidden {
            for &i in net.inputs {
                for s in config_gemms(net, h, i, GemmDataType::F16) {
                    if seen.insert(key(&s)) {
                        out.push(AppGemm {
                            app: net.name.to_string(),
                            shape: s,
                        });
                    }
                }
            }
        }
    }
    out
}

fn key(s: &GemmShape) -> (u32, u32, u32, u32, bool, bool, u8) {
    (s.m, s.n, s.k, s.batch, s.trans_a, s.trans_b, s.dtype as u8)
}

/// Unique shapes of a list, first occurrence order.
pub fn unique_shapes<'a>(it: impl IntoIterator<Item = &'a GemmShape>) -> Vec<GemmShape> {
    let mut seen = BTreeSet::new();
    it.into_iter()
        .filter(|s| seen.insert(key(s)))
        .copied()
        .collect()
}

/// The predictor's dataset: the unique evaluated GEMMs, the Transformers' batched
/// attention GEMMs, then seeded extra GEMMs from the ranges of 7.4 (output size 32K-168M,
/// K 64-20K, dimensions multiples of 64) until `total` GEMMs.
pub fn dataset_gemms(total: usize, seed: u64) -> Vec<GemmShape> {
    let eval = evaluated_gemms();
    let mut shapes: Vec<GemmShape> = eval.iter().map(|g| g.shape).collect();
    for net in NETWORKS.iter().filter(|n| n.kind == NetKind::Transformer) {
        for &h in net.hidden {
            for &t in net.inputs {
                shapes.extend(attention_gemms(h, t, GemmDataType::F16));
            }
        }
    }
    let mut shapes = unique_shapes(&shapes);
    shapes.truncate(total);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut seen: BTreeSet<_> = shapes.iter().map(key).collect();
    let mut guard = 0u32;
    while shapes.len() < total && guard < 1_000_000 {
        guard += 1;
        // Log-uniform output size and K, random aspect ratio.
        let log_mn = rng.random_range((32_768f64).ln()..(168e6f64).ln());
        let aspect = rng.random_range(-2.5f64..2.5).exp();
        let mn = log_mn.exp();
        let m = round64((mn * aspect).sqrt());
        let n = round64(mn / f64::from(m));
        let k = round64(rng.random_range((64f64).ln()..(20_480f64).ln()).exp());
        let s = GemmShape::new(
            m,
            n,
            k,
            rng.random_bool(0.3),
            rng.random_bool(0.3),
            GemmDataType::F16,
        );
        let mnk = f64::from(m) * f64::from(n);
        if !(32_768.0..=168e6).contains(&mnk) {
            continue;
        }
        if seen.insert(key(&s)) {
            shapes.push(s);
        }
    }
    shapes
}

fn round64(x: f64) -> u32 {
    let v = (x / 64.0).round().max(1.0) * 64.0;
    v.min(f64::from(u32::MAX)) as u32
}

/// `n` independent instances of a GEMM (multi-instance inference).
pub fn instances(shape: &GemmShape, n: u32) -> Vec<GemmShape> {
    vec![*shape; n as usize]
}

/// Heterogeneous pairs of an application: consecutive distinct GEMMs of its list, each
/// pair meant to run as `n/2` + `n/2` instances.
pub fn heterogeneous_pairs(gemms: &[AppGemm]) -> Vec<(String, GemmShape, GemmShape)> {
    gemms
        .windows(2)
        .filter_map(|w| match w {
            [a, b] if a.app == b.app && a.shape != b.shape => {
                Some((a.app.clone(), a.shape, b.shape))
            }
            _ => None,
        })
        .collect()
}

/// A problem with a user GEMM list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (field number).
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for CsvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for CsvError {}

/// Largest M, N or K of a listed GEMM: 2^20, 24x the dataset's largest dimension, so
/// the tile and workgroup counts the model derives stay far inside `u64`.
pub const MAX_GEMM_DIM: u32 = 1 << 20;
/// Largest M x N x K of a listed GEMM: 2^44 (about 35 ms of an MI100's FP32 matrix
/// rate; the dataset's largest is below 2^42), so one GEMM's workgroups simulate in
/// seconds rather than hours.
pub const MAX_GEMM_VOLUME: u64 = 1 << 44;
/// Largest `count` of a listed GEMM (the copies of it in its application), as `nmcp cp
/// gen-dump --gemms`.
pub const MAX_GEMM_COUNT: u32 = 4096;
/// Most GEMMs in one list (rows, not counts): each is tuned over the whole catalogue.
pub const MAX_GEMM_ROWS: usize = 65_536;

/// Parses a GEMM list: one `M,N,K,transA,transB,dtype[,count]` per line. Blank lines and
/// `#` comments are skipped, as is a header line starting with `M`. Transposes are
/// `0/1`, `N/T` or `false/true`; dtypes `f16`, `bf16`, `f32`. Each dimension is at most
/// [`MAX_GEMM_DIM`], their product at most [`MAX_GEMM_VOLUME`], `count` at most
/// [`MAX_GEMM_COUNT`] and the list at most [`MAX_GEMM_ROWS`] GEMMs; a value past a bound
/// is refused with its line and column, before any arithmetic uses it.
pub fn parse_gemm_csv(text: &str) -> Result<Vec<(GemmShape, u32)>, CsvError> {
    let mut out = Vec::new();
    for (li, raw) in text.lines().enumerate() {
        let line = li + 1;
        let body = raw.split('#').next().unwrap_or("").trim();
        if body.is_empty() || (out.is_empty() && body.to_ascii_lowercase().starts_with('m')) {
            continue;
        }
        let fields: Vec<&str> = body.split(',').map(str::trim).collect();
        let err = |column: usize, message: String| CsvError {
            line,
            column,
            message,
        };
        if fields.len() < 6 || fields.len() > 7 {
            return Err(err(
                fields.len().min(7),
                format!(
                    "expected 6 or 7 fields (M,N,K,transA,transB,dtype[,count]), found {}",
                    fields.len()
                ),
            ));
        }
        let bounded = |c: usize, max: u32, what: &str| -> Result<u32, CsvError> {
            let f = fields.get(c).copied().unwrap_or("");
            // Parsed as u64 so a value past u32 is named as too large, not as malformed.
            match f.parse::<u64>() {
                Err(_) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => {
                    Err(err(c + 1, format!("{what} {f} is above {max}")))
                }
                Ok(0) | Err(_) => Err(err(c + 1, format!("`{f}` is not a positive integer"))),
                Ok(v) => u32::try_from(v)
                    .ok()
                    .filter(|v| *v <= max)
                    .ok_or_else(|| err(c + 1, format!("{what} {v} is above {max}"))),
            }
        };
        let dim = |c: usize| bounded(c, MAX_GEMM_DIM, ["M", "N", "K"][c.min(2)]);
        let trans = |c: usize| -> Result<bool, CsvError> {
            let f = fields.get(c).copied().unwrap_or("");
            match f.to_ascii_lowercase().as_str() {
                "0" | "n" | "false" => Ok(false),
                "1" | "t" | "true" => Ok(true),
                _ => Err(err(
                    c + 1,
                    format!("`{f}` is not a transpose flag (0/1, N/T)"),
                )),
            }
        };
        if out.len() >= MAX_GEMM_ROWS {
            return Err(err(
                1,
                format!("more than {MAX_GEMM_ROWS} GEMMs in one list; split it"),
            ));
        }
        let (m, n, k) = (dim(0)?, dim(1)?, dim(2)?);
        let volume = u64::from(m)
            .checked_mul(u64::from(n))
            .and_then(|mn| mn.checked_mul(u64::from(k)));
        if volume.is_none_or(|v| v > MAX_GEMM_VOLUME) {
            return Err(err(
                3,
                format!("M x N x K = {m} x {n} x {k} is above {MAX_GEMM_VOLUME} (2^44)"),
            ));
        }
        let (ta, tb) = (trans(3)?, trans(4)?);
        let dt = fields.get(5).copied().unwrap_or("");
        let dtype = match dt.to_ascii_lowercase().as_str() {
            "f16" | "fp16" | "half" => GemmDataType::F16,
            "bf16" => GemmDataType::Bf16,
            "f32" | "fp32" | "float" => GemmDataType::F32,
            _ => {
                return Err(err(
                    6,
                    format!("`{dt}` is not a data type (f16, bf16, f32)"),
                ))
            }
        };
        let count = if fields.len() == 7 {
            bounded(6, MAX_GEMM_COUNT, "count")?
        } else {
            1
        };
        out.push((GemmShape::new(m, n, k, ta, tb, dtype), count));
    }
    Ok(out)
}
