//! The `pack://` store killed with SIGKILL: a real child process (this test binary, running
//! the same test again with the child's settings in its environment) writes, overwrites and deletes objects — and compacts — while
//! it reports on stdout every operation it starts and every one it was told succeeded. The
//! parent kills it mid-stream, reopens the directory and checks every key: an acknowledged
//! write or delete is never lost, an unacknowledged one either happened whole or not at all,
//! and nothing else appears. It does so again after rebuilding the index from the segments
//! alone, the path a restored backup takes.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests: a panic is the failure report

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use noema_store::object::{ObjectStore, PackObjectStore, PackStoreOptions};

const DIR_ENV: &str = "NOEMA_PACK_CRASH_DIR";
const MODE_ENV: &str = "NOEMA_PACK_CRASH_MODE";
const ROUND_ENV: &str = "NOEMA_PACK_CRASH_ROUND";
/// Concurrent writers in the child, and keys each one cycles through.
const WRITERS: u64 = 8;
const KEYS_PER_WRITER: u64 = 40;
/// Small segments: the child rotates segments, and compacts them, many times a second.
const OPTIONS: PackStoreOptions = PackStoreOptions {
    segment_bytes: 16 * 1024,
};

/// What one operation leaves a key holding: a body version, or nothing.
type State = Option<u64>;

fn body(key: &str, version: u64) -> Bytes {
    Bytes::from(format!("{key}={version};").repeat(usize::try_from(version % 13).unwrap() + 1))
}

fn key_of(writer: u64, n: u64) -> String {
    format!("k/{writer}/{:02}", n % KEYS_PER_WRITER)
}

/// In the child process (the parent set [`DIR_ENV`]): run the child's workload and never
/// return. In the parent: nothing.
async fn be_the_child_if_asked() {
    if let Ok(dir) = std::env::var(DIR_ENV) {
        let compacting = std::env::var(MODE_ENV).unwrap() == "compact";
        let round: u64 = std::env::var(ROUND_ENV).unwrap().parse().unwrap();
        crash_child(&dir, compacting, round).await;
    }
}

/// The child: writers that each own their keys (so a key's operations are in order), and in
/// `compact` mode a compactor running throughout. Never returns; the parent kills it.
async fn crash_child(dir: &str, compacting: bool, round: u64) {
    let store = Arc::new(PackObjectStore::open_with(dir, OPTIONS).await.unwrap());
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let say = {
        let out = out.clone();
        move |line: String| {
            let mut out = out.lock().unwrap();
            writeln!(out, "{line}").unwrap();
            out.flush().unwrap();
        }
    };
    say(format!("open {}", store.records_read_on_open()));
    if compacting {
        let store = store.clone();
        let say = say.clone();
        tokio::spawn(async move {
            for pass in 0u64.. {
                // Every other pass takes only mostly dead segments, which moves tombstones.
                let report = if pass % 2 == 0 {
                    store.compact().await.unwrap()
                } else {
                    store.compact_wasteful(0.5).await.unwrap()
                };
                say(format!("compacted {}", report.segments_removed));
                tokio::task::yield_now().await;
            }
        });
    }
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let (store, say) = (store.clone(), say.clone());
        writers.push(tokio::spawn(async move {
            for n in 0.. {
                let key = key_of(writer, n);
                let version = round * 1_000_000 + n;
                if n % 5 == 3 {
                    say(format!("begin {key} delete"));
                    store.delete(&key).await.unwrap();
                    say(format!("done {key} delete"));
                } else {
                    say(format!("begin {key} {version}"));
                    store.put(&key, body(&key, version), "").await.unwrap();
                    say(format!("done {key} {version}"));
                }
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
}

/// What the parent knows of each key: the state of its last acknowledged operation, and of
/// one started and not acknowledged.
#[derive(Debug, Default, Clone)]
struct Known {
    acknowledged: State,
    in_flight: Option<State>,
}

fn parse_state(word: &str) -> State {
    (word != "delete").then(|| word.parse().unwrap())
}

/// Run one child until `kill_when` says so, SIGKILL it, and fold what it reported into
/// `known`. Returns the child's count of records read on open.
fn run_child(
    test: &str,
    dir: &Path,
    mode: &str,
    round: u64,
    known: &mut BTreeMap<String, Known>,
    mut kill_when: impl FnMut(&str) -> bool,
) -> u64 {
    let mut child: Child = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture"])
        .env(DIR_ENV, dir)
        .env(MODE_ENV, mode)
        .env(ROUND_ENV, round.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut read_on_open = None;
    let mut killed = false;
    let mut record = |line: &str, known: &mut BTreeMap<String, Known>| {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["open", n] => read_on_open = Some(n.parse::<u64>().unwrap()),
            ["begin", key, state] => {
                known.entry((*key).to_owned()).or_default().in_flight = Some(parse_state(state));
            }
            ["done", key, state] => {
                let k = known.get_mut(*key).unwrap();
                assert_eq!(k.in_flight, Some(parse_state(state)), "{line}");
                k.acknowledged = parse_state(state);
                k.in_flight = None;
            }
            _ => {} // the test harness's own lines
        }
    };
    for line in lines {
        let line = line.unwrap();
        record(&line, known);
        if !killed && (kill_when(&line) || Instant::now() > deadline) {
            child.kill().unwrap(); // SIGKILL
            killed = true;
        }
    }
    let status = child.wait().unwrap();
    assert!(killed, "the child stopped by itself: {status:?}");
    read_on_open.expect("the child opened the store")
}

/// Every key in the store is in a state its operations allow.
async fn check(store: &dyn ObjectStore, known: &BTreeMap<String, Known>) -> BTreeMap<String, u64> {
    let mut found = BTreeMap::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.list("k/", after.as_deref(), 500).await.unwrap();
        for meta in page.objects {
            found.insert(meta.key.clone(), meta.size);
        }
        match page.next_start_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let mut state_of = BTreeMap::new();
    for (key, k) in known {
        let actual: State = match store.get(key).await {
            Ok(object) => {
                let bytes = object.bytes().await.unwrap();
                let text = std::str::from_utf8(&bytes).unwrap();
                let version = text
                    .split(';')
                    .next()
                    .and_then(|first| first.strip_prefix(&format!("{key}=")))
                    .unwrap_or_else(|| panic!("{key} holds {text:?}"))
                    .parse()
                    .unwrap();
                assert_eq!(bytes, body(key, version), "{key}: a damaged body");
                assert_eq!(found.get(key), Some(&(bytes.len() as u64)), "{key} listed");
                Some(version)
            }
            Err(e) if e.is_not_found() => None,
            Err(e) => panic!("get {key}: {e:?}"),
        };
        let allowed = actual == k.acknowledged || k.in_flight == Some(actual);
        assert!(
            allowed,
            "{key} is {actual:?}; acknowledged {:?}, in flight {:?}",
            k.acknowledged, k.in_flight
        );
        if let Some(version) = actual {
            state_of.insert(key.clone(), version);
        }
    }
    for key in found.keys() {
        assert!(known.contains_key(key), "{key} was never written");
    }
    state_of
}

/// What a reopening after a kill found.
struct Recovered {
    /// Records read to bring the index up to date (the ones after its last durable commit).
    replayed: u64,
    /// Records read to rebuild it from the segments alone.
    rebuilt: u64,
    live: usize,
}

/// After a kill, the store holds what was acknowledged; operations in flight are settled one
/// way or the other, and stay settled that way — also when the index is rebuilt from the
/// segments alone (a restored backup's path; the next child then starts from that index).
async fn recover(dir: &Path, known: &mut BTreeMap<String, Known>) -> Recovered {
    let store = PackObjectStore::open_with(dir, OPTIONS).await.unwrap();
    let replayed = store.records_read_on_open();
    let recovered = check(&store, known).await;
    drop(store);
    std::fs::remove_file(dir.join("index.redb")).unwrap();
    let store = PackObjectStore::open_with(dir, OPTIONS).await.unwrap();
    let rebuilt = store.records_read_on_open();
    assert_eq!(check(&store, known).await, recovered);
    for (key, k) in known.iter_mut() {
        k.acknowledged = recovered.get(key).copied();
        k.in_flight = None;
    }
    Recovered {
        replayed,
        rebuilt,
        live: recovered.len(),
    }
}

/// A count the parent waits for before killing, varied from round to round.
fn jitter(round: u64, base: u64) -> u64 {
    let nanos = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos(),
    );
    base + (nanos ^ round.wrapping_mul(0x9E37_79B9)) % base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_mid_write_loses_no_acknowledged_object() {
    be_the_child_if_asked().await;
    let dir = tempfile::tempdir().unwrap();
    let mut known = BTreeMap::new();
    for round in 1..=3 {
        let target = jitter(round, 300);
        let mut done = 0;
        let read_on_open = run_child(
            "a_kill_mid_write_loses_no_acknowledged_object",
            dir.path(),
            "write",
            round,
            &mut known,
            |line| {
                done += u64::from(line.starts_with("done "));
                done >= target
            },
        );
        assert!(done >= 300);
        let recovered = recover(dir.path(), &mut known).await;
        assert!(recovered.live > 0);
        // The child found the index the last recovery rebuilt complete; the reopening after
        // the kill read only what the index's last durable commit did not cover.
        assert_eq!(read_on_open, 0);
        // A kill just after an index commit leaves nothing to replay, so none may be read;
        // never more than the segments hold.
        assert!(recovered.replayed <= recovered.rebuilt);
        if round > 1 {
            assert!(
                recovered.replayed < recovered.rebuilt,
                "replayed {} of {} records",
                recovered.replayed,
                recovered.rebuilt
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_mid_compaction_loses_no_acknowledged_object() {
    be_the_child_if_asked().await;
    let dir = tempfile::tempdir().unwrap();
    let mut known = BTreeMap::new();
    let mut compactions = 0;
    for round in 1..=4 {
        let target = jitter(round, 3);
        let mut removing = 0;
        let mut writes = 0;
        run_child(
            "a_kill_mid_compaction_loses_no_acknowledged_object",
            dir.path(),
            "compact",
            round,
            &mut known,
            |line| {
                writes += u64::from(line.starts_with("done "));
                if line.starts_with("compacted ") && !line.ends_with(" 0") {
                    removing += 1;
                }
                // Kill while the next compaction after `target` productive ones is running.
                removing >= target && writes >= 200
            },
        );
        compactions += removing;
        recover(dir.path(), &mut known).await;
    }
    assert!(
        compactions >= 12,
        "{compactions} compactions removed segments"
    );
}
