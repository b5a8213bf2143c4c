//! `schedule_context` (retrieve, startup view): the pending one-shot reminders scoped to the
//! requested subjects, split into due and upcoming (within the window), each list capped.

use crate::domain::json::{Json, JsonObject};
use crate::domain::model::SubjectKind;

/// The original's defaults (`schedule_due_limit`, `schedule_upcoming_limit`,
/// `schedule_upcoming_window_hours`).
pub const DUE_LIMIT: usize = 10;
pub const UPCOMING_LIMIT: usize = 5;
pub const UPCOMING_WINDOW_HOURS: i64 = 72;

/// A scheduled item as the schedule store supplies it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleEntry {
    pub schedule_id: String,
    pub status: String,
    pub subject_kind: Option<String>,
    pub subject_id: Option<String>,
    pub thread_id: Option<String>,
    pub task_id: Option<String>,
    /// Unix seconds.
    pub due_at_ts: i64,
    /// The item as the schedule routes show it.
    pub item: Json,
}

/// The subjects a schedule context is scoped to, deduplicated.
pub fn scopes(
    subjects: impl IntoIterator<Item = (SubjectKind, String)>,
) -> Vec<(SubjectKind, String)> {
    let mut out: Vec<(SubjectKind, String)> = Vec::new();
    for s in subjects {
        if !s.1.is_empty() && !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

fn matches(entry: &ScheduleEntry, scopes: &[(SubjectKind, String)]) -> bool {
    scopes.iter().any(|(kind, id)| {
        (entry.subject_kind.as_deref() == Some(kind.as_str())
            && entry.subject_id.as_deref() == Some(id.as_str()))
            || (*kind == SubjectKind::Thread && entry.thread_id.as_deref() == Some(id.as_str()))
            || (*kind == SubjectKind::Task && entry.task_id.as_deref() == Some(id.as_str()))
    })
}

fn section(window: Option<i64>, items: &[&ScheduleEntry], limit: usize) -> Json {
    let mut s = JsonObject::new();
    if let Some(hours) = window {
        s.insert("window_hours", Json::from(hours));
    }
    s.insert(
        "items",
        Json::Array(items.iter().take(limit).map(|e| e.item.clone()).collect()),
    );
    s.insert("count", Json::from(items.len().min(limit)));
    s.insert("truncated", Json::Bool(items.len() > limit));
    Json::Object(s)
}

/// The context over the pending entries (any order; sorted here by due time, then id).
/// Without scopes it is empty.
pub fn schedule_context(
    entries: &[ScheduleEntry],
    scopes: &[(SubjectKind, String)],
    now_ts: i64,
    warnings: Vec<String>,
) -> Json {
    let mut pending: Vec<&ScheduleEntry> = if scopes.is_empty() {
        Vec::new()
    } else {
        entries
            .iter()
            .filter(|e| e.status == "pending" && matches(e, scopes))
            .collect()
    };
    pending.sort_by(|a, b| (a.due_at_ts, &a.schedule_id).cmp(&(b.due_at_ts, &b.schedule_id)));
    let end = now_ts + UPCOMING_WINDOW_HOURS * 3600;
    let due: Vec<&ScheduleEntry> = pending
        .iter()
        .copied()
        .filter(|e| e.due_at_ts <= now_ts)
        .collect();
    let upcoming: Vec<&ScheduleEntry> = pending
        .iter()
        .copied()
        .filter(|e| e.due_at_ts > now_ts && e.due_at_ts <= end)
        .collect();
    let mut context = JsonObject::new();
    context.insert("due", section(None, &due, DUE_LIMIT));
    context.insert(
        "upcoming",
        section(Some(UPCOMING_WINDOW_HOURS), &upcoming, UPCOMING_LIMIT),
    );
    context.insert(
        "warnings",
        Json::Array(warnings.into_iter().map(Json::String).collect()),
    );
    Json::Object(context)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn entry(id: &str, due: i64, thread: Option<&str>) -> ScheduleEntry {
        ScheduleEntry {
            schedule_id: id.into(),
            status: "pending".into(),
            subject_kind: None,
            subject_id: None,
            thread_id: thread.map(str::to_owned),
            task_id: None,
            due_at_ts: due,
            item: Json::from(id),
        }
    }

    #[test]
    fn due_and_upcoming_split_at_now_and_the_window() {
        let now = 1_000_000;
        let entries = vec![
            entry("late", now + 73 * 3600, Some("t")),
            entry("soon", now + 3600, Some("t")),
            entry("past", now - 1, Some("t")),
            entry("elsewhere", now - 1, Some("u")),
        ];
        let scopes = scopes([(SubjectKind::Thread, "t".to_owned())]);
        let c = schedule_context(&entries, &scopes, now, vec![]);
        assert_eq!(
            c.get("due").unwrap().get("items"),
            Some(&Json::Array(vec![Json::from("past")]))
        );
        assert_eq!(
            c.get("upcoming").unwrap().get("items"),
            Some(&Json::Array(vec![Json::from("soon")]))
        );
        let empty = schedule_context(&entries, &[], now, vec![]);
        assert_eq!(
            empty.get("due").unwrap().get("count"),
            Some(&Json::from(0usize))
        );
    }
}
