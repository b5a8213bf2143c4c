-- System mode (exactly one row) and the append-only, hash-chained audit log.
CREATE TABLE IF NOT EXISTS system_state (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    mode        TEXT    NOT NULL CHECK (mode IN ('RUNNING', 'STOPPED')),
    changed_by  TEXT    NOT NULL,
    changed_at  TEXT    NOT NULL
);
INSERT INTO system_state (id, mode, changed_by, changed_at)
VALUES (1, 'RUNNING', 'system:init', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (id) DO NOTHING;

CREATE TABLE IF NOT EXISTS audit_log (
    id          INTEGER PRIMARY KEY,
    occurred_at TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    target_id   TEXT,
    target_type TEXT,
    detail      TEXT,
    prev_hash   TEXT    NOT NULL,
    hash        TEXT    NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS audit_log_actor_idx ON audit_log (actor);
CREATE INDEX IF NOT EXISTS audit_log_target_idx ON audit_log (target_id);

-- The chain head: one row, updated inside every append's transaction so appends are
-- serialised and each row commits to the hash of the one before it.
CREATE TABLE IF NOT EXISTS audit_head (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    last_id   INTEGER NOT NULL,
    last_hash TEXT    NOT NULL
);
INSERT INTO audit_head (id, last_id, last_hash) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING;

CREATE TRIGGER IF NOT EXISTS audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
