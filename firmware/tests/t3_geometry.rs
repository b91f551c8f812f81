//! T3 geometry: chunks tile the array exactly once, WF tiles partition WG tiles,
//! chunk-major WG ids are contiguous.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use nmcp_firmware::t3::{Collective, Rect, SplitDim, T3Geometry, T3Job, T3JobError};
use nmcp_isa::gemm_ext::GemmDataType;
use proptest::prelude::*;

fn job(gpus: u8, m: u32, n: u32, tm: u16, tn: u16, wfs: u8) -> T3Job {
    T3Job {
        tile_m: tm,
        tile_n: tn,
        wfs_per_wg: wfs,
        out_base: 0x10_0000,
        ..T3Job::new(Collective::RingReduceScatter, gpus, 0, m, n)
    }
}

fn covers(r: &Rect, row: u32, col: u32) -> bool {
    row >= r.row0 && row < r.row0 + r.rows && col >= r.col0 && col < r.col0 + r.cols
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn chunks_wgs_and_wfs_tile_the_array(
        gpus in 2u8..=16, m in 1u32..700, n in 1u32..700,
        tm in 1u16..100, tn in 1u16..100, wfs in 1u8..=8,
    ) {
        let Ok(g) = T3Geometry::new(&job(gpus, m, n, tm, tn, wfs)) else {
            return Ok(());
        };
        // Chunk-major ids: chunk c's range starts where c-1's ends.
        let mut next = 0;
        let mut cells = 0u64;
        for c in 0..gpus {
            let (first, count) = g.chunk_wgs(c).unwrap();
            prop_assert_eq!(first, next);
            prop_assert!(count > 0);
            next = first + count;
            let rect = g.chunk_rect(c).unwrap();
            cells += T3Geometry::elements(&rect);
            let mut wg_cells = 0;
            let mut tiles = 0;
            for wg in first..first + count {
                prop_assert_eq!(g.chunk_of_wg(wg), Some(c));
                let w = g.wg_rect(wg).unwrap();
                prop_assert!(!w.is_empty());
                prop_assert!(covers(&rect, w.row0, w.col0));
                prop_assert!(covers(&rect, w.row0 + w.rows - 1, w.col0 + w.cols - 1));
                let (tr, tc) = g.wg_tile(wg).unwrap();
                prop_assert_eq!(g.wg_of_tile(tr, tc), Some(wg));
                wg_cells += T3Geometry::elements(&w);
                // WF bands partition the WG tile, top to bottom.
                let mut row = w.row0;
                for f in 0..wfs {
                    let r = g.wf_rect(wg, f).unwrap();
                    prop_assert_eq!((r.col0, r.cols), (w.col0, w.cols));
                    if r.rows > 0 {
                        prop_assert_eq!(r.row0, row);
                        row += r.rows;
                        tiles += 1;
                    }
                }
                prop_assert_eq!(row, w.row0 + w.rows);
            }
            prop_assert_eq!(wg_cells, T3Geometry::elements(&rect));
            prop_assert_eq!(g.chunk_wf_tiles(c), Some(tiles));
        }
        prop_assert_eq!(next, g.wg_count());
        prop_assert_eq!(cells, u64::from(m) * u64::from(n));
        prop_assert_eq!(g.chunk_of_wg(next), None);
        prop_assert_eq!(g.chunk_wgs(gpus), None);
        // Every element lies in exactly one chunk (sampled).
        for (row, col) in [(0, 0), (m - 1, n - 1), (m / 2, n / 3), (m - 1, 0)] {
            let hits = (0..gpus).filter(|&c| covers(&g.chunk_rect(c).unwrap(), row, col)).count();
            prop_assert_eq!(hits, 1);
        }
    }

    #[test]
    fn any_job_validates_or_errors(
        gpus: u8, rank: u8, m: u32, n: u32, tm: u16, tn: u16, wfs: u8,
        split: u8, base: u64, block: u8, dt in 0u8..3, coll in 0u8..4,
    ) {
        let collective = [
            Collective::RingReduceScatter,
            Collective::DirectReduceScatter,
            Collective::AllGather,
            Collective::AllToAll,
        ][usize::from(coll)];
        let j = T3Job {
            collective, gpus, rank, m, n, tile_m: tm, tile_n: tn, wfs_per_wg: wfs,
            dtype: GemmDataType::from_u8(dt).unwrap(), split_k: split, out_base: base,
            wf_tiles_per_dma_block: block,
        };
        if let Ok(g) = T3Geometry::new(&j) {
            let last = g.wg_count() - 1;
            prop_assert!(g.wg_rect(last).is_some());
            prop_assert!(g.chunk_of_wg(last).is_some());
            prop_assert!(g.wf_rect(last, wfs - 1).is_some());
        }
    }
}

#[test]
fn stage_chunks_and_addresses() {
    let g = T3Geometry::new(&job(4, 512, 256, 128, 128, 4)).unwrap();
    assert_eq!((g.tiles_m(), g.tiles_n()), (4, 2));
    assert_eq!(g.split(), SplitDim::Rows);
    assert_eq!(
        (1..=4).map(|k| g.stage_chunk(1, k)).collect::<Vec<_>>(),
        [2, 3, 0, 1]
    );
    assert_eq!(g.address(1, 2), 0x10_0000 + (256 + 2) * 2);
    assert_eq!(
        g.wf_rect(3, 1),
        Some(Rect {
            row0: 128 + 32,
            col0: 128,
            rows: 32,
            cols: 128
        })
    );
    // 2 tile rows, 8 tile columns for 4 GPUs: columns divide evenly.
    let g = T3Geometry::new(&job(4, 256, 1024, 128, 128, 4)).unwrap();
    assert_eq!(g.split(), SplitDim::Cols);
    assert_eq!(g.chunk_wgs(1), Some((4, 4)));
    assert_eq!(g.wg_tile(5), Some((0, 3)));
    assert_eq!(g.wg_tile(6), Some((1, 2)));
    // Too few tiles for the GPUs.
    assert_eq!(
        T3Geometry::new(&job(8, 256, 256, 128, 128, 4)),
        Err(T3JobError::TooFewTiles { tiles: 2 })
    );
}
