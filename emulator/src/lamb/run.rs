//! One or more LAMB steps on the NMC memory system, driven by the firmware's
//! [`LambSequencer`](nmcp_firmware::nmc::LambSequencer) through the platform traits.
//!
//! Layout: a descriptor table at address 0, then every tensor's five arrays (g, w, m, v,
//! u), each starting on a row stripe (one row in every bank of the device), under the
//! linear NMC mapping [`NMC_LINEAR_MAPPING`]: the 32-byte offset, then every
//! bank-selecting field, then column, then row. So element `i` of all five arrays of a
//! tensor is in the same bank at the same column (dissertation 6.2.2), and one stripe of
//! an array is one row of every bank. The stripe (1 MiB on `lamb-ch6`) is a multiple of
//! the 64 KiB page the dissertation asks for.

use std::fmt;

use nmcp_firmware::nmc::{lay_out, LambJob, LambParams, NmcGeometry, TensorDesc};
use nmcp_firmware::Firmware;

use crate::hbm::{AddressMapping, HbmPreset, MappingError};
use crate::lamb::reference::{LambHyper, TensorState};
use crate::nmc::system::{NmcSystem, NmcSystemConfig, NmcTotals, RunError};

/// The linear NMC mapping, MSB first.
pub const NMC_LINEAR_MAPPING: &str = "ro-co-ba-bg-st-pc-ch";

/// Settings of a LAMB run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LambRunConfig {
    /// NMC system settings (TS size, functional or timing only, host latency).
    pub system: NmcSystemConfig,
    /// Hyperparameters of the first step (later steps count `step` up).
    pub hyper: LambHyper,
}

/// Why a LAMB run failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum LambError {
    /// The mapping does not fit the preset.
    Mapping(MappingError),
    /// The arrays do not fit the device.
    Capacity {
        /// Rows per bank the layout needs.
        rows_needed: u64,
        /// Rows per bank the device has.
        rows: u32,
    },
    /// The firmware or an engine failed.
    Run(RunError),
    /// The firmware stopped without finishing the step.
    Stalled,
    /// Tensor data given does not match the tensor list.
    Data(String),
}

impl fmt::Display for LambError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Mapping(e) => write!(f, "address mapping: {e}"),
            Self::Capacity { rows_needed, rows } => write!(
                f,
                "the arrays need {rows_needed} rows per bank, the device has {rows}"
            ),
            Self::Run(e) => write!(f, "{e}"),
            Self::Stalled => f.write_str("the firmware stopped before the step finished"),
            Self::Data(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for LambError {}

/// Where one tensor's arrays are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorPlace {
    /// The descriptor the firmware reads.
    pub desc: TensorDesc,
    /// Byte addresses of g, w, m, v, u.
    pub addr: [u64; 5],
}

/// The memory layout of a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of one row stripe.
    pub stripe_bytes: u64,
    /// Address of the descriptor table.
    pub table: u64,
    /// Per tensor.
    pub tensors: Vec<TensorPlace>,
    /// Rows per bank in use.
    pub rows_used: u64,
}

/// Lays out tensors of the given element counts.
///
/// # Errors
/// [`LambError::Capacity`] when the arrays need more rows than a bank has.
pub fn layout(preset: &HbmPreset, elements: &[u64]) -> Result<Layout, LambError> {
    // The firmware's layout; the TS size does not enter it.
    let geometry = NmcGeometry {
        pseudo_channels: preset.pseudo_channels() as u16,
        banks_per_pc: preset.banks_per_pseudo_channel() as u16,
        cols_per_row: preset.organisation.columns_per_row,
        column_bytes: preset.organisation.bytes_per_column,
        ts_entries: 0,
    };
    let stripe = geometry.stripe_bytes();
    let table_bytes = elements.len() as u64 * nmcp_firmware::nmc::lamb::TENSOR_DESC_BYTES as u64;
    let capacity = |rows_needed| LambError::Capacity {
        rows_needed,
        rows: preset.organisation.rows,
    };
    let first = table_bytes.div_ceil(stripe);
    let mut row = u32::try_from(first).map_err(|_| capacity(first))?;
    let mut tensors = Vec::with_capacity(elements.len());
    for &n in elements {
        let placed = lay_out(&geometry, n, row)
            .ok_or_else(|| capacity(u64::from(row) + 5 * geometry.rows_per_array(n)))?;
        let d = placed.desc;
        let addr = [d.g_row, d.w_row, d.m_row, d.v_row, d.u_row].map(|r| u64::from(r) * stripe);
        tensors.push(TensorPlace { desc: d, addr });
        row = placed.next_row;
    }
    let row = u64::from(row);
    if row > u64::from(preset.organisation.rows) {
        return Err(capacity(row));
    }
    Ok(Layout {
        stripe_bytes: stripe,
        table: 0,
        tensors,
        rows_used: row,
    })
}

/// What one step cost.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct StepOutcome {
    /// Cycles of the step (first command to last completion).
    pub cycles: u64,
    /// Global gradient norm the firmware computed.
    pub global_norm: f32,
}

/// A model laid out in an NMC memory system with the firmware attached.
pub struct LambRun {
    system: NmcSystem,
    firmware: Firmware,
    layout: Layout,
    config: LambRunConfig,
    steps_done: u32,
}

impl fmt::Debug for LambRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LambRun")
            .field("steps_done", &self.steps_done)
            .finish_non_exhaustive()
    }
}

fn params(h: &LambHyper) -> LambParams {
    LambParams {
        lr: h.lr,
        beta1: h.beta1,
        beta2: h.beta2,
        eps: h.eps,
        weight_decay: h.weight_decay,
        max_grad_norm: h.max_grad_norm.unwrap_or(0.0),
        bias_correction: h.bias_correction,
        step: h.step,
        trust_clamp: h.trust_clamp.unwrap_or(0.0),
    }
}

impl LambRun {
    /// Lays out tensors of `elements` values on `preset` and writes the descriptor table.
    ///
    /// # Errors
    /// Mapping or capacity errors.
    pub fn new(
        preset: HbmPreset,
        elements: &[u64],
        config: LambRunConfig,
    ) -> Result<Self, LambError> {
        let mapping =
            AddressMapping::parse(NMC_LINEAR_MAPPING, &preset).map_err(LambError::Mapping)?;
        let layout = layout(&preset, elements)?;
        let mut system = NmcSystem::new(preset, mapping, config.system.clone());
        for (i, t) in layout.tensors.iter().enumerate() {
            let a = layout.table + (i * nmcp_firmware::nmc::lamb::TENSOR_DESC_BYTES) as u64;
            system.memory_mut().write(a, &t.desc.encode());
        }
        Ok(Self {
            system,
            firmware: Firmware::default(),
            layout,
            config,
            steps_done: 0,
        })
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The system (statistics, memory).
    pub fn system(&self) -> &NmcSystem {
        &self.system
    }

    /// Totals so far.
    pub fn totals(&self) -> NmcTotals {
        self.system.totals()
    }

    /// The firmware (its work counters).
    pub fn firmware(&self) -> &Firmware {
        &self.firmware
    }

    fn check(&self, tensors: &[TensorState]) -> Result<(), LambError> {
        if tensors.len() != self.layout.tensors.len() {
            return Err(LambError::Data(format!(
                "{} tensors given, {} laid out",
                tensors.len(),
                self.layout.tensors.len()
            )));
        }
        for (i, (t, p)) in tensors.iter().zip(&self.layout.tensors).enumerate() {
            let n = p.desc.elements as usize;
            if [t.w.len(), t.g.len(), t.m.len(), t.v.len()]
                .iter()
                .any(|&l| l != n)
            {
                return Err(LambError::Data(format!(
                    "tensor {i}: arrays must all hold {n} values"
                )));
            }
        }
        Ok(())
    }

    /// Writes optimizer state into device memory.
    ///
    /// # Errors
    /// [`LambError::Data`] if the tensors do not match the layout.
    pub fn write_state(&mut self, tensors: &[TensorState]) -> Result<(), LambError> {
        self.check(tensors)?;
        for (t, p) in tensors.iter().zip(&self.layout.tensors) {
            let m = self.system.memory_mut();
            m.write_f32(p.addr[0], &t.g);
            m.write_f32(p.addr[1], &t.w);
            m.write_f32(p.addr[2], &t.m);
            m.write_f32(p.addr[3], &t.v);
        }
        Ok(())
    }

    /// Writes only the gradients (between steps).
    ///
    /// # Errors
    /// [`LambError::Data`] if a length does not match.
    pub fn write_gradients(&mut self, grads: &[Vec<f32>]) -> Result<(), LambError> {
        for (i, (g, p)) in grads.iter().zip(&self.layout.tensors).enumerate() {
            if g.len() as u64 != p.desc.elements {
                return Err(LambError::Data(format!(
                    "tensor {i}: {} gradients for {} weights",
                    g.len(),
                    p.desc.elements
                )));
            }
            self.system.memory_mut().write_f32(p.addr[0], g);
        }
        Ok(())
    }

    /// Reads w, m and v back into `tensors` (g is left alone).
    ///
    /// # Errors
    /// [`LambError::Data`] if the tensors do not match the layout.
    pub fn read_state(&self, tensors: &mut [TensorState]) -> Result<(), LambError> {
        self.check(tensors)?;
        for (t, p) in tensors.iter_mut().zip(&self.layout.tensors) {
            let m = self.system.memory();
            m.read_f32(p.addr[1], &mut t.w);
            m.read_f32(p.addr[2], &mut t.m);
            m.read_f32(p.addr[3], &mut t.v);
        }
        Ok(())
    }

    /// Runs one LAMB step (the `k`-th one counts `step = hyper.step + k` for the bias
    /// correction).
    ///
    /// # Errors
    /// Firmware or engine errors, or a stall.
    pub fn step(&mut self) -> Result<StepOutcome, LambError> {
        let p = self.system.preset();
        let o = &p.organisation;
        let geometry = NmcGeometry {
            pseudo_channels: p.pseudo_channels() as u16,
            banks_per_pc: p.banks_per_pseudo_channel() as u16,
            cols_per_row: o.columns_per_row,
            column_bytes: o.bytes_per_column,
            ts_entries: self.config.system.ts_entries.min(usize::from(u16::MAX)) as u16,
        };
        let mut h = self.config.hyper;
        h.step = h.step.saturating_add(self.steps_done);
        let job = LambJob {
            table: self.layout.table,
            tensors: self.layout.tensors.len() as u32,
            geometry,
            params: params(&h),
        };
        let start = self.system.now().max(self.system.engines_done());
        let sys = &mut self.system;
        self.firmware.nmc.start_lamb(job, sys).map_err(|e| {
            LambError::Run(RunError {
                firmware: e,
                engine: sys.take_error(),
            })
        })?;
        sys.run_firmware(&mut self.firmware)
            .map_err(LambError::Run)?;
        if !self.firmware.nmc.lamb.is_done() {
            return Err(LambError::Stalled);
        }
        self.steps_done += 1;
        let end = self.system.now().max(self.system.engines_done());
        Ok(StepOutcome {
            cycles: end - start,
            global_norm: self.firmware.nmc.lamb.global_norm(),
        })
    }
}
