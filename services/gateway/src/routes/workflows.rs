//! CogniRelay's `GET /v1/discovery/workflows`: recommended sequences of MCP tools, in the
//! original's shape (`{ok, count, workflows: [{name, description, steps: [{order, tool}]}]}`).
//! The sequences are Noema's own and name only tools this build serves: a step whose tool
//! the tool table lacks is left out when the catalog is built, and a test fails the build
//! before that can happen. Public, as in the original.

use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::Serialize;

use crate::error::ErrorStyle;
use crate::features;
use crate::mcp;
use crate::reply::FastApiJson;
use crate::route::{Route, Routes, Verb};

const DISCOVERY: Routes = Routes::new("discovery", ErrorStyle::CogniRelay, "");

/// The route's path (`/v1/discovery` lists it among its entry points).
pub const PATH: &str = "/v1/discovery/workflows";

/// Name, description and tools in order of each workflow.
const CATALOG: [(&str, &str, &[&str]); 5] = [
    (
        "bootstrap_cycle",
        "Start of a session or of each loop: what the instance serves, its health, the \
         tenant's delivery backlog, then the context, tasks and messages of the work at hand.",
        &[
            "system.capabilities_v1",
            "system.manifest",
            "system.health",
            "metrics.get",
            "context.retrieve",
            "tasks.query",
            "messages.pending",
        ],
    ),
    (
        "collaborative_writing",
        "Exchange tracked messages with a peer, acknowledge them, and keep the thread's \
         outcome in memory for later retrieval.",
        &[
            "messages.send",
            "messages.pending",
            "messages.ack",
            "messages.thread",
            "memory.append_jsonl",
            "context.retrieve",
        ],
    ),
    (
        "task_handoff",
        "Plan shared work as tasks and pass a subject's constraints to the peer taking it \
         over, who consumes the handoff once.",
        &[
            "tasks.query",
            "tasks.create",
            "coordination.handoff_create",
            "coordination.handoffs_query",
            "coordination.handoff_consume",
            "tasks.update",
        ],
    ),
    (
        "federation_hardening",
        "Manage tokens, peer trust and envelope signing keys, verify signed messages and \
         watch verification failures and dead letters.",
        &[
            "security.tokens_list",
            "security.tokens_issue",
            "security.tokens_rotate",
            "security.tokens_revoke",
            "peers.trust_transition",
            "security.keys_rotate",
            "messages.verify",
            "metrics.get",
            "messages.replay",
        ],
    ),
    (
        "continuity_maintenance",
        "Periodic upkeep: which capsules need a refresh, which archives are due for \
         retention, the search index's state, and a backup drill.",
        &[
            "continuity.refresh_plan",
            "continuity.retention_plan",
            "index.status",
            "backup.create",
            "backup.restore_test",
        ],
    ),
];

/// One step: its 1-based position and the MCP tool it calls.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Step {
    pub order: usize,
    pub tool: &'static str,
}

/// One recommended sequence of tools.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Workflow {
    pub name: &'static str,
    pub description: &'static str,
    pub steps: Vec<Step>,
}

/// The catalog in the original's key order.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Workflows {
    pub ok: bool,
    pub count: usize,
    pub workflows: Vec<Workflow>,
}

/// The workflows, each step a tool the tool table has.
pub fn workflows() -> &'static [Workflow] {
    static WORKFLOWS: LazyLock<Vec<Workflow>> = LazyLock::new(|| {
        let table = mcp::tools::table();
        CATALOG
            .iter()
            .map(|(name, description, tools)| Workflow {
                name,
                description,
                steps: tools
                    .iter()
                    .filter(|tool| table.get(tool).is_some())
                    .enumerate()
                    .map(|(i, tool)| Step { order: i + 1, tool })
                    .collect(),
            })
            .collect()
    });
    &WORKFLOWS
}

async fn get_workflows() -> FastApiJson<Workflows> {
    let workflows = workflows().to_vec();
    FastApiJson(Workflows {
        ok: true,
        count: workflows.len(),
        workflows,
    })
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    vec![
        DISCOVERY
            .route(
                Verb::Get,
                PATH,
                "discoveryWorkflows",
                "CogniRelay: recommended sequences of MCP tools",
                get_workflows,
            )
            .public()
            .feature(features::DISCOVERY_TOOLS),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_step_is_a_served_tool() {
        let table = mcp::tools::table();
        for (name, _, tools) in CATALOG {
            for tool in tools {
                assert!(table.get(tool).is_some(), "{name}: no tool {tool}");
            }
        }
        let served: usize = workflows().iter().map(|w| w.steps.len()).sum();
        let declared: usize = CATALOG.iter().map(|(_, _, tools)| tools.len()).sum();
        assert_eq!(served, declared);
    }

    #[test]
    fn the_body_has_the_originals_shape() {
        let body = serde_json::to_string(&Workflows {
            ok: true,
            count: 1,
            workflows: vec![Workflow {
                name: "bootstrap_cycle",
                description: "d",
                steps: vec![
                    Step {
                        order: 1,
                        tool: "system.manifest",
                    },
                    Step {
                        order: 2,
                        tool: "system.health",
                    },
                ],
            }],
        })
        .unwrap();
        // CogniRelay 1.4.15's key order (its descriptions and steps are its own).
        assert_eq!(
            body,
            r#"{"ok":true,"count":1,"workflows":[{"name":"bootstrap_cycle","description":"d","steps":[{"order":1,"tool":"system.manifest"},{"order":2,"tool":"system.health"}]}]}"#
        );
    }
}
