//! The names of the HTTP headers a command travels with (docs/http-api.md), in one table shared by
//! the server (`wow-http`), the client (`wow-client`) and the CLI, so that they cannot drift
//! apart. Spelled as the design writes them; HTTP compares header names without regard to
//! case, so a server may look them up in any case.

/// The caller's business intent (SPEC ID-2): 1 to 128 visible ASCII bytes.
pub const REQUEST_ID: &str = "Command-Request-Id";
/// The stage to wait for (`SENT` … `SAGA_HANDLED`).
pub const WAIT_STAGE: &str = "Command-Wait-Stage";
/// The bounded context of the consumer to wait for (Wow); empty or absent: any.
pub const WAIT_CONTEXT: &str = "Command-Wait-Context";
/// The consumer (projection, processor, saga) to wait for at a downstream stage (Wow).
pub const WAIT_PROCESSOR: &str = "Command-Wait-Processor";
/// The consumer's function to wait for (Wow; every consumer here handles with `onEvent`).
pub const WAIT_FUNCTION: &str = "Command-Wait-Function";
/// Wow's chained wait: after `SAGA_HANDLED`, wait until every command the saga sent reached
/// this stage.
pub const WAIT_TAIL_STAGE: &str = "Command-Wait-Tail-Stage";
/// The tail consumer's bounded context; empty or absent: the command's.
pub const WAIT_TAIL_CONTEXT: &str = "Command-Wait-Tail-Context";
/// The tail consumer (a projection, processor or saga of the tail stage); absent: the whole
/// tail stage.
pub const WAIT_TAIL_PROCESSOR: &str = "Command-Wait-Tail-Processor";
/// The tail consumer's function (every consumer here handles with `onEvent`).
pub const WAIT_TAIL_FUNCTION: &str = "Command-Wait-Tail-Function";
/// How long to wait, in milliseconds.
pub const WAIT_TIMEOUT: &str = "Command-Wait-Timeout";
/// The version the aggregate must be at.
pub const AGGREGATE_VERSION: &str = "Command-Aggregate-Version";
/// The tenant (when auth is off; with auth the token decides).
pub const TENANT_ID: &str = "Command-Tenant-Id";
/// The owner the command acts for (Wow); `/owner/{ownerId}/` before a route sets it too.
pub const OWNER_ID: &str = "Command-Owner-Id";
/// The space of the aggregate (Wow).
pub const SPACE_ID: &str = "Wow-Space-Id";
/// The id of the aggregate a create without an id in its path makes.
pub const AGGREGATE_ID: &str = "Command-Aggregate-Id";
/// The answer's error code, repeated from its body (`Ok` on success).
pub const ERROR_CODE: &str = "Wow-Error-Code";
/// `true` on the answer to a resend of an intent already decided.
pub const REPLAYED: &str = "Wow-Replayed";
