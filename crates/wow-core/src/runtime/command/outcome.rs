//! The authoritative look-up of a request by aggregate and request id (SPEC TO-1).

use crate::contracts::eventsourcing::{EventStore, EventStoreError};
use crate::model::aggregate_id::AggregateId;
use crate::model::eventsourcing::RequestRecord;
use crate::model::eventsourcing::{RejectionRecord, RequestDecision};
use crate::runtime::command::CommandGateway;

/// What happened to a request, as far as a node can tell (SPEC TO-1).
#[derive(Debug)]
#[non_exhaustive]
pub enum RequestOutcome {
    /// Appended: the intent took effect in this stream. Never resend it as a new intent.
    Appended(RequestRecord),
    /// Rejected for good (SPEC ID-6): every resend gets this same answer.
    Rejected(RejectionRecord),
    /// This node holds it in flight (its gateway sent it and its node has not decided yet):
    /// wait, then look again.
    InFlight,
    /// No decision is recorded and this node does not hold it: a resend with the same
    /// request id is safe.
    None,
    /// The store could not be asked: keep the outcome unknown and escalate; never resend
    /// under a new request id.
    Unknown(EventStoreError),
}

impl RequestOutcome {
    /// The look-up's status name: `APPENDED`, `REJECTED`, `IN_FLIGHT`, `NONE` or `UNKNOWN`.
    pub fn status(&self) -> &'static str {
        match self {
            RequestOutcome::Appended(_) => "APPENDED",
            RequestOutcome::Rejected(_) => "REJECTED",
            RequestOutcome::InFlight => "IN_FLIGHT",
            RequestOutcome::None => "NONE",
            RequestOutcome::Unknown(_) => "UNKNOWN",
        }
    }
}

/// Looks `request_id` of `aggregate_id` up: first whether `gateway` holds it in flight, then
/// the decision `store` recorded.
///
/// The order matters: a request leaves the in-flight registry only after its decision is
/// durable, so a request not in flight that has no recorded decision was never decided; a
/// look-up never answers [`RequestOutcome::None`] for a request this node holds in flight.
pub async fn look_up_request(
    gateway: &CommandGateway,
    store: &dyn EventStore,
    aggregate_id: &AggregateId,
    request_id: &str,
) -> RequestOutcome {
    let in_flight = gateway.is_in_flight(aggregate_id, request_id);
    match store.find_decision(aggregate_id, request_id).await {
        Ok(Some(RequestDecision::Appended(record))) => RequestOutcome::Appended(record),
        Ok(Some(RequestDecision::Rejected(record))) => RequestOutcome::Rejected(record),
        Ok(None) if in_flight => RequestOutcome::InFlight,
        Ok(None) => RequestOutcome::None,
        Err(error) => RequestOutcome::Unknown(error),
    }
}
