//! Physical address to DRAM coordinates, and back.
//!
//! A mapping is a bit order written MSB to LSB, e.g. `"ro-ba-bg-co-pc-ch"`: each field
//! takes the next bits above the byte offset of one column access. A field may be split by
//! giving a width (`co:1` takes one bit of the column; a later bare `co` takes the rest),
//! so that a 64-byte request can stay in one row while consecutive 64-byte blocks still
//! rotate over channels. Field names: `st` stack, `ch` channel, `pc` pseudo-channel,
//! `bg` bank group, `ba` bank, `ro` row, `co` column. A field with zero bits (one stack)
//! may be left out. The inverse, [`AddressMapping::encode`], is how bank-local NMC data is
//! found in device memory.

use std::fmt;

use super::config::HbmPreset;

/// One coordinate of a DRAM location.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// Stack.
    Stack,
    /// Channel within the stack.
    Channel,
    /// Pseudo-channel within the channel.
    PseudoChannel,
    /// Bank group within the pseudo-channel.
    BankGroup,
    /// Bank within the bank group.
    Bank,
    /// Row within the bank.
    Row,
    /// Column access (of `bytes_per_column` bytes) within the row.
    Column,
}

const FIELDS: [Field; 7] = [
    Field::Stack,
    Field::Channel,
    Field::PseudoChannel,
    Field::BankGroup,
    Field::Bank,
    Field::Row,
    Field::Column,
];

impl Field {
    /// The short name used in mapping strings.
    pub fn short(self) -> &'static str {
        match self {
            Field::Stack => "st",
            Field::Channel => "ch",
            Field::PseudoChannel => "pc",
            Field::BankGroup => "bg",
            Field::Bank => "ba",
            Field::Row => "ro",
            Field::Column => "co",
        }
    }

    fn from_short(s: &str) -> Option<Field> {
        FIELDS.iter().copied().find(|f| f.short() == s)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A DRAM location of one column access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DramAddr {
    /// Stack.
    pub stack: u32,
    /// Channel within the stack.
    pub channel: u32,
    /// Pseudo-channel within the channel.
    pub pc: u32,
    /// Bank group within the pseudo-channel.
    pub bank_group: u32,
    /// Bank within the bank group.
    pub bank: u32,
    /// Row.
    pub row: u32,
    /// Column access within the row.
    pub col: u32,
}

impl DramAddr {
    fn get(&self, f: Field) -> u32 {
        match f {
            Field::Stack => self.stack,
            Field::Channel => self.channel,
            Field::PseudoChannel => self.pc,
            Field::BankGroup => self.bank_group,
            Field::Bank => self.bank,
            Field::Row => self.row,
            Field::Column => self.col,
        }
    }
}

/// A mapping string that cannot be used with the preset.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MappingError {
    /// A token is not `name` or `name:width` with a known name.
    BadToken {
        /// 1-based position of the token (counting from the left, MSB first).
        position: usize,
        /// The token.
        token: String,
    },
    /// A field was given more bits than it has left.
    TooWide {
        /// The field.
        field: &'static str,
        /// Bits the token asked for.
        asked: u32,
        /// Bits still unassigned.
        left: u32,
    },
    /// A field's bits were not all placed.
    Missing {
        /// The field.
        field: &'static str,
        /// Bits not placed.
        bits: u32,
    },
    /// A DRAM coordinate is outside the device.
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u32,
        /// How many values the field has.
        limit: u64,
    },
    /// A page-interleaved mapping cannot fit the interleaving bits into the page.
    PageTooSmall {
        /// The page size in bytes.
        page_bytes: u64,
        /// Bits that must fit below the page boundary.
        needed_bits: u32,
    },
}

impl fmt::Display for MappingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MappingError::BadToken { position, token } => write!(
                f,
                "mapping token {position} `{token}`: expected one of st, ch, pc, bg, ba, ro, co, \
                 optionally followed by `:bits`"
            ),
            MappingError::TooWide { field, asked, left } => write!(
                f,
                "mapping gives `{field}` {asked} more bits but only {left} are left for it"
            ),
            MappingError::Missing { field, bits } => {
                write!(f, "mapping leaves {bits} bits of `{field}` unplaced; add `{field}`")
            }
            MappingError::OutOfRange { field, value, limit } => {
                write!(f, "`{field}` = {value} is outside the device (0..{limit})")
            }
            MappingError::PageTooSmall { page_bytes, needed_bits } => write!(
                f,
                "a {page_bytes}-byte page cannot hold the {needed_bits} offset, channel and bank bits"
            ),
        }
    }
}

impl std::error::Error for MappingError {}

/// A run of address bits that belongs to one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    field: Field,
    /// Lowest address bit of the run.
    addr_shift: u32,
    /// Lowest field bit the run fills.
    field_shift: u32,
    width: u32,
}

/// One field of a mapping whose bits come from at most two runs of address bits: the
/// field is `((addr >> lo_shift) & lo_mask) | (((addr >> hi_shift) & hi_mask) << hi_to)`
/// (an absent second run has a zero mask). Every built-in mapping has this form (the
/// column is split in two by the NMC layout); decoding it is a handful of independent
/// register operations per field instead of a loop over the segments that gathers
/// into an array in memory (the loop was ~6 % of a T3 run's instructions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct FieldRuns {
    lo_shift: u32,
    lo_mask: u64,
    hi_shift: u32,
    hi_mask: u64,
    hi_to: u32,
}

impl FieldRuns {
    #[inline(always)]
    fn get(&self, addr: u64) -> u32 {
        (((addr >> self.lo_shift) & self.lo_mask)
            | (((addr >> self.hi_shift) & self.hi_mask) << self.hi_to)) as u32
    }

    /// The runs of every field, if none has more than two segments.
    fn of(segments: &[Segment]) -> Option<[FieldRuns; 7]> {
        let mut runs = [FieldRuns::default(); 7];
        let mut seen = [0u8; 7];
        for s in segments {
            let i = s.field.index();
            let mask = (1u64 << s.width) - 1;
            let r = runs.get_mut(i)?;
            match seen.get(i)? {
                0 if s.field_shift == 0 => {
                    r.lo_shift = s.addr_shift;
                    r.lo_mask = mask;
                }
                1 => {
                    r.hi_shift = s.addr_shift;
                    r.hi_mask = mask;
                    r.hi_to = s.field_shift;
                }
                _ => return None,
            }
            seen[i] += 1;
        }
        Some(runs)
    }
}

/// A bit-order address mapping for one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressMapping {
    text: String,
    segments: Vec<Segment>,
    /// The same mapping field by field, when every field has at most two runs.
    runs: Option<[FieldRuns; 7]>,
    widths: [u32; 7],
    offset_bits: u32,
    total_bits: u32,
    channels_per_stack: u32,
    pcs_per_channel: u32,
    banks_per_group: u32,
}

fn log2(v: u32) -> u32 {
    v.trailing_zeros()
}

/// Name of the streaming-friendly mapping in [`AddressMapping::named`].
pub const STREAM_MAPPING: &str = "stream";
/// Name of the page-interleaved mapping in [`AddressMapping::named`].
pub const PAGE_INTERLEAVED_MAPPING: &str = "page-interleaved";
/// Page size of the page-interleaved mapping (dissertation 6.2.2: arrays are allocated at
/// this granularity so that every array is laid out identically in every bank).
pub const NMC_PAGE_BYTES: u64 = 64 * 1024;

impl AddressMapping {
    /// Parses a mapping string for a preset's geometry.
    pub fn parse(text: &str, preset: &HbmPreset) -> Result<Self, MappingError> {
        let o = &preset.organisation;
        let mut widths = [0u32; 7];
        for f in FIELDS {
            let n = match f {
                Field::Stack => o.stacks,
                Field::Channel => o.channels_per_stack,
                Field::PseudoChannel => o.pseudo_channels_per_channel,
                Field::BankGroup => o.bank_groups,
                Field::Bank => o.banks_per_group,
                Field::Row => o.rows,
                Field::Column => o.columns_per_row,
            };
            if let Some(w) = widths.get_mut(f.index()) {
                *w = log2(n);
            }
        }
        let mut tokens = Vec::new();
        for (i, tok) in text.split('-').enumerate() {
            let tok_trim = tok.trim();
            let bad = || MappingError::BadToken {
                position: i + 1,
                token: tok_trim.to_string(),
            };
            let (name, width) = match tok_trim.split_once(':') {
                Some((n, w)) => (n, Some(w.parse::<u32>().map_err(|_| bad())?)),
                None => (tok_trim, None),
            };
            let field = Field::from_short(name).ok_or_else(bad)?;
            tokens.push((field, width));
        }
        let offset_bits = log2(o.bytes_per_column);
        let mut used = [0u32; 7];
        let mut cursor = offset_bits;
        let mut segments = Vec::new();
        for (field, width) in tokens.iter().rev() {
            let total = widths.get(field.index()).copied().unwrap_or(0);
            let done = used.get(field.index()).copied().unwrap_or(0);
            let left = total - done;
            let w = match width {
                Some(w) if *w > left => {
                    return Err(MappingError::TooWide {
                        field: field.short(),
                        asked: *w,
                        left,
                    })
                }
                Some(w) => *w,
                None => left,
            };
            if w > 0 {
                segments.push(Segment {
                    field: *field,
                    addr_shift: cursor,
                    field_shift: done,
                    width: w,
                });
            }
            if let Some(u) = used.get_mut(field.index()) {
                *u += w;
            }
            cursor += w;
        }
        for f in FIELDS {
            let (u, w) = (used[f.index()], widths[f.index()]);
            if u < w {
                return Err(MappingError::Missing {
                    field: f.short(),
                    bits: w - u,
                });
            }
        }
        Ok(AddressMapping {
            text: text.to_string(),
            runs: FieldRuns::of(&segments),
            segments,
            widths,
            offset_bits,
            total_bits: cursor,
            channels_per_stack: o.channels_per_stack,
            pcs_per_channel: o.pseudo_channels_per_channel,
            banks_per_group: o.banks_per_group,
        })
    }

    /// A named mapping ([`STREAM_MAPPING`] is the preset's default, [`PAGE_INTERLEAVED_MAPPING`]
    /// the NMC layout) or an explicit mapping string.
    pub fn named(name: &str, preset: &HbmPreset) -> Result<Self, MappingError> {
        match name {
            STREAM_MAPPING | "default" => Self::parse(&preset.controller.mapping, preset),
            PAGE_INTERLEAVED_MAPPING => Self::page_interleaved(preset, NMC_PAGE_BYTES),
            other => Self::parse(other, preset),
        }
    }

    /// The NMC data layout (dissertation 6.2.2): stack, channel, pseudo-channel, bank-group
    /// and bank bits all sit inside a page of `page_bytes`, so that two arrays allocated at
    /// page boundaries have element i in the same bank. The low column bits fill the rest
    /// of the page; the high column bits go above the row bits (at the MSB) rather than
    /// just above the page, so that element i also has the same column in both arrays as
    /// long as they lie in the same 1/2^k of the device, and one page is a rectangle of
    /// (one row) x (a contiguous run of columns) in every bank — the shape an NMC
    /// macro-command covers.
    pub fn page_interleaved(preset: &HbmPreset, page_bytes: u64) -> Result<Self, MappingError> {
        let o = &preset.organisation;
        let inner = log2(o.bytes_per_column)
            + log2(o.stacks)
            + log2(o.channels_per_stack)
            + log2(o.pseudo_channels_per_channel)
            + log2(o.bank_groups)
            + log2(o.banks_per_group);
        let page_bits = page_bytes.trailing_zeros();
        if !page_bytes.is_power_of_two() || page_bits < inner {
            return Err(MappingError::PageTooSmall {
                page_bytes,
                needed_bits: inner,
            });
        }
        let col_bits = log2(o.columns_per_row);
        let low_col = (page_bits - inner).min(col_bits);
        let high_col = col_bits - low_col;
        let text = format!("co:{high_col}-ro-ba-bg-st-pc-ch-co:{low_col}");
        Self::parse(&text, preset)
    }

    /// The mapping string as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Address bits the mapping covers; higher bits wrap around the device.
    pub fn address_bits(&self) -> u32 {
        self.total_bits
    }

    /// Bytes addressed by one column access.
    pub fn column_bytes(&self) -> u64 {
        1 << self.offset_bits
    }

    /// Decodes an address. Bits above the device's capacity are ignored (addresses wrap), as
    /// trace-driven simulators do; the byte offset within the column access is dropped.
    #[inline]
    pub fn decode(&self, addr: u64) -> DramAddr {
        if let Some([stack, channel, pc, bank_group, bank, row, col]) = &self.runs {
            return DramAddr {
                stack: stack.get(addr),
                channel: channel.get(addr),
                pc: pc.get(addr),
                bank_group: bank_group.get(addr),
                bank: bank.get(addr),
                row: row.get(addr),
                col: col.get(addr),
            };
        }
        self.decode_segments(addr)
    }

    /// [`AddressMapping::decode`] segment by segment (any mapping).
    fn decode_segments(&self, addr: u64) -> DramAddr {
        // Fields gather in an array indexed by field (no per-segment branch on the field),
        // then the address is built from it in one go.
        let mut f = [0u32; FIELDS.len()];
        for s in &self.segments {
            let bits = ((addr >> s.addr_shift) & ((1u64 << s.width) - 1)) as u32;
            if let Some(v) = f.get_mut(s.field.index()) {
                *v |= bits << s.field_shift;
            }
        }
        let [stack, channel, pc, bank_group, bank, row, col] = f;
        DramAddr {
            stack,
            channel,
            pc,
            bank_group,
            bank,
            row,
            col,
        }
    }

    /// The address of the first byte of a column access.
    pub fn encode(&self, d: &DramAddr) -> Result<u64, MappingError> {
        for f in FIELDS {
            let w = self.widths[f.index()];
            let v = d.get(f);
            if u64::from(v) >> w != 0 {
                return Err(MappingError::OutOfRange {
                    field: f.short(),
                    value: v,
                    limit: 1 << w,
                });
            }
        }
        let mut addr = 0u64;
        for s in &self.segments {
            let bits = (u64::from(d.get(s.field)) >> s.field_shift) & ((1u64 << s.width) - 1);
            addr |= bits << s.addr_shift;
        }
        Ok(addr)
    }

    /// Index of the pseudo-channel in the whole device: (stack, channel, pc) row-major.
    #[inline]
    pub fn pseudo_channel_index(&self, d: &DramAddr) -> usize {
        ((d.stack * self.channels_per_stack + d.channel) * self.pcs_per_channel + d.pc) as usize
    }

    /// Index of the bank within its pseudo-channel: (bank group, bank) row-major.
    #[inline]
    pub fn bank_index(&self, d: &DramAddr) -> usize {
        (d.bank_group * self.banks_per_group + d.bank) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset() -> HbmPreset {
        HbmPreset::builtin("hbm2-2000").unwrap()
    }

    #[test]
    fn split_column_keeps_64_bytes_in_one_row() {
        let m = AddressMapping::named(STREAM_MAPPING, &preset()).unwrap();
        let a = m.decode(0x1234_5640);
        let b = m.decode(0x1234_5660);
        assert_eq!(
            (a.channel, a.pc, a.bank_group, a.bank, a.row),
            (b.channel, b.pc, b.bank_group, b.bank, b.row)
        );
        assert_eq!(a.col + 1, b.col);
        assert_ne!(m.decode(0x40).channel, m.decode(0x0).channel);
    }

    /// The field-by-field decode equals the segment-by-segment one on every built-in
    /// preset's mappings, and a mapping with a field in three runs takes the loop.
    #[test]
    fn field_runs_decode_as_the_segments_do() {
        use crate::hbm::config::BUILTIN_PRESETS;
        let mut checked = 0;
        for (name, _) in BUILTIN_PRESETS {
            let p = HbmPreset::builtin(name).unwrap();
            for mapping in [STREAM_MAPPING, PAGE_INTERLEAVED_MAPPING] {
                let Ok(m) = AddressMapping::named(mapping, &p) else {
                    continue;
                };
                assert!(
                    m.runs.is_some(),
                    "{name} {mapping}: fields in at most two runs"
                );
                // Every address bit alone, then pseudo-random addresses.
                let mut x = 0x9E37_79B9_7F4A_7C15u64;
                let addrs = (0..64).map(|b| 1u64 << b).chain((0..4096).map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                }));
                for a in addrs {
                    assert_eq!(m.decode(a), m.decode_segments(a), "{name} {mapping} {a:#x}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 4160 * 5);
        let m = AddressMapping::parse("ro-co-ro:4-ba-bg-st-pc-ch-ro:4", &preset()).unwrap();
        assert!(m.runs.is_none(), "the row in three runs");
        assert_eq!(
            m.decode(0x1234_5678_9ABC),
            m.decode_segments(0x1234_5678_9ABC)
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let p = preset();
        let e = AddressMapping::parse("ro-ba-bg-co-pc", &p).unwrap_err();
        assert_eq!(
            e,
            MappingError::Missing {
                field: "ch",
                bits: 3
            }
        );
        let e = AddressMapping::parse("ro-ba-bg-co-pc-ch-xx", &p).unwrap_err();
        assert!(matches!(e, MappingError::BadToken { position: 7, .. }));
        let e = AddressMapping::parse("ro-ba-bg-co-pc-ch:4", &p).unwrap_err();
        assert!(matches!(
            e,
            MappingError::TooWide {
                field: "ch",
                asked: 4,
                left: 3
            }
        ));
    }
}
