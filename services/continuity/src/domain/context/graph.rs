//! The derived one-hop graph around a thread or task (retrieve's `graph_context`, the startup
//! view's `graph_summary`): tasks linked to the thread, the task's thread and blockers, the
//! documents the anchor's capsules reference and the subjects that supersede them; nodes and
//! edges sorted, capped, and each cap reported in `truncation`.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::json::{Json, JsonObject};
use crate::domain::model::SubjectKind;

/// Caps of the retrieve bundle's `graph_context`.
pub const CONTEXT_GRAPH_CAPS: GraphCaps = GraphCaps {
    nodes: 24,
    edges: 32,
    related_documents: 8,
    blockers: 8,
};
/// Caps of the startup view's `graph_summary`.
pub const STARTUP_GRAPH_CAPS: GraphCaps = GraphCaps {
    nodes: 12,
    edges: 16,
    related_documents: 4,
    blockers: 4,
};

/// How much of each list a graph keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphCaps {
    pub nodes: usize,
    pub edges: usize,
    pub related_documents: usize,
    pub blockers: usize,
}

impl GraphCaps {
    fn named(&self) -> [(&'static str, usize); 4] {
        [
            ("nodes", self.nodes),
            ("edges", self.edges),
            ("related_documents", self.related_documents),
            ("blockers", self.blockers),
        ]
    }
}

/// A shared task as the graph reads it (the task store supplies these).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskLink {
    /// Where the task lives (`tasks/open/<id>.json`), for the namespace check.
    pub path: String,
    pub task_id: Option<String>,
    pub thread_id: Option<String>,
    pub blocked_by: Vec<String>,
}

/// A continuity capsule (any tier) of the anchor's subject as the graph reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapsuleLink {
    /// The artifact's path (active, fallback or archive), for the namespace check.
    pub path: String,
    pub subject_kind: String,
    pub subject_id: String,
    /// `continuity.related_documents[].path`, non-empty ones, in order.
    pub related_documents: Vec<String>,
    pub superseded_by: Option<String>,
}

const WARNING_ORDER: [(&str, &str); 8] = [
    ("graph_anchor_not_provided", "No graph anchor was provided."),
    (
        "graph_anchor_not_supported",
        "The selected subject kind is not supported as a graph anchor.",
    ),
    (
        "graph_anchor_not_found",
        "The selected graph anchor was not found.",
    ),
    (
        "graph_derivation_failed",
        "Graph context could not be derived.",
    ),
    (
        "graph_truncated",
        "Graph context was truncated to configured caps.",
    ),
    (
        "graph_result_malformed",
        "Malformed graph helper results were skipped.",
    ),
    (
        "graph_source_denied",
        "A graph source was omitted because access was denied.",
    ),
    (
        "graph_suppressed_by_continuity_mode",
        "Graph context was suppressed because continuity mode is off.",
    ),
];

/// One graph warning `{code, message, details}`.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphWarning {
    code: &'static str,
    details: JsonObject,
}

impl GraphWarning {
    fn new(code: &'static str, details: Vec<(&str, Json)>) -> GraphWarning {
        GraphWarning {
            code,
            details: details
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        }
    }

    fn order(&self) -> usize {
        WARNING_ORDER
            .iter()
            .position(|(code, _)| *code == self.code)
            .unwrap_or(999)
    }

    fn detail_text(&self, key: &str) -> String {
        match self.details.get(key) {
            Some(Json::String(s)) => s.clone(),
            Some(Json::Null) | None => String::new(),
            Some(other) => super::render::py_str(other),
        }
    }

    fn sort_key(&self) -> (usize, String, String, String, String) {
        (
            self.order(),
            self.detail_text("source_class"),
            self.detail_text("path"),
            self.detail_text("field"),
            self.detail_text("anchor_id"),
        )
    }

    fn to_json(&self) -> Json {
        let message = WARNING_ORDER
            .iter()
            .find(|(code, _)| *code == self.code)
            .map_or("Graph context warning.", |(_, m)| m);
        let mut w = JsonObject::new();
        w.insert("code", Json::from(self.code));
        w.insert("message", Json::from(message));
        w.insert("details", Json::Object(self.details.clone()));
        Json::Object(w)
    }
}

fn opt_str(value: Option<&str>) -> Json {
    value.map_or(Json::Null, Json::from)
}

/// `graph_anchor_not_supported` with the kind that was selected.
pub fn anchor_not_supported(kind: Option<SubjectKind>) -> GraphWarning {
    GraphWarning::new(
        "graph_anchor_not_supported",
        vec![("subject_kind", opt_str(kind.map(|k| k.as_str())))],
    )
}

/// `graph_anchor_not_provided`.
pub fn anchor_not_provided() -> GraphWarning {
    GraphWarning::new("graph_anchor_not_provided", vec![])
}

/// `graph_suppressed_by_continuity_mode`.
pub fn suppressed_by_continuity_mode() -> GraphWarning {
    GraphWarning::new("graph_suppressed_by_continuity_mode", vec![])
}

/// An empty graph with its warnings (sorted) and zero counts under every cap.
pub fn empty_graph(caps: GraphCaps, anchor: Option<Json>, warnings: Vec<GraphWarning>) -> Json {
    let mut truncation = JsonObject::new();
    for (name, limit) in caps.named() {
        truncation.insert(name, cap_meta(limit, 0, 0));
    }
    graph_json(
        anchor.unwrap_or(Json::Null),
        vec![],
        vec![],
        vec![],
        vec![],
        truncation,
        warnings,
    )
}

fn cap_meta(limit: usize, available: usize, returned: usize) -> Json {
    let mut meta = JsonObject::new();
    meta.insert("limit", Json::from(limit));
    meta.insert("available", Json::from(available));
    meta.insert("returned", Json::from(returned));
    meta.insert("truncated", Json::Bool(available > returned));
    Json::Object(meta)
}

fn graph_json(
    anchor: Json,
    nodes: Vec<Json>,
    edges: Vec<Json>,
    related_documents: Vec<Json>,
    blockers: Vec<Json>,
    truncation: JsonObject,
    mut warnings: Vec<GraphWarning>,
) -> Json {
    warnings.sort_by_key(GraphWarning::sort_key);
    let mut graph = JsonObject::new();
    graph.insert("anchor", anchor);
    graph.insert("nodes", Json::Array(nodes));
    graph.insert("edges", Json::Array(edges));
    graph.insert("related_documents", Json::Array(related_documents));
    graph.insert("blockers", Json::Array(blockers));
    graph.insert("truncation", Json::Object(truncation));
    graph.insert(
        "warnings",
        Json::Array(warnings.iter().map(GraphWarning::to_json).collect()),
    );
    Json::Object(graph)
}

/// Non-empty and not all whitespace (the original's participation rule for ids).
fn usable(value: Option<&str>) -> Option<&str> {
    value.filter(|s| !s.is_empty() && !s.chars().all(char::is_whitespace))
}

fn node_json(id: &str) -> Json {
    let (kind, subject_id) = id.split_once(':').unwrap_or((id, ""));
    let mut node = JsonObject::new();
    node.insert("id", Json::from(id));
    node.insert("kind", Json::from(kind));
    node.insert("subject_id", Json::from(subject_id));
    Json::Object(node)
}

/// A public node id is `thread:`, `task:` or `document:` followed by something.
fn public_node(id: &str) -> bool {
    matches!(id.split_once(':'), Some(("thread" | "task" | "document", rest)) if !rest.is_empty())
}

/// Derives the graph anchored at a thread or task subject. `can_read` is the token's read
/// namespace check; a denied task, capsule or document is left out with a
/// `graph_source_denied` warning.
pub fn derive_graph(
    kind: SubjectKind,
    subject_id: &str,
    tasks: &[TaskLink],
    capsules: &[CapsuleLink],
    can_read_tasks: bool,
    can_read: &dyn Fn(&str) -> bool,
    caps: GraphCaps,
) -> Json {
    let family = match kind {
        SubjectKind::Thread => "thread",
        SubjectKind::Task => "task",
        other => return empty_graph(caps, None, vec![anchor_not_supported(Some(other))]),
    };
    if subject_id.is_empty() {
        return empty_graph(caps, None, vec![anchor_not_provided()]);
    }
    let anchor_id = format!("{family}:{subject_id}");
    let denied = |source_class: &str, path: Option<&str>| {
        GraphWarning::new(
            "graph_source_denied",
            vec![
                ("source_class", Json::from(source_class)),
                ("path", opt_str(path)),
                ("anchor_id", Json::from(anchor_id.as_str())),
            ],
        )
    };
    let mut warnings = Vec::new();
    let mut readable_tasks = Vec::new();
    if can_read_tasks {
        for task in tasks {
            if can_read(&task.path) {
                readable_tasks.push(task);
            } else {
                warnings.push(denied("task_artifact", Some(&task.path)));
            }
        }
    } else {
        warnings.push(denied("task_artifact", None));
    }
    let mut anchor_capsules = Vec::new();
    for capsule in capsules {
        if !can_read(&capsule.path) {
            let class = if capsule.path.contains("/fallback/") {
                "fallback_artifact"
            } else if capsule.path.contains("/archive/") {
                "archive_artifact"
            } else {
                "continuity_capsule"
            };
            warnings.push(denied(class, Some(&capsule.path)));
            continue;
        }
        if capsule.subject_kind == family && capsule.subject_id == subject_id {
            anchor_capsules.push(capsule);
        }
    }
    let anchor_tasks: Vec<&TaskLink> = readable_tasks
        .into_iter()
        .filter(|t| match kind {
            SubjectKind::Thread => t.thread_id.as_deref() == Some(subject_id),
            _ => t.task_id.as_deref() == Some(subject_id),
        })
        .collect();
    if anchor_tasks.is_empty() && anchor_capsules.is_empty() {
        if warnings.is_empty() {
            warnings.push(GraphWarning::new(
                "graph_anchor_not_found",
                vec![
                    ("anchor_id", Json::from(anchor_id.as_str())),
                    ("kind", Json::from(family)),
                    ("subject_id", Json::from(subject_id)),
                ],
            ));
        }
        return empty_graph(caps, None, warnings);
    }

    let mut nodes: BTreeSet<String> = BTreeSet::new();
    let mut edges: BTreeSet<(String, String, String)> = BTreeSet::new();
    let add_node = |id: String, nodes: &mut BTreeSet<String>| {
        if id != anchor_id {
            nodes.insert(id);
        }
    };
    for task in &anchor_tasks {
        let Some(task_id) = usable(task.task_id.as_deref()) else {
            continue;
        };
        match kind {
            SubjectKind::Thread => {
                let Some(thread_id) = usable(task.thread_id.as_deref()) else {
                    continue;
                };
                add_node(format!("task:{task_id}"), &mut nodes);
                edges.insert((
                    "linked_to_thread".into(),
                    format!("task:{task_id}"),
                    format!("thread:{thread_id}"),
                ));
            }
            _ => {
                if let Some(thread_id) = usable(task.thread_id.as_deref()) {
                    add_node(format!("thread:{thread_id}"), &mut nodes);
                    edges.insert((
                        "linked_to_thread".into(),
                        format!("task:{task_id}"),
                        format!("thread:{thread_id}"),
                    ));
                }
                for dependency in &task.blocked_by {
                    let Some(dependency) = usable(Some(dependency)) else {
                        continue;
                    };
                    add_node(format!("task:{dependency}"), &mut nodes);
                    edges.insert((
                        "depends_on".into(),
                        format!("task:{task_id}"),
                        format!("task:{dependency}"),
                    ));
                }
            }
        }
    }
    for capsule in &anchor_capsules {
        for path in &capsule.related_documents {
            if !can_read(path) {
                warnings.push(denied(
                    "related_document",
                    safe_warning_path(path).as_deref(),
                ));
                continue;
            }
            add_node(format!("document:{path}"), &mut nodes);
            edges.insert((
                "references_document".into(),
                format!("{family}:{}", capsule.subject_id),
                format!("document:{path}"),
            ));
        }
        if let Some(by) = usable(capsule.superseded_by.as_deref()) {
            add_node(format!("{family}:{by}"), &mut nodes);
            edges.insert((
                "supersedes".into(),
                format!("{family}:{by}"),
                format!("{family}:{}", capsule.subject_id),
            ));
        }
    }
    compact_graph(family, subject_id, &anchor_id, nodes, edges, warnings, caps)
}

/// The original's `_safe_warning_path`: the normalised path when it is repo-relative.
fn safe_warning_path(path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    let normalized = crate::domain::text::posix_normpath(path);
    if normalized == "." || normalized.starts_with('/') || normalized.starts_with("..") {
        None
    } else {
        Some(normalized)
    }
}

fn compact_graph(
    family: &str,
    subject_id: &str,
    anchor_id: &str,
    nodes: BTreeSet<String>,
    edges: BTreeSet<(String, String, String)>,
    mut warnings: Vec<GraphWarning>,
    caps: GraphCaps,
) -> Json {
    let mut malformed_nodes = 0usize;
    let mut malformed_edges = 0usize;
    let public_nodes: Vec<String> = nodes
        .into_iter()
        .filter(|id| {
            let ok = public_node(id);
            malformed_nodes += usize::from(!ok);
            ok
        })
        .collect();
    let node_available = public_nodes.len();
    let retained_nodes: Vec<String> = public_nodes.into_iter().take(caps.nodes).collect();
    let retained: BTreeSet<&str> = retained_nodes.iter().map(String::as_str).collect();
    let mut public_edges: BTreeMap<(String, String, String), ()> = BTreeMap::new();
    for (relationship, source, target) in edges {
        if !public_node(&source) || !public_node(&target) {
            malformed_edges += 1;
            continue;
        }
        let keep = |id: &str| id == anchor_id || retained.contains(id);
        if keep(&source) && keep(&target) {
            public_edges.insert((relationship, source, target), ());
        }
    }
    let edge_available = public_edges.len();
    let retained_edges: Vec<(String, String, String)> =
        public_edges.into_keys().take(caps.edges).collect();

    let mut related: Vec<(String, String, String)> = retained_edges
        .iter()
        .filter(|(rel, _, target)| {
            rel == "references_document" && retained.contains(target.as_str())
        })
        .map(|(_, source, target)| {
            let path = target.split_once(':').map_or("", |(_, p)| p).to_owned();
            (path, source.clone(), target.clone())
        })
        .collect();
    related.sort();
    let related_available = related.len();
    related.truncate(caps.related_documents);

    let mut blockers: Vec<(String, String, String, String)> = retained_edges
        .iter()
        .filter(|(rel, source, target)| {
            rel == "depends_on" && source.starts_with("task:") && target.starts_with("task:")
        })
        .map(|(_, source, target)| {
            let id = |s: &str| s.split_once(':').map_or("", |(_, x)| x).to_owned();
            (id(source), id(target), source.clone(), target.clone())
        })
        .collect();
    blockers.sort();
    let blocker_available = blockers.len();
    blockers.truncate(caps.blockers);

    let returned = [
        ("nodes", caps.nodes, node_available, retained_nodes.len()),
        ("edges", caps.edges, edge_available, retained_edges.len()),
        (
            "related_documents",
            caps.related_documents,
            related_available,
            related.len(),
        ),
        ("blockers", caps.blockers, blocker_available, blockers.len()),
    ];
    let mut truncation = JsonObject::new();
    for (name, limit, available, kept) in returned {
        truncation.insert(name, cap_meta(limit, available, kept));
    }
    if malformed_nodes > 0 || malformed_edges > 0 {
        warnings.push(GraphWarning::new(
            "graph_result_malformed",
            vec![
                ("malformed_nodes", Json::from(malformed_nodes)),
                ("malformed_edges", Json::from(malformed_edges)),
                ("malformed_anchors", Json::from(0usize)),
            ],
        ));
    }
    for (name, limit, available, kept) in returned {
        if available > kept {
            warnings.push(GraphWarning::new(
                "graph_truncated",
                vec![
                    ("field", Json::from(name)),
                    ("limit", Json::from(limit)),
                    ("available", Json::from(available)),
                ],
            ));
        }
    }
    let mut anchor = JsonObject::new();
    anchor.insert("id", Json::from(anchor_id));
    anchor.insert("kind", Json::from(family));
    anchor.insert("subject_id", Json::from(subject_id));
    let edge_json = |(rel, source, target): &(String, String, String)| {
        let mut e = JsonObject::new();
        e.insert("relationship", Json::from(rel.as_str()));
        e.insert("source_id", Json::from(source.as_str()));
        e.insert("target_id", Json::from(target.as_str()));
        Json::Object(e)
    };
    graph_json(
        Json::Object(anchor),
        retained_nodes.iter().map(|id| node_json(id)).collect(),
        retained_edges.iter().map(edge_json).collect(),
        related
            .iter()
            .map(|(path, source, node)| {
                let mut d = JsonObject::new();
                d.insert("path", Json::from(path.as_str()));
                d.insert("node_id", Json::from(node.as_str()));
                d.insert("source_id", Json::from(source.as_str()));
                Json::Object(d)
            })
            .collect(),
        blockers
            .iter()
            .map(|(task, by, source, target)| {
                let mut b = JsonObject::new();
                b.insert("task_id", Json::from(task.as_str()));
                b.insert("blocked_by_task_id", Json::from(by.as_str()));
                b.insert("source_id", Json::from(source.as_str()));
                b.insert("target_id", Json::from(target.as_str()));
                Json::Object(b)
            })
            .collect(),
        truncation,
        warnings,
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn task(id: &str, thread: Option<&str>, blocked_by: &[&str]) -> TaskLink {
        TaskLink {
            path: format!("tasks/open/{id}.json"),
            task_id: Some(id.to_owned()),
            thread_id: thread.map(str::to_owned),
            blocked_by: blocked_by.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn all(_: &str) -> bool {
        true
    }

    #[test]
    fn a_thread_links_its_tasks_documents_and_successor() {
        let capsules = vec![CapsuleLink {
            path: "memory/continuity/thread-t1.json".into(),
            subject_kind: "thread".into(),
            subject_id: "t1".into(),
            related_documents: vec!["docs/b.md".into(), "docs/a.md".into()],
            superseded_by: Some("t2".into()),
        }];
        let tasks = vec![task("k1", Some("t1"), &[]), task("k2", Some("other"), &[])];
        let graph = derive_graph(
            SubjectKind::Thread,
            "t1",
            &tasks,
            &capsules,
            true,
            &all,
            CONTEXT_GRAPH_CAPS,
        );
        let ids: Vec<&str> = graph
            .get("nodes")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.get("id").unwrap().as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            [
                "document:docs/a.md",
                "document:docs/b.md",
                "task:k1",
                "thread:t2"
            ]
        );
        let rels: Vec<&str> = graph
            .get("edges")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.get("relationship").unwrap().as_str().unwrap())
            .collect();
        assert_eq!(
            rels,
            [
                "linked_to_thread",
                "references_document",
                "references_document",
                "supersedes"
            ]
        );
        assert_eq!(
            graph
                .get("related_documents")
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(graph.get("warnings").unwrap().as_array().unwrap().len(), 0);
    }

    #[test]
    fn a_task_lists_its_blockers_and_caps_them() {
        let blockers: Vec<String> = (0..10).map(|i| format!("b{i}")).collect();
        let refs: Vec<&str> = blockers.iter().map(String::as_str).collect();
        let tasks = vec![task("k1", None, &refs)];
        let graph = derive_graph(
            SubjectKind::Task,
            "k1",
            &tasks,
            &[],
            true,
            &all,
            STARTUP_GRAPH_CAPS,
        );
        let t = graph.get("truncation").unwrap();
        assert_eq!(
            t.get("blockers").unwrap().get("available"),
            Some(&Json::from(10usize))
        );
        assert_eq!(
            t.get("blockers").unwrap().get("returned"),
            Some(&Json::from(4usize))
        );
        let codes: Vec<&str> = graph
            .get("warnings")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.get("code").unwrap().as_str().unwrap())
            .collect();
        assert_eq!(codes, ["graph_truncated"]);
    }

    #[test]
    fn an_unknown_anchor_is_not_found() {
        let graph = derive_graph(
            SubjectKind::Thread,
            "nope",
            &[],
            &[],
            true,
            &all,
            CONTEXT_GRAPH_CAPS,
        );
        assert_eq!(graph.get("anchor"), Some(&Json::Null));
        let w = &graph.get("warnings").unwrap().as_array().unwrap()[0];
        assert_eq!(
            w.get("code").unwrap().as_str(),
            Some("graph_anchor_not_found")
        );
    }
}
