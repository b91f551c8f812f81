//! Timelines recorded by the models: the expected tracks exist, spans are well formed,
//! recording is deterministic and changes no result.

use nmcp_emulator::hbm::HbmPreset;
use nmcp_emulator::lamb::run::{LambRun, LambRunConfig};
use nmcp_emulator::nmc::system::NmcSystemConfig;
use nmcp_emulator::t3::{self, SubLayer, T3Options};
use nmcp_emulator::timeline::{Timeline, TimelineConfig, TrackKind};

fn events_of<'a>(
    t: &'a Timeline,
    process: &'a str,
    thread: &'a str,
) -> impl Iterator<Item = &'a nmcp_emulator::timeline::TimelineEvent> + 'a {
    let id = t
        .tracks()
        .iter()
        .position(|k| k.process == process && k.thread == thread)
        .unwrap_or_else(|| panic!("no track {process} / {thread}"));
    t.events().iter().filter(move |e| e.track.0 as usize == id)
}

fn well_formed(t: &Timeline) {
    for e in t.events() {
        assert!(e.end >= e.start, "{e:?}");
        let kind = t.tracks()[e.track.0 as usize].kind;
        if kind != TrackKind::Spans {
            assert_eq!(e.end, e.start, "{e:?}");
        }
    }
}

#[test]
fn a_traced_t3_sublayer_has_every_gpu_s_tracks_and_the_same_results() {
    let opts = T3Options {
        gpus: 4,
        ..T3Options::default()
    };
    let sl: SubLayer = t3::sublayers("small", 256, 256, 4).remove(0);
    let plain = t3::run_sublayer(&opts, &sl).unwrap();
    let cfg = TimelineConfig::default();
    let (traced, tl) = t3::run_sublayer_traced(&opts, &sl, cfg).unwrap();
    assert_eq!(format!("{plain:?}"), format!("{traced:?}"));
    well_formed(&tl);
    assert!(tl.truncated().is_none());
    for g in 0..4 {
        let p = format!("t3: GPU {g}");
        assert_eq!(events_of(&tl, &p, "kernels").count(), 1);
        assert!(events_of(&tl, &p, "DMA").count() > 0);
        assert!(events_of(&tl, &p, "CP (firmware)").count() > 0);
        assert!(events_of(&tl, &p, "tracker fired").count() > 0);
        let m = format!("t3-mca: GPU {g} memory");
        assert!(events_of(&tl, &m, "requests in flight").count() > 1);
    }
    // Deterministic: the same run records the same timeline.
    let (_, again) = t3::run_sublayer_traced(&opts, &sl, cfg).unwrap();
    assert_eq!(tl, again);
}

fn lamb_run() -> LambRun {
    let preset = HbmPreset::builtin("lamb-ch6").unwrap();
    let config = LambRunConfig {
        system: NmcSystemConfig {
            functional: false,
            parallel: false,
            mirror_broadcast: true,
            ..NmcSystemConfig::default()
        },
        ..LambRunConfig::default()
    };
    LambRun::new(preset, &[64 * 1024, 3 * 1024], config).unwrap()
}

#[test]
fn a_traced_lamb_step_has_cp_engine_queue_and_bank_tracks_and_the_same_cycles() {
    let mut plain = lamb_run();
    let want = plain.step().unwrap();
    let mut r = lamb_run();
    r.enable_timeline(TimelineConfig::default());
    let got = r.step().unwrap();
    assert_eq!(want.cycles, got.cycles);
    assert_eq!(want.global_norm.to_bits(), got.global_norm.to_bits());
    let tl = r.take_timeline().unwrap();
    well_formed(&tl);
    let cp: Vec<_> = events_of(&tl, "GPU 0", "CP (firmware)").collect();
    assert!(cp
        .iter()
        .any(|e| tl.names()[e.name as usize] == "start_lamb"));
    assert!(
        cp.iter().any(|e| e.end > e.start),
        "the CP's handlers take time"
    );
    let engine: Vec<_> = events_of(&tl, "GPU 0 NMC", "PC 0 engine").collect();
    assert!(engine.len() > 2);
    // One engine runs one command at a time.
    for w in engine.windows(2) {
        assert!(w[1].start >= w[0].end, "{:?} overlaps {:?}", w[0], w[1]);
    }
    let q: Vec<f64> = events_of(&tl, "GPU 0 NMC", "macro-command queue")
        .map(|e| e.value)
        .collect();
    assert!(q.iter().any(|&v| v >= 1.0));
    assert_eq!(q.last(), Some(&0.0));
    let rows: Vec<f64> = events_of(&tl, "GPU 0 HBM PC 0", "bank 0.0")
        .map(|e| e.value)
        .collect();
    assert!(rows.iter().any(|&v| v >= 0.0) && rows.contains(&-1.0));
    // Recording a second step goes on from where the first ended.
    r.step().unwrap();
    let second = r.take_timeline().unwrap();
    let first_end = tl.events().iter().map(|e| e.end).max().unwrap();
    for e in second.events() {
        assert!(
            e.start >= first_end,
            "{e:?} on {:?} before {first_end}; first's last: {:?}",
            second.tracks()[e.track.0 as usize],
            tl.events()
                .iter()
                .max_by_key(|e| e.end)
                .map(|e| (e, &tl.tracks()[e.track.0 as usize]))
        );
    }
}

#[test]
fn a_traced_cp_run_has_its_handlers_decisions_and_kernels() {
    use nmcp_emulator::gpu::queue::sample;
    use nmcp_emulator::gpu::FixedTimeEngine;
    use nmcp_emulator::node::GpuNodeConfig;
    use nmcp_emulator::system::System;
    let build = || {
        let cfg = GpuNodeConfig {
            queues: 2,
            ring_packets: 16,
            ..GpuNodeConfig::default()
        };
        let mut sys = System::single(cfg, FixedTimeEngine::new(8, 2, 1_000.0)).unwrap();
        for q in 0..2u8 {
            let m = 1024 * (u32::from(q) + 1);
            let ext = sample::gemm_ext(m, 512, 512, 0x1000_0000 + u64::from(m));
            let addr = 0x1100_0000 + u64::from(q) * 0x100;
            sys.node_mut(0)
                .memory_mut()
                .write(addr, &ext.encode())
                .unwrap();
            let sig = 0x1200_0000 + u64::from(q) * 8;
            sys.enqueue(0, q, &sample::gemm_dispatch(&ext, addr, sig), 0.0)
                .unwrap();
            sys.ring_doorbell(0, q, 0.0).unwrap();
        }
        sys
    };
    let mut plain = build();
    let want = plain.run(u64::MAX);
    let mut sys = build();
    sys.enable_timeline(TimelineConfig::default());
    let got = sys.run(u64::MAX);
    assert_eq!(format!("{want:?}"), format!("{got:?}"));
    let tl = sys.take_timeline().unwrap();
    well_formed(&tl);
    let kernels: Vec<_> = events_of(&tl, "GPU 0", "kernels").collect();
    assert_eq!(kernels.len(), 2, "both GEMMs ran");
    assert!(kernels.iter().all(|e| e.end > e.start));
    let cp: Vec<&str> = events_of(&tl, "GPU 0", "CP (firmware)")
        .map(|e| tl.names()[e.name as usize].as_str())
        .collect();
    assert!(
        cp.contains(&"Doorbell") && cp.contains(&"KernelCompleted"),
        "{cp:?}"
    );
    assert!(events_of(&tl, "GPU 0", "CP decisions").count() >= 2);
}
