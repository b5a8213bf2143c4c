//! The continuity capsule (digest §1): its request-model declarations and its typed form.
//!
//! Each pydantic model of the original appears twice: a [`Model`] declaration (field order,
//! types, bounds) that validates incoming JSON with pydantic's reports, and a serde struct that
//! the rules work on. The structs serialise in the model's field order with absent optionals
//! omitted, which is `model_dump(mode="json", exclude_none=True)`; defaults (`[]`, `{}`) stay.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::{ContinuityError, Loc};
use super::json::{Json, canonical_json, to_py_json};
use super::schema::{Field, Model, Ty, validate_at};

// ---------------------------------------------------------------------------------------------
// Enumerations
// ---------------------------------------------------------------------------------------------

macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident, $literal:ident { $($variant:ident = $wire:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $(#[serde(rename = $wire)] $variant,)+
        }

        /// The wire values, in the original's `Literal[...]` order.
        pub const $literal: &[&str] = &[$($wire),+];

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire,)+
                }
            }

            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $($wire => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum!(
    /// Whose continuity a capsule holds.
    SubjectKind, SUBJECT_KINDS { User = "user", Peer = "peer", Thread = "thread", Task = "task" }
);
wire_enum!(
    /// Why a capsule was written.
    UpdateReason, UPDATE_REASONS {
        StartupRefresh = "startup_refresh",
        PreCompaction = "pre_compaction",
        InteractionBoundary = "interaction_boundary",
        Manual = "manual",
        Migration = "migration",
    }
);
wire_enum!(
    /// A verification signal's kind (`verification_kind`, `strongest_signal`, signals).
    SignalKind, SIGNAL_KINDS {
        SelfReview = "self_review",
        ExternalObservation = "external_observation",
        UserConfirmation = "user_confirmation",
        PeerConfirmation = "peer_confirmation",
        SystemCheck = "system_check",
    }
);
wire_enum!(
    FreshnessClass, FRESHNESS_CLASSES {
        Persistent = "persistent",
        Durable = "durable",
        Situational = "situational",
        Ephemeral = "ephemeral",
    }
);
wire_enum!(
    TrustLevel, TRUST_LEVELS { Low = "low", Guarded = "guarded", Normal = "normal", High = "high" }
);
wire_enum!(
    VerificationStatus, VERIFICATION_STATUSES {
        Unverified = "unverified",
        SelfAttested = "self_attested",
        ExternallySupported = "externally_supported",
        UserConfirmed = "user_confirmed",
        PeerConfirmed = "peer_confirmed",
        SystemConfirmed = "system_confirmed",
        Conflicted = "conflicted",
    }
);
wire_enum!(
    HealthStatus, HEALTH_STATUSES { Healthy = "healthy", Degraded = "degraded", Conflicted = "conflicted" }
);
wire_enum!(
    /// A thread/task descriptor's lifecycle state.
    Lifecycle, LIFECYCLES {
        Active = "active",
        Suspended = "suspended",
        Concluded = "concluded",
        Superseded = "superseded",
    }
);
wire_enum!(
    RationaleKind, RATIONALE_KINDS { Decision = "decision", Assumption = "assumption", Tension = "tension" }
);
wire_enum!(
    RationaleStatus, RATIONALE_STATUSES { Active = "active", Superseded = "superseded", Retired = "retired" }
);

impl SignalKind {
    /// `CONTINUITY_SIGNAL_RANK`: self_review 0 < external_observation 1 < peer_confirmation 2 <
    /// user_confirmation 3 < system_check 4.
    pub fn rank(self) -> u8 {
        match self {
            SignalKind::SelfReview => 0,
            SignalKind::ExternalObservation => 1,
            SignalKind::PeerConfirmation => 2,
            SignalKind::UserConfirmation => 3,
            SignalKind::SystemCheck => 4,
        }
    }

    /// `CONTINUITY_SIGNAL_STATUS`: the verification status a signal kind establishes.
    pub fn status(self) -> VerificationStatus {
        match self {
            SignalKind::SelfReview => VerificationStatus::SelfAttested,
            SignalKind::ExternalObservation => VerificationStatus::ExternallySupported,
            SignalKind::PeerConfirmation => VerificationStatus::PeerConfirmed,
            SignalKind::UserConfirmation => VerificationStatus::UserConfirmed,
            SignalKind::SystemCheck => VerificationStatus::SystemConfirmed,
        }
    }
}

impl SubjectKind {
    /// Thread and task capsules carry descriptors and lifecycles.
    pub fn is_thread_like(self) -> bool {
        matches!(self, SubjectKind::Thread | SubjectKind::Task)
    }
}

// ---------------------------------------------------------------------------------------------
// Declarations (pydantic models of the original, field for field)
// ---------------------------------------------------------------------------------------------

const fn str_max(max: usize) -> Ty {
    Ty::Str {
        min: 0,
        max: Some(max),
    }
}

const fn str_range(min: usize, max: usize) -> Ty {
    Ty::Str {
        min,
        max: Some(max),
    }
}

const ANY_STR: Ty = Ty::Str { min: 0, max: None };

const fn list_of(item: &'static Ty, max: usize) -> Ty {
    Ty::List {
        item,
        min: None,
        max: Some(max),
    }
}

const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: true,
    }
}

const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: false,
    }
}

const NULLABLE_STR: Ty = Ty::Nullable(&ANY_STR);

pub static CONTINUITY_SOURCE: Model = Model {
    name: "ContinuitySource",
    fields: &[
        req("producer", str_range(1, 100)),
        req("update_reason", Ty::Literal(UPDATE_REASONS)),
        opt("inputs", list_of(&ANY_STR, 12)),
    ],
    forbid_extra: false,
    after: None,
};

pub static RELATIONSHIP_MODEL: Model = Model {
    name: "ContinuityRelationshipModel",
    fields: &[
        opt("trust_level", Ty::Nullable(&Ty::Literal(TRUST_LEVELS))),
        opt("preferred_style", list_of(&ANY_STR, 5)),
        opt("sensitivity_notes", list_of(&ANY_STR, 5)),
    ],
    forbid_extra: false,
    after: None,
};

pub static RETRIEVAL_HINTS: Model = Model {
    name: "ContinuityRetrievalHints",
    fields: &[
        opt("must_include", list_of(&ANY_STR, 8)),
        opt("avoid", list_of(&ANY_STR, 8)),
        opt("load_next", list_of(&ANY_STR, 8)),
    ],
    forbid_extra: false,
    after: None,
};

pub static ATTENTION_POLICY: Model = Model {
    name: "ContinuityAttentionPolicy",
    fields: &[
        opt("early_load", list_of(&ANY_STR, 8)),
        opt("presence_bias_overrides", list_of(&ANY_STR, 5)),
    ],
    forbid_extra: false,
    after: None,
};

pub static CONFIDENCE: Model = Model {
    name: "ContinuityConfidence",
    fields: &[
        req(
            "continuity",
            Ty::Float {
                ge: Some(0.0),
                le: Some(1.0),
            },
        ),
        req(
            "relationship_model",
            Ty::Float {
                ge: Some(0.0),
                le: Some(1.0),
            },
        ),
    ],
    forbid_extra: false,
    after: None,
};

pub static VERIFICATION_STATE: Model = Model {
    name: "ContinuityVerificationState",
    fields: &[
        req("status", Ty::Literal(VERIFICATION_STATUSES)),
        req("last_revalidated_at", ANY_STR),
        req("strongest_signal", Ty::Literal(SIGNAL_KINDS)),
        opt("evidence_refs", list_of(&ANY_STR, 4)),
        opt("conflict_summary", Ty::Nullable(&str_max(240))),
    ],
    forbid_extra: false,
    after: None,
};

pub static FRESHNESS: Model = Model {
    name: "ContinuityFreshness",
    fields: &[
        opt(
            "freshness_class",
            Ty::Nullable(&Ty::Literal(FRESHNESS_CLASSES)),
        ),
        opt("expires_at", NULLABLE_STR),
        opt(
            "stale_after_seconds",
            Ty::Nullable(&Ty::Int {
                ge: Some(300),
                le: Some(31_536_000),
            }),
        ),
    ],
    forbid_extra: false,
    after: None,
};

pub static CAPSULE_HEALTH: Model = Model {
    name: "ContinuityCapsuleHealth",
    fields: &[
        req("status", Ty::Literal(HEALTH_STATUSES)),
        opt("reasons", list_of(&ANY_STR, 5)),
        req("last_checked_at", ANY_STR),
    ],
    forbid_extra: false,
    after: None,
};

pub static NEGATIVE_DECISION: Model = Model {
    name: "NegativeDecision",
    fields: &[
        req("decision", ANY_STR),
        req("rationale", ANY_STR),
        opt("created_at", NULLABLE_STR),
        opt("updated_at", NULLABLE_STR),
        opt("last_confirmed_at", NULLABLE_STR),
    ],
    forbid_extra: true,
    after: None,
};

pub static RATIONALE_ENTRY: Model = Model {
    name: "RationaleEntry",
    fields: &[
        req("tag", str_range(1, 80)),
        req("kind", Ty::Literal(RATIONALE_KINDS)),
        req("status", Ty::Literal(RATIONALE_STATUSES)),
        req("summary", str_max(320)),
        req("reasoning", str_max(560)),
        opt("alternatives_considered", list_of(&ANY_STR, 3)),
        opt("depends_on", list_of(&ANY_STR, 3)),
        opt("supersedes", Ty::Nullable(&str_max(80))),
        opt("created_at", NULLABLE_STR),
        opt("updated_at", NULLABLE_STR),
        opt("last_confirmed_at", NULLABLE_STR),
    ],
    forbid_extra: true,
    after: None,
};

pub static CONTINUITY_STATE: Model = Model {
    name: "ContinuityState",
    fields: &[
        req("top_priorities", list_of(&ANY_STR, 8)),
        req("active_concerns", list_of(&ANY_STR, 5)),
        req("active_constraints", list_of(&ANY_STR, 8)),
        req("open_loops", list_of(&ANY_STR, 8)),
        req("stance_summary", str_max(240)),
        req("drift_signals", list_of(&ANY_STR, 5)),
        opt("working_hypotheses", list_of(&ANY_STR, 5)),
        opt("long_horizon_commitments", list_of(&ANY_STR, 5)),
        opt("session_trajectory", list_of(&ANY_STR, 5)),
        opt(
            "negative_decisions",
            list_of(&Ty::Model(&NEGATIVE_DECISION), 4),
        ),
        opt("trailing_notes", list_of(&ANY_STR, 3)),
        opt("curiosity_queue", list_of(&ANY_STR, 5)),
        opt(
            "rationale_entries",
            list_of(&Ty::Model(&RATIONALE_ENTRY), 6),
        ),
        opt("related_documents", Ty::Any),
        opt(
            "relationship_model",
            Ty::Nullable(&Ty::Model(&RELATIONSHIP_MODEL)),
        ),
        opt(
            "retrieval_hints",
            Ty::Nullable(&Ty::Model(&RETRIEVAL_HINTS)),
        ),
    ],
    forbid_extra: false,
    after: None,
};

pub static STABLE_PREFERENCE: Model = Model {
    name: "StablePreference",
    fields: &[
        req("tag", str_range(1, 80)),
        req("content", str_range(1, 240)),
        opt("created_at", NULLABLE_STR),
        opt("updated_at", NULLABLE_STR),
        opt("last_confirmed_at", NULLABLE_STR),
    ],
    forbid_extra: true,
    after: None,
};

pub static IDENTITY_ANCHOR: Model = Model {
    name: "IdentityAnchor",
    fields: &[
        req("kind", str_range(1, 40)),
        req("value", str_range(1, 200)),
    ],
    forbid_extra: false,
    after: None,
};

pub static THREAD_DESCRIPTOR: Model = Model {
    name: "ThreadDescriptor",
    fields: &[
        req("label", str_range(1, 120)),
        opt("keywords", list_of(&ANY_STR, 6)),
        opt("scope_anchors", list_of(&ANY_STR, 4)),
        opt("identity_anchors", list_of(&Ty::Model(&IDENTITY_ANCHOR), 4)),
        opt("lifecycle", Ty::Nullable(&Ty::Literal(LIFECYCLES))),
        opt("superseded_by", Ty::Nullable(&str_range(1, 200))),
    ],
    forbid_extra: false,
    after: None,
};

pub static CONTINUITY_CAPSULE: Model = Model {
    name: "ContinuityCapsule",
    fields: &[
        opt("schema_version", Ty::Literal(SCHEMA_VERSIONS)),
        req("subject_kind", Ty::Literal(SUBJECT_KINDS)),
        req("subject_id", str_range(1, 200)),
        req("updated_at", ANY_STR),
        req("verified_at", ANY_STR),
        req("source", Ty::Model(&CONTINUITY_SOURCE)),
        req("continuity", Ty::Model(&CONTINUITY_STATE)),
        req("confidence", Ty::Model(&CONFIDENCE)),
        opt(
            "verification_kind",
            Ty::Nullable(&Ty::Literal(SIGNAL_KINDS)),
        ),
        opt(
            "attention_policy",
            Ty::Nullable(&Ty::Model(&ATTENTION_POLICY)),
        ),
        opt("freshness", Ty::Nullable(&Ty::Model(&FRESHNESS))),
        opt("canonical_sources", list_of(&ANY_STR, 8)),
        opt("metadata", Ty::Dict),
        opt(
            "verification_state",
            Ty::Nullable(&Ty::Model(&VERIFICATION_STATE)),
        ),
        opt("capsule_health", Ty::Nullable(&Ty::Model(&CAPSULE_HEALTH))),
        opt(
            "stable_preferences",
            list_of(&Ty::Model(&STABLE_PREFERENCE), 12),
        ),
        opt(
            "thread_descriptor",
            Ty::Nullable(&Ty::Model(&THREAD_DESCRIPTOR)),
        ),
    ],
    forbid_extra: false,
    after: None,
};

/// Capsule schema versions accepted on input; every write stores [`SCHEMA_VERSION`].
pub const SCHEMA_VERSIONS: &[&str] = &["1.0", "1.1"];
pub const SCHEMA_VERSION: &str = "1.1";

// ---------------------------------------------------------------------------------------------
// Typed capsule
// ---------------------------------------------------------------------------------------------

fn default_schema_version() -> String {
    SCHEMA_VERSION.to_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContinuitySource {
    pub producer: String,
    pub update_reason: UpdateReason,
    #[serde(default)]
    pub inputs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RelationshipModel {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_level: Option<TrustLevel>,
    #[serde(default)]
    pub preferred_style: Vec<String>,
    #[serde(default)]
    pub sensitivity_notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RetrievalHints {
    #[serde(default)]
    pub must_include: Vec<String>,
    #[serde(default)]
    pub avoid: Vec<String>,
    #[serde(default)]
    pub load_next: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AttentionPolicy {
    #[serde(default)]
    pub early_load: Vec<String>,
    #[serde(default)]
    pub presence_bias_overrides: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confidence {
    pub continuity: f64,
    pub relationship_model: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerificationState {
    pub status: VerificationStatus,
    pub last_revalidated_at: String,
    pub strongest_signal: SignalKind,
    #[serde(default)]
    pub evidence_refs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict_summary: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Freshness {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freshness_class: Option<FreshnessClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_after_seconds: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapsuleHealth {
    pub status: HealthStatus,
    #[serde(default)]
    pub reasons: Vec<String>,
    pub last_checked_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NegativeDecision {
    pub decision: String,
    pub rationale: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_confirmed_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RationaleEntry {
    pub tag: String,
    pub kind: RationaleKind,
    pub status: RationaleStatus,
    pub summary: String,
    pub reasoning: String,
    #[serde(default)]
    pub alternatives_considered: Vec<String>,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_confirmed_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContinuityState {
    pub top_priorities: Vec<String>,
    pub active_concerns: Vec<String>,
    pub active_constraints: Vec<String>,
    pub open_loops: Vec<String>,
    pub stance_summary: String,
    pub drift_signals: Vec<String>,
    #[serde(default)]
    pub working_hypotheses: Vec<String>,
    #[serde(default)]
    pub long_horizon_commitments: Vec<String>,
    #[serde(default)]
    pub session_trajectory: Vec<String>,
    #[serde(default)]
    pub negative_decisions: Vec<NegativeDecision>,
    #[serde(default)]
    pub trailing_notes: Vec<String>,
    #[serde(default)]
    pub curiosity_queue: Vec<String>,
    #[serde(default)]
    pub rationale_entries: Vec<RationaleEntry>,
    /// Free JSON checked by the service rules (§1.4), stored as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_documents: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relationship_model: Option<RelationshipModel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval_hints: Option<RetrievalHints>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StablePreference {
    pub tag: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_confirmed_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityAnchor {
    pub kind: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadDescriptor {
    pub label: String,
    #[serde(default)]
    pub keywords: Vec<String>,
    #[serde(default)]
    pub scope_anchors: Vec<String>,
    #[serde(default)]
    pub identity_anchors: Vec<IdentityAnchor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
}

/// One subject's continuity capsule, fields in the original's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capsule {
    #[serde(default = "default_schema_version")]
    pub schema_version: String,
    pub subject_kind: SubjectKind,
    pub subject_id: String,
    pub updated_at: String,
    pub verified_at: String,
    pub source: ContinuitySource,
    pub continuity: ContinuityState,
    pub confidence: Confidence,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_kind: Option<SignalKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_policy: Option<AttentionPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freshness: Option<Freshness>,
    #[serde(default)]
    pub canonical_sources: Vec<String>,
    #[serde(default)]
    pub metadata: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_state: Option<VerificationState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capsule_health: Option<CapsuleHealth>,
    #[serde(default)]
    pub stable_preferences: Vec<StablePreference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_descriptor: Option<ThreadDescriptor>,
}

impl Capsule {
    /// Validates a capsule object with pydantic's rules (errors under `loc`).
    pub fn from_json_at(input: &Json, loc: &Loc) -> Result<Capsule, ContinuityError> {
        let coerced =
            validate_at(&CONTINUITY_CAPSULE, input, loc).map_err(ContinuityError::Validation)?;
        from_coerced(&coerced)
    }

    /// `model_dump(mode="json", exclude_none=True)` as a serde_json value (keys sorted).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The stored bytes: canonical JSON of the dump.
    pub fn canonical_json(&self) -> String {
        canonical_json(self)
    }

    /// The dump in model field order (what the original's responses show).
    pub fn to_json(&self) -> Json {
        serde_json::from_str(&to_py_json(self)).unwrap_or(Json::Null)
    }

    /// Loads a stored capsule (its JSON object), upgrading legacy shapes (§1.6) first.
    pub fn from_stored(value: &Value) -> Result<Capsule, ContinuityError> {
        let upgraded = super::validation::upgrade_legacy(value);
        let json = Json::from_value(&upgraded);
        Capsule::from_json_at(&json, &Loc::default()).map_err(|err| match err {
            ContinuityError::Validation(errors) => ContinuityError::invalid(format!(
                "Invalid continuity capsule: {} validation error{} for ContinuityCapsule",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" }
            )),
            other => other,
        })
    }
}

/// Turns a value the declarations accepted into its typed form. The declarations and the
/// structs describe the same shapes, so this cannot fail for validated input.
pub(crate) fn from_coerced<T: serde::de::DeserializeOwned>(
    coerced: &Json,
) -> Result<T, ContinuityError> {
    serde_json::from_value(coerced.to_value()).map_err(|err| ContinuityError::Unhandled {
        code: "ValidationError".to_owned(),
        detail: err.to_string(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn every_declaration_field_exists_on_its_struct() {
        // A maximal capsule through the declarations and back must keep every field.
        let body = r#"{"schema_version":"1.0","subject_kind":"thread","subject_id":"t",
          "updated_at":"2025-01-01T00:00:00Z","verified_at":"2025-01-01T00:00:00Z",
          "source":{"producer":"p","update_reason":"manual","inputs":["i"]},
          "continuity":{"top_priorities":["a"],"active_concerns":["b"],"active_constraints":["c"],
            "open_loops":["d"],"stance_summary":"s","drift_signals":["e"],"working_hypotheses":["f"],
            "long_horizon_commitments":["g"],"session_trajectory":["h"],
            "negative_decisions":[{"decision":"x","rationale":"y","created_at":"c","updated_at":"u","last_confirmed_at":"l"}],
            "trailing_notes":["t"],"curiosity_queue":["q"],
            "rationale_entries":[{"tag":"t","kind":"decision","status":"active","summary":"s","reasoning":"r",
               "alternatives_considered":["a"],"depends_on":["d"],"supersedes":"o","created_at":"c","updated_at":"u","last_confirmed_at":"l"}],
            "related_documents":[{"path":"memory/x","kind":"doc","label":"L"}],
            "relationship_model":{"trust_level":"high","preferred_style":["p"],"sensitivity_notes":["n"]},
            "retrieval_hints":{"must_include":["m"],"avoid":["a"],"load_next":["memory/y"]}},
          "confidence":{"continuity":0.5,"relationship_model":1},
          "verification_kind":"system_check",
          "attention_policy":{"early_load":["e"],"presence_bias_overrides":["p"]},
          "freshness":{"freshness_class":"durable","expires_at":"2026-01-01T00:00:00Z","stale_after_seconds":300},
          "canonical_sources":["memory/z"],"metadata":{"k":1},
          "verification_state":{"status":"conflicted","last_revalidated_at":"x","strongest_signal":"self_review","evidence_refs":["r"],"conflict_summary":"c"},
          "capsule_health":{"status":"degraded","reasons":["r"],"last_checked_at":"x"},
          "stable_preferences":[{"tag":"t","content":"c","created_at":"c","updated_at":"u","last_confirmed_at":"l"}],
          "thread_descriptor":{"label":"L","keywords":["k"],"scope_anchors":["user:a"],
            "identity_anchors":[{"kind":"k","value":"v"}],"lifecycle":"superseded","superseded_by":"x"}}"#;
        let input = Json::parse(body.as_bytes()).unwrap();
        let capsule = Capsule::from_json_at(&input, &Loc::default()).unwrap();
        let mut want = input.to_value();
        want["confidence"]["relationship_model"] = serde_json::json!(1.0);
        assert_eq!(capsule.to_value(), want);
    }
}
