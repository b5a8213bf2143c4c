-- Appends that do not rewrite their document (store/memory.rs).
--
-- A document's content is `memory_documents.content` (as last written whole) followed by its
-- appended lines, in id order. An append adds one row here and adds its line's terms to the
-- document's `memory_search` vector, so it never sends or re-parses the whole document; a
-- whole write folds the lines back into `content`.
CREATE TABLE IF NOT EXISTS memory_appends (
    id   BIGSERIAL PRIMARY KEY,
    doc  BIGINT    NOT NULL,
    line TEXT      NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_appends_doc_idx ON memory_appends (doc, id);
