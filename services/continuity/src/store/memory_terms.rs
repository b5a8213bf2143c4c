//! SQLite only: each indexed document's term counts (migration 0007), from which search
//! computes FTS5's `bm25()` relevance itself ([`crate::domain::bm25`]).
//!
//! FTS5 computes a document's `bm25()` by walking every occurrence of every query term in
//! it; a word most documents contain then costs its whole position list per query (tens of
//! milliseconds at 1,000 documents of 20 KB). The counts it needs are stored here instead,
//! written in the transaction that writes the document's FTS5 row, so they always describe
//! what `memory_fts` holds: per term and document the weighted frequency (path tokens 2,
//! body tokens 1, as search weighs them), per document its tokens, and the index's totals
//! (FTS5's statistics are table-wide). Search reads them through the tenant's in-memory
//! index ([`super::memory_postings`]): they decide which documents match single-token words.
//!
//! The tokens are FTS5's own, so no second tokenizer can disagree with the index: a whole
//! document is tokenized by a one-row contentless FTS5 table of the connection
//! (`temp.memory_tokenizer`, the index's tokenizer) and read back through its `fts5vocab`
//! instance table; an appended line alone by the same tokenizer called directly
//! ([`LineCounter`]), before the write reaches the writer. A document's counts are its
//! `memory_terms` rows plus the `terms` of its appended lines (migration 0010). A whole write that adds a line's counts to
//! the document's folds its lines' counts into `memory_terms` first ([`fold_lines`]); a whole
//! recount ([`replace`]) counts them with the content and clears them.

use noema_store::audit::AuditedTx;
use noema_store::sql::{Engine, query};

use crate::error::Error;

const TOKENIZER: &str = "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_tokenizer USING \
     fts5(path, body, content = '', tokenize = 'unicode61 remove_diacritics 2')";
const TOKENIZER_INSTANCES: &str = "CREATE VIRTUAL TABLE IF NOT EXISTS \
     temp.memory_tokenizer_instances USING fts5vocab(temp, memory_tokenizer, instance)";

/// Tokenizes `path` and `body` into the connection's tokenizer table (its only row); answers
/// how many tokens they have.
async fn tokenize<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    path: &str,
    body: &str,
) -> Result<i64, Error> {
    query(TOKENIZER).execute(tx.conn()).await?;
    query(TOKENIZER_INSTANCES).execute(tx.conn()).await?;
    query("INSERT INTO temp.memory_tokenizer (memory_tokenizer) VALUES ('delete-all')")
        .execute(tx.conn())
        .await?;
    query("INSERT INTO temp.memory_tokenizer (rowid, path, body) VALUES (1, $1, $2)")
        .bind(path)
        .bind(body)
        .execute(tx.conn())
        .await?;
    let (tokens,): (i64,) = query("SELECT COUNT(*) FROM temp.memory_tokenizer_instances")
        .fetch_one(tx.conn())
        .await?;
    Ok(tokens)
}

/// The tokenized text's terms with their weighted frequency (path tokens 2, body tokens 1).
async fn counted<D: Engine>(tx: &mut AuditedTx<'_, D>) -> Result<Vec<(String, i64)>, Error> {
    Ok(query(
        "SELECT term, SUM(CASE col WHEN 'path' THEN 2 ELSE 1 END) \
         FROM temp.memory_tokenizer_instances GROUP BY term",
    )
    .fetch_all(tx.conn())
    .await?)
}

/// Document `id`'s counts, replaced by those of `path` and `content` (its FTS5 row's);
/// answers them (terms and tokens) for the in-memory index.
pub(super) async fn replace<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    id: i64,
    path: &str,
    content: &str,
) -> Result<(Vec<(String, i64)>, i64), Error> {
    let tokens = tokenize(tx, path, content).await?;
    let terms = counted(tx).await?;
    remove(tx, id).await?;
    // The whole content's counts include its appended lines': none stays with its line.
    query("UPDATE memory_appends SET terms = NULL WHERE doc = $1 AND terms IS NOT NULL")
        .bind(id)
        .execute(tx.conn())
        .await?;
    query(
        "INSERT INTO memory_terms (doc, term, freq) SELECT $1, term, \
         SUM(CASE col WHEN 'path' THEN 2 ELSE 1 END) FROM temp.memory_tokenizer_instances \
         GROUP BY term",
    )
    .bind(id)
    .execute(tx.conn())
    .await?;
    query("INSERT INTO memory_term_documents (doc, tokens) VALUES ($1, $2)")
        .bind(id)
        .bind(tokens)
        .execute(tx.conn())
        .await?;
    query("UPDATE memory_term_totals SET documents = documents + 1, tokens = tokens + $1")
        .bind(tokens)
        .execute(tx.conn())
        .await?;
    Ok((terms, tokens))
}

/// An appended line's counts: its terms with their frequency, as `memory_appends.terms`
/// keeps them for a line appended as a row of its own (a JSON object, term → frequency) and
/// as search's in-memory index takes them, and its tokens. Such a line's counts stay with
/// it, not in `memory_terms`, so an append writes no page of its document's counts
/// (migration 0010).
#[derive(Debug, Clone)]
pub(super) struct CountedLine {
    pub json: String,
    pub terms: Vec<(String, i64)>,
    pub tokens: i64,
}

/// The index's `tokenize` option: the tokenizer of `memory_fts`, `memory_fts_lines` and
/// [`TOKENIZER`], and the one [`LineCounter`] calls.
const INDEX_TOKENIZER: &str = "unicode61";
const INDEX_TOKENIZER_ARGUMENTS: [&str; 2] = ["remove_diacritics", "2"];

/// Counts appended lines before the write reaches the group writer, by calling the index's
/// tokenizer directly ([`noema_fts5`]: FTS5's own, in the same SQLite library, configured as
/// the index's), so the serial path every write of the process waits on (the writer task and
/// its connection's thread) only stores the counts, and counting a line writes no table.
/// It runs on the caller's thread: a line takes microseconds.
#[derive(Debug, Default)]
pub(super) struct LineCounter {
    /// Tokenizers not in use: as many as lines were ever counted at once.
    idle: std::sync::Mutex<Vec<noema_fts5::Tokenizer>>,
}

impl LineCounter {
    /// `line`'s terms and tokens, counted as the index counts body text.
    pub fn count(&self, line: &str) -> Result<CountedLine, Error> {
        // A poisoned lock only loses the idle tokenizers: a new one is made.
        let idle = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut tokenizer = match idle {
            Some(tokenizer) => tokenizer,
            None => noema_fts5::Tokenizer::new(INDEX_TOKENIZER, &INDEX_TOKENIZER_ARGUMENTS)?,
        };
        let counted = tokenizer.count(line);
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(tokenizer);
        }
        let counted = counted?;
        let json = serde_json::to_string(&counted.terms)
            .map_err(|err| Error::Corrupt(format!("a line's term counts: {err}")))?;
        Ok(CountedLine {
            json,
            terms: counted.terms.into_iter().collect(),
            tokens: counted.tokens,
        })
    }
}

/// Adds the counts of document `id`'s kept lines into its `memory_terms` rows (before a whole
/// write folds the lines into its content and drops them).
pub(super) async fn fold_lines<D: Engine>(tx: &mut AuditedTx<'_, D>, id: i64) -> Result<(), Error> {
    query(
        "INSERT INTO memory_terms (doc, term, freq) SELECT $1, j.key, SUM(j.value) \
         FROM memory_appends a, json_each(a.terms) j WHERE a.doc = $1 AND a.terms IS NOT NULL \
         GROUP BY j.key ON CONFLICT (doc, term) DO UPDATE SET freq = freq + excluded.freq",
    )
    .bind(id)
    .execute(tx.conn())
    .await?;
    Ok(())
}

/// Document `id`'s counts, with those of its appended line (`counted`, body text) added;
/// answers the line's (terms and tokens) for the in-memory index.
pub(super) async fn append<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    id: i64,
    counted: &CountedLine,
) -> Result<(Vec<(String, i64)>, i64), Error> {
    query(
        "INSERT INTO memory_terms (doc, term, freq) SELECT $1, key, value FROM json_each($2) \
         WHERE true ON CONFLICT (doc, term) DO UPDATE SET freq = freq + excluded.freq; \
         UPDATE memory_term_documents SET tokens = tokens + $3 WHERE doc = $1; \
         UPDATE memory_term_totals SET tokens = tokens + $3",
    )
    .bind(id)
    .bind(counted.json.as_str())
    .bind(counted.tokens)
    .execute(tx.conn())
    .await?;
    Ok((counted.terms.clone(), counted.tokens))
}

/// Drops document `id`'s counts (when its FTS5 row is dropped).
pub(super) async fn remove<D: Engine>(tx: &mut AuditedTx<'_, D>, id: i64) -> Result<(), Error> {
    query("DELETE FROM memory_terms WHERE doc = $1")
        .bind(id)
        .execute(tx.conn())
        .await?;
    let old: Option<(i64,)> = query("SELECT tokens FROM memory_term_documents WHERE doc = $1")
        .bind(id)
        .fetch_optional(tx.conn())
        .await?;
    let Some((tokens,)) = old else {
        return Ok(());
    };
    query("DELETE FROM memory_term_documents WHERE doc = $1")
        .bind(id)
        .execute(tx.conn())
        .await?;
    query("UPDATE memory_term_totals SET documents = documents - 1, tokens = tokens - $1")
        .bind(tokens)
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// Recovery: documents with counts but no row in `memory_documents`.
pub(super) async fn orphans<D: Engine>(tx: &mut AuditedTx<'_, D>) -> Result<Vec<i64>, Error> {
    let rows: Vec<(i64,)> = query(
        "SELECT doc FROM memory_term_documents WHERE doc NOT IN (SELECT id FROM memory_documents) \
         UNION SELECT DISTINCT doc FROM memory_terms WHERE doc NOT IN \
         (SELECT id FROM memory_documents)",
    )
    .fetch_all(tx.conn())
    .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Recovery: the totals recounted from the documents' counts.
pub(super) async fn recount<D: Engine>(tx: &mut AuditedTx<'_, D>) -> Result<(), Error> {
    query(
        "UPDATE memory_term_totals SET \
         documents = (SELECT COUNT(*) FROM memory_term_documents), \
         tokens = (SELECT COALESCE(SUM(tokens), 0) FROM memory_term_documents)",
    )
    .execute(tx.conn())
    .await?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    /// The tokenizer a line is counted with is the one every index table names.
    #[test]
    fn lines_are_counted_with_the_index_tokenizer() {
        let option = format!(
            "tokenize = '{INDEX_TOKENIZER} {}'",
            INDEX_TOKENIZER_ARGUMENTS.join(" ")
        );
        assert!(TOKENIZER.contains(&option), "{TOKENIZER}");
        for migration in [
            include_str!("../../../../migrations/continuity/sqlite/0004_memory_search_tasks.sql"),
            include_str!("../../../../migrations/continuity/sqlite/0008_memory_appends.sql"),
        ] {
            assert!(
                migration.contains("fts5(") && migration.contains(&option),
                "{migration}"
            );
        }
    }

    #[test]
    fn a_line_counts_as_the_index_counts_it() {
        let counted = LineCounter::default()
            .count("Déjà vu, deja VU: 2 times")
            .unwrap();
        assert_eq!(counted.json, r#"{"2":1,"deja":2,"times":1,"vu":2}"#);
        assert_eq!(counted.tokens, 6);
    }
}
