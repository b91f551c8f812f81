//! Bank-ALU instruction word. (Filled in by the ISA work of issue 2.)
