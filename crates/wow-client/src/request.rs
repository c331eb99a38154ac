//! What to send, and how hard to try.

use std::time::Duration;

use serde_json::Value;
use wow_core::CommandStage;

/// One command for the HTTP API, with the headers of docs/http-api.md.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandRequest {
    /// The aggregate type (`account`).
    pub aggregate: String,
    /// The aggregate id.
    pub id: String,
    /// The command name (`deposit`).
    pub command: String,
    /// The body.
    pub body: Value,
    /// The business intent. The safe-retry helper needs one: without it no retry can be
    /// recognised as the same intent (SPEC ID-2).
    pub request_id: Option<String>,
    /// The stage to wait for. Default `PROCESSED`.
    pub wait_stage: CommandStage,
    /// How long the server waits for that stage. Default 30 s.
    pub wait_timeout: Duration,
    /// The tenant (`Command-Tenant-Id`), when bearer auth is off.
    pub tenant: Option<String>,
    /// The version the aggregate must be at.
    pub expected_version: Option<u64>,
}

impl CommandRequest {
    /// `command` with `body` for the aggregate `aggregate`/`id`, waiting for `PROCESSED`.
    pub fn new(
        aggregate: impl Into<String>,
        id: impl Into<String>,
        command: impl Into<String>,
        body: Value,
    ) -> Self {
        Self {
            aggregate: aggregate.into(),
            id: id.into(),
            command: command.into(),
            body,
            request_id: None,
            wait_stage: CommandStage::Processed,
            wait_timeout: Duration::from_secs(30),
            tenant: None,
            expected_version: None,
        }
    }

    /// Sets the stable request id of this intent.
    pub fn request_id(mut self, request_id: impl Into<String>) -> Self {
        self.request_id = Some(request_id.into());
        self
    }

    /// Waits for `stage`, at most `timeout`, on the server.
    pub fn wait(mut self, stage: CommandStage, timeout: Duration) -> Self {
        self.wait_stage = stage;
        self.wait_timeout = timeout;
        self
    }

    /// Acts in `tenant`.
    pub fn tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }
}

/// How many times the safe-retry helper resends an intent that history says has no
/// decision (`NONE`), how long it waits between tries (doubling each time), and how long it
/// keeps looking while the service says the request is `IN_FLIGHT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Sends in all, the first included. Default 3.
    pub attempts: u32,
    /// The pause before the first resend, and before the first look-up again of a request
    /// in flight. Default 100 ms.
    pub backoff: Duration,
    /// How long, per unknown answer, the helper keeps looking a request up while the
    /// service holds it in flight; past it the helper reports
    /// [`Outcome::NoDecisionYet`](crate::Outcome::NoDecisionYet). Default 30 s.
    pub in_flight_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 3,
            backoff: Duration::from_millis(100),
            in_flight_wait: Duration::from_secs(30),
        }
    }
}
