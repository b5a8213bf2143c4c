//! Object storage chosen by URL: `file://` (local directory, a file per object), `pack://`
//! (local directory, append-only segments), `s3://` (any S3-compatible service, an S3 object
//! per object) or `s3+pack://` (objects written together into packs in S3, indexed in the
//! service's database), plus a
//! fault-injecting wrapper for durability tests and a conformance suite that every backend must
//! pass.
//!
//! Semantics shared by all backends (the conformance suite checks them):
//! - `put` is durable when it returns `Ok`. Putting an existing key replaces it whole: the last
//!   completed `put` wins and readers see either the old or the new object, never a mix.
//! - `get`/`head` of a missing key: `NotFound` / `None`. `delete` of a missing key: `Ok`.
//! - `list` returns keys in lexicographic byte order, by plain string prefix (`a/b` matches
//!   `a/b/c` and `a/bc`); every backend pages through one [`page::PageBuilder`], so the
//!   cursor rule is the same everywhere. `ObjectMeta::content_type` is `None` in listings (S3 does not return it
//!   there); use `head` for it.
//! - Keys follow the rules of [`key`]; a bad key is refused before any I/O, identically on every
//!   backend.
//! - A store sends each `put` once; retrying a write is the caller's, through the one policy
//!   in [`retry`].

pub mod conformance;
mod error;
pub mod faulty;
pub mod file;
pub mod key;
mod local;
pub mod pack;
mod page;
pub mod retry;
pub mod s3;
pub mod s3_pack;

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};

pub use error::{ACCEPTED_OBJECT_STORE_URLS, BoxError, ObjectError};
pub use faulty::FaultyObjectStore;
pub use file::{ContentTypeStorage, FileObjectStore, FileStoreOptions};
pub use pack::{CompactionReport, PackObjectStore, PackStoreOptions};
pub use retry::WriteRetry;
pub use s3::S3ObjectStore;
pub use s3_pack::S3PackObjectStore;

use crate::redact::redact_url;

/// The body of an object, as a stream of chunks.
pub type ByteChunks = Pin<Box<dyn Stream<Item = Result<Bytes, ObjectError>> + Send>>;

/// What is known about a stored object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub key: String,
    pub size: u64,
    pub content_type: Option<String>,
    pub last_modified: Option<time::OffsetDateTime>,
}

/// An object being read: its metadata and its bytes, streamed.
pub struct ObjectBody {
    pub meta: ObjectMeta,
    pub stream: ByteChunks,
}

impl std::fmt::Debug for ObjectBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectBody")
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

/// Largest buffer [`ObjectBody::bytes`] reserves up front, whatever size the metadata claims.
const MAX_PREALLOC: u64 = 16 * 1024 * 1024;

impl ObjectBody {
    /// Read the whole body into memory.
    pub async fn bytes(mut self) -> Result<Bytes, ObjectError> {
        let capacity = usize::try_from(self.meta.size.min(MAX_PREALLOC)).unwrap_or_default();
        let mut buf = BytesMut::with_capacity(capacity);
        while let Some(chunk) = self.stream.next().await {
            buf.extend_from_slice(&chunk?);
        }
        Ok(buf.freeze())
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListPage {
    /// At most `limit` objects, in lexicographic byte order of their keys.
    pub objects: Vec<ObjectMeta>,
    /// `Some(last key of this page)` when more objects may follow: pass it as `start_after` to
    /// get the next page. `None` when the listing is complete.
    pub next_start_after: Option<String>,
}

/// What [`ObjectStore::put_if_absent`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The object was stored.
    Created,
    /// An object was there already; nothing was written.
    Exists,
}

/// A place to keep immutable blobs by key. See the module documentation for the semantics
/// every implementation shares.
#[async_trait]
pub trait ObjectStore: Send + Sync + std::fmt::Debug {
    /// Store `body` under `key`, replacing any object there. Durable when it returns `Ok`.
    /// An empty `content_type` stores none: file:// then reports `None`, S3 its own default
    /// (usually `binary/octet-stream`).
    async fn put(&self, key: &str, body: Bytes, content_type: &str) -> Result<(), ObjectError>;

    /// Store `body` under `key` unless an object is there already, in one call: durable
    /// when it returns `Created`. Atomic on `pack://`, `s3+pack://` and S3 (a conditional
    /// write, `If-None-Match: *`; a server that answers it 501 gets a `head` and a `put`, one
    /// that ignores the header overwrites); on `file://` a [`head_then_put`], so two racing
    /// writers of one key may both be told `Created`, harmless for content-addressed keys
    /// (the same bytes). No default: a wrapper that forgot to pass it on would silently
    /// turn every conditional write into two calls.
    async fn put_if_absent(
        &self,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<PutOutcome, ObjectError>;

    /// Read an object; `NotFound` if there is none.
    async fn get(&self, key: &str) -> Result<ObjectBody, ObjectError>;

    /// An object's metadata, or `None` if there is none.
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, ObjectError>;

    /// Keys starting with `prefix` and greater than `start_after`, in byte order, at most
    /// `limit` of them (a `limit` of 0 is treated as 1).
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListPage, ObjectError>;

    /// Remove an object. Removing a missing object succeeds.
    async fn delete(&self, key: &str) -> Result<(), ObjectError>;

    /// Readiness: can this store be used right now?
    async fn check(&self) -> Result<(), ObjectError>;
}

/// `put_if_absent` for a store without an atomic form: a `head`, then a `put` when the key
/// is free.
pub async fn head_then_put<S: ObjectStore + ?Sized>(
    store: &S,
    key: &str,
    body: Bytes,
    content_type: &str,
) -> Result<PutOutcome, ObjectError> {
    if store.head(key).await?.is_some() {
        return Ok(PutOutcome::Exists);
    }
    store.put(key, body, content_type).await?;
    Ok(PutOutcome::Created)
}

/// Open the object store named by `url`:
///
/// - `file:///abs/dir` or `file://relative/dir`: a [`FileObjectStore`] rooted there (created if
///   missing): one file per object.
/// - `pack:///abs/dir` or `pack://relative/dir`: a [`PackObjectStore`] rooted there (created if
///   missing): objects appended to segment files, for many small write-once objects.
/// - `s3://bucket[/prefix][?endpoint=…&region=…&force_path_style=…&create_bucket=…]`: an
///   [`S3ObjectStore`]; see [`s3::S3Location`] for the parameters.
///
/// `s3+pack://` needs a database for its index: [`open_with_database`].
#[tracing::instrument(skip_all, fields(url = %redact_url(url).text))]
pub async fn open(url: &str) -> Result<Arc<dyn ObjectStore>, ObjectError> {
    // A local store's URL errors name the whole URL, not just its path.
    let with_url = |e: ObjectError| match e {
        ObjectError::InvalidUrl { reason, .. } => ObjectError::InvalidUrl {
            url_redacted: redact_url(url).text,
            reason,
        },
        other => other,
    };
    if let Some(path) = url.strip_prefix("file://") {
        let store = FileObjectStore::open(path).await.map_err(with_url)?;
        return Ok(Arc::new(store));
    }
    if let Some(path) = url.strip_prefix("pack://") {
        let store = PackObjectStore::open(path).await.map_err(with_url)?;
        return Ok(Arc::new(store));
    }
    if url.starts_with("s3://") {
        return Ok(Arc::new(S3ObjectStore::open(url).await?));
    }
    if url.starts_with(s3_pack::SCHEME) {
        return Err(ObjectError::InvalidUrl {
            url_redacted: redact_url(url).text,
            reason: "an s3+pack:// store keeps its index in a service's database:                      it is a service's object_store_url, opened with that database"
                .into(),
        });
    }
    let reason = if url.is_empty() {
        "the URL is empty".to_owned()
    } else {
        match url.split_once(':') {
            Some((scheme, _)) if !scheme.is_empty() && !scheme.contains('/') => {
                format!("unsupported object store scheme `{scheme}`")
            }
            _ => "the URL has no scheme".to_owned(),
        }
    };
    Err(ObjectError::InvalidUrl {
        url_redacted: redact_url(url).text,
        reason,
    })
}

/// Open the object store named by `url` for a service whose database is `db`: what
/// [`open`] opens, and `s3+pack://bucket[/prefix][?…]` (the parameters of `s3://`), an
/// [`S3PackObjectStore`] with its index in `db`.
pub async fn open_with_database(
    url: &str,
    db: &crate::Database,
) -> Result<Arc<dyn ObjectStore>, ObjectError> {
    if url.starts_with(s3_pack::SCHEME) {
        return Ok(Arc::new(S3PackObjectStore::open(url, db.clone()).await?));
    }
    open(url).await
}
