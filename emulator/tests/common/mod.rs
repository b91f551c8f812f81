//! Test rig shared by the DRAM timing and NMC engine tests: the gate-by-gate check
//! (`dram_timing.rs`, `dram_masa.rs`), an NMC block whose pseudo-channel 0 logs its
//! commands, the checked replay of such a log, and the random programs the gate property
//! tests draw (`nmc_alu_models.rs`, `nmc_masa.rs`).
#![allow(dead_code)] // each test crate uses its own part

use nmcp_emulator::hbm::config::{RefreshMode, Subarrays};
use nmcp_emulator::hbm::timing::{Gate, TimingError};
use nmcp_emulator::hbm::{AddressMapping, Command, Cycle, HbmPreset, PseudoChannel};
use nmcp_emulator::lamb::experiment::{AluModelReport, EngineSetup, LambExperiment};
use nmcp_emulator::lamb::reference::{LambHyper, TensorState};
use nmcp_emulator::lamb::run::{LambRun, LambRunConfig};
use nmcp_emulator::lamb::CheckedRun;
use nmcp_emulator::lamb::ModelPreset;
use nmcp_emulator::memctrl::LoggedCommand;
use nmcp_emulator::memory::DeviceMemory;
use nmcp_emulator::nmc::engine::{AluModel, RowMap, RowPolicy};
use nmcp_emulator::nmc::system::{NmcBlock, NmcSystemConfig};
use nmcp_firmware::nmc::Stage1Program;
use nmcp_isa::asm::parse_macro;
use nmcp_isa::nmc::MacroCommand;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Row-major linear address mapping (a row's columns are consecutive).
pub const LINEAR: &str = "ro-co-ba-bg-st-pc-ch";

/// An NMC block on `preset` (pseudo-channel 0 logging) under the given ALU model and row
/// policy, timing only, with a device memory of the preset's capacity.
pub fn rig(
    preset: &HbmPreset,
    alu_model: AluModel,
    row_policy: RowPolicy,
) -> (NmcBlock, DeviceMemory) {
    rig_with_map(preset, alu_model, row_policy, None)
}

/// [`rig`] with the engines' rows going through the row map `map`.
pub fn rig_with_map(
    preset: &HbmPreset,
    alu_model: AluModel,
    row_policy: RowPolicy,
    map: Option<RowMap>,
) -> (NmcBlock, DeviceMemory) {
    let m = AddressMapping::parse(LINEAR, preset).unwrap();
    let mut nmc = NmcBlock::new(
        preset,
        m,
        NmcSystemConfig {
            parallel: false,
            functional: false,
            alu_model,
            row_policy,
            row_map: map.map(std::sync::Arc::new),
            ..NmcSystemConfig::default()
        },
    );
    nmc.memory_system_mut()
        .controller_mut(0)
        .unwrap()
        .set_logging(true);
    (nmc, DeviceMemory::with_capacity(preset.capacity_bytes()))
}

/// Asserts that the tensors `state` hold exactly `base`'s bits (w, m and v of each),
/// naming `name` and the tensor on a mismatch.
pub fn assert_same_bits(name: &str, state: &[TensorState], base: &[TensorState]) {
    assert_eq!(state.len(), base.len(), "{name}: tensors");
    for (i, (a, b)) in state.iter().zip(base).enumerate() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a.w), bits(&b.w), "{name}: tensor {i} w");
        assert_eq!(bits(&a.m), bits(&b.m), "{name}: tensor {i} m");
        assert_eq!(bits(&a.v), bits(&b.v), "{name}: tensor {i} v");
    }
}

/// Pseudo-channel 0's command log.
pub fn log_of(nmc: &NmcBlock) -> Vec<LoggedCommand> {
    nmc.memory_system().controllers()[0].log().to_vec()
}

/// A logged command's debug name (`AbRd { col: 3 }`).
pub fn name(l: &LoggedCommand) -> String {
    format!("{:?}", l.cmd)
}

/// A logged command's mnemonic (`AB-RD`).
pub fn kind(l: &LoggedCommand) -> &'static str {
    l.cmd.kind().mnemonic()
}

/// Replays a command log through a fresh, fully checked timing state: any command issued
/// before a gate allows it (or to a bank in the wrong state) fails here.
pub fn replay(preset: &HbmPreset, log: &[LoggedCommand]) -> Result<(), String> {
    let mut pc = PseudoChannel::new(preset);
    for l in log {
        pc.issue(&l.cmd, l.at)
            .map_err(|e| format!("{:?} at {}: {e}", l.cmd, l.at))?;
    }
    Ok(())
}

/// Blocks a random program draws its phases from: read-only, read-modify-write in one
/// instruction, read then write in two, write-only from TS, a long DIV chain, a reduction.
pub const BLOCKS: [&str; 6] = [
    "  mov.f32 ts0, mem\n",
    "  add.f32 mem, mem, s0\n",
    "  mul.f32 ts1, mem, s1\n  add.f32 ts1, ts1, ts0\n  mov.f32 mem, ts1\n",
    "  mov.f32 mem, ts0\n",
    "  div.f32 ts1, mem, ts0\n  sqrt.f32 ts1, ts1\n",
    "  sqacc.f32 mem\n",
];

/// An all-bank macro-command over channels 0 and 1 whose phases are `(block, row)`.
pub fn program(chunk: u8, cols: u32, start: u32, phases: &[(usize, u32)]) -> MacroCommand {
    let mut s =
        format!(".macro channels=0+1 mode=all col_start={start} col_count={cols} chunk={chunk}\n");
    for &(b, row) in phases {
        s.push_str(&format!(".phase row={row}\n{}", BLOCKS[b]));
    }
    s.push_str(".end\n");
    parse_macro(&s).unwrap()
}

/// A pseudo-channel on `p` after `setup` (each command at its cycle; a refused one fails).
pub fn state(p: &HbmPreset, setup: &[(Command, Cycle)]) -> PseudoChannel {
    let mut pc = PseudoChannel::new(p);
    for (c, at) in setup {
        pc.issue(c, *at)
            .unwrap_or_else(|e| panic!("setup {c} at {at}: {e}"));
    }
    pc
}

/// Issues `setup`, then checks the earliest cycle and gate of `next`: refused one cycle
/// earlier by that gate, accepted at that cycle (Ramulator 2's gate-by-gate style).
pub fn gate_with(
    p: &HbmPreset,
    setup: &[(Command, Cycle)],
    next: Command,
    want: Cycle,
    gate: Gate,
) {
    let mut pc = state(p, setup);
    assert_eq!(
        pc.earliest_with_gate(&next),
        (want, gate),
        "earliest of {next}"
    );
    let mut early = pc.clone();
    match early.issue(&next, want - 1) {
        Err(TimingError::TooEarly {
            earliest, gate: g, ..
        }) => assert_eq!((earliest, g), (want, gate)),
        other => panic!("{next} one cycle early: expected TooEarly, got {other:?}"),
    }
    pc.issue(&next, want)
        .unwrap_or_else(|e| panic!("{next} at its earliest {want}: {e}"));
}

/// [`lamb_functional`] with the four-slot stage-1 program.
pub fn lamb_four_slot(
    preset: &HbmPreset,
    setup: EngineSetup,
    steps: usize,
) -> (Vec<TensorState>, f64, f32, u64) {
    lamb_functional(preset, setup, Stage1Program::FourSlot, steps)
}

/// w, m, v after `steps` functional LAMB steps (four tensors of 7 to 20,000 elements,
/// seeded) under `setup` and the stage-1 `program` on `preset`, the worst error against
/// the FP32 reference (in term scales), the last global norm and the cycles.
pub fn lamb_functional(
    preset: &HbmPreset,
    setup: EngineSetup,
    program: Stage1Program,
    steps: usize,
) -> (Vec<TensorState>, f64, f32, u64) {
    let ts = NmcSystemConfig::default().ts_entries;
    lamb_functional_at(preset, setup, program, steps, ts)
}

/// [`lamb_functional`] with `ts_entries` TS entries per bank ALU.
pub fn lamb_functional_at(
    preset: &HbmPreset,
    setup: EngineSetup,
    program: Stage1Program,
    steps: usize,
    ts_entries: usize,
) -> (Vec<TensorState>, f64, f32, u64) {
    let depth = NmcSystemConfig::default().queue_depth;
    lamb_functional_queued(preset, setup, program, steps, ts_entries, depth)
}

/// [`lamb_functional_at`] with engine queues of `queue_depth` macro-commands (a full
/// queue answers `Busy`, and the sequencer retries on a later completion).
pub fn lamb_functional_queued(
    preset: &HbmPreset,
    setup: EngineSetup,
    program: Stage1Program,
    steps: usize,
    ts_entries: usize,
    queue_depth: usize,
) -> (Vec<TensorState>, f64, f32, u64) {
    let sizes = [7usize, 1029, 4099, 20_000];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(10);
    let state: Vec<TensorState> = sizes
        .iter()
        .map(|&n| {
            let w = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let g = (0..n).map(|_| rng.random_range(-0.01f32..0.01)).collect();
            TensorState::new(w, g)
        })
        .collect();
    let elements: Vec<u64> = sizes.iter().map(|&n| n as u64).collect();
    let hyper = LambHyper::default();
    let config = LambRunConfig {
        system: NmcSystemConfig {
            ts_entries,
            queue_depth,
            functional: true,
            parallel: false,
            alu_model: setup.alu_model,
            row_policy: setup.row_policy,
            ..NmcSystemConfig::default()
        },
        hyper,
        program,
        ..LambRunConfig::default()
    };
    let run = LambRun::new(preset.clone(), &elements, config).unwrap();
    let mut checked = CheckedRun::new(run, state, hyper).unwrap();
    let (mut norm, mut cycles) = (0.0, 0);
    for s in 0..steps {
        let grads = (s > 0).then(|| {
            sizes
                .iter()
                .map(|&n| (0..n).map(|_| rng.random_range(-0.01f32..0.01)).collect())
                .collect()
        });
        let out = checked.step(grads).unwrap();
        norm = out.nmc.global_norm;
        cycles += out.nmc.cycles;
    }
    let c = checked.compare().unwrap();
    (
        checked.read_state().unwrap(),
        c.max_error_vs_term_scale,
        norm,
        cycles,
    )
}

/// Two timing-only LAMB steps of a small model on preset `preset` under `setup`, without
/// and with pseudo-channel 0 mirrored to the others: (step cycles, totals) of each.
pub fn full_and_mirrored(
    preset: &str,
    setup: EngineSetup,
) -> (
    (Vec<u64>, nmcp_emulator::nmc::system::NmcTotals),
    (Vec<u64>, nmcp_emulator::nmc::system::NmcTotals),
) {
    let model = nmcp_emulator::lamb::ModelPreset::custom("small", 1, 128, 512);
    let elements: Vec<u64> = model.tensors().iter().map(|t| t.elements()).collect();
    let run = |mirror_broadcast| {
        let config = LambRunConfig {
            system: NmcSystemConfig {
                functional: false,
                parallel: false,
                alu_model: setup.alu_model,
                row_policy: setup.row_policy,
                mirror_broadcast,
                ..NmcSystemConfig::default()
            },
            ..LambRunConfig::default()
        };
        let preset = HbmPreset::builtin(preset).unwrap();
        let mut r = LambRun::new(preset, &elements, config).unwrap();
        let cycles: Vec<u64> = (0..2).map(|_| r.step().unwrap().cycles).collect();
        (cycles, r.totals())
    };
    (run(false), run(true))
}

/// Submits `cmd` `jobs` times to `nmc`, then replays pseudo-channel 0's command log
/// through a fresh checked channel of `preset`: the gate property tests' check. An
/// empty log is an error too (the program issued nothing to check).
pub fn submit_and_replay(
    preset: &HbmPreset,
    nmc: &mut NmcBlock,
    mem: &mut DeviceMemory,
    cmd: &MacroCommand,
    jobs: usize,
) -> Result<(), String> {
    for _ in 0..jobs {
        nmc.submit(0, cmd, mem)
            .map_err(|e| format!("submit: {e}"))?;
    }
    let log = log_of(nmc);
    if log.is_empty() {
        return Err("no command issued".into());
    }
    replay(preset, &log)
}

/// A timing-only LAMB experiment of `model` on `preset` under `setups` with the stage-1
/// `program`, one step at TS 16 with the TS sweep, no host reductions: what the bound
/// tests run.
pub fn sweep_experiment(
    model: &ModelPreset,
    preset: HbmPreset,
    setups: Vec<EngineSetup>,
    program: Stage1Program,
) -> LambExperiment {
    LambExperiment {
        model: model.name.clone(),
        preset,
        elements: model.tensors().iter().map(|t| t.elements()).collect(),
        input: None,
        functional: false,
        seed: 1,
        steps: 1,
        ts_entries: 16,
        hyper: LambHyper::default(),
        host_reduction_ns: 0.0,
        lamb_share: vec![],
        breakdown: false,
        ts_sweep: true,
        setups,
        program,
        timeline: None,
    }
}

/// hbm2-2000 with `per_bank` subarrays per bank and SA_SEL = 2 tCK (the MASA tests'
/// device; 8 subarrays as `lamb-ch6-masa`, 16 as `lamb-ch6-masa16`).
pub fn masa_hbm2(refresh: RefreshMode, per_bank: u32) -> HbmPreset {
    let mut p = HbmPreset::builtin("hbm2-2000").unwrap();
    p.refresh.mode = refresh;
    p.subarrays = Subarrays {
        per_bank,
        sa_sel: 2,
        ..Subarrays::default()
    };
    p.check().unwrap();
    p
}

/// [`masa_hbm2`] with all-bank refresh and refresh-access parallelism (SARP: the NMC
/// engine's decoupled policies refresh one subarray at a time).
pub fn masa_hbm2_sarp(per_bank: u32) -> HbmPreset {
    let mut p = masa_hbm2(RefreshMode::AllBank, per_bank);
    p.subarrays.refresh_parallel = true;
    p.check().unwrap();
    p
}

/// The bounds every engine setup of a sweep report keeps (named `n` in the messages):
/// its speedup at peak is at most the physical bound, its program bound and its
/// row-cycle bound, every TS-sweep point at most the physical bound, and the time split
/// adds up to the step (the named parts never exceed it).
pub fn assert_setup_within_bounds(n: &str, m: &AluModelReport, physical_bound: f64) {
    assert!(m.speedup[0] <= physical_bound, "{n}: {}", m.speedup[0]);
    assert!(m.speedup[0] <= m.program_bound, "{n}");
    assert!(m.speedup[0] <= m.row_cycle_bound, "{n}");
    for t in &m.ts_sweep {
        assert!(
            t.speedup_vs_ideal_100 <= physical_bound,
            "{n} at TS {}: {}",
            t.ts_entries,
            t.speedup_vs_ideal_100
        );
    }
    let s = &m.time;
    let parts = s.columns + s.row_switches + s.refresh + s.alu_stalls + s.subarray_selects;
    assert!(
        parts <= m.nmc_seconds * 1.0001
            && (parts + s.reductions_and_other - m.nmc_seconds).abs() <= 1e-4 * m.nmc_seconds,
        "{n}: {parts} + {} of {}",
        s.reductions_and_other,
        m.nmc_seconds
    );
}

/// The MASA engine setups the MASA tests compare, each under the `pipelined` ALU model.
pub const MASA: EngineSetup = EngineSetup {
    alu_model: AluModel::PIPELINED,
    row_policy: RowPolicy::Masa,
};

/// `masa-decoupled` under the `pipelined` ALU model.
pub const DECOUPLED: EngineSetup = EngineSetup {
    alu_model: AluModel::PIPELINED,
    row_policy: RowPolicy::MasaDecoupled,
};

/// `masa-2jobs` (two macro-commands in flight) under the `pipelined` ALU model.
pub const TWO_JOBS: EngineSetup = EngineSetup {
    alu_model: AluModel::PIPELINED,
    row_policy: RowPolicy::MasaTwoJobs,
};
