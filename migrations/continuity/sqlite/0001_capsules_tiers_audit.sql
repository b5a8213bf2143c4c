-- Continuity: capsule revisions per tenant and subject, the subject's pointers (active,
-- fallback), archive envelopes and their cold tier, idempotency keys, plan state, and the
-- append-only, hash-chained audit log.

-- Every capsule write is a revision: immutable, chained to its predecessor by id.
CREATE TABLE IF NOT EXISTS continuity_revisions (
    tenant         TEXT    NOT NULL,
    subject_kind   TEXT    NOT NULL,
    subject_key    TEXT    NOT NULL,
    sequence       INTEGER NOT NULL,
    revision_id    TEXT    NOT NULL,
    previous_id    TEXT    NOT NULL,
    operation      TEXT    NOT NULL,
    capsule        BLOB    NOT NULL,
    capsule_sha256 TEXT    NOT NULL,
    actor          TEXT    NOT NULL,
    recorded_at    TEXT    NOT NULL,
    PRIMARY KEY (tenant, subject_kind, subject_key, sequence)
) WITHOUT ROWID;

CREATE TRIGGER IF NOT EXISTS continuity_revisions_no_update BEFORE UPDATE ON continuity_revisions
BEGIN SELECT RAISE(ABORT, 'continuity_revisions is append-only'); END;
CREATE TRIGGER IF NOT EXISTS continuity_revisions_no_delete BEFORE DELETE ON continuity_revisions
BEGIN SELECT RAISE(ABORT, 'continuity_revisions is append-only'); END;

-- One row per subject: the chain head and the tier pointers, moved only with a version
-- check (a writer that read version n writes only if it is still n).
CREATE TABLE IF NOT EXISTS continuity_subjects (
    tenant            TEXT    NOT NULL,
    subject_kind      TEXT    NOT NULL,
    subject_key       TEXT    NOT NULL,
    subject_id        TEXT    NOT NULL,
    version           INTEGER NOT NULL,
    head_sequence     INTEGER NOT NULL,
    head_revision     TEXT    NOT NULL,
    active_sequence   INTEGER,
    active_revision   TEXT,
    fallback_sequence INTEGER,
    fallback_revision TEXT,
    used_at           INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, subject_kind, subject_key)
) WITHOUT ROWID;

-- Archive envelopes: hot (the envelope's bytes) or cold (the gzip payload in the object
-- store under cold_key, and the searchable stub).
CREATE TABLE IF NOT EXISTS continuity_archives (
    tenant          TEXT    NOT NULL,
    archive_path    TEXT    NOT NULL,
    subject_kind    TEXT    NOT NULL,
    subject_key     TEXT    NOT NULL,
    subject_id      TEXT    NOT NULL,
    archived_at     TEXT    NOT NULL,
    archived_unix   INTEGER NOT NULL,
    revision_id     TEXT    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('archived', 'cold')),
    envelope        BLOB,
    cold_key        TEXT,
    cold_sha256     TEXT,
    stub            TEXT,
    cold_stored_at  TEXT,
    PRIMARY KEY (tenant, archive_path),
    CHECK ((state = 'archived') = (envelope IS NOT NULL)),
    CHECK ((state = 'cold') = (cold_key IS NOT NULL AND stub IS NOT NULL))
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS continuity_archives_subject_idx
    ON continuity_archives (tenant, subject_kind, subject_key);
CREATE INDEX IF NOT EXISTS continuity_archives_retention_idx
    ON continuity_archives (tenant, state, archived_unix);

-- Upsert idempotency keys: the first result of a key, and the hash of the body it came with.
CREATE TABLE IF NOT EXISTS continuity_idempotency (
    tenant          TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    request_sha256  TEXT NOT NULL,
    response        BLOB NOT NULL,
    subject_kind    TEXT NOT NULL,
    subject_id      TEXT NOT NULL,
    revision_id     TEXT NOT NULL,
    capsule_sha256  TEXT NOT NULL,
    recorded_at     TEXT NOT NULL,
    PRIMARY KEY (tenant, idempotency_key)
) WITHOUT ROWID;

-- The last refresh and retention plans (the original's refresh_state.json and
-- retention_state.json), per tenant.
CREATE TABLE IF NOT EXISTS continuity_plans (
    tenant TEXT NOT NULL,
    plan   TEXT NOT NULL CHECK (plan IN ('refresh', 'retention')),
    body   BLOB NOT NULL,
    PRIMARY KEY (tenant, plan)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS audit_log (
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
