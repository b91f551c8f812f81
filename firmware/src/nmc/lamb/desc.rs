//! Where a tensor lives: its descriptor in device memory ([`TensorDesc`], one layout), the
//! NMC geometry the arrays are striped over ([`NmcGeometry`]) and the host's placement
//! ([`lay_out`]).

use super::*;

/// Bytes of one [`TensorDesc`] in device memory.
pub const TENSOR_DESC_BYTES: usize = 32;

/// Where one tensor's arrays live: bank-local first rows (every array starts at column 0
/// of a row stripe) and its element count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorDesc {
    /// FP32 elements.
    pub elements: u64,
    /// First row of the gradients.
    pub g_row: u32,
    /// First row of the weights.
    pub w_row: u32,
    /// First row of the first moment.
    pub m_row: u32,
    /// First row of the second moment.
    pub v_row: u32,
    /// First row of the update.
    pub u_row: u32,
}

impl TensorDesc {
    /// Little-endian layout: elements u64 @0, g/w/m/v/u rows u32 @8/12/16/20/24, zero u32
    /// @28.
    pub fn encode(&self) -> [u8; TENSOR_DESC_BYTES] {
        let mut b = [0u8; TENSOR_DESC_BYTES];
        // The fields fill the 32 bytes exactly (a unit test checks this returns Ok).
        let _ = self.write_fields(&mut LeWriter::new(&mut b));
        b
    }

    pub(super) fn write_fields(&self, w: &mut LeWriter<'_>) -> Result<(), OutOfBounds> {
        w.put_u64(self.elements)?;
        for row in [
            self.g_row, self.w_row, self.m_row, self.v_row, self.u_row, 0,
        ] {
            w.put_u32(row)?;
        }
        Ok(())
    }

    /// Decodes and checks the reserved word.
    ///
    /// # Errors
    /// [`SequencerError::BadDescriptor`] if the reserved word is not zero or the tensor is
    /// empty.
    pub fn decode(b: &[u8; TENSOR_DESC_BYTES], index: u32) -> Result<Self, SequencerError> {
        Self::read_fields(&mut LeReader::new(b))
            .ok()
            .filter(|(d, reserved)| *reserved == 0 && d.elements != 0)
            .map(|(d, _)| d)
            .ok_or(SequencerError::BadDescriptor { index })
    }

    /// The descriptor and its reserved word, front to back.
    pub(super) fn read_fields(r: &mut LeReader<'_>) -> Result<(Self, u32), OutOfBounds> {
        let d = Self {
            elements: r.u64()?,
            g_row: r.u32()?,
            w_row: r.u32()?,
            m_row: r.u32()?,
            v_row: r.u32()?,
            u_row: r.u32()?,
        };
        Ok((d, r.u32()?))
    }
}

/// The device as the sequencer needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NmcGeometry {
    /// Pseudo-channels (all of them run every command).
    pub pseudo_channels: u16,
    /// Banks per pseudo-channel.
    pub banks_per_pc: u16,
    /// Columns per row.
    pub cols_per_row: u32,
    /// Bytes per column access.
    pub column_bytes: u32,
    /// TS entries per bank ALU.
    pub ts_entries: u16,
    /// Macro-commands the engine keeps in flight together, each in its own job context
    /// (1, or 0, for every engine setup but `masa-2jobs-split`, which has 2; `masa-2jobs`
    /// keeps two jobs in flight too but gives each the whole TS). With more than one the
    /// sequencer sizes every program to its context's share of the TS
    /// ([`Self::job_ts_entries`]) so that any two jobs fit the TS together.
    pub job_contexts: u16,
    /// Independent columns the bank ALU needs in flight to run at its rate (its
    /// dependent-operation latency in operations); 0 or 1 when a one-column chunk does.
    /// The TS is split between job contexts only if stage 1 keeps at least this chunk.
    pub alu_chunk: u16,
}

impl NmcGeometry {
    /// Columns each bank processes for a tensor of `elements` FP32 values.
    pub fn columns_per_bank(&self, elements: u64) -> u64 {
        let stripe = u64::from(self.column_bytes)
            * u64::from(self.pseudo_channels)
            * u64::from(self.banks_per_pc);
        // Saturating: a corrupted descriptor's element count must not panic here; the
        // sequencer refuses a tensor whose columns do not fit a command.
        let bytes = elements.saturating_mul(4);
        if stripe.is_power_of_two() {
            // Every real geometry: a shift instead of a 64-bit division (`__udivdi3` on
            // RV32, a few hundred instructions). Same result as the division below.
            let shift = stripe.trailing_zeros();
            (bytes >> shift) + u64::from(bytes & (stripe - 1) != 0)
        } else {
            bytes.div_ceil(stripe.max(1))
        }
    }

    /// TS entries one macro-command may use: the TS split evenly between the job
    /// contexts ([`Self::job_contexts`]), so that stage 1 and stage 2 (or either and a
    /// norm) fit the TS together; the whole TS with one context, or when a share would
    /// not hold [`Self::alu_chunk`] columns of every stage-1 program (a smaller chunk
    /// would slow the ALU down; jobs that both use the TS then cannot overlap, as with
    /// one context).
    pub fn job_ts_entries(&self) -> u16 {
        let share = self.ts_entries / self.job_contexts.max(1);
        if share / Stage1Program::MAX_SLOTS >= self.alu_chunk.max(1) {
            share
        } else {
            self.ts_entries
        }
    }

    /// Bytes of one row stripe: one row in every bank of the device.
    pub fn stripe_bytes(&self) -> u64 {
        u64::from(self.cols_per_row)
            .saturating_mul(u64::from(self.column_bytes))
            .saturating_mul(u64::from(self.pseudo_channels))
            .saturating_mul(u64::from(self.banks_per_pc))
    }

    /// Row stripes one array of `elements` FP32 values occupies: at least one, so every
    /// array starts on its own stripe.
    pub fn rows_per_array(&self, elements: u64) -> u64 {
        elements
            .saturating_mul(4)
            .div_ceil(self.stripe_bytes().max(1))
            .max(1)
    }

    pub(super) fn channels(&self) -> ChannelRange {
        ChannelRange {
            first: 0,
            count: self.pseudo_channels,
        }
    }
}

/// One tensor placed by [`lay_out`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorPlacement {
    /// The descriptor the host writes for the sequencer.
    pub desc: TensorDesc,
    /// First row after the tensor's arrays: where the next tensor starts.
    pub next_row: u32,
}

/// The one row-stripe layout of a tensor: its five arrays (g, w, m, v, u), in that order,
/// in consecutive runs of [`NmcGeometry::rows_per_array`] row stripes from `first_row`.
/// Hosts (the emulator, the board) lay out a model by calling this once per tensor, each
/// from the previous tensor's `next_row`.
///
/// Returns `None` if a row number does not fit in `u32`.
pub fn lay_out(geometry: &NmcGeometry, elements: u64, first_row: u32) -> Option<TensorPlacement> {
    let rows = u32::try_from(geometry.rows_per_array(elements)).ok()?;
    let mut row = first_row;
    let mut next = || {
        let r = row;
        row = row.checked_add(rows)?;
        Some(r)
    };
    let desc = TensorDesc {
        elements,
        g_row: next()?,
        w_row: next()?,
        m_row: next()?,
        v_row: next()?,
        u_row: next()?,
    };
    Some(TensorPlacement {
        desc,
        next_row: row,
    })
}
