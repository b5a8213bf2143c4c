-- Context snapshots (CogniRelay's /v1/context/snapshot): a bundle stored once, per tenant,
-- as its canonical (JCS) bytes and addressed by their sha256; never updated or deleted, so a
-- later session reads exactly what an earlier one saw.
CREATE TABLE IF NOT EXISTS context_snapshots (
    tenant      TEXT NOT NULL,
    snapshot_id TEXT NOT NULL,
    content_id  TEXT NOT NULL,
    body        BLOB NOT NULL,
    actor       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (tenant, snapshot_id)
) WITHOUT ROWID;

CREATE TRIGGER IF NOT EXISTS context_snapshots_no_update BEFORE UPDATE ON context_snapshots
BEGIN SELECT RAISE(ABORT, 'context_snapshots is append-only'); END;
CREATE TRIGGER IF NOT EXISTS context_snapshots_no_delete BEFORE DELETE ON context_snapshots
BEGIN SELECT RAISE(ABORT, 'context_snapshots is append-only'); END;
