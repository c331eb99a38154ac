//! Reading a command request: its headers ([`CommandOptions`]) and its body. Every failure
//! says what is wrong and which header or field it is about ([`InputError`]); nothing has
//! been recorded when one occurs.

mod body;
mod options;

use wow_core::command::BindingError;
use wow_core::{id, AggregateId, CommandResult, CommandStage, ErrorCode};
use wow_runtime::command::SENT;

pub(crate) use body::{body, query_body};
pub(crate) use options::{owned_id, CommandOptions};

/// Bad input: a code (400 unless said otherwise), a message and the offending names.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct InputError {
    /// What is wrong, as a code.
    pub(crate) code: ErrorCode,
    /// What is wrong, for a person: `name: rule` for one header or field.
    pub(crate) message: String,
    /// The headers or fields at fault, each with the rule it breaks.
    pub(crate) binding_errors: Vec<BindingError>,
}

impl InputError {
    /// `code` for the header or field `name`, which breaks the rule `message`.
    pub(crate) fn bad(code: ErrorCode, name: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            code,
            binding_errors: vec![BindingError::new(name, message.clone())],
            message: format!("{name}: {message}"),
        }
    }

    /// `code` with `message` and no binding errors: a refusal that is about no one header.
    pub(crate) fn refused(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            binding_errors: Vec::new(),
        }
    }

    /// The `CommandResult` that reports this error for a command that was never sent.
    pub(crate) fn result(
        self,
        aggregate_id: &AggregateId,
        request_id: Option<&str>,
    ) -> CommandResult {
        let command_id = id::new_id();
        CommandResult::for_ids(
            aggregate_id,
            &command_id,
            request_id.unwrap_or(&command_id),
            CommandStage::Sent,
            self.code,
            self.message,
        )
        .with_binding_errors(self.binding_errors)
        .with_result(SENT, false)
    }
}
