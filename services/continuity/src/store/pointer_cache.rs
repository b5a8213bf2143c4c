//! SQLite: each listed tenant's subject pointers in memory. A list reads every pointer row
//! of its tenant (a thousand rows is most of a list's cost), and they change only when a
//! capsule, archive or delete write of that tenant commits. This process is the only
//! writer of its SQLite file, and every write goes through the group writer, which drops
//! a tenant's entry after a commit that moved its pointers, before the writers are
//! answered. Postgres is shared by replicas: it is always read.
//!
//! A list that misses takes a ticket (the tenant's last change), reads the rows, and keeps
//! them only if no change came in between; a change that commits while it reads clears
//! whatever it kept. So a kept entry never predates a committed change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::reads::Pointers;

/// Tenants whose pointers are kept at most: a bound on memory, not a working-set guess.
const MAX_TENANTS: usize = 256;

#[derive(Debug, Default)]
pub(super) struct PointerCache {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Counts every change, so a ticket names one.
    changes: u64,
    tenants: HashMap<String, Entry>,
}

#[derive(Debug)]
struct Entry {
    pointers: Option<Arc<[Pointers]>>,
    /// The change that last touched the tenant (or the count when the entry was made).
    changed: u64,
}

/// Proof of what a miss saw: keep the rows read after it only if nothing changed since.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ticket(u64);

impl PointerCache {
    /// The tenant's kept pointers, or the ticket to keep the ones about to be read.
    pub fn get(&self, tenant: &str) -> Result<Arc<[Pointers]>, Ticket> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let changes = state.changes;
        let entry = state.tenants.entry(tenant.to_owned()).or_insert(Entry {
            pointers: None,
            changed: changes,
        });
        match &entry.pointers {
            Some(pointers) => Ok(Arc::clone(pointers)),
            None => Err(Ticket(entry.changed)),
        }
    }

    /// Keeps `pointers`, read after `ticket` was taken, unless the tenant changed since.
    pub fn put(&self, tenant: &str, ticket: Ticket, pointers: Arc<[Pointers]>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.tenants.len() > MAX_TENANTS {
            // A ticket whose entry is gone keeps nothing; a new entry starts at the count,
            // past every change before it.
            state.tenants.clear();
        }
        if let Some(entry) = state.tenants.get_mut(tenant)
            && entry.changed == ticket.0
        {
            entry.pointers = Some(pointers);
        }
    }

    /// A commit moved pointers of `tenants`: their kept pointers are gone.
    pub fn changed<'a>(&self, tenants: impl IntoIterator<Item = &'a str>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for tenant in tenants {
            state.changes += 1;
            let changes = state.changes;
            if let Some(entry) = state.tenants.get_mut(tenant) {
                entry.pointers = None;
                entry.changed = changes;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pointers(key: &str) -> Arc<[Pointers]> {
        Arc::from(vec![Pointers {
            subject_kind: "user".into(),
            subject_key: key.into(),
            active: Some((1, format!("sha256:{key}"))),
            fallback: None,
        }])
    }

    #[test]
    fn a_read_overtaken_by_a_change_is_not_kept() {
        let cache = PointerCache::default();
        let Err(ticket) = cache.get("t") else {
            panic!("an empty cache answered")
        };
        cache.changed(["t"]);
        cache.put("t", ticket, pointers("old"));
        let Err(ticket) = cache.get("t") else {
            panic!("rows read before a change were kept")
        };
        cache.put("t", ticket, pointers("new"));
        assert_eq!(cache.get("t").ok(), Some(pointers("new")));
    }

    #[test]
    fn a_change_drops_only_its_tenants() {
        let cache = PointerCache::default();
        for tenant in ["a", "b"] {
            let ticket = cache.get(tenant).unwrap_err();
            cache.put(tenant, ticket, pointers(tenant));
        }
        cache.changed(["a"]);
        assert!(cache.get("a").is_err());
        assert_eq!(cache.get("b").ok(), Some(pointers("b")));
    }

    #[test]
    fn a_tenant_evicted_while_read_is_not_kept_stale() {
        let cache = PointerCache::default();
        let ticket = cache.get("t").unwrap_err();
        // Fill past the bound: every entry, "t"'s too, is dropped.
        for n in 0..=MAX_TENANTS {
            let tenant = format!("other-{n}");
            let t = cache.get(&tenant).unwrap_err();
            cache.put(&tenant, t, pointers(&tenant));
        }
        cache.changed(["t"]);
        cache.put("t", ticket, pointers("stale"));
        assert!(cache.get("t").is_err());
    }
}
