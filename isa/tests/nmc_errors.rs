//! Malformed words, bytes and text are rejected with an error that says what and where.

// Tests may unwrap and index: a panic is a test failure (the crate denies these in
// Cargo.toml for its library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use nmcp_isa::asm::{parse_instr, parse_macro, AsmErrorKind, Assembler};
use nmcp_isa::nmc::*;

/// Field layout, written independently of the crate's private constants.
fn word(op: u32, dtype: u32, dst: u32, src0: u32, src1: u32, aux: u32) -> u32 {
    op << 26 | dtype << 24 | dst << 19 | src0 << 14 | src1 << 9 | aux
}
const MEM: u32 = 0b10000;
const IMM: u32 = 0b10001;
const NONE: u32 = 0b11111;

fn msg(w: u32) -> String {
    Instr::decode(w).unwrap_err().to_string()
}

#[test]
fn sweep_of_fields_never_panics_and_every_opcode_has_valid_words() {
    let auxes = [0u32, 3, 0x1f, 0x25, 0x100, 0x1ff];
    let mut valid_per_opcode = [0u32; 64];
    for op in 0..64u32 {
        for dtype in 0..4 {
            for dst in 0..32 {
                for src0 in 0..32 {
                    for src1 in 0..32 {
                        for aux in auxes {
                            let w = word(op, dtype, dst, src0, src1, aux);
                            if let Ok(i) = Instr::decode(w) {
                                assert_eq!(i.encode(), w, "{i:?}");
                                valid_per_opcode[op as usize] += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    for o in Opcode::ALL {
        assert!(valid_per_opcode[o as usize] > 0, "{o} never decodes");
    }
    let defined: Vec<u32> = Opcode::ALL.iter().map(|o| *o as u32).collect();
    for (op, n) in valid_per_opcode.iter().enumerate() {
        if !defined.contains(&(op as u32)) {
            assert_eq!(*n, 0, "reserved opcode {op:#x} decoded");
        }
    }
}

#[test]
fn reserved_opcode_is_named() {
    let e = Instr::decode(word(0x05, 0, NONE, NONE, NONE, 0)).unwrap_err();
    assert_eq!(e, DecodeError::ReservedOpcode { value: 5 });
    assert!(msg(word(0x05, 0, NONE, NONE, NONE, 0)).contains("opcode"));
}

#[test]
fn reserved_operand_pattern_names_field() {
    let w = word(Opcode::Add as u32, 2, 0, 0b10010, 1, 0);
    assert_eq!(
        Instr::decode(w),
        Err(DecodeError::ReservedOperand {
            field: Field::Src0,
            value: 0b10010
        })
    );
    assert!(msg(w).starts_with("src0"), "{}", msg(w));
}

#[test]
fn scalar_register_as_destination_is_rejected() {
    let w = word(Opcode::Mov as u32, 2, 0b01001, MEM, NONE, 0);
    assert_eq!(
        Instr::decode(w),
        Err(DecodeError::OperandNotAllowed {
            opcode: Opcode::Mov,
            field: Field::Dst,
            value: 0b01001
        })
    );
    let m = msg(w);
    assert!(
        m.contains("dst") && m.contains("s1") && m.contains("mov"),
        "{m}"
    );
}

#[test]
fn imm_and_none_where_a_source_is_needed() {
    // IMM as src0 of ADD.
    assert!(matches!(
        Instr::decode(word(Opcode::Add as u32, 2, 0, IMM, 1, 5)),
        Err(DecodeError::OperandNotAllowed {
            field: Field::Src0,
            ..
        })
    ));
    // NONE as src1 of ADD.
    assert!(matches!(
        Instr::decode(word(Opcode::Add as u32, 2, 0, 1, NONE, 0)),
        Err(DecodeError::OperandNotAllowed {
            field: Field::Src1,
            ..
        })
    ));
    // SCALE's factor must be a scalar.
    assert!(matches!(
        Instr::decode(word(Opcode::Scale as u32, 2, 0, 1, MEM, 0)),
        Err(DecodeError::OperandNotAllowed {
            field: Field::Src1,
            ..
        })
    ));
}

#[test]
fn unused_fields_must_be_none_or_zero() {
    // ADD without an immediate but with aux bits set.
    assert_eq!(
        Instr::decode(word(Opcode::Add as u32, 2, 0, 1, 2, 7)),
        Err(DecodeError::UnusedNotZero {
            opcode: Opcode::Add,
            field: Field::Aux,
            value: 7
        })
    );
    // MOV with a src1.
    assert!(matches!(
        Instr::decode(word(Opcode::Mov as u32, 2, 0, MEM, 3, 0)),
        Err(DecodeError::UnusedNotZero {
            field: Field::Src1,
            ..
        })
    ));
    // Shift counts above 31.
    assert!(matches!(
        Instr::decode(word(Opcode::Shl as u32, 3, 0, MEM, NONE, 32)),
        Err(DecodeError::UnusedNotZero {
            field: Field::AuxHigh,
            ..
        })
    ));
    // FMA with aux[8:5] set.
    assert!(matches!(
        Instr::decode(word(Opcode::Fma as u32, 2, 0, 1, 2, 0x20 | 3)),
        Err(DecodeError::UnusedNotZero {
            field: Field::AuxHigh,
            ..
        })
    ));
    // NOP with a dtype.
    assert_eq!(
        Instr::decode(word(Opcode::Nop as u32, 1, NONE, NONE, NONE, 0)),
        Err(DecodeError::DtypeNotAllowed {
            opcode: Opcode::Nop,
            value: 1
        })
    );
}

#[test]
fn special_functions_are_f32_only() {
    for dtype in [0, 1, 3] {
        assert_eq!(
            Instr::decode(word(Opcode::Rsqrt as u32, dtype, 0, MEM, NONE, 0)),
            Err(DecodeError::DtypeNotAllowed {
                opcode: Opcode::Rsqrt,
                value: dtype as u8
            })
        );
    }
    assert!(Instr::decode(word(Opcode::Rsqrt as u32, 2, 0, MEM, NONE, 0)).is_ok());
}

#[test]
fn div_is_f32_only() {
    for dtype in [0, 1, 3] {
        let w = word(Opcode::Div as u32, dtype, 0, MEM, 1, 0);
        assert_eq!(
            Instr::decode(w),
            Err(DecodeError::DtypeNotAllowed {
                opcode: Opcode::Div,
                value: dtype as u8
            })
        );
        assert!(msg(w).starts_with("dtype"), "{}", msg(w));
        assert!(msg(w).contains("div"), "{}", msg(w));
    }
    assert_eq!(
        Instr::decode(word(Opcode::Div as u32, 2, 0, MEM, 0b01011, 0)),
        Ok(Instr::Div {
            dst: Loc::Ts(TsSlot::new(0).unwrap()),
            src0: Src::Mem,
            src1: Src::Sreg(ScalarReg::new(3).unwrap()),
        })
    );
}

#[test]
fn div_takes_no_immediate_and_needs_both_sources() {
    // An immediate divisor (src1 = IMM, with or without aux bits).
    for aux in [0, 5, 0x1ff] {
        assert_eq!(
            Instr::decode(word(Opcode::Div as u32, 2, 0, MEM, IMM, aux)),
            Err(DecodeError::OperandNotAllowed {
                opcode: Opcode::Div,
                field: Field::Src1,
                value: IMM as u8
            })
        );
    }
    // An immediate dividend.
    assert_eq!(
        Instr::decode(word(Opcode::Div as u32, 2, 0, IMM, 1, 5)),
        Err(DecodeError::OperandNotAllowed {
            opcode: Opcode::Div,
            field: Field::Src0,
            value: IMM as u8
        })
    );
    // NONE as either source, and NONE or a scalar register as the destination.
    for (dst, src0, src1, field, value) in [
        (0, NONE, 1, Field::Src0, NONE),
        (0, 1, NONE, Field::Src1, NONE),
        (NONE, 1, 2, Field::Dst, NONE),
        (0b01010, 1, 2, Field::Dst, 0b01010),
    ] {
        let w = word(Opcode::Div as u32, 2, dst, src0, src1, 0);
        assert_eq!(
            Instr::decode(w),
            Err(DecodeError::OperandNotAllowed {
                opcode: Opcode::Div,
                field,
                value: value as u8
            })
        );
    }
    // aux is unused and must be zero.
    assert_eq!(
        Instr::decode(word(Opcode::Div as u32, 2, 0, MEM, 1, 4)),
        Err(DecodeError::UnusedNotZero {
            opcode: Opcode::Div,
            field: Field::Aux,
            value: 4
        })
    );
}

#[test]
fn conversions_outside_the_legal_pairs_are_rejected() {
    // f16 -> bf16, f32 -> f32, i32 -> f32 with a half select.
    for (to, from, half) in [(1, 0, 0), (2, 2, 0), (2, 3, 1)] {
        let w = word(Opcode::Cvt as u32, to, 0, MEM, NONE, from | half << 2);
        assert_eq!(
            Instr::decode(w),
            Err(DecodeError::BadConversion {
                to: to as u8,
                from: from as u8,
                half: half as u8
            })
        );
    }
    assert!(matches!(
        Instr::decode(word(Opcode::Cvt as u32, 2, 0, MEM, NONE, 0x8)),
        Err(DecodeError::UnusedNotZero {
            field: Field::CvtAuxHigh,
            ..
        })
    ));
}

#[test]
fn jump_zero_distance_is_rejected() {
    assert_eq!(
        Instr::decode(word(Opcode::Jump as u32, 0, NONE, NONE, NONE, 0x20)),
        Err(DecodeError::JumpBackZero)
    );
    let j = Instr::decode(word(Opcode::Jump as u32, 0, NONE, NONE, NONE, 0x1e2)).unwrap();
    assert_eq!(
        j,
        Instr::Jump {
            back: JumpBack::new(2).unwrap(),
            taken: JumpTaken::new(16).unwrap()
        }
    );
}

#[test]
fn immediates_are_sign_extended() {
    let i = Instr::decode(word(Opcode::Add as u32, 0, 1, MEM, IMM, 0x1fd)).unwrap();
    assert_eq!(parse_instr("add.f16 ts1, mem, #-3").unwrap(), i);
}

#[test]
fn costs_and_memory_use() {
    let rcp = parse_instr("rcp.f32 ts0, mem").unwrap();
    let sqrt = parse_instr("sqrt.f32 mem, ts0").unwrap();
    let fma = parse_instr("fma.f32 mem, mem, s1, ts3").unwrap();
    assert_eq!(rcp.column_slots(), 4);
    assert_eq!(sqrt.column_slots(), 7);
    assert_eq!(parse_instr("rsqrt.f32 ts0, mem").unwrap().column_slots(), 5);
    assert_eq!(fma.column_slots(), 1);
    assert_eq!(parse_instr("jump -1, 3").unwrap().column_slots(), 0);
    assert!(rcp.reads_memory() && !rcp.writes_memory());
    assert!(!sqrt.reads_memory() && sqrt.writes_memory());
    assert!(fma.reads_memory() && fma.writes_memory());
    assert_eq!(fma.max_ts_slot(), Some(3));
    // A narrowing conversion into memory keeps the other half, so it reads the column.
    assert!(parse_instr("cvt.f16.f32 mem, ts0, hi")
        .unwrap()
        .reads_memory());
    assert_eq!(parse_instr("sqacc.f32 mem").unwrap().max_ts_slot(), None);
    // DIV: seed + one Newton step more than RCP, then q = a*y and the two correction FMAs.
    let div = parse_instr("div.f32 ts2, mem, ts5").unwrap();
    assert_eq!(div.alu_ops(), 1 + 2 * DIV_NEWTON_STEPS + DIV_EXTRA_OPS);
    assert_eq!(div.alu_ops(), 12);
    assert_eq!(div.column_slots(), 6);
    assert_eq!(div.dtype(), Some(DType::F32));
    assert!(div.reads_memory() && !div.writes_memory());
    assert_eq!(div.max_ts_slot(), Some(5));
    let div = parse_instr("div.f32 mem, ts1, s7").unwrap();
    assert!(!div.reads_memory() && div.writes_memory());
    assert_eq!(div.max_ts_slot(), Some(1));
    assert_eq!(div.to_string(), "div.f32 mem, ts1, s7");
}

fn sample_macro() -> MacroCommand {
    parse_macro(
        ".macro channels=0+16 mode=all col_start=0 col_count=4096 chunk=8\n\
         .phase row=0\n  mov.f32 ts0, mem\n  sqacc.f32 ts0\n\
         .phase row=1024\n  fma.f32 mem, ts0, s1, mem\n.end\n",
    )
    .unwrap()
}

#[test]
fn macro_helpers() {
    let m = sample_macro();
    assert_eq!(m.max_ts_slot(), Some(0));
    assert_eq!(m.ts_entries_needed(), 8);
    assert_eq!(m.chunk_count(), 512);
    assert_eq!(m.phase_slots_per_column(&m.phases[0]), Some(2));
    assert_eq!(m.phase_slots_per_column(&m.phases[1]), Some(1));
}

#[test]
fn block_steps_unroll_loops_and_stop_at_exit() {
    let block: Vec<Instr> = [
        "nop",
        "add.f32 ts0, ts0, #1",
        "mul.f32 ts0, ts0, s1",
        "jump -2, 3",
        "exit",
        "nop",
    ]
    .iter()
    .map(|t| parse_instr(t).unwrap())
    .collect();
    let steps: Vec<Opcode> = BlockSteps::new(&block)
        .map(|s| s.unwrap().opcode())
        .collect();
    let mut expect = vec![Opcode::Nop];
    for _ in 0..4 {
        expect.extend([Opcode::Add, Opcode::Mul]);
    }
    assert_eq!(steps, expect);
    // A jump out of the block is reported, not followed.
    let bad = [parse_instr("jump -1, 1").unwrap()];
    assert_eq!(
        BlockSteps::new(&bad).next(),
        Some(Err(ControlError::JumpOutOfBlock { index: 0 }))
    );
}

#[test]
fn macro_validation_errors() {
    let mut m = sample_macro();
    m.chunk = 0;
    assert_eq!(
        m.validate(),
        Err(ValidationError::ChunkOutOfRange { chunk: 0 })
    );
    let mut m = sample_macro();
    m.chunk = 65;
    assert_eq!(
        m.validate(),
        Err(ValidationError::ChunkOutOfRange { chunk: 65 })
    );
    let mut m = sample_macro();
    m.channels.count = 0;
    assert_eq!(m.validate(), Err(ValidationError::NoChannels));
    let mut m = sample_macro();
    m.channels = ChannelRange {
        first: 65535,
        count: 2,
    };
    assert!(matches!(
        m.validate(),
        Err(ValidationError::ChannelOverflow { .. })
    ));
    let mut m = sample_macro();
    m.col_start = u32::MAX;
    assert!(matches!(
        m.validate(),
        Err(ValidationError::ColumnOverflow { .. })
    ));
    let mut m = sample_macro();
    m.phases[1].first = 1;
    assert!(matches!(
        m.validate(),
        Err(ValidationError::PhaseNotContiguous { phase: 1, .. })
    ));
    let mut m = sample_macro();
    m.phases[1].len = 2;
    assert!(matches!(
        m.validate(),
        Err(ValidationError::ProgramNotCovered { .. })
    ));
    let mut m = sample_macro();
    m.phases.pop();
    assert!(matches!(
        m.validate(),
        Err(ValidationError::ProgramNotCovered { .. })
    ));
}

#[test]
fn jumps_must_stay_in_phase_and_not_nest() {
    let e = parse_macro(
        ".macro channels=0+1 mode=all col_start=0 col_count=8 chunk=8\n\
         .phase row=0\n  nop\n.phase row=1\n  nop\n  jump -2, 1\n.end\n",
    )
    .unwrap_err();
    assert_eq!(e.line, 6);
    assert!(matches!(
        e.kind,
        AsmErrorKind::Invalid(ValidationError::JumpOutsidePhase { index: 2, phase: 1 })
    ));
    let e = parse_macro(
        ".macro channels=0+1 mode=all col_start=0 col_count=8 chunk=8\n\
         .phase row=0\n  nop\n  jump -1, 1\n  jump -2, 1\n.end\n",
    )
    .unwrap_err();
    assert_eq!(e.line, 5);
    assert!(matches!(
        e.kind,
        AsmErrorKind::Invalid(ValidationError::NestedLoop { index: 2, inner: 1 })
    ));
}

#[test]
fn macro_decode_errors_say_where() {
    let m = sample_macro();
    let mut buf = [0u8; MAX_MACRO_BYTES];
    let n = m.encode(&mut buf).unwrap();
    let bytes = &buf[..n];

    let mut bad = bytes.to_vec();
    bad[0] = b'X';
    assert!(matches!(
        MacroCommand::decode(&bad),
        Err(MacroDecodeError::BadMagic { .. })
    ));

    let mut bad = bytes.to_vec();
    bad[4] = 9;
    assert_eq!(
        MacroCommand::decode(&bad),
        Err(MacroDecodeError::BadVersion { found: 9 })
    );

    let mut bad = bytes.to_vec();
    bad[6] = 9;
    assert_eq!(
        MacroCommand::decode(&bad),
        Err(MacroDecodeError::TooManyPhases { count: 9 })
    );

    let mut bad = bytes.to_vec();
    bad[7] = 33;
    assert_eq!(
        MacroCommand::decode(&bad),
        Err(MacroDecodeError::ProgramTooLong { len: 33 })
    );

    let mut bad = bytes.to_vec();
    bad[12] = 2;
    assert_eq!(
        MacroCommand::decode(&bad),
        Err(MacroDecodeError::BadMode { value: 2 })
    );

    let mut bad = bytes.to_vec();
    bad[13] = 1;
    assert_eq!(
        MacroCommand::decode(&bad),
        Err(MacroDecodeError::ReservedNotZero { offset: 13 })
    );

    // Second instruction word: header 24 + 2 phases * 8 + 4.
    let mut bad = bytes.to_vec();
    bad[24 + 16 + 4 + 3] = 0x14; // opcode 0x05, reserved
    let e = MacroCommand::decode(&bad).unwrap_err();
    assert!(
        matches!(
            e,
            MacroDecodeError::Instr {
                offset: 44,
                index: 1,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("offset 44: instruction 1: opcode"),
        "{e}"
    );

    let mut long = bytes.to_vec();
    long.push(0);
    assert_eq!(
        MacroCommand::decode(&long),
        Err(MacroDecodeError::TrailingBytes { len: n, extra: 1 })
    );
    assert_eq!(
        MacroCommand::decode(&bytes[..n - 1]),
        Err(MacroDecodeError::Truncated {
            needed: n,
            available: n - 1
        })
    );

    let mut small = [0u8; 10];
    assert_eq!(
        m.encode(&mut small),
        Err(MacroEncodeError::BufferTooSmall {
            needed: n,
            available: 10
        })
    );
}

fn asm_err(text: &str) -> (u32, u32, AsmErrorKind, String) {
    let e = Assembler::new(text)
        .find_map(|r| r.err())
        .unwrap_or_else(|| panic!("{text:?} assembled"));
    (e.line, e.column, e.kind, e.to_string())
}

#[test]
fn assembler_errors_have_line_column_and_expectation() {
    let (l, c, k, m) = asm_err("nop\n  addx.f32 ts0, mem, mem\n");
    assert_eq!((l, c, k), (2, 3, AsmErrorKind::UnknownMnemonic));
    assert_eq!(m, "2:3: unknown instruction");

    let (l, c, k, _) = asm_err("add ts0, mem, mem");
    assert_eq!((l, c, k), (1, 4, AsmErrorKind::MissingType));

    let (l, c, k, _) = asm_err("add.f64 ts0, mem, mem");
    assert_eq!((l, c, k), (1, 5, AsmErrorKind::UnknownType));

    let (l, c, k, m) = asm_err("mov.f32 s1, mem");
    assert_eq!((l, c), (1, 9));
    assert_eq!(k, AsmErrorKind::Expected("tsN or mem"));
    assert_eq!(m, "1:9: expected tsN or mem");

    let (l, c, k, _) = asm_err("add.f32 ts0, mem, #300");
    assert_eq!(
        (l, c, k),
        (
            1,
            20,
            AsmErrorKind::OutOfRange {
                min: -256,
                max: 255
            }
        )
    );

    let (l, c, k, _) = asm_err("add.f32 ts8, mem, mem");
    assert_eq!(
        (l, c, k),
        (1, 11, AsmErrorKind::OutOfRange { min: 0, max: 7 })
    );

    let (_, c, k, _) = asm_err("add.f32 ts0, mem");
    assert_eq!((c, k), (17, AsmErrorKind::Expected("tsN, sN, mem or #imm")));

    let (_, _, k, _) = asm_err("add.f32 ts0, mem, mem, mem");
    assert_eq!(k, AsmErrorKind::ExtraOperand);

    let (_, _, k, _) = asm_err("rcp.f16 ts0, mem");
    assert!(matches!(k, AsmErrorKind::Expected(_)));

    let (_, c, k, _) = asm_err("div.i32 ts0, mem, ts1");
    assert_eq!(
        (c, k),
        (
            5,
            AsmErrorKind::Expected("type f32 (the only type of this instruction)")
        )
    );

    let (_, c, k, _) = asm_err("div.f32 ts0, mem, #3");
    assert_eq!((c, k), (19, AsmErrorKind::Expected("tsN, sN or mem")));

    let (_, _, k, _) = asm_err("div.f32 ts0, mem");
    assert_eq!(k, AsmErrorKind::Expected("tsN, sN or mem"));

    let (_, _, k, _) = asm_err("div ts0, mem, ts1");
    assert_eq!(k, AsmErrorKind::MissingType);

    let (_, c, k, _) = asm_err("cvt.bf16.f16 ts0, mem");
    assert_eq!((c, k), (10, AsmErrorKind::BadConversion));

    let (_, _, k, _) = asm_err("jump 2, 3");
    assert!(matches!(k, AsmErrorKind::Expected(_)));

    let (_, _, k, _) = asm_err("shl.i32 ts0, mem, 32");
    assert_eq!(k, AsmErrorKind::OutOfRange { min: 0, max: 31 });

    let (l, _, k, _) = asm_err(
        ".macro channels=0+1 mode=all col_start=0 col_count=8 chunk=8\n.phase row=0\nnop\n",
    );
    assert_eq!((l, k), (1, AsmErrorKind::UnterminatedMacro));

    let (l, c, k, _) = asm_err(".macro channels=0+1 mode=all col_start=0 col_count=8\n");
    assert_eq!((l, c, k), (1, 53, AsmErrorKind::MissingKey("chunk")));

    let (_, _, k, _) =
        asm_err(".macro channels=0+1 mode=all col_start=0 col_count=8 chunk=8 chunk=4\n");
    assert_eq!(k, AsmErrorKind::DuplicateKey);

    let (l, _, k, _) =
        asm_err(".macro channels=0+1 mode=all col_start=0 col_count=8 chunk=8\nnop\n.end\n");
    assert_eq!((l, k), (2, AsmErrorKind::InstrBeforePhase));

    let (_, _, k, _) = asm_err(".phase row=0\n");
    assert_eq!(k, AsmErrorKind::PhaseOutsideMacro);

    let (_, _, k, _) =
        asm_err(".macro channels=0+1 mode=single bank=1 col_start=0 col_count=8 chunk=8\n");
    assert_eq!(k, AsmErrorKind::MissingKey("bank_group"));

    let (_, _, k, _) = asm_err(
        ".macro channels=0+1 mode=all col_start=0 col_count=8 chunk=0\n.phase row=0\nnop\n.end\n",
    );
    assert_eq!(
        k,
        AsmErrorKind::Invalid(ValidationError::ChunkOutOfRange { chunk: 0 })
    );
}

#[test]
fn assembler_accepts_comments_case_and_hex() {
    let items: Vec<_> = Assembler::new(
        "; header\n\n  FMA.F32 TS0, MEM, S1, ts0 ; comment\nadd.i32 mem, mem, #-0x10\r\nsqacc.f32 mem\n",
    )
    .collect::<Result<_, _>>()
    .unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(
        parse_instr("add.i32 mem, mem, #-0x10").unwrap().to_string(),
        "add.i32 mem, mem, #-16"
    );
}
