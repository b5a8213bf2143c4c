-- A tiny table for noema-store's own migration tests.
CREATE TABLE probe (
    id    INTEGER PRIMARY KEY,
    label TEXT NOT NULL
);
