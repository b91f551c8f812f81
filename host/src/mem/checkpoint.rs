//! What an `nmcp mem` checkpoint holds (the memory system's state and where the request
//! stream stands) and how a trace is identified and followed for it.

use nmcp_emulator::memctrl::{MemoryState, Request};
use nmcp_emulator::trace::{TraceError, TracePosition, TraceReader};
use serde::{Deserialize, Serialize};

/// What an `nmcp mem` checkpoint saves (postcard, inside the checkpoint file): the memory
/// system's state right after request `accepted` was accepted, and where the request
/// stream stands.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct MemCheckpoint {
    /// Requests accepted so far (the synthetic generator skips as many on resume).
    pub(super) accepted: u64,
    /// For a trace: which file it was and where its next unread line starts.
    pub(super) trace: Option<TraceMark>,
    /// Controllers, queues, banks, refresh, buses, statistics.
    pub(super) system: MemoryState,
}

/// A trace file's identity and the reader's position in it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct TraceMark {
    /// File size, bytes.
    pub(super) len: u64,
    /// CRC-32 of the whole file.
    pub(super) crc32: u32,
    /// The position after the last accepted request's line.
    pub(super) position: TracePosition,
}

/// Size and CRC-32 of a file (read once, a buffer at a time).
/// A checkpointed trace is read twice (here, then streamed; again on resume), so it must
/// be a regular file: a pipe would be consumed here and is refused.
pub(super) fn file_identity(path: &std::path::Path) -> Result<(u64, u32), String> {
    use std::io::Read;
    // Before opening: opening a pipe would wait for a writer.
    let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
    if !regular && path.exists() {
        return Err(format!(
            "{}: not a regular file: a checkpointed run reads its trace again on resume (drop --checkpoint-dir to stream a pipe)",
            path.display()
        ));
    }
    let mut f =
        std::fs::File::open(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        len += n as u64;
        h.update(&buf[..n]);
    }
    Ok((len, h.finalize()))
}

/// A trace reader that publishes its position after every line it yields (for the
/// checkpoint hook, which cannot reach into the boxed request stream).
pub(super) struct Tracked<R> {
    pub(super) reader: TraceReader<R>,
    pub(super) position: std::rc::Rc<std::cell::Cell<TracePosition>>,
}

impl<R: std::io::BufRead> Iterator for Tracked<R> {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        let r = self.reader.next();
        self.position.set(self.reader.position());
        r
    }
}
