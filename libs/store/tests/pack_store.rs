//! The `pack://` object store: the conformance suite, and what is its own: the index rebuilt
//! on open, torn and damaged segments, segment rotation and the directory lock.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests: a panic is the failure report

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use noema_store::object::{
    self, ObjectError, ObjectStore, PackObjectStore, PackStoreOptions, conformance,
};

fn scratch(what: &str) -> String {
    format!("{what}-{}", uuid::Uuid::new_v4().simple())
}

/// The segment files of a store, in order.
fn segments(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("segments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

async fn body_of(store: &dyn ObjectStore, key: &str) -> Bytes {
    store.get(key).await.unwrap().bytes().await.unwrap()
}

async fn keys(store: &dyn ObjectStore, prefix: &str) -> Vec<String> {
    let page = store.list(prefix, None, 1000).await.unwrap();
    assert!(page.next_start_after.is_none());
    page.objects.into_iter().map(|m| m.key).collect()
}

#[tokio::test]
async fn pack_backend_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let store = object::open(&format!("pack://{}", dir.path().display()))
        .await
        .unwrap();
    conformance::run_all(store, &scratch("conformance")).await;
}

#[tokio::test]
async fn pack_backend_conformance_across_many_small_segments() {
    // Segments of 4 KiB: the 5 MiB objects overflow one, and small objects share one until it
    // is full.
    let dir = tempfile::tempdir().unwrap();
    let options = PackStoreOptions {
        segment_bytes: 4096,
    };
    let store = PackObjectStore::open_with(dir.path(), options)
        .await
        .unwrap();
    conformance::run_all(Arc::new(store), &scratch("conformance")).await;
    assert!(segments(dir.path()).len() > 2, "{:?}", segments(dir.path()));
}

#[tokio::test]
async fn reopening_rebuilds_the_index_from_the_segments() {
    let dir = tempfile::tempdir().unwrap();
    let options = PackStoreOptions { segment_bytes: 200 };
    {
        let store = PackObjectStore::open_with(dir.path(), options)
            .await
            .unwrap();
        store
            .put("a/kept", Bytes::from_static(b"one"), "text/plain")
            .await
            .unwrap();
        store
            .put("a/replaced", Bytes::from_static(b"old"), "")
            .await
            .unwrap();
        store
            .put("a/deleted", Bytes::from_static(b"gone"), "")
            .await
            .unwrap();
        store
            .put("a/replaced", Bytes::from_static(b"new"), "application/json")
            .await
            .unwrap();
        store.delete("a/deleted").await.unwrap();
        store.put("a/empty", Bytes::new(), "").await.unwrap();
    }
    assert!(
        segments(dir.path()).len() > 1,
        "the small segment size should have rotated"
    );
    let store = PackObjectStore::open_with(dir.path(), options)
        .await
        .unwrap();
    assert_eq!(
        keys(&store, "a/").await,
        ["a/empty", "a/kept", "a/replaced"]
    );
    assert_eq!(body_of(&store, "a/kept").await, "one");
    assert_eq!(body_of(&store, "a/replaced").await, "new");
    assert_eq!(body_of(&store, "a/empty").await, "");
    let meta = store.head("a/replaced").await.unwrap().unwrap();
    assert_eq!(meta.content_type.as_deref(), Some("application/json"));
    assert_eq!(meta.size, 3);
    assert!(meta.last_modified.is_some());
    assert_eq!(
        store
            .head("a/kept")
            .await
            .unwrap()
            .unwrap()
            .content_type
            .as_deref(),
        Some("text/plain")
    );
    assert!(store.head("a/deleted").await.unwrap().is_none());
    assert!(store.get("a/deleted").await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn a_torn_append_is_skipped_and_later_appends_survive_it() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = PackObjectStore::open(dir.path()).await.unwrap();
        store
            .put("k/before", Bytes::from_static(b"acknowledged"), "")
            .await
            .unwrap();
    }
    // What a crash in the middle of an append leaves: the start of a record, cut short.
    let last = segments(dir.path()).pop().unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&last)
        .unwrap();
    file.write_all(b"NPK1\x00\x00\x00\x00\x01\x05\x00").unwrap();
    drop(file);
    {
        let store = PackObjectStore::open(dir.path()).await.unwrap();
        assert_eq!(keys(&store, "k/").await, ["k/before"]);
        store
            .put("k/after", Bytes::from_static(b"also acknowledged"), "")
            .await
            .unwrap();
    }
    // The torn segment was left as it was; the new put went to a new segment.
    assert_eq!(segments(dir.path()).len(), 2);
    let store = PackObjectStore::open(dir.path()).await.unwrap();
    assert_eq!(keys(&store, "k/").await, ["k/after", "k/before"]);
    assert_eq!(body_of(&store, "k/before").await, "acknowledged");
    assert_eq!(body_of(&store, "k/after").await, "also acknowledged");
}

#[tokio::test]
async fn a_clean_last_segment_is_appended_to_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    for key in ["k/1", "k/2", "k/3"] {
        let store = PackObjectStore::open(dir.path()).await.unwrap();
        store.put(key, Bytes::from_static(b"x"), "").await.unwrap();
    }
    assert_eq!(segments(dir.path()).len(), 1);
    let store = PackObjectStore::open(dir.path()).await.unwrap();
    assert_eq!(keys(&store, "k/").await, ["k/1", "k/2", "k/3"]);
}

#[tokio::test]
async fn damage_inside_a_segment_loses_only_the_damaged_object() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = PackObjectStore::open(dir.path()).await.unwrap();
        for (key, body) in [
            ("d/1", "first body"),
            ("d/2", "second body"),
            ("d/3", "third body"),
        ] {
            store.put(key, Bytes::from(body), "").await.unwrap();
        }
    }
    let segment = segments(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    let at = bytes
        .windows(b"second body".len())
        .position(|w| w == b"second body")
        .unwrap();
    bytes[at] ^= 0xff;
    std::fs::write(&segment, &bytes).unwrap();

    let store = PackObjectStore::open(dir.path()).await.unwrap();
    assert_eq!(keys(&store, "d/").await, ["d/1", "d/3"]);
    assert_eq!(body_of(&store, "d/3").await, "third body");
}

#[tokio::test]
async fn a_second_store_on_one_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = PackObjectStore::open(dir.path()).await.unwrap();
    let err = PackObjectStore::open(dir.path()).await.unwrap_err();
    assert!(matches!(err, ObjectError::Backend { .. }), "{err:?}");
    let chain = format!("{:?}", error_chain(&err));
    assert!(chain.contains("already open"), "{chain}");
    drop(first);
    // Once the first is gone, the directory opens again.
    PackObjectStore::open(dir.path()).await.unwrap();
}

fn error_chain(err: &dyn std::error::Error) -> Vec<String> {
    let mut out = vec![err.to_string()];
    let mut source = err.source();
    while let Some(e) = source {
        out.push(e.to_string());
        source = e.source();
    }
    out
}

#[tokio::test]
async fn concurrent_puts_are_all_durable_and_visible_once_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(PackObjectStore::open(dir.path()).await.unwrap());
    let mut tasks = Vec::new();
    for task in 0..16 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                let key = format!("c/{task:02}/{i:02}");
                store
                    .put(&key, Bytes::from(key.clone().into_bytes()), "")
                    .await
                    .unwrap();
                // Visible as soon as acknowledged.
                assert_eq!(body_of(store.as_ref(), &key).await, key.as_bytes());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    drop(store);
    let store = PackObjectStore::open(dir.path()).await.unwrap();
    let page = store.list("c/", None, 1000).await.unwrap();
    assert_eq!(page.objects.len(), 400);
    for meta in page.objects {
        assert_eq!(body_of(&store, &meta.key).await, meta.key.as_bytes());
    }
}

#[tokio::test]
async fn check_fails_when_the_segments_directory_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = PackObjectStore::open(dir.path()).await.unwrap();
    store.check().await.unwrap();
    std::fs::remove_dir_all(dir.path().join("segments")).unwrap();
    let err = store.check().await.unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
}
