//! The `energy` object of every `--json` report and its one-line text form: total joules,
//! joules by component, and the DRAM energy per bit crossing the interface where bits did.

use std::collections::BTreeMap;

use serde::Serialize;

use super::dram::DramEnergy;
use super::gpu::GpuEnergy;

/// Energy of a run, by component.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EnergyReport {
    /// Sum of the components (J).
    pub total_j: f64,
    /// Joules by component: `dram_*` (core by command and state), `dram_interface` (I/O and
    /// TSV), `nmc_alu`, `gpu_compute`, `gpu_llc`, `gpu_static`. Components a run has none
    /// of are left out.
    pub components_j: BTreeMap<&'static str, f64>,
    /// DRAM energy (core + interface, no ALU) per bit that crossed the interface (pJ);
    /// absent when no bit did (an NMC-only run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dram_pj_per_interface_bit: Option<f64>,
    /// Bits that crossed the DRAM interface.
    pub interface_bits: u64,
    /// DRAM joules (core + interface) so far, for the per-bit figure.
    #[serde(skip)]
    dram_j: f64,
}

impl EnergyReport {
    /// A report of DRAM energy alone.
    pub fn dram(d: &DramEnergy) -> Self {
        let mut r = Self::default();
        r.add_dram(d);
        r
    }

    /// Adds DRAM energy.
    pub fn add_dram(&mut self, d: &DramEnergy) {
        let parts = [
            ("dram_activate", d.activate_j),
            ("dram_precharge", d.precharge_j),
            ("dram_read", d.read_j),
            ("dram_write", d.write_j),
            ("dram_refresh", d.refresh_j),
            ("dram_background_active", d.background_active_j),
            ("dram_background_idle", d.background_idle_j),
            ("dram_interface", d.interface_j),
            ("nmc_alu", d.nmc_alu_j),
        ];
        self.add_parts(&parts);
        self.interface_bits += d.interface_bits;
        self.dram_j += d.core_j() + d.interface_j;
        self.dram_pj_per_interface_bit =
            (self.interface_bits > 0).then(|| self.dram_j / self.interface_bits as f64 * 1e12);
    }

    /// Adds GPU energy.
    pub fn add_gpu(&mut self, g: &GpuEnergy) {
        self.add_parts(&[
            ("gpu_compute", g.compute_j),
            ("gpu_llc", g.llc_j),
            ("gpu_static", g.static_j),
        ]);
    }

    fn add_parts(&mut self, parts: &[(&'static str, f64)]) {
        for &(k, v) in parts {
            if v != 0.0 {
                *self.components_j.entry(k).or_insert(0.0) += v;
            }
        }
        // Folded from +0.0: `Sum` of no floats is -0.0, which a report of a run that moved
        // nothing would print as `-0.0`.
        self.total_j = self.components_j.values().fold(0.0, |a, v| a + v);
    }

    /// Joules of the components whose name starts with `prefix`.
    pub fn sum_of(&self, prefix: &str) -> f64 {
        self.components_j
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .fold(0.0, |a, (_, v)| a + v)
    }

    /// One line for text reports.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} total: DRAM core {} + interface {}",
            joules(self.total_j),
            joules(self.sum_of("dram_") - self.sum_of("dram_interface")),
            joules(self.sum_of("dram_interface"))
        );
        for (label, key) in [("NMC ALU", "nmc_alu"), ("GPU", "gpu_")] {
            let v = self.sum_of(key);
            if v != 0.0 {
                s += &format!(" + {label} {}", joules(v));
            }
        }
        if let Some(p) = self.dram_pj_per_interface_bit {
            s += &format!(" ({p:.2} pJ per interface bit)");
        }
        s
    }
}

/// Joules with an SI prefix.
pub fn joules(j: f64) -> String {
    let a = j.abs();
    if a >= 1.0 || a == 0.0 {
        format!("{j:.3} J")
    } else if a >= 1e-3 {
        format!("{:.3} mJ", j * 1e3)
    } else if a >= 1e-6 {
        format!("{:.3} uJ", j * 1e6)
    } else {
        format!("{:.3} nJ", j * 1e9)
    }
}
