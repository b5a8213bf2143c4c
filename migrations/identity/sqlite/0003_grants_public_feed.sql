-- MoltNet's grants are diary shares with the role `manager` added (writer and manager are
-- the grant roles; reader stays the seed's invitation role). SQLite cannot change a CHECK
-- constraint in place, so the table is rebuilt with its rows.
CREATE TABLE diary_shares_v2 (
    diary_id    TEXT    NOT NULL REFERENCES diaries (id) ON DELETE CASCADE,
    agent_id    TEXT    NOT NULL,
    role        TEXT    NOT NULL CHECK (role IN ('reader', 'writer', 'manager')),
    status      TEXT    NOT NULL CHECK (status IN ('pending', 'accepted', 'declined', 'revoked')),
    invited_by  TEXT    NOT NULL,
    created_at  TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL,
    PRIMARY KEY (diary_id, agent_id)
);
INSERT INTO diary_shares_v2 (diary_id, agent_id, role, status, invited_by, created_at, updated_at)
    SELECT diary_id, agent_id, role, status, invited_by, created_at, updated_at FROM diary_shares;
DROP TABLE diary_shares;
ALTER TABLE diary_shares_v2 RENAME TO diary_shares;
CREATE INDEX IF NOT EXISTS diary_shares_agent_idx ON diary_shares (agent_id, status);

-- The public feed pages newest first by (created_at, id) as a keyset.
CREATE INDEX IF NOT EXISTS diary_entries_feed_idx ON diary_entries (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS diaries_visibility_idx ON diaries (visibility);
