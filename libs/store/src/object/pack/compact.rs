//! Compaction: reclaiming the space of overwritten and deleted objects.
//!
//! A sealed segment is compacted in three steps, each safe to be cut short by a crash:
//!
//! 1. **Move** its live records to the end of the log, through the writer, each under the
//!    condition that it is still the key's live record at the moment it is appended (a put
//!    or delete that came first wins; the moved copy is then simply not written). A moved
//!    record is the same bytes, so it keeps its checksum, time and content type; like any
//!    append it is acknowledged only once durable and indexed. A crash here leaves some
//!    records in two places, both valid; the later copy wins when the log is read again.
//! 2. **Checkpoint**: the writer makes the index durable, so that after a crash it no longer
//!    points into the segment.
//! 3. **Remove** the segment, under an exclusive lock of the segments directory that a
//!    backup's copy holds shared (so a copy never misses a segment), then forget it in the
//!    index. A crash between the two leaves a missing segment the index knows to hold
//!    nothing live, which opening forgets.
//!
//! Tombstones need care, because the log is also read whole when the index is rebuilt (a
//! restored backup): a tombstone may be dropped only if no older put of its key can survive
//! it. A tombstone whose key is live again is dead and goes; one in the oldest segment goes
//! too, since every older record of its key is in that segment and goes with it; any other
//! tombstone of a deleted key is moved to the end of the log like a live record (under the
//! condition that the key is still absent), until it reaches the oldest segment.

use std::io;
use std::sync::{Arc, PoisonError};

use rustix::fs::FlockOperation;
use tokio::sync::oneshot;

use super::index::Stats;
use super::record::{self, Encoded, HEADER_LEN, Kind};
use super::writer::{Condition, Message, Outcome, Request};
use super::{Core, segment_path};
use crate::object::local::sync_dir;

/// Records moved per hand-off to the writer, and roughly most bytes.
const MOVE_BATCH_RECORDS: usize = 512;
const MOVE_BATCH_BYTES: usize = 4 * 1024 * 1024;

/// What a compaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Segments compacted and removed.
    pub segments_removed: u32,
    /// Live records copied to the end of the log.
    pub records_moved: u64,
    /// Bytes of those records.
    pub bytes_moved: u64,
    /// Tombstones copied to the end of the log (their key may still be in an older segment).
    pub tombstones_moved: u64,
    /// Size of the removed segments.
    pub bytes_freed: u64,
}

/// Compact every sealed segment whose dead bytes are at least `min_dead_fraction` of its
/// size (any dead byte when it is 0), oldest first. Blocking.
pub(super) fn run(core: &Arc<Core>, min_dead_fraction: f64) -> io::Result<CompactionReport> {
    let _one_at_a_time = core
        .compacting
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let mut report = CompactionReport::default();
    let (stats, active) = stats(core)?;
    #[allow(clippy::cast_precision_loss)] // a fraction of a segment's size
    let candidates: Vec<u32> = stats
        .iter()
        .filter(|(id, s)| {
            let sealed = active.is_none_or(|active| **id < active);
            let wasteful =
                s.live == 0 || (s.dead > 0 && s.dead as f64 >= min_dead_fraction * s.len as f64);
            sealed && wasteful
        })
        .map(|(id, _)| *id)
        .collect();
    for segment in candidates {
        if !compact_segment(core, segment, &mut report)? {
            break;
        }
    }
    Ok(report)
}

fn stats(core: &Core) -> io::Result<(Stats, Option<u32>)> {
    let (done, answer) = oneshot::channel();
    if !core.send(Message::Stats(done)) {
        return Err(stopped());
    }
    answer.blocking_recv().map_err(|_| stopped())
}

fn stopped() -> io::Error {
    io::Error::other("the pack store writer has stopped")
}

/// Move `segment`'s live records and remove it. `Ok(false)` when it could not be removed
/// now (a backup is copying the segments): the rest waits for the next compaction.
fn compact_segment(
    core: &Arc<Core>,
    segment: u32,
    report: &mut CompactionReport,
) -> io::Result<bool> {
    let Some(file) = core.shared.segment(segment) else {
        return Ok(true); // already gone
    };
    let len = file.metadata()?.len();
    let oldest = core.shared.oldest_segment() == Some(segment);
    let mut batch = Batch::default();
    let mut moved = CompactionReport::default();
    record::scan_from(&file, 0, len, |scanned, bytes| {
        let condition = match scanned.kind {
            Kind::Put => {
                let live = core
                    .index
                    .get(&scanned.key)?
                    .is_some_and(|e| e.segment == segment && e.body_offset == scanned.body_offset);
                if !live {
                    return Ok(());
                }
                moved.records_moved += 1;
                moved.bytes_moved += scanned.len;
                Condition::At {
                    segment,
                    body_offset: scanned.body_offset,
                }
            }
            Kind::Delete => {
                if oldest || core.index.get(&scanned.key)?.is_some() {
                    return Ok(());
                }
                moved.tombstones_moved += 1;
                Condition::Absent
            }
        };
        let body_start = HEADER_LEN + scanned.key.len() + scanned.content_type.len();
        let record = Encoded {
            bytes: bytes.to_vec(),
            body_start,
        };
        batch.push(core, |done| Request {
            kind: scanned.kind,
            key: scanned.key,
            content_type: scanned.content_type,
            modified_nanos: scanned.modified_nanos,
            record,
            condition,
            done,
        })
    })?;
    batch.wait()?;
    checkpoint(core)?;

    let (stats, _) = stats(core)?;
    if let Some(left) = stats.get(&segment).filter(|s| s.live > 0) {
        tracing::warn!(
            segment,
            live = left.live,
            "a compacted pack segment still holds live records; it is kept"
        );
        return Ok(true);
    }
    let Some(removal) = RemovalLock::try_take(core)? else {
        tracing::info!(
            segment,
            "pack segments are being copied (a backup); compaction resumes later"
        );
        return Ok(false);
    };
    std::fs::remove_file(segment_path(&core.dir, segment))?;
    sync_dir(&core.dir)?;
    drop(removal);
    forget(core, segment)?;
    report.segments_removed += 1;
    report.records_moved += moved.records_moved;
    report.bytes_moved += moved.bytes_moved;
    report.tombstones_moved += moved.tombstones_moved;
    report.bytes_freed += len;
    tracing::debug!(segment, ?moved, "pack segment compacted");
    Ok(true)
}

/// Requests handed to the writer and not yet answered.
#[derive(Default)]
struct Batch {
    waiting: Vec<oneshot::Receiver<io::Result<Outcome>>>,
    bytes: usize,
}

impl Batch {
    fn push(
        &mut self,
        core: &Core,
        request: impl FnOnce(oneshot::Sender<io::Result<Outcome>>) -> Request,
    ) -> io::Result<()> {
        let (done, answer) = oneshot::channel();
        let request = request(done);
        self.bytes += request.record.bytes.len();
        if !core.send(Message::Append(request)) {
            return Err(stopped());
        }
        self.waiting.push(answer);
        if self.waiting.len() >= MOVE_BATCH_RECORDS || self.bytes >= MOVE_BATCH_BYTES {
            self.wait()?;
        }
        Ok(())
    }

    /// Wait for every request handed over; either outcome is fine (a skipped move was
    /// overtaken by a newer write).
    fn wait(&mut self) -> io::Result<()> {
        self.bytes = 0;
        for answer in self.waiting.drain(..) {
            answer.blocking_recv().map_err(|_| stopped())??;
        }
        Ok(())
    }
}

fn checkpoint(core: &Core) -> io::Result<()> {
    let (done, answer) = oneshot::channel();
    if !core.send(Message::Checkpoint(done)) {
        return Err(stopped());
    }
    answer.blocking_recv().map_err(|_| stopped())?
}

fn forget(core: &Core, segment: u32) -> io::Result<()> {
    let (done, answer) = oneshot::channel();
    if !core.send(Message::Forget { segment, done }) {
        return Err(stopped());
    }
    answer.blocking_recv().map_err(|_| stopped())?
}

/// The segments directory locked exclusively: no copy of it is being taken.
struct RemovalLock {
    _dir: std::fs::File,
}

impl RemovalLock {
    fn try_take(core: &Core) -> io::Result<Option<RemovalLock>> {
        let dir = std::fs::File::open(&core.dir)?;
        match rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(RemovalLock { _dir: dir })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}
