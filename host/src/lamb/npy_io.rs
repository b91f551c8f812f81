//! `.npy` tensors in and out of `nmcp lamb`, so users can check the NMC result against
//! their own framework. For each tensor NAME a directory holds `NAME.w.npy` and
//! `NAME.g.npy`, and optionally `NAME.m.npy` and `NAME.v.npy` (absent means zeros); all
//! float32, C order, any shape, the same shape for one tensor.

use std::fmt;
use std::path::{Path, PathBuf};

use nmcp_emulator::lamb::TensorState;
use npyz::WriterBuilder;

/// A tensor read from (or to be written to) a directory.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTensor {
    /// NAME in `NAME.w.npy`.
    pub name: String,
    /// Shape of all four arrays.
    pub shape: Vec<u64>,
    /// The optimizer state.
    pub state: TensorState,
}

/// What went wrong with which file.
#[derive(Debug)]
pub struct NpyIoError {
    /// The file (or directory) concerned.
    pub path: PathBuf,
    /// What is wrong with it.
    pub what: String,
}

impl fmt::Display for NpyIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.what)
    }
}

impl std::error::Error for NpyIoError {}

fn err(path: &Path, what: impl Into<String>) -> NpyIoError {
    NpyIoError {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

/// Reads one float32 C-order array.
fn read_array(path: &Path) -> Result<(Vec<u64>, Vec<f32>), NpyIoError> {
    // read_input's message starts with the path already.
    let bytes =
        crate::cmd::io::read_input(path, crate::cmd::io::MAX_BINARY_INPUT).map_err(|e| {
            let what = e
                .strip_prefix(&format!("{}: ", path.display()))
                .unwrap_or(&e);
            err(path, what)
        })?;
    let file = npyz::NpyFile::new(&bytes[..])
        .map_err(|e| err(path, format!("not a valid .npy file: {e}")))?;
    let dtype = file.dtype();
    let ok_dtype = matches!(&dtype, npyz::DType::Plain(ts) if ts.to_string() == "<f4");
    if !ok_dtype {
        return Err(err(
            path,
            format!("dtype is {}, expected float32 ('<f4')", dtype.descr()),
        ));
    }
    if file.order() != npyz::Order::C && file.shape().len() > 1 {
        return Err(err(path, "array is in Fortran order, expected C order"));
    }
    let shape = file.shape().to_vec();
    // The header's shape is input: its product must not wrap, and it cannot exceed what
    // the file holds (4 bytes an element).
    let expected = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= bytes.len() as u64 / 4)
        .ok_or_else(|| {
            err(
                path,
                format!(
                    "shape {shape:?} needs more elements than the file's {} bytes hold",
                    bytes.len()
                ),
            )
        })?;
    let data: Vec<f32> = file.into_vec().map_err(|e| {
        err(
            path,
            format!("truncated or unreadable data ({expected} elements expected): {e}"),
        )
    })?;
    if data.len() as u64 != expected {
        return Err(err(
            path,
            format!("holds {} elements, shape says {expected}", data.len()),
        ));
    }
    if let Some((i, x)) = data.iter().enumerate().find(|(_, x)| !x.is_finite()) {
        return Err(err(
            path,
            format!("element {i} is {x}: tensors must hold finite numbers"),
        ));
    }
    Ok((shape, data))
}

/// Reads every tensor in `dir` (sorted by name).
///
/// # Errors
/// A missing gradient file, a wrong dtype, a shape mismatch between a tensor's arrays, a
/// truncated file: each names the file.
pub fn read_dir(dir: &Path) -> Result<Vec<NamedTensor>, NpyIoError> {
    let entries = std::fs::read_dir(dir).map_err(|e| err(dir, format!("cannot list: {e}")))?;
    let mut names = Vec::new();
    for e in entries {
        let e = e.map_err(|e| err(dir, format!("cannot list: {e}")))?;
        let file = e.file_name().to_string_lossy().into_owned();
        if let Some(name) = file.strip_suffix(".w.npy") {
            names.push(name.to_string());
        }
    }
    names.sort();
    if names.is_empty() {
        return Err(err(dir, "no NAME.w.npy files found"));
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let path = |kind: &str| dir.join(format!("{name}.{kind}.npy"));
        let (shape, w) = read_array(&path("w"))?;
        let gp = path("g");
        if !gp.exists() {
            return Err(err(
                &gp,
                format!("missing: tensor `{name}` has weights but no gradients"),
            ));
        }
        let mut arrays = Vec::new();
        for kind in ["g", "m", "v"] {
            let p = path(kind);
            if kind != "g" && !p.exists() {
                arrays.push(vec![0.0; w.len()]);
                continue;
            }
            let (s, a) = read_array(&p)?;
            if s != shape {
                return Err(err(
                    &p,
                    format!("shape {s:?} differs from {name}.w.npy's {shape:?}"),
                ));
            }
            arrays.push(a);
        }
        let mut it = arrays.into_iter();
        let (g, m, v) = (
            it.next().unwrap_or_default(),
            it.next().unwrap_or_default(),
            it.next().unwrap_or_default(),
        );
        out.push(NamedTensor {
            name,
            shape,
            state: TensorState { w, g, m, v },
        });
    }
    Ok(out)
}

/// One float32 C-order array as `.npy` bytes.
fn npy_bytes(path: &Path, shape: &[u64], data: &[f32]) -> Result<Vec<u8>, NpyIoError> {
    let mut bytes = std::io::Cursor::new(Vec::new());
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(&mut bytes)
        .begin_nd()
        .map_err(|e| err(path, format!("cannot write: {e}")))?;
    w.extend(data.iter().copied())
        .map_err(|e| err(path, format!("cannot write: {e}")))?;
    w.finish()
        .map_err(|e| err(path, format!("cannot write: {e}")))?;
    Ok(bytes.into_inner())
}

#[cfg(test)]
fn write_array(path: &Path, shape: &[u64], data: &[f32]) -> Result<(), NpyIoError> {
    let bytes = npy_bytes(path, shape, data)?;
    std::fs::write(path, bytes).map_err(|e| err(path, format!("cannot write: {e}")))
}

/// Writes `NAME.w.npy`, `NAME.m.npy` and `NAME.v.npy` for every tensor, all or none
/// ([`crate::cmd::io::write_files`]): never over an input of the run (an update in place
/// of `--input` is refused), and a failure leaves every old file as it was.
///
/// # Errors
/// An I/O failure or an output that is an input, naming the file.
pub fn write_dir(dir: &Path, tensors: &[NamedTensor]) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir).map_err(|e| err(dir, format!("cannot create directory: {e}")))?;
    let mut files = Vec::with_capacity(tensors.len() * 3);
    for t in tensors {
        for (kind, data) in [("w", &t.state.w), ("m", &t.state.m), ("v", &t.state.v)] {
            let path = dir.join(format!("{}.{kind}.npy", t.name));
            let bytes = npy_bytes(&path, &t.shape, data)?;
            files.push((path, bytes));
        }
    }
    Ok(crate::cmd::io::write_files(&files)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(name: &str, shape: &[u64]) -> NamedTensor {
        let n: u64 = shape.iter().product();
        let mk = |k: f32| (0..n).map(|i| i as f32 * k).collect::<Vec<_>>();
        NamedTensor {
            name: name.into(),
            shape: shape.to_vec(),
            state: TensorState {
                w: mk(1.0),
                g: mk(0.5),
                m: mk(0.25),
                v: mk(0.125),
            },
        }
    }

    #[test]
    fn round_trip_and_missing_moments_are_zero() {
        let dir = tempfile::tempdir().unwrap();
        let t = tensor("a", &[3, 5]);
        write_dir(dir.path(), std::slice::from_ref(&t)).unwrap();
        // write_dir writes w, m, v; add g by hand.
        write_array(&dir.path().join("a.g.npy"), &t.shape, &t.state.g).unwrap();
        let back = read_dir(dir.path()).unwrap();
        assert_eq!(back, vec![t.clone()]);
        std::fs::remove_file(dir.path().join("a.m.npy")).unwrap();
        let back = read_dir(dir.path()).unwrap();
        assert!(back[0].state.m.iter().all(|&x| x == 0.0));
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let t = tensor("b", &[4]);
        write_array(&dir.path().join("b.w.npy"), &[4], &t.state.w).unwrap();
        let e = read_dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("b.g.npy") && e.contains("missing"), "{e}");
        write_array(&dir.path().join("b.g.npy"), &[2, 2], &t.state.g).unwrap();
        let e = read_dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("b.g.npy") && e.contains("shape"), "{e}");
        // Truncated gradient file.
        write_array(&dir.path().join("b.g.npy"), &[4], &t.state.g).unwrap();
        let p = dir.path().join("b.g.npy");
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 3]).unwrap();
        let e = read_dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("b.g.npy") && e.contains("truncated"), "{e}");
        // Wrong dtype.
        let f = std::fs::File::create(&p).unwrap();
        let mut w = npyz::WriteOptions::<f64>::new()
            .default_dtype()
            .shape(&[4])
            .writer(f)
            .begin_nd()
            .unwrap();
        w.extend([1.0f64, 2.0, 3.0, 4.0]).unwrap();
        w.finish().unwrap();
        let e = read_dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("b.g.npy") && e.contains("float32"), "{e}");
    }
}
