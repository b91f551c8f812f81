//! `--max-sim-time`, `--max-events` and `--max-memory` (SPEC 8): caps a user sets so that
//! a mistyped size stops with a message saying what was reached, instead of running
//! for hours or exhausting the machine.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use nmcp_emulator::sim::{Limits, PS_PER_NS};

static SIM: OnceLock<Limits> = OnceLock::new();

/// Records the process's simulation caps (first call wins).
pub fn set_sim_limits(l: Limits) {
    let _ = SIM.set(l);
}

/// The simulation caps the command line set.
pub fn sim_limits() -> Limits {
    SIM.get().copied().unwrap_or_default()
}

/// The caps of this process as options for a child `nmcp` (each sweep point runs in
/// one): `--max-memory` always, `--max-sim-time` and `--max-events` when the child's
/// command takes them (`nmcp t3`, `nmcp mem`), so a cap on `nmcp sweep` binds every
/// point.
pub fn child_cap_args(child_takes_sim_caps: bool) -> Vec<String> {
    let mut args = Vec::new();
    let cap = CAP.load(Ordering::Relaxed);
    if cap != usize::MAX {
        args.push(format!("--max-memory={cap}"));
    }
    if child_takes_sim_caps {
        let l = sim_limits();
        if let Some(ps) = l.max_sim_ps {
            args.push(format!("--max-sim-time={ps}ps"));
        }
        if let Some(n) = l.max_events {
            args.push(format!("--max-events={n}"));
        }
    }
    args
}

/// `--max-sim-time`: a number with a unit, `ps`, `ns`, `us`, `ms` or `s` (e.g. `10ms`).
pub fn parse_sim_time(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(|| format!("{s:?}: give a unit: ps, ns, us, ms or s (e.g. 10ms)"))?;
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|e| format!("{s:?}: {e} (a time like 10ms)"))?;
    let ps_per = match unit {
        "ps" => 1.0,
        "ns" => PS_PER_NS as f64,
        "us" | "µs" => PS_PER_NS as f64 * 1e3,
        "ms" => PS_PER_NS as f64 * 1e6,
        "s" => PS_PER_NS as f64 * 1e9,
        u => return Err(format!("{s:?}: unknown unit {u:?} (ps, ns, us, ms or s)")),
    };
    let ps = v * ps_per;
    if !(ps.is_finite() && ps >= 1.0 && ps < u64::MAX as f64) {
        return Err(format!("{s:?}: must be at least 1 ps and below 213 days"));
    }
    Ok(ps as u64)
}

/// `--max-memory`: bytes with an optional K, M or G suffix (binary multiples).
pub fn parse_memory(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.eq_ignore_ascii_case(&'k') => (&t[..i], 1usize << 10),
        Some((i, c)) if c.eq_ignore_ascii_case(&'m') => (&t[..i], 1 << 20),
        Some((i, c)) if c.eq_ignore_ascii_case(&'g') => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let n: usize = num
        .trim()
        .parse()
        .map_err(|e| format!("{s:?}: {e} (bytes, optionally with K, M or G)"))?;
    match n.checked_mul(mult) {
        Some(b) if b >= 1 << 20 => Ok(b),
        Some(_) => Err(format!("{s:?}: below 1M, too little to run anything")),
        None => Err(format!("{s:?}: too large")),
    }
}

/// The process allocator with a cap (`--max-memory`): every allocation is counted, and
/// the first one that would take the live total past the cap ends the process, with exit
/// code 1 after a message on stderr that says the cap and how much was in use. Without
/// a cap it only counts (one atomic add per allocation).
pub struct CappedAllocator;

static CAP: AtomicUsize = AtomicUsize::new(usize::MAX);
static IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Sets the memory cap in bytes.
pub fn set_memory_cap(bytes: usize) {
    CAP.store(bytes, Ordering::Relaxed);
}

/// Bytes allocated now.
pub fn memory_in_use() -> usize {
    IN_USE.load(Ordering::Relaxed)
}

/// Set once the cap was reached: from then on allocations are let through, so that the
/// process can exit cleanly (exit handlers may allocate).
static TRIPPED: AtomicBool = AtomicBool::new(false);

/// Writes `v` in decimal into the end of `buf`, without allocating.
fn decimal(mut v: usize, buf: &mut [u8; 24]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Says what was reached, without allocating (the allocator is refusing), and exits.
fn stop(want: usize, in_use: usize, cap: usize) -> ! {
    use std::io::Write;
    let (mut a, mut b, mut c) = ([0u8; 24], [0u8; 24], [0u8; 24]);
    {
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(b"nmcp: error: memory cap reached (--max-memory ");
        let _ = e.write_all(decimal(cap >> 20, &mut a));
        let _ = e.write_all(b" MiB): ");
        let _ = e.write_all(decimal(in_use >> 20, &mut b));
        let _ = e.write_all(b" MiB in use, a further ");
        let _ = e.write_all(decimal(want, &mut c));
        let _ = e.write_all(b" bytes refused\n");
    }
    std::process::exit(1)
}

/// Counts `size` more bytes, or stops the process if that passes the cap.
fn take(size: usize) {
    let cap = CAP.load(Ordering::Relaxed);
    let before = IN_USE.fetch_add(size, Ordering::Relaxed);
    if before.saturating_add(size) > cap && !TRIPPED.swap(true, Ordering::Relaxed) {
        stop(size, before, cap);
    }
}

/// Uncounts an allocation that `System` refused.
fn refused(p: *mut u8, size: usize) -> *mut u8 {
    if p.is_null() {
        IN_USE.fetch_sub(size, Ordering::Relaxed);
    }
    p
}

// SAFETY: every call is forwarded to `System` with the same layout and pointer; the
// counting only decides whether to forward an allocation at all.
unsafe impl GlobalAlloc for CappedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        // SAFETY: the caller's layout contract is passed on unchanged.
        refused(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        // SAFETY: as for `alloc`.
        refused(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old {
            take(new_size - old);
        }
        // SAFETY: as for `alloc`; `ptr` came from `System` with `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > old {
                IN_USE.fetch_sub(new_size - old, Ordering::Relaxed);
            }
        } else if new_size < old {
            IN_USE.fetch_sub(old - new_size, Ordering::Relaxed);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_sizes_parse_with_units_and_refuse_nonsense() {
        assert_eq!(parse_sim_time("10ms"), Ok(10_000_000_000));
        assert_eq!(parse_sim_time("1.5 us"), Ok(1_500_000));
        assert_eq!(parse_sim_time("3ns"), Ok(3_000));
        for bad in ["10", "ms", "-1ms", "1 lightyear", "0ps", "1e30s"] {
            assert!(parse_sim_time(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_memory("512M"), Ok(512 << 20));
        assert_eq!(parse_memory("2g"), Ok(2 << 30));
        for bad in ["", "12x", "10K", "99999999999999999999G"] {
            assert!(parse_memory(bad).is_err(), "{bad}");
        }
    }
}
