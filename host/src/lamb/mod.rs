//! Host side of `nmcp lamb`: tensor I/O, the checkpointed run driver, the finiteness
//! check of a functional step and the text report.

pub mod checkpoint;
pub mod finite;
pub mod npy_io;
pub(crate) mod options;
pub mod text;
