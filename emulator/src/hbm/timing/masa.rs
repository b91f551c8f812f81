//! Subarray-level state of a pseudo-channel (MASA, Kim et al. ISCA 2012): which row each
//! subarray of each bank holds, and its own tRC / tRAS / tRP / tRTP / tWR gates.

use super::gate::{Gate, Gated};
use super::NO_ROW;
use crate::hbm::config::{HbmPreset, TimingCycles};
use crate::hbm::Cycle;

/// One subarray of one bank (MASA).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(super) struct Sub {
    /// Open row, or [`NO_ROW`].
    pub(super) row: u32,
    /// ACT to this subarray: tRC after its ACT, tRP after its PRE.
    pub(super) act: Gated,
    /// PRE of this subarray: tRAS after its ACT, tRTP / CWL + BL + tWR after its columns.
    pub(super) pre: Gated,
    /// First RD / WR after its ACT (tRCD).
    pub(super) rd: Cycle,
    pub(super) wr: Cycle,
}

/// Subarray-level state (MASA, Kim et al. ISCA 2012) of a pseudo-channel whose preset
/// has more than one subarray per bank. The per-bank gates keep what the bank shares:
/// the column path (tCCD, turnarounds, the designated subarray's tRCD and the SA_SEL
/// latency through the rd/wr gates), tRFC and the tRP of a whole-bank precharge (act),
/// and the whole-bank PRE (the maximum over its subarrays: pre). Each subarray has its own
/// tRC / tRAS / tRP / tRTP / tWR. ACT-to-ACT spacing (tRRD, tFAW) is per pseudo-channel
/// whatever the subarray (it is a power limit).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Masa {
    pub(super) per_bank: usize,
    /// log2(rows per subarray).
    pub(super) row_shift: u32,
    /// SA_SEL to column, cycles.
    pub(super) sa_sel: Cycle,
    /// `banks * per_bank`, bank-major.
    pub(super) subs: Vec<Sub>,
    /// Open subarrays per bank (bit mask).
    pub(super) open: Vec<u64>,
    /// The designated subarray of each bank.
    pub(super) designated: Vec<u8>,
    /// Subarrays open in the pseudo-channel.
    pub(super) open_count: u32,
    /// Running maximum of every subarray's ACT gate (what a REF waits for).
    pub(super) max_act: Cycle,
    /// The preset allows AB-SA-REF (refresh-access parallelism).
    #[serde(default)]
    pub(super) refresh_parallel: bool,
}

impl Masa {
    pub(super) fn new(preset: &HbmPreset, banks: usize) -> Option<Self> {
        let per = preset.subarrays.per_bank as usize;
        if per <= 1 {
            return None;
        }
        let rows_per = preset.organisation.rows / preset.subarrays.per_bank;
        Some(Masa {
            per_bank: per,
            row_shift: rows_per.trailing_zeros(),
            sa_sel: Cycle::from(preset.subarrays.sa_sel),
            subs: vec![
                Sub {
                    row: NO_ROW,
                    act: Gated::ZERO,
                    pre: Gated::ZERO,
                    rd: 0,
                    wr: 0,
                };
                banks * per
            ],
            open: vec![0; banks],
            designated: vec![0; banks],
            open_count: 0,
            max_act: 0,
            refresh_parallel: preset.subarrays.refresh_parallel,
        })
    }

    /// The subarray of `row`, if the bank has it.
    #[inline]
    pub(super) fn of(&self, row: u32) -> Option<usize> {
        let s = (row >> self.row_shift) as usize;
        (s < self.per_bank).then_some(s)
    }

    #[inline]
    pub(super) fn sub(&mut self, bank: usize, s: usize) -> &mut Sub {
        &mut self.subs[bank * self.per_bank + s]
    }

    /// Opens `row` in subarray `s` of `bank` (and designates it).
    pub(super) fn open(&mut self, t: &TimingCycles, bank: usize, s: usize, row: u32, at: Cycle) {
        let sub = self.sub(bank, s);
        sub.row = row;
        sub.act.raise(at + t.trc, Gate::Trc);
        sub.pre.raise(at + t.tras, Gate::Tras);
        sub.rd = at + t.trcdrd;
        sub.wr = at + t.trcdwr;
        self.max_act = self.max_act.max(at + t.trc);
        if self.open[bank] & (1 << s) == 0 {
            self.open[bank] |= 1 << s;
            self.open_count += 1;
        }
        self.designated[bank] = s as u8;
    }

    /// Closes subarray `s` of `bank`.
    pub(super) fn close(&mut self, t: &TimingCycles, bank: usize, s: usize, at: Cycle) {
        let sub = self.sub(bank, s);
        sub.row = NO_ROW;
        sub.act.raise(at + t.trp, Gate::Trp);
        self.max_act = self.max_act.max(at + t.trp);
        if self.open[bank] & (1 << s) != 0 {
            self.open[bank] &= !(1 << s);
            self.open_count -= 1;
        }
    }

    /// Closes every subarray of `bank`.
    pub(super) fn close_all(&mut self, t: &TimingCycles, bank: usize, at: Cycle) {
        for s in 0..self.per_bank {
            if self.open[bank] & (1 << s) != 0 {
                self.close(t, bank, s, at);
            }
        }
    }

    /// A column command to `bank`'s designated subarray raises its PRE gate.
    #[inline]
    pub(super) fn column(&mut self, bank: usize, pre: Cycle, gate: Gate) {
        let s = self.designated[bank] as usize;
        self.sub(bank, s).pre.raise(pre, gate);
    }
}
