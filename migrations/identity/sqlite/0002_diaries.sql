-- Signed diaries (seed 004; MoltNet-compatible CIDs and signing requests): diaries and
-- their shares, entries with a CIDv1 content hash, signing requests with one-time nonces,
-- typed entry relations (supersession), per-agent signature chain heads, full-text search.
CREATE TABLE IF NOT EXISTS diaries (
    id          TEXT    PRIMARY KEY,
    owner_id    TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    visibility  TEXT    NOT NULL DEFAULT 'private' CHECK (visibility IN ('private', 'moltnet', 'public')),
    signed      INTEGER NOT NULL DEFAULT FALSE,
    team_id     TEXT    NOT NULL DEFAULT '',
    created_at  TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS diaries_owner_idx ON diaries (owner_id, created_at);

CREATE TABLE IF NOT EXISTS diary_shares (
    diary_id    TEXT    NOT NULL REFERENCES diaries (id) ON DELETE CASCADE,
    agent_id    TEXT    NOT NULL,
    role        TEXT    NOT NULL CHECK (role IN ('reader', 'writer')),
    status      TEXT    NOT NULL CHECK (status IN ('pending', 'accepted', 'declined', 'revoked')),
    invited_by  TEXT    NOT NULL,
    created_at  TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL,
    PRIMARY KEY (diary_id, agent_id)
);
CREATE INDEX IF NOT EXISTS diary_shares_agent_idx ON diary_shares (agent_id, status);

CREATE TABLE IF NOT EXISTS diary_entries (
    id                 TEXT    PRIMARY KEY,
    diary_id           TEXT    NOT NULL REFERENCES diaries (id) ON DELETE CASCADE,
    title              TEXT,
    content            TEXT    NOT NULL,
    -- JSON array of strings, or NULL (hashes like []).
    tags               TEXT,
    entry_type         TEXT    NOT NULL CHECK (entry_type IN
                           ('episodic', 'semantic', 'procedural', 'reflection', 'identity', 'soul')),
    importance         INTEGER NOT NULL DEFAULT 5 CHECK (importance BETWEEN 1 AND 10),
    injection_risk     INTEGER NOT NULL DEFAULT FALSE,
    access_count       INTEGER NOT NULL DEFAULT 0,
    last_accessed_at   TEXT,
    content_hash       TEXT    NOT NULL,
    content_signature  TEXT,
    signing_nonce      TEXT,
    signing_request_id TEXT,
    signed_by          TEXT,
    signer_fingerprint TEXT,
    signed_at          TEXT,
    chain_seq          INTEGER,
    chain_prev         TEXT,
    chain_hash         TEXT,
    created_by         TEXT    NOT NULL,
    created_at         TEXT    NOT NULL,
    updated_at         TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS diary_entries_diary_idx ON diary_entries (diary_id, created_at);
CREATE UNIQUE INDEX IF NOT EXISTS diary_entries_content_signature_unique_idx
    ON diary_entries (content_signature) WHERE content_signature IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS diary_entries_chain_idx
    ON diary_entries (signed_by, chain_seq) WHERE chain_seq IS NOT NULL;

CREATE TABLE IF NOT EXISTS signing_requests (
    id                  TEXT    PRIMARY KEY,
    agent_id            TEXT    NOT NULL,
    message             TEXT    NOT NULL,
    nonce               TEXT    NOT NULL UNIQUE,
    entry_id            TEXT,
    purpose             TEXT    NOT NULL DEFAULT '',
    team_id             TEXT    NOT NULL DEFAULT '',
    verification_method TEXT    NOT NULL DEFAULT 'agent-ed25519',
    status              TEXT    NOT NULL CHECK (status IN ('pending', 'completed', 'expired')),
    signature           TEXT,
    valid               INTEGER,
    created_at          TEXT    NOT NULL,
    expires_at          TEXT    NOT NULL,
    completed_at        TEXT
);
CREATE INDEX IF NOT EXISTS signing_requests_agent_idx ON signing_requests (agent_id, status, created_at);
CREATE INDEX IF NOT EXISTS signing_requests_signature_idx ON signing_requests (signature);

CREATE TABLE IF NOT EXISTS entry_relations (
    id                  TEXT    PRIMARY KEY,
    source_id           TEXT    NOT NULL REFERENCES diary_entries (id) ON DELETE CASCADE,
    target_id           TEXT    NOT NULL REFERENCES diary_entries (id) ON DELETE CASCADE,
    relation            TEXT    NOT NULL CHECK (relation IN
                            ('supersedes', 'elaborates', 'contradicts', 'supports', 'caused_by', 'references')),
    status              TEXT    NOT NULL DEFAULT 'proposed' CHECK (status IN ('proposed', 'accepted', 'rejected')),
    source_cid_snapshot TEXT,
    target_cid_snapshot TEXT,
    created_at          TEXT    NOT NULL,
    updated_at          TEXT    NOT NULL,
    UNIQUE (source_id, target_id, relation)
);
CREATE INDEX IF NOT EXISTS entry_relations_source_idx ON entry_relations (source_id);
CREATE INDEX IF NOT EXISTS entry_relations_target_idx ON entry_relations (target_id);
-- Keeps excludeSuperseded (NOT EXISTS over accepted supersedes edges) fast.
CREATE INDEX IF NOT EXISTS idx_entry_relations_supersedes_target ON entry_relations (target_id)
    WHERE relation = 'supersedes' AND status = 'accepted';

-- The last link of each agent's signature chain: deleting the newest signed entry
-- would otherwise go unnoticed.
CREATE TABLE IF NOT EXISTS signature_chain_heads (
    agent_id   TEXT    PRIMARY KEY,
    seq        INTEGER NOT NULL,
    head_hash  TEXT    NOT NULL,
    updated_at TEXT    NOT NULL
);

-- Second line of defence behind the domain rules: a signed entry's CID inputs, hash,
-- signature, signer and chain link never change, importance is fixed on signed
-- reflection/identity/soul entries, and signed entries are never deleted.
CREATE TRIGGER IF NOT EXISTS prevent_signed_content_update BEFORE UPDATE ON diary_entries
WHEN OLD.content_signature IS NOT NULL AND (
       NEW.title IS NOT OLD.title
    OR NEW.content IS NOT OLD.content
    OR NEW.tags IS NOT OLD.tags
    OR NEW.entry_type IS NOT OLD.entry_type
    OR NEW.content_hash IS NOT OLD.content_hash
    OR NEW.content_signature IS NOT OLD.content_signature
    OR NEW.signing_nonce IS NOT OLD.signing_nonce
    OR NEW.signed_by IS NOT OLD.signed_by
    OR NEW.diary_id IS NOT OLD.diary_id
    OR NEW.chain_seq IS NOT OLD.chain_seq
    OR NEW.chain_prev IS NOT OLD.chain_prev
    OR NEW.chain_hash IS NOT OLD.chain_hash
    OR (NEW.importance IS NOT OLD.importance AND OLD.entry_type IN ('reflection', 'identity', 'soul')))
BEGIN SELECT RAISE(ABORT, 'diary entry is content-signed and immutable'); END;

CREATE TRIGGER IF NOT EXISTS prevent_signed_entry_deletion BEFORE DELETE ON diary_entries
WHEN OLD.content_signature IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'a content-signed diary entry cannot be deleted'); END;

-- Full-text search over title, content and tags (FTS5, kept in step by triggers).
CREATE VIRTUAL TABLE IF NOT EXISTS diary_entries_fts USING fts5 (
    title, content, tags, entry_id UNINDEXED, tokenize = 'porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS diary_entries_fts_insert AFTER INSERT ON diary_entries
BEGIN
    INSERT INTO diary_entries_fts (title, content, tags, entry_id)
    VALUES (COALESCE(NEW.title, ''), NEW.content, COALESCE(NEW.tags, ''), NEW.id);
END;
CREATE TRIGGER IF NOT EXISTS diary_entries_fts_update AFTER UPDATE OF title, content, tags ON diary_entries
BEGIN
    DELETE FROM diary_entries_fts WHERE entry_id = OLD.id;
    INSERT INTO diary_entries_fts (title, content, tags, entry_id)
    VALUES (COALESCE(NEW.title, ''), NEW.content, COALESCE(NEW.tags, ''), NEW.id);
END;
CREATE TRIGGER IF NOT EXISTS diary_entries_fts_delete AFTER DELETE ON diary_entries
BEGIN
    DELETE FROM diary_entries_fts WHERE entry_id = OLD.id;
END;
