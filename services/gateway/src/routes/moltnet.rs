//! What MoltNet's routes share (`shared/compat/moltnet.md`): ISO 8601 millisecond
//! timestamps, absent text as `null`, the `creator` principal, paged lists, and how its
//! query values are read. MoltNet's bodies list their fields in alphabetical order; the
//! structs here declare them in that order.
//!
//! Handlers never validate before the gRPC call, so authentication and scope errors come
//! first: a query value the service must refuse is passed on in a form it refuses.

use noema_core::time::proto::iso_millis;
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::ErrorStyle;
use crate::route::Routes;

/// The routes of MoltNet's diary API, served by identity's `DiaryService`.
pub const DIARIES: Routes = Routes::new(
    "diaries",
    ErrorStyle::MoltNet,
    "noema.identity.v1.DiaryService",
);

/// A MoltNet timestamp (`2026-04-14T18:20:43.005Z`), or null.
pub fn time(t: &Option<prost_types::Timestamp>) -> Option<String> {
    t.as_ref().map(iso_millis)
}

/// Text that MoltNet sends as null when there is none.
pub fn text_or_null(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// MoltNet's `creator` principal: an agent (with its key) or a human.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Creator {
    #[serde(rename_all = "camelCase")]
    Agent {
        fingerprint: String,
        identity_id: String,
        /// `agent`.
        kind: &'static str,
        public_key: String,
    },
    #[serde(rename_all = "camelCase")]
    Human {
        human_id: String,
        /// Always null: humans have no identity here.
        identity_id: Option<String>,
        /// `human`.
        kind: &'static str,
    },
}

impl Creator {
    /// The creator `id`: an agent when it has a registered key.
    pub fn new(id: &str, fingerprint: &str, public_key: &str) -> Creator {
        if public_key.is_empty() {
            Creator::Human {
                human_id: id.to_owned(),
                identity_id: None,
                kind: "human",
            }
        } else {
            Creator::Agent {
                fingerprint: fingerprint.to_owned(),
                identity_id: id.to_owned(),
                kind: "agent",
                public_key: public_key.to_owned(),
            }
        }
    }
}

/// One page of a MoltNet list.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "{T}Page")]
pub struct Page<T> {
    pub items: Vec<T>,
    pub limit: u64,
    pub offset: u64,
    pub total: u64,
}

/// `{"success": true}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Success {
    pub success: bool,
}

/// A numeric query value; an unparsable one is passed as out of range so the service
/// refuses it after authentication.
pub fn number(value: &Option<String>) -> u32 {
    value
        .as_deref()
        .map_or(0, |v| v.parse().unwrap_or(u32::MAX))
}

/// A boolean query value: `true` or `1`.
pub fn flag(value: &Option<String>) -> bool {
    matches!(value.as_deref(), Some("true" | "1"))
}

/// `depth` for the service, which refuses anything but 1-3: absent is `None`; a value
/// that is not an unsigned integer (or too large) is passed as 0 so it is refused after
/// authentication.
pub fn depth(value: &Option<String>) -> Option<u32> {
    value.as_deref().map(|v| v.parse().unwrap_or(0))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::go_json::tests::assert_sorted;

    #[test]
    fn creators_and_pages_are_in_moltnets_order() {
        assert_sorted(&Creator::new("agent:a", "AB-CD", "ed25519:key"));
        assert_sorted(&Creator::new("human:h", "", ""));
        assert_eq!(
            serde_json::to_string(&Creator::new("human:h", "", "")).unwrap(),
            "{\"humanId\":\"human:h\",\"identityId\":null,\"kind\":\"human\"}"
        );
        assert_sorted(&Page {
            items: vec![Success { success: true }],
            limit: 1,
            offset: 0,
            total: 1,
        });
    }

    #[test]
    fn query_values_the_service_must_refuse_stay_refusable() {
        assert_eq!(number(&Some("5".into())), 5);
        assert_eq!(number(&None), 0);
        assert_eq!(number(&Some("x".into())), u32::MAX);
        assert!(flag(&Some("1".into())) && flag(&Some("true".into())));
        assert!(!flag(&Some("yes".into())) && !flag(&None));
        assert_eq!(depth(&None), None);
        for (raw, expected) in [
            ("2", 2),
            ("x", 0),
            ("-1", 0),
            ("1.5", 0),
            ("", 0),
            ("99999999999", 0),
        ] {
            assert_eq!(depth(&Some(raw.into())), Some(expected), "{raw}");
        }
    }
}
