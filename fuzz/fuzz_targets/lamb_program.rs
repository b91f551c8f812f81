//! The firmware's LAMB sequencer over arbitrary tensor tables, geometries, hyperparameters
//! and host reduction results, on a platform stub that completes whatever it accepts (and
//! sometimes answers "busy" while work is in flight): the sequencer either refuses with an
//! error or finishes, within a bounded number of events, never panicking; every
//! macro-command it submits is valid and each of its phases stays inside one array (g, w,
//! m, v or u) of one tensor of the table, on pseudo-channels the device has.
#![no_main]

use std::collections::VecDeque;

use libfuzzer_sys::fuzz_target;
use nmcp_firmware::nmc::{
    LambJob, LambParams, NmcGeometry, NmcSequencer, Stage1Program, TensorDesc,
};
use nmcp_firmware::platform::{
    ChannelSet, DevAddr, DeviceMemory, MemoryError, NmcController, NmcError, NmcTicket,
};
use nmcp_firmware::{Event, FirmwareError};
use nmcp_isa::nmc::MacroCommand;

const TABLE: DevAddr = 0x1000;

/// Device memory holding the descriptor table, and engines that complete in order.
struct Stub {
    table: Vec<u8>,
    geometry: NmcGeometry,
    tensors: Vec<TensorDesc>,
    depth: usize,
    in_flight: usize,
    next: u32,
    events: VecDeque<Event>,
    sums: Vec<f32>,
    submitted: usize,
}

impl DeviceMemory for Stub {
    fn read(&mut self, addr: DevAddr, buf: &mut [u8]) -> Result<(), MemoryError> {
        let off = addr.checked_sub(TABLE).ok_or(MemoryError::OutOfRange)? as usize;
        let src = self
            .table
            .get(off..off.checked_add(buf.len()).ok_or(MemoryError::OutOfRange)?)
            .ok_or(MemoryError::OutOfRange)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write(&mut self, _addr: DevAddr, _data: &[u8]) -> Result<(), MemoryError> {
        Err(MemoryError::OutOfRange)
    }
}

impl Stub {
    fn check(&self, cmd: &MacroCommand) {
        assert!(cmd.validate().is_ok(), "invalid macro-command {cmd:?}");
        let g = &self.geometry;
        let ch_end = u32::from(cmd.channels.first) + u32::from(cmd.channels.count);
        assert!(ch_end <= u32::from(g.pseudo_channels), "channels {:?}", cmd.channels);
        let end = u64::from(cmd.col_start) + u64::from(cmd.col_count);
        for ph in &cmd.phases {
            let inside = self.tensors.iter().any(|t| {
                [t.g_row, t.w_row, t.m_row, t.v_row, t.u_row].contains(&ph.base_row)
                    && end <= g.columns_per_bank(t.elements)
            });
            assert!(
                inside,
                "phase at row {} columns {}..{end} is in no tensor's array",
                ph.base_row, cmd.col_start
            );
        }
    }
}

impl NmcController for Stub {
    fn submit(&mut self, cmd: &MacroCommand) -> Result<NmcTicket, NmcError> {
        if self.in_flight >= self.depth {
            return Err(NmcError::Busy);
        }
        self.check(cmd);
        self.submitted += 1;
        self.in_flight += 1;
        self.next += 1;
        let ticket = NmcTicket(self.next);
        self.events.push_back(Event::NmcDone {
            ticket,
            status: Ok(()),
        });
        Ok(ticket)
    }

    fn write_scalar(&mut self, channels: ChannelSet, reg: u8, _bits: u32) -> Result<(), NmcError> {
        if reg >= 8 {
            return Err(NmcError::NoSuchRegister);
        }
        let end = u32::from(channels.first) + u32::from(channels.count);
        assert!(end <= u32::from(self.geometry.pseudo_channels));
        Ok(())
    }

    fn reduce_partials(&mut self, _channels: ChannelSet) -> Result<NmcTicket, NmcError> {
        if self.in_flight >= self.depth {
            return Err(NmcError::Busy);
        }
        self.in_flight += 1;
        self.next += 1;
        let ticket = NmcTicket(self.next);
        let sum = self.sums.get(self.next as usize % self.sums.len().max(1)).copied();
        self.events.push_back(Event::PartialsReady {
            ticket,
            sum: sum.unwrap_or(1.0),
            status: Ok(()),
        });
        Ok(ticket)
    }
}

/// Reads little-endian values from the fuzz input, zeros past its end.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn f32(&mut self) -> f32 {
        f32::from_bits(self.u32())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let tensors = 1 + u32::from(b.u8() % 8);
    let mut geometry = NmcGeometry {
        pseudo_channels: 1 + b.u16() % 64,
        banks_per_pc: 1 + b.u16() % 32,
        cols_per_row: 1 + b.u32() % 4096,
        column_bytes: [32, 64, 16, 0][usize::from(b.u8() % 4)],
        ts_entries: b.u16() % 300,
        job_contexts: 1,
        alu_chunk: 1,
    };
    let params = LambParams {
        lr: b.f32(),
        beta1: b.f32(),
        beta2: b.f32(),
        eps: b.f32(),
        weight_decay: b.f32(),
        max_grad_norm: b.f32(),
        bias_correction: b.u8() & 1 == 1,
        step: b.u32(),
        trust_clamp: b.f32(),
    };
    let depth = 1 + usize::from(b.u8() % 4);
    let sums = (0..4).map(|_| b.f32()).collect();
    let mut descs = Vec::new();
    let mut table = Vec::new();
    for _ in 0..tensors {
        // Mostly modest sizes, sometimes anything (a corrupted table).
        let raw = u64::from(b.u32()) | (u64::from(b.u8() & 0x80) << 56);
        let d = TensorDesc {
            elements: raw,
            g_row: b.u32(),
            w_row: b.u32(),
            m_row: b.u32(),
            v_row: b.u32(),
            u_row: b.u32(),
        };
        let mut bytes = d.encode();
        if b.u8() == 0xff {
            bytes[28] = 1; // reserved word set: must be refused
        }
        table.extend_from_slice(&bytes);
        descs.push(d);
    }
    // Read last, so the existing corpus keeps its meaning (an exhausted input reads 0).
    let program = if b.u8() & 1 == 1 {
        Stage1Program::ThreeSlot
    } else {
        Stage1Program::FourSlot
    };
    // The TS split between job contexts (read after the program, for the same reason).
    geometry.job_contexts = u16::from(b.u8() % 3);
    geometry.alu_chunk = u16::from(b.u8() % 5);
    let mut stub = Stub {
        table,
        geometry,
        tensors: descs,
        depth,
        in_flight: 0,
        next: 0,
        events: VecDeque::new(),
        sums,
        submitted: 0,
    };
    let job = LambJob {
        table: TABLE,
        tensors,
        geometry,
        params,
        program,
    };
    let mut seq = NmcSequencer::default();
    if seq.start_lamb::<_, FirmwareError>(job, &mut stub).is_err() {
        return;
    }
    // Every tensor needs a handful of commands and reductions; a bound well above that
    // catches a sequencer that never finishes.
    let bound = 64 * tensors as usize + 64;
    let mut handled = 0;
    while let Some(ev) = stub.events.pop_front() {
        stub.in_flight -= 1;
        handled += 1;
        assert!(handled <= bound, "no end after {handled} events ({} commands)", stub.submitted);
        if seq.on_event::<_, FirmwareError>(&ev, &mut stub).is_err() {
            return;
        }
    }
    assert!(seq.lamb.is_done(), "stalled: nothing in flight and not done");
});
