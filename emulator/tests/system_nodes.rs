//! Two GPU nodes in one system, sharing its one event queue: one runs a LAMB step on its
//! NMC engines, the other a GEMM queue on its GPU. Neither may notice the other: each
//! node's results are those it gets alone.

use nmcp_emulator::gpu::queue::sample;
use nmcp_emulator::gpu::FixedTimeEngine;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::lamb::run::{
    lamb_job, layout, write_descriptors, LambRunConfig, Layout, NMC_LINEAR_MAPPING,
};
use nmcp_emulator::lamb::ModelPreset;
use nmcp_emulator::nmc::system::{NmcSystemConfig, NmcTotals};
use nmcp_emulator::node::{GpuNode, GpuNodeConfig, PacketOutcome};
use nmcp_emulator::system::System;
use nmcp_firmware::cp::{CdPredictor, CpRecord};
use std::collections::BTreeMap;

const EXT_BASE: u64 = 0x1100_0000;
const SIG_BASE: u64 = 0x1200_0000;
const KO_BASE: u64 = 0x1000_0000;

fn lamb_config() -> LambRunConfig {
    LambRunConfig {
        system: NmcSystemConfig {
            functional: false,
            parallel: false,
            ..NmcSystemConfig::default()
        },
        ..LambRunConfig::default()
    }
}

fn lamb_node(index: usize) -> (GpuNode<FixedTimeEngine>, Layout, HbmPreset) {
    let preset = HbmPreset::builtin("hbm2-2000").unwrap();
    let mapping = AddressMapping::parse(NMC_LINEAR_MAPPING, &preset).unwrap();
    let model = ModelPreset::custom("two-node", 1, 64, 256);
    let elements: Vec<u64> = model.tensors().iter().map(|t| t.elements()).collect();
    let lay = layout(&preset, &elements).unwrap();
    let cfg = lamb_config();
    let node_cfg = GpuNodeConfig {
        cost: cfg.cost,
        ..GpuNodeConfig::nmc_only(preset.clone(), mapping, cfg.system.clone())
    };
    let mut node = GpuNode::new(index, node_cfg, FixedTimeEngine::new(1, 1, 1.0)).unwrap();
    write_descriptors(node.memory_mut(), &lay).unwrap();
    (node, lay, preset)
}

fn gemm_node(index: usize) -> GpuNode<FixedTimeEngine> {
    let cfg = GpuNodeConfig {
        queues: 4,
        ring_packets: 16,
        predictor: CdPredictor::default(),
        ..GpuNodeConfig::default()
    };
    let mut node = GpuNode::new(index, cfg, FixedTimeEngine::new(8, 2, 1_000.0)).unwrap();
    for q in 0..4u8 {
        for k in 0..3u64 {
            let slot = u64::from(q) * 3 + k;
            let m = 256 << (slot % 4);
            let ext = sample::gemm_ext(m, 512, 512, KO_BASE + slot * 0x1000);
            let addr = EXT_BASE + slot * 0x100;
            node.memory_mut().write(addr, &ext.encode()).unwrap();
            node.enqueue(
                q,
                &sample::gemm_dispatch(&ext, addr, SIG_BASE + slot * 8),
                0.0,
            )
            .unwrap();
        }
    }
    node
}

/// What one node ended with.
#[derive(Debug, PartialEq)]
struct LambResult {
    totals: NmcTotals,
    norm: f32,
    done: bool,
    cp_cycles: u64,
}

#[derive(Debug, PartialEq)]
struct GemmResult {
    outcomes: BTreeMap<(u8, u64), PacketOutcome>,
    records: Vec<(f64, CpRecord)>,
}

fn lamb_result(n: &GpuNode<FixedTimeEngine>) -> LambResult {
    LambResult {
        totals: n.nmc().unwrap().totals(),
        norm: n.firmware().nmc.lamb.global_norm(),
        done: n.firmware().nmc.lamb.is_done(),
        cp_cycles: n.summary().cp_cycles,
    }
}

fn gemm_result(n: &GpuNode<FixedTimeEngine>) -> GemmResult {
    GemmResult {
        outcomes: n.outcomes().clone(),
        records: n.records().to_vec(),
    }
}

fn ring_all(sys: &mut System<FixedTimeEngine>, node: usize) {
    for q in 0..4u8 {
        sys.ring_doorbell(node, q, 100.0 * f64::from(q)).unwrap();
    }
}

#[test]
fn two_nodes_share_the_queue_and_each_gets_its_own_result() {
    // Alone.
    let (n, lay, preset) = lamb_node(0);
    let mut alone_lamb = System::new(vec![n]).unwrap();
    alone_lamb
        .start_lamb(0, lamb_job(&preset, &lay, &lamb_config(), 0))
        .unwrap();
    alone_lamb.run(u64::MAX);
    let lamb_alone = lamb_result(alone_lamb.node(0));
    assert!(lamb_alone.done, "the LAMB step finished");
    assert!(lamb_alone.totals.engines.macro_commands > 0);

    let mut alone_gemm = System::new(vec![gemm_node(0)]).unwrap();
    ring_all(&mut alone_gemm, 0);
    alone_gemm.run(1_000_000);
    let gemm_alone = gemm_result(alone_gemm.node(0));
    assert_eq!(gemm_alone.outcomes.len(), 12);
    assert!(gemm_alone.outcomes.values().all(|o| o.completions == 1));

    // Together, in both orders of the nodes.
    for lamb_first in [true, false] {
        let (li, gi) = if lamb_first { (0, 1) } else { (1, 0) };
        let (n, lay, preset) = lamb_node(li);
        let g = gemm_node(gi);
        let nodes = if lamb_first { vec![n, g] } else { vec![g, n] };
        let mut sys = System::new(nodes).unwrap();
        sys.start_lamb(li, lamb_job(&preset, &lay, &lamb_config(), 0))
            .unwrap();
        ring_all(&mut sys, gi);
        let s = sys.run(u64::MAX);
        assert!(!s.truncated);
        assert_eq!(lamb_result(sys.node(li)), lamb_alone, "LAMB node {li}");
        assert_eq!(gemm_result(sys.node(gi)), gemm_alone, "GEMM node {gi}");
        // Both really ran in the same span of time, so their events interleaved in the
        // one queue: GEMMs completed while the LAMB step was still running.
        let first_gemm = gemm_alone
            .outcomes
            .values()
            .filter_map(|o| o.completed_at)
            .fold(f64::INFINITY, f64::min);
        let lamb_end = sys.node(li).summary().end;
        assert!(
            first_gemm > 0.0 && first_gemm < lamb_end,
            "{first_gemm} vs {lamb_end}"
        );
    }
}

#[test]
fn node_indices_must_match_positions() {
    let err = System::new(vec![gemm_node(1)]).unwrap_err();
    assert!(err.to_string().contains("position 0 has index 1"), "{err}");
}
