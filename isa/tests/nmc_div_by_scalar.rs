//! The cost model charges a DIV by a scalar register three operations
//! ([`nmcp_isa::nmc::DIV_BY_SCALAR_OPS`]): `q = a·y; r = fma(-b, q, a); q' = fma(r, y, q)`
//! with `y = RN(1/b)` latched when the register was written. That is a claim about
//! arithmetic, so it is checked here: the three operations must give `a / b` bit for bit,
//! or the cheaper charge would be for a result the emulator does not compute.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use nmcp_isa::asm::parse_instr;
use nmcp_isa::nmc::{DIV_BY_SCALAR_OPS, DIV_EXTRA_OPS, DIV_NEWTON_STEPS, SCALAR_RECIPROCAL_OPS};

/// The correction the ALU runs per lane, in f32 with fused multiply-adds.
fn div_by_latched_reciprocal(a: f32, b: f32) -> f32 {
    let y = 1.0f32 / b; // the latch: RN(1/b)
    let q = a * y;
    let r = (-b).mul_add(q, a);
    r.mul_add(y, q)
}

/// xorshift64: a fixed, seedable sequence (no dependency for one loop).
struct Xorshift(u64);
impl Xorshift {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }
}

fn with_mantissa(m: u32) -> f32 {
    f32::from_bits(0x3f80_0000 | (m & 0x7f_ffff))
}

#[test]
fn division_by_a_latched_reciprocal_is_the_ieee_quotient_for_every_divisor_mantissa() {
    // Every divisor mantissa in [1, 2), each with the extreme dividend mantissas and two
    // sampled ones (quotients in (1/2, 2): the mantissa datapath; exponents are separate).
    let mut rng = Xorshift(0x2545_f491_4f6c_dd1d);
    let mut misses = Vec::new();
    for bm in 0..(1u32 << 23) {
        let b = with_mantissa(bm);
        for a in [
            with_mantissa(0),
            with_mantissa(0x7f_ffff),
            with_mantissa(bm),
            with_mantissa(rng.next()),
        ] {
            if div_by_latched_reciprocal(a, b).to_bits() != (a / b).to_bits() && misses.len() < 8 {
                misses.push((a, b));
            }
        }
    }
    assert!(
        misses.is_empty(),
        "a/b pairs the correction misses: {misses:?}"
    );
}

#[test]
fn division_by_a_latched_reciprocal_is_the_ieee_quotient_across_exponents_and_signs() {
    // Random signs, mantissas and exponents within 2^±60. The ALU runs the correction on
    // the operands' mantissas and applies the exponent difference beside it (as DIV's
    // exponent logic does, docs/decisions/isa.md "Division"); far from the range ends the
    // unscaled f32 arithmetic is that datapath. Near them it is not: with |a| ~ 2^-126 the
    // residual `a - b·q` underflows and the unscaled sequence misses, which is why the
    // hardware scales. Zeros, infinities, NaN and subnormal or overflowing quotients are
    // the exponent logic's too; the emulator executes DIV as `a / b` for all of them.
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let operand = |rng: &mut Xorshift| {
        let exponent = (rng.next() % 121) as i32 - 60;
        let sign = if rng.next() & 1 == 1 { -1.0 } else { 1.0 };
        sign * with_mantissa(rng.next()) * 2f32.powi(exponent)
    };
    for _ in 0..2_000_000 {
        let (a, b) = (operand(&mut rng), operand(&mut rng));
        assert_eq!(
            div_by_latched_reciprocal(a, b).to_bits(),
            (a / b).to_bits(),
            "{a:e} / {b:e}"
        );
    }
}

#[test]
fn a_scalar_divisor_costs_the_correction_and_the_write_costs_the_reciprocal() {
    let by_ts = parse_instr("div.f32 ts2, mem, ts5").unwrap();
    let by_sreg = parse_instr("div.f32 ts0, mem, s7").unwrap();
    let of_sreg = parse_instr("div.f32 ts0, s7, ts1").unwrap();
    assert_eq!(by_ts.alu_ops(), 12);
    assert_eq!(by_sreg.alu_ops(), DIV_BY_SCALAR_OPS);
    assert_eq!(by_sreg.alu_ops(), 3);
    assert_eq!(by_sreg.column_slots(), 2);
    // Only the divisor's reciprocal is latched: a scalar dividend is an ordinary DIV.
    assert_eq!(of_sreg.alu_ops(), 12);
    // The latch runs DIV's whole sequence once, so a step saves only when a register
    // divides more than one lane-column.
    assert_eq!(
        SCALAR_RECIPROCAL_OPS,
        1 + 2 * DIV_NEWTON_STEPS + DIV_EXTRA_OPS
    );
}
