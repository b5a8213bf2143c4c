//! The retrieve bundle around `continuity_state` (digest §10): `core_memory`,
//! `recent_relevant`, `open_questions`, the fixed notes, `graph_context` and
//! `schedule_context`, in the original's key order.

use time::OffsetDateTime;

use crate::domain::json::{Json, JsonObject};
use crate::domain::timestamp::format_iso;

use super::request::RetrieveRequest;

/// The paths of core memory, in the order the bundle lists them.
pub const CORE_MEMORY_PATHS: [&str; 3] = [
    "memory/core/identity.md",
    "memory/core/long_term_facts.json",
    "memory/core/values.md",
];

/// The bundle's three fixed notes (the original's words: they name its own routes).
pub const NOTES: [&str; 3] = [
    "For best continuity, run /v1/index/rebuild before retrieve if many files changed.",
    "Use include_types to reduce noise (e.g. ['journal_entry','messages']).",
    "Use /v1/recent for startup continuity when you need latest entries regardless of keyword relevance.",
];

/// Core memory's snippet length (characters).
const CORE_SNIPPET_CHARS: usize = 300;
/// A one-line snippet's length (characters) before `...`.
pub const SNIPPET_CHARS: usize = 280;
/// At most this many open questions, from the first ten evidence rows.
const OPEN_QUESTIONS: usize = 5;

/// A memory file as the memory store supplies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryDocument {
    pub path: String,
    pub text: String,
}

/// `core_memory`: `{path, snippet}` with the first 300 characters of each readable core file.
pub fn core_memory(documents: &[MemoryDocument]) -> Json {
    Json::Array(
        documents
            .iter()
            .map(|d| {
                let mut entry = JsonObject::new();
                entry.insert("path", Json::from(d.path.as_str()));
                entry.insert(
                    "snippet",
                    Json::String(d.text.chars().take(CORE_SNIPPET_CHARS).collect()),
                );
                Json::Object(entry)
            })
            .collect(),
    )
}

/// `_snippet_text`: whitespace runs collapsed to one space, cut at `limit` characters with
/// `...` when longer.
pub fn snippet_text(text: &str, limit: usize) -> String {
    let normalized = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if normalized.chars().count() > limit {
        let mut cut: String = normalized.chars().take(limit).collect();
        cut.push_str("...");
        cut
    } else {
        normalized
    }
}

/// A record's type: a Markdown file's frontmatter `type`, else its first path segment.
pub fn record_type(path: &str, content: &str) -> String {
    if path.ends_with(".md")
        && let Some(kind) = frontmatter_value(content, "type")
        && !kind.is_empty()
    {
        return kind;
    }
    path.split('/')
        .find(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_owned()
}

/// A key of a `---\n…\n---\n` frontmatter block (the last occurrence wins, as in a dict).
fn frontmatter_value(content: &str, key: &str) -> Option<String> {
    let rest = content.strip_prefix("---\n")?;
    let end = rest.find("\n---\n")?;
    let mut found = None;
    for line in rest[..end].lines() {
        if let Some((k, v)) = line.split_once(':')
            && k.trim() == key
        {
            found = Some(v.trim().to_owned());
        }
    }
    found
}

/// A supporting document (a capsule's related document) as an evidence row.
pub fn supporting_document_row(document: &MemoryDocument) -> Json {
    let mut row = JsonObject::new();
    row.insert("path", Json::from(document.path.as_str()));
    row.insert(
        "type",
        Json::String(record_type(&document.path, &document.text)),
    );
    row.insert(
        "snippet",
        Json::String(snippet_text(&document.text, SNIPPET_CHARS)),
    );
    row.insert("score", float(0.0));
    Json::Object(row)
}

fn float(x: f64) -> Json {
    serde_json::Number::from_f64(x).map_or(Json::Null, Json::Number)
}

fn score_of(row: &Json) -> f64 {
    match row.get("score") {
        Some(Json::Number(n)) => n.as_f64().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn path_of(row: &Json) -> String {
    match row.get("path") {
        Some(Json::String(s)) => s.clone(),
        Some(other) => super::render::py_str(other),
        None => String::new(),
    }
}

/// `_pack_recent_relevant`: summaries first, then messages, then the rest; by score
/// descending, then path; at most `limit`.
pub fn pack_recent_relevant(mut rows: Vec<Json>, limit: usize) -> Vec<Json> {
    let group = |path: &str| {
        if path.starts_with("memory/summaries/") {
            0
        } else if path.starts_with("messages/") {
            1
        } else {
            2
        }
    };
    rows.sort_by(|a, b| {
        let (pa, pb) = (path_of(a), path_of(b));
        group(&pa)
            .cmp(&group(&pb))
            .then(score_of(b).total_cmp(&score_of(a)))
            .then(pa.cmp(&pb))
    });
    rows.truncate(limit);
    rows
}

/// The mixed retrieval of a thread/task subject: its supporting documents first, then the
/// search hits for its id, up to `limit` (duplicates across the two kept, as the original).
pub fn mixed_recent_relevant(
    supporting: &[MemoryDocument],
    hits: Vec<Json>,
    limit: usize,
) -> Vec<Json> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for doc in supporting {
        if seen.contains(&doc.path) {
            continue;
        }
        seen.push(doc.path.clone());
        out.push(supporting_document_row(doc));
    }
    let mut seen_hits = Vec::new();
    for hit in hits {
        let path = path_of(&hit);
        if seen_hits.contains(&path) {
            continue;
        }
        seen_hits.push(path);
        out.push(hit);
    }
    out.truncate(limit);
    out
}

/// `open_questions`: snippets with a `?` among the first ten rows, at most five.
pub fn open_questions(recent: &[Json]) -> Vec<Json> {
    recent
        .iter()
        .take(10)
        .filter_map(|row| row.get("snippet").and_then(Json::as_str))
        .filter(|s| s.contains('?'))
        .take(OPEN_QUESTIONS)
        .map(Json::from)
        .collect()
}

/// What the bundle is assembled from.
#[derive(Debug, Clone)]
pub struct BundleParts {
    pub core_memory: Json,
    pub recent_relevant: Vec<Json>,
    pub continuity_state: Json,
    pub graph_context: Json,
    /// Only with a primary subject or selectors.
    pub schedule_context: Option<Json>,
}

/// `{ok, bundle}` in the original's key order.
pub fn retrieve_response(
    request: &RetrieveRequest,
    now: OffsetDateTime,
    parts: BundleParts,
) -> Json {
    let hint = parts
        .continuity_state
        .get("budget")
        .and_then(|b| b.get("token_budget_hint"))
        .cloned()
        .unwrap_or(Json::from(request.max_tokens_estimate));
    let mut bundle = JsonObject::new();
    bundle.insert("task", Json::from(request.task.as_str()));
    bundle.insert("generated_at", Json::String(format_iso(now)));
    bundle.insert("core_memory", parts.core_memory);
    let questions = open_questions(&parts.recent_relevant);
    bundle.insert("recent_relevant", Json::Array(parts.recent_relevant));
    bundle.insert("open_questions", Json::Array(questions));
    bundle.insert("token_budget_hint", hint);
    bundle.insert("time_window_days", Json::from(request.time_window_days));
    bundle.insert(
        "notes",
        Json::Array(NOTES.iter().map(|n| Json::from(*n)).collect()),
    );
    bundle.insert("continuity_state", parts.continuity_state);
    bundle.insert("graph_context", parts.graph_context);
    if let Some(schedule) = parts.schedule_context {
        bundle.insert("schedule_context", schedule);
    }
    let mut body = JsonObject::new();
    body.insert("ok", Json::Bool(true));
    body.insert("bundle", Json::Object(bundle));
    Json::Object(body)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn snippets_collapse_whitespace_and_cut() {
        assert_eq!(snippet_text("a  b\n\tc", 280), "a b c");
        assert_eq!(snippet_text("abcdef", 3), "abc...");
    }

    #[test]
    fn record_types_come_from_frontmatter_or_the_first_segment() {
        assert_eq!(
            record_type("journal/x.md", "---\ntype: journal_entry\n---\nbody"),
            "journal_entry"
        );
        assert_eq!(record_type("journal/x.md", "no frontmatter"), "journal");
        assert_eq!(
            record_type("memory/a.json", "---\ntype: x\n---\n"),
            "memory"
        );
    }

    #[test]
    fn packing_puts_summaries_then_messages_then_score_order() {
        let row = |p: &str, s: f64| {
            let mut o = JsonObject::new();
            o.insert("path", Json::from(p));
            o.insert("score", float(s));
            Json::Object(o)
        };
        let packed = pack_recent_relevant(
            vec![
                row("journal/a", 9.0),
                row("messages/m", 1.0),
                row("memory/summaries/s", 0.5),
                row("journal/b", 9.0),
            ],
            3,
        );
        let paths: Vec<String> = packed.iter().map(path_of).collect();
        assert_eq!(paths, ["memory/summaries/s", "messages/m", "journal/a"]);
    }

    #[test]
    fn open_questions_are_question_snippets_of_the_first_ten() {
        let row = |s: &str| {
            let mut o = JsonObject::new();
            o.insert("snippet", Json::from(s));
            Json::Object(o)
        };
        let rows: Vec<Json> = (0..12).map(|i| row(&format!("q{i}?"))).collect();
        assert_eq!(open_questions(&rows).len(), 5);
        assert!(open_questions(&[row("no question")]).is_empty());
    }
}
