-- Canonical objects (payload bytes live in object storage at storage_path) and signed
-- agent references. Both are immutable: the triggers below refuse UPDATE and DELETE.
-- created_at is UTC unix seconds on both backends, so ordering and paging are identical.
CREATE TABLE IF NOT EXISTS canonical_objects (
    id              TEXT    PRIMARY KEY,
    object_type     TEXT    NOT NULL CHECK (object_type IN ('observation', 'document', 'tool_output', 'policy')),
    content_type    TEXT    NOT NULL,
    size_bytes      BIGINT  NOT NULL CHECK (size_bytes >= 0),
    created_by      TEXT    NOT NULL,
    created_at      BIGINT  NOT NULL,
    created_at_text TEXT    NOT NULL,
    storage_path    TEXT    NOT NULL UNIQUE,
    metadata        TEXT,
    recorded_at     TEXT     NOT NULL
);
CREATE INDEX IF NOT EXISTS canonical_objects_created_idx ON canonical_objects (created_at, id);
CREATE INDEX IF NOT EXISTS canonical_objects_type_idx ON canonical_objects (object_type, created_at);
CREATE INDEX IF NOT EXISTS canonical_objects_creator_idx ON canonical_objects (created_by, created_at);

CREATE TABLE IF NOT EXISTS agent_references (
    id                  TEXT    PRIMARY KEY,
    canonical_object_id TEXT    NOT NULL REFERENCES canonical_objects (id),
    agent_id            TEXT    NOT NULL,
    created_at          BIGINT  NOT NULL,
    signed_created_at   TEXT    NOT NULL,
    context             TEXT    NOT NULL,
    relevance           REAL    CHECK (relevance BETWEEN 0 AND 1),
    trust_weight        REAL    CHECK (trust_weight BETWEEN 0 AND 1),
    time_horizon        TEXT    NOT NULL DEFAULT '',
    signature           TEXT    NOT NULL,
    public_key          TEXT    NOT NULL,
    metadata            TEXT,
    recorded_at         TEXT     NOT NULL
);
CREATE INDEX IF NOT EXISTS agent_references_created_idx ON agent_references (created_at, id);
CREATE INDEX IF NOT EXISTS agent_references_object_idx ON agent_references (canonical_object_id, created_at);
CREATE INDEX IF NOT EXISTS agent_references_agent_idx ON agent_references (agent_id, created_at);

CREATE TRIGGER IF NOT EXISTS canonical_objects_immutable BEFORE UPDATE ON canonical_objects
BEGIN SELECT RAISE(ABORT, 'canonical_objects are immutable'); END;
CREATE TRIGGER IF NOT EXISTS canonical_objects_no_delete BEFORE DELETE ON canonical_objects
BEGIN SELECT RAISE(ABORT, 'canonical_objects are immutable'); END;
CREATE TRIGGER IF NOT EXISTS agent_references_immutable BEFORE UPDATE ON agent_references
BEGIN SELECT RAISE(ABORT, 'agent_references are immutable'); END;
CREATE TRIGGER IF NOT EXISTS agent_references_no_delete BEFORE DELETE ON agent_references
BEGIN SELECT RAISE(ABORT, 'agent_references are immutable'); END;
