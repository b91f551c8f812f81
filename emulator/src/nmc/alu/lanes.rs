//! The lanes of a 256-bit column: unpacking them to the computation type (f32 or i32),
//! the lane-wise operations the instructions apply, and rounding back to the lane type.

use super::{Column, COLUMN_BYTES, MAX_LANES};
use half::{bf16, f16};
use nmcp_isa::nmc::{BinaryOp, Conversion, DType, Half, ShiftOp};

/// Lane values of one operand in the computation type.
#[derive(Debug, Clone, Copy)]
pub(super) enum Lanes {
    F([f32; MAX_LANES]),
    I([i32; MAX_LANES]),
}

/// Lane `i` of a column as bytes.
pub(super) fn lane_bytes<const N: usize>(col: &Column, i: usize) -> [u8; N] {
    let mut b = [0u8; N];
    if let Some(s) = col.get(i * N..(i + 1) * N) {
        b.copy_from_slice(s);
    }
    b
}

pub(super) fn put_lane(col: &mut Column, i: usize, bytes: &[u8]) {
    let n = bytes.len();
    if let Some(d) = col.get_mut(i * n..(i + 1) * n) {
        d.copy_from_slice(bytes);
    }
}

/// Widens the lanes of a column to the computation type (exact).
pub(super) fn load(dtype: DType, col: &Column) -> Lanes {
    match dtype {
        DType::F16 => Lanes::F(core::array::from_fn(|i| {
            f16::from_le_bytes(lane_bytes::<2>(col, i)).to_f32()
        })),
        DType::Bf16 => Lanes::F(core::array::from_fn(|i| {
            bf16::from_le_bytes(lane_bytes::<2>(col, i)).to_f32()
        })),
        DType::F32 => Lanes::F(core::array::from_fn(|i| {
            if i < 8 {
                f32::from_le_bytes(lane_bytes::<4>(col, i))
            } else {
                0.0
            }
        })),
        DType::I32 => Lanes::I(core::array::from_fn(|i| {
            if i < 8 {
                i32::from_le_bytes(lane_bytes::<4>(col, i))
            } else {
                0
            }
        })),
    }
}

/// Rounds lane values to the lane type (nearest-even) and packs them.
pub(super) fn store(dtype: DType, lanes: &Lanes) -> Column {
    let mut col = [0u8; COLUMN_BYTES];
    let f = match *lanes {
        Lanes::F(v) => v,
        Lanes::I(v) => v.map(|x| x as f32),
    };
    match dtype {
        DType::F16 => f
            .iter()
            .enumerate()
            .for_each(|(i, x)| put_lane(&mut col, i, &f16::from_f32(*x).to_le_bytes())),
        DType::Bf16 => f
            .iter()
            .enumerate()
            .for_each(|(i, x)| put_lane(&mut col, i, &bf16::from_f32(*x).to_le_bytes())),
        DType::F32 => f
            .iter()
            .take(8)
            .enumerate()
            .for_each(|(i, x)| put_lane(&mut col, i, &x.to_le_bytes())),
        DType::I32 => {
            let v = match *lanes {
                Lanes::I(v) => v,
                Lanes::F(v) => v.map(|x| x as i32),
            };
            v.iter()
                .take(8)
                .enumerate()
                .for_each(|(i, x)| put_lane(&mut col, i, &x.to_le_bytes()));
        }
    }
    col
}

fn zip(a: Lanes, b: Lanes, f: impl Fn(f32, f32) -> f32, g: impl Fn(i32, i32) -> i32) -> Lanes {
    match (a, b) {
        (Lanes::F(x), Lanes::F(y)) => Lanes::F(core::array::from_fn(|i| f(x[i], y[i]))),
        (Lanes::I(x), Lanes::I(y)) => Lanes::I(core::array::from_fn(|i| g(x[i], y[i]))),
        // Both operands are loaded with the instruction's one dtype.
        _ => unreachable!("mixed lane kinds"),
    }
}

pub(super) fn binary(op: BinaryOp, a: Lanes, b: Lanes) -> Lanes {
    match op {
        BinaryOp::Add => zip(a, b, |x, y| x + y, i32::wrapping_add),
        BinaryOp::Sub => zip(a, b, |x, y| x - y, i32::wrapping_sub),
        BinaryOp::Mul => zip(a, b, |x, y| x * y, i32::wrapping_mul),
        BinaryOp::Min => zip(a, b, f32::min, i32::min),
        BinaryOp::Max => zip(a, b, f32::max, i32::max),
    }
}

pub(super) fn fma(a: Lanes, b: Lanes, c: Lanes) -> Lanes {
    match (a, b, c) {
        (Lanes::F(x), Lanes::F(y), Lanes::F(z)) => {
            Lanes::F(core::array::from_fn(|i| x[i].mul_add(y[i], z[i])))
        }
        (Lanes::I(x), Lanes::I(y), Lanes::I(z)) => Lanes::I(core::array::from_fn(|i| {
            x[i].wrapping_mul(y[i]).wrapping_add(z[i])
        })),
        _ => unreachable!("mixed lane kinds"),
    }
}

pub(super) fn shift(op: ShiftOp, dtype: DType, a: Lanes, n: u32) -> Column {
    match a {
        Lanes::I(v) => store(
            dtype,
            &Lanes::I(v.map(|x| match op {
                ShiftOp::Shl => x.wrapping_shl(n),
                ShiftOp::Shr => x >> n,
            })),
        ),
        Lanes::F(v) => {
            let factor = match op {
                ShiftOp::Shl => 2f64.powi(n as i32),
                ShiftOp::Shr => 2f64.powi(-(n as i32)),
            };
            // Exact in f64; one rounding to the lane type.
            let mut col = [0u8; COLUMN_BYTES];
            for (i, x) in v.iter().take(dtype.lanes()).enumerate() {
                let y = f64::from(*x) * factor;
                match dtype {
                    DType::F16 => put_lane(&mut col, i, &f16::from_f64(y).to_le_bytes()),
                    DType::Bf16 => put_lane(&mut col, i, &bf16::from_f64(y).to_le_bytes()),
                    _ => put_lane(&mut col, i, &(y as f32).to_le_bytes()),
                }
            }
            col
        }
    }
}

pub(super) fn convert(conv: Conversion, src: &Column, old_dst: &Column) -> Column {
    let half_base = |h: Half| if h == Half::Lo { 0 } else { 8 };
    match conv {
        Conversion::F16ToF32(h) | Conversion::Bf16ToF32(h) => {
            let from = if matches!(conv, Conversion::F16ToF32(_)) {
                DType::F16
            } else {
                DType::Bf16
            };
            let Lanes::F(v) = load(from, src) else {
                unreachable!("16-bit floats load as floats")
            };
            let base = half_base(h);
            let mut col = [0u8; COLUMN_BYTES];
            for i in 0..8 {
                let x = v.get(base + i).copied().unwrap_or(0.0);
                put_lane(&mut col, i, &x.to_le_bytes());
            }
            col
        }
        Conversion::F32ToF16(h) | Conversion::F32ToBf16(h) => {
            let Lanes::F(v) = load(DType::F32, src) else {
                unreachable!("f32 loads as floats")
            };
            let base = half_base(h);
            let mut col = *old_dst;
            for (i, x) in v.iter().take(8).enumerate() {
                let bytes = if matches!(conv, Conversion::F32ToF16(_)) {
                    f16::from_f32(*x).to_le_bytes()
                } else {
                    bf16::from_f32(*x).to_le_bytes()
                };
                put_lane(&mut col, base + i, &bytes);
            }
            col
        }
        // `as` rounds i32 -> f32 to nearest even, and truncates f32 -> i32 toward zero
        // with saturation and NaN -> 0: the documented hardware behaviour.
        Conversion::I32ToF32 => match load(DType::I32, src) {
            Lanes::I(v) => store(DType::F32, &Lanes::F(v.map(|x| x as f32))),
            Lanes::F(_) => unreachable!("i32 loads as integers"),
        },
        Conversion::F32ToI32 => match load(DType::F32, src) {
            Lanes::F(v) => store(DType::I32, &Lanes::I(v.map(|x| x as i32))),
            Lanes::I(_) => unreachable!("f32 loads as floats"),
        },
    }
}
