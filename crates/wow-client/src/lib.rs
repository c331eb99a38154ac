//! # wow-client
//!
//! A Rust client of the wow-rs HTTP API, and the safe-retry helper of SPEC TO-2: a caller that
//! does not know what happened to its command finds out from history before it does anything
//! else, and never turns one intent into two.
//!
//! ```no_run
//! # async fn demo() -> Result<(), wow_client::ClientError> {
//! use wow_client::{CommandRequest, Outcome, WowClient};
//!
//! let client = WowClient::new("http://127.0.0.1:8080")?;
//! let request = CommandRequest::new("account", "alice", "deposit", serde_json::json!({"amount": 5}))
//!     .request_id("deposit-2026-11-30-0001"); // stable: the same on every retry of this intent
//! match client.send_safely(&request).await {
//!     Outcome::Completed(result) => println!("done at version {:?}", result.aggregate_version),
//!     Outcome::AlreadyApplied { version, .. } => println!("an earlier attempt did it, at version {version}"),
//!     Outcome::Rejected { error_code, .. } => println!("refused for good: {error_code}"),
//!     Outcome::NoDecisionYet { in_flight: true, .. } => println!("still in flight: look again later"),
//!     Outcome::NoDecisionYet { .. } => println!("nothing recorded: resend with the same request id"),
//!     Outcome::Unknown { reason, .. } => eprintln!("escalate: {reason}"),
//! }
//! # Ok(()) }
//! ```

mod client;
mod lookup;
mod outcome;
mod path;
mod request;
mod view;

pub use client::{ClientError, WowClient};
pub use outcome::{Lookup, Outcome};
pub use request::{CommandRequest, RetryPolicy};
pub use view::{Fresh, ViewRead};
