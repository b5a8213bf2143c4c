//! `s3+pack://` object store: small objects written together into packs in an S3 bucket,
//! found through an index in the service's own database.
//!
//! An S3 request costs far more than a small object's bytes (on the server, and in the
//! client's signing and HTTP work): with one S3 object per key, the S3 server does most of a
//! write's work. Here the puts that arrive together go out as one S3 object (a pack, the
//! objects' bytes back to back) and one index transaction; a put returns once both are
//! durable. A read is an index lookup and a ranged GET.
//!
//! Layout: `<prefix>packs/<uuid>` in the bucket; the table `noema_pack_objects` (created on
//! open) maps each key to its pack, offset, size and content type. What is not in the index
//! is not in the store: a pack written by a batch whose index transaction failed is never
//! read. A pack left without keys (every key deleted or replaced) is deleted; a pack with
//! some keys left keeps the bytes of the others (no compaction: the services that write here
//! keep their objects).
//!
//! The URL is an `s3://` URL with the scheme `s3+pack` (same parameters, see
//! [`super::s3::S3Location`]); the store is opened by a service, with its database
//! ([`super::open_with_database`]).

mod batcher;
mod index;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::key::{validate_key, validate_prefix};
use super::page::PageBuilder;
use super::s3::{S3Location, S3ObjectStore};
use super::{ListPage, ObjectBody, ObjectError, ObjectMeta, ObjectStore, PutOutcome};
use crate::Database;
use crate::redact::redact_url;
use index::Index;

/// The scheme of a packed store's URL.
pub const SCHEME: &str = "s3+pack://";

/// Where every pack of a store lives, under its S3 prefix.
const PACKS_DIR: &str = "packs/";

/// What the pack writer shares with the store.
#[derive(Debug)]
struct Shared {
    s3: S3ObjectStore,
    index: Index,
}

impl Shared {
    /// Deletes `pack` when no key lives in it any more (best effort: a pack left behind is
    /// only unused bytes).
    async fn drop_if_unreferenced(&self, pack: &str) {
        match self.index.is_referenced(pack).await {
            Ok(false) => {
                if let Err(err) = self.s3.delete(pack).await {
                    tracing::warn!(%pack, error = %noema_core::ErrorChain(&err), "an unused pack could not be deleted");
                }
            }
            Ok(true) => {}
            Err(err) => {
                tracing::warn!(%pack, error = %noema_core::ErrorChain(&err), "could not tell whether a pack is unused")
            }
        }
    }
}

/// An object store of packs in S3, indexed in a database. See the module documentation.
#[derive(Debug, Clone)]
pub struct S3PackObjectStore {
    shared: Arc<Shared>,
    puts: mpsc::Sender<batcher::Pending>,
}

fn new_pack_name() -> String {
    format!("{PACKS_DIR}{}", uuid::Uuid::new_v4().simple())
}

fn now_ms() -> i64 {
    i64::try_from(time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000)
        .unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or_default()
}

fn to_time(ms: i64) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()
}

/// What a `get` or `head` of `key` reports, from where the index says it is.
fn object_meta(key: &str, at: index::Location) -> ObjectMeta {
    ObjectMeta {
        key: key.to_owned(),
        size: to_u64(at.size),
        content_type: at.content_type,
        last_modified: to_time(at.stored_at_ms),
    }
}

impl S3PackObjectStore {
    /// Opens the store named by an `s3+pack://` URL, its index in `db` (its table created
    /// there if missing).
    pub async fn open(url: &str, db: Database) -> Result<Self, ObjectError> {
        let rest = url
            .strip_prefix(SCHEME)
            .ok_or_else(|| ObjectError::InvalidUrl {
                url_redacted: redact_url(url).text,
                reason: format!("not an {SCHEME} URL"),
            })?;
        let location = S3Location::parse(&format!("s3://{rest}")).map_err(|e| match e {
            ObjectError::InvalidUrl { reason, .. } => ObjectError::InvalidUrl {
                url_redacted: redact_url(url).text,
                reason,
            },
            other => other,
        })?;
        let s3 = S3ObjectStore::connect(&location).await?;
        let index = Index::open(db, format!("{}/{}", location.bucket, location.prefix)).await?;
        let shared = Arc::new(Shared { s3, index });
        let (puts, queue) = batcher::queue();
        tokio::spawn(batcher::run(queue, Arc::clone(&shared)));
        Ok(S3PackObjectStore { shared, puts })
    }

    async fn enqueue(
        &self,
        key: &str,
        body: Bytes,
        content_type: &str,
        if_absent: bool,
    ) -> Result<PutOutcome, ObjectError> {
        validate_key(key)?;
        let stopped =
            || ObjectError::unavailable("put", key, "the packed store's writer has stopped");
        let (reply, answer) = oneshot::channel();
        self.puts
            .send(batcher::Pending {
                key: key.to_owned(),
                body,
                content_type: content_type.to_owned(),
                if_absent,
                reply,
            })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

#[async_trait]
impl ObjectStore for S3PackObjectStore {
    #[tracing::instrument(level = "debug", skip_all, fields(key = %key, size = body.len()))]
    async fn put(&self, key: &str, body: Bytes, content_type: &str) -> Result<(), ObjectError> {
        self.enqueue(key, body, content_type, false).await.map(drop)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key, size = body.len()))]
    async fn put_if_absent(
        &self,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<PutOutcome, ObjectError> {
        self.enqueue(key, body, content_type, true).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn get(&self, key: &str) -> Result<ObjectBody, ObjectError> {
        validate_key(key)?;
        // A pack is deleted once no key lives in it; a put that moved the key since the
        // lookup sends the reader to the new pack, so one more lookup settles it.
        for _ in 0..2 {
            let Some(at) = self.shared.index.locate(key).await? else {
                break;
            };
            let bytes = if at.size == 0 {
                Bytes::new()
            } else {
                match self
                    .shared
                    .s3
                    .get_range(&at.pack, to_u64(at.pack_offset), to_u64(at.size))
                    .await
                {
                    Ok(bytes) => bytes,
                    Err(err) if err.is_not_found() => continue,
                    Err(err) => return Err(err),
                }
            };
            let meta = object_meta(key, at);
            return Ok(ObjectBody {
                meta,
                stream: Box::pin(futures::stream::once(async move { Ok(bytes) })),
            });
        }
        Err(ObjectError::NotFound {
            key: key.to_owned(),
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(key = %key))]
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, ObjectError> {
        validate_key(key)?;
        Ok(self
            .shared
            .index
            .locate(key)
            .await?
            .map(|at| object_meta(key, at)))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(prefix = %prefix))]
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListPage, ObjectError> {
        validate_prefix(prefix)?;
        let mut page = PageBuilder::new(prefix, start_after, limit);
        let (from, inclusive) = match page.scan_from() {
            std::ops::Bound::Included(from) => (from, true),
            std::ops::Bound::Excluded(from) => (from, false),
            std::ops::Bound::Unbounded => ("", true),
        };
        for listed in self
            .shared
            .index
            .scan(from, inclusive, page.still_wanted())
            .await?
        {
            // Keys come in order: the first one past the prefix ends the listing.
            if !page.wants(&listed.key) {
                break;
            }
            let meta = ObjectMeta {
                key: listed.key,
                size: to_u64(listed.size),
                content_type: None,
                last_modified: to_time(listed.stored_at_ms),
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
        if let Some(pack) = self.shared.index.remove(key).await? {
            self.shared.drop_if_unreferenced(&pack).await;
        }
        Ok(())
    }

    async fn check(&self) -> Result<(), ObjectError> {
        self.shared.index.ping().await?;
        self.shared.s3.check().await
    }
}
