-- Visits counted per name.
CREATE TABLE visits (
    name TEXT PRIMARY KEY,
    count BIGINT NOT NULL
);
