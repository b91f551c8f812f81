//! The GPU model's memory port: the fluid port is exactly the old formula, the DRAM port
//! is deterministic, tells streaming from row-conflicting traffic, tags requests with the
//! cohort's workgroups, and simulates one window per mix. The ignored test at the end
//! prints the comparison of `docs/decisions/gpu-memory-port.md`.

use std::time::Instant;

use nmcp_emulator::gpu::catalog::{Catalog, CatalogKernel};
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::{Calibration, GemmShape};
use nmcp_emulator::gpu::mem_port::{
    window_accesses, DramPort, FluidHbm, GemmTiling, MemoryPort, StreamDemand,
};
use nmcp_emulator::gpu::sim::{makespan, makespan_with_port, GpuSim};
use nmcp_emulator::gpu::workload::{config_gemms, NETWORKS};
use nmcp_emulator::gpu::{GpuEvent, KernelEngine, KernelLaunch};
use nmcp_firmware::cp::features::workgroups;
use nmcp_isa::gemm_ext::GemmDataType;

fn f16(m: u32, n: u32, k: u32, ta: bool, tb: bool) -> GemmShape {
    GemmShape::new(m, n, k, ta, tb, GemmDataType::F16)
}

fn kernel(mt0: u16, mt1: u16, depth_u: u16, threads: u16) -> CatalogKernel {
    CatalogKernel {
        index: u32::MAX,
        mt0,
        mt1,
        depth_u,
        threads,
        split_u: 1,
        prefetch: true,
        lds_pad: true,
        stagger_mapping: 0,
        stages: 0,
        split_atomic: false,
    }
}

/// One cohort of `workgroups` workgroups of `shape` tiled by `k`, demanding `demand`
/// bytes/ns, with the output tile's share of its bytes as the writes.
fn stream(
    kernel_index: usize,
    shape: &GemmShape,
    k: &CatalogKernel,
    first: u64,
    workgroups: u64,
    demand: f64,
) -> StreamDemand {
    let eb = f64::from(shape.dtype.bytes());
    let panels = (f64::from(k.mt0) + f64::from(k.mt1)) * f64::from(shape.k) * eb;
    StreamDemand {
        kernel: kernel_index,
        tiling: Some(GemmTiling::new(shape, k)),
        first_workgroup: first,
        workgroups,
        waves_per_workgroup: u32::from(k.threads) / 64,
        read_bytes_per_workgroup: panels,
        write_bytes_per_workgroup: f64::from(k.mt0) * f64::from(k.mt1) * eb,
        demand_bytes_per_ns: demand,
    }
}

/// A small DRAM port (64 requests per pseudo-channel) so that debug-build tests stay fast.
fn small_port(gpu: &GpuConfig) -> DramPort {
    let preset = DramPort::preset_for_gpu(gpu).expect("preset");
    DramPort::new(preset, 64).expect("port")
}

#[test]
fn fluid_port_is_the_sustained_bandwidth_times_the_row_factor_per_kernel() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let shape = f16(1024, 4096, 1024, false, false);
    let k = kernel(128, 128, 16, 256);
    let mut port = FluidHbm;
    assert_eq!(port.hbm_capacity(&gpu, &cal, &[]), gpu.hbm_sustained());
    for kernels in 1..=6usize {
        // Two cohorts per kernel: cohorts of one kernel are one stream for the row factor.
        let streams: Vec<StreamDemand> = (0..kernels)
            .flat_map(|i| {
                [
                    stream(i, &shape, &k, 0, 120, 100.0),
                    stream(i, &shape, &k, 120, 120, 50.0),
                ]
            })
            .collect();
        let old = gpu.hbm_sustained() * cal.hbm_row_factor(kernels);
        assert_eq!(
            port.hbm_capacity(&gpu, &cal, &streams).to_bits(),
            old.to_bits(),
            "{kernels} kernels"
        );
    }
}

#[test]
fn gpu_sim_default_and_explicit_fluid_port_give_identical_times() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let s = f16(1024, 4096, 4096, false, false);
    let k = kernel(128, 128, 16, 256);
    let runs = vec![(s, k); 3];
    let default = makespan(&gpu, &cal, &runs).expect("runs");
    let explicit = makespan_with_port(&gpu, &cal, &runs, FluidHbm).expect("runs");
    assert_eq!(default.0.to_bits(), explicit.0.to_bits());
    assert_eq!(default.1, explicit.1);
}

#[test]
fn dram_port_device_has_the_gpus_channel_count() {
    // MI100: four HBM2 stacks (1228.8 GB/s at 2.4 Gb/s); T3's GPU: 1 TB/s = 64
    // pseudo-channels at 16 GB/s (the `t3-table-8.1` organisation).
    for gpu in [GpuConfig::mi100(), GpuConfig::t3_table_8_1()] {
        let preset = DramPort::preset_for_gpu(&gpu).expect("preset");
        assert_eq!(preset.organisation.stacks, 4, "{}", gpu.name);
        assert_eq!(preset.pseudo_channels(), 64, "{}", gpu.name);
    }
}

#[test]
fn dram_port_is_deterministic() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let shape = f16(1024, 4096, 1024, false, true);
    let k = kernel(128, 128, 16, 256);
    let streams = [
        stream(0, &shape, &k, 0, 240, 600.0),
        stream(1, &shape, &k, 16, 240, 400.0),
    ];
    let a = small_port(&gpu).hbm_capacity(&gpu, &cal, &streams);
    let b = small_port(&gpu).hbm_capacity(&gpu, &cal, &streams);
    assert!(a > 0.0 && a <= gpu.hbm_bytes_per_ns, "capacity {a}");
    assert_eq!(a.to_bits(), b.to_bits());
    // Whole runs: same kernel times on two fresh ports.
    let runs = vec![(f16(512, 1024, 1024, false, false), k); 2];
    let first = makespan_with_port(&gpu, &cal, &runs, small_port(&gpu)).expect("runs");
    let second = makespan_with_port(&gpu, &cal, &runs, small_port(&gpu)).expect("runs");
    assert_eq!(first.0.to_bits(), second.0.to_bits());
    assert_eq!(first.1, second.1);
    assert_eq!(first.2.windows_simulated(), second.2.windows_simulated());
}

#[test]
fn streaming_panels_reach_near_peak_and_more_streams_fall_below() {
    let gpu = GpuConfig::mi100();
    // The default window: shorter ones measure mostly their own ramp and drain.
    let port = DramPort::for_gpu(&gpu).expect("port");
    // One kernel whose traffic is whole columns of a non-transposed A (all tile rows of
    // one tile column resident): consecutive addresses, the DRAM model's best case.
    let tall = f16(8192, 64, 4096, false, false);
    let k = kernel(256, 64, 16, 256);
    let streaming = port.measure(&gpu, &[stream(0, &tall, &k, 0, 32, 1000.0)]);
    // The DRAM model's own streaming validation reaches 97 % of pin bandwidth with long
    // runs; a window of 512 requests per pseudo-channel loses a few % to its ramp and
    // drain.
    assert!(streaming.fraction_of_peak > 0.90, "streaming {streaming:?}");
    // One BERT GEMM against eight copies of it: each copy's matrices lie in rows of their
    // own, so the copies' panels collide in the banks.
    let bert = f16(1024, 4096, 1024, false, false);
    let k2 = kernel(128, 128, 16, 256);
    let one = port.measure(&gpu, &[stream(0, &bert, &k2, 0, 240, 1000.0)]);
    let eight: Vec<StreamDemand> = (0..8)
        .map(|i| stream(i, &bert, &k2, 0, 60, 100.0))
        .collect();
    let many = port.measure(&gpu, &eight);
    let conflict_share = |m: &nmcp_emulator::gpu::mem_port::WindowMeasurement| {
        m.row_conflicts as f64 / (m.row_hits + m.row_misses + m.row_conflicts) as f64
    };
    assert!(
        many.fraction_of_peak < one.fraction_of_peak,
        "eight streams {many:?} vs one {one:?}"
    );
    assert!(
        conflict_share(&many) > conflict_share(&one),
        "eight streams {many:?} vs one {one:?}"
    );
    assert!(
        conflict_share(&one) > conflict_share(&streaming),
        "one BERT stream {one:?} vs streaming {streaming:?}"
    );
}

#[test]
fn window_requests_carry_their_cohorts_workgroup_and_wavefront_ids() {
    let gpu = GpuConfig::mi100();
    let shape = f16(1024, 4096, 1024, false, false);
    let k = kernel(128, 128, 16, 256);
    let waves = u32::from(k.threads) / 64;
    let streams = [
        stream(0, &shape, &k, 100, 40, 500.0),
        stream(1, &shape, &k, 200, 24, 500.0),
    ];
    let accesses = window_accesses(&streams, gpu.line_bytes, 8192);
    assert!(!accesses.is_empty());
    let k0 = 100u32..140;
    let k1 = 200u32..224;
    for a in &accesses {
        assert!(
            k0.contains(&a.workgroup) || k1.contains(&a.workgroup),
            "access from workgroup {} outside both cohorts",
            a.workgroup
        );
        assert!(u32::from(a.wavefront) < waves, "wavefront {}", a.wavefront);
    }
    // Both cohorts, loads and stores, and more than one wavefront of a workgroup appear.
    assert!(accesses.iter().any(|a| k0.contains(&a.workgroup)));
    assert!(accesses.iter().any(|a| k1.contains(&a.workgroup)));
    assert!(accesses.iter().any(|a| a.write));
    assert!(accesses.iter().any(|a| !a.write));
    assert!(accesses.iter().any(|a| a.wavefront > 0));
    // Stores go to the cohort's own output tiles: workgroup 100 of a 8 x 32 tile grid is
    // tile row 4, column 12; its stores all lie in its tile's columns of C.
    let stores_of_100: Vec<u64> = accesses
        .iter()
        .filter(|a| a.write && a.workgroup == 100)
        .map(|a| a.addr)
        .collect();
    assert!(!stores_of_100.is_empty());
    let c_columns = stores_of_100
        .iter()
        .map(|a| a / (1024 * 2))
        .collect::<Vec<_>>();
    let lo = *c_columns.iter().min().expect("stores");
    let hi = *c_columns.iter().max().expect("stores");
    assert!(
        hi - lo < 128,
        "a tile spans 128 columns of C, got {lo}..={hi}"
    );
}

#[test]
fn dram_port_simulates_one_window_per_mix() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let shape = f16(1024, 4096, 1024, false, false);
    let k = kernel(128, 128, 16, 256);
    let mut port = small_port(&gpu);
    let streams = [stream(0, &shape, &k, 0, 240, 800.0)];
    let first = port.hbm_capacity(&gpu, &cal, &streams);
    // The same mix again, and one within the key's rounding (demand +1 %, a cohort id
    // shifted), cost nothing more.
    let again = port.hbm_capacity(&gpu, &cal, &streams);
    let nudged = port.hbm_capacity(&gpu, &cal, &[stream(0, &shape, &k, 8, 240, 808.0)]);
    assert_eq!(port.windows_simulated(), 1);
    assert_eq!(first.to_bits(), again.to_bits());
    assert_eq!(first.to_bits(), nudged.to_bits());
    // A whole run, then the same run on the warmed port: no new windows, same time.
    let runs = vec![(f16(512, 1024, 1024, false, false), k); 2];
    let (t1, _, warmed) = makespan_with_port(&gpu, &cal, &runs, port).expect("runs");
    let windows = warmed.windows_simulated();
    assert!(windows > 1, "the run should have measured its mixes");
    let (t2, _, again) = makespan_with_port(&gpu, &cal, &runs, warmed).expect("runs");
    assert_eq!(again.windows_simulated(), windows);
    assert_eq!(t1.to_bits(), t2.to_bits());
}

#[test]
fn kernels_launched_as_packets_reach_the_dram_port_with_their_tiling() {
    // The CP's path (a GEMM extension record and kernel metadata, as the dispatcher hands
    // launches over): the port must see the GEMM's tiling, or it has nothing to measure.
    let gpu = GpuConfig::mi100();
    let cat = Catalog::standard();
    let mut sim = GpuSim::with_port(gpu.clone(), Calibration::default(), 1, small_port(&gpu));
    let s = f16(1024, 1024, 2048, false, true);
    let k = cat.get(40).expect("kernel");
    let mut ext = s.to_ext();
    let meta = k.meta(s.dtype);
    ext.kernels.push(meta).expect("room");
    let launch = KernelLaunch {
        gemm: Some((ext.clone(), meta)),
        workgroups: workgroups(&ext, &meta),
        workgroup_size: k.threads,
        workgroup_time: 0.0,
        barrier: false,
    };
    sim.launch(0.0, 7, &launch);
    let mut events = Vec::new();
    while let Some(t) = sim.next_event() {
        sim.advance(t, &mut events);
    }
    assert!(
        events
            .iter()
            .any(|e| matches!(e, GpuEvent::Completed { tag: 7, .. })),
        "{events:?}"
    );
    assert!(sim.port().windows_simulated() > 0);
}

/// The BERT-Large GEMMs of the comparison (H = 1024, 4096 tokens, from the workload's
/// layer formulas): the H x H linear (Q, K, V, O), FC-1 and FC-2 forward, FC-2's backward
/// activation (transposed A) and FC-1's backward weight (transposed B).
fn bert_large_gemms() -> Vec<(&'static str, GemmShape)> {
    let bert = NETWORKS
        .iter()
        .find(|n| n.name == "bert")
        .expect("bert network");
    // config_gemms order: (H x H), (4H x H), (H x 4H); each forward, bwd-act, bwd-weight.
    let g = config_gemms(bert, 1024, 4096, GemmDataType::F16);
    let pick = |i: usize| g.get(i).copied().expect("layer gemm");
    vec![
        ("QKV/O linear fwd", pick(0)),
        ("FC-1 fwd", pick(3)),
        ("FC-2 fwd", pick(6)),
        ("FC-2 bwd-act", pick(7)),
        ("FC-1 bwd-weight", pick(5)),
    ]
}

/// Prints the fluid-vs-DRAM comparison (simulated time and wall-clock cost), isolated and
/// at CD 4, with each GEMM's best isolated kernel under the fluid port. Run with
/// `cargo test --release -p nmcp-emulator --test gemm_mem_port -- --ignored --nocapture`.
#[test]
#[ignore = "prints the port comparison table; run in release"]
fn compare_ports_on_bert_large_gemms() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let cat = Catalog::standard();
    println!(
        "| GEMM | shape | kernel | CD | fluid (us) | DRAM (us) | DRAM vs fluid | fluid capacity (% peak) | DRAM capacity (% peak, per mix) | fluid wall (ms) | DRAM wall (ms) | windows | requests |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, shape) in bert_large_gemms() {
        let best = nmcp_emulator::gpu::search::best_isolated_kernel(&gpu, &cal, &cat, &shape)
            .expect("some kernel runs");
        for cd in [1usize, 4] {
            let runs = vec![(shape, best); cd];
            let t0 = Instant::now();
            let fluid = makespan(&gpu, &cal, &runs).expect("runs").0;
            let fluid_wall = t0.elapsed().as_secs_f64() * 1e3;
            let port = DramPort::for_gpu(&gpu).expect("port");
            let t0 = Instant::now();
            let (dram, _, port) = makespan_with_port(&gpu, &cal, &runs, port).expect("runs");
            let dram_wall = t0.elapsed().as_secs_f64() * 1e3;
            let fluid_capacity = 100.0 * gpu.hbm_sustained_fraction * cal.hbm_row_factor(cd);
            let dram_capacity: Vec<String> = port
                .measured_fractions()
                .iter()
                .map(|f| format!("{:.1}", 100.0 * f))
                .collect();
            println!(
                "| {name} | {shape} | {} | {cd} | {:.1} | {:.1} | {:+.1} % | {fluid_capacity:.1} | {} | {fluid_wall:.2} | {dram_wall:.1} | {} | {} |",
                best.name(),
                fluid / 1e3,
                dram / 1e3,
                100.0 * (dram / fluid - 1.0),
                dram_capacity.join(", "),
                port.windows_simulated(),
                port.requests_simulated(),
            );
        }
    }
    // Where a window's wall-clock goes: generating its requests or simulating them.
    let shape = f16(4096, 1024, 4096, false, true);
    let k = kernel(64, 64, 32, 128);
    let streams: Vec<StreamDemand> = (0..4)
        .map(|i| stream(i, &shape, &k, 0, 240, 300.0))
        .collect();
    let port = DramPort::for_gpu(&gpu).expect("port");
    let t0 = Instant::now();
    let window = port.window(&gpu, &streams);
    let generate = t0.elapsed().as_secs_f64() * 1e3;
    let t0 = Instant::now();
    let m = port.measure(&gpu, &streams);
    let total = t0.elapsed().as_secs_f64() * 1e3;
    println!(
        "one window of {} requests: {generate:.1} ms generating, {:.1} ms generating + simulating ({:.1} % of peak)",
        window.len(),
        total,
        100.0 * m.fraction_of_peak
    );
}
