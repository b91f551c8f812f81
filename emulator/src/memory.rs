//! Device memory: the bytes a GPU node's HBM holds, for queues, packets, signals,
//! descriptors, tensors and collective buffers alike (one store per node).
//!
//! Sparse: 4 KiB pages are created on first write and read as zero before that. A
//! `BTreeMap` keeps iteration (checkpoints, dumps) deterministic. Every access is checked
//! against the node's mapped range, so a firmware bug that reads outside device memory gets
//! the same [`MemoryError::OutOfRange`] the hardware's fault would give, never a silent
//! zero.

use std::collections::BTreeMap;

use nmcp_firmware::platform::MemoryError;
use nmcp_isa::aql::DeviceRange;
use nmcp_isa::nmc::DType;

/// Bytes per page of the sparse store.
pub const PAGE_BYTES: usize = 4096;

/// Sparse, zero-initialised, range-checked device memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMemory {
    range: DeviceRange,
    pages: BTreeMap<u64, Box<[u8; PAGE_BYTES]>>,
    /// A stretch held as words instead of pages ([`DeviceMemory::map_words`]).
    window: Option<Window>,
}

/// A directly mapped stretch of device memory: the words a CP reads and patches in place
/// through the platform's mapped view (the queues' rings and indices), as a hardware CP
/// sees its queue memory at a fixed address. Word `i` holds bytes `4i..4i + 4` from
/// `base`, little-endian, as the firmware reads them (`u32::from_le`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Window {
    base: u64,
    words: Vec<u32>,
}

impl Window {
    fn end(&self) -> u64 {
        self.base + 4 * self.words.len() as u64
    }

    fn byte(&self, addr: u64) -> u8 {
        let i = (addr - self.base) as usize;
        (u32::from_le(self.words[i / 4]) >> (8 * (i % 4))) as u8
    }

    fn set_byte(&mut self, addr: u64, b: u8) {
        let i = (addr - self.base) as usize;
        let shift = 8 * (i % 4);
        let w = &mut self.words[i / 4];
        let v = (u32::from_le(*w) & !(0xFF << shift)) | (u32::from(b) << shift);
        *w = v.to_le();
    }
}

fn split(addr: u64) -> (u64, usize) {
    (
        addr / PAGE_BYTES as u64,
        (addr % PAGE_BYTES as u64) as usize,
    )
}

impl DeviceMemory {
    /// Empty (all-zero) memory mapped at `range`.
    pub fn new(range: DeviceRange) -> Self {
        Self {
            range,
            pages: BTreeMap::new(),
            window: None,
        }
    }

    /// Empty memory mapped at `0..capacity` (a whole HBM device).
    pub fn with_capacity(capacity: u64) -> Self {
        Self::new(DeviceRange {
            base: 0,
            len: capacity,
        })
    }

    /// The mapped range.
    pub fn range(&self) -> DeviceRange {
        self.range
    }

    /// Pages that have been written.
    pub fn resident_pages(&self) -> usize {
        self.pages.len()
    }

    fn check(&self, addr: u64, len: usize) -> Result<(), MemoryError> {
        if self.range.contains(addr, len as u64) {
            Ok(())
        } else {
            Err(MemoryError::OutOfRange)
        }
    }

    /// Holds `[base, base + len)` as words from now on (its bytes so far carried over),
    /// offered by [`DeviceMemory::mapped_words`]: the view a CP's fast path reads (the
    /// node maps its queues' area). One window per memory; a second call moves it.
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`] outside the mapped range; [`MemoryError::Misaligned`]
    /// when `base` or `len` is not a multiple of 4.
    pub fn map_words(&mut self, base: u64, len: u64) -> Result<(), MemoryError> {
        let n = usize::try_from(len).map_err(|_| MemoryError::OutOfRange)?;
        self.check(base, n)?;
        if !base.is_multiple_of(4) || !len.is_multiple_of(4) {
            return Err(MemoryError::Misaligned);
        }
        let mut bytes = vec![0u8; n];
        self.read(base, &mut bytes)?;
        // The old window's bytes go back to pages before the new one takes its range.
        if let Some(old) = self.window.take() {
            let mut b = vec![0u8; 4 * old.words.len()];
            for (i, d) in b.iter_mut().enumerate() {
                *d = old.byte(old.base + i as u64);
            }
            self.write(old.base, &b)?;
            self.read(base, &mut bytes)?;
        }
        let words = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]).to_le())
            .collect();
        self.window = Some(Window { base, words });
        // The pages under the window are stale from now on; drop the ones it covers whole.
        let first = base.div_ceil(PAGE_BYTES as u64);
        let end = (base + len) / PAGE_BYTES as u64;
        self.pages.retain(|&p, _| p < first || p >= end);
        Ok(())
    }

    /// The window of [`DeviceMemory::map_words`]: its address and its words.
    pub fn mapped_words(&self) -> Option<(u64, &[u32])> {
        self.window.as_ref().map(|w| (w.base, w.words.as_slice()))
    }

    /// [`DeviceMemory::mapped_words`] for stores.
    pub fn mapped_words_mut(&mut self) -> Option<(u64, &mut [u32])> {
        self.window
            .as_mut()
            .map(|w| (w.base, w.words.as_mut_slice()))
    }

    /// Bytes from `a` up to the window's start (unbounded when the window is not ahead).
    fn before_window(&self, a: u64) -> usize {
        match &self.window {
            Some(w) if a < w.base => usize::try_from(w.base - a).unwrap_or(usize::MAX),
            _ => usize::MAX,
        }
    }

    /// Copies `buf.len()` bytes starting at `addr` into `buf`.
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`] if any byte lies outside the mapped range (nothing is
    /// read then).
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryError> {
        self.check(addr, buf.len())?;
        let mut done = 0;
        while done < buf.len() {
            let a = addr + done as u64;
            if let Some(w) = self.window.as_ref().filter(|w| a >= w.base && a < w.end()) {
                let n = ((w.end() - a) as usize).min(buf.len() - done);
                for (i, d) in buf[done..done + n].iter_mut().enumerate() {
                    *d = w.byte(a + i as u64);
                }
                done += n;
                continue;
            }
            let (page, off) = split(a);
            let n = (PAGE_BYTES - off)
                .min(buf.len() - done)
                .min(self.before_window(a));
            let dst = &mut buf[done..done + n];
            match self.pages.get(&page) {
                Some(p) => dst.copy_from_slice(&p[off..off + n]),
                None => dst.fill(0),
            }
            done += n;
        }
        Ok(())
    }

    /// Writes `data` starting at `addr`.
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`] if any byte lies outside the mapped range (nothing is
    /// written then).
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        self.check(addr, data.len())?;
        let mut done = 0;
        while done < data.len() {
            let a = addr + done as u64;
            if let Some(w) = self.window.as_mut().filter(|w| a >= w.base && a < w.end()) {
                let n = ((w.end() - a) as usize).min(data.len() - done);
                for (i, &b) in data[done..done + n].iter().enumerate() {
                    w.set_byte(a + i as u64, b);
                }
                done += n;
                continue;
            }
            let (page, off) = split(a);
            let n = (PAGE_BYTES - off)
                .min(data.len() - done)
                .min(self.before_window(a));
            let p = self
                .pages
                .entry(page)
                .or_insert_with(|| Box::new([0; PAGE_BYTES]));
            p[off..off + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// Reads a little-endian u64.
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`].
    pub fn read_u64(&self, addr: u64) -> Result<u64, MemoryError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Writes a little-endian u64.
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`].
    pub fn write_u64(&mut self, addr: u64, v: u64) -> Result<(), MemoryError> {
        self.write(addr, &v.to_le_bytes())
    }

    /// Reads an HSA signal's value (i64).
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`].
    pub fn read_signal(&self, handle: u64) -> Result<i64, MemoryError> {
        Ok(self.read_u64(handle)? as i64)
    }

    /// Stores an HSA signal's value (i64).
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`].
    pub fn write_signal(&mut self, handle: u64, v: i64) -> Result<(), MemoryError> {
        self.write_u64(handle, v as u64)
    }

    /// Atomically decrements an HSA signal (`hsa_signal_subtract`-style completion, as a
    /// packet processor signals a packet done): a signal shared by several packets
    /// reaches 0 on the last completion. Returns the new value.
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`].
    pub fn decrement_signal(&mut self, handle: u64) -> Result<i64, MemoryError> {
        let v = self.read_signal(handle)?.wrapping_sub(1);
        self.write_signal(handle, v)?;
        Ok(v)
    }

    /// Reads little-endian f32 values.
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`].
    pub fn read_f32(&self, addr: u64, out: &mut [f32]) -> Result<(), MemoryError> {
        self.check(addr, out.len() * 4)?;
        let mut b = [0u8; 4];
        for (i, v) in out.iter_mut().enumerate() {
            self.read(addr + 4 * i as u64, &mut b)?;
            *v = f32::from_le_bytes(b);
        }
        Ok(())
    }

    /// Writes little-endian f32 values.
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`].
    pub fn write_f32(&mut self, addr: u64, values: &[f32]) -> Result<(), MemoryError> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.write(addr, &bytes)
    }

    /// Reads little-endian u16 values (the bit patterns of f16 or bf16 elements).
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`].
    pub fn read_u16(&self, addr: u64, out: &mut [u16]) -> Result<(), MemoryError> {
        self.check(addr, out.len() * 2)?;
        let mut b = [0u8; 2];
        for (i, v) in out.iter_mut().enumerate() {
            self.read(addr + 2 * i as u64, &mut b)?;
            *v = u16::from_le_bytes(b);
        }
        Ok(())
    }

    /// Writes little-endian u16 values.
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`].
    pub fn write_u16(&mut self, addr: u64, values: &[u16]) -> Result<(), MemoryError> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.write(addr, &bytes)
    }

    /// A near-memory op-and-store: adds `data` (lanes of `dtype`, little-endian) to what
    /// memory holds at `addr` and stores the sum, lane by lane, with the bank ALU's
    /// arithmetic (f16/bf16 through f32 and rounded back; i32 wrapping).
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`]; [`MemoryError::Misaligned`] when `data` is not a whole
    /// number of lanes.
    pub fn apply_update(
        &mut self,
        addr: u64,
        dtype: DType,
        data: &[u8],
    ) -> Result<(), MemoryError> {
        let lane = match dtype {
            DType::F16 | DType::Bf16 => 2,
            DType::F32 | DType::I32 => 4,
        };
        if !data.len().is_multiple_of(lane) {
            return Err(MemoryError::Misaligned);
        }
        let mut old = vec![0u8; data.len()];
        self.read(addr, &mut old)?;
        for (o, d) in old.chunks_exact_mut(lane).zip(data.chunks_exact(lane)) {
            match dtype {
                DType::F32 => {
                    let s = f32::from_le_bytes([o[0], o[1], o[2], o[3]])
                        + f32::from_le_bytes([d[0], d[1], d[2], d[3]]);
                    o.copy_from_slice(&s.to_le_bytes());
                }
                DType::I32 => {
                    let s = i32::from_le_bytes([o[0], o[1], o[2], o[3]])
                        .wrapping_add(i32::from_le_bytes([d[0], d[1], d[2], d[3]]));
                    o.copy_from_slice(&s.to_le_bytes());
                }
                DType::F16 => {
                    let s = half::f16::from_le_bytes([o[0], o[1]]).to_f32()
                        + half::f16::from_le_bytes([d[0], d[1]]).to_f32();
                    o.copy_from_slice(&half::f16::from_f32(s).to_le_bytes());
                }
                DType::Bf16 => {
                    let s = half::bf16::from_le_bytes([o[0], o[1]]).to_f32()
                        + half::bf16::from_le_bytes([d[0], d[1]]).to_f32();
                    o.copy_from_slice(&half::bf16::from_f32(s).to_le_bytes());
                }
            }
        }
        self.write(addr, &old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_zero_then_what_was_written_across_pages() {
        let mut m = DeviceMemory::with_capacity(1 << 20);
        let mut buf = [7u8; 10];
        m.read(4090, &mut buf).unwrap();
        assert_eq!(buf, [0; 10]);
        m.write(4090, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]).unwrap();
        m.read(4090, &mut buf).unwrap();
        assert_eq!(buf, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(m.resident_pages(), 2);
        let vals = [1.5f32, -2.25, 1e-7, f32::MAX];
        m.write_f32(8190, &vals).unwrap();
        let mut back = [0f32; 4];
        m.read_f32(8190, &mut back).unwrap();
        assert_eq!(back, vals);
    }

    #[test]
    fn outside_the_range_is_an_error_and_changes_nothing() {
        let mut m = DeviceMemory::new(DeviceRange {
            base: 0x1000,
            len: 0x1000,
        });
        assert_eq!(m.write(0xFFC, &[1; 8]), Err(MemoryError::OutOfRange));
        assert_eq!(m.write(0x1FFC, &[1; 8]), Err(MemoryError::OutOfRange));
        assert_eq!(m.resident_pages(), 0);
        let mut b = [0u8; 4];
        assert_eq!(m.read(0x2000, &mut b), Err(MemoryError::OutOfRange));
        assert!(m.write_u64(0x1FF8, 9).is_ok());
        assert_eq!(m.read_u64(0x1FF8), Ok(9));
    }

    #[test]
    fn update_adds_lane_by_lane() {
        let mut m = DeviceMemory::with_capacity(4096);
        m.write_f32(0, &[1.0, 2.5]).unwrap();
        let add: Vec<u8> = [0.5f32, -2.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        m.apply_update(0, DType::F32, &add).unwrap();
        let mut back = [0f32; 2];
        m.read_f32(0, &mut back).unwrap();
        assert_eq!(back, [1.5, 0.0]);
        let h = |x: f32| half::f16::from_f32(x).to_bits();
        m.write_u16(64, &[h(1.0), h(-3.0)]).unwrap();
        let add: Vec<u8> = [h(0.25), h(1.0)]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        m.apply_update(64, DType::F16, &add).unwrap();
        let mut hb = [0u16; 2];
        m.read_u16(64, &mut hb).unwrap();
        assert_eq!(hb, [h(1.25), h(-2.0)]);
        assert_eq!(
            m.apply_update(0, DType::F32, &[0; 3]),
            Err(MemoryError::Misaligned)
        );
        m.write(100, &(-5i32).to_le_bytes()).unwrap();
        m.apply_update(100, DType::I32, &7i32.to_le_bytes())
            .unwrap();
        assert_eq!(m.read_u64(100).unwrap() as u32 as i32, 2);
    }
}
