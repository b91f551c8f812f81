//! Property tests: every valid instruction and macro-command round-trips through its
//! binary form, postcard and the text form; every word either decodes to something that
//! re-encodes to the same word or errors.

// Tests may unwrap and index: a panic is a test failure (the crate denies these in
// Cargo.toml for its library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use nmcp_isa::asm::{parse_instr, parse_macro, write_instr, write_macro, Assembler, Item};
use nmcp_isa::nmc::*;
use proptest::prelude::*;

fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(DType::ALL.to_vec())
}

fn ts() -> impl Strategy<Value = TsSlot> {
    (0..TS_SLOTS).prop_map(|s| TsSlot::new(s).unwrap())
}

fn sreg() -> impl Strategy<Value = ScalarReg> {
    (0..SCALAR_REGS).prop_map(|s| ScalarReg::new(s).unwrap())
}

fn imm() -> impl Strategy<Value = Imm> {
    (IMM_MIN..=IMM_MAX).prop_map(|v| Imm::new(v).unwrap())
}

fn loc() -> impl Strategy<Value = Loc> {
    prop_oneof![ts().prop_map(Loc::Ts), Just(Loc::Mem)]
}

fn src() -> impl Strategy<Value = Src> {
    prop_oneof![
        ts().prop_map(Src::Ts),
        sreg().prop_map(Src::Sreg),
        Just(Src::Mem)
    ]
}

fn src_imm() -> impl Strategy<Value = SrcImm> {
    prop_oneof![src().prop_map(SrcImm::from), imm().prop_map(SrcImm::Imm)]
}

fn scalar() -> impl Strategy<Value = Scalar> {
    prop_oneof![sreg().prop_map(Scalar::Sreg), imm().prop_map(Scalar::Imm)]
}

fn half() -> impl Strategy<Value = Half> {
    prop_oneof![Just(Half::Lo), Just(Half::Hi)]
}

fn conversion() -> impl Strategy<Value = Conversion> {
    prop_oneof![
        half().prop_map(Conversion::F16ToF32),
        half().prop_map(Conversion::Bf16ToF32),
        half().prop_map(Conversion::F32ToF16),
        half().prop_map(Conversion::F32ToBf16),
        Just(Conversion::I32ToF32),
        Just(Conversion::F32ToI32),
    ]
}

/// Any non-control instruction.
fn body_instr() -> impl Strategy<Value = Instr> {
    let binop = prop::sample::select(vec![
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Min,
        BinaryOp::Max,
    ]);
    let special = prop::sample::select(vec![SpecialOp::Rcp, SpecialOp::Rsqrt, SpecialOp::Sqrt]);
    prop_oneof![
        Just(Instr::Nop),
        (dtype(), loc(), loc()).prop_map(|(dtype, dst, src)| Instr::Mov { dtype, dst, src }),
        (dtype(), loc(), scalar()).prop_map(|(dtype, dst, value)| Instr::Fill {
            dtype,
            dst,
            value
        }),
        (conversion(), loc(), loc()).prop_map(|(conv, dst, src)| Instr::Cvt { conv, dst, src }),
        (binop, dtype(), loc(), src(), src_imm()).prop_map(|(op, dtype, dst, src0, src1)| {
            Instr::Binary {
                op,
                dtype,
                dst,
                src0,
                src1,
            }
        }),
        (dtype(), loc(), src(), src(), src()).prop_map(|(dtype, dst, src0, src1, src2)| {
            Instr::Fma {
                dtype,
                dst,
                src0,
                src1,
                src2,
            }
        }),
        (dtype(), loc(), src(), scalar()).prop_map(|(dtype, dst, src, factor)| Instr::Scale {
            dtype,
            dst,
            src,
            factor
        }),
        (
            prop_oneof![Just(ShiftOp::Shl), Just(ShiftOp::Shr)],
            dtype(),
            loc(),
            src(),
            0..=MAX_SHIFT
        )
            .prop_map(|(op, dtype, dst, src, n)| Instr::Shift {
                op,
                dtype,
                dst,
                src,
                amount: ShiftAmount::new(n).unwrap()
            }),
        (
            prop_oneof![Just(ReduceOp::Acc), Just(ReduceOp::SqAcc)],
            dtype(),
            loc()
        )
            .prop_map(|(op, dtype, src)| Instr::Reduce { op, dtype, src }),
        (special, loc(), loc()).prop_map(|(op, dst, src)| Instr::Special { op, dst, src }),
        (loc(), src(), src()).prop_map(|(dst, src0, src1)| Instr::Div { dst, src0, src1 }),
    ]
}

fn any_instr() -> impl Strategy<Value = Instr> {
    prop_oneof![
        8 => body_instr(),
        1 => Just(Instr::Exit),
        1 => (1..=MAX_JUMP_BACK, 1..=MAX_JUMP_TAKEN).prop_map(|(b, t)| Instr::Jump {
            back: JumpBack::new(b).unwrap(),
            taken: JumpTaken::new(t).unwrap(),
        }),
    ]
}

/// A phase block with at most one loop at its end, whose body lies inside the block.
fn block() -> impl Strategy<Value = Vec<Instr>> {
    (
        prop::collection::vec(body_instr(), 1..5),
        prop::option::of((1usize..=4, 1..=MAX_JUMP_TAKEN)),
        any::<bool>(),
    )
        .prop_map(|(mut body, jump, exit)| {
            if let Some((back, taken)) = jump {
                let back = back.min(body.len());
                body.push(Instr::Jump {
                    back: JumpBack::new(back as u8).unwrap(),
                    taken: JumpTaken::new(taken).unwrap(),
                });
            }
            if exit {
                body.push(Instr::Exit);
            }
            body
        })
}

fn macro_cmd() -> impl Strategy<Value = MacroCommand> {
    (
        (any::<u16>(), 1u16..=64),
        prop_oneof![
            Just(BankMode::AllBank),
            (0u8..4, 0u8..4)
                .prop_map(|(bank_group, bank)| BankMode::SingleBank { bank_group, bank })
        ],
        (0u32..1 << 20, 1u32..1 << 16, 1..=MAX_CHUNK),
        prop::collection::vec((any::<u32>(), block()), 1..=4),
    )
        .prop_map(
            |((first, count), mode, (col_start, col_count, chunk), blocks)| {
                let first = u32::from(first).min(65536 - u32::from(count)) as u16;
                let mut phases = heapless::Vec::new();
                let mut program = heapless::Vec::new();
                for (base_row, b) in blocks {
                    let first = program.len() as u8;
                    for i in &b {
                        program.push(*i).unwrap();
                    }
                    phases
                        .push(Phase {
                            base_row,
                            first,
                            len: b.len() as u8,
                        })
                        .unwrap();
                }
                MacroCommand {
                    channels: ChannelRange { first, count },
                    mode,
                    col_start,
                    col_count,
                    chunk,
                    phases,
                    program,
                }
            },
        )
}

fn text_of(i: &Instr) -> String {
    let mut s = String::new();
    write_instr(&mut s, i).unwrap();
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn instr_word_round_trip(i in any_instr()) {
        prop_assert_eq!(Instr::decode(i.encode()), Ok(i));
    }

    #[test]
    fn every_word_decodes_canonically_or_errors(w in any::<u32>()) {
        if let Ok(i) = Instr::decode(w) {
            prop_assert_eq!(i.encode(), w);
        }
    }

    #[test]
    fn instr_text_round_trip(i in any_instr()) {
        let text = text_of(&i);
        prop_assert_eq!(parse_instr(&text), Ok(i), "text {:?}", text);
        // Display is the same canonical text.
        prop_assert_eq!(i.to_string(), text);
    }

    #[test]
    fn instr_postcard_round_trip(i in any_instr()) {
        let bytes = postcard::to_allocvec(&i).unwrap();
        prop_assert_eq!(postcard::from_bytes::<Instr>(&bytes).unwrap(), i);
    }

    #[test]
    fn column_slots_positive_unless_control(i in any_instr()) {
        prop_assert_eq!(i.column_slots() == 0, i.is_control());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn macro_binary_round_trip(m in macro_cmd()) {
        prop_assert_eq!(m.validate(), Ok(()));
        let mut buf = [0u8; MAX_MACRO_BYTES];
        let n = m.encode(&mut buf).unwrap();
        prop_assert_eq!(n, m.encoded_len());
        prop_assert_eq!(MacroCommand::decode(&buf[..n]), Ok(m.clone()));
        // Every strict prefix is reported as truncated, never misread.
        for cut in 0..n {
            let is_truncated = matches!(
                MacroCommand::decode(&buf[..cut]),
                Err(MacroDecodeError::Truncated { .. })
            );
            prop_assert!(is_truncated, "cut at {}", cut);
        }
    }

    #[test]
    fn macro_postcard_round_trip(m in macro_cmd()) {
        let bytes = postcard::to_allocvec(&m).unwrap();
        prop_assert_eq!(postcard::from_bytes::<MacroCommand>(&bytes).unwrap(), m);
    }

    #[test]
    fn macro_text_round_trip(m in macro_cmd()) {
        let mut text = String::new();
        write_macro(&mut text, &m).unwrap();
        let parsed = parse_macro(&text);
        prop_assert_eq!(parsed.as_ref(), Ok(&m), "text:\n{}", text);
        // Same command, so the same bytes.
        let (mut a, mut b) = ([0u8; MAX_MACRO_BYTES], [0u8; MAX_MACRO_BYTES]);
        let n = m.encode(&mut a).unwrap();
        prop_assert_eq!(parsed.unwrap().encode(&mut b), Ok(n));
        prop_assert_eq!(&a[..n], &b[..n]);
    }

    #[test]
    fn mixed_file_round_trip(items in prop::collection::vec(
        prop_oneof![any_instr().prop_map(Item::Instr), macro_cmd().prop_map(Item::Macro)], 0..6)
    ) {
        let mut text = String::new();
        for it in &items {
            match it {
                Item::Instr(i) => { write_instr(&mut text, i).unwrap(); text.push('\n'); }
                Item::Macro(m) => write_macro(&mut text, m).unwrap(),
            }
        }
        let parsed: Result<Vec<Item>, _> = Assembler::new(&text).collect();
        prop_assert_eq!(parsed, Ok(items));
    }

    #[test]
    fn macro_decode_of_any_bytes_never_panics_and_round_trips(
        bytes in prop::collection::vec(any::<u8>(), 0..300)
    ) {
        if let Ok(m) = MacroCommand::decode(&bytes) {
            let mut buf = [0u8; MAX_MACRO_BYTES];
            let n = m.encode(&mut buf).unwrap();
            prop_assert_eq!(&buf[..n], &bytes[..]);
        }
    }

    #[test]
    fn corrupted_macro_bytes_error_or_stay_valid(m in macro_cmd(), at in any::<usize>(), x in 1u8..=255) {
        let mut buf = [0u8; MAX_MACRO_BYTES];
        let n = m.encode(&mut buf).unwrap();
        buf[at % n] ^= x;
        if let Ok(d) = MacroCommand::decode(&buf[..n]) {
            prop_assert_eq!(d.validate(), Ok(()));
        }
    }
}
