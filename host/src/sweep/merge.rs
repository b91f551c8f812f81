//! `nmcp sweep merge`: the manifests and stored point results of one or more sweep
//! directories combined into one table (CSV or JSON), a row per point.

use super::*;

/// A sweep directory's manifest, read.
struct Manifest {
    keys: Vec<String>,
    /// (index, hash, params) in index order.
    points: Vec<(u64, String, serde_json::Map<String, Json>)>,
}

fn read_json(path: &Path) -> Result<Json, String> {
    let text = crate::cmd::io::read_input_text(path)?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))
}

fn read_manifest(dir: &Path) -> Result<Manifest, String> {
    let path = dir.join("sweep.json");
    let j = read_json(&path)?;
    let bad = |what: &str| format!("{}: {what}", path.display());
    if j.get("format").and_then(Json::as_str) != Some(MANIFEST_FORMAT) {
        return Err(bad(&format!(
            "not a sweep manifest (format {MANIFEST_FORMAT} expected)"
        )));
    }
    let keys = j
        .get("keys")
        .and_then(Json::as_array)
        .ok_or_else(|| bad("no `keys`"))?
        .iter()
        .map(|k| {
            k.as_str()
                .map(str::to_string)
                .ok_or_else(|| bad("a key is not a string"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut points = Vec::new();
    for p in j
        .get("points")
        .and_then(Json::as_array)
        .ok_or_else(|| bad("no `points`"))?
    {
        let index = p
            .get("index")
            .and_then(Json::as_u64)
            .ok_or_else(|| bad("a point has no index"))?;
        let hash = p
            .get("hash")
            .and_then(Json::as_str)
            .ok_or_else(|| bad("a point has no hash"))?
            .to_string();
        let params = p
            .get("params")
            .and_then(Json::as_object)
            .cloned()
            .unwrap_or_default();
        points.push((index, hash, params));
    }
    points.sort_by_key(|p| p.0);
    Ok(Manifest { keys, points })
}

/// Flattens a JSON value's scalar leaves under dotted paths (array elements by index).
pub(super) fn flatten(prefix: &str, v: &Json, out: &mut Vec<(String, Json)>) {
    let join = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Json::Object(m) => {
            for (k, x) in m {
                flatten(&join(k), x, out);
            }
        }
        Json::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&join(&i.to_string()), x, out);
            }
        }
        scalar => out.push((prefix.to_string(), scalar.clone())),
    }
}

pub(super) fn cell(v: &Json) -> String {
    match v {
        Json::Null => String::new(),
        Json::String(s) => s.clone(),
        Json::Array(a) => a.iter().map(cell).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// A merged row: the point's index and parameters, then its result's leaves.
type Row = (Vec<Json>, Vec<(String, Json)>);

/// Runs `nmcp sweep merge`.
pub(super) fn merge(m: &MergeArgs) -> CmdResult {
    let ext = m
        .output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let csv_out = match ext.as_deref() {
        Some("csv") => true,
        Some("json") => false,
        _ => {
            return Err(usage(format!(
                "--output {}: name a .csv or .json file",
                m.output.display()
            )))
        }
    };
    let mut manifest: Option<(Manifest, PathBuf)> = None;
    for d in &m.dirs {
        let man = read_manifest(d)?;
        match &manifest {
            None => manifest = Some((man, d.clone())),
            Some((first, fd)) => {
                let a: Vec<&String> = first.points.iter().map(|p| &p.1).collect();
                let b: Vec<&String> = man.points.iter().map(|p| &p.1).collect();
                if a != b || first.keys != man.keys {
                    return Err(format!(
                        "{} and {} hold different sweeps (their points differ: another grid, base or nmcp version)",
                        fd.display(),
                        d.display()
                    )
                    .into());
                }
            }
        }
    }
    let Some((man, _)) = manifest else {
        return Err(usage("nmcp sweep merge: give the sweep directories".into()));
    };
    // Columns: point, the grid's keys, then result leaves in order of first appearance.
    let mut columns: Vec<String> = vec!["point".into()];
    columns.extend(man.keys.iter().cloned());
    let key_count = columns.len();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut rows: Vec<Row> = Vec::new();
    let mut missing = Vec::new();
    let mut used_drop = vec![false; m.drop.len()];
    for (index, hash, params) in &man.points {
        let found = m
            .dirs
            .iter()
            .map(|d| d.join("points").join(format!("{hash}.json")))
            .find(|p| p.is_file());
        let describe = || {
            man.keys
                .iter()
                .map(|k| {
                    format!(
                        "{k} = {}",
                        params.get(k).map_or(String::new(), Json::to_string)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some(path) = found else {
            missing.push(format!(
                "point {index} ({}): no points/{hash}.json in any directory",
                describe()
            ));
            continue;
        };
        let doc = read_json(&path)?;
        if doc.get("hash").and_then(Json::as_str) != Some(hash.as_str()) {
            return Err(format!("{}: its hash is not {hash}", path.display()).into());
        }
        let mut leaves = Vec::new();
        flatten("", doc.get("result").unwrap_or(&Json::Null), &mut leaves);
        leaves.retain(|(path, _)| {
            let mut keep = true;
            for (k, d) in m.drop.iter().enumerate() {
                if path == d || path.starts_with(&format!("{d}.")) {
                    keep = false;
                    if let Some(u) = used_drop.get_mut(k) {
                        *u = true;
                    }
                }
            }
            keep
        });
        for (p, _) in &leaves {
            if !seen.contains_key(p) {
                seen.insert(p.clone(), columns.len());
                // A leaf named like a parameter column keeps both: `result.<path>`.
                if man.keys.contains(p) || p == "point" {
                    columns.push(format!("result.{p}"));
                } else {
                    columns.push(p.clone());
                }
            }
        }
        let mut key_cells = vec![Json::from(*index)];
        key_cells.extend(
            man.keys
                .iter()
                .map(|k| params.get(k).cloned().unwrap_or(Json::Null)),
        );
        rows.push((key_cells, leaves));
    }
    if !rows.is_empty() {
        if let Some((k, _)) = used_drop.iter().enumerate().find(|(_, u)| !**u) {
            return Err(usage(format!(
                "--drop {}: no result column has that path",
                m.drop.get(k).map_or("", String::as_str)
            )));
        }
    }
    if !missing.is_empty() {
        for line in missing.iter().take(20) {
            eprintln!("nmcp sweep merge: {line}");
        }
        if missing.len() > 20 {
            eprintln!("nmcp sweep merge: ... and {} more", missing.len() - 20);
        }
        if !m.partial {
            return Err(format!(
                "{} of {} points have no result (run the missing shards, or --partial to merge what is there)",
                missing.len(),
                man.points.len()
            )
            .into());
        }
    }
    // Cells in column order.
    let table: Vec<Vec<Json>> = rows
        .into_iter()
        .map(|(keys, leaves)| {
            let mut row = keys;
            row.resize(columns.len(), Json::Null);
            for (p, v) in leaves {
                if let Some(&c) = seen.get(&p) {
                    if let Some(slot) = row.get_mut(c) {
                        *slot = v;
                    }
                }
            }
            row
        })
        .collect();
    let bytes = if csv_out {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&columns)?;
        for row in &table {
            w.write_record(row.iter().map(cell))?;
        }
        w.into_inner().map_err(|e| format!("csv: {e}"))?
    } else {
        let doc = json!({ "columns": columns, "rows": table });
        (serde_json::to_string_pretty(&doc)? + "\n").into_bytes()
    };
    write_file(&m.output, &bytes)?;
    eprintln!(
        "nmcp sweep merge: {} rows x {} columns ({} parameter columns) -> {}",
        table.len(),
        columns.len(),
        key_count,
        m.output.display()
    );
    Ok(())
}
