//! The result of one stage of one command, as callers and HTTP see it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::aggregate_id::AggregateId;
use crate::command::{BindingError, CommandMessage, CommandStage, FunctionInfo};
use crate::error_code::ErrorCode;
use crate::id::{self, Clock, IdGenerator};

/// What one stage of a command came to (SPEC ID-4, RS-1).
///
/// Every result, success or failure, carries the aggregate's identity, the command id, the
/// request id, the stage, and an error code (`Ok` on success). In JSON the fields are camelCase
/// as in the HTTP contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandResult {
    /// This result's own id.
    pub id: String,
    /// The command id of the wait this result answers.
    pub wait_command_id: String,
    /// The stage this result reports.
    pub stage: CommandStage,
    /// The consumer (projection, processor, saga) that reports, for a per-consumer signal;
    /// absent for the signal that a whole stage is complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionInfo>,
    /// The aggregate's bounded context.
    pub context_name: String,
    /// The aggregate's type name.
    pub aggregate_name: String,
    /// The aggregate's tenant.
    pub tenant_id: String,
    /// The aggregate's id.
    pub aggregate_id: String,
    /// The aggregate's version after the command, when known (for a duplicate, the original
    /// stream's version).
    pub aggregate_version: Option<u64>,
    /// The caller's request id.
    pub request_id: String,
    /// The command id of the message.
    pub command_id: String,
    /// `Ok`, or what went wrong.
    pub error_code: ErrorCode,
    /// A message for a person; never match on it.
    pub error_msg: String,
    /// The fields that failed validation.
    pub binding_errors: Vec<BindingError>,
    /// What the stages so far add (for example `originalCommandId` of a duplicate).
    pub result: Map<String, Value>,
    /// When the stage was signalled, in milliseconds since the Unix epoch.
    pub signal_time: i64,
    /// Whether the stage succeeded.
    pub succeeded: bool,
}

impl CommandResult {
    /// The JSON field names every `CommandResult` carries (docs/http-api.md), in the order the
    /// design lists them: what a client of any language may rely on finding.
    pub const JSON_FIELDS: [&'static str; 16] = [
        "id",
        "waitCommandId",
        "stage",
        "contextName",
        "aggregateName",
        "tenantId",
        "aggregateId",
        "aggregateVersion",
        "requestId",
        "commandId",
        "errorCode",
        "errorMsg",
        "bindingErrors",
        "result",
        "signalTime",
        "succeeded",
    ];

    /// A successful result of `stage` for `command`.
    pub fn success<B>(command: &CommandMessage<B>, stage: CommandStage) -> Self {
        Self::for_ids(
            &command.aggregate_id,
            &command.id,
            &command.request_id,
            stage,
            ErrorCode::Ok,
            String::new(),
        )
    }

    /// A failed result of `stage` for `command`.
    pub fn failure<B>(
        command: &CommandMessage<B>,
        stage: CommandStage,
        error_code: ErrorCode,
        error_msg: impl Into<String>,
    ) -> Self {
        Self::for_ids(
            &command.aggregate_id,
            &command.id,
            &command.request_id,
            stage,
            error_code,
            error_msg.into(),
        )
    }

    /// A result of `stage` for the command `command_id` / `request_id` of `aggregate_id`;
    /// it succeeded when `error_code` is `Ok`.
    pub fn for_ids(
        aggregate_id: &AggregateId,
        command_id: &str,
        request_id: &str,
        stage: CommandStage,
        error_code: ErrorCode,
        error_msg: String,
    ) -> Self {
        Self {
            id: id::new_id(),
            wait_command_id: command_id.to_owned(),
            stage,
            function: None,
            context_name: aggregate_id.context_name.clone(),
            aggregate_name: aggregate_id.aggregate_name.clone(),
            tenant_id: aggregate_id.tenant_id.clone(),
            aggregate_id: aggregate_id.id.clone(),
            aggregate_version: None,
            request_id: request_id.to_owned(),
            command_id: command_id.to_owned(),
            succeeded: error_code.is_ok(),
            error_code,
            error_msg,
            binding_errors: Vec::new(),
            result: Map::new(),
            signal_time: id::now_millis(),
        }
    }

    /// This result with its id and signal time from `ids` and `clock`: how a runtime
    /// component wired with its own time and ids stamps what it signals. The
    /// process defaults made this result's own at construction, so they are kept as they
    /// are (no second id is made).
    pub fn stamped(mut self, clock: &dyn Clock, ids: &dyn IdGenerator) -> Self {
        if !ids.is_process_default() {
            self.id = ids.next_id();
        }
        if !clock.is_process_default() {
            self.signal_time = clock.now_millis();
        }
        self
    }

    /// Sets the aggregate version.
    pub fn with_version(mut self, version: u64) -> Self {
        self.aggregate_version = Some(version);
        self
    }

    /// Sets the binding errors.
    pub fn with_binding_errors(mut self, errors: Vec<BindingError>) -> Self {
        self.binding_errors = errors;
        self
    }

    /// Names the consumer that reports.
    pub fn with_function(mut self, function: FunctionInfo) -> Self {
        self.function = Some(function);
        self
    }

    /// Adds one entry to `result`.
    pub fn with_result(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.result.insert(key.into(), value.into());
        self
    }

    /// The aggregate the result is about.
    pub fn aggregate(&self) -> AggregateId {
        AggregateId::new(
            self.context_name.clone(),
            self.aggregate_name.clone(),
            self.aggregate_id.clone(),
            self.tenant_id.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::CommandKind;

    #[test]
    fn serializes_every_contract_field_in_camel_case() {
        let aggregate = AggregateId::new("bank", "account", "a-1", "t1");
        let command = CommandMessage::new(aggregate, "deposit", CommandKind::Normal, ())
            .with_request_id("r-1");
        let result = CommandResult::failure(
            &command,
            CommandStage::Processed,
            ErrorCode::CommandValidation,
            "invalid",
        )
        .with_binding_errors(vec![BindingError::new("amount", "must be at least 1")])
        .with_version(3);
        let json = serde_json::to_value(&result).unwrap();
        let object = json.as_object().unwrap();
        for field in CommandResult::JSON_FIELDS {
            assert!(object.contains_key(field), "missing field {field}");
        }
        assert_eq!(json["errorCode"], "CommandValidation");
        assert_eq!(json["stage"], "PROCESSED");
        assert_eq!(json["succeeded"], false);
        assert_eq!(json["requestId"], "r-1");
        assert_eq!(json["bindingErrors"][0]["name"], "amount");
        let back: CommandResult = serde_json::from_value(json).unwrap();
        assert_eq!(back, result);
    }
}
