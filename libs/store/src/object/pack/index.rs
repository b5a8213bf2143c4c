//! The pack store's persisted index: where every live object is, kept on disk in a redb
//! database (`<root>/index.redb`), so that neither resident memory nor the time to open a
//! store grows with the number of objects.
//!
//! Three tables:
//!
//! ```text
//! objects   key        → segment u32 · body offset u64 · body length u64 · modified i64 ·
//!                        content type (the rest), little-endian
//! segments  segment id → (bytes indexed, dead bytes, live records, file length and
//!                        modification time when last indexed)
//! meta      "covered_segment", "covered_offset" → u64
//! ```
//!
//! **Coverage.** The index reflects every record before its *coverage mark* (a segment and an
//! offset in it, always a record boundary). The writer advances the mark in the same
//! transaction as the entries of the records it covers. Most of those transactions are not
//! made durable on their own (redb's `Durability::None`: visible at once, persisted by the
//! next durable commit); every few seconds or megabytes one is. After a crash redb comes
//! back at its last durable commit, and [`Index::open`] reads the records after that
//! commit's mark from the segments (their checksums tell whole records from torn ones) and
//! applies them again. Applying a record is idempotent, so replaying one the index already
//! had changes nothing.
//!
//! **Checks on open.** The index must describe the segments it finds: a segment below the
//! mark that it has never heard of, one shorter than it has indexed, or a missing one that
//! still holds live objects means the directory was changed behind its back (a restored
//! backup, a copied or truncated file); it is then rebuilt from every segment, as it is when
//! `index.redb` is missing (a store from before the index, or a restored backup) or cannot
//! be read.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::record::{self, HEADER_LEN, Kind, Scanned};

/// The index's file name under the store's root.
pub(super) const INDEX_FILE: &str = "index.redb";

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const SEGMENTS: TableDefinition<u32, (u64, u64, u64, u64, i64)> = TableDefinition::new("segments");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const COVERED_SEGMENT: &str = "covered_segment";
const COVERED_OFFSET: &str = "covered_offset";
/// Records applied per transaction while replaying segments.
const REPLAY_BATCH: usize = 16 * 1024;

/// A redb failure, as the I/O error the store reports.
pub(super) fn db_error(e: impl Into<redb::Error>) -> io::Error {
    io::Error::other(e.into())
}

/// Where a live object's body is, and what is known about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub segment: u32,
    pub body_offset: u64,
    pub body_len: u64,
    pub modified_nanos: i64,
    pub content_type: String,
}

const ENTRY_FIXED: usize = 4 + 8 + 8 + 8;

impl Entry {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENTRY_FIXED + self.content_type.len());
        out.extend_from_slice(&self.segment.to_le_bytes());
        out.extend_from_slice(&self.body_offset.to_le_bytes());
        out.extend_from_slice(&self.body_len.to_le_bytes());
        out.extend_from_slice(&self.modified_nanos.to_le_bytes());
        out.extend_from_slice(self.content_type.as_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> io::Result<Entry> {
        let damaged =
            || io::Error::new(io::ErrorKind::InvalidData, "a pack index entry is damaged");
        if bytes.len() < ENTRY_FIXED {
            return Err(damaged());
        }
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let mut segment = [0u8; 4];
        segment.copy_from_slice(&bytes[0..4]);
        let content_type = std::str::from_utf8(&bytes[ENTRY_FIXED..]).map_err(|_| damaged())?;
        Ok(Entry {
            segment: u32::from_le_bytes(segment),
            body_offset: u64_at(4),
            body_len: u64_at(12),
            modified_nanos: i64::from_le_bytes(u64_at(20).to_le_bytes()),
            content_type: content_type.to_owned(),
        })
    }

    fn from_record(segment: u32, record: &Scanned) -> Entry {
        Entry {
            segment,
            body_offset: record.body_offset,
            body_len: record.body_len,
            modified_nanos: record.modified_nanos,
            content_type: record.content_type.clone(),
        }
    }

    /// Length of the record this entry points into (header, key, content type, body).
    pub fn record_len(&self, key: &str) -> u64 {
        (HEADER_LEN + key.len() + self.content_type.len()) as u64 + self.body_len
    }
}

/// What the index knows about one segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SegmentStats {
    /// Bytes of the segment the index covers (the end of its last indexed record).
    pub len: u64,
    /// Bytes of records that no longer hold a live object (overwritten or deleted objects,
    /// and tombstones).
    pub dead: u64,
    /// Records that hold a live object.
    pub live: u64,
    /// The file's length and modification time (Unix nanoseconds) when the index last took
    /// records from it: if they differ on open, the file changed since.
    pub file_len: u64,
    pub modified: i64,
}

/// Every segment's [`SegmentStats`], by segment id.
pub(super) type Stats = BTreeMap<u32, SegmentStats>;

/// The segment file the index last took records from, as it was then.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct FileState {
    pub len: u64,
    pub modified: i64,
}

impl FileState {
    pub fn of(file: &File) -> io::Result<FileState> {
        let meta = file.metadata()?;
        Ok(FileState {
            len: meta.len(),
            modified: modified_nanos(&meta),
        })
    }
}

/// A file's modification time in Unix nanoseconds (0 if unknown).
pub(super) fn modified_nanos(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        .unwrap_or(0)
}

/// A position in the log of segments: every record before it is covered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Mark {
    pub segment: u32,
    pub offset: u64,
}

/// One change the index takes: a record appended at `segment`.
#[derive(Debug, Clone)]
pub(super) enum Op {
    Put {
        key: String,
        entry: Entry,
    },
    Delete {
        key: String,
        segment: u32,
        /// The tombstone record's length.
        record_len: u64,
    },
}

impl Op {
    fn from_record(segment: u32, record: &Scanned) -> Op {
        match record.kind {
            Kind::Put => Op::Put {
                key: record.key.clone(),
                entry: Entry::from_record(segment, record),
            },
            Kind::Delete => Op::Delete {
                key: record.key.clone(),
                segment,
                record_len: record.len,
            },
        }
    }
}

/// What is known about the segments when the index has been opened (and brought up to date).
#[derive(Debug)]
pub(super) struct Opened {
    pub index: Index,
    pub stats: Stats,
    /// Everything before this is indexed.
    pub covered: Mark,
    /// Whether the segment `covered` is in ended on a whole record (appends may continue it).
    pub tail_clean: bool,
    /// How many records were read from the segments to bring the index up to date.
    pub replayed: u64,
}

/// The persisted index; see the module documentation.
#[derive(Debug)]
pub(super) struct Index {
    db: Database,
}

/// A segment file found on disk.
#[derive(Debug, Clone)]
pub(super) struct SegmentFile {
    pub id: u32,
    pub path: PathBuf,
    pub len: u64,
    pub modified: i64,
}

impl Index {
    /// Open the index under `root` (creating it if missing), check it against `segments`
    /// (sorted by id) and index whatever records of theirs it does not cover yet.
    pub fn open(root: &Path, segments: &[SegmentFile], cache_bytes: usize) -> io::Result<Opened> {
        let path = root.join(INDEX_FILE);
        let existed = path.exists();
        let db = match Database::builder()
            .set_cache_size(cache_bytes)
            .create(&path)
        {
            Ok(db) => db,
            Err(e) if existed => {
                let aside = root.join(format!(
                    "{INDEX_FILE}.unreadable-{}",
                    time::OffsetDateTime::now_utc().unix_timestamp()
                ));
                tracing::warn!(error = %e, moved_to = %aside.display(), "the pack index cannot be read; rebuilding it from the segments");
                std::fs::rename(&path, &aside)?;
                Database::builder()
                    .set_cache_size(cache_bytes)
                    .create(&path)
                    .map_err(db_error)?
            }
            Err(e) => return Err(db_error(e)),
        };
        let index = Index { db };
        let (mut stats, mut covered) = index.load()?;
        let trouble = match mismatch(&stats, covered, segments, existed) {
            Some(reason) => Some(reason),
            None => damaged(&stats, segments)?,
        };
        if let Some(reason) = trouble {
            if existed {
                tracing::warn!(
                    reason,
                    "the pack index does not describe the segments; rebuilding it from them"
                );
            } else if !segments.is_empty() {
                tracing::info!(
                    segments = segments.len(),
                    "building the pack index from the segments"
                );
            }
            index.clear()?;
            stats = Stats::new();
            covered = Mark::default();
        }
        // Missing segments without live records (removed by compaction just before a crash)
        // are simply forgotten.
        let forgotten: Vec<u32> = stats
            .keys()
            .copied()
            .filter(|id| segments.binary_search_by_key(id, |s| s.id).is_err())
            .collect();
        for id in &forgotten {
            stats.remove(id);
        }
        let (replayed, tail_clean, covered) =
            index.replay(&mut stats, covered, segments, &forgotten)?;
        Ok(Opened {
            index,
            stats,
            covered,
            tail_clean,
            replayed,
        })
    }

    fn load(&self) -> io::Result<(Stats, Mark)> {
        let txn = self.db.begin_read().map_err(db_error)?;
        let mut stats = Stats::new();
        let mut covered = Mark::default();
        match txn.open_table(SEGMENTS) {
            Ok(table) => {
                for row in table.iter().map_err(db_error)? {
                    let (id, value) = row.map_err(db_error)?;
                    let (len, dead, live, file_len, modified) = value.value();
                    stats.insert(
                        id.value(),
                        SegmentStats {
                            len,
                            dead,
                            live,
                            file_len,
                            modified,
                        },
                    );
                }
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {}
            Err(e) => return Err(db_error(e)),
        }
        match txn.open_table(META) {
            Ok(table) => {
                let get = |name| -> io::Result<u64> {
                    Ok(table.get(name).map_err(db_error)?.map_or(0, |v| v.value()))
                };
                covered.segment = u32::try_from(get(COVERED_SEGMENT)?).unwrap_or(u32::MAX);
                covered.offset = get(COVERED_OFFSET)?;
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {}
            Err(e) => return Err(db_error(e)),
        }
        Ok((stats, covered))
    }

    fn clear(&self) -> io::Result<()> {
        let txn = self.db.begin_write().map_err(db_error)?;
        txn.delete_table(OBJECTS).map_err(db_error)?;
        txn.delete_table(SEGMENTS).map_err(db_error)?;
        txn.delete_table(META).map_err(db_error)?;
        txn.commit().map_err(db_error)
    }

    /// Index the records of `segments` from `covered` on; returns how many were read,
    /// whether the last segment ended on a whole record, and the new mark.
    fn replay(
        &self,
        stats: &mut Stats,
        covered: Mark,
        segments: &[SegmentFile],
        forgotten: &[u32],
    ) -> io::Result<(u64, bool, Mark)> {
        let mut replayed = 0u64;
        let mut tail_clean = true;
        let mut mark = covered;
        let mut last_state =
            segments
                .iter()
                .find(|s| s.id == covered.segment)
                .map_or(FileState::default(), |s| FileState {
                    len: s.len,
                    modified: s.modified,
                });
        let mut ops = Vec::new();
        for segment in segments.iter().filter(|s| s.id >= covered.segment) {
            let start = if segment.id == covered.segment {
                covered.offset
            } else {
                0
            };
            let file = File::open(&segment.path)?;
            let state = FileState {
                len: segment.len,
                modified: segment.modified,
            };
            stats.entry(segment.id).or_default();
            let summary = record::scan_from(&file, start, segment.len, |record, _| {
                ops.push(Op::from_record(segment.id, &record));
                if ops.len() >= REPLAY_BATCH {
                    let end = Mark {
                        segment: segment.id,
                        offset: record.offset + record.len,
                    };
                    let batch = std::mem::take(&mut ops);
                    self.commit(stats, batch.iter(), end, state, false, &[])?;
                }
                Ok(())
            })?;
            replayed += summary.records;
            if summary.invalid_bytes > 0 {
                tracing::warn!(
                    segment = %segment.path.display(),
                    invalid_bytes = summary.invalid_bytes,
                    valid_records = summary.records,
                    "pack segment holds bytes that are not valid records (a write cut short by a crash, or damage); they were skipped"
                );
            }
            tail_clean = summary.invalid_bytes == 0;
            mark = Mark {
                segment: segment.id,
                offset: segment.len,
            };
            last_state = state;
        }
        // One durable commit: what was replayed, and the forgotten segments.
        self.commit(stats, ops.iter(), mark, last_state, true, forgotten)?;
        Ok((replayed, tail_clean, mark))
    }

    /// Apply `ops` (records appended up to `covered`), persist `stats` and the mark (with the
    /// state of the mark's segment file, `file`), in one transaction: durable, or visible at once and persisted by the next durable one.
    /// `stats` is updated only if the commit succeeds.
    pub fn commit<'a>(
        &self,
        stats: &mut Stats,
        ops: impl IntoIterator<Item = &'a Op>,
        covered: Mark,
        file: FileState,
        durable: bool,
        removed_segments: &[u32],
    ) -> io::Result<()> {
        let mut next = stats.clone();
        if covered.segment > 0 {
            let s = next.entry(covered.segment).or_default();
            s.len = s.len.max(covered.offset);
            s.file_len = file.len;
            s.modified = file.modified;
        }
        let mut txn = self.db.begin_write().map_err(db_error)?;
        if durable {
            // The allocator state is saved with the commit, so opening after a crash does
            // not walk the whole database.
            txn.set_quick_repair(true);
        } else {
            txn.set_durability(Durability::None).map_err(db_error)?;
        }
        {
            let mut objects = txn.open_table(OBJECTS).map_err(db_error)?;
            for op in ops {
                apply(&mut objects, &mut next, op)?;
            }
        }
        {
            let mut segments = txn.open_table(SEGMENTS).map_err(db_error)?;
            for id in removed_segments {
                next.remove(id);
                segments.remove(id).map_err(db_error)?;
            }
            for (id, s) in &next {
                if stats.get(id) != Some(s) {
                    segments
                        .insert(id, (s.len, s.dead, s.live, s.file_len, s.modified))
                        .map_err(db_error)?;
                }
            }
        }
        {
            let mut meta = txn.open_table(META).map_err(db_error)?;
            meta.insert(COVERED_SEGMENT, u64::from(covered.segment))
                .map_err(db_error)?;
            meta.insert(COVERED_OFFSET, covered.offset)
                .map_err(db_error)?;
        }
        txn.commit().map_err(db_error)?;
        *stats = next;
        Ok(())
    }

    /// The entry of `key`, if it is live.
    pub fn get(&self, key: &str) -> io::Result<Option<Entry>> {
        let txn = self.db.begin_read().map_err(db_error)?;
        let table = match txn.open_table(OBJECTS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(db_error(e)),
        };
        let found = table.get(key).map_err(db_error)?;
        found.map(|v| Entry::decode(v.value())).transpose()
    }

    /// Live entries from `from` on, in key order, until `visit` returns `false`.
    pub fn scan(
        &self,
        from: Bound<&str>,
        mut visit: impl FnMut(&str, Entry) -> bool,
    ) -> io::Result<()> {
        let txn = self.db.begin_read().map_err(db_error)?;
        let table = match txn.open_table(OBJECTS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(db_error(e)),
        };
        for row in table
            .range::<&str>((from, Bound::Unbounded))
            .map_err(db_error)?
        {
            let (key, value) = row.map_err(db_error)?;
            if !visit(key.value(), Entry::decode(value.value())?) {
                break;
            }
        }
        Ok(())
    }
}

/// Apply one op to the objects table, keeping each segment's live and dead counts.
fn apply(objects: &mut redb::Table<'_, &str, &[u8]>, stats: &mut Stats, op: &Op) -> io::Result<()> {
    let (key, replaced) = match op {
        Op::Put { key, entry } => {
            let s = stats.entry(entry.segment).or_default();
            s.live += 1;
            s.len = s.len.max(entry.body_offset + entry.body_len);
            let encoded = entry.encode();
            let old = objects
                .insert(key.as_str(), encoded.as_slice())
                .map_err(db_error)?;
            (key, old.map(|v| Entry::decode(v.value())).transpose()?)
        }
        Op::Delete {
            key,
            segment,
            record_len,
        } => {
            let s = stats.entry(*segment).or_default();
            s.dead += record_len;
            let old = objects.remove(key.as_str()).map_err(db_error)?;
            (key, old.map(|v| Entry::decode(v.value())).transpose()?)
        }
    };
    if let Some(old) = replaced {
        let s = stats.entry(old.segment).or_default();
        s.live = s.live.saturating_sub(1);
        s.dead += old.record_len(key);
    }
    Ok(())
}

/// A segment file that changed since the index last took records from it (appends after
/// the last durable commit, after a crash; or a change behind the store's back) must still
/// hold every record the index has from it: its indexed bytes are read again, and damage
/// there is a reason to rebuild the index.
fn damaged(stats: &Stats, segments: &[SegmentFile]) -> io::Result<Option<String>> {
    for segment in segments {
        let Some(s) = stats.get(&segment.id) else {
            continue;
        };
        if s.len == 0 || (segment.len == s.file_len && segment.modified == s.modified) {
            continue;
        }
        let file = File::open(&segment.path)?;
        let summary = record::scan_from(&file, 0, s.len.min(segment.len), |_, _| Ok(()))?;
        if summary.invalid_bytes > 0 {
            return Ok(Some(format!(
                "segment {} changed since it was indexed and holds {} bytes that are not valid records",
                segment.id, summary.invalid_bytes
            )));
        }
    }
    Ok(None)
}

/// Why the index cannot be trusted for `segments`, if it cannot.
fn mismatch(
    stats: &Stats,
    covered: Mark,
    segments: &[SegmentFile],
    existed: bool,
) -> Option<String> {
    if !existed {
        return Some("there is no index".into());
    }
    for (id, s) in stats {
        match segments.binary_search_by_key(id, |f| f.id) {
            Ok(at) if segments[at].len < s.len => {
                return Some(format!(
                    "segment {id} is {} bytes long, shorter than the {} bytes indexed",
                    segments[at].len, s.len
                ));
            }
            Err(_) if s.live > 0 => {
                return Some(format!(
                    "segment {id} is missing but holds {} live objects",
                    s.live
                ));
            }
            _ => {}
        }
    }
    for segment in segments {
        if segment.id < covered.segment && !stats.contains_key(&segment.id) {
            return Some(format!("segment {} is not indexed", segment.id));
        }
    }
    if covered.segment > 0
        && segments
            .binary_search_by_key(&covered.segment, |f| f.id)
            .is_err()
        && stats.get(&covered.segment).is_some_and(|s| s.len > 0)
    {
        return Some(format!("segment {} is missing", covered.segment));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let entry = Entry {
            segment: 7,
            body_offset: 1 << 40,
            body_len: 12,
            modified_nanos: -5,
            content_type: "application/json".into(),
        };
        assert_eq!(Entry::decode(&entry.encode()).ok(), Some(entry.clone()));
        let bare = Entry {
            content_type: String::new(),
            ..entry
        };
        assert_eq!(Entry::decode(&bare.encode()).ok(), Some(bare));
        assert!(Entry::decode(&[1, 2, 3]).is_err());
    }

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_index_value_is_an_entry_or_damaged(bytes in proptest::prelude::any::<Vec<u8>>()) {
            if let Ok(entry) = Entry::decode(&bytes) {
                proptest::prop_assert_eq!(entry.encode(), bytes);
            }
        }
    }
}
