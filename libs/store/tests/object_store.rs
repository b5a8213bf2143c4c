//! Object stores: the conformance suite on file:// (always) and s3:// (NOEMA_TEST_S3_URL,
//! required: a missing backend fails loudly), file:// specifics, and the fault injector.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests: a panic is the failure report

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use noema_store::object::faulty::{InjectedFault, STICKY};
use noema_store::object::file::read_content_type_xattr;
use noema_store::object::{
    self, ContentTypeStorage, FaultyObjectStore, FileObjectStore, FileStoreOptions, ObjectError,
    ObjectStore, WriteRetry, conformance,
};

fn scratch(what: &str) -> String {
    format!("{what}-{}", uuid::Uuid::new_v4().simple())
}

fn s3_url() -> String {
    match std::env::var("NOEMA_TEST_S3_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "NOEMA_TEST_S3_URL is not set: the S3 tests need an S3-compatible server, e.g. \
             s3://noema-test?endpoint=http://127.0.0.1:5055&region=us-east-1&create_bucket=true \
             with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY set (scripts/test starts one and sets \
             them). A missing backend is a failure, never a skip."
        ),
    }
}

/// The env URL with its path (bucket prefix) and/or one query parameter replaced.
fn s3_url_with(path: Option<&str>, param: Option<(&str, &str)>) -> String {
    let mut url = url::Url::parse(&s3_url()).expect("NOEMA_TEST_S3_URL parses");
    if let Some(path) = path {
        url.set_path(path);
    }
    if let Some((name, value)) = param {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(k, _)| k != name)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let mut q = url.query_pairs_mut();
        q.clear();
        for (k, v) in &pairs {
            q.append_pair(k, v);
        }
        q.append_pair(name, value);
    }
    url.to_string()
}

async fn file_store() -> (tempfile::TempDir, Arc<dyn ObjectStore>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("file://{}", dir.path().display());
    let store = object::open(&url).await.expect("open file store");
    (dir, store)
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &std::path::Path) -> Vec<String> {
    fn walk(base: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A file store that keeps content types the given way. `Xattr` fails loudly where the
/// temp directory's file system has no user extended attributes.
async fn file_store_with(
    content_types: ContentTypeStorage,
) -> (tempfile::TempDir, FileObjectStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = FileStoreOptions {
        content_types: Some(content_types),
    };
    let store = FileObjectStore::open_with(dir.path(), options)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "open a file store keeping content types as {content_types:?} in {}: {e:?} \
                 (the xattr tests need a temp directory on a file system with user extended \
                 attributes, e.g. ext4, xfs, btrfs, tmpfs on Linux >= 6.6)",
                dir.path().display()
            )
        });
    assert_eq!(store.content_type_storage(), content_types);
    (dir, store)
}

/// The content type attribute of a file, if any.
fn xattr_of(path: &std::path::Path) -> Option<String> {
    read_content_type_xattr(&std::fs::File::open(path).expect("open")).expect("read xattr")
}

#[tokio::test]
async fn file_backend_conformance() {
    // The default: what `file://` URLs open (xattrs on the file systems tests run on).
    let (dir, store) = file_store().await;
    conformance::run_all(store, &scratch("conformance")).await;
    assert!(
        files_under(&dir.path().join("tmp")).is_empty(),
        "temp files left behind: {:?}",
        files_under(&dir.path().join("tmp"))
    );
}

#[tokio::test]
async fn file_backend_conformance_with_xattrs() {
    let (dir, store) = file_store_with(ContentTypeStorage::Xattr).await;
    conformance::run_all(Arc::new(store), &scratch("conformance")).await;
    assert!(files_under(&dir.path().join("tmp")).is_empty());
    assert!(
        files_under(&dir.path().join("meta")).is_empty(),
        "content types went to meta files: {:?}",
        files_under(&dir.path().join("meta"))
    );
}

#[tokio::test]
async fn file_backend_conformance_with_meta_files() {
    let (dir, store) = file_store_with(ContentTypeStorage::MetaFiles).await;
    conformance::run_all(Arc::new(store), &scratch("conformance")).await;
    assert!(files_under(&dir.path().join("tmp")).is_empty());
}

#[tokio::test]
async fn s3_backend_conformance() {
    let store = object::open(&s3_url()).await.expect("open s3 store");
    conformance::run_all(store, &scratch("conformance")).await;
}

#[tokio::test]
async fn s3_prefix_is_prepended_and_stripped() {
    let prefix = scratch("prefixed");
    let prefixed = object::open(&s3_url_with(Some(&format!("/{prefix}/inner")), None))
        .await
        .expect("open prefixed store");
    let whole = object::open(&s3_url_with(Some("/"), None))
        .await
        .expect("open whole-bucket store");

    prefixed
        .put("a/b:c.json", Bytes::from_static(b"{}"), "application/json")
        .await
        .expect("put");
    let seen = whole
        .head(&format!("{prefix}/inner/a/b:c.json"))
        .await
        .expect("head through the whole bucket");
    assert_eq!(
        seen.map(|m| m.size),
        Some(2),
        "the prefix was not prepended"
    );

    let page = prefixed.list("", None, 10).await.expect("list");
    let keys: Vec<String> = page.objects.into_iter().map(|m| m.key).collect();
    assert_eq!(
        keys,
        vec!["a/b:c.json".to_owned()],
        "the prefix was not stripped"
    );

    prefixed.delete("a/b:c.json").await.expect("delete");
    assert!(
        whole
            .head(&format!("{prefix}/inner/a/b:c.json"))
            .await
            .expect("head")
            .is_none()
    );
}

#[tokio::test]
async fn s3_unreachable_endpoint_is_unavailable() {
    // Nothing listens on port 1; the real server's bucket and credentials are otherwise kept.
    let store = object::open(&s3_url_with(None, Some(("endpoint", "http://127.0.0.1:1")))).await;
    // create_bucket=true in the env URL makes open itself contact the server.
    let err = match store {
        Err(e) => e,
        Ok(store) => store
            .check()
            .await
            .expect_err("check against a closed port"),
    };
    assert!(err.is_retryable(), "expected Unavailable, got {err:?}");
    let mut source = std::error::Error::source(&err);
    let mut depth = 0;
    while let Some(s) = source {
        depth += 1;
        source = s.source();
    }
    assert!(depth >= 2, "the error lost its cause chain: {err:?}");
}

#[tokio::test]
async fn s3_missing_bucket_fails_check() {
    let bucket = format!("noema-missing-{}", uuid::Uuid::new_v4().simple());
    let mut url =
        url::Url::parse(&s3_url_with(Some("/"), Some(("create_bucket", "false")))).expect("url");
    url.set_host(Some(&bucket)).expect("set bucket");
    let store = object::open(url.as_str()).await.expect("open");
    let err = store
        .check()
        .await
        .expect_err("a missing bucket is not ready");
    assert!(matches!(err, ObjectError::Backend { .. }), "{err:?}");
    assert!(format!("{err:?}").contains(&bucket), "{err:?}");
}

#[tokio::test]
async fn s3_create_bucket_is_idempotent() {
    let url = s3_url_with(None, Some(("create_bucket", "true")));
    for _ in 0..2 {
        let store = object::open(&url)
            .await
            .expect("open with create_bucket twice");
        store.check().await.expect("check");
    }
}

#[tokio::test]
async fn open_rejects_unknown_urls_with_the_accepted_forms() {
    for (url, needle) in [
        ("", "empty"),
        ("ftp://host/x", "unsupported object store scheme `ftp`"),
        ("file://", "no directory path"),
        ("s3://", "no bucket"),
        ("s3://bucket-1?bogus=1", "unknown parameter `bogus`"),
        ("s3://AKIA:sekrit@bucket-1", "credentials"),
        ("/just/a/path", "no scheme"),
    ] {
        let err = object::open(url).await.expect_err(url);
        let text = err.to_string();
        assert!(
            matches!(err, ObjectError::InvalidUrl { .. }),
            "{url}: {err:?}"
        );
        assert!(text.contains(needle), "{url}: {text}");
        assert!(
            text.contains("file://") && text.contains("s3://"),
            "{url}: the message does not name the accepted forms: {text}"
        );
        assert!(!text.contains("sekrit"), "{url}: secret leaked: {text}");
    }
}

#[tokio::test]
async fn file_store_layout_is_raw_bytes_with_the_content_type_in_an_xattr() {
    let (dir, store) = file_store_with(ContentTypeStorage::Xattr).await;
    let key = "canonical/observation/2026/04/14/sha256:00ff.json";
    store
        .put(key, Bytes::from_static(b"{\"x\":1}"), "application/json")
        .await
        .expect("put");
    // A key that would collide with a sidecar scheme is just another key.
    store
        .put(
            &format!("{key}.meta"),
            Bytes::from_static(b"other"),
            "text/plain",
        )
        .await
        .expect("put .meta key");
    let object = dir.path().join("objects").join(key);
    assert_eq!(
        std::fs::read(&object).expect("raw object file"),
        b"{\"x\":1}"
    );
    assert_eq!(xattr_of(&object).as_deref(), Some("application/json"));
    assert!(files_under(&dir.path().join("meta")).is_empty());
    assert!(files_under(&dir.path().join("tmp")).is_empty());
    let head = store.head(key).await.expect("head").expect("exists");
    assert_eq!(head.content_type.as_deref(), Some("application/json"));
    let page = store.list("canonical/", None, 10).await.expect("list");
    let keys: Vec<String> = page.objects.into_iter().map(|m| m.key).collect();
    assert_eq!(keys, vec![key.to_owned(), format!("{key}.meta")]);
}

#[tokio::test]
async fn file_store_layout_is_raw_bytes_and_a_separate_meta_tree_without_xattrs() {
    let (dir, store) = file_store_with(ContentTypeStorage::MetaFiles).await;
    let key = "canonical/observation/2026/04/14/sha256:00ff.json";
    store
        .put(key, Bytes::from_static(b"{\"x\":1}"), "application/json")
        .await
        .expect("put");
    let object = dir.path().join("objects").join(key);
    assert_eq!(
        std::fs::read(&object).expect("raw object file"),
        b"{\"x\":1}"
    );
    assert_eq!(xattr_of(&object), None);
    let ct = std::fs::read_to_string(dir.path().join("meta").join(key)).expect("meta file");
    assert_eq!(ct, "application/json");
    assert!(files_under(&dir.path().join("tmp")).is_empty());
    let head = store.head(key).await.expect("head").expect("exists");
    assert_eq!(head.content_type.as_deref(), Some("application/json"));
}

/// Stores written by earlier versions keep their content types in meta files: reads still
/// find them, a put with a type replaces them (the xattr wins; the stale file goes), and a put
/// without one removes them.
#[tokio::test]
async fn file_store_reads_and_replaces_meta_files_of_earlier_versions() {
    let (dir, store) = file_store_with(ContentTypeStorage::Xattr).await;
    let root = dir.path();
    for key in ["old/a", "old/b", "old/c"] {
        std::fs::create_dir_all(root.join("objects/old")).expect("mkdir");
        std::fs::create_dir_all(root.join("meta/old")).expect("mkdir");
        std::fs::write(root.join("objects").join(key), b"old bytes").expect("object");
        std::fs::write(root.join("meta").join(key), b"text/csv").expect("meta");
    }
    let head = store.head("old/a").await.expect("head").expect("exists");
    assert_eq!(head.content_type.as_deref(), Some("text/csv"));
    let got = store.get("old/a").await.expect("get");
    assert_eq!(got.meta.content_type.as_deref(), Some("text/csv"));
    assert_eq!(got.bytes().await.expect("bytes").as_ref(), b"old bytes");

    store
        .put("old/b", Bytes::from_static(b"new"), "application/json")
        .await
        .expect("put with a type");
    let head = store.head("old/b").await.expect("head").expect("exists");
    assert_eq!(head.content_type.as_deref(), Some("application/json"));
    assert!(
        !root.join("meta/old/b").exists(),
        "the stale meta file stayed"
    );

    store
        .put("old/c", Bytes::from_static(b"new"), "")
        .await
        .expect("put without a type");
    let head = store.head("old/c").await.expect("head").expect("exists");
    assert_eq!(head.content_type, None, "the old meta file's type survived");
    assert!(!root.join("meta/old/c").exists());

    store.delete("old/a").await.expect("delete");
    assert!(
        !root.join("meta/old/a").exists(),
        "delete left the meta file"
    );
    assert!(store.head("old/a").await.expect("head").is_none());
}

/// A meta file next to an object with the attribute (left by a crash, or by a version that
/// wrote meta files) never overrides it.
#[tokio::test]
async fn file_store_xattr_wins_over_a_stale_meta_file() {
    let (dir, store) = file_store_with(ContentTypeStorage::Xattr).await;
    store
        .put("x/k", Bytes::from_static(b"1"), "application/json")
        .await
        .expect("put");
    std::fs::create_dir_all(dir.path().join("meta/x")).expect("mkdir");
    std::fs::write(dir.path().join("meta/x/k"), b"text/plain").expect("stale meta");
    let head = store.head("x/k").await.expect("head").expect("exists");
    assert_eq!(head.content_type.as_deref(), Some("application/json"));
    let got = store.get("x/k").await.expect("get");
    assert_eq!(got.meta.content_type.as_deref(), Some("application/json"));
}

/// Content types too large for an attribute (ext4 keeps one within a block; Linux refuses
/// values over 64 KiB) are kept in a meta file instead.
#[tokio::test]
async fn file_store_keeps_content_types_too_large_for_an_xattr() {
    let (_dir, store) = file_store_with(ContentTypeStorage::Xattr).await;
    for (key, len) in [("big/1k", 1_000), ("big/5k", 5_000), ("big/70k", 70_000)] {
        let content_type = format!("application/x-{}", "a".repeat(len));
        store
            .put(key, Bytes::from_static(b"body"), &content_type)
            .await
            .expect("put");
        let head = store.head(key).await.expect("head").expect("exists");
        assert_eq!(head.content_type.as_ref(), Some(&content_type), "{key}");
        // Back to a small type: the large one's meta file must not win.
        store
            .put(key, Bytes::from_static(b"body"), "text/plain")
            .await
            .expect("put");
        let head = store.head(key).await.expect("head").expect("exists");
        assert_eq!(head.content_type.as_deref(), Some("text/plain"), "{key}");
    }
}

#[tokio::test]
async fn file_store_concurrent_puts_into_one_directory() {
    for content_types in [ContentTypeStorage::Xattr, ContentTypeStorage::MetaFiles] {
        let (dir, store) = file_store_with(content_types).await;
        let keys: Vec<String> = (0..64)
            .map(|i| format!("canonical/observation/2026/04/14/{i}.json"))
            .collect();
        let puts = keys.iter().map(|k| {
            store.put(
                k,
                Bytes::from(k.clone().into_bytes()),
                if k.ends_with("7.json") {
                    ""
                } else {
                    "application/json"
                },
            )
        });
        for r in futures::future::join_all(puts).await {
            r.expect("concurrent put");
        }
        for k in &keys {
            let got = store.get(k).await.expect("get");
            let want = if k.ends_with("7.json") {
                None
            } else {
                Some("application/json")
            };
            assert_eq!(got.meta.content_type.as_deref(), want, "{k}");
            assert_eq!(got.bytes().await.expect("bytes").as_ref(), k.as_bytes());
        }
        assert!(files_under(&dir.path().join("tmp")).is_empty());
    }
}

#[tokio::test]
async fn file_store_put_without_content_type_has_none() {
    for content_types in [ContentTypeStorage::Xattr, ContentTypeStorage::MetaFiles] {
        let (_dir, store) = file_store_with(content_types).await;
        put_twice_without_content_type(&store).await;
    }
}

async fn put_twice_without_content_type(store: &FileObjectStore) {
    store
        .put("k", Bytes::from_static(b"1"), "text/plain")
        .await
        .expect("put");
    store
        .put("k", Bytes::from_static(b"2"), "")
        .await
        .expect("put again");
    let head = store.head("k").await.expect("head").expect("exists");
    assert_eq!(head.content_type, None, "a stale content type survived");
}

#[tokio::test]
async fn file_store_relative_root() {
    // Relative to the test's working directory (the crate root); removed when dropped.
    let dir = tempfile::Builder::new()
        .prefix(".noema-store-test-")
        .tempdir_in(".")
        .expect("tempdir in cwd");
    let name = dir
        .path()
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let store = object::open(&format!("file://{name}/objects-root"))
        .await
        .expect("open relative");
    store
        .put("a", Bytes::from_static(b"1"), "text/plain")
        .await
        .expect("put");
    assert!(dir.path().join("objects-root/objects/a").is_file());
    store.check().await.expect("check");
}

#[tokio::test]
async fn file_store_concurrent_overwrites_never_tear() {
    let (dir, store) = file_store().await;
    let bodies: Vec<Bytes> = (0..16u8)
        .map(|i| Bytes::from(vec![i; 256 * 1024 + usize::from(i)]))
        .collect();
    let puts = bodies
        .iter()
        .map(|b| store.put("same/key", b.clone(), "application/octet-stream"));
    for r in futures::future::join_all(puts).await {
        r.expect("concurrent put");
    }
    let got = store
        .get("same/key")
        .await
        .expect("get")
        .bytes()
        .await
        .expect("bytes");
    assert!(
        bodies.contains(&got),
        "the stored object is a mix of writes ({} bytes)",
        got.len()
    );
    assert!(files_under(&dir.path().join("tmp")).is_empty());
}

#[tokio::test]
async fn file_store_check_fails_when_the_root_is_gone() {
    let (dir, store) = file_store().await;
    store.check().await.expect("check");
    std::fs::remove_dir_all(dir.path().join("objects")).expect("remove objects dir");
    let err = store.check().await.expect_err("no objects dir");
    assert!(err.is_retryable(), "{err:?}");
}

#[tokio::test]
async fn faulty_store_passes_conformance_when_disarmed() {
    let (_dir, inner) = file_store().await;
    let faulty = Arc::new(FaultyObjectStore::new(inner));
    conformance::run_all(faulty.clone(), &scratch("faulty")).await;
    assert_eq!(faulty.injected_faults(), 0);
}

fn assert_injected(err: &ObjectError) {
    assert!(err.is_retryable(), "expected Unavailable, got {err:?}");
    let source = std::error::Error::source(err).expect("has a source");
    assert!(source.downcast_ref::<InjectedFault>().is_some(), "{err:?}");
}

#[tokio::test]
async fn faulty_store_fails_puts_before_writing() {
    let (_dir, inner) = file_store().await;
    let faulty = FaultyObjectStore::new(inner.clone());
    faulty.fail_next_puts(2);
    for _ in 0..2 {
        let err = faulty
            .put("k", Bytes::from_static(b"v"), "text/plain")
            .await
            .expect_err("armed put fault");
        assert_injected(&err);
        assert!(
            inner.head("k").await.expect("head").is_none(),
            "a failed put wrote"
        );
    }
    faulty
        .put("k", Bytes::from_static(b"v"), "text/plain")
        .await
        .expect("third put");
    assert!(inner.head("k").await.expect("head").is_some());
    assert_eq!(faulty.injected_faults(), 2);
}

#[tokio::test]
async fn faulty_store_can_lose_the_ack_after_writing() {
    let (_dir, inner) = file_store().await;
    let faulty = FaultyObjectStore::new(inner.clone());
    faulty.lose_next_put_acks(1);
    let err = faulty
        .put("k", Bytes::from_static(b"stored"), "text/plain")
        .await
        .expect_err("lost ack");
    assert_injected(&err);
    let stored = inner
        .get("k")
        .await
        .expect("bytes are there")
        .bytes()
        .await
        .expect("read");
    assert_eq!(stored.as_ref(), b"stored");
    // The retry succeeds and is idempotent.
    faulty
        .put("k", Bytes::from_static(b"stored"), "text/plain")
        .await
        .expect("retry");
}

#[tokio::test]
async fn faulty_store_fails_gets_and_heads_then_recovers() {
    let (_dir, inner) = file_store().await;
    let faulty = FaultyObjectStore::new(inner);
    faulty
        .put("k", Bytes::from_static(b"v"), "text/plain")
        .await
        .expect("put");

    faulty.fail_next_gets(1);
    assert_injected(&faulty.get("k").await.expect_err("get fault"));
    assert!(faulty.get("k").await.is_ok(), "get fault did not run out");

    faulty.fail_next_heads(STICKY);
    for _ in 0..3 {
        assert_injected(&faulty.head("k").await.expect_err("sticky head fault"));
    }
    faulty.reset();
    assert!(faulty.head("k").await.expect("head after reset").is_some());
    assert_eq!(faulty.injected_faults(), 4);
}

#[tokio::test]
async fn faulty_store_adds_latency() {
    let (_dir, inner) = file_store().await;
    let faulty = FaultyObjectStore::new(inner);
    faulty.set_latency(Duration::from_millis(150));
    let started = Instant::now();
    assert!(faulty.head("missing").await.expect("head").is_none());
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    faulty.reset();
    let started = Instant::now();
    faulty.head("missing").await.expect("head");
    assert!(
        started.elapsed() < Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
}

/// A store in front of another that counts the puts reaching it and, when asked, lists in
/// reverse order (a misbehaviour the conformance suite must notice).
#[derive(Debug)]
struct Probe {
    inner: Arc<dyn ObjectStore>,
    reverse_listings: bool,
    puts: std::sync::atomic::AtomicU32,
}

impl Probe {
    fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Probe {
            inner,
            reverse_listings: false,
            puts: Default::default(),
        }
    }

    fn puts(&self) -> u32 {
        self.puts.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Probe {
    async fn put(&self, key: &str, body: Bytes, content_type: &str) -> Result<(), ObjectError> {
        self.puts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.put(key, body, content_type).await
    }
    async fn put_if_absent(
        &self,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<object::PutOutcome, ObjectError> {
        object::head_then_put(self, key, body, content_type).await
    }
    async fn get(&self, key: &str) -> Result<object::ObjectBody, ObjectError> {
        self.inner.get(key).await
    }
    async fn head(&self, key: &str) -> Result<Option<object::ObjectMeta>, ObjectError> {
        self.inner.head(key).await
    }
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<object::ListPage, ObjectError> {
        let mut page = self.inner.list(prefix, start_after, limit).await?;
        if self.reverse_listings {
            page.objects.reverse();
        }
        Ok(page)
    }
    async fn delete(&self, key: &str) -> Result<(), ObjectError> {
        self.inner.delete(key).await
    }
    async fn check(&self) -> Result<(), ObjectError> {
        self.inner.check().await
    }
}

#[tokio::test]
#[should_panic(expected = "case `list_paging` failed")]
async fn conformance_catches_a_misbehaving_store() {
    let (_dir, inner) = file_store().await;
    let reversed = Probe {
        reverse_listings: true,
        ..Probe::new(inner)
    };
    conformance::run_all(Arc::new(reversed), &scratch("broken")).await;
}

/// A quick policy for tests: the same rule as [`WriteRetry::STANDARD`], short pauses.
const QUICK_RETRY: WriteRetry = WriteRetry {
    attempts: WriteRetry::STANDARD.attempts,
    first_delay: Duration::from_millis(1),
};

#[tokio::test]
async fn write_retry_makes_exactly_its_attempts() {
    let (_dir, inner) = file_store().await;
    let faulty = FaultyObjectStore::new(inner.clone());
    let write = || QUICK_RETRY.put(&faulty, "k", Bytes::from_static(b"v"), "text/plain");
    let attempts = u64::from(QUICK_RETRY.attempts);
    assert_eq!(WriteRetry::STANDARD.attempts, 3);

    faulty.fail_next_puts(STICKY);
    assert_injected(&write().await.expect_err("a store that stays down"));
    assert_eq!(faulty.injected_faults(), attempts);

    // Fewer failures than attempts: the write lands.
    faulty.reset();
    faulty.fail_next_puts(QUICK_RETRY.attempts - 1);
    write().await.expect("the last attempt succeeds");
    assert_eq!(faulty.injected_faults(), 2 * attempts - 1);
    assert!(inner.head("k").await.expect("head").is_some());

    // A lost acknowledgement: the repeated put stores the same bytes again.
    faulty.lose_next_put_acks(1);
    write().await.expect("retried after the lost ack");
    assert_eq!(faulty.injected_faults(), 2 * attempts);
}

#[tokio::test]
async fn write_retry_does_not_repeat_what_waiting_cannot_mend() {
    let (_dir, inner) = file_store().await;
    let probe = Probe::new(inner);
    let err = QUICK_RETRY
        .put(&probe, "/not a key", Bytes::from_static(b"v"), "")
        .await
        .expect_err("an invalid key");
    assert!(!err.is_retryable(), "{err:?}");
    assert_eq!(probe.puts(), 1);
}

/// An S3 endpoint on 127.0.0.1 that answers every request `503 SlowDown` and counts them.
async fn slow_down_server() -> (String, Arc<std::sync::atomic::AtomicU32>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
    let requests = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                // Read the head, then the body it announces, then answer and close.
                let mut received = Vec::new();
                let mut buf = [0u8; 8192];
                let head_end = loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => received.extend_from_slice(&buf[..n]),
                    }
                    if let Some(i) = received.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let head = String::from_utf8_lossy(&received[..head_end]).to_ascii_lowercase();
                let body_len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while received.len() < head_end + body_len {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => received.extend_from_slice(&buf[..n]),
                    }
                }
                let body = if head.starts_with("head ") {
                    String::new()
                } else {
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>\
                     <Message>Please reduce your request rate.</Message></Error>"
                        .to_owned()
                };
                let response = format!(
                    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/xml\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (endpoint, requests)
}

/// The SDK's retries do not nest inside the write policy: a put is one request, a write
/// through the policy exactly its attempts (not attempts × the SDK's three).
#[tokio::test]
async fn s3_puts_are_retried_by_the_write_policy_alone() {
    let (endpoint, requests) = slow_down_server().await;
    let mut url = url::Url::parse(&s3_url_with(None, Some(("endpoint", &endpoint)))).expect("url");
    let query: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| k != "create_bucket")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    url.query_pairs_mut().clear().extend_pairs(&query);
    let store = object::open(url.as_str()).await.expect("open s3 store");
    let count = || requests.load(std::sync::atomic::Ordering::SeqCst);

    let err = store
        .put("k", Bytes::from_static(b"v"), "text/plain")
        .await
        .expect_err("the server slows everyone down");
    assert!(err.is_retryable(), "503 SlowDown is Unavailable: {err:?}");
    assert_eq!(count(), 1, "a put is sent once");

    let err = QUICK_RETRY
        .put(store.as_ref(), "k", Bytes::from_static(b"v"), "text/plain")
        .await
        .expect_err("still slowed down");
    assert!(err.is_retryable(), "{err:?}");
    assert_eq!(count(), 1 + QUICK_RETRY.attempts);
}

/// A loopback S3 server without conditional writes: it forwards every request to the test's
/// S3 server, except a PUT with `If-None-Match`, which it answers 501 Not Implemented (as
/// S3-compatible servers that lack the feature do). Returns its endpoint and how many
/// conditional PUTs it refused.
async fn server_without_conditional_writes() -> (String, Arc<std::sync::atomic::AtomicU32>) {
    use axum::body::Body;
    use axum::extract::{Request, State};
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};

    #[derive(Clone)]
    struct Upstream {
        endpoint: String,
        http: reqwest::Client,
        refused: Arc<std::sync::atomic::AtomicU32>,
    }

    async fn forward(State(upstream): State<Upstream>, request: Request) -> Response {
        let (parts, body) = request.into_parts();
        if parts.method == axum::http::Method::PUT && parts.headers.contains_key("if-none-match") {
            upstream
                .refused
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NotImplemented</Code>\
                        <Message>A header you provided implies functionality that is not \
                        implemented</Message></Error>";
            return (StatusCode::NOT_IMPLEMENTED, body).into_response();
        }
        let body = axum::body::to_bytes(body, usize::MAX)
            .await
            .expect("request body");
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut headers = parts.headers.clone();
        headers.remove(axum::http::header::HOST);
        let answer = upstream
            .http
            .request(parts.method, format!("{}{path}", upstream.endpoint))
            .headers(headers)
            .body(body)
            .send()
            .await
            .expect("the test's S3 server answers");
        let status = answer.status();
        let mut headers = HeaderMap::new();
        for (name, value) in answer.headers() {
            if name != axum::http::header::TRANSFER_ENCODING
                && name != axum::http::header::CONNECTION
            {
                headers.append(name, value.clone());
            }
        }
        let bytes = answer.bytes().await.expect("response body");
        (status, headers, Body::from(bytes)).into_response()
    }

    let url = url::Url::parse(&s3_url()).expect("NOEMA_TEST_S3_URL parses");
    let endpoint = url
        .query_pairs()
        .find(|(k, _)| k == "endpoint")
        .map(|(_, v)| v.trim_end_matches('/').to_owned())
        .expect("NOEMA_TEST_S3_URL names an endpoint");
    let refused = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let upstream = Upstream {
        endpoint,
        http: noema_tools::tls::client().expect("http client"),
        refused: Arc::clone(&refused),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let app = axum::Router::new().fallback(forward).with_state(upstream);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), refused)
}

/// `put_if_absent` on a server that answers conditional writes 501: a HEAD and a PUT
/// instead, the same outcomes, and the conditional form is not tried again.
#[tokio::test]
async fn s3_without_conditional_writes_puts_if_absent_with_a_head_and_a_put() {
    let (endpoint, refused) = server_without_conditional_writes().await;
    let prefix = format!("/{}", scratch("no-conditional"));
    let store = object::open(&s3_url_with(Some(&prefix), Some(("endpoint", &endpoint))))
        .await
        .expect("open s3 store through the server");
    let outcome = store
        .put_if_absent("doc", Bytes::from_static(b"first"), "text/plain")
        .await
        .expect("first put_if_absent");
    assert_eq!(outcome, object::PutOutcome::Created);
    let outcome = store
        .put_if_absent("doc", Bytes::from_static(b"second"), "text/plain")
        .await
        .expect("second put_if_absent");
    assert_eq!(outcome, object::PutOutcome::Exists);
    let body = store
        .get("doc")
        .await
        .expect("get")
        .bytes()
        .await
        .expect("body");
    assert_eq!(body.as_ref(), b"first");
    assert_eq!(
        refused.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "after one 501 the store stops sending conditional writes"
    );
    store.delete("doc").await.expect("clean up");
}
