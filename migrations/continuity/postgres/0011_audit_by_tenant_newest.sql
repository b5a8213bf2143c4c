-- A tenant's audit entries by the tenant their detail names, in log order (store/audit.rs).
--
-- Migration 0009 indexed them by `target_id` (`<tenant>:<what>`): each write's entry landed
-- next to its target's earlier ones. Keyed by (tenant, id), a tenant's new entries go to the
-- end of its range, and GET /v1/metrics reads the tenant's newest entries straight off the
-- index instead of sorting its whole range.
CREATE INDEX IF NOT EXISTS audit_log_tenant_idx ON audit_log ((detail->>'tenant'), id);
DROP INDEX IF EXISTS audit_log_target_idx;
