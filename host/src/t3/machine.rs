//! The machine every `nmcp t3` run is made on, as command-line arguments: the GPU, the
//! links, MCA, the firmware's cost and how the simulation is stepped (`--window-slices`,
//! `--threads`), turned into the library's [`T3Options`].

use nmcp_emulator::t3::gemm::ProducerMemory;
use nmcp_emulator::t3::system::{choose_threads, free_cores};
use nmcp_emulator::t3::{LinkConfig, Simulate, T3Options};
use nmcp_isa::gemm_ext::GemmDataType;

/// Element type on the command line.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Dtype {
    F16,
    F32,
}

impl Dtype {
    pub(crate) fn gemm(self) -> GemmDataType {
        match self {
            Dtype::F16 => GemmDataType::F16,
            Dtype::F32 => GemmDataType::F32,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::F32 => "f32",
        }
    }
}

/// What every T3 run is made on: the GPU and the links.
#[derive(clap::Args, Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct MachineArgs {
    /// The future-hardware variant: Table 8.1's GPU with twice the CUs.
    #[arg(long)]
    gpu_2x_cu: bool,
    /// Link bandwidth per direction in GB/s (Table 8.1: 150 GB/s bidirectional).
    #[arg(long, value_name = "GBPS", default_value_t = LinkConfig::default().bytes_per_ns, value_parser = crate::cmd::numbers::bandwidth_gbps)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::bandwidth_gbps::one")]
    link_gbps: f64,
    /// One-way link latency in ns.
    #[arg(long, value_name = "NS", default_value_t = LinkConfig::default().latency_ns, value_parser = crate::cmd::numbers::duration_ns)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::duration_ns::one")]
    link_latency_ns: f64,
    /// MCA occupancy threshold in queue entries per pseudo-channel (default: picked from
    /// the producer's isolated first stage).
    #[arg(long, value_name = "N")]
    mca_threshold: Option<usize>,
    /// MCA anti-starvation limit in DRAM cycles.
    #[arg(long, value_name = "CYCLES", default_value_t = T3Options::default().mca_starvation_cycles)]
    mca_starvation_cycles: u64,
    /// Seed of the data values.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Split-K factor of the producer GEMM (8.6.7): workgroups adding to each output tile.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
    split_k: u8,
    /// Most 16-cycle slices one GPU runs before the next GPU's turn (at most 31 and what
    /// fits in the link latency; 1 = lockstep): a speed setting, results do not move.
    #[arg(long, value_name = "SLICES", default_value_t = T3Options::default().window_slices, value_parser = clap::value_parser!(u32).range(1..=31))]
    window_slices: u32,
    /// Threads that step the GPUs of one simulation's window in parallel (1 = serial; 0 =
    /// the free cores, those the load average leaves, shared by `--jobs`): a speed
    /// setting, results do not move. `--jobs` runs separate simulations at once.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=64))]
    threads: u32,
    /// The producer's DRAM loads in quarters of its K loop, not one iteration each (hides
    /// the read latency the communication adds; docs/calibration.md).
    #[arg(long)]
    coarse_producer_loads: bool,
    /// Read the producer's input panels as contiguous streams, not in the operands' layout.
    #[arg(long)]
    flat_operand_layout: bool,
    /// Compute requests enter the DRAM controllers' queues before communication's (T3),
    /// and T3-MCA admits communication without its occupancy threshold (docs/calibration.md).
    #[arg(long)]
    compute_first_ingress: bool,
    /// Pick MCA's threshold from the isolated GEMM's requests in flight with its output
    /// writes, not its reads alone (docs/calibration.md).
    #[arg(long)]
    mca_occupancy_with_writes: bool,
    /// Charge nothing for the T3 firmware's CP work (records take effect at their event,
    /// as if programmed by hardware): the bound for the shipped firmware's cost.
    #[arg(long)]
    free_t3_firmware: bool,
}

impl MachineArgs {
    /// Threads per simulation when `jobs` simulations run at once
    /// ([`choose_threads`]: `--threads`, or with 0 the free cores each job gets).
    pub(crate) fn threads_for(&self, jobs: u32) -> u32 {
        choose_threads(self.threads, free_cores(), jobs as usize)
    }

    pub(crate) fn options(&self, gpus: u32, simulate: Simulate, dtype: Dtype) -> T3Options {
        let mut o = T3Options {
            gpus,
            simulate,
            link: LinkConfig {
                bytes_per_ns: self.link_gbps,
                latency_ns: self.link_latency_ns,
            },
            dtype: dtype.gemm(),
            mca_threshold: self.mca_threshold,
            mca_starvation_cycles: self.mca_starvation_cycles,
            seed: self.seed,
            split_k: self.split_k,
            window_slices: self.window_slices,
            threads: self.threads_for(1),
            producer_memory: ProducerMemory {
                per_iteration_loads: !self.coarse_producer_loads,
                operand_layout: !self.flat_operand_layout,
            },
            compute_first_ingress: self.compute_first_ingress,
            mca_occupancy_with_writes: self.mca_occupancy_with_writes,
            limits: crate::limits::sim_limits(),
            ..T3Options::default()
        };
        if self.free_t3_firmware {
            o.firmware_cost = nmcp_emulator::node::cost::FirmwareCost::free();
        }
        if self.gpu_2x_cu {
            o.gpu.cus *= 2;
            o.gpu.name = format!("{}-2x-cu", o.gpu.name);
        }
        o
    }
}
