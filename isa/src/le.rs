//! Little-endian fields in byte buffers: the one reader and writer behind every record of
//! this crate (AQL packets, GEMM extension records, T3 descriptors, NMC macro-commands)
//! and the firmware's LAMB tensor descriptors.
//!
//! Every record is a fixed layout of little-endian integers at known byte offsets, so the
//! reader and writer offer both access by offset (`u32_at`, `put_u32_at`) for the
//! offset-table layouts and sequential access (`u32`, `put_u32`) for records read front
//! to back. A field that would run past the end of the buffer is an [`OutOfBounds`]
//! error, never a panic and never a silent zero: the firmware decodes whatever the host
//! wrote into device memory.

/// A field does not fit in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OutOfBounds {
    /// Byte offset of the field.
    pub at: usize,
    /// Bytes of the field.
    pub width: usize,
    /// Bytes in the buffer.
    pub len: usize,
}

impl core::fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{}-byte field at byte {} runs past the end of a {}-byte buffer",
            self.width, self.at, self.len
        )
    }
}

impl core::error::Error for OutOfBounds {}

/// The byte range of a `width`-byte field at `at` in a `len`-byte buffer.
fn field(at: usize, width: usize, len: usize) -> Result<core::ops::Range<usize>, OutOfBounds> {
    match at.checked_add(width) {
        Some(end) if end <= len => Ok(at..end),
        _ => Err(OutOfBounds { at, width, len }),
    }
}

/// Reads little-endian fields from a byte slice, by offset or from a cursor.
#[derive(Debug, Clone, Copy)]
pub struct LeReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// One by-offset and one sequential reader per integer type.
macro_rules! reads {
    ($($(#[$doc:meta])* $ty:ident: $at:ident, $next:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// # Errors
        /// [`OutOfBounds`] if the field does not fit in the buffer.
        #[inline]
        pub fn $at(&self, at: usize) -> Result<$ty, OutOfBounds> {
            self.array_at(at).map($ty::from_le_bytes)
        }

        $(#[$doc])*
        /// At the cursor, which then moves past it.
        ///
        /// # Errors
        /// [`OutOfBounds`] if the field does not fit in the buffer (the cursor stays).
        #[inline]
        pub fn $next(&mut self) -> Result<$ty, OutOfBounds> {
            self.array().map($ty::from_le_bytes)
        }
    )*};
}

impl<'a> LeReader<'a> {
    /// A reader over `bytes` with its cursor at byte 0.
    pub const fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// Bytes in the buffer.
    pub const fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the buffer is empty.
    pub const fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Byte offset of the cursor.
    pub const fn position(&self) -> usize {
        self.pos
    }

    /// `N` raw bytes at `at`.
    ///
    /// # Errors
    /// [`OutOfBounds`] if they do not fit in the buffer.
    #[inline]
    pub fn array_at<const N: usize>(&self, at: usize) -> Result<[u8; N], OutOfBounds> {
        let range = field(at, N, self.bytes.len())?;
        let mut out = [0u8; N];
        if let Some(src) = self.bytes.get(range) {
            out.copy_from_slice(src);
        }
        Ok(out)
    }

    /// `N` raw bytes at the cursor, which then moves past them.
    ///
    /// # Errors
    /// [`OutOfBounds`] if they do not fit in the buffer (the cursor stays).
    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], OutOfBounds> {
        let out = self.array_at(self.pos)?;
        self.pos += N;
        Ok(out)
    }

    /// Moves the cursor `n` bytes on.
    ///
    /// # Errors
    /// [`OutOfBounds`] if that passes the end of the buffer (the cursor stays).
    pub fn skip(&mut self, n: usize) -> Result<(), OutOfBounds> {
        self.pos = field(self.pos, n, self.bytes.len())?.end;
        Ok(())
    }

    reads! {
        /// A `u8`.
        u8: u8_at, u8;
        /// A little-endian `u16`.
        u16: u16_at, u16;
        /// A little-endian `u32`.
        u32: u32_at, u32;
        /// A little-endian `u64`.
        u64: u64_at, u64;
        /// A little-endian two's-complement `i64`.
        i64: i64_at, i64;
    }
}

/// Writes little-endian fields into a byte slice, by offset or at a cursor.
#[derive(Debug)]
pub struct LeWriter<'a> {
    bytes: &'a mut [u8],
    pos: usize,
}

/// One by-offset and one sequential writer per integer type.
macro_rules! writes {
    ($($(#[$doc:meta])* $ty:ident: $at:ident, $next:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// # Errors
        /// [`OutOfBounds`] if the field does not fit in the buffer (nothing is written).
        #[inline]
        pub fn $at(&mut self, at: usize, v: $ty) -> Result<(), OutOfBounds> {
            self.put_bytes_at(at, &v.to_le_bytes())
        }

        $(#[$doc])*
        /// At the cursor, which then moves past it.
        ///
        /// # Errors
        /// [`OutOfBounds`] if the field does not fit in the buffer (nothing is written,
        /// the cursor stays).
        #[inline]
        pub fn $next(&mut self, v: $ty) -> Result<(), OutOfBounds> {
            self.put_bytes(&v.to_le_bytes())
        }
    )*};
}

impl<'a> LeWriter<'a> {
    /// A writer over `bytes` with its cursor at byte 0. Bytes it is not told to write
    /// keep their value.
    pub fn new(bytes: &'a mut [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Byte offset of the cursor.
    pub const fn position(&self) -> usize {
        self.pos
    }

    /// Raw bytes at `at`.
    ///
    /// # Errors
    /// [`OutOfBounds`] if they do not fit in the buffer (nothing is written).
    #[inline]
    pub fn put_bytes_at(&mut self, at: usize, v: &[u8]) -> Result<(), OutOfBounds> {
        let range = field(at, v.len(), self.bytes.len())?;
        if let Some(dst) = self.bytes.get_mut(range) {
            dst.copy_from_slice(v);
        }
        Ok(())
    }

    /// Raw bytes at the cursor, which then moves past them.
    ///
    /// # Errors
    /// [`OutOfBounds`] if they do not fit in the buffer (nothing is written, the cursor
    /// stays).
    #[inline]
    pub fn put_bytes(&mut self, v: &[u8]) -> Result<(), OutOfBounds> {
        self.put_bytes_at(self.pos, v)?;
        self.pos += v.len();
        Ok(())
    }

    writes! {
        /// A `u8`.
        u8: put_u8_at, put_u8;
        /// A little-endian `u16`.
        u16: put_u16_at, put_u16;
        /// A little-endian `u32`.
        u32: put_u32_at, put_u32;
        /// A little-endian `u64`.
        u64: put_u64_at, put_u64;
        /// A little-endian two's-complement `i64`.
        i64: put_i64_at, put_i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_and_reader_agree_by_offset_and_in_sequence() {
        let mut buf = [0u8; 23];
        let mut w = LeWriter::new(&mut buf);
        w.put_u8(0xab).unwrap();
        w.put_u16(0x1234).unwrap();
        w.put_u32(0xdead_beef).unwrap();
        w.put_u64(0x0102_0304_0506_0708).unwrap();
        w.put_i64(-2).unwrap();
        assert_eq!(w.position(), 23);
        assert_eq!(
            buf[..7],
            [0xab, 0x34, 0x12, 0xef, 0xbe, 0xad, 0xde],
            "little-endian byte order"
        );
        let r = LeReader::new(&buf);
        assert_eq!(r.u8_at(0), Ok(0xab));
        assert_eq!(r.u16_at(1), Ok(0x1234));
        assert_eq!(r.u32_at(3), Ok(0xdead_beef));
        assert_eq!(r.u64_at(7), Ok(0x0102_0304_0506_0708));
        assert_eq!(r.i64_at(15), Ok(-2));
        let mut s = LeReader::new(&buf);
        assert_eq!(s.u8(), Ok(0xab));
        assert_eq!(s.u16(), Ok(0x1234));
        assert_eq!(s.u32(), Ok(0xdead_beef));
        assert_eq!(s.u64(), Ok(0x0102_0304_0506_0708));
        assert_eq!(s.i64(), Ok(-2));
        assert_eq!(s.position(), 23);
    }

    #[test]
    fn a_field_past_the_end_is_an_error_and_changes_nothing() {
        let mut buf = [7u8; 5];
        let mut w = LeWriter::new(&mut buf);
        assert_eq!(
            w.put_u32_at(2, 0),
            Err(OutOfBounds {
                at: 2,
                width: 4,
                len: 5
            })
        );
        w.put_u32(0).unwrap();
        assert_eq!(w.put_u16(0).map_err(|e| e.at), Err(4));
        assert_eq!(w.position(), 4);
        assert_eq!(buf, [0, 0, 0, 0, 7]);
        let mut r = LeReader::new(&buf);
        assert_eq!(r.u64_at(0).map_err(|e| e.width), Err(8));
        assert_eq!(r.u8_at(usize::MAX).map_err(|e| e.at), Err(usize::MAX));
        r.skip(4).unwrap();
        assert!(r.u16().is_err());
        assert_eq!(r.position(), 4);
        assert_eq!(r.u8(), Ok(7));
        assert!(r.skip(1).is_err());
    }
}
