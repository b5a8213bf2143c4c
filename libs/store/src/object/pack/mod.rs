//! `pack://` object store: objects appended to segment files in a local directory, for many
//! small, write-once objects (the ledger's payloads).
//!
//! One file per object costs a file creation, a rename and two `fsync`s per put, which is most
//! of the cost of storing a small object. Here, every put is a record appended to the active
//! segment, and one writer thread makes each group of concurrent puts durable with a single
//! `fdatasync`.
//!
//! Layout under the root directory:
//!
//! ```text
//! <root>/LOCK                   held (flock) by the one store that has the directory open
//! <root>/segments/<n>.pack      append-only segments, numbered from 1 (ten digits)
//! ```
//!
//! Records are described in [`record`]. A delete appends a tombstone record. Nothing is ever
//! rewritten: a segment only grows, until it reaches the segment size (64 MiB by default) and
//! the next one is started.
//!
//! - **Durability:** a put or delete returns `Ok` only after its record was `fdatasync`ed, and
//!   becomes visible to readers at that moment, never before.
//! - **Crash recovery:** [`PackObjectStore::open`] reads every segment, checks every record's
//!   checksum and builds the index from the valid ones, later records winning. A torn append
//!   (a crash during a write, which no caller was told had succeeded) is skipped, and so is
//!   damage anywhere: reading resumes at the next valid record. Appends then go to a new
//!   segment, unless the last one ended cleanly.
//! - **Memory:** the index (key, location, size, time and content type of every live object)
//!   is held in memory: about the key's length plus 100 bytes per object.
//! - **Space:** the bytes of deleted and overwritten objects stay in their segments; nothing
//!   compacts them. This store suits data that is written once and kept, as the ledger's
//!   objects are; for data that is often replaced, use `file://` or `s3://`.
//! - **One process:** the directory is locked while open; a second store on it (in this
//!   process or another) is refused.
//! - **Backups:** a copy of `segments/` taken while the store runs is a valid store: segments
//!   only grow, and a record being appended during the copy is at worst a torn tail, skipped
//!   on open.

mod record;
mod writer;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File};
use std::io::{self, ErrorKind};
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;

use async_trait::async_trait;
use bytes::Bytes;
use rustix::fs::FlockOperation;
use tokio::sync::oneshot;

use self::record::Kind;
use self::writer::{Active, Append, Writer};
use super::key::{validate_key, validate_prefix};
use super::local::{blocking, create_dir_durably, io_error, require_root, sync_dir};
use super::page::PageBuilder;
use super::{ListPage, ObjectBody, ObjectError, ObjectMeta, ObjectStore};

const SEGMENTS: &str = "segments";
const LOCK: &str = "LOCK";
const SEGMENT_SUFFIX: &str = ".pack";
/// The default size at which a segment is closed and the next one started.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;
/// Size of the chunks `get` streams.
const CHUNK: u64 = 1024 * 1024;
/// Distinct content types shared between index entries; others get their own copy.
const MAX_INTERNED_TYPES: usize = 1024;

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

/// Where a live object's body is, and what is known about it.
#[derive(Debug, Clone)]
struct Entry {
    segment: u32,
    body_offset: u64,
    body_len: u64,
    modified_nanos: i64,
    content_type: Option<Arc<str>>,
}

/// What readers and the writer share.
#[derive(Debug, Default)]
struct Shared {
    index: RwLock<BTreeMap<String, Entry>>,
    segments: RwLock<HashMap<u32, Arc<File>>>,
    content_types: Mutex<HashSet<Arc<str>>>,
}

impl Shared {
    // A poisoned lock only means a panic elsewhere while it was held; the maps are updated
    // in single calls, so they are whole.
    fn read_index(&self) -> RwLockReadGuard<'_, BTreeMap<String, Entry>> {
        self.index.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_index(&self) -> RwLockWriteGuard<'_, BTreeMap<String, Entry>> {
        self.index.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn add_segment(&self, id: u32, file: Arc<File>) {
        self.segments
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, file);
    }

    fn segment(&self, id: u32) -> Option<Arc<File>> {
        self.segments
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
    }

    fn intern(&self, content_type: &str) -> Option<Arc<str>> {
        if content_type.is_empty() {
            return None;
        }
        let mut types = self
            .content_types
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = types.get(content_type) {
            return Some(known.clone());
        }
        let new: Arc<str> = Arc::from(content_type);
        if types.len() < MAX_INTERNED_TYPES {
            types.insert(new.clone());
        }
        Some(new)
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

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    shared: Arc<Shared>,
    appends: Option<Sender<Append>>,
    writer: Option<JoinHandle<()>>,
    /// Holds the directory's lock until the store is dropped (after the writer has stopped).
    _lock: File,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Let the writer finish what was queued, so that nothing of this store still writes
        // once the lock is released.
        self.appends.take();
        if let Some(writer) = self.writer.take()
            && writer.join().is_err()
        {
            tracing::error!("the pack store writer panicked");
        }
    }
}

impl PackObjectStore {
    /// Open (creating if needed) a store rooted at `root`, with the default options.
    pub async fn open(root: impl AsRef<Path>) -> Result<Self, ObjectError> {
        Self::open_with(root, PackStoreOptions::default()).await
    }

    /// Open (creating if needed) a store rooted at `root`: lock it, and read every segment to
    /// build the index.
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
        &self.inner.root
    }

    fn entry(&self, key: &str) -> Option<Entry> {
        self.inner.shared.read_index().get(key).cloned()
    }

    fn meta(key: &str, entry: &Entry) -> ObjectMeta {
        ObjectMeta {
            key: key.to_owned(),
            size: entry.body_len,
            content_type: entry.content_type.as_deref().map(str::to_owned),
            last_modified: time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(
                entry.modified_nanos,
            ))
            .ok(),
        }
    }

    /// Queue a record for the writer and wait until it is durable and visible.
    async fn append(
        &self,
        op: &'static str,
        kind: Kind,
        key: &str,
        content_type: &str,
        body: &[u8],
    ) -> Result<(), ObjectError> {
        let modified_nanos = i64::try_from(time::OffsetDateTime::now_utc().unix_timestamp_nanos())
            .unwrap_or(i64::MAX);
        let (done, acknowledged) = oneshot::channel();
        let append = Append {
            kind,
            key: key.to_owned(),
            content_type: self.inner.shared.intern(content_type),
            modified_nanos,
            record: record::encode(kind, key, content_type, body, modified_nanos),
            done,
        };
        let stopped = || {
            ObjectError::backend(
                op,
                key,
                io::Error::other("the pack store writer has stopped"),
            )
        };
        let Some(appends) = &self.inner.appends else {
            return Err(stopped());
        };
        appends.send(append).map_err(|_| stopped())?;
        match acknowledged.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(io_error(op, key, e)),
            Err(_) => Err(stopped()),
        }
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

    let mut ids = Vec::new();
    for entry in fs::read_dir(&dir)? {
        let entry = entry?;
        match entry.file_name().to_str().and_then(segment_id) {
            Some(id) => ids.push(id),
            None => tracing::warn!(path = %entry.path().display(), "not a pack segment; ignored"),
        }
    }
    ids.sort_unstable();

    let shared = Arc::new(Shared::default());
    let mut last_clean: Option<Active> = None;
    {
        let mut index = shared.write_index();
        for &id in &ids {
            let path = segment_path(&dir, id);
            let file = File::options().read(true).write(true).open(&path)?;
            let len = file.metadata()?.len();
            let summary = record::scan(&file, len, |r| match r.kind {
                Kind::Put => {
                    let entry = Entry {
                        segment: id,
                        body_offset: r.body_offset,
                        body_len: r.body_len,
                        modified_nanos: r.modified_nanos,
                        content_type: shared.intern(&r.content_type),
                    };
                    index.insert(r.key, entry);
                }
                Kind::Delete => {
                    index.remove(&r.key);
                }
            })?;
            if summary.invalid_bytes > 0 {
                tracing::warn!(
                    segment = %path.display(),
                    invalid_bytes = summary.invalid_bytes,
                    valid_records = summary.records,
                    "pack segment holds bytes that are not valid records (a write cut short by a crash, or damage); they were skipped"
                );
            }
            let file = Arc::new(file);
            shared.add_segment(id, file.clone());
            // Only the last segment may be appended to, and only if it ends cleanly (the writer
            // starts the next one first if it is full).
            last_clean = (summary.invalid_bytes == 0).then_some(Active { id, file, len });
        }
        tracing::info!(
            root = %root.display(),
            segments = ids.len(),
            objects = index.len(),
            "pack store opened"
        );
    }

    let next_segment = match ids.last() {
        Some(&last) => last
            .checked_add(1)
            .ok_or_else(|| io::Error::other("the pack store ran out of segment numbers"))?,
        None => 1,
    };
    let writer = Writer {
        dir,
        shared: shared.clone(),
        active: last_clean,
        next_segment,
        segment_bytes: options.segment_bytes.max(1),
    };
    let (appends, queue) = mpsc::channel();
    let writer = std::thread::Builder::new()
        .name("noema-pack-writer".into())
        .spawn(move || writer.run(&queue))?;
    Ok(Inner {
        root,
        shared,
        appends: Some(appends),
        writer: Some(writer),
        _lock: lock,
    })
}

#[async_trait]
impl ObjectStore for PackObjectStore {
    #[tracing::instrument(level = "debug", skip_all, fields(key = %key, size = body.len()))]
    async fn put(&self, key: &str, body: Bytes, content_type: &str) -> Result<(), ObjectError> {
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
        self.append("put", Kind::Put, key, content_type, &body)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn get(&self, key: &str) -> Result<ObjectBody, ObjectError> {
        validate_key(key)?;
        let Some(entry) = self.entry(key) else {
            return Err(ObjectError::NotFound {
                key: key.to_owned(),
            });
        };
        let Some(file) = self.inner.shared.segment(entry.segment) else {
            return Err(ObjectError::backend(
                "get",
                key,
                io::Error::other(format!("segment {} is not open", entry.segment)),
            ));
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
        Ok(self.entry(key).map(|entry| Self::meta(key, &entry)))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(prefix = %prefix, start_after = ?start_after, limit = limit))]
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListPage, ObjectError> {
        validate_prefix(prefix)?;
        let mut page = PageBuilder::new(prefix, start_after, limit);
        let index = self.inner.shared.read_index();
        for (key, entry) in index.range::<str, _>((page.scan_from(), Bound::Unbounded)) {
            if !page.wants(key) {
                break; // past the prefix: the index is in key order
            }
            let meta = ObjectMeta {
                content_type: None,
                ..Self::meta(key, entry)
            };
            if page.offer(meta) {
                break;
            }
        }
        Ok(page.finish())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn delete(&self, key: &str) -> Result<(), ObjectError> {
        validate_key(key)?;
        if self.entry(key).is_none() {
            return Ok(()); // nothing to delete: no tombstone needed
        }
        self.append("delete", Kind::Delete, key, "", &[]).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn check(&self) -> Result<(), ObjectError> {
        let target = self.inner.root.display().to_string();
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
        let segments = self.inner.root.join(SEGMENTS);
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
