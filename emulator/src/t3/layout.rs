//! Where things are in the producer's output (docs/decisions/t3.md): tiles, wavefront
//! row bands, N rectangular chunks, chunk-major workgroup ids, element addresses.

/// A rectangle of the output, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rect {
    /// First row.
    pub row0: u32,
    /// First column.
    pub col0: u32,
    /// Rows (0 = empty).
    pub rows: u32,
    /// Columns.
    pub cols: u32,
}

impl Rect {
    /// Elements.
    pub fn elements(&self) -> u64 {
        u64::from(self.rows) * u64::from(self.cols)
    }
}

/// The output's layout for one GEMM and one GPU count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLayout {
    /// Rows.
    pub m: u32,
    /// Columns.
    pub n: u32,
    /// Tile rows, columns.
    pub tile: (u32, u32),
    /// Wavefronts per workgroup.
    pub wfs: u32,
    /// GPUs (chunks).
    pub gpus: u32,
    /// Element bytes.
    pub elem: u32,
    tiles_m: u32,
    tiles_n: u32,
    /// Whether chunks split the tile rows (else the tile columns).
    split_rows: bool,
}

impl OutputLayout {
    /// The layout, or why there is none (a dimension too small to give every GPU a
    /// chunk).
    pub fn new(
        m: u32,
        n: u32,
        tile: (u32, u32),
        wfs: u32,
        gpus: u32,
        elem: u32,
    ) -> Result<Self, String> {
        if m == 0 || n == 0 || tile.0 == 0 || tile.1 == 0 || wfs == 0 || gpus < 2 {
            return Err(format!(
                "need m, n, tiles and wavefronts > 0 and at least 2 GPUs (m {m}, n {n}, tile {}x{}, wfs {wfs}, gpus {gpus})",
                tile.0, tile.1
            ));
        }
        let tiles_m = m.div_ceil(tile.0);
        let tiles_n = n.div_ceil(tile.1);
        let split_rows = if tiles_m % gpus == 0 {
            true
        } else if tiles_n % gpus == 0 {
            false
        } else {
            tiles_m >= tiles_n
        };
        let along = if split_rows { tiles_m } else { tiles_n };
        if along < gpus {
            return Err(format!(
                "{m} x {n} has {tiles_m} x {tiles_n} tiles of {}x{}: too few to give {gpus} GPUs a chunk each",
                tile.0, tile.1
            ));
        }
        Ok(Self {
            m,
            n,
            tile,
            wfs,
            gpus,
            elem,
            tiles_m,
            tiles_n,
            split_rows,
        })
    }

    /// Tiles in the output.
    pub fn tiles(&self) -> u32 {
        self.tiles_m * self.tiles_n
    }

    /// Whether every chunk has the same number of tiles (the symmetric shortcut needs it).
    pub fn even(&self) -> bool {
        let along = if self.split_rows {
            self.tiles_m
        } else {
            self.tiles_n
        };
        along % self.gpus == 0
    }

    /// Tile range `[first, end)` along the split dimension of chunk `c`.
    fn chunk_span(&self, c: u32) -> (u32, u32) {
        let along = if self.split_rows {
            self.tiles_m
        } else {
            self.tiles_n
        };
        let g = self.gpus;
        (
            (u64::from(c) * u64::from(along) / u64::from(g)) as u32,
            (u64::from(c + 1) * u64::from(along) / u64::from(g)) as u32,
        )
    }

    /// Tiles of chunk `c` as (tile rows, tile columns) ranges.
    fn chunk_tiles(&self, c: u32) -> ((u32, u32), (u32, u32)) {
        let s = self.chunk_span(c);
        if self.split_rows {
            (s, (0, self.tiles_n))
        } else {
            ((0, self.tiles_m), s)
        }
    }

    /// The first workgroup id of chunk `c` and its workgroup count.
    pub fn chunk_wgs(&self, c: u32) -> (u32, u32) {
        let per = |c: u32| {
            let ((r0, r1), (c0, c1)) = self.chunk_tiles(c);
            (r1 - r0) * (c1 - c0)
        };
        let first = (0..c).map(per).sum();
        (first, per(c))
    }

    /// The chunk workgroup `wg` belongs to.
    pub fn chunk_of_wg(&self, wg: u32) -> u32 {
        (0..self.gpus)
            .find(|&c| {
                let (f, n) = self.chunk_wgs(c);
                wg >= f && wg < f + n
            })
            .unwrap_or(self.gpus - 1)
    }

    /// Chunk `c`'s rectangle.
    pub fn chunk_rect(&self, c: u32) -> Rect {
        let ((r0, r1), (c0, c1)) = self.chunk_tiles(c);
        self.clip(r0 * self.tile.0, c0 * self.tile.1, (r1 - r0) * self.tile.0, (c1 - c0) * self.tile.1)
    }

    fn clip(&self, row0: u32, col0: u32, rows: u32, cols: u32) -> Rect {
        let rows = rows.min(self.m.saturating_sub(row0));
        let cols = cols.min(self.n.saturating_sub(col0));
        Rect {
            row0,
            col0,
            rows,
            cols,
        }
    }

    /// Workgroup `wg`'s tile.
    pub fn wg_rect(&self, wg: u32) -> Rect {
        let c = self.chunk_of_wg(wg);
        let (first, _) = self.chunk_wgs(c);
        let ((r0, _), (c0, c1)) = self.chunk_tiles(c);
        let i = wg - first;
        let w = c1 - c0;
        let (tr, tc) = (r0 + i / w, c0 + i % w);
        self.clip(tr * self.tile.0, tc * self.tile.1, self.tile.0, self.tile.1)
    }

    /// Wavefront `wf`'s row band of workgroup `wg`'s tile (rows 0 when the band falls
    /// past the array's last row).
    pub fn wf_rect(&self, wg: u32, wf: u32) -> Rect {
        let t = self.wg_rect(wg);
        let band = self.tile.0.div_ceil(self.wfs);
        let r0 = (wf * band).min(t.rows);
        let r1 = ((wf + 1) * band).min(t.rows);
        Rect {
            row0: t.row0 + r0,
            col0: t.col0,
            rows: r1 - r0,
            cols: t.cols,
        }
    }

    /// Byte offset of element (row, col) from the array's base.
    pub fn offset(&self, row: u32, col: u32) -> u64 {
        (u64::from(row) * u64::from(self.n) + u64::from(col)) * u64::from(self.elem)
    }

    /// Bytes of the whole array.
    pub fn bytes(&self) -> u64 {
        u64::from(self.m) * u64::from(self.n) * u64::from(self.elem)
    }

    /// The chunk stage `k` (1..=N) of GPU `rank` computes.
    pub fn stage_chunk(&self, rank: u32, k: u32) -> u32 {
        (rank + k) % self.gpus
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn chunks_and_wavefront_bands_cover_the_output_exactly_once(
            m in 1u32..700, n in 1u32..700, t0 in 1u32..200, t1 in 1u32..200,
            wfs in 1u32..9, gpus in 2u32..9,
        ) {
            let Ok(l) = OutputLayout::new(m, n, (t0, t1), wfs, gpus, 2) else { return Ok(()); };
            let mut hits = vec![0u8; (m * n) as usize];
            let mut next = 0;
            for c in 0..gpus {
                let (first, count) = l.chunk_wgs(c);
                prop_assert_eq!(first, next, "chunk-major ids are contiguous");
                next += count;
                let cr = l.chunk_rect(c);
                for wg in first..first + count {
                    prop_assert_eq!(l.chunk_of_wg(wg), c);
                    for wf in 0..wfs {
                        let r = l.wf_rect(wg, wf);
                        for row in r.row0..r.row0 + r.rows {
                            for col in r.col0..r.col0 + r.cols {
                                prop_assert!(row >= cr.row0 && row < cr.row0 + cr.rows);
                                prop_assert!(col >= cr.col0 && col < cr.col0 + cr.cols);
                                hits[(row * n + col) as usize] += 1;
                            }
                        }
                    }
                }
            }
            prop_assert_eq!(next, l.tiles());
            prop_assert!(hits.iter().all(|&h| h == 1));
        }
    }

    #[test]
    fn table_8_2_outputs_split_evenly() {
        for (m, n, g) in [(3072, 16384, 8), (3072, 16384, 16), (4256, 8192, 8), (4256, 8192, 16)] {
            let l = OutputLayout::new(m, n, (128, 128), 4, g, 2).unwrap();
            assert!(l.even(), "{m} x {n} over {g}");
        }
    }
}
