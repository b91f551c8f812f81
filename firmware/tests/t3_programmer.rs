//! The T3 plan (ring RS, N = 4, every rank, against a hand-written table) and the lazy
//! programmer (what `start` programs, one-for-one programming on firings, bounded work,
//! full sets retried, completion), through `Firmware::handle` and a recording platform.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod common;

use std::collections::HashSet;

use common::Mock;
use nmcp_firmware::t3::{
    first_tracked_stage, stage_plan, Collective, DmaTarget, T3Geometry, T3Job, T3State, Track,
    MAX_RECORDS_PER_EVENT,
};
use nmcp_firmware::{Event, Firmware};
use nmcp_isa::gemm_ext::GemmDataType;
use nmcp_isa::t3::{split_peer, DmaOp, DmaTrigger, TRACKER_NO_DMA};
use proptest::prelude::*;

const UPD: DmaOp = DmaOp::Update(GemmDataType::F16);

fn small(collective: Collective, gpus: u8, rank: u8) -> T3Job {
    T3Job {
        tile_m: 32,
        tile_n: 32,
        out_base: 0x1000,
        ..T3Job::new(collective, gpus, rank, 8 * 32, 64)
    }
}

#[test]
fn ring_reduce_scatter_plan_n4_every_rank() {
    // (rank, stage) -> chunk; prev = the peer a GPU sends to.
    let chunk = [[1, 2, 3, 0], [2, 3, 0, 1], [3, 0, 1, 2], [0, 1, 2, 3]];
    let prev = [3u8, 0, 1, 2];
    for split_k in [1u8, 2] {
        let s = u32::from(split_k);
        for rank in 0..4u8 {
            let job = T3Job {
                split_k,
                ..small(Collective::RingReduceScatter, 4, rank)
            };
            let g = T3Geometry::new(&job).unwrap();
            let p = prev[usize::from(rank)];
            // stage -> (local op, remote, track)
            let table = [
                (None, Some((p, UPD)), None),
                (
                    Some(UPD),
                    None,
                    Some(Track {
                        updates_per_element: 2 * s,
                        dma: Some(DmaTarget { peer: p, op: UPD }),
                    }),
                ),
                (
                    Some(UPD),
                    None,
                    Some(Track {
                        updates_per_element: s + 1,
                        dma: Some(DmaTarget { peer: p, op: UPD }),
                    }),
                ),
                (
                    Some(UPD),
                    None,
                    Some(Track {
                        updates_per_element: s + 1,
                        dma: None,
                    }),
                ),
            ];
            for k in 1..=4u8 {
                let plan = stage_plan(&g, k).unwrap();
                let (local, remote, track) = table[usize::from(k - 1)];
                let c = chunk[usize::from(rank)][usize::from(k - 1)];
                assert_eq!(plan.chunk, c, "rank {rank} stage {k}");
                let map = plan.map.unwrap();
                assert_eq!((map.wg_first, map.wg_count), g.chunk_wgs(c).unwrap());
                assert_eq!(
                    (map.local, map.remote),
                    (local, remote),
                    "rank {rank} stage {k}"
                );
                assert_eq!(plan.track, track, "rank {rank} stage {k}");
            }
            assert_eq!(stage_plan(&g, 0), None);
            assert_eq!(stage_plan(&g, 5), None);
        }
    }
}

#[test]
fn other_collectives_plans() {
    let g = T3Geometry::new(&small(Collective::DirectReduceScatter, 4, 1)).unwrap();
    for k in 1..4 {
        let p = stage_plan(&g, k).unwrap();
        let owner = (1 + k) % 4;
        assert_eq!(p.map.unwrap().remote, Some((owner, UPD)));
        assert_eq!(p.track, None);
    }
    let p = stage_plan(&g, 4).unwrap();
    assert_eq!(p.chunk, 1);
    assert_eq!(
        p.track,
        Some(Track {
            updates_per_element: 4,
            dma: None
        })
    );
    let g = T3Geometry::new(&small(Collective::AllGather, 4, 1)).unwrap();
    let p = stage_plan(&g, 1).unwrap();
    assert_eq!(p.chunk, 1);
    assert_eq!(p.map.unwrap().local, Some(DmaOp::Store));
    assert_eq!(p.map.unwrap().remote, Some((0, DmaOp::Store)));
    // Arriving chunks 2, 3, 0: hops 1, 2, 3; the last is notify-only.
    for (k, c, fwd) in [(2, 2, true), (3, 3, true), (4, 0, false)] {
        let p = stage_plan(&g, k).unwrap();
        assert_eq!((p.chunk, p.map), (c, None));
        let t = p.track.unwrap();
        assert_eq!(t.updates_per_element, 1);
        assert_eq!(t.dma.is_some(), fwd);
    }
    let g = T3Geometry::new(&small(Collective::AllToAll, 4, 2)).unwrap();
    assert_eq!(
        stage_plan(&g, 1).unwrap().map.unwrap().remote,
        Some((3, DmaOp::Store))
    );
    assert_eq!(
        stage_plan(&g, 4)
            .unwrap()
            .track
            .unwrap()
            .updates_per_element,
        4
    );
}

/// Delivers firings (oldest programmed first), then DMA completions, and `Deferred`
/// when the firmware asks or is blocked on a full table; returns when nothing is left.
fn run(fw: &mut Firmware, p: &mut Mock) {
    let (mut fired, mut done) = (0, 0);
    for _ in 0..1_000_000 {
        let event = if fw.has_pending_work() {
            Event::Deferred
        } else if fired < p.entries.len() {
            fired += 1;
            Event::TrackerFired {
                entry: p.entries[fired - 1].id,
            }
        } else if done < p.dmas.len() {
            done += 1;
            let (engine, d) = &p.dmas[done - 1];
            Event::DmaDone {
                engine: *engine,
                id: d.id,
                status: Ok(()),
            }
        } else if fw.t3().is_blocked() {
            Event::Deferred
        } else {
            return;
        };
        fw.handle(event, p).unwrap();
    }
    panic!("no progress");
}

/// Checks a finished job: every non-empty WF tile of every tracked stage programmed
/// exactly once, every DMA triggered by the firings of its block.
fn check_complete(job: &T3Job, p: &Mock) {
    let g = T3Geometry::new(job).unwrap();
    let first = first_tracked_stage(job.collective, job.gpus);
    let mut expect = 0;
    let mut dmas = 0;
    for k in first..=job.gpus {
        let plan = stage_plan(&g, k).unwrap();
        let n = g.chunk_wf_tiles(plan.chunk).unwrap();
        expect += n as usize;
        if plan.track.unwrap().dma.is_some() {
            dmas += n as usize / usize::from(job.wf_tiles_per_dma_block);
        }
    }
    assert_eq!(p.entries.len(), expect);
    let tiles: HashSet<_> = p.entries.iter().map(|e| (e.wg_id, e.wf_id)).collect();
    assert_eq!(tiles.len(), expect, "an entry programmed twice");
    if job.tile_m.is_multiple_of(u16::from(job.wfs_per_wg))
        && job.m.is_multiple_of(u32::from(job.tile_m))
    {
        assert_eq!(p.dmas.len(), dmas);
    }
    for (_, d) in &p.dmas {
        let fires = p
            .entries
            .iter()
            .filter(|e| e.dma_id == d.id && e.wg_id == d.dst_wg_id);
        assert_eq!(fires.count(), usize::from(d.fires), "{d:?}");
        assert_eq!(d.trigger, DmaTrigger::Tracker(d.id));
        let prev = (job.rank + job.gpus - 1) % job.gpus;
        assert_eq!(split_peer(d.dst), (Some(prev), d.src));
    }
}

#[test]
fn start_programs_maps_and_only_the_first_tracked_stage() {
    let job = small(Collective::RingReduceScatter, 4, 1);
    let g = T3Geometry::new(&job).unwrap();
    let (mut fw, mut p) = (Firmware::default(), Mock::default());
    fw.start_t3(&job, &mut p).unwrap();
    assert_eq!(p.maps.len(), 4);
    assert_eq!(p.dispatch_start, Some(g.chunk_wgs(2).unwrap().0));
    // Stage 2 of rank 1 is chunk 3: 2 tile rows x 2 tile columns x 4 WFs.
    let (first, count) = g.chunk_wgs(3).unwrap();
    assert_eq!(p.entries.len(), 16);
    assert_eq!(p.dmas.len(), 16);
    for e in &p.entries {
        assert!((first..first + count).contains(&e.wg_id));
        assert!(e.id < 0x8000);
        assert_eq!(e.dma_id, e.id);
        assert_eq!(e.threshold, 8 * 32 * 2);
    }
    assert_eq!(fw.t3().live_stages(), (Some(2), Some(3)));
    assert!(!fw.has_pending_work());
    // One firing of stage 2 programs one entry of stage 3.
    let id = p.entries[5].id;
    fw.handle(Event::TrackerFired { entry: id }, &mut p)
        .unwrap();
    assert_eq!(p.entries.len(), 17);
    let e = p.entries.last().unwrap();
    assert_eq!(e.id & 0x8000, 0x8000);
    assert_eq!(g.chunk_of_wg(e.wg_id), Some(0));
    // A firing no live stage knows is a fault.
    let err = fw.handle(Event::TrackerFired { entry: 0x7000 }, &mut p);
    assert!(err.is_err());
    assert!(fw.t3().fault().is_some());
}

#[test]
fn runs_to_completion_for_every_collective_and_rank() {
    for collective in [
        Collective::RingReduceScatter,
        Collective::DirectReduceScatter,
        Collective::AllGather,
        Collective::AllToAll,
    ] {
        for gpus in [2u8, 3, 4, 8] {
            for rank in 0..gpus {
                let job = small(collective, gpus, rank);
                let (mut fw, mut p) = (Firmware::default(), Mock::default());
                fw.start_t3(&job, &mut p).unwrap();
                assert!(!fw.t3().is_done());
                run(&mut fw, &mut p);
                assert!(fw.t3().is_done(), "{collective:?} {gpus} {rank}");
                check_complete(&job, &p);
                if collective == Collective::RingReduceScatter {
                    let g = T3Geometry::new(&job).unwrap();
                    let notify = p.entries.iter().filter(|e| e.dma_id == TRACKER_NO_DMA);
                    let own = g.chunk_wf_tiles(rank).unwrap() as usize;
                    assert_eq!(notify.count(), own);
                }
            }
        }
    }
}

#[test]
fn work_per_event_is_bounded_and_deferred() {
    // 128 tile rows of 32 x 32, 2 columns, 4 WFs, 2 GPUs: 512 entries in stage 2.
    let job = T3Job {
        m: 64 * 32 * 2,
        ..small(Collective::RingReduceScatter, 2, 0)
    };
    let job = T3Job {
        collective: Collective::RingReduceScatter,
        gpus: 2,
        ..job
    };
    let (mut fw, mut p) = (Firmware::default(), Mock::default());
    fw.start_t3(&job, &mut p).unwrap();
    assert_eq!(
        (p.entries.len() + p.dmas.len()) as u32,
        MAX_RECORDS_PER_EVENT
    );
    assert!(fw.has_pending_work());
    let before = fw.t3().work();
    fw.handle(Event::Deferred, &mut p).unwrap();
    // N = 2: stage 2 is the notify-only final stage, entries only.
    assert_eq!(p.entries.len(), 128);
    assert_eq!(fw.t3().work().events, before.events + 1);
    assert_eq!(
        fw.t3().work().records,
        before.records + MAX_RECORDS_PER_EVENT
    );
    run(&mut fw, &mut p);
    assert!(fw.t3().is_done());
    check_complete(&job, &p);
}

#[test]
fn full_sets_and_tables_are_retried_never_lost() {
    let job = T3Job {
        wf_tiles_per_dma_block: 2,
        ..small(Collective::RingReduceScatter, 4, 2)
    };
    let (mut fw, mut p) = (Firmware::default(), Mock::default());
    p.set_full = 3;
    fw.start_t3(&job, &mut p).unwrap();
    assert!(fw.t3().is_blocked());
    assert!(!fw.has_pending_work());
    assert_eq!((p.entries.len(), p.dmas.len(), p.refused), (0, 1, 1));
    // Retried on the next event, the same record.
    fw.handle(Event::Deferred, &mut p).unwrap();
    fw.handle(Event::Deferred, &mut p).unwrap();
    assert_eq!((p.entries.len(), p.dmas.len(), p.refused), (0, 1, 3));
    fw.handle(Event::Deferred, &mut p).unwrap();
    // Chunk 0 of rank 2: 4 WGs x 4 WFs, DMA blocks of 2 WF tiles.
    assert_eq!((p.entries.len(), p.dmas.len()), (16, 8));
    p.set_full = 2;
    p.table_full = 2;
    run(&mut fw, &mut p);
    assert_eq!(p.refused, 7);
    assert!(fw.t3().is_done());
    check_complete(&job, &p);
}

#[test]
fn dma_error_is_a_fault() {
    let job = small(Collective::RingReduceScatter, 4, 0);
    let (mut fw, mut p) = (Firmware::default(), Mock::default());
    fw.start_t3(&job, &mut p).unwrap();
    assert!(fw.start_t3(&job, &mut p).is_err(), "busy");
    let (engine, d) = p.dmas[0].clone();
    let r = fw.handle(
        Event::DmaDone {
            engine,
            id: d.id,
            status: Err(nmcp_firmware::platform::DmaError::OutOfRange),
        },
        &mut p,
    );
    assert!(r.is_err());
    assert_eq!(fw.t3().dma_errors(), 1);
    assert!(matches!(fw.t3().state(), T3State::Failed(_)));
    // Events after a fault are ignored; a new job may start.
    fw.handle(Event::TrackerFired { entry: 0 }, &mut p).unwrap();
    fw.start_t3(&job, &mut Mock::default()).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn start_never_panics(
        gpus: u8, rank: u8, m in 0u32..5000, n in 0u32..5000, tm: u16, tn: u16, wfs: u8,
        split: u8, base: u64, block: u8, dt in 0u8..3, coll in 0u8..4,
    ) {
        let collective = [
            Collective::RingReduceScatter,
            Collective::DirectReduceScatter,
            Collective::AllGather,
            Collective::AllToAll,
        ][usize::from(coll)];
        let job = T3Job {
            collective, gpus, rank, m, n, tile_m: tm, tile_n: tn, wfs_per_wg: wfs,
            dtype: GemmDataType::from_u8(dt).unwrap(), split_k: split, out_base: base,
            wf_tiles_per_dma_block: block,
        };
        let (mut fw, mut p) = (Firmware::default(), Mock::default());
        let _ = fw.start_t3(&job, &mut p);
    }

    #[test]
    fn small_jobs_complete(
        gpus in 2u8..6, rank in 0u8..6, m in 1u32..300, n in 1u32..300, tm in 1u16..64,
        tn in 1u16..64, wfs in 1u8..=8, split in 1u8..3, f32: bool, coll in 0u8..4,
        block_pow in 0u32..4,
    ) {
        let collective = [
            Collective::RingReduceScatter,
            Collective::DirectReduceScatter,
            Collective::AllGather,
            Collective::AllToAll,
        ][usize::from(coll)];
        let block = 1u8 << block_pow;
        let job = T3Job {
            collective, gpus, rank: rank % gpus, m, n, tile_m: tm, tile_n: tn,
            wfs_per_wg: wfs,
            dtype: if f32 { GemmDataType::F32 } else { GemmDataType::F16 },
            split_k: if matches!(collective, Collective::AllGather | Collective::AllToAll) {
                1
            } else {
                split
            },
            out_base: 0x4000,
            wf_tiles_per_dma_block: if wfs % block == 0 { block } else { 1 },
        };
        if T3Geometry::new(&job).is_err() {
            return Ok(());
        }
        let (mut fw, mut p) = (Firmware::default(), Mock::default());
        fw.start_t3(&job, &mut p).unwrap();
        run(&mut fw, &mut p);
        prop_assert!(fw.t3().is_done());
        check_complete(&job, &p);
    }
}
