//! The `[energy]` section of an HBM preset: supply voltage and IDD currents in the style of
//! DRAMPower and DRAMsim3, I/O and TSV energy per bit, the NMC bank ALU's energy per
//! operation and the GPU's per-FLOP, per-LLC-byte and static figures. Checked on load like
//! every other section; every value and its source is a row of `docs/calibration.md`.

use serde::{Deserialize, Serialize};

/// Energy parameters. Currents are per `idd_width_bits` of data bus (the width the
/// datasheet or simulator config states them for) and scaled to a pseudo-channel's
/// `organisation.bus_width_bits` when used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnergyParams {
    /// Core supply voltage (V).
    pub vdd_v: f64,
    /// Data-bus width the IDD currents are given for (bits).
    pub idd_width_bits: u32,
    /// IDD0: one bank activated and precharged every tRC (mA).
    pub idd0_ma: f64,
    /// IDD2N: precharged standby (mA).
    pub idd2n_ma: f64,
    /// IDD3N: active standby, at least one bank open (mA).
    pub idd3n_ma: f64,
    /// IDD4R: burst reads (mA).
    pub idd4r_ma: f64,
    /// IDD4W: burst writes (mA).
    pub idd4w_ma: f64,
    /// IDD5AB: all-bank refresh, during tRFC (mA).
    pub idd5ab_ma: f64,
    /// Energy per bit crossing the interface between the stack and the GPU: the two PHYs
    /// and the interposer wire (pJ). Not in IDD4R/IDD4W (DRAMPower's convention).
    pub io_pj_per_bit: f64,
    /// Energy per bit through the stack's TSVs between the core die and the base die (pJ).
    pub tsv_pj_per_bit: f64,
    /// NMC bank ALU: energy per operation on one 32-bit lane (pJ).
    pub nmc_alu_pj_per_lane_op: f64,
    /// GPU: dynamic energy per FP16 FLOP at the matrix rate (pJ).
    pub gpu_pj_per_flop_f16: f64,
    /// GPU: dynamic energy per FP32 FLOP (pJ).
    pub gpu_pj_per_flop_f32: f64,
    /// GPU: energy per byte read or written in the last-level cache (pJ).
    pub gpu_llc_pj_per_byte: f64,
    /// GPU: static (leakage and idle) power while a run lasts (W).
    pub gpu_static_w: f64,
}

impl Default for EnergyParams {
    /// DRAMsim3's `HBM2_4Gb_x128.ini` currents and the figures `docs/calibration.md` cites
    /// (the built-in presets state them explicitly; this is for preset files written
    /// before the section existed).
    fn default() -> Self {
        Self {
            vdd_v: 1.2,
            idd_width_bits: 128,
            idd0_ma: 65.0,
            idd2n_ma: 40.0,
            idd3n_ma: 55.0,
            idd4r_ma: 390.0,
            idd4w_ma: 500.0,
            idd5ab_ma: 250.0,
            io_pj_per_bit: 1.79,
            tsv_pj_per_bit: 0.23,
            nmc_alu_pj_per_lane_op: 0.5,
            gpu_pj_per_flop_f16: 1.14,
            gpu_pj_per_flop_f32: 4.56,
            gpu_llc_pj_per_byte: 1.56,
            gpu_static_w: 90.0,
        }
    }
}

/// A value of the `[energy]` section that breaks a rule: the field and the rule.
pub type ParamError = (&'static str, String);

impl EnergyParams {
    /// Every value finite and in its physical range; the currents ordered as a DRAM's are
    /// (standby below activate, active standby at least precharged standby, bursts and
    /// refresh above active standby), so that no per-command energy comes out negative.
    pub fn check(&self) -> Result<(), ParamError> {
        let ranged: [(&'static str, f64, f64, f64); 14] = [
            ("energy.vdd_v", self.vdd_v, 0.3, 5.0),
            ("energy.idd0_ma", self.idd0_ma, 0.0, 1e5),
            ("energy.idd2n_ma", self.idd2n_ma, 0.0, 1e5),
            ("energy.idd3n_ma", self.idd3n_ma, 0.0, 1e5),
            ("energy.idd4r_ma", self.idd4r_ma, 0.0, 1e5),
            ("energy.idd4w_ma", self.idd4w_ma, 0.0, 1e5),
            ("energy.idd5ab_ma", self.idd5ab_ma, 0.0, 1e5),
            ("energy.io_pj_per_bit", self.io_pj_per_bit, 0.0, 100.0),
            ("energy.tsv_pj_per_bit", self.tsv_pj_per_bit, 0.0, 100.0),
            (
                "energy.nmc_alu_pj_per_lane_op",
                self.nmc_alu_pj_per_lane_op,
                0.0,
                1e4,
            ),
            (
                "energy.gpu_pj_per_flop_f16",
                self.gpu_pj_per_flop_f16,
                0.0,
                1e4,
            ),
            (
                "energy.gpu_pj_per_flop_f32",
                self.gpu_pj_per_flop_f32,
                0.0,
                1e4,
            ),
            (
                "energy.gpu_llc_pj_per_byte",
                self.gpu_llc_pj_per_byte,
                0.0,
                1e4,
            ),
            ("energy.gpu_static_w", self.gpu_static_w, 0.0, 1e4),
        ];
        for (field, v, lo, hi) in ranged {
            if !v.is_finite() || !(lo..=hi).contains(&v) {
                return Err((field, format!("is {v}; must be a number in [{lo}, {hi}]")));
            }
        }
        if self.idd_width_bits == 0 || self.idd_width_bits > 4096 {
            return Err((
                "energy.idd_width_bits",
                format!("is {}; must be 1..=4096", self.idd_width_bits),
            ));
        }
        let order: [(&'static str, f64, &str, f64); 5] = [
            ("energy.idd3n_ma", self.idd3n_ma, "IDD2N", self.idd2n_ma),
            ("energy.idd0_ma", self.idd0_ma, "IDD3N", self.idd3n_ma),
            ("energy.idd4r_ma", self.idd4r_ma, "IDD3N", self.idd3n_ma),
            ("energy.idd4w_ma", self.idd4w_ma, "IDD3N", self.idd3n_ma),
            ("energy.idd5ab_ma", self.idd5ab_ma, "IDD3N", self.idd3n_ma),
        ];
        for (field, v, other, w) in order {
            if v < w {
                return Err((field, format!("is {v} mA; must be >= {other} ({w} mA)")));
            }
        }
        Ok(())
    }
}
