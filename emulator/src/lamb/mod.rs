//! LAMB on near-memory compute: the model's tensors, the FP32 reference, and the
//! ideal-GPU baseline the NMC run is compared with.

pub mod checked;
pub mod energy;
pub mod experiment;
pub mod ideal_gpu;
pub mod model;
pub mod reference;
pub mod run;

pub use checked::{CheckedRun, CheckedStep};
pub use experiment::{LambExperiment, LambOutcome, LambReport};
pub use ideal_gpu::{IdealGpu, ARRAY_PASSES};
pub use model::{ModelPreset, TensorSpec};
pub use reference::{compare, Comparison, LambHyper, TensorState};
