//! Checkpoint and resume (`--checkpoint-every N --checkpoint-dir D`, `nmcp resume D`).
//!
//! A long run is a list of independent units (a T3 sub-layer with its five
//! configurations, ...), each a pure function of the command line and its seed. After
//! every N finished units the run writes `D/checkpoint.nmcp`: the command line, the
//! finished units' results (postcard), a format version and a CRC-32. `nmcp resume D`
//! re-parses the stored command line and runs it with those units' results preloaded, so
//! a killed run (even SIGKILL) resumes and ends with exactly the output of an
//! uninterrupted one. The file is replaced by rename, so a kill while writing leaves the
//! previous checkpoint; a corrupted, truncated or other-version file is refused whole,
//! with what is wrong, never half-loaded. Decisions: docs/decisions/checkpoint.md.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The first bytes of every checkpoint file.
pub const MAGIC: [u8; 8] = *b"NMCPCKPT";

/// The checkpoint format version; a file of another version is refused (4: a
/// pseudo-channel's state carries its power state, for the energy model).
pub const FORMAT_VERSION: u16 = 4;

/// The file a checkpoint directory holds.
pub const FILE_NAME: &str = "checkpoint.nmcp";

/// What a checkpoint file holds (after [`MAGIC`] and the version, before the CRC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Contents {
    /// The nmcp version that wrote it: results of another build may differ.
    nmcp_version: String,
    /// The mechanism (`t3`, ...): a resume must run the same one.
    mechanism: String,
    /// The command line (without the program name) that started the run.
    argv: Vec<String>,
    /// Units in the whole run.
    units_total: u32,
    /// Finished units: index to the unit's serialised result.
    units: BTreeMap<u32, Vec<u8>>,
    /// The serialised middle of a run with no unit boundaries (`nmcp mem`: the memory
    /// system and the trace position), replaced at every checkpoint.
    state: Option<Vec<u8>>,
}

/// Why a checkpoint cannot be used or written.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Reading or writing the file failed.
    Io(PathBuf, std::io::Error),
    /// The file is not a checkpoint, or is damaged: says how.
    Corrupt(PathBuf, String),
    /// The file was written by another format version or nmcp version.
    Version(PathBuf, String),
    /// The run does not match the checkpoint (mechanism, unit count) or cannot keep one.
    Mismatch(String),
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(p, e) => write!(f, "{}: {e}", p.display()),
            Self::Corrupt(p, s) => write!(f, "{}: not a usable checkpoint: {s}", p.display()),
            Self::Version(p, s) => write!(f, "{}: {s}", p.display()),
            Self::Mismatch(s) => write!(f, "checkpoint: {s}"),
        }
    }
}

impl std::error::Error for CheckpointError {}

fn encode(c: &Contents) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    // Serialising owned strings, vectors and maps cannot fail.
    out.extend(postcard::to_stdvec(c).unwrap_or_default());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn decode(path: &Path, bytes: &[u8]) -> Result<Contents, CheckpointError> {
    let corrupt = |s: String| CheckpointError::Corrupt(path.to_path_buf(), s);
    if bytes.len() < MAGIC.len() + 2 + 4 {
        return Err(corrupt(format!("{} bytes is too short", bytes.len())));
    }
    if bytes[..MAGIC.len()] != MAGIC {
        return Err(corrupt("it does not start with NMCPCKPT".into()));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != FORMAT_VERSION {
        return Err(CheckpointError::Version(
            path.to_path_buf(),
            format!(
                "checkpoint format version {version}; this nmcp reads version {FORMAT_VERSION}"
            ),
        ));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let crc = crc32fast::hash(body);
    if crc != stored {
        return Err(corrupt(format!(
            "CRC-32 {crc:08x} of the contents differs from the stored {stored:08x} (truncated or damaged)"
        )));
    }
    let (c, rest): (Contents, &[u8]) = postcard::take_from_bytes(&body[MAGIC.len() + 2..])
        .map_err(|e| corrupt(format!("contents do not decode: {e}")))?;
    if !rest.is_empty() {
        return Err(corrupt(format!("{} bytes after the contents", rest.len())));
    }
    if c.nmcp_version != env!("CARGO_PKG_VERSION") {
        return Err(CheckpointError::Version(
            path.to_path_buf(),
            format!(
                "written by nmcp {}, this is nmcp {}: results could differ, run again from the start",
                c.nmcp_version,
                env!("CARGO_PKG_VERSION")
            ),
        ));
    }
    if let Some((&i, _)) = c.units.iter().find(|(&i, _)| i >= c.units_total) {
        return Err(corrupt(format!("unit {i} of {} units", c.units_total)));
    }
    Ok(c)
}

/// Reads and checks the checkpoint in `dir`.
///
/// # Errors
/// [`CheckpointError::Io`] when the file cannot be read; `Corrupt` or `Version` when it
/// is not a checkpoint this nmcp wrote.
pub fn read(dir: &Path) -> Result<Summary, CheckpointError> {
    let path = dir.join(FILE_NAME);
    let bytes = std::fs::read(&path).map_err(|e| CheckpointError::Io(path.clone(), e))?;
    parse(&path, &bytes)
}

/// Checks the bytes of a checkpoint file (`path` names it in errors).
///
/// # Errors
/// `Corrupt` or `Version` when they are not a checkpoint this nmcp wrote.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Summary, CheckpointError> {
    let c = decode(path, bytes)?;
    Ok(Summary {
        mechanism: c.mechanism,
        argv: c.argv,
        finished: c.units.len(),
        total: c.units_total,
        state_bytes: c.state.as_ref().map(Vec::len),
    })
}

/// What a checkpoint holds, in short.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Mechanism.
    pub mechanism: String,
    /// The stored command line.
    pub argv: Vec<String>,
    /// Units finished.
    pub finished: usize,
    /// Units in the run.
    pub total: u32,
    /// Size of the saved mid-run state, if the mechanism saves one instead of units.
    pub state_bytes: Option<usize>,
}

/// What `nmcp resume DIR` runs: the command line the checkpoint stores (the scenario
/// file's options already spelled out in it, so the file need not exist any more) and a
/// note saying what is loaded.
#[derive(Debug, Clone)]
pub struct Resume {
    /// The stored command line, without the program name.
    pub argv: Vec<String>,
    /// `resuming `nmcp ...`: ... loaded from DIR`, for stderr.
    pub note: String,
}

/// Opens the checkpoint in `dir` for a resume: the library's driver of `nmcp resume` (the
/// CLI parses [`Resume::argv`] as its command line and runs it with `dir` as the
/// checkpoint directory, [`Request::resume`] set).
///
/// # Errors
/// Everything [`read`] reports.
pub fn resume(dir: &Path) -> Result<Resume, CheckpointError> {
    let summary = read(dir)?;
    let loaded = match summary.state_bytes {
        Some(n) => format!("mid-run state ({n} bytes)"),
        None => format!("{} of {} units", summary.finished, summary.total),
    };
    Ok(Resume {
        note: format!(
            "resuming `nmcp {}`: {loaded} loaded from {}",
            summary.argv.join(" "),
            dir.display()
        ),
        argv: summary.argv,
    })
}

/// Writes the checkpoint file whole or not at all ([`crate::cmd::io::write_atomic`]).
///
/// # Errors
/// The I/O error, with the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    crate::cmd::io::write_atomic(path, bytes)
        .map_err(|e| CheckpointError::Io(path.to_path_buf(), e))
}

/// How the process was asked to checkpoint: set once by the CLI before the command runs.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// `--checkpoint-dir`.
    pub dir: Option<PathBuf>,
    /// `--checkpoint-every` (units; `nmcp mem`: accepted requests), if given.
    pub every: Option<u32>,
    /// The command line to store (without the program name).
    pub argv: Vec<String>,
    /// Whether this is `nmcp resume`: the directory must hold a checkpoint.
    pub resume: bool,
}

static REQUEST: OnceLock<Request> = OnceLock::new();

/// Records the process's checkpoint request (first call wins).
pub fn set_request(r: Request) {
    let _ = REQUEST.set(r);
}

/// Whether the command line asked for a checkpoint (`--checkpoint-dir` or `nmcp resume`).
pub fn requested() -> bool {
    REQUEST.get().is_some_and(|r| r.dir.is_some())
}

/// Refuses checkpoint flags for a command that cannot checkpoint.
///
/// # Errors
/// [`CheckpointError::Mismatch`] naming the command.
pub fn unsupported(command: &str) -> Result<(), CheckpointError> {
    match REQUEST.get() {
        Some(r) if r.dir.is_some() => Err(CheckpointError::Mismatch(format!(
            "`nmcp {command}` does not checkpoint (supported: the `nmcp t3` study, `nmcp mem`, `nmcp goldyloc`, `nmcp lamb`)"
        ))),
        _ => Ok(()),
    }
}

/// A run's checkpoint: the finished units, written every `every` new ones.
#[derive(Debug)]
pub struct Session {
    path: PathBuf,
    every: u32,
    since_write: u32,
    contents: Contents,
}

impl Session {
    /// The session for a run of `mechanism` with `units_total` units, if the command
    /// line asked for one: a new checkpoint, or the one being resumed (checked to be of
    /// the same mechanism and unit count).
    ///
    /// # Errors
    /// [`CheckpointError`] when the directory cannot be made or the checkpoint being
    /// resumed does not fit this run.
    pub fn start(
        mechanism: &str,
        units_total: u32,
    ) -> Result<Option<Mutex<Session>>, CheckpointError> {
        Self::start_every(mechanism, units_total, 1)
    }

    /// [`Session::start`] with the `--checkpoint-every` default of the mechanism.
    ///
    /// # Errors
    /// As [`Session::start`].
    pub fn start_every(
        mechanism: &str,
        units_total: u32,
        default_every: u32,
    ) -> Result<Option<Mutex<Session>>, CheckpointError> {
        let Some(r) = REQUEST.get() else {
            return Ok(None);
        };
        let Some(dir) = &r.dir else { return Ok(None) };
        let path = dir.join(FILE_NAME);
        let contents = if r.resume {
            let bytes = std::fs::read(&path).map_err(|e| CheckpointError::Io(path.clone(), e))?;
            let c = decode(&path, &bytes)?;
            if c.mechanism != mechanism || c.units_total != units_total {
                return Err(CheckpointError::Mismatch(format!(
                    "{} holds {} units of `{}`, this run has {units_total} units of `{mechanism}`",
                    path.display(),
                    c.units_total,
                    c.mechanism
                )));
            }
            c
        } else {
            // Another run's unfinished checkpoint is not overwritten by a fresh start.
            if let Some(c) = std::fs::read(&path)
                .ok()
                .and_then(|bytes| decode(&path, &bytes).ok())
            {
                let done = u32::try_from(c.units.len()).unwrap_or(u32::MAX);
                if c.units_total > 0 && done < c.units_total {
                    return Err(CheckpointError::Mismatch(format!(
                        "{} holds an unfinished run (`nmcp {}`, {done} of {} units): `nmcp resume {}` continues it; remove it or pick another --checkpoint-dir to start afresh",
                        path.display(),
                        c.argv.join(" "),
                        c.units_total,
                        dir.display()
                    )));
                }
            }
            std::fs::create_dir_all(dir).map_err(|e| CheckpointError::Io(dir.clone(), e))?;
            Contents {
                nmcp_version: env!("CARGO_PKG_VERSION").into(),
                mechanism: mechanism.into(),
                argv: r.argv.clone(),
                units_total,
                units: BTreeMap::new(),
                state: None,
            }
        };
        Ok(Some(Mutex::new(Session {
            path,
            every: r.every.unwrap_or(default_every).max(1),
            since_write: 0,
            contents,
        })))
    }

    /// Unit `index`'s result, if a resumed checkpoint holds it.
    ///
    /// # Errors
    /// [`CheckpointError::Corrupt`] when the stored result does not decode as `T`.
    pub fn get<T: DeserializeOwned>(&self, index: u32) -> Result<Option<T>, CheckpointError> {
        self.contents
            .units
            .get(&index)
            .map(|b| {
                postcard::from_bytes(b).map_err(|e| {
                    CheckpointError::Corrupt(self.path.clone(), format!("unit {index}: {e}"))
                })
            })
            .transpose()
    }

    /// Records unit `index`'s result; writes the checkpoint every `every` new units.
    ///
    /// # Errors
    /// [`CheckpointError::Io`] when the checkpoint cannot be written.
    pub fn put<T: Serialize>(&mut self, index: u32, result: &T) -> Result<(), CheckpointError> {
        let bytes = postcard::to_stdvec(result)
            .map_err(|e| CheckpointError::Mismatch(format!("unit {index}: {e}")))?;
        self.contents.units.insert(index, bytes);
        self.since_write += 1;
        if self.since_write >= self.every {
            self.write()?;
        }
        Ok(())
    }

    /// Writes the checkpoint now.
    ///
    /// # Errors
    /// [`CheckpointError::Io`].
    pub fn write(&mut self) -> Result<(), CheckpointError> {
        self.since_write = 0;
        write_atomic(&self.path, &encode(&self.contents))
    }

    /// How many units (or requests, for `nmcp mem`) go between two checkpoints.
    pub fn every(&self) -> u32 {
        self.every
    }

    /// The saved mid-run state, if a resumed checkpoint holds one.
    ///
    /// # Errors
    /// [`CheckpointError::Corrupt`] when it does not decode as `T` (whole, nothing left).
    pub fn state<T: DeserializeOwned>(&self) -> Result<Option<T>, CheckpointError> {
        self.contents
            .state
            .as_deref()
            .map(|b| match postcard::take_from_bytes::<T>(b) {
                Ok((t, [])) => Ok(t),
                Ok((_, rest)) => Err(CheckpointError::Corrupt(
                    self.path.clone(),
                    format!("{} bytes after the saved state", rest.len()),
                )),
                Err(e) => Err(CheckpointError::Corrupt(
                    self.path.clone(),
                    format!("saved state: {e}"),
                )),
            })
            .transpose()
    }

    /// Replaces the mid-run state and writes the checkpoint now.
    ///
    /// # Errors
    /// [`CheckpointError::Io`] when the checkpoint cannot be written.
    pub fn put_state<T: Serialize>(&mut self, state: &T) -> Result<(), CheckpointError> {
        let bytes = postcard::to_stdvec(state)
            .map_err(|e| CheckpointError::Mismatch(format!("saved state: {e}")))?;
        self.contents.state = Some(bytes);
        self.write()
    }

    /// Units finished so far.
    pub fn finished(&self) -> usize {
        self.contents.units.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Contents {
        Contents {
            nmcp_version: env!("CARGO_PKG_VERSION").into(),
            mechanism: "t3".into(),
            argv: vec!["t3".into(), "--json".into()],
            units_total: 3,
            units: [(1, vec![1, 2, 3])].into_iter().collect(),
            state: Some(vec![4, 5]),
        }
    }

    #[test]
    fn round_trip() {
        let p = Path::new("x");
        assert_eq!(decode(p, &encode(&sample())).unwrap(), sample());
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused() {
        let p = Path::new("x");
        let good = encode(&sample());
        for len in 0..good.len() {
            assert!(decode(p, &good[..len]).is_err(), "truncated to {len}");
        }
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x5a;
            assert!(decode(p, &bad).is_err(), "byte {i} flipped");
        }
    }

    #[test]
    fn other_versions_are_refused_with_both_versions_named() {
        let p = Path::new("x");
        let mut bytes = encode(&sample());
        bytes[8] = 9;
        let n = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..n]);
        bytes[n..].copy_from_slice(&crc.to_le_bytes());
        let e = decode(p, &bytes).unwrap_err().to_string();
        assert!(
            e.contains("version 9") && e.contains(&format!("version {FORMAT_VERSION}")),
            "{e}"
        );
        let mut c = sample();
        c.nmcp_version = "0.0.0-old".into();
        let e = decode(p, &encode(&c)).unwrap_err().to_string();
        assert!(e.contains("0.0.0-old"), "{e}");
    }

    #[test]
    fn a_unit_beyond_the_run_is_refused() {
        let mut c = sample();
        c.units.insert(7, vec![]);
        assert!(decode(Path::new("x"), &encode(&c)).is_err());
    }
}
