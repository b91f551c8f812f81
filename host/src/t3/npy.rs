//! `.npy` output of `nmcp t3 check`: C-order arrays in the run's data type (f16 ->
//! `'<f2'`, f32 -> `'<f4'`). The emulator hands values as f32 that are exactly
//! representable in the type; a value that is not is reported, never silently rounded.

use std::path::Path;

use half::f16;
use nmcp_isa::gemm_ext::GemmDataType;
use npyz::WriterBuilder;

/// A file that could not be written, or a value that does not fit the type.
pub type NpyResult = Result<(), String>;

fn write<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], data: &[T]) -> NpyResult {
    let ctx = |e: std::io::Error| format!("{}: cannot write: {e}", path.display());
    let expected: u64 = shape.iter().product();
    if data.len() as u64 != expected {
        return Err(format!(
            "{}: {} elements for shape {shape:?} ({expected} expected)",
            path.display(),
            data.len()
        ));
    }
    let mut bytes = Vec::new();
    let mut w = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(shape)
        .writer(&mut bytes)
        .begin_nd()
        .map_err(ctx)?;
    w.extend(data.iter().copied()).map_err(ctx)?;
    w.finish().map_err(ctx)?;
    crate::cmd::io::write_file(path, &bytes)
}

/// Writes `data` as float32 (`'<f4'`).
///
/// # Errors
/// A shape that does not match the data, or an I/O failure, naming the file.
pub fn write_f32(path: &Path, shape: &[u64], data: &[f32]) -> NpyResult {
    write(path, shape, data)
}

/// Writes `data` as float16 (`'<f2'`); every value must be exactly representable.
///
/// # Errors
/// A value that would round (its index and value), a shape mismatch, an I/O failure.
pub fn write_f16(path: &Path, shape: &[u64], data: &[f32]) -> NpyResult {
    let mut h = Vec::with_capacity(data.len());
    for (i, &x) in data.iter().enumerate() {
        let v = f16::from_f32(x);
        if v.to_f32() != x && !x.is_nan() {
            return Err(format!(
                "{}: element {i} = {x:e} is not exactly representable in f16",
                path.display()
            ));
        }
        h.push(v);
    }
    write(path, shape, &h)
}

/// Writes `data` in `dtype` (f16 or f32; bf16 is not offered by `nmcp t3`).
///
/// # Errors
/// As [`write_f16`] / [`write_f32`]; bf16 is refused.
pub fn write_typed(path: &Path, dtype: GemmDataType, shape: &[u64], data: &[f32]) -> NpyResult {
    match dtype {
        GemmDataType::F16 => write_f16(path, shape, data),
        GemmDataType::F32 => write_f32(path, shape, data),
        GemmDataType::Bf16 => Err(format!(
            "{}: bf16 output is not supported (use f16 or f32)",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &Path) -> (String, Vec<u64>, npyz::NpyFile<std::io::Cursor<Vec<u8>>>) {
        let bytes = std::fs::read(path).unwrap();
        let f = npyz::NpyFile::new(std::io::Cursor::new(bytes)).unwrap();
        assert_eq!(f.order(), npyz::Order::C);
        (f.dtype().descr(), f.shape().to_vec(), f)
    }

    #[test]
    fn f32_round_trip_is_bit_exact() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let data: Vec<f32> = (0..12).map(|i| i as f32 * 0.37 - 2.0).collect();
        write_f32(&p, &[3, 4], &data).unwrap();
        let (descr, shape, f) = read(&p);
        assert_eq!(descr, "'<f4'");
        assert_eq!(shape, vec![3, 4]);
        let back: Vec<f32> = f.into_vec().unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&data));
    }

    #[test]
    fn f16_round_trip_is_bit_exact() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.npy");
        // Exactly representable in f16: small multiples of 1/8, a subnormal, -0, 65504.
        let mut data: Vec<f32> = (0..10).map(|i| i as f32 * 0.125 - 0.5).collect();
        data.extend([-0.0, 65504.0]);
        data.push(f16::from_bits(1).to_f32());
        data.extend([1.0, 2.0, 3.0]);
        write_f16(&p, &[2, 8], &data).unwrap();
        let (descr, shape, f) = read(&p);
        assert_eq!(descr, "'<f2'");
        assert_eq!(shape, vec![2, 8]);
        let back: Vec<f16> = f.into_vec().unwrap();
        let want: Vec<u16> = data.iter().map(|&x| f16::from_f32(x).to_bits()).collect();
        assert_eq!(back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want);
        for (b, x) in back.iter().zip(&data) {
            assert_eq!(b.to_f32().to_bits(), x.to_bits());
        }
    }

    #[test]
    fn inexact_f16_and_bad_shapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.npy");
        let e = write_f16(&p, &[1, 1], &[0.1]).unwrap_err();
        assert!(e.contains("element 0") && e.contains("f16"), "{e}");
        let e = write_f32(&p, &[2, 2], &[1.0]).unwrap_err();
        assert!(e.contains("shape"), "{e}");
        assert!(write_typed(&p, GemmDataType::Bf16, &[1], &[1.0]).is_err());
    }
}
