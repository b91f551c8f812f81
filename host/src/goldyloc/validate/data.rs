//! The concurrent-GEMM measurement file (`../shared/data/h200/gemm-concurrency.json` and
//! files in its format), read with every error naming the file and the field.

use nmcp_emulator::gpu::gemm::GemmShape;
use nmcp_emulator::gpu::h200::TritonConfig;
use nmcp_isa::gemm_ext::GemmDataType;
use serde_json::Value;
use std::path::Path;

/// Concurrency degrees the file measures (`seq_ms`, `conc_ms`, `go_gain{n}`).
pub const NS: [u32; 4] = [2, 4, 8, 16];
/// CDs of 16 GEMMs in rounds the file measures (`cd16_ms`).
pub const CDS: [u32; 5] = [1, 2, 4, 8, 16];

/// One cuBLAS row: a GEMM with its own layout.
#[derive(Debug, Clone, PartialEq)]
pub struct CublasRow {
    /// The GEMM (FP16).
    pub shape: GemmShape,
    /// The network it is from.
    pub app: String,
    /// One GEMM alone, ms.
    pub iso_ms: f64,
    /// `n` GEMMs one after the other on one stream, ms, for each of [`NS`].
    pub seq_ms: [f64; 4],
    /// `n` GEMMs each on its own stream, ms, for each of [`NS`].
    pub conc_ms: [f64; 4],
    /// 16 GEMMs in rounds of `c`, ms, for each of [`CDS`].
    pub cd16_ms: [f64; 5],
    /// The fastest CD for 16 (one of [`CDS`]).
    pub best_cd16: u32,
}

/// One Triton row: a GEMM in NN layout with every configuration measured.
#[derive(Debug, Clone, PartialEq)]
pub struct TritonRow {
    /// The GEMM (FP16, NN).
    pub shape: GemmShape,
    /// The network it is from.
    pub app: String,
    /// Isolated time of each configuration, ms.
    pub iso_ms: Vec<f64>,
    /// `go_gain{n}` for each of [`NS`]: n copies of the isolated winner over n copies of
    /// the GO kernel.
    pub go_gain: [f64; 4],
    /// `conc_ms[n][config]` for each of [`NS`]: the makespan of n concurrent copies of
    /// each configuration, ms.
    pub conc_ms: [Vec<f64>; 4],
}

/// A measurement file.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// The Triton catalogue, `[BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, SPLIT_K]`.
    pub triton_configs: Vec<TritonConfig>,
    /// cuBLAS rows.
    pub cublas: Vec<CublasRow>,
    /// Triton rows.
    pub triton: Vec<TritonRow>,
}

/// Reads and checks a measurement file.
///
/// # Errors
/// `FILE: FIELD: what is wrong` for an unreadable file, bad JSON or any missing or
/// out-of-range field.
pub fn read(path: &Path) -> Result<Dataset, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses a measurement file's text.
///
/// # Errors
/// `FIELD: what is wrong`.
pub fn parse(text: &str) -> Result<Dataset, String> {
    let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let configs = array(&root, "triton_configs", "triton_configs")?;
    let mut triton_configs = Vec::with_capacity(configs.len());
    for (i, c) in configs.iter().enumerate() {
        let at = format!("triton_configs[{i}]");
        let row = c
            .as_array()
            .filter(|r| r.len() == 6)
            .ok_or_else(|| format!("{at}: expected 6 integers"))?;
        let mut cfg = [0u32; 6];
        for (j, v) in row.iter().enumerate() {
            cfg[j] = v
                .as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .filter(|&x| x > 0)
                .ok_or_else(|| format!("{at}[{j}]: expected a positive integer"))?;
        }
        triton_configs.push(cfg);
    }
    if triton_configs.is_empty() {
        return Err("triton_configs: empty".into());
    }
    let mut cublas = Vec::new();
    for (i, r) in array(&root, "cublas", "cublas")?.iter().enumerate() {
        cublas.push(cublas_row(r, &format!("cublas[{i}]"))?);
    }
    let mut triton = Vec::new();
    for (i, r) in array(&root, "triton_all_cds", "triton_all_cds")?
        .iter()
        .enumerate()
    {
        triton.push(triton_row(
            r,
            &format!("triton_all_cds[{i}]"),
            triton_configs.len(),
        )?);
    }
    if cublas.is_empty() && triton.is_empty() {
        return Err("cublas, triton_all_cds: no GEMMs".into());
    }
    Ok(Dataset {
        triton_configs,
        cublas,
        triton,
    })
}

fn array<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a Vec<Value>, String> {
    v.get(key)
        .ok_or_else(|| format!("{at}: missing"))?
        .as_array()
        .ok_or_else(|| format!("{at}: expected an array"))
}

fn field<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a Value, String> {
    v.get(key).ok_or_else(|| format!("{at}.{key}: missing"))
}

fn time(v: &Value, key: &str, at: &str) -> Result<f64, String> {
    field(v, key, at)?
        .as_f64()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| format!("{at}.{key}: expected a positive number"))
}

fn dim(v: &Value, key: &str, at: &str) -> Result<u32, String> {
    field(v, key, at)?
        .as_u64()
        .and_then(|x| u32::try_from(x).ok())
        .filter(|&x| x > 0)
        .ok_or_else(|| format!("{at}.{key}: expected a positive integer below 2^32"))
}

fn text(v: &Value, key: &str, at: &str) -> Result<String, String> {
    Ok(field(v, key, at)?
        .as_str()
        .ok_or_else(|| format!("{at}.{key}: expected a string"))?
        .to_string())
}

/// `{"2": t, "4": t, ...}` at the given keys, in order.
fn times<const N: usize>(
    v: &Value,
    key: &str,
    at: &str,
    keys: [u32; N],
) -> Result<[f64; N], String> {
    let obj = field(v, key, at)?;
    let at = format!("{at}.{key}");
    let mut out = [0.0; N];
    for (o, k) in out.iter_mut().zip(keys) {
        *o = time(obj, &k.to_string(), &at)?;
    }
    Ok(out)
}

fn shape(v: &Value, at: &str, layout: (bool, bool)) -> Result<GemmShape, String> {
    Ok(GemmShape::new(
        dim(v, "m", at)?,
        dim(v, "n", at)?,
        dim(v, "k", at)?,
        layout.0,
        layout.1,
        GemmDataType::F16,
    ))
}

fn cublas_row(v: &Value, at: &str) -> Result<CublasRow, String> {
    let t = text(v, "t", at)?;
    let layout = match t.as_str() {
        "00" => (false, false),
        "10" => (true, false),
        "01" => (false, true),
        "11" => (true, true),
        _ => return Err(format!("{at}.t: `{t}` is not a layout (00, 10, 01, 11)")),
    };
    let best_cd16 = field(v, "best_cd16", at)?
        .as_u64()
        .and_then(|x| u32::try_from(x).ok())
        .filter(|x| CDS.contains(x))
        .ok_or_else(|| format!("{at}.best_cd16: expected one of 1, 2, 4, 8, 16"))?;
    Ok(CublasRow {
        shape: shape(v, at, layout)?,
        app: text(v, "app", at)?,
        iso_ms: time(v, "iso_ms", at)?,
        seq_ms: times(v, "seq_ms", at, NS)?,
        conc_ms: times(v, "conc_ms", at, NS)?,
        cd16_ms: times(v, "cd16_ms", at, CDS)?,
        best_cd16,
    })
}

fn triton_row(v: &Value, at: &str, configs: usize) -> Result<TritonRow, String> {
    let iso = field(v, "iso_ms", at)?;
    let iso_at = format!("{at}.iso_ms");
    let iso_ms = (0..configs)
        .map(|c| time(iso, &c.to_string(), &iso_at))
        .collect::<Result<Vec<_>, _>>()?;
    let mut go_gain = [0.0; 4];
    for (g, n) in go_gain.iter_mut().zip(NS) {
        *g = time(v, &format!("go_gain{n}"), at)?;
    }
    let conc = field(v, "conc_ms", at)?;
    let mut conc_ms: [Vec<f64>; 4] = Default::default();
    for (out, n) in conc_ms.iter_mut().zip(NS) {
        let at = format!("{at}.conc_ms.{n}");
        let per_n = conc
            .get(n.to_string())
            .ok_or_else(|| format!("{at}: missing"))?;
        *out = (0..configs)
            .map(|c| time(per_n, &c.to_string(), &at))
            .collect::<Result<Vec<_>, _>>()?;
    }
    Ok(TritonRow {
        shape: shape(v, at, (false, false))?,
        app: text(v, "app", at)?,
        iso_ms,
        go_gain,
        conc_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_field_is_named_with_its_row() {
        let text = r#"{"triton_configs": [[64,64,64,4,4,1]], "cublas": [{"m": 1}],
                      "triton_all_cds": []}"#;
        let e = parse(text).unwrap_err();
        assert_eq!(e, "cublas[0].t: missing");
    }

    #[test]
    fn a_bad_time_is_named_with_its_key() {
        let text = r#"{"triton_configs": [[64,64,64,4,4,1]], "cublas": [],
            "triton_all_cds": [{"m": 8, "n": 8, "k": 8, "app": "x",
                                "iso_ms": {"0": -1.0}}]}"#;
        let e = parse(text).unwrap_err();
        assert_eq!(e, "triton_all_cds[0].iso_ms.0: expected a positive number");
    }
}
