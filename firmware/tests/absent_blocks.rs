//! The shared absent-block double (`platform::Absent`) and the errors a missing block
//! raises: the sequencer reports it in its own error type, and the top floor (and the CP)
//! by the block (`FirmwareError::Memory`, not `Sequencer(Memory)`).
#![allow(clippy::unwrap_used)]

use nmcp_firmware::cp::{CommandProcessor, CpConfig, CpError};
use nmcp_firmware::nmc::{LambJob, LambParams, NmcGeometry, SequencerError, Stage1Program};
use nmcp_firmware::platform::{
    Absent, DeviceMemory, DispatchError, DispatchRequest, DmaController, KernelDispatcher,
    MapError, MemoryError, NmcController, NmcError, OutputMapController,
};
use nmcp_firmware::t3::{Collective, T3Fault, T3Job};
use nmcp_firmware::{Event, Firmware, FirmwareError};
use nmcp_isa::aql::{DeviceRange, QueueConfig, QueueTable};

fn cp() -> CommandProcessor {
    let q = QueueConfig {
        ring_base: 0x1000,
        size_packets: 64,
        read_index_addr: 0x2000,
        write_index_addr: 0x2008,
        doorbell_addr: 0x2010,
    };
    CommandProcessor::new(CpConfig {
        queues: QueueTable::from_slice(&[q]).unwrap(),
        device: DeviceRange {
            base: 0,
            len: 1 << 20,
        },
        ..CpConfig::empty()
    })
    .unwrap()
}

fn lamb() -> LambJob {
    LambJob {
        table: 0x100,
        tensors: 1,
        geometry: NmcGeometry {
            pseudo_channels: 16,
            banks_per_pc: 16,
            cols_per_row: 32,
            column_bytes: 32,
            ts_entries: 16,
            job_contexts: 1,
            alu_chunk: 1,
        },
        params: LambParams {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-6,
            weight_decay: 0.0,
            max_grad_norm: 1.0,
            bias_correction: true,
            step: 1,
            trust_clamp: 0.0,
        },
        program: Stage1Program::FourSlot,
    }
}

#[test]
fn every_block_of_absent_answers_unsupported() {
    let mut a = Absent;
    assert_eq!(a.read(0, &mut [0; 4]), Err(MemoryError::Unsupported));
    assert_eq!(a.read_u32(0), Err(MemoryError::Unsupported));
    let req = DispatchRequest {
        queue: 0,
        dispatch_id: 0,
        kernel_object: 0,
    };
    assert_eq!(a.dispatch(&req), Err(DispatchError::Unsupported));
    assert_eq!(
        a.dispatch_group(&[req]),
        (0, Err(DispatchError::Unsupported))
    );
    assert_eq!(
        a.complete_without_dispatch(0, 0, 0),
        Err(DispatchError::Unsupported)
    );
    let ch = nmcp_firmware::platform::ChannelSet { first: 0, count: 1 };
    assert_eq!(a.write_scalar(ch, 0, 0), Err(NmcError::Unsupported));
    assert_eq!(a.reduce_partials(ch), Err(NmcError::Unsupported));
    assert_eq!(a.set_dispatch_start(0), Err(MapError::Unsupported));
    let desc = nmcp_isa::t3::DmaDescriptor::default();
    assert_eq!(
        DmaController::program(&mut a, 0, &desc),
        Err(nmcp_firmware::platform::DmaError::Unsupported)
    );
}

#[test]
fn the_cp_meets_absent_memory_as_its_own_error_and_the_top_reports_the_block() {
    let mut c = cp();
    let ev = Event::Doorbell { queue: 0 };
    assert_eq!(
        c.on_event(&ev, &mut Absent),
        Err(CpError::Memory(MemoryError::Unsupported))
    );
    let mut fw = Firmware {
        cp: cp(),
        ..Firmware::default()
    };
    let e = fw.handle(ev, &mut Absent).unwrap_err();
    assert_eq!(e, FirmwareError::Memory(MemoryError::Unsupported));
    assert_eq!(
        e.to_string(),
        "device memory: device memory not available on this platform"
    );
    // The CP's own refusals stay `Cp`; the dispatcher's are reported by their block.
    assert_eq!(
        FirmwareError::from(CpError::Capacity),
        FirmwareError::Cp(CpError::Capacity)
    );
    assert_eq!(
        FirmwareError::from(CpError::Dispatch(DispatchError::Busy)),
        FirmwareError::Dispatch(DispatchError::Busy)
    );
}

#[test]
fn the_sequencer_reports_an_absent_block_by_the_block() {
    // The step starts by reading its first tensor descriptor.
    let mut fw = Firmware::default();
    assert_eq!(
        fw.start_lamb(lamb(), &mut Absent),
        Err(FirmwareError::Memory(MemoryError::Unsupported))
    );
    assert_eq!(
        FirmwareError::from(SequencerError::Busy),
        FirmwareError::Sequencer(SequencerError::Busy)
    );
}

#[test]
fn t3_meets_an_absent_output_map_as_a_fault() {
    let job = T3Job {
        tile_m: 32,
        tile_n: 32,
        out_base: 0x1000,
        ..T3Job::new(Collective::RingReduceScatter, 2, 0, 8 * 32, 64)
    };
    let mut fw = Firmware::default();
    assert_eq!(
        fw.start_t3(&job, &mut Absent),
        Err(FirmwareError::T3(T3Fault::Map(MapError::Unsupported)))
    );
}
