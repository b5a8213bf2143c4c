//! Proto ⇄ domain pieces every service adapter shares: timestamps, page sizes, and the
//! whole `ListAudit` RPC over a service's own hash-chained audit log.

use noema_core::audit::AuditEntry;
use noema_proto::common::v1 as common;
use noema_store::Database;

/// Proto timestamps, re-exported so adapters import their conversions from one place.
pub use noema_core::time::proto::timestamp;

/// Default and maximum page sizes of listings (open-cognition's 50 and 200).
pub const DEFAULT_PAGE_SIZE: u32 = 50;
pub const MAX_PAGE_SIZE: u32 = 200;

/// Page size from a request: 0 → the default, larger than the maximum → the maximum.
pub fn page_size(requested: u32) -> u32 {
    match requested {
        0 => DEFAULT_PAGE_SIZE,
        n => n.min(MAX_PAGE_SIZE),
    }
}

/// The next page's token: the last item's key when the page came back full.
pub fn next_page_token<T>(items: &[T], limit: u32, key: impl Fn(&T) -> String) -> String {
    match items.last() {
        Some(last) if items.len() == limit as usize => key(last),
        _ => String::new(),
    }
}

pub fn audit_entry_to_proto(entry: AuditEntry) -> common::AuditEntry {
    common::AuditEntry {
        id: entry.id,
        occurred_at: Some(timestamp(entry.occurred_at)),
        actor: entry.actor,
        action: entry.action,
        target_id: entry.target_id.unwrap_or_default(),
        target_type: entry.target_type.unwrap_or_default(),
        detail: entry
            .detail
            .as_ref()
            .and_then(noema_proto::json::to_proto_struct),
        prev_hash: entry.prev_hash,
        hash: entry.hash,
    }
}

/// The `ListAudit` RPC over `db`'s audit log: newest first, or oldest first for walking
/// the chain, with the entry id as the cursor.
pub async fn list_audit(
    db: &Database,
    request: common::ListAuditRequest,
) -> Result<common::ListAuditResponse, tonic::Status> {
    let page = request.page.unwrap_or_default();
    let cursor = if page.page_token.is_empty() {
        None
    } else {
        Some(page.page_token.parse::<i64>().map_err(|_| {
            noema_core::Failure::new(
                noema_core::ErrorCode::InvalidArgument,
                "page_token is not a token returned by a previous ListAudit call",
            )
            .to_status()
        })?)
    };
    let limit = page_size(page.page_size);
    let entries = if request.oldest_first {
        db.audit_oldest_first(cursor.unwrap_or(0), i64::from(limit))
            .await
    } else {
        db.audit_newest_first(cursor, i64::from(limit)).await
    }
    .map_err(|e| noema_core::to_status(&e))?;
    let next_page_token = next_page_token(&entries, limit, |e| e.id.to_string());
    Ok(common::ListAuditResponse {
        entries: entries.into_iter().map(audit_entry_to_proto).collect(),
        page: Some(common::PageResponse { next_page_token }),
    })
}
