//! MoltNet's diary grants (`shared/compat/moltnet.md` §6): `POST`, `GET` and `DELETE
//! /diaries/{id}/grants`, served by identity's grant RPCs over Noema's shares (a grant is
//! an accepted writer or manager share). Subjects are agents (`subjectNs: "Agent"`).

use axum::extract::Path;
use noema_proto::identity::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::forward::{Caller, JsonBody};
use crate::go_json::GoJson;
use crate::reply::{Answer, Created, Creates};
use crate::route::{Route, Verb};
use crate::routes::moltnet::DIARIES;

/// A grant: who, in which namespace, with which role.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantBody {
    /// `writer` or `manager`.
    pub role: String,
    /// The agent id.
    pub subject_id: String,
    /// `Agent`.
    pub subject_ns: String,
}

/// The grant to give or revoke. Every field is required (a missing one is refused as
/// empty, after authentication).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["role", "subjectId", "subjectNs"]))]
pub struct GrantInput {
    /// `writer` or `manager`.
    #[serde(default)]
    #[schemars(extend("enum" = ["writer", "manager"]))]
    pub role: String,
    /// The agent id.
    #[serde(default)]
    #[schemars(
        length(min = 1, max = 256),
        regex(pattern = r"^[^\x00]*[^\s\x00][^\x00]*$")
    )]
    pub subject_id: String,
    /// `Agent` (MoltNet's `Human` and `Group` are refused: Noema's principals are agents).
    #[serde(default)]
    #[schemars(extend("enum" = ["Agent"]))]
    pub subject_ns: String,
}

impl From<pb::DiaryGrant> for GrantBody {
    fn from(g: pb::DiaryGrant) -> Self {
        GrantBody {
            subject_id: g.subject_id,
            subject_ns: g.subject_ns,
            role: g.role,
        }
    }
}

async fn grant(
    caller: Caller,
    Path(diary_id): Path<String>,
    JsonBody(body): JsonBody<GrantInput>,
) -> Creates<GrantBody> {
    let request = pb::GrantDiaryRequest {
        diary_id,
        subject_id: body.subject_id,
        subject_ns: body.subject_ns,
        role: body.role,
    };
    let granted = caller.diary().grant_diary(caller.request(request)).await?;
    Ok(Created(granted.into_inner().into()))
}

/// `{"grants": [grants]}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Grants {
    pub grants: Vec<GrantBody>,
}

async fn list(caller: Caller, Path(diary_id): Path<String>) -> Answer<Grants> {
    let list = caller
        .diary()
        .list_grants(caller.request(pb::ListGrantsRequest { diary_id }))
        .await?
        .into_inner();
    Ok(GoJson(Grants {
        grants: list.grants.into_iter().map(GrantBody::from).collect(),
    }))
}

/// `{"revoked": true}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Revoked {
    pub revoked: bool,
}

async fn revoke(
    caller: Caller,
    Path(diary_id): Path<String>,
    JsonBody(body): JsonBody<GrantInput>,
) -> Answer<Revoked> {
    let request = pb::RevokeGrantRequest {
        diary_id,
        subject_id: body.subject_id,
        subject_ns: body.subject_ns,
        role: body.role,
    };
    caller.diary().revoke_grant(caller.request(request)).await?;
    // MoltNet answers true whether or not the grant existed.
    Ok(GoJson(Revoked { revoked: true }))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = DIARIES;
    vec![
        r.route(
            Verb::Post,
            "/diaries/{id}/grants",
            "createDiaryGrant",
            "MoltNet: grant an agent writer or manager access (diary managers; takes effect at once)",
            grant,
        )
        .calls("GrantDiary")
        .status(409, "The subject already has another role on this diary")
        .tool(
            "diary_grants_create",
            "Grant an agent writer or manager access to diary `id`",
        ),
        r.route(
            Verb::Get,
            "/diaries/{id}/grants",
            "listDiaryGrants",
            "MoltNet: the diary's writer and manager grants",
            list,
        )
        .calls("ListGrants")
        .tool("diary_grants_list", "Diary `id`'s writer and manager grants"),
        r.route(
            Verb::Delete,
            "/diaries/{id}/grants",
            "revokeDiaryGrant",
            "MoltNet: revoke a writer or manager grant (idempotent)",
            revoke,
        )
        .calls("RevokeGrant")
        .tool(
            "diary_grants_revoke",
            "Revoke an agent's writer or manager grant on diary `id`",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go_json::tests::assert_sorted;

    #[test]
    fn bodies_are_in_moltnets_order() {
        assert_sorted(&GrantBody::from(pb::DiaryGrant {
            subject_id: "agent:b".into(),
            subject_ns: "Agent".into(),
            role: "writer".into(),
        }));
        assert_sorted(&Revoked { revoked: true });
    }
}
