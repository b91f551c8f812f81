//! Building the board binary and running it under QEMU.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Machine, BOARD_TARGET};

/// Longest a QEMU run may take; the binary runs for a fraction of a second.
const QEMU_TIMEOUT: Duration = Duration::from_secs(60);

/// Builds the board binary one package at a time (so no other crate's features unify
/// into it) and returns the ELF's path.
pub fn build(root: &Path, machine: Machine) -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(root)
        .args([
            "build",
            "-p",
            "nmcp-board",
            "--target",
            BOARD_TARGET,
            "--release",
        ])
        .args(machine.features())
        .status()
        .map_err(|e| format!("cannot run {cargo}: {e}"))?;
    if !status.success() {
        return Err(format!("building the board binary failed ({status})"));
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(target_dir
        .join(BOARD_TARGET)
        .join("release")
        .join("nmcp-board"))
}

/// Runs the ELF on a QEMU machine; returns its semihosting output.
pub fn run_qemu(qemu: &str, machine: &str, elf: &Path) -> Result<String, String> {
    let mut child = Command::new(qemu)
        .args([
            "-machine",
            machine,
            "-nographic",
            "-semihosting-config",
            "enable=on,target=native",
            "-icount",
            "shift=0",
            "-bios",
            "none",
            "-kernel",
        ])
        .arg(elf)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!("cannot run {qemu}: {e} (on Debian: apt-get install qemu-system-misc)")
        })?;
    let deadline = Instant::now() + QEMU_TIMEOUT;
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(s) => break s,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{qemu} did not exit within {} s",
                    QEMU_TIMEOUT.as_secs()
                ));
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    }
    if let Some(mut s) = child.stderr.take() {
        s.read_to_string(&mut err).map_err(|e| e.to_string())?;
    }
    if !status.success() {
        return Err(format!("board binary exited with {status}:\n{out}{err}"));
    }
    Ok(out)
}
