//! SQLite's relevance of a search hit, computed from stored term counts: FTS5's `bm25()`
//! formula (k1 = 1.2, b = 0.75; path tokens weighed 2, body tokens 1) in the same
//! floating-point operations, so a hit's relevance is the very number
//! `-bm25(memory_fts, 0.0, 2.0, 1.0)` gives, without FTS5 walking every occurrence of every
//! query word in every matching document. [`Weights::relevance`] is the formula; the store
//! evaluates it on each candidate of its in-memory index. The statistics are the tenant's,
//! so in a store of one tenant the relevance is FTS5's exactly.

pub const K1: f64 = 1.2;
pub const B: f64 = 0.75;
/// `k1 + 1`, as FTS5 computes it.
pub const K1_PLUS_1: f64 = K1 + 1.0;
/// `1 - b`, as FTS5 computes it.
pub const ONE_MINUS_B: f64 = 1.0 - B;

/// The counts a query's relevances depend on: a tenant's documents in the index (FTS5's
/// own are table-wide, over every tenant's documents).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexTotals {
    /// Documents in the index.
    pub documents: i64,
    /// Tokens of all of them (path and body).
    pub tokens: i64,
}

/// A query's per-term weights: each term's inverse document frequency, as FTS5 sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    /// Each term's inverse document frequency.
    pub idf: Vec<f64>,
    /// The index's average document length in tokens.
    pub avgdl: f64,
}

impl Weights {
    /// `with_term[i]`: how many documents of the whole index contain term `i`.
    #[allow(clippy::cast_precision_loss)]
    pub fn new(totals: IndexTotals, with_term: &[i64]) -> Weights {
        let rows = totals.documents;
        let idf = with_term
            .iter()
            .map(|&hits| {
                let idf = (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
                // (NaN only from counts no index holds: ranked as the commonest term.)
                if idf <= 0.0 || idf.is_nan() {
                    1e-6
                } else {
                    idf
                }
            })
            .collect();
        // An empty index matches nothing; its average only has to be a number.
        let avgdl = if rows > 0 {
            totals.tokens as f64 / rows as f64
        } else {
            1.0
        };
        Weights { idf, avgdl }
    }

    /// The relevance (higher is better) of a document of `tokens` tokens in which term `i`
    /// occurs with weighted frequency `freq[i]` (0 when absent).
    #[allow(clippy::cast_precision_loss)]
    pub fn relevance(&self, freq: &[f64], tokens: i64) -> f64 {
        let d = tokens as f64;
        let mut score = 0.0;
        for (idf, &f) in self.idf.iter().zip(freq) {
            score += idf * ((f * K1_PLUS_1) / (f + K1 * (ONE_MINUS_B + B * d / self.avgdl)));
        }
        // FTS5 answers `-1.0 * score`; the relevance, its negation, is `score` exactly.
        score
    }
}

/// Whether FTS5's tokenizer (`unicode61`) reads `term` (a query term: ASCII letters, digits,
/// `_` and `-`, lowercased) as the one token `term` itself; `x-ray` and `foo_bar` are phrases
/// of two tokens.
pub fn single_token(term: &str) -> bool {
    !term.is_empty()
        && term
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// Whether FTS5 reads `before` followed by `after` as the tokens of each apart: true when
/// either side of the seam is an ASCII character that separates tokens.
pub fn separate_at_seam(before: &str, after: &str) -> bool {
    let separates = |c: Option<char>| c.is_none_or(|c| c.is_ascii() && !c.is_ascii_alphanumeric());
    separates(before.chars().next_back()) || separates(after.chars().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relevance_follows_fts5s_formula() {
        let totals = IndexTotals {
            documents: 4,
            tokens: 40,
        };
        // A term in one document of four: idf = ln(3.5 / 1.5).
        let w = Weights::new(totals, &[1]);
        let idf = (3.5f64 / 1.5).ln();
        let expected = idf * (2.0 * 2.2) / (2.0 + 1.2 * (0.25 + 0.75 * 10.0 / 10.0));
        assert_eq!(w.relevance(&[2.0], 10), expected);
        // Absent: nothing.
        assert_eq!(w.relevance(&[0.0], 10), 0.0);
        // A term in most documents weighs 1e-6, as FTS5 floors it.
        let common = Weights::new(totals, &[3]);
        let floor = 1e-6 * (1.0 * 2.2) / (1.0 + 1.2 * (0.25 + 0.75 * 10.0 / 10.0));
        assert_eq!(common.relevance(&[1.0], 10), floor);
    }

    #[test]
    fn tokens_and_seams() {
        assert!(single_token("whales"));
        assert!(single_token("2026"));
        assert!(!single_token("x-ray"));
        assert!(!single_token("foo_bar"));
        assert!(separate_at_seam("a\n", "b"));
        assert!(separate_at_seam("", "b"));
        assert!(separate_at_seam("#ab", "{\"x\": 1}"));
        assert!(!separate_at_seam("ab", "5\n"));
        assert!(!separate_at_seam("é", "b"));
    }
}
