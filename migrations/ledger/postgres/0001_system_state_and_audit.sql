-- System mode (exactly one row) and the append-only, hash-chained audit log.
CREATE TABLE IF NOT EXISTS system_state (
    id          SMALLINT    PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    mode        TEXT        NOT NULL CHECK (mode IN ('RUNNING', 'STOPPED')),
    changed_by  TEXT        NOT NULL,
    changed_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
INSERT INTO system_state (id, mode, changed_by) VALUES (1, 'RUNNING', 'system:init')
ON CONFLICT (id) DO NOTHING;

CREATE TABLE IF NOT EXISTS audit_log (
    id          BIGINT      PRIMARY KEY,
    occurred_at TIMESTAMPTZ NOT NULL,
    actor       TEXT        NOT NULL,
    action      TEXT        NOT NULL,
    target_id   TEXT,
    target_type TEXT,
    detail      JSONB,
    prev_hash   TEXT        NOT NULL,
    hash        TEXT        NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS audit_log_actor_idx ON audit_log (actor);
CREATE INDEX IF NOT EXISTS audit_log_target_idx ON audit_log (target_id);

-- The chain head: one row, locked by every append's UPDATE so appends from any replica
-- are serialised and each row commits to the hash of the one before it.
CREATE TABLE IF NOT EXISTS audit_head (
    id        SMALLINT PRIMARY KEY CHECK (id = 1),
    last_id   BIGINT   NOT NULL,
    last_hash TEXT     NOT NULL
);
INSERT INTO audit_head (id, last_id, last_hash) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING;

CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END;
$$ LANGUAGE plpgsql;

DROP TRIGGER IF EXISTS audit_log_no_update_delete ON audit_log;
CREATE TRIGGER audit_log_no_update_delete BEFORE UPDATE OR DELETE ON audit_log
FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
