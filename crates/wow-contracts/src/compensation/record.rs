//! The record of a failed consumer execution.

use serde::{Deserialize, Serialize};

use crate::compensation::RetrySpec;
use crate::event::ConsumerError;
use wow_model::aggregate_id::AggregateId;
use wow_model::command::CommandStage;
use wow_model::error_code::ErrorCode;
use wow_model::event::DomainEventStream;

/// Where a failed execution stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ExecutionFailedStatus {
    /// Failed; the scheduler retries it at `next_retry_at`.
    Failed,
    /// Failed as many times as the retry spec allows; only a manual retry runs it again.
    Exhausted,
    /// A retry succeeded; nothing is left to do.
    Succeeded,
    /// An operator skipped it (SPEC DS-5): it is not retried, and the streams parked behind
    /// it ran; `skippedBy` names the operator, `updatedAt` says when.
    Skipped,
}

impl ExecutionFailedStatus {
    /// The status's name as stored and shown (`FAILED`, `EXHAUSTED`, `SUCCEEDED`).
    pub fn as_str(&self) -> &'static str {
        match self {
            ExecutionFailedStatus::Failed => "FAILED",
            ExecutionFailedStatus::Exhausted => "EXHAUSTED",
            ExecutionFailedStatus::Succeeded => "SUCCEEDED",
            ExecutionFailedStatus::Skipped => "SKIPPED",
        }
    }

    /// Whether nothing is left to do: the record `SUCCEEDED` or was `SKIPPED`.
    pub fn is_settled(self) -> bool {
        matches!(self, Self::Succeeded | Self::Skipped)
    }

    /// The status named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Failed,
            Self::Exhausted,
            Self::Succeeded,
            Self::Skipped,
        ]
        .into_iter()
        .find(|status| status.as_str() == name)
    }
}

/// Whether a failed execution can succeed on a retry, as an operator judges it (Wow's
/// `RecoverableType`): the scheduler does not retry an `UNRECOVERABLE` record by itself (a
/// manual retry still runs it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RecoverableType {
    /// A retry can succeed: the scheduler retries it.
    Recoverable,
    /// No retry will succeed (a bug to fix first, a stream to skip): the scheduler leaves it
    /// alone; only a manual retry runs it.
    Unrecoverable,
    /// Not judged (every record until an operator marks it): the scheduler retries it.
    #[default]
    Unknown,
}

impl RecoverableType {
    /// The name as stored and shown (`RECOVERABLE`, `UNRECOVERABLE`, `UNKNOWN`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Recoverable => "RECOVERABLE",
            Self::Unrecoverable => "UNRECOVERABLE",
            Self::Unknown => "UNKNOWN",
        }
    }

    /// The type named `name` (exactly as [`as_str`](Self::as_str) writes it), if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Recoverable, Self::Unrecoverable, Self::Unknown]
            .into_iter()
            .find(|kind| kind.as_str() == name)
    }
}

/// One consumer's failure on one appended stream, kept durably until a retry succeeds
/// (SPEC DS-4). History is never touched: a retry runs the same consumer on the same stream
/// again, read back from the event store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionFailed {
    /// The record's id.
    pub id: String,
    /// The consumer (projection, event processor or saga) that failed, or
    /// [`AGGREGATE_PROCESSOR`] for a quarantined aggregate.
    pub consumer: String,
    /// The consumer's stage: `PROJECTED`, `EVENT_HANDLED` or `SAGA_HANDLED`; `PROCESSED`
    /// for a quarantined aggregate ([`AGGREGATE_PROCESSOR`]).
    pub stage: CommandStage,
    /// The aggregate whose stream it failed on.
    pub aggregate_id: AggregateId,
    /// The version of that stream.
    pub version: u64,
    /// The stream's id (the message id its processed-message record uses).
    pub stream_id: String,
    /// The ids of the stream's events.
    pub event_ids: Vec<String>,
    /// The last failure's code.
    pub error_code: ErrorCode,
    /// The last failure's message.
    pub error_message: String,
    /// How many executions failed.
    pub attempts: u32,
    /// Where it stands.
    pub status: ExecutionFailedStatus,
    /// When the scheduler retries it (milliseconds since the Unix epoch); `None` unless
    /// `FAILED`.
    pub next_retry_at: Option<i64>,
    /// When the first failure was recorded.
    pub created_at: i64,
    /// When the record last changed.
    pub updated_at: i64,
    /// The operator who skipped it (status `SKIPPED`), as their token names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_by: Option<String>,
    /// The record's own retry spec, an operator's edit: its next retries follow it instead
    /// of the service's (`None`: the service's). Shown as `retrySpec`,
    /// `{"maxAttempts", "initialBackoffMs", "maxBackoffMs"}`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::compensation::retry::camel_option"
    )]
    pub retry_spec: Option<RetrySpec>,
    /// Whether a retry can succeed, as an operator judged it (`UNKNOWN` until one does); the
    /// scheduler does not retry an `UNRECOVERABLE` record by itself.
    #[serde(default)]
    pub recoverable: RecoverableType,
    /// The operator who last edited the record (its retry spec or recoverability), as their
    /// token names them; `updatedAt` says when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_by: Option<String>,
}

/// The consumer name of the records a processing node makes when it quarantines an aggregate
/// whose history it cannot apply (SPEC PX-1); their stage is `PROCESSED` and their stream the
/// one that failed. Listing `/compensation/failures?consumer=wow.aggregate_processor` shows
/// every quarantine; retrying one loads the aggregate again and, when that succeeds, lifts
/// its quarantine (see `wow_core::aggregate::QuarantinedAggregates`).
pub const AGGREGATE_PROCESSOR: &str = "wow.aggregate_processor";

/// One failed execution, as the dispatcher reports it to the compensation store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedExecution {
    /// The consumer that failed.
    pub consumer: String,
    /// Its stage.
    pub stage: CommandStage,
    /// The aggregate of the stream.
    pub aggregate_id: AggregateId,
    /// The stream's version.
    pub version: u64,
    /// The stream's id.
    pub stream_id: String,
    /// The ids of the stream's events.
    pub event_ids: Vec<String>,
    /// The failure.
    pub error: ConsumerError,
}

impl FailedExecution {
    /// `consumer` (of `stage`) failed on `stream` with `error`.
    pub fn of(
        consumer: &str,
        stage: CommandStage,
        stream: &DomainEventStream,
        error: ConsumerError,
    ) -> Self {
        Self {
            consumer: consumer.to_owned(),
            stage,
            aggregate_id: stream.aggregate_id.clone(),
            version: stream.version,
            stream_id: stream.id.clone(),
            event_ids: stream.body.iter().map(|event| event.id.clone()).collect(),
            error,
        }
    }
}
