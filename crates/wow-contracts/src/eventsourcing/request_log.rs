//! The request log: the one decision recorded per request id of an aggregate (SPEC ID-6,
//! ES-5, TO-1).

use async_trait::async_trait;

use crate::eventsourcing::EventStoreError;
use wow_model::aggregate_id::AggregateId;
use wow_model::eventsourcing::{RejectionRecord, RequestDecision, RequestRecord};

/// The decisions a store records per (aggregate, request id): each appended stream, and each
/// final rejection, under one unique key, so that a request id is decided once.
#[async_trait]
pub trait RequestLog: Send + Sync + std::fmt::Debug {
    /// The record of the stream that holds `request_id` within `aggregate_id`, if one was
    /// appended (SPEC ES-5, RQ-6). A recorded rejection is not a stream: see
    /// [`RequestLog::find_decision`](crate::eventsourcing::RequestLog::find_decision). Another aggregate's use of the same value is not seen.
    async fn find_request(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestRecord>, EventStoreError> {
        Ok(self
            .find_decision(aggregate_id, request_id)
            .await?
            .and_then(RequestDecision::appended))
    }

    /// The decision recorded for `request_id` within `aggregate_id` (SPEC ID-6, TO-1): its
    /// appended stream, its recorded rejection, or `None` when no decision was recorded (a
    /// resend with that request id is safe). One indexed read. A decision made under
    /// another tenant is not seen (SPEC TN-1): it answers `None`.
    async fn find_decision(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
    ) -> Result<Option<RequestDecision>, EventStoreError>;

    /// Records `rejection` as the final decision on `request_id` within `aggregate_id`
    /// (SPEC ID-6), under the same unique key as appended streams: from then on an append
    /// of a stream with that request id fails with [`EventStoreError::DuplicateRequestId`].
    ///
    /// Fails with [`EventStoreError::DuplicateRequestId`] when the key already holds a
    /// decision (a stream, or an earlier rejection): the store's own constraint decides
    /// which came first, also when a rejection and an append race. Look the winner up with
    /// [`RequestLog::find_decision`](crate::eventsourcing::RequestLog::find_decision). An empty request id is
    /// [`EventStoreError::IllegalArgument`].
    async fn record_rejection(
        &self,
        aggregate_id: &AggregateId,
        request_id: &str,
        rejection: &RejectionRecord,
    ) -> Result<(), EventStoreError>;
}
