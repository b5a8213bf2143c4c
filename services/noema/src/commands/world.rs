//! World kernel commands: store components, assemble scenarios, create and run worlds,
//! show their state and turn diffs, verify their hash-chained history.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use noema_client::pb::world as pb;
use noema_client::world::{self as sdk, ComponentKind, TurnEnd};
use serde_json::{Value, json};

use super::connect::ClientFlags;
use super::{CommandError, say_json};

#[derive(Debug, Subcommand)]
pub enum ComponentCommand {
    /// Store a component (idempotent: the same JSON gives the same hash). Scenarios go
    /// through `noema scenario assemble`.
    Put {
        /// json_schema, response_source, cognition_workflow or cognition_profile.
        kind: String,
        /// The document (JSON).
        file: PathBuf,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Print a stored component's document.
    Get {
        /// json_schema, response_source, cognition_workflow, cognition_profile or scenario.
        kind: String,
        hash: String,
        #[command(flatten)]
        client: ClientFlags,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// Validate and store a scenario: every agent's cognition profile and workflow must
    /// resolve.
    Assemble {
        /// The scenario document (JSON).
        file: PathBuf,
        #[command(flatten)]
        client: ClientFlags,
    },
}

#[derive(Debug, Subcommand)]
pub enum WorldCommand {
    /// Create a world at turn 0 from an assembled scenario.
    Create {
        slug: String,
        /// The scenario's hash.
        #[arg(long)]
        scenario: String,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Run attempted turns; exits 1 at the first that fails (nothing of it is committed).
    Run {
        slug: String,
        /// How many turns to run.
        #[arg(long, default_value_t = 1)]
        turns: u32,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// The world now, or its committed turn --turn.
    Show {
        slug: String,
        #[arg(long)]
        turn: Option<u64>,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// What a committed turn changed: each patch's effects, and T(N-1) -> T(N).
    Diff {
        slug: String,
        turn: u64,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Re-check the world's hash-chained history; exits 1 when a stored turn does not
    /// hold together (edited, missing or out of order).
    Verify {
        slug: String,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// The seed's park scenario end to end against `noema toys serve`: store its
    /// components, assemble it, create the world, run its turns, print turn 1's diff.
    Demo {
        /// The scenario (only `park`).
        #[arg(value_parser = ["park"])]
        scenario: String,
        #[arg(long, default_value = "park-demo")]
        slug: String,
        #[arg(long, default_value_t = 3)]
        turns: u32,
        #[command(flatten)]
        client: ClientFlags,
    },
}

fn kind(name: &str) -> Result<ComponentKind, CommandError> {
    sdk::kind_named(name).ok_or_else(|| {
        CommandError::Usage(format!(
            "{name:?} is not a component kind: json_schema, response_source, \
             cognition_workflow, cognition_profile or scenario"
        ))
    })
}

/// The file's bytes, checked to be JSON (the server checks the rest).
fn json_file(path: &Path) -> Result<Vec<u8>, CommandError> {
    let bytes = std::fs::read(path).map_err(|source| CommandError::File {
        path: path.display().to_string(),
        source,
    })?;
    serde_json::from_slice::<Value>(&bytes)
        .map_err(|e| CommandError::Usage(format!("{}: not JSON: {e}", path.display())))?;
    Ok(bytes)
}

/// JSON the server sent (JCS or plain JSON bytes).
fn parsed(bytes: &[u8]) -> Result<Value, CommandError> {
    serde_json::from_slice(bytes)
        .map_err(|e| CommandError::Found(format!("the server sent JSON that does not parse: {e}")))
}

fn put_json(hash: &str, created: bool) -> Value {
    json!({"hash": hash, "created": created})
}

pub async fn component(command: &ComponentCommand) -> Result<(), CommandError> {
    match command {
        ComponentCommand::Put {
            kind: name,
            file,
            client,
        } => {
            let kind = kind(name)?;
            if kind == ComponentKind::Scenario {
                return Err(CommandError::Usage(
                    "scenarios are assembled: noema scenario assemble FILE".into(),
                ));
            }
            let mut world = client.connect().await?.world();
            let (hash, created) = sdk::put_component(&mut world, kind, json_file(file)?).await?;
            say_json(&put_json(&hash, created));
        }
        ComponentCommand::Get {
            kind: name,
            hash,
            client,
        } => {
            let kind = kind(name)?;
            let mut world = client.connect().await?.world();
            let component = sdk::get_component(&mut world, kind, hash).await?;
            say_json(&parsed(&component.document_jcs)?);
        }
    }
    Ok(())
}

pub async fn scenario(command: &ScenarioCommand) -> Result<(), CommandError> {
    let ScenarioCommand::Assemble { file, client } = command;
    let mut world = client.connect().await?.world();
    let (hash, created) = sdk::assemble_scenario(&mut world, json_file(file)?).await?;
    say_json(&put_json(&hash, created));
    Ok(())
}

fn turn_json(turn: &pb::Turn) -> Result<Value, CommandError> {
    Ok(json!({
        "world_slug": turn.world_slug, "turn": turn.turn, "hash": turn.hash,
        "previous_turn_hash": turn.previous_turn_hash, "committed_at": turn.committed_at,
        "record": parsed(&turn.record_jcs)?,
    }))
}

pub async fn world(command: &WorldCommand) -> Result<(), CommandError> {
    match command {
        WorldCommand::Create {
            slug,
            scenario,
            client,
        } => {
            let mut world = client.connect().await?.world();
            let created = sdk::create_world(&mut world, slug, scenario).await?;
            say_json(&json!({
                "slug": created.slug, "scenario_hash": created.scenario_hash,
                "current_turn": created.current_turn, "head_hash": created.head_hash,
            }));
        }
        WorldCommand::Run {
            slug,
            turns,
            client,
        } => {
            let mut world = client.connect().await?.world();
            for _ in 0..*turns {
                match sdk::run_turn(&mut world, slug).await? {
                    TurnEnd::Committed {
                        attempt_id,
                        turn,
                        turn_hash,
                        anchor_id,
                    } => say_json(&json!({
                        "status": "committed", "attempt_id": attempt_id, "turn": turn,
                        "turn_hash": turn_hash, "anchor_id": anchor_id,
                    })),
                    TurnEnd::Failed {
                        attempt_id,
                        failure_class,
                        failure_message,
                    } => {
                        say_json(&json!({
                            "status": "failed", "attempt_id": attempt_id,
                            "failure_class": failure_class, "failure_message": failure_message,
                        }));
                        return Err(CommandError::Found(format!(
                            "attempt {attempt_id} failed ({failure_class}); nothing was committed"
                        )));
                    }
                }
            }
        }
        WorldCommand::Show { slug, turn, client } => {
            let mut world = client.connect().await?.world();
            match turn {
                Some(turn) => say_json(&turn_json(&sdk::get_turn(&mut world, slug, *turn).await?)?),
                None => say_json(&parsed(
                    &sdk::get_world(&mut world, slug).await?.world_json,
                )?),
            }
        }
        WorldCommand::Diff { slug, turn, client } => {
            let mut world = client.connect().await?.world();
            let diff = sdk::turn_diff(&mut world, slug, *turn).await?;
            say_json(&parsed(&diff.diff_json)?);
        }
        WorldCommand::Verify { slug, client } => {
            let mut world = client.connect().await?.world();
            let report = sdk::verify_world(&mut world, slug).await?;
            say_json(&json!({
                "world_slug": slug, "ok": report.ok, "turns_checked": report.turns_checked,
                "head_hash": report.head_hash,
                "broken_turn": (!report.ok).then_some(report.broken_turn),
                "problem": report.problem, "anchors_checked": report.anchors_checked,
            }));
            if !report.ok {
                return Err(CommandError::Found(format!(
                    "world {slug}'s history does not hold together at turn {}: {}",
                    report.broken_turn, report.problem
                )));
            }
        }
        WorldCommand::Demo {
            scenario: _,
            slug,
            turns,
            client,
        } => park_demo(slug, *turns, client).await?,
    }
    Ok(())
}

/// Stores the park's components in order (each placeholder replaced by the hash of the
/// component it names), creates `slug` and runs `turns` turns, then shows turn 1's diff.
async fn park_demo(slug: &str, turns: u32, client: &ClientFlags) -> Result<(), CommandError> {
    use noema_toys::scenario::{PARK, WORLD_PATCH_SCHEMA, substitute};
    let mut world = client.connect().await?.world();
    let builtin = world
        .get_builtin_component(pb::GetBuiltinComponentRequest {
            name: "world-patch".into(),
        })
        .await?
        .into_inner();
    let mut names =
        std::collections::BTreeMap::from([(WORLD_PATCH_SCHEMA.to_owned(), builtin.hash)]);
    for component in PARK {
        let document = component
            .document()
            .map_err(|e| CommandError::found(component.name, e))?;
        let bytes = serde_json::to_vec(&substitute(&document, &names))
            .map_err(|e| CommandError::found(component.name, e))?;
        let (hash, _) = match kind(component.kind)? {
            ComponentKind::Scenario => sdk::assemble_scenario(&mut world, bytes).await?,
            kind => sdk::put_component(&mut world, kind, bytes).await?,
        };
        names.insert(component.name.to_owned(), hash);
    }
    let scenario = &names["park-scenario-hash"];
    say_json(&json!({"scenario": scenario, "components": names.len() - 1}));
    sdk::create_world(&mut world, slug, scenario).await?;
    for _ in 0..turns {
        match sdk::run_turn(&mut world, slug).await? {
            TurnEnd::Committed {
                turn, turn_hash, ..
            } => {
                say_json(&json!({"status": "committed", "turn": turn, "turn_hash": turn_hash}));
            }
            TurnEnd::Failed {
                attempt_id,
                failure_class,
                failure_message,
            } => {
                return Err(CommandError::Found(format!(
                    "attempt {attempt_id} failed ({failure_class}): {failure_message}"
                )));
            }
        }
    }
    if turns > 0 {
        let diff = sdk::turn_diff(&mut world, slug, 1).await?;
        say_json(&parsed(&diff.diff_json)?);
    }
    Ok(())
}
