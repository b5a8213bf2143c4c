//! CogniRelay's memory files, search and index routes (`/v1/write`, `/v1/read`, `/v1/append`,
//! `/v1/search`, `/v1/recent`, `/v1/index/*`), served by the continuity service per tenant.
//! Bodies pass through as the caller's bytes and answers come back as the service's bytes,
//! as on the continuity routes; `GET /v1/read` hands its `path` parameter on as
//! `{"path": …}` (`{}` without one, which the service answers with FastAPI's 422).

use noema_proto::continuity::v1 as pb;
use schemars::JsonSchema;
use serde::Deserialize;

use super::continuity::{COGNIRELAY, Document, Original, Passed, body, call, request_models};
use crate::forward::{Caller, LastQuery};
use crate::route::{Route, Verb};

request_models! {
    MemoryWrite => noema_continuity::domain::memory::WRITE_REQUEST;
    MemoryAppend => noema_continuity::domain::memory::APPEND_REQUEST;
    MemorySearch => noema_continuity::domain::memory::SEARCH_REQUEST;
    MemoryRecent => noema_continuity::domain::memory::RECENT_REQUEST;
}

/// `GET /v1/read` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["path"]))]
pub struct ReadQuery {
    /// Repository-relative path, e.g. `memory/core/identity.md`
    #[serde(default)]
    #[schemars(extend("pattern" = noema_continuity::domain::rules::READ_PATH_PATTERN))]
    pub path: Option<String>,
}

fn empty() -> pb::JsonRequest {
    pb::JsonRequest {
        body: b"{}".to_vec(),
    }
}

async fn write(caller: Caller, document: Document<MemoryWrite>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.write_file(request).await?.into_inner().body,
    ))
}

async fn append(caller: Caller, document: Document<MemoryAppend>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.append_record(request).await?.into_inner().body,
    ))
}

async fn read(caller: Caller, LastQuery(query): LastQuery<ReadQuery>) -> Passed {
    let message = match query.path {
        Some(path) => pb::JsonRequest {
            body: serde_json::to_vec(&serde_json::json!({ "path": path }))
                .unwrap_or_else(|_| b"{}".to_vec()),
        },
        None => empty(),
    };
    let (mut client, request) = call(&caller, message);
    Ok(Original(client.read_file(request).await?.into_inner().body))
}

async fn search(caller: Caller, document: Document<MemorySearch>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(client.search(request).await?.into_inner().body))
}

async fn recent(caller: Caller, document: Document<MemoryRecent>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(client.recent(request).await?.into_inner().body))
}

async fn index_status(caller: Caller) -> Passed {
    let (mut client, request) = call(&caller, empty());
    Ok(Original(
        client.index_status(request).await?.into_inner().body,
    ))
}

async fn rebuild_incremental(caller: Caller) -> Passed {
    let (mut client, request) = call(&caller, empty());
    Ok(Original(
        client.rebuild_index(request).await?.into_inner().body,
    ))
}

/// The same repair, answered as the original's full rebuild (no `incremental` counts).
async fn rebuild_full(caller: Caller) -> Passed {
    let full = pb::JsonRequest {
        body: br#"{"full":true}"#.to_vec(),
    };
    let (mut client, request) = call(&caller, full);
    Ok(Original(
        client.rebuild_index(request).await?.into_inner().body,
    ))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = COGNIRELAY;
    vec![
        r.route(
            Verb::Post,
            "/v1/write",
            "memoryWrite",
            "CogniRelay: write a memory file's whole content (durable, audited, indexed)",
            write,
        )
        .calls("WriteFile")
        .tool(
            "memory.write",
            "Write text content to a repo-relative path (memory/core, journal, ...)",
        )
        .status(400, "Path outside the allowed roots")
        .status(413, "Payload too large"),
        r.route(
            Verb::Post,
            "/v1/append",
            "memoryAppend",
            "CogniRelay: append one JSON record as a line of a memory file",
            append,
        )
        .calls("AppendRecord")
        .tool(
            "memory.append_jsonl",
            "Append one JSON object as a JSONL record (memory/episodic/*.jsonl)",
        )
        .status(400, "Path outside the allowed roots")
        .status(413, "Payload too large")
        .status(503, "Journal day file of another day"),
        r.route(
            Verb::Get,
            "/v1/read",
            "memoryRead",
            "CogniRelay: read a memory file",
            read,
        )
        .calls("ReadFile")
        .tool("memory.read", "Read a file by path")
        .status(404, "File not found"),
        r.route(
            Verb::Post,
            "/v1/search",
            "search",
            "CogniRelay: term-based full-text search over memory files, best match first",
            search,
        )
        .calls("Search")
        .tool(
            "search.query",
            "Search indexed memory files (any term matches)",
        ),
        r.route(
            Verb::Post,
            "/v1/recent",
            "recent",
            "CogniRelay: the most recently changed memory files",
            recent,
        )
        .calls("Recent")
        .tool(
            "recent.list",
            "List recently modified memory files without a query",
        ),
        r.route(
            Verb::Get,
            "/v1/index/status",
            "indexStatus",
            "CogniRelay: the search index's state (kept in every write's transaction)",
            index_status,
        )
        .calls("IndexStatus")
        .tool("index.status", "Inspect the search index"),
        r.route(
            Verb::Post,
            "/v1/index/rebuild-incremental",
            "indexRebuildIncremental",
            "CogniRelay: repair the search index from the documents (recovery)",
            rebuild_incremental,
        )
        .calls("RebuildIndex")
        .tool(
            "index.rebuild_incremental",
            "Repair index rows that are missing or damaged",
        ),
        r.route(
            Verb::Post,
            "/v1/index/rebuild",
            "indexRebuild",
            "CogniRelay: rebuild the search index from the documents (recovery)",
            rebuild_full,
        )
        .calls("RebuildIndex")
        .tool(
            "index.rebuild_full",
            "Rebuild the search index from the documents",
        ),
    ]
}
