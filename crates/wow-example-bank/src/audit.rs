//! The void `audit` `note` command: handled by no aggregate; the processing node logs it
//! (at-least-once: a resend within the gateway's Bloom window is dropped, later ones are
//! logged again).

use serde::{Deserialize, Serialize};
use validator::Validate;
use wow_core::aggregate::{Aggregate, CommandContext};
use wow_core::schemars;
use wow_core::{Command, Event};

/// The audit "aggregate": it only names the void command's route, `POST /audit/{id}/note`.
#[derive(Debug)]
pub struct Audit;

/// `note`: a line for the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Validate, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Note {
    /// The text; not empty.
    #[validate(length(min = 1))]
    pub text: String,
}

/// The audit commands.
#[derive(Debug, Clone, Command)]
pub enum AuditCommand {
    /// A note: at-least-once, only `SENT` can be awaited.
    #[command(void, validate)]
    Note(Note),
}

/// The audit records no events.
#[derive(Debug, Clone, PartialEq, Eq, Event)]
pub enum AuditEvent {}

impl Aggregate for Audit {
    const CONTEXT_NAME: &'static str = crate::CONTEXT;
    const AGGREGATE_NAME: &'static str = "audit";
    type State = ();
    type Command = AuditCommand;
    type Event = AuditEvent;
    type Error = std::convert::Infallible;

    fn handle(
        _: &(),
        command: AuditCommand,
        _: &CommandContext<'_>,
    ) -> Result<Vec<AuditEvent>, Self::Error> {
        // Never called: no aggregate handles a void command.
        match command {
            AuditCommand::Note(_) => Ok(Vec::new()),
        }
    }

    fn apply(_: &mut (), event: &AuditEvent) {
        match *event {}
    }
}
