//! HBM presets as data: organisation, timing, refresh, controller defaults and NMC costs,
//! loaded from TOML and checked for self-consistency so that a typo in a preset is an error
//! naming the field instead of a silently wrong simulation.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::mapping::AddressMapping;
use crate::energy::EnergyParams;

/// The presets that ship with the emulator, as (name, TOML text).
pub const BUILTIN_PRESETS: [(&str, &str); 6] = [
    ("hbm2-2000", include_str!("../../presets/hbm2-2000.toml")),
    (
        "t3-table-8.1",
        include_str!("../../presets/t3-table-8.1.toml"),
    ),
    ("lamb-ch6", include_str!("../../presets/lamb-ch6.toml")),
    (
        "lamb-ch6-masa",
        include_str!("../../presets/lamb-ch6-masa.toml"),
    ),
    (
        "lamb-ch6-masa16",
        include_str!("../../presets/lamb-ch6-masa16.toml"),
    ),
    (
        "lamb-ch6-masa16-sarp",
        include_str!("../../presets/lamb-ch6-masa16-sarp.toml"),
    ),
];

/// The preset used when the user names none.
pub const DEFAULT_PRESET: &str = "hbm2-2000";

/// Most banks one pseudo-channel may have: the controller keeps per-bank bit masks in a `u64`.
pub const MAX_BANKS_PER_PSEUDO_CHANNEL: u32 = 64;

/// The largest timing parameter a preset may give, tCK (2^20: far above any DRAM's, and
/// small enough that the validator's sums of two or three of them cannot wrap).
pub const MAX_TIMING_TCK: u32 = 1 << 20;

/// A complete HBM device description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HbmPreset {
    /// Short name used on the command line.
    pub name: String,
    /// One line for listings.
    #[serde(default)]
    pub description: String,
    /// Geometry and pins.
    pub organisation: Organisation,
    /// DRAM timing parameters in tCK.
    pub timing: Timing,
    /// Refresh policy.
    pub refresh: Refresh,
    /// Memory-controller defaults (each can be overridden per run).
    pub controller: ControllerDefaults,
    /// Near-memory-compute costs.
    pub nmc: NmcCosts,
    /// Subarrays per bank and the MASA subarray-select latency (docs/decisions/dram.md,
    /// "Subarrays (MASA)"). Absent: one subarray per bank, today's DRAM exactly.
    #[serde(default, skip_serializing_if = "Subarrays::is_single")]
    pub subarrays: Subarrays,
    /// Energy parameters (docs/decisions/energy.md; every value's source in
    /// docs/calibration.md). Absent: [`EnergyParams::default`], the `hbm2-2000` values.
    #[serde(default)]
    pub energy: EnergyParams,
}

/// Subarray-level parallelism (MASA: Kim et al., "A Case for Exploiting Subarray-Level
/// Parallelism (SALP) in DRAM", ISCA 2012). A bank's rows are split into `per_bank`
/// subarrays of consecutive rows (`row / (rows / per_bank)`); with more than one, the
/// subarray commands (`AB-SA-ACT`, `AB-SA-SEL`, `AB-SA-PRE`) keep a row open in several
/// subarrays of a bank at once. The ordinary commands keep their one-row-per-bank meaning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subarrays {
    /// Subarrays per bank (1: no subarray-level parallelism; at most 64; divides `rows`).
    #[serde(default = "one")]
    pub per_bank: u32,
    /// SA_SEL: cycles from a subarray-select command to the first column command of the
    /// newly designated subarray.
    #[serde(default)]
    pub sa_sel: u32,
    /// Refresh-access parallelism (SARP, Chang et al. HPCA 2014): a refresh may target
    /// one subarray of every bank (`AB-SA-REF`), leaving the others open and accessible
    /// during tRFC. Needs `per_bank > 1`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refresh_parallel: bool,
}

impl Default for Subarrays {
    fn default() -> Self {
        Self {
            per_bank: 1,
            sa_sel: 0,
            refresh_parallel: false,
        }
    }
}

impl Subarrays {
    /// One subarray per bank (the default: the file format omits the section).
    pub fn is_single(&self) -> bool {
        *self == Self::default()
    }
}

/// Geometry of the device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Organisation {
    /// HBM stacks.
    pub stacks: u32,
    /// Channels per stack (8 for HBM2).
    pub channels_per_stack: u32,
    /// Pseudo-channels per channel (2 in pseudo-channel mode).
    pub pseudo_channels_per_channel: u32,
    /// Bank groups per pseudo-channel.
    pub bank_groups: u32,
    /// Banks per bank group.
    pub banks_per_group: u32,
    /// Rows per bank.
    pub rows: u32,
    /// Column accesses per row (row bytes / `bytes_per_column`).
    pub columns_per_row: u32,
    /// Bytes one RD or WR moves.
    pub bytes_per_column: u32,
    /// Data pins per pseudo-channel.
    pub bus_width_bits: u32,
    /// Per-pin data rate in Gb/s.
    pub data_rate_gbps: f64,
    /// Clock period in ns.
    pub tck_ns: f64,
    /// Capacity of one channel in Gbit (all its pseudo-channels).
    pub channel_density_gbit: u32,
    /// Who owns the row and column command buses (default: each pseudo-channel its own).
    #[serde(default)]
    pub command_bus: CommandBus,
}

/// The command interface of a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommandBus {
    /// Each pseudo-channel has its own row and column command bus (one row and one column
    /// command per pseudo-channel per cycle): nmcp's model before issue 15, kept for the
    /// NMC and T3 presets.
    #[default]
    PerPseudoChannel,
    /// JEDEC HBM2 (JESD235): the pseudo-channels of a channel share the channel's row
    /// command bus and its column command bus. Per cycle the channel takes one row command
    /// and one column command (for either pseudo-channel, in the same cycle allowed); an
    /// ACT holds the row bus for `timing.act_bus_cycles`. With one pseudo-channel per
    /// channel (legacy mode) this is the same as `per-pseudo-channel`.
    Shared,
}

/// DRAM timing parameters, all in tCK.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// RD to first read data.
    pub cl: u32,
    /// WR to first write data.
    pub cwl: u32,
    /// ACT to RD, same bank.
    pub trcdrd: u32,
    /// ACT to WR, same bank.
    pub trcdwr: u32,
    /// PRE to ACT, same bank.
    pub trp: u32,
    /// ACT to PRE, same bank.
    pub tras: u32,
    /// ACT to ACT, same bank.
    pub trc: u32,
    /// End of write data to PRE.
    pub twr: u32,
    /// RD to PRE.
    pub trtp: u32,
    /// Column to column, different bank group.
    pub tccd_s: u32,
    /// Column to column, same bank group.
    pub tccd_l: u32,
    /// End of write data to RD, different bank group.
    pub twtr_s: u32,
    /// End of write data to RD, same bank group.
    pub twtr_l: u32,
    /// ACT to ACT, different bank group.
    pub trrd_s: u32,
    /// ACT to ACT, same bank group.
    pub trrd_l: u32,
    /// Window in which at most four ACTs may issue.
    pub tfaw: u32,
    /// Average interval between all-bank refreshes.
    pub trefi: u32,
    /// All-bank refresh cycle time.
    pub trfc: u32,
    /// Per-bank refresh cycle time.
    pub trfcpb: u32,
    /// Burst length on the data bus, in tCK.
    pub bl: u32,
    /// Op-and-store (read-modify-write update) to the next column command, same bank group.
    pub tccdwl: u32,
    /// Idle data-bus cycles between the end of read data and the start of write data.
    pub rtw_turnaround: u32,
    /// Cycles an ACT occupies the row command bus (JEDEC HBM2: 2; default 1, the model
    /// before issue 15). Bank timing counts from the ACT's first cycle.
    #[serde(default = "one")]
    pub act_bus_cycles: u32,
}

fn one() -> u32 {
    1
}

impl Timing {
    /// Every parameter with its preset key (for the validator's bounds).
    fn fields(&self) -> [(&'static str, u32); 23] {
        [
            ("timing.cl", self.cl),
            ("timing.cwl", self.cwl),
            ("timing.trcdrd", self.trcdrd),
            ("timing.trcdwr", self.trcdwr),
            ("timing.trp", self.trp),
            ("timing.tras", self.tras),
            ("timing.trc", self.trc),
            ("timing.twr", self.twr),
            ("timing.trtp", self.trtp),
            ("timing.tccd_s", self.tccd_s),
            ("timing.tccd_l", self.tccd_l),
            ("timing.twtr_s", self.twtr_s),
            ("timing.twtr_l", self.twtr_l),
            ("timing.trrd_s", self.trrd_s),
            ("timing.trrd_l", self.trrd_l),
            ("timing.tfaw", self.tfaw),
            ("timing.trefi", self.trefi),
            ("timing.trfc", self.trfc),
            ("timing.trfcpb", self.trfcpb),
            ("timing.bl", self.bl),
            ("timing.tccdwl", self.tccdwl),
            ("timing.rtw_turnaround", self.rtw_turnaround),
            ("timing.act_bus_cycles", self.act_bus_cycles),
        ]
    }
}

/// Refresh settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refresh {
    /// All-bank REF every tREFI, or per-bank REFpb every tREFI / banks.
    pub mode: RefreshMode,
}

/// Which refresh command the controller uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefreshMode {
    /// REF to all banks every tREFI; the pseudo-channel is blocked for tRFC.
    AllBank,
    /// REFpb to one bank every tREFI / banks; only that bank is blocked, for tRFCpb.
    PerBank,
    /// No refresh (for isolated timing experiments only).
    Off,
}

/// Row-buffer policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PagePolicy {
    /// Keep a row open until a conflicting request needs the bank.
    Open,
    /// Precharge as soon as no queued request hits the open row.
    Closed,
}

/// Memory-controller defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerDefaults {
    /// Entries in each of the read and write queues of one pseudo-channel.
    pub queue_depth: u32,
    /// Row-buffer policy.
    pub page_policy: PagePolicy,
    /// Write-queue fill fraction at which the controller starts draining writes.
    pub write_high_watermark: f64,
    /// Write-queue fill fraction at which draining stops (if reads are waiting).
    pub write_low_watermark: f64,
    /// Cycles from a request entering the queue to the earliest command for it.
    pub command_overhead: u32,
    /// Default address mapping (see [`AddressMapping::parse`]).
    pub mapping: String,
    /// Look-ahead window: requests per bank whose ACT has issued that the controller holds
    /// beyond its queue (0 or 1; default 0). With 1, as Ramulator 2's active buffer, a
    /// request whose row was opened for it leaves the queue's count, is served before
    /// anything else whatever the write-drain mode, and its row is not precharged (by
    /// either queue's miss) until it is served. See `docs/decisions/dram.md`.
    #[serde(default)]
    pub activated_per_bank: u32,
}

/// Costs of near-memory compute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NmcCosts {
    /// Cycles to switch a pseudo-channel between normal and all-bank (NMC) mode.
    pub mode_switch: u32,
}

/// Why a preset could not be used.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PresetError {
    /// The TOML did not parse or has unknown/missing fields (the message names them).
    Parse(String),
    /// A value breaks a self-consistency rule.
    Inconsistent {
        /// The offending field, as `section.field`.
        field: &'static str,
        /// The rule it breaks, with the numbers.
        rule: String,
    },
    /// No built-in preset has this name.
    Unknown(String),
}

impl fmt::Display for PresetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PresetError::Parse(m) => write!(f, "{m}"),
            PresetError::Inconsistent { field, rule } => write!(f, "field `{field}`: {rule}"),
            PresetError::Unknown(n) => {
                let names: Vec<&str> = BUILTIN_PRESETS.iter().map(|(n, _)| *n).collect();
                write!(f, "no preset named `{n}` (built-in: {})", names.join(", "))
            }
        }
    }
}

impl std::error::Error for PresetError {}

fn rule(field: &'static str, rule: String) -> PresetError {
    PresetError::Inconsistent { field, rule }
}

impl HbmPreset {
    /// Parses and checks a preset.
    pub fn from_toml(text: &str) -> Result<Self, PresetError> {
        let p: HbmPreset = toml::from_str(text).map_err(|e| PresetError::Parse(e.to_string()))?;
        p.check()?;
        Ok(p)
    }

    /// A built-in preset by name.
    pub fn builtin(name: &str) -> Result<Self, PresetError> {
        let text = builtin_toml(name).ok_or_else(|| PresetError::Unknown(name.to_string()))?;
        Self::from_toml(text)
    }

    /// Pin bandwidth of the whole device in GB/s (10^9 bytes per second): every data pin
    /// busy every bit time. Refresh and timing gates are not subtracted; that is what the
    /// achieved figure is compared against.
    pub fn peak_gbps(&self) -> f64 {
        let o = &self.organisation;
        f64::from(self.pseudo_channels()) * f64::from(o.bus_width_bits) / 8.0 * o.data_rate_gbps
    }

    /// Pseudo-channels in the whole device.
    pub fn pseudo_channels(&self) -> u32 {
        let o = &self.organisation;
        o.stacks * o.channels_per_stack * o.pseudo_channels_per_channel
    }

    /// Banks in one pseudo-channel.
    pub fn banks_per_pseudo_channel(&self) -> u32 {
        self.organisation.bank_groups * self.organisation.banks_per_group
    }

    /// Bytes in one row of one bank.
    pub fn row_bytes(&self) -> u64 {
        u64::from(self.organisation.columns_per_row) * u64::from(self.organisation.bytes_per_column)
    }

    /// Capacity of the whole device in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        u64::from(self.pseudo_channels())
            * u64::from(self.banks_per_pseudo_channel())
            * u64::from(self.organisation.rows)
            * self.row_bytes()
    }

    /// Checks every self-consistency rule; the first broken one is returned.
    pub fn check(&self) -> Result<(), PresetError> {
        let o = &self.organisation;
        let t = &self.timing;
        let c = &self.controller;
        if self.name.trim().is_empty() {
            return Err(rule("name", "must not be empty".into()));
        }
        let sa = self.subarrays.per_bank;
        if sa == 0 || sa > 64 || !o.rows.is_multiple_of(sa) {
            return Err(rule(
                "subarrays.per_bank",
                format!(
                    "is {sa}; must be 1..=64 and divide organisation.rows ({})",
                    o.rows
                ),
            ));
        }
        if self.subarrays.refresh_parallel && sa < 2 {
            return Err(rule(
                "subarrays.refresh_parallel",
                format!("needs subarrays.per_bank >= 2 (is {sa}): it refreshes one subarray while others are accessed"),
            ));
        }
        // Upper bounds first, so that no product or sum below (nor any in the model:
        // capacity, bank and pseudo-channel counts, timing sums) can wrap: the largest
        // organisation is 2^12 pseudo-channels x 2^6 banks x 2^22 rows x 2^20 B rows,
        // 2^60 B.
        let pow2: [(&'static str, u32, u32); 8] = [
            ("organisation.stacks", o.stacks, 16),
            ("organisation.channels_per_stack", o.channels_per_stack, 64),
            (
                "organisation.pseudo_channels_per_channel",
                o.pseudo_channels_per_channel,
                4,
            ),
            ("organisation.bank_groups", o.bank_groups, 64),
            ("organisation.banks_per_group", o.banks_per_group, 64),
            ("organisation.rows", o.rows, 1 << 22),
            ("organisation.columns_per_row", o.columns_per_row, 1 << 12),
            ("organisation.bytes_per_column", o.bytes_per_column, 256),
        ];
        for (field, v, max) in pow2 {
            if !v.is_power_of_two() {
                return Err(rule(
                    field,
                    format!("is {v}; must be a power of two because the address mapping gives it whole bits"),
                ));
            }
            if v > max {
                return Err(rule(field, format!("is {v}; at most {max}")));
            }
        }
        for (field, v) in t.fields() {
            if v > MAX_TIMING_TCK {
                return Err(rule(
                    field,
                    format!("is {v} tCK; at most {MAX_TIMING_TCK} (about a millisecond at 1 GHz)"),
                ));
            }
        }
        if self.banks_per_pseudo_channel() > MAX_BANKS_PER_PSEUDO_CHANNEL {
            return Err(rule(
                "organisation.banks_per_group",
                format!(
                    "bank_groups x banks_per_group = {} exceeds {MAX_BANKS_PER_PSEUDO_CHANNEL}",
                    self.banks_per_pseudo_channel()
                ),
            ));
        }
        if o.bus_width_bits == 0 || !o.bus_width_bits.is_multiple_of(8) {
            return Err(rule(
                "organisation.bus_width_bits",
                format!("is {}; must be a positive multiple of 8", o.bus_width_bits),
            ));
        }
        if !(o.tck_ns.is_finite() && o.tck_ns > 0.0) {
            return Err(rule(
                "organisation.tck_ns",
                format!("is {}; must be > 0", o.tck_ns),
            ));
        }
        // Double data rate: two bits per pin per clock.
        let ddr = o.data_rate_gbps * o.tck_ns;
        if !(o.data_rate_gbps.is_finite() && (ddr - 2.0).abs() < 1e-9) {
            return Err(rule(
                "organisation.data_rate_gbps",
                format!(
                    "{} Gb/s x tCK {} ns = {ddr} bits per clock; a DDR bus moves 2",
                    o.data_rate_gbps, o.tck_ns
                ),
            ));
        }
        let burst_bytes = u64::from(o.bus_width_bits / 8) * 2 * u64::from(t.bl);
        if burst_bytes != u64::from(o.bytes_per_column) {
            return Err(rule(
                "organisation.bytes_per_column",
                format!(
                    "is {}, but a burst of bl = {} tCK on {} pins moves {burst_bytes} bytes",
                    o.bytes_per_column, t.bl, o.bus_width_bits
                ),
            ));
        }
        let channel_bits = u64::from(o.pseudo_channels_per_channel)
            * u64::from(self.banks_per_pseudo_channel())
            * u64::from(o.rows)
            * self.row_bytes()
            * 8;
        if channel_bits != u64::from(o.channel_density_gbit) << 30 {
            return Err(rule(
                "organisation.rows",
                format!(
                    "pseudo-channels x banks x rows x columns x bytes = {} Gbit per channel, \
                     but channel_density_gbit is {}",
                    channel_bits as f64 / f64::from(1u32 << 30),
                    o.channel_density_gbit
                ),
            ));
        }
        let nonzero: [(&'static str, u32); 14] = [
            ("timing.cl", t.cl),
            ("timing.cwl", t.cwl),
            ("timing.trcdrd", t.trcdrd),
            ("timing.trcdwr", t.trcdwr),
            ("timing.trp", t.trp),
            ("timing.tras", t.tras),
            ("timing.trc", t.trc),
            ("timing.tccd_s", t.tccd_s),
            ("timing.trrd_s", t.trrd_s),
            ("timing.tfaw", t.tfaw),
            ("timing.trefi", t.trefi),
            ("timing.trfc", t.trfc),
            ("timing.trfcpb", t.trfcpb),
            ("timing.bl", t.bl),
        ];
        for (field, v) in nonzero {
            if v == 0 {
                return Err(rule(field, "must be at least 1".into()));
            }
        }
        let ge: [(&'static str, &str, u32, &str, u32); 11] = [
            ("timing.trc", "tRC", t.trc, "tRAS + tRP", t.tras + t.trp),
            ("timing.tras", "tRAS", t.tras, "tRCDRD", t.trcdrd),
            ("timing.tccd_l", "tCCD_L", t.tccd_l, "tCCD_S", t.tccd_s),
            ("timing.tccd_s", "tCCD_S", t.tccd_s, "BL", t.bl),
            ("timing.twtr_l", "tWTR_L", t.twtr_l, "tWTR_S", t.twtr_s),
            ("timing.trrd_l", "tRRD_L", t.trrd_l, "tRRD_S", t.trrd_s),
            ("timing.tfaw", "tFAW", t.tfaw, "tRRD_S", t.trrd_s),
            ("timing.tccdwl", "tCCDWL", t.tccdwl, "tCCD_L", t.tccd_l),
            ("timing.trfc", "tRFC", t.trfc, "tRFCpb", t.trfcpb),
            ("timing.trfcpb", "tRFCpb", t.trfcpb, "tRC", t.trc),
            (
                "timing.trefi",
                "tREFI",
                t.trefi,
                "tRFC + tRC",
                t.trfc + t.trc,
            ),
        ];
        for (field, a_name, a, b_name, b) in ge {
            if a < b {
                return Err(rule(
                    field,
                    format!("{a_name} ({a}) must be >= {b_name} ({b})"),
                ));
            }
        }
        if self.refresh.mode == RefreshMode::PerBank {
            let interval = t.trefi / self.banks_per_pseudo_channel();
            if interval < t.trfcpb / 2 {
                return Err(rule(
                    "timing.trfcpb",
                    format!(
                        "per-bank refresh issues one REFpb every tREFI / banks = {interval} tCK; \
                         tRFCpb ({}) must be at most twice that or refresh cannot keep up",
                        t.trfcpb
                    ),
                ));
            }
        }
        if c.queue_depth == 0 || c.queue_depth > 4096 {
            return Err(rule(
                "controller.queue_depth",
                format!("is {}; must be 1..=4096", c.queue_depth),
            ));
        }
        let (lo, hi) = (c.write_low_watermark, c.write_high_watermark);
        if !(hi > 0.0 && hi <= 1.0) {
            return Err(rule(
                "controller.write_high_watermark",
                format!("is {hi}; must be in (0, 1]"),
            ));
        }
        if !(lo >= 0.0 && lo < hi) {
            return Err(rule(
                "controller.write_low_watermark",
                format!("is {lo}; must be in [0, write_high_watermark = {hi})"),
            ));
        }
        if c.activated_per_bank > 1 {
            return Err(rule(
                "controller.activated_per_bank",
                format!("is {}; must be 0 or 1", c.activated_per_bank),
            ));
        }
        if t.act_bus_cycles == 0 || t.act_bus_cycles > t.trrd_s {
            return Err(rule(
                "timing.act_bus_cycles",
                format!(
                    "is {}; must be 1..=tRRD_S ({}) (an ACT holds the row bus no longer than \
                     the next ACT of its pseudo-channel must wait anyway)",
                    t.act_bus_cycles, t.trrd_s
                ),
            ));
        }
        AddressMapping::parse(&c.mapping, self)
            .map_err(|e| rule("controller.mapping", e.to_string()))?;
        self.energy.check().map_err(|(field, r)| rule(field, r))?;
        Ok(())
    }
}

/// The TOML text of a built-in preset.
pub fn builtin_toml(name: &str) -> Option<&'static str> {
    BUILTIN_PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
}

/// Timing parameters widened to [`super::Cycle`] and combined into the derived delays the
/// hot path needs, so that no arithmetic beyond one add happens per gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TimingCycles {
    /// CL (see [`Timing`] for the meaning of each plain parameter).
    pub cl: u64,
    /// cwl in tCK.
    pub cwl: u64,
    /// trcdrd in tCK.
    pub trcdrd: u64,
    /// trcdwr in tCK.
    pub trcdwr: u64,
    /// trp in tCK.
    pub trp: u64,
    /// tras in tCK.
    pub tras: u64,
    /// trc in tCK.
    pub trc: u64,
    /// trtp in tCK.
    pub trtp: u64,
    /// tccd_s in tCK.
    pub tccd_s: u64,
    /// tccd_l in tCK.
    pub tccd_l: u64,
    /// trrd_s in tCK.
    pub trrd_s: u64,
    /// trrd_l in tCK.
    pub trrd_l: u64,
    /// tfaw in tCK.
    pub tfaw: u64,
    /// trefi in tCK.
    pub trefi: u64,
    /// trfc in tCK.
    pub trfc: u64,
    /// trfcpb in tCK.
    pub trfcpb: u64,
    /// bl in tCK.
    pub bl: u64,
    /// tccdwl in tCK.
    pub tccdwl: u64,
    /// Row-bus cycles of an ACT.
    pub act_bus: u64,
    /// WR to PRE, same bank: CWL + BL + tWR.
    pub wr_to_pre: u64,
    /// WR to RD, different bank group: CWL + BL + tWTR_S.
    pub wr_to_rd_s: u64,
    /// WR to RD, same bank group: CWL + BL + tWTR_L.
    pub wr_to_rd_l: u64,
    /// RD to WR, any bank: CL + BL + rtw_turnaround - CWL (at least tCCD_L), so that write
    /// data starts `rtw_turnaround` cycles after read data ends.
    pub rd_to_wr: u64,
}

impl From<&Timing> for TimingCycles {
    fn from(t: &Timing) -> Self {
        let w = u64::from;
        let rd_to_wr = (w(t.cl) + w(t.bl) + w(t.rtw_turnaround))
            .saturating_sub(w(t.cwl))
            .max(w(t.tccd_l));
        TimingCycles {
            cl: w(t.cl),
            cwl: w(t.cwl),
            trcdrd: w(t.trcdrd),
            trcdwr: w(t.trcdwr),
            trp: w(t.trp),
            tras: w(t.tras),
            trc: w(t.trc),
            trtp: w(t.trtp),
            tccd_s: w(t.tccd_s),
            tccd_l: w(t.tccd_l),
            trrd_s: w(t.trrd_s),
            trrd_l: w(t.trrd_l),
            tfaw: w(t.tfaw),
            trefi: w(t.trefi),
            trfc: w(t.trfc),
            trfcpb: w(t.trfcpb),
            bl: w(t.bl),
            tccdwl: w(t.tccdwl),
            act_bus: w(t.act_bus_cycles.max(1)),
            wr_to_pre: w(t.cwl) + w(t.bl) + w(t.twr),
            wr_to_rd_s: w(t.cwl) + w(t.bl) + w(t.twtr_s),
            wr_to_rd_l: w(t.cwl) + w(t.bl) + w(t.twtr_l),
            rd_to_wr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_load_and_have_expected_peaks() {
        let h = HbmPreset::builtin("hbm2-2000").unwrap();
        assert_eq!(h.peak_gbps(), 256.0);
        assert_eq!(h.timing.tccdwl, 2 * h.timing.tccd_l);
        let t3 = HbmPreset::builtin("t3-table-8.1").unwrap();
        assert_eq!(t3.peak_gbps(), 1024.0);
        assert_eq!(t3.timing.tccdwl, 4);
        HbmPreset::builtin("lamb-ch6").unwrap();
    }

    #[test]
    fn inconsistent_trc_names_the_field() {
        let text = builtin_toml("hbm2-2000")
            .unwrap()
            .replace("trc = 48", "trc = 40");
        let e = HbmPreset::from_toml(&text).unwrap_err();
        assert!(e.to_string().contains("timing.trc"), "{e}");
        assert!(e.to_string().contains("tRAS + tRP (48)"), "{e}");
    }

    #[test]
    fn unknown_field_is_named() {
        let text = builtin_toml("hbm2-2000")
            .unwrap()
            .replace("cl = 14", "cl = 14\ncas = 3");
        let e = HbmPreset::from_toml(&text).unwrap_err();
        assert!(e.to_string().contains("cas"), "{e}");
    }

    #[test]
    fn density_mismatch_is_named() {
        let text = builtin_toml("hbm2-2000")
            .unwrap()
            .replace("rows = 16384", "rows = 8192");
        let e = HbmPreset::from_toml(&text).unwrap_err();
        assert!(e.to_string().contains("organisation.rows"), "{e}");
    }
}
