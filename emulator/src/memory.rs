//! Device memory that holds data, so results of NMC and DMA can be checked.
//!
//! Sparse: 4 KiB pages are created on first write and read as zero before that. A
//! `BTreeMap` keeps iteration (checkpoints, dumps) deterministic.

use std::collections::BTreeMap;

/// Bytes per page of the sparse store.
pub const PAGE_BYTES: usize = 4096;

/// Sparse, zero-initialised byte-addressed memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    pages: BTreeMap<u64, Box<[u8; PAGE_BYTES]>>,
}

fn split(addr: u64) -> (u64, usize) {
    (
        addr / PAGE_BYTES as u64,
        (addr % PAGE_BYTES as u64) as usize,
    )
}

impl DeviceMemory {
    /// Empty (all-zero) memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Pages that have been written.
    pub fn resident_pages(&self) -> usize {
        self.pages.len()
    }

    /// Copies `buf.len()` bytes starting at `addr` into `buf`. Addresses wrap at 2^64.
    pub fn read(&self, addr: u64, buf: &mut [u8]) {
        let mut done = 0;
        while done < buf.len() {
            let (page, off) = split(addr.wrapping_add(done as u64));
            let n = (PAGE_BYTES - off).min(buf.len() - done);
            let dst = &mut buf[done..done + n];
            match self.pages.get(&page) {
                Some(p) => dst.copy_from_slice(&p[off..off + n]),
                None => dst.fill(0),
            }
            done += n;
        }
    }

    /// Writes `data` starting at `addr`.
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        let mut done = 0;
        while done < data.len() {
            let (page, off) = split(addr.wrapping_add(done as u64));
            let n = (PAGE_BYTES - off).min(data.len() - done);
            let p = self
                .pages
                .entry(page)
                .or_insert_with(|| Box::new([0; PAGE_BYTES]));
            p[off..off + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
    }

    /// Reads little-endian f32 values.
    pub fn read_f32(&self, addr: u64, out: &mut [f32]) {
        let mut b = [0u8; 4];
        for (i, v) in out.iter_mut().enumerate() {
            self.read(addr.wrapping_add(4 * i as u64), &mut b);
            *v = f32::from_le_bytes(b);
        }
    }

    /// Writes little-endian f32 values.
    pub fn write_f32(&mut self, addr: u64, values: &[f32]) {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.write(addr, &bytes);
    }

    /// Reads little-endian u16 values (the bit patterns of f16 or bf16 elements).
    pub fn read_u16(&self, addr: u64, out: &mut [u16]) {
        let mut b = [0u8; 2];
        for (i, v) in out.iter_mut().enumerate() {
            self.read(addr.wrapping_add(2 * i as u64), &mut b);
            *v = u16::from_le_bytes(b);
        }
    }

    /// Writes little-endian u16 values.
    pub fn write_u16(&mut self, addr: u64, values: &[u16]) {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.write(addr, &bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_zero_then_what_was_written_across_pages() {
        let mut m = DeviceMemory::new();
        let mut buf = [7u8; 10];
        m.read(4090, &mut buf);
        assert_eq!(buf, [0; 10]);
        m.write(4090, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        m.read(4090, &mut buf);
        assert_eq!(buf, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(m.resident_pages(), 2);
        let vals = [1.5f32, -2.25, 1e-7, f32::MAX];
        m.write_f32(8190, &vals);
        let mut back = [0f32; 4];
        m.read_f32(8190, &mut back);
        assert_eq!(back, vals);
    }
}
