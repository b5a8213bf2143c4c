//! Capsules, context retrieval, memory paths, tasks, backups and ops: what their rules
//! require, in JSON Schema.

use serde_json::{Value, json};

use crate::domain::schema::Model;

/// A subject id that `subject::normalize_subject_id` keeps something of: at least one
/// character that lowercases into `[a-z0-9._]` (`İ` and the Kelvin sign do too).
pub const SUBJECT_ID_PATTERN: &str = r"[0-9A-Za-z._\u0130\u212A]";

/// What `timestamp::require_utc` accepts (CPython's `fromisoformat` after `Z` → `+00:00`,
/// ending in `Z` or `+00:00`), in the forms clients write: a calendar date (29 February
/// left out), then optionally `T` or a space and `HH[:MM[:SS[.fraction]]]`.
pub const UTC_TIMESTAMP_PATTERN: &str = concat!(
    r"^[1-9][0-9]{3}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)",
    r"|(?:0[13578]|1[02])-31)(?:[T ](?:[01][0-9]|2[0-3])(?::[0-5][0-9](?::[0-5][0-9]",
    r"(?:[.,][0-9]+)?)?)?)?(?:Z|\+00:00)$"
);

/// The characters `text::py_strip` strips (Python's `str.isspace`), for a character class:
/// generators and regex engines disagree on what `\s` holds.
macro_rules! py_space {
    () => {
        r"\x09-\x0d\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
    };
}

/// One segment of a repository path that `memory::document_path` keeps as written: not empty,
/// not `.` or `..`, no `/`.
macro_rules! path_segments {
    () => {
        r"(?:/(?:[^/.\x00]|\.[^/.\x00]|\.\.[^/\x00])[^/\x00]*)+$"
    };
}

/// A path `/v1/write` and `/v1/append` write (`memory::document_path`): under an allowed
/// top-level directory, not a directory itself, not under a root managed by its own API.
pub const WRITE_PATH_PATTERN: &str = concat!(
    r"^(?!memory/(?:continuity|schedule)(?:/|$))",
    r"(?:journal|essays|projects|memory|messages|peers|snapshots|patches|runs|archive|config|logs|backups)",
    path_segments!()
);

/// A path `GET /v1/read` looks up (`memory::document_path`; a managed root's path is not
/// found).
pub const READ_PATH_PATTERN: &str = concat!(
    r"^(?:journal|essays|projects|memory|messages|peers|snapshots|tasks|patches|runs|index|archive|config|logs|backups)",
    path_segments!()
);

/// A task id `tasks::check_task_id` accepts: one path segment.
pub const TASK_ID_PATTERN: &str = r"^(?:[^/\\.\x00]|\.[^/\\.\x00]|\.\.[^/\\\x00])[^/\\\x00]*$";

/// A backup path `POST /v1/backup/restore-test` accepts: under `backups/` once trimmed.
pub const BACKUP_PATH_PATTERN: &str = concat!("^[", py_space!(), "]*backups/");

/// An archive path `subject::validate_archive_path` accepts (stripped first).
pub const ARCHIVE_PATH_PATTERN: &str = concat!(
    "^[",
    py_space!(),
    r"]*memory/continuity/archive/[\s\S]*\.json[",
    py_space!(),
    "]*$"
);

/// A cold stub path `ops::cold::cold_rehydrate` accepts, as written.
pub const COLD_STUB_PATH_PATTERN: &str = r"^memory/continuity/cold/index/[\s\S]*\.md$";

pub fn subject_id() -> Value {
    json!({ "pattern": SUBJECT_ID_PATTERN })
}

pub fn utc_timestamp() -> Value {
    json!({ "pattern": UTC_TIMESTAMP_PATTERN })
}

pub fn write_path() -> Value {
    json!({ "pattern": WRITE_PATH_PATTERN })
}

pub fn task_id() -> Value {
    json!({ "pattern": TASK_ID_PATTERN })
}

/// pydantic's lax `true`s (a delete flag counts when it reads as true).
fn lax_true() -> Value {
    json!([true, 1, "1", "true", "t", "yes", "y", "on"])
}

/// Patch targets holding objects (`patch::class`); the other targets hold strings.
const STRUCTURED_TARGETS: [&str; 4] = [
    "continuity.negative_decisions",
    "continuity.rationale_entries",
    "stable_preferences",
    "thread_descriptor.identity_anchors",
];

/// `patch::check_operation`'s parameter rules, one alternative per action and target class.
fn patch_operation() -> Value {
    let strings: Vec<&str> = crate::domain::request::PATCH_TARGETS
        .iter()
        .copied()
        .filter(|t| !STRUCTURED_TARGETS.contains(t))
        .collect();
    let null = json!({"type": "null"});
    let case =
        |targets: Value, action: &str, required: &[&str], value: Value, m: Value, i: Value| {
            json!({
                "required": required,
                "properties": {
                    "target": {"enum": targets},
                    "action": {"const": action},
                    "value": value,
                    "match": m,
                    "index": i,
                }
            })
        };
    let text = json!({"type": "string"});
    let object = json!({"type": "object"});
    json!({"anyOf": [
        case(json!(strings), "append", &["value"], text.clone(), null.clone(), null.clone()),
        case(json!(STRUCTURED_TARGETS), "append", &["value"], object.clone(), null.clone(), null.clone()),
        case(json!(crate::domain::request::PATCH_TARGETS), "remove", &["match"], null.clone(), text.clone(), null.clone()),
        // An index pydantic reads (`int_parsing_size` beyond 64 bits).
        case(json!(strings), "replace_at", &["value", "index"], text.clone(), null.clone(),
            json!({"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX})),
        case(json!(STRUCTURED_TARGETS), "replace_at", &["value", "match"], object, text, null),
    ]})
}

/// A path `validation::validate_repo_relative_paths` accepts (`canonical_sources`,
/// `retrieval_hints.load_next`): `[A-Za-z0-9._/-]` under an allowed top-level directory,
/// written without `.` or `..` segments.
pub const REPO_PATH_PATTERN: &str = concat!(
    r"^(?:journal|essays|projects|memory|messages|peers|snapshots|tasks|patches|runs|index|archive|config|logs|backups)",
    r"(?:/[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)*$"
);

/// A `related_documents[]` path (`validation::is_valid_related_document_path`): relative,
/// `[A-Za-z0-9._/-]`, no `..`.
const RELATED_PATH_PATTERN: &str =
    r"^(?:[A-Za-z0-9_-]|\.[A-Za-z0-9_/-])(?:[A-Za-z0-9_/-]|\.[A-Za-z0-9_/-])*\.?$";

/// Text without leading or trailing whitespace.
const TRIMMED_PATTERN: &str = concat!("^[^", py_space!(), r"](?:[\s\S]*[^", py_space!(), "])?$");

/// Text with something besides whitespace.
const NOT_BLANK_PATTERN: &str = concat!("[^", py_space!(), "]");

/// `{"properties": {name: schema, …}}`.
fn properties(fields: &[(&str, Value)]) -> Value {
    let map: serde_json::Map<String, Value> = fields
        .iter()
        .map(|(name, schema)| ((*name).to_owned(), schema.clone()))
        .collect();
    json!({ "properties": map })
}

/// Strings of at most `max` characters (`validation::too_long`).
fn items_at_most(max: usize) -> Value {
    json!({"items": {"maxLength": max}})
}

/// Strings of 1–`max` characters (`validation::bounded`).
fn items_between(max: usize) -> Value {
    json!({"items": {"minLength": 1, "maxLength": max}})
}

/// A UTC timestamp where the field is a string (`validation::optional_utc`).
fn timestamp() -> Value {
    json!({"pattern": UTC_TIMESTAMP_PATTERN})
}

/// One `related_documents[]` entry (§1.4).
fn related_document() -> Value {
    json!({
        "type": "object",
        "required": ["path", "kind", "label"],
        "additionalProperties": false,
        "properties": {
            "path": {"type": "string", "maxLength": 240, "pattern": RELATED_PATH_PATTERN},
            "kind": {"type": "string", "maxLength": 32, "pattern": r"^[a-z][a-z0-9_]*$"},
            "label": {"type": "string", "maxLength": 120, "pattern": TRIMMED_PATTERN},
            "relevance": {"enum": ["primary", "supporting", "background"]}
        }
    })
}

/// `validation::validate_capsule`'s rules on the capsule's own fields.
fn capsule() -> Vec<Value> {
    let thread_like = json!({"properties": {"subject_kind": {"enum": ["thread", "task"]}}});
    vec![
        properties(&[
            ("subject_id", subject_id()),
            ("updated_at", utc_timestamp()),
            ("verified_at", utc_timestamp()),
            (
                "canonical_sources",
                json!({"items": {"pattern": REPO_PATH_PATTERN}}),
            ),
            (
                "metadata",
                json!({"maxProperties": 12, "additionalProperties": {"type": ["string", "number", "boolean", "null"]}}),
            ),
        ]),
        // `metadata.interaction_boundary_kind` with `source.update_reason=interaction_boundary`
        // and only then.
        json!({
            "if": {"required": ["source"], "properties": {"source": {
                "required": ["update_reason"],
                "properties": {"update_reason": {"const": "interaction_boundary"}}
            }}},
            "then": {"required": ["metadata"], "properties": {"metadata": {
                "required": ["interaction_boundary_kind"],
                "properties": {"interaction_boundary_kind": {
                    "enum": crate::domain::validation::INTERACTION_BOUNDARY_KINDS
                }}
            }}},
            "else": {"properties": {"metadata": {
                "properties": {"interaction_boundary_kind": {"type": "null"}}
            }}}
        }),
        // Stable preferences on user and peer capsules, a thread descriptor on thread and task
        // capsules.
        json!({
            "if": thread_like,
            "then": {"properties": {"stable_preferences": {"maxItems": 0}}},
            "else": {"properties": {"thread_descriptor": {"type": "null"}}}
        }),
    ]
}

/// `validation::validate_verification_state_and_health`, which compare and revalidate run on a
/// candidate capsule (upsert drops both blocks instead).
fn verification_blocks(field: &str) -> Value {
    json!({"properties": {field: {"properties": {
        "verification_state": {
            "properties": {
                "last_revalidated_at": utc_timestamp(),
                "evidence_refs": items_at_most(200)
            },
            "if": {"properties": {"status": {"const": "conflicted"}}},
            "then": {"required": ["conflict_summary"], "properties": {"conflict_summary": {"type": "string", "minLength": 1}}}
        },
        "capsule_health": {
            "properties": {
                "last_checked_at": utc_timestamp(),
                "reasons": items_at_most(120)
            },
            "if": {"properties": {"status": {"enum": ["degraded", "conflicted"]}}},
            "then": {"required": ["reasons"], "properties": {"reasons": {"minItems": 1}}}
        }
    }}}})
}

/// The capsule under `field` names the request's subject kind (its id, compared as well, has
/// no JSON Schema).
fn same_subject_kind(field: &str) -> Vec<Value> {
    crate::domain::model::SUBJECT_KINDS
        .iter()
        .map(|kind| {
            json!({
                "if": {"properties": {"subject_kind": {"const": kind}}},
                "then": {"properties": {field: {"properties": {"subject_kind": {"const": kind}}}}}
            })
        })
        .collect()
}

/// The rules across the fields of a capsule, context or memory model.
pub(super) fn continuity_rules(model: &Model) -> Vec<Value> {
    match model.name {
        "ContinuityCapsule" => capsule(),
        "ContinuitySource" => vec![properties(&[("inputs", items_at_most(200))])],
        "ContinuityState" => {
            let mut fields: Vec<(&str, Value)> = [
                "top_priorities",
                "active_concerns",
                "active_constraints",
                "open_loops",
                "drift_signals",
                "working_hypotheses",
                "long_horizon_commitments",
            ]
            .into_iter()
            .map(|name| (name, items_at_most(160)))
            .collect();
            fields.push(("session_trajectory", items_at_most(80)));
            fields.push(("trailing_notes", items_between(160)));
            fields.push(("curiosity_queue", items_between(120)));
            // `validation::validate_related_documents`; an explicit null is refused on upsert.
            fields.push((
                "related_documents",
                json!({
                    "type": "array",
                    "maxItems": crate::domain::validation::RELATED_DOCUMENTS_MAX_ENTRIES,
                    "uniqueItems": true,
                    "items": related_document()
                }),
            ));
            vec![properties(&fields)]
        }
        "NegativeDecision" => vec![properties(&[
            // Trimmed before they are checked (`normalize`).
            (
                "decision",
                json!({"maxLength": 160, "pattern": NOT_BLANK_PATTERN}),
            ),
            (
                "rationale",
                json!({"maxLength": 240, "pattern": NOT_BLANK_PATTERN}),
            ),
            ("created_at", timestamp()),
            ("updated_at", timestamp()),
            ("last_confirmed_at", timestamp()),
        ])],
        "RationaleEntry" => vec![properties(&[
            // Trimmed before it is checked (`normalize`).
            ("tag", json!({"pattern": NOT_BLANK_PATTERN})),
            ("summary", json!({"minLength": 1})),
            ("reasoning", json!({"minLength": 1})),
            ("alternatives_considered", items_between(160)),
            ("depends_on", items_between(120)),
            ("created_at", timestamp()),
            ("updated_at", timestamp()),
            ("last_confirmed_at", timestamp()),
        ])],
        "StablePreference" => vec![properties(&[
            ("created_at", timestamp()),
            ("updated_at", timestamp()),
            ("last_confirmed_at", timestamp()),
        ])],
        "ContinuityRelationshipModel" => vec![properties(&[
            ("preferred_style", items_at_most(80)),
            ("sensitivity_notes", items_at_most(120)),
        ])],
        "ContinuityRetrievalHints" => vec![properties(&[
            ("must_include", items_at_most(160)),
            ("avoid", items_at_most(160)),
            (
                "load_next",
                json!({"items": {"pattern": REPO_PATH_PATTERN}}),
            ),
        ])],
        "ContinuityAttentionPolicy" => {
            vec![properties(&[(
                "presence_bias_overrides",
                items_at_most(160),
            )])]
        }
        "ContinuityFreshness" => vec![properties(&[(
            "expires_at",
            json!({"anyOf": [{"maxLength": 0}, {"pattern": UTC_TIMESTAMP_PATTERN}]}),
        )])],
        // `validation::validate_thread_descriptor` (keywords and anchor kinds are compared
        // lowercased and trimmed).
        "ThreadDescriptor" => vec![properties(&[
            ("keywords", items_at_most(40)),
            (
                "scope_anchors",
                json!({"items": {"pattern": r"^(?:user|peer|thread|task):[a-z0-9._-]{1,120}$"}}),
            ),
        ])],
        "IdentityAnchor" => vec![properties(&[
            (
                "kind",
                json!({"pattern": concat!(
                    "^[", py_space!(), "]*[A-Za-z][A-Za-z0-9_-]{0,39}[", py_space!(), "]*$"
                )}),
            ),
            ("value", json!({"pattern": NOT_BLANK_PATTERN})),
        ])],
        // `upsert::check_lifecycle_fields` and the exact subject match of `prepare_upsert`.
        "ContinuityUpsertRequest" => {
            let mut rules = vec![
                json!({
                    "if": {"required": ["lifecycle_transition"], "properties": {"lifecycle_transition": {"const": "supersede"}}},
                    "then": {"required": ["superseded_by"], "properties": {"superseded_by": {"type": "string"}}},
                    "else": {"properties": {"superseded_by": {"type": "null"}}}
                }),
                json!({
                    "if": {"properties": {"subject_kind": {"enum": ["user", "peer"]}}},
                    "then": {"properties": {"lifecycle_transition": {"type": "null"}}}
                }),
            ];
            rules.extend(same_subject_kind("capsule"));
            rules
        }
        "ContinuityCompareRequest" => {
            let mut rules = vec![verification_blocks("candidate_capsule")];
            rules.extend(same_subject_kind("candidate_capsule"));
            rules
        }
        // `verify::check_revalidate`.
        "ContinuityRevalidateRequest" => {
            let mut rules = vec![
                json!({
                    "if": {"properties": {"outcome": {"const": "correct"}}},
                    "then": {"required": ["candidate_capsule"], "properties": {"candidate_capsule": {"type": "object"}}},
                    "else": {"properties": {"candidate_capsule": {"type": "null"}}}
                }),
                json!({
                    "if": {"properties": {"outcome": {"const": "confirm"}}},
                    "then": {"properties": {"reason": {"type": "null"}}}
                }),
                json!({
                    "if": {"properties": {"outcome": {"enum": ["degrade", "conflict"]}}},
                    "then": {"required": ["reason"], "properties": {"reason": {"type": "string", "minLength": 1}}}
                }),
                verification_blocks("candidate_capsule"),
            ];
            rules.extend(same_subject_kind("candidate_capsule"));
            rules
        }
        // `request::any_delete_flag`.
        "ContinuityDeleteRequest" => {
            let flag = |name: &str| json!({"required": [name], "properties": {name: {"enum": lax_true()}}});
            vec![
                json!({"anyOf": [flag("delete_active"), flag("delete_archive"), flag("delete_fallback")]}),
            ]
        }
        // `lifecycle::check_request`: `superseded_by` with `supersede` and only then.
        "ContinuityLifecycleRequest" => vec![json!({
            "if": {"properties": {"transition": {"const": "supersede"}}},
            "then": {"required": ["superseded_by"], "properties": {"superseded_by": {"type": "string"}}},
            "else": {"properties": {"superseded_by": {"type": "null"}}}
        })],
        "PatchOperation" => vec![patch_operation()],
        "ContinuityColdStoreRequest" => vec![json!({"properties": {
            "source_archive_path": {"pattern": ARCHIVE_PATH_PATTERN}
        }})],
        // `request::exactly_one_selector`, then the chosen path's rule.
        "ContinuityColdRehydrateRequest" => {
            let unset = json!({"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 0}]});
            vec![json!({"oneOf": [
                {"required": ["cold_stub_path"], "properties": {
                    "cold_stub_path": {"type": "string", "pattern": COLD_STUB_PATH_PATTERN},
                    "source_archive_path": unset
                }},
                {"required": ["source_archive_path"], "properties": {
                    "source_archive_path": {"type": "string", "pattern": ARCHIVE_PATH_PATTERN},
                    "cold_stub_path": unset
                }}
            ]})]
        }
        // `context::selection::effective_selectors`: a subject half given (a kind without an
        // id, or an id without a kind) only with selectors; a given id normalises to a key.
        "ContextRetrieveRequest" => vec![
            json!({"properties": {"subject_id": {"anyOf": [
                {"type": "null"},
                {"type": "string", "maxLength": 0},
                {"type": "string", "pattern": SUBJECT_ID_PATTERN}
            ]}}}),
            json!({"anyOf": [
                {
                    "required": ["subject_kind", "subject_id"],
                    "properties": {"subject_kind": {"type": "string"}, "subject_id": {"type": "string", "minLength": 1}}
                },
                {"properties": {
                    "subject_kind": {"type": "null"},
                    "subject_id": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 0}]}
                }},
                {"required": ["continuity_selectors"], "properties": {"continuity_selectors": {"minItems": 1}}}
            ]}),
        ],
        "ContinuitySelector" => vec![json!({"properties": {"subject_id": subject_id()}})],
        // `context::snapshot::resolve_as_of`: `commit` refs are never found here, a timestamp
        // needs its value.
        "SnapshotAsOfRequest" => vec![
            json!({"properties": {"mode": {"enum": ["working_tree", "timestamp"]}}}),
            json!({
                "if": {"required": ["mode"], "properties": {"mode": {"const": "timestamp"}}},
                "then": {"required": ["value"], "properties": {"value": {"type": "string", "minLength": 1}}}
            }),
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::memory::document_path;
    use crate::domain::subject::normalize_subject_id;
    use crate::domain::tasks::check_task_id;
    use crate::domain::timestamp::require_utc;
    use crate::domain::validation::validate_repo_relative_paths;

    fn matches(pattern: &str, value: &str) -> bool {
        regex::Regex::new(pattern).unwrap().is_match(value)
    }

    /// Every value a pattern admits passes the rule it states.
    #[test]
    fn the_patterns_admit_only_what_the_rules_accept() {
        type Rule<'a> = &'a dyn Fn(&str) -> bool;
        let cases: &[(&str, &str, Rule)] = &[
            (SUBJECT_ID_PATTERN, "subject", &|v| {
                normalize_subject_id(v).is_ok()
            }),
            (UTC_TIMESTAMP_PATTERN, "timestamp", &|v| {
                require_utc(v, "f").is_ok()
            }),
            (TASK_ID_PATTERN, "task id", &|v| check_task_id(v).is_ok()),
            (REPO_PATH_PATTERN, "repo path", &|v| {
                validate_repo_relative_paths(&[v.to_owned()], "f").is_ok()
            }),
        ];
        let values = [
            "",
            " ",
            "???",
            "-",
            "a",
            "A b",
            "\u{212A}",
            "İ",
            ".",
            "..",
            "...",
            "a/b",
            "a\\b",
            "2026-01-02T03:04:05Z",
            "2026-01-02T03:04:05+00:00",
            "2026-01-02Z",
            "2026-01-02 03:04Z",
            "2026-01-02T03Z",
            "2026-01-02T03:04:05.123456789Z",
            "2026-01-02T03:04:05,5+00:00",
            "2026-02-30T00:00:00Z",
            "2026-01-02T03:04:05+01:00",
            "2026-01-02T03:04:05",
            "2026-01-02T03:04:05Z\n",
            "2026-04-31T00:00:00Z",
            "memory/x.md",
            "memory",
            "memory/a/../b",
            "memory/./a",
            "/memory/a",
            "foo/a",
            "journal/2026-01-01.md",
            "memory/a b",
        ];
        for (pattern, what, accepted) in cases {
            for value in values {
                if matches(pattern, value) {
                    assert!(accepted(value), "{what} pattern admits {value:?}");
                }
            }
        }
        for good in [
            "2026-01-02T03:04:05Z",
            "2026-12-31T23:59:59.5+00:00",
            "2024-02-28Z",
        ] {
            assert!(matches(UTC_TIMESTAMP_PATTERN, good), "{good}");
        }
        for good in ["a", " Launch Plan ", "\u{212A}"] {
            assert!(matches(SUBJECT_ID_PATTERN, good), "{good}");
        }
    }

    /// The write path pattern without its look-ahead (the managed roots, checked apart).
    #[test]
    fn the_write_path_pattern_admits_only_writable_paths() {
        let rest = WRITE_PATH_PATTERN
            .strip_prefix(r"^(?!memory/(?:continuity|schedule)(?:/|$))")
            .unwrap();
        let shape = format!("^{rest}");
        for value in [
            "memory/core/identity.md",
            "projects/a/b.json",
            "journal/x.md",
            "memory",
            "memory/",
            "memory/..",
            "memory/../foo/x",
            "memory/.a",
            "memory/..a",
            "foo/x",
            "tasks/open/t.json",
            "/memory/x",
            "memory//x",
            "logs/\u{0}",
        ] {
            if matches(&shape, value) && !value.starts_with("memory/continuity/") {
                assert!(document_path(value).is_ok(), "{value:?}");
            }
        }
        assert!(matches(&shape, "memory/core/identity.md"));
        assert!(!matches(&shape, "tasks/open/t.json"));
    }
}
