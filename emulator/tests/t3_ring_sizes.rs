//! Rings of any size, including GPU counts that are not powers of two: every
//! configuration `nmcp t3 check` runs ends with each GPU's block equal to the sum of the
//! partials, and the baseline reduce-scatter completes in `N - 1` steps.

use nmcp_emulator::t3::{check, time_reduce_scatter, CheckRun, Scenario, Simulate, T3Options};
use nmcp_isa::gemm_ext::GemmDataType;

/// f32 runs: the partials are on a 1/4096 grid, so every sum of them is exact in any
/// order and the reduced block must equal the plain sum bit for bit.
fn opts(gpus: u32) -> T3Options {
    T3Options {
        gpus,
        dtype: GemmDataType::F32,
        simulate: Simulate::AllGpus,
        ..T3Options::default()
    }
}

#[test]
fn reduced_blocks_equal_the_sums_of_the_partials_for_3_5_and_6_gpus() {
    for gpus in [3u32, 5, 6] {
        for scenario in [Scenario::T3, Scenario::T3Mca, Scenario::Sequential] {
            let run = CheckRun {
                gpus,
                m: 256,
                n: 256,
                k: 32,
                scenario,
            };
            let out = check(&opts(gpus), &run)
                .unwrap_or_else(|e| panic!("{gpus} GPUs, {scenario:?}: {e:?}"));
            assert_eq!(out.blocks.len(), gpus as usize);
            assert_eq!(
                out.mismatches, 0,
                "{gpus} GPUs, {scenario:?}: {:?}",
                out.first_mismatch
            );
            assert!(out.seconds > 0.0);
            let mut covered = 0u64;
            for (b, got) in out.blocks.iter().zip(&out.reduced) {
                let mut i = 0;
                for row in b.rows[0]..b.rows[1] {
                    for col in b.cols[0]..b.cols[1] {
                        let e = row as usize * run.n as usize + col as usize;
                        let want: f32 = out.partials.iter().map(|p| p[e]).sum();
                        assert_eq!(
                            got[i], want,
                            "{gpus} GPUs, {scenario:?}, GPU {} ({row}, {col})",
                            b.gpu
                        );
                        i += 1;
                    }
                }
                assert_eq!(i, got.len());
                covered += i as u64;
            }
            // The blocks tile the whole output between them.
            assert_eq!(covered, u64::from(run.m) * u64::from(run.n), "{gpus} GPUs");
        }
    }
}

#[test]
fn ring_reduce_scatter_runs_on_3_5_and_6_gpus() {
    for gpus in [3u32, 5, 6] {
        let t = time_reduce_scatter(&opts(gpus), 1 << 20)
            .unwrap_or_else(|e| panic!("{gpus} GPUs: {e:?}"));
        assert_eq!(t.steps, gpus - 1);
        assert!(
            t.rs_seconds > 0.0 && t.model_seconds > 0.0,
            "{gpus} GPUs: {t:?}"
        );
    }
}
