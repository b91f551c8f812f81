//! Any text either assembles, and then its disassembly assembles to the same items, or
//! fails with a positioned error; the assembler never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nmcp_isa::asm::{write_instr, write_macro, Assembler, Item};

fuzz_target!(|text: &str| {
    let Ok(items) = Assembler::new(text).collect::<Result<Vec<Item>, _>>() else {
        return;
    };
    let mut again = String::new();
    for item in &items {
        match item {
            Item::Instr(i) => {
                write_instr(&mut again, i).expect("String never fails");
                again.push('\n');
            }
            Item::Macro(m) => write_macro(&mut again, m).expect("String never fails"),
        }
    }
    let reparsed = Assembler::new(&again).collect::<Result<Vec<Item>, _>>();
    assert_eq!(reparsed.as_ref(), Ok(&items), "{again}");
});
