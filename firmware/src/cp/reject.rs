//! Why the CP completes a packet without running it, and the value it stores into the
//! packet's completion signal.
//!
//! A successful completion leaves the signal at 0 (as decrementing HSA's usual initial 1
//! does). A rejection stores `-code`, so a consumer waiting for `<= 0` wakes up either way
//! and can tell an error by the sign; [`RejectCode::from_signal_value`] recovers the code.

use core::fmt;

use nmcp_isa::aql::AqlError;
use nmcp_isa::gemm_ext::GemmExtError;

use super::features::FeatureError;
use crate::platform::MemoryError;

/// Error codes a rejected packet's completion signal carries (negated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
#[repr(u16)]
pub enum RejectCode {
    /// Header type is not an `hsa_packet_type_t` value.
    UnknownPacketType = 1,
    /// Vendor-specific or agent-dispatch packet.
    UnsupportedPacketType = 2,
    /// Reserved bits set.
    ReservedBits = 3,
    /// Reserved fence scope.
    FenceScope = 4,
    /// Dimensions 0.
    Dimensions = 5,
    /// Zero workgroup size.
    ZeroWorkgroupSize = 6,
    /// Zero grid size.
    ZeroGridSize = 7,
    /// Workgroup larger than the grid.
    WorkgroupExceedsGrid = 8,
    /// A packet address outside device memory.
    AddressOutOfRange = 9,
    /// GEMM extension: bad magic.
    ExtMagic = 10,
    /// GEMM extension: unsupported version.
    ExtVersion = 11,
    /// GEMM extension: kernel count 0 or above 3.
    ExtKernelCount = 12,
    /// GEMM extension: a CD's kernel index beyond the kernel map.
    ExtKernelIndex = 13,
    /// GEMM extension: any other malformed field.
    ExtMalformed = 14,
    /// A kernel object of the extension outside device memory.
    KernelObjectOutOfRange = 15,
    /// A tuned kernel cannot be resident on this GPU.
    KernelNotResident = 16,
    /// The extension could not be read.
    ExtUnreadable = 17,
    /// A barrier's dependency signal carries an error.
    DependencyFailed = 18,
    /// A kernel of the extension would launch more workgroups than a u64 counts.
    GridTooLarge = 19,
    /// The packet's kernel object is not one of the extension's kernels.
    KernelNotListed = 20,
    /// The dispatcher refused the packet as not describing a runnable kernel.
    DispatchRefused = 21,
    /// Anything else.
    Other = 255,
}

const ALL_CODES: [RejectCode; 22] = [
    RejectCode::UnknownPacketType,
    RejectCode::UnsupportedPacketType,
    RejectCode::ReservedBits,
    RejectCode::FenceScope,
    RejectCode::Dimensions,
    RejectCode::ZeroWorkgroupSize,
    RejectCode::ZeroGridSize,
    RejectCode::WorkgroupExceedsGrid,
    RejectCode::AddressOutOfRange,
    RejectCode::ExtMagic,
    RejectCode::ExtVersion,
    RejectCode::ExtKernelCount,
    RejectCode::ExtKernelIndex,
    RejectCode::ExtMalformed,
    RejectCode::KernelObjectOutOfRange,
    RejectCode::KernelNotResident,
    RejectCode::ExtUnreadable,
    RejectCode::DependencyFailed,
    RejectCode::GridTooLarge,
    RejectCode::KernelNotListed,
    RejectCode::DispatchRefused,
    RejectCode::Other,
];

impl RejectCode {
    /// The completion-signal value for this code.
    pub const fn signal_value(self) -> i64 {
        -(self as i64)
    }

    /// The code a completion-signal value carries, if it is an error value.
    pub fn from_signal_value(v: i64) -> Option<Self> {
        ALL_CODES.iter().copied().find(|c| c.signal_value() == v)
    }

    /// Short snake-case name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::UnknownPacketType => "unknown_packet_type",
            Self::UnsupportedPacketType => "unsupported_packet_type",
            Self::ReservedBits => "reserved_bits",
            Self::FenceScope => "fence_scope",
            Self::Dimensions => "dimensions",
            Self::ZeroWorkgroupSize => "zero_workgroup_size",
            Self::ZeroGridSize => "zero_grid_size",
            Self::WorkgroupExceedsGrid => "workgroup_exceeds_grid",
            Self::AddressOutOfRange => "address_out_of_range",
            Self::ExtMagic => "ext_magic",
            Self::ExtVersion => "ext_version",
            Self::ExtKernelCount => "ext_kernel_count",
            Self::ExtKernelIndex => "ext_kernel_index",
            Self::ExtMalformed => "ext_malformed",
            Self::KernelObjectOutOfRange => "kernel_object_out_of_range",
            Self::KernelNotResident => "kernel_not_resident",
            Self::ExtUnreadable => "ext_unreadable",
            Self::DependencyFailed => "dependency_failed",
            Self::GridTooLarge => "grid_too_large",
            Self::KernelNotListed => "kernel_not_listed",
            Self::DispatchRefused => "dispatch_refused",
            Self::Other => "other",
        }
    }
}

impl fmt::Display for RejectCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a packet was rejected, with the detail of the decoder that refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum RejectReason {
    /// The packet does not decode or validate.
    Packet(AqlError),
    /// The GEMM extension does not decode or validate.
    Extension(GemmExtError),
    /// The extension's kernel map cannot give features.
    Features(FeatureError),
    /// Kernel `index` of the extension lies outside device memory.
    KernelObject {
        /// Index into the kernel map.
        index: u8,
        /// Its address.
        address: u64,
    },
    /// Reading the extension failed.
    Memory(MemoryError),
    /// Kernel `index` of the extension would launch more than `u64::MAX` workgroups.
    GridTooLarge {
        /// Index into the kernel map.
        index: u8,
    },
    /// The packet's kernel object is none of the extension's kernels, so no tuned
    /// alternative is known to compute the same GEMM.
    KernelNotListed {
        /// The packet's kernel object.
        address: u64,
    },
    /// The dispatcher refused the packet (`DispatchError::BadPacket`): something the CP
    /// does not re-check on a packet of a known shape (its sizes, its kernel arguments)
    /// does not describe a runnable kernel.
    DispatchRefused,
    /// Dependency signal `index` of a barrier holds a negative (error) value.
    DependencyFailed {
        /// Index into `dep_signal`.
        index: u8,
        /// The value.
        value: i64,
    },
}

impl RejectReason {
    /// The code stored (negated) into the completion signal.
    pub fn code(&self) -> RejectCode {
        match self {
            Self::Packet(e) => match e {
                AqlError::UnknownPacketType { .. } => RejectCode::UnknownPacketType,
                AqlError::UnsupportedPacketType { .. } => RejectCode::UnsupportedPacketType,
                AqlError::ReservedBits { .. } => RejectCode::ReservedBits,
                AqlError::ReservedFenceScope { .. } => RejectCode::FenceScope,
                AqlError::BadDimensions { .. } => RejectCode::Dimensions,
                AqlError::ZeroWorkgroupSize { .. } => RejectCode::ZeroWorkgroupSize,
                AqlError::ZeroGridSize { .. } => RejectCode::ZeroGridSize,
                AqlError::WorkgroupExceedsGrid { .. } => RejectCode::WorkgroupExceedsGrid,
                AqlError::AddressOutOfRange { .. } => RejectCode::AddressOutOfRange,
                _ => RejectCode::Other,
            },
            Self::Extension(e) => match e {
                GemmExtError::BadMagic { .. } => RejectCode::ExtMagic,
                GemmExtError::UnsupportedVersion { .. } => RejectCode::ExtVersion,
                GemmExtError::KernelCount { .. } => RejectCode::ExtKernelCount,
                GemmExtError::CdChoiceOutOfRange { .. } => RejectCode::ExtKernelIndex,
                _ => RejectCode::ExtMalformed,
            },
            Self::Features(e) => match e {
                FeatureError::KernelIndex { .. } => RejectCode::ExtKernelIndex,
                _ => RejectCode::KernelNotResident,
            },
            Self::KernelObject { .. } => RejectCode::KernelObjectOutOfRange,
            Self::Memory(_) => RejectCode::ExtUnreadable,
            Self::GridTooLarge { .. } => RejectCode::GridTooLarge,
            Self::KernelNotListed { .. } => RejectCode::KernelNotListed,
            Self::DispatchRefused => RejectCode::DispatchRefused,
            Self::DependencyFailed { .. } => RejectCode::DependencyFailed,
        }
    }

    /// The completion-signal value.
    pub fn signal_value(&self) -> i64 {
        self.code().signal_value()
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Packet(e) => write!(f, "{e}"),
            Self::Extension(e) => write!(f, "{e}"),
            Self::Features(e) => write!(f, "GEMM extension: {e}"),
            Self::KernelObject { index, address } => write!(
                f,
                "GEMM extension kernels[{index}].kernel_object = {address:#x} is outside device memory"
            ),
            Self::Memory(e) => write!(f, "reading the GEMM extension: {e}"),
            Self::GridTooLarge { index } => write!(
                f,
                "GEMM extension kernels[{index}] launches more workgroups than a u64 counts"
            ),
            Self::KernelNotListed { address } => write!(
                f,
                "kernel_object {address:#x} is none of the GEMM extension's kernels"
            ),
            Self::DispatchRefused => {
                f.write_str("the dispatcher refused the packet: not a runnable kernel")
            }
            Self::DependencyFailed { index, value } => {
                write!(f, "barrier dep_signal[{index}] holds error value {value}")
            }
        }
    }
}
