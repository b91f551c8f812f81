//! Unit tests of the LAMB layout and programs: the descriptor round trip, patched templates
//! against freshly built commands, the three-slot program and the stripe layout.

use super::*;

#[test]
fn tensor_desc_layout_round_trips_and_rejects_reserved_and_empty() {
    let d = TensorDesc {
        elements: 0x1_0000_0001,
        g_row: 1,
        w_row: 2,
        m_row: 3,
        v_row: 4,
        u_row: 0xffff_ffff,
    };
    let mut b = [0xaau8; TENSOR_DESC_BYTES];
    assert_eq!(d.write_fields(&mut LeWriter::new(&mut b)), Ok(()));
    assert_eq!(b, d.encode());
    assert_eq!(b[..8], [1, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(b[24..], [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    assert_eq!(TensorDesc::decode(&b, 0), Ok(d));
    b[28] = 1;
    assert_eq!(
        TensorDesc::decode(&b, 5),
        Err(SequencerError::BadDescriptor { index: 5 })
    );
    let empty = TensorDesc { elements: 0, ..d };
    assert_eq!(
        TensorDesc::decode(&empty.encode(), 6),
        Err(SequencerError::BadDescriptor { index: 6 })
    );
}

const G: NmcGeometry = NmcGeometry {
    pseudo_channels: 16,
    banks_per_pc: 16,
    cols_per_row: 32,
    column_bytes: 32,
    ts_entries: 16,
    job_contexts: 1,
    alu_chunk: 1,
};

/// A patched template is the command built from scratch for that tensor, for every
/// program, with and without weight decay, tensor after tensor.
/// A platform that keeps the last command submitted (the three-slot build sends the
/// encoded bytes: the trait's default decodes them into `submit`).
#[derive(Default)]
struct Captured(Option<MacroCommand>);

impl NmcController for Captured {
    fn submit(&mut self, cmd: &MacroCommand) -> Result<NmcTicket, NmcError> {
        self.0 = Some(cmd.clone());
        Ok(NmcTicket(0))
    }
    fn write_scalar(
        &mut self,
        _: crate::platform::ChannelSet,
        _: u8,
        _: u32,
    ) -> Result<(), NmcError> {
        Ok(())
    }
    fn reduce_partials(&mut self, _: crate::platform::ChannelSet) -> Result<NmcTicket, NmcError> {
        Ok(NmcTicket(0))
    }
}

/// Also: the bytes a submission sends (patched in place in the three-slot build)
/// decode to exactly the command built afresh for that tensor.
#[test]
fn patched_templates_equal_freshly_built_commands() {
    for program in [Stage1Program::FourSlot, Stage1Program::ThreeSlot] {
        for wd in [0.0, 0.01] {
            let job = LambJob {
                table: 0,
                tensors: 3,
                geometry: G,
                params: LambParams {
                    lr: 1e-3,
                    beta1: 0.9,
                    beta2: 0.999,
                    eps: 1e-6,
                    weight_decay: wd,
                    max_grad_norm: 1.0,
                    bias_correction: true,
                    step: 1,
                    trust_clamp: 0.0,
                },
                program,
            };
            let mut t = Templates::default();
            t.build(&job).unwrap();
            let mut p = Captured::default();
            let mut sent = |t: &mut Templates, kind, d: &TensorDesc, row, i| {
                let (words, answer) = t.submit(kind, &G, d, row, i, &mut p).unwrap();
                assert_eq!(answer, Ok(NmcTicket(0)));
                let cmd = p.0.take().unwrap();
                assert_eq!(words, cmd.program.len());
                cmd
            };
            let mut row = 0;
            for (i, elements) in [1u64, 65_537, 3 << 20].into_iter().enumerate() {
                let d = lay_out(&G, elements, row).unwrap();
                row = d.next_row;
                let d = d.desc;
                let i = i as u32;
                let fresh = programs::stage1(&G, &d, i, wd != 0.0, program).unwrap();
                assert_eq!(sent(&mut t, Kind::Stage1, &d, 0, i), fresh);
                let fresh = programs::stage2(&G, &d, i).unwrap();
                assert_eq!(sent(&mut t, Kind::Stage2, &d, 0, i), fresh);
                let fresh = programs::sum_of_squares(&G, &d, d.w_row, i).unwrap();
                assert_eq!(sent(&mut t, Kind::SumOfSquares, &d, d.w_row, i), fresh);
            }
        }
    }
}

#[test]
fn three_slot_stage1_uses_three_slots_and_longer_chunks() {
    let d = lay_out(&G, 1 << 20, 0).unwrap().desc;
    let four = programs::stage1(&G, &d, 0, true, Stage1Program::FourSlot).unwrap();
    let three = programs::stage1(&G, &d, 0, true, Stage1Program::ThreeSlot).unwrap();
    assert_eq!((four.chunk, three.chunk), (4, 5));
    assert_eq!(four.program.len(), three.program.len());
    let max_slot = |c: &MacroCommand| {
        c.program
            .iter()
            .flat_map(|i| {
                let mut v = std::vec::Vec::new();
                if let Instr::Binary {
                    dst, src0, src1, ..
                } = *i
                {
                    v.extend([Src::from(dst), src0]);
                    if let SrcImm::Ts(t) = src1 {
                        v.push(Src::Ts(t));
                    }
                }
                v
            })
            .filter_map(|s| match s {
                Src::Ts(t) => Some(t.get()),
                _ => None,
            })
            .max()
            .unwrap()
    };
    assert_eq!(max_slot(&four), 3);
    assert_eq!(max_slot(&three), 2);
}

#[test]
fn lay_out_puts_five_arrays_on_consecutive_stripes() {
    // A stripe is 32 x 32 x 16 x 16 B = 256 KiB = 65536 FP32 values.
    assert_eq!(G.stripe_bytes(), 1 << 18);
    let p = lay_out(&G, 65_537, 3).unwrap();
    let d = p.desc;
    assert_eq!(
        (d.g_row, d.w_row, d.m_row, d.v_row, d.u_row),
        (3, 5, 7, 9, 11)
    );
    assert_eq!(p.next_row, 13);
    // Even an empty tensor owns one stripe per array.
    assert_eq!(lay_out(&G, 0, 0).unwrap().next_row, 5);
    assert_eq!(lay_out(&G, 1, u32::MAX - 4), None);
}
