//! SQLite: search's relevance, computed from the stored term counts by the tenant's
//! in-memory index, is FTS5's own `bm25()` over the documents whole, bit for bit in a store of
//! one tenant, and the hits come in the order FTS5's ranking gives them, through writes,
//! rewrites, appends (to a document without a final newline too), and a rebuild after the
//! index and the counts were damaged. Appended lines are index rows of their own, so the
//! oracle indexes each document whole in a table of its own. FTS5's statistics are
//! table-wide; search's are the tenant's: another tenant's documents never move a tenant's
//! relevances.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use noema_continuity::domain::memory::appended_revision_id;
use noema_continuity::store::HitQuery;
use noema_store::sql::query;
use noema_store::with_pool;
use serde_json::json;
use support::*;

/// FTS5's own ranking of the tenant's documents: `(path, relevance)`, best first, from a
/// table holding every tenant's documents whole (FTS5's statistics are the table's), as
/// the original indexes its files.
async fn fts5_ranking(h: &Harness, tenant: &str, terms: &[&str]) -> Vec<(String, f64)> {
    let matching = terms
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(" OR ");
    with_pool!(&h.db, |pool| {
        // A temporary table is the connection's: every statement in one transaction, rolled
        // back when it is dropped.
        let mut conn = pool.begin().await.unwrap();
        query(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.whole_fts USING fts5(tenant UNINDEXED, \
             path, body, tokenize = 'unicode61 remove_diacritics 2')",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        query("DELETE FROM temp.whole_fts")
            .execute(&mut conn)
            .await
            .unwrap();
        query(
            "INSERT INTO temp.whole_fts (rowid, tenant, path, body) SELECT d.id, d.tenant, \
             d.path, d.content || COALESCE((SELECT group_concat(a.line, '' ORDER BY a.id) \
             FROM memory_appends a WHERE a.doc = d.id), '') FROM memory_documents d",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        query(
            "SELECT d.path, -bm25(whole_fts, 0.0, 2.0, 1.0) FROM temp.whole_fts \
             CROSS JOIN memory_documents d ON d.id = whole_fts.rowid \
             WHERE whole_fts MATCH $1 AND d.tenant = $2 \
             ORDER BY -bm25(whole_fts, 0.0, 2.0, 1.0) + COALESCE(d.importance, 0) DESC, \
             d.path ASC",
        )
        .bind(matching)
        .bind(tenant)
        .fetch_all(&mut conn)
        .await
        .unwrap()
    })
}

/// What search answers: `(path, relevance)` in its order.
async fn counted_ranking(
    h: &Harness,
    tenant: &str,
    terms: &[&str],
    limit: i64,
) -> Vec<(String, f64)> {
    h.store
        .memory_hits(
            tenant,
            &HitQuery {
                terms: terms.iter().map(|t| (*t).to_owned()).collect(),
                limit,
                ..HitQuery::default()
            },
        )
        .await
        .unwrap()
        .into_iter()
        .map(|hit| (hit.path, hit.relevance))
        .collect()
}

const QUERIES: &[&[&str]] = &[
    &["whales"],
    &["blue", "whales"],
    &["the"],
    &["the", "krill", "dawn"],
    &["memory"],
    &["episodic", "the"],
    &["abc"],
    &["abc5"],
    &["nothing"],
];

/// In a store of agent:a alone, search's relevance and order are FTS5's.
async fn assert_same_rankings(h: &Harness) {
    let tenant = "agent:a";
    for terms in QUERIES {
        let expected = fts5_ranking(h, tenant, terms).await;
        assert_eq!(
            counted_ranking(h, tenant, terms, 1000).await,
            expected,
            "{terms:?}"
        );
        // A limit keeps the best ones.
        let best: Vec<_> = expected.iter().take(2).cloned().collect();
        assert_eq!(counted_ranking(h, tenant, terms, 2).await, best);
    }
}

/// Tenant `agent:a`'s document at `path`, which exists.
async fn stored(h: &Harness, path: &str) -> noema_continuity::store::MemoryDocument {
    h.store
        .memory_document("agent:a", path)
        .await
        .unwrap()
        .unwrap()
}

/// Text of `n` sentences drawn in turn from a small vocabulary.
fn text(seed: usize, n: usize) -> String {
    const WORDS: &[&str] = &[
        "the", "blue", "whales", "sing", "at", "dawn", "krill", "the", "ocean", "deep", "the",
        "memory", "tide",
    ];
    (0..n)
        .map(|i| {
            (0..(3 + (seed + i) % 7))
                .map(|k| WORDS[(seed * 7 + i * 3 + k * 5) % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ")
                + "."
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Writes `docs` documents of the kinds search sees for `tenant`.
async fn fill(h: &Harness, tenant: &str, docs: usize) {
    let caller = agent(tenant);
    for i in 0..docs {
        let (path, content) = match i % 3 {
            0 => (
                format!("memory/core/note-{i}.md"),
                format!("---\nimportance: 0.{i}\n---\n{}", text(i, 2 + i)),
            ),
            1 => (format!("journal/2026/day-{i}.md"), text(i, 1 + 2 * i)),
            _ => (
                format!("memory/episodic/whales-{i}.jsonl"),
                format!("{}\n", json!({"text": text(i, i)})),
            ),
        };
        h.continuity
            .write_file(&caller, &body(json!({"path": path, "content": content})))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counted_relevance_is_fts5s_bm25() {
    let h = harness(Backend::Sqlite).await;
    fill(&h, "agent:a", 12).await;
    assert_same_rankings(&h).await;

    let a = agent("agent:a");
    // Rewrites, and appends counted line by line, to a document without a final newline too.
    h.continuity
        .write_file(
            &a,
            &body(json!({"path": "memory/core/note-3.md", "content": "krill only"})),
        )
        .await
        .unwrap();
    for i in 0..6 {
        h.continuity
            .append_record(
                &a,
                &body(json!({"path": "memory/episodic/whales-2.jsonl", "record": {"text": text(i, 2)}})),
            )
            .await
            .unwrap();
    }
    h.continuity
        .write_file(
            &a,
            &body(json!({"path": "memory/episodic/seam.jsonl", "content": "tail abc"})),
        )
        .await
        .unwrap();
    h.continuity
        .append_record(
            &a,
            &body(json!({"path": "memory/episodic/seam.jsonl", "record": {"abc": 5}})),
        )
        .await
        .unwrap();
    h.continuity
        .append_record(
            &a,
            &body(json!({"path": "memory/episodic/new.jsonl", "record": {"text": "the whales"}})),
        )
        .await
        .unwrap();
    assert_same_rankings(&h).await;

    // A damaged index, rebuilt: the counts follow the rows again.
    with_pool!(&h.db, |pool| {
        query(
            "DELETE FROM memory_fts WHERE rowid = \
             (SELECT id FROM memory_documents WHERE path = 'journal/2026/day-4.md')",
        )
        .execute(pool)
        .await
        .unwrap();
        // Counts lost, of a document written whole and of one with lines appended as rows
        // of their own (whose counts stay with the lines): each is counted whole again.
        for path in ["memory/core/note-0.md", "memory/episodic/whales-2.jsonl"] {
            query("DELETE FROM memory_terms WHERE doc = (SELECT id FROM memory_documents WHERE path = $1)")
                .bind(path)
                .execute(pool)
                .await
                .unwrap();
            query("DELETE FROM memory_term_documents WHERE doc = (SELECT id FROM memory_documents WHERE path = $1)")
                .bind(path)
                .execute(pool)
                .await
                .unwrap();
        }
    });
    h.continuity.index_rebuild(&a, b"").await.unwrap();
    let (totals_documents,): (i64,) = with_pool!(&h.db, |pool| {
        query("SELECT documents FROM memory_term_totals")
            .fetch_one(pool)
            .await
            .unwrap()
    });
    let (rows,): (i64,) = with_pool!(&h.db, |pool| {
        query("SELECT COUNT(*) FROM memory_term_documents")
            .fetch_one(pool)
            .await
            .unwrap()
    });
    assert_eq!(totals_documents, rows);
    assert_same_rankings(&h).await;

    // Lines appended as rows of their own, then the document written whole: their counts
    // are folded into the document's, searched from memory and loaded afresh alike.
    for i in 0..3 {
        h.continuity
            .append_record(
                &a,
                &body(json!({"path": "memory/episodic/whales-5.jsonl", "record": {"text": text(i, 3)}})),
            )
            .await
            .unwrap();
    }
    let (kept,): (i64,) = with_pool!(&h.db, |pool| {
        query(
            "SELECT COUNT(*) FROM memory_appends WHERE terms IS NOT NULL AND doc = \
             (SELECT id FROM memory_documents WHERE path = 'memory/episodic/whales-5.jsonl')",
        )
        .fetch_one(pool)
        .await
        .unwrap()
    });
    assert_eq!(kept, 3, "an append keeps its line's counts with the line");
    assert_same_rankings(&h).await;
    h.continuity
        .write_file(
            &a,
            &body(json!({"path": "memory/episodic/whales-2.jsonl", "content": "the krill\n"})),
        )
        .await
        .unwrap();
    assert_same_rankings(&h).await;
    h.continuity.index_rebuild(&a, b"").await.unwrap();
    assert_same_rankings(&h).await;

    // Appends arriving together commit in groups, several to one document: each finds the
    // document as the one before it left it.
    let paths = [
        "memory/episodic/whales-8.jsonl",
        "memory/episodic/whales-11.jsonl",
    ];
    let mut before = Vec::new();
    for path in paths {
        before.push(stored(&h, path).await);
    }
    let appends = (0..40).map(|i| {
        let path = format!("memory/episodic/whales-{}.jsonl", [8, 11][i % 2]);
        let record = json!({"text": text(i, 2), "n": i});
        let (continuity, a) = (&h.continuity, &a);
        async move {
            continuity
                .append_record(a, &body(json!({"path": path, "record": record})))
                .await
                .unwrap()
        }
    });
    futures::future::join_all(appends).await;
    for (path, before) in paths.into_iter().zip(before) {
        let document = stored(&h, path).await;
        assert_eq!(document.size, document.content.len() as i64, "{path}");
        let appended = document.content.strip_prefix(&before.content).unwrap();
        assert_eq!(appended.lines().count(), 20, "{path}");
        // Each line's revision names the one before it, in the content's order.
        let revision = appended
            .split_inclusive('\n')
            .fold(before.revision_id, |previous, line| {
                appended_revision_id(&previous, path, line)
            });
        assert_eq!(document.revision_id, revision, "{path}");
    }
    assert_same_rankings(&h).await;

    // Appends and whole writes to one document arriving together share groups: the appends
    // held for the group's one write of their rows land before a whole write reads the
    // document, so nothing is lost or counted twice.
    let path = "memory/episodic/whales-14.jsonl";
    let writes = (0..30).map(|i| {
        let (continuity, a) = (&h.continuity, &a);
        async move {
            if i % 10 == 9 {
                let content = format!("{}\n", json!({"text": text(100 + i, 3), "whole": i}));
                continuity
                    .write_file(a, &body(json!({"path": path, "content": content})))
                    .await
                    .unwrap();
            } else {
                let record = json!({"text": text(200 + i, 2), "n": i});
                continuity
                    .append_record(a, &body(json!({"path": path, "record": record})))
                    .await
                    .unwrap();
            }
        }
    });
    futures::future::join_all(writes).await;
    let document = stored(&h, path).await;
    assert_eq!(document.size, document.content.len() as i64);
    // The last whole write's line, then every record appended after it.
    let whole = document.content.lines().next().unwrap();
    assert!(whole.contains(r#""whole":"#), "{}", document.content);
    assert!(
        document
            .content
            .lines()
            .skip(1)
            .all(|line| line.contains(r#""n":"#))
    );
    assert_same_rankings(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_documents_never_move_relevance() {
    let alone = harness(Backend::Sqlite).await;
    fill(&alone, "agent:a", 12).await;
    let b_alone = harness(Backend::Sqlite).await;
    fill(&b_alone, "agent:b", 5).await;
    let shared = harness(Backend::Sqlite).await;
    fill(&shared, "agent:a", 12).await;
    // One search loads agent:a's index before agent:b writes: its writes must not reach it.
    counted_ranking(&shared, "agent:a", &["whales"], 1000).await;
    fill(&shared, "agent:b", 5).await;
    for terms in QUERIES {
        assert_eq!(
            counted_ranking(&shared, "agent:a", terms, 1000).await,
            counted_ranking(&alone, "agent:a", terms, 1000).await,
            "{terms:?}"
        );
        assert_eq!(
            counted_ranking(&shared, "agent:b", terms, 1000).await,
            counted_ranking(&b_alone, "agent:b", terms, 1000).await,
            "{terms:?}"
        );
    }
    // FTS5's own relevance does move with the other tenant's documents (its statistics are
    // the table's): the comparison above can tell them apart.
    assert_ne!(
        fts5_ranking(&shared, "agent:a", &["whales"]).await,
        fts5_ranking(&alone, "agent:a", &["whales"]).await
    );
}
