//! Recording a decision that appends: the stream, the append, applying it to the cached
//! state, publication; and quarantine when history cannot be applied (SPEC PX-1).

use std::sync::Arc;

use crate::command::wait::RECORDED;
use wow_core::aggregate::AggregateState;
use wow_core::aggregate::{AggregateRuntime, QuarantinedAggregate};
use wow_core::command::CommandStage as Stage;
use wow_core::command::JsonCommand;
use wow_core::command::{CommandResult, CommandStage};
use wow_core::compensation::{FailedExecution, AGGREGATE_PROCESSOR};
use wow_core::event::ConsumerError;
use wow_core::event::{DomainEvent, DomainEventStream};
use wow_core::eventsourcing::AppendChanges;
use wow_core::eventsourcing::EventStoreError;
use wow_core::AggregateId;
use wow_core::ErrorCode;

use super::answers::quarantined_result;
use super::{Attempt, DefaultCommandHandler, QUARANTINED};

/// The message of a `DuplicateKey` refusal (SPEC DM-1): the key and that it is taken, not
/// who holds it (an operator finds the holder by `find_key`).
fn duplicate_key_message(key: &wow_core::unique_key::UniqueKey) -> String {
    format!("{key} is held by another aggregate")
}

impl DefaultCommandHandler {
    /// The stream of `events` deciding `command` on the state at `version`.
    pub(super) fn stream_of(
        &self,
        command: &JsonCommand,
        fingerprint: &str,
        version: u64,
        mut events: Vec<DomainEvent>,
        now: i64,
    ) -> DomainEventStream {
        if self.ids_name_events {
            for event in &mut events {
                event.id = self.ids.next_id();
            }
        }
        DomainEventStream {
            id: self.ids.next_id(),
            request_id: command.request_id.clone(),
            command_id: command.id.clone(),
            aggregate_id: command.aggregate_id.clone(),
            version: version + 1,
            create_time: now,
            fingerprint: fingerprint.to_owned(),
            header: command.header.clone(),
            body: events,
        }
    }

    /// Appends `stream`: `None` when it is appended, else the answer (the original decision
    /// on a taken request id) or `Retry` (history moved under the decision: SPEC ES-3, ID-7;
    /// a pinned version or a create then meets its rule on the reloaded state).
    pub(super) async fn append(
        &self,
        command: &JsonCommand,
        fingerprint: &str,
        stream: &DomainEventStream,
        changes: &AppendChanges,
    ) -> Option<Attempt> {
        // A decision that changes no key and no deadline is a plain append, so every
        // decorator of `append` behaves as before.
        let appended = if changes.is_empty() {
            self.store.append(stream).await
        } else {
            self.store.append_with(stream, changes).await
        };
        match appended {
            Ok(()) => {
                if changes.schedules_a_deadline() {
                    if let Some(signal) = &self.deadlines_scheduled {
                        signal.notify_one();
                    }
                }
                None
            }
            // SPEC DM-1: another aggregate holds a key the decision claims. Checked after
            // the version, so the state was current: the refusal is the decision. Its
            // message names the key, never the holder: it is recorded and answered to every
            // later sender of the request id, whatever owner or space it is bound to (TN-2).
            Err(EventStoreError::DuplicateKey(taken)) => {
                let rejected = CommandResult::failure(
                    command,
                    CommandStage::Processed,
                    ErrorCode::DuplicateKey,
                    duplicate_key_message(&taken.holder.key),
                )
                .with_version(stream.version - 1);
                let now = self.clock.now_millis();
                Some(
                    self.record_rejected(command, fingerprint, stream.version - 1, rejected, now)
                        .await,
                )
            }
            Err(EventStoreError::DuplicateRequestId(_)) => {
                self.metrics.record_duplicate_by_append();
                Some(Attempt::from(self.duplicate(command, fingerprint).await))
            }
            // SPEC ES-3, DM-5: decided on a state (its own, or another aggregate's it read)
            // that history has passed: decided again on fresh state, never recorded.
            Err(
                EventStoreError::EventVersionConflict(_)
                | EventStoreError::DuplicateAggregateId(_)
                | EventStoreError::ConditionFailed(_),
            ) => Some(Attempt::Retry),
            Err(error) => Some(Attempt::from(CommandResult::failure(
                command,
                CommandStage::Processed,
                error.error_code(),
                error.to_string(),
            ))),
        }
    }

    /// Applies the appended `stream` to `state` and caches it; the answer to give. When it
    /// does not apply (SPEC PX-1) the append stands (history is the truth), the half-applied
    /// state is dropped and the aggregate quarantined: the answer is a failure that says the
    /// intent was appended, at which version.
    pub(super) async fn apply_appended(
        &self,
        runtime: &dyn AggregateRuntime,
        command: &JsonCommand,
        mut state: AggregateState,
        stream: &DomainEventStream,
    ) -> CommandResult {
        let (aggregate_id, version) = (&command.aggregate_id, stream.version);
        let appended = CommandResult::success(command, CommandStage::Processed)
            .with_version(version)
            .with_result(RECORDED, true);
        let error = match runtime.apply(&mut state, stream) {
            Ok(()) => {
                self.cache.put(aggregate_id, state);
                return appended;
            }
            Err(error) => error,
        };
        let Some((owner, failed_version, message)) = error.unappliable_history() else {
            tracing::error!(%aggregate_id, %error, "appended stream does not apply; state evicted");
            return appended;
        };
        let quarantined = self
            .quarantine_on(owner, failed_version, message, Some(stream))
            .await;
        let mut answer = quarantined_result(command, &quarantined)
            .with_version(version)
            .with_result(RECORDED, true);
        answer.error_msg = format!(
            "appended at version {version}, but the aggregate cannot apply it ({}); the aggregate is quarantined",
            quarantined.message
        );
        answer
    }

    /// Publishes the appended `stream`; `appended` is the answer, unless publishing fails:
    /// then the failure says that the append happened, with its version (SPEC ST-4).
    pub(super) async fn publish(
        &self,
        command: &JsonCommand,
        stream: DomainEventStream,
        mut appended: CommandResult,
    ) -> Attempt {
        let version = stream.version;
        let Err(error) = self.events.publish(Arc::new(stream)).await else {
            return Attempt::from(appended);
        };
        let mut failed = CommandResult::failure(
            command,
            CommandStage::Processed,
            ErrorCode::ServiceUnavailable,
            format!("appended at version {version}, but publishing failed: {error}"),
        )
        .with_version(version)
        .with_result(RECORDED, true);
        if let Some(quarantined) = appended.result.remove(QUARANTINED) {
            failed.result.insert(QUARANTINED.to_owned(), quarantined);
        }
        Attempt::from(failed)
    }

    /// Quarantines `aggregate_id`, whose stream at `version` cannot be applied for the reason
    /// `message` (SPEC PX-1), and records it for compensation. `stream` is the failing stream
    /// when it is at hand (after an append); else it is read back from the store, and when
    /// that read fails the record names the stream `{aggregate_id}#{version}` instead of by
    /// its id (a retry reloads the aggregate and needs no stream). A record that cannot be
    /// written is logged: the quarantine holds all the same, and the next process records it
    /// again on the aggregate's first command.
    pub(super) async fn quarantine_on(
        &self,
        aggregate_id: &AggregateId,
        version: u64,
        message: &str,
        stream: Option<&DomainEventStream>,
    ) -> QuarantinedAggregate {
        self.cache.evict(aggregate_id);
        let now = self.clock.now_millis();
        let quarantined = self
            .quarantine
            .quarantine(aggregate_id, version, message, now);
        tracing::error!(%aggregate_id, version, error = %quarantined.message, "aggregate quarantined: its history cannot be applied");
        let Some((store, retry)) = &self.compensation else {
            return quarantined;
        };
        let read;
        let stream = match stream {
            Some(stream) => Some(stream),
            None => {
                read = self.store.load(aggregate_id, version, version).await;
                read.as_ref().ok().and_then(|streams| streams.first())
            }
        };
        let failure_error = ConsumerError::internal(quarantined.message.clone());
        let failure = match stream {
            Some(stream) => {
                FailedExecution::of(AGGREGATE_PROCESSOR, Stage::Processed, stream, failure_error)
            }
            None => FailedExecution {
                consumer: AGGREGATE_PROCESSOR.to_owned(),
                stage: Stage::Processed,
                aggregate_id: aggregate_id.clone(),
                version,
                stream_id: format!("{aggregate_id}#{version}"),
                event_ids: Vec::new(),
                error: failure_error,
            },
        };
        if let Err(error) = store.record_failure(&failure, retry, now).await {
            tracing::error!(%aggregate_id, version, %error, "could not record the quarantine for compensation");
        }
        quarantined
    }
}
