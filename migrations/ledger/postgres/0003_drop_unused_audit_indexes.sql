-- The audit log is only ever read by id (newest first for listings, oldest first for chain
-- verification). The indexes on actor and target_id served no query, yet every append wrote
-- to both, and target_id (an object's hash or a reference's UUID) lands on a random page.
DROP INDEX IF EXISTS audit_log_actor_idx;
DROP INDEX IF EXISTS audit_log_target_idx;
