//! SQLite: what continuity reads most, kept in memory between the writes that change it:
//! each listed tenant's subject pointers (a thousand rows are most of a list's cost), subject
//! rows with their active capsule (a capsule read is otherwise a query and a connection
//! check, each a round trip to SQLite's thread), and the tenant's tasks and pending schedule
//! items (every context retrieve reads both). This process is the only writer of its SQLite
//! file, and every change to those tables goes through the group writer, `touch_used`,
//! `task_write` or `schedule_write`, which tell this cache after they commit and before
//! their caller is answered. Postgres is shared by replicas: it is always read.
//!
//! A read that misses takes a ticket (its tenant's last change), reads the rows, and keeps
//! them only if the tenant did not change in between; a change that commits while it reads
//! drops whatever it kept. So a kept entry never predates a committed change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::reads::{Pointers, SubjectRow};
use super::tasks::TaskRow;
use crate::domain::schedule::Item;
use crate::domain::subject::SubjectKey;
use crate::error::Error;

/// Tenants whose pointers are kept at most: a bound on memory, not a working-set guess.
const MAX_TENANTS: usize = 256;
/// Bytes of subject rows kept at most (their capsules, mostly).
const SUBJECT_BYTES: u64 = 32 << 20;
/// What a kept row costs beside its capsule, roughly (its strings and the cache's entry).
const ROW_OVERHEAD: u64 = 256;

type RowKey = (String, SubjectKey);

/// A subject's row as read: `None` when the subject was never written.
pub(super) type KeptRow = Option<Arc<SubjectRow>>;

#[derive(Clone)]
struct RowWeight;

impl quick_cache::Weighter<RowKey, KeptRow> for RowWeight {
    fn weight(&self, _key: &RowKey, row: &KeptRow) -> u64 {
        let capsule = row
            .as_ref()
            .and_then(|r| r.active.as_ref())
            .map_or(0, |a| a.capsule.len());
        ROW_OVERHEAD + capsule as u64
    }
}

pub(super) struct ReadCache {
    state: Mutex<State>,
    /// Changed only under `state`'s lock; read without it (a hit is a row no change has
    /// dropped yet, so it is as fresh as the writes acknowledged so far).
    rows: quick_cache::sync::Cache<RowKey, KeptRow, RowWeight>,
}

impl std::fmt::Debug for ReadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadCache")
            .field("subject_rows", &self.rows.len())
            .finish_non_exhaustive()
    }
}

impl Default for ReadCache {
    fn default() -> Self {
        let estimated_rows = (SUBJECT_BYTES / (ROW_OVERHEAD + 2048)) as usize;
        ReadCache {
            state: Mutex::default(),
            rows: quick_cache::sync::Cache::with_weighter(estimated_rows, SUBJECT_BYTES, RowWeight),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Counts every change, so a ticket names one.
    changes: u64,
    tenants: HashMap<String, Entry>,
}

#[derive(Debug)]
pub(super) struct Entry {
    pointers: Option<Arc<[Pointers]>>,
    /// All the tenant's tasks, in the store's order.
    tasks: Option<Arc<[TaskRow]>>,
    /// The tenant's pending schedule items, in the store's order.
    pending_schedule: Option<Arc<[Item]>>,
    /// The change that last touched the tenant (or the count when the entry was made).
    changed: u64,
}

/// Where a tenant's entry keeps one of its whole tables.
pub(super) type Table<T> = fn(&mut Entry) -> &mut Option<Arc<[T]>>;
pub(super) const TASKS: Table<TaskRow> = |entry| &mut entry.tasks;
pub(super) const PENDING_SCHEDULE: Table<Item> = |entry| &mut entry.pending_schedule;

/// Proof of what a miss saw: keep what was read after it only if nothing changed since.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ticket(u64);

/// What a committed write changed of a tenant.
#[derive(Debug, Clone, Copy)]
pub(super) enum Change<'a> {
    /// The subject's pointers (and so its row) moved.
    Pointers(&'a SubjectKey),
    /// Only the subject's row changed (its `used_at`).
    Row(&'a SubjectKey),
    /// A task of the tenant.
    Tasks,
    /// A schedule item of the tenant.
    Schedule,
}

/// Tells the cache of a change when dropped: a write holds one while it runs, so a failed
/// write, which may have committed all the same, drops what it may have changed too.
pub(super) struct ChangeOnDrop<'a> {
    pub cache: &'a ReadCache,
    pub tenant: &'a str,
    pub change: Change<'a>,
}

impl Drop for ChangeOnDrop<'_> {
    fn drop(&mut self) {
        self.cache.changed([(self.tenant, self.change)]);
    }
}

impl ReadCache {
    /// The tenant's kept pointers, or the ticket to keep the ones about to be read.
    pub fn pointers(&self, tenant: &str) -> Result<Arc<[Pointers]>, Ticket> {
        let mut state = self.lock();
        let entry = state.entry(tenant);
        match &entry.pointers {
            Some(pointers) => Ok(Arc::clone(pointers)),
            None => Err(Ticket(entry.changed)),
        }
    }

    /// Keeps `pointers`, read after `ticket` was taken, unless the tenant changed since.
    pub fn keep_pointers(&self, tenant: &str, ticket: Ticket, pointers: Arc<[Pointers]>) {
        let mut state = self.lock();
        if let Some(entry) = state.unchanged_since(tenant, ticket) {
            entry.pointers = Some(pointers);
        }
    }

    /// The tenant's whole `table` as kept, else as `read` reads it, kept unless the tenant
    /// changed while it was read.
    pub async fn table<T: Clone>(
        &self,
        tenant: &str,
        table: Table<T>,
        read: impl Future<Output = Result<Vec<T>, Error>>,
    ) -> Result<Vec<T>, Error> {
        let ticket = {
            let mut state = self.lock();
            let entry = state.entry(tenant);
            if let Some(kept) = table(entry) {
                return Ok(kept.to_vec());
            }
            Ticket(entry.changed)
        };
        let rows = read.await?;
        if let Some(entry) = self.lock().unchanged_since(tenant, ticket) {
            *table(entry) = Some(rows.as_slice().into());
        }
        Ok(rows)
    }

    /// The subject's kept row, or the ticket to keep the one about to be read.
    pub fn subject(&self, tenant: &str, subject: &SubjectKey) -> Result<KeptRow, Ticket> {
        let key = (tenant.to_owned(), subject.clone());
        if let Some(row) = self.rows.get(&key) {
            return Ok(row);
        }
        let mut state = self.lock();
        // Looked up again under the lock: a row kept since the first look is as good.
        if let Some(row) = self.rows.get(&key) {
            return Ok(row);
        }
        Err(Ticket(state.entry(tenant).changed))
    }

    /// Keeps `row`, read after `ticket` was taken, unless the tenant changed since.
    pub fn keep_subject(&self, tenant: &str, subject: &SubjectKey, ticket: Ticket, row: KeptRow) {
        let mut state = self.lock();
        if state.unchanged_since(tenant, ticket).is_some() {
            self.rows.insert((tenant.to_owned(), subject.clone()), row);
        }
    }

    /// A commit changed these subjects: their kept rows, and the kept pointers of tenants
    /// whose pointers moved, are gone; reads that missed before it keep nothing.
    pub fn changed<'a>(&self, changes: impl IntoIterator<Item = (&'a str, Change<'a>)>) {
        let mut state = self.lock();
        for (tenant, change) in changes {
            state.changes += 1;
            let changes = state.changes;
            if let Change::Pointers(subject) | Change::Row(subject) = change {
                self.rows.remove(&(tenant.to_owned(), subject.clone()));
            }
            if let Some(entry) = state.tenants.get_mut(tenant) {
                entry.changed = changes;
                match change {
                    Change::Pointers(_) => entry.pointers = None,
                    Change::Row(_) => {}
                    Change::Tasks => entry.tasks = None,
                    Change::Schedule => entry.pending_schedule = None,
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// The tenant's entry, made if missing. A new entry starts at the count, past every
    /// change before it; past [`MAX_TENANTS`] every entry is dropped first, and with it every
    /// ticket taken from one (a ticket whose entry is gone keeps nothing).
    fn entry(&mut self, tenant: &str) -> &mut Entry {
        if self.tenants.len() >= MAX_TENANTS && !self.tenants.contains_key(tenant) {
            self.tenants.clear();
        }
        let changes = self.changes;
        self.tenants.entry(tenant.to_owned()).or_insert(Entry {
            pointers: None,
            tasks: None,
            pending_schedule: None,
            changed: changes,
        })
    }

    fn unchanged_since(&mut self, tenant: &str, ticket: Ticket) -> Option<&mut Entry> {
        self.tenants
            .get_mut(tenant)
            .filter(|entry| entry.changed == ticket.0)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::model::SubjectKind;

    fn subject(key: &str) -> SubjectKey {
        SubjectKey::new(SubjectKind::User, key).unwrap()
    }

    fn pointers(key: &str) -> Arc<[Pointers]> {
        Arc::from(vec![Pointers {
            subject_kind: "user".into(),
            subject_key: key.into(),
            active: Some((1, format!("sha256:{key}"))),
            fallback: None,
        }])
    }

    fn row(key: &str, version: i64) -> KeptRow {
        Some(Arc::new(SubjectRow {
            subject_kind: "user".into(),
            subject_key: key.into(),
            subject_id: key.into(),
            version,
            head_sequence: version,
            head_revision: format!("sha256:{key}-{version}"),
            active: None,
            active_revision: None,
            fallback: None,
            used_at: 0,
        }))
    }

    fn moved<'a>(tenant: &'a str, subject: &'a SubjectKey) -> [(&'a str, Change<'a>); 1] {
        [(tenant, Change::Pointers(subject))]
    }

    #[test]
    fn a_read_overtaken_by_a_change_is_not_kept() {
        let cache = ReadCache::default();
        let a = subject("a");
        let Err(ticket) = cache.pointers("t") else {
            panic!("an empty cache answered")
        };
        cache.changed(moved("t", &a));
        cache.keep_pointers("t", ticket, pointers("old"));
        let Err(ticket) = cache.pointers("t") else {
            panic!("rows read before a change were kept")
        };
        cache.keep_pointers("t", ticket, pointers("new"));
        assert_eq!(cache.pointers("t").ok(), Some(pointers("new")));
    }

    #[test]
    fn a_change_drops_only_its_tenants_pointers() {
        let cache = ReadCache::default();
        for tenant in ["a", "b"] {
            let ticket = cache.pointers(tenant).unwrap_err();
            cache.keep_pointers(tenant, ticket, pointers(tenant));
        }
        cache.changed(moved("a", &subject("x")));
        assert!(cache.pointers("a").is_err());
        assert_eq!(cache.pointers("b").ok(), Some(pointers("b")));
    }

    #[test]
    fn a_tenant_evicted_while_read_is_not_kept_stale() {
        let cache = ReadCache::default();
        let ticket = cache.pointers("t").unwrap_err();
        let row_ticket = cache.subject("t", &subject("s")).unwrap_err();
        // Fill past the bound: every entry, "t"'s too, is dropped.
        for n in 0..=MAX_TENANTS {
            let tenant = format!("other-{n}");
            let t = cache.pointers(&tenant).unwrap_err();
            cache.keep_pointers(&tenant, t, pointers(&tenant));
        }
        cache.changed(moved("t", &subject("s")));
        cache.keep_pointers("t", ticket, pointers("stale"));
        cache.keep_subject("t", &subject("s"), row_ticket, row("stale", 1));
        assert!(cache.pointers("t").is_err());
        assert!(cache.subject("t", &subject("s")).is_err());
    }

    #[test]
    fn a_subject_row_is_kept_until_its_subject_changes() {
        let cache = ReadCache::default();
        let (a, b) = (subject("a"), subject("b"));
        for s in [&a, &b] {
            let ticket = cache.subject("t", s).unwrap_err();
            cache.keep_subject("t", s, ticket, row(&s.key, 1));
        }
        let absent = subject("never-written");
        let ticket = cache.subject("t", &absent).unwrap_err();
        cache.keep_subject("t", &absent, ticket, None);
        assert_eq!(cache.subject("t", &absent).ok(), Some(None));

        cache.changed([("t", Change::Row(&a))]);
        assert!(cache.subject("t", &a).is_err(), "a changed row was kept");
        assert_eq!(cache.subject("t", &b).ok(), Some(row("b", 1)));
        cache.changed(moved("t", &absent));
        assert!(
            cache.subject("t", &absent).is_err(),
            "a written subject still read as absent"
        );
    }

    #[test]
    fn a_row_read_while_its_tenant_changed_is_not_kept() {
        let cache = ReadCache::default();
        let (a, b) = (subject("a"), subject("b"));
        let ticket = cache.subject("t", &a).unwrap_err();
        // Another subject of the tenant changes while `a` is read: what `a`'s read saw may
        // predate a change to `a` too, as far as the cache can tell.
        cache.changed(moved("t", &b));
        cache.keep_subject("t", &a, ticket, row("a", 1));
        assert!(cache.subject("t", &a).is_err());
        // A row changing only its `used_at` keeps the tenant's pointers.
        let ticket = cache.pointers("t").unwrap_err();
        cache.keep_pointers("t", ticket, pointers("t"));
        cache.changed([("t", Change::Row(&a))]);
        assert_eq!(cache.pointers("t").ok(), Some(pointers("t")));
    }

    #[test]
    fn kept_rows_are_bounded_by_their_capsules_bytes() {
        let cache = ReadCache::default();
        let big = vec![b'x'; 1 << 20];
        for n in 0..64 {
            let s = subject(&format!("s{n}"));
            let ticket = cache.subject("t", &s).unwrap_err();
            let mut kept = SubjectRow::clone(row(&s.key, 1).as_deref().unwrap());
            kept.active = Some(super::super::reads::CapsuleRevision {
                sequence: 1,
                revision_id: format!("sha256:{n}"),
                capsule: big.clone(),
            });
            cache.keep_subject("t", &s, ticket, Some(Arc::new(kept)));
        }
        assert!(cache.rows.weight() <= SUBJECT_BYTES);
        assert!(cache.rows.len() < 64);
    }
}
