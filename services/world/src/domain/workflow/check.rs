//! The structure checks a workflow passes before it is stored: the built-in contract
//! (required fields, modes, bounds — `schemas/cognition_workflow.schema.json`), then the
//! rules a schema cannot say: unique ids, consistent run modes, template references,
//! prompt placeholders, non-overlapping injection points and `apply.from`. Every problem
//! names its JSON Pointer. References to other components are checked by assembly.

use std::collections::HashMap;

use serde_json::Value;

use crate::domain::problem::{Problem, pointer_tokens};
use crate::domain::schema::Builtin;

use super::prompt::check_prompt_text;
use super::template::check_template;
use super::{
    AmbientRunMode, AmbientScope, AmbientVisibility, CognitionWorkflow, FINAL_OUTPUT_SUFFIX,
    WorkflowNode,
};

/// The only workflow version.
pub const WORKFLOW_VERSION: u32 = 1;

impl CognitionWorkflow {
    /// Parses and checks a workflow document; every problem found, sorted by pointer.
    pub fn from_json(document: &Value) -> Result<CognitionWorkflow, Vec<Problem>> {
        Builtin::CognitionWorkflow.check(document)?;
        let workflow: CognitionWorkflow = serde_json::from_value(document.clone())
            .map_err(|e| vec![Problem::new("", e.to_string())])?;
        let mut problems = workflow.structure_problems();
        if problems.is_empty() {
            Ok(workflow)
        } else {
            problems.sort();
            Err(problems)
        }
    }

    fn structure_problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        if self.version != WORKFLOW_VERSION {
            problems.push(Problem::new(
                "/version",
                format!(
                    "version {} is not supported (only {WORKFLOW_VERSION})",
                    self.version
                ),
            ));
        }
        self.check_nodes(&mut problems);
        self.check_ambient_sources(&mut problems);
        problems
    }

    fn check_nodes(&self, problems: &mut Vec<Problem>) {
        let mut first_at: HashMap<&str, usize> = HashMap::new();
        for (i, node) in self.nodes.iter().enumerate() {
            if let Some(first) = first_at.insert(node.id().as_str(), i) {
                first_at.insert(node.id().as_str(), first);
                problems.push(Problem::new(
                    format!("/nodes/{i}/id"),
                    format!(
                        "duplicate node id {:?} (also /nodes/{first}/id)",
                        node.id().as_str()
                    ),
                ));
            }
            let WorkflowNode::LlmToolLoop(node) = node;
            let mut tool_at: HashMap<&str, usize> = HashMap::new();
            for (k, tool) in node.available_tools.iter().enumerate() {
                if let Some(first) = tool_at.insert(tool.name.as_str(), k) {
                    tool_at.insert(tool.name.as_str(), first);
                    problems.push(Problem::new(
                        format!("/nodes/{i}/available_tools/{k}/name"),
                        format!(
                            "duplicate tool name {:?} (also /nodes/{i}/available_tools/{first}/name)",
                            tool.name
                        ),
                    ));
                }
            }
            for (m, message) in node.prompt_template.messages.iter().enumerate() {
                let at = format!("/nodes/{i}/prompt_template/messages/{m}/content");
                problems.extend(
                    check_prompt_text(&message.content)
                        .into_iter()
                        .map(|p| p.under(&at)),
                );
            }
        }

        let applied = self.apply.node_id();
        match applied {
            Some(id) if first_at.contains_key(id) => {
                for (i, node) in self.nodes.iter().enumerate() {
                    if node.id().as_str() != id {
                        problems.push(Problem::new(
                            format!("/nodes/{i}"),
                            format!(
                                "node {:?} is never executed: version 1 runs only the node apply.from names ({id:?})",
                                node.id().as_str()
                            ),
                        ));
                    }
                }
            }
            Some(id) => problems.push(Problem::new(
                "/apply/from",
                format!("names node {id:?}, which this workflow does not have"),
            )),
            None => problems.push(Problem::new(
                "/apply/from",
                format!("must be \"<node id>{FINAL_OUTPUT_SUFFIX}\""),
            )),
        }
    }

    fn check_ambient_sources(&self, problems: &mut Vec<Problem>) {
        let mut first_at: HashMap<&str, usize> = HashMap::new();
        let mut injected: Vec<(usize, Vec<String>)> = Vec::new();
        for (i, binding) in self.ambient_sources.iter().enumerate() {
            let at = format!("/ambient_sources/{i}");
            if let Some(first) = first_at.insert(binding.id.as_str(), i) {
                first_at.insert(binding.id.as_str(), first);
                problems.push(Problem::new(
                    format!("{at}/id"),
                    format!(
                        "duplicate ambient source id {:?} (also /ambient_sources/{first}/id)",
                        binding.id.as_str()
                    ),
                ));
            }
            let per_turn = binding.run == AmbientRunMode::OncePerTurn;
            if per_turn && binding.scope == AmbientScope::ActingSubject {
                problems.push(Problem::new(
                    format!("{at}/scope"),
                    "acting_subject needs run before_subject_workflow: a once_per_turn source runs before any subject",
                ));
            }
            if per_turn && binding.visible_to == AmbientVisibility::ActingSubject {
                problems.push(Problem::new(
                    format!("{at}/visible_to"),
                    "acting_subject needs run before_subject_workflow; use all_subjects, an environment or an entity",
                ));
            }
            problems.extend(
                check_template(&binding.request_template, !per_turn)
                    .into_iter()
                    .map(|p| p.under(&format!("{at}/request_template"))),
            );
            match pointer_tokens(&binding.inject_as) {
                Some(tokens) if tokens.iter().all(|t| !t.is_empty()) => {
                    for (j, other) in &injected {
                        let n = tokens.len().min(other.len());
                        if tokens[..n] == other[..n] {
                            problems.push(Problem::new(
                                format!("{at}/inject_as"),
                                format!(
                                    "{:?} overlaps /ambient_sources/{j}/inject_as ({:?}): one result would overwrite the other",
                                    binding.inject_as, self.ambient_sources[*j].inject_as
                                ),
                            ));
                        }
                    }
                    injected.push((i, tokens));
                }
                _ => problems.push(Problem::new(
                    format!("{at}/inject_as"),
                    format!(
                        "{:?} is not a JSON Pointer with non-empty segments",
                        binding.inject_as
                    ),
                )),
            }
        }
    }
}
