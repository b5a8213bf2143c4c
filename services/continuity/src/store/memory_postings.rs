//! SQLite only: search's in-memory index, per tenant, built from the stored term counts
//! (`memory_terms`, `memory_term_documents`: migrations 0007 and 0010, tokenized by FTS5's own
//! tokenizer), which stay the truth.
//!
//! A search whose words are single tokens reads no SQL at all: the tenant's postings decide which documents match (any of the words, as the FTS5 query
//! `"a" OR "b"` does), the filters (time window, types, namespaces) are applied to those
//! candidates, and each is ranked with FTS5's `bm25()` formula ([`Weights`]) from the
//! tenant's own statistics (its document count, average length and document frequencies),
//! so one tenant's documents never move another's scores. In a store of one tenant the
//! relevances are bit for bit FTS5's. The columns a hit shows are held with each document
//! (they follow its content in `memory_documents`, past overflow pages).
//!
//! A tenant's index is loaded on its first search with the SQLite write gate held (no
//! commit can land meanwhile) and changed only after a group's commit, by the writer, under
//! the same gate: it never shows a write that did not commit. A rebuild drops it; the next
//! search loads it again.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use sqlx::SqlitePool;

use super::memory::{HitQuery, HitRow};
use crate::domain::bm25::{IndexTotals, Weights};
use crate::error::Error;

/// What a committed memory write changed in its tenant's index.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexChange {
    pub tenant: String,
    /// The document's id (`memory_documents.id`).
    pub doc: i64,
    /// What search shows of it after the write.
    pub row: HitRow,
    /// Weighted frequency of each term of the counted text, and its token count.
    pub terms: Vec<(String, i64)>,
    pub tokens: i64,
    /// Whether the counts are added to the document's (an append) or replace them.
    pub added: bool,
}

/// One document of a tenant's index: what ranking and the filters read.
#[derive(Debug)]
struct Doc {
    tokens: i64,
    /// The ids of the terms it contains, so a rewrite can take it out of their postings.
    terms: Vec<u32>,
    /// Its type lowercased (as SQLite's `lower()` does: ASCII only), for the type filter.
    type_key: Box<str>,
    /// What a hit shows (relevance 0).
    row: HitRow,
}

/// A tenant's postings: per term, `(document slot, weighted frequency)` by slot.
#[derive(Debug, Default)]
struct Postings {
    term_ids: HashMap<Box<str>, u32>,
    postings: Vec<Vec<(u32, u32)>>,
    slots: HashMap<i64, u32>,
    docs: Vec<Doc>,
    tokens: i64,
}

/// A candidate's rank: relevance plus importance (best first), then path.
struct Ranked {
    slot: u32,
    relevance: f64,
    key: f64,
}

impl Postings {
    fn term_id(&mut self, term: &str) -> u32 {
        if let Some(&id) = self.term_ids.get(term) {
            return id;
        }
        let id = u32::try_from(self.postings.len()).unwrap_or(u32::MAX);
        self.term_ids.insert(term.into(), id);
        self.postings.push(Vec::new());
        id
    }

    /// Adds `freq` to document `slot`'s frequency of `term`; answers whether the document
    /// did not contain it yet.
    fn add(&mut self, term: u32, slot: u32, freq: i64) -> bool {
        let Some(list) = self.postings.get_mut(term as usize) else {
            return false;
        };
        let freq = u32::try_from(freq).unwrap_or(u32::MAX);
        match list.binary_search_by_key(&slot, |&(s, _)| s) {
            Ok(i) => {
                list[i].1 = list[i].1.saturating_add(freq);
                false
            }
            Err(i) => {
                list.insert(i, (slot, freq));
                true
            }
        }
    }

    fn apply(&mut self, change: &IndexChange) {
        let slot = match self.slots.get(&change.doc) {
            Some(&slot) => slot,
            None => {
                let slot = u32::try_from(self.docs.len()).unwrap_or(u32::MAX);
                self.slots.insert(change.doc, slot);
                self.docs.push(Doc {
                    tokens: 0,
                    terms: Vec::new(),
                    type_key: "".into(),
                    row: change.row.clone(),
                });
                slot
            }
        };
        if !change.added {
            let old = std::mem::take(&mut self.docs[slot as usize].terms);
            for term in old {
                if let Some(list) = self.postings.get_mut(term as usize)
                    && let Ok(i) = list.binary_search_by_key(&slot, |&(s, _)| s)
                {
                    list.remove(i);
                }
            }
            self.tokens -= self.docs[slot as usize].tokens;
            self.docs[slot as usize].tokens = 0;
        }
        let mut new_terms = Vec::new();
        for (term, freq) in &change.terms {
            let id = self.term_id(term);
            if self.add(id, slot, *freq) {
                new_terms.push(id);
            }
        }
        self.tokens += change.tokens;
        let doc = &mut self.docs[slot as usize];
        doc.terms.extend(new_terms);
        doc.tokens += change.tokens;
        doc.type_key = change.row.doc_type.to_ascii_lowercase().into();
        doc.row = HitRow {
            relevance: 0.0,
            ..change.row.clone()
        };
    }

    /// Whether document `doc` passes `q`'s time window, types and namespaces.
    fn passes(doc: &Doc, q: &HitQuery) -> bool {
        if q.since_micros
            .is_some_and(|since| doc.row.modified_micros < since)
        {
            return false;
        }
        if !q.types.is_empty() && !q.types.iter().any(|t| **t == *doc.type_key) {
            return false;
        }
        match &q.namespaces {
            None => true,
            Some(namespaces) => namespaces.iter().any(|ns| {
                let root = ns.trim_end_matches('/');
                doc.row.path == **ns
                    || doc
                        .row
                        .path
                        .strip_prefix(root)
                        .is_some_and(|rest| rest.starts_with('/'))
            }),
        }
    }

    /// The best `q.limit` matches of `q.terms`, in hit order.
    fn search(&self, q: &HitQuery) -> Vec<HitRow> {
        let lists: Vec<&[(u32, u32)]> = q
            .terms
            .iter()
            .map(|t| {
                self.term_ids
                    .get(t.as_str())
                    .and_then(|&id| self.postings.get(id as usize))
                    .map_or(&[][..], Vec::as_slice)
            })
            .collect();
        let with_term: Vec<i64> = lists
            .iter()
            .map(|l| i64::try_from(l.len()).unwrap_or(i64::MAX))
            .collect();
        let weights = Weights::new(
            IndexTotals {
                documents: i64::try_from(self.docs.len()).unwrap_or(i64::MAX),
                tokens: self.tokens,
            },
            &with_term,
        );
        let mut slots: Vec<u32> = lists
            .iter()
            .flat_map(|l| l.iter().map(|&(s, _)| s))
            .collect();
        slots.sort_unstable();
        slots.dedup();
        let mut freq = vec![0.0; lists.len()];
        let mut ranked: Vec<Ranked> = Vec::with_capacity(slots.len());
        for slot in slots {
            let Some(doc) = self.docs.get(slot as usize) else {
                continue;
            };
            if !Self::passes(doc, q) {
                continue;
            }
            for (f, list) in freq.iter_mut().zip(&lists) {
                *f = list
                    .binary_search_by_key(&slot, |&(s, _)| s)
                    .map_or(0.0, |i| f64::from(list[i].1));
            }
            let relevance = weights.relevance(&freq, doc.tokens);
            ranked.push(Ranked {
                slot,
                relevance,
                key: relevance + doc.row.importance.unwrap_or(0.0),
            });
        }
        let doc = |r: &Ranked| &self.docs[r.slot as usize];
        if q.by_recency {
            ranked.sort_unstable_by(|a, b| {
                doc(b)
                    .row
                    .modified_micros
                    .cmp(&doc(a).row.modified_micros)
                    .then_with(|| doc(a).row.path.cmp(&doc(b).row.path))
            });
        } else {
            ranked.sort_unstable_by(|a, b| {
                b.key
                    .total_cmp(&a.key)
                    .then_with(|| doc(a).row.path.cmp(&doc(b).row.path))
            });
        }
        // SQLite reads a negative LIMIT as none.
        if let Ok(limit) = usize::try_from(q.limit) {
            ranked.truncate(limit);
        }
        ranked
            .iter()
            .map(|r| HitRow {
                relevance: r.relevance,
                ..doc(r).row.clone()
            })
            .collect()
    }
}

/// A document as loaded: its id, its tokens and what a hit shows.
#[derive(sqlx::FromRow)]
struct LoadedDoc {
    id: i64,
    tokens: i64,
    #[sqlx(flatten)]
    row: HitRow,
}

/// The loaded tenants' indexes of one store.
#[derive(Debug, Default)]
pub struct MemoryPostings {
    tenants: RwLock<HashMap<String, Arc<RwLock<Postings>>>>,
}

impl MemoryPostings {
    fn tenant(&self, tenant: &str) -> Option<Arc<RwLock<Postings>>> {
        self.tenants
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tenant)
            .cloned()
    }

    /// Whether `tenant`'s index is loaded.
    pub fn loaded(&self, tenant: &str) -> bool {
        self.tenant(tenant).is_some()
    }

    /// The best matches of `q` in `tenant`'s loaded index (`None`: not loaded).
    pub fn search(&self, tenant: &str, q: &HitQuery) -> Option<Vec<HitRow>> {
        let index = self.tenant(tenant)?;
        let index = index.read().unwrap_or_else(PoisonError::into_inner);
        Some(index.search(q))
    }

    /// Applies committed changes to the loaded tenants' indexes (the others load them).
    pub fn apply(&self, changes: &[IndexChange]) {
        for change in changes {
            if let Some(index) = self.tenant(&change.tenant) {
                index
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .apply(change);
            }
        }
    }

    /// Forgets `tenant`'s index (after a rebuild); its next search loads it again.
    pub fn drop_tenant(&self, tenant: &str) {
        self.tenants
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(tenant);
    }

    /// Loads `tenant`'s index from the stored counts. The caller holds the SQLite write
    /// gate, so no commit lands between the reads and the index's first change.
    pub async fn load(&self, pool: &SqlitePool, tenant: &str) -> Result<(), Error> {
        if self.loaded(tenant) {
            return Ok(());
        }
        let mut tx = pool.begin().await?;
        let docs: Vec<LoadedDoc> = sqlx::query_as(
            "SELECT d.id, n.tokens, d.path, d.doc_type, d.size, d.modified_at, \
             d.modified_micros, d.snippet, d.tags, d.importance, 0.0 AS relevance \
             FROM memory_documents d JOIN memory_term_documents n ON n.doc = d.id \
             WHERE d.tenant = $1 ORDER BY d.id",
        )
        .bind(tenant)
        .fetch_all(&mut *tx)
        .await?;
        let mut index = Postings::default();
        for LoadedDoc { id, tokens, row } in docs {
            let slot = u32::try_from(index.docs.len()).unwrap_or(u32::MAX);
            index.slots.insert(id, slot);
            index.tokens += tokens;
            index.docs.push(Doc {
                tokens,
                terms: Vec::new(),
                type_key: row.doc_type.to_ascii_lowercase().into(),
                row,
            });
        }
        let mut terms: Vec<(i64, String, i64)> = sqlx::query_as(
            "SELECT t.doc, t.term, t.freq FROM memory_documents d \
             JOIN memory_terms t ON t.doc = d.id \
             WHERE d.tenant = $1 ORDER BY d.id",
        )
        .bind(tenant)
        .fetch_all(&mut *tx)
        .await?;
        // The counts of lines appended as rows of their own (migration 0010).
        let lines: Vec<(i64, String, i64)> = sqlx::query_as(
            "SELECT a.doc, j.key, j.value FROM memory_documents d \
             JOIN memory_appends a ON a.doc = d.id JOIN json_each(a.terms) j \
             WHERE d.tenant = $1 AND a.terms IS NOT NULL",
        )
        .bind(tenant)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        // By document, so each term's postings are built in slot order.
        terms.extend(lines);
        terms.sort_by_key(|(doc, _, _)| *doc);
        for (doc, term, freq) in terms {
            let Some(&slot) = index.slots.get(&doc) else {
                continue;
            };
            let id = index.term_id(&term);
            if index.add(id, slot, freq) {
                index.docs[slot as usize].terms.push(id);
            }
        }
        self.tenants
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tenant.to_owned(), Arc::new(RwLock::new(index)));
        Ok(())
    }
}
