-- Agents and their current Ed25519 key (trust on first use), the append-only key
-- history, API tokens (stored only as SHA-256), and the hash-chained audit log.
CREATE TABLE IF NOT EXISTS agents (
    agent_id        TEXT    PRIMARY KEY,
    public_key      TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    first_object_id TEXT    NOT NULL DEFAULT '',
    registered_at   TIMESTAMPTZ     NOT NULL,
    key_version     INTEGER NOT NULL DEFAULT 1,
    key_rotated_at  TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS agents_fingerprint_idx ON agents (fingerprint, registered_at);

CREATE TABLE IF NOT EXISTS agent_key_history (
    agent_id        TEXT    NOT NULL,
    key_version     INTEGER NOT NULL,
    public_key      TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    valid_from      TIMESTAMPTZ     NOT NULL,
    proof_signature TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (agent_id, key_version)
);

CREATE TABLE IF NOT EXISTS tokens (
    token_id              TEXT    PRIMARY KEY,
    token_sha256          TEXT    NOT NULL UNIQUE,
    peer_id               TEXT    NOT NULL,
    scopes                JSONB     NOT NULL,
    read_namespaces       JSONB     NOT NULL,
    write_namespaces      JSONB     NOT NULL,
    superuser             BOOLEAN   NOT NULL DEFAULT FALSE,
    status                TEXT    NOT NULL CHECK (status IN ('active', 'revoked')),
    issued_at             TIMESTAMPTZ     NOT NULL,
    expires_at            TIMESTAMPTZ,
    revoked_at            TIMESTAMPTZ,
    revoked_reason        TEXT,
    rotated_at            TIMESTAMPTZ,
    rotated_to_token_id   TEXT,
    rotated_from_token_id TEXT,
    description           TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tokens_peer_idx ON tokens (peer_id, issued_at);

CREATE TABLE IF NOT EXISTS audit_log (
    id          BIGINT    PRIMARY KEY,
    occurred_at TIMESTAMPTZ     NOT NULL,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    target_id   TEXT,
    target_type TEXT,
    detail      JSONB,
    prev_hash   TEXT    NOT NULL,
    hash        TEXT    NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS audit_head (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    last_id   BIGINT    NOT NULL,
    last_hash TEXT    NOT NULL
);
INSERT INTO audit_head (id, last_id, last_hash) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING;

CREATE OR REPLACE FUNCTION noema_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$ LANGUAGE plpgsql;

DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
FOR EACH ROW EXECUTE FUNCTION noema_append_only();
DROP TRIGGER IF EXISTS agent_key_history_append_only ON agent_key_history;
CREATE TRIGGER agent_key_history_append_only BEFORE UPDATE OR DELETE ON agent_key_history
FOR EACH ROW EXECUTE FUNCTION noema_append_only();
