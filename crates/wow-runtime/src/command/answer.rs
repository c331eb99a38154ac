//! What a wait answers when a step after the append failed: a caller must never read "failed"
//! for an intent that took effect.

use serde_json::json;

use crate::command::RECORDED;
use wow_core::command::{CommandResult, CommandStage};

/// The `result` key naming the stage whose failure the answer reports, when the command
/// itself was appended (`PROJECTED`, `EVENT_HANDLED`, `SAGA_HANDLED`, ...).
pub const FAILED_STAGE: &str = "failedStage";

/// The `result` key holding the command's own outcome when a later stage failed: `stage`
/// `PROCESSED`, `succeeded`, and the `aggregateVersion` appended.
pub const PROCESSED_OUTCOME: &str = "processed";

/// Makes `failed`, the failure of a stage after `PROCESSED` that ends a wait, say plainly
/// that the command was appended, given `processed`, the command's own successful
/// `PROCESSED` signal: `recorded: true`, the version appended, `processed` with the
/// command's own outcome and `failedStage`; the error code stays the failing step's (as Wow
/// answers it), and the message starts with what was appended. Anything else is left as it
/// is.
pub(crate) fn appended_then_failed(failed: &mut CommandResult, processed: &CommandResult) {
    let appended = processed.succeeded
        && processed.stage == CommandStage::Processed
        && processed.result.get(RECORDED) != Some(&serde_json::Value::Bool(false));
    if failed.succeeded || failed.stage <= CommandStage::Processed || !appended {
        return;
    }
    let version = processed.aggregate_version.or(failed.aggregate_version);
    failed.aggregate_version = version;
    failed.result.insert(RECORDED.to_owned(), true.into());
    failed.result.insert(
        PROCESSED_OUTCOME.to_owned(),
        json!({"stage": "PROCESSED", "succeeded": true, "aggregateVersion": version}),
    );
    failed
        .result
        .insert(FAILED_STAGE.to_owned(), failed.stage.as_str().into());
    let at = version.map_or_else(String::new, |v| format!(" at version {v}"));
    failed.error_msg = format!(
        "the command was appended{at} (PROCESSED); then {} failed: {}",
        failed.stage, failed.error_msg
    );
}
