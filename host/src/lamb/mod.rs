//! Host side of `nmcp lamb`: tensor I/O and the run driver.

pub mod npy_io;
