//! Report lines: their fields, and the comparison of a report with the expected one
//! (functional fields exactly, measurements as information) and with virt's CP decisions.

use super::MEASURED_KEYS;

/// The value of `key=` in a report line.
pub(super) fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ')
        .find_map(|f| f.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// A report line: its name, then its fields in order.
pub(super) fn parse_line(line: &str) -> (&str, Vec<(&str, &str)>) {
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let name = parts.next().unwrap_or("");
    let fields = parts
        .map(|f| f.split_once('=').unwrap_or((f, "")))
        .collect();
    (name, fields)
}

pub(super) fn is_measured(key: &str) -> bool {
    MEASURED_KEYS.contains(&key)
}

/// Compares a report with the expected one: names and functional fields exactly,
/// measurements as information (failures only when `strict`).
pub(super) fn compare(expected: &str, actual: &str, strict: bool, failures: &mut Vec<String>) {
    let (e, a): (Vec<_>, Vec<_>) = (expected.lines().collect(), actual.lines().collect());
    if e.len() != a.len() {
        failures.push(format!(
            "report has {} lines, expected {} (re-record with --bless if intended)",
            a.len(),
            e.len()
        ));
    }
    for (i, (el, al)) in e.iter().zip(&a).enumerate() {
        let (en, ef) = parse_line(el);
        let (an, af) = parse_line(al);
        let functional = |f: &[(&str, &str)]| -> Vec<String> {
            f.iter()
                .filter(|(k, _)| !is_measured(k))
                .map(|(k, v)| format!("{k}={v}"))
                .collect()
        };
        if en != an || functional(&ef) != functional(&af) {
            failures.push(format!(
                "line {}: output differs\n  expected: {el}\n  actual:   {al}",
                i + 1
            ));
            continue;
        }
        for (k, ev) in ef.iter().filter(|(k, _)| is_measured(k)) {
            let av = af.iter().find(|(ak, _)| ak == k).map(|(_, v)| *v);
            if av == Some(*ev) {
                continue;
            }
            let (old, new) = (
                ev.parse::<f64>().ok(),
                av.and_then(|v| v.parse::<f64>().ok()),
            );
            let change = match (old, new) {
                (Some(o), Some(n)) if o > 0.0 => format!(" ({:+.1} %)", (n - o) / o * 100.0),
                _ => String::new(),
            };
            let msg = format!("{an} {k}: {ev} -> {}{change}", av.unwrap_or("(missing)"));
            if strict {
                failures.push(format!("measurement changed: {msg}"));
            } else {
                stdoutln!("note: measurement changed: {msg}");
            }
        }
    }
}

/// Report lines every machine must decide exactly as virt does.
const CP_LINES_REQUIRED: [&str; 2] = ["cp_decision_32q_cold", "cp_decision_32q"];

/// Checks that every CP decision line (`cp_decision*`) of `report` has the functional
/// fields of the same line in virt's expected report, and that the report has the lines
/// of [`CP_LINES_REQUIRED`].
pub(super) fn compare_cp_decisions(virt: &str, report: &str, failures: &mut Vec<String>) {
    let functional = |l: &str| -> Vec<String> {
        parse_line(l)
            .1
            .iter()
            .filter(|(k, _)| !is_measured(k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    };
    let before = failures.len();
    let mut seen = Vec::new();
    for line in report
        .lines()
        .filter(|l| parse_line(l).0.starts_with("cp_decision"))
    {
        let name = parse_line(line).0;
        seen.push(name);
        match virt.lines().find(|l| parse_line(l).0 == name) {
            Some(v) if functional(v) == functional(line) => {}
            Some(v) => failures.push(format!(
                "{name} decides differently from virt\n  virt:   {v}\n  actual: {line}"
            )),
            None => failures.push(format!("{name}: virt's expected report has no such line")),
        }
    }
    for name in CP_LINES_REQUIRED {
        if !seen.contains(&name) {
            failures.push(format!("report has no {name} line to compare with virt's"));
        }
    }
    if failures.len() == before {
        stdoutln!("CP decisions: {} lines equal to virt's", seen.len());
    }
}
