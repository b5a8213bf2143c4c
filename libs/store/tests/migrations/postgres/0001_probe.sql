-- A tiny table for noema-store's own migration tests.
CREATE TABLE probe (
    id    BIGINT PRIMARY KEY,
    label TEXT NOT NULL
);
