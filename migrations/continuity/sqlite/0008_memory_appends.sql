-- Appends that do not rewrite their document (store/memory.rs).
--
-- A document's content is `memory_documents.content` (as last written whole) followed by its
-- appended lines, in id order. An append adds one row here and one `memory_fts_lines` row
-- (rowid = memory_appends.id) for its line, so its cost does not grow with the document; a
-- whole write folds the lines back into `content`. Search's term counts (memory_terms) are
-- the whole document's, as before.
CREATE TABLE IF NOT EXISTS memory_appends (
    id   INTEGER PRIMARY KEY,
    doc  INTEGER NOT NULL,
    line TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_appends_doc_idx ON memory_appends (doc, id);

CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts_lines USING fts5(
    body,
    tokenize = 'unicode61 remove_diacritics 2'
);
