//! The `pack://` store's persisted index and compaction: opening reads only what the index
//! does not cover, a lost index is rebuilt, compaction reclaims dead records without losing
//! a live one (nor bringing back a deleted one, even when the index is rebuilt from the
//! segments), and a copy holding the segments postpones removals.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests: a panic is the failure report

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use noema_store::object::{ObjectStore, PackObjectStore, PackStoreOptions, PutOutcome};

fn segments(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("segments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

fn segment_bytes(root: &Path) -> u64 {
    segments(root)
        .iter()
        .map(|p| p.metadata().unwrap().len())
        .sum()
}

async fn body_of(store: &dyn ObjectStore, key: &str) -> Option<Bytes> {
    match store.get(key).await {
        Ok(body) => Some(body.bytes().await.unwrap()),
        Err(e) if e.is_not_found() => None,
        Err(e) => panic!("get {key}: {e:?}"),
    }
}

/// Every object under `prefix`, with its body.
async fn contents(store: &dyn ObjectStore, prefix: &str) -> BTreeMap<String, Bytes> {
    let mut out = BTreeMap::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.list(prefix, after.as_deref(), 100).await.unwrap();
        for meta in page.objects {
            let body = body_of(store, &meta.key).await.unwrap();
            assert_eq!(meta.size, body.len() as u64);
            out.insert(meta.key, body);
        }
        match page.next_start_after {
            Some(next) => after = Some(next),
            None => return out,
        }
    }
}

const SMALL: PackStoreOptions = PackStoreOptions {
    segment_bytes: 2048,
};

#[tokio::test]
async fn a_clean_reopen_reads_no_segment_and_a_lost_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = PackObjectStore::open_with(dir.path(), SMALL).await.unwrap();
        for n in 0..300 {
            let key = format!("o/{n:03}");
            store
                .put(&key, Bytes::from(key.clone()), "text/plain")
                .await
                .unwrap();
        }
        store.delete("o/007").await.unwrap();
    }
    let expected = {
        let store = PackObjectStore::open_with(dir.path(), SMALL).await.unwrap();
        assert_eq!(
            store.records_read_on_open(),
            0,
            "the index covers everything"
        );
        let found = contents(&store, "o/").await;
        assert_eq!(found.len(), 299);
        assert!(!found.contains_key("o/007"));
        let meta = store.head("o/100").await.unwrap().unwrap();
        assert_eq!(meta.content_type.as_deref(), Some("text/plain"));
        found
    };
    std::fs::remove_file(dir.path().join("index.redb")).unwrap();
    let store = PackObjectStore::open_with(dir.path(), SMALL).await.unwrap();
    assert_eq!(
        store.records_read_on_open(),
        301,
        "rebuilt from every record"
    );
    assert_eq!(contents(&store, "o/").await, expected);
}

#[tokio::test]
async fn an_unreadable_index_is_set_aside_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = PackObjectStore::open(dir.path()).await.unwrap();
        store
            .put("u/1", Bytes::from_static(b"one"), "")
            .await
            .unwrap();
    }
    std::fs::write(dir.path().join("index.redb"), b"not a database").unwrap();
    let store = PackObjectStore::open(dir.path()).await.unwrap();
    assert_eq!(body_of(&store, "u/1").await.unwrap(), "one");
    let aside = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("index.redb.unreadable-")
        })
        .count();
    assert_eq!(aside, 1);
}

#[tokio::test]
async fn keys_of_every_allowed_length_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("{}/{}", vec!["s".repeat(200); 5].join("/"), "e".repeat(19));
    assert_eq!(long.len(), 1024);
    {
        let store = PackObjectStore::open(dir.path()).await.unwrap();
        store
            .put(&long, Bytes::from_static(b"long"), "")
            .await
            .unwrap();
    }
    std::fs::remove_file(dir.path().join("index.redb")).unwrap();
    let store = PackObjectStore::open(dir.path()).await.unwrap();
    assert_eq!(body_of(&store, &long).await.unwrap(), "long");
}

#[tokio::test]
async fn put_if_absent_creates_once_among_racing_writers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(PackObjectStore::open(dir.path()).await.unwrap());
    let mut racers = Vec::new();
    for n in 0..16 {
        let store = store.clone();
        racers.push(tokio::spawn(async move {
            store
                .put_if_absent("race/key", Bytes::from(format!("writer {n}")), "")
                .await
                .unwrap()
        }));
    }
    let mut created = 0;
    for racer in racers {
        if racer.await.unwrap() == PutOutcome::Created {
            created += 1;
        }
    }
    assert_eq!(created, 1);
    let winner = body_of(store.as_ref(), "race/key").await.unwrap();
    assert!(winner.starts_with(b"writer "));
    // Once deleted, the key can be created again.
    store.delete("race/key").await.unwrap();
    assert_eq!(
        store
            .put_if_absent("race/key", Bytes::from_static(b"again"), "")
            .await
            .unwrap(),
        PutOutcome::Created
    );
}

/// Writes, overwrites and deletes across many small segments, then compacts.
async fn churn(store: &PackObjectStore) -> BTreeMap<String, Bytes> {
    let mut expected = BTreeMap::new();
    for round in 0..4 {
        for n in 0..60 {
            let key = format!("c/{n:02}");
            let body = Bytes::from(format!("{key} round {round} {}", "x".repeat(n * 3)));
            store.put(&key, body.clone(), "").await.unwrap();
            expected.insert(key, body);
        }
        for n in (round..60).step_by(7) {
            let key = format!("c/{n:02}");
            store.delete(&key).await.unwrap();
            expected.remove(&key);
        }
    }
    expected
}

#[tokio::test]
async fn compaction_reclaims_dead_records_and_keeps_every_live_one() {
    let dir = tempfile::tempdir().unwrap();
    let expected = {
        let store = PackObjectStore::open_with(dir.path(), SMALL).await.unwrap();
        let expected = churn(&store).await;
        let before = segment_bytes(dir.path());
        let report = store.compact().await.unwrap();
        let after = segment_bytes(dir.path());
        assert!(report.segments_removed > 0, "{report:?}");
        assert!(after < before / 2, "{before} → {after} bytes; {report:?}");
        assert_eq!(contents(&store, "c/").await, expected);
        // A second pass finds little or nothing to do and changes nothing visible.
        store.compact().await.unwrap();
        assert_eq!(contents(&store, "c/").await, expected);
        // Writes go on as before.
        store
            .put("c/new", Bytes::from_static(b"after compaction"), "")
            .await
            .unwrap();
        let mut expected = expected;
        expected.insert("c/new".into(), Bytes::from_static(b"after compaction"));
        expected
    };
    let store = PackObjectStore::open_with(dir.path(), SMALL).await.unwrap();
    assert_eq!(contents(&store, "c/").await, expected);
    drop(store);
    // Rebuilt from the segments alone, no deleted object comes back: the tombstones that
    // still mattered were moved, not dropped.
    std::fs::remove_file(dir.path().join("index.redb")).unwrap();
    let store = PackObjectStore::open_with(dir.path(), SMALL).await.unwrap();
    assert_eq!(contents(&store, "c/").await, expected);
}

#[tokio::test]
async fn compaction_while_writing_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(PackObjectStore::open_with(dir.path(), SMALL).await.unwrap());
    let mut writers = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        writers.push(tokio::spawn(async move {
            let mut last = BTreeMap::new();
            for v in 0..150 {
                let key = format!("w/{w}/{:02}", v % 12);
                if v % 5 == 4 {
                    store.delete(&key).await.unwrap();
                    last.insert(key, None);
                } else {
                    let body = Bytes::from(format!("{key}={v}"));
                    store.put(&key, body.clone(), "").await.unwrap();
                    last.insert(key, Some(body));
                }
            }
            last
        }));
    }
    let compactor = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut removed = 0;
            for _ in 0..20 {
                removed += store.compact().await.unwrap().segments_removed;
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            removed
        })
    };
    let mut expected = BTreeMap::new();
    for writer in writers {
        for (key, state) in writer.await.unwrap() {
            if let Some(body) = state {
                expected.insert(key, body);
            }
        }
    }
    let removed = compactor.await.unwrap() + store.compact().await.unwrap().segments_removed;
    assert!(removed > 0);
    assert_eq!(contents(store.as_ref(), "w/").await, expected);
    drop(store);
    std::fs::remove_file(dir.path().join("index.redb")).unwrap();
    let store = PackObjectStore::open_with(dir.path(), SMALL).await.unwrap();
    assert_eq!(contents(&store, "w/").await, expected);
}

#[tokio::test]
async fn a_tombstone_outliving_its_segment_keeps_the_object_deleted() {
    // Segment 1: the object, then live ones. Segment 2: its tombstone, then overwrites that
    // are soon dead. Compacting only mostly dead segments removes segment 2 and keeps 1, so
    // the tombstone must move, or the object comes back when the index is rebuilt.
    let dir = tempfile::tempdir().unwrap();
    let store = PackObjectStore::open_with(dir.path(), SMALL).await.unwrap();
    let padding = "p".repeat(100);
    store
        .put("t/deleted", Bytes::from(padding.clone()), "")
        .await
        .unwrap();
    let mut n = 0;
    while segments(dir.path()).len() < 2 {
        let key = format!("t/live/{n:03}");
        store
            .put(&key, Bytes::from(padding.clone()), "")
            .await
            .unwrap();
        n += 1;
    }
    store.delete("t/deleted").await.unwrap();
    while segments(dir.path()).len() < 3 {
        store
            .put("t/junk", Bytes::from(padding.clone()), "")
            .await
            .unwrap();
    }
    let expected = contents(&store, "t/").await;
    assert!(!expected.contains_key("t/deleted"));
    let first = segments(dir.path())[0].clone();

    let report = store.compact_wasteful(0.5).await.unwrap();
    assert_eq!(report.segments_removed, 1, "{report:?}");
    assert_eq!(report.tombstones_moved, 1, "{report:?}");
    assert!(first.exists(), "the mostly live segment is kept");
    assert_eq!(contents(&store, "t/").await, expected);
    drop(store);

    std::fs::remove_file(dir.path().join("index.redb")).unwrap();
    let store = PackObjectStore::open_with(dir.path(), SMALL).await.unwrap();
    assert_eq!(contents(&store, "t/").await, expected);
}

#[tokio::test]
async fn a_copy_holding_the_segments_postpones_their_removal() {
    let dir = tempfile::tempdir().unwrap();
    let store = PackObjectStore::open_with(dir.path(), SMALL).await.unwrap();
    let expected = churn(&store).await;
    let before = segments(dir.path());
    let hold = PackObjectStore::hold_segments(dir.path()).unwrap();
    let report = store.compact().await.unwrap();
    assert_eq!(report.segments_removed, 0, "{report:?}");
    // Every segment there when the copy started is still there.
    let now = segments(dir.path());
    assert!(before.iter().all(|s| now.contains(s)));
    assert_eq!(contents(&store, "c/").await, expected);
    drop(hold);
    let report = store.compact().await.unwrap();
    assert!(report.segments_removed > 0, "{report:?}");
    assert_eq!(contents(&store, "c/").await, expected);
}
