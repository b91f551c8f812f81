//! A parameterised GPU: compute units, matrix throughput, per-CU resources, LLC and a
//! fluid model of HBM bandwidth.
//!
//! The GEMM model only needs the bandwidth the memory system sustains under many streams,
//! not DRAM command timing, so HBM is a fluid resource here (`hbm_bytes_per_ns` times
//! `hbm_sustained_fraction`); the DRAM-level model serves T3 and NMC, and can stand in for
//! the fluid figure through [`super::mem_port::DramPort`].

use nmcp_isa::gemm_ext::CuResources;
use nmcp_isa::gemm_ext::GemmDataType;
use serde::{Deserialize, Serialize};

/// A GPU preset name that does not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownGpu(pub String);

impl std::fmt::Display for UnknownGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown GPU preset `{}` ({})",
            self.0,
            GpuConfig::NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownGpu {}

/// One GPU configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuConfig {
    /// Short name used in reports and cache keys.
    pub name: String,
    /// Compute units.
    pub cus: u32,
    /// Shader clock in GHz (cycles per ns).
    pub clock_ghz: f64,
    /// Dense matrix FLOP per cycle per CU for f16, bf16, f32 (in that order).
    pub matrix_flops_per_cycle: [f64; 3],
    /// SIMDs per CU: a wave runs on one SIMD, so a workgroup with fewer waves than SIMDs
    /// cannot use the whole CU on its own.
    pub simds_per_cu: u32,
    /// LDS bytes per CU.
    pub lds_bytes_per_cu: u32,
    /// 32-bit vector registers per CU.
    pub vgprs_per_cu: u32,
    /// Wavefront slots per CU.
    pub wave_slots_per_cu: u32,
    /// Hardware limit of resident workgroups per CU.
    pub max_wgs_per_cu: u32,
    /// Threads per wavefront.
    pub wave_size: u32,
    /// Last-level cache bytes.
    pub llc_bytes: u64,
    /// LLC banks (channels).
    pub llc_banks: u32,
    /// LLC bytes per cycle per bank.
    pub llc_bytes_per_cycle_per_bank: f64,
    /// Consecutive bytes one LLC bank (channel) serves before the next takes over; 0
    /// leaves channels out of the model. The loads a GEMM's resident workgroups issue
    /// together get only the bandwidth of the banks they land on (see
    /// `gpu::llc_channel`); Tensile's documentation gives gfx9 16 channels each 256 bytes
    /// wide (its `StaggerUStride` comment).
    #[serde(default = "default_llc_channel_interleave_bytes")]
    pub llc_channel_interleave_bytes: u32,
    /// Cache line bytes (a strided panel wastes part of each line).
    pub line_bytes: u32,
    /// Vector L1 line bytes: the unit a CU requests from the LLC (64 B on GCN/CDNA 1-2).
    #[serde(default = "default_l1_line_bytes")]
    pub l1_line_bytes: u32,
    /// Peak HBM bandwidth in bytes per ns (= GB/s / 1).
    pub hbm_bytes_per_ns: f64,
    /// Fraction of peak HBM bandwidth sustained with many concurrent streams (row
    /// misses, refresh and read/write turnarounds eat the rest).
    pub hbm_sustained_fraction: f64,
    /// Time from a workgroup's placement until its main loop streams (first global loads
    /// in flight, the prologue) plus its epilogue, in ns.
    pub wg_fixed_ns: f64,
    /// Time from a kernel's launch until its first workgroup can be placed, in ns.
    pub kernel_start_ns: f64,
    /// Least time between a kernel's completion and the first workgroup of the next
    /// kernel of the same queue (barrier packet), ns: the completion signal, the packet
    /// processor's turn to the next packet and the cache release/acquire between them,
    /// which the look-ahead over the predecessor's tail cannot hide. 0 (left out of the
    /// serialised form, so older presets keep their cache keys) hides all of it.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub inter_kernel_gap_ns: f64,
    /// Whether kernel start-ups (`kernel_start_ns`) are set up one at a time by a single
    /// front end, whatever queue or stream the kernels come from (`true`), or each
    /// stream's in parallel (`false`, left out of the serialised form so existing presets
    /// keep their cache keys). With it, n kernels launched at once start
    /// `kernel_start_ns` apart, so concurrency cannot hide the start-up of short kernels.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub serial_kernel_start: bool,
    /// Data rate of the HBM's pins, Gb/s: scales the measured HBM queueing delay of the
    /// loaded-latency option (`gemm::LoadedLatency`) by the service time of one access.
    /// 0 (left out of the serialised form) takes the measured preset's own rate.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub hbm_pin_gbps: f64,
    /// GPU-wide rate of f32 atomic adds the LLC completes, per ns: a split-K kernel that
    /// adds its partial tiles into the output with atomics (Triton's `SPLIT_K`) is paced
    /// by the LLC's read-modify-write units, not by its write bandwidth. Each atomic
    /// output byte then costs `llc_bytes_per_ns / (4 x rate)` bytes of LLC bandwidth
    /// (shared with every other kernel's LLC traffic). 0 (left out of the serialised
    /// form) charges atomics as plain writes.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub llc_atomic_adds_per_ns: f64,
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

/// H200: HBM3e pin rate, Gb/s: 4.8 TB/s over six 1,024-bit stacks (4,800 x 8 / 6,144).
const H200_HBM_PIN_GBPS: f64 = 6.25;

/// H200: f32 atomic adds the L2 completes per ns, GPU-wide: fitted on the split-K Triton
/// configurations of the even-indexed half of the dataset's GEMMs (the odd half, held
/// out, implies 364; `docs/calibration.md`), about 2.6 adds per L2 slice per SM clock.
const H200_LLC_ATOMIC_ADDS_PER_NS: f64 = 330.0;

/// H200: time from a block's placement until its main loop streams, plus its epilogue,
/// ns (calibrated on the dataset's smallest GEMMs, `docs/calibration.md`).
const H200_WG_FIXED_NS: f64 = 1000.0;
/// H200: time from a kernel's launch in a CUDA graph until its first block is placed, ns
/// (calibrated on the dataset's smallest GEMMs, `docs/calibration.md`).
const H200_KERNEL_START_NS: f64 = 2000.0;

/// H200: least gap between two kernels of one CUDA-graph stream, ns (calibrated on the
/// dataset's Sequential rows, `docs/calibration.md`).
const H200_INTER_KERNEL_GAP_NS: f64 = 1000.0;

fn default_l1_line_bytes() -> u32 {
    64
}

fn default_llc_channel_interleave_bytes() -> u32 {
    256
}

impl GpuConfig {
    /// The MI100-like GPU of dissertation ch. 7: 120 CUs at 1.502 GHz, matrix cores with
    /// 1024/512/256 FLOP/cycle/CU for f16/bf16/f32 (184.6/92.3/46.1 TFLOPS), 8 MB LLC in
    /// 16 channels, HBM2 at 1.2288 TB/s.
    pub fn mi100() -> Self {
        let r = CuResources::MI100;
        Self {
            name: "mi100".into(),
            cus: r.cus,
            clock_ghz: 1.502,
            matrix_flops_per_cycle: [1024.0, 512.0, 256.0],
            simds_per_cu: 4,
            lds_bytes_per_cu: r.lds_bytes_per_cu,
            vgprs_per_cu: r.vgprs_per_cu,
            wave_slots_per_cu: r.wave_slots_per_cu,
            max_wgs_per_cu: r.max_wgs_per_cu,
            wave_size: r.wave_size,
            llc_bytes: 8 << 20,
            llc_banks: 16,
            llc_bytes_per_cycle_per_bank: 128.0,
            llc_channel_interleave_bytes: 256,
            line_bytes: 128,
            l1_line_bytes: 64,
            hbm_bytes_per_ns: 1228.8,
            hbm_sustained_fraction: 0.85,
            wg_fixed_ns: 1000.0,
            kernel_start_ns: 2000.0,
            inter_kernel_gap_ns: 0.0,
            serial_kernel_start: false,
            // HBM2 at 1.2 GHz DDR: 1,228.8 GB/s over four 1,024-bit stacks.
            hbm_pin_gbps: 2.4,
            llc_atomic_adds_per_ns: 0.0,
        }
    }

    /// The 80-CU GPU of T3's Table 8.1: 1.4 GHz, 16 MB L2 in 64 banks, 128 KB LDS+L1 per
    /// CU (64 KiB of it LDS), 256 KB of registers per CU, 1 TB/s HBM2.
    pub fn t3_table_8_1() -> Self {
        Self {
            name: "t3-table-8.1".into(),
            cus: 80,
            clock_ghz: 1.4,
            matrix_flops_per_cycle: [1024.0, 512.0, 256.0],
            simds_per_cu: 4,
            lds_bytes_per_cu: 64 * 1024,
            vgprs_per_cu: 256 * 1024 / 4,
            wave_slots_per_cu: 40,
            max_wgs_per_cu: 16,
            wave_size: 64,
            llc_bytes: 16 << 20,
            llc_banks: 64,
            llc_bytes_per_cycle_per_bank: 64.0,
            llc_channel_interleave_bytes: 256,
            line_bytes: 128,
            l1_line_bytes: 64,
            hbm_bytes_per_ns: 1000.0,
            hbm_sustained_fraction: 0.85,
            wg_fixed_ns: 1000.0,
            kernel_start_ns: 2000.0,
            inter_kernel_gap_ns: 0.0,
            serial_kernel_start: false,
            hbm_pin_gbps: 0.0,
            llc_atomic_adds_per_ns: 0.0,
        }
    }

    /// GPU-Half and GPU-Quarter of dissertation 7.5.9 (Fig. 7.17): the MI100 with 64 CUs
    /// and 4 MB LLC, or 32 CUs and 2 MB LLC; LLC banks scale with the LLC, HBM bandwidth
    /// stays (the dissertation scales compute with memory bandwidth fixed). Unlike
    /// `mi100/2` (60 CUs: the tuning's resource constraint) these are whole GPUs.
    pub fn mi100_scaled(cus: u32, llc_mb: u64) -> Self {
        let mut g = Self::mi100();
        g.name = format!("mi100-{cus}cu");
        g.llc_banks = (g.llc_banks as u64 * llc_mb / 8).max(1) as u32;
        g.cus = cus;
        g.llc_bytes = llc_mb << 20;
        g
    }

    /// NVIDIA H200 SXM (the GPU of `../shared/data/h200/`), from public specifications:
    /// 132 SMs; 4,096 dense FP16/BF16 tensor FLOP per clock per SM (NVIDIA's 989.4 dense
    /// FP16 TFLOPS over 132 SMs at 1.83 GHz), 256 FP32 FLOP per clock per SM on the CUDA
    /// cores (the dataset runs with TF32 off); the 1.98 GHz SM clock the dataset reports
    /// under load; 228 KiB of shared memory, 64 K 32-bit registers, 64 warps and 32
    /// blocks per SM, 32-thread warps on 4 SM sub-partitions; the 60 MiB L2 the driver
    /// reports (62,914,560 B), whose slices NVIDIA hashes addresses over (no channel
    /// camping), read at 5,120 B per clock (the A100's documented L2 read bandwidth per
    /// clock, 2.3x the V100's 2,048 B: Hopper publishes none, so Ampere's stands in); 128-byte lines fetched in 32-byte sectors; HBM3e at 4.8 TB/s, of which
    /// device-to-device copies sustain 4.3 TB/s on that device (0.9). Start-up and
    /// per-workgroup fixed times are calibrated on the dataset (`docs/calibration.md`).
    pub fn h200() -> Self {
        Self {
            name: "h200".into(),
            cus: 132,
            clock_ghz: 1.98,
            matrix_flops_per_cycle: [4096.0, 4096.0, 256.0],
            simds_per_cu: 4,
            lds_bytes_per_cu: 228 * 1024,
            vgprs_per_cu: 64 * 1024,
            wave_slots_per_cu: 64,
            max_wgs_per_cu: 32,
            wave_size: 32,
            llc_bytes: 62_914_560,
            llc_banks: 64,
            llc_bytes_per_cycle_per_bank: 80.0,
            llc_channel_interleave_bytes: 0,
            line_bytes: 128,
            l1_line_bytes: 32,
            hbm_bytes_per_ns: 4800.0,
            hbm_sustained_fraction: 0.9,
            wg_fixed_ns: H200_WG_FIXED_NS,
            kernel_start_ns: H200_KERNEL_START_NS,
            inter_kernel_gap_ns: H200_INTER_KERNEL_GAP_NS,
            serial_kernel_start: true,
            hbm_pin_gbps: H200_HBM_PIN_GBPS,
            llc_atomic_adds_per_ns: H200_LLC_ATOMIC_ADDS_PER_NS,
        }
    }

    /// Names of the built-in presets (see [`GpuConfig::preset`] for aliases and suffixes).
    pub const NAMES: [&'static str; 5] = [
        "mi100",
        "mi100-half",
        "mi100-quarter",
        "t3-table-8.1",
        "h200",
    ];

    /// A built-in preset by name: `mi100`, `mi100-half` (GPU-Half), `mi100-quarter`
    /// (GPU-Quarter), `t3-table-8.1`; the first and last optionally suffixed `/2`, `/4`
    /// (resource-constrained variants).
    ///
    /// # Errors
    /// [`UnknownGpu`] (its message lists the names) for any other name.
    pub fn preset(name: &str) -> Result<Self, UnknownGpu> {
        Self::lookup(name).ok_or_else(|| UnknownGpu(name.to_string()))
    }

    fn lookup(name: &str) -> Option<Self> {
        match name {
            "mi100-half" | "gpu-half" => {
                let mut g = Self::mi100_scaled(64, 4);
                g.name = "mi100-half".into();
                return Some(g);
            }
            "mi100-quarter" | "gpu-quarter" => {
                let mut g = Self::mi100_scaled(32, 2);
                g.name = "mi100-quarter".into();
                return Some(g);
            }
            _ => {}
        }
        let (base, div) = match name.split_once('/') {
            Some((b, d)) => (b, d.parse::<u32>().ok()?),
            None => (name, 1),
        };
        let g = match base {
            "mi100" => Self::mi100(),
            "t3-table-8.1" | "t3" => Self::t3_table_8_1(),
            "h200" => Self::h200(),
            _ => return None,
        };
        Some(if div == 1 { g } else { g.constrained(div) })
    }

    /// The resource-constrained variant GPU/`div` of ch. 7's tuning: `1/div` of the CUs and
    /// of the LLC (and its banks); memory bandwidth is not constrained, as in the
    /// dissertation (it could not constrain it without changing latency).
    pub fn constrained(&self, div: u32) -> Self {
        let div = div.max(1);
        let mut g = self.clone();
        g.name = format!("{}/{div}", self.name);
        g.cus = (self.cus / div).max(1);
        g.llc_bytes = (self.llc_bytes / u64::from(div)).max(1);
        g.llc_banks = (self.llc_banks / div).max(1);
        g
    }

    /// A static partition of everything (the MIG-like Resource-Partition of 7.4.5): `1/n`
    /// of the CUs, LLC and HBM bandwidth.
    pub fn partition(&self, n: u32) -> Self {
        let n = n.max(1);
        let mut g = self.constrained(n);
        g.name = format!("{}%{n}", self.name);
        g.hbm_bytes_per_ns = self.hbm_bytes_per_ns / f64::from(n);
        g
    }

    /// The per-CU resources the firmware's occupancy formula reads.
    pub fn cu_resources(&self) -> CuResources {
        CuResources {
            cus: self.cus,
            lds_bytes_per_cu: self.lds_bytes_per_cu,
            vgprs_per_cu: self.vgprs_per_cu,
            wave_slots_per_cu: self.wave_slots_per_cu,
            max_wgs_per_cu: self.max_wgs_per_cu,
            wave_size: self.wave_size,
        }
    }

    /// Matrix FLOP per ns of one CU for a data type.
    pub fn cu_flops_per_ns(&self, dtype: GemmDataType) -> f64 {
        let per_cycle = match dtype {
            GemmDataType::F16 => self.matrix_flops_per_cycle[0],
            GemmDataType::Bf16 => self.matrix_flops_per_cycle[1],
            GemmDataType::F32 => self.matrix_flops_per_cycle[2],
        };
        per_cycle * self.clock_ghz
    }

    /// Peak matrix FLOP per ns of the whole GPU.
    pub fn peak_flops_per_ns(&self, dtype: GemmDataType) -> f64 {
        self.cu_flops_per_ns(dtype) * f64::from(self.cus)
    }

    /// Sustained HBM bytes per ns.
    pub fn hbm_sustained(&self) -> f64 {
        self.hbm_bytes_per_ns * self.hbm_sustained_fraction
    }

    /// LLC bytes per ns.
    pub fn llc_bytes_per_ns(&self) -> f64 {
        self.llc_bytes_per_cycle_per_bank * f64::from(self.llc_banks) * self.clock_ghz
    }

    /// LLC bytes one byte of f32 atomic adds costs (1 without an atomic rate: a plain
    /// write). See [`GpuConfig::llc_atomic_adds_per_ns`].
    pub fn llc_atomic_byte_cost(&self) -> f64 {
        if self.llc_atomic_adds_per_ns > 0.0 {
            (self.llc_bytes_per_ns() / (4.0 * self.llc_atomic_adds_per_ns)).max(1.0)
        } else {
            1.0
        }
    }
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self::mi100()
    }
}
