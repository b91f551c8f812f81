//! DRAM energy from command counts and state time, DRAMPower's way: a per-command energy
//! above the standby current (ACT and PRE from IDD0, RD/WR bursts from IDD4R/W, refresh
//! from IDD5AB), background from IDD3N while any bank of a pseudo-channel is open and IDD2N
//! while all are precharged, plus I/O and TSV energy per bit that crosses the interface.
//! Everything here runs at report time over counters the pseudo-channels keep anyway.

use serde::Serialize;

use crate::hbm::bank::COMMAND_KINDS;
use crate::hbm::{CommandKind, HbmPreset, PseudoChannel};
use crate::memctrl::Controller;

use super::params::EnergyParams;

/// What a set of pseudo-channels did, summed over them: the inputs of [`DramEnergy`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DramActivity {
    /// Pseudo-channels counted.
    pub pseudo_channels: u64,
    /// Cycles observed, summed over pseudo-channels (each from 0 to its run's end).
    pub pc_cycles: u64,
    /// Of those, cycles with at least one bank (or subarray) open.
    pub active_cycles: u64,
    /// Commands by [`CommandKind`], summed.
    #[serde(skip)]
    pub commands: [u64; COMMAND_KINDS],
    /// Banks (or subarrays) precharged, by PRE, PREA or AB-SA-PRE.
    pub bank_precharges: u64,
    /// NMC ALU operations on 32-bit lanes (0 where no NMC ran).
    pub nmc_lane_ops: u64,
}

impl DramActivity {
    /// The counters of `channels` from cycle 0 up to cycle `end`.
    pub fn from_pseudo_channels<'a>(
        channels: impl IntoIterator<Item = &'a PseudoChannel>,
        end: u64,
    ) -> Self {
        let mut a = DramActivity::default();
        for pc in channels {
            a.pseudo_channels += 1;
            a.pc_cycles += end;
            a.active_cycles += pc.active_cycles(end).min(end);
            a.bank_precharges += pc.bank_precharges();
            for (sum, n) in a.commands.iter_mut().zip(pc.command_counts()) {
                *sum += n;
            }
        }
        a
    }

    /// The counters of a memory system's controllers up to cycle `end`.
    pub fn from_controllers(controllers: &[Controller], end: u64) -> Self {
        Self::from_pseudo_channels(controllers.iter().map(|c| c.pseudo_channel()), end)
    }

    /// Adds another set (another GPU's memory, another run).
    pub fn merge(&mut self, o: &DramActivity) {
        self.pseudo_channels += o.pseudo_channels;
        self.pc_cycles += o.pc_cycles;
        self.active_cycles += o.active_cycles;
        for (a, b) in self.commands.iter_mut().zip(&o.commands) {
            *a += b;
        }
        self.bank_precharges += o.bank_precharges;
        self.nmc_lane_ops += o.nmc_lane_ops;
    }

    /// Every count multiplied by `n` (one simulated pseudo-channel standing for `n`).
    pub fn times(&self, n: u64) -> Self {
        let mut a = *self;
        a.pseudo_channels *= n;
        a.pc_cycles *= n;
        a.active_cycles *= n;
        for c in &mut a.commands {
            *c *= n;
        }
        a.bank_precharges *= n;
        a.nmc_lane_ops *= n;
        a
    }

    /// An ideal stream over every pseudo-channel of `preset` for `cycles`: `bytes` (read,
    /// written, op-and-store updated) in whole columns, one activation and precharge per
    /// row of columns, banks open the whole time, and the preset's refresh at its rate
    /// (what moving those bytes costs the DRAM when only their amount and the time are
    /// known; no command is simulated).
    pub fn streaming(preset: &HbmPreset, bytes: StreamBytes, cycles: u64) -> Self {
        use crate::hbm::config::RefreshMode;
        let o = &preset.organisation;
        let pcs = u64::from(preset.pseudo_channels());
        let col = u64::from(o.bytes_per_column.max(1));
        let (reads, writes) = (bytes.read.div_ceil(col), bytes.write.div_ceil(col));
        let updates = bytes.update.div_ceil(col);
        let rows = (reads + writes + updates).div_ceil(u64::from(o.columns_per_row.max(1)));
        let mut a = DramActivity {
            pseudo_channels: pcs,
            pc_cycles: pcs * cycles,
            active_cycles: pcs * cycles,
            bank_precharges: rows,
            ..Default::default()
        };
        a.commands[CommandKind::Rd as usize] = reads;
        a.commands[CommandKind::Wr as usize] = writes;
        a.commands[CommandKind::Update as usize] = updates;
        a.commands[CommandKind::Act as usize] = rows;
        a.commands[CommandKind::Pre as usize] = rows;
        let refreshes = pcs * cycles / u64::from(preset.timing.trefi.max(1));
        let banks = u64::from(o.bank_groups * o.banks_per_group);
        match preset.refresh.mode {
            RefreshMode::AllBank => a.commands[CommandKind::Ref as usize] = refreshes,
            RefreshMode::PerBank => a.commands[CommandKind::RefPb as usize] = refreshes * banks,
            RefreshMode::Off => {}
        }
        a
    }

    /// Pseudo-channel cycles with every bank precharged.
    pub fn idle_cycles(&self) -> u64 {
        self.pc_cycles.saturating_sub(self.active_cycles)
    }

    /// Commands of one kind.
    pub fn count(&self, k: CommandKind) -> u64 {
        self.commands[k as usize]
    }
}

/// Bytes of a stream by access kind, for [`DramActivity::streaming`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamBytes {
    /// Read.
    pub read: u64,
    /// Written.
    pub write: u64,
    /// Op-and-store updated (read, added to, written back in the bank).
    pub update: u64,
}

/// Per-command and per-state energies of one pseudo-channel of a preset, in pJ (mA x V x
/// ns = pJ). DRAMPower's equations (Chandrasekar et al., DSD 2011), the currents scaled
/// from `idd_width_bits` to the pseudo-channel's bus width.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CommandEnergy {
    /// One bank activated: (IDD0 - IDD3N) x tRAS.
    pub act_pj: f64,
    /// One bank precharged: (IDD0 - IDD2N) x tRP.
    pub pre_pj: f64,
    /// One RD burst in the core: (IDD4R - IDD3N) x BL.
    pub rd_pj: f64,
    /// One WR burst in the core: (IDD4W - IDD3N) x BL.
    pub wr_pj: f64,
    /// One all-bank refresh: (IDD5AB - IDD3N) x tRFC.
    pub ref_pj: f64,
    /// One per-bank refresh: an all-bank refresh's energy over the banks (it refreshes
    /// one bank's share of the rows; no IDD5PB is published for HBM2).
    pub refpb_pj: f64,
    /// Background power with a bank open, per cycle: IDD3N x tCK.
    pub active_bg_pj_per_cycle: f64,
    /// Background power with all banks precharged, per cycle: IDD2N x tCK.
    pub idle_bg_pj_per_cycle: f64,
    /// Bits one column command moves.
    pub bits_per_column: f64,
    /// I/O + TSV energy per bit crossing the interface.
    pub interface_pj_per_bit: f64,
    /// One ALU operation on one 32-bit lane.
    pub lane_op_pj: f64,
    /// Banks per pseudo-channel (all-bank commands act on each).
    pub banks: f64,
}

impl CommandEnergy {
    /// The energies of `preset`'s pseudo-channel under its `[energy]` section.
    pub fn of(preset: &HbmPreset) -> Self {
        let e: &EnergyParams = &preset.energy;
        let o = &preset.organisation;
        let t = &preset.timing;
        let scale = f64::from(o.bus_width_bits) / f64::from(e.idd_width_bits);
        let v = e.vdd_v * scale;
        let ns = |cycles: u32| f64::from(cycles) * o.tck_ns;
        let banks = f64::from(o.bank_groups * o.banks_per_group);
        let ref_pj = v * (e.idd5ab_ma - e.idd3n_ma) * ns(t.trfc);
        Self {
            act_pj: v * (e.idd0_ma - e.idd3n_ma) * ns(t.tras),
            pre_pj: v * (e.idd0_ma - e.idd2n_ma) * ns(t.trp),
            rd_pj: v * (e.idd4r_ma - e.idd3n_ma) * ns(t.bl),
            wr_pj: v * (e.idd4w_ma - e.idd3n_ma) * ns(t.bl),
            ref_pj,
            refpb_pj: ref_pj / banks,
            active_bg_pj_per_cycle: v * e.idd3n_ma * o.tck_ns,
            idle_bg_pj_per_cycle: v * e.idd2n_ma * o.tck_ns,
            bits_per_column: f64::from(o.bytes_per_column) * 8.0,
            interface_pj_per_bit: e.io_pj_per_bit + e.tsv_pj_per_bit,
            lane_op_pj: e.nmc_alu_pj_per_lane_op,
            banks,
        }
    }
}

/// DRAM energy of a run by component, in joules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct DramEnergy {
    /// Row activations (ACT, and AB-ACT / AB-SA-ACT once per bank).
    pub activate_j: f64,
    /// Precharges (each bank or subarray closed).
    pub precharge_j: f64,
    /// RD bursts in the core (AB-RD once per bank; UPD's read half).
    pub read_j: f64,
    /// WR bursts in the core (AB-WR once per bank; UPD's write half).
    pub write_j: f64,
    /// Refresh (REF, REFpb, AB-SA-REF).
    pub refresh_j: f64,
    /// Active standby (IDD3N).
    pub background_active_j: f64,
    /// Precharged standby (IDD2N).
    pub background_idle_j: f64,
    /// I/O and TSV of every bit crossing the interface (RD, WR, UPD data).
    pub interface_j: f64,
    /// NMC ALU operations (bank ALUs and op-and-store).
    pub nmc_alu_j: f64,
    /// Bits that crossed the interface.
    pub interface_bits: u64,
}

impl DramEnergy {
    /// The energy of `a` under `e`.
    pub fn of(a: &DramActivity, e: &CommandEnergy) -> Self {
        use CommandKind as K;
        let n = |k: K| a.count(k) as f64;
        let pj = 1e-12;
        let bank_acts = n(K::Act) + e.banks * (n(K::AbAct) + n(K::AbSaAct));
        let reads = n(K::Rd) + n(K::Update) + e.banks * n(K::AbRd);
        let writes = n(K::Wr) + n(K::Update) + e.banks * n(K::AbWr);
        let bus_columns = a.count(K::Rd) + a.count(K::Wr) + a.count(K::Update);
        let interface_bits = bus_columns * e.bits_per_column as u64;
        // An op-and-store adds once per 32-bit lane of its column.
        let upd_lane_ops = n(K::Update) * e.bits_per_column / 32.0;
        Self {
            activate_j: bank_acts * e.act_pj * pj,
            precharge_j: a.bank_precharges as f64 * e.pre_pj * pj,
            read_j: reads * e.rd_pj * pj,
            write_j: writes * e.wr_pj * pj,
            refresh_j: ((n(K::Ref) + n(K::AbSaRef)) * e.ref_pj + n(K::RefPb) * e.refpb_pj) * pj,
            background_active_j: a.active_cycles as f64 * e.active_bg_pj_per_cycle * pj,
            background_idle_j: a.idle_cycles() as f64 * e.idle_bg_pj_per_cycle * pj,
            interface_j: interface_bits as f64 * e.interface_pj_per_bit * pj,
            nmc_alu_j: (a.nmc_lane_ops as f64 + upd_lane_ops) * e.lane_op_pj * pj,
            interface_bits,
        }
    }

    /// The DRAM core alone: what DRAMPower computes from a command trace (no I/O, no ALU).
    pub fn core_j(&self) -> f64 {
        self.activate_j
            + self.precharge_j
            + self.read_j
            + self.write_j
            + self.refresh_j
            + self.background_active_j
            + self.background_idle_j
    }

    /// Everything: core, interface and NMC ALU.
    pub fn total_j(&self) -> f64 {
        self.core_j() + self.interface_j + self.nmc_alu_j
    }

    /// Energy per bit that crossed the interface (pJ), if any did.
    pub fn pj_per_interface_bit(&self) -> Option<f64> {
        (self.interface_bits > 0)
            .then(|| (self.core_j() + self.interface_j) / self.interface_bits as f64 * 1e12)
    }

    /// Adds `bits` moved over the interface outside the command stream (the NMC host
    /// protocol's partials and scalars).
    pub fn add_interface_bits(&mut self, bits: u64, e: &CommandEnergy) {
        self.interface_bits += bits;
        self.interface_j += bits as f64 * e.interface_pj_per_bit * 1e-12;
    }

    /// Adds another run's energy.
    pub fn add(&mut self, o: &DramEnergy) {
        self.activate_j += o.activate_j;
        self.precharge_j += o.precharge_j;
        self.read_j += o.read_j;
        self.write_j += o.write_j;
        self.refresh_j += o.refresh_j;
        self.background_active_j += o.background_active_j;
        self.background_idle_j += o.background_idle_j;
        self.interface_j += o.interface_j;
        self.nmc_alu_j += o.nmc_alu_j;
        self.interface_bits += o.interface_bits;
    }
}
