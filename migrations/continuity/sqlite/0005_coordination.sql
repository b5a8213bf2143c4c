-- Coordination (CogniRelay's /v1/peers and /v1/coordination/*), per tenant.
--
-- The peer registry: one row per tenant and peer, holding the original's peer record
-- (JSON, its key order). `version` moves with every write, so a trust transition computed on
-- a record another writer changed meanwhile is refused and computed again.
CREATE TABLE IF NOT EXISTS coordination_peers (
    tenant      TEXT    NOT NULL,
    peer_id     TEXT    NOT NULL,
    trust_level TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL,
    document    TEXT    NOT NULL,
    revision_id TEXT    NOT NULL,
    version     BIGINT  NOT NULL,
    PRIMARY KEY (tenant, peer_id)
);

-- Handoffs, shared artifacts and reconciliations (`kind`): the original's artifact document
-- and the columns queries filter and order on: `party` is the sender (handoff) or owner,
-- `counterparty` the recipient (handoff). Participant lists stay in the document.
CREATE TABLE IF NOT EXISTS coordination_artifacts (
    tenant       TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    artifact_id  TEXT    NOT NULL,
    party        TEXT    NOT NULL,
    counterparty TEXT,
    status       TEXT,
    task_id      TEXT,
    thread_id    TEXT,
    created_at   TEXT    NOT NULL,
    updated_at   TEXT    NOT NULL,
    document     TEXT    NOT NULL,
    revision_id  TEXT    NOT NULL,
    version      BIGINT  NOT NULL,
    PRIMARY KEY (tenant, kind, artifact_id)
);
CREATE INDEX IF NOT EXISTS coordination_artifacts_party_idx
    ON coordination_artifacts (tenant, kind, party);
CREATE INDEX IF NOT EXISTS coordination_artifacts_counterparty_idx
    ON coordination_artifacts (tenant, kind, counterparty);

-- Every superseded version of an artifact (the original archives a shared artifact's
-- previous version on update), kept in the same transaction as the update.
CREATE TABLE IF NOT EXISTS coordination_history (
    tenant      TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    artifact_id TEXT    NOT NULL,
    version     BIGINT  NOT NULL,
    document    TEXT    NOT NULL,
    revision_id TEXT    NOT NULL,
    PRIMARY KEY (tenant, kind, artifact_id, version)
);
