//! The answers that record no stream: nothing to record, a rejection, the original decision
//! on a taken request id, an aggregate in quarantine.

use serde_json::{json, Value};

use crate::command::wait::RECORDED;
use wow_core::aggregate::QuarantinedAggregate;
use wow_core::aggregate::{AggregateError, AggregateState};
use wow_core::command::JsonCommand;
use wow_core::command::{decided_result, CommandResult, CommandStage, REJECTION_DETAIL};
use wow_core::eventsourcing::EventStoreError;
use wow_core::eventsourcing::{is_recorded_rejection, RejectionRecord, RequestDecision};
use wow_core::ErrorCode;

use super::{Attempt, DefaultCommandHandler, QUARANTINED};

impl DefaultCommandHandler {
    /// `Ok` with no events (SPEC RQ-13), unless history already holds a decision on this
    /// request id (SPEC ID-7): then that decision is the answer.
    pub(super) async fn nothing_recorded(
        &self,
        command: &JsonCommand,
        fingerprint: &str,
        state: AggregateState,
    ) -> Attempt {
        let version = state.version();
        self.cache.put(&command.aggregate_id, state);
        let answer = CommandResult::success(command, CommandStage::Processed)
            .with_version(version)
            .with_result(RECORDED, false);
        self.unless_decided_before(command, fingerprint, answer)
            .await
    }

    /// `answer`, an answer that records nothing, unless history already holds a decision on
    /// the request id (SPEC ID-7): then that decision is the answer. A message of an intent
    /// that was appended is never told "nothing happened" (a handler with no events, a
    /// version conflict), so its caller never gives the intent up, or sends it anew, while
    /// it is in history. When the store cannot be asked the answer says so: look it up.
    async fn unless_decided_before(
        &self,
        command: &JsonCommand,
        fingerprint: &str,
        answer: CommandResult,
    ) -> Attempt {
        match self
            .store
            .find_decision(&command.aggregate_id, &command.request_id)
            .await
        {
            Ok(Some(decision)) => {
                self.metrics.record_duplicate_by_store();
                Attempt::from(decided(command, fingerprint, &decision))
            }
            Ok(None) => Attempt::from(answer),
            Err(error) => {
                let mut unknown = CommandResult::failure(
                    command,
                    CommandStage::Processed,
                    error.error_code(),
                    format!(
                        "the command recorded nothing{}, and whether request id `{}` was decided before is unknown: {error}; look it up",
                        if answer.succeeded { String::new() } else { format!(" ({})", answer.error_code) },
                        command.request_id
                    ),
                );
                unknown.aggregate_version = answer.aggregate_version;
                Attempt::from(unknown)
            }
        }
    }

    /// Answers a rejection decided on a state at `version` (SPEC ID-6, ID-7): a final one is
    /// recorded under the request id's key first, and when that key already holds a decision
    /// (the intent was appended or rejected before) that decision is the answer. A rejection
    /// that cannot be recorded is answered as unavailable, never as final.
    pub(super) async fn reject(
        &self,
        command: &JsonCommand,
        fingerprint: &str,
        version: u64,
        error: &AggregateError,
        now: i64,
    ) -> Attempt {
        let rejected = aggregate_failure(command, error).with_version(version);
        self.record_rejected(command, fingerprint, version, rejected, now)
            .await
    }

    /// Records `rejected`, decided on `version`, as the decision on the command's request
    /// id when its code is one that is recorded (SPEC ID-6), and answers it; a rejection that
    /// is not a decision is answered as the earlier decision of the intent, if any.
    pub(super) async fn record_rejected(
        &self,
        command: &JsonCommand,
        fingerprint: &str,
        version: u64,
        rejected: CommandResult,
        now: i64,
    ) -> Attempt {
        if !is_recorded_rejection(&rejected.error_code) {
            // Not a decision (a version conflict, SPEC ES-3), so nothing to record; but the
            // intent may have been decided by an earlier message of it, which is the answer.
            return self
                .unless_decided_before(command, fingerprint, rejected)
                .await;
        }
        let record = RejectionRecord {
            command_id: command.id.clone(),
            fingerprint: fingerprint.to_owned(),
            error_code: rejected.error_code.clone(),
            error_msg: rejected.error_msg.clone(),
            version,
            create_time: now,
        };
        match self
            .store
            .record_rejection(&command.aggregate_id, &command.request_id, &record)
            .await
        {
            Ok(()) => Attempt::from(rejected),
            Err(EventStoreError::DuplicateRequestId(_)) => {
                self.metrics.record_duplicate_by_store();
                Attempt::from(self.duplicate(command, fingerprint).await)
            }
            Err(store) => Attempt::from(
                CommandResult::failure(
                    command,
                    CommandStage::Processed,
                    store.error_code(),
                    format!(
                        "rejected with {} ({}), but the decision could not be recorded: {store}; resend with the same request id",
                        rejected.error_code, rejected.error_msg
                    ),
                )
                .with_version(version),
            ),
        }
    }

    /// The original decision on a request id whose key was found taken (SPEC ES-4, ID-6).
    pub(super) async fn duplicate(
        &self,
        command: &JsonCommand,
        fingerprint: &str,
    ) -> CommandResult {
        match self
            .store
            .find_decision(&command.aggregate_id, &command.request_id)
            .await
        {
            Ok(Some(decision)) => decided(command, fingerprint, &decision),
            Ok(None) => CommandResult::failure(
                command,
                CommandStage::Processed,
                ErrorCode::DuplicateRequestId,
                format!("request id `{}` was recorded before", command.request_id),
            ),
            // Unknown which decision holds the key: saying `DuplicateRequestId` could hide a
            // rejection, saying a rejection could hide an append (found by wow-sim, seed 6).
            Err(error) => CommandResult::failure(
                command,
                CommandStage::Processed,
                error.error_code(),
                format!(
                    "request id `{}` was decided before, and the decision cannot be read: {error}; look it up",
                    command.request_id
                ),
            ),
        }
    }
}

/// The answer to `command` on the processing node when its request id already holds
/// `decision` (SPEC ID-6): the original decision, except when `decision` is this very
/// message's append (the same command id: a redelivery after the append and
/// before the acknowledgement, or a partition's new owner handling it again). A message is
/// never a duplicate of itself: that is answered as the success it was, at its version, so
/// the caller is never told that another command took its request id.
pub(super) fn decided(
    command: &JsonCommand,
    fingerprint: &str,
    decision: &RequestDecision,
) -> CommandResult {
    match decision {
        RequestDecision::Appended(record) if record.command_id == command.id => {
            CommandResult::success(command, CommandStage::Processed).with_version(record.version)
        }
        _ => decided_result(command, CommandStage::Processed, fingerprint, decision),
    }
}

/// The answer to `command` for an aggregate in quarantine: `InternalServerError`, with the
/// quarantine under [`QUARANTINED`]. Nothing was decided on the command.
pub(super) fn quarantined_result(
    command: &JsonCommand,
    quarantined: &QuarantinedAggregate,
) -> CommandResult {
    CommandResult::failure(
        command,
        CommandStage::Processed,
        ErrorCode::InternalServerError,
        format!(
            "aggregate {} is quarantined: its stream at version {} cannot be applied ({}); nothing was recorded for this command",
            quarantined.aggregate_id, quarantined.version, quarantined.message
        ),
    )
    .with_result(
        QUARANTINED,
        json!({
            "version": quarantined.version,
            "message": quarantined.message,
            "since": quarantined.since,
        }),
    )
}

/// The answer to a command its aggregate refused: the error's code and message, its binding
/// errors, and a domain rejection's fields under [`REJECTION_DETAIL`].
fn aggregate_failure(command: &JsonCommand, error: &AggregateError) -> CommandResult {
    let failure = CommandResult::failure(
        command,
        CommandStage::Processed,
        error.error_code(),
        error.to_string(),
    )
    .with_binding_errors(error.binding_errors());
    match error {
        AggregateError::Rejected { detail, .. } if !detail.is_empty() => {
            failure.with_result(REJECTION_DETAIL, Value::Object(detail.clone()))
        }
        _ => failure,
    }
}
