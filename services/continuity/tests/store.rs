//! The continuity store conformance suite, through the operations layer: every case runs on
//! SQLite + files and on Postgres + S3 (scripts/test provides them; a missing backend fails).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use noema_continuity::domain::cold::cold_gzip;
use noema_continuity::domain::json::canonical_json;
use noema_continuity::domain::model::SubjectKind;
use noema_continuity::domain::subject::SubjectKey;
use noema_continuity::domain::timestamp::{format_compact, format_iso};
use noema_continuity::domain::write::archive_envelope;
use noema_continuity::ops::Options;
use noema_continuity::store::{ArchiveWrite, CapsuleWrite, Refusal, RevisionWrite, Write};
use noema_core::audit::AuditDraft;
use noema_store::sql::query;
use noema_store::with_pool;
use serde_json::{Value, json};
use support::*;

conformance!(
    writes_chain_revisions_and_move_both_pointers,
    a_write_computed_on_a_moved_subject_writes_nothing,
    a_write_built_on_a_head_that_never_landed_writes_nothing,
    revisions_and_audit_are_append_only_and_chained,
    an_idempotency_key_answers_its_first_result,
    archive_and_delete_move_tiers,
    a_list_sees_every_write_before_it,
    a_read_sees_every_write_before_it,
    cold_store_and_rehydrate_are_byte_exact,
    a_cold_store_rides_out_a_failed_put_under_the_one_write_retry,
    retention_apply_drains_a_backlog,
    tenants_never_see_each_other,
    the_backup_drill_counts_and_reports_bad_artifacts,
    concurrent_patches_never_lose_an_update,
);

async fn writes_chain_revisions_and_move_both_pointers(backend: Backend) {
    let h = harness(backend).await;
    let alice = agent("agent:alice");
    let first = h
        .continuity
        .upsert(&alice, &upsert("user", "Alice", &at(1), &["one"]))
        .await
        .unwrap();
    let answer = parse(&first.body);
    assert_eq!(
        (answer["created"].as_bool(), answer["updated"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(answer["latest_commit"], first.revision_id.as_str());
    assert!(first.written && first.revision_id.starts_with("sha256:"));
    // The original's key order (the domain's JSON keeps it).
    let ordered = noema_continuity::domain::json::Json::parse(&first.body).unwrap();
    assert_eq!(
        ordered.as_object().unwrap().keys().collect::<Vec<_>>(),
        [
            "ok",
            "path",
            "created",
            "updated",
            "durable",
            "latest_commit",
            "capsule_sha256",
            "normalizations_applied",
            "warnings",
            "recovery_warnings",
            "fallback_warning_detail"
        ]
    );

    // The same capsule again: nothing written, the same revision.
    let same = h
        .continuity
        .upsert(&alice, &upsert("user", "Alice", &at(1), &["one"]))
        .await
        .unwrap();
    assert!(!same.written);
    assert_eq!(same.revision_id, first.revision_id);
    assert_eq!(parse(&same.body)["updated"], false);

    let second = h
        .continuity
        .upsert(&alice, &upsert("user", "Alice", &at(2), &["two"]))
        .await
        .unwrap();
    assert_eq!(parse(&second.body)["updated"], true);
    let patched = h
        .continuity
        .patch(
            &alice,
            &body(json!({"subject_kind": "user", "subject_id": "alice", "updated_at": at(3),
                "operations": [{"target": "continuity.top_priorities", "action": "append", "value": "three"}]})),
        )
        .await
        .unwrap();
    assert_eq!(parse(&patched.body)["operations_applied"], 1);

    // The read sees the patch; its capsule hashes to capsule_sha256.
    let read = h
        .continuity
        .read(&alice, &read_body("user", "Alice"))
        .await
        .unwrap();
    let answer = parse(&read.body);
    assert_eq!(
        answer["capsule"]["continuity"]["top_priorities"],
        json!(["two", "three"])
    );
    assert_eq!(
        (read.source_state, read.revision_id.as_str()),
        ("active", patched.revision_id.as_str())
    );
    assert_eq!(read.capsule_sha256, patched.capsule_sha256);

    // History: three revisions, newest first, chained.
    let history = h
        .continuity
        .history(&alice, "user", "alice", None, 10)
        .await
        .unwrap();
    assert!(history.chain_intact);
    let ids: Vec<&str> = history
        .revisions
        .iter()
        .map(|r| r.revision_id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            &patched.revision_id,
            &second.revision_id,
            &first.revision_id
        ]
    );
    assert_eq!(history.revisions[0].previous_id, second.revision_id);
    assert_eq!(history.revisions[0].operation, "patch");
    // Paged: one at a time, the cursor continues.
    let page = h
        .continuity
        .history(&alice, "user", "alice", None, 1)
        .await
        .unwrap();
    let next = h
        .continuity
        .history(&alice, "user", "alice", page.next, 1)
        .await
        .unwrap();
    assert_eq!(next.revisions[0].revision_id, second.revision_id);

    // The fallback moved with the active capsule: with the active capsule archived, a
    // fallback read answers the last write.
    h.continuity
        .archive(
            &alice,
            &body(json!({"subject_kind": "user", "subject_id": "alice", "reason": "done"})),
        )
        .await
        .unwrap();
    let fallback = h
        .continuity
        .read(
            &alice,
            &body(json!({"subject_kind": "user", "subject_id": "alice", "allow_fallback": true})),
        )
        .await
        .unwrap();
    let answer = parse(&fallback.body);
    assert_eq!(answer["source_state"], "fallback");
    assert_eq!(
        answer["capsule"]["continuity"]["top_priorities"],
        json!(["two", "three"])
    );
    assert_eq!(
        answer["recovery_warnings"],
        json!(["continuity_active_missing", "continuity_fallback_used"])
    );

    // A new write after the archive continues the same chain.
    let again = h
        .continuity
        .upsert(&alice, &upsert("user", "alice", &at(4), &["four"]))
        .await
        .unwrap();
    let parsed = parse(&again.body);
    assert_eq!(
        parsed["created"], true,
        "no active capsule before it: {parsed}"
    );
    let history = h
        .continuity
        .history(&alice, "user", "alice", None, 10)
        .await
        .unwrap();
    assert_eq!(history.revisions.len(), 4);
    assert_eq!(history.revisions[0].previous_id, patched.revision_id);
    assert!(history.chain_intact);
}

fn capsule_write(tenant: &str, key: &SubjectKey, version: Option<i64>, sequence: i64) -> Write {
    let at = time::OffsetDateTime::now_utc();
    let capsule = b"{\"not\":\"checked by the store\"}".to_vec();
    Write::Capsule(Box::new(CapsuleWrite {
        tenant: tenant.into(),
        subject: key.clone(),
        subject_id: key.key.clone(),
        expected_version: version,
        revision: Some(RevisionWrite {
            sequence,
            revision_id: format!("sha256:{sequence:064}"),
            // The head it builds on: the previous sequence's revision.
            previous_id: version
                .map_or_else(String::new, |_| format!("sha256:{:064}", sequence - 1)),
            operation: "upsert",
            capsule: capsule.clone(),
            capsule_sha256: noema_core::content_id::sha256_hex(&capsule),
            actor: "test".into(),
        }),
        idempotency: None,
        at,
        audit: AuditDraft {
            actor: "test".into(),
            action: "continuity.upsert".into(),
            target_id: None,
            target_type: None,
            detail: None,
        },
    }))
}

async fn a_write_computed_on_a_moved_subject_writes_nothing(backend: Backend) {
    let h = harness(backend).await;
    let a = SubjectKey::new(SubjectKind::User, "a").unwrap();
    let b = SubjectKey::new(SubjectKind::User, "b").unwrap();
    assert_eq!(
        h.store
            .write(capsule_write("t", &a, None, 1))
            .await
            .unwrap(),
        Ok(())
    );
    // A second creator of the same subject lost the race.
    assert_eq!(
        h.store
            .write(capsule_write("t", &a, None, 1))
            .await
            .unwrap(),
        Err(Refusal::Moved)
    );
    // In one group: a write against a version that moved is refused, its neighbours land.
    let outcomes = h
        .store
        .write_batch(vec![
            capsule_write("t", &a, Some(1), 2),
            capsule_write("t", &a, Some(1), 2),
            capsule_write("t", &b, None, 1),
        ])
        .await;
    let outcomes: Vec<_> = outcomes.into_iter().map(Result::unwrap).collect();
    assert_eq!(outcomes, [Ok(()), Err(Refusal::Moved), Ok(())]);
    let row = h.store.subject("t", &a).await.unwrap().unwrap();
    assert_eq!((row.version, row.head_sequence), (2, 2));
    assert_eq!(row.fallback, Some((2, format!("sha256:{:064}", 2))));
    // Only landed writes were audited: init plus three.
    assert_eq!(h.store.list_audit(None, 100, false).await.unwrap().len(), 4);
}

/// A writer that built on another write still in flight expects the version that write
/// would make. If that write was refused and another replica's write made the same version,
/// the version alone would match: the head revision tells them apart.
async fn a_write_built_on_a_head_that_never_landed_writes_nothing(backend: Backend) {
    let h = harness(backend).await;
    let a = SubjectKey::new(SubjectKind::User, "a").unwrap();
    for write in [
        capsule_write("t", &a, None, 1),
        capsule_write("t", &a, Some(1), 2),
    ] {
        assert_eq!(h.store.write(write).await.unwrap(), Ok(()));
    }
    // Version 2 is there, but its head is sequence 2's revision, not this one's.
    let mut chained = capsule_write("t", &a, Some(2), 3);
    if let Write::Capsule(w) = &mut chained
        && let Some(revision) = &mut w.revision
    {
        revision.previous_id = format!("sha256:{:064}", 99);
    }
    assert_eq!(h.store.write(chained).await.unwrap(), Err(Refusal::Moved));
    let row = h.store.subject("t", &a).await.unwrap().unwrap();
    assert_eq!((row.version, row.head_sequence), (2, 2));
    // Built on the real head, the same write lands.
    assert_eq!(
        h.store
            .write(capsule_write("t", &a, Some(2), 3))
            .await
            .unwrap(),
        Ok(())
    );
}

async fn revisions_and_audit_are_append_only_and_chained(backend: Backend) {
    let h = harness(backend).await;
    let alice = agent("agent:alice");
    h.continuity
        .upsert(&alice, &upsert("user", "alice", &at(1), &["one"]))
        .await
        .unwrap();
    let refused: Result<u64, sqlx::Error> = with_pool!(&h.db, |pool| {
        query("UPDATE continuity_revisions SET capsule_sha256 = 'x'")
            .execute(pool)
            .await
    });
    assert!(refused.is_err(), "a revision was edited");
    let refused: Result<u64, sqlx::Error> = with_pool!(&h.db, |pool| {
        query("DELETE FROM continuity_revisions")
            .execute(pool)
            .await
    });
    assert!(refused.is_err(), "a revision was deleted");
    let entries = h.store.list_audit(None, 100, true).await.unwrap();
    let actions: Vec<&str> = entries.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["init", "continuity.upsert"]);
    assert_eq!(entries[1].actor, "agent:alice");
    assert_eq!(
        entries[1].target_id.as_deref(),
        Some("agent:alice:memory/continuity/user-alice.json")
    );
    assert!(noema_core::audit::verify_chain(0, String::new(), entries.iter()).is_ok());
}

async fn an_idempotency_key_answers_its_first_result(backend: Backend) {
    let h = harness(backend).await;
    let alice = agent("agent:alice");
    let with_key = |updated_at: &str, priority: &str| {
        body(json!({
            "subject_kind": "user", "subject_id": "alice", "idempotency_key": "retry-1",
            "capsule": capsule("user", "alice", updated_at, &[priority]),
        }))
    };
    let first = h
        .continuity
        .upsert(&alice, &with_key(&at(1), "one"))
        .await
        .unwrap();
    h.continuity
        .upsert(&alice, &upsert("user", "alice", &at(2), &["two"]))
        .await
        .unwrap();
    // The retry answers the first result, although the capsule moved on since.
    let retry = h
        .continuity
        .upsert(&alice, &with_key(&at(1), "one"))
        .await
        .unwrap();
    assert!(retry.replayed && !retry.written);
    assert_eq!(retry.body, first.body);
    assert_eq!(retry.revision_id, first.revision_id);
    // The same key with another body is a conflict.
    let err = h
        .continuity
        .upsert(&alice, &with_key(&at(3), "three"))
        .await
        .unwrap_err();
    let (status, body) = refusal(&err);
    assert_eq!(status, 409);
    assert!(body.contains("idempotency_key"), "{body}");
    // Keys are per tenant.
    let bob = agent("agent:bob");
    let other = h
        .continuity
        .upsert(&bob, &with_key(&at(3), "three"))
        .await
        .unwrap();
    assert!(other.written && !other.replayed);
}

async fn archive_and_delete_move_tiers(backend: Backend) {
    let h = harness(backend).await;
    let alice = agent("agent:alice");
    for (n, id) in ["a", "b"].iter().enumerate() {
        h.continuity
            .upsert(&alice, &upsert("user", id, &at(n as u32), &["x"]))
            .await
            .unwrap();
    }
    let archived = parse(
        &h.continuity
            .archive(
                &alice,
                &body(json!({"subject_kind": "user", "subject_id": "a", "reason": "wrapping up"})),
            )
            .await
            .unwrap(),
    );
    let archive_path = archived["archived_path"].as_str().unwrap().to_owned();
    assert!(
        archive_path.starts_with("memory/continuity/archive/user-a-"),
        "{archived}"
    );
    assert_eq!(
        archived["removed_active_path"],
        "memory/continuity/user-a.json"
    );
    // Archived: gone from reads, 404 again for a second archive.
    let err = h
        .continuity
        .read(&alice, &read_body("user", "a"))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            404,
            r#"{"detail":"Continuity capsule not found"}"#.to_owned()
        )
    );
    let err = h
        .continuity
        .archive(
            &alice,
            &body(json!({"subject_kind": "user", "subject_id": "a", "reason": "again"})),
        )
        .await
        .unwrap_err();
    assert_eq!(refusal(&err).0, 404);
    // Listed with its envelope's facts.
    let list = parse(
        &h.continuity
            .list(
                &alice,
                &body(json!({"include_archived": true, "include_fallback": true})),
            )
            .await
            .unwrap(),
    );
    let states: Vec<(String, String)> = list["capsules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["subject_id"].as_str().unwrap().to_owned(),
                r["artifact_state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("a", "fallback"),
            ("a", "archived"),
            ("b", "active"),
            ("b", "fallback")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    // Delete per tier: missing ones are reported.
    let deleted = parse(
        &h.continuity
            .delete(&alice, &body(json!({"subject_kind": "user", "subject_id": "a",
                "delete_active": true, "delete_archive": true, "delete_fallback": true, "reason": "forget it"})))
            .await
            .unwrap(),
    );
    assert_eq!(
        deleted["deleted_paths"],
        json!(["memory/continuity/fallback/user-a.json", archive_path])
    );
    assert_eq!(
        deleted["missing_paths"],
        json!(["memory/continuity/user-a.json"])
    );
    let list = parse(
        &h.continuity
            .list(
                &alice,
                &body(json!({"include_archived": true, "include_fallback": true})),
            )
            .await
            .unwrap(),
    );
    assert_eq!(list["count"], 2, "{list}");
    // Nothing left to delete: an empty answer, nothing written.
    let audit_before = h.store.list_audit(None, 100, false).await.unwrap().len();
    let none = parse(
        &h.continuity
            .delete(
                &alice,
                &body(json!({"subject_kind": "user", "subject_id": "a",
                "delete_archive": true, "reason": "again"})),
            )
            .await
            .unwrap(),
    );
    assert_eq!(none["deleted_paths"], json!([]));
    assert_eq!(
        h.store.list_audit(None, 100, false).await.unwrap().len(),
        audit_before
    );
}

/// A list with fallbacks as "subject state updated_at" lines.
async fn listed(h: &Harness, caller: &noema_continuity::domain::access::Caller) -> Vec<String> {
    let list = parse(
        &h.continuity
            .list(caller, &body(json!({"include_fallback": true})))
            .await
            .unwrap(),
    );
    list["capsules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r["subject_id"].as_str().unwrap(),
                r["artifact_state"].as_str().unwrap(),
                r["updated_at"].as_str().unwrap()
            )
        })
        .collect()
}

/// Lists read pointers kept in memory on SQLite: each write that moves one must show in the
/// next list, whatever was listed before it.
async fn a_list_sees_every_write_before_it(backend: Backend) {
    let h = harness(backend).await;
    let alice = agent("agent:alice");
    assert!(listed(&h, &alice).await.is_empty());
    h.continuity
        .upsert(&alice, &upsert("user", "a", &at(1), &["one"]))
        .await
        .unwrap();
    let a1 = format!("a active {}", at(1));
    let a1_fallback = format!("a fallback {}", at(1));
    assert_eq!(listed(&h, &alice).await, [a1.clone(), a1_fallback.clone()]);
    h.continuity
        .upsert(&alice, &upsert("user", "b", &at(2), &["two"]))
        .await
        .unwrap();
    let b2 = [
        format!("b active {}", at(2)),
        format!("b fallback {}", at(2)),
    ];
    assert_eq!(
        listed(&h, &alice).await,
        [&[a1, a1_fallback][..], &b2].concat()
    );
    h.continuity
        .upsert(&alice, &upsert("user", "a", &at(3), &["three"]))
        .await
        .unwrap();
    let a3 = [
        format!("a active {}", at(3)),
        format!("a fallback {}", at(3)),
    ];
    assert_eq!(listed(&h, &alice).await, [&a3[..], &b2].concat());
    h.continuity
        .archive(
            &alice,
            &body(json!({"subject_kind": "user", "subject_id": "a", "reason": "done"})),
        )
        .await
        .unwrap();
    assert_eq!(listed(&h, &alice).await, [&a3[1..], &b2].concat());
    h.continuity
        .delete(
            &alice,
            &body(json!({"subject_kind": "user", "subject_id": "b",
                "delete_active": true, "delete_fallback": true, "reason": "forget it"})),
        )
        .await
        .unwrap();
    assert_eq!(listed(&h, &alice).await, a3[1..]);
}

async fn a_read_sees_every_write_before_it(backend: Backend) {
    let h = harness(backend).await;
    let alice = agent("agent:alice");
    let priorities = |read: &[u8]| parse(read)["capsule"]["continuity"]["top_priorities"].clone();
    let subject = SubjectKey::new(SubjectKind::User, "a").unwrap();
    // Absent, then written: a read that saw no subject does not hide the first write.
    let absent = h.continuity.read(&alice, &read_body("user", "a")).await;
    assert_eq!(refusal(&absent.unwrap_err()).0, 404);
    assert!(
        h.store
            .subject(&alice.tenant, &subject)
            .await
            .unwrap()
            .is_none()
    );
    for (n, words) in [(1, ["one"]), (2, ["two"]), (3, ["three"])] {
        h.continuity
            .upsert(&alice, &upsert("user", "a", &at(n), &words))
            .await
            .unwrap();
        // Twice: the second read may be served from what the first read kept.
        for _ in 0..2 {
            let read = h
                .continuity
                .read(&alice, &read_body("user", "a"))
                .await
                .unwrap();
            assert_eq!(priorities(&read.body), json!(words));
        }
    }
    let row = h
        .store
        .subject(&alice.tenant, &subject)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.version, 3);
    // A recorded use is seen by the next read of the row.
    let later = row.used_at + 10 * 3600;
    h.store
        .touch_used(&alice.tenant, &subject, later)
        .await
        .unwrap();
    let row = h
        .store
        .subject(&alice.tenant, &subject)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((row.version, row.used_at), (3, later));
    // Archived: the active capsule is gone from the next read.
    h.continuity
        .archive(
            &alice,
            &body(json!({"subject_kind": "user", "subject_id": "a", "reason": "done"})),
        )
        .await
        .unwrap();
    let err = h
        .continuity
        .read(&alice, &read_body("user", "a"))
        .await
        .unwrap_err();
    assert_eq!(refusal(&err).0, 404);
    let fallback = body(json!({"subject_kind": "user", "subject_id": "a", "allow_fallback": true}));
    let read = h.continuity.read(&alice, &fallback).await.unwrap();
    assert_eq!(parse(&read.body)["source_state"], "fallback");
    // Deleted: nothing left to fall back on either.
    h.continuity
        .delete(
            &alice,
            &body(json!({"subject_kind": "user", "subject_id": "a",
                "delete_active": true, "delete_fallback": true, "reason": "forget it"})),
        )
        .await
        .unwrap();
    let read = h.continuity.read(&alice, &fallback).await.unwrap();
    assert_eq!(parse(&read.body)["source_state"], "missing");
}

async fn cold_store_and_rehydrate_are_byte_exact(backend: Backend) {
    let h = harness(backend).await;
    let alice = agent("agent:alice");
    let owner = owner("agent:alice");
    h.continuity
        .upsert(&alice, &upsert("thread", "Launch Plan", &at(5), &["ship"]))
        .await
        .unwrap();
    let archived = parse(
        &h.continuity
            .archive(&alice, &body(json!({"subject_kind": "thread", "subject_id": "Launch Plan", "reason": "shipped"})))
            .await
            .unwrap(),
    );
    let path = archived["archived_path"].as_str().unwrap().to_owned();
    let envelope = h
        .store
        .archive("agent:alice", &path)
        .await
        .unwrap()
        .unwrap()
        .envelope
        .unwrap();
    // Cold store needs admin.
    let err = h
        .continuity
        .cold_store(&alice, &body(json!({"source_archive_path": path})))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (403, r#"{"detail":"Missing scope: admin:peers"}"#.to_owned())
    );
    let stored = parse(
        &h.continuity
            .cold_store(&owner, &body(json!({"source_archive_path": path})))
            .await
            .unwrap(),
    );
    assert_eq!(stored["artifact_state"], "cold");
    assert_eq!(
        stored["cold_storage_path"],
        format!(
            "memory/continuity/cold/{}.gz",
            path.rsplit('/').next().unwrap()
        )
    );
    let row = h
        .store
        .archive("agent:alice", &path)
        .await
        .unwrap()
        .unwrap();
    let cold = row.cold().unwrap();
    assert!(row.envelope.is_none());
    // The payload is the original's exact gzip of the envelope's bytes.
    let payload = h
        .objects
        .get(&cold.key)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(payload.as_ref(), cold_gzip(&envelope).unwrap().as_slice());
    assert!(cold.stub.starts_with("---\ntype: continuity_cold_stub\n"));
    // A second cold store: it is cold already.
    let err = h
        .continuity
        .cold_store(&owner, &body(json!({"source_archive_path": path})))
        .await
        .unwrap_err();
    assert_eq!(refusal(&err).0, 409);
    // Listed as cold, from its stub.
    let list = parse(
        &h.continuity
            .list(&alice, &body(json!({"include_cold": true})))
            .await
            .unwrap(),
    );
    assert_eq!(list["count"], 1, "{list}");
    let row_json = &list["capsules"][0];
    assert_eq!(row_json["artifact_state"], "cold", "{list}");
    assert_eq!(row_json["source_archive_path"], path.as_str());
    // Rehydrate by stub path: the envelope comes back byte for byte.
    let rehydrated = parse(
        &h.continuity
            .cold_rehydrate(
                &owner,
                &body(json!({"cold_stub_path": stored["cold_stub_path"]})),
            )
            .await
            .unwrap(),
    );
    assert_eq!(rehydrated["artifact_state"], "archived");
    let back = h
        .store
        .archive("agent:alice", &path)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.envelope.as_deref(), Some(envelope.as_slice()));
    let err = h
        .continuity
        .cold_rehydrate(&owner, &body(json!({"source_archive_path": path})))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            409,
            r#"{"detail":"Continuity archive envelope already exists"}"#.to_owned()
        )
    );
}

/// Archives `count` subjects of `tenant` as of `days_ago` days, straight through the store.
async fn old_archives(h: &Harness, tenant: &str, count: u32, days_ago: i64) -> Vec<String> {
    let mut paths = Vec::new();
    let base = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap();
    for n in 0..count {
        let id = format!("old-{n:03}");
        let written = h
            .continuity
            .upsert(&agent(tenant), &upsert("task", &id, &at(n), &["x"]))
            .await
            .unwrap();
        let key = SubjectKey::new(SubjectKind::Task, &id).unwrap();
        let row = h.store.subject(tenant, &key).await.unwrap().unwrap();
        let active = row.active.clone().unwrap();
        let capsule = noema_continuity::domain::stored::StoredCapsule::new(active.capsule)
            .model()
            .unwrap();
        let when = base - time::Duration::days(days_ago) - time::Duration::seconds(i64::from(n));
        let (path, envelope) = archive_envelope(&key, &capsule, tenant, "old", when);
        assert_eq!(path, key.archive_path(&format_compact(when)));
        let landed = h
            .store
            .write(Write::Archive(Box::new(ArchiveWrite {
                tenant: tenant.into(),
                subject: key,
                subject_id: id.clone(),
                expected_version: row.version,
                archive_path: path.clone(),
                archived_at: format_iso(when),
                archived_unix: when.unix_timestamp(),
                revision_id: written.revision_id,
                envelope: canonical_json(&envelope).into_bytes(),
                at: when,
                audit: AuditDraft {
                    actor: tenant.into(),
                    action: "continuity.archive".into(),
                    target_id: Some(path.clone()),
                    target_type: None,
                    detail: None,
                },
            })))
            .await
            .unwrap();
        assert_eq!(landed, Ok(()));
        paths.push(path);
    }
    paths
}

/// The cold tier's payload put goes through `WriteRetry::STANDARD` (the S3 store makes no
/// retries of its own): one failed put is ridden out, a store that stays down fails the
/// request and leaves the archive where it was.
async fn a_cold_store_rides_out_a_failed_put_under_the_one_write_retry(backend: Backend) {
    let h = harness(backend).await;
    let alice = agent("agent:alice");
    let owner = owner("agent:alice");
    let mut paths = Vec::new();
    for id in ["Launch Plan", "Second Plan"] {
        h.continuity
            .upsert(&alice, &upsert("thread", id, &at(5), &["ship"]))
            .await
            .unwrap();
        let archived = parse(
            &h.continuity
                .archive(
                    &alice,
                    &body(json!({"subject_kind": "thread", "subject_id": id, "reason": "shipped"})),
                )
                .await
                .unwrap(),
        );
        paths.push(archived["archived_path"].as_str().unwrap().to_owned());
    }

    h.faults.fail_next_puts(1);
    let stored = parse(
        &h.continuity
            .cold_store(&owner, &body(json!({"source_archive_path": paths[0]})))
            .await
            .unwrap(),
    );
    assert_eq!(stored["artifact_state"], "cold");
    assert_eq!(h.faults.injected_faults(), 1);
    let cold = h
        .store
        .archive("agent:alice", &paths[0])
        .await
        .unwrap()
        .unwrap();
    let key = cold.cold().unwrap().key.clone();
    assert!(h.objects.head(&key).await.unwrap().is_some());

    h.faults.fail_next_puts(noema_store::object::faulty::STICKY);
    let err = h
        .continuity
        .cold_store(&owner, &body(json!({"source_archive_path": paths[1]})))
        .await
        .unwrap_err();
    h.faults.reset();
    assert!(
        matches!(&err, noema_continuity::Error::Objects(o) if o.is_retryable()),
        "{err:?}"
    );
    assert_eq!(
        noema_core::ServiceError::code(&err),
        noema_core::ErrorCode::Unavailable
    );
    assert_eq!(h.faults.injected_faults(), 4, "three attempts in all");
    let row = h
        .store
        .archive("agent:alice", &paths[1])
        .await
        .unwrap()
        .unwrap();
    assert!(row.cold().is_none() && row.envelope.is_some());
}

async fn retention_apply_drains_a_backlog(backend: Backend) {
    let h = harness(backend).await;
    let owner = owner("agent:alice");
    let stale = old_archives(&h, "agent:alice", 7, 120).await;
    // A recent archive is no candidate.
    h.continuity
        .upsert(&owner, &upsert("user", "recent", &at(1), &["x"]))
        .await
        .unwrap();
    h.continuity
        .archive(
            &owner,
            &body(json!({"subject_kind": "user", "subject_id": "recent", "reason": "retired"})),
        )
        .await
        .unwrap();
    let mut cold_stored = BTreeSet::new();
    let mut rounds = 0;
    loop {
        rounds += 1;
        assert!(rounds < 10, "the backlog never drained");
        let plan = parse(
            &h.continuity
                .retention_plan(&owner, &body(json!({"limit": 3})))
                .await
                .unwrap(),
        );
        if rounds == 1 {
            assert_eq!(plan["total_candidates"], 7, "{plan}");
            assert_eq!(plan["has_more"], true);
            // Oldest first.
            assert_eq!(
                plan["candidates"][0]["source_archive_path"],
                stale[6].as_str()
            );
        }
        let paths: Vec<Value> = plan["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["source_archive_path"].clone())
            .collect();
        if paths.is_empty() {
            assert_eq!(plan["has_more"], false);
            break;
        }
        // One path twice: reported once, warned about once.
        let mut requested = paths.clone();
        requested.push(paths[0].clone());
        let applied = parse(
            &h.continuity
                .retention_apply(&owner, &body(json!({"source_archive_paths": requested})))
                .await
                .unwrap(),
        );
        assert_eq!(applied["ok"], true, "{applied}");
        assert_eq!(applied["cold_stored"], paths.len());
        assert_eq!(applied["warnings"].as_array().unwrap().len(), 1);
        cold_stored.extend(paths.iter().map(|p| p.as_str().unwrap().to_owned()));
    }
    assert_eq!(cold_stored, stale.into_iter().collect::<BTreeSet<_>>());
    // Applying again skips them, and a recent archive is not stale.
    let recent = h
        .store
        .archives("agent:alice", None, Some("user"), Some("archived"))
        .await
        .unwrap();
    let again = parse(
        &h.continuity
            .retention_apply(
                &owner,
                &body(json!({"source_archive_paths": [cold_stored.iter().next().unwrap(), recent[0].archive_path, "memory/continuity/archive/task-none-20200101T000000Z.json", "nope"]})),
            )
            .await
            .unwrap(),
    );
    let statuses: Vec<&str> = again["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "skipped_already_cold",
            "skipped_not_stale",
            "skipped_missing",
            "failed_invalid_archive"
        ]
    );
    assert_eq!(again["ok"], false);
}

async fn tenants_never_see_each_other(backend: Backend) {
    let h = harness(backend).await;
    let alice = agent("agent:alice");
    let bob = agent("agent:bob");
    h.continuity
        .upsert(&alice, &upsert("user", "secret", &at(1), &["private"]))
        .await
        .unwrap();
    // Bob's reads answer exactly as for a subject that does not exist.
    let missing = h
        .continuity
        .read(&bob, &read_body("user", "nobody"))
        .await
        .unwrap_err();
    let hidden = h
        .continuity
        .read(&bob, &read_body("user", "secret"))
        .await
        .unwrap_err();
    assert_eq!(refusal(&hidden), refusal(&missing));
    let fallback =
        body(json!({"subject_kind": "user", "subject_id": "secret", "allow_fallback": true}));
    let answer = parse(&h.continuity.read(&bob, &fallback).await.unwrap().body);
    assert_eq!(answer["source_state"], "missing");
    let list = parse(
        &h.continuity
            .list(&bob, &body(json!({"include_fallback": true, "include_archived": true, "include_cold": true})))
            .await
            .unwrap(),
    );
    assert_eq!(list["count"], 0);
    assert!(
        h.continuity
            .history(&bob, "user", "secret", None, 10)
            .await
            .unwrap()
            .revisions
            .is_empty()
    );
    let compare = body(json!({"subject_kind": "user", "subject_id": "secret",
        "candidate_capsule": capsule("user", "secret", &at(1), &["guess"]),
        "signals": [{"kind": "self_review", "source_ref": "r", "observed_at": at(1), "summary": "s"}]}));
    assert_eq!(
        refusal(&h.continuity.compare(&bob, &compare).await.unwrap_err()).0,
        404
    );
    let patch = body(
        json!({"subject_kind": "user", "subject_id": "secret", "updated_at": at(9),
        "operations": [{"target": "continuity.top_priorities", "action": "append", "value": "x"}]}),
    );
    assert_eq!(
        refusal(&h.continuity.patch(&bob, &patch).await.unwrap_err()).0,
        404
    );
    let archive =
        body(json!({"subject_kind": "user", "subject_id": "secret", "reason": "mine now"}));
    assert_eq!(
        refusal(&h.continuity.archive(&bob, &archive).await.unwrap_err()).0,
        404
    );
    // Bob writing the same subject makes his own capsule; Alice's is untouched.
    let bobs = h
        .continuity
        .upsert(&bob, &upsert("user", "secret", &at(0), &["bob's"]))
        .await
        .unwrap();
    assert_eq!(parse(&bobs.body)["created"], true);
    let alices = parse(
        &h.continuity
            .read(&alice, &read_body("user", "secret"))
            .await
            .unwrap()
            .body,
    );
    assert_eq!(
        alices["capsule"]["continuity"]["top_priorities"],
        json!(["private"])
    );
    // The owner sees another tenant only by naming it.
    let owner_own = owner("owner");
    assert_eq!(
        refusal(
            &h.continuity
                .read(&owner_own, &read_body("user", "secret"))
                .await
                .unwrap_err()
        )
        .0,
        404
    );
    let named = noema_continuity::domain::access::Caller::resolve(
        owner_own.principal.clone(),
        Some("agent:alice"),
    )
    .unwrap();
    assert!(named.named_tenant);
    let seen = parse(
        &h.continuity
            .read(&named, &read_body("user", "secret"))
            .await
            .unwrap()
            .body,
    );
    assert_eq!(
        seen["capsule"]["continuity"]["top_priorities"],
        json!(["private"])
    );
}

async fn the_backup_drill_counts_and_reports_bad_artifacts(backend: Backend) {
    let h = harness(backend).await;
    let owner = owner("agent:alice");
    for (n, id) in ["a", "b", "c"].iter().enumerate() {
        h.continuity
            .upsert(&owner, &upsert("user", id, &at(n as u32), &["x"]))
            .await
            .unwrap();
    }
    let mut paths = Vec::new();
    for id in ["a", "b"] {
        let archived = parse(
            &h.continuity
                .archive(
                    &owner,
                    &body(json!({"subject_kind": "user", "subject_id": id, "reason": "retired"})),
                )
                .await
                .unwrap(),
        );
        paths.push(archived["archived_path"].as_str().unwrap().to_owned());
    }
    h.continuity
        .cold_store(&owner, &body(json!({"source_archive_path": paths[0]})))
        .await
        .unwrap();
    let check = h.continuity.check_artifacts(&owner, false).await.unwrap();
    assert!(check.report.ok(), "{:?}", check.report.invalid);
    let counts = parse(&check.body)["continuity_counts"].clone();
    assert_eq!(
        counts,
        json!({"active_capsules": 1, "fallback_snapshots": 3, "archive_envelopes": 1, "cold_payloads": 1, "cold_stubs": 1})
    );
    // A damaged cold payload is reported; the drill still answers.
    let row = h
        .store
        .archive("agent:alice", &paths[0])
        .await
        .unwrap()
        .unwrap();
    let key = row.cold().unwrap().key;
    h.objects
        .put(
            &key,
            bytes::Bytes::from_static(b"not gzip"),
            "application/gzip",
        )
        .await
        .unwrap();
    let check = h.continuity.check_artifacts(&owner, false).await.unwrap();
    assert!(!check.report.ok());
    let validation = parse(&check.body)["continuity_validation"].clone();
    assert_eq!(validation["ok"], false);
    assert_eq!(
        validation["invalid_cold_payloads"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{validation}"
    );
    // Naming every tenant needs the superuser.
    assert!(
        h.continuity
            .check_artifacts(&agent("agent:alice"), true)
            .await
            .is_err()
    );
    let everyone = h.continuity.check_artifacts(&owner, true).await.unwrap();
    assert_eq!(everyone.report.invalid.len(), 1);
}

async fn concurrent_patches_never_lose_an_update(backend: Backend) {
    let h = Arc::new(harness_with(backend, Options::default()).await);
    let alice = agent("agent:alice");
    h.continuity
        .upsert(&alice, &body(json!({"subject_kind": "user", "subject_id": "shared",
            "capsule": {
                "subject_kind": "user", "subject_id": "shared", "updated_at": at(0), "verified_at": at(0),
                "source": {"producer": "test", "update_reason": "manual"},
                "continuity": {"top_priorities": [], "active_concerns": [], "active_constraints": [],
                    "open_loops": [], "stance_summary": "s", "drift_signals": []},
                "confidence": {"continuity": 0.5, "relationship_model": 0.5}}})))
        .await
        .unwrap();
    let clock = Arc::new(AtomicU32::new(1));
    let mut tasks = Vec::new();
    for writer in 0..8 {
        let (h, clock, alice) = (Arc::clone(&h), Arc::clone(&clock), alice.clone());
        tasks.push(tokio::spawn(async move {
            let value = format!("from writer {writer}");
            loop {
                let updated_at = at(clock.fetch_add(1, Ordering::SeqCst));
                let patch = body(json!({"subject_kind": "user", "subject_id": "shared", "updated_at": updated_at,
                    "operations": [{"target": "continuity.top_priorities", "action": "append", "value": value}]}));
                match h.continuity.patch(&alice, &patch).await {
                    Ok(written) => return written.revision_id,
                    // A newer timestamp landed first, or writers kept winning: a clean
                    // conflict, retried by the client with a fresh timestamp.
                    Err(err) if refusal(&err).0 == 409 => continue,
                    Err(err) => panic!("{err}"),
                }
            }
        }));
    }
    let mut acknowledged = Vec::new();
    for task in tasks {
        acknowledged.push(task.await.unwrap());
    }
    let read = parse(
        &h.continuity
            .read(&alice, &read_body("user", "shared"))
            .await
            .unwrap()
            .body,
    );
    let priorities: BTreeSet<String> = read["capsule"]["continuity"]["top_priorities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let expected: BTreeSet<String> = (0..8).map(|w| format!("from writer {w}")).collect();
    assert_eq!(priorities, expected, "an acknowledged patch was lost");
    let history = h
        .continuity
        .history(&alice, "user", "shared", None, 50)
        .await
        .unwrap();
    assert!(history.chain_intact);
    assert_eq!(history.revisions.len(), 9);
    let ids: BTreeSet<&str> = history
        .revisions
        .iter()
        .map(|r| r.revision_id.as_str())
        .collect();
    for id in &acknowledged {
        assert!(
            ids.contains(id.as_str()),
            "acknowledged {id} is not in the history"
        );
    }
    let sequences: Vec<i64> = history.revisions.iter().map(|r| r.sequence).collect();
    assert_eq!(sequences, (1..=9).rev().collect::<Vec<_>>());
}
