-- Messages (CogniRelay's /v1/messages/*, /v1/relay/forward, /v1/replay/messages), per tenant.
-- The original appends each message to JSONL files (inbox, outbox, thread, relay) and keeps
-- delivery state, idempotency keys and consumed nonces in JSON indexes; here each is a row
-- written in the same transaction as the rest of the send, so a send is acknowledged only
-- once all of it is committed.

-- One row per message; `seq` is the append order the inbox, outbox, thread and relay views
-- read back. `outbox` is false for relayed messages (the original writes them to the relay
-- log, not the sender's outbox).
CREATE TABLE IF NOT EXISTS continuity_messages (
    seq         BIGSERIAL PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    message_id  TEXT    NOT NULL,
    thread_id   TEXT    NOT NULL,
    sender      TEXT    NOT NULL,
    recipient   TEXT    NOT NULL,
    outbox      BOOLEAN NOT NULL,
    relay_id    TEXT,
    document    TEXT    NOT NULL,
    revision_id TEXT    NOT NULL,
    UNIQUE (tenant, message_id)
);
CREATE INDEX IF NOT EXISTS continuity_messages_inbox_idx
    ON continuity_messages (tenant, recipient, seq);
CREATE INDEX IF NOT EXISTS continuity_messages_thread_idx
    ON continuity_messages (tenant, thread_id, seq);

-- Tracked deliveries: the original's delivery record (JSON, its key order) with the columns
-- pending filters and sorts on. `idempotency_scope` (`<sender>|<recipient>|<key>`) is set on
-- the record a key first created, and is unique per tenant. `version` moves with each ack.
CREATE TABLE IF NOT EXISTS continuity_deliveries (
    seq               BIGSERIAL PRIMARY KEY,
    tenant            TEXT    NOT NULL,
    message_id        TEXT    NOT NULL,
    recipient         TEXT    NOT NULL,
    status            TEXT    NOT NULL,
    ack_deadline      TEXT,
    sent_at           TEXT    NOT NULL,
    idempotency_scope TEXT,
    record            TEXT    NOT NULL,
    revision_id       TEXT    NOT NULL,
    version           BIGINT  NOT NULL,
    UNIQUE (tenant, message_id)
);
CREATE UNIQUE INDEX IF NOT EXISTS continuity_deliveries_idempotency_idx
    ON continuity_deliveries (tenant, idempotency_scope);

-- Consumed signed-envelope nonces: `<key_id>|<nonce>` once per tenant (replay protection).
CREATE TABLE IF NOT EXISTS continuity_message_nonces (
    tenant        TEXT NOT NULL,
    nonce_key     TEXT NOT NULL,
    key_id        TEXT NOT NULL,
    nonce         TEXT NOT NULL,
    first_seen_at TEXT NOT NULL,
    expires_at    TEXT,
    -- `expires_at` parsed (microseconds since the epoch): past it, the nonce may be used again
    -- (the original prunes such entries).
    expires_micros BIGINT,
    PRIMARY KEY (tenant, nonce_key)
);

-- HMAC signing keys for signed envelopes (POST /v1/security/keys/rotate), per tenant. The
-- secret is kept only here; it is answered once, by the rotation that made it, on request.
CREATE TABLE IF NOT EXISTS continuity_signing_keys (
    tenant        TEXT    NOT NULL,
    key_id        TEXT    NOT NULL,
    algorithm     TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    created_at    TEXT    NOT NULL,
    rotated_at    TEXT    NOT NULL,
    retired_at    TEXT,
    secret        TEXT    NOT NULL,
    secret_sha256 TEXT    NOT NULL,
    active        BOOLEAN NOT NULL,
    PRIMARY KEY (tenant, key_id)
);
