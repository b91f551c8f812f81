//! The values a functional run carries: element rounding, the arrays a block touches
//! (output or receive buffer), and reading and applying a rectangle of them.

use nmcp_isa::gemm_ext::GemmDataType;
use nmcp_isa::nmc::DType;

use super::T3System;
use crate::t3::layout::Rect;

/// Adds `b` to `a` in the element type (round after the addition).
pub fn add_in(dtype: GemmDataType, a: f32, b: f32) -> f32 {
    round_to(dtype, a + b)
}

/// `v` rounded to the element type.
pub fn round_to(dtype: GemmDataType, v: f32) -> f32 {
    match dtype {
        GemmDataType::F16 => half::f16::from_f32(v).to_f32(),
        GemmDataType::Bf16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

pub(super) fn dtype_of(d: GemmDataType) -> DType {
    match d {
        GemmDataType::F16 => DType::F16,
        GemmDataType::Bf16 => DType::Bf16,
        _ => DType::F32,
    }
}

/// Which of a GPU's arrays a block touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// The GEMM output / reduction array.
    Out,
    /// The ring kernel's receive buffer.
    Recv,
}

/// What a write block does to its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOp {
    /// Plain store.
    Store,
    /// Near-memory op-and-store (add).
    Update,
}

/// A GPU's arrays as values (functional runs; all `None` otherwise): the output /
/// reduction array, the ring kernel's receive buffer and the GEMM's partial output, each
/// row-major `m x n`.
#[derive(Debug, Clone, Default)]
pub(super) struct NodeValues {
    pub(super) out: Option<Vec<f32>>,
    pub(super) recv: Option<Vec<f32>>,
    pub(super) partial: Option<Vec<f32>>,
}

impl NodeValues {
    /// The values of `rect` of `region` in arrays `n` columns wide.
    pub(super) fn read(&self, region: Region, rect: Rect, n: usize) -> Option<Vec<f32>> {
        let arr = match region {
            Region::Out => self.out.as_deref()?,
            Region::Recv => self.recv.as_deref()?,
        };
        Some(rect_values(arr, rect, n, 1.0))
    }

    /// What a producer workgroup stores for `rect`: the partial output, or with split-K
    /// an equal share of it per split (exact for a power-of-two split of values on a
    /// binary grid), so the tile sums to the partial.
    pub(super) fn partial_share(&self, rect: Rect, n: usize, splits: u32) -> Option<Vec<f32>> {
        let p = self.partial.as_deref()?;
        Some(rect_values(p, rect, n, 1.0 / splits as f32))
    }

    /// Stores `vals` into `rect` of `region`, or adds them in `dtype` for an update.
    pub(super) fn apply(
        &mut self,
        region: Region,
        rect: Rect,
        op: WriteOp,
        vals: &[f32],
        n: usize,
        dtype: GemmDataType,
    ) {
        let arr = match region {
            Region::Out => self.out.as_mut(),
            Region::Recv => self.recv.as_mut(),
        };
        let Some(arr) = arr else { return };
        let mut i = 0;
        for r in rect.row0..rect.row0 + rect.rows {
            let s = r as usize * n + rect.col0 as usize;
            for x in &mut arr[s..s + rect.cols as usize] {
                let v = vals.get(i).copied().unwrap_or(0.0);
                *x = match op {
                    WriteOp::Store => v,
                    WriteOp::Update => add_in(dtype, *x, v),
                };
                i += 1;
            }
        }
    }
}

/// The values of `rect` in a row-major array `n` columns wide, each times `scale`.
fn rect_values(arr: &[f32], rect: Rect, n: usize, scale: f32) -> Vec<f32> {
    let mut v = Vec::with_capacity(crate::t3::layout::elements(&rect) as usize);
    for r in rect.row0..rect.row0 + rect.rows {
        let s = r as usize * n + rect.col0 as usize;
        v.extend(arr[s..s + rect.cols as usize].iter().map(|x| x * scale));
    }
    v
}

impl T3System {
    /// The values of `rect` of `region` on GPU `node` (functional runs).
    pub(super) fn values(&self, node: usize, region: Region, rect: Rect) -> Option<Vec<f32>> {
        let n = self.cfg.layout.n as usize;
        self.nodes[node].values.read(region, rect, n)
    }

    /// What GPU `node`'s producer workgroup stores for `rect` ([`NodeValues::partial_share`]).
    pub(super) fn partial_values(&self, node: usize, rect: Rect) -> Option<Vec<f32>> {
        let splits = self.nodes[node].producer.as_ref().map_or(1, |p| p.splits);
        let n = self.cfg.layout.n as usize;
        self.nodes[node].values.partial_share(rect, n, splits)
    }

    /// Applies a landed write block's values on GPU `node`.
    pub(super) fn apply(
        &mut self,
        node: usize,
        region: Region,
        rect: Rect,
        op: WriteOp,
        vals: &[f32],
    ) {
        let n = self.cfg.layout.n as usize;
        let dtype = self.cfg.dtype;
        self.nodes[node]
            .values
            .apply(region, rect, op, vals, n, dtype);
    }
}
