//! The tokens [`Tokenizer::count`] reports are the ones an FTS5 table with the same
//! `tokenize` option stores: compared, for generated texts, with what the table's
//! `fts5vocab` instance table reads back after the text is indexed.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::collections::BTreeMap;

use noema_fts5::{TokenCounts, Tokenizer};
use proptest::prelude::*;
use sqlx::{Connection, SqliteConnection};

/// What an FTS5 table (the option search's index uses) stores for `text`.
async fn indexed(conn: &mut SqliteConnection, text: &str) -> TokenCounts {
    sqlx::query("INSERT INTO t (t) VALUES ('delete-all')")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("INSERT INTO t (rowid, body) VALUES (1, $1)")
        .bind(text)
        .execute(&mut *conn)
        .await
        .unwrap();
    let rows: Vec<(String, i64)> = sqlx::query_as("SELECT term, COUNT(*) FROM v GROUP BY term")
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    let tokens = rows.iter().map(|(_, n)| n).sum();
    TokenCounts {
        terms: rows.into_iter().collect::<BTreeMap<_, _>>(),
        tokens,
    }
}

async fn table() -> SqliteConnection {
    let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
    sqlx::query(
        "CREATE VIRTUAL TABLE t USING fts5(body, content = '', \
         tokenize = 'unicode61 remove_diacritics 2')",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

/// Texts of words in several scripts, digits, accents precomposed and combining,
/// punctuation, symbols, private-use and emoji, joined by separators.
fn text() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        "[a-zA-Z0-9_]{1,12}",
        "[À-ÿĀ-žΑ-ωА-я]{1,8}",
        "[一-龥ぁ-んア-ン]{1,4}",
        "[a-z][\u{0300}-\u{036f}][a-z]{0,3}",
        "[\u{e000}-\u{e0ff}\u{1f600}-\u{1f64f}€$%&@#]{1,3}",
    ];
    prop::collection::vec((word, "[ \t\n.,;:!?'\"()\\-/]{1,3}"), 0..24).prop_map(|parts| {
        parts
            .into_iter()
            .flat_map(|(word, separator)| [word, separator])
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn counts_what_an_fts5_index_stores(texts in prop::collection::vec(text(), 1..8)) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut tokenizer = Tokenizer::new("unicode61", &["remove_diacritics", "2"]).unwrap();
        runtime.block_on(async {
            let mut conn = table().await;
            for text in &texts {
                assert_eq!(tokenizer.count(text).unwrap(), indexed(&mut conn, text).await, "{text:?}");
            }
        });
    }
}

#[tokio::test]
async fn a_token_longer_than_fts5_keeps_is_cut_as_it_cuts_it() {
    let long = "a".repeat(noema_fts5::MAX_TOKEN_BYTES + 100);
    let text = format!("{long} b {long}");
    let mut tokenizer = Tokenizer::new("unicode61", &["remove_diacritics", "2"]).unwrap();
    let mut conn = table().await;
    let counts = tokenizer.count(&text).unwrap();
    assert_eq!(counts, indexed(&mut conn, &text).await);
    assert_eq!(
        counts.terms.get(&"a".repeat(noema_fts5::MAX_TOKEN_BYTES)),
        Some(&2)
    );
}
