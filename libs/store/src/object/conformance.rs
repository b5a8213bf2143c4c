//! The object store conformance suite: the behaviour every backend must share, run against
//! each of them by the tests (`tests/object_store.rs`) and by anyone adding a backend.
//!
//! Every case works under its own sub-prefix of the scratch prefix it is given and cleans up
//! after itself. [`run_all`] runs every case, then panics naming each case that failed.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;

use super::key::validate_key;
use super::{ObjectError, ObjectStore, PutOutcome};

type CaseResult = Result<(), String>;

/// Size of the large objects (5 MiB).
const LARGE: usize = 5 * 1024 * 1024;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// Turn a store error into a case failure saying what was being done.
fn ctx<T>(what: &str, r: Result<T, ObjectError>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e} ({e:?})"))
}

/// Run every case against `store`, using keys under `scratch_prefix` (a valid key such as
/// `conformance-<uuid>`; a unique one per run keeps runs apart on a shared bucket).
///
/// # Panics
/// If any case fails, with one line per failed case naming it.
pub async fn run_all(store: Arc<dyn ObjectStore>, scratch_prefix: &str) {
    let base = scratch_prefix.trim_end_matches('/');
    if let Err(e) = validate_key(base) {
        panic!("object store conformance: bad scratch prefix: {e}");
    }
    let s: &dyn ObjectStore = store.as_ref();
    let cases: Vec<(&str, BoxFuture<'_, CaseResult>)> = vec![
        ("check", Box::pin(check(s))),
        (
            "round_trip",
            Box::pin(round_trip(s, format!("{base}/round-trip"))),
        ),
        (
            "streaming_get",
            Box::pin(streaming_get(s, format!("{base}/streaming"))),
        ),
        (
            "missing_objects",
            Box::pin(missing_objects(s, format!("{base}/missing"))),
        ),
        (
            "overwrite_last_wins",
            Box::pin(overwrite_last_wins(s, format!("{base}/overwrite"))),
        ),
        (
            "put_if_absent_keeps_the_first",
            Box::pin(put_if_absent_keeps_the_first(
                s,
                format!("{base}/if-absent"),
            )),
        ),
        (
            "list_paging",
            Box::pin(list_paging(s, format!("{base}/paging"))),
        ),
        (
            "prefix_isolation",
            Box::pin(prefix_isolation(s, format!("{base}/isolation"))),
        ),
        (
            "delete_idempotent",
            Box::pin(delete_idempotent(s, format!("{base}/delete"))),
        ),
        (
            "invalid_keys_rejected",
            Box::pin(invalid_keys_rejected(s, format!("{base}/invalid"))),
        ),
        (
            "special_character_keys",
            Box::pin(special_character_keys(s, format!("{base}/special"))),
        ),
    ];
    let mut failures = Vec::new();
    for (name, case) in cases {
        tracing::info!(case = name, "object store conformance case");
        if let Err(e) = case.await {
            failures.push(format!("case `{name}` failed: {e}"));
        }
    }
    if let Err(e) = clean(s, base).await {
        failures.push(format!("cleaning up {base}/ failed: {e}"));
    }
    if !failures.is_empty() {
        panic!(
            "object store conformance failed for {store:?}:\n  {}",
            failures.join("\n  ")
        );
    }
}

/// Deterministic, incompressible-looking test bytes.
fn pattern(len: usize, seed: u64) -> Bytes {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    Bytes::from(out)
}

/// Every key under `prefix`, following pages.
async fn list_all(store: &dyn ObjectStore, prefix: &str) -> Result<Vec<String>, String> {
    let mut keys = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..10_000 {
        let page = ctx("list", store.list(prefix, after.as_deref(), 1000).await)?;
        keys.extend(page.objects.into_iter().map(|m| m.key));
        match page.next_start_after {
            Some(next) => after = Some(next),
            None => return Ok(keys),
        }
    }
    Err("listing did not end after 10000 pages".into())
}

async fn clean(store: &dyn ObjectStore, base: &str) -> CaseResult {
    for key in list_all(store, &format!("{base}/")).await? {
        ctx("delete", store.delete(&key).await)?;
    }
    Ok(())
}

async fn check(store: &dyn ObjectStore) -> CaseResult {
    ctx("check", store.check().await)
}

async fn round_trip(store: &dyn ObjectStore, base: String) -> CaseResult {
    let cases = [
        ("empty", Bytes::new(), "application/octet-stream"),
        (
            "small.json",
            Bytes::from_static(br#"{"a":1}"#),
            "application/json",
        ),
        ("large.bin", pattern(LARGE, 1), "application/octet-stream"),
    ];
    for (name, body, content_type) in cases {
        let key = format!("{base}/{name}");
        ctx("put", store.put(&key, body.clone(), content_type).await)?;

        let got = ctx("get", store.get(&key).await)?;
        ensure!(
            got.meta.key == key,
            "get meta key {:?} != {key:?}",
            got.meta.key
        );
        ensure!(
            got.meta.size == body.len() as u64,
            "{key}: get meta size {} != {}",
            got.meta.size,
            body.len()
        );
        ensure!(
            got.meta.content_type.as_deref() == Some(content_type),
            "{key}: get content type {:?} != {content_type:?}",
            got.meta.content_type
        );
        let bytes = ctx("read body", got.bytes().await)?;
        ensure!(
            bytes == body,
            "{key}: got {} bytes that differ from the {} put",
            bytes.len(),
            body.len()
        );

        let head = ctx("head", store.head(&key).await)?
            .ok_or_else(|| format!("{key}: head found nothing after put"))?;
        ensure!(head.key == key, "head key {:?} != {key:?}", head.key);
        ensure!(
            head.size == body.len() as u64,
            "{key}: head size {} != {}",
            head.size,
            body.len()
        );
        ensure!(
            head.content_type.as_deref() == Some(content_type),
            "{key}: head content type {:?} != {content_type:?}",
            head.content_type
        );
        ensure!(
            head.last_modified.is_some(),
            "{key}: head has no last_modified"
        );
    }
    Ok(())
}

async fn streaming_get(store: &dyn ObjectStore, base: String) -> CaseResult {
    let key = format!("{base}/stream.bin");
    let body = pattern(LARGE, 2);
    ctx(
        "put",
        store
            .put(&key, body.clone(), "application/octet-stream")
            .await,
    )?;
    let mut got = ctx("get", store.get(&key).await)?;
    let mut received = Vec::with_capacity(LARGE);
    let mut chunks = 0usize;
    while let Some(chunk) = got.stream.next().await {
        let chunk = ctx("read chunk", chunk)?;
        chunks += 1;
        received.extend_from_slice(&chunk);
    }
    ensure!(chunks >= 1, "the stream yielded no chunk");
    ensure!(
        received.len() == body.len(),
        "streamed {} bytes in {chunks} chunks, expected {}",
        received.len(),
        body.len()
    );
    ensure!(received == body, "streamed bytes differ from what was put");
    Ok(())
}

async fn missing_objects(store: &dyn ObjectStore, base: String) -> CaseResult {
    let key = format!("{base}/never-written");
    let head = ctx("head", store.head(&key).await)?;
    ensure!(head.is_none(), "head of a missing key returned {head:?}");
    match store.get(&key).await {
        Err(ObjectError::NotFound { key: k }) => {
            ensure!(k == key, "NotFound names {k:?}, not {key:?}");
        }
        Err(e) => {
            return Err(format!(
                "get of a missing key: expected NotFound, got {e:?}"
            ));
        }
        Ok(body) => return Err(format!("get of a missing key returned {:?}", body.meta)),
    }
    // A key that is only a "directory" of other keys is not an object either.
    ctx(
        "put",
        store
            .put(
                &format!("{key}/child"),
                Bytes::from_static(b"x"),
                "text/plain",
            )
            .await,
    )?;
    let head = ctx("head", store.head(&key).await)?;
    ensure!(
        head.is_none(),
        "head of a key that is only a prefix returned {head:?}"
    );
    ensure!(
        matches!(store.get(&key).await, Err(ObjectError::NotFound { .. })),
        "get of a key that is only a prefix did not give NotFound"
    );
    Ok(())
}

/// Putting an existing key replaces it whole: the last put wins, metadata included.
async fn overwrite_last_wins(store: &dyn ObjectStore, base: String) -> CaseResult {
    let key = format!("{base}/doc");
    ctx(
        "put v1",
        store
            .put(
                &key,
                Bytes::from_static(b"version one, longer"),
                "text/plain",
            )
            .await,
    )?;
    ctx(
        "put v2",
        store
            .put(&key, Bytes::from_static(b"v2"), "application/json")
            .await,
    )?;
    let got = ctx("get", store.get(&key).await)?;
    ensure!(
        got.meta.content_type.as_deref() == Some("application/json"),
        "content type after overwrite: {:?}",
        got.meta.content_type
    );
    let bytes = ctx("read body", got.bytes().await)?;
    ensure!(bytes.as_ref() == b"v2", "after overwrite got {bytes:?}");
    let head = ctx("head", store.head(&key).await)?.ok_or("head found nothing after overwrite")?;
    ensure!(head.size == 2, "head size after overwrite: {}", head.size);
    let listed = list_all(store, &format!("{base}/")).await?;
    ensure!(
        listed == vec![key.clone()],
        "listing after overwrite: {listed:?}"
    );
    Ok(())
}

async fn put_if_absent_keeps_the_first(store: &dyn ObjectStore, base: String) -> CaseResult {
    let key = format!("{base}/doc");
    let first = ctx(
        "first put_if_absent",
        store
            .put_if_absent(&key, Bytes::from_static(b"first"), "text/plain")
            .await,
    )?;
    ensure!(
        first == PutOutcome::Created,
        "first put_if_absent: {first:?}"
    );
    let second = ctx(
        "second put_if_absent",
        store
            .put_if_absent(&key, Bytes::from_static(b"second, longer"), "text/plain")
            .await,
    )?;
    ensure!(
        second == PutOutcome::Exists,
        "put_if_absent over an existing key: {second:?}"
    );
    let bytes = ctx(
        "read body",
        ctx("get", store.get(&key).await)?.bytes().await,
    )?;
    ensure!(
        bytes.as_ref() == b"first",
        "put_if_absent over an existing key changed it to {bytes:?}"
    );
    Ok(())
}

async fn list_paging(store: &dyn ObjectStore, base: String) -> CaseResult {
    // Names chosen so that byte order differs from a naive directory walk:
    // '-' (0x2d) < '/' (0x2f) < '0' (0x30).
    let names = [
        "a-b", "a/c", "a/d/e", "a0", "b", "c/x", "c/y", "d", "e:1", "e:2",
    ];
    let mut expected: Vec<String> = names.iter().map(|n| format!("{base}/{n}")).collect();
    // Put in reverse order: the listing must sort, not echo insertion order.
    for key in expected.iter().rev() {
        ctx(
            "put",
            store.put(key, Bytes::from(key.clone()), "text/plain").await,
        )?;
    }
    expected.sort();
    let prefix = format!("{base}/");

    let mut pages = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = ctx("list page", store.list(&prefix, after.as_deref(), 3).await)?;
        ensure!(
            page.objects.len() <= 3,
            "a page of limit 3 has {} objects",
            page.objects.len()
        );
        let keys: Vec<String> = page.objects.iter().map(|m| m.key.clone()).collect();
        for m in &page.objects {
            let size = m.key.len() as u64;
            ensure!(
                m.size == size,
                "{}: listed size {} != {size}",
                m.key,
                m.size
            );
        }
        pages.push(keys);
        match page.next_start_after {
            Some(next) => {
                ensure!(
                    pages.last().and_then(|p| p.last()) == Some(&next),
                    "next_start_after {next:?} is not the last key of its page"
                );
                after = Some(next);
            }
            None => break,
        }
        ensure!(pages.len() <= names.len(), "paging does not end: {pages:?}");
    }
    ensure!(
        pages.len() == 4,
        "expected 4 pages of 3,3,3,1 keys, got {pages:?}"
    );
    let all: Vec<String> = pages.concat();
    ensure!(all == expected, "paged listing {all:?} != {expected:?}");

    // start_after in the middle, and after the last key.
    let page = ctx(
        "list after",
        store.list(&prefix, Some(&expected[3]), 100).await,
    )?;
    let keys: Vec<String> = page.objects.into_iter().map(|m| m.key).collect();
    ensure!(
        keys == expected[4..],
        "start_after {:?} gave {keys:?}",
        expected[3]
    );
    ensure!(
        page.next_start_after.is_none(),
        "a complete listing has a next_start_after"
    );
    let after_last = ctx(
        "list after last",
        store
            .list(&prefix, expected.last().map(String::as_str), 10)
            .await,
    )?;
    ensure!(
        after_last.objects.is_empty(),
        "listing after the last key: {:?}",
        after_last.objects
    );
    // start_after need not be a stored key.
    let between = format!("{base}/a0-not-a-key");
    let page = ctx("list between", store.list(&prefix, Some(&between), 2).await)?;
    let keys: Vec<String> = page.objects.into_iter().map(|m| m.key).collect();
    ensure!(
        keys == expected[4..6],
        "start_after {between:?} gave {keys:?}"
    );
    // An exact page: limit == number of keys ends the listing.
    let page = ctx(
        "list exact",
        store.list(&format!("{base}/c/"), None, 2).await,
    )?;
    ensure!(page.objects.len() == 2, "exact page: {:?}", page.objects);
    ensure!(
        page.next_start_after.is_none(),
        "an exactly full last page has a next_start_after"
    );
    Ok(())
}

async fn prefix_isolation(store: &dyn ObjectStore, base: String) -> CaseResult {
    let keys = ["a/1", "a/2", "ab/1", "b"];
    for k in keys {
        ctx(
            "put",
            store
                .put(
                    &format!("{base}/{k}"),
                    Bytes::from_static(b"x"),
                    "text/plain",
                )
                .await,
        )?;
    }
    let expect =
        |names: &[&str]| -> Vec<String> { names.iter().map(|n| format!("{base}/{n}")).collect() };
    for (prefix, names) in [
        ("a/", &["a/1", "a/2"][..]),
        ("a", &["a/1", "a/2", "ab/1"][..]),
        ("ab", &["ab/1"][..]),
        ("", &keys[..]),
        ("c", &[][..]),
        ("a/1/", &[][..]),
    ] {
        let listed = list_all(store, &format!("{base}/{prefix}")).await?;
        ensure!(
            listed == expect(names),
            "prefix {prefix:?} listed {listed:?}"
        );
    }
    Ok(())
}

async fn delete_idempotent(store: &dyn ObjectStore, base: String) -> CaseResult {
    let key = format!("{base}/gone");
    let kept = format!("{base}/kept");
    ctx(
        "put",
        store
            .put(&key, Bytes::from_static(b"bye"), "text/plain")
            .await,
    )?;
    ctx(
        "put",
        store
            .put(&kept, Bytes::from_static(b"hi"), "text/plain")
            .await,
    )?;
    ctx("delete", store.delete(&key).await)?;
    ctx("delete again", store.delete(&key).await)?;
    ctx(
        "delete never written",
        store.delete(&format!("{base}/never")).await,
    )?;
    ensure!(
        ctx("head", store.head(&key).await)?.is_none(),
        "head finds a deleted object"
    );
    ensure!(
        matches!(store.get(&key).await, Err(ObjectError::NotFound { .. })),
        "get of a deleted object is not NotFound"
    );
    let listed = list_all(store, &format!("{base}/")).await?;
    ensure!(
        listed == vec![kept.clone()],
        "listing after delete: {listed:?}"
    );
    // Deleting a prefix that only holds other keys deletes nothing.
    ctx(
        "put",
        store
            .put(
                &format!("{base}/dir/x"),
                Bytes::from_static(b"x"),
                "text/plain",
            )
            .await,
    )?;
    ctx(
        "delete prefix-only key",
        store.delete(&format!("{base}/dir")).await,
    )?;
    ensure!(
        ctx("head", store.head(&format!("{base}/dir/x")).await)?.is_some(),
        "deleting a prefix-only key removed a key under it"
    );
    Ok(())
}

async fn invalid_keys_rejected(store: &dyn ObjectStore, base: String) -> CaseResult {
    let too_long = format!("{base}/{}", "k".repeat(1100));
    let long_segment = format!("{base}/{}", "s".repeat(256));
    let bad = [
        String::new(),
        format!("/{base}/abs"),
        format!("{base}//double"),
        format!("{base}/trailing/"),
        format!("{base}/./dot"),
        format!("{base}/../escape"),
        "..".to_owned(),
        format!("{base}/nul\0byte"),
        format!("{base}/back\\slash"),
        too_long,
        long_segment,
    ];
    for key in &bad {
        let Err(expected) = validate_key(key) else {
            return Err(format!("{key:?} passes validate_key"));
        };
        let expected = expected.to_string();
        let results = [
            (
                "put",
                store
                    .put(key, Bytes::from_static(b"x"), "text/plain")
                    .await
                    .err(),
            ),
            ("get", store.get(key).await.err()),
            ("head", store.head(key).await.err()),
            ("delete", store.delete(key).await.err()),
        ];
        for (op, err) in results {
            match err {
                Some(e @ ObjectError::InvalidKey { .. }) => {
                    ensure!(e.to_string() == expected, "{op} {key:?}: {e} != {expected}");
                }
                other => return Err(format!("{op} {key:?}: expected InvalidKey, got {other:?}")),
            }
        }
    }
    for prefix in [
        format!("/{base}"),
        format!("{base}/../x"),
        format!("{base}//"),
    ] {
        ensure!(
            matches!(
                store.list(&prefix, None, 10).await,
                Err(ObjectError::InvalidKey { .. })
            ),
            "list accepted the bad prefix {prefix:?}"
        );
    }
    let listed = list_all(store, &format!("{base}/")).await?;
    ensure!(listed.is_empty(), "rejected keys left objects: {listed:?}");
    Ok(())
}

async fn special_character_keys(store: &dyn ObjectStore, base: String) -> CaseResult {
    let hex = "0123456789abcdef".repeat(4);
    let names = [
        format!("canonical/observation/2026/04/14/sha256:{hex}.json"),
        "with space".to_owned(),
        "plus+sign".to_owned(),
        "percent%20literal".to_owned(),
        "query?and#hash".to_owned(),
        "equals=amp&at@dollar$".to_owned(),
        "unicode-ünïcødé-日本".to_owned(),
        ".hidden".to_owned(),
        "x.meta".to_owned(),
    ];
    let mut expected = BTreeSet::new();
    for name in &names {
        let key = format!("{base}/{name}");
        ctx(
            &format!("put {key:?}"),
            store
                .put(&key, Bytes::from(key.clone()), "application/json")
                .await,
        )?;
        let body = ctx(&format!("get {key:?}"), store.get(&key).await)?;
        ensure!(
            body.meta.key == key,
            "get meta key {:?} != {key:?}",
            body.meta.key
        );
        let bytes = ctx("read body", body.bytes().await)?;
        ensure!(bytes == key.as_bytes(), "{key:?} read back {bytes:?}");
        let head = ctx(&format!("head {key:?}"), store.head(&key).await)?;
        ensure!(
            head.is_some_and(|m| m.key == key),
            "head of {key:?} found nothing"
        );
        expected.insert(key);
    }
    let listed = list_all(store, &format!("{base}/")).await?;
    let expected: Vec<String> = expected.into_iter().collect();
    ensure!(
        listed == expected,
        "listed {listed:?}, expected {expected:?}"
    );
    let colon_dir = format!("{base}/canonical/observation/2026/04/14/sha256:");
    let page = ctx(
        "list by colon prefix",
        store.list(&colon_dir, None, 10).await,
    )?;
    ensure!(
        page.objects.len() == 1,
        "prefix {colon_dir:?} listed {:?}",
        page.objects
    );
    Ok(())
}
