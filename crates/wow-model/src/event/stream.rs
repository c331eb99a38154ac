//! Domain events and the stream one command appends.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::aggregate_id::AggregateId;
use crate::command::EventBody;

/// One domain event as stored: its id, name, schema revision and JSON body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainEvent {
    /// The event's id, unique across the store (time-ordered).
    pub id: String,
    /// The event's stable name.
    pub name: String,
    /// The event's schema revision.
    pub revision: String,
    /// The event's payload.
    pub body: Value,
}

impl DomainEvent {
    /// A stored event for a typed event, with a fresh id.
    pub fn of<E: EventBody>(event: &E) -> Result<Self, serde_json::Error> {
        Ok(Self {
            id: crate::id::new_id(),
            name: event.event_name().to_owned(),
            revision: event.revision().to_owned(),
            body: event.to_body()?,
        })
    }

    /// The typed event this stored event holds.
    pub fn decode<E: EventBody>(&self) -> Result<E, crate::command::BodyDecodeError> {
        E::from_body(&self.name, &self.body)
    }
}

/// All the events one command produced, appended as one unit at one version.
///
/// In JSON the fields follow Wow: `id`, `requestId`, `commandId`, `aggregateId`,
/// `aggregateName`, `contextName`, `tenantId`, `version`, `createTime`, `body` (the events),
/// plus our `fingerprint` and `header`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainEventStream {
    /// The stream's id.
    pub id: String,
    /// The request id of the command that produced it; unique within the aggregate.
    pub request_id: String,
    /// The command id of the message that produced it.
    pub command_id: String,
    /// The aggregate it belongs to.
    #[serde(flatten)]
    pub aggregate_id: AggregateId,
    /// The aggregate version this stream creates (1 for the create).
    pub version: u64,
    /// When the stream was made, in milliseconds since the Unix epoch.
    pub create_time: i64,
    /// The request fingerprint (SPEC ID-5) of the command that produced it.
    pub fingerprint: String,
    /// Headers carried over from the command.
    #[serde(default)]
    pub header: BTreeMap<String, String>,
    /// The events, in order; never empty.
    pub body: Vec<DomainEvent>,
}

impl DomainEventStream {
    /// Whether this stream creates its aggregate.
    pub fn is_initial(&self) -> bool {
        self.version == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_with_wow_field_names() {
        let stream = DomainEventStream {
            id: "s-1".into(),
            request_id: "r-1".into(),
            command_id: "c-1".into(),
            aggregate_id: AggregateId::new("bank", "account", "a-1", "t1"),
            version: 1,
            create_time: 42,
            fingerprint: "f".into(),
            header: BTreeMap::new(),
            body: vec![DomainEvent {
                id: "e-1".into(),
                name: "AccountOpened".into(),
                revision: "0.0.1".into(),
                body: serde_json::json!({"name": "Ann"}),
            }],
        };
        let json = serde_json::to_value(&stream).unwrap();
        for field in [
            "id",
            "requestId",
            "commandId",
            "aggregateId",
            "aggregateName",
            "contextName",
            "tenantId",
            "version",
            "createTime",
            "body",
        ] {
            assert!(json.get(field).is_some(), "missing field {field}");
        }
        assert_eq!(json["aggregateId"], "a-1");
        assert_eq!(json["body"][0]["name"], "AccountOpened");
        let back: DomainEventStream = serde_json::from_value(json).unwrap();
        assert_eq!(back, stream);
    }
}
