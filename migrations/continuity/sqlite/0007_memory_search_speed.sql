-- Search speed (store/memory.rs, store/memory_terms.rs).
--
-- A search ranks every full-text match before its LIMIT: the columns the filters and the
-- order need are read from this covering index by document id, so a match never reads its
-- document's row (whose content spans overflow pages at a few kilobytes).
CREATE INDEX IF NOT EXISTS memory_documents_rank_idx
    ON memory_documents (id, tenant, importance, path, doc_type, modified_micros);

-- The counts FTS5's bm25() reads, kept per document so search computes a match's relevance
-- without FTS5 walking every occurrence of the query's words: per term and document the
-- weighted frequency (path tokens 2, body tokens 1), per document its tokens, and the
-- index's totals (FTS5's statistics are table-wide). Written with each `memory_fts` row.
CREATE TABLE IF NOT EXISTS memory_terms (
    term TEXT    NOT NULL,
    doc  INTEGER NOT NULL,
    freq INTEGER NOT NULL,
    PRIMARY KEY (term, doc)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS memory_terms_doc_idx ON memory_terms (doc);

CREATE TABLE IF NOT EXISTS memory_term_documents (
    doc    INTEGER PRIMARY KEY,
    tokens INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS memory_term_totals (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    documents INTEGER NOT NULL,
    tokens    INTEGER NOT NULL
);

-- The counts of the rows already indexed, read from the index itself.
CREATE VIRTUAL TABLE temp.memory_fts_instances USING fts5vocab(main, memory_fts, instance);
INSERT INTO memory_terms (term, doc, freq)
    SELECT term, doc, SUM(CASE col WHEN 'path' THEN 2 ELSE 1 END)
    FROM temp.memory_fts_instances GROUP BY term, doc;
INSERT INTO memory_term_documents (doc, tokens)
    SELECT doc, COUNT(*) FROM temp.memory_fts_instances GROUP BY doc;
INSERT INTO memory_term_totals (id, documents, tokens)
    SELECT 1, COUNT(*), COALESCE(SUM(tokens), 0) FROM memory_term_documents;
DROP TABLE temp.memory_fts_instances;
