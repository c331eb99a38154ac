//! Derive macros for wow-rs: `Command` and `Event` for an aggregate's command and event enums,
//! and `DomainError` for its business-rule errors.
//!
//! They write the name tables and the JSON glue so that a team writes each command, event and
//! rule once, as a plain enum variant, and marks a create, allow-create, void or internal
//! command with one attribute. A payload that implements `validator::Validate` is validated
//! without one. The traits they implement live in `wow-core`.

mod command;
mod domain_error;
mod event;
mod items;

use proc_macro::TokenStream;
use syn::{parse_macro_input, DeriveInput};

use command::expand_command;
use domain_error::expand_domain_error;
use event::expand_event;

/// Implements `wow_core::CommandBody` for an enum of commands.
///
/// Each variant is a unit (`Freeze`) or holds one payload (`Deposit(Deposit)`). Its name is the
/// variant's name in `snake_case` unless `#[command(name = "...")]` gives one. One attribute
/// each marks the kind and the validation: `#[command(create)]`, `#[command(allow_create)]`,
/// `#[command(void)]`, and `#[command(internal)]` marks a command that only sagas and processors send: it is not
/// routed over HTTP. `#[command(deadline)]` marks a command a deadline may fire (an
/// aggregate's `deadlines`, a saga's `schedule`): only such commands can be scheduled, and
/// they are internal too unless `#[command(deadline, public)]` says callers may also send it.
/// Every payload derives `schemars::JsonSchema`: its schema is the body's in OpenAPI.
///
/// A payload whose type implements `validator::Validate` (of the `validator` version wow-core
/// depends on) is validated before its command runs, with no attribute needed: forgetting one
/// cannot turn validation off.
/// `#[command(validate)]` is still accepted, and makes it a compile error if the payload
/// does not implement `Validate`.
///
/// It also answers `CommandBody::crate_build` with `wow_core::crate_build!()`, expanded in the
/// enum's crate: how that crate was compiled (whether an arithmetic overflow there panics or
/// wraps), which the service checks at start (SPEC PX-1).
#[proc_macro_derive(Command, attributes(command))]
pub fn derive_command(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_command(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implements `wow_core::EventBody` for an enum of events.
///
/// Each variant is a unit or holds one payload. Its name is the variant's name as written
/// unless `#[event(name = "...")]` gives one; its revision is `0.0.1` unless
/// `#[event(revision = "...")]` gives one.
#[proc_macro_derive(Event, attributes(event))]
pub fn derive_event(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_event(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implements `wow_core::DomainError` and `wow_core::aggregate::DecodeDomainError` for an
/// enum of business-rule errors, and writes its kind enum.
///
/// Each variant's error code is its name (`InsufficientBalance`) unless
/// `#[domain_error(code = "...")]` names another; a framework code's name (`NotFound`,
/// `IllegalState`, ...) maps to that framework code. Two variants may not share a code.
///
/// For `enum AccountError` it also writes `enum AccountErrorKind` (same visibility), one
/// fieldless variant per error variant: what a saga matches when a step is rejected, told
/// from the error code alone. The variants' fields (named, tuple or none) must be
/// `Serialize + DeserializeOwned`: `detail` writes them as a JSON object and `decode` reads
/// them back, never guessing a missing one.
#[proc_macro_derive(DomainError, attributes(domain_error))]
pub fn derive_domain_error(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_domain_error(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
