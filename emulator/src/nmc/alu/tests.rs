//! Each instruction and type against a lane-by-lane reference written here (the test's
//! own lane codec, shared with [`super::lamb_program_tests`]).

use super::*;
use half::{bf16, f16};
use nmcp_isa::asm::parse_instr;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

type FloatOp = fn(f32, f32) -> f32;
type IntOp = fn(i64, i64) -> i64;

const CHUNK: u8 = 4;
const K: u8 = 2;
/// Entry of slot `s` at offset K.
fn entry(s: usize) -> usize {
    s * usize::from(CHUNK) + usize::from(K)
}

// --- the test's own lane codec ------------------------------------------------

pub(super) fn floats(dtype: DType, col: &Column) -> Vec<f32> {
    match dtype {
        DType::F16 => col
            .chunks(2)
            .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
            .collect(),
        DType::Bf16 => col
            .chunks(2)
            .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16))
            .collect(),
        DType::F32 => col
            .chunks(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::I32 => panic!("not a float type"),
    }
}

fn ints(col: &Column) -> Vec<i32> {
    col.chunks(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub(super) fn pack_floats(dtype: DType, v: &[f32]) -> Column {
    let mut out = [0u8; 32];
    for (i, x) in v.iter().enumerate() {
        match dtype {
            DType::F16 => {
                out[2 * i..2 * i + 2].copy_from_slice(&f16::from_f32(*x).to_bits().to_le_bytes())
            }
            DType::Bf16 => {
                out[2 * i..2 * i + 2].copy_from_slice(&bf16::from_f32(*x).to_bits().to_le_bytes())
            }
            DType::F32 => out[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes()),
            DType::I32 => panic!("not a float type"),
        }
    }
    out
}

fn pack_ints(v: &[i32]) -> Column {
    let mut out = [0u8; 32];
    for (i, x) in v.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes());
    }
    out
}

/// Equal as bit patterns, any NaN matching any NaN.
fn same(dtype: DType, a: &Column, b: &Column) -> bool {
    match dtype {
        DType::I32 => a == b,
        _ => floats(dtype, a)
            .iter()
            .zip(floats(dtype, b))
            .all(|(x, y)| (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()),
    }
}

/// A column whose lanes are finite values of moderate size for the type.
fn column(dtype: DType, seed: &[u8; 32]) -> Column {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::from_seed(*seed);
    match dtype {
        DType::I32 => pack_ints(&(0..8).map(|_| rng.random::<i32>()).collect::<Vec<_>>()),
        _ => {
            let v: Vec<f32> = (0..dtype.lanes())
                .map(|_| {
                    let m: f32 = rng.random_range(-1.0..1.0);
                    m * 2f32.powi(rng.random_range(-10..10))
                })
                .collect();
            pack_floats(dtype, &v)
        }
    }
}

const SCALARS: [u32; 8] = [
    0x3f80_0000, // 1.0
    0x3dcc_cccd, // 0.1 (not exact in f16)
    0xbf00_0000, // -0.5
    7,
    0x4049_0fdb, // pi
    0,
    0xffff_fffd, // -3 as i32
    0x4120_0000, // 10.0
];

/// Runs `text` with MEM = a and TS slot 1 = b (slot 2 = c); returns (mem, ts0).
fn run(text: &str, a: Column, b: Column, c: Column) -> (Column, Column, BankAlu) {
    let mut alu = BankAlu::new(DEFAULT_TS_ENTRIES);
    *alu.ts_mut(entry(1)).unwrap() = b;
    *alu.ts_mut(entry(2)).unwrap() = c;
    let mut mem = a;
    let instr = parse_instr(text).unwrap();
    alu.execute(&instr, CHUNK, K, &mut mem, &SCALARS).unwrap();
    let ts0 = *alu.ts(entry(0)).unwrap();
    (mem, ts0, alu)
}

fn float_types() -> impl Strategy<Value = DType> {
    prop::sample::select(vec![DType::F16, DType::Bf16, DType::F32])
}

proptest! {
    #[test]
    fn float_binary_ops_match_reference(dtype in float_types(), sa in any::<[u8; 32]>(), sb in any::<[u8; 32]>()) {
        let (a, b) = (column(dtype, &sa), column(dtype, &sb));
        let ops: [(&str, FloatOp); 5] = [
            ("add", |x, y| x + y),
            ("sub", |x, y| x - y),
            ("mul", |x, y| x * y),
            ("min", |x, y| if x < y { x } else { y }),
            ("max", |x, y| if x > y { x } else { y }),
        ];
        for (name, f) in ops {
            let (_, ts0, _) = run(&format!("{name}.{dtype} ts0, mem, ts1"), a, b, [0; 32]);
            let want: Vec<f32> = floats(dtype, &a).iter().zip(floats(dtype, &b)).map(|(x, y)| f(*x, y)).collect();
            prop_assert!(same(dtype, &ts0, &pack_floats(dtype, &want)), "{name}.{dtype}");
        }
    }

    #[test]
    fn int_binary_ops_wrap(sa in any::<[u8; 32]>(), sb in any::<[u8; 32]>()) {
        let (a, b) = (column(DType::I32, &sa), column(DType::I32, &sb));
        let ops: [(&str, IntOp); 5] = [
            ("add", |x, y| x + y),
            ("sub", |x, y| x - y),
            ("mul", |x, y| x * y),
            ("min", |x, y| x.min(y)),
            ("max", |x, y| x.max(y)),
        ];
        for (name, f) in ops {
            let (mem, _, _) = run(&format!("{name}.i32 mem, mem, ts1"), a, b, [0; 32]);
            // Wrapping = the low 32 bits of the exact result.
            let want: Vec<i32> = ints(&a).iter().zip(ints(&b)).map(|(x, y)| f(i64::from(*x), i64::from(y)) as u32 as i32).collect();
            prop_assert_eq!(mem, pack_ints(&want), "{}", name);
        }
    }

    #[test]
    fn fma_is_fused_then_rounded(dtype in float_types(), s in any::<[[u8; 32]; 3]>()) {
        let (a, b, c) = (column(dtype, &s[0]), column(dtype, &s[1]), column(dtype, &s[2]));
        let (_, ts0, _) = run(&format!("fma.{dtype} ts0, mem, ts1, ts2"), a, b, c);
        // Reference: exact product and sum in f64 (exact for these magnitudes), then
        // rounded to f32 once: that is what a fused f32 FMA returns.
        let want: Vec<f32> = floats(dtype, &a).iter().zip(floats(dtype, &b)).zip(floats(dtype, &c))
            .map(|((x, y), z)| (f64::from(*x) * f64::from(y) + f64::from(z)) as f32).collect();
        prop_assert!(same(dtype, &ts0, &pack_floats(dtype, &want)));
    }

    #[test]
    fn int_fma_wraps(s in any::<[[u8; 32]; 3]>()) {
        let (a, b, c) = (column(DType::I32, &s[0]), column(DType::I32, &s[1]), column(DType::I32, &s[2]));
        let (_, ts0, _) = run("fma.i32 ts0, mem, ts1, ts2", a, b, c);
        let want: Vec<i32> = (0..8).map(|i| (i64::from(ints(&a)[i]) * i64::from(ints(&b)[i]) + i64::from(ints(&c)[i])) as u32 as i32).collect();
        prop_assert_eq!(ts0, pack_ints(&want));
    }

    #[test]
    fn scalars_and_immediates_enter_unrounded(dtype in float_types(), sa in any::<[u8; 32]>()) {
        let a = column(dtype, &sa);
        let (_, ts0, _) = run(&format!("scale.{dtype} ts0, mem, s1"), a, [0; 32], [0; 32]);
        let s1 = f32::from_bits(SCALARS[1]);
        let want: Vec<f32> = floats(dtype, &a).iter().map(|x| x * s1).collect();
        prop_assert!(same(dtype, &ts0, &pack_floats(dtype, &want)));
        let (_, ts0, _) = run(&format!("add.{dtype} ts0, mem, #-3"), a, [0; 32], [0; 32]);
        let want: Vec<f32> = floats(dtype, &a).iter().map(|x| x - 3.0).collect();
        prop_assert!(same(dtype, &ts0, &pack_floats(dtype, &want)));
    }

    #[test]
    fn shifts(dtype in float_types(), sa in any::<[u8; 32]>(), n in 0u32..=31) {
        let a = column(dtype, &sa);
        for (name, e) in [("shl", n as i32), ("shr", -(n as i32))] {
            let (_, ts0, _) = run(&format!("{name}.{dtype} ts0, mem, {n}"), a, [0; 32], [0; 32]);
            let want: Column = match dtype {
                DType::F32 => pack_floats(dtype, &floats(dtype, &a).iter().map(|x| (f64::from(*x) * 2f64.powi(e)) as f32).collect::<Vec<_>>()),
                DType::F16 => {
                    let mut o = [0u8; 32];
                    for (i, x) in floats(dtype, &a).iter().enumerate() {
                        o[2 * i..2 * i + 2].copy_from_slice(&f16::from_f64(f64::from(*x) * 2f64.powi(e)).to_bits().to_le_bytes());
                    }
                    o
                }
                _ => {
                    let mut o = [0u8; 32];
                    for (i, x) in floats(dtype, &a).iter().enumerate() {
                        o[2 * i..2 * i + 2].copy_from_slice(&bf16::from_f64(f64::from(*x) * 2f64.powi(e)).to_bits().to_le_bytes());
                    }
                    o
                }
            };
            prop_assert!(same(dtype, &ts0, &want), "{name} {n}");
        }
        let ai = column(DType::I32, &sa);
        let (_, l, _) = run(&format!("shl.i32 ts0, mem, {n}"), ai, [0; 32], [0; 32]);
        let (_, r, _) = run(&format!("shr.i32 ts0, mem, {n}"), ai, [0; 32], [0; 32]);
        let wl: Vec<i32> = ints(&ai).iter().map(|x| ((i64::from(*x) << n) as u32) as i32).collect();
        let wr: Vec<i32> = ints(&ai).iter().map(|x| (i64::from(*x) >> n) as i32).collect();
        prop_assert_eq!(l, pack_ints(&wl));
        prop_assert_eq!(r, pack_ints(&wr));
    }

    #[test]
    fn reductions_add_lanes_in_order(dtype in prop::sample::select(DType::ALL.to_vec()), sa in any::<[u8; 32]>()) {
        let a = column(dtype, &sa);
        let vals: Vec<f32> = match dtype {
            DType::I32 => ints(&a).iter().map(|x| *x as f32).collect(),
            _ => floats(dtype, &a),
        };
        let (_, _, alu) = run(&format!("acc.{dtype} mem"), a, [0; 32], [0; 32]);
        let mut want = 0f32;
        for x in &vals { want += x; }
        prop_assert_eq!(alu.acc().to_bits(), want.to_bits());
        let (_, _, alu) = run(&format!("sqacc.{dtype} mem"), a, [0; 32], [0; 32]);
        let mut want = 0f32;
        for x in &vals { want = (f64::from(*x) * f64::from(*x) + f64::from(want)) as f32; }
        // f64 evaluates x*x + acc exactly for f16/bf16 inputs, so rounding once equals
        // the fused f32 result; for f32/i32 inputs allow the fused/unfused difference.
        let tol = if dtype.lane_bytes() == 2 { 0.0 } else { want.abs() * 1e-6 };
        prop_assert!((alu.acc() - want).abs() <= tol, "{} vs {}", alu.acc(), want);
    }

    #[test]
    fn conversions(s in any::<[u8; 32]>()) {
        for from in [DType::F16, DType::Bf16] {
            let a = column(from, &s);
            let lanes = floats(from, &a);
            let (_, lo, _) = run(&format!("cvt.f32.{from} ts0, mem"), a, [0; 32], [0; 32]);
            let (_, hi, _) = run(&format!("cvt.f32.{from} ts0, mem, hi"), a, [0; 32], [0; 32]);
            prop_assert_eq!(lo, pack_floats(DType::F32, &lanes[..8]));
            prop_assert_eq!(hi, pack_floats(DType::F32, &lanes[8..]));
            // Narrowing back into the other half keeps the first half.
            let f = column(DType::F32, &s);
            let (mem, _, _) = run(&format!("cvt.{from}.f32 mem, ts1, hi"), a, f, [0; 32]);
            let mut want = lanes.clone();
            want[8..].copy_from_slice(&floats(DType::F32, &f));
            prop_assert_eq!(mem, pack_floats(from, &want));
        }
        let i = column(DType::I32, &s);
        let (_, t, _) = run("cvt.f32.i32 ts0, mem", i, [0; 32], [0; 32]);
        prop_assert_eq!(t, pack_floats(DType::F32, &ints(&i).iter().map(|x| *x as f32).collect::<Vec<_>>()));
        let f = column(DType::F32, &s);
        let (_, t, _) = run("cvt.i32.f32 ts0, mem", f, [0; 32], [0; 32]);
        prop_assert_eq!(t, pack_ints(&floats(DType::F32, &f).iter().map(|x| x.trunc() as i32).collect::<Vec<_>>()));
    }

    #[test]
    fn mov_and_fill(dtype in prop::sample::select(DType::ALL.to_vec()), s in any::<[u8; 32]>()) {
        let a = column(dtype, &s);
        let (mem, ts0, _) = run(&format!("mov.{dtype} ts0, mem"), a, [0; 32], [0; 32]);
        prop_assert_eq!(ts0, a);
        prop_assert_eq!(mem, a);
        let (mem, _, _) = run(&format!("mov.{dtype} mem, ts1"), a, s, [0; 32]);
        prop_assert_eq!(mem, s);
        let (_, ts0, _) = run(&format!("fill.{dtype} ts0, s4"), a, [0; 32], [0; 32]);
        let want = match dtype {
            DType::I32 => pack_ints(&[SCALARS[4] as i32; 8]),
            _ => pack_floats(dtype, &vec![f32::from_bits(SCALARS[4]); dtype.lanes()]),
        };
        prop_assert_eq!(ts0, want);
    }
}

/// Quotient lanes equal `a / b` bit for bit (a NaN only has to be a NaN).
fn assert_quotients(a: &[f32], b: &[f32], got: &Column, what: &str) {
    for ((x, y), q) in a.iter().zip(b).zip(floats(DType::F32, got)) {
        let want = x / y;
        assert!(
            (want.is_nan() && q.is_nan()) || want.to_bits() == q.to_bits(),
            "{what}: {x:e} ({:#010x}) / {y:e} ({:#010x}) = {q:e} ({:#010x}), want {want:e} ({:#010x})",
            x.to_bits(),
            y.to_bits(),
            q.to_bits(),
            want.to_bits()
        );
    }
}

#[test]
fn div_is_the_ieee_quotient() {
    let specials = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::from_bits(0x007f_ffff),
        f32::from_bits(0x0040_0001),
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        f32::EPSILON,
        1.0,
        -1.0,
        3.0,
        0.1,
        1e-38,
        1e38,
        f32::from_bits(0x3fff_ffff), // mantissa all ones
        f32::from_bits(0x3f80_0001),
    ];
    let mut pairs: Vec<(f32, f32)> = specials
        .iter()
        .flat_map(|&x| specials.iter().map(move |&y| (x, y)))
        .collect();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0xd1f);
    // Any bit patterns (NaNs, infinities, subnormals included) ...
    pairs.extend((0..100_000).map(|_| {
        (
            f32::from_bits(rng.random::<u32>()),
            f32::from_bits(rng.random::<u32>()),
        )
    }));
    // ... and quotients that overflow, underflow into subnormals, or are ordinary.
    let mut magnitude = |lo: i32, hi: i32| {
        let m: f32 = rng.random_range(-2.0..2.0);
        m * 2f32.powi(rng.random_range(lo..hi))
    };
    pairs.extend((0..20_000).map(|_| (magnitude(100, 127), magnitude(-126, -100))));
    pairs.extend((0..20_000).map(|_| (magnitude(-149, -100), magnitude(0, 127))));
    pairs.extend((0..20_000).map(|_| (magnitude(-20, 20), magnitude(-20, 20))));
    for lanes in pairs.chunks(8) {
        let a: Vec<f32> = lanes.iter().map(|p| p.0).collect();
        let b: Vec<f32> = lanes.iter().map(|p| p.1).collect();
        let (ca, cb) = (pack_floats(DType::F32, &a), pack_floats(DType::F32, &b));
        let (mem, _, _) = run("div.f32 mem, mem, ts1", ca, cb, [0; 32]);
        assert_quotients(&a, &b, &mem, "div.f32 mem, mem, ts1");
        let (_, ts0, _) = run("div.f32 ts0, ts2, mem", cb, [0; 32], ca);
        assert_quotients(&a, &b, &ts0, "div.f32 ts0, ts2, mem");
        // A scalar register divisor, broadcast to every lane.
        let (_, ts0, _) = run("div.f32 ts0, ts1, s4", [0; 32], ca, [0; 32]);
        let pi = f32::from_bits(SCALARS[4]);
        assert_quotients(&a, &[pi; 8], &ts0, "div.f32 ts0, ts1, s4");
    }
    assert_eq!(
        Instr::Div {
            dst: Loc::Mem,
            src0: nmcp_isa::nmc::Src::Mem,
            src1: nmcp_isa::nmc::Src::Mem,
        }
        .column_slots(),
        6
    );
}

#[test]
fn float_overflow_and_min_max_nan() {
    let a = pack_floats(DType::F16, &[60000.0; 16]);
    let (_, ts0, _) = run("add.f16 ts0, mem, mem", a, [0; 32], [0; 32]);
    assert!(floats(DType::F16, &ts0).iter().all(|x| *x == f32::INFINITY));
    let (_, ts0, _) = run("shl.f16 ts0, mem, 1", a, [0; 32], [0; 32]);
    assert!(floats(DType::F16, &ts0).iter().all(|x| *x == f32::INFINITY));
    let n = pack_floats(DType::F32, &[f32::NAN; 8]);
    let one = pack_floats(DType::F32, &[1.0; 8]);
    let (_, ts0, _) = run("min.f32 ts0, mem, ts1", n, one, [0; 32]);
    assert_eq!(floats(DType::F32, &ts0), vec![1.0; 8]);
}

#[test]
fn ts_mapping_and_errors() {
    let mut alu = BankAlu::new(DEFAULT_TS_ENTRIES);
    let mut mem = pack_floats(DType::F32, &[2.0; 8]);
    // chunk 4: slot 3 at k 3 is entry 15, the last one.
    let i = parse_instr("mov.f32 ts3, mem").unwrap();
    alu.execute(&i, 4, 3, &mut mem, &SCALARS).unwrap();
    assert_eq!(alu.ts(15), Some(&mem));
    // chunk 5: slot 3 at k 1 is entry 16, past the end.
    assert_eq!(
        alu.execute(&i, 5, 1, &mut mem, &SCALARS),
        Err(AluError::TsOutOfRange {
            slot: 3,
            entry: 16,
            entries: 16
        })
    );
    assert_eq!(
        alu.execute(&i, 4, 4, &mut mem, &SCALARS),
        Err(AluError::OffsetOutsideChunk { k: 4, chunk: 4 })
    );
    assert_eq!(
        alu.execute(&parse_instr("exit").unwrap(), 4, 0, &mut mem, &SCALARS),
        Err(AluError::ControlInstruction)
    );
    // The 4x TS variant takes it.
    let mut big = BankAlu::new(TS_4X_ENTRIES);
    assert_eq!(big.execute(&i, 5, 1, &mut mem, &SCALARS), Ok(()));
}

#[test]
fn run_block_follows_loops_and_counts_slots() {
    let block: Vec<Instr> = [
        "mov.f32 ts0, mem",
        "add.f32 ts0, ts0, #1",
        "jump -1, 3",
        "rsqrt.f32 ts1, ts0",
        "exit",
        "mov.f32 mem, ts0",
    ]
    .iter()
    .map(|t| parse_instr(t).unwrap())
    .collect();
    let mut alu = BankAlu::default();
    let mut mem = pack_floats(DType::F32, &[5.0; 8]);
    let slots = alu.run_block(&block, 2, 1, &mut mem, &SCALARS).unwrap();
    // mov + 4 × add + rsqrt (5 slots); the store after EXIT never runs.
    assert_eq!(slots, 1 + 4 + 5);
    assert_eq!(floats(DType::F32, alu.ts(1).unwrap()), vec![9.0; 8]);
    assert_eq!(floats(DType::F32, &mem), vec![5.0; 8]);
    let r = floats(DType::F32, alu.ts(3).unwrap())[0];
    assert!((f64::from(r) - 1.0 / 3.0).abs() < 1e-7, "{r}");
}
