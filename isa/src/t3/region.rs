//! T3 tracked regions (dissertation 8.3.2 and 8.3.4, `remote_map` / `dma_map`): one record
//! per collective stage from which the tracker and the DMA engine derive every WF tile's
//! entry and every DMA block's descriptor in hardware.
//!
//! A region names a WG-id range (one stage's chunk), how those workgroups lie on the output
//! array (a box of tiles walked row-major by WG id), the array's geometry, the updates each
//! element receives before it is complete, and what a completed WF tile does: nothing but
//! count towards the region's completion (notify only), or a DMA store/update of its block
//! to a peer. The firmware programs one region per stage instead of one record per WF
//! tile; the hardware raises one event when the whole region is done.
//!
//! The geometry functions here ([`wf_band`], [`tile_rect`], [`bands_of`]) are the one
//! formula for a WF tile: the firmware's `T3Geometry` uses them too.

use core::fmt;

use super::{
    op_bytes, op_from, peer_address, DmaDescriptor, DmaOp, DmaTrigger, T3Error, LOCAL_MASK,
    MAX_WFS_PER_WG,
};
use crate::le::{LeReader, LeWriter, OutOfBounds};

/// Bytes of an encoded [`TrackRegion`].
pub const TRACK_REGION_BYTES: usize = 56;
/// Regions one GPU's tracker holds at once (slots `0..REGION_SLOTS`); a region's slot is
/// free again once its completion was reported.
pub const REGION_SLOTS: u8 = 16;

/// Byte offsets of [`TrackRegion`] fields.
pub mod region_offset {
    /// `slot: u8`
    pub const SLOT: usize = 0;
    /// `wfs_per_wg: u8`
    pub const WFS_PER_WG: usize = 1;
    /// `elem_bytes: u8`
    pub const ELEM_BYTES: usize = 2;
    /// Action kind: 0 notify, 1 DMA store, 2 DMA update.
    pub const ACTION: usize = 3;
    /// Update element type (0 unless the action is a DMA update).
    pub const ACTION_DTYPE: usize = 4;
    /// DMA peer (0 for notify).
    pub const PEER: usize = 5;
    /// WF tiles per DMA block (0 for notify).
    pub const WF_TILES_PER_BLOCK: usize = 6;
    /// Must be zero.
    pub const RESERVED0: usize = 7;
    /// `updates_per_element: u32`
    pub const UPDATES_PER_ELEMENT: usize = 8;
    /// `wg_first: u32`
    pub const WG_FIRST: usize = 12;
    /// `wg_count: u32`
    pub const WG_COUNT: usize = 16;
    /// `tile_row0: u32`
    pub const TILE_ROW0: usize = 20;
    /// `tile_col0: u32`
    pub const TILE_COL0: usize = 24;
    /// `box_cols: u32`
    pub const BOX_COLS: usize = 28;
    /// `m: u32`
    pub const M: usize = 32;
    /// `n: u32`
    pub const N: usize = 36;
    /// `tile_m: u16`
    pub const TILE_M: usize = 40;
    /// `tile_n: u16`
    pub const TILE_N: usize = 42;
    /// `wf_tiles: u32`
    pub const WF_TILES: usize = 44;
    /// `base: u64`
    pub const BASE: usize = 48;
}

/// A rectangle of the output array, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
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
    /// Whether it holds no element.
    pub const fn is_empty(&self) -> bool {
        self.rows == 0 || self.cols == 0
    }

    /// Elements it holds.
    pub const fn elements(&self) -> u64 {
        self.rows as u64 * self.cols as u64
    }
}

/// Elements `[min(lo * tile, limit), min(hi * tile, limit))` of one dimension: tiles
/// `[lo, hi)` clipped to the array.
pub const fn clip_span(lo: u32, hi: u32, tile: u16, limit: u32) -> (u32, u32) {
    (clip(lo, tile, limit), clip(hi, tile, limit))
}

/// `min(x * tile, limit)`.
const fn clip(x: u32, tile: u16, limit: u32) -> u32 {
    let v = (x as u64).saturating_mul(tile as u64);
    if v < limit as u64 {
        v as u32
    } else {
        limit
    }
}

/// Rows `[a, b)` of an unclipped `tile_m`-row tile that WF `wf` of `wfs` covers:
/// `[wf * tile_m / wfs, (wf + 1) * tile_m / wfs)` (empty for `wfs == 0`).
pub const fn wf_band(tile_m: u16, wfs: u8, wf: u8) -> (u32, u32) {
    let tm = tile_m as u32;
    let f = wf as u32;
    match (
        (f * tm).checked_div(wfs as u32),
        ((f + 1) * tm).checked_div(wfs as u32),
    ) {
        (Some(a), Some(b)) => (a, b),
        _ => (0, 0),
    }
}

/// The rectangle of tile (`tr`, `tc`) of an `m x n` array cut into `tile_m x tile_n`
/// tiles, clipped to the array.
pub const fn tile_rect(m: u32, n: u32, tile_m: u16, tile_n: u16, tr: u32, tc: u32) -> Rect {
    let (r0, r1) = clip_span(tr, tr.saturating_add(1), tile_m, m);
    let (c0, c1) = clip_span(tc, tc.saturating_add(1), tile_n, n);
    Rect {
        row0: r0,
        col0: c0,
        rows: r1.saturating_sub(r0),
        cols: c1.saturating_sub(c0),
    }
}

/// The rows of WFs `[wf, wf + count)` (stacked row bands) of the clipped workgroup tile
/// `t`; `rows == 0` when they lie below the array's edge.
pub const fn bands_of(tile_m: u16, wfs: u8, t: &Rect, wf: u8, count: u8) -> Rect {
    let (a, _) = wf_band(tile_m, wfs, wf);
    let (_, b) = wf_band(tile_m, wfs, wf.saturating_add(count).saturating_sub(1));
    let lo = if a < t.rows { a } else { t.rows };
    let hi = if b < t.rows { b } else { t.rows };
    let hi = if hi < lo { lo } else { hi };
    Rect {
        row0: t.row0.saturating_add(lo),
        col0: t.col0,
        rows: hi - lo,
        cols: t.cols,
    }
}

/// What a completed WF tile of the region does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RegionAction {
    /// Counts towards the region's completion only.
    Notify,
    /// Its DMA block (once every non-empty WF tile of the block completed) goes to `peer`.
    Dma {
        /// Store or update at the destination.
        op: DmaOp,
        /// Destination GPU.
        peer: u8,
        /// WF tiles per DMA block, ≥ 1, divides `wfs_per_wg`.
        wf_tiles_per_block: u8,
    },
}

/// One tracked stage region (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TrackRegion {
    /// Region slot, `< REGION_SLOTS`; echoed in the region's completion event.
    pub slot: u8,
    /// First workgroup id of the range.
    pub wg_first: u32,
    /// Workgroups in the range (> 0).
    pub wg_count: u32,
    /// Tile row of the range's first workgroup.
    pub tile_row0: u32,
    /// Tile column of the range's first workgroup.
    pub tile_col0: u32,
    /// Tile columns of the box the range covers (WG ids are row-major over it).
    pub box_cols: u32,
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
    /// Bytes per element: 2 or 4.
    pub elem_bytes: u8,
    /// Device address of element (0, 0) (local, below the peer aperture).
    pub base: u64,
    /// Stores/updates each element receives before it is complete (≥ 1).
    pub updates_per_element: u32,
    /// Non-empty WF tiles of the range: the entries whose firing completes the region.
    pub wf_tiles: u32,
    /// What a completed WF tile does.
    pub action: RegionAction,
}

/// A DMA block the hardware derived from a region.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RegionDma {
    /// The block's first WF id.
    pub first_wf: u8,
    /// Non-empty WF tiles of the block: the firings that make it ready.
    pub fires: u8,
    /// The transfer (`id` 0, no trigger: the engine starts it when the block is ready).
    pub desc: DmaDescriptor,
}

fn zero(field: &'static str, offset: usize) -> T3Error {
    T3Error::Zero {
        field,
        offset: offset as u8,
    }
}

fn bad(field: &'static str, offset: usize, value: u8) -> T3Error {
    T3Error::BadEnum {
        field,
        offset: offset as u8,
        value,
    }
}

impl TrackRegion {
    /// Whether `wg` lies in the range.
    pub const fn contains(&self, wg: u32) -> bool {
        wg >= self.wg_first && wg - self.wg_first < self.wg_count
    }

    /// The tile (row, column) of workgroup `wg` of the range.
    pub fn tile_of(&self, wg: u32) -> Option<(u32, u32)> {
        if !self.contains(wg) {
            return None;
        }
        let local = wg.checked_sub(self.wg_first)?;
        let tr = self
            .tile_row0
            .checked_add(local.checked_div(self.box_cols)?)?;
        let tc = self
            .tile_col0
            .checked_add(local.checked_rem(self.box_cols)?)?;
        Some((tr, tc))
    }

    /// Workgroup `wg`'s tile, clipped to the array.
    pub fn wg_rect(&self, wg: u32) -> Option<Rect> {
        let (tr, tc) = self.tile_of(wg)?;
        Some(tile_rect(self.m, self.n, self.tile_m, self.tile_n, tr, tc))
    }

    /// WF `wf` of workgroup `wg`'s tile (empty below the array's edge).
    pub fn wf_rect(&self, wg: u32, wf: u8) -> Option<Rect> {
        if wf >= self.wfs_per_wg {
            return None;
        }
        let t = self.wg_rect(wg)?;
        Some(bands_of(self.tile_m, self.wfs_per_wg, &t, wf, 1))
    }

    /// The tracker entry's threshold for WF `wf` of `wg`: its elements times the updates
    /// per element; `None` for a WF tile outside the region, empty, or past a `u32`.
    pub fn threshold(&self, wg: u32, wf: u8) -> Option<u32> {
        let r = self.wf_rect(wg, wf).filter(|r| !r.is_empty())?;
        let t = r
            .elements()
            .checked_mul(u64::from(self.updates_per_element))?;
        u32::try_from(t).ok()
    }

    /// Device address of element (row, column): `base + (row * n + col) * elem`.
    pub const fn address(&self, row: u32, col: u32) -> u64 {
        let index = (row as u64 * self.n as u64).saturating_add(col as u64);
        self.base
            .saturating_add(index.saturating_mul(self.elem_bytes as u64))
    }

    /// The DMA block WF `wf` of `wg` belongs to (`None` for a notify-only region or a WF
    /// tile outside the region): its first WF, the firings it waits for, and the transfer
    /// — the same addresses, sizes and receiver tag a firmware would program.
    pub fn dma_block(&self, wg: u32, wf: u8) -> Option<RegionDma> {
        let RegionAction::Dma {
            op,
            peer,
            wf_tiles_per_block: block,
        } = self.action
        else {
            return None;
        };
        if wf >= self.wfs_per_wg {
            return None;
        }
        let t = self.wg_rect(wg)?;
        let first_wf = wf.checked_sub(wf.checked_rem(block)?)?;
        let b = bands_of(self.tile_m, self.wfs_per_wg, &t, first_wf, block);
        let fires = (first_wf..first_wf.saturating_add(block))
            .filter(|&f| !bands_of(self.tile_m, self.wfs_per_wg, &t, f, 1).is_empty())
            .fold(0u8, |n, _| n.saturating_add(1));
        let src = self.address(b.row0, b.col0);
        let desc = DmaDescriptor {
            id: 0,
            op,
            trigger: DmaTrigger::None,
            fires: 0,
            src,
            dst: peer_address(peer, src),
            rows: u16::try_from(b.rows).ok()?,
            cols: u16::try_from(b.cols).ok()?,
            ld_bytes: self.n.checked_mul(u32::from(self.elem_bytes))?,
            elem_bytes: self.elem_bytes,
            dst_wg_id: wg,
            dst_wf_id: first_wf,
        };
        Some(RegionDma {
            first_wf,
            fires,
            desc,
        })
    }

    /// Checks every field (see [`region_offset`] for where each lives).
    ///
    /// # Errors
    /// [`T3Error::BadEnum`], [`T3Error::Zero`], [`T3Error::WfIdOutOfRange`],
    /// [`T3Error::RangeOverflow`], [`T3Error::ElementMismatch`], [`T3Error::OutOfRange`].
    pub fn validate(&self) -> Result<(), T3Error> {
        use region_offset as o;
        if self.slot >= REGION_SLOTS {
            return Err(bad("slot", o::SLOT, self.slot));
        }
        if self.wfs_per_wg == 0 {
            return Err(zero("wfs_per_wg", o::WFS_PER_WG));
        }
        if self.wfs_per_wg > MAX_WFS_PER_WG {
            return Err(T3Error::WfIdOutOfRange {
                field: "wfs_per_wg",
                offset: o::WFS_PER_WG as u8,
                value: self.wfs_per_wg,
            });
        }
        if !matches!(self.elem_bytes, 2 | 4) {
            return Err(bad("elem_bytes", o::ELEM_BYTES, self.elem_bytes));
        }
        let nonzero = [
            (
                "updates_per_element",
                o::UPDATES_PER_ELEMENT,
                self.updates_per_element,
            ),
            ("wg_count", o::WG_COUNT, self.wg_count),
            ("box_cols", o::BOX_COLS, self.box_cols),
            ("m", o::M, self.m),
            ("n", o::N, self.n),
            ("tile_m", o::TILE_M, u32::from(self.tile_m)),
            ("tile_n", o::TILE_N, u32::from(self.tile_n)),
            ("wf_tiles", o::WF_TILES, self.wf_tiles),
        ];
        if let Some((field, at, _)) = nonzero.iter().find(|(_, _, v)| *v == 0) {
            return Err(zero(field, *at));
        }
        if self.wg_first.checked_add(self.wg_count).is_none() {
            return Err(T3Error::RangeOverflow {
                field: "wg_count",
                offset: o::WG_COUNT as u8,
            });
        }
        let bytes = u64::from(self.m)
            .checked_mul(u64::from(self.n))
            .and_then(|e| e.checked_mul(u64::from(self.elem_bytes)));
        match bytes.and_then(|b| self.base.checked_add(b)) {
            Some(end) if end <= LOCAL_MASK + 1 => {}
            _ => {
                return Err(T3Error::OutOfRange {
                    field: "base",
                    offset: o::BASE as u8,
                    address: self.base,
                })
            }
        }
        if let RegionAction::Dma {
            op,
            peer,
            wf_tiles_per_block,
        } = self.action
        {
            if peer == u8::MAX {
                return Err(bad("peer", o::PEER, peer));
            }
            if wf_tiles_per_block == 0 {
                return Err(zero("wf_tiles_per_block", o::WF_TILES_PER_BLOCK));
            }
            if !self.wfs_per_wg.is_multiple_of(wf_tiles_per_block) {
                return Err(bad(
                    "wf_tiles_per_block",
                    o::WF_TILES_PER_BLOCK,
                    wf_tiles_per_block,
                ));
            }
            if let DmaOp::Update(t) = op {
                let dtype_bytes = t.bytes() as u8;
                if dtype_bytes != self.elem_bytes {
                    return Err(T3Error::ElementMismatch {
                        elem_bytes: self.elem_bytes,
                        dtype_bytes,
                    });
                }
            }
        }
        Ok(())
    }

    /// Encodes the region (without validating it).
    pub fn encode(&self) -> [u8; TRACK_REGION_BYTES] {
        let mut b = [0u8; TRACK_REGION_BYTES];
        // Every field lies inside the layout (a unit test checks this returns Ok).
        let _ = self.write_fields(&mut LeWriter::new(&mut b));
        b
    }

    fn write_fields(&self, w: &mut LeWriter<'_>) -> Result<(), OutOfBounds> {
        use region_offset as o;
        w.put_u8_at(o::SLOT, self.slot)?;
        w.put_u8_at(o::WFS_PER_WG, self.wfs_per_wg)?;
        w.put_u8_at(o::ELEM_BYTES, self.elem_bytes)?;
        let (kind, dtype, peer, block) = match self.action {
            RegionAction::Notify => (0, 0, 0, 0),
            RegionAction::Dma {
                op,
                peer,
                wf_tiles_per_block,
            } => {
                let (k, d) = op_bytes(op, 1);
                (k, d, peer, wf_tiles_per_block)
            }
        };
        w.put_u8_at(o::ACTION, kind)?;
        w.put_u8_at(o::ACTION_DTYPE, dtype)?;
        w.put_u8_at(o::PEER, peer)?;
        w.put_u8_at(o::WF_TILES_PER_BLOCK, block)?;
        w.put_u32_at(o::UPDATES_PER_ELEMENT, self.updates_per_element)?;
        w.put_u32_at(o::WG_FIRST, self.wg_first)?;
        w.put_u32_at(o::WG_COUNT, self.wg_count)?;
        w.put_u32_at(o::TILE_ROW0, self.tile_row0)?;
        w.put_u32_at(o::TILE_COL0, self.tile_col0)?;
        w.put_u32_at(o::BOX_COLS, self.box_cols)?;
        w.put_u32_at(o::M, self.m)?;
        w.put_u32_at(o::N, self.n)?;
        w.put_u16_at(o::TILE_M, self.tile_m)?;
        w.put_u16_at(o::TILE_N, self.tile_n)?;
        w.put_u32_at(o::WF_TILES, self.wf_tiles)?;
        w.put_u64_at(o::BASE, self.base)
    }

    /// Decodes and validates a region from the first [`TRACK_REGION_BYTES`] bytes.
    ///
    /// # Errors
    /// [`T3Error::Truncated`], [`T3Error::BadEnum`], [`T3Error::ReservedNonZero`], or a
    /// validation error.
    pub fn decode(bytes: &[u8]) -> Result<Self, T3Error> {
        use region_offset as o;
        let r = bytes
            .get(..TRACK_REGION_BYTES)
            .map(LeReader::new)
            .ok_or(T3Error::Truncated {
                len: bytes.len(),
                need: TRACK_REGION_BYTES,
            })?;
        if r.u8_at(o::RESERVED0)? != 0 {
            return Err(T3Error::ReservedNonZero {
                field: "reserved0",
                offset: o::RESERVED0 as u8,
            });
        }
        let (kind, dtype) = (r.u8_at(o::ACTION)?, r.u8_at(o::ACTION_DTYPE)?);
        let (peer, block) = (r.u8_at(o::PEER)?, r.u8_at(o::WF_TILES_PER_BLOCK)?);
        let action = if kind == 0 {
            let nonzero = [
                ("action_dtype of a notify region", o::ACTION_DTYPE, dtype),
                ("peer of a notify region", o::PEER, peer),
                (
                    "wf_tiles_per_block of a notify region",
                    o::WF_TILES_PER_BLOCK,
                    block,
                ),
            ];
            if let Some((field, at, _)) = nonzero.iter().find(|(_, _, v)| *v != 0) {
                return Err(T3Error::ReservedNonZero {
                    field,
                    offset: *at as u8,
                });
            }
            RegionAction::Notify
        } else {
            let op = op_from(
                kind,
                dtype,
                1,
                ("action", o::ACTION, "action_dtype", o::ACTION_DTYPE),
            )?;
            RegionAction::Dma {
                op,
                peer,
                wf_tiles_per_block: block,
            }
        };
        let region = Self {
            slot: r.u8_at(o::SLOT)?,
            wfs_per_wg: r.u8_at(o::WFS_PER_WG)?,
            elem_bytes: r.u8_at(o::ELEM_BYTES)?,
            updates_per_element: r.u32_at(o::UPDATES_PER_ELEMENT)?,
            wg_first: r.u32_at(o::WG_FIRST)?,
            wg_count: r.u32_at(o::WG_COUNT)?,
            tile_row0: r.u32_at(o::TILE_ROW0)?,
            tile_col0: r.u32_at(o::TILE_COL0)?,
            box_cols: r.u32_at(o::BOX_COLS)?,
            m: r.u32_at(o::M)?,
            n: r.u32_at(o::N)?,
            tile_m: r.u16_at(o::TILE_M)?,
            tile_n: r.u16_at(o::TILE_N)?,
            wf_tiles: r.u32_at(o::WF_TILES)?,
            base: r.u64_at(o::BASE)?,
            action,
        };
        region.validate()?;
        Ok(region)
    }
}

impl fmt::Display for TrackRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "region {}: WGs {}..+{}, {} WF tiles",
            self.slot, self.wg_first, self.wg_count, self.wf_tiles
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm_ext::GemmDataType;

    #[test]
    fn every_field_lies_inside_the_layout() {
        let r = TrackRegion {
            slot: 15,
            wg_first: 7,
            wg_count: 33,
            tile_row0: 1,
            tile_col0: 2,
            box_cols: 11,
            m: 4256,
            n: 8192,
            tile_m: 128,
            tile_n: 128,
            wfs_per_wg: 4,
            elem_bytes: 2,
            base: 0x1000,
            updates_per_element: 2,
            wf_tiles: 130,
            action: RegionAction::Dma {
                op: DmaOp::Update(GemmDataType::F16),
                peer: 7,
                wf_tiles_per_block: 2,
            },
        };
        let mut b = [0u8; TRACK_REGION_BYTES];
        assert_eq!(r.write_fields(&mut LeWriter::new(&mut b)), Ok(()));
        assert_eq!(TrackRegion::decode(&b), Ok(r));
    }

    #[test]
    fn bands_split_the_tile_and_clip_at_the_edge() {
        assert_eq!(wf_band(128, 4, 1), (32, 64));
        assert_eq!(wf_band(128, 0, 1), (0, 0));
        // A tile 40 rows tall (clipped): WF 1 gets rows 32..40, WFs 2-3 nothing.
        let t = tile_rect(4256, 8192, 128, 128, 33, 0);
        assert_eq!((t.row0, t.rows), (4224, 32));
        let t = Rect { rows: 40, ..t };
        assert_eq!(bands_of(128, 4, &t, 1, 1).rows, 8);
        assert!(bands_of(128, 4, &t, 2, 2).is_empty());
    }
}
