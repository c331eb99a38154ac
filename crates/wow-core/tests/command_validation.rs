//! `#[derive(Command)]` validates every payload whose type derives `validator::Validate`,
//! with or without `#[command(validate)]`: leaving the attribute out cannot turn validation
//! off. A payload without rules is accepted as it is.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde::{Deserialize, Serialize};
use validator::Validate;
use wow_core::command::CommandBody;
use wow_core::Command;

#[derive(Debug, Clone, Serialize, Deserialize, Validate, schemars::JsonSchema)]
struct Positive {
    #[validate(range(min = 1))]
    amount: i64,
}

/// No rules: no `Validate`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
struct Note {
    text: String,
}

#[derive(Debug, Clone, Command)]
enum Commands {
    /// Validated, and says so.
    #[command(validate)]
    Marked(Positive),
    /// Validated without saying so.
    Unmarked(Positive),
    /// A payload without rules.
    Noted(Note),
    /// No payload.
    Ping,
}

#[test]
fn a_payload_that_derives_validate_is_validated_without_the_attribute() {
    let bad = Positive { amount: 0 };
    let marked = Commands::Marked(bad.clone()).validate().unwrap_err();
    let unmarked = Commands::Unmarked(bad).validate().unwrap_err();
    assert_eq!(marked, unmarked);
    assert_eq!(unmarked.len(), 1);
    assert_eq!(unmarked[0].name, "amount");
    assert!(Commands::Unmarked(Positive { amount: 1 })
        .validate()
        .is_ok());
}

#[test]
fn a_payload_without_rules_and_a_unit_command_are_accepted() {
    let note = Note {
        text: String::new(),
    };
    assert!(Commands::Noted(note).validate().is_ok());
    assert!(Commands::Ping.validate().is_ok());
}
