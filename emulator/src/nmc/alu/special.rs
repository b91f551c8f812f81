//! The ALU's special functions on f32: the correctly rounded quotient (DIV) and the
//! seed + Newton-Raphson reciprocal, reciprocal square root and square root.

use nmcp_isa::nmc::{RCP_NEWTON_STEPS, RSQRT_NEWTON_STEPS};

/// Seed constant for 1/x on the mantissa (Lomont-style magic for the reciprocal).
const RCP_MAGIC: u32 = 0x7ef3_11c3;
/// Seed constant for 1/sqrt(x) (Lomont's 0x5f375a86).
const RSQRT_MAGIC: u32 = 0x5f37_5a86;

/// The ALU's division: the IEEE f32 quotient, correctly rounded (nearest-even).
pub fn div(a: f32, b: f32) -> f32 {
    a / b
}

/// Splits a positive finite non-zero `x` into `m` in [1, 2) and `e` with `x = m * 2^e`
/// (the ALU's exponent/mantissa separation; subnormals are normalised first).
fn split(x: f32) -> (f32, i32) {
    const SUBNORMAL_SCALE_EXP: i32 = 64;
    let (x, bias) = if x < f32::MIN_POSITIVE {
        (x * 2f32.powi(SUBNORMAL_SCALE_EXP), SUBNORMAL_SCALE_EXP)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let e = ((bits >> 23) & 0xff) as i32 - 127 - bias;
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    (m, e)
}

/// `y * 2^e` with a single rounding to f32 (the final exponent add of the ALU; it only
/// rounds when the result is subnormal, and it overflows to infinity).
fn scale2(y: f32, e: i32) -> f32 {
    (f64::from(y) * 2f64.powi(e)) as f32
}

/// Splits `x` into `m` in [1, 4) and an even `e` with `x = m * 2^e`.
fn split_even(x: f32) -> (f32, i32) {
    let (m, e) = split(x);
    if e.rem_euclid(2) == 1 {
        (m * 2.0, e - 1)
    } else {
        (m, e)
    }
}

/// 1/sqrt(m) for m in [1, 4): seed + [`RSQRT_NEWTON_STEPS`] steps.
fn rsqrt_mantissa(m: f32) -> f32 {
    let mut y = f32::from_bits(RSQRT_MAGIC.wrapping_sub(m.to_bits() >> 1));
    for _ in 0..RSQRT_NEWTON_STEPS {
        let t = m * y;
        let r = (-t).mul_add(y, 1.0); // 1 - m y²
        y = (0.5 * y).mul_add(r, y); // y (1 + r/2)
    }
    y
}

/// The ALU's reciprocal: ±0 -> ±inf, ±inf -> ±0, NaN -> NaN; otherwise seed +
/// [`RCP_NEWTON_STEPS`] Newton steps, relative error within
/// [`nmcp_isa::nmc::SPECIAL_REL_ERROR_BOUND`] for normal results.
pub fn rcp(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x == 0.0 {
        return f32::INFINITY.copysign(x);
    }
    if x.is_infinite() {
        return 0f32.copysign(x);
    }
    let (m, e) = split(x.abs());
    let mut y = f32::from_bits(RCP_MAGIC.wrapping_sub(m.to_bits()));
    for _ in 0..RCP_NEWTON_STEPS {
        let r = (-m).mul_add(y, 1.0); // 1 - m y
        y = y.mul_add(r, y); // y (1 + r)
    }
    scale2(y, -e).copysign(x)
}

/// The ALU's reciprocal square root: ±0 -> ±inf, +inf -> +0, negative or NaN -> NaN.
pub fn rsqrt(x: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        return f32::NAN;
    }
    if x == 0.0 {
        return f32::INFINITY.copysign(x);
    }
    if x.is_infinite() {
        return 0.0;
    }
    let (m, e) = split_even(x);
    scale2(rsqrt_mantissa(m), -e / 2)
}

/// The ALU's square root: ±0 -> ±0, +inf -> +inf, negative or NaN -> NaN; otherwise
/// m·rsqrt(m) and one correction step.
pub fn sqrt(x: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        return f32::NAN;
    }
    if x == 0.0 || x.is_infinite() {
        return x;
    }
    let (m, e) = split_even(x);
    let y = rsqrt_mantissa(m);
    let s = m * y;
    let r = (-s).mul_add(s, m); // m - s²
    let s = (0.5 * y).mul_add(r, s); // s + r / (2 sqrt(m))
    scale2(s, e / 2)
}

#[cfg(test)]
mod tests {
    //! The special functions against f64, over random inputs and the edge cases.

    use super::*;
    use nmcp_isa::nmc::SPECIAL_REL_ERROR_BOUND;
    use rand::{Rng, SeedableRng};

    /// Relative error against f64, for results that are normal f32 numbers; for
    /// subnormal results, error in units of the smallest subnormal.
    fn check(f: fn(f32) -> f32, exact: fn(f64) -> f64, x: f32, worst: &mut f64) {
        let want = exact(f64::from(x));
        let got = f(x);
        if want.abs() > f64::from(f32::MAX) {
            assert!(got.is_infinite(), "f({x:e}) = {got:e}, want overflow");
            return;
        }
        if want.abs() < f64::from(f32::MIN_POSITIVE) {
            let ulps = (f64::from(got) - want).abs() / f64::from(f32::from_bits(1));
            assert!(
                ulps <= 1.0,
                "f({x:e}) = {got:e}, want {want:e} ({ulps} subnormal ulps)"
            );
            return;
        }
        let rel = (f64::from(got) - want).abs() / want.abs();
        *worst = worst.max(rel);
        assert!(
            rel <= f64::from(SPECIAL_REL_ERROR_BOUND),
            "f({x:e}) = {got:e}, want {want:e}, rel {rel:e}"
        );
    }

    #[test]
    fn special_functions_meet_the_error_bound() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0x5eed);
        let mut inputs: Vec<f32> = (0..200_000)
            .map(|_| f32::from_bits(rng.random_range(1..0x7f80_0000u32)))
            .collect();
        // Mantissa sweep near 1, the seed's worst region, and the edges of the range.
        inputs.extend((0..4096).map(|i| 1.0 + i as f32 / 4096.0));
        inputs.extend([
            f32::from_bits(1),
            f32::from_bits(0x007f_ffff),
            f32::MIN_POSITIVE,
            f32::MAX,
            1.0,
            2.0,
            4.0,
            0.25,
            3.0,
            1e-6,
            0.999,
        ]);
        let mut worst = [0f64; 3];
        for &x in &inputs {
            check(rcp, |v| 1.0 / v, x, &mut worst[0]);
            check(rcp, |v| 1.0 / v, -x, &mut worst[0]);
            check(rsqrt, |v| 1.0 / v.sqrt(), x, &mut worst[1]);
            check(sqrt, f64::sqrt, x, &mut worst[2]);
        }
        eprintln!(
            "max relative error: rcp {:.3e} (2^{:.1}), rsqrt {:.3e} (2^{:.1}), sqrt {:.3e} (2^{:.1})",
            worst[0], worst[0].log2(), worst[1], worst[1].log2(), worst[2], worst[2].log2()
        );
    }

    #[test]
    fn special_function_edge_cases() {
        assert_eq!(rcp(0.0), f32::INFINITY);
        assert_eq!(rcp(-0.0), f32::NEG_INFINITY);
        assert_eq!(rcp(f32::INFINITY).to_bits(), 0f32.to_bits());
        assert_eq!(rcp(f32::NEG_INFINITY).to_bits(), (-0f32).to_bits());
        assert!(rcp(f32::NAN).is_nan());
        assert_eq!(rsqrt(0.0), f32::INFINITY);
        assert_eq!(rsqrt(-0.0), f32::NEG_INFINITY);
        assert_eq!(rsqrt(f32::INFINITY), 0.0);
        assert!(rsqrt(-1.0).is_nan() && rsqrt(f32::NAN).is_nan());
        assert_eq!(sqrt(0.0).to_bits(), 0f32.to_bits());
        assert_eq!(sqrt(-0.0).to_bits(), (-0f32).to_bits());
        assert_eq!(sqrt(f32::INFINITY), f32::INFINITY);
        assert!(sqrt(-1e-30).is_nan() && sqrt(f32::NAN).is_nan());
        // Exact cases stay exact.
        assert_eq!(sqrt(4.0), 2.0);
        assert_eq!(rsqrt(4.0), 0.5);
        assert_eq!(rcp(8.0), 0.125);
    }
}
