//! The budgets of `firmware/board/budgets.toml` (instructions and cycles per report
//! line; flash, RAM and stack bytes) and the ELF section sizes they are checked on.

use std::collections::BTreeMap;
use std::path::Path;

use super::report::{field, parse_line};

/// The budgets of one machine.
#[derive(Debug, Default)]
pub(super) struct Budgets {
    /// Per report line: the most instructions it may report.
    pub(super) instructions: BTreeMap<String, u64>,
    /// Per report line: the most `mcycle` cycles it may report (the machine's clock is
    /// stated next to the table; under QEMU `-icount shift=0` cycles count instructions).
    pub(super) cycles: BTreeMap<String, u64>,
    /// `flash`, `ram`, `stack`: the most bytes.
    pub(super) bytes: BTreeMap<String, u64>,
}

impl Budgets {
    pub(super) fn load(path: &Path, machine: &str) -> Result<Self, String> {
        let text = crate::cmd::io::read_input_text(path)?;
        Self::parse(&text, machine).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub(super) fn parse(text: &str, machine: &str) -> Result<Self, String> {
        let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let m = table
            .get(machine)
            .and_then(|v| v.as_table())
            .ok_or_else(|| format!("no [{machine}] table"))?;
        let mut b = Self::default();
        for (section, dst) in [
            ("instructions", &mut b.instructions),
            ("cycles", &mut b.cycles),
            ("bytes", &mut b.bytes),
        ] {
            let Some(t) = m.get(section) else { continue };
            let t = t
                .as_table()
                .ok_or_else(|| format!("[{machine}.{section}] is not a table"))?;
            for (k, v) in t {
                let n = v
                    .as_integer()
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or_else(|| {
                        format!("[{machine}.{section}] {k}: expected a non-negative integer")
                    })?;
                dst.insert(k.clone(), n);
            }
        }
        for k in b.bytes.keys() {
            if !["flash", "ram", "stack", "ram_total"].contains(&k.as_str()) {
                return Err(format!(
                    "[{machine}.bytes] {k}: unknown (flash, ram, stack or ram_total)"
                ));
            }
        }
        Ok(b)
    }
}

/// What the ELF needs of a board.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sizes {
    /// Loadable, non-writable sections plus `.data`'s initial image.
    pub flash: u64,
    /// Writable allocated sections except the stack region (`.data`, `.bss`, ...).
    pub ram: u64,
}

pub(super) const SHF_WRITE: u32 = 0x1;
pub(super) const SHF_ALLOC: u32 = 0x2;
pub(super) const SHT_PROGBITS: u32 = 1;
pub(super) const SHT_NOBITS: u32 = 8;

/// Section sizes from an ELF32 little-endian file's section headers.
pub fn section_sizes(b: &[u8]) -> Result<Sizes, String> {
    let u16_at = |o: usize| -> Result<u64, String> {
        b.get(o..o + 2)
            .map(|s| u64::from(u16::from_le_bytes([s[0], s[1]])))
            .ok_or_else(|| format!("truncated ELF at byte {o}"))
    };
    let u32_at = |o: usize| -> Result<u64, String> {
        b.get(o..o + 4)
            .map(|s| u64::from(u32::from_le_bytes([s[0], s[1], s[2], s[3]])))
            .ok_or_else(|| format!("truncated ELF at byte {o}"))
    };
    if b.get(..4) != Some(b"\x7fELF") {
        return Err("not an ELF file (bad magic at byte 0)".into());
    }
    if b.get(4) != Some(&1) || b.get(5) != Some(&1) {
        return Err("not a 32-bit little-endian ELF (bytes 4-5)".into());
    }
    let shoff = u32_at(0x20)? as usize;
    let shentsize = u16_at(0x2E)? as usize;
    let shnum = u16_at(0x30)? as usize;
    let shstrndx = u16_at(0x32)? as usize;
    if shentsize < 40 {
        return Err(format!("section header size {shentsize} < 40 (byte 0x2e)"));
    }
    let sh = |i: usize| shoff + i * shentsize;
    let strtab = u32_at(sh(shstrndx) + 0x10)? as usize;
    let name = |off: usize| -> String {
        let s = b.get(strtab + off..).unwrap_or(&[]);
        let end = s.iter().position(|&c| c == 0).unwrap_or(0);
        String::from_utf8_lossy(&s[..end]).into_owned()
    };
    let mut sizes = Sizes::default();
    for i in 0..shnum {
        let h = sh(i);
        let (ty, flags, size) = (u32_at(h + 4)?, u32_at(h + 8)? as u32, u32_at(h + 0x14)?);
        if flags & SHF_ALLOC == 0 {
            continue;
        }
        let writable = flags & SHF_WRITE != 0;
        let n = name(u32_at(h)? as usize);
        if ty == SHT_PROGBITS as u64 {
            sizes.flash += size;
        }
        // `.stack` (and `.heap`) are riscv-rt's placeholders for the rest of RAM.
        if writable && (ty == SHT_PROGBITS as u64 || ty == SHT_NOBITS as u64) && n != ".stack" {
            sizes.ram += size;
        }
    }
    Ok(sizes)
}

pub(super) fn check_budgets(b: &Budgets, report: &str, sizes: &Sizes, failures: &mut Vec<String>) {
    let over = |failures: &mut Vec<String>, what: String, value: u64, budget: u64| {
        let verdict = if value > budget { "OVER" } else { "ok" };
        stdoutln!("budget {what}: {value} / {budget} {verdict}");
        if value > budget {
            failures.push(format!("{what} = {value} exceeds its budget {budget}"));
        }
    };
    for (key, table) in [("instructions", &b.instructions), ("cycles", &b.cycles)] {
        for (name, &budget) in table {
            match report
                .lines()
                .find(|l| parse_line(l).0 == name)
                .and_then(|l| field(l, key))
                .and_then(|v| v.parse::<u64>().ok())
            {
                Some(v) => over(failures, format!("{name} {key}"), v, budget),
                None => failures.push(format!(
                    "budget names {name}, but the report has no `{name} {key}=` line"
                )),
            }
        }
    }
    let stack = report
        .lines()
        .find_map(|l| {
            (parse_line(l).0 == "stack")
                .then(|| field(l, "peak_bytes"))
                .flatten()
        })
        .and_then(|v| v.parse::<u64>().ok());
    let stack_field = |key: &str| {
        report
            .lines()
            .find(|l| parse_line(l).0 == "stack")
            .and_then(|l| field(l, key))
            .and_then(|v| v.parse::<u64>().ok())
    };
    // Static RAM plus the deepest the stack went from its top, start-up included.
    let ram_total = match (
        stack_field("high_water_bytes"),
        stack_field("startup_bytes"),
    ) {
        (Some(h), Some(s)) => Some(sizes.ram + h.max(s)),
        _ => None,
    };
    for (k, &budget) in &b.bytes {
        let v = match k.as_str() {
            "flash" => Some(sizes.flash),
            "ram" => Some(sizes.ram),
            "ram_total" => ram_total,
            _ => stack,
        };
        match v {
            Some(v) => over(failures, format!("{k} bytes"), v, budget),
            None => failures.push(format!("budget names {k} bytes, but the report has none")),
        }
    }
}
