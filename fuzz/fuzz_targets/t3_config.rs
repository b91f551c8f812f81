//! Arbitrary fused GEMM + collective configurations on a small all-GPU system: each is
//! either refused with an error (a bad shape, a layout the firmware cannot program) or
//! runs to completion; a reduce-scatter that runs ends with every GPU holding exactly the
//! sum of the partials, and no tracker ever counts an update twice or loses one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nmcp_emulator::t3::run::{partial_outputs, run_fused, Collective};
use nmcp_emulator::t3::{Simulate, SubLayer, T3Error, T3Options};
use nmcp_isa::gemm_ext::GemmDataType;

/// Bytes to a configuration, small enough that one run takes milliseconds.
struct Config {
    gpus: u32,
    m: u32,
    n: u32,
    k: u32,
    collective: Collective,
    mca: Option<usize>,
    split_k: u8,
    shortcut: bool,
}

fn config(data: &[u8]) -> Option<Config> {
    let b = |i: usize| data.get(i).copied().unwrap_or(0);
    if data.len() < 8 {
        return None;
    }
    // Dimensions: multiples of 16 up to 512 rows / 256 columns, or odd sizes (b & 0x80)
    // to exercise the layout's refusals.
    let dim = |x: u8, max: u32| {
        if x & 0x80 != 0 {
            u32::from(x & 0x7f) * 3 + 1
        } else {
            (u32::from(x & 0x7f) % (max / 16) + 1) * 16
        }
    };
    Some(Config {
        gpus: 2 + u32::from(b(0) % 5),
        m: dim(b(1), 512),
        n: dim(b(2), 256),
        k: 1 + u32::from(b(3) % 32),
        collective: match b(4) % 4 {
            0 => Collective::RingReduceScatter,
            1 => Collective::DirectReduceScatter,
            2 => Collective::AllGather,
            _ => Collective::AllToAll,
        },
        mca: (b(5) & 1 == 1).then(|| 1 + usize::from(b(5) >> 1)),
        split_k: 1 + b(6) % 2,
        shortcut: b(7) & 1 == 1,
    })
}

fuzz_target!(|data: &[u8]| {
    let Some(c) = config(data) else { return };
    let opts = T3Options {
        gpus: c.gpus,
        dtype: GemmDataType::F32,
        split_k: c.split_k,
        simulate: if c.shortcut { Simulate::Shortcut } else { Simulate::AllGpus },
        ..T3Options::default()
    };
    let sl = SubLayer {
        model: "fuzz".into(),
        name: "fuzz",
        h: c.m,
        tokens: c.n,
        tp: c.gpus,
        m: c.m,
        n: c.n,
        k: c.k,
    };
    let reduces = matches!(
        c.collective,
        Collective::RingReduceScatter | Collective::DirectReduceScatter
    ) && !c.shortcut;
    // f32 values on a 1/4096 grid with k <= 32: every partial sum is exact in any order.
    let partials = reduces.then(|| partial_outputs(c.gpus, c.m, c.n, c.k, GemmDataType::F32, 3));
    match run_fused(&opts, &sl, c.collective, c.mca, partials.as_deref()) {
        Err(T3Error::Config(_) | T3Error::Firmware(_)) => {}
        Err(e) => panic!("{e}"),
        Ok(run) => {
            assert!(run.ns > 0.0);
            for t in run.system.totals() {
                assert_eq!((t.orphans, t.tracker.overcounts), (0, 0));
            }
            if let Some(p) = &partials {
                // Which block each GPU owns comes from the firmware's geometry; every
                // element some GPU owns must be the exact sum.
                let n = c.n as usize;
                for g in 0..c.gpus as usize {
                    let out = run.system.out_values(g).expect("values carried");
                    let block = run.system.owned_rect(g as u32);
                    for row in block.row0..block.row0 + block.rows {
                        for col in block.col0..block.col0 + block.cols {
                            let i = row as usize * n + col as usize;
                            let want: f32 = p.iter().map(|v| v[i]).sum();
                            assert_eq!(out[i], want, "GPU {g} ({row}, {col})");
                        }
                    }
                }
            }
        }
    }
});
