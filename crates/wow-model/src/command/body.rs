//! What a command enum provides to the framework; `#[derive(Command)]` writes it.

use serde_json::Value;

use crate::build::CrateBuild;
use crate::command::{BindingError, CommandKind};

/// One command of an aggregate, as the registry lists it.
#[derive(Debug, Clone, Copy)]
pub struct CommandInfo {
    /// The command's stable name (the last segment of its HTTP route).
    pub name: &'static str,
    /// Whether it creates, may create, acts on an existing aggregate, or is void.
    pub kind: CommandKind,
    /// Sent only by sagas and event processors (`#[command(internal)]`): the gateway takes
    /// it, but it is not routed over HTTP and not in OpenAPI, so no caller outside the
    /// service can send it.
    pub internal: bool,
    /// A deadline may fire it (`#[command(deadline)]`, SPEC DM-6): an aggregate's deadlines
    /// and a saga's schedules may name only such commands. Internal unless declared
    /// `#[command(deadline, public)]`, so no caller outside the service sends what only a
    /// deadline should.
    pub deadline: bool,
    /// The JSON Schema of its body (for OpenAPI).
    pub schema: fn() -> Value,
}

/// The body could not be turned into the named command or event.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BodyDecodeError {
    /// No command or event of that name exists.
    #[error("unknown name `{0}`")]
    UnknownName(String),
    /// The body does not have the shape the command or event requires.
    #[error("body of `{name}` is invalid: {source}")]
    InvalidBody {
        /// The command's or event's name.
        name: String,
        /// The path of the field that is wrong (`amount`, `lines[0].sku`), when it is inside
        /// the body rather than the body itself.
        path: Option<String>,
        /// What serde found wrong.
        source: serde_json::Error,
    },
}

/// A command enum of an aggregate: each variant one command with a stable name.
///
/// Derive it with `#[derive(Command)]`: variants are unit or newtype (`Deposit(Deposit)`), named
/// in `snake_case` unless `#[command(name = "...")]` says otherwise, and one attribute each marks
/// a command `create`, `allow_create` or `void`, or has its payload checked with `validate`
/// (the payload derives `validator::Validate`).
pub trait CommandBody: Sized + Send + Sync + 'static {
    /// Every command of the enum, in declaration order.
    const COMMANDS: &'static [CommandInfo];

    /// This command's stable name.
    fn command_name(&self) -> &'static str;

    /// This command's kind.
    fn kind(&self) -> CommandKind {
        let name = self.command_name();
        Self::COMMANDS
            .iter()
            .find(|info| info.name == name)
            .map(|info| info.kind)
            .unwrap_or_default()
    }

    /// Checks the body's own constraints before anything else happens (SPEC RQ-9): a failure
    /// lists one binding error per broken rule.
    fn validate(&self) -> Result<(), Vec<BindingError>>;

    /// The body as JSON (the payload only, without the name).
    fn to_body(&self) -> Result<Value, serde_json::Error>;

    /// The command `name` with the JSON `body`; a unit command accepts `{}` or `null`.
    fn from_body(name: &str, body: &Value) -> Result<Self, BodyDecodeError>;

    /// The kind of the command called `name`, if the enum has one.
    fn kind_of(name: &str) -> Option<CommandKind> {
        Self::COMMANDS
            .iter()
            .find(|info| info.name == name)
            .map(|info| info.kind)
    }

    /// How the crate that declares this enum was compiled (SPEC PX-1): whether an
    /// arithmetic overflow there panics, as PX-1 needs, or wraps silently. The service asks
    /// it of every aggregate it runs and refuses to start on a crate that wraps.
    ///
    /// `#[derive(Command)]` answers `Some(wow_core::crate_build!())`, measured in the
    /// domain's own crate (the command enum sits beside its aggregate); an enum that
    /// implements this trait by hand writes the same line, since a default here could only
    /// measure wow-core. The default, `None`, leaves the crate unmeasured: the service then
    /// goes by the framework's build alone (`wow_core::build::of_wow_core`).
    fn crate_build() -> Option<CrateBuild> {
        None
    }
}

/// An event enum of an aggregate: each variant one event with a stable name and revision.
///
/// Derive it with `#[derive(Event)]`: variants are unit or newtype, named as written
/// (`AccountOpened`) unless `#[event(name = "...")]` says otherwise, with revision `0.0.1`
/// unless `#[event(revision = "...")]` says otherwise.
pub trait EventBody: Sized + Send + Sync + 'static {
    /// Every event name of the enum, in declaration order.
    const EVENTS: &'static [&'static str];

    /// This event's stable name.
    fn event_name(&self) -> &'static str;

    /// This event's schema revision.
    fn revision(&self) -> &'static str;

    /// The body as JSON (the payload only, without the name).
    fn to_body(&self) -> Result<Value, serde_json::Error>;

    /// The event `name` with the JSON `body`.
    fn from_body(name: &str, body: &Value) -> Result<Self, BodyDecodeError>;
}
