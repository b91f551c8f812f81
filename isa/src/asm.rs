//! Text assembler and disassembler for the NMC ISA. (Filled in by the ISA work of issue 2.)
