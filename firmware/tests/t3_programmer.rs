//! The T3 plan (ring RS, N = 4, every rank, against a hand-written table) and the region
//! programmer (what `start` programs, completion on `RegionDone`, live slots retried,
//! faults), through `Firmware::handle` and a recording platform; every region expanded
//! per WF tile as the hardware does matches the geometry's own WF tiles.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod common;

use common::Mock;
use nmcp_firmware::t3::{
    first_tracked_stage, stage_plan, Collective, DmaTarget, T3Geometry, T3Job, T3State, Track,
};
use nmcp_firmware::{Event, Firmware};
use nmcp_isa::gemm_ext::GemmDataType;
use nmcp_isa::t3::{split_peer, DmaOp, RegionAction, TrackRegion, REGION_SLOTS};
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

/// Reports the oldest live region done until the job is done (a `Deferred` when the
/// firmware asks); returns when nothing is left.
fn run(fw: &mut Firmware, p: &mut Mock) {
    let mut done = 0;
    for _ in 0..10_000 {
        let event = if fw.has_pending_work() || fw.t3().is_blocked() && p.set_full > 0 {
            Event::Deferred
        } else if done < p.regions.len() {
            let slot = p.regions[done].slot;
            done += 1;
            p.live &= !(1 << slot);
            Event::RegionDone { slot }
        } else {
            return;
        };
        fw.handle(event, p).unwrap();
    }
    panic!("no progress");
}

/// Checks a finished job: one region per tracked stage, in stage order, each with the
/// stage's tracking; expanded per WF tile as the hardware does (the region's box walk),
/// its entries are exactly the geometry's non-empty WF tiles of the chunk (found through
/// `wg_tile`, a different map), each DMA block fired by its non-empty tiles and sent to
/// the previous GPU.
fn check_complete(job: &T3Job, p: &Mock) {
    let g = T3Geometry::new(job).unwrap();
    let first = first_tracked_stage(job.collective, job.gpus);
    assert_eq!(p.regions.len(), usize::from(job.gpus - first + 1));
    for (r, k) in p.regions.iter().zip(first..=job.gpus) {
        let plan = stage_plan(&g, k).unwrap();
        let track = plan.track.unwrap();
        assert_eq!(r.updates_per_element, track.updates_per_element);
        assert_eq!((r.wg_first, r.wg_count), g.chunk_wgs(plan.chunk).unwrap());
        check_expansion(&g, r);
        match (r.action, track.dma) {
            (RegionAction::Notify, None) => {}
            (RegionAction::Dma { op, peer, .. }, Some(t)) => {
                assert_eq!((op, peer), (t.op, t.peer));
                let prev = (job.rank + job.gpus - 1) % job.gpus;
                assert_eq!(peer, prev);
            }
            other => panic!("stage {k}: {other:?}"),
        }
    }
}

fn check_expansion(g: &T3Geometry, r: &TrackRegion) {
    let j = g.job();
    let mut entries = 0u32;
    for wg in r.wg_first..r.wg_first + r.wg_count {
        for wf in 0..j.wfs_per_wg {
            let rect = r.wf_rect(wg, wf).unwrap();
            assert_eq!(Some(rect), g.wf_rect(wg, wf), "WG {wg} WF {wf}");
            let Some(threshold) = r.threshold(wg, wf) else {
                assert!(rect.is_empty());
                continue;
            };
            entries += 1;
            let elements = T3Geometry::elements(&rect) as u32;
            assert_eq!(threshold, elements * r.updates_per_element);
            if let Some(b) = r.dma_block(wg, wf) {
                assert_eq!(b.desc.validate(), Ok(()));
                let block = j.wf_tiles_per_dma_block;
                assert_eq!(b.first_wf % block, 0);
                assert_eq!(b.fires, g.nonempty_wfs(wg, b.first_wf, block));
                let whole = g.wf_block_rect(wg, b.first_wf, block).unwrap();
                assert_eq!(b.desc.src, g.address(whole.row0, whole.col0));
                assert_eq!(u32::from(b.desc.rows), whole.rows);
                assert_eq!(split_peer(b.desc.dst).1, b.desc.src);
                assert_eq!((b.desc.dst_wg_id, b.desc.dst_wf_id), (wg, b.first_wf));
            }
        }
    }
    assert_eq!(entries, r.wf_tiles);
    assert_eq!(
        Some(entries),
        g.chunk_wf_tiles(g.chunk_of_wg(r.wg_first).unwrap())
    );
}

#[test]
fn start_programs_maps_and_every_tracked_stage_region() {
    let job = small(Collective::RingReduceScatter, 4, 1);
    let g = T3Geometry::new(&job).unwrap();
    let (mut fw, mut p) = (Firmware::default(), Mock::default());
    fw.start_t3(&job, &mut p).unwrap();
    assert_eq!(p.maps.len(), 4);
    assert_eq!(p.dispatch_start, Some(g.chunk_wgs(2).unwrap().0));
    // Stages 2..=4: two DMA regions, then the own chunk's notify-only one.
    assert_eq!(p.regions.len(), 3);
    assert!(p.entries.is_empty() && p.dmas.is_empty());
    let r = p.regions[0];
    assert_eq!((r.wg_first, r.wg_count), g.chunk_wgs(3).unwrap());
    assert_eq!(r.wf_tiles, 16);
    assert_eq!(r.threshold(r.wg_first, 0), Some(8 * 32 * 2));
    assert_eq!(p.regions[2].action, RegionAction::Notify);
    assert_eq!(fw.t3().live_slots(), 0b111);
    assert!(!fw.has_pending_work());
    let records = fw.t3().work().records;
    assert_eq!(records, 4 + 1 + 3, "maps, dispatch start, regions");
    // A region done frees its slot; an unknown slot or a per-tile event is a fault.
    fw.handle(Event::RegionDone { slot: 1 }, &mut p).unwrap();
    assert_eq!(fw.t3().live_slots(), 0b101);
    assert!(!fw.t3().is_done());
    let err = fw.handle(Event::RegionDone { slot: 1 }, &mut p);
    assert!(err.is_err());
    assert!(fw.t3().fault().is_some());
    let (mut fw, mut p) = (Firmware::default(), Mock::default());
    fw.start_t3(&job, &mut p).unwrap();
    assert!(fw.handle(Event::TrackerFired { entry: 0 }, &mut p).is_err());
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
            }
        }
    }
}

#[test]
fn more_stages_than_slots_are_programmed_as_slots_free() {
    // 24 GPUs, ring RS: 23 tracked stages over 16 slots.
    let job = T3Job {
        m: 24 * 32,
        ..small(Collective::RingReduceScatter, 24, 5)
    };
    let (mut fw, mut p) = (Firmware::default(), Mock::default());
    fw.start_t3(&job, &mut p).unwrap();
    assert_eq!(p.regions.len(), usize::from(REGION_SLOTS));
    assert_eq!(fw.t3().live_slots(), u16::MAX);
    p.live &= !(1 << 3);
    fw.handle(Event::RegionDone { slot: 3 }, &mut p).unwrap();
    assert_eq!(p.regions.len(), usize::from(REGION_SLOTS) + 1);
    assert_eq!(
        p.regions.last().unwrap().slot,
        3,
        "the freed slot is reused"
    );
    while fw.t3().live_slots() != 0 {
        let slot = fw.t3().live_slots().trailing_zeros() as u8;
        p.live &= !(1 << slot);
        fw.handle(Event::RegionDone { slot }, &mut p).unwrap();
    }
    assert_eq!(p.regions.len(), 23);
    assert!(fw.t3().is_done());
    check_complete(&job, &p);
}

#[test]
fn a_live_slot_is_retried_never_lost() {
    let job = T3Job {
        wf_tiles_per_dma_block: 2,
        ..small(Collective::RingReduceScatter, 4, 2)
    };
    let (mut fw, mut p) = (Firmware::default(), Mock::default());
    p.set_full = 3;
    fw.start_t3(&job, &mut p).unwrap();
    assert!(fw.t3().is_blocked());
    assert!(!fw.has_pending_work());
    assert_eq!((p.regions.len(), p.refused), (0, 1));
    // Retried on the next event, the same region.
    fw.handle(Event::Deferred, &mut p).unwrap();
    fw.handle(Event::Deferred, &mut p).unwrap();
    assert_eq!((p.regions.len(), p.refused), (0, 3));
    fw.handle(Event::Deferred, &mut p).unwrap();
    assert_eq!(p.regions.len(), 3);
    run(&mut fw, &mut p);
    assert!(fw.t3().is_done());
    check_complete(&job, &p);
}

#[test]
fn dma_error_is_a_fault() {
    let job = small(Collective::RingReduceScatter, 4, 0);
    let (mut fw, mut p) = (Firmware::default(), Mock::default());
    fw.start_t3(&job, &mut p).unwrap();
    assert!(fw.start_t3(&job, &mut p).is_err(), "busy");
    let r = fw.handle(
        Event::DmaDone {
            engine: 0,
            id: 0,
            status: Err(nmcp_firmware::platform::DmaError::OutOfRange),
        },
        &mut p,
    );
    assert!(r.is_err());
    assert_eq!(fw.t3().dma_errors(), 1);
    assert!(matches!(fw.t3().state(), T3State::Failed(_)));
    // Events after a fault are ignored; a new job may start.
    fw.handle(Event::RegionDone { slot: 0 }, &mut p).unwrap();
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
