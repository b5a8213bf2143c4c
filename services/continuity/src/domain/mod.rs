//! Continuity's rules, with no I/O: CogniRelay's continuity capsules exactly as the original
//! enforces them (digest `compat/cognirelay.md`). The operations layer loads what a rule needs
//! (the stored capsule's bytes, envelopes, `now`), calls it with the request, and stores what it
//! returns; every refusal is a [`error::ContinuityError`] carrying the original's status and
//! body (422 pydantic lists, 400/404/409 details).
//!
//! Where each digest section lives:
//!
//! | digest | module |
//! |---|---|
//! | §0 error bodies, 422 items | [`error`], [`schema`] (pydantic v2 validation and coercion) |
//! | §0 timestamps in/out | [`timestamp`] (`fromisoformat`, `Z`/`+00:00` rule, `format_iso`) |
//! | §0 canonical JSON, Python floats, `capsule_sha256` | [`json`] |
//! | §0 string lengths, `strip`, `re` `$` | [`text`] |
//! | §1.1–§1.3 capsule model, enums, limits | [`model`] (declarations + typed structs) |
//! | §1.2–§1.5 service-level 400s, related_documents precedence, 20 KB cap, §9 path rule | [`validation`] |
//! | §1.6 structured-entry stamping, §4.2 normalisations | [`normalize`] |
//! | §2 subject keys, paths, lock ids | [`subject`] |
//! | §2 fallback/archive envelopes, write results | [`write`] |
//! | §3 request bodies | [`request`]; what the service's rules require of them, for the document: [`rules`] |
//! | §4 upsert, §4.1 preserve merge, session-end snapshot | [`upsert`] |
//! | §5 lifecycle state machine and endpoint | [`lifecycle`] |
//! | §6 patch | [`patch`] |
//! | §7 read, fallback, startup view shapes | [`read`] |
//! | §7.1 trust signals (full/compact/aggregate), §7.2 startup_summary | [`trust`] |
//! | §8 list rows, filters, §8.1 salience | [`listing`] |
//! | §9 compare, revalidate | [`verify`] |
//! | §9 retention plan window, refresh plan, envelope loading | [`plans`] |
//! | §2, §9 cold payload (exact gzip), cold stub render/parse, rehydrated envelope | [`cold`] |
//! | §9 archive/delete responses, retention apply statuses | [`tiers`] |
//! | backup create / restore-test counts and validation | [`artifacts`] |
//! | §13 scopes, namespaces; tenancy; §16's collection/single-item fix | [`access`] |
//! | history: revisions chained by content id (Noema's addition) | [`revision`] |
//! | memory files, their paths, appended lines, search descriptions and bodies | [`memory`] |
//! | tasks: documents, status table, paths, query parameters | [`tasks`] |
//! | scheduled items: validation, identity, state, list filters | [`schedule`] |
//! | §10 context retrieve, graph and schedule context, snapshots | [`context`] |
//! | `/v1/metrics`: delivery and audit counts, alarms | [`metrics`] |
//!
//! Where the digest and the original's code differ, the code is followed (digest §15); each
//! place says so where it matters.

pub mod access;
pub mod artifacts;
pub mod bm25;
pub mod cold;
pub mod context;
pub mod coordination;
pub mod envelope;
pub mod error;
pub mod json;
pub mod lifecycle;
pub mod listing;
pub mod memory;
pub mod messages;
pub mod metrics;
pub mod model;
pub mod normalize;
pub mod patch;
pub mod plans;
pub mod read;
pub mod request;
pub mod revision;
pub mod rules;
pub mod schedule;
pub mod schema;
pub mod stored;
pub mod subject;
pub mod tasks;
pub mod text;
pub mod tiers;
pub mod timestamp;
pub mod trust;
pub mod upsert;
pub mod validation;
pub mod verify;
pub mod write;
