-- Search's term counts written where each write lands (store/memory_terms.rs).
--
-- Nothing reads the counts by term: search keeps them in memory per tenant, loaded by
-- document. Keyed by (term, doc), a write's terms landed on leaf pages spread over the whole
-- table, plus as many of the separate index by document: under `noema bench context`'s
-- appends they were about 225 of the ~295 pages each group commit wrote to the WAL. Keyed by
-- (doc, term), a document's counts are one run of neighbouring pages, and the key serves the
-- lookups by document itself.
CREATE TABLE memory_terms_by_doc (
    doc  INTEGER NOT NULL,
    term TEXT    NOT NULL,
    freq INTEGER NOT NULL,
    PRIMARY KEY (doc, term)
) WITHOUT ROWID;
INSERT INTO memory_terms_by_doc (doc, term, freq) SELECT doc, term, freq FROM memory_terms;
DROP TABLE memory_terms;
ALTER TABLE memory_terms_by_doc RENAME TO memory_terms;

-- An appended line's counts stay with its line (a JSON object, term → weighted frequency)
-- instead of being added into `memory_terms`, whose pages a growing document spreads over:
-- a document's counts are its `memory_terms` rows plus its lines' `terms`, and a whole write
-- that folds the lines adds their counts back into `memory_terms`. NULL for a line appended
-- before this migration, whose counts `memory_terms` already holds.
ALTER TABLE memory_appends ADD COLUMN terms TEXT;
