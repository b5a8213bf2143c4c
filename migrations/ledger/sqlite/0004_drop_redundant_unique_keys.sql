-- Two UNIQUE constraints that no row could ever break, each costing every write a B-tree
-- insert on a random page (written to the WAL and again at checkpoint):
--   canonical_objects.storage_path is canonical/{type}/{yyyy}/{mm}/{dd}/{id}.json, checked
--     on every write, so it is unique because the primary key id is;
--   audit_log.hash is the hash of the row's own fields, its primary key id among them.
-- SQLite cannot drop a UNIQUE constraint, so both tables are rebuilt with their rows,
-- indexes and triggers. agent_references points at canonical_objects: dropping it would
-- break that foreign key until the rows are back, so the check waits for the commit (which
-- fails, changing nothing, if any reference were left without its object).
PRAGMA defer_foreign_keys = ON;

CREATE TEMP TABLE canonical_objects_0004 AS SELECT * FROM canonical_objects;
DROP TABLE canonical_objects;
CREATE TABLE canonical_objects (
    id              TEXT    PRIMARY KEY,
    object_type     TEXT    NOT NULL CHECK (object_type IN ('observation', 'document', 'tool_output', 'policy')),
    content_type    TEXT    NOT NULL,
    size_bytes      BIGINT  NOT NULL CHECK (size_bytes >= 0),
    created_by      TEXT    NOT NULL,
    created_at      BIGINT  NOT NULL,
    created_at_text TEXT    NOT NULL,
    storage_path    TEXT    NOT NULL,
    metadata        TEXT,
    recorded_at     TEXT    NOT NULL
);
INSERT INTO canonical_objects (id, object_type, content_type, size_bytes, created_by, created_at, created_at_text,
    storage_path, metadata, recorded_at)
SELECT id, object_type, content_type, size_bytes, created_by, created_at, created_at_text,
    storage_path, metadata, recorded_at FROM canonical_objects_0004;
DROP TABLE canonical_objects_0004;
CREATE INDEX canonical_objects_created_idx ON canonical_objects (created_at, id);
CREATE INDEX canonical_objects_type_idx ON canonical_objects (object_type, created_at);
CREATE INDEX canonical_objects_creator_idx ON canonical_objects (created_by, created_at);
CREATE TRIGGER canonical_objects_immutable BEFORE UPDATE ON canonical_objects
BEGIN SELECT RAISE(ABORT, 'canonical_objects are immutable'); END;
CREATE TRIGGER canonical_objects_no_delete BEFORE DELETE ON canonical_objects
BEGIN SELECT RAISE(ABORT, 'canonical_objects are immutable'); END;

CREATE TEMP TABLE audit_log_0004 AS SELECT * FROM audit_log;
DROP TABLE audit_log;
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY,
    occurred_at TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    target_id   TEXT,
    target_type TEXT,
    detail      TEXT,
    prev_hash   TEXT    NOT NULL,
    hash        TEXT    NOT NULL
);
INSERT INTO audit_log (id, occurred_at, actor, action, target_id, target_type, detail, prev_hash, hash)
SELECT id, occurred_at, actor, action, target_id, target_type, detail, prev_hash, hash FROM audit_log_0004 ORDER BY id;
DROP TABLE audit_log_0004;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
