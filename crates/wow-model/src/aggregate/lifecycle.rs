//! Wow's soft delete: the built-in commands that delete and recover an aggregate, the events
//! they record, who may send them ([`Lifecycle`]), and how consumers see them
//! ([`LifecycleEvent`]). A deleted aggregate keeps its history; it refuses every command but
//! `recover` with `IllegalAccessDeletedAggregate`.
//!
//! A deleted aggregate holds no unique keys and no deadlines (SPEC DM-6): the delete's append
//! releases the keys its state holds and cancels its deadlines, in the same atomic write as
//! its stream, and the recover's append claims them again and schedules the state's deadlines
//! anew (refused `DuplicateKey` when another aggregate took a key meanwhile).

use crate::event::DomainEventStream;

/// The command that deletes an aggregate softly (`DELETE /{aggregate}/{id}`).
pub const DELETE_AGGREGATE: &str = "default_delete_aggregate";
/// The command that recovers a deleted aggregate (`PUT /{aggregate}/{id}/recover`).
pub const RECOVER_AGGREGATE: &str = "default_recover_aggregate";
/// The event [`DELETE_AGGREGATE`] records.
pub const AGGREGATE_DELETED: &str = "DefaultAggregateDeleted";
/// The event [`RECOVER_AGGREGATE`] records.
pub const AGGREGATE_RECOVERED: &str = "DefaultAggregateRecovered";
/// The revision of both events.
pub const LIFECYCLE_REVISION: &str = "0.0.1";

/// Whether `name` is one of the built-in commands.
pub fn is_lifecycle_command(name: &str) -> bool {
    name == DELETE_AGGREGATE || name == RECOVER_AGGREGATE
}

/// Whether `name` is one of the built-in events (which no aggregate's `apply` sees).
pub fn is_lifecycle_event(name: &str) -> bool {
    name == AGGREGATE_DELETED || name == AGGREGATE_RECOVERED
}

/// Who may delete and recover the aggregates of a type: its
/// [`Aggregate::LIFECYCLE`](crate::aggregate::Aggregate::LIFECYCLE) (SPEC DM-6).
///
/// Sagas and in-process senders (the gateway's own callers, a deadline) are trusted code: they
/// may delete and recover under every policy but [`Lifecycle::Disabled`]. The other policies
/// restrict what reaches the aggregate over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Lifecycle {
    /// Any caller that may send the aggregate's commands may delete and recover it, through
    /// `DELETE /{aggregate}/{id}` and `PUT /{aggregate}/{id}/recover`. The default, as Wow has
    /// it.
    #[default]
    Public,
    /// Over HTTP only an operator: the request carries an operator token as its bearer token
    /// (not the operations page's cookie), and acts in the tenant its `Command-Tenant-Id`
    /// names. Without one the routes answer 401, with a tenant's token 403. With no token
    /// configured at all (auth off) they answer anyone, as the operator's other routes do.
    Operator,
    /// Not over HTTP at all: the routes refuse it as they refuse an internal command (404
    /// `NotFound`). Only sagas and in-process senders delete and recover.
    Internal,
    /// Nowhere: the HTTP routes answer 405 `LifecycleDisabled`, and a processing node refuses
    /// the commands from any sender with the same code. Nothing is recorded: the refusal
    /// follows the code, not a decision, so a later release that allows them decides afresh.
    Disabled,
}

impl Lifecycle {
    /// Whether a caller over HTTP may send the built-in commands at all (`Public` and
    /// `Operator`; the operator's token is checked apart).
    pub fn open_over_http(self) -> bool {
        matches!(self, Lifecycle::Public | Lifecycle::Operator)
    }

    /// Whether any sender may (every policy but `Disabled`).
    pub fn allowed(self) -> bool {
        self != Lifecycle::Disabled
    }
}

/// An aggregate's soft delete or recover as a consumer sees it (SPEC DM-6): a view's
/// [`on_lifecycle`](crate::view::View::on_lifecycle), a saga's
/// `on_lifecycle` (`wow_core::saga::Saga`) and an outbox's
/// [`lifecycle_rows`](crate::outbox::Outbox::lifecycle_rows) are given one for each
/// stream that deleted or recovered their aggregate. The stream stays in its place in the
/// aggregate's version order, so a consumer that drops a row on the delete sees the recover
/// after it, and nothing of the aggregate in between (a deleted aggregate takes no command).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LifecycleEvent {
    /// The aggregate was deleted softly ([`AGGREGATE_DELETED`]).
    AggregateDeleted,
    /// The aggregate was recovered ([`AGGREGATE_RECOVERED`]).
    AggregateRecovered,
}

impl LifecycleEvent {
    /// The built-in event named `name`, if it is one.
    pub fn of_event(name: &str) -> Option<Self> {
        match name {
            AGGREGATE_DELETED => Some(LifecycleEvent::AggregateDeleted),
            AGGREGATE_RECOVERED => Some(LifecycleEvent::AggregateRecovered),
            _ => None,
        }
    }

    /// The delete or recover `stream` records, if it records one: the last built-in event of
    /// its body (the node writes each alone in its stream).
    pub fn of_stream(stream: &DomainEventStream) -> Option<Self> {
        stream
            .body
            .iter()
            .rev()
            .find_map(|event| Self::of_event(&event.name))
    }

    /// The stored name of its event.
    pub fn event_name(self) -> &'static str {
        match self {
            LifecycleEvent::AggregateDeleted => AGGREGATE_DELETED,
            LifecycleEvent::AggregateRecovered => AGGREGATE_RECOVERED,
        }
    }

    /// Whether it leaves the aggregate deleted.
    pub fn deletes(self) -> bool {
        self == LifecycleEvent::AggregateDeleted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_events_are_read_back_from_their_names() {
        for event in [
            LifecycleEvent::AggregateDeleted,
            LifecycleEvent::AggregateRecovered,
        ] {
            assert_eq!(LifecycleEvent::of_event(event.event_name()), Some(event));
            assert!(is_lifecycle_event(event.event_name()));
        }
        assert_eq!(LifecycleEvent::of_event("Deposited"), None);
        assert!(LifecycleEvent::AggregateDeleted.deletes());
        assert!(!LifecycleEvent::AggregateRecovered.deletes());
    }

    #[test]
    fn only_public_and_operator_reach_http_and_only_disabled_refuses_everyone() {
        assert_eq!(Lifecycle::default(), Lifecycle::Public);
        let open: Vec<_> = [
            Lifecycle::Public,
            Lifecycle::Operator,
            Lifecycle::Internal,
            Lifecycle::Disabled,
        ]
        .into_iter()
        .map(|policy| (policy.open_over_http(), policy.allowed()))
        .collect();
        assert_eq!(
            open,
            vec![(true, true), (true, true), (false, true), (false, false)]
        );
    }
}
