//! A gateway whose stage signals cross a network can lose one: the processor that appended a
//! command is killed before its `PROCESSED` signal leaves, or the NATS server restarts with
//! the signal in flight. The node's decision is in the store all the same, so a caller
//! waiting for `PROCESSED` that has heard nothing for a while has the gateway look the
//! command up there, and is answered from what the store recorded for it (SPEC TO-1: the
//! outcome is found, not waited out).

use std::sync::Arc;
use std::time::Duration;

use wow_core::command::{CommandResult, CommandStage};
use wow_core::eventsourcing::RequestDecision;
use wow_core::id::{Clock, IdGenerator};
use wow_core::AggregateId;

use crate::command::RECORDED;
use crate::idempotency::RequestIdExistenceChecker;

/// How long a caller waits for `PROCESSED` before the gateway first looks in the store.
pub(crate) const LOST_SIGNAL_LOOK_UP_AFTER: Duration = Duration::from_secs(2);

/// How often it looks again while nothing is found.
pub(crate) const LOST_SIGNAL_LOOK_UP_EVERY: Duration = Duration::from_secs(1);

/// Where a gateway looks a command up when its `PROCESSED` signal is late.
#[derive(Debug, Clone)]
pub(crate) struct LostSignals {
    existence: Arc<dyn RequestIdExistenceChecker>,
}

impl LostSignals {
    /// Looks commands up in `existence` (the store's request log).
    pub(crate) fn new(existence: Arc<dyn RequestIdExistenceChecker>) -> Self {
        Self { existence }
    }

    /// The `PROCESSED` result of the command `sent` answers, when the store holds a decision
    /// made on that very command (its command id): appended at a version, or a recorded
    /// rejection. `None` when the store holds nothing for it yet, holds another command's
    /// decision on its request id (the node answers that one as a duplicate), or cannot be
    /// asked.
    pub(crate) async fn decided(
        &self,
        sent: &CommandResult,
        clock: &dyn Clock,
        ids: &dyn IdGenerator,
    ) -> Option<CommandResult> {
        let aggregate_id = AggregateId::new(
            sent.context_name.as_str(),
            sent.aggregate_name.as_str(),
            sent.aggregate_id.as_str(),
            sent.tenant_id.as_str(),
        );
        let decision = match self.existence.find(&aggregate_id, &sent.request_id).await {
            Ok(decision) => decision?,
            Err(error) => {
                tracing::debug!(%aggregate_id, request_id = %sent.request_id, %error, "a late signal's command could not be looked up");
                return None;
            }
        };
        let mut result = sent.clone();
        result.id = ids.next_id();
        result.stage = CommandStage::Processed;
        result.function = None;
        result.signal_time = clock.now_millis();
        match decision {
            RequestDecision::Appended(record) if record.command_id == sent.command_id => {
                result.aggregate_version = Some(record.version);
                result.result.insert(RECORDED.to_owned(), true.into());
            }
            RequestDecision::Rejected(record) if record.command_id == sent.command_id => {
                result.aggregate_version = Some(record.version);
                result.error_code = record.error_code;
                result.error_msg = record.error_msg;
                result.succeeded = false;
            }
            _ => return None,
        }
        tracing::info!(%aggregate_id, request_id = %result.request_id, version = ?result.aggregate_version, "no PROCESSED signal came; answered from the store's record of the command");
        Some(result)
    }
}
