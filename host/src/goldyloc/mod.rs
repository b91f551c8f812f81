//! Offline GOLDYLOC tooling (dissertation 7.3, SPEC 5.3): isolated and
//! resource-constrained tuning, the GO library per concurrency degree, profiling of the
//! best CD, training of the CD predictor and evaluation of the configurations of 7.4.5.
//!
//! Every step is a pure function of its inputs (GPU, calibration, catalog, GEMM list,
//! seed); results are cached as JSON under a hash of those inputs, so a rerun is instant.

pub mod cache;
pub mod energy;
pub mod eval;
pub mod in_loop;
pub mod library;
pub(crate) mod options;
pub mod pipeline;
pub mod train;
pub mod tune;
pub mod validate;

use nmcp_emulator::gpu::catalog::Catalog;
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::Calibration;

/// What every step needs: the GPU, the model calibration and the kernel list.
#[derive(Debug, Clone)]
pub struct Context {
    /// The full GPU.
    pub gpu: GpuConfig,
    /// Model calibration.
    pub cal: Calibration,
    /// Kernel list.
    pub catalog: Catalog,
    /// Cache (None = do not read or write).
    pub cache: Option<cache::Cache>,
    /// Show progress bars.
    pub progress: bool,
    /// Use the KNN tuning shortcut of 7.6.1.
    pub knn: bool,
    /// Evaluation: also run every constant CD below `n` through the firmware for every
    /// GEMM, for the best CD choice any predictor could make in the loop.
    pub cd_sweep: bool,
    /// Hardware queues the software queues of a configuration map onto (`None`: one per
    /// stream). With `q` of them, stream `i` goes to queue `i % q` and every packet sets
    /// the barrier bit, as a HIP runtime does with `GPU_MAX_HW_QUEUES` (4 by default).
    pub hw_queues: Option<u32>,
    /// Chapter 7's CD semantics (7.3.4): a GEMM group releases the CP's next decision when
    /// its members have placed all their workgroups (the queue heads moved), not when they
    /// complete; labels are profiled the same way ([`tune::TunedGemm::t_rounds`]).
    pub release_on_dispatch: bool,
}

impl Context {
    /// A context on the default MI100-like GPU.
    pub fn new(gpu: GpuConfig, cache: Option<cache::Cache>, progress: bool) -> Self {
        Self {
            gpu,
            cal: Calibration::default(),
            catalog: Catalog::standard(),
            cache,
            progress,
            knn: false,
            cd_sweep: false,
            hw_queues: None,
            release_on_dispatch: false,
        }
    }

    /// A progress bar of `len` steps (hidden unless asked for and on a terminal).
    pub fn bar(&self, len: usize, what: &str) -> indicatif::ProgressBar {
        if !self.progress {
            return indicatif::ProgressBar::hidden();
        }
        let pb = indicatif::ProgressBar::new(len as u64);
        pb.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg:>10} [{bar:40}] {pos}/{len} ({elapsed}, eta {eta})",
        ) {
            pb.set_style(style);
        }
        pb.set_message(what.to_string());
        pb
    }
}

/// Geometric mean (1 for an empty list).
pub fn geomean(xs: impl IntoIterator<Item = f64>) -> f64 {
    let (s, n) = xs
        .into_iter()
        .filter(|x| *x > 0.0)
        .fold((0.0, 0usize), |(s, n), x| (s + x.ln(), n + 1));
    if n == 0 {
        1.0
    } else {
        (s / n as f64).exp()
    }
}
