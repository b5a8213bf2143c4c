//! The world kernel from an agent runtime or a tool: components stored by content hash,
//! scenarios assembled, worlds created and run turn by turn, and their hash-chained
//! history read back and verified.
//!
//! ```no_run
//! # async fn demo(noema: noema_client::Noema) -> Result<(), noema_client::ClientError> {
//! use noema_client::world::{ComponentKind, TurnEnd, run_turn};
//! let mut world = noema.world();
//! let (hash, _created) = noema_client::world::put_component(
//!     &mut world, ComponentKind::JsonSchema, br#"{"type": "object"}"#.to_vec()).await?;
//! match run_turn(&mut world, "park-demo").await? {
//!     TurnEnd::Committed { turn, .. } => println!("turn {turn} committed"),
//!     TurnEnd::Failed { failure_class, .. } => println!("failed: {failure_class}"),
//! }
//! # let _ = hash; Ok(()) }
//! ```

use noema_proto::world::v1 as pb;

pub use pb::ComponentKind;

use crate::{ClientError, WorldClient};

/// A component kind by its name in the seed (`json_schema`, `response_source`,
/// `cognition_workflow`, `cognition_profile`, `scenario`).
pub fn kind_named(name: &str) -> Option<ComponentKind> {
    Some(match name.replace('-', "_").as_str() {
        "json_schema" => ComponentKind::JsonSchema,
        "response_source" => ComponentKind::ResponseSource,
        "cognition_workflow" => ComponentKind::CognitionWorkflow,
        "cognition_profile" => ComponentKind::CognitionProfile,
        "scenario" => ComponentKind::Scenario,
        _ => return None,
    })
}

/// Stores `document_json` (UTF-8 JSON) as a component of `kind`; returns its hash and
/// whether it was new (a put of a stored document changes nothing). Scenarios go through
/// [`assemble_scenario`], which checks every reference first.
pub async fn put_component(
    world: &mut WorldClient,
    kind: ComponentKind,
    document_json: Vec<u8>,
) -> Result<(String, bool), ClientError> {
    let reply = world
        .put_component(pb::PutComponentRequest {
            kind: kind.into(),
            document_json,
        })
        .await?
        .into_inner();
    Ok((reply.hash, reply.created))
}

/// A stored component by kind and hash; its document is the JCS bytes the hash covers.
pub async fn get_component(
    world: &mut WorldClient,
    kind: ComponentKind,
    hash: &str,
) -> Result<pb::Component, ClientError> {
    Ok(world
        .get_component(pb::GetComponentRequest {
            kind: kind.into(),
            hash: hash.to_owned(),
        })
        .await?
        .into_inner())
}

/// Validates and stores a scenario (every agent's cognition profile and workflow must
/// resolve); returns its hash and whether it was new.
pub async fn assemble_scenario(
    world: &mut WorldClient,
    document_json: Vec<u8>,
) -> Result<(String, bool), ClientError> {
    let reply = world
        .assemble_scenario(pb::AssembleScenarioRequest { document_json })
        .await?
        .into_inner();
    Ok((reply.hash, reply.created))
}

/// Creates world `slug` at turn 0 from an assembled scenario.
pub async fn create_world(
    world: &mut WorldClient,
    slug: &str,
    scenario_hash: &str,
) -> Result<pb::World, ClientError> {
    Ok(world
        .create_world(pb::CreateWorldRequest {
            slug: slug.to_owned(),
            scenario_hash: scenario_hash.to_owned(),
        })
        .await?
        .into_inner())
}

/// How one attempted turn ended. A refusal to start (another attempt holds the world's
/// lease: reason `LEASE_HELD`) is an error instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// The turn committed; `anchor_id` is set when the ledger anchored its hash.
    Committed {
        attempt_id: String,
        turn: u64,
        turn_hash: String,
        anchor_id: Option<String>,
    },
    /// Nothing was committed; the attempt's traces stay for inspection.
    Failed {
        attempt_id: String,
        failure_class: String,
        failure_message: String,
    },
}

/// Runs one attempted turn of world `slug`.
pub async fn run_turn(world: &mut WorldClient, slug: &str) -> Result<TurnEnd, ClientError> {
    let reply = world
        .run_turn(pb::RunTurnRequest {
            slug: slug.to_owned(),
        })
        .await?
        .into_inner();
    Ok(match reply.status.as_str() {
        "committed" => TurnEnd::Committed {
            attempt_id: reply.attempt_id,
            turn: reply.turn,
            turn_hash: reply.turn_hash,
            anchor_id: Some(reply.anchor_id).filter(|a| !a.is_empty()),
        },
        "failed" => TurnEnd::Failed {
            attempt_id: reply.attempt_id,
            failure_class: reply.failure_class,
            failure_message: reply.failure_message,
        },
        other => {
            return Err(ClientError::Invalid(format!(
                "the world answered a turn with status {other:?}"
            )));
        }
    })
}

/// World `slug` now: its current turn, head hash and state (`world_json`).
pub async fn get_world(world: &mut WorldClient, slug: &str) -> Result<pb::World, ClientError> {
    Ok(world
        .get_world(pb::GetWorldRequest {
            slug: slug.to_owned(),
        })
        .await?
        .into_inner())
}

/// Committed turn `turn` of world `slug`, with its record's JCS bytes.
pub async fn get_turn(
    world: &mut WorldClient,
    slug: &str,
    turn: u64,
) -> Result<pb::Turn, ClientError> {
    Ok(world
        .get_turn(pb::GetTurnRequest {
            slug: slug.to_owned(),
            turn,
        })
        .await?
        .into_inner())
}

/// What turn `turn` of world `slug` changed (`diff_json`).
pub async fn turn_diff(
    world: &mut WorldClient,
    slug: &str,
    turn: u64,
) -> Result<pb::TurnDiff, ClientError> {
    Ok(world
        .get_turn_diff(pb::GetTurnRequest {
            slug: slug.to_owned(),
            turn,
        })
        .await?
        .into_inner())
}

/// Re-checks world `slug`'s hash-chained history (and its ledger anchors).
pub async fn verify_world(
    world: &mut WorldClient,
    slug: &str,
) -> Result<pb::VerifyWorldReply, ClientError> {
    Ok(world
        .verify_world(pb::VerifyWorldRequest {
            slug: slug.to_owned(),
        })
        .await?
        .into_inner())
}
