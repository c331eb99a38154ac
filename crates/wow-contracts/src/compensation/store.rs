//! Where failed executions are kept.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::compensation::RetrySpec;
use crate::compensation::{
    ExecutionFailed, ExecutionFailedStatus, FailedExecution, RecoverableType,
};
use crate::event::ConsumerStoreError;

/// Which records [`CompensationStore::list`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureQuery {
    /// Only records with this status.
    pub status: Option<ExecutionFailedStatus>,
    /// Only records of this consumer.
    pub consumer: Option<String>,
    /// Only records of aggregates of this tenant.
    pub tenant_id: Option<String>,
    /// Only records of aggregates of this type (`aggregate_name`).
    pub aggregate_name: Option<String>,
    /// Only records of the aggregate with this id (of any type unless `aggregate_name` names
    /// one).
    pub aggregate_id: Option<String>,
    /// Only records an operator judged so (`UNKNOWN`: the ones not judged).
    pub recoverable: Option<RecoverableType>,
    /// Only records whose id sorts after this one (the last id of the previous page).
    pub after_id: Option<String>,
    /// At most this many.
    pub limit: usize,
}

impl Default for FailureQuery {
    fn default() -> Self {
        Self {
            status: None,
            consumer: None,
            tenant_id: None,
            aggregate_name: None,
            aggregate_id: None,
            recoverable: None,
            after_id: None,
            limit: 100,
        }
    }
}

impl FailureQuery {
    /// Whether `record` matches the filters and sorts after `after_id` (the page's start,
    /// not its size).
    pub fn matches(&self, record: &ExecutionFailed) -> bool {
        self.filters(record)
            && self
                .after_id
                .as_deref()
                .is_none_or(|after| record.id.as_str() > after)
    }

    /// Whether `record` matches the filters, whatever the page: what
    /// [`CompensationStore::count`] counts.
    pub fn filters(&self, record: &ExecutionFailed) -> bool {
        self.status.is_none_or(|status| record.status == status)
            && self
                .consumer
                .as_deref()
                .is_none_or(|consumer| record.consumer == consumer)
            && self
                .tenant_id
                .as_deref()
                .is_none_or(|tenant| record.aggregate_id.tenant_id == tenant)
            && self
                .aggregate_name
                .as_deref()
                .is_none_or(|name| record.aggregate_id.aggregate_name == name)
            && self
                .aggregate_id
                .as_deref()
                .is_none_or(|id| record.aggregate_id.id == id)
            && self
                .recoverable
                .is_none_or(|recoverable| record.recoverable == recoverable)
    }
}

/// The durable records of failed consumer executions (SPEC DS-4): event compensation.
///
/// One record per (consumer, stream): a failure of the same consumer on the same stream
/// again adds an attempt to it. Every backend passes the `compensation` suite of `wow-tck`.
#[async_trait]
pub trait CompensationStore: Send + Sync + std::fmt::Debug {
    /// Records `failure` at `now`, and returns the record: a new one with one attempt, or the
    /// existing one of the same consumer and stream with one attempt more and the new error.
    /// Its status and next retry time follow `retry` ([`RetrySpec::after_failure`]).
    async fn record_failure(
        &self,
        failure: &FailedExecution,
        retry: &RetrySpec,
        now: i64,
    ) -> Result<ExecutionFailed, ConsumerStoreError>;

    /// Marks record `id` `SUCCEEDED` at `now` and returns it; `None` when there is no such
    /// record.
    async fn mark_succeeded(
        &self,
        id: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError>;

    /// Marks record `id` `SKIPPED` by operator `by` at `now` and returns it (SPEC DS-5); a
    /// record that already `SUCCEEDED` or was skipped is returned as it stands; `None` when
    /// there is no such record.
    async fn mark_skipped(
        &self,
        id: &str,
        by: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError>;

    /// Applies an operator's `edit` to record `id` as operator `by` at `now` ([`edited`]) and
    /// returns the record after it; `None` when there is no such record. The read and the
    /// write are one step against concurrent changes of the record.
    async fn edit(
        &self,
        id: &str,
        edit: &RecordEdit,
        by: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError>;

    /// Record `id`, if it exists.
    async fn get(&self, id: &str) -> Result<Option<ExecutionFailed>, ConsumerStoreError>;

    /// The records `query` selects, in id order (the order they were first recorded).
    async fn list(&self, query: &FailureQuery) -> Result<Vec<ExecutionFailed>, ConsumerStoreError>;

    /// How many records match `query`'s filters ([`FailureQuery::filters`]), whatever its
    /// page (`after_id` and `limit` are not read): the total a listing pages through.
    ///
    /// The default pages through [`list`](Self::list); a backend that can count where the
    /// records are (SQL `COUNT`) does so instead.
    async fn count(&self, query: &FailureQuery) -> Result<u64, ConsumerStoreError> {
        const PAGE: usize = 1_000;
        let mut page_query = FailureQuery {
            after_id: None,
            limit: PAGE,
            ..query.clone()
        };
        let mut total = 0_u64;
        loop {
            let page = self.list(&page_query).await?;
            total = total.saturating_add(u64::try_from(page.len()).unwrap_or(u64::MAX));
            match page.last() {
                Some(last) if page.len() == PAGE => page_query.after_id = Some(last.id.clone()),
                _ => return Ok(total),
            }
        }
    }

    /// Up to `limit` `FAILED` records whose retry time is at or before `now`, in aggregate
    /// and version order (so one aggregate's failures retry in history order); never one an
    /// operator marked `UNRECOVERABLE`.
    async fn due(&self, now: i64, limit: usize)
        -> Result<Vec<ExecutionFailed>, ConsumerStoreError>;
}

/// The new record of a first failure, or `existing` with one more failed attempt. Its status
/// and next retry time follow the existing record's own spec when an operator gave it one
/// ([`RecordEdit::RetrySpec`]), else `retry`.
pub fn next_record(
    existing: Option<ExecutionFailed>,
    failure: &FailedExecution,
    retry: &RetrySpec,
    now: i64,
) -> ExecutionFailed {
    let attempts = existing.as_ref().map_or(0, |record| record.attempts) + 1;
    let retry = existing
        .as_ref()
        .and_then(|record| record.retry_spec)
        .unwrap_or(*retry);
    let (status, next_retry_at) = retry.after_failure(attempts, now);
    match existing {
        Some(record) => ExecutionFailed {
            error_code: failure.error.code.clone(),
            error_message: failure.error.message.clone(),
            attempts,
            status,
            next_retry_at,
            updated_at: now,
            ..record
        },
        None => ExecutionFailed {
            id: wow_model::id::new_id(),
            consumer: failure.consumer.clone(),
            stage: failure.stage,
            aggregate_id: failure.aggregate_id.clone(),
            version: failure.version,
            stream_id: failure.stream_id.clone(),
            event_ids: failure.event_ids.clone(),
            error_code: failure.error.code.clone(),
            error_message: failure.error.message.clone(),
            attempts,
            status,
            next_retry_at,
            created_at: now,
            updated_at: now,
            skipped_by: None,
            retry_spec: None,
            recoverable: RecoverableType::Unknown,
            updated_by: None,
        },
    }
}

/// An operator's change of one record (see [`edited`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordEdit {
    /// The record's own retry spec from now on, instead of the service's.
    RetrySpec(RetrySpec),
    /// Whether a retry can succeed: an `UNRECOVERABLE` record is not retried by the
    /// scheduler (its status and next retry time are kept, for when it is marked otherwise).
    Recoverable(RecoverableType),
}

/// `record` after operator `by`'s `edit` at `now`; `updatedBy` and `updatedAt` say who and
/// when.
///
/// [`RecordEdit::RetrySpec`]: the spec is the record's; a record still to be retried
/// (`FAILED` or `EXHAUSTED`) is judged by it at once as after its last failure
/// ([`RetrySpec::after_failure`] of its attempts at `now`): `EXHAUSTED` when the new limit
/// allows no more attempts, else `FAILED` with its next retry the new backoff from `now` (an
/// `EXHAUSTED` record the new limit allows more of is retried again). A settled record keeps
/// its status.
///
/// [`RecordEdit::Recoverable`]: the record's `recoverable`; nothing else changes.
pub fn edited(record: ExecutionFailed, edit: &RecordEdit, by: &str, now: i64) -> ExecutionFailed {
    let record = ExecutionFailed {
        updated_at: now,
        updated_by: Some(by.to_owned()),
        ..record
    };
    match edit {
        RecordEdit::RetrySpec(spec) => {
            let (status, next_retry_at) = if record.status.is_settled() {
                (record.status, record.next_retry_at)
            } else {
                spec.after_failure(record.attempts, now)
            };
            ExecutionFailed {
                retry_spec: Some(*spec),
                status,
                next_retry_at,
                ..record
            }
        }
        RecordEdit::Recoverable(recoverable) => ExecutionFailed {
            recoverable: *recoverable,
            ..record
        },
    }
}

/// `record` marked succeeded at `now`.
pub fn succeeded(record: ExecutionFailed, now: i64) -> ExecutionFailed {
    ExecutionFailed {
        status: ExecutionFailedStatus::Succeeded,
        next_retry_at: None,
        updated_at: now,
        ..record
    }
}

/// `record` skipped by `by` at `now`, unless it is settled already (succeeded or skipped).
pub fn skipped(record: ExecutionFailed, by: &str, now: i64) -> ExecutionFailed {
    if record.status.is_settled() {
        return record;
    }
    ExecutionFailed {
        status: ExecutionFailedStatus::Skipped,
        next_retry_at: None,
        updated_at: now,
        skipped_by: Some(by.to_owned()),
        ..record
    }
}

/// Compensation records in memory: the reference for the durable versions.
#[derive(Debug, Default)]
pub struct InMemoryCompensationStore {
    records: Mutex<BTreeMap<String, ExecutionFailed>>,
}

impl InMemoryCompensationStore {
    /// No records.
    pub fn new() -> Self {
        Self::default()
    }
}

impl InMemoryCompensationStore {
    /// Re-keys the records of the aggregate named `from` to `to`; how many.
    pub(crate) fn rename(&self, from: &str, to: &str, dry_run: bool) -> u64 {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let mut rows = 0;
        for record in records.values_mut() {
            if record.aggregate_id.aggregate_name == from {
                rows += 1;
                if !dry_run {
                    record.aggregate_id.aggregate_name = to.to_owned();
                }
            }
        }
        rows
    }
}

#[async_trait]
impl CompensationStore for InMemoryCompensationStore {
    async fn record_failure(
        &self,
        failure: &FailedExecution,
        retry: &RetrySpec,
        now: i64,
    ) -> Result<ExecutionFailed, ConsumerStoreError> {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let existing = records
            .values()
            .find(|record| {
                record.consumer == failure.consumer && record.stream_id == failure.stream_id
            })
            .cloned();
        let record = next_record(existing, failure, retry, now);
        records.insert(record.id.clone(), record.clone());
        Ok(record)
    }

    async fn mark_succeeded(
        &self,
        id: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let Some(record) = records.remove(id) else {
            return Ok(None);
        };
        let record = succeeded(record, now);
        records.insert(record.id.clone(), record.clone());
        Ok(Some(record))
    }

    async fn mark_skipped(
        &self,
        id: &str,
        by: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let Some(record) = records.get_mut(id) else {
            return Ok(None);
        };
        *record = skipped(record.clone(), by, now);
        Ok(Some(record.clone()))
    }

    async fn edit(
        &self,
        id: &str,
        edit: &RecordEdit,
        by: &str,
        now: i64,
    ) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let Some(record) = records.get_mut(id) else {
            return Ok(None);
        };
        *record = edited(record.clone(), edit, by, now);
        Ok(Some(record.clone()))
    }

    async fn get(&self, id: &str) -> Result<Option<ExecutionFailed>, ConsumerStoreError> {
        Ok(self
            .records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned())
    }

    async fn list(&self, query: &FailureQuery) -> Result<Vec<ExecutionFailed>, ConsumerStoreError> {
        Ok(self
            .records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|record| query.matches(record))
            .take(query.limit)
            .cloned()
            .collect())
    }

    async fn count(&self, query: &FailureQuery) -> Result<u64, ConsumerStoreError> {
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let matching = records
            .values()
            .filter(|record| query.filters(record))
            .count();
        Ok(u64::try_from(matching).unwrap_or(u64::MAX))
    }

    async fn due(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<Vec<ExecutionFailed>, ConsumerStoreError> {
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let mut due: Vec<_> = records
            .values()
            .filter(|record| {
                record.status == ExecutionFailedStatus::Failed
                    && record.recoverable != RecoverableType::Unrecoverable
                    && record.next_retry_at.is_some_and(|at| at <= now)
            })
            .cloned()
            .collect();
        due.sort_by(due_order);
        due.truncate(limit);
        Ok(due)
    }
}

/// The order [`CompensationStore::due`] returns records in: by aggregate, then version,
/// then consumer.
pub fn due_order(a: &ExecutionFailed, b: &ExecutionFailed) -> std::cmp::Ordering {
    let key = |r: &ExecutionFailed| {
        (
            r.aggregate_id.aggregate_name.clone(),
            r.aggregate_id.id.clone(),
            r.version,
            r.consumer.clone(),
        )
    };
    key(a).cmp(&key(b))
}
