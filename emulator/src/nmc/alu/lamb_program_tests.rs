//! The ISA expresses LAMB: its macro-command programs, run on one bank's ALU in the
//! macro-command order without timing, against an f64 reference.

use super::tests::{floats, pack_floats};
use super::*;
use rand::{Rng, SeedableRng};

/// Runs a macro-command over one bank whose arrays are `mem[base_row]` (one "row"
/// per array, enough columns for the command): the chunk/phase/column order of the
/// macro-command semantics, without timing.
fn run_macro(
    alu: &mut BankAlu,
    cmd: &nmcp_isa::nmc::MacroCommand,
    mem: &mut [Vec<Column>],
    scalars: &[u32; 8],
) {
    cmd.validate().unwrap();
    assert!(cmd.ts_entries_needed() <= alu.ts_entries());
    let n = cmd.col_count as usize;
    let chunk = usize::from(cmd.chunk);
    for start in (0..n).step_by(chunk) {
        for phase in &cmd.phases {
            let block = cmd.block(phase).unwrap();
            for k in 0..chunk.min(n - start) {
                let col = &mut mem[phase.base_row as usize][cmd.col_start as usize + start + k];
                alu.run_block(block, cmd.chunk, k as u8, col, scalars)
                    .unwrap();
            }
        }
    }
}

const LAMB_STAGE1: &str = "
.macro channels=0+1 mode=all col_start=0 col_count=64 chunk=4
.phase row=0                      ; g
  mov.f32 ts0, mem
.phase row=1                      ; m
  scale.f32 ts1, mem, s0          ; b1 m
  fma.f32 ts1, ts0, s1, ts1       ; + (1-b1)/clip g
  mov.f32 mem, ts1
.phase row=2                      ; v
  mul.f32 ts0, ts0, ts0           ; g^2
  scale.f32 ts2, mem, s2          ; b2 v
  fma.f32 ts2, ts0, s3, ts2       ; + (1-b2)/clip^2 g^2
  mov.f32 mem, ts2
  sqrt.f32 ts2, ts2
  fma.f32 ts2, ts2, s5, s6        ; sqrt(v) sqrt(bc2) + eps
  rcp.f32 ts2, ts2
  mul.f32 ts1, ts1, ts2
  scale.f32 ts1, ts1, s4          ; * bc1
.phase row=3                      ; w
  fma.f32 ts1, mem, s7, ts1       ; + wd w
.phase row=4                      ; u
  mov.f32 mem, ts1
.end
";

const LAMB_NORMS: [&str; 2] = [
    ".macro channels=0+1 mode=all col_start=0 col_count=64 chunk=4\n.phase row=3\n sqacc.f32 mem\n.end\n",
    ".macro channels=0+1 mode=all col_start=0 col_count=64 chunk=4\n.phase row=4\n sqacc.f32 mem\n.end\n",
];

const LAMB_STAGE2: &str = "
.macro channels=0+1 mode=all col_start=0 col_count=64 chunk=8
.phase row=4                      ; u
  scale.f32 ts0, mem, s0          ; lr * ratio * u
.phase row=3                      ; w
  sub.f32 mem, mem, ts0
.end
";

/// The ISA expresses LAMB (SPEC 4.1, Apex FusedLAMB variant) and its numerics meet
/// the 1e-5 per-element budget against an f64 reference, over 10 steps with clipping
/// and bias correction.
#[test]
fn lamb_programs_match_f64_reference_over_ten_steps() {
    use nmcp_isa::asm::parse_macro;
    let (b1, b2, eps, wd, lr, max_norm) = (0.9f64, 0.999f64, 1e-6f64, 0.01f64, 1e-3f64, 1.0f64);
    let n = 64 * 8;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
    let to_cols = |v: &[f64]| -> Vec<Column> {
        v.chunks(8)
            .map(|c| pack_floats(DType::F32, &c.iter().map(|x| *x as f32).collect::<Vec<_>>()))
            .collect()
    };
    let from_cols = |cols: &[Column]| -> Vec<f64> {
        cols.iter()
            .flat_map(|c| floats(DType::F32, c))
            .map(f64::from)
            .collect()
    };
    // Reference state in f64, starting from the same f32 values.
    let mut w: Vec<f64> = (0..n)
        .map(|_| f64::from(rng.random_range(-1.0f32..1.0)))
        .collect();
    let mut m = vec![0f64; n];
    let mut v = vec![0f64; n];
    let mut mem: Vec<Vec<Column>> = vec![to_cols(&vec![0.0; n]); 5];
    mem[3] = to_cols(&w);
    let stage1 = parse_macro(LAMB_STAGE1).unwrap();
    let stage2 = parse_macro(LAMB_STAGE2).unwrap();
    let norms: Vec<_> = LAMB_NORMS.iter().map(|t| parse_macro(t).unwrap()).collect();
    let mut alu = BankAlu::new(DEFAULT_TS_ENTRIES);
    let mut worst = 0f64;
    for t in 1..=10 {
        // Gradients large enough that clipping is active.
        let g: Vec<f64> = (0..n)
            .map(|_| f64::from(rng.random_range(-0.5f32..0.5)))
            .collect();
        mem[0] = to_cols(&g);
        let gnorm = g.iter().map(|x| x * x).sum::<f64>().sqrt();
        let clip = if gnorm > max_norm {
            gnorm / max_norm
        } else {
            1.0
        };
        let (bc1, bc2) = (1.0 / (1.0 - b1.powi(t)), 1.0 / (1.0 - b2.powi(t)));
        // Reference.
        let mut u = vec![0f64; n];
        // Magnitude of the terms each element is summed from: errors are measured
        // relative to it, since b1·m + (1-b1)·g can cancel to near zero, where no f32
        // implementation is relatively accurate.
        let mut m_scale = vec![0f64; n];
        let mut w_scale = vec![0f64; n];
        for i in 0..n {
            let gh = g[i] / clip;
            m_scale[i] = b1 * m[i].abs() + (1.0 - b1) * gh.abs();
            m[i] = b1 * m[i] + (1.0 - b1) * gh;
            v[i] = b2 * v[i] + (1.0 - b2) * gh * gh;
            u[i] = (m[i] * bc1) / ((v[i] * bc2).sqrt() + eps) + wd * w[i];
        }
        let p = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        let un = u.iter().map(|x| x * x).sum::<f64>().sqrt();
        let ratio = if p > 0.0 && un > 0.0 { p / un } else { 1.0 };
        for i in 0..n {
            w_scale[i] = w[i].abs() + (lr * ratio * u[i]).abs();
            w[i] -= lr * ratio * u[i];
        }
        // NMC: the host folds the scalars into the 8 registers.
        let sc = [
            b1,
            (1.0 - b1) / clip,
            b2,
            (1.0 - b2) / (clip * clip),
            bc1,
            bc2.sqrt(),
            eps,
            wd,
        ]
        .map(|x| (x as f32).to_bits());
        run_macro(&mut alu, &stage1, &mut mem, &sc);
        let mut sums = [0f64; 2];
        for (s, cmd) in sums.iter_mut().zip(&norms) {
            alu.take_acc();
            run_macro(&mut alu, cmd, &mut mem, &sc);
            *s = f64::from(alu.take_acc());
        }
        let (p_nmc, u_nmc) = (sums[0].sqrt(), sums[1].sqrt());
        let ratio_nmc = if p_nmc > 0.0 && u_nmc > 0.0 {
            p_nmc / u_nmc
        } else {
            1.0
        };
        let mut sc2 = [0u32; 8];
        sc2[0] = ((lr * ratio_nmc) as f32).to_bits();
        run_macro(&mut alu, &stage2, &mut mem, &sc2);
        for (name, row, want, scale) in [
            ("m", 1, &m, &m_scale),
            ("v", 2, &v, &v),
            ("w", 3, &w, &w_scale),
        ] {
            for (i, (got, want)) in from_cols(&mem[row]).iter().zip(want.iter()).enumerate() {
                let rel = (got - want).abs() / scale[i].abs().max(1e-30);
                worst = worst.max(rel);
                assert!(
                    rel <= 1e-5,
                    "step {t}: {name}[{i}] = {got:e}, reference {want:e}, rel {rel:e}"
                );
            }
        }
    }
    eprintln!("LAMB on the bank ALU, 10 steps: worst error of m, v, w relative to their terms = {worst:.2e}");
}
