//! Capsule writes in flight, per subject. Writers of one subject in this process take turns
//! (read the state, run the rule, hand the write to the group writer) and the next one
//! builds on the revision just handed over instead of the committed one: concurrent writers
//! of a hot subject then land in the same group commit one after the other, where each
//! would otherwise be refused because the one before moved the subject, and run again.
//!
//! Nothing here decides what lands: every write still carries the version it was computed
//! against and the store refuses it if that version is not there. A write built on one
//! that does not land is refused the same way, and its rule runs again on the stored state.
//! Other processes (replicas) are not seen here; their writes move the subject as before.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Mutex, MutexGuard, watch};

use crate::domain::subject::SubjectKey;
use crate::store::{CapsuleRevision, SubjectRow};

/// Subjects share this many turn locks (a turn is short: one read and one rule).
const STRIPES: usize = 64;

/// A tenant's subject, as this module names it.
pub(super) type SubjectId = (String, SubjectKey);

/// The last write handed over for a subject and not yet answered.
#[derive(Debug)]
struct Ahead {
    ticket: u64,
    /// The subject's row as it is once that write lands.
    row: SubjectRow,
    /// Whether it landed, once known.
    landed: watch::Receiver<Option<bool>>,
}

/// The in-flight writes of every subject.
pub(super) struct InFlight {
    stripes: Vec<Mutex<HashMap<SubjectId, Ahead>>>,
    hasher: RandomState,
    tickets: AtomicU64,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            tickets: AtomicU64::new(0),
        }
    }
}

/// A writer's turn on a subject: while it is held, no other writer of the subject in this
/// process reads its state or hands a write over.
pub(super) struct Turn<'a> {
    in_flight: &'a InFlight,
    id: &'a SubjectId,
    stripe: MutexGuard<'a, HashMap<SubjectId, Ahead>>,
}

/// The write this turn builds on, when it is still in flight.
#[derive(Debug)]
pub(super) struct Basis {
    /// The row once that write lands (what the rule runs on).
    pub row: SubjectRow,
    landed: watch::Receiver<Option<bool>>,
}

impl Basis {
    /// Waits until the write built on is answered: whether it landed.
    pub async fn landed(mut self) -> bool {
        match self.landed.wait_for(Option::is_some).await {
            Ok(landed) => *landed == Some(true),
            Err(_) => false,
        }
    }
}

/// A handed-over write's place, to clear when it is answered (dropped unanswered, the
/// place is dead: nobody builds on it).
pub(super) struct Handed {
    ticket: u64,
    landed: watch::Sender<Option<bool>>,
}

impl InFlight {
    fn stripe(&self, id: &SubjectId) -> &Mutex<HashMap<SubjectId, Ahead>> {
        let at = self.hasher.hash_one(id) as usize % STRIPES;
        &self.stripes[at]
    }

    /// Waits for the subject's turn.
    pub async fn turn<'a>(&'a self, id: &'a SubjectId) -> Turn<'a> {
        Turn {
            in_flight: self,
            id,
            stripe: self.stripe(id).lock().await,
        }
    }

    /// The write answered: clears its place unless a later write built on it.
    pub async fn answered(&self, id: &SubjectId, handed: Handed, landed: bool) {
        let _ = handed.landed.send(Some(landed));
        let mut stripe = self.stripe(id).lock().await;
        if stripe.get(id).is_some_and(|a| a.ticket == handed.ticket) {
            stripe.remove(id);
        }
    }
}

impl Turn<'_> {
    /// The write in flight for the subject, if any. A write already answered is not (the
    /// stored state is its outcome), nor one whose writer went away before its answer.
    pub fn basis(&mut self) -> Option<Basis> {
        let ahead = self.stripe.get(self.id)?;
        let answered = ahead.landed.borrow().is_some() || ahead.landed.has_changed().is_err();
        if answered {
            self.stripe.remove(self.id);
            return None;
        }
        Some(Basis {
            row: ahead.row.clone(),
            landed: ahead.landed.clone(),
        })
    }

    /// Records the write just handed over: a new revision on top of `before` (the row it
    /// was computed against, `None` for a new subject).
    pub fn handed(
        mut self,
        before: Option<&SubjectRow>,
        subject_id: &str,
        revision: CapsuleRevision,
    ) -> Handed {
        let ticket = self.in_flight.tickets.fetch_add(1, Ordering::Relaxed);
        let (landed, watching) = watch::channel(None);
        let pointer = Some((revision.sequence, revision.revision_id.clone()));
        let row = SubjectRow {
            subject_kind: self.id.1.kind.as_str().to_owned(),
            subject_key: self.id.1.key.clone(),
            subject_id: subject_id.to_owned(),
            version: before.map_or(1, |r| r.version + 1),
            head_sequence: revision.sequence,
            head_revision: revision.revision_id.clone(),
            active_revision: pointer.clone(),
            fallback: pointer,
            active: Some(revision),
            used_at: before.map_or(0, |r| r.used_at),
        };
        self.stripe.insert(
            self.id.clone(),
            Ahead {
                ticket,
                row,
                landed: watching,
            },
        );
        Handed { ticket, landed }
    }
}
