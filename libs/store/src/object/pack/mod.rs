//! `pack://` object store: objects appended to segment files in a local directory, for many
//! small, write-once objects (the ledger's payloads).
//!
//! One file per object costs a file creation, a rename and two `fsync`s per put, which is most
//! of the cost of storing a small object. Here, every put is a record appended to the active
//! segment, and one writer thread makes each group of concurrent puts durable with a single
//! `fdatasync` (several groups' flushes overlapping, see [`writer`]).
//!
//! Layout under the root directory:
//!
//! ```text
//! <root>/LOCK                   held (flock) by the one store that has the directory open
//! <root>/segments/<n>.pack      append-only segments, numbered from 1 (ten digits)
//! <root>/index.redb             the persisted index: where each live object is
//! ```
//!
//! Records are described in [`record`]. A delete appends a tombstone record. A segment only
//! grows, until it reaches the segment size (64 MiB by default) and the next one is started;
//! compaction later copies a segment's live records to the end of the log and removes it.
//!
//! - **Durability:** a put or delete returns `Ok` only after its record was `fdatasync`ed, and
//!   becomes visible to readers at that moment, never before.
//! - **Index and memory:** the index (key → segment, offset, size, time and content type) is
//!   a redb database on disk, read through a bounded cache ([`INDEX_CACHE_BYTES`]): resident
//!   memory does not grow with the number of objects, and opening reads no segment the index
//!   already covers. See [`index`] for how it stays consistent with the segments.
//! - **Crash recovery:** the segments are the truth. Opening reads the records the index's
//!   last durable commit does not cover (at most a few seconds of writes) and checks their
//!   checksums; a torn append (a crash during a write, which no caller was told had
//!   succeeded) is skipped, and so is damage anywhere: reading resumes at the next valid
//!   record. Appends then go to a new segment, unless the last one ended cleanly. A missing
//!   or unreadable index, or one that does not match the segments, is rebuilt from all of
//!   them.
//! - **Space:** the bytes of deleted and overwritten objects are reclaimed by compaction
//!   ([`PackObjectStore::compact`], and in the background every [`COMPACT_EVERY`] for
//!   segments at least half dead); see [`compact`] for why it never loses an acknowledged
//!   object, whenever it is interrupted.
//! - **One process:** the directory is locked while open; a second store on it (in this
//!   process or another) is refused.
//! - **Backups:** a copy of `segments/` taken while the store runs is a valid store (its index
//!   is rebuilt from the segments when it is opened): segments only grow, a record being
//!   appended during the copy is at worst a torn tail, skipped on open, and compaction removes
//!   no segment while a copy holds [`PackObjectStore::hold_segments`].

mod compact;
mod index;
mod record;
mod writer;

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, ErrorKind};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use rustix::fs::FlockOperation;
use tokio::sync::oneshot;

pub use self::compact::CompactionReport;
use self::index::{Entry, Index, SegmentFile};
use self::record::Kind;
use self::writer::{Active, Condition, Message, Outcome, Request, Writer};
use super::key::{validate_key, validate_prefix};
use super::local::{blocking, create_dir_durably, io_error, require_root, sync_dir};
use super::page::PageBuilder;
use super::{ListPage, ObjectBody, ObjectError, ObjectMeta, ObjectStore, PutOutcome};

const SEGMENTS: &str = "segments";
const LOCK: &str = "LOCK";
const SEGMENT_SUFFIX: &str = ".pack";
/// The default size at which a segment is closed and the next one started.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;
/// Memory the index may use to cache its pages.
pub const INDEX_CACHE_BYTES: usize = 16 * 1024 * 1024;
/// How often the background compaction looks for segments at least half dead.
pub const COMPACT_EVERY: Duration = Duration::from_secs(10 * 60);
/// Share of a segment's bytes that must be dead for the background compaction to take it.
const BACKGROUND_DEAD_FRACTION: f64 = 0.5;
/// Size of the chunks `get` streams.
const CHUNK: u64 = 1024 * 1024;
/// Lookups a read makes when the segment it was sent to has just been compacted away.
const READ_ATTEMPTS: usize = 3;

/// How to open a [`PackObjectStore`].
#[derive(Debug, Clone, Copy)]
pub struct PackStoreOptions {
    /// Size at which a segment is closed and the next one started.
    pub segment_bytes: u64,
}

impl Default for PackStoreOptions {
    fn default() -> Self {
        PackStoreOptions {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
        }
    }
}

/// The open segment files, which readers and the writer share.
#[derive(Debug, Default)]
struct Shared {
    segments: RwLock<HashMap<u32, Arc<File>>>,
}

impl Shared {
    fn add_segment(&self, id: u32, file: Arc<File>) {
        self.segments
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, file);
    }

    fn remove_segment(&self, id: u32) {
        self.segments
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    fn segment(&self, id: u32) -> Option<Arc<File>> {
        self.segments
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
    }

    fn oldest_segment(&self) -> Option<u32> {
        self.segments
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .min()
            .copied()
    }
}

fn segment_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:010}{SEGMENT_SUFFIX}"))
}

fn segment_id(name: &str) -> Option<u32> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    (digits.len() == 10 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// An object store of append-only segment files in a local directory (see the module
/// documentation).
#[derive(Debug, Clone)]
pub struct PackObjectStore {
    inner: Arc<Inner>,
}

/// What the store's handles, the writer and the compactor share.
#[derive(Debug)]
struct Core {
    root: PathBuf,
    dir: PathBuf,
    shared: Arc<Shared>,
    index: Arc<Index>,
    messages: Mutex<Sender<Message>>,
    /// Held while a compaction runs: one at a time.
    compacting: Mutex<()>,
    /// Records read from the segments on open, to bring the index up to date.
    records_read_on_open: u64,
}

impl Core {
    fn send(&self, message: Message) -> bool {
        self.messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(message)
            .is_ok()
    }
}

#[derive(Debug)]
struct Inner {
    core: Arc<Core>,
    writer: Option<JoinHandle<()>>,
    stop_compactor: Option<Sender<()>>,
    compactor: Option<JoinHandle<()>>,
    /// Holds the directory's lock until the store is dropped (after the writer has stopped).
    _lock: File,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Stop compacting, then let the writer finish what was queued and make the index
        // durable, so that nothing of this store still writes once the lock is released.
        self.stop_compactor.take();
        if let Some(compactor) = self.compactor.take()
            && compactor.join().is_err()
        {
            tracing::error!("the pack store compactor panicked");
        }
        self.core.send(Message::Shutdown);
        if let Some(writer) = self.writer.take()
            && writer.join().is_err()
        {
            tracing::error!("the pack store writer panicked");
        }
    }
}

/// A shared lock on a pack store's segments directory: while it is held, compaction removes
/// no segment, so a copy of the directory misses none of its records.
#[derive(Debug)]
pub struct SegmentsHold {
    _dir: File,
}

impl PackObjectStore {
    /// Open (creating if needed) a store rooted at `root`, with the default options.
    pub async fn open(root: impl AsRef<Path>) -> Result<Self, ObjectError> {
        Self::open_with(root, PackStoreOptions::default()).await
    }

    /// Open (creating if needed) a store rooted at `root`: lock it, open its index and index
    /// whatever the segments hold that it does not cover yet.
    pub async fn open_with(
        root: impl AsRef<Path>,
        options: PackStoreOptions,
    ) -> Result<Self, ObjectError> {
        let root = root.as_ref().to_path_buf();
        require_root(&root, "pack")?;
        let target = root.display().to_string();
        let inner = blocking("open", target, move || open_blocking(root, options)).await?;
        Ok(PackObjectStore {
            inner: Arc::new(inner),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.inner.core.root
    }

    /// How many records opening read from the segments to bring the index up to date: none
    /// after a clean close, a few seconds' worth of writes after a crash, every record when
    /// the index was rebuilt.
    pub fn records_read_on_open(&self) -> u64 {
        self.inner.core.records_read_on_open
    }

    /// Take a shared lock on the segments of the pack store rooted at `root` (in this process
    /// or another), waiting for a segment removal in progress to finish. Blocking.
    pub fn hold_segments(root: &Path) -> io::Result<SegmentsHold> {
        let dir = File::open(root.join(SEGMENTS))?;
        rustix::fs::flock(&dir, FlockOperation::LockShared)?;
        Ok(SegmentsHold { _dir: dir })
    }

    /// Reclaim the space of overwritten and deleted objects: every sealed segment with dead
    /// records has its live records copied to the end of the log and is then removed. Safe
    /// to run while the store serves reads and writes, and to interrupt at any point.
    pub async fn compact(&self) -> Result<CompactionReport, ObjectError> {
        self.compact_wasteful(0.0).await
    }

    /// Compact only the sealed segments whose dead bytes are at least `min_dead_fraction`
    /// of their size (what the background compaction does, with one half): the cheaper pass,
    /// which leaves mostly live segments alone.
    pub async fn compact_wasteful(
        &self,
        min_dead_fraction: f64,
    ) -> Result<CompactionReport, ObjectError> {
        let core = Arc::clone(&self.inner.core);
        let target = core.root.display().to_string();
        blocking("compact", target, move || {
            compact::run(&core, min_dead_fraction)
        })
        .await
    }

    fn entry(&self, key: &str) -> io::Result<Option<Entry>> {
        self.inner.core.index.get(key)
    }

    fn meta(key: &str, entry: &Entry) -> ObjectMeta {
        ObjectMeta {
            key: key.to_owned(),
            size: entry.body_len,
            content_type: (!entry.content_type.is_empty()).then(|| entry.content_type.clone()),
            last_modified: time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(
                entry.modified_nanos,
            ))
            .ok(),
        }
    }

    /// Queue a record for the writer and wait until it is durable and visible (or its
    /// condition failed).
    async fn append(
        &self,
        op: &'static str,
        kind: Kind,
        key: &str,
        content_type: &str,
        body: &[u8],
        condition: Condition,
    ) -> Result<Outcome, ObjectError> {
        let modified_nanos = i64::try_from(time::OffsetDateTime::now_utc().unix_timestamp_nanos())
            .unwrap_or(i64::MAX);
        let (done, acknowledged) = oneshot::channel();
        let request = Request {
            kind,
            key: key.to_owned(),
            content_type: content_type.to_owned(),
            modified_nanos,
            record: record::encode(kind, key, content_type, body, modified_nanos),
            condition,
            done,
        };
        let stopped = || {
            ObjectError::backend(
                op,
                key,
                io::Error::other("the pack store writer has stopped"),
            )
        };
        if !self.inner.core.send(Message::Append(request)) {
            return Err(stopped());
        }
        match acknowledged.await {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(e)) => Err(io_error(op, key, e)),
            Err(_) => Err(stopped()),
        }
    }

    async fn put_checked(
        &self,
        key: &str,
        body: &[u8],
        content_type: &str,
        condition: Condition,
    ) -> Result<Outcome, ObjectError> {
        validate_key(key)?;
        if u16::try_from(content_type.len()).is_err() {
            return Err(ObjectError::backend(
                "put",
                key,
                io::Error::new(
                    ErrorKind::InvalidInput,
                    "the content type is longer than 65535 bytes",
                ),
            ));
        }
        self.append("put", Kind::Put, key, content_type, body, condition)
            .await
    }
}

fn open_blocking(root: PathBuf, options: PackStoreOptions) -> io::Result<Inner> {
    let dir = root.join(SEGMENTS);
    create_dir_durably(&dir)?;
    sync_dir(&root)?;
    let lock = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(root.join(LOCK))?;
    rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).map_err(|e| {
        if e == rustix::io::Errno::WOULDBLOCK {
            io::Error::new(
                ErrorKind::ResourceBusy,
                format!(
                    "{} is already open (a pack store has one user at a time: stop the other \
                     Noema process using it)",
                    root.display()
                ),
            )
        } else {
            e.into()
        }
    })?;

    let mut files = Vec::new();
    for entry in fs::read_dir(&dir)? {
        let entry = entry?;
        match entry.file_name().to_str().and_then(segment_id) {
            Some(id) => {
                let meta = entry.metadata()?;
                files.push(SegmentFile {
                    id,
                    path: entry.path(),
                    len: meta.len(),
                    modified: index::modified_nanos(&meta),
                });
            }
            None => tracing::warn!(path = %entry.path().display(), "not a pack segment; ignored"),
        }
    }
    files.sort_unstable_by_key(|f| f.id);

    let opened = Index::open(&root, &files, INDEX_CACHE_BYTES)?;
    let shared = Arc::new(Shared::default());
    let mut last = None;
    for segment in &files {
        let file = Arc::new(File::options().read(true).write(true).open(&segment.path)?);
        shared.add_segment(segment.id, file.clone());
        last = Some((segment.id, file, segment.len));
    }
    // Only the last segment may be appended to, and only if it ends cleanly (the writer
    // starts the next one first if it is full).
    let active = last
        .filter(|_| opened.tail_clean)
        .map(|(id, file, len)| Active { id, file, len });
    let live: u64 = opened.stats.values().map(|s| s.live).sum();
    tracing::info!(
        root = %root.display(),
        segments = files.len(),
        objects = live,
        records_read = opened.replayed,
        "pack store opened"
    );

    let next_segment = match files.last() {
        Some(last) => last
            .id
            .checked_add(1)
            .ok_or_else(|| io::Error::other("the pack store ran out of segment numbers"))?,
        None => 1,
    };
    let index = Arc::new(opened.index);
    let writer = Writer::new(writer::Setup {
        dir: dir.clone(),
        shared: shared.clone(),
        index: index.clone(),
        stats: opened.stats,
        active,
        next_segment,
        segment_bytes: options.segment_bytes.max(1),
        covered: opened.covered,
    });
    let (messages, queue) = mpsc::channel();
    let reports = messages.clone();
    let writer = std::thread::Builder::new()
        .name("noema-pack-writer".into())
        .spawn(move || writer.run(&queue, &reports))?;
    let core = Arc::new(Core {
        root,
        dir,
        shared,
        index,
        messages: Mutex::new(messages),
        compacting: Mutex::new(()),
        records_read_on_open: opened.replayed,
    });
    let (stop_compactor, stop) = mpsc::channel::<()>();
    let background = Arc::clone(&core);
    let compactor = std::thread::Builder::new()
        .name("noema-pack-compactor".into())
        .spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(COMPACT_EVERY) {
                match compact::run(&background, BACKGROUND_DEAD_FRACTION) {
                    Ok(report) if report.segments_removed > 0 => {
                        tracing::info!(?report, "pack store compacted");
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "pack store compaction failed"),
                }
            }
        })?;
    Ok(Inner {
        core,
        writer: Some(writer),
        stop_compactor: Some(stop_compactor),
        compactor: Some(compactor),
        _lock: lock,
    })
}

#[async_trait]
impl ObjectStore for PackObjectStore {
    #[tracing::instrument(level = "debug", skip_all, fields(key = %key, size = body.len()))]
    async fn put(&self, key: &str, body: Bytes, content_type: &str) -> Result<(), ObjectError> {
        self.put_checked(key, &body, content_type, Condition::Always)
            .await
            .map(drop)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key, size = body.len()))]
    async fn put_if_absent(
        &self,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<PutOutcome, ObjectError> {
        match self
            .put_checked(key, &body, content_type, Condition::Absent)
            .await?
        {
            Outcome::Written => Ok(PutOutcome::Created),
            Outcome::Skipped => Ok(PutOutcome::Exists),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn get(&self, key: &str) -> Result<ObjectBody, ObjectError> {
        validate_key(key)?;
        // Index lookups run in place: the index's upper pages are cached, so a lookup is a
        // few microseconds, less than a hand-off to a blocking thread would cost.
        let mut found = None;
        for _ in 0..READ_ATTEMPTS {
            let Some(entry) = self.entry(key).map_err(|e| io_error("get", key, e))? else {
                break;
            };
            // A segment that compaction removed after the lookup: its records have been
            // moved, and the index says where, so look again.
            if let Some(file) = self.inner.core.shared.segment(entry.segment) {
                found = Some((entry, file));
                break;
            }
        }
        let Some((entry, file)) = found else {
            return Err(ObjectError::NotFound {
                key: key.to_owned(),
            });
        };
        let meta = Self::meta(key, &entry);
        let owned_key = key.to_owned();
        let stream = futures::stream::try_unfold(0u64, move |read| {
            let file = file.clone();
            let key = owned_key.clone();
            let remaining = entry.body_len - read;
            let at = entry.body_offset + read;
            async move {
                if remaining == 0 {
                    return Ok(None);
                }
                let n = remaining.min(CHUNK);
                let chunk = blocking("get", key, move || {
                    let mut buf = vec![0u8; usize::try_from(n).unwrap_or(0)];
                    file.read_exact_at(&mut buf, at)?;
                    Ok(Bytes::from(buf))
                })
                .await?;
                Ok(Some((chunk, read + n)))
            }
        });
        Ok(ObjectBody {
            meta,
            stream: Box::pin(stream),
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, ObjectError> {
        validate_key(key)?;
        let entry = self.entry(key).map_err(|e| io_error("head", key, e))?;
        Ok(entry.map(|entry| Self::meta(key, &entry)))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(prefix = %prefix, start_after = ?start_after, limit = limit))]
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListPage, ObjectError> {
        validate_prefix(prefix)?;
        let store = self.clone();
        let (prefix, start_after) = (prefix.to_owned(), start_after.map(str::to_owned));
        let target = prefix.clone();
        blocking("list", target, move || {
            let mut page = PageBuilder::new(&prefix, start_after.as_deref(), limit);
            store
                .inner
                .core
                .index
                .scan(page.scan_from(), |key, entry| {
                    if !page.wants(key) {
                        return false; // past the prefix: the index is in key order
                    }
                    let meta = ObjectMeta {
                        content_type: None,
                        ..Self::meta(key, &entry)
                    };
                    !page.offer(meta)
                })?;
            Ok(page.finish())
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn delete(&self, key: &str) -> Result<(), ObjectError> {
        validate_key(key)?;
        // Deleting nothing writes nothing (the writer checks, at the moment it appends).
        self.append("delete", Kind::Delete, key, "", &[], Condition::Always)
            .await
            .map(drop)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn check(&self) -> Result<(), ObjectError> {
        let target = self.inner.core.root.display().to_string();
        let writer_running = self
            .inner
            .writer
            .as_ref()
            .is_some_and(|writer| !writer.is_finished());
        if !writer_running {
            return Err(ObjectError::unavailable(
                "check",
                target,
                io::Error::other("the pack store writer has stopped"),
            ));
        }
        let segments = self.inner.core.dir.clone();
        let present = blocking("check", target.clone(), move || {
            Ok(fs::metadata(&segments).is_ok_and(|m| m.is_dir()))
        })
        .await?;
        if present {
            Ok(())
        } else {
            Err(ObjectError::unavailable(
                "check",
                target,
                io::Error::new(ErrorKind::NotFound, "the segments directory is missing"),
            ))
        }
    }
}
