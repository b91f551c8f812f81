//! HSA AQL packets, byte-exact with `hsa.h`.
//!
//! A user-mode queue is a ring of 64-byte packets. The CP reads the packet at the queue's
//! read index, so every decode here works on exactly [`AQL_PACKET_BYTES`] bytes and every
//! field sits at the offset `hsa.h` gives it (`hsa_kernel_dispatch_packet_t`,
//! `hsa_barrier_and_packet_t`, `hsa_barrier_or_packet_t`). Packet types follow
//! `hsa_packet_type_t`: 0 vendor-specific, 1 invalid, 2 kernel dispatch, 3 barrier-AND,
//! 4 agent dispatch, 5 barrier-OR.
//!
//! One departure from `hsa.h`, documented in `docs/decisions/cp.md`: the kernel-dispatch
//! packet's `reserved2` (u64 @48) carries the device address of the packet's GEMM extension
//! record ([`crate::gemm_ext`]), 0 for a kernel without one. The CP then finds the record
//! without knowing the kernel's argument ABI.

use core::fmt;

use crate::le::{LeReader, LeWriter, OutOfBounds};

pub mod queue;

pub use queue::{QueueConfig, QueueTable, QueueTableError, MAX_QUEUES};

/// Bytes in one AQL packet.
pub const AQL_PACKET_BYTES: usize = 64;
/// Dependency signals a barrier packet carries.
pub const BARRIER_DEP_SIGNALS: usize = 5;
/// Bytes of an AMD kernel descriptor: the extent a kernel object address must cover.
pub const KERNEL_DESCRIPTOR_BYTES: u64 = 64;
/// Bytes of a signal value (`hsa_signal_value_t`, i64 on a 64-bit system).
pub const SIGNAL_BYTES: u64 = 8;

/// Byte offsets of every field (`hsa.h`).
pub mod offset {
    /// `header` u16.
    pub const HEADER: usize = 0;
    /// `setup` u16 (kernel dispatch) / `reserved0` (barrier).
    pub const SETUP: usize = 2;
    /// `workgroup_size_x` u16; y and z follow.
    pub const WORKGROUP_SIZE_X: usize = 4;
    /// `reserved0` u16 of the kernel-dispatch packet.
    pub const DISPATCH_RESERVED0: usize = 10;
    /// `grid_size_x` u32; y and z follow.
    pub const GRID_SIZE_X: usize = 12;
    /// `private_segment_size` u32.
    pub const PRIVATE_SEGMENT_SIZE: usize = 24;
    /// `group_segment_size` u32.
    pub const GROUP_SEGMENT_SIZE: usize = 28;
    /// `kernel_object` u64.
    pub const KERNEL_OBJECT: usize = 32;
    /// `kernarg_address` u64.
    pub const KERNARG_ADDRESS: usize = 40;
    /// `reserved2` u64: the GEMM extension address in this project.
    pub const GEMM_EXT_ADDRESS: usize = 48;
    /// `completion_signal` u64.
    pub const COMPLETION_SIGNAL: usize = 56;
    /// Barrier `reserved1` u32.
    pub const BARRIER_RESERVED1: usize = 4;
    /// Barrier `dep_signal[0]` u64; the other four follow.
    pub const DEP_SIGNAL: usize = 8;
    /// Barrier `reserved2` u64.
    pub const BARRIER_RESERVED2: usize = 48;
}

/// `hsa_packet_type_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum PacketType {
    /// Vendor-specific layout.
    VendorSpecific = 0,
    /// Slot not (yet) published by a producer; the packet processor must wait.
    Invalid = 1,
    /// Kernel dispatch.
    KernelDispatch = 2,
    /// Barrier-AND: wait until every dependency signal is 0.
    BarrierAnd = 3,
    /// Agent dispatch.
    AgentDispatch = 4,
    /// Barrier-OR: wait until any dependency signal is 0.
    BarrierOr = 5,
}

impl PacketType {
    /// The type for a header's low byte, if `hsa.h` defines one.
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::VendorSpecific,
            1 => Self::Invalid,
            2 => Self::KernelDispatch,
            3 => Self::BarrierAnd,
            4 => Self::AgentDispatch,
            5 => Self::BarrierOr,
            _ => return None,
        })
    }

    /// The `hsa.h` spelling without the prefix, as JSON output uses it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::VendorSpecific => "vendor_specific",
            Self::Invalid => "invalid",
            Self::KernelDispatch => "kernel_dispatch",
            Self::BarrierAnd => "barrier_and",
            Self::AgentDispatch => "agent_dispatch",
            Self::BarrierOr => "barrier_or",
        }
    }
}

/// `hsa_fence_scope_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum FenceScope {
    /// No fence.
    None = 0,
    /// Agent scope.
    Agent = 1,
    /// System scope.
    System = 2,
}

impl FenceScope {
    const fn from_bits(v: u16) -> Option<Self> {
        match v {
            0 => Some(Self::None),
            1 => Some(Self::Agent),
            2 => Some(Self::System),
            _ => None,
        }
    }

    /// Lower-case name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Agent => "agent",
            Self::System => "system",
        }
    }
}

/// The 16-bit packet header: type 7:0, barrier 8, acquire fence scope 10:9, release fence
/// scope 12:11; bits 15:13 are reserved and must be zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PacketHeader {
    /// Packet type.
    pub packet_type: PacketType,
    /// Do not launch before every earlier packet of the queue has completed.
    pub barrier: bool,
    /// Acquire fence scope.
    pub acquire_fence_scope: FenceScope,
    /// Release fence scope.
    pub release_fence_scope: FenceScope,
}

const HEADER_TYPE_MASK: u16 = 0xFF;
const HEADER_BARRIER_SHIFT: u32 = 8;
const HEADER_ACQUIRE_SHIFT: u32 = 9;
const HEADER_RELEASE_SHIFT: u32 = 11;
const HEADER_SCOPE_MASK: u16 = 0b11;
const HEADER_RESERVED_MASK: u16 = 0xE000;
const SETUP_DIMENSIONS_MASK: u16 = 0b11;

impl PacketHeader {
    /// A header of `packet_type` with no barrier and system-scope fences, as HIP writes.
    pub const fn new(packet_type: PacketType) -> Self {
        Self {
            packet_type,
            barrier: false,
            acquire_fence_scope: FenceScope::System,
            release_fence_scope: FenceScope::System,
        }
    }

    /// Decodes a header word.
    ///
    /// # Errors
    /// [`AqlError::UnknownPacketType`], [`AqlError::ReservedFenceScope`],
    /// [`AqlError::ReservedBits`].
    pub fn from_bits(bits: u16) -> Result<Self, AqlError> {
        let raw_type = (bits & HEADER_TYPE_MASK) as u8;
        let packet_type =
            PacketType::from_u8(raw_type).ok_or(AqlError::UnknownPacketType { value: raw_type })?;
        let acq = (bits >> HEADER_ACQUIRE_SHIFT) & HEADER_SCOPE_MASK;
        let rel = (bits >> HEADER_RELEASE_SHIFT) & HEADER_SCOPE_MASK;
        let acquire_fence_scope =
            FenceScope::from_bits(acq).ok_or(AqlError::ReservedFenceScope {
                field: "acquire_fence_scope",
                value: acq as u8,
            })?;
        let release_fence_scope =
            FenceScope::from_bits(rel).ok_or(AqlError::ReservedFenceScope {
                field: "release_fence_scope",
                value: rel as u8,
            })?;
        if bits & HEADER_RESERVED_MASK != 0 {
            return Err(AqlError::ReservedBits {
                field: "header[15:13]",
                offset: offset::HEADER as u8,
                value: u64::from(bits & HEADER_RESERVED_MASK),
            });
        }
        Ok(Self {
            packet_type,
            barrier: (bits >> HEADER_BARRIER_SHIFT) & 1 == 1,
            acquire_fence_scope,
            release_fence_scope,
        })
    }

    /// Encodes the header word.
    pub const fn to_bits(self) -> u16 {
        (self.packet_type as u16)
            | ((self.barrier as u16) << HEADER_BARRIER_SHIFT)
            | ((self.acquire_fence_scope as u16) << HEADER_ACQUIRE_SHIFT)
            | ((self.release_fence_scope as u16) << HEADER_RELEASE_SHIFT)
    }
}

/// `hsa_kernel_dispatch_packet_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct KernelDispatchPacket {
    /// Header (type is [`PacketType::KernelDispatch`]).
    pub header: PacketHeader,
    /// `setup` bits 1:0: grid dimensions (1..=3 in a valid packet; 0 decodes, fails
    /// [`KernelDispatchPacket::validate`]).
    pub dimensions: u8,
    /// Work-items per workgroup, x/y/z.
    pub workgroup_size: [u16; 3],
    /// Work-items in the grid, x/y/z.
    pub grid_size: [u32; 3],
    /// Private (scratch) bytes per work-item.
    pub private_segment_size: u32,
    /// Group (LDS) bytes per workgroup.
    pub group_segment_size: u32,
    /// Kernel object (code descriptor address).
    pub kernel_object: u64,
    /// Kernel argument block.
    pub kernarg_address: u64,
    /// `reserved2`: device address of the GEMM extension record, 0 when none.
    pub gemm_ext_address: u64,
    /// Completion signal handle (the address of its i64 value); 0 for none.
    pub completion_signal: u64,
}

/// `hsa_barrier_and_packet_t` / `hsa_barrier_or_packet_t` (same layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BarrierPacket {
    /// Header (type is barrier-AND or barrier-OR).
    pub header: PacketHeader,
    /// Dependency signal handles; 0 = unused.
    pub dep_signal: [u64; BARRIER_DEP_SIGNALS],
    /// Completion signal handle; 0 for none.
    pub completion_signal: u64,
}

/// A decoded packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AqlPacket {
    /// Kernel dispatch.
    KernelDispatch(KernelDispatchPacket),
    /// Barrier-AND.
    BarrierAnd(BarrierPacket),
    /// Barrier-OR.
    BarrierOr(BarrierPacket),
    /// A slot with an INVALID header (not published yet); the body is not interpreted.
    Invalid(PacketHeader),
}

impl AqlPacket {
    /// The packet's header.
    pub const fn header(&self) -> PacketHeader {
        match self {
            Self::KernelDispatch(p) => p.header,
            Self::BarrierAnd(p) | Self::BarrierOr(p) => p.header,
            Self::Invalid(h) => *h,
        }
    }

    /// The completion signal handle, 0 for none.
    pub const fn completion_signal(&self) -> u64 {
        match self {
            Self::KernelDispatch(p) => p.completion_signal,
            Self::BarrierAnd(p) | Self::BarrierOr(p) => p.completion_signal,
            Self::Invalid(_) => 0,
        }
    }
}

/// A device-memory address range `[base, base + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DeviceRange {
    /// First address.
    pub base: u64,
    /// Length in bytes.
    pub len: u64,
}

impl DeviceRange {
    /// Whether `[addr, addr + bytes)` lies inside the range (false on overflow).
    pub const fn contains(&self, addr: u64, bytes: u64) -> bool {
        let Some(end) = addr.checked_add(bytes) else {
            return false;
        };
        let Some(limit) = self.base.checked_add(self.len) else {
            return false;
        };
        addr >= self.base && end <= limit
    }
}

/// Why a packet does not decode or does not pass validation. Each variant names the field
/// (as `hsa.h` spells it) and, where it has one, its byte offset in the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum AqlError {
    /// Header bits 7:0 are not an `hsa_packet_type_t` value.
    UnknownPacketType {
        /// The type byte.
        value: u8,
    },
    /// A packet type the CP does not process (vendor-specific, agent dispatch) or not the
    /// one the caller asked for.
    UnsupportedPacketType {
        /// The type byte.
        value: u8,
    },
    /// A fence-scope field holds the reserved value 3.
    ReservedFenceScope {
        /// `acquire_fence_scope` or `release_fence_scope`.
        field: &'static str,
        /// The 2-bit value.
        value: u8,
    },
    /// Reserved bits are not zero.
    ReservedBits {
        /// Field name.
        field: &'static str,
        /// Byte offset of the field.
        offset: u8,
        /// The non-zero bits.
        value: u64,
    },
    /// `setup` dimensions is 0 (2 bits cannot exceed 3).
    BadDimensions {
        /// The value.
        value: u8,
    },
    /// A workgroup size of an active dimension is 0.
    ZeroWorkgroupSize {
        /// 0 = x, 1 = y, 2 = z.
        axis: u8,
    },
    /// A grid size of an active dimension is 0.
    ZeroGridSize {
        /// 0 = x, 1 = y, 2 = z.
        axis: u8,
    },
    /// A workgroup is larger than the grid in an active dimension.
    WorkgroupExceedsGrid {
        /// 0 = x, 1 = y, 2 = z.
        axis: u8,
        /// `workgroup_size_<axis>`.
        workgroup: u16,
        /// `grid_size_<axis>`.
        grid: u32,
    },
    /// An address field points outside device memory.
    AddressOutOfRange {
        /// Field name.
        field: &'static str,
        /// Byte offset of the field in the packet.
        offset: u8,
        /// The address.
        address: u64,
    },
    /// A slice given to [`decode_slice`] is not 64 bytes.
    WrongLength {
        /// Its length.
        len: usize,
    },
}

const AXES: [char; 3] = ['x', 'y', 'z'];

fn axis_name(axis: u8) -> char {
    AXES.get(usize::from(axis)).copied().unwrap_or('?')
}

impl fmt::Display for AqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::UnknownPacketType { value } => write!(
                f,
                "header.type (bits 7:0 at byte 0) = {value} is not an hsa_packet_type_t value"
            ),
            Self::UnsupportedPacketType { value } => write!(
                f,
                "header.type (bits 7:0 at byte 0) = {value}: packet type not processed by this CP"
            ),
            Self::ReservedFenceScope { field, value } => {
                write!(f, "header.{field} = {value} is reserved (byte 0)")
            }
            Self::ReservedBits {
                field,
                offset,
                value,
            } => write!(
                f,
                "{field} at byte {offset} has reserved bits set ({value:#x})"
            ),
            Self::BadDimensions { value } => write!(
                f,
                "setup.dimensions (bits 1:0 at byte 2) = {value}, must be 1, 2 or 3"
            ),
            Self::ZeroWorkgroupSize { axis } => write!(
                f,
                "workgroup_size_{} at byte {} is 0",
                axis_name(axis),
                offset::WORKGROUP_SIZE_X + 2 * usize::from(axis)
            ),
            Self::ZeroGridSize { axis } => write!(
                f,
                "grid_size_{} at byte {} is 0",
                axis_name(axis),
                offset::GRID_SIZE_X + 4 * usize::from(axis)
            ),
            Self::WorkgroupExceedsGrid {
                axis,
                workgroup,
                grid,
            } => {
                let a = axis_name(axis);
                write!(
                    f,
                    "workgroup_size_{a} = {workgroup} exceeds grid_size_{a} = {grid} (bytes {} and {})",
                    offset::WORKGROUP_SIZE_X + 2 * usize::from(axis),
                    offset::GRID_SIZE_X + 4 * usize::from(axis)
                )
            }
            Self::AddressOutOfRange {
                field,
                offset,
                address,
            } => write!(
                f,
                "{field} at byte {offset} = {address:#x} is outside device memory"
            ),
            Self::WrongLength { len } => {
                write!(f, "an AQL packet is {AQL_PACKET_BYTES} bytes, got {len}")
            }
        }
    }
}

impl core::error::Error for AqlError {}

/// A field read past the end of the buffer: fewer than [`AQL_PACKET_BYTES`] bytes.
impl From<OutOfBounds> for AqlError {
    fn from(e: OutOfBounds) -> Self {
        Self::WrongLength { len: e.len }
    }
}

/// The header word of a raw packet, undecoded (a producer publishes it last).
pub fn raw_header(bytes: &[u8; AQL_PACKET_BYTES]) -> u16 {
    // The header is inside any 64-byte packet; the fallback is never taken (and 0 would
    // read as an INVALID packet).
    LeReader::new(bytes).u16_at(offset::HEADER).unwrap_or(0)
}

/// Decodes one packet.
///
/// Structural checks only (type, reserved bits, fence scopes); the field checks the CP
/// needs before a dispatch are in [`KernelDispatchPacket::validate`].
///
/// # Errors
/// [`AqlError::UnknownPacketType`], [`AqlError::UnsupportedPacketType`] (vendor-specific
/// and agent-dispatch packets), [`AqlError::ReservedFenceScope`], [`AqlError::ReservedBits`].
pub fn decode(bytes: &[u8; AQL_PACKET_BYTES]) -> Result<AqlPacket, AqlError> {
    let r = LeReader::new(bytes);
    let header = PacketHeader::from_bits(r.u16_at(offset::HEADER)?)?;
    match header.packet_type {
        PacketType::Invalid => Ok(AqlPacket::Invalid(header)),
        PacketType::KernelDispatch => {
            let setup = r.u16_at(offset::SETUP)?;
            if setup & !SETUP_DIMENSIONS_MASK != 0 {
                return Err(AqlError::ReservedBits {
                    field: "setup[15:2]",
                    offset: offset::SETUP as u8,
                    value: u64::from(setup & !SETUP_DIMENSIONS_MASK),
                });
            }
            let reserved0 = r.u16_at(offset::DISPATCH_RESERVED0)?;
            if reserved0 != 0 {
                return Err(AqlError::ReservedBits {
                    field: "reserved0",
                    offset: offset::DISPATCH_RESERVED0 as u8,
                    value: u64::from(reserved0),
                });
            }
            let mut workgroup_size = [0u16; 3];
            let mut grid_size = [0u32; 3];
            for (i, (w, g)) in workgroup_size.iter_mut().zip(&mut grid_size).enumerate() {
                *w = r.u16_at(offset::WORKGROUP_SIZE_X + 2 * i)?;
                *g = r.u32_at(offset::GRID_SIZE_X + 4 * i)?;
            }
            Ok(AqlPacket::KernelDispatch(KernelDispatchPacket {
                header,
                dimensions: (setup & SETUP_DIMENSIONS_MASK) as u8,
                workgroup_size,
                grid_size,
                private_segment_size: r.u32_at(offset::PRIVATE_SEGMENT_SIZE)?,
                group_segment_size: r.u32_at(offset::GROUP_SEGMENT_SIZE)?,
                kernel_object: r.u64_at(offset::KERNEL_OBJECT)?,
                kernarg_address: r.u64_at(offset::KERNARG_ADDRESS)?,
                gemm_ext_address: r.u64_at(offset::GEMM_EXT_ADDRESS)?,
                completion_signal: r.u64_at(offset::COMPLETION_SIGNAL)?,
            }))
        }
        PacketType::BarrierAnd | PacketType::BarrierOr => {
            for (field, at, width) in [
                ("reserved0", offset::SETUP, 2),
                ("reserved1", offset::BARRIER_RESERVED1, 4),
                ("reserved2", offset::BARRIER_RESERVED2, 8),
            ] {
                let v = match width {
                    2 => u64::from(r.u16_at(at)?),
                    4 => u64::from(r.u32_at(at)?),
                    _ => r.u64_at(at)?,
                };
                if v != 0 {
                    return Err(AqlError::ReservedBits {
                        field,
                        offset: at as u8,
                        value: v,
                    });
                }
            }
            let mut dep_signal = [0u64; BARRIER_DEP_SIGNALS];
            for (i, d) in dep_signal.iter_mut().enumerate() {
                *d = r.u64_at(offset::DEP_SIGNAL + 8 * i)?;
            }
            let p = BarrierPacket {
                header,
                dep_signal,
                completion_signal: r.u64_at(offset::COMPLETION_SIGNAL)?,
            };
            Ok(if header.packet_type == PacketType::BarrierAnd {
                AqlPacket::BarrierAnd(p)
            } else {
                AqlPacket::BarrierOr(p)
            })
        }
        PacketType::VendorSpecific | PacketType::AgentDispatch => {
            Err(AqlError::UnsupportedPacketType {
                value: header.packet_type as u8,
            })
        }
    }
}

/// Decodes a packet from a slice that must be exactly 64 bytes.
///
/// # Errors
/// [`AqlError::WrongLength`] or any error of [`decode`].
pub fn decode_slice(bytes: &[u8]) -> Result<AqlPacket, AqlError> {
    let arr: &[u8; AQL_PACKET_BYTES] = bytes
        .try_into()
        .map_err(|_| AqlError::WrongLength { len: bytes.len() })?;
    decode(arr)
}

/// Encodes a packet; reserved fields are written as zero. An [`AqlPacket::Invalid`] slot
/// has only its header written.
pub fn encode(packet: &AqlPacket) -> [u8; AQL_PACKET_BYTES] {
    let mut b = [0u8; AQL_PACKET_BYTES];
    // Every field lies inside the 64 bytes (a unit test checks this returns Ok).
    let _ = write_fields(packet, &mut LeWriter::new(&mut b));
    b
}

fn write_fields(packet: &AqlPacket, w: &mut LeWriter<'_>) -> Result<(), OutOfBounds> {
    w.put_u16_at(offset::HEADER, packet.header().to_bits())?;
    match packet {
        AqlPacket::KernelDispatch(p) => {
            w.put_u16_at(
                offset::SETUP,
                u16::from(p.dimensions) & SETUP_DIMENSIONS_MASK,
            )?;
            for (i, (&wg, &g)) in p.workgroup_size.iter().zip(&p.grid_size).enumerate() {
                w.put_u16_at(offset::WORKGROUP_SIZE_X + 2 * i, wg)?;
                w.put_u32_at(offset::GRID_SIZE_X + 4 * i, g)?;
            }
            w.put_u32_at(offset::PRIVATE_SEGMENT_SIZE, p.private_segment_size)?;
            w.put_u32_at(offset::GROUP_SEGMENT_SIZE, p.group_segment_size)?;
            w.put_u64_at(offset::KERNEL_OBJECT, p.kernel_object)?;
            w.put_u64_at(offset::KERNARG_ADDRESS, p.kernarg_address)?;
            w.put_u64_at(offset::GEMM_EXT_ADDRESS, p.gemm_ext_address)?;
            w.put_u64_at(offset::COMPLETION_SIGNAL, p.completion_signal)?;
        }
        AqlPacket::BarrierAnd(p) | AqlPacket::BarrierOr(p) => {
            for (i, &d) in p.dep_signal.iter().enumerate() {
                w.put_u64_at(offset::DEP_SIGNAL + 8 * i, d)?;
            }
            w.put_u64_at(offset::COMPLETION_SIGNAL, p.completion_signal)?;
        }
        AqlPacket::Invalid(_) => {}
    }
    Ok(())
}

impl KernelDispatchPacket {
    /// Workgroups the grid launches: the product over the active dimensions of
    /// `ceil(grid / workgroup)` (0 if a workgroup size is 0; saturates, three 32-bit
    /// grids can exceed `u64`).
    pub fn workgroups(&self) -> u64 {
        let dims = usize::from(self.dimensions.min(3));
        self.workgroup_size
            .iter()
            .zip(&self.grid_size)
            .take(dims)
            .map(|(&w, &g)| {
                u64::from(g)
                    .checked_div(u64::from(w))
                    .map_or(0, |q| q + u64::from(u64::from(g) % u64::from(w) != 0))
            })
            .fold(1u64, u64::saturating_mul)
    }

    /// Threads per workgroup over the active dimensions.
    pub fn workgroup_threads(&self) -> u32 {
        let dims = usize::from(self.dimensions.min(3));
        self.workgroup_size
            .iter()
            .take(dims)
            .map(|&w| u32::from(w))
            .fold(1u32, u32::saturating_mul)
    }

    /// The checks the CP makes before it dispatches: dimensions 1..=3, non-zero workgroup
    /// and grid sizes in every active dimension, no workgroup larger than the grid, and
    /// every address the dispatch uses inside `device` (kernel object, and when non-zero
    /// the kernel arguments, the GEMM extension of `gemm_ext_bytes` bytes and the
    /// completion signal).
    ///
    /// # Errors
    /// [`AqlError::BadDimensions`], [`AqlError::ZeroWorkgroupSize`],
    /// [`AqlError::ZeroGridSize`], [`AqlError::WorkgroupExceedsGrid`],
    /// [`AqlError::AddressOutOfRange`].
    pub fn validate(&self, device: &DeviceRange, gemm_ext_bytes: u64) -> Result<(), AqlError> {
        if self.dimensions == 0 || self.dimensions > 3 {
            return Err(AqlError::BadDimensions {
                value: self.dimensions,
            });
        }
        for (axis, (&w, &g)) in self
            .workgroup_size
            .iter()
            .zip(&self.grid_size)
            .take(usize::from(self.dimensions))
            .enumerate()
        {
            let axis = axis as u8;
            if w == 0 {
                return Err(AqlError::ZeroWorkgroupSize { axis });
            }
            if g == 0 {
                return Err(AqlError::ZeroGridSize { axis });
            }
            if u32::from(w) > g {
                return Err(AqlError::WorkgroupExceedsGrid {
                    axis,
                    workgroup: w,
                    grid: g,
                });
            }
        }
        let out = |field, at: usize, address| AqlError::AddressOutOfRange {
            field,
            offset: at as u8,
            address,
        };
        if !device.contains(self.kernel_object, KERNEL_DESCRIPTOR_BYTES) {
            return Err(out(
                "kernel_object",
                offset::KERNEL_OBJECT,
                self.kernel_object,
            ));
        }
        if self.kernarg_address != 0 && !device.contains(self.kernarg_address, 1) {
            return Err(out(
                "kernarg_address",
                offset::KERNARG_ADDRESS,
                self.kernarg_address,
            ));
        }
        if self.gemm_ext_address != 0 && !device.contains(self.gemm_ext_address, gemm_ext_bytes) {
            return Err(out(
                "reserved2 (gemm_ext_address)",
                offset::GEMM_EXT_ADDRESS,
                self.gemm_ext_address,
            ));
        }
        if self.completion_signal != 0 && !device.contains(self.completion_signal, SIGNAL_BYTES) {
            return Err(out(
                "completion_signal",
                offset::COMPLETION_SIGNAL,
                self.completion_signal,
            ));
        }
        Ok(())
    }
}

impl BarrierPacket {
    /// Every non-zero dependency and completion signal lies inside `device`.
    ///
    /// # Errors
    /// [`AqlError::AddressOutOfRange`] naming the signal.
    pub fn validate(&self, device: &DeviceRange) -> Result<(), AqlError> {
        const DEP_NAMES: [&str; BARRIER_DEP_SIGNALS] = [
            "dep_signal[0]",
            "dep_signal[1]",
            "dep_signal[2]",
            "dep_signal[3]",
            "dep_signal[4]",
        ];
        for (i, (&d, name)) in self.dep_signal.iter().zip(DEP_NAMES).enumerate() {
            if d != 0 && !device.contains(d, SIGNAL_BYTES) {
                return Err(AqlError::AddressOutOfRange {
                    field: name,
                    offset: (offset::DEP_SIGNAL + 8 * i) as u8,
                    address: d,
                });
            }
        }
        if self.completion_signal != 0 && !device.contains(self.completion_signal, SIGNAL_BYTES) {
            return Err(AqlError::AddressOutOfRange {
                field: "completion_signal",
                offset: offset::COMPLETION_SIGNAL as u8,
                address: self.completion_signal,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dispatch() -> KernelDispatchPacket {
        KernelDispatchPacket {
            header: PacketHeader::new(PacketType::KernelDispatch),
            dimensions: 1,
            workgroup_size: [256, 1, 1],
            grid_size: [1024, 1, 1],
            private_segment_size: 0,
            group_segment_size: 0,
            kernel_object: 0x1000,
            kernarg_address: 0,
            gemm_ext_address: 0,
            completion_signal: 0x2000,
        }
    }

    #[test]
    fn header_bits_match_hsa_h() {
        let h = PacketHeader {
            packet_type: PacketType::KernelDispatch,
            barrier: true,
            acquire_fence_scope: FenceScope::Agent,
            release_fence_scope: FenceScope::System,
        };
        // type 2 | barrier 1<<8 | acquire 1<<9 | release 2<<11.
        assert_eq!(h.to_bits(), 2 | (1 << 8) | (1 << 9) | (2 << 11));
        assert_eq!(PacketHeader::from_bits(h.to_bits()), Ok(h));
        assert_eq!(
            PacketHeader::from_bits(3 << 9 | 2),
            Err(AqlError::ReservedFenceScope {
                field: "acquire_fence_scope",
                value: 3
            })
        );
    }

    #[test]
    fn field_offsets_are_hsa_h_offsets() {
        let b = encode(&AqlPacket::KernelDispatch(dispatch()));
        assert_eq!(u16::from_le_bytes([b[4], b[5]]), 256);
        assert_eq!(u32::from_le_bytes([b[12], b[13], b[14], b[15]]), 1024);
        assert_eq!(u64::from_le_bytes(b[32..40].try_into().unwrap()), 0x1000);
        assert_eq!(u64::from_le_bytes(b[56..64].try_into().unwrap()), 0x2000);
        assert_eq!(u16::from_le_bytes([b[2], b[3]]), 1);
    }

    #[test]
    fn every_field_lies_inside_the_packet() {
        let barrier = BarrierPacket {
            header: PacketHeader::new(PacketType::BarrierAnd),
            dep_signal: [1, 2, 3, 4, 5],
            completion_signal: 6,
        };
        for packet in [
            AqlPacket::KernelDispatch(dispatch()),
            AqlPacket::BarrierAnd(barrier),
        ] {
            let mut b = [0u8; AQL_PACKET_BYTES];
            assert_eq!(write_fields(&packet, &mut LeWriter::new(&mut b)), Ok(()));
            assert_eq!(decode(&b), Ok(packet));
        }
    }

    #[test]
    fn validation_names_the_field() {
        let dev = DeviceRange {
            base: 0x1000,
            len: 0x10000,
        };
        let mut p = dispatch();
        assert_eq!(p.validate(&dev, 0), Ok(()));
        p.workgroup_size[0] = 2048;
        assert_eq!(
            p.validate(&dev, 0),
            Err(AqlError::WorkgroupExceedsGrid {
                axis: 0,
                workgroup: 2048,
                grid: 1024
            })
        );
        let mut p = dispatch();
        p.kernel_object = 0x20_0000;
        let e = p.validate(&dev, 0).unwrap_err();
        assert!(e.to_string().contains("kernel_object at byte 32"));
    }

    #[test]
    fn workgroups_round_up() {
        let mut p = dispatch();
        p.grid_size = [1000, 1, 1];
        assert_eq!(p.workgroups(), 4);
        p.dimensions = 2;
        p.workgroup_size = [16, 16, 1];
        p.grid_size = [100, 33, 7];
        assert_eq!(p.workgroups(), 7 * 3);
    }
}
