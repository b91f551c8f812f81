//! The producer's output array cut into tiles, chunks and workgroup ids
//! (docs/decisions/t3.md, "Output array, tiles, chunks, workgroup ids").
//!
//! Every function here is pure and O(1) (at most a loop over the ≤ 8 wavefronts of a
//! workgroup): the programmer calls them per record, so nothing is stored per tile.
//!
//! - The output is an `m x n` row-major array of `dtype` at `out_base`.
//! - A workgroup tile is `tile_m x tile_n`; WF `f` of `wfs` covers rows
//!   `[f * tile_m / wfs, (f + 1) * tile_m / wfs)` of the (unclipped) tile, clipped to the
//!   array (an empty band has `rows == 0` and is never tracked).
//! - The `N` chunks split one tile dimension (see [`SplitDim`]) with a floor split:
//!   chunk `c` holds tiles `[c * t / N, (c + 1) * t / N)` of it and all tiles of the other.
//! - Workgroup ids are chunk-major, row-major inside a chunk.

use core::fmt;

use nmcp_isa::gemm_ext::GemmDataType;
use nmcp_isa::t3::region::{bands_of, clip_span, tile_rect, wf_band};
use nmcp_isa::t3::{MAX_WFS_PER_WG, PEER_SHIFT};

/// Most GPUs a T3 job may span.
pub const MAX_GPUS: u8 = 64;
/// Most WF tiles one chunk may hold: entry ids are `parity * 0x8000 + index` with the
/// index below `0x7FFF` (so `0xFFFF`, `TRACKER_NO_DMA`, is never an id).
pub const MAX_WF_TILES_PER_CHUNK: u32 = 0x7FFF;

/// Which collective the producer's output feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Collective {
    /// Ring reduce-scatter (SPEC 6.2's main case).
    RingReduceScatter,
    /// Reduce-scatter over a fully connected topology: every GPU updates the owner.
    DirectReduceScatter,
    /// Ring all-gather: every chunk travels N-1 hops by DMA store.
    AllGather,
    /// All-to-all over a fully connected topology: every chunk is stored to its owner.
    AllToAll,
}

/// One fused GEMM + collective, as one GPU sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct T3Job {
    /// The collective.
    pub collective: Collective,
    /// GPUs taking part, `2..=64`.
    pub gpus: u8,
    /// This GPU's position, `< gpus`.
    pub rank: u8,
    /// Output rows.
    pub m: u32,
    /// Output columns.
    pub n: u32,
    /// Workgroup tile rows.
    pub tile_m: u16,
    /// Workgroup tile columns.
    pub tile_n: u16,
    /// Wavefronts per workgroup, `1..=8`.
    pub wfs_per_wg: u8,
    /// Output element type: F16 or F32.
    pub dtype: GemmDataType,
    /// Split-K factor (≥ 1): `split_k` workgroups update each tile (reduce-scatter only).
    pub split_k: u8,
    /// Device address of the output array (the same on every GPU).
    pub out_base: u64,
    /// WF tiles per DMA block, ≥ 1, divides `wfs_per_wg`.
    pub wf_tiles_per_dma_block: u8,
}

impl T3Job {
    /// A job with the decisions' defaults: 128 x 128 tiles, 4 WFs, f16, no split-K, the
    /// array at address 0, one WF tile per DMA block.
    pub const fn new(collective: Collective, gpus: u8, rank: u8, m: u32, n: u32) -> Self {
        Self {
            collective,
            gpus,
            rank,
            m,
            n,
            tile_m: 128,
            tile_n: 128,
            wfs_per_wg: 4,
            dtype: GemmDataType::F16,
            split_k: 1,
            out_base: 0,
            wf_tiles_per_dma_block: 1,
        }
    }

    /// Updates (or stores) per element the busiest tracked region receives.
    const fn max_updates_per_element(&self) -> u64 {
        let s = self.split_k as u64;
        match self.collective {
            Collective::RingReduceScatter => 2 * s,
            Collective::DirectReduceScatter => self.gpus as u64 * s,
            Collective::AllGather => 1,
            Collective::AllToAll => self.gpus as u64,
        }
    }
}

/// Why a [`T3Job`] cannot be run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum T3JobError {
    /// `gpus` is not in `2..=64`.
    Gpus(u8),
    /// `rank` is not below `gpus`.
    Rank(u8),
    /// `m` or `n` is zero.
    EmptyArray,
    /// `tile_m` or `tile_n` is zero.
    EmptyTile,
    /// `wfs_per_wg` is not in `1..=8`.
    WfsPerWg(u8),
    /// The element type is not F16 or F32.
    DType,
    /// `split_k` is zero, or above 1 for a collective that stores (all-gather,
    /// all-to-all: split-K partial sums need updates).
    SplitK(u8),
    /// `wf_tiles_per_dma_block` is zero or does not divide `wfs_per_wg`.
    DmaBlock(u8),
    /// The split dimension has fewer tiles than GPUs: some chunk would be empty.
    TooFewTiles {
        /// Tiles along the longer tile dimension.
        tiles: u32,
    },
    /// More workgroup tiles than a `u32` WG id names.
    TooManyWgs,
    /// A chunk holds more than [`MAX_WF_TILES_PER_CHUNK`] WF tiles.
    ChunkTooLarge,
    /// The array does not fit below the peer aperture (`out_base + m * n * elem` above
    /// `2^56`).
    AddressOverflow,
    /// The row pitch `n * elem` does not fit a `u32`.
    PitchOverflow,
    /// A WF tile's threshold (elements x updates per element) does not fit a `u32`.
    ThresholdOverflow,
}

impl fmt::Display for T3JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Gpus(g) => write!(f, "gpus = {g}, must be 2..={MAX_GPUS}"),
            Self::Rank(r) => write!(f, "rank = {r} is not below gpus"),
            Self::EmptyArray => f.write_str("the output array is empty"),
            Self::EmptyTile => f.write_str("the workgroup tile is empty"),
            Self::WfsPerWg(w) => write!(f, "wfs_per_wg = {w}, must be 1..={MAX_WFS_PER_WG}"),
            Self::DType => f.write_str("output dtype must be F16 or F32"),
            Self::SplitK(s) => write!(f, "split_k = {s} is not valid for this collective"),
            Self::DmaBlock(b) => write!(
                f,
                "wf_tiles_per_dma_block = {b} must be non-zero and divide wfs_per_wg"
            ),
            Self::TooFewTiles { tiles } => {
                write!(
                    f,
                    "{tiles} tiles along the split dimension: fewer than the GPUs"
                )
            }
            Self::TooManyWgs => f.write_str("more workgroup tiles than a u32 names"),
            Self::ChunkTooLarge => write!(
                f,
                "a chunk holds more than {MAX_WF_TILES_PER_CHUNK} WF tiles"
            ),
            Self::AddressOverflow => f.write_str("the output array passes 2^56"),
            Self::PitchOverflow => f.write_str("the row pitch does not fit a u32"),
            Self::ThresholdOverflow => f.write_str("a WF tile threshold does not fit a u32"),
        }
    }
}

impl core::error::Error for T3JobError {}

/// The tile dimension the chunks split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SplitDim {
    /// Chunks are bands of tile rows.
    Rows,
    /// Chunks are bands of tile columns.
    Cols,
}

pub use nmcp_isa::t3::region::Rect;

/// A validated job and the O(1) maps between WG ids, tiles, chunks and addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct T3Geometry {
    job: T3Job,
    tiles_m: u32,
    tiles_n: u32,
    split: SplitDim,
}

const fn ceil_div(a: u32, b: u32) -> u32 {
    // b > 0 at every call (validated tile sizes); 0 otherwise, so no panic path exists.
    match (a.checked_div(b), a.checked_rem(b)) {
        (Some(q), Some(r)) => q + (r != 0) as u32,
        _ => 0,
    }
}

impl T3Geometry {
    /// Validates `job` and derives the tiling.
    ///
    /// # Errors
    /// Any [`T3JobError`].
    pub fn new(job: &T3Job) -> Result<Self, T3JobError> {
        let j = *job;
        if !(2..=MAX_GPUS).contains(&j.gpus) {
            return Err(T3JobError::Gpus(j.gpus));
        }
        if j.rank >= j.gpus {
            return Err(T3JobError::Rank(j.rank));
        }
        if j.m == 0 || j.n == 0 {
            return Err(T3JobError::EmptyArray);
        }
        if j.tile_m == 0 || j.tile_n == 0 {
            return Err(T3JobError::EmptyTile);
        }
        if !(1..=MAX_WFS_PER_WG).contains(&j.wfs_per_wg) {
            return Err(T3JobError::WfsPerWg(j.wfs_per_wg));
        }
        if !matches!(j.dtype, GemmDataType::F16 | GemmDataType::F32) {
            return Err(T3JobError::DType);
        }
        let stores = matches!(j.collective, Collective::AllGather | Collective::AllToAll);
        if j.split_k == 0 || (stores && j.split_k != 1) {
            return Err(T3JobError::SplitK(j.split_k));
        }
        let b = j.wf_tiles_per_dma_block;
        if b == 0 || !j.wfs_per_wg.is_multiple_of(b) {
            return Err(T3JobError::DmaBlock(b));
        }
        let tiles_m = ceil_div(j.m, u32::from(j.tile_m));
        let tiles_n = ceil_div(j.n, u32::from(j.tile_n));
        if tiles_m.checked_mul(tiles_n).is_none() {
            return Err(T3JobError::TooManyWgs);
        }
        let n_gpus = u32::from(j.gpus);
        let divides = |t: u32| t.checked_rem(n_gpus) == Some(0);
        let split = match (divides(tiles_m), divides(tiles_n)) {
            (true, true) | (false, false) if tiles_m >= tiles_n => SplitDim::Rows,
            (true, false) => SplitDim::Rows,
            _ => SplitDim::Cols,
        };
        let g = Self {
            job: j,
            tiles_m,
            tiles_n,
            split,
        };
        let t = g.split_tiles();
        if t < n_gpus {
            return Err(T3JobError::TooFewTiles { tiles: t });
        }
        // The largest chunk: ceil(t / N) tiles of the split dimension.
        let chunk_wgs = u64::from(ceil_div(t, n_gpus)) * u64::from(g.other_tiles());
        if chunk_wgs * u64::from(j.wfs_per_wg) > u64::from(MAX_WF_TILES_PER_CHUNK) {
            return Err(T3JobError::ChunkTooLarge);
        }
        let elem = u64::from(j.dtype.bytes());
        let end = u64::from(j.m) * u64::from(j.n) * elem;
        match j.out_base.checked_add(end) {
            Some(e) if e <= 1 << PEER_SHIFT => {}
            _ => return Err(T3JobError::AddressOverflow),
        }
        if u64::from(j.n) * elem > u64::from(u32::MAX) {
            return Err(T3JobError::PitchOverflow);
        }
        let band = u64::from(ceil_div(u32::from(j.tile_m), u32::from(j.wfs_per_wg)));
        if band * u64::from(j.tile_n) * j.max_updates_per_element() > u64::from(u32::MAX) {
            return Err(T3JobError::ThresholdOverflow);
        }
        Ok(g)
    }

    /// The job.
    pub const fn job(&self) -> &T3Job {
        &self.job
    }

    /// Tile rows: `ceil(m / tile_m)`.
    pub const fn tiles_m(&self) -> u32 {
        self.tiles_m
    }

    /// Tile columns: `ceil(n / tile_n)`.
    pub const fn tiles_n(&self) -> u32 {
        self.tiles_n
    }

    /// The dimension the chunks split.
    pub const fn split(&self) -> SplitDim {
        self.split
    }

    /// Workgroup tiles (= WG ids `0..wg_count`).
    pub const fn wg_count(&self) -> u32 {
        self.tiles_m * self.tiles_n
    }

    /// Bytes per element.
    pub const fn elem_bytes(&self) -> u32 {
        self.job.dtype.bytes()
    }

    /// Row pitch in bytes (`n * elem`).
    pub const fn ld_bytes(&self) -> u32 {
        self.job.n * self.elem_bytes()
    }

    /// Tiles along the split dimension.
    const fn split_tiles(&self) -> u32 {
        match self.split {
            SplitDim::Rows => self.tiles_m,
            SplitDim::Cols => self.tiles_n,
        }
    }

    /// Tiles along the other dimension.
    const fn other_tiles(&self) -> u32 {
        match self.split {
            SplitDim::Rows => self.tiles_n,
            SplitDim::Cols => self.tiles_m,
        }
    }

    /// Tiles `[lo, hi)` of the split dimension that chunk `c` holds.
    fn chunk_tiles(&self, c: u8) -> Option<(u32, u32)> {
        if c >= self.job.gpus {
            return None;
        }
        let t = u64::from(self.split_tiles());
        let n = u64::from(self.job.gpus);
        let c = u64::from(c);
        // Both below t, which is a u32.
        let lo = u32::try_from((c * t).checked_div(n)?).ok()?;
        let hi = u32::try_from(((c + 1) * t).checked_div(n)?).ok()?;
        Some((lo, hi))
    }

    /// The chunk of a tile index along the split dimension: the largest `c` with
    /// `c * t < (i + 1) * N`.
    fn chunk_of_tile(&self, i: u32) -> Option<u8> {
        let t = u64::from(self.split_tiles());
        let n = u64::from(self.job.gpus);
        let c = ((u64::from(i) + 1) * n).checked_sub(1)?.checked_div(t)?;
        u8::try_from(c).ok().filter(|&c| c < self.job.gpus)
    }

    /// The WG-id range of chunk `c`: `(first, count)`.
    pub fn chunk_wgs(&self, c: u8) -> Option<(u32, u32)> {
        let (lo, hi) = self.chunk_tiles(c)?;
        let other = self.other_tiles();
        Some((lo * other, (hi - lo) * other))
    }

    /// The chunk WG `wg` belongs to.
    pub fn chunk_of_wg(&self, wg: u32) -> Option<u8> {
        if wg >= self.wg_count() {
            return None;
        }
        self.chunk_of_tile(wg.checked_div(self.other_tiles())?)
    }

    /// The rectangle chunk `c` covers.
    pub fn chunk_rect(&self, c: u8) -> Option<Rect> {
        let (lo, hi) = self.chunk_tiles(c)?;
        let j = &self.job;
        Some(match self.split {
            SplitDim::Rows => {
                let (r0, r1) = clip_span(lo, hi, j.tile_m, j.m);
                Rect {
                    row0: r0,
                    col0: 0,
                    rows: r1 - r0,
                    cols: j.n,
                }
            }
            SplitDim::Cols => {
                let (c0, c1) = clip_span(lo, hi, j.tile_n, j.n);
                Rect {
                    row0: 0,
                    col0: c0,
                    rows: j.m,
                    cols: c1 - c0,
                }
            }
        })
    }

    /// The tile (row, column) of WG `wg`.
    pub fn wg_tile(&self, wg: u32) -> Option<(u32, u32)> {
        let c = self.chunk_of_wg(wg)?;
        Some(match self.split {
            // Chunk-major over row bands is plain row-major.
            SplitDim::Rows => (wg.checked_div(self.tiles_n)?, wg.checked_rem(self.tiles_n)?),
            SplitDim::Cols => {
                let (lo, hi) = self.chunk_tiles(c)?;
                let (first, _) = self.chunk_wgs(c)?;
                let local = wg.checked_sub(first)?;
                let w = hi.checked_sub(lo).filter(|&w| w > 0)?;
                (local.checked_div(w)?, lo + local.checked_rem(w)?)
            }
        })
    }

    /// The WG id of tile (row, column).
    pub fn wg_of_tile(&self, tr: u32, tc: u32) -> Option<u32> {
        if tr >= self.tiles_m || tc >= self.tiles_n {
            return None;
        }
        match self.split {
            SplitDim::Rows => Some(tr * self.tiles_n + tc),
            SplitDim::Cols => {
                let c = self.chunk_of_tile(tc)?;
                let (lo, hi) = self.chunk_tiles(c)?;
                let (first, _) = self.chunk_wgs(c)?;
                Some(first + tr * (hi - lo) + (tc - lo))
            }
        }
    }

    /// The rectangle of WG `wg`'s tile, clipped to the array.
    pub fn wg_rect(&self, wg: u32) -> Option<Rect> {
        let (tr, tc) = self.wg_tile(wg)?;
        Some(self.tile_rect(tr, tc))
    }

    /// The rectangle of tile (row, column), clipped to the array (multiplications only:
    /// the programmer's walk calls it once per workgroup; the formula is the tracker's,
    /// `nmcp_isa::t3::region::tile_rect`).
    pub fn tile_rect(&self, tr: u32, tc: u32) -> Rect {
        let j = &self.job;
        tile_rect(j.m, j.n, j.tile_m, j.tile_n, tr, tc)
    }

    /// The tiles chunk `c` covers, as a box walked row-major by its WG ids:
    /// `(first tile row, first tile column, tile columns)`.
    pub fn chunk_tile_box(&self, c: u8) -> Option<(u32, u32, u32)> {
        let (lo, hi) = self.chunk_tiles(c)?;
        Some(match self.split {
            SplitDim::Rows => (lo, 0, self.tiles_n),
            SplitDim::Cols => (0, lo, hi - lo),
        })
    }

    /// Rows `[a, b)` of the unclipped tile that WF `wf` covers.
    fn band(&self, wf: u8) -> (u32, u32) {
        wf_band(self.job.tile_m, self.job.wfs_per_wg, wf)
    }

    /// The rectangle of WFs `[wf, wf + count)` of WG `wg` (a DMA block of stacked row
    /// bands), clipped to the array; `rows == 0` when it is empty.
    pub fn wf_block_rect(&self, wg: u32, wf: u8, count: u8) -> Option<Rect> {
        let end = wf.checked_add(count)?;
        if count == 0 || end > self.job.wfs_per_wg {
            return None;
        }
        let t = self.wg_rect(wg)?;
        Some(self.bands_of(&t, wf, count))
    }

    /// The rectangle of WFs `[wf, wf + count)` (`count >= 1`, `wf + count <= wfs`) of the
    /// workgroup tile `t` (from [`Self::tile_rect`]); `rows == 0` when it is empty.
    pub fn bands_of(&self, t: &Rect, wf: u8, count: u8) -> Rect {
        bands_of(self.job.tile_m, self.job.wfs_per_wg, t, wf, count)
    }

    /// WFs among `[wf, wf + count)` of the workgroup tile `t` whose band is not empty.
    pub fn nonempty_bands(&self, t: &Rect, wf: u8, count: u8) -> u8 {
        (wf..wf.saturating_add(count))
            .filter(|&f| !self.bands_of(t, f, 1).is_empty())
            .fold(0u8, |n, _| n.saturating_add(1))
    }

    /// The rectangle of WF `wf` of WG `wg` (a band of rows of the WG tile), clipped to
    /// the array; `rows == 0` when the band lies below the array's edge.
    pub fn wf_rect(&self, wg: u32, wf: u8) -> Option<Rect> {
        self.wf_block_rect(wg, wf, 1)
    }

    /// WFs among `[wf, wf + count)` of WG `wg` whose tile is not empty (a band is empty
    /// below the array's edge, or everywhere when `tile_m < wfs_per_wg`).
    pub fn nonempty_wfs(&self, wg: u32, wf: u8, count: u8) -> u8 {
        let end = wf.saturating_add(count).min(self.job.wfs_per_wg);
        self.wg_rect(wg)
            .map_or(0, |t| self.nonempty_bands(&t, wf, end.saturating_sub(wf)))
    }

    /// The chunk stage `k` (1..=N) of GPU `rank` computes: `(rank + k) mod N`.
    pub const fn stage_chunk(&self, rank: u8, k: u8) -> u8 {
        // gpus >= 2 (validated); 0 otherwise, so no panic path exists.
        match (rank as u32 + k as u32).checked_rem(self.job.gpus as u32) {
            Some(c) => c as u8,
            None => 0,
        }
    }

    /// Elements of a rectangle.
    pub const fn elements(r: &Rect) -> u64 {
        r.rows as u64 * r.cols as u64
    }

    /// Device address of element (row, column): `out_base + (row * n + col) * elem`
    /// (exact inside the array; saturating outside it).
    pub const fn address(&self, row: u32, col: u32) -> u64 {
        let index = (row as u64 * self.job.n as u64).saturating_add(col as u64);
        self.job
            .out_base
            .saturating_add(index.saturating_mul(self.elem_bytes() as u64))
    }
}

impl T3Geometry {
    /// Non-empty WF tiles of chunk `c` (the tracker entries it needs): the non-empty
    /// bands of an unclipped tile for every WG, less those the array's bottom edge clips
    /// away in the chunk's last tile row. O(1).
    pub fn chunk_wf_tiles(&self, c: u8) -> Option<u32> {
        let (first, count) = self.chunk_wgs(c)?;
        let per_tile = (0..self.job.wfs_per_wg)
            .filter(|&f| {
                let (a, b) = self.band(f);
                b > a
            })
            .count();
        let per_tile = u32::try_from(per_tile).ok()?;
        let last = first.checked_add(count)?.checked_sub(1)?;
        let (tr, _) = self.wg_tile(last)?;
        let full = count.checked_mul(per_tile)?;
        if tr + 1 != self.tiles_m {
            return Some(full);
        }
        let row_tiles = match self.split {
            SplitDim::Rows => self.tiles_n,
            SplitDim::Cols => count.checked_div(self.tiles_m)?,
        };
        let edge = u32::from(self.nonempty_wfs(last, 0, self.job.wfs_per_wg));
        full.checked_sub(row_tiles.checked_mul(per_tile.checked_sub(edge)?)?)
    }
}
