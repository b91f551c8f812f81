//! Where things are in the producer's output (docs/decisions/t3.md): tiles, wavefront
//! row bands, N rectangular chunks, chunk-major workgroup ids, element addresses —
//! the firmware's geometry, seen from the emulator.

pub use nmcp_firmware::t3::Rect;
use nmcp_firmware::t3::{Collective, T3Geometry, T3Job};
use nmcp_isa::gemm_ext::GemmDataType;

/// Elements of a rectangle.
pub fn elements(r: &Rect) -> u64 {
    u64::from(r.rows) * u64::from(r.cols)
}

/// The output's layout for one GEMM and one GPU count: the firmware's
/// [`T3Geometry`] (one definition of chunks and workgroup ids for the firmware that
/// programs the tracker and the emulator that produces the stores), plus the figures the
/// emulator uses on every request.
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
    geo: T3Geometry,
}

impl OutputLayout {
    /// The layout, or why there is none (the firmware's refusal, e.g. too few tiles to
    /// give every GPU a chunk).
    pub fn new(
        m: u32,
        n: u32,
        tile: (u32, u32),
        wfs: u32,
        gpus: u32,
        dtype: GemmDataType,
    ) -> Result<Self, String> {
        let small = |v: u32, what: &str, max: u32| {
            if v > max {
                Err(format!("{what} {v} exceeds {max}"))
            } else {
                Ok(v)
            }
        };
        let mut job = T3Job::new(
            Collective::RingReduceScatter,
            small(gpus, "GPUs", 64)? as u8,
            0,
            m,
            n,
        );
        job.tile_m = small(tile.0, "tile rows", 4096)? as u16;
        job.tile_n = small(tile.1, "tile columns", 4096)? as u16;
        job.wfs_per_wg = small(wfs, "wavefronts per workgroup", 8)? as u8;
        job.dtype = dtype;
        let geo = T3Geometry::new(&job).map_err(|e| {
            format!(
                "{m} x {n} in {}x{} tiles over {gpus} GPUs: {e}",
                tile.0, tile.1
            )
        })?;
        Ok(Self {
            m,
            n,
            tile,
            wfs,
            gpus,
            elem: dtype.bytes(),
            geo,
        })
    }

    /// The firmware's geometry.
    pub fn geometry(&self) -> &T3Geometry {
        &self.geo
    }

    /// Tiles in the output.
    pub fn tiles(&self) -> u32 {
        self.geo.wg_count()
    }

    /// Whether every chunk has the same number of tiles (the symmetric shortcut needs it).
    pub fn even(&self) -> bool {
        let first = self.chunk_wgs(0).1;
        (1..self.gpus).all(|c| self.chunk_wgs(c).1 == first)
    }

    /// The first workgroup id of chunk `c` and its workgroup count.
    pub fn chunk_wgs(&self, c: u32) -> (u32, u32) {
        self.geo.chunk_wgs(c as u8).unwrap_or((0, 0))
    }

    /// The chunk workgroup `wg` belongs to.
    pub fn chunk_of_wg(&self, wg: u32) -> u32 {
        self.geo.chunk_of_wg(wg).map_or(0, u32::from)
    }

    /// Chunk `c`'s rectangle.
    pub fn chunk_rect(&self, c: u32) -> Rect {
        self.geo.chunk_rect(c as u8).unwrap_or_default()
    }

    /// Workgroup `wg`'s tile.
    pub fn wg_rect(&self, wg: u32) -> Rect {
        self.geo.wg_rect(wg).unwrap_or_default()
    }

    /// Wavefront `wf`'s row band of workgroup `wg`'s tile (rows 0 when the band falls
    /// past the array's last row).
    pub fn wf_rect(&self, wg: u32, wf: u32) -> Rect {
        self.geo.wf_rect(wg, wf as u8).unwrap_or_default()
    }

    /// Byte offset of element (row, col) from the array's base.
    pub fn offset(&self, row: u32, col: u32) -> u64 {
        (u64::from(row) * u64::from(self.n) + u64::from(col)) * u64::from(self.elem)
    }

    /// Bytes of the whole array.
    pub fn bytes(&self) -> u64 {
        u64::from(self.m) * u64::from(self.n) * u64::from(self.elem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmcp_isa::gemm_ext::GemmDataType;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn chunks_and_wavefront_bands_cover_the_output_exactly_once(
            m in 1u32..700, n in 1u32..700, t0 in 1u32..200, t1 in 1u32..200,
            wfs in 1u32..9, gpus in 2u32..9,
        ) {
            let Ok(l) = OutputLayout::new(m, n, (t0, t1), wfs, gpus, GemmDataType::F16) else { return Ok(()); };
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
        for (m, n, g) in [
            (3072, 16384, 8),
            (3072, 16384, 16),
            (4256, 8192, 8),
            (4256, 8192, 16),
        ] {
            let l = OutputLayout::new(m, n, (128, 128), 4, g, GemmDataType::F16).unwrap();
            assert!(l.even(), "{m} x {n} over {g}");
        }
    }
}
