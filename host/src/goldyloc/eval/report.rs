//! What an evaluation reports: speedups per configuration, per GEMM, per application
//! and per scenario, the heterogeneous mixes, and the whole report.

use super::*;

/// Speedups over Default of the configurations that differ from it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverDefault {
    /// GO-Kernels.
    pub go_kernels: f64,
    /// GOLDYLOC.
    pub goldyloc: f64,
    /// Oracle.
    pub oracle: f64,
    /// CU-Partition.
    pub cu_partition: f64,
    /// Resource-Partition.
    pub resource_partition: f64,
}

/// Speedups over Sequential.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverSequential {
    /// Default.
    pub default: f64,
}

/// Configuration names, in report order.
pub const CONFIGS: [&str; 7] = [
    "Sequential",
    "Default",
    "GO-Kernels",
    "GOLDYLOC",
    "Oracle",
    "CU-Partition",
    "Resource-Partition",
];

/// Heterogeneous mix (7.5.7): `n/2` instances of each of two GEMM sizes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeteroResult {
    /// Application.
    pub app: String,
    /// The two sizes.
    pub gemms: (String, String),
    /// Available GEMMs (both sizes together).
    pub n: u32,
    /// Time of Sequential, Default, GO-Kernels, GOLDYLOC, ns.
    pub time_ns: [f64; 4],
    /// GOLDYLOC ran all `n` together (both sizes predicted >= n); otherwise two
    /// homogeneous groups of `n/2`.
    pub mixed: bool,
    /// Predicted CD of each size.
    pub predicted: (u8, u8),
}

/// Configurations of the heterogeneous evaluation.
pub const HETERO_CONFIGS: [&str; 4] = ["Sequential", "Default", "GO-Kernels", "GOLDYLOC"];

/// Heterogeneous summary of one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeteroSummary {
    /// Available GEMMs.
    pub n: u32,
    /// Pairs evaluated.
    pub pairs: usize,
    /// Geomean over Default of Sequential, Default, GO-Kernels, GOLDYLOC.
    pub over_default: [f64; 4],
    /// Share of pairs GOLDYLOC ran mixed.
    pub mixed_share: f64,
}

/// One GEMM in one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GemmResult {
    /// Application.
    pub app: String,
    /// `M_N_K_T1T2` label.
    pub gemm: String,
    /// Available GEMMs.
    pub n: u32,
    /// Time per configuration (order of [`CONFIGS`]), ns: from the doorbells to the
    /// last completion, the firmware CP in the loop.
    pub time_ns: Vec<f64>,
    /// The CP's busy time per configuration, ns (inside `time_ns`, overlapped with the
    /// kernels where the firmware's schedule allows).
    pub cp_busy_ns: Vec<f64>,
    /// CD the firmware's predictor answered (before `min` with `n`), as its dispatch
    /// record says.
    pub predicted_cd: u8,
    /// CD the firmware dispatched the GEMMs at under GOLDYLOC.
    pub dispatched_cd: u8,
    /// Oracle CD.
    pub oracle_cd: u8,
    /// With `--cd-sweep`: the constant CD (GO library, CDs up to `min(n, 16)`, the
    /// largest being GO-Kernels' run) with the shortest time in the loop, and that time
    /// (ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_constant_cd: Option<(u8, f64)>,
}

/// Per-app geomean speedups of one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppSummary {
    /// Application.
    pub app: String,
    /// GEMMs.
    pub gemms: usize,
    /// Geomean speedup over Sequential per configuration.
    pub over_sequential: Vec<f64>,
    /// Geomean speedup over Default per configuration.
    pub over_default: Vec<f64>,
}

/// One available-GEMM scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioReport {
    /// Available GEMMs.
    pub n: u32,
    /// Per-app summaries.
    pub apps: Vec<AppSummary>,
    /// Geomean over all GEMMs, over Sequential.
    pub all_over_sequential: Vec<f64>,
    /// Geomean over all GEMMs, over Default.
    pub all_over_default: Vec<f64>,
    /// Max speedup over Sequential per configuration.
    pub max_over_sequential: Vec<f64>,
    /// GOLDYLOC vs Default: share improved, unchanged, degraded.
    pub split: [f64; 3],
    /// Predictor accuracy in this scenario: every dataset GEMM predicted by the
    /// fixed-point model of the cross-validation fold that held out its size (first seed).
    pub accuracy: f64,
    /// Confusion matrix `[true class][predicted class]` over CDs 1..16, same predictions.
    pub confusion: Vec<Vec<u32>>,
    /// Available GEMMs (= `n`).
    pub gemms: u32,
    /// Geomean speedups over Default.
    pub speedup_over_default: OverDefault,
    /// Geomean speedups over Sequential.
    pub speedup_over_sequential: OverSequential,
    /// = `accuracy`.
    pub predictor_accuracy: f64,
    /// The accuracy under each cross-validation seed (`CV_SEEDS`).
    pub predictor_accuracy_seeds: Vec<f64>,
    /// The majority-class baseline on the same held-out predictions (first seed).
    pub majority_baseline_accuracy: f64,
    /// The baseline under each seed.
    pub majority_baseline_seeds: Vec<f64>,
    /// Predictor accuracy with near ties counted right ([`NEAR_TIE_CD_BAND`], first seed).
    #[serde(default)]
    pub near_tie_accuracy: f64,
    /// The majority-class baseline with near ties counted right (first seed).
    #[serde(default)]
    pub majority_near_tie_accuracy: f64,
    /// Evaluated GEMMs of this scenario whose predictor never saw their size.
    pub held_out_gemms: usize,
    /// Dataset GEMMs the accuracy is over.
    pub scored_gemms: usize,
    /// With `--cd-sweep`: geomean over the scenario's GEMMs of GO-Kernels' time over the
    /// best constant CD's (per GEMM, in the loop): what any CD choice, GOLDYLOC's
    /// included, could add to GO-Kernels here. `None` without the sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_constant_cd_over_go_kernels: Option<f64>,
    /// With `--cd-sweep`: GOLDYLOC's time over the best constant CD's (geomean, <= 1):
    /// how much of that room GOLDYLOC takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goldyloc_over_best_constant_cd: Option<f64>,
}

/// The whole evaluation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvalReport {
    /// GPU name.
    pub gpu: String,
    /// Evaluated GEMMs (per app, unique within app).
    pub gemm_count: usize,
    /// Dataset size used for training.
    pub dataset_size: usize,
    /// Per scenario.
    pub scenarios: Vec<ScenarioReport>,
    /// Per-GEMM results.
    pub gemms: Vec<GemmResult>,
    /// Share of the test set where fixed point and f64 pick the same class.
    pub fixed_point_agreement: f64,
    /// Over the whole dataset.
    pub fixed_point_agreement_all: f64,
    /// GEMMs where they disagree: (label, f64 class CD, fixed class CD).
    pub disagreements: Vec<(String, u8, u8)>,
    /// Training accuracy (of the exported model, 90/10 split).
    pub train_accuracy: f64,
    /// Seeds of the cross-validations the accuracies come from (the first drives the
    /// configurations' predictors).
    pub cross_validation_seeds: Vec<u64>,
    /// CP charge per scenario and CD (from the firmware replay).
    pub cp_charges: Vec<CpCharge>,
    /// Heterogeneous mixes per scenario.
    pub hetero: Vec<HeteroSummary>,
    /// Heterogeneous mixes, per pair.
    pub hetero_pairs: Vec<HeteroResult>,
    /// Runs through the firmware that did not finish as they must (each a defect, named
    /// with its GEMM and configuration); their GEMMs are left out of the summaries.
    pub loop_failures: Vec<String>,
    /// End-to-end iteration speedups over Default of BERT and GNMT from their GEMM share.
    #[serde(default)]
    pub end_to_end: Vec<EndToEnd>,
}
