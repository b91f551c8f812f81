//! The values `nmcp t3` takes, parsed and checked: Table 8.2's models, TP degrees,
//! sub-layer names, GPU counts, configurations of `t3 check`, byte counts of `t3 rs`;
//! and the study's sub-layers they select.

use nmcp_emulator::t3::{self, Scenario, SubLayer, TABLE_8_2};

/// Known model names, for messages.
pub fn known_models() -> String {
    let mut names: Vec<&str> = TABLE_8_2.iter().map(|m| m.0).collect();
    names.push("all");
    names.join(", ")
}

pub fn parse_model(s: &str) -> Result<String, String> {
    let s = s.trim().to_ascii_lowercase();
    if s == "all" || TABLE_8_2.iter().any(|m| m.0 == s) {
        Ok(s)
    } else {
        Err(format!("unknown model {s:?} (known: {})", known_models()))
    }
}

pub fn parse_tp(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(t) if t >= 2 => Ok(t),
        Ok(t) => Err(format!(
            "TP {t}: a reduce-scatter needs a tensor-parallel degree of at least 2"
        )),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}

pub const SUBLAYERS: [&str; 4] = ["OP", "FC-2", "FC-1", "IP"];

pub fn parse_sublayer(s: &str) -> Result<&'static str, String> {
    let norm = s.trim().to_ascii_uppercase().replace('_', "-");
    let norm = match norm.as_str() {
        "FC2" => "FC-2".to_string(),
        "FC1" => "FC-1".to_string(),
        _ => norm,
    };
    SUBLAYERS
        .into_iter()
        .find(|n| *n == norm)
        .ok_or_else(|| format!("unknown sub-layer {s:?} (known: {})", SUBLAYERS.join(", ")))
}

pub fn parse_ring_gpus(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(g) if g >= 2 => Ok(g),
        Ok(g) => Err(format!("{g} GPU(s): a ring needs at least 2 GPUs")),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}

pub fn parse_study_gpus(s: &str) -> Result<u32, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    parse_ring_gpus(s).map_err(|e| format!("{e} (or 0 = each sub-layer's TP)"))
}

pub fn parse_check_config(s: &str) -> Result<Scenario, String> {
    match Scenario::parse(s.trim()) {
        Some(c @ (Scenario::Sequential | Scenario::T3 | Scenario::T3Mca)) => Ok(c),
        _ => Err(format!(
            "unknown configuration {s:?} (known: t3, t3-mca, sequential)"
        )),
    }
}

/// `123`, `64K`, `16M`, `1G` (binary multiples).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.eq_ignore_ascii_case(&'k') => (&t[..i], 1u64 << 10),
        Some((i, c)) if c.eq_ignore_ascii_case(&'m') => (&t[..i], 1 << 20),
        Some((i, c)) if c.eq_ignore_ascii_case(&'g') => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = num
        .replace('_', "")
        .parse()
        .map_err(|e| format!("{s:?}: {e} (a byte count, optionally with K, M or G)"))?;
    match n.checked_mul(mult) {
        Some(0) => Err("0 bytes: nothing to reduce".into()),
        Some(b) => Ok(b),
        None => Err(format!("{s:?}: too large")),
    }
}

/// The sub-layers the study arguments name, in order (model, TP, sub-layer).
///
/// `custom` is `--model-name`, `--h` and `--tokens` (a model not in Table 8.2); an error
/// says which option is wrong.
pub fn study_sublayers(
    models: &[String],
    tp: Option<&[u32]>,
    sublayers: &[&str],
    custom: Option<(&str, u32, u32)>,
) -> Result<Vec<SubLayer>, String> {
    let pick = |all: Vec<SubLayer>| -> Vec<SubLayer> {
        sublayers
            .iter()
            .filter_map(|n| all.iter().find(|s| s.name == *n).cloned())
            .collect()
    };
    let mut out = Vec::new();
    if let Some((name, h, tokens)) = custom {
        let name = name.trim();
        if name.is_empty() {
            return Err("--model-name: must not be empty".into());
        }
        for &tp in tp.unwrap_or(&[8, 16]) {
            if tp > h {
                return Err(format!(
                    "--tp {tp}: larger than --h {h} (each GPU needs at least one row of K)"
                ));
            }
            out.extend(pick(t3::sublayers(name, h, tokens, tp)));
        }
        return Ok(out);
    }
    let mut rows: Vec<&(&str, u32, u32, &[u32])> = Vec::new();
    for m in models {
        for row in &TABLE_8_2 {
            if (m == "all" || m == row.0) && !rows.iter().any(|x| x.0 == row.0) {
                rows.push(row);
            }
        }
    }
    for (name, h, tokens, tps) in rows {
        for &tp in tp.unwrap_or(tps) {
            out.extend(pick(t3::sublayers(name, *h, *tokens, tp)));
        }
    }
    Ok(out)
}
