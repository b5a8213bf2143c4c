//! Memory files and search, store conformance through the operations layer: every case runs
//! on SQLite and on Postgres (scripts/test provides them; a missing backend fails).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod support;

use std::sync::Arc;

use noema_continuity::domain::memory::describe;
use noema_continuity::store::HitQuery;
use noema_store::sql::query;
use noema_store::with_pool;
use serde_json::{Value, json};
use support::*;

conformance!(
    write_read_append_keep_documents_and_revisions,
    search_is_term_based_ranked_and_never_stale,
    recent_lists_newest_first_with_filters,
    rebuild_repairs_a_damaged_index,
    appends_are_read_searched_and_rebuilt_as_one_document,
    tenants_and_namespaces_isolate_documents,
    concurrent_appends_never_lose_a_line,
    tasks_are_planning_state_per_tenant,
    concurrent_task_updates_never_lose_a_field,
    schedule_items_are_one_shot_reminders_per_tenant,
    tasks_and_pending_reminders_read_every_write_before_them,
);

async fn write(
    h: &Harness,
    caller: &noema_continuity::domain::access::Caller,
    path: &str,
    content: &str,
) -> Value {
    parse(
        &h.continuity
            .write_file(caller, &body(json!({"path": path, "content": content})))
            .await
            .unwrap(),
    )
}

async fn search(
    h: &Harness,
    caller: &noema_continuity::domain::access::Caller,
    request: Value,
) -> Value {
    parse(&h.continuity.search(caller, &body(request)).await.unwrap())
}

fn paths(answer: &Value) -> Vec<String> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap().to_owned())
        .collect()
}

async fn audit_actions(h: &Harness, action: &str) -> i64 {
    let (n,): (i64,) = with_pool!(&h.db, |pool| {
        query("SELECT COUNT(*) FROM audit_log WHERE action = $1")
            .bind(action)
            .fetch_one(pool)
            .await
            .unwrap()
    });
    n
}

async fn write_read_append_keep_documents_and_revisions(backend: Backend) {
    let h = harness(backend).await;
    let a = agent("agent:a");
    let first = write(
        &h,
        &a,
        "memory/core/identity.md",
        "# Identity\nI am #alpha.",
    )
    .await;
    assert_eq!(first["ok"], true);
    assert_eq!(first["path"], "memory/core/identity.md");
    assert_eq!(first["committed"], true);
    assert_eq!(first["durable"], true);
    let revision = first["latest_commit"].as_str().unwrap().to_owned();
    assert!(revision.starts_with("sha256:"), "{revision}");
    // The same content again changes nothing and names the same revision.
    let again = write(
        &h,
        &a,
        "memory/./core/identity.md",
        "# Identity\nI am #alpha.",
    )
    .await;
    assert_eq!(again["committed"], false);
    assert_eq!(again["path"], "memory/./core/identity.md");
    assert_eq!(again["latest_commit"], revision.as_str());
    let read = h
        .continuity
        .read_file(&a, &body(json!({"path": "memory/core/identity.md"})))
        .await
        .unwrap();
    assert_eq!(
        std::str::from_utf8(&read).unwrap(),
        r##"{"ok":true,"path":"memory/core/identity.md","content":"# Identity\nI am #alpha."}"##
    );

    // Appends: Python's json.dumps line per record, the document created by the first.
    for record in [r#"{"b":1,"a":"héllo","c":[1,2.5]}"#, r#"{"b":2}"#] {
        let answer = parse(
            &h.continuity
                .append_record(
                    &a,
                    format!(r#"{{"path":"memory/episodic/2026.jsonl","record":{record}}}"#)
                        .as_bytes(),
                )
                .await
                .unwrap(),
        );
        assert_eq!(answer["committed"], true);
    }
    let doc = h
        .store
        .memory_document("agent:a", "memory/episodic/2026.jsonl")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        doc.content,
        "{\"b\": 1, \"a\": \"héllo\", \"c\": [1, 2.5]}\n{\"b\": 2}\n"
    );
    assert_eq!((doc.size, doc.doc_type.as_str()), (48, "memory"));

    let missing = h
        .continuity
        .read_file(&a, &body(json!({"path": "memory/core/none.md"})))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&missing),
        (404, r#"{"detail":"File not found"}"#.to_owned())
    );

    // Core memory for context retrieval: the documents under memory/core, by path.
    write(&h, &a, "memory/core/values.md", "Be kind.").await;
    write(&h, &a, "memory/corex/other.md", "not core").await;
    let core: Vec<String> = h
        .store
        .memory_documents_under("agent:a", "memory/core")
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.path)
        .collect();
    assert_eq!(core, ["memory/core/identity.md", "memory/core/values.md"]);

    // Every change is audited; an unchanged write is not a change.
    assert_eq!(audit_actions(&h, "continuity.memory.write").await, 3);
    assert_eq!(audit_actions(&h, "continuity.memory.append").await, 2);
}

async fn search_is_term_based_ranked_and_never_stale(backend: Backend) {
    let h = harness(backend).await;
    let a = agent("agent:a");
    write(
        &h,
        &a,
        "memory/core/both.md",
        "The blue whales sing at dawn.",
    )
    .await;
    write(
        &h,
        &a,
        "journal/2026/one.md",
        "Whales migrate; nothing else here.",
    )
    .await;
    write(
        &h,
        &a,
        "memory/summaries/week.md",
        "---\ntype: summary\n---\nBlue skies over the bay.",
    )
    .await;
    write(&h, &a, "memory/core/unrelated.md", "Dolphins only.").await;

    // Any term matches; the document with both terms ranks first; no phrase needed.
    let answer = search(&h, &a, json!({"query": "whales blue"})).await;
    assert_eq!(answer["ok"], true);
    assert_eq!(answer["query"], "whales blue");
    assert_eq!(answer["sort_by"], "relevance");
    assert_eq!(answer["count"], 3);
    let found = paths(&answer);
    assert_eq!(found[0], "memory/core/both.md");
    assert!(found.contains(&"journal/2026/one.md".to_owned()));
    assert!(found.contains(&"memory/summaries/week.md".to_owned()));
    let first = &answer["results"][0];
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = vec![
        "importance",
        "modified_at",
        "path",
        "score",
        "size",
        "snippet",
        "tags",
        "type",
    ];
    expected.sort_unstable();
    assert_eq!(keys, expected);
    let scores: Vec<f64> = answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert!(scores[0] > scores[2], "{scores:?}");

    // Types filter, limit, recency order.
    let summaries = search(
        &h,
        &a,
        json!({"query": "blue", "include_types": ["SUMMARY"]}),
    )
    .await;
    assert_eq!(paths(&summaries), ["memory/summaries/week.md"]);
    assert_eq!(summaries["results"][0]["type"], "summary");
    let one = search(&h, &a, json!({"query": "whales blue", "limit": 1})).await;
    assert_eq!(paths(&one), ["memory/core/both.md"]);
    let recent = search(&h, &a, json!({"query": "whales blue", "sort_by": "recent"})).await;
    assert_eq!(
        paths(&recent),
        [
            "memory/summaries/week.md",
            "journal/2026/one.md",
            "memory/core/both.md"
        ]
    );

    // Written, then found at once; rewritten, the old words are gone at once.
    write(
        &h,
        &a,
        "memory/core/unrelated.md",
        "Now about humpback whales.",
    )
    .await;
    assert!(
        paths(&search(&h, &a, json!({"query": "humpback"})).await)
            .contains(&"memory/core/unrelated.md".to_owned())
    );
    assert!(paths(&search(&h, &a, json!({"query": "dolphins"})).await).is_empty());
    // Appended lines are searchable too, beyond the snippet's first 240 characters.
    let filler = "x".repeat(300);
    write(
        &h,
        &a,
        "memory/episodic/log.jsonl",
        &format!("{{\"note\": \"{filler}\"}}\n"),
    )
    .await;
    h.continuity
        .append_record(
            &a,
            &body(json!({"path": "memory/episodic/log.jsonl", "record": {"note": "narwhal"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        paths(&search(&h, &a, json!({"query": "narwhal"})).await),
        ["memory/episodic/log.jsonl"]
    );
    // A query without a term of two word characters finds nothing.
    assert_eq!(search(&h, &a, json!({"query": "a ! ?"})).await["count"], 0);

    // The plain store function the context retrieval uses.
    let hits = h
        .store
        .memory_hits(
            "agent:a",
            &HitQuery {
                terms: vec!["whales".into()],
                limit: 10,
                ..HitQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(hits.len(), 3);
}

async fn recent_lists_newest_first_with_filters(backend: Backend) {
    let h = harness(backend).await;
    let a = agent("agent:a");
    for (path, content) in [
        ("memory/core/a.md", "first"),
        ("journal/2026/b.md", "second"),
        (
            "memory/summaries/c.md",
            "---\ntype: summary\nimportance: 0.5\n---\nthird #tag",
        ),
    ] {
        write(&h, &a, path, content).await;
    }
    let answer = parse(&h.continuity.recent(&a, &body(json!({}))).await.unwrap());
    assert_eq!(answer["count"], 3);
    assert_eq!(
        paths(&answer),
        [
            "memory/summaries/c.md",
            "journal/2026/b.md",
            "memory/core/a.md"
        ]
    );
    // A listing's score is the document's importance.
    assert_eq!(answer["results"][0]["score"], 0.5);
    assert_eq!(answer["results"][0]["tags"], json!(["tag"]));
    assert_eq!(answer["results"][1]["score"], Value::Null);
    let text = String::from_utf8(
        h.continuity
            .recent(&a, &body(json!({"limit": 1})))
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(text.starts_with(r#"{"ok":true,"count":1,"results":[{"path":"memory/summaries/c.md","type":"summary","size":"#), "{text}");
    let journal = parse(
        &h.continuity
            .recent(
                &a,
                &body(json!({"include_types": ["journal"], "time_window_hours": 1})),
            )
            .await
            .unwrap(),
    );
    assert_eq!(paths(&journal), ["journal/2026/b.md"]);
    let err = h
        .continuity
        .recent(&a, &body(json!({"time_window_days": 0})))
        .await
        .unwrap_err();
    assert_eq!(refusal(&err).0, 422);
}

/// Removes a document's index row and plants a row without a document, as a crash or a bad
/// restore might leave them.
async fn damage_index(h: &Harness, backend: Backend, path: &str) {
    let (id,): (i64,) = with_pool!(&h.db, |pool| {
        query("SELECT id FROM memory_documents WHERE path = $1")
            .bind(path)
            .fetch_one(pool)
            .await
            .unwrap()
    });
    match backend {
        Backend::Sqlite => with_pool!(&h.db, |pool| {
            query("DELETE FROM memory_fts WHERE rowid = $1")
                .bind(id)
                .execute(pool)
                .await
                .unwrap();
            query("INSERT INTO memory_fts (rowid, tenant, path, body) VALUES (999999, 'agent:a', 'memory/ghost.md', 'ghost whales')")
                .execute(pool)
                .await
                .unwrap();
            // Search reads the documents' term counts: damaged alike.
            query("DELETE FROM memory_terms WHERE doc = $1")
                .bind(id)
                .execute(pool)
                .await
                .unwrap();
            query("DELETE FROM memory_term_documents WHERE doc = $1")
                .bind(id)
                .execute(pool)
                .await
                .unwrap();
            query("INSERT INTO memory_terms (term, doc, freq) VALUES ('ghost', 999999, 1), ('whales', 999999, 1)")
                .execute(pool)
                .await
                .unwrap();
            query("INSERT INTO memory_term_documents (doc, tokens) VALUES (999999, 2)")
                .execute(pool)
                .await
                .unwrap();
        }),
        Backend::Postgres => with_pool!(&h.db, |pool| {
            query("DELETE FROM memory_search WHERE id = $1")
                .bind(id)
                .execute(pool)
                .await
                .unwrap();
            query("INSERT INTO memory_search (id, tenant, terms) VALUES (999999, 'agent:a', to_tsvector('simple', 'ghost whales'))")
                .execute(pool)
                .await
                .unwrap();
        }),
    };
}

async fn rebuild_repairs_a_damaged_index(backend: Backend) {
    let h = harness(backend).await;
    let a = agent("agent:a");
    write(&h, &a, "memory/core/a.md", "orca whales").await;
    write(&h, &a, "memory/core/b.md", "beluga whales").await;
    write(&h, &a, "memory/core/c.md", "sperm whales").await;
    let status = parse(&h.continuity.index_status(&a).await.unwrap());
    assert_eq!(status["file_count"], 3);
    assert_eq!(status["sqlite_fts"], true);
    assert!(status["generated_at"].as_str().unwrap().ends_with('Z'));

    // Nothing to repair: the index was written with every document.
    let clean = parse(&h.continuity.index_rebuild(&a, b"").await.unwrap());
    assert_eq!(
        clean["incremental"],
        json!({"changed_count": 0, "removed_count": 0, "unchanged_count": 3})
    );

    damage_index(&h, backend, "memory/core/b.md").await;
    let before = paths(&search(&h, &a, json!({"query": "beluga"})).await);
    assert!(before.is_empty(), "{before:?}");
    let repaired = parse(&h.continuity.index_rebuild(&a, b"").await.unwrap());
    assert_eq!(repaired["file_count"], 3);
    assert_eq!(
        repaired["incremental"],
        json!({"changed_count": 1, "removed_count": 1, "unchanged_count": 2})
    );
    assert_eq!(repaired["committed_files"], json!([]));
    assert!(
        repaired["latest_commit"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(
        paths(&search(&h, &a, json!({"query": "beluga"})).await),
        ["memory/core/b.md"]
    );
    let whales = search(&h, &a, json!({"query": "whales ghost"})).await;
    assert_eq!(whales["count"], 3);
    assert!(!paths(&whales).contains(&"memory/ghost.md".to_owned()));
    assert_eq!(
        audit_actions(&h, "continuity.memory.index_rebuild").await,
        2
    );
}

async fn append(
    h: &Harness,
    caller: &noema_continuity::domain::access::Caller,
    path: &str,
    record: Value,
) -> Value {
    parse(
        &h.continuity
            .append_record(caller, &body(json!({"path": path, "record": record})))
            .await
            .unwrap(),
    )
}

/// How many appended lines document `path` keeps apart from its content.
async fn appended_rows(h: &Harness, path: &str) -> i64 {
    let (n,): (i64,) = with_pool!(&h.db, |pool| {
        query(
            "SELECT COUNT(*) FROM memory_appends a JOIN memory_documents d ON d.id = a.doc \
             WHERE d.path = $1",
        )
        .bind(path)
        .fetch_one(pool)
        .await
        .unwrap()
    });
    n
}

/// Appends are rows of their own (an append does not rewrite its document), yet the
/// document reads, describes, searches and rebuilds as its whole content, and a whole write
/// folds them back.
async fn appends_are_read_searched_and_rebuilt_as_one_document(backend: Backend) {
    let h = harness(backend).await;
    let a = agent("agent:a");
    let path = "memory/episodic/long.jsonl";
    // No final newline: the first append runs into the content's last word, so it is
    // written whole.
    write(&h, &a, path, "{\"start\": \"#origin here\"}").await;
    let mut expected = "{\"start\": \"#origin here\"}".to_owned();
    let mut revisions = Vec::new();
    for i in 0..40 {
        let note = if i == 17 {
            "an x-ray of the reef".to_owned()
        } else {
            format!("entry {i} about #tag{} and krill", i % 3)
        };
        let answer = append(&h, &a, path, json!({"i": i, "note": note})).await;
        assert_eq!(answer["committed"], true);
        revisions.push(answer["latest_commit"].as_str().unwrap().to_owned());
        expected.push_str(&format!("{{\"i\": {i}, \"note\": \"{note}\"}}\n"));
    }
    // Every append made a revision of its own.
    let distinct: std::collections::HashSet<&String> = revisions.iter().collect();
    assert_eq!(distinct.len(), 40);
    assert_eq!(appended_rows(&h, path).await, 39);

    let read = parse(
        &h.continuity
            .read_file(&a, &body(json!({"path": path})))
            .await
            .unwrap(),
    );
    assert_eq!(read["content"], expected.as_str());
    let doc = h
        .store
        .memory_document("agent:a", path)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(doc.content, expected);
    assert_eq!(doc.revision_id, revisions[39]);
    // Described as the whole content would be.
    let whole = describe(path, &expected);
    assert_eq!(doc.size, whole.size);
    assert_eq!(doc.snippet, whole.snippet);
    assert_eq!(doc.tags, serde_json::to_string(&whole.tags).unwrap());
    assert_eq!(
        serde_json::from_str::<Vec<String>>(&doc.tags).unwrap(),
        ["origin", "tag0", "tag1", "tag2"]
    );

    // Words of the content, of an appended line, and a phrase inside one.
    for query in ["origin", "krill", "tag2", "x-ray"] {
        assert_eq!(
            paths(&search(&h, &a, json!({"query": query})).await),
            [path],
            "{query}"
        );
    }
    let hit = &search(&h, &a, json!({"query": "krill"})).await["results"][0];
    assert_eq!(hit["size"], whole.size);
    assert_eq!(hit["snippet"], whole.snippet.as_str());

    // Nothing to repair after appends.
    let clean = parse(&h.continuity.index_rebuild(&a, b"").await.unwrap());
    assert_eq!(
        clean["incremental"],
        json!({"changed_count": 0, "removed_count": 0, "unchanged_count": 1})
    );

    // The appended line's index lost: search misses it, a rebuild brings it back.
    with_pool!(&h.db, |pool| match backend {
        Backend::Sqlite => {
            query(
                "DELETE FROM memory_fts_lines WHERE rowid IN (SELECT id FROM memory_appends \
                 WHERE line LIKE '%x-ray%')",
            )
            .execute(pool)
            .await
            .unwrap();
        }
        Backend::Postgres => {
            query("UPDATE memory_search SET terms = to_tsvector('simple', 'nothing')")
                .execute(pool)
                .await
                .unwrap();
        }
    });
    assert!(paths(&search(&h, &a, json!({"query": "x-ray"})).await).is_empty());
    let repaired = parse(&h.continuity.index_rebuild(&a, b"").await.unwrap());
    assert_eq!(
        repaired["incremental"],
        json!({"changed_count": 1, "removed_count": 0, "unchanged_count": 0})
    );
    assert_eq!(
        paths(&search(&h, &a, json!({"query": "x-ray"})).await),
        [path]
    );
    let rebuilt = h
        .store
        .memory_document("agent:a", path)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rebuilt.content, expected);
    assert_eq!(rebuilt.revision_id, revisions[39]);

    // More appends, then a whole write: the lines fold into it and their words are gone.
    append(&h, &a, path, json!({"note": "a walrus"})).await;
    assert_eq!(
        paths(&search(&h, &a, json!({"query": "walrus"})).await),
        [path]
    );
    write(&h, &a, path, "{\"fresh\": \"start\"}\n").await;
    assert_eq!(appended_rows(&h, path).await, 0);
    for gone in ["walrus", "x-ray", "krill"] {
        assert!(
            paths(&search(&h, &a, json!({"query": gone})).await).is_empty(),
            "{gone}"
        );
    }
    append(&h, &a, path, json!({"note": "seal"})).await;
    assert_eq!(appended_rows(&h, path).await, 1);
    assert_eq!(
        h.store
            .memory_document("agent:a", path)
            .await
            .unwrap()
            .unwrap()
            .content,
        "{\"fresh\": \"start\"}\n{\"note\": \"seal\"}\n"
    );
    let clean = parse(&h.continuity.index_rebuild(&a, b"").await.unwrap());
    assert_eq!(clean["incremental"]["changed_count"], 0);
}

async fn tenants_and_namespaces_isolate_documents(backend: Backend) {
    let h = harness(backend).await;
    let a = agent("agent:a");
    let b = agent("agent:b");
    write(&h, &a, "memory/core/secret.md", "the launch code is walrus").await;
    write(
        &h,
        &a,
        "memory/coordination/shared.md",
        "walrus meeting at noon",
    )
    .await;

    // Another tenant: the same path is missing, nothing is found or listed.
    let err = h
        .continuity
        .read_file(&b, &body(json!({"path": "memory/core/secret.md"})))
        .await
        .unwrap_err();
    assert_eq!(refusal(&err).0, 404);
    assert_eq!(search(&h, &b, json!({"query": "walrus"})).await["count"], 0);
    assert_eq!(
        parse(&h.continuity.recent(&b, &body(json!({}))).await.unwrap())["count"],
        0
    );
    assert_eq!(
        parse(&h.continuity.index_status(&b).await.unwrap())["file_count"],
        0
    );
    // Its own document of the same path is its own.
    write(&h, &b, "memory/core/secret.md", "nothing here").await;
    assert_eq!(
        h.store
            .memory_document("agent:a", "memory/core/secret.md")
            .await
            .unwrap()
            .unwrap()
            .content,
        "the launch code is walrus"
    );

    // A collaboration peer of tenant a: hits outside its read namespaces are left out,
    // reads there refused as the original refuses.
    let peer = caller_with(
        "agent:a",
        &["read:files", "search", "write:messages", "write:projects"],
        &["memory/coordination", "messages", "tasks"],
        &["memory/coordination/handoffs", "messages", "tasks"],
    );
    assert_eq!(
        paths(&search(&h, &peer, json!({"query": "walrus"})).await),
        ["memory/coordination/shared.md"]
    );
    let err = h
        .continuity
        .read_file(&peer, &body(json!({"path": "memory/core/secret.md"})))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            403,
            r#"{"detail":"Read path namespace not allowed: memory/core/secret.md"}"#.to_owned()
        )
    );
    let err = h
        .continuity
        .write_file(
            &peer,
            &body(json!({"path": "memory/core/x.md", "content": "x"})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            403,
            r#"{"detail":"Write path namespace not allowed: memory/core/x.md"}"#.to_owned()
        )
    );
    // Scopes follow the path: a journal write needs write:journal.
    let err = h
        .continuity
        .write_file(
            &peer,
            &body(json!({"path": "journal/x.md", "content": "x"})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            403,
            r#"{"detail":"Missing scope: write:journal"}"#.to_owned()
        )
    );
    let reader = caller_with("agent:a", &["read:files"], &["*"], &["*"]);
    let err = h
        .continuity
        .search(&reader, &body(json!({"query": "walrus"})))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (403, r#"{"detail":"Missing scope: search"}"#.to_owned())
    );
    let err = h.continuity.index_status(&reader).await.unwrap_err();
    assert_eq!(
        refusal(&err),
        (403, r#"{"detail":"Missing scope: read:index"}"#.to_owned())
    );
}

async fn concurrent_appends_never_lose_a_line(backend: Backend) {
    let h = Arc::new(harness(backend).await);
    let mut tasks = Vec::new();
    for i in 0..32 {
        let h = Arc::clone(&h);
        tasks.push(tokio::spawn(async move {
            let a = agent("agent:a");
            h.continuity
                .append_record(
                    &a,
                    &body(json!({"path": "memory/episodic/busy.jsonl", "record": {"n": i}})),
                )
                .await
                .unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let doc = h
        .store
        .memory_document("agent:a", "memory/episodic/busy.jsonl")
        .await
        .unwrap()
        .unwrap();
    let mut seen: Vec<i64> = doc
        .content
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["n"]
                .as_i64()
                .unwrap()
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..32).collect::<Vec<_>>());
}

async fn create_task(
    h: &Harness,
    caller: &noema_continuity::domain::access::Caller,
    body: Value,
) -> Value {
    parse(
        &h.continuity
            .create_task(caller, &serde_json::to_vec(&body).unwrap())
            .await
            .unwrap(),
    )
}

async fn tasks_are_planning_state_per_tenant(backend: Backend) {
    let h = harness(backend).await;
    let a = agent("agent:a");
    let created = create_task(
        &h,
        &a,
        json!({"task_id": "t-1", "title": "Tag whales", "owner_peer": "peer-1",
               "collaborators": ["peer-2"], "blocked_by": ["t-0"]}),
    )
    .await;
    assert_eq!(created["path"], "tasks/open/t-1.json");
    assert_eq!(created["task"]["status"], "open");
    assert!(
        created["latest_commit"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    create_task(
        &h,
        &a,
        json!({"task_id": "t-2", "title": "Count them", "owner_peer": "peer-2",
               "status": "blocked", "thread_id": "th-1"}),
    )
    .await;
    let dup = h
        .continuity
        .create_task(&a, br#"{"task_id":"t-1","title":"again","owner_peer":"p"}"#)
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&dup),
        (409, r#"{"detail":"Task already exists: t-1"}"#.to_owned())
    );

    // Metadata keeps the caller's key order.
    let text = String::from_utf8(
        h.continuity
            .update_task(
                &a,
                "t-1",
                br#"{"status":"in_progress","title":null,"metadata":{"z":1,"a":2}}"#,
            )
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(text.contains(r#""title":"Tag whales""#), "{text}");
    assert!(text.contains(r#""metadata":{"z":1,"a":2}"#), "{text}");
    assert!(
        text.contains(r#""committed_files":["tasks/open/t-1.json"]"#),
        "{text}"
    );
    let done = parse(
        &h.continuity
            .update_task(&a, "t-1", br#"{"status":"done"}"#)
            .await
            .unwrap(),
    );
    assert_eq!(done["path"], "tasks/done/t-1.json");
    assert_eq!(
        done["committed_files"],
        json!(["tasks/done/t-1.json", "tasks/open/t-1.json"])
    );
    let reopen = h
        .continuity
        .update_task(&a, "t-1", br#"{"status":"open"}"#)
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&reopen),
        (
            409,
            r#"{"detail":"Invalid task status transition: done -> open"}"#.to_owned()
        )
    );
    let missing = h
        .continuity
        .update_task(&a, "nope", b"{}")
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&missing),
        (404, r#"{"detail":"Task not found: nope"}"#.to_owned())
    );

    let query = |params: Value| {
        let h = &h;
        let a = &a;
        async move {
            parse(
                &h.continuity
                    .query_tasks(a, &serde_json::to_vec(&params).unwrap())
                    .await
                    .unwrap(),
            )
        }
    };
    let all = query(json!({})).await;
    assert_eq!(all["count"], 2);
    // Newest update first, then the greater id: the original's reverse sort on
    // (updated_at, task_id), stamps in whole seconds (so ties happen within a second).
    let keyed: Vec<(&str, &str)> = all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["updated_at"].as_str().unwrap(),
                t["task_id"].as_str().unwrap(),
            )
        })
        .collect();
    let mut expected = keyed.clone();
    expected.sort_by(|a, b| b.cmp(a));
    assert_eq!(keyed, expected);
    assert!(keyed.iter().all(|(at, _)| at.len() == 20), "{keyed:?}");
    assert_eq!(query(json!({"status": "done"})).await["count"], 1);
    assert_eq!(
        query(json!({"collaborator": "peer-2"})).await["tasks"][0]["task_id"],
        "t-1"
    );
    assert_eq!(
        query(json!({"thread_id": "th-1"})).await["tasks"][0]["task_id"],
        "t-2"
    );
    assert_eq!(query(json!({"owner_peer": "peer-9"})).await["count"], 0);
    assert_eq!(query(json!({"limit": "1"})).await["count"], 1);

    // For context retrieval: the tenant's tasks with their blockers.
    let tasks = h
        .continuity
        .tasks_of(
            "agent:a",
            &noema_continuity::domain::tasks::TaskQuery {
                limit: 100,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let t1 = tasks.iter().find(|t| t.task_id == "t-1").unwrap();
    assert_eq!(t1.blocked_by(), ["t-0"]);

    // Another tenant has none of them; a token without the tasks namespace is refused.
    let b = agent("agent:b");
    assert_eq!(
        parse(&h.continuity.query_tasks(&b, b"{}").await.unwrap())["count"],
        0
    );
    let err = h
        .continuity
        .update_task(&b, "t-2", b"{}")
        .await
        .unwrap_err();
    assert_eq!(refusal(&err).0, 404);
    let outsider = caller_with(
        "agent:a",
        &["read:files", "write:projects"],
        &["memory"],
        &["memory"],
    );
    let err = h
        .continuity
        .query_tasks(&outsider, b"{}")
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            403,
            r#"{"detail":"Read path namespace not allowed: tasks/open/x.json"}"#.to_owned()
        )
    );
    let err = h
        .continuity
        .create_task(
            &outsider,
            br#"{"task_id":"t-9","title":"x","owner_peer":"p"}"#,
        )
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            403,
            r#"{"detail":"Write path namespace not allowed: tasks/open/t-9.json"}"#.to_owned()
        )
    );
}

async fn concurrent_task_updates_never_lose_a_field(backend: Backend) {
    let h = Arc::new(harness(backend).await);
    create_task(
        &h,
        &agent("agent:a"),
        json!({"task_id": "t-1", "title": "t", "owner_peer": "p"}),
    )
    .await;
    let fields = ["title", "description", "owner_peer", "due_at", "thread_id"];
    let mut handles = Vec::new();
    for field in fields {
        let h = Arc::clone(&h);
        handles.push(tokio::spawn(async move {
            let body = serde_json::to_vec(&json!({ field: format!("set-{field}") })).unwrap();
            h.continuity
                .update_task(&agent("agent:a"), "t-1", &body)
                .await
                .unwrap();
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    let task = parse(
        &h.continuity
            .query_tasks(&agent("agent:a"), b"{}")
            .await
            .unwrap(),
    );
    for field in fields {
        assert_eq!(task["tasks"][0][field], format!("set-{field}"), "{task}");
    }
}

/// What a context retrieve reads of the tenant's tasks and schedule (kept in memory on
/// SQLite) follows every write: each is read twice, the second read possibly from memory.
async fn tasks_and_pending_reminders_read_every_write_before_them(backend: Backend) {
    let h = harness(backend).await;
    let a = agent("agent:a");
    let statuses = || async {
        let mut seen = Vec::new();
        for _ in 0..2 {
            let rows = h.store.tasks(&a.tenant, &Default::default()).await.unwrap();
            seen.push(
                rows.iter()
                    .map(|t| format!("{} {}", t.task_id, t.status))
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(seen[0], seen[1]);
        seen.remove(0)
    };
    let pending = || async {
        let mut seen = Vec::new();
        for _ in 0..2 {
            let items = h.store.schedule_items(&a.tenant, true).await.unwrap();
            seen.push(items.iter().map(|i| i.title.clone()).collect::<Vec<_>>());
        }
        assert_eq!(seen[0], seen[1]);
        seen.remove(0)
    };
    assert!(statuses().await.is_empty());
    create_task(
        &h,
        &a,
        json!({"task_id": "t-1", "title": "Tag whales", "owner_peer": "peer-1"}),
    )
    .await;
    assert_eq!(statuses().await, ["t-1 open"]);
    h.continuity
        .update_task(&a, "t-1", br#"{"status":"done"}"#)
        .await
        .unwrap();
    assert_eq!(statuses().await, ["t-1 done"]);

    assert!(pending().await.is_empty());
    let created = h
        .continuity
        .create_schedule_item(
            &a,
            br#"{"kind":"reminder","title":"Count whales","due_at":"2099-01-01T09:00:00Z"}"#,
        )
        .await
        .unwrap();
    assert_eq!(pending().await, ["Count whales"]);
    let id = parse(&created.body)["item"]["schedule_id"]
        .as_str()
        .unwrap()
        .to_owned();
    h.continuity
        .acknowledge_schedule_item(
            &a,
            &id,
            br#"{"expected_version":1,"status":"done","reason":"counted"}"#,
        )
        .await
        .unwrap();
    assert!(
        pending().await.is_empty(),
        "an acknowledged reminder is still pending"
    );
}

async fn schedule_items_are_one_shot_reminders_per_tenant(backend: Backend) {
    let h = harness(backend).await;
    let a = agent("agent:a");
    let due = "2099-01-01T09:00:00Z";
    let body = format!(
        r#"{{"kind":"reminder","title":"Check whales","due_at":"{due}","subject_kind":"thread","subject_id":"th-1","metadata":{{"b":1,"a":"x"}},"idempotency_key":"k1"}}"#
    );
    let created = h
        .continuity
        .create_schedule_item(&a, body.as_bytes())
        .await
        .unwrap();
    assert!(created.created);
    let first = parse(&created.body);
    let id = first["item"]["schedule_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("sched_") && id.len() == 38, "{id}");
    assert_eq!(first["item"]["derived_state"], "scheduled");
    assert_eq!(first["item"]["created_by"], "agent:a");
    assert_eq!(first["item"]["version"], 1);
    // Metadata comes back canonical (sorted), as the original stores it.
    assert!(
        String::from_utf8(created.body.clone())
            .unwrap()
            .contains(r#""metadata":{"a":"x","b":1}"#)
    );
    // The same request again is an exact replay: not created, the same item.
    let replay = h
        .continuity
        .create_schedule_item(&a, body.as_bytes())
        .await
        .unwrap();
    assert!(!replay.created);
    assert_eq!(parse(&replay.body)["item"]["schedule_id"], id.as_str());
    // The same key for another item is a conflict.
    let other =
        format!(r#"{{"kind":"reminder","title":"Other","due_at":"{due}","idempotency_key":"k1"}}"#);
    let err = h
        .continuity
        .create_schedule_item(&a, other.as_bytes())
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (409, r#"{"detail":{"code":"idempotency_key_conflict","field":"idempotency_key","message":"idempotency_key already exists for a different schedule item"}}"#.to_owned())
    );
    let past = br#"{"kind":"reminder","title":"Late","due_at":"2020-01-01T00:00:00Z"}"#;
    let err = h
        .continuity
        .create_schedule_item(&a, past)
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err).1,
        r#"{"detail":{"code":"due_at_not_future","field":"due_at","message":"due_at must be in the future"}}"#
    );

    let got = parse(&h.continuity.get_schedule_item(&a, &id).await.unwrap());
    assert_eq!(got["item"], first["item"]);
    let err = h
        .continuity
        .get_schedule_item(&a, "sched_nope")
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            404,
            r#"{"detail":{"code":"schedule_not_found","schedule_id":"sched_nope","warnings":[]}}"#
                .to_owned()
        )
    );

    // Patch at the current version; a stale version is refused.
    let patched = parse(
        &h.continuity
            .update_schedule_item(&a, &id, br#"{"expected_version":1,"title":"Count whales"}"#)
            .await
            .unwrap(),
    );
    assert_eq!(
        (
            patched["updated"].clone(),
            patched["item"]["version"].clone()
        ),
        (json!(true), json!(2))
    );
    let err = h
        .continuity
        .update_schedule_item(&a, &id, br#"{"expected_version":1,"title":"again"}"#)
        .await
        .unwrap_err();
    assert_eq!(refusal(&err).0, 409);

    // Listing: filters, pagination, retired hidden unless asked for.
    let second =
        r#"{"kind":"task_nudge","title":"Nudge","due_at":"2098-01-01T00:00:00Z","task_id":"t-2"}"#;
    let nudge = parse(
        &h.continuity
            .create_schedule_item(&a, second.as_bytes())
            .await
            .unwrap()
            .body,
    );
    let nudge_id = nudge["item"]["schedule_id"].as_str().unwrap().to_owned();
    let list = |q: Value| {
        let h = &h;
        let a = &a;
        async move {
            parse(
                &h.continuity
                    .list_schedule_items(a, &serde_json::to_vec(&q).unwrap())
                    .await
                    .unwrap(),
            )
        }
    };
    let all = list(json!({})).await;
    assert_eq!(
        (all["count"].clone(), all["total"].clone()),
        (json!(2), json!(2))
    );
    // Earliest due first.
    assert_eq!(all["items"][0]["schedule_id"], nudge_id.as_str());
    assert_eq!(list(json!({"task_id": "t-2"})).await["count"], 1);
    assert_eq!(
        list(json!({"subject_kind": "thread", "subject_id": "th-1"})).await["count"],
        1
    );
    assert_eq!(list(json!({"due": "true"})).await["count"], 0);
    let page = list(json!({"limit": "1", "offset": "1"})).await;
    assert_eq!(
        (
            page["count"].clone(),
            page["total"].clone(),
            page["limit"].clone(),
            page["offset"].clone()
        ),
        (json!(1), json!(2), json!(1), json!(1))
    );

    // Acknowledge (done), then retire; retired items are listed only when asked for.
    let done = parse(
        &h.continuity
            .acknowledge_schedule_item(
                &a,
                &nudge_id,
                br#"{"expected_version":1,"status":"done","reason":"counted"}"#,
            )
            .await
            .unwrap(),
    );
    assert_eq!(done["item"]["status"], "done");
    assert_eq!(done["item"]["derived_state"], "terminal");
    assert_eq!(done["item"]["terminal_reason"], "counted");
    let again = parse(
        &h.continuity
            .acknowledge_schedule_item(&a, &nudge_id, br#"{"status":"done","reason":"counted"}"#)
            .await
            .unwrap(),
    );
    assert_eq!(again["updated"], false);
    parse(
        &h.continuity
            .retire_schedule_item(&a, &nudge_id, br#"{"expected_version":2}"#)
            .await
            .unwrap(),
    );
    assert_eq!(list(json!({})).await["count"], 1);
    assert_eq!(list(json!({"include_retired": "true"})).await["count"], 2);

    // For context retrieval: pending items scoped to a subject or its thread/task links.
    let scoped = h
        .continuity
        .pending_schedule_items("agent:a", &[("thread".to_owned(), "th-1".to_owned())])
        .await
        .unwrap();
    assert_eq!(scoped.len(), 1);
    assert_eq!(scoped[0].schedule_id, id);

    // Another tenant sees none of it; a token without the schedule's namespace is refused.
    let b = agent("agent:b");
    assert_eq!(
        parse(&h.continuity.list_schedule_items(&b, b"{}").await.unwrap())["count"],
        0
    );
    assert_eq!(
        refusal(&h.continuity.get_schedule_item(&b, &id).await.unwrap_err()).0,
        404
    );
    let peer = caller_with(
        "agent:a",
        &["read:files", "search", "write:messages", "write:projects"],
        &["memory/coordination", "messages", "tasks"],
        &["memory/coordination/handoffs", "messages", "tasks"],
    );
    assert_eq!(
        refusal(
            &h.continuity
                .list_schedule_items(&peer, b"{}")
                .await
                .unwrap_err()
        ),
        (
            403,
            r#"{"detail":"Read path namespace not allowed: memory/schedule/schedule.db"}"#
                .to_owned()
        )
    );
}
