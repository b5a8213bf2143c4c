//! `GET /v1/metrics` (the original's `metrics_service`): a tenant's tracked deliveries by
//! effective status and recipient, its audit entries by action and actor, its recent
//! signed-envelope verification failures, and the alarms the original raises on them, in the
//! original's body. Code checks and replication are surfaces Noema does not serve: their
//! blocks are the original's empty ones.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use time::OffsetDateTime;

use super::json::to_py_json;
use super::timestamp::format_iso;

/// The path the original checks the read namespaces for before counting audit entries.
pub const AUDIT_LOG_PATH: &str = "logs/api_audit.jsonl";
/// Audit entries counted: the original reads its log's last 10,000 lines.
pub const AUDIT_WINDOW: i64 = 10_000;
/// A pending backlog deeper than this raises an alarm (`COGNIRELAY_BACKLOG_ALARM_THRESHOLD`).
pub const BACKLOG_ALARM_THRESHOLD: i64 = 100;
/// More verification failures than this in the window raise an alarm
/// (`COGNIRELAY_VERIFICATION_ALARM_THRESHOLD`).
pub const VERIFICATION_ALARM_THRESHOLD: u64 = 20;

/// Tracked deliveries of one recipient with one effective status; `first` (the first
/// record's append order) orders groups as the original's record index is ordered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryGroup {
    pub recipient: String,
    pub effective: String,
    pub count: i64,
    pub first: i64,
}

/// Audit entries of one action by one actor; `first` is the oldest entry's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditGroup {
    pub action: String,
    pub actor: String,
    pub count: i64,
    pub first: i64,
}

/// What the alarms are judged against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub backlog: i64,
    pub verification: u64,
}

/// Signed-envelope verification failures in the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failures {
    pub recent: u64,
    pub window_seconds: i64,
}

/// A JSON object whose keys keep the order they were first inserted in (the original's dicts).
#[derive(Debug, Clone, PartialEq)]
struct Ordered<V>(Vec<(String, V)>);

impl<V: Default> Ordered<V> {
    fn new() -> Self {
        Ordered(Vec::new())
    }

    fn entry(&mut self, key: &str) -> &mut V {
        let index = match self.0.iter().position(|(k, _)| k == key) {
            Some(index) => index,
            None => {
                self.0.push((key.to_owned(), V::default()));
                self.0.len() - 1
            }
        };
        &mut self.0[index].1
    }

    fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

impl<V: Serialize> Serialize for Ordered<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[derive(Debug, Default, Serialize)]
struct RecipientCounts {
    total: i64,
    pending: i64,
    acked: i64,
    dead_letter: i64,
}

#[derive(Serialize)]
struct Delivery {
    summary: Ordered<i64>,
    backlog_depth: i64,
    ack_success_ratio: f64,
    by_recipient: Ordered<RecipientCounts>,
}

#[derive(Serialize)]
struct Checks {
    summary: Ordered<i64>,
    artifact_count: i64,
}

#[derive(Serialize)]
struct Audit {
    event_counts: Ordered<i64>,
    peer_counts: Ordered<i64>,
}

#[derive(Serialize)]
struct Security {
    verification_failures_recent: u64,
    verification_failure_window_seconds: i64,
}

#[derive(Serialize)]
struct Replication {
    last_push: Option<()>,
    last_pull_by_source: Ordered<()>,
}

#[derive(Debug, Serialize)]
struct Alarm {
    #[serde(rename = "type")]
    kind: &'static str,
    severity: &'static str,
    message: String,
    metric: &'static str,
}

#[derive(Serialize)]
struct Metrics {
    ok: bool,
    generated_at: String,
    delivery: Delivery,
    checks: Checks,
    audit: Audit,
    security: Security,
    replication: Replication,
    alarms: Vec<Alarm>,
}

/// The original's `str(value or "unknown")`.
fn or_unknown(value: &str) -> &str {
    if value.is_empty() { "unknown" } else { value }
}

/// Python's `round(x, digits)`: the nearest value with that many decimals, ties to even on the
/// exact binary value (Rust's fixed-precision formatting rounds the same way).
fn py_round(x: f64, digits: usize) -> f64 {
    format!("{x:.digits$}").parse().unwrap_or(x)
}

fn delivery(mut groups: Vec<DeliveryGroup>) -> Delivery {
    // In the order of each key's first record, as the original walks its record index.
    groups.sort_by_key(|g| g.first);
    let mut summary = Ordered::<i64>::new();
    let mut by_recipient = Ordered::<RecipientCounts>::new();
    for g in &groups {
        let effective = or_unknown(&g.effective);
        *summary.entry(effective) += g.count;
        let counts = by_recipient.entry(or_unknown(&g.recipient));
        counts.total += g.count;
        match effective {
            "pending_ack" => counts.pending += g.count,
            "acked" => counts.acked += g.count,
            "dead_letter" => counts.dead_letter += g.count,
            _ => {}
        }
    }
    let count = |status: &str| summary.get(status).copied().unwrap_or(0);
    let (acked, dead_letter) = (count("acked"), count("dead_letter"));
    let ratio = if acked + dead_letter > 0 {
        acked as f64 / (acked + dead_letter) as f64
    } else {
        1.0
    };
    Delivery {
        backlog_depth: count("pending_ack"),
        ack_success_ratio: py_round(ratio, 4),
        summary,
        by_recipient,
    }
}

fn audit(mut groups: Vec<AuditGroup>) -> Audit {
    groups.sort_by_key(|g| g.first);
    let mut event_counts = Ordered::<i64>::new();
    let mut peer_counts = Ordered::<i64>::new();
    for g in &groups {
        *event_counts.entry(or_unknown(&g.action)) += g.count;
        *peer_counts.entry(or_unknown(&g.actor)) += g.count;
    }
    Audit {
        event_counts,
        peer_counts,
    }
}

fn alarms(backlog_depth: i64, failures: Failures, thresholds: Thresholds) -> Vec<Alarm> {
    let mut alarms = Vec::new();
    if backlog_depth > thresholds.backlog {
        alarms.push(Alarm {
            kind: "delivery_backlog_growth",
            severity: "warning",
            message: format!(
                "Pending backlog depth {backlog_depth} exceeds threshold {}",
                thresholds.backlog
            ),
            metric: "delivery.backlog_depth",
        });
    }
    if failures.recent > thresholds.verification {
        alarms.push(Alarm {
            kind: "verification_failures",
            severity: "warning",
            message: format!(
                "Verification failures in last {}s: {} (threshold {})",
                failures.window_seconds, failures.recent, thresholds.verification
            ),
            metric: "security.verification_failures_recent",
        });
    }
    alarms
}

/// The metrics body at `now`, compact, in the original's key order.
pub fn metrics_body(
    now: OffsetDateTime,
    deliveries: Vec<DeliveryGroup>,
    audit_groups: Vec<AuditGroup>,
    failures: Failures,
    thresholds: Thresholds,
) -> Vec<u8> {
    let delivery = delivery(deliveries);
    let alarms = alarms(delivery.backlog_depth, failures, thresholds);
    let body = Metrics {
        ok: true,
        generated_at: format_iso(now),
        delivery,
        checks: Checks {
            summary: Ordered::new(),
            artifact_count: 0,
        },
        audit: audit(audit_groups),
        security: Security {
            verification_failures_recent: failures.recent,
            verification_failure_window_seconds: failures.window_seconds,
        },
        replication: Replication {
            last_push: None,
            last_pull_by_source: Ordered::new(),
        },
        alarms,
    };
    to_py_json(&body).into_bytes()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const NOW: OffsetDateTime = time::macros::datetime!(2026-11-27 13:57:32.849225 UTC);
    const DEFAULTS: Thresholds = Thresholds {
        backlog: BACKLOG_ALARM_THRESHOLD,
        verification: VERIFICATION_ALARM_THRESHOLD,
    };
    const NO_FAILURES: Failures = Failures {
        recent: 0,
        window_seconds: 600,
    };

    fn group(recipient: &str, effective: &str, count: i64, first: i64) -> DeliveryGroup {
        DeliveryGroup {
            recipient: recipient.into(),
            effective: effective.into(),
            count,
            first,
        }
    }

    fn text(body: Vec<u8>) -> String {
        String::from_utf8(body).unwrap()
    }

    #[test]
    fn nothing_yet_is_the_originals_empty_body() {
        // Recorded from CogniRelay 1.4.15 on an empty repository.
        assert_eq!(
            text(metrics_body(NOW, vec![], vec![], NO_FAILURES, DEFAULTS)),
            r#"{"ok":true,"generated_at":"2026-11-27T13:57:32.849225Z","delivery":{"summary":{},"backlog_depth":0,"ack_success_ratio":1.0,"by_recipient":{}},"checks":{"summary":{},"artifact_count":0},"audit":{"event_counts":{},"peer_counts":{}},"security":{"verification_failures_recent":0,"verification_failure_window_seconds":600},"replication":{"last_push":null,"last_pull_by_source":{}},"alarms":[]}"#
        );
    }

    #[test]
    fn deliveries_count_in_the_order_of_their_first_record() {
        // Recorded from CogniRelay 1.4.15: peer-b's first record passed its deadline, then
        // peer-c's and peer-b's second wait for their acks.
        let groups = vec![
            group("peer-b", "pending_ack", 1, 3),
            group("peer-c", "pending_ack", 1, 2),
            group("peer-b", "dead_letter", 1, 1),
        ];
        let audit = vec![AuditGroup {
            action: "message_send".into(),
            actor: "peer-1".into(),
            count: 3,
            first: 7,
        }];
        let body = text(metrics_body(NOW, groups, audit, NO_FAILURES, DEFAULTS));
        let expected = r#"{"ok":true,"generated_at":"2026-11-27T13:57:35.585231Z","delivery":{"summary":{"dead_letter":1,"pending_ack":2},"backlog_depth":2,"ack_success_ratio":0.0,"by_recipient":{"peer-b":{"total":2,"pending":1,"acked":0,"dead_letter":1},"peer-c":{"total":1,"pending":1,"acked":0,"dead_letter":0}}},"checks":{"summary":{},"artifact_count":0},"audit":{"event_counts":{"message_send":3},"peer_counts":{"peer-1":3}},"security":{"verification_failures_recent":0,"verification_failure_window_seconds":600},"replication":{"last_push":null,"last_pull_by_source":{}},"alarms":[]}"#
            .replace("13:57:35.585231", "13:57:32.849225");
        assert_eq!(body, expected);
    }

    #[test]
    fn the_ratio_is_rounded_as_python_rounds() {
        for (acked, dead, ratio) in [
            (2, 1, 0.6667),
            (1, 31, 0.0312),
            (3, 29, 0.0938),
            (1, 159, 0.0063),
            (4, 0, 1.0),
        ] {
            let groups = vec![
                group("b", "acked", acked, 1),
                group("b", "dead_letter", dead, 2),
            ];
            assert_eq!(delivery(groups).ack_success_ratio, ratio, "{acked}/{dead}");
        }
    }

    #[test]
    fn alarms_are_the_originals() {
        // Recorded from CogniRelay 1.4.15 with both alarm thresholds at 1: two messages
        // awaiting their acks, a key rotation and three failed verifications.
        let groups = vec![group("peer-b", "pending_ack", 2, 1)];
        let audit = [
            ("message_send", 2, 1),
            ("security_keys_rotate", 1, 3),
            ("messages_verify", 3, 4),
        ]
        .into_iter()
        .map(|(action, count, first)| AuditGroup {
            action: action.into(),
            actor: "peer-1".into(),
            count,
            first,
        })
        .collect();
        let failures = Failures {
            recent: 3,
            window_seconds: 600,
        };
        let thresholds = Thresholds {
            backlog: 1,
            verification: 1,
        };
        let body = text(metrics_body(NOW, groups, audit, failures, thresholds));
        let expected = r#"{"ok":true,"generated_at":"2026-11-27T14:02:08.670871Z","delivery":{"summary":{"pending_ack":2},"backlog_depth":2,"ack_success_ratio":1.0,"by_recipient":{"peer-b":{"total":2,"pending":2,"acked":0,"dead_letter":0}}},"checks":{"summary":{},"artifact_count":0},"audit":{"event_counts":{"message_send":2,"security_keys_rotate":1,"messages_verify":3},"peer_counts":{"peer-1":6}},"security":{"verification_failures_recent":3,"verification_failure_window_seconds":600},"replication":{"last_push":null,"last_pull_by_source":{}},"alarms":[{"type":"delivery_backlog_growth","severity":"warning","message":"Pending backlog depth 2 exceeds threshold 1","metric":"delivery.backlog_depth"},{"type":"verification_failures","severity":"warning","message":"Verification failures in last 600s: 3 (threshold 1)","metric":"security.verification_failures_recent"}]}"#
            .replace("14:02:08.670871", "13:57:32.849225");
        assert_eq!(body, expected);
    }

    #[test]
    fn alarms_past_the_default_thresholds() {
        let groups = vec![group("b", "pending_ack", 101, 1), group("", "acked", 1, 2)];
        let failures = Failures {
            recent: 21,
            window_seconds: 600,
        };
        let body = text(metrics_body(NOW, groups, vec![], failures, DEFAULTS));
        assert!(body.contains(r#""by_recipient":{"b":{"total":101,"pending":101,"acked":0,"dead_letter":0},"unknown":{"total":1,"pending":0,"acked":1,"dead_letter":0}}"#), "{body}");
        assert!(body.ends_with(r#""alarms":[{"type":"delivery_backlog_growth","severity":"warning","message":"Pending backlog depth 101 exceeds threshold 100","metric":"delivery.backlog_depth"},{"type":"verification_failures","severity":"warning","message":"Verification failures in last 600s: 21 (threshold 20)","metric":"security.verification_failures_recent"}]}"#), "{body}");
        // At the thresholds, none.
        let groups = vec![group("b", "pending_ack", 100, 1)];
        let failures = Failures {
            recent: 20,
            window_seconds: 600,
        };
        let body = text(metrics_body(NOW, groups, vec![], failures, DEFAULTS));
        assert!(body.ends_with(r#""alarms":[]}"#), "{body}");
    }
}
