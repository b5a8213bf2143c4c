//! Scheduled items (CogniRelay's `/v1/schedule/items*`): create (with exact idempotent
//! replay), get, list, patch, acknowledge, retire, in the caller's tenant. Mutations are
//! version-checked as the original checks them; a write that loses a race to another writer
//! answers the original's version conflict.

use serde_json::json;

use super::{Continuity, audit, bytes_of, now};
use crate::domain::access::{Caller, READ, WRITE};
use crate::domain::schedule::{
    self, Item, ListQuery, SCHEDULE_PATH, body_object, conflict, due_not_future, not_found,
};
use crate::error::Error;
use crate::store::ScheduleWrite;

/// What a create did: stored a new item, or found the same one (an exact replay).
#[derive(Debug)]
pub struct ScheduleCreated {
    pub body: Vec<u8>,
    pub created: bool,
}

impl Continuity {
    /// `POST /v1/schedule/items`.
    pub async fn create_schedule_item(
        &self,
        caller: &Caller,
        body: &[u8],
    ) -> Result<ScheduleCreated, Error> {
        // The body is read before any check, as FastAPI reads it in the original's handler.
        let payload = body_object(body)?;
        caller.require(WRITE)?;
        caller.require_write_path(SCHEDULE_PATH)?;
        let at = now();
        let item = schedule::create(&payload, caller.peer_id(), at)?;
        let by_id = self
            .store()
            .schedule_item(&caller.tenant, &item.schedule_id)
            .await?;
        let by_key = match &item.idempotency_key {
            Some(key) => {
                self.store()
                    .schedule_item_by_key(&caller.tenant, key)
                    .await?
            }
            None => None,
        };
        let existing: Vec<&Item> = [by_id.as_ref(), by_key.as_ref()]
            .into_iter()
            .flatten()
            .collect();
        if let Some(first) = existing.first()
            && existing.iter().all(|e| e.schedule_id == first.schedule_id)
            && first.identity_sha256 == item.identity_sha256
            && first.identity_json == item.identity_json
        {
            return Ok(ScheduleCreated {
                body: bytes_of(&schedule::created_body(first, false, at)),
                created: false,
            });
        }
        if item.due_at_ts <= at.unix_timestamp() {
            return Err(due_not_future().into());
        }
        let key_conflict = || {
            conflict(
                "idempotency_key_conflict",
                "idempotency_key",
                "idempotency_key already exists for a different schedule item",
            )
        };
        match (&by_id, &by_key) {
            (Some(a), Some(b)) if a.schedule_id != b.schedule_id => {
                return Err(key_conflict().into());
            }
            (Some(_), _) => {
                return Err(conflict(
                    "schedule_id_conflict",
                    "schedule_id",
                    "schedule_id already exists for a different schedule item",
                )
                .into());
            }
            (None, Some(_)) => return Err(key_conflict().into()),
            (None, None) => {}
        }
        let landed = self
            .store()
            .schedule_write(ScheduleWrite {
                tenant: caller.tenant.clone(),
                item: item.clone(),
                expected_version: None,
                at,
                audit: audit(
                    caller,
                    "schedule.create",
                    &item.schedule_id,
                    json!({"schedule_id": item.schedule_id, "kind": item.kind}),
                ),
            })
            .await?;
        if !landed {
            // Another writer took the id or the key between the read and the write.
            return Err(conflict(
                "schedule_id_conflict",
                "schedule_id",
                "schedule_id already exists for a different schedule item",
            )
            .into());
        }
        Ok(ScheduleCreated {
            body: bytes_of(&schedule::created_body(&item, true, at)),
            created: true,
        })
    }

    /// The item `schedule_id` (validated) of the caller's tenant, or the original's 404.
    async fn schedule_item_of(&self, caller: &Caller, schedule_id: &str) -> Result<Item, Error> {
        let id = schedule::schedule_id(Some(&crate::domain::json::Json::from(schedule_id)), true)?
            .unwrap_or_default();
        Ok(self
            .store()
            .schedule_item(&caller.tenant, &id)
            .await?
            .ok_or_else(|| not_found(&id))?)
    }

    /// `GET /v1/schedule/items/{schedule_id}`.
    pub async fn get_schedule_item(
        &self,
        caller: &Caller,
        schedule_id: &str,
    ) -> Result<Vec<u8>, Error> {
        caller.require(READ)?;
        caller.require_read_path(SCHEDULE_PATH)?;
        let item = self.schedule_item_of(caller, schedule_id).await?;
        Ok(bytes_of(&schedule::item_body(&item, now())))
    }

    /// `GET /v1/schedule/items` (the query string as an object of strings).
    pub async fn list_schedule_items(
        &self,
        caller: &Caller,
        params: &[u8],
    ) -> Result<Vec<u8>, Error> {
        caller.require(READ)?;
        caller.require_read_path(SCHEDULE_PATH)?;
        let query = ListQuery::from_json(&body_object(params)?)?;
        let at = now();
        let kept: Vec<Item> = self
            .store()
            .schedule_items(&caller.tenant, false)
            .await?
            .into_iter()
            .filter(|item| query.keeps(item, at))
            .collect();
        let page: Vec<Item> = kept
            .iter()
            .skip(query.offset)
            .take(query.limit)
            .cloned()
            .collect();
        Ok(bytes_of(&schedule::list_body(
            &page,
            kept.len(),
            &query,
            at,
        )))
    }

    /// The tenant's pending items scoped to any of `subjects` (`(kind, id)`: the subject
    /// itself, or a thread/task link), earliest due first: the inputs of `schedule_context`.
    pub async fn pending_schedule_items(
        &self,
        tenant: &str,
        subjects: &[(String, String)],
    ) -> Result<Vec<Item>, Error> {
        Ok(self
            .store()
            .schedule_items(tenant, true)
            .await?
            .into_iter()
            .filter(|item| subjects.iter().any(|(k, i)| item.concerns(k, i)))
            .collect())
    }

    /// `PATCH /v1/schedule/items/{schedule_id}`.
    pub async fn update_schedule_item(
        &self,
        caller: &Caller,
        schedule_id: &str,
        body: &[u8],
    ) -> Result<Vec<u8>, Error> {
        // The body is read before any check, as FastAPI reads it in the original's handler.
        let payload = body_object(body)?;
        caller.require(WRITE)?;
        caller.require_write_path(SCHEDULE_PATH)?;
        // The id is checked before the body, as the original does.
        schedule::schedule_id(Some(&crate::domain::json::Json::from(schedule_id)), true)?;
        let patch = schedule::patch(&payload)?;
        let item = self.schedule_item_of(caller, schedule_id).await?;
        let at = now();
        let (mut next, changed) = schedule::apply_patch(&item, &patch, at)?;
        if !changed {
            return Ok(bytes_of(&schedule::updated_body(&item, false, at)));
        }
        let stamp =
            crate::domain::timestamp::format_iso(crate::domain::timestamp::whole_seconds(at));
        next.updated_at = stamp;
        next.updated_by = caller.peer_id().to_owned();
        next.version = item.version + 1;
        self.store_schedule_change(caller, &item, next, "schedule.update", at)
            .await
    }

    /// `POST /v1/schedule/items/{schedule_id}/acknowledge`.
    pub async fn acknowledge_schedule_item(
        &self,
        caller: &Caller,
        schedule_id: &str,
        body: &[u8],
    ) -> Result<Vec<u8>, Error> {
        // The body is read before any check, as FastAPI reads it in the original's handler.
        let payload = body_object(body)?;
        caller.require(WRITE)?;
        caller.require_write_path(SCHEDULE_PATH)?;
        schedule::schedule_id(Some(&crate::domain::json::Json::from(schedule_id)), true)?;
        let (expected, status, reason) = schedule::acknowledge(&payload)?;
        let item = self.schedule_item_of(caller, schedule_id).await?;
        let at = now();
        match schedule::terminate(&item, &status, expected, reason, caller.peer_id(), at)? {
            None => Ok(bytes_of(&schedule::updated_body(&item, false, at))),
            Some(next) => {
                self.store_schedule_change(caller, &item, next, "schedule.acknowledge", at)
                    .await
            }
        }
    }

    /// `POST /v1/schedule/items/{schedule_id}/retire`.
    pub async fn retire_schedule_item(
        &self,
        caller: &Caller,
        schedule_id: &str,
        body: &[u8],
    ) -> Result<Vec<u8>, Error> {
        // The body is read before any check, as FastAPI reads it in the original's handler.
        let payload = body_object(body)?;
        caller.require(WRITE)?;
        caller.require_write_path(SCHEDULE_PATH)?;
        schedule::schedule_id(Some(&crate::domain::json::Json::from(schedule_id)), true)?;
        let (expected, reason) = schedule::retire(&payload)?;
        let item = self.schedule_item_of(caller, schedule_id).await?;
        let at = now();
        match schedule::terminate(&item, "retired", expected, reason, caller.peer_id(), at)? {
            None => Ok(bytes_of(&schedule::updated_body(&item, false, at))),
            Some(next) => {
                self.store_schedule_change(caller, &item, next, "schedule.retire", at)
                    .await
            }
        }
    }

    async fn store_schedule_change(
        &self,
        caller: &Caller,
        before: &Item,
        next: Item,
        action: &str,
        at: time::OffsetDateTime,
    ) -> Result<Vec<u8>, Error> {
        let landed = self
            .store()
            .schedule_write(ScheduleWrite {
                tenant: caller.tenant.clone(),
                item: next.clone(),
                expected_version: Some(before.version),
                at,
                audit: audit(
                    caller,
                    action,
                    &next.schedule_id,
                    json!({"schedule_id": next.schedule_id, "status": next.status, "version": next.version}),
                ),
            })
            .await?;
        if !landed {
            return Err(schedule::version_conflict().into());
        }
        Ok(bytes_of(&schedule::updated_body(&next, true, at)))
    }
}
