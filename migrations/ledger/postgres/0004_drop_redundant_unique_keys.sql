-- Two UNIQUE constraints that no row could ever break, each costing every write an index
-- insert on a random page:
--   canonical_objects.storage_path is canonical/{type}/{yyyy}/{mm}/{dd}/{id}.json, checked
--     on every write, so it is unique because the primary key id is;
--   audit_log.hash is the hash of the row's own fields, its primary key id among them.
ALTER TABLE canonical_objects DROP CONSTRAINT IF EXISTS canonical_objects_storage_path_key;
ALTER TABLE audit_log DROP CONSTRAINT IF EXISTS audit_log_hash_key;
