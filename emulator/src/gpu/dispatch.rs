//! The workgroup dispatcher's view of a packet: the one place the emulator turns the
//! kernel-dispatch packet at a queue head (and its GEMM extension record) into a
//! [`KernelLaunch`].
//!
//! The hardware dispatcher reads the packet itself, so the emulator decodes it again after
//! the CP did — with the same `isa` decoders, and with no fallback of its own: a kernel
//! object the record does not list, or a packet that no longer decodes, is refused with
//! [`DispatchError::BadPacket`] rather than run as something else.

use nmcp_firmware::platform::{DevAddr, DispatchError};
use nmcp_isa::aql::{self, AqlPacket, AQL_PACKET_BYTES};
use nmcp_isa::gemm_ext::{GemmExt, GEMM_EXT_BYTES};

use super::{KernelLaunch, Nanos};
use crate::memory::DeviceMemory;

/// Decodes the kernel-dispatch packet at `packet_addr` for `kernel_object` (the one the
/// CP chose). A non-GEMM kernel's workgroups take `non_gemm_workgroup_ns` each.
///
/// # Errors
/// [`DispatchError::NotAtHead`] when the packet cannot be read;
/// [`DispatchError::BadPacket`] when it is not a kernel dispatch, its GEMM record does not
/// decode, or the record does not list `kernel_object`.
pub fn launch_from_packet(
    memory: &DeviceMemory,
    packet_addr: DevAddr,
    kernel_object: u64,
    non_gemm_workgroup_ns: Nanos,
) -> Result<KernelLaunch, DispatchError> {
    let mut bytes = [0u8; AQL_PACKET_BYTES];
    memory
        .read(packet_addr, &mut bytes)
        .map_err(|_| DispatchError::NotAtHead)?;
    let Ok(AqlPacket::KernelDispatch(p)) = aql::decode(&bytes) else {
        return Err(DispatchError::BadPacket);
    };
    if p.gemm_ext_address == 0 {
        return Ok(KernelLaunch {
            gemm: None,
            workgroups: p.workgroups(),
            workgroup_size: u16::try_from(p.workgroup_threads()).unwrap_or(u16::MAX),
            workgroup_time: non_gemm_workgroup_ns,
            barrier: p.header.barrier,
        });
    }
    let mut eb = [0u8; GEMM_EXT_BYTES];
    memory
        .read(p.gemm_ext_address, &mut eb)
        .map_err(|_| DispatchError::BadPacket)?;
    let ext = GemmExt::decode(&eb).map_err(|_| DispatchError::BadPacket)?;
    let meta = *ext
        .kernels
        .iter()
        .find(|k| k.kernel_object == kernel_object)
        .ok_or(DispatchError::BadPacket)?;
    Ok(KernelLaunch {
        workgroups: nmcp_isa::gemm_ext::workgroups(&ext, &meta),
        workgroup_size: meta.workgroup_size,
        workgroup_time: 0.0,
        barrier: p.header.barrier,
        gemm: Some((ext, meta)),
    })
}
