//! A sweep file read and checked: `command`, `[base]`, `[grid]` and `seeds`, every key
//! and value checked against the command's options, with the file's line and column.

use super::*;

/// Reads a sweep file and checks every key and value against the command's options.
pub(super) fn load(path: &Path, root: &Command) -> Result<Sweep, String> {
    let src = Source::read(path)?;
    let table = src.parse()?;
    let file = path.display().to_string();
    let mut items: Vec<_> = table.get_ref().iter().collect();
    items.sort_by_key(|(k, _)| k.span().start);
    let mut command = None;
    let mut base_scenario: Option<(PathBuf, Loc)> = None;
    let mut base = Vec::new();
    let mut grid = Vec::new();
    let mut seeds = None;
    for (k, v) in &items {
        let key = k.get_ref().as_ref();
        let loc = src.loc(&k.span());
        match key {
            "command" => match v.get_ref().as_str() {
                Some(s) if !scenario::command_words(s).is_empty() => {
                    command = Some(scenario::command_words(s));
                }
                _ => {
                    return Err(format!(
                        "{}: `command` must be a string naming the subcommand, e.g. \"mem\"",
                        src.loc(&v.span())
                    ))
                }
            },
            "scenario" => match v.get_ref().as_str() {
                Some(s) => {
                    // Relative to the sweep file.
                    let p = Path::new(s);
                    let p = if p.is_relative() {
                        path.parent().unwrap_or(Path::new("")).join(p)
                    } else {
                        p.to_path_buf()
                    };
                    base_scenario = Some((p, loc));
                }
                None => {
                    return Err(format!(
                        "{}: `scenario` must be the path of a scenario file",
                        src.loc(&v.span())
                    ))
                }
            },
            "base" | "grid" => {
                let Some(t) = v.get_ref().as_table() else {
                    return Err(format!("{loc}: `{key}` must be a table: [{key}]"));
                };
                let mut rows: Vec<_> = t.iter().collect();
                rows.sort_by_key(|(k, _)| k.span().start);
                for (gk, gv) in rows {
                    let name = gk.get_ref().to_string();
                    let key_loc = src.loc(&gk.span());
                    if key == "base" {
                        base.push(Entry {
                            value: scenario::convert(&src, &name, gv)?,
                            key: name,
                            key_loc,
                            value_loc: src.loc(&gv.span()),
                        });
                    } else {
                        let Some(arr) = gv.get_ref().as_array() else {
                            return Err(format!(
                                "{}: grid `{name}`: give an array of values, e.g. {name} = [1, 2]",
                                src.loc(&gv.span())
                            ));
                        };
                        if arr.is_empty() {
                            return Err(format!(
                                "{}: grid `{name}`: an empty array makes an empty sweep",
                                src.loc(&gv.span())
                            ));
                        }
                        let mut values = Vec::new();
                        for item in arr.iter() {
                            values.push((
                                scenario::convert(&src, &name, item)?,
                                src.loc(&item.span()),
                            ));
                        }
                        grid.push((Axis { key: name, values }, key_loc));
                    }
                }
            }
            "seeds" => {
                let loc = src.loc(&v.span());
                match scenario::convert(&src, "seeds", v)? {
                    Value::Many(s) if !s.is_empty() => seeds = Some((s, loc)),
                    _ => {
                        return Err(format!(
                            "{loc}: `seeds` must be a non-empty array of seeds, e.g. [1, 2, 3]"
                        ))
                    }
                }
            }
            other => {
                return Err(format!(
                    "{loc}: unknown key `{other}` in a sweep file; valid: command, scenario, seeds, [base], [grid]"
                ))
            }
        }
    }
    let command =
        command.ok_or_else(|| format!("{file}: name the subcommand: command = \"...\""))?;
    let cmd = scenario::leaf(root, &command, &file)?;
    let shown = command.join(" ");
    match scenario::find_key(cmd, "json") {
        Some(a) if matches!(a.get_action(), clap::ArgAction::SetTrue) => {}
        _ => {
            return Err(format!(
                "{file}: `nmcp {shown}` has no --json; a sweep stores each point's JSON output"
            ))
        }
    }
    // A base scenario file: its options under [base]'s (the sweep file's win).
    if let Some((p, loc)) = base_scenario {
        let sc = scenario::load(&p).map_err(|e| format!("{loc}: scenario: {e}"))?;
        if let Some((c, cloc)) = &sc.command {
            if *c != command {
                return Err(format!(
                    "{cloc}: the scenario is for `nmcp {}`, the sweep runs `nmcp {shown}`",
                    c.join(" ")
                ));
            }
        }
        let mut merged: Vec<Entry> = sc
            .entries
            .into_iter()
            .filter(|e| !base.iter().any(|b| b.key == e.key))
            .collect();
        merged.append(&mut base);
        base = merged;
    }
    // Every base value, grid value and seed is checked as the command line would be.
    scenario::validate(cmd, &shown, &base)?;
    let mut axes = Vec::new();
    for (axis, key_loc) in grid {
        if let Some(b) = base.iter().find(|b| b.key == axis.key) {
            return Err(format!(
                "{key_loc}: `{}` is in both [grid] and [base] (at {})",
                axis.key, b.key_loc
            ));
        }
        for (v, loc) in &axis.values {
            scenario::validate(
                cmd,
                &shown,
                &[Entry {
                    key: axis.key.clone(),
                    key_loc: key_loc.clone(),
                    value: v.clone(),
                    value_loc: loc.clone(),
                }],
            )?;
        }
        axes.push(axis);
    }
    for (key, loc) in base
        .iter()
        .map(|e| (&e.key, &e.key_loc))
        .chain(axes.iter().map(|a| (&a.key, &a.values[0].1)))
    {
        if key == "json" {
            return Err(format!(
                "{loc}: `json`: a sweep runs every point with --json itself"
            ));
        }
        if key == "checkpoint-dir" || key == "checkpoint-every" {
            return Err(format!(
                "{loc}: `{key}`: the points of a sweep would share one checkpoint directory; a sweep's unit of restart is the point (finished points are skipped)"
            ));
        }
    }
    if let Some((s, loc)) = seeds {
        if scenario::find_key(cmd, "seed").is_none() {
            return Err(format!("{loc}: `seeds`: `nmcp {shown}` has no --seed"));
        }
        if base.iter().any(|e| e.key == "seed") || axes.iter().any(|a| a.key == "seed") {
            return Err(format!(
                "{loc}: `seeds` and a `seed` key in [base] or [grid]: give one"
            ));
        }
        let values: Vec<(Value, Loc)> = s.into_iter().map(|(v, l)| (Value::One(v), l)).collect();
        for (v, l) in &values {
            scenario::validate(
                cmd,
                &shown,
                &[Entry {
                    key: "seed".into(),
                    key_loc: l.clone(),
                    value: v.clone(),
                    value_loc: l.clone(),
                }],
            )?;
        }
        axes.push(Axis {
            key: "seed".into(),
            values,
        });
    }
    let total: u128 = axes
        .iter()
        .map(|a| a.values.len() as u128)
        .try_fold(1u128, u128::checked_mul)
        .unwrap_or(u128::MAX);
    if total > MAX_POINTS {
        return Err(format!(
            "{file}: the grid has {total} points (more than {MAX_POINTS}); split the study"
        ));
    }
    Ok(Sweep {
        command,
        base,
        axes,
    })
}
