//! `noema backup` / `noema restore` for the embedded default (SQLite + local files).
//!
//! A backup is a directory: a consistent snapshot of each service database (`VACUUM INTO`,
//! taken while Noema runs), a copy of the object tree, the owner token, and
//! `manifest.json` with the size and SHA-256 of every file. Databases are snapshotted
//! *before* objects are copied: objects are written before the rows that name them and
//! never deleted, so every row in a snapshot finds its bytes in the copy. Objects written
//! while the backup runs may come along without a row — orphans, which reconcile lists and
//! which harm nothing.
//!
//! Restore checks the whole manifest first, then copies into a data directory that must be
//! empty or absent: it never merges into, or overwrites, live data.
//!
//! What is backed up comes from the service registry: every registered service's database
//! (`databases/<service>.db`) and every object store (in the directory its spec names: the
//! ledger's is `objects/`). A service's object store is either a pack store (`pack://`, the
//! default) or a file store (`file://`, what earlier versions made for the ledger). A pack store's backup is a copy of its segment
//! files: segments only grow, so a copy taken while Noema appends is a valid store whose last
//! record may be cut short, which the store skips on open (that record is at most an orphan:
//! the database snapshots were taken first), and the store's compaction removes no segment
//! while the copy holds them. The store's index is not copied; the restored store rebuilds
//! it from the segments on its first open. Restore puts the objects back into the kind of
//! store they came from.
//!
//! Content types: the file object store keeps an object's content type in an extended
//! attribute of its file (`user.noema.content_type`), which a file-by-file copy would drop. A
//! backup writes each one as the store's `meta/<key>` file instead (the form earlier versions
//! wrote and that every version reads; it replaces a stale `meta/<key>` the attribute
//! overrides). So a backup is plain files: the manifest's SHA-256s cover the content types
//! too, and they survive tools and file systems that drop extended attributes. Restore copies
//! those files back as they are, and the store reads the types from them.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use noema_runtime::{NoemaConfig, Registry};
use noema_store::object::PackObjectStore;
use noema_store::{Database, DbOptions};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub const MANIFEST: &str = "manifest.json";
const FORMAT: u32 = 1;
const DATABASES: &str = "databases";
const OWNER_TOKEN: &str = "owner.token";
/// The file object store's directory of in-flight writes: never part of a backup.
const STORE_TMP: &str = "tmp";
/// The file object store's directories of object files and of content type files.
const STORE_OBJECTS: &str = "objects";
const STORE_META: &str = "meta";
/// The pack object store's directory of segments (its lock file is never part of a backup).
const STORE_SEGMENTS: &str = "segments";

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(
        "{setting} is a {scheme} URL: noema backup/restore cover the embedded default (sqlite://, \
         pack:// and file://); back up Postgres with pg_dump and S3 with bucket versioning \
         (docs/deploy.md)"
    )]
    NotEmbedded { setting: String, scheme: String },
    #[error(
        "the backup holds a {backup} object store but {service}.object_store_url is a \
         {configured} URL: restore with a configuration whose {service}.object_store_url is a \
         {backup} URL, or unset (the default)"
    )]
    StoreKindMismatch {
        service: &'static str,
        backup: StoreKind,
        configured: StoreKind,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{service} database: {source}")]
    Database {
        service: &'static str,
        source: noema_store::DbError,
    },
    #[error("{0} has no database: is it the data directory of a Noema that has started?")]
    NoDatabase(PathBuf),
    #[error("{0} exists and is not empty: back up into a new directory")]
    OutputNotEmpty(PathBuf),
    #[error("{0} exists and is not empty: restore only into an empty or new data directory")]
    TargetNotEmpty(PathBuf),
    #[error("{path}: {reason}")]
    Manifest { path: PathBuf, reason: String },
    #[error("the backup is damaged: {path}: {reason}")]
    Damaged { path: String, reason: String },
    #[error("a backup task failed: {0}")]
    Task(String),
}

/// What `manifest.json` records.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    pub noema_version: String,
    /// Unix seconds when the snapshot was taken.
    pub created_unix: u64,
    pub files: Vec<FileEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Relative to the backup directory, `/`-separated.
    pub path: String,
    pub size: u64,
    /// Lowercase hex.
    pub sha256: String,
}

/// Which kind of local object store a service's objects are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// `pack://`: append-only segments.
    Pack,
    /// `file://`: a file per object.
    File,
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoreKind::Pack => "pack://",
            StoreKind::File => "file://",
        })
    }
}

impl StoreKind {
    /// The kind of store the backup's files under `backup_dir/` come from, or `None` if it
    /// holds none there.
    fn of_backup(manifest: &Manifest, backup_dir: &str) -> Option<StoreKind> {
        manifest.files.iter().find_map(|f| {
            let relative = f.path.strip_prefix(&format!("{backup_dir}/"))?;
            Some(if relative.starts_with(&format!("{STORE_SEGMENTS}/")) {
                StoreKind::Pack
            } else {
                StoreKind::File
            })
        })
    }
}

/// Where the embedded default keeps its files, from the registry and the configuration.
struct Layout {
    databases: Vec<(&'static str, PathBuf)>,
    stores: Vec<StoreLayout>,
    owner_token: PathBuf,
}

/// One service's object store.
#[derive(Clone)]
struct StoreLayout {
    service: &'static str,
    path: PathBuf,
    kind: StoreKind,
    /// Its directory in a backup.
    backup_dir: &'static str,
    /// Set by configuration (rather than the embedded default).
    configured: bool,
    /// Where the default puts a pack store, and a file store if the service ever had one.
    default_pack: PathBuf,
    default_file: Option<PathBuf>,
}

impl StoreLayout {
    /// Where objects of a `kind` store go back: where the store is if it is of that kind,
    /// else where the default puts that kind, unless a store is configured, which must then
    /// be of that kind.
    fn restore_path(&self, kind: StoreKind) -> Result<PathBuf, BackupError> {
        let mismatch = || BackupError::StoreKindMismatch {
            service: self.service,
            backup: kind,
            configured: self.kind,
        };
        if kind == self.kind {
            return Ok(self.path.clone());
        }
        if self.configured {
            return Err(mismatch());
        }
        match kind {
            StoreKind::Pack => Ok(self.default_pack.clone()),
            StoreKind::File => self.default_file.clone().ok_or_else(mismatch),
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn layout(registry: &Registry, config: &NoemaConfig) -> Result<Layout, BackupError> {
    let mut databases = Vec::new();
    let mut stores = Vec::new();
    for spec in registry.services() {
        let url = config.database_url(spec);
        let path = url
            .strip_prefix("sqlite://")
            .map(|rest| rest.split('?').next().unwrap_or(rest))
            .filter(|p| !p.is_empty())
            .ok_or_else(|| BackupError::NotEmbedded {
                setting: format!("{}.database_url", spec.name),
                scheme: scheme(&url),
            })?;
        databases.push((spec.name, PathBuf::from(path)));
        let (Some(store), Some(url)) = (&spec.object_store, config.object_store_url(spec)) else {
            continue;
        };
        let (kind, path) = [("pack://", StoreKind::Pack), ("file://", StoreKind::File)]
            .into_iter()
            .find_map(|(prefix, kind)| {
                let path = url.strip_prefix(prefix).filter(|p| !p.is_empty())?;
                Some((kind, PathBuf::from(path)))
            })
            .ok_or_else(|| BackupError::NotEmbedded {
                setting: format!("{}.object_store_url", spec.name),
                scheme: scheme(&url),
            })?;
        let data_dir = &config.server.data_dir;
        stores.push(StoreLayout {
            service: spec.name,
            path,
            kind,
            backup_dir: store.backup_dir,
            configured: config.object_store_configured(spec),
            default_pack: data_dir.join(store.default_dir),
            default_file: store.legacy_file_dir.map(|dir| data_dir.join(dir)),
        });
    }
    Ok(Layout {
        databases,
        stores,
        owner_token: config.owner_token_path(),
    })
}

/// Only the scheme of a URL goes into messages: the rest may hold a password.
fn scheme(url: &str) -> String {
    url.split_once(':')
        .map_or_else(|| "non-URL".to_owned(), |(s, _)| format!("{s}:"))
}

fn is_empty_dir(path: &Path) -> Result<bool, BackupError> {
    match std::fs::read_dir(path) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(err) => Err(io_err(path)(err)),
    }
}

/// Copies `from` to the new file `to` (mode `mode`), fsyncs it, and returns its entry.
fn copy_hashed(from: &Path, to: &Path, mode: u32, name: &str) -> Result<FileEntry, BackupError> {
    let input = std::fs::File::open(from).map_err(io_err(from))?;
    copy_open_hashed(input, from, to, mode, name)
}

/// Creates the new file `to` (mode `mode`) and its missing parent directories.
fn create_output(to: &Path, mode: u32) -> Result<std::fs::File, BackupError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(to)
        .map_err(io_err(to))
}

/// [`copy_hashed`] from the already open `input` (which is `from`).
fn copy_open_hashed(
    mut input: std::fs::File,
    from: &Path,
    to: &Path,
    mode: u32,
    name: &str,
) -> Result<FileEntry, BackupError> {
    let mut output = create_output(to, mode)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = input.read(&mut buffer).map_err(io_err(from))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        output.write_all(&buffer[..n]).map_err(io_err(to))?;
        size += n as u64;
    }
    output.sync_all().map_err(io_err(to))?;
    Ok(FileEntry {
        path: name.to_owned(),
        size,
        sha256: hex(&hasher.finalize()),
    })
}

/// Writes `data` to the new file `to` (mode `mode`), fsyncs it, and returns its entry.
fn write_hashed(data: &[u8], to: &Path, mode: u32, name: &str) -> Result<FileEntry, BackupError> {
    let mut output = create_output(to, mode)?;
    output.write_all(data).map_err(io_err(to))?;
    output.sync_all().map_err(io_err(to))?;
    Ok(FileEntry {
        path: name.to_owned(),
        size: data.len() as u64,
        sha256: hex(&Sha256::digest(data)),
    })
}

/// Copies the file object store rooted at `store` into `out/<dir>/`, each content type kept
/// in an object file's attribute as a `meta/<key>` file (see the module documentation).
fn copy_object_store(store: &Path, out: &Path, dir: &str) -> Result<Vec<FileEntry>, BackupError> {
    let mut copied = Vec::new();
    let files = walk(store)?;
    let object_prefix = format!("{STORE_OBJECTS}/");
    let meta_prefix = format!("{STORE_META}/");
    // Object files first: they say which meta files their attributes override.
    let (objects, others): (Vec<&String>, Vec<&String>) = files
        .iter()
        .partition(|relative| relative.starts_with(&object_prefix));
    let mut content_types = std::collections::BTreeMap::new();
    for relative in objects {
        let from = store.join(relative);
        let input = std::fs::File::open(&from).map_err(io_err(&from))?;
        let content_type =
            noema_store::object::file::read_content_type_xattr(&input).map_err(io_err(&from))?;
        let name = format!("{dir}/{relative}");
        copied.push(copy_open_hashed(
            input,
            &from,
            &out.join(&name),
            0o600,
            &name,
        )?);
        if let (Some(key), Some(content_type)) =
            (relative.strip_prefix(&object_prefix), content_type)
        {
            content_types.insert(format!("{meta_prefix}{key}"), content_type);
        }
    }
    for relative in others {
        if content_types.contains_key(relative.as_str()) {
            continue; // overridden by the object's attribute: written below
        }
        let name = format!("{dir}/{relative}");
        copied.push(copy_hashed(
            &store.join(relative),
            &out.join(&name),
            0o600,
            &name,
        )?);
    }
    for (relative, content_type) in content_types {
        let name = format!("{dir}/{relative}");
        copied.push(write_hashed(
            content_type.as_bytes(),
            &out.join(&name),
            0o600,
            &name,
        )?);
    }
    Ok(copied)
}

/// Copies the segments of the pack store rooted at `store` into `out/<dir>/segments/`. The
/// store's compaction removes no segment while the copy runs (it holds the segments); its
/// index is not copied: the restored store rebuilds it from the segments.
fn copy_pack_store(store: &Path, out: &Path, dir: &str) -> Result<Vec<FileEntry>, BackupError> {
    let segments_dir = store.join(STORE_SEGMENTS);
    let _hold = if segments_dir.is_dir() {
        Some(PackObjectStore::hold_segments(store).map_err(io_err(&segments_dir))?)
    } else {
        None
    };
    let segments = format!("{STORE_SEGMENTS}/");
    walk(store)?
        .into_iter()
        .filter(|relative| relative.starts_with(&segments))
        .map(|relative| {
            let name = format!("{dir}/{relative}");
            copy_hashed(&store.join(&relative), &out.join(&name), 0o600, &name)
        })
        .collect()
}

fn hash_file(path: &Path) -> Result<(u64, String), BackupError> {
    let mut input = std::fs::File::open(path).map_err(io_err(path))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = input.read(&mut buffer).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        size += n as u64;
    }
    Ok((size, hex(&hasher.finalize())))
}

fn hex(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(bytes)
}

/// Every regular file under `root`, as `/`-separated paths relative to it, skipping the
/// store's in-flight directory.
fn walk(root: &Path) -> Result<Vec<String>, BackupError> {
    let mut out = Vec::new();
    let mut pending = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound && prefix.is_empty() => {
                return Ok(out);
            }
            Err(err) => return Err(io_err(&dir)(err)),
        };
        for entry in entries {
            let entry = entry.map_err(io_err(&dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let kind = entry.file_type().map_err(io_err(&entry.path()))?;
            if kind.is_dir() {
                if !(prefix.is_empty() && name == STORE_TMP) {
                    pending.push((entry.path(), relative));
                }
            } else if kind.is_file() {
                out.push(relative);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn fsync_dir(path: &Path) -> Result<(), BackupError> {
    std::fs::File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(io_err(path))
}

/// Every directory above `files`, deepest first: the order in which to `fsync` them so the
/// entries of the files, and of any directories created for them, survive a crash.
fn directories_above<'a>(files: impl IntoIterator<Item = &'a Path>) -> Vec<PathBuf> {
    let mut dirs = std::collections::BTreeSet::new();
    for file in files {
        dirs.extend(
            file.ancestors()
                .skip(1)
                .filter(|dir| !dir.as_os_str().is_empty())
                .map(Path::to_path_buf),
        );
    }
    let mut dirs: Vec<PathBuf> = dirs.into_iter().collect();
    dirs.sort_by_key(|dir| std::cmp::Reverse(dir.components().count()));
    dirs
}

/// Makes the entries of `files` (already `fsync`ed themselves) durable.
fn fsync_directories_above<'a>(
    files: impl IntoIterator<Item = &'a Path>,
) -> Result<(), BackupError> {
    directories_above(files)
        .iter()
        .try_for_each(|dir| fsync_dir(dir))
}

/// Writes a backup of the embedded default described by `config` into `out` (new or
/// empty), while Noema may be running. Returns the manifest written.
pub async fn backup(
    registry: &Registry,
    config: &NoemaConfig,
    out: &Path,
) -> Result<Manifest, BackupError> {
    use std::os::unix::fs::DirBuilderExt as _;
    let layout = layout(registry, config)?;
    for (_, path) in &layout.databases {
        if !path.is_file() {
            return Err(BackupError::NoDatabase(path.clone()));
        }
    }
    if !is_empty_dir(out)? {
        return Err(BackupError::OutputNotEmpty(out.to_path_buf()));
    }
    // The backup holds the owner token and every object: owner-only, like the data dir.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(out.join(DATABASES))
        .map_err(io_err(out))?;
    let created_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());

    let mut files = Vec::new();
    for (service, path) in &layout.databases {
        let service = *service;
        let name = format!("{DATABASES}/{service}.db");
        let dest = out.join(&name);
        let url = format!("sqlite://{}", path.display());
        let options = DbOptions {
            max_connections: 1,
            ..DbOptions::default()
        };
        let db = Database::connect_with(&url, &options)
            .await
            .map_err(|source| BackupError::Database { service, source })?;
        let snapshot = db.snapshot_into(&dest).await;
        db.close().await;
        snapshot.map_err(|source| BackupError::Database { service, source })?;
        let (size, sha256) = blocking(move || hash_file(&dest)).await?;
        files.push(FileEntry {
            path: name,
            size,
            sha256,
        });
    }
    let (stores, token, out_dir) = (
        layout.stores.clone(),
        layout.owner_token.clone(),
        out.to_path_buf(),
    );
    let mut copied = blocking(move || {
        let mut copied = Vec::new();
        for store in &stores {
            copied.extend(match store.kind {
                StoreKind::Pack => copy_pack_store(&store.path, &out_dir, store.backup_dir)?,
                StoreKind::File => copy_object_store(&store.path, &out_dir, store.backup_dir)?,
            });
        }
        if token.is_file() {
            copied.push(copy_hashed(
                &token,
                &out_dir.join(OWNER_TOKEN),
                0o600,
                OWNER_TOKEN,
            )?);
        }
        Ok(copied)
    })
    .await?;
    files.append(&mut copied);
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let manifest = Manifest {
        format: FORMAT,
        noema_version: env!("CARGO_PKG_VERSION").to_owned(),
        created_unix,
        files,
    };
    let text = serde_json::to_vec_pretty(&manifest).map_err(|e| BackupError::Manifest {
        path: out.join(MANIFEST),
        reason: e.to_string(),
    })?;
    let out_dir = out.to_path_buf();
    let written: Vec<PathBuf> = manifest.files.iter().map(|f| out.join(&f.path)).collect();
    blocking(move || {
        // Snapshots are written by SQLite; make them durable like the copied files, then
        // every directory entry on the way to them.
        for path in written
            .iter()
            .filter(|p| p.starts_with(out_dir.join(DATABASES)))
        {
            std::fs::File::open(path)
                .and_then(|f| f.sync_all())
                .map_err(io_err(path))?;
        }
        fsync_directories_above(written.iter().map(PathBuf::as_path))?;
        // The manifest last: a backup without one is visibly incomplete.
        let path = out_dir.join(MANIFEST);
        let mut file = std::fs::File::create_new(&path).map_err(io_err(&path))?;
        file.write_all(&text).map_err(io_err(&path))?;
        file.sync_all().map_err(io_err(&path))?;
        fsync_dir(&out_dir)
    })
    .await?;
    Ok(manifest)
}

/// A manifest path that stays inside the backup: relative, no `..`.
fn safe_relative(path: &str) -> Option<PathBuf> {
    let candidate = Path::new(path);
    candidate
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| candidate.to_path_buf())
}

/// Reads `from`'s manifest and checks every file it lists (size and SHA-256).
pub fn verify(from: &Path) -> Result<Manifest, BackupError> {
    let path = from.join(MANIFEST);
    let text = std::fs::read(&path).map_err(io_err(&path))?;
    let manifest: Manifest = serde_json::from_slice(&text).map_err(|e| BackupError::Manifest {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if manifest.format != FORMAT {
        return Err(BackupError::Manifest {
            path,
            reason: format!(
                "format {} is not supported (this noema reads {FORMAT})",
                manifest.format
            ),
        });
    }
    for entry in &manifest.files {
        let damaged = |reason: String| BackupError::Damaged {
            path: entry.path.clone(),
            reason,
        };
        let relative = safe_relative(&entry.path)
            .ok_or_else(|| damaged("the path leaves the backup directory".into()))?;
        let (size, sha256) = hash_file(&from.join(relative))?;
        if size != entry.size || sha256 != entry.sha256 {
            return Err(damaged(format!(
                "expected {} bytes with sha256 {}, found {size} bytes with sha256 {sha256}",
                entry.size, entry.sha256
            )));
        }
    }
    Ok(manifest)
}

/// Restores the backup in `from` into the embedded default described by `config`, whose
/// data directory must be empty or absent. Everything is verified before anything is
/// written.
pub async fn restore(
    registry: &Registry,
    config: &NoemaConfig,
    from: &Path,
) -> Result<Manifest, BackupError> {
    let layout = layout(registry, config)?;
    let data_dir = config.server.data_dir.clone();
    let from = from.to_path_buf();
    blocking(move || {
        let manifest = verify(&from)?;
        // Each service's objects go back into the kind of store they came from.
        let mut objects: Vec<(&'static str, PathBuf)> = Vec::new();
        for store in &layout.stores {
            let path = match StoreKind::of_backup(&manifest, store.backup_dir) {
                None => store.path.clone(),
                Some(kind) => store.restore_path(kind)?,
            };
            objects.push((store.backup_dir, path));
        }
        for target in layout
            .databases
            .iter()
            .map(|(_, p)| p)
            .chain(objects.iter().map(|(_, p)| p))
            .chain([&layout.owner_token, &data_dir])
        {
            let occupied = if target.is_dir() {
                !is_empty_dir(target)?
            } else {
                target.exists()
            };
            if occupied {
                return Err(BackupError::TargetNotEmpty(target.clone()));
            }
        }
        std::fs::create_dir_all(&data_dir).map_err(io_err(&data_dir))?;
        let mut restored = Vec::with_capacity(manifest.files.len());
        for entry in &manifest.files {
            let source = from.join(safe_relative(&entry.path).unwrap_or_default());
            let dest = if let Some(service) = entry
                .path
                .strip_prefix(&format!("{DATABASES}/"))
                .and_then(|n| n.strip_suffix(".db"))
            {
                match layout.databases.iter().find(|(name, _)| *name == service) {
                    Some((_, path)) => path.clone(),
                    None => {
                        return Err(BackupError::Damaged {
                            path: entry.path.clone(),
                            reason: "no such service".into(),
                        });
                    }
                }
            } else if let Some((dir, relative)) = objects.iter().find_map(|(dir, path)| {
                let relative = entry.path.strip_prefix(&format!("{dir}/"))?;
                Some((path, relative))
            }) {
                dir.join(relative)
            } else if entry.path == OWNER_TOKEN {
                layout.owner_token.clone()
            } else {
                return Err(BackupError::Damaged {
                    path: entry.path.clone(),
                    reason: "not a file a backup holds".into(),
                });
            };
            let copied = copy_hashed(&source, &dest, 0o600, &entry.path)?;
            // Verified above; checked again because the backup could change underneath.
            if copied.sha256 != entry.sha256 {
                return Err(BackupError::Damaged {
                    path: entry.path.clone(),
                    reason: "changed while it was being restored".into(),
                });
            }
            restored.push(dest);
        }
        fsync_directories_above(restored.iter().map(PathBuf::as_path))?;
        fsync_dir(&data_dir)?;
        Ok(manifest)
    })
    .await
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, BackupError> + Send + 'static,
) -> Result<T, BackupError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| BackupError::Task(e.to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_synced_deepest_first_and_once() {
        let files = [
            Path::new("/b/objects/canonical/x/1.json"),
            Path::new("/b/objects/canonical/x/2.json"),
            Path::new("/b/databases/ledger.db"),
        ];
        let dirs = directories_above(files);
        let expect = |p: &str| dirs.iter().position(|d| d == Path::new(p));
        for dir in [
            "/b/objects/canonical/x",
            "/b/objects/canonical",
            "/b/objects",
            "/b/databases",
            "/b",
            "/",
        ] {
            assert!(expect(dir).is_some(), "{dir} missing from {dirs:?}");
        }
        assert_eq!(dirs.len(), 6, "each directory once: {dirs:?}");
        assert!(expect("/b/objects/canonical/x") < expect("/b/objects"));
        assert!(expect("/b/objects") < expect("/b"));
        assert!(expect("/b/databases") < expect("/b"));
        assert_eq!(dirs.last().map(PathBuf::as_path), Some(Path::new("/")));
    }
}
