//! `file://` object store: one file per object under a local directory.
//!
//! Layout under the root directory:
//!
//! ```text
//! <root>/objects/<key>   the object's bytes, exactly as put
//! <root>/meta/<key>      its content type (a small text file), absent if none was given
//! <root>/tmp/<uuid>      files being written; renamed into objects/ or meta/ when complete
//! ```
//!
//! Keeping bytes, metadata and temporary files in three separate trees means no key is ever
//! reserved (`x.meta`, `.meta/x` and `.tmp-…` are all ordinary keys) and a listing, which walks
//! only `objects/`, can never show a temporary or metadata file. `tmp/` sits on the same file
//! system as `objects/` (both are under the root), so `rename(2)` from one to the other is
//! atomic, which is all that a temp file "in the same directory" would give.
//!
//! Durability of `put`: write the temp file, `fsync` it, rename it over the target, `fsync` the
//! target's directory; directories created on the way are made durable by `fsync`ing their
//! parents. A crash at any point leaves either the old object or the new one, never a torn one.
//! The content type is written the same way, before the bytes: a crash in between leaves the
//! old bytes with the new type, which a retried `put` repairs. Likewise two concurrent puts of
//! one key with different content types may pair one's bytes with the other's type; the bytes
//! themselves are always one put's, whole.

use std::fs::{self, File};
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;

use super::key::{validate_key, validate_prefix};
use super::{ListPage, ObjectBody, ObjectError, ObjectMeta, ObjectStore};

const OBJECTS: &str = "objects";
const META: &str = "meta";
const TMP: &str = "tmp";

/// Size of the chunks `get` streams.
const CHUNK: usize = 64 * 1024;

/// Temp files older than this when a store is opened are left over from a crash and removed.
const STALE_TMP: Duration = Duration::from_secs(3600);

/// An object store in a local directory.
#[derive(Debug, Clone)]
pub struct FileObjectStore {
    root: PathBuf,
}

impl FileObjectStore {
    /// Open (creating if needed) a store rooted at `root`.
    pub async fn open(root: impl AsRef<Path>) -> Result<Self, ObjectError> {
        let root = root.as_ref().to_path_buf();
        if root.as_os_str().is_empty() {
            return Err(ObjectError::InvalidUrl {
                url_redacted: "file://".into(),
                reason: "the file URL has no directory path".into(),
            });
        }
        let store = FileObjectStore { root };
        let this = store.clone();
        blocking("open", store.root.display().to_string(), move || {
            for sub in [OBJECTS, META, TMP] {
                let dir = this.root.join(sub);
                ensure_dir(&dir)?;
            }
            this.remove_stale_tmp();
            Ok(())
        })
        .await?;
        Ok(store)
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn object_path(&self, key: &str) -> PathBuf {
        self.root.join(OBJECTS).join(key)
    }

    fn meta_path(&self, key: &str) -> PathBuf {
        self.root.join(META).join(key)
    }

    fn remove_stale_tmp(&self) {
        let Ok(entries) = fs::read_dir(self.root.join(TMP)) else {
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

    /// Write `data` to `target` atomically and durably (see the module documentation).
    fn write_atomic(&self, target: &Path, data: &[u8]) -> io::Result<()> {
        let parent = target
            .parent()
            .ok_or_else(|| io::Error::new(ErrorKind::InvalidInput, "target has no parent"))?;
        ensure_dir(parent)?;
        let tmp = self
            .root
            .join(TMP)
            .join(uuid::Uuid::new_v4().simple().to_string());
        let written = (|| {
            let mut file = File::create_new(&tmp)?;
            file.write_all(data)?;
            file.sync_all()?;
            fs::rename(&tmp, target)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        sync_dir(parent)
    }

    /// Remove a file and make the removal durable; a missing file is fine.
    fn remove_durably(path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            Ok(()) => match path.parent() {
                Some(parent) => sync_dir(parent),
                None => Ok(()),
            },
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
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
        let mut walk = Walk {
            prefix,
            start_after,
            want: limit.saturating_add(1),
            found: Vec::new(),
        };
        walk.dir(&self.root.join(OBJECTS).join(dir_key), dir_key)?;
        let mut objects = walk.found;
        let next_start_after = if objects.len() > limit {
            objects.truncate(limit);
            objects.last().map(|m| m.key.clone())
        } else {
            None
        };
        Ok(ListPage {
            objects,
            next_start_after,
        })
    }
}

/// A depth-first walk that yields keys in byte order without sorting the whole tree: each
/// directory's entries are sorted with directories compared as `name/`, which is exactly where
/// their keys fall among their siblings'. Directories wholly outside the prefix or wholly at or
/// before `start_after` are skipped, and the walk stops once it has `want` keys.
struct Walk<'a> {
    prefix: &'a str,
    start_after: Option<&'a str>,
    want: usize,
    found: Vec<ObjectMeta>,
}

impl Walk<'_> {
    /// Returns `true` once enough keys were found.
    fn dir(&mut self, dir: &Path, dir_key: &str) -> io::Result<bool> {
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
                let overlaps_prefix = key.starts_with(self.prefix) || self.prefix.starts_with(&key);
                let all_before_start = self
                    .start_after
                    .is_some_and(|sa| key.as_str() < sa && !sa.starts_with(&key));
                if overlaps_prefix && !all_before_start && self.dir(&path, &key)? {
                    return Ok(true);
                }
                continue;
            }
            if !key.starts_with(self.prefix)
                || self.start_after.is_some_and(|sa| key.as_str() <= sa)
                || validate_key(&key).is_err()
            {
                continue;
            }
            let meta = match fs::metadata(&path) {
                Ok(meta) => meta,
                Err(e) if e.kind() == ErrorKind::NotFound => continue, // deleted meanwhile
                Err(e) => return Err(e),
            };
            self.found.push(ObjectMeta {
                key,
                size: meta.len(),
                content_type: None,
                last_modified: meta.modified().ok().map(time::OffsetDateTime::from),
            });
            if self.found.len() >= self.want {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Create `dir` and any missing ancestors, `fsync`ing the parent of each one so that the new
/// directory entries survive a crash.
fn ensure_dir(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut cur = dir;
    while !cur.is_dir() {
        missing.push(cur);
        match cur.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => cur = parent,
            _ => break,
        }
    }
    for d in missing.into_iter().rev() {
        match fs::create_dir(d) {
            Ok(()) => {}
            // Created concurrently; we still sync its parent below before relying on it.
            Err(e) if e.kind() == ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => return Err(e),
        }
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Read the stored content type, if any.
async fn read_content_type(path: &Path) -> io::Result<Option<String>> {
    match tokio::fs::read_to_string(path).await {
        Ok(s) => Ok(Some(s)),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Ok(None),
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

fn io_error(op: &'static str, target: &str, e: io::Error) -> ObjectError {
    match e.kind() {
        ErrorKind::TimedOut | ErrorKind::Interrupted | ErrorKind::WouldBlock => {
            ObjectError::unavailable(op, target, e)
        }
        _ => ObjectError::backend(op, target, e),
    }
}

/// Run blocking file system work off the async threads.
async fn blocking<T, F>(op: &'static str, target: String, f: F) -> Result<T, ObjectError>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(io_error(op, &target, e)),
        Err(join) => Err(ObjectError::backend(op, target, join)),
    }
}

#[async_trait]
impl ObjectStore for FileObjectStore {
    #[tracing::instrument(skip_all, fields(key = %key, size = body.len()))]
    async fn put(&self, key: &str, body: Bytes, content_type: &str) -> Result<(), ObjectError> {
        validate_key(key)?;
        let this = self.clone();
        let object = self.object_path(key);
        let meta = self.meta_path(key);
        let content_type = content_type.to_owned();
        blocking("put", key.to_owned(), move || {
            if content_type.is_empty() {
                FileObjectStore::remove_durably(&meta)?;
            } else {
                this.write_atomic(&meta, content_type.as_bytes())?;
            }
            this.write_atomic(&object, &body)
        })
        .await
    }

    #[tracing::instrument(skip_all, fields(key = %key))]
    async fn get(&self, key: &str) -> Result<ObjectBody, ObjectError> {
        validate_key(key)?;
        let err = |e| io_error("get", key, e);
        let not_found = || ObjectError::NotFound {
            key: key.to_owned(),
        };
        let file = match tokio::fs::File::open(self.object_path(key)).await {
            Ok(file) => file,
            Err(e) if is_missing(&e) => return Err(not_found()),
            Err(e) => return Err(err(e)),
        };
        // Size and time come from the open file, so they describe the bytes we stream even if
        // a concurrent put renames a new version into place.
        let stat = file.metadata().await.map_err(err)?;
        if stat.is_dir() {
            return Err(not_found());
        }
        let content_type = read_content_type(&self.meta_path(key)).await.map_err(err)?;
        let meta = ObjectMeta {
            key: key.to_owned(),
            size: stat.len(),
            content_type,
            last_modified: stat.modified().ok().map(time::OffsetDateTime::from),
        };
        let owned_key = key.to_owned();
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

    #[tracing::instrument(skip_all, fields(key = %key))]
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, ObjectError> {
        validate_key(key)?;
        let err = |e| io_error("head", key, e);
        let stat = match tokio::fs::metadata(self.object_path(key)).await {
            Ok(stat) if stat.is_file() => stat,
            Ok(_) => return Ok(None),
            Err(e) if is_missing(&e) => return Ok(None),
            Err(e) => return Err(err(e)),
        };
        let content_type = read_content_type(&self.meta_path(key)).await.map_err(err)?;
        Ok(Some(ObjectMeta {
            key: key.to_owned(),
            size: stat.len(),
            content_type,
            last_modified: stat.modified().ok().map(time::OffsetDateTime::from),
        }))
    }

    #[tracing::instrument(skip_all, fields(prefix = %prefix, start_after = ?start_after, limit = limit))]
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
        let limit = limit.max(1);
        blocking("list", prefix.clone(), move || {
            this.list_blocking(&prefix, start_after.as_deref(), limit)
        })
        .await
    }

    #[tracing::instrument(skip_all, fields(key = %key))]
    async fn delete(&self, key: &str) -> Result<(), ObjectError> {
        validate_key(key)?;
        let object = self.object_path(key);
        let meta = self.meta_path(key);
        blocking("delete", key.to_owned(), move || {
            match fs::symlink_metadata(&object) {
                Ok(stat) if stat.is_dir() => return Ok(()), // only deeper keys live here
                Ok(_) => FileObjectStore::remove_durably(&object)?,
                Err(e) if is_missing(&e) => {}
                Err(e) => return Err(e),
            }
            match FileObjectStore::remove_durably(&meta) {
                Err(e) if is_missing(&e) => Ok(()),
                other => other,
            }
        })
        .await
    }

    #[tracing::instrument(skip_all)]
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
