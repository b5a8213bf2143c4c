//! Memory files: CogniRelay's `/v1/write`, `/v1/read`, `/v1/append` and the derived search
//! surfaces (`/v1/search`, `/v1/recent`, `/v1/index/*`), with no I/O.
//!
//! The original keeps these as files in its git repository. Here a file is a document row of
//! the caller's tenant, keyed by its normalised repository path; the rules that decide which
//! paths exist, which scope a write needs, what an appended line looks like and how a document
//! is described for search (type, tags, importance, snippet) are the original's:
//!
//! - paths: a non-empty relative path under one of the original's top-level directories; a
//!   path that leaves the repository, or whose *normalised* top-level directory is not allowed,
//!   is refused (the original checks only the first written component, so
//!   `memory/../foo/x` escapes its allow-list; we check the normalised path);
//! - paths Noema manages through their own APIs (`memory/continuity/…` are capsules, `index/…`
//!   is derived) are refused for file writes and are never documents;
//! - an append writes `json.dumps(record, ensure_ascii=False)` (Python's default separators)
//!   plus a newline, and a journal day file (`journal/…/YYYY-MM-DD.md`) takes appends only on
//!   its own UTC day, with the original's 503.

use noema_core::content_id::ContentId;
use serde::Deserialize;
use time::OffsetDateTime;

use super::error::{ContinuityError, FieldError, Loc};
use super::json::{Json, JsonObject, PyFormatter};
use super::model::from_coerced;
use super::schema::{Field, Model, Ty, validate_body};
use super::text::{is_py_space, posix_normpath};
use super::timestamp::format_iso;

/// The original's allowed top-level repository directories (`storage.ALLOWED_TOP_LEVEL`).
pub const ALLOWED_TOP_LEVEL: [&str; 15] = [
    "journal",
    "essays",
    "projects",
    "memory",
    "messages",
    "peers",
    "snapshots",
    "tasks",
    "patches",
    "runs",
    "index",
    "archive",
    "config",
    "logs",
    "backups",
];

/// Paths whose content Noema keeps through their own APIs: capsules (and their tiers) live in
/// the capsule store, tasks and scheduled items in theirs, the index is derived from the
/// documents. A file written there would be invisible to those APIs.
pub const MANAGED_ROOTS: [&str; 4] = ["memory/continuity", "memory/schedule", "tasks", "index"];

/// Largest request the original accepts on write and append (`COGNIRELAY_MAX_PAYLOAD_BYTES`).
pub const MAX_PAYLOAD_BYTES: usize = 262_144;

/// Characters of a document's snippet before `...`.
const SNIPPET_CHARS: usize = 240;

/// The scope a write to `path` needs (the original's `scope_for_path`).
pub fn scope_for_path(path: &str) -> &'static str {
    match path.split('/').find(|p| !p.is_empty() && *p != ".") {
        Some("journal") => "write:journal",
        Some("messages") => "write:messages",
        _ => "write:projects",
    }
}

/// The document key of a request path: the path normalised as the repository would resolve
/// it, or the original's 400 (`safe_path`), after the namespace check has passed.
pub fn document_path(path: &str) -> Result<String, ContinuityError> {
    if path.is_empty() || path.starts_with('/') {
        return Err(ContinuityError::invalid(
            "Path must be a non-empty relative path",
        ));
    }
    let written_top = path.split('/').find(|p| !p.is_empty() && *p != ".");
    if let Some(top) = written_top
        && !ALLOWED_TOP_LEVEL.contains(&top)
    {
        return Err(ContinuityError::invalid(format!(
            "Top-level path not allowed: {top}"
        )));
    }
    let normalized = posix_normpath(path);
    if normalized == ".." || normalized.starts_with("../") {
        return Err(ContinuityError::invalid("Path escapes repository root"));
    }
    let top = normalized.split('/').next().unwrap_or_default();
    if !ALLOWED_TOP_LEVEL.contains(&top) {
        return Err(ContinuityError::invalid(format!(
            "Top-level path not allowed: {top}"
        )));
    }
    if !normalized.contains('/') {
        return Err(ContinuityError::invalid(format!(
            "Path names a directory: {normalized}"
        )));
    }
    if let Some(root) = managed_root(&normalized) {
        return Err(ContinuityError::invalid(format!(
            "Path is managed by its own API: {root}"
        )));
    }
    Ok(normalized)
}

/// Whether `path` (normalised) is somewhere no memory document can be: a top-level
/// directory of the repository, or under a root another API manages.
pub fn holds_no_document(path: &str) -> bool {
    managed_root(path).is_some() || ALLOWED_TOP_LEVEL.contains(&path)
}

/// The managed root `path` lies under, if any.
pub fn managed_root(path: &str) -> Option<&'static str> {
    MANAGED_ROOTS.iter().copied().find(|root| {
        path == *root
            || path
                .strip_prefix(root)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// The original's 503 for an append to a journal day file of another UTC day.
pub fn journal_day_refusal(path: &str, now: OffsetDateTime) -> Option<ContinuityError> {
    if !path.starts_with("journal/") || path.contains("/history/") {
        return None;
    }
    let name = path.rsplit('/').next().unwrap_or_default();
    let day = name.strip_suffix(".md")?;
    let bytes = day.as_bytes();
    let shaped = bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        });
    if !shaped {
        return None;
    }
    let date = now.date();
    let today = format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    );
    (day != today).then(|| {
        ContinuityError::Unavailable(format!(
            "Append failed: Journal append rejected: file day {day} != current UTC day {today}. \
             Retry against the current-day path."
        ))
    })
}

/// `json.dumps(record, ensure_ascii=False) + "\n"`: Python's default separators (`", "`,
/// `": "`), the record's own key order, Python float forms.
pub fn jsonl_line(record: &Json) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, SpacedPyFormatter);
    if serde::Serialize::serialize(record, &mut ser).is_err() {
        return "null\n".to_owned();
    }
    let mut line = String::from_utf8(out).unwrap_or_default();
    line.push('\n');
    line
}

/// [`PyFormatter`] with `json.dumps`'s default separators.
struct SpacedPyFormatter;

impl serde_json::ser::Formatter for SpacedPyFormatter {
    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        PyFormatter.write_f64(writer, value)
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// What search knows of a document besides its text (the original's index record).
#[derive(Debug, Clone, PartialEq)]
pub struct Description {
    /// Front matter `type` of a Markdown file, else the top-level directory.
    pub doc_type: String,
    /// Front matter `importance` of a Markdown file, when it parses as a number.
    pub importance: Option<f64>,
    /// `#tag` words, sorted, unique.
    pub tags: Vec<String>,
    /// The text on one line, cut at 240 characters (`...` when cut).
    pub snippet: String,
    /// Bytes of UTF-8.
    pub size: i64,
}

/// Describes the document at `path` (normalised) holding `content`.
pub fn describe(path: &str, content: &str) -> Description {
    let front = if is_markdown(path) {
        front_matter(content)
    } else {
        Vec::new()
    };
    let field = |key: &str| {
        front
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let doc_type = match field("type") {
        Some(t) if !t.is_empty() => t.to_owned(),
        _ => path.split('/').next().unwrap_or("unknown").to_owned(),
    };
    let importance = field("importance")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite());
    Description {
        doc_type,
        importance,
        tags: tags(content),
        snippet: snippet(content),
        size: i64::try_from(content.len()).unwrap_or(i64::MAX),
    }
}

/// The description of the document at `path` once `line` is appended to content described
/// by `old` whose last character is `last`, when `old` and the line decide it; `None` when
/// only the whole content can: a Markdown document (its front matter may be completed), or a
/// seam that runs a word of the content into the line's (the snippet's words, a `#tag`).
pub fn describe_appended(
    path: &str,
    old: &Description,
    last: Option<char>,
    line: &str,
) -> Option<Description> {
    let first = line.chars().next();
    let words_apart = last.is_none_or(is_py_space) || first.is_none_or(is_py_space);
    let tags_apart =
        first.is_none_or(|c| !is_word_char(c)) || last.is_none_or(|c| !is_word_char(c) && c != '#');
    if is_markdown(path) || !words_apart || !tags_apart {
        return None;
    }
    let mut tags = old.tags.clone();
    tags.extend(self::tags(line));
    tags.sort();
    tags.dedup();
    // A snippet that was cut stays as it is; one that was not holds every word of the content.
    let snippet = if old.snippet.chars().count() > SNIPPET_CHARS {
        old.snippet.clone()
    } else {
        snippet(&format!("{} {line}", old.snippet))
    };
    Some(Description {
        doc_type: old.doc_type.clone(),
        importance: old.importance,
        tags,
        snippet,
        size: old
            .size
            .saturating_add(i64::try_from(line.len()).unwrap_or(i64::MAX)),
    })
}

fn is_markdown(path: &str) -> bool {
    path.rsplit('/')
        .next()
        .and_then(|name| name.rsplit_once('.'))
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case("md"))
}

/// `^---\n(.*?)\n---\n` front matter as `key: value` pairs (later keys win, as in a dict).
fn front_matter(content: &str) -> Vec<(String, String)> {
    let Some(rest) = content.strip_prefix("---\n") else {
        return Vec::new();
    };
    let Some(end) = rest.find("\n---\n") else {
        return Vec::new();
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    for line in rest[..end].lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_owned(), v.trim().to_owned());
        match pairs.iter_mut().find(|(key, _)| *key == k) {
            Some(pair) => pair.1 = v,
            None => pairs.push((k, v)),
        }
    }
    pairs
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `#([a-zA-Z0-9_\-]+)`, sorted and unique.
fn tags(content: &str) -> Vec<String> {
    let mut out: Vec<String> = content
        .split('#')
        .skip(1)
        .map(|after| after.chars().take_while(|c| is_word_char(*c)).collect())
        .filter(|tag: &String| !tag.is_empty())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `" ".join(text.split())`, cut at 240 characters with `...`.
pub fn snippet(content: &str) -> String {
    // Only the words up to the cut are joined: a long log's snippet costs its first words.
    let mut joined = String::new();
    let mut chars = 0;
    for word in content.split(is_py_space).filter(|w| !w.is_empty()) {
        if chars > SNIPPET_CHARS {
            break;
        }
        if !joined.is_empty() {
            joined.push(' ');
            chars += 1;
        }
        joined.push_str(word);
        chars += word.chars().count();
    }
    match joined.char_indices().nth(SNIPPET_CHARS) {
        Some((at, _)) => format!("{}...", &joined[..at]),
        None => joined,
    }
}

/// The query's terms (`[A-Za-z0-9_\-]{2,}`, lowercased), first occurrence kept. A query's
/// terms are alternatives: a document matching any of them is a hit, ranked by how well it
/// matches all of them.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for run in query.split(|c: char| !is_word_char(c)) {
        if run.len() < 2 {
            continue;
        }
        let term = run.to_ascii_lowercase();
        if !out.contains(&term) {
            out.push(term);
        }
    }
    out
}

/// A revision id for a document: it names the previous revision, the path and the content,
/// so a document's revisions form a chain like the original's commits.
pub fn revision_id(previous: Option<&str>, path: &str, content: &str) -> String {
    let content_sha = noema_core::content_id::sha256_hex(content.as_bytes());
    let record = format!("{}\n{path}\n{content_sha}", previous.unwrap_or(""));
    ContentId::of_bytes(record.as_bytes()).into_string()
}

/// The revision an append to a document at revision `previous` makes: it names that revision,
/// the path and the appended line (which, after `previous`'s content, is the new content), so
/// an append hashes its line, not its document.
pub fn appended_revision_id(previous: &str, path: &str, line: &str) -> String {
    let line_sha = noema_core::content_id::sha256_hex(line.as_bytes());
    let record = format!("{previous}\n{path}\n+{line_sha}");
    ContentId::of_bytes(record.as_bytes()).into_string()
}

/// A document's modification time as the original prints it (`format_iso` of the mtime) and
/// as microseconds since the epoch (for ordering and time windows).
pub fn modified(at: OffsetDateTime) -> (String, i64) {
    let micros = i64::try_from(at.unix_timestamp_nanos() / 1_000).unwrap_or(i64::MAX);
    (format_iso(at), micros)
}

// --- request bodies ---------------------------------------------------------------------------

const ANY_STR: Ty = Ty::Str { min: 0, max: None };
const COMMIT_MESSAGE: Ty = Ty::Nullable(&ANY_STR);
const TYPES: Ty = Ty::List {
    item: &ANY_STR,
    min: None,
    max: None,
};
const LIMIT: Ty = Ty::Int {
    ge: Some(1),
    le: Some(100),
};
const HOURS: Ty = Ty::Nullable(&Ty::Int {
    ge: Some(1),
    le: Some(87_600),
});
const DAYS: Ty = Ty::Nullable(&Ty::Int {
    ge: Some(1),
    le: Some(3_650),
});

const fn field(name: &'static str, ty: Ty, required: bool) -> Field {
    Field { name, ty, required }
}

fn parse<T: serde::de::DeserializeOwned>(
    model: &'static Model,
    body: &Json,
) -> Result<T, ContinuityError> {
    let coerced = validate_body(model, body).map_err(ContinuityError::Validation)?;
    from_coerced(&coerced)
}

/// A path `document_path` writes.
const WRITE_PATH: Ty = Ty::Documented(&ANY_STR, super::rules::write_path);

pub static WRITE_REQUEST: Model = Model {
    name: "WriteRequest",
    fields: &[
        field("path", WRITE_PATH, true),
        field("content", ANY_STR, true),
        field("commit_message", COMMIT_MESSAGE, false),
    ],
    forbid_extra: false,
    after: None,
};

/// `POST /v1/write`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WriteRequest {
    pub path: String,
    pub content: String,
    #[serde(default)]
    pub commit_message: Option<String>,
}

impl WriteRequest {
    pub fn from_json(body: &Json) -> Result<WriteRequest, ContinuityError> {
        parse(&WRITE_REQUEST, body)
    }
}

pub static APPEND_REQUEST: Model = Model {
    name: "AppendRequest",
    fields: &[
        field("path", WRITE_PATH, true),
        field("record", Ty::Dict, true),
        field("commit_message", COMMIT_MESSAGE, false),
    ],
    forbid_extra: false,
    after: None,
};

/// `POST /v1/append`: the record is kept as the caller wrote it (key order, number forms).
#[derive(Debug, Clone, PartialEq)]
pub struct AppendRequest {
    pub path: String,
    pub record: Json,
}

impl AppendRequest {
    pub fn from_json(body: &Json) -> Result<AppendRequest, ContinuityError> {
        validate_body(&APPEND_REQUEST, body).map_err(ContinuityError::Validation)?;
        let object = body.as_object();
        let path = object
            .and_then(|o| o.get("path"))
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned();
        let record = object
            .and_then(|o| o.get("record"))
            .cloned()
            .unwrap_or(Json::Object(JsonObject::new()));
        Ok(AppendRequest { path, record })
    }
}

/// `GET /v1/read?path=…`: the query parameter, or FastAPI's 422 for a missing one.
pub fn read_path(body: &Json) -> Result<String, ContinuityError> {
    match body.get("path").and_then(Json::as_str) {
        Some(path) => Ok(path.to_owned()),
        None => Err(ContinuityError::Validation(vec![FieldError {
            kind: "missing",
            loc: Loc(vec![
                super::error::LocPart::Key("query".to_owned()),
                super::error::LocPart::Key("path".to_owned()),
            ]),
            msg: "Field required".to_owned(),
            input: Json::Null,
            ctx: Vec::new(),
        }])),
    }
}

pub const SORT_BY: &[&str] = &["relevance", "recent"];

pub static SEARCH_REQUEST: Model = Model {
    name: "SearchRequest",
    fields: &[
        field("query", ANY_STR, true),
        field("limit", LIMIT, false),
        field("include_types", TYPES, false),
        field("sort_by", Ty::Literal(SORT_BY), false),
        field("time_window_hours", HOURS, false),
    ],
    forbid_extra: false,
    after: None,
};

fn default_limit() -> i64 {
    10
}

fn default_sort() -> String {
    "relevance".to_owned()
}

/// `POST /v1/search`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SearchRequest {
    pub query: String,
    #[serde(default = "default_limit")]
    pub limit: i64,
    #[serde(default)]
    pub include_types: Vec<String>,
    #[serde(default = "default_sort")]
    pub sort_by: String,
    #[serde(default)]
    pub time_window_hours: Option<i64>,
}

impl SearchRequest {
    pub fn from_json(body: &Json) -> Result<SearchRequest, ContinuityError> {
        parse(&SEARCH_REQUEST, body)
    }

    pub fn by_recency(&self) -> bool {
        self.sort_by == "recent"
    }
}

pub static RECENT_REQUEST: Model = Model {
    name: "RecentRequest",
    fields: &[
        field("limit", LIMIT, false),
        field("include_types", TYPES, false),
        field("time_window_hours", HOURS, false),
        field("time_window_days", DAYS, false),
    ],
    forbid_extra: false,
    after: None,
};

/// `POST /v1/recent`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RecentRequest {
    #[serde(default = "default_limit")]
    pub limit: i64,
    #[serde(default)]
    pub include_types: Vec<String>,
    #[serde(default)]
    pub time_window_hours: Option<i64>,
    #[serde(default)]
    pub time_window_days: Option<i64>,
}

impl RecentRequest {
    pub fn from_json(body: &Json) -> Result<RecentRequest, ContinuityError> {
        parse(&RECENT_REQUEST, body)
    }
}

/// The oldest modification (microseconds since the epoch) a time window admits: hours win
/// over days, as in the original.
pub fn window_start(now: OffsetDateTime, hours: Option<i64>, days: Option<i64>) -> Option<i64> {
    let span = match (hours, days) {
        (Some(h), _) => time::Duration::hours(h),
        (None, Some(d)) => time::Duration::days(d),
        (None, None) => return None,
    };
    Some(modified(now - span).1)
}

/// Lowercased type filter (empty: every type).
pub fn type_filter(types: &[String]) -> Vec<String> {
    let mut out: Vec<String> = types
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| t.to_lowercase())
        .collect();
    out.sort();
    out.dedup();
    out
}

// --- response bodies --------------------------------------------------------------------------

/// One search or recent hit as the original answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub path: String,
    pub doc_type: String,
    pub size: i64,
    pub modified_at: String,
    pub snippet: String,
    pub tags: Vec<String>,
    pub importance: Option<f64>,
    pub score: Option<f64>,
}

fn float(value: Option<f64>) -> Json {
    value
        .and_then(serde_json::Number::from_f64)
        .map_or(Json::Null, Json::Number)
}

/// Search hits in the order `/v1/search` answers them: by the score shown (the engine ranked
/// by its unrounded relevance), best first, then by path.
pub fn rank_by_score(hits: &mut [Hit]) {
    hits.sort_by(|a, b| {
        b.score
            .unwrap_or(0.0)
            .total_cmp(&a.score.unwrap_or(0.0))
            .then_with(|| a.path.cmp(&b.path))
    });
}

impl Hit {
    /// `{path, type, size, modified_at, snippet, tags, importance, score}`.
    pub fn to_json(&self) -> Json {
        let mut o = JsonObject::new();
        o.insert("path", Json::from(self.path.as_str()));
        o.insert("type", Json::from(self.doc_type.as_str()));
        o.insert("size", Json::from(self.size));
        o.insert("modified_at", Json::from(self.modified_at.as_str()));
        o.insert("snippet", Json::from(self.snippet.as_str()));
        o.insert(
            "tags",
            Json::Array(self.tags.iter().map(|t| Json::from(t.as_str())).collect()),
        );
        o.insert("importance", float(self.importance));
        o.insert("score", float(self.score));
        Json::Object(o)
    }
}

/// A relevance score as the original prints it: the engine's rank rounded to 6 places,
/// plus the document's importance.
pub fn relevance_score(rank: f64, importance: Option<f64>) -> f64 {
    let rounded = (rank * 1e6).round() / 1e6;
    rounded + importance.unwrap_or(0.0)
}

/// `{ok, path, committed, latest_commit, durable}` for write and append.
pub fn written_body(path: &str, committed: bool, revision_id: &str) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("path", Json::from(path));
    o.insert("committed", Json::Bool(committed));
    o.insert("latest_commit", Json::from(revision_id));
    o.insert("durable", Json::Bool(true));
    Json::Object(o)
}

/// `{ok, path, content}`.
pub fn read_body(path: &str, content: &str) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("path", Json::from(path));
    o.insert("content", Json::from(content));
    Json::Object(o)
}

/// `{ok, query, sort_by, count, results}`.
pub fn search_body(query: &str, sort_by: &str, hits: &[Hit]) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("query", Json::from(query));
    o.insert("sort_by", Json::from(sort_by));
    o.insert("count", Json::from(hits.len()));
    o.insert(
        "results",
        Json::Array(hits.iter().map(Hit::to_json).collect()),
    );
    Json::Object(o)
}

/// `{ok, count, results}`.
pub fn recent_body(hits: &[Hit]) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("count", Json::from(hits.len()));
    o.insert(
        "results",
        Json::Array(hits.iter().map(Hit::to_json).collect()),
    );
    Json::Object(o)
}

/// `{ok, generated_at, file_count, sqlite_fts, state_file}`: the index is kept in the write
/// transaction, so it exists (`sqlite_fts`, `state_file`: true) and was generated at the
/// tenant's last document change (null before the first).
pub fn index_status_body(generated_at: Option<&str>, file_count: i64) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("generated_at", generated_at.map_or(Json::Null, Json::from));
    o.insert("file_count", Json::from(file_count));
    o.insert("sqlite_fts", Json::Bool(true));
    o.insert("state_file", Json::Bool(true));
    Json::Object(o)
}

/// What a rebuild found: index rows rewritten (missing or not matching their document),
/// rows dropped (no document), rows already right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RebuildCounts {
    pub changed: i64,
    pub removed: i64,
    pub unchanged: i64,
}

/// `{ok, file_count, incremental:{changed_count, removed_count, unchanged_count},
/// committed_files, latest_commit}`, without `incremental` for a full rebuild (`counts`
/// None), as the original answers its two rebuilds: no files are committed here (the index
/// is rows).
pub fn rebuild_body(file_count: i64, counts: Option<RebuildCounts>, latest: Option<&str>) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("file_count", Json::from(file_count));
    if let Some(counts) = counts {
        let mut incremental = JsonObject::new();
        incremental.insert("changed_count", Json::from(counts.changed));
        incremental.insert("removed_count", Json::from(counts.removed));
        incremental.insert("unchanged_count", Json::from(counts.unchanged));
        o.insert("incremental", Json::Object(incremental));
    }
    o.insert("committed_files", Json::Array(Vec::new()));
    o.insert("latest_commit", latest.map_or(Json::Null, Json::from));
    Json::Object(o)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::json::to_py_json;

    fn refusal(path: &str) -> (u16, String) {
        let err = document_path(path).unwrap_err();
        (err.http_status(), err.to_string())
    }

    /// The original's `safe_path` answers (recorded from CogniRelay 1.4.15), and ours where
    /// we refuse what it lets through.
    #[test]
    fn path_rules() {
        assert_eq!(
            document_path("memory/./core/identity.md").unwrap(),
            "memory/core/identity.md"
        );
        assert_eq!(
            document_path("memory/../journal/x.md").unwrap(),
            "journal/x.md"
        );
        let cases: &[(&str, u16, &str)] = &[
            ("foo/x.md", 400, "Top-level path not allowed: foo"),
            ("", 400, "Path must be a non-empty relative path"),
            ("/abs", 400, "Path must be a non-empty relative path"),
            ("memory/../../x", 400, "Path escapes repository root"),
            // The original resolves this one inside the repository, outside its allow-list.
            ("memory/../foo/x.md", 400, "Top-level path not allowed: foo"),
            ("memory", 400, "Path names a directory: memory"),
            (
                "memory/continuity/user-a.json",
                400,
                "Path is managed by its own API: memory/continuity",
            ),
            (
                "index/files_index.json",
                400,
                "Path is managed by its own API: index",
            ),
            (
                "tasks/open/t-1.json",
                400,
                "Path is managed by its own API: tasks",
            ),
        ];
        for (path, status, detail) in cases {
            assert_eq!(refusal(path), (*status, (*detail).to_owned()), "{path}");
        }
        assert!(document_path("memory/continuityx/a.md").is_ok());
    }

    #[test]
    fn write_scopes_follow_the_top_level_directory() {
        assert_eq!(scope_for_path("journal/2026/a.md"), "write:journal");
        assert_eq!(scope_for_path("messages/x.jsonl"), "write:messages");
        assert_eq!(scope_for_path("memory/core/x.md"), "write:projects");
        assert_eq!(scope_for_path("./journal/a.md"), "write:journal");
    }

    #[test]
    fn an_appended_line_is_pythons_default_json_dumps() {
        let record =
            Json::parse(r#"{"b":1,"a":"héllo","c":[1,2.5,1e-5],"d":{"x":null}}"#.as_bytes())
                .unwrap();
        assert_eq!(
            jsonl_line(&record),
            "{\"b\": 1, \"a\": \"héllo\", \"c\": [1, 2.5, 1e-05], \"d\": {\"x\": null}}\n"
        );
    }

    #[test]
    fn journal_day_files_take_appends_on_their_day_only() {
        let now = time::macros::datetime!(2026-11-25 22:40 UTC);
        assert!(journal_day_refusal("journal/2026-11-25.md", now).is_none());
        assert!(journal_day_refusal("journal/2026/2026-11-25.jsonl", now).is_none());
        assert!(journal_day_refusal("journal/history/2020-01-01.md", now).is_none());
        let err = journal_day_refusal("journal/2020-01-01.md", now).unwrap();
        assert_eq!(err.http_status(), 503);
        assert_eq!(
            to_py_json(&err.body()),
            r#"{"detail":"Append failed: Journal append rejected: file day 2020-01-01 != current UTC day 2026-11-25. Retry against the current-day path."}"#
        );
    }

    /// The index records the original made for these files (CogniRelay 1.4.15).
    #[test]
    fn documents_are_described_as_the_original_indexes_them() {
        let d = describe(
            "memory/summaries/week1.md",
            "---\ntype: summary\nimportance: 0.5\n---\nSummary of whales and dolphins #ocean",
        );
        assert_eq!(d.doc_type, "summary");
        assert_eq!(d.importance, Some(0.5));
        assert_eq!(d.tags, vec!["ocean".to_owned()]);
        assert_eq!(
            d.snippet,
            "--- type: summary importance: 0.5 --- Summary of whales and dolphins #ocean"
        );
        assert_eq!(d.size, 75);
        let j = describe(
            "memory/episodic/2026.jsonl",
            "{\"b\": 1, \"a\": \"héllo\", \"c\": [1, 2.5]}\n{\"b\": 2}\n",
        );
        assert_eq!(
            (j.doc_type.as_str(), j.importance, j.size),
            ("memory", None, 48)
        );
        assert_eq!(
            j.snippet,
            "{\"b\": 1, \"a\": \"héllo\", \"c\": [1, 2.5]} {\"b\": 2}"
        );
        // Front matter counts only in Markdown.
        assert_eq!(
            describe("journal/a.txt", "---\ntype: x\n---\n").doc_type,
            "journal"
        );
        let long = "word ".repeat(100);
        let s = snippet(&long);
        assert!(s.ends_with("...") && s.chars().count() == 243);
    }

    #[test]
    fn query_terms_are_words_of_two_or_more() {
        assert_eq!(
            query_terms("Blue whales, a x-ray BLUE foo_bar!"),
            vec!["blue", "whales", "x-ray", "foo_bar"]
        );
        assert!(query_terms("a b !").is_empty());
    }

    #[test]
    fn a_missing_read_path_is_fastapis_query_422() {
        let err = read_path(&Json::parse(b"{}").unwrap()).unwrap_err();
        assert_eq!(
            to_py_json(&err.body()),
            r#"{"detail":[{"type":"missing","loc":["query","path"],"msg":"Field required","input":null}]}"#
        );
    }

    #[test]
    fn request_models_answer_pydantics_422() {
        let err = WriteRequest::from_json(&Json::parse(br#"{"path":"memory/a.md"}"#).unwrap())
            .unwrap_err();
        assert_eq!(
            to_py_json(&err.body()),
            r#"{"detail":[{"type":"missing","loc":["body","content"],"msg":"Field required","input":{"path":"memory/a.md"}}]}"#
        );
        let err = AppendRequest::from_json(
            &Json::parse(br#"{"path":"memory/episodic/a.jsonl","record":[1]}"#).unwrap(),
        )
        .unwrap_err();
        assert_eq!(
            to_py_json(&err.body()),
            r#"{"detail":[{"type":"dict_type","loc":["body","record"],"msg":"Input should be a valid dictionary","input":[1]}]}"#
        );
        let err = SearchRequest::from_json(&Json::parse(br#"{"query":"","limit":0}"#).unwrap())
            .unwrap_err();
        assert_eq!(
            to_py_json(&err.body()),
            r#"{"detail":[{"type":"greater_than_equal","loc":["body","limit"],"msg":"Input should be greater than or equal to 1","input":0,"ctx":{"ge":1}}]}"#
        );
    }

    #[test]
    fn snippets_join_whitespace_separated_words_and_cut_at_240_characters() {
        assert_eq!(snippet("  a\n\tb  c\r\n"), "a b c");
        assert_eq!(snippet(""), "");
        // 240 characters exactly: no cut; one more: cut with `...`.
        let exact = format!("{} {}", "x".repeat(119), "é".repeat(120));
        assert_eq!(snippet(&exact), exact);
        let longer = format!("{exact}\n\ny and more");
        assert_eq!(snippet(&longer), format!("{exact}..."));
        // A long log: its first words only, the cut inside a word.
        let log = "abcdef ".repeat(10_000);
        let cut = snippet(&log);
        assert_eq!(cut.chars().count(), 243);
        assert_eq!(&cut[..14], "abcdef abcdef ");
        assert!(cut.ends_with("abcdef ab..."), "{cut}");
    }
}

/// Generated paths: any text is a document key or refused with the original's 400, and an
/// accepted key stays inside the repository, under an allowed, unmanaged top-level
/// directory, and is its own key.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn check(path: &str) -> Result<(), TestCaseError> {
        let _ = scope_for_path(path);
        let _ = journal_day_refusal(path, OffsetDateTime::UNIX_EPOCH);
        match document_path(path) {
            Ok(key) => {
                prop_assert!(!key.starts_with('/'));
                prop_assert!(
                    key.split('/')
                        .all(|s| !s.is_empty() && s != "." && s != "..")
                );
                let top = key.split('/').next().unwrap_or_default();
                prop_assert!(ALLOWED_TOP_LEVEL.contains(&top));
                prop_assert!(managed_root(&key).is_none());
                prop_assert_eq!(document_path(&key).unwrap(), key);
            }
            Err(err) => prop_assert!(matches!(err, ContinuityError::Invalid(_))),
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_text_is_a_key_or_refused(path in any::<String>()) {
            check(&path)?;
        }

        #[test]
        fn path_looking_text_is_a_key_or_refused(
            path in "(/|\\./|\\.\\./)?((memory|journal|tasks|index|projects|etc|\\.\\.|\\.|continuity|schedule|[a-z]{1,3}|)/){0,5}[a-z.]{0,6}",
        ) {
            check(&path)?;
        }

        #[test]
        fn any_text_is_searched_and_described_without_a_panic(text in any::<String>()) {
            let _ = query_terms(&text);
            let _ = snippet(&text);
            let _ = describe("memory/core/x.md", &text);
        }

        /// Whenever an append can be described from the old description and the line alone,
        /// that description is the whole new content's.
        #[test]
        fn an_appended_line_is_described_as_the_whole_content_would_be(
            path in "(memory/episodic/a\\.jsonl|journal/b\\.md|memory/c\\.txt)",
            old in "[a-c#_ \n\t.-]{0,300}",
            line in "[a-c#_ \n\t.é-]{0,60}",
        ) {
            let before = describe(&path, &old);
            if let Some(after) = describe_appended(&path, &before, old.chars().next_back(), &line) {
                prop_assert_eq!(after, describe(&path, &format!("{old}{line}")));
            }
        }

        /// Every JSON line appended to a log that ends its lines is described without the
        /// whole content.
        #[test]
        fn a_jsonl_record_after_a_line_end_is_described_from_the_line(
            old in "([a-z #]{0,80}\n){0,12}",
            record in "\\{\"[a-z]{1,5}\": \"[a-z #-]{0,40}\"\\}\n",
        ) {
            let path = "memory/episodic/a.jsonl";
            let before = describe(path, &old);
            let after = describe_appended(path, &before, old.chars().next_back(), &record);
            prop_assert_eq!(after, Some(describe(path, &format!("{old}{record}"))));
        }
    }
}
