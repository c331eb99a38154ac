//! The authoritative look-up of a request by aggregate and request id (SPEC TO-1).

use crate::command::CommandGateway;
use wow_core::command::InTransit;
use wow_core::eventsourcing::RequestRecord;
use wow_core::eventsourcing::{EventStore, EventStoreError};
use wow_core::eventsourcing::{RejectionRecord, RequestDecision};
use wow_core::AggregateId;

/// What happened to a request, as far as a node can tell (SPEC TO-1).
#[derive(Debug)]
#[non_exhaustive]
pub enum RequestOutcome {
    /// Appended: the intent took effect in this stream. Never resend it as a new intent.
    Appended(RequestRecord),
    /// Rejected for good (SPEC ID-6): every resend gets this same answer.
    Rejected(RejectionRecord),
    /// In flight: this node's gateway sent it and its node has not decided yet, or the bus
    /// holds a message of it not yet decided (whichever gateway sent it): wait, then look
    /// again.
    InFlight,
    /// No decision is recorded, this node does not hold it, and the bus carries no message
    /// of it: a resend with the same request id is safe.
    None,
    /// The store (or the bus) could not be asked: keep the outcome unknown and escalate; never resend
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

/// Looks `request_id` of `aggregate_id` up: whether `gateway` holds it in flight, the
/// decision `store` recorded, and, when there is none, whether the bus still carries it.
///
/// The order matters. A request leaves the in-flight registry, and a message leaves a bus
/// that tracks its messages, only after its decision is durable. So the store is read
/// first; with no decision, a request held here or on the bus is
/// [`RequestOutcome::InFlight`]; one the bus does not hold may have been decided and taken
/// off between the two reads, so the store is read once more, and only then is the answer
/// [`RequestOutcome::None`]. A bus that cannot be asked makes the answer
/// [`RequestOutcome::Unknown`] (as [`EventStoreError::Unavailable`]), never `None`.
pub async fn look_up_request(
    gateway: &CommandGateway,
    store: &dyn EventStore,
    aggregate_id: &AggregateId,
    request_id: &str,
) -> RequestOutcome {
    let in_flight = gateway.is_in_flight(aggregate_id, request_id);
    match recorded(store, aggregate_id, request_id).await {
        Some(outcome) => return outcome,
        None if in_flight => return RequestOutcome::InFlight,
        None => {}
    }
    match gateway.bus_in_transit(aggregate_id, request_id).await {
        Ok(InTransit::Held) => RequestOutcome::InFlight,
        Ok(InTransit::Untracked) => RequestOutcome::None,
        Ok(InTransit::Absent) => recorded(store, aggregate_id, request_id)
            .await
            .unwrap_or(RequestOutcome::None),
        Err(error) => RequestOutcome::Unknown(EventStoreError::Unavailable(Box::new(error))),
    }
}

/// The decision `store` recorded as an outcome, `None` when there is none.
async fn recorded(
    store: &dyn EventStore,
    aggregate_id: &AggregateId,
    request_id: &str,
) -> Option<RequestOutcome> {
    match store.find_decision(aggregate_id, request_id).await {
        Ok(Some(RequestDecision::Appended(record))) => Some(RequestOutcome::Appended(record)),
        Ok(Some(RequestDecision::Rejected(record))) => Some(RequestOutcome::Rejected(record)),
        Ok(None) => None,
        Err(error) => Some(RequestOutcome::Unknown(error)),
    }
}
