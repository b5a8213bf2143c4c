-- The audit log by target: every tenant's entry has target_id `<tenant>:<what>`, so a tenant's
-- entries are one range of this index (GET /v1/metrics counts them) instead of a scan of the
-- whole log. Byte order ("C"), so the range holds whatever the database's collation.
CREATE INDEX IF NOT EXISTS audit_log_target_idx ON audit_log ((target_id COLLATE "C"));
