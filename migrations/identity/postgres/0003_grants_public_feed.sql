-- MoltNet's grants are diary shares with the role `manager` added (writer and manager are
-- the grant roles; reader stays the seed's invitation role).
ALTER TABLE diary_shares DROP CONSTRAINT IF EXISTS diary_shares_role_check;
ALTER TABLE diary_shares ADD CONSTRAINT diary_shares_role_check
    CHECK (role IN ('reader', 'writer', 'manager'));

-- The public feed pages newest first by (created_at, id) as a keyset.
CREATE INDEX IF NOT EXISTS diary_entries_feed_idx ON diary_entries (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS diaries_visibility_idx ON diaries (visibility);
