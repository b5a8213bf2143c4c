-- Visits counted per name.
CREATE TABLE visits (
    name TEXT PRIMARY KEY NOT NULL,
    count INTEGER NOT NULL
);
