//! T3 programming (SPEC 6, docs/decisions/t3.md and t3-firmware.md): from a collective
//! and a GEMM shape to output maps, tracker entries and DMA descriptors.
//!
//! - [`geometry`]: the output array's tiles, chunks and chunk-major workgroup ids.
//! - [`plan`]: per collective and stage, the chunk, its output map and its tracking.
//! - [`programmer`]: the lazy, bounded-work state machine that programs them.
//! - [`cost`]: what that work costs in CP cycles (fitted to the board).

pub mod cost;
pub mod geometry;
pub mod plan;
pub mod programmer;

pub use cost::T3CostModel;
pub use geometry::{Collective, Rect, SplitDim, T3Geometry, T3Job, T3JobError};
pub use plan::{first_tracked_stage, stage_plan, stage_region, DmaTarget, StagePlan, Track};
pub use programmer::{T3Fault, T3Programmer, T3State, T3Work, DMA_ENGINES, MAX_RECORDS_PER_EVENT};
