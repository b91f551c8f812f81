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

use nmcp_firmware::nmc::{lay_out, LambJob, LambParams, NmcGeometry, Stage1Program, TensorDesc};
use nmcp_firmware::{Firmware, FirmwareError};

use crate::gpu::NoGpu;
use crate::hbm::{AddressMapping, HbmPreset, MappingError};
use crate::lamb::reference::{LambHyper, TensorState};
use crate::nmc::engine::EngineError;
use crate::nmc::system::{NmcBlock, NmcSystemConfig, NmcTotals};
use crate::node::{FirmwareCost, GpuNode, GpuNodeConfig};
use crate::system::System;

/// The linear NMC mapping, MSB first.
pub const NMC_LINEAR_MAPPING: &str = "ro-co-ba-bg-st-pc-ch";

/// Settings of a LAMB run.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct LambRunConfig {
    /// NMC system settings (TS size, functional or timing only, host latency).
    pub system: NmcSystemConfig,
    /// Hyperparameters of the first step (later steps count `step` up).
    pub hyper: LambHyper,
    /// What the sequencer's work costs on the CP (charged to the CP's timeline; the
    /// commands a handler issues take effect when it ends).
    #[serde(skip)]
    pub cost: FirmwareCost,
    /// The firmware's stage-1 program (both compute identical values).
    #[serde(serialize_with = "serialize_program")]
    pub program: Stage1Program,
}

fn serialize_program<S: serde::Serializer>(p: &Stage1Program, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.name())
}

/// A firmware error and, when an engine caused it, the engine's reason.
#[derive(Debug)]
pub struct RunError {
    /// What the firmware reported.
    pub firmware: FirmwareError,
    /// The engine error behind it.
    pub engine: Option<EngineError>,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.engine {
            Some(e) => write!(f, "{} ({e})", self.firmware),
            None => write!(f, "{}", self.firmware),
        }
    }
}

impl std::error::Error for RunError {}

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
        job_contexts: 1,
        alu_chunk: 1,
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

/// Rows per subarray of `preset`, once the descriptor table at the start of `layout`
/// (kept in subarray 0 by both MASA layouts) is known to fit one.
///
/// # Errors
/// [`LambError::Data`] when the table needs more rows than a subarray has.
fn subarray_rows(preset: &HbmPreset, layout: &Layout) -> Result<u32, LambError> {
    let rows_per = preset.organisation.rows / preset.subarrays.per_bank.max(1);
    let table_rows = layout.tensors.first().map_or(0, |t| t.desc.g_row);
    if table_rows > rows_per {
        return Err(LambError::Data(format!(
            "masa layout: the descriptor table needs {table_rows} rows, a subarray has {rows_per}"
        )));
    }
    Ok(rows_per)
}

/// The MASA layout's row mapping (docs/decisions/dram.md, "Subarrays (MASA)"): the
/// firmware's layout ([`layout`]) stays as it is (the board shares it); the engines'
/// commands see array `k` of every tensor (g, w, m, v, u for k = 0..5) in subarray `k + 1`,
/// the tensors' rows of one array one after the other from the subarray's first row, so
/// a tensor's five arrays are in five different subarrays of every bank. Subarray 0 keeps
/// the descriptor table's rows (unmapped rows map to themselves).
///
/// # Errors
/// [`LambError::Data`] when the preset has fewer than six subarrays per bank or an array
/// of the model does not fit one subarray.
pub fn masa_row_map(
    preset: &HbmPreset,
    layout: &Layout,
) -> Result<crate::nmc::engine::RowMap, LambError> {
    let per_bank = preset.subarrays.per_bank;
    if per_bank < 6 {
        return Err(LambError::Data(format!(
            "row policy `masa` needs a preset with at least 6 subarrays per bank (the \
             descriptor table and a tensor's five arrays; e.g. lamb-ch6-masa); `{}` has {per_bank}",
            preset.name
        )));
    }
    let rows_per = subarray_rows(preset, layout)?;
    let first = |d: &TensorDesc| [d.g_row, d.w_row, d.m_row, d.v_row, d.u_row];
    let mut used = [0u32; 5];
    let mut ranges = Vec::with_capacity(5 * layout.tensors.len());
    for (i, t) in layout.tensors.iter().enumerate() {
        let rows = t.desc.w_row - t.desc.g_row;
        for (k, start) in first(&t.desc).into_iter().enumerate() {
            let at = used[k];
            if u64::from(at) + u64::from(rows) > u64::from(rows_per) {
                return Err(LambError::Data(format!(
                    "masa layout: array {k} (g, w, m, v, u) of tensor {i} does not fit \
                     subarray {}: {} rows used, {rows} more needed, a subarray has {rows_per}",
                    k + 1,
                    at
                )));
            }
            ranges.push((start, rows, (k as u32 + 1) * rows_per + at));
            used[k] = at + rows;
        }
    }
    crate::nmc::engine::RowMap::new(ranges).map_err(|e| LambError::Data(format!("{e}")))
}

/// Subarrays per bank the activate-ahead layout ([`masa_alternating_row_map`]) needs: the
/// descriptor table's and two for each of a tensor's five arrays.
pub const ALTERNATING_SUBARRAYS: u32 = 11;

/// The activate-ahead layout of [`crate::nmc::engine::RowPolicy::MasaDecoupled`]: as
/// [`masa_row_map`], but array `k` (g, w, m, v, u for k = 0..5) of every tensor alternates
/// its rows between subarrays `2k + 1` (the tensor's even rows) and `2k + 2` (its odd
/// rows), so an array's next row sits in a subarray other than its current one and can be
/// activated while the stream still works in the current one. Subarray 0 keeps the
/// descriptor table. The firmware's layout and the functional store are untouched.
///
/// # Errors
/// [`LambError::Data`] when the preset has fewer than [`ALTERNATING_SUBARRAYS`] subarrays
/// per bank or an array's rows do not fit their two subarrays.
pub fn masa_alternating_row_map(
    preset: &HbmPreset,
    layout: &Layout,
) -> Result<crate::nmc::engine::RowMap, LambError> {
    let per_bank = preset.subarrays.per_bank;
    if per_bank < ALTERNATING_SUBARRAYS {
        return Err(LambError::Data(format!(
            "the activate-ahead layout needs a preset with at least {ALTERNATING_SUBARRAYS} \
             subarrays per bank (the descriptor table and two for each of a tensor's five \
             arrays; e.g. lamb-ch6-masa16); `{}` has {per_bank}",
            preset.name
        )));
    }
    let rows_per = subarray_rows(preset, layout)?;
    let first = |d: &TensorDesc| [d.g_row, d.w_row, d.m_row, d.v_row, d.u_row];
    let mut used = [[0u32; 2]; 5];
    let mut ranges = Vec::new();
    for (i, t) in layout.tensors.iter().enumerate() {
        let rows = t.desc.w_row - t.desc.g_row;
        for (k, start) in first(&t.desc).into_iter().enumerate() {
            for j in 0..rows {
                let half = (j % 2) as usize;
                let at = used[k][half];
                if at >= rows_per {
                    return Err(LambError::Data(format!(
                        "masa layout: array {k} (g, w, m, v, u) of tensor {i} does not fit \
                         subarrays {} and {}: a subarray has {rows_per} rows",
                        2 * k + 1,
                        2 * k + 2
                    )));
                }
                let sub = 2 * k as u32 + 1 + half as u32;
                ranges.push((start + j, 1, sub * rows_per + at));
                used[k][half] = at + 1;
            }
        }
    }
    crate::nmc::engine::RowMap::new(ranges).map_err(|e| LambError::Data(format!("{e}")))
}

/// What one step cost.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct StepOutcome {
    /// Cycles of the step (first command to last completion).
    pub cycles: u64,
    /// Global gradient norm the firmware computed.
    pub global_norm: f32,
}

/// A model laid out in a node's HBM, with the node's firmware sequencing the step.
pub struct LambRun {
    system: System<NoGpu>,
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

/// The job the firmware runs for step `k` (counting from 0) of `config` over `layout`:
/// the geometry of `preset` and the hyperparameters with the step counted up.
pub fn lamb_job(preset: &HbmPreset, layout: &Layout, config: &LambRunConfig, k: u32) -> LambJob {
    let o = &preset.organisation;
    let geometry = NmcGeometry {
        pseudo_channels: preset.pseudo_channels() as u16,
        banks_per_pc: preset.banks_per_pseudo_channel() as u16,
        cols_per_row: o.columns_per_row,
        column_bytes: o.bytes_per_column,
        ts_entries: config.system.ts_entries.min(usize::from(u16::MAX)) as u16,
        // The sequencer splits the TS between the engine's job contexts (a setting tied
        // to the engine setup: only `masa-2jobs-split` asks for it).
        job_contexts: crate::nmc::engine::job_contexts(config.system.row_policy),
        alu_chunk: crate::nmc::engine::alu_chunk(preset, config.system.alu_model),
    };
    let mut h = config.hyper;
    h.step = h.step.saturating_add(k);
    LambJob {
        table: layout.table,
        tensors: layout.tensors.len() as u32,
        geometry,
        params: params(&h),
        program: config.program,
    }
}

/// Writes the descriptor table of `layout` into `memory`.
///
/// # Errors
/// [`LambError::Data`] when the table lies outside device memory.
pub fn write_descriptors(
    memory: &mut crate::memory::DeviceMemory,
    layout: &Layout,
) -> Result<(), LambError> {
    for (i, t) in layout.tensors.iter().enumerate() {
        let a = layout.table + (i * nmcp_firmware::nmc::lamb::TENSOR_DESC_BYTES) as u64;
        memory
            .write(a, &t.desc.encode())
            .map_err(|e| LambError::Data(format!("descriptor table: {e}")))?;
    }
    Ok(())
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
        let mut system_config = config.system.clone();
        match system_config.row_policy {
            crate::nmc::engine::RowPolicy::Masa => {
                system_config.row_map = Some(std::sync::Arc::new(masa_row_map(&preset, &layout)?));
            }
            // Decoupled: the activate-ahead layout where the preset has the subarrays for
            // it, else MASA's (an array's next row then shares its subarray and is not
            // activated ahead).
            crate::nmc::engine::RowPolicy::MasaDecoupled
            | crate::nmc::engine::RowPolicy::MasaTwoJobs
            | crate::nmc::engine::RowPolicy::MasaTwoJobsSplit => {
                let map = if preset.subarrays.per_bank >= ALTERNATING_SUBARRAYS {
                    masa_alternating_row_map(&preset, &layout)?
                } else {
                    masa_row_map(&preset, &layout)?
                };
                system_config.row_map = Some(std::sync::Arc::new(map));
            }
            _ => {}
        }
        let node_config = GpuNodeConfig {
            cost: config.cost,
            ..GpuNodeConfig::nmc_only(preset, mapping, system_config)
        };
        let node = GpuNode::new(0, node_config, NoGpu::default())
            .map_err(|e| LambError::Data(format!("node: {e}")))?;
        let mut system =
            System::new(vec![node]).map_err(|e| LambError::Data(format!("system: {e}")))?;
        write_descriptors(system.node_mut(0).memory_mut(), &layout)?;
        Ok(Self {
            system,
            layout,
            config,
            steps_done: 0,
        })
    }

    /// Starts recording a timeline of the node (CP handler spans, NMC engine spans, the
    /// macro-command queue, bank rows; see [`System::enable_timeline`]).
    pub fn enable_timeline(&mut self, config: crate::timeline::TimelineConfig) {
        self.system.enable_timeline(config);
    }

    /// The timeline recorded so far, if recording.
    pub fn take_timeline(&mut self) -> Option<crate::timeline::Timeline> {
        self.system.take_timeline()
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The system the step runs in (one NMC node).
    pub fn system(&self) -> &System<NoGpu> {
        &self.system
    }

    /// The node's NMC block (engines, controllers, command logs).
    pub fn nmc(&self) -> &NmcBlock {
        self.node()
            .nmc()
            .unwrap_or_else(|| unreachable!("a LAMB node has NMC engines"))
    }

    fn node(&self) -> &GpuNode<NoGpu> {
        self.system.node(0)
    }

    /// Totals so far.
    pub fn totals(&self) -> NmcTotals {
        self.nmc().totals()
    }

    /// The firmware (its work counters).
    pub fn firmware(&self) -> &Firmware {
        self.node().firmware()
    }

    /// CP cycles the firmware was charged so far (every handler of every step).
    pub fn cp_cycles(&self) -> u64 {
        self.node().summary().cp_cycles
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
            let m = self.system.node_mut(0).memory_mut();
            m.write_f32(p.addr[0], &t.g)
                .and_then(|()| m.write_f32(p.addr[1], &t.w))
                .and_then(|()| m.write_f32(p.addr[2], &t.m))
                .and_then(|()| m.write_f32(p.addr[3], &t.v))
                .map_err(|e| LambError::Data(format!("optimizer state: {e}")))?;
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
            self.system
                .node_mut(0)
                .memory_mut()
                .write_f32(p.addr[0], g)
                .map_err(|e| LambError::Data(format!("tensor {i}: {e}")))?;
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
            let m = self.node().memory();
            m.read_f32(p.addr[1], &mut t.w)
                .and_then(|()| m.read_f32(p.addr[2], &mut t.m))
                .and_then(|()| m.read_f32(p.addr[3], &mut t.v))
                .map_err(|e| LambError::Data(format!("optimizer state: {e}")))?;
        }
        Ok(())
    }

    /// Runs one LAMB step (the `k`-th one counts `step = hyper.step + k` for the bias
    /// correction).
    ///
    /// # Errors
    /// Firmware or engine errors, or a stall.
    pub fn step(&mut self) -> Result<StepOutcome, LambError> {
        let nmc = self.nmc();
        let job = lamb_job(nmc.preset(), &self.layout, &self.config, self.steps_done);
        let clock = self.node().dram_clock();
        let start = clock.cycle_at(self.system.now()).max(nmc.engines_done());
        let run_error = |sys: &mut System<NoGpu>, e: FirmwareError| {
            LambError::Run(RunError {
                firmware: e,
                engine: sys.node_mut(0).take_nmc_error(),
            })
        };
        if let Err(e) = self.system.start_lamb(0, job) {
            return Err(run_error(&mut self.system, e));
        }
        self.system.run(u64::MAX);
        if let Some(e) = self.node().last_error() {
            return Err(run_error(&mut self.system, e));
        }
        if !self.firmware().nmc.lamb.is_done() {
            return Err(LambError::Stalled);
        }
        self.steps_done += 1;
        let end = clock
            .cycle_at_or_after(self.system.now())
            .max(self.nmc().engines_done());
        Ok(StepOutcome {
            cycles: end - start,
            global_norm: self.firmware().nmc.lamb.global_norm(),
        })
    }
}
