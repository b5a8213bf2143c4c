-- Agents and their current Ed25519 key (trust on first use), the append-only key
-- history, API tokens (stored only as SHA-256), and the hash-chained audit log.
CREATE TABLE IF NOT EXISTS agents (
    agent_id        TEXT    PRIMARY KEY,
    public_key      TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    first_object_id TEXT    NOT NULL DEFAULT '',
    registered_at   TEXT     NOT NULL,
    key_version     INTEGER NOT NULL DEFAULT 1,
    key_rotated_at  TEXT
);
CREATE INDEX IF NOT EXISTS agents_fingerprint_idx ON agents (fingerprint, registered_at);

CREATE TABLE IF NOT EXISTS agent_key_history (
    agent_id        TEXT    NOT NULL,
    key_version     INTEGER NOT NULL,
    public_key      TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    valid_from      TEXT     NOT NULL,
    proof_signature TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (agent_id, key_version)
);

CREATE TABLE IF NOT EXISTS tokens (
    token_id              TEXT    PRIMARY KEY,
    token_sha256          TEXT    NOT NULL UNIQUE,
    peer_id               TEXT    NOT NULL,
    scopes                TEXT     NOT NULL,
    read_namespaces       TEXT     NOT NULL,
    write_namespaces      TEXT     NOT NULL,
    superuser             INTEGER   NOT NULL DEFAULT FALSE,
    status                TEXT    NOT NULL CHECK (status IN ('active', 'revoked')),
    issued_at             TEXT     NOT NULL,
    expires_at            TEXT,
    revoked_at            TEXT,
    revoked_reason        TEXT,
    rotated_at            TEXT,
    rotated_to_token_id   TEXT,
    rotated_from_token_id TEXT,
    description           TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tokens_peer_idx ON tokens (peer_id, issued_at);

CREATE TABLE IF NOT EXISTS audit_log (
    id          INTEGER    PRIMARY KEY,
    occurred_at TEXT     NOT NULL,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    target_id   TEXT,
    target_type TEXT,
    detail      TEXT,
    prev_hash   TEXT    NOT NULL,
    hash        TEXT    NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS audit_head (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    last_id   INTEGER    NOT NULL,
    last_hash TEXT    NOT NULL
);
INSERT INTO audit_head (id, last_id, last_hash) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING;

CREATE TRIGGER IF NOT EXISTS audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS agent_key_history_no_update BEFORE UPDATE ON agent_key_history
BEGIN SELECT RAISE(ABORT, 'agent_key_history is append-only'); END;
CREATE TRIGGER IF NOT EXISTS agent_key_history_no_delete BEFORE DELETE ON agent_key_history
BEGIN SELECT RAISE(ABORT, 'agent_key_history is append-only'); END;
