//! Continuity capsules from an agent runtime: typed requests and answers over the service's
//! JSON documents (CogniRelay's shapes, carried as bytes so their key order and number forms
//! survive). Fields the types do not name are kept in `extra`, so nothing is lost on a round
//! trip.
//!
//! ```no_run
//! # async fn demo(noema: noema_client::Noema) -> Result<(), noema_client::ClientError> {
//! use noema_client::continuity::{ReadRequest};
//! let answer = noema.continuity().read(&ReadRequest::new("user", "alice")).await?;
//! println!("{:?}", answer.body.capsule);
//! # Ok(()) }
//! ```

use noema_proto::continuity::v1 as pb;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{ClientError, ContinuityClient, Noema};

/// `continuity.source`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub producer: String,
    /// `startup_refresh`, `pre_compaction`, `interaction_boundary`, `manual` or `migration`.
    pub update_reason: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
}

/// `capsule.continuity`: the orientation itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub top_priorities: Vec<String>,
    pub active_concerns: Vec<String>,
    pub active_constraints: Vec<String>,
    pub open_loops: Vec<String>,
    pub stance_summary: String,
    pub drift_signals: Vec<String>,
    /// Every other field (`working_hypotheses`, `negative_decisions`, …) as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `capsule.confidence`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confidence {
    pub continuity: f64,
    pub relationship_model: f64,
}

/// A continuity capsule (schema 1.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capsule {
    pub subject_kind: String,
    pub subject_id: String,
    pub updated_at: String,
    pub verified_at: String,
    pub source: Source,
    pub continuity: State,
    pub confidence: Confidence,
    /// Every other field (`freshness`, `thread_descriptor`, `metadata`, …) as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `POST /v1/continuity/upsert`'s body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpsertRequest {
    pub subject_kind: String,
    pub subject_id: String,
    pub capsule: Capsule,
    /// `replace` (the default) or `preserve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_mode: Option<String>,
    /// The same key with the same body answers the first result again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl UpsertRequest {
    /// An upsert of `capsule` for its own subject.
    pub fn of(capsule: Capsule) -> UpsertRequest {
        UpsertRequest {
            subject_kind: capsule.subject_kind.clone(),
            subject_id: capsule.subject_id.clone(),
            capsule,
            merge_mode: None,
            idempotency_key: None,
            extra: Map::new(),
        }
    }
}

/// One patch operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatchOperation {
    /// e.g. `continuity.open_loops`.
    pub target: String,
    /// `append`, `remove` or `replace_at`.
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "match")]
    pub matches: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<i64>,
}

/// `POST /v1/continuity/patch`'s body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatchRequest {
    pub subject_kind: String,
    pub subject_id: String,
    pub updated_at: String,
    pub operations: Vec<PatchOperation>,
}

/// `POST /v1/continuity/read`'s body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadRequest {
    pub subject_kind: String,
    pub subject_id: String,
    #[serde(default)]
    pub allow_fallback: bool,
    /// `Some("startup")` for the startup view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
}

impl ReadRequest {
    pub fn new(subject_kind: &str, subject_id: &str) -> ReadRequest {
        ReadRequest {
            subject_kind: subject_kind.to_owned(),
            subject_id: subject_id.to_owned(),
            allow_fallback: false,
            view: None,
        }
    }
}

/// `POST /v1/continuity/list`'s body; `extra` carries the thread filters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    #[serde(default)]
    pub include_fallback: bool,
    #[serde(default)]
    pub include_archived: bool,
    #[serde(default)]
    pub include_cold: bool,
    /// `default` or `salience`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The body every capsule write answers (upsert, patch, lifecycle, revalidate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteBody {
    pub ok: bool,
    pub path: String,
    #[serde(default)]
    pub created: bool,
    #[serde(default)]
    pub updated: bool,
    /// The revision id (the original's git commit).
    pub latest_commit: Option<String>,
    #[serde(default)]
    pub capsule_sha256: Option<String>,
    #[serde(default)]
    pub normalizations_applied: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A capsule write's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub body: WriteBody,
    /// The exact JSON the service answered.
    pub raw: Vec<u8>,
    pub revision_id: String,
    pub capsule_sha256: String,
    /// A new revision was stored.
    pub written: bool,
    /// The first result of the idempotency key, answered again.
    pub replayed: bool,
}

/// `POST /v1/continuity/read`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadBody {
    pub ok: bool,
    pub path: String,
    pub capsule: Option<Capsule>,
    /// `active`, `fallback` or `missing`.
    pub source_state: String,
    pub recovery_warnings: Vec<String>,
    pub trust_signals: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A read's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub body: ReadBody,
    pub raw: Vec<u8>,
    pub revision_id: String,
}

/// One row of a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListRow {
    pub subject_kind: String,
    pub subject_id: String,
    pub path: String,
    /// `active`, `fallback`, `archived` or `cold`.
    pub artifact_state: String,
    pub phase: String,
    #[serde(default)]
    pub salience_rank: Option<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `POST /v1/continuity/list`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListBody {
    pub ok: bool,
    pub count: u64,
    pub capsules: Vec<ListRow>,
    pub unique_match: bool,
}

/// Continuity calls, in the connection's tenant (see [`Noema::in_tenant`]).
#[derive(Clone)]
pub struct Continuity {
    client: ContinuityClient,
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ClientError> {
    serde_json::to_vec(value).map_err(|e| ClientError::Invalid(format!("request body: {e}")))
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ClientError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ClientError::Invalid(format!("unexpected continuity answer: {e}")))
}

impl Continuity {
    pub(crate) fn new(client: ContinuityClient) -> Continuity {
        Continuity { client }
    }

    /// The raw generated client (every RPC, JSON bytes in and out).
    pub fn client(&self) -> ContinuityClient {
        self.client.clone()
    }

    fn request<T>(&self, message: T) -> Result<tonic::Request<T>, ClientError> {
        Ok(tonic::Request::new(message))
    }

    fn json(&self, body: Vec<u8>) -> Result<tonic::Request<pb::JsonRequest>, ClientError> {
        self.request(pb::JsonRequest { body })
    }

    fn written(response: pb::WriteResponse) -> Result<Written, ClientError> {
        Ok(Written {
            body: decode(&response.body)?,
            raw: response.body,
            revision_id: response.revision_id,
            capsule_sha256: response.capsule_sha256,
            written: response.written,
            replayed: response.replayed,
        })
    }

    pub async fn upsert(&self, request: &UpsertRequest) -> Result<Written, ClientError> {
        let response = self
            .client
            .clone()
            .upsert(self.json(encode(request)?)?)
            .await?;
        Self::written(response.into_inner())
    }

    pub async fn patch(&self, request: &PatchRequest) -> Result<Written, ClientError> {
        let response = self
            .client
            .clone()
            .patch(self.json(encode(request)?)?)
            .await?;
        Self::written(response.into_inner())
    }

    pub async fn read(&self, request: &ReadRequest) -> Result<Read, ClientError> {
        let response = self
            .client
            .clone()
            .read(self.json(encode(request)?)?)
            .await?;
        let response = response.into_inner();
        Ok(Read {
            body: decode(&response.body)?,
            raw: response.body,
            revision_id: response.revision_id,
        })
    }

    pub async fn list(&self, request: &ListRequest) -> Result<ListBody, ClientError> {
        let response = self
            .client
            .clone()
            .list(self.json(encode(request)?)?)
            .await?;
        decode(&response.into_inner().body)
    }

    /// Archives the active capsule; answers the original's JSON body.
    pub async fn archive(
        &self,
        subject_kind: &str,
        subject_id: &str,
        reason: &str,
    ) -> Result<Value, ClientError> {
        let body = serde_json::json!({"subject_kind": subject_kind, "subject_id": subject_id, "reason": reason});
        let response = self
            .client
            .clone()
            .archive(self.json(encode(&body)?)?)
            .await?;
        decode(&response.into_inner().body)
    }

    /// A subject's revisions, newest first (`page_token` continues a previous page).
    pub async fn history(
        &self,
        subject_kind: &str,
        subject_id: &str,
        page_size: u32,
        page_token: &str,
    ) -> Result<pb::HistoryResponse, ClientError> {
        let request = self.request(pb::HistoryRequest {
            subject_kind: subject_kind.to_owned(),
            subject_id: subject_id.to_owned(),
            page: Some(noema_proto::common::v1::PageRequest {
                page_size,
                page_token: page_token.to_owned(),
            }),
            include_capsules: false,
        })?;
        Ok(self.client.clone().history(request).await?.into_inner())
    }
}

impl Noema {
    /// Continuity capsules (CogniRelay's), in the connection's tenant.
    pub fn continuity(&self) -> Continuity {
        Continuity::new(ContinuityClient::new(self.channel.clone()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let text = r#"{"subject_kind":"user","subject_id":"a","updated_at":"2026-01-01T00:00:00Z","verified_at":"2026-01-01T00:00:00Z","source":{"producer":"p","update_reason":"manual"},"continuity":{"top_priorities":[],"active_concerns":[],"active_constraints":[],"open_loops":[],"stance_summary":"s","drift_signals":[],"trailing_notes":["n"]},"confidence":{"continuity":0.5,"relationship_model":1.0},"freshness":{"freshness_class":"durable"}}"#;
        let capsule: Capsule = serde_json::from_str(text).unwrap();
        assert_eq!(capsule.extra["freshness"]["freshness_class"], "durable");
        assert_eq!(capsule.continuity.extra["trailing_notes"][0], "n");
        let back: Value = serde_json::to_value(&capsule).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(text).unwrap());
        let upsert = serde_json::to_value(UpsertRequest::of(capsule)).unwrap();
        assert_eq!(upsert["subject_id"], "a");
        assert!(upsert.get("merge_mode").is_none());
    }
}
