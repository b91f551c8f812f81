//! Results keyed by a hash of their inputs, stored as JSON files.

use serde::{de::DeserializeOwned, Serialize};
use std::path::PathBuf;

/// Bumped when a step's output format or semantics change or the GEMM model's results
/// move, so old entries are ignored (2: the water-filling fix of `gpu::sim`; 3: concurrent
/// kernels launched one CP dispatch apart; 4: memory latency in the GEMM model; 5: panels
/// fed to L1 in L1 lines per iteration; 6: split-U's reduction after the main kernel —
/// the catalog's size is in the key, but this change kept it; 7: LLC channel camping and
/// StaggerU's mappings; 8: the K loop in whole iterations, `gpu::gemm::SliceKLoop`).
const CACHE_VERSION: u32 = 8;

/// A directory of cached step results.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// `$NMCP_CACHE`, else `target/nmcp-cache` under the current directory.
    pub fn default_location() -> Self {
        let dir = std::env::var_os("NMCP_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("target").join("nmcp-cache"));
        Self { dir }
    }

    /// The cache directory.
    pub fn dir(&self) -> &PathBuf {
        &self.dir
    }

    fn path(&self, step: &str, key: u64) -> PathBuf {
        self.dir.join(format!("{step}-{key:016x}.json"))
    }

    /// A cached result, if present and readable.
    pub fn get<T: DeserializeOwned>(&self, step: &str, key: u64) -> Option<T> {
        let text = std::fs::read_to_string(self.path(step, key)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Stores a result (best effort: a cache that cannot be written only costs time).
    pub fn put<T: Serialize>(&self, step: &str, key: u64, value: &T) {
        if std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        if let Ok(text) = serde_json::to_string(value) {
            // One temporary name per process and call: tests and CI steps that share one
            // cache directory may store the same entry at once, and each rename is whole.
            static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let pid = std::process::id();
            let tmp = self
                .dir
                .join(format!(".{step}-{key:016x}.{pid}.{seq}.tmp"));
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, self.path(step, key));
            }
        }
    }
}

/// FNV-1a over the JSON of the inputs: stable across runs and toolchains.
pub fn key_of<T: Serialize>(step: &str, inputs: &T) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let json = serde_json::to_string(inputs).unwrap_or_default();
    for b in step
        .bytes()
        .chain(CACHE_VERSION.to_le_bytes())
        .chain(json.bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
