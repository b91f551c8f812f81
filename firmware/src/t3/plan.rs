//! What each stage of a collective does on one GPU (docs/decisions/t3.md): which chunk
//! the producer computes, where its stores go, and how the receiving side tracks it.
//!
//! A plan has `N` steps, `k = 1..=N`. For the reduce-scatters and all-to-all step `k` is
//! the producer's stage `k`. All-gather computes one chunk (step 1); its steps `2..=N`
//! have no output map: they track the chunks that arrive from the ring, in arrival order.
//!
//! | collective | step k | chunk | map | track |
//! |---|---|---|---|---|
//! | ring RS | 1 | g+1 | remote update to g-1 | — |
//! | ring RS | 2..N-1 | g+k | local update | 2s (k = 2) or s+1 updates/element, DMA update to g-1 |
//! | ring RS | N | g | local update | 2s (N = 2) or s+1, notify only |
//! | direct RS | 1..N-1 | g+k | remote update to g+k | — |
//! | direct RS | N | g | local update | N*s, notify only |
//! | all-gather | 1 | g | local store + remote store to g-1 | — |
//! | all-gather | 2..N | g+k-1 | — | 1 store/element; DMA store to g-1 unless it is the chunk's (N-1)-th hop, then notify only |
//! | all-to-all | 1..N-1 | g+k | remote store to g+k | — |
//! | all-to-all | N | g | local store | N stores/element, notify only |
//!
//! All-to-all (simplification, as the brief allows): a real all-to-all lands each peer's
//! piece in its own buffer; here all `N` GPUs store chunk `g` into the same region of GPU
//! `g`, and the owner counts every store (`N` per element), so its entry fires after the
//! last one arrives and no miss-allocated count is left behind in the tracker.

use nmcp_isa::t3::{DmaOp, OutputMap, RegionAction, TrackRegion};

use super::geometry::{Collective, T3Geometry};

/// Where a tracked WF tile's DMA goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DmaTarget {
    /// Peer GPU.
    pub peer: u8,
    /// Store or update.
    pub op: DmaOp,
}

/// How this GPU tracks a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Track {
    /// Stores/updates each element receives before it is complete (the entry's threshold
    /// is this times the WF tile's elements).
    pub updates_per_element: u32,
    /// The DMA the entry triggers; `None` = notify only.
    pub dma: Option<DmaTarget>,
}

/// One step of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StagePlan {
    /// Step number, `1..=N`.
    pub stage: u8,
    /// The chunk.
    pub chunk: u8,
    /// Where the producer's stores of the chunk go (`None`: the producer does not compute
    /// it on this GPU — all-gather's arriving chunks).
    pub map: Option<OutputMap>,
    /// How the chunk is tracked here (`None`: not tracked).
    pub track: Option<Track>,
}

/// The first tracked step: 2 for the ring collectives, `N` for the direct ones.
pub const fn first_tracked_stage(collective: Collective, gpus: u8) -> u8 {
    match collective {
        Collective::RingReduceScatter => 2,
        Collective::AllGather => 1,
        Collective::DirectReduceScatter | Collective::AllToAll => gpus,
    }
}

/// Step `k` (`1..=N`) of `g`'s job; `None` outside that range.
pub fn stage_plan(g: &T3Geometry, k: u8) -> Option<StagePlan> {
    let j = g.job();
    let n = j.gpus;
    if k == 0 || k > n {
        return None;
    }
    let rank = j.rank;
    let prev = g.stage_chunk(rank, n - 1);
    let update = DmaOp::Update(j.dtype);
    let s = u32::from(j.split_k);
    let map = |chunk: u8, local: Option<DmaOp>, remote: Option<(u8, DmaOp)>| {
        g.chunk_wgs(chunk).map(|(wg_first, wg_count)| OutputMap {
            wg_first,
            wg_count,
            local,
            remote,
        })
    };
    let (chunk, map, track) = match j.collective {
        Collective::RingReduceScatter => {
            let chunk = g.stage_chunk(rank, k);
            if k == 1 {
                (chunk, map(chunk, None, Some((prev, update))), None)
            } else {
                let upe = if k == 2 { 2 * s } else { s + 1 };
                let dma = (k < n).then_some(DmaTarget {
                    peer: prev,
                    op: update,
                });
                let track = Track {
                    updates_per_element: upe,
                    dma,
                };
                (chunk, map(chunk, Some(update), None), Some(track))
            }
        }
        Collective::DirectReduceScatter | Collective::AllToAll => {
            let op = if j.collective == Collective::AllToAll {
                DmaOp::Store
            } else {
                update
            };
            let chunk = g.stage_chunk(rank, k);
            if k < n {
                (chunk, map(chunk, None, Some((chunk, op))), None)
            } else {
                let per_gpu = if op == DmaOp::Store { 1 } else { s };
                let track = Track {
                    updates_per_element: u32::from(n) * per_gpu,
                    dma: None,
                };
                (chunk, map(chunk, Some(op), None), Some(track))
            }
        }
        Collective::AllGather => {
            if k == 1 {
                let chunk = rank;
                let m = map(chunk, Some(DmaOp::Store), Some((prev, DmaOp::Store)));
                // The own chunk's local copy is tracked too (notify only): the tracker
                // counts every tagged store at the controller, so an untracked region
                // would leave entries nobody programmed.
                let track = Track {
                    updates_per_element: 1,
                    dma: None,
                };
                (chunk, m, Some(track))
            } else {
                // Chunk c started at GPU c; here it has made (c - rank) mod N = k - 1 hops.
                let chunk = g.stage_chunk(rank, k - 1);
                let hops = k - 1;
                let dma = (hops < n - 1).then_some(DmaTarget {
                    peer: prev,
                    op: DmaOp::Store,
                });
                let track = Track {
                    updates_per_element: 1,
                    dma,
                };
                (chunk, None, Some(track))
            }
        }
    };
    Some(StagePlan {
        stage: k,
        chunk,
        map,
        track,
    })
}

/// The tracked region of step `k` in `slot` (docs/decisions/t3-firmware.md, "Regions"):
/// the chunk's WG range and tile box, the array's geometry, the step's updates per
/// element and DMA; `None` for an untracked step or outside `1..=N`.
pub fn stage_region(g: &T3Geometry, k: u8, slot: u8) -> Option<TrackRegion> {
    let plan = stage_plan(g, k)?;
    let track = plan.track?;
    let j = g.job();
    let (wg_first, wg_count) = g.chunk_wgs(plan.chunk)?;
    let (tile_row0, tile_col0, box_cols) = g.chunk_tile_box(plan.chunk)?;
    let action = match track.dma {
        None => RegionAction::Notify,
        Some(t) => RegionAction::Dma {
            op: t.op,
            peer: t.peer,
            wf_tiles_per_block: j.wf_tiles_per_dma_block,
        },
    };
    Some(TrackRegion {
        slot,
        wg_first,
        wg_count,
        tile_row0,
        tile_col0,
        box_cols,
        m: j.m,
        n: j.n,
        tile_m: j.tile_m,
        tile_n: j.tile_n,
        wfs_per_wg: j.wfs_per_wg,
        elem_bytes: u8::try_from(g.elem_bytes()).ok()?,
        base: j.out_base,
        updates_per_element: track.updates_per_element,
        wf_tiles: g.chunk_wf_tiles(plan.chunk)?,
        action,
    })
}
