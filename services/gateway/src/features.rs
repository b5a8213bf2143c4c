//! The capability features `GET /v1/capabilities` can list: CogniRelay's keys (its
//! clients test for them; `shared/compat/cognirelay.md` §14) and Noema's own, under
//! `noema.`. A feature is declared on the routes that implement it
//! ([`crate::route::Route::feature`]) and listed only while such a route is served, so
//! the map says what this instance really serves. Summaries are Noema's words.

use crate::route::Feature;

const fn feature(key: &'static str, summary: &'static str) -> Feature {
    Feature { key, summary }
}

// CogniRelay's keys.

/// The order CogniRelay lists its keys in (`shared/compat/cognirelay.md` §14); the map
/// lists them first, in this order, then Noema's own by key.
pub const COGNIRELAY_ORDER: [&str; 18] = [
    "continuity.read.startup_view",
    "continuity.read.trust_signals",
    "continuity.upsert.session_end_snapshot",
    "continuity.read.salience_ranking",
    "continuity.read.thread_identity",
    "continuity.stable_preferences",
    "continuity.upsert.preserve_mode",
    "continuity.patch",
    "continuity.lifecycle",
    "context.retrieve.continuity_state",
    "context.retrieve.graph_context",
    "continuity.read.startup_graph_summary",
    "schedule.one_shot_reminders",
    "coordination.handoffs",
    "coordination.shared_state",
    "messaging.direct",
    "peers.registry",
    "discovery.tools",
];

/// Where `key` goes in the map: CogniRelay's keys by [`COGNIRELAY_ORDER`], then the rest.
pub fn listing_rank(key: &str) -> (usize, &str) {
    let rank = COGNIRELAY_ORDER
        .iter()
        .position(|k| *k == key)
        .unwrap_or(COGNIRELAY_ORDER.len());
    (rank, key)
}

pub const CONTINUITY_STARTUP_VIEW: Feature = feature(
    "continuity.read.startup_view",
    "Startup view on continuity reads: orientation extracted from the capsule",
);
pub const CONTINUITY_TRUST_SIGNALS: Feature = feature(
    "continuity.read.trust_signals",
    "Trust signals on continuity reads: recency, completeness, integrity, scope match",
);
pub const CONTINUITY_SESSION_END_SNAPSHOT: Feature = feature(
    "continuity.upsert.session_end_snapshot",
    "Session-end snapshot merged into the capsule on upsert",
);
pub const CONTINUITY_SALIENCE: Feature = feature(
    "continuity.read.salience_ranking",
    "Deterministic salience ranking of capsules on list and retrieve",
);
pub const CONTINUITY_THREAD_IDENTITY: Feature = feature(
    "continuity.read.thread_identity",
    "Thread descriptors: scope and identity anchors, lifecycle",
);
pub const CONTINUITY_STABLE_PREFERENCES: Feature = feature(
    "continuity.stable_preferences",
    "Stable user and peer preferences kept on capsules",
);
pub const CONTINUITY_PRESERVE_MODE: Feature = feature(
    "continuity.upsert.preserve_mode",
    "Upsert with merge_mode=preserve keeps omitted fields",
);
pub const CONTINUITY_PATCH: Feature = feature(
    "continuity.patch",
    "Patch operations on a capsule's list fields",
);
pub const CONTINUITY_LIFECYCLE: Feature = feature(
    "continuity.lifecycle",
    "Lifecycle transitions of thread and task capsules",
);
pub const CONTEXT_CONTINUITY_STATE: Feature = feature(
    "context.retrieve.continuity_state",
    "Context bundles carrying continuity state from several capsules",
);
pub const CONTEXT_GRAPH_CONTEXT: Feature = feature(
    "context.retrieve.graph_context",
    "Derived graph context on context retrieval",
);
pub const CONTINUITY_STARTUP_GRAPH_SUMMARY: Feature = feature(
    "continuity.read.startup_graph_summary",
    "Derived graph summary on startup continuity reads",
);
pub const SCHEDULE_REMINDERS: Feature = feature(
    "schedule.one_shot_reminders",
    "One-shot reminders and task nudges",
);
pub const COORDINATION_HANDOFFS: Feature = feature(
    "coordination.handoffs",
    "Handoffs between agents, consumed by their recipient",
);
pub const COORDINATION_SHARED_STATE: Feature = feature(
    "coordination.shared_state",
    "Versioned shared coordination artifacts written by their owner",
);
pub const MESSAGING_DIRECT: Feature = feature(
    "messaging.direct",
    "Direct messages with acknowledgement and tracked delivery",
);
pub const PEERS_REGISTRY: Feature =
    feature("peers.registry", "Peer registry with trust transitions");
pub const DISCOVERY_TOOLS: Feature = feature(
    "discovery.tools",
    "Tool catalog with input schemas, served over MCP at /v1/mcp",
);

// Noema's own.
pub const LEDGER_OBJECTS: Feature = feature(
    "noema.ledger.canonical_objects",
    "Immutable content-addressed objects with an audited write halt",
);
pub const LEDGER_REFERENCES: Feature = feature(
    "noema.ledger.signed_references",
    "Ed25519-signed agent references to canonical objects",
);
pub const IDENTITY_AGENTS: Feature = feature(
    "noema.identity.agents",
    "Agents with Ed25519 keys: trust on first use, signed rotation",
);
pub const SECURITY_TOKENS: Feature = feature(
    "noema.security.tokens",
    "Scoped API tokens: issue, list, revoke, rotate",
);
pub const DIARY_ENTRIES: Feature = feature(
    "noema.diaries.entries",
    "Diaries of content-addressed entries, with shares, relations and search",
);
pub const DIARY_SIGNING: Feature = feature(
    "noema.diaries.signing",
    "Signing requests that make entries immutable and verifiable",
);
pub const WORLD_KERNEL: Feature = feature(
    "noema.world.kernel",
    "World kernel: content-addressed components, worlds run turn by turn, WorldPatch only",
);
pub const WORLD_TRACES: Feature = feature(
    "noema.world.traces",
    "Durable source-invocation and LLM-call traces of every attempted turn",
);
pub const ORCHESTRATOR_RUNTIME: Feature = feature(
    "noema.orchestrator.governed_runtime",
    "Governed requests: plan, risk, signed approval, execute, trace, evaluate, reward",
);
