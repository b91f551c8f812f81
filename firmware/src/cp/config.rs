//! The CP's configuration and its errors: [`CpConfig`], the check of its queue descriptors,
//! the span of the queue rings it yields, and [`CpError`] (the CP's own refusals and the
//! platform errors it can meet).

use super::*;

/// Errors of the command processor: its own refusals and the errors of the two platform
/// blocks it is bound on ([`DeviceMemory`], [`KernelDispatcher`]). Only the top floor
/// (`crate::firmware`) turns it into a `FirmwareError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CpError {
    /// A bounded table overflowed.
    Capacity,
    /// A queue descriptor is unusable (size not a power of two, or ring / index words
    /// outside device memory).
    BadQueue {
        /// Queue index.
        queue: u8,
    },
    /// A device-memory access failed.
    Memory(MemoryError),
    /// The dispatcher refused a request.
    Dispatch(DispatchError),
}

impl From<MemoryError> for CpError {
    fn from(e: MemoryError) -> Self {
        Self::Memory(e)
    }
}

impl From<DispatchError> for CpError {
    fn from(e: DispatchError) -> Self {
        Self::Dispatch(e)
    }
}

impl fmt::Display for CpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capacity => f.write_str("CP table capacity exceeded"),
            Self::BadQueue { queue } => write!(
                f,
                "queue {queue}: size not a power of two or ring/index words outside device memory"
            ),
            Self::Memory(e) => write!(f, "device memory: {e}"),
            Self::Dispatch(e) => write!(f, "dispatch: {e}"),
        }
    }
}

impl core::error::Error for CpError {}

/// An error the CP's event handlers can return: [`CpError`] itself, or a caller's wider
/// error that each of the CP's errors converts into (the top floor's `FirmwareError`).
///
/// The handlers build `E` where an error arises, so the top floor gets its own error with
/// no conversion on the way out. Measured on RV32 (docs/decisions/cp.md, "Errors"): a
/// `CpError` converted at the top costs 7 instructions per handled event (the result comes
/// back in a temporary, its tag is checked and `FirmwareError`'s written), and returned in
/// a register instead of through memory it costs the general decision 9 %; built as `E` the
/// CP's code is the code it was when it returned `FirmwareError`.
pub trait FromCpErrors: From<CpError> + From<MemoryError> + From<DispatchError> {}

impl<E: From<CpError> + From<MemoryError> + From<DispatchError>> FromCpErrors for E {}

/// Everything the CP needs to know about its GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpConfig {
    /// Active queues, index = queue id (addresses kept as 32-bit offsets,
    /// [`QueueTable`]).
    pub queues: QueueTable,
    /// Device memory every address must fall in.
    pub device: DeviceRange,
    /// Per-CU resources, for occupancy and waves.
    pub resources: CuResources,
    /// The trained predictor.
    pub predictor: CdPredictor,
    /// GOLDYLOC's concurrency control. Off, the CP is the baseline one of a GPU without
    /// GOLDYLOC: every kernel is dispatched with its own kernel object as soon as it
    /// reaches a queue head (barrier bits still honoured), no GEMM extension record is
    /// read, nothing is predicted and no group waits for another — the Default,
    /// CU-Partition and Resource-Partition configurations of dissertation 7.4.5, run
    /// through the same firmware and charged its real (smaller) cost.
    pub concurrency_control: bool,
    /// When a GEMM group stops holding back the next decision. `false`: when its last
    /// member completes (a group barrier). `true`: when its last member has placed all its
    /// workgroups — the queue head moved, and dissertation 7.3.4 has the CP re-decide on
    /// every head change — so the group's tail overlaps the next group's start.
    pub release_group_on_dispatch: bool,
}

/// Checks every queue descriptor of `config` and returns the CP's `rings` span
/// (`CpState::rings`).
pub(super) fn check_config(config: &CpConfig) -> Result<(DevAddr, u64), CpError> {
    for (i, q) in config.queues.iter().enumerate() {
        if !q.is_valid(&config.device) {
            return Err(CpError::BadQueue { queue: i as u8 });
        }
    }
    let rings = config
        .queues
        .iter()
        .map(|q| {
            let len = u64::from(q.size_packets).saturating_mul(AQL_PACKET_BYTES as u64);
            (q.ring_base, q.ring_base.saturating_add(len))
        })
        .fold((DevAddr::MAX, 0), |(lo, hi), (a, b)| (lo.min(a), hi.max(b)));
    let lo = rings.0.saturating_sub(7);
    Ok((lo, rings.1.saturating_sub(lo)))
}

impl Default for CpConfig {
    /// [`CpConfig::empty`].
    fn default() -> Self {
        Self::empty()
    }
}

impl CpConfig {
    /// No queues, an empty device range, MI100 resources, the untrained predictor and
    /// concurrency control on (what [`CommandProcessor::configure_in_place`] fills).
    pub fn empty() -> Self {
        Self {
            queues: QueueTable::new(),
            device: DeviceRange { base: 0, len: 0 },
            resources: CuResources::MI100,
            predictor: CdPredictor::default(),
            concurrency_control: true,
            release_group_on_dispatch: false,
        }
    }
}
