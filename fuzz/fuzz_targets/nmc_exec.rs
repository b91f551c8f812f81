//! Differential: any 32-bit word either fails to decode (rejected, no panic) or is an
//! instruction that the bank ALU model (`BankAlu::execute`) and a plain reference
//! interpreter written here, element by element from the ISA's text (docs/decisions/
//! isa.md), execute to the same bytes of the open column and of TS, the same
//! accumulator, and the same refusal (a TS slot past the entries, an offset outside the
//! chunk, a control instruction). The correctly rounded division and the special
//! functions are shared kernels with their own tests; everything around them (operand
//! resolution, the TS slot-to-entry map, lanes, widening, rounding, packing, the order of
//! reads and writes) is checked here.
#![no_main]

use half::{bf16, f16};
use libfuzzer_sys::fuzz_target;
use nmcp_emulator::nmc::alu::{div, rcp, rsqrt, sqrt, BankAlu, Column, COLUMN_BYTES};
use nmcp_isa::nmc::{
    BinaryOp, Conversion, DType, Half, Instr, Loc, ReduceOp, Scalar, ShiftOp, SpecialOp, Src,
    SrcImm, SCALAR_REGS,
};

const ENTRIES: usize = 12;

/// The reference machine: the open column, TS and the accumulator.
#[derive(Clone, PartialEq)]
struct State {
    mem: Column,
    ts: Vec<Column>,
    acc: f32,
}

/// What one element of a column is, read as the computation sees it.
#[derive(Clone, Copy)]
enum Elem {
    F(f32),
    I(i32),
}

fn width(d: DType) -> usize {
    match d {
        DType::F16 | DType::Bf16 => 2,
        DType::F32 | DType::I32 => 4,
    }
}

fn get(d: DType, c: &Column, i: usize) -> Elem {
    let w = width(d);
    let b = &c[i * w..i * w + w];
    match d {
        DType::F16 => Elem::F(f16::from_le_bytes([b[0], b[1]]).to_f32()),
        DType::Bf16 => Elem::F(bf16::from_le_bytes([b[0], b[1]]).to_f32()),
        DType::F32 => Elem::F(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        DType::I32 => Elem::I(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
    }
}

fn put(d: DType, c: &mut Column, i: usize, e: Elem) {
    let w = width(d);
    let f = |e: Elem| match e {
        Elem::F(x) => x,
        Elem::I(x) => x as f32,
    };
    let bytes: Vec<u8> = match d {
        DType::F16 => f16::from_f32(f(e)).to_le_bytes().to_vec(),
        DType::Bf16 => bf16::from_f32(f(e)).to_le_bytes().to_vec(),
        DType::F32 => f(e).to_le_bytes().to_vec(),
        DType::I32 => match e {
            Elem::I(x) => x.to_le_bytes().to_vec(),
            Elem::F(x) => (x as i32).to_le_bytes().to_vec(),
        },
    };
    c[i * w..i * w + w].copy_from_slice(&bytes);
}

struct Ctx<'a> {
    chunk: u8,
    k: u8,
    scalars: &'a [u32; SCALAR_REGS as usize],
}

#[derive(Debug, PartialEq)]
enum Refusal {
    Offset,
    Ts,
    Control,
}

fn entry(ctx: &Ctx, slot: u8) -> Result<usize, Refusal> {
    let e = usize::from(slot) * usize::from(ctx.chunk) + usize::from(ctx.k);
    if e >= ENTRIES {
        Err(Refusal::Ts)
    } else {
        Ok(e)
    }
}

fn read(s: &State, ctx: &Ctx, l: Loc) -> Result<Column, Refusal> {
    match l {
        Loc::Mem => Ok(s.mem),
        Loc::Ts(t) => Ok(s.ts[entry(ctx, t.get())?]),
    }
}

fn scalar(ctx: &Ctx, d: DType, sc: Scalar) -> Elem {
    match sc {
        Scalar::Imm(i) => match d {
            DType::I32 => Elem::I(i32::from(i.get())),
            _ => Elem::F(f32::from(i.get())),
        },
        Scalar::Sreg(r) => {
            let bits = ctx.scalars[usize::from(r.get())];
            match d {
                DType::I32 => Elem::I(bits as i32),
                _ => Elem::F(f32::from_bits(bits)),
            }
        }
    }
}

/// Element `i` of a source operand.
fn src(s: &State, ctx: &Ctx, d: DType, x: SrcImm, i: usize) -> Result<Elem, Refusal> {
    Ok(match x {
        SrcImm::Mem => get(d, &s.mem, i),
        SrcImm::Ts(t) => get(d, &s.ts[entry(ctx, t.get())?], i),
        SrcImm::Sreg(r) => scalar(ctx, d, Scalar::Sreg(r)),
        SrcImm::Imm(v) => scalar(ctx, d, Scalar::Imm(v)),
    })
}

fn src_of(x: Src) -> SrcImm {
    match x {
        Src::Mem => SrcImm::Mem,
        Src::Ts(t) => SrcImm::Ts(t),
        Src::Sreg(r) => SrcImm::Sreg(r),
    }
}

fn lanes(d: DType) -> usize {
    COLUMN_BYTES / width(d)
}

/// One instruction on the reference machine: every source read before the destination
/// is written; lanes a type does not have are zero in the result.
fn reference(s: &mut State, ctx: &Ctx, instr: &Instr) -> Result<(), Refusal> {
    if ctx.k >= ctx.chunk {
        return Err(Refusal::Offset);
    }
    let (dst, out): (Loc, Column) = match *instr {
        Instr::Nop => return Ok(()),
        Instr::Jump { .. } | Instr::Exit => return Err(Refusal::Control),
        Instr::Mov { dst, src, .. } => (dst, read(s, ctx, src)?),
        Instr::Fill { dtype, dst, value } => {
            let mut c = [0; COLUMN_BYTES];
            for i in 0..lanes(dtype) {
                put(dtype, &mut c, i, scalar(ctx, dtype, value));
            }
            (dst, c)
        }
        Instr::Binary { op, dtype, dst, src0, src1 } => {
            let mut c = [0; COLUMN_BYTES];
            for i in 0..lanes(dtype) {
                let a = src(s, ctx, dtype, src_of(src0), i)?;
                let b = src(s, ctx, dtype, src1, i)?;
                let r = match (a, b) {
                    (Elem::F(x), Elem::F(y)) => Elem::F(match op {
                        BinaryOp::Add => x + y,
                        BinaryOp::Sub => x - y,
                        BinaryOp::Mul => x * y,
                        BinaryOp::Min => x.min(y),
                        BinaryOp::Max => x.max(y),
                    }),
                    (Elem::I(x), Elem::I(y)) => Elem::I(match op {
                        BinaryOp::Add => x.wrapping_add(y),
                        BinaryOp::Sub => x.wrapping_sub(y),
                        BinaryOp::Mul => x.wrapping_mul(y),
                        BinaryOp::Min => x.min(y),
                        BinaryOp::Max => x.max(y),
                    }),
                    _ => unreachable!("one dtype per instruction"),
                };
                put(dtype, &mut c, i, r);
            }
            (dst, c)
        }
        Instr::Fma { dtype, dst, src0, src1, src2 } => {
            let mut c = [0; COLUMN_BYTES];
            for i in 0..lanes(dtype) {
                let a = src(s, ctx, dtype, src_of(src0), i)?;
                let b = src(s, ctx, dtype, src_of(src1), i)?;
                let z = src(s, ctx, dtype, src_of(src2), i)?;
                let r = match (a, b, z) {
                    (Elem::F(x), Elem::F(y), Elem::F(w)) => Elem::F(x.mul_add(y, w)),
                    (Elem::I(x), Elem::I(y), Elem::I(w)) => {
                        Elem::I(x.wrapping_mul(y).wrapping_add(w))
                    }
                    _ => unreachable!("one dtype per instruction"),
                };
                put(dtype, &mut c, i, r);
            }
            (dst, c)
        }
        Instr::Scale { dtype, dst, src: x, factor } => {
            let mut c = [0; COLUMN_BYTES];
            for i in 0..lanes(dtype) {
                let a = src(s, ctx, dtype, src_of(x), i)?;
                let r = match (a, scalar(ctx, dtype, factor)) {
                    (Elem::F(p), Elem::F(q)) => Elem::F(p * q),
                    (Elem::I(p), Elem::I(q)) => Elem::I(p.wrapping_mul(q)),
                    _ => unreachable!("one dtype per instruction"),
                };
                put(dtype, &mut c, i, r);
            }
            (dst, c)
        }
        Instr::Shift { op, dtype, dst, src: x, amount } => {
            let n = u32::from(amount.get());
            let mut c = [0; COLUMN_BYTES];
            for i in 0..lanes(dtype) {
                match src(s, ctx, dtype, src_of(x), i)? {
                    Elem::I(v) => {
                        let r = match op {
                            ShiftOp::Shl => v.wrapping_shl(n),
                            ShiftOp::Shr => v >> n,
                        };
                        put(dtype, &mut c, i, Elem::I(r));
                    }
                    Elem::F(v) => {
                        // Scaling by 2^±n exactly (f64), then one rounding.
                        let y = match op {
                            ShiftOp::Shl => f64::from(v) * 2f64.powi(n as i32),
                            ShiftOp::Shr => f64::from(v) / 2f64.powi(n as i32),
                        };
                        let w = width(dtype);
                        let bytes = match dtype {
                            DType::F16 => f16::from_f64(y).to_le_bytes().to_vec(),
                            DType::Bf16 => bf16::from_f64(y).to_le_bytes().to_vec(),
                            _ => (y as f32).to_le_bytes().to_vec(),
                        };
                        c[i * w..i * w + w].copy_from_slice(&bytes);
                    }
                }
            }
            (dst, c)
        }
        Instr::Reduce { op, dtype, src: x } => {
            let col = read(s, ctx, x)?;
            for i in 0..lanes(dtype) {
                let v = match get(dtype, &col, i) {
                    Elem::F(v) => v,
                    Elem::I(v) => v as f32,
                };
                s.acc = match op {
                    ReduceOp::Acc => s.acc + v,
                    ReduceOp::SqAcc => v.mul_add(v, s.acc),
                };
            }
            return Ok(());
        }
        Instr::Div { dst, src0, src1 } => {
            let mut c = [0; COLUMN_BYTES];
            for i in 0..8 {
                let (Elem::F(a), Elem::F(b)) = (
                    src(s, ctx, DType::F32, src_of(src0), i)?,
                    src(s, ctx, DType::F32, src_of(src1), i)?,
                ) else {
                    unreachable!("f32")
                };
                put(DType::F32, &mut c, i, Elem::F(div(a, b)));
            }
            (dst, c)
        }
        Instr::Special { op, dst, src: x } => {
            let col = read(s, ctx, x)?;
            let f = match op {
                SpecialOp::Rcp => rcp,
                SpecialOp::Rsqrt => rsqrt,
                SpecialOp::Sqrt => sqrt,
            };
            let mut c = [0; COLUMN_BYTES];
            for i in 0..8 {
                let Elem::F(v) = get(DType::F32, &col, i) else { unreachable!("f32") };
                put(DType::F32, &mut c, i, Elem::F(f(v)));
            }
            (dst, c)
        }
        Instr::Cvt { conv, dst, src: x } => {
            let from = read(s, ctx, x)?;
            let base = |h: Half| if h == Half::Lo { 0 } else { 8 };
            let c = match conv {
                Conversion::F16ToF32(h) | Conversion::Bf16ToF32(h) => {
                    let d = if matches!(conv, Conversion::F16ToF32(_)) {
                        DType::F16
                    } else {
                        DType::Bf16
                    };
                    let mut c = [0; COLUMN_BYTES];
                    for i in 0..8 {
                        put(DType::F32, &mut c, i, get(d, &from, base(h) + i));
                    }
                    c
                }
                Conversion::F32ToF16(h) | Conversion::F32ToBf16(h) => {
                    let d = if matches!(conv, Conversion::F32ToF16(_)) {
                        DType::F16
                    } else {
                        DType::Bf16
                    };
                    // The other half of the destination keeps its bytes.
                    let mut c = read(s, ctx, dst)?;
                    for i in 0..8 {
                        put(d, &mut c, base(h) + i, get(DType::F32, &from, i));
                    }
                    c
                }
                Conversion::I32ToF32 => {
                    let mut c = [0; COLUMN_BYTES];
                    for i in 0..8 {
                        let Elem::I(v) = get(DType::I32, &from, i) else { unreachable!() };
                        put(DType::F32, &mut c, i, Elem::F(v as f32));
                    }
                    c
                }
                Conversion::F32ToI32 => {
                    let mut c = [0; COLUMN_BYTES];
                    for i in 0..8 {
                        let Elem::F(v) = get(DType::F32, &from, i) else { unreachable!() };
                        put(DType::I32, &mut c, i, Elem::I(v as i32));
                    }
                    c
                }
            };
            (dst, c)
        }
    };
    match dst {
        Loc::Mem => s.mem = out,
        Loc::Ts(t) => {
            let e = entry(ctx, t.get())?;
            s.ts[e] = out;
        }
    }
    Ok(())
}

fn column(data: &[u8], at: usize) -> Column {
    let mut c = [0u8; COLUMN_BYTES];
    for (i, b) in c.iter_mut().enumerate() {
        *b = data.get(at + i).copied().unwrap_or((at + i) as u8);
    }
    c
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let word = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    let Ok(instr) = Instr::decode(word) else {
        return;
    };
    let chunk = 1 + data[4] % 4;
    let k = data[5] % 5;
    let mut scalars = [0u32; SCALAR_REGS as usize];
    for (i, r) in scalars.iter_mut().enumerate() {
        let at = 8 + 4 * i;
        *r = u32::from_le_bytes([
            data.get(at).copied().unwrap_or(0),
            data.get(at + 1).copied().unwrap_or(0),
            data.get(at + 2).copied().unwrap_or(0),
            data.get(at + 3).copied().unwrap_or(0x3f),
        ]);
    }
    let mut state = State {
        mem: column(data, 40),
        ts: (0..ENTRIES).map(|e| column(data, 72 + 32 * e)).collect(),
        acc: f32::from(data[6]) / 8.0,
    };
    let mut alu = BankAlu::new(ENTRIES);
    for (e, c) in state.ts.iter().enumerate() {
        *alu.ts_mut(e).expect("entry") = *c;
    }
    alu.set_acc(state.acc);
    let mut mem = state.mem;
    let model = alu.execute(&instr, chunk, k, &mut mem, &scalars);
    let ctx = Ctx { chunk, k, scalars: &scalars };
    let want = reference(&mut state, &ctx, &instr);
    assert_eq!(model.is_ok(), want.is_ok(), "{instr:?} chunk {chunk} k {k}: {model:?} vs {want:?}");
    if want.is_err() {
        return;
    }
    let d = result_dtype(&instr);
    assert!(same(d, &mem, &state.mem), "{instr:?}: open column {mem:?} vs {:?}", state.mem);
    for (e, c) in state.ts.iter().enumerate() {
        let got = alu.ts(e).expect("entry");
        assert!(same(d, got, c), "{instr:?}: TS entry {e}: {got:?} vs {c:?}");
    }
    let (a, b) = (alu.acc(), state.acc);
    assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{instr:?}: accumulator {a} vs {b}");
});

/// The lane type of an instruction's result (`None`: a bit copy or no result).
fn result_dtype(i: &Instr) -> Option<DType> {
    match *i {
        Instr::Fill { dtype, .. }
        | Instr::Binary { dtype, .. }
        | Instr::Fma { dtype, .. }
        | Instr::Scale { dtype, .. }
        | Instr::Shift { dtype, .. } => Some(dtype),
        Instr::Div { .. } | Instr::Special { .. } => Some(DType::F32),
        Instr::Cvt { conv, .. } => Some(conv.to()),
        _ => None,
    }
}

/// Equal bytes, where a NaN equals any NaN of its lane type: IEEE 754 leaves the payload
/// and sign of a NaN result open, and the compiler may commute an addition's operands,
/// so which input NaN comes out is not part of the ISA.
fn same(d: Option<DType>, a: &Column, b: &Column) -> bool {
    let Some(d) = d.filter(|d| *d != DType::I32) else {
        return a == b;
    };
    (0..lanes(d)).all(|i| match (get(d, a, i), get(d, b, i)) {
        (Elem::F(x), Elem::F(y)) => {
            let w = width(d);
            a[i * w..i * w + w] == b[i * w..i * w + w] || (x.is_nan() && y.is_nan())
        }
        _ => unreachable!("float lanes"),
    })
}
