-- Memory files (CogniRelay's /v1/write, /v1/append, /v1/read) and their full-text index,
-- per tenant. A document is one repository path of the original (`memory/core/identity.md`,
-- `memory/episodic/2026.jsonl`, `journal/…`); its index row is written in the same
-- transaction as the document, so search never sees a stale index.

CREATE TABLE IF NOT EXISTS memory_documents (
    id              INTEGER PRIMARY KEY,
    tenant          TEXT    NOT NULL,
    path            TEXT    NOT NULL,
    content         TEXT    NOT NULL,
    revision_id     TEXT    NOT NULL,
    doc_type        TEXT    NOT NULL,
    size            INTEGER NOT NULL,
    importance      REAL,
    tags            TEXT    NOT NULL,
    snippet         TEXT    NOT NULL,
    modified_at     TEXT    NOT NULL,
    modified_micros INTEGER NOT NULL,
    UNIQUE (tenant, path)
);
CREATE INDEX IF NOT EXISTS memory_documents_recent_idx
    ON memory_documents (tenant, modified_micros DESC, path);

-- The index: one row per document (rowid = memory_documents.id), path and body tokenised.
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
    tenant UNINDEXED,
    path,
    body,
    tokenize = 'unicode61 remove_diacritics 2'
);

-- Tasks (CogniRelay's /v1/tasks): the original's task document per tenant and task id, with
-- the columns queries filter and order on. `version` moves with every update, so an update
-- computed on a task another writer changed meanwhile is refused and computed again.
CREATE TABLE IF NOT EXISTS continuity_tasks (
    tenant      TEXT    NOT NULL,
    task_id     TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    owner_peer  TEXT    NOT NULL,
    thread_id   TEXT,
    updated_at  TEXT    NOT NULL,
    document    TEXT    NOT NULL,
    revision_id TEXT    NOT NULL,
    version     BIGINT  NOT NULL,
    PRIMARY KEY (tenant, task_id)
);
CREATE INDEX IF NOT EXISTS continuity_tasks_updated_idx
    ON continuity_tasks (tenant, updated_at DESC, task_id DESC);

-- One-shot scheduled items (CogniRelay's /v1/schedule/items): the original's
-- scheduled_items row per tenant. No scheduler loop runs them; `due` is derived at read time.
CREATE TABLE IF NOT EXISTS continuity_schedule (
    tenant          TEXT    NOT NULL,
    schedule_id     TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    title           TEXT    NOT NULL,
    note            TEXT,
    due_at          TEXT    NOT NULL,
    due_at_ts       BIGINT  NOT NULL,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL,
    created_by      TEXT    NOT NULL,
    updated_by      TEXT    NOT NULL,
    terminal_at     TEXT,
    terminal_by     TEXT,
    terminal_reason TEXT,
    task_id         TEXT,
    thread_id       TEXT,
    subject_kind    TEXT,
    subject_id      TEXT,
    idempotency_key TEXT,
    identity_sha256 TEXT    NOT NULL,
    identity_json   TEXT    NOT NULL,
    metadata        TEXT    NOT NULL,
    version         BIGINT  NOT NULL,
    PRIMARY KEY (tenant, schedule_id),
    UNIQUE (tenant, idempotency_key)
);
CREATE INDEX IF NOT EXISTS continuity_schedule_due_idx
    ON continuity_schedule (tenant, due_at_ts, schedule_id);
