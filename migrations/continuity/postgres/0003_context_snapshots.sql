-- Context snapshots (CogniRelay's /v1/context/snapshot): a bundle stored once, per tenant,
-- as its canonical (JCS) bytes and addressed by their sha256; never updated or deleted, so a
-- later session reads exactly what an earlier one saw.
CREATE TABLE IF NOT EXISTS context_snapshots (
    tenant      TEXT  NOT NULL,
    snapshot_id TEXT  NOT NULL,
    content_id  TEXT  NOT NULL,
    body        BYTEA NOT NULL,
    actor       TEXT  NOT NULL,
    created_at  TEXT  NOT NULL,
    PRIMARY KEY (tenant, snapshot_id)
);

CREATE OR REPLACE FUNCTION context_snapshots_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'context_snapshots is append-only';
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS context_snapshots_no_update_delete ON context_snapshots;
CREATE TRIGGER context_snapshots_no_update_delete BEFORE UPDATE OR DELETE ON context_snapshots
FOR EACH ROW EXECUTE FUNCTION context_snapshots_append_only();
