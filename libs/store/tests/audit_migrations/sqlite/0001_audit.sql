-- A service's audit log (as every service's migrations create it) and one table to write.
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY,
    occurred_at TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    target_id   TEXT,
    target_type TEXT,
    detail      TEXT,
    prev_hash   TEXT    NOT NULL,
    hash        TEXT    NOT NULL UNIQUE
);
CREATE TABLE audit_head (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    last_id   INTEGER NOT NULL,
    last_hash TEXT    NOT NULL
);
INSERT INTO audit_head (id, last_id, last_hash) VALUES (1, 0, '');
CREATE TABLE notes (
    id   TEXT    PRIMARY KEY,
    body TEXT    NOT NULL,
    n    INTEGER NOT NULL
);
