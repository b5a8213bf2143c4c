//! `file://` object store: one file per object under a local directory.
//!
//! Layout under the root directory:
//!
//! ```text
//! <root>/objects/<key>   the object's bytes, exactly as put, with its content type (if one
//!                        was given) in the extended attribute `user.noema.content_type`
//! <root>/meta/<key>      a content type kept as a small text file instead (see below)
//! <root>/tmp/<uuid>      files being written; renamed into objects/ or meta/ when complete
//! ```
//!
//! A content type is read from the object file's attribute if it has one, else from
//! `meta/<key>`, else there is none. `meta/<key>` files are what earlier versions always wrote,
//! what a store on a file system without user extended attributes writes (some tmpfs and
//! network file systems: [`FileObjectStore::open`] probes once and then keeps every content
//! type there), and where a content type too large for an attribute goes.
//!
//! Keeping bytes, metadata and temporary files in three separate trees means no key is ever
//! reserved (`x.meta`, `.meta/x` and `.tmp-…` are all ordinary keys) and a listing, which walks
//! only `objects/`, can never show a temporary or metadata file. `tmp/` sits on the same file
//! system as `objects/` (both are under the root), so `rename(2)` from one to the other is
//! atomic, which is all that a temp file "in the same directory" would give.
//!
//! Durability of `put`: write the temp file and set its content type attribute, `fsync` it,
//! rename it over the target, `fsync` the target's directory. Bytes and type are one file that
//! one rename makes visible, so a crash at any point leaves either the old object or the new
//! one, content type included, never a torn one. The directory `fsync` is shared between
//! concurrent puts into one directory (`DirSyncs`): a put returns once an `fsync` of its
//! directory that started after its rename has succeeded, its own or another put's.
//! Directories created on the way, or found already there but not yet made durable by this
//! process, are made durable by `fsync`ing their parents.
//!
//! Where the content type goes to `meta/<key>`, it is written the same way, before the bytes: a
//! crash in between leaves the old bytes with the new type, which a retried `put` repairs. A put
//! without a content type first removes a `meta/<key>` (durably, and only if there is one), or
//! the new bytes would inherit it; a put with one in the attribute needs no such ordering (the
//! attribute wins) and just removes a stale `meta/<key>` afterwards. Two concurrent puts of one
//! key with different content types may, where a `meta/<key>` file is involved, pair one's bytes
//! with the other's type (or with none); the bytes themselves are always one put's, whole.

use std::collections::HashMap;
use std::fs::{self, File, Metadata};
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use rustix::fs::XattrFlags;
use rustix::io::Errno;
use tokio::io::AsyncReadExt;

use super::key::{validate_key, validate_prefix};
use super::local::{blocking, create_dir_durably, io_error, require_root, sync_dir};
use super::page::PageBuilder;
use super::{ListPage, ObjectBody, ObjectError, ObjectMeta, ObjectStore, PutOutcome};

const OBJECTS: &str = "objects";
const META: &str = "meta";
const TMP: &str = "tmp";

/// The extended attribute holding an object file's content type.
pub const CONTENT_TYPE_XATTR: &str = "user.noema.content_type";

/// Size of the chunks `get` streams.
const CHUNK: usize = 64 * 1024;

/// Temp files older than this when a store is opened are left over from a crash and removed.
const STALE_TMP: Duration = Duration::from_secs(3600);

/// How many directories [`DirSyncs`] tracks before it forgets them all and starts over.
const MAX_TRACKED_DIRS: usize = 4096;

/// Where a store keeps content types (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentTypeStorage {
    /// In the object file's `user.noema.content_type` extended attribute (`meta/<key>` only for
    /// a type too large for one).
    Xattr,
    /// In `meta/<key>` files, as earlier versions did.
    MetaFiles,
}

/// How to open a [`FileObjectStore`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FileStoreOptions {
    /// `None` (the default): [`ContentTypeStorage::Xattr`] if the file system takes user
    /// extended attributes, else [`ContentTypeStorage::MetaFiles`]. `Some(Xattr)` makes `open`
    /// fail where they are not supported; `Some(MetaFiles)` never uses them for writing.
    /// Either way, reads look at both places.
    pub content_types: Option<ContentTypeStorage>,
}

/// An object store in a local directory.
#[derive(Debug, Clone)]
pub struct FileObjectStore {
    root: PathBuf,
    content_types: ContentTypeStorage,
    dirs: Arc<DirSyncs>,
}

impl FileObjectStore {
    /// Open (creating if needed) a store rooted at `root`, with the default options.
    pub async fn open(root: impl AsRef<Path>) -> Result<Self, ObjectError> {
        Self::open_with(root, FileStoreOptions::default()).await
    }

    /// Open (creating if needed) a store rooted at `root`.
    pub async fn open_with(
        root: impl AsRef<Path>,
        options: FileStoreOptions,
    ) -> Result<Self, ObjectError> {
        let root = root.as_ref().to_path_buf();
        require_root(&root, "file")?;
        let target = root.display().to_string();
        let probe_root = root.clone();
        let content_types = blocking("open", target, move || {
            let root = probe_root;
            for sub in [OBJECTS, META, TMP] {
                create_dir_durably(&root.join(sub))?;
            }
            // Even if they were already there (left by a process that crashed before making
            // them durable): from here on, `root` is where the chain of durable directories
            // that `ensure_dir` relies on starts.
            sync_dir(&root)?;
            remove_stale_tmp(&root.join(TMP));
            if options.content_types == Some(ContentTypeStorage::MetaFiles) {
                return Ok(ContentTypeStorage::MetaFiles);
            }
            if probe_xattrs(&root.join(TMP))? {
                return Ok(ContentTypeStorage::Xattr);
            }
            if options.content_types == Some(ContentTypeStorage::Xattr) {
                return Err(io::Error::new(
                    ErrorKind::Unsupported,
                    "the file system does not support user extended attributes",
                ));
            }
            tracing::info!(
                root = %root.display(),
                "the file system does not support user extended attributes: content types are kept in meta/ files"
            );
            Ok(ContentTypeStorage::MetaFiles)
        })
        .await?;
        Ok(FileObjectStore {
            root,
            content_types,
            dirs: Arc::default(),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where this store writes content types.
    pub fn content_type_storage(&self) -> ContentTypeStorage {
        self.content_types
    }

    fn object_path(&self, key: &str) -> PathBuf {
        self.root.join(OBJECTS).join(key)
    }

    fn meta_path(&self, key: &str) -> PathBuf {
        self.root.join(META).join(key)
    }

    /// Make sure `dir` (under the root) exists and that its entry, and its ancestors' up to the
    /// root, are durable. Once done, a directory is remembered (in [`DirSyncs`]) and costs a
    /// `stat` from then on.
    fn ensure_dir(&self, dir: &Path) -> io::Result<()> {
        if dir == self.root {
            return Ok(()); // made durable by `open`
        }
        let state = self.dirs.state(dir);
        if state.linked.load(Ordering::Acquire) && dir.is_dir() {
            return Ok(());
        }
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .ok_or_else(|| io::Error::new(ErrorKind::InvalidInput, "not under the store root"))?;
        self.ensure_dir(parent)?;
        match fs::create_dir(dir) {
            Ok(()) => {}
            // Created concurrently, or earlier: its entry in `parent` exists now, whoever made
            // it, so the `fsync` below (which starts after this point) covers it.
            Err(e) if e.kind() == ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => return Err(e),
        }
        self.dirs.sync(parent)?;
        state.linked.store(true, Ordering::Release);
        Ok(())
    }

    /// Write `data` to `target` atomically and durably (see the module documentation).
    /// `prepare` runs on the open temp file before it is `fsync`ed and renamed.
    fn write_atomic(
        &self,
        target: &Path,
        data: &[u8],
        prepare: impl FnOnce(&File) -> io::Result<()>,
    ) -> io::Result<()> {
        let parent = target
            .parent()
            .ok_or_else(|| io::Error::new(ErrorKind::InvalidInput, "target has no parent"))?;
        self.ensure_dir(parent)?;
        let tmp = self
            .root
            .join(TMP)
            .join(uuid::Uuid::new_v4().simple().to_string());
        let written = (|| {
            let mut file = File::create_new(&tmp)?;
            prepare(&file)?;
            file.write_all(data)?;
            file.sync_all()?;
            fs::rename(&tmp, target)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.dirs.sync(parent)
    }

    /// Remove a file and make the removal durable; a missing file is fine (and costs no
    /// `fsync`).
    fn remove_durably(&self, path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            Ok(()) => match path.parent() {
                Some(parent) => self.dirs.sync(parent),
                None => Ok(()),
            },
            Err(e) if is_missing(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn put_blocking(&self, key: &str, body: &[u8], content_type: &str) -> io::Result<()> {
        let object = self.object_path(key);
        let meta = self.meta_path(key);
        if content_type.is_empty() {
            // A type left in meta/ would be the new bytes' type: remove it first.
            self.remove_durably(&meta)?;
            return self.write_atomic(&object, body, |_| Ok(()));
        }
        if self.content_types == ContentTypeStorage::MetaFiles {
            self.write_atomic(&meta, content_type.as_bytes(), |_| Ok(()))?;
            return self.write_atomic(&object, body, |_| Ok(()));
        }
        let mut in_xattr = false;
        self.write_atomic(&object, body, |file| {
            match rustix::fs::fsetxattr(
                file,
                CONTENT_TYPE_XATTR,
                content_type.as_bytes(),
                XattrFlags::empty(),
            ) {
                Ok(()) => {
                    in_xattr = true;
                    Ok(())
                }
                // Too large for an attribute on this file system: a meta file, as on one
                // without attributes, written before the bytes are renamed into place.
                Err(e) if [Errno::TOOBIG, Errno::NOSPC, Errno::RANGE].contains(&e) => {
                    self.write_atomic(&meta, content_type.as_bytes(), |_| Ok(()))
                }
                Err(e) => Err(e.into()),
            }
        })?;
        if in_xattr {
            // The attribute wins over a meta file left by an earlier version or put; removing
            // it is only tidying, so it need not be durable.
            match fs::remove_file(&meta) {
                Ok(()) => {}
                Err(e) if is_missing(&e) => {}
                Err(e) => {
                    tracing::warn!(path = %meta.display(), error = %e, "cannot remove a stale content type file");
                }
            }
        }
        Ok(())
    }

    /// Open the object file of `key`: the file, its metadata and its content type, or `None`
    /// if there is no object.
    fn open_object(&self, key: &str) -> io::Result<Option<(File, Metadata, Option<String>)>> {
        let file = match File::open(self.object_path(key)) {
            Ok(file) => file,
            Err(e) if is_missing(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        // Size, time and type come from the open file, so they describe the bytes we read even
        // if a concurrent put renames a new version into place (a type in meta/ excepted).
        let stat = file.metadata()?;
        if !stat.is_file() {
            return Ok(None); // a directory: only deeper keys live here
        }
        let content_type = match read_content_type_xattr(&file)? {
            Some(content_type) => Some(content_type),
            None => read_meta_file(&self.meta_path(key))?,
        };
        Ok(Some((file, stat, content_type)))
    }

    fn list_blocking(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> io::Result<ListPage> {
        // Start at the deepest directory that the prefix names completely.
        let dir_key = match prefix.rfind('/') {
            Some(i) => &prefix[..=i],
            None => "",
        };
        let mut page = PageBuilder::new(prefix, start_after, limit);
        walk(&mut page, &self.root.join(OBJECTS).join(dir_key), dir_key)?;
        Ok(page.finish())
    }
}

/// A depth-first walk that yields keys in byte order without sorting the whole tree: each
/// directory's entries are sorted with directories compared as `name/`, which is exactly where
/// their keys fall among their siblings'. Directories in which the page wants no key are
/// skipped, and the walk stops once the page is complete. Returns `true` then.
fn walk(page: &mut PageBuilder<'_>, dir: &Path, dir_key: &str) -> io::Result<bool> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(false);
        }
        Err(e) => return Err(e),
    };
    let mut children = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue; // not UTF-8: cannot be a key
        };
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            children.push((format!("{dir_key}{name}/"), true, entry.path()));
        } else if file_type.is_file() {
            children.push((format!("{dir_key}{name}"), false, entry.path()));
        }
    }
    children.sort_unstable_by(|a, b| a.0.cmp(&b.0));

    for (key, is_dir, path) in children {
        if is_dir {
            if page.may_want_under(&key) && walk(page, &path, &key)? {
                return Ok(true);
            }
            continue;
        }
        if !page.wants(&key) || validate_key(&key).is_err() {
            continue;
        }
        let meta = match fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => continue, // deleted meanwhile
            Err(e) => return Err(e),
        };
        let complete = page.offer(ObjectMeta {
            key,
            size: meta.len(),
            content_type: None,
            last_modified: meta.modified().ok().map(time::OffsetDateTime::from),
        });
        if complete {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Shared directory `fsync`s ("group sync"). Ledger objects of one type and day all land in one
/// directory, so concurrent puts can share an `fsync` of it instead of each paying for one.
///
/// Per directory, `changes` counts the changes (renames into it, removals, new subdirectories)
/// whose durability was asked for, and `synced` is a value of `changes` such that every change
/// numbered up to it is durable. A caller, after making its change, takes the ticket
/// `t = changes + 1` (incrementing `changes`), then, holding the directory's lock, returns at
/// once if `synced >= t`; otherwise it reads `changes` as `c`, `fsync`s the directory and sets
/// `synced = c`. Why that is enough: every change numbered up to `c` was made before its ticket
/// was taken, and so before `c` was read, and so before that `fsync` started; an `fsync` of a
/// directory makes every change to it made before the call durable. A failed `fsync` records
/// nothing, so the next caller tries again. Forgetting a directory (the map is cleared past
/// [`MAX_TRACKED_DIRS`]) only costs a later caller its own `fsync`: callers still holding the
/// old state keep a consistent counter of their own.
#[derive(Default)]
struct DirSyncs {
    dirs: Mutex<HashMap<PathBuf, Arc<DirState>>>,
}

#[derive(Default)]
struct DirState {
    changes: AtomicU64,
    synced: Mutex<u64>,
    /// The directory's entry in its parent, and its ancestors' up to the store root, are
    /// durable (see [`FileObjectStore::ensure_dir`]).
    linked: AtomicBool,
}

impl std::fmt::Debug for DirSyncs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tracked = self.dirs.lock().map_or(0, |dirs| dirs.len());
        f.debug_struct("DirSyncs")
            .field("tracked", &tracked)
            .finish()
    }
}

impl DirSyncs {
    fn state(&self, dir: &Path) -> Arc<DirState> {
        let mut dirs = self.dirs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(state) = dirs.get(dir) {
            return Arc::clone(state);
        }
        if dirs.len() >= MAX_TRACKED_DIRS {
            dirs.clear();
        }
        let state = Arc::<DirState>::default();
        dirs.insert(dir.to_path_buf(), Arc::clone(&state));
        state
    }

    /// Make every change already made in `dir` durable, sharing the `fsync` with concurrent
    /// callers (see [`DirSyncs`]).
    fn sync(&self, dir: &Path) -> io::Result<()> {
        self.sync_with(dir, sync_dir)
    }

    /// [`DirSyncs::sync`] with `fsync` standing for the directory `fsync` (tests count them).
    fn sync_with(&self, dir: &Path, fsync: impl FnOnce(&Path) -> io::Result<()>) -> io::Result<()> {
        let state = self.state(dir);
        let ticket = state.changes.fetch_add(1, Ordering::SeqCst) + 1;
        // A poisoned lock only means a caller panicked; the counter it guards is still right.
        let mut synced = state.synced.lock().unwrap_or_else(PoisonError::into_inner);
        if *synced >= ticket {
            return Ok(());
        }
        let covered = state.changes.load(Ordering::SeqCst);
        fsync(dir)?;
        *synced = covered;
        Ok(())
    }
}

fn remove_stale_tmp(tmp: &Path) {
    let Ok(entries) = fs::read_dir(tmp) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > STALE_TMP);
        if stale && let Err(e) = fs::remove_file(entry.path()) {
            tracing::warn!(path = %entry.path().display(), error = %e, "cannot remove stale temp file");
        }
    }
}

/// Whether the file system under `tmp` takes user extended attributes: `false` only if it says
/// it does not support them; any other failure is an error.
fn probe_xattrs(tmp: &Path) -> io::Result<bool> {
    let probe = tmp.join(format!("xattr-probe-{}", uuid::Uuid::new_v4().simple()));
    let file = File::create_new(&probe)?;
    let set = rustix::fs::fsetxattr(&file, CONTENT_TYPE_XATTR, b"probe", XattrFlags::empty());
    drop(file);
    if let Err(e) = fs::remove_file(&probe) {
        tracing::warn!(path = %probe.display(), error = %e, "cannot remove the attribute probe file");
    }
    match set {
        Ok(()) => Ok(true),
        Err(e) if e == Errno::NOTSUP || e == Errno::OPNOTSUPP => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The content type an object file carries in its [`CONTENT_TYPE_XATTR`] attribute, or `None`
/// if it has none (or its file system has no user extended attributes). Backups use it too.
pub fn read_content_type_xattr(file: &File) -> io::Result<Option<String>> {
    let absent = |e: Errno| e == Errno::NODATA || e == Errno::NOTSUP || e == Errno::OPNOTSUPP;
    let mut buf = vec![0u8; 256];
    for _ in 0..4 {
        match rustix::fs::fgetxattr(file, CONTENT_TYPE_XATTR, &mut buf[..]) {
            Ok(0) => return Ok(None),
            Ok(len) => {
                buf.truncate(len);
                return String::from_utf8(buf)
                    .map(Some)
                    .map_err(|e| io::Error::new(ErrorKind::InvalidData, e));
            }
            Err(e) if absent(e) => return Ok(None),
            // Larger than `buf`: ask for its size and read again.
            Err(e) if e == Errno::RANGE => {
                match rustix::fs::fgetxattr_query(file, CONTENT_TYPE_XATTR) {
                    Ok(len) => buf = vec![0u8; len.max(1)],
                    Err(e) if absent(e) => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::other(
        "the content type attribute kept changing size while being read",
    ))
}

/// The content type kept in a `meta/<key>` file, if there is one.
fn read_meta_file(path: &Path) -> io::Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if is_missing(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `true` for the errors that mean "there is no object file here".
fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::NotFound | ErrorKind::NotADirectory | ErrorKind::IsADirectory
    )
}

#[async_trait]
impl ObjectStore for FileObjectStore {
    #[tracing::instrument(level = "debug", skip_all, fields(key = %key, size = body.len()))]
    async fn put(&self, key: &str, body: Bytes, content_type: &str) -> Result<(), ObjectError> {
        validate_key(key)?;
        let this = self.clone();
        let owned_key = key.to_owned();
        let content_type = content_type.to_owned();
        blocking("put", key.to_owned(), move || {
            this.put_blocking(&owned_key, &body, &content_type)
        })
        .await
    }

    /// No atomic form on a plain directory: a `head`, then a `put`.
    async fn put_if_absent(
        &self,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<PutOutcome, ObjectError> {
        super::head_then_put(self, key, body, content_type).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn get(&self, key: &str) -> Result<ObjectBody, ObjectError> {
        validate_key(key)?;
        let this = self.clone();
        let owned_key = key.to_owned();
        let opened = blocking("get", key.to_owned(), move || this.open_object(&owned_key)).await?;
        let Some((file, stat, content_type)) = opened else {
            return Err(ObjectError::NotFound {
                key: key.to_owned(),
            });
        };
        let meta = ObjectMeta {
            key: key.to_owned(),
            size: stat.len(),
            content_type,
            last_modified: stat.modified().ok().map(time::OffsetDateTime::from),
        };
        let owned_key = key.to_owned();
        let file = tokio::fs::File::from_std(file);
        let stream = futures::stream::try_unfold(Some(file), move |state| {
            let key = owned_key.clone();
            async move {
                let Some(mut file) = state else {
                    return Ok(None);
                };
                let mut buf = BytesMut::with_capacity(CHUNK);
                let n = file
                    .read_buf(&mut buf)
                    .await
                    .map_err(|e| io_error("get", &key, e))?;
                if n == 0 {
                    Ok(None)
                } else {
                    Ok(Some((buf.freeze(), Some(file))))
                }
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
        let this = self.clone();
        let owned_key = key.to_owned();
        let opened = blocking("head", key.to_owned(), move || this.open_object(&owned_key)).await?;
        Ok(opened.map(|(_, stat, content_type)| ObjectMeta {
            key: key.to_owned(),
            size: stat.len(),
            content_type,
            last_modified: stat.modified().ok().map(time::OffsetDateTime::from),
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(prefix = %prefix, start_after = ?start_after, limit = limit))]
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListPage, ObjectError> {
        validate_prefix(prefix)?;
        let this = self.clone();
        let prefix = prefix.to_owned();
        let start_after = start_after.map(str::to_owned);
        blocking("list", prefix.clone(), move || {
            this.list_blocking(&prefix, start_after.as_deref(), limit)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn delete(&self, key: &str) -> Result<(), ObjectError> {
        validate_key(key)?;
        let this = self.clone();
        let object = self.object_path(key);
        let meta = self.meta_path(key);
        blocking("delete", key.to_owned(), move || {
            match fs::symlink_metadata(&object) {
                Ok(stat) if stat.is_dir() => return Ok(()), // only deeper keys live here
                Ok(_) => this.remove_durably(&object)?,
                Err(e) if is_missing(&e) => {}
                Err(e) => return Err(e),
            }
            this.remove_durably(&meta)
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn check(&self) -> Result<(), ObjectError> {
        let root = self.root.clone();
        let target = root.display().to_string();
        let result = blocking("check", target.clone(), move || {
            if !root.join(OBJECTS).is_dir() {
                return Err(io::Error::new(
                    ErrorKind::NotFound,
                    "the objects directory is missing",
                ));
            }
            let probe = root
                .join(TMP)
                .join(format!("check-{}", uuid::Uuid::new_v4().simple()));
            let mut file = File::create_new(&probe)?;
            let written = file.write_all(b"ok").and_then(|()| file.sync_all());
            fs::remove_file(&probe)?;
            written
        })
        .await;
        // Whatever went wrong, the store is not ready: report it as unavailable.
        result.map_err(|e| match e {
            ObjectError::Backend { source, .. } => ObjectError::Unavailable {
                op: "check",
                target,
                source,
            },
            other => other,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use std::sync::Barrier;

    use super::*;

    /// The group sync protocol: every caller returns only after an `fsync` that started after
    /// its change, and concurrent callers share `fsync`s.
    #[test]
    fn group_sync_covers_every_change_and_shares_fsyncs() {
        const THREADS: usize = 32;
        const ROUNDS: u64 = 50;
        let syncs = DirSyncs::default();
        let dir = Path::new("/group-sync-test");
        // Changes "made" so far, and how many of them the last completed fsync covers.
        let made = AtomicU64::new(0);
        let durable = Mutex::new(0u64);
        let fsyncs = AtomicU64::new(0);
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|scope| {
            for _ in 0..THREADS {
                scope.spawn(|| {
                    barrier.wait();
                    for _ in 0..ROUNDS {
                        let mine = made.fetch_add(1, Ordering::SeqCst) + 1;
                        syncs
                            .sync_with(dir, |_| {
                                let covered = made.load(Ordering::SeqCst);
                                fsyncs.fetch_add(1, Ordering::SeqCst);
                                std::thread::sleep(Duration::from_micros(200));
                                let mut durable = durable.lock().unwrap();
                                *durable = (*durable).max(covered);
                                Ok(())
                            })
                            .unwrap();
                        assert!(
                            *durable.lock().unwrap() >= mine,
                            "returned before change {mine} was durable"
                        );
                    }
                });
            }
        });
        let total = THREADS as u64 * ROUNDS;
        let fsyncs = fsyncs.load(Ordering::SeqCst);
        assert!(
            fsyncs >= 1 && fsyncs < total,
            "{fsyncs} fsyncs for {total} changes"
        );
    }

    /// A failed fsync makes nothing durable: the next caller syncs again.
    #[test]
    fn group_sync_retries_after_a_failed_fsync() {
        let syncs = DirSyncs::default();
        let dir = Path::new("/group-sync-test");
        let err = syncs.sync_with(dir, |_| Err(io::Error::other("injected")));
        assert!(err.is_err());
        let mut called = false;
        syncs
            .sync_with(dir, |_| {
                called = true;
                Ok(())
            })
            .unwrap();
        assert!(called, "the change after a failed fsync was not synced");
    }

    /// Past the bound the map starts over; a forgotten directory just gets its own fsync.
    #[test]
    fn group_sync_forgets_directories_past_the_bound() {
        let syncs = DirSyncs::default();
        for i in 0..=MAX_TRACKED_DIRS {
            syncs
                .sync_with(&PathBuf::from(format!("/d{i}")), |_| Ok(()))
                .unwrap();
        }
        let tracked = syncs.dirs.lock().unwrap().len();
        assert!(tracked <= MAX_TRACKED_DIRS, "{tracked} directories tracked");
        let mut called = false;
        syncs
            .sync_with(Path::new("/d0"), |_| {
                called = true;
                Ok(())
            })
            .unwrap();
        assert!(called);
    }
}
