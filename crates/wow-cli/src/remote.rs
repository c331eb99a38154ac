//! `wow send`, `wow outcome` and `wow events`: a running service's commands and history from
//! the command line. Exit codes tell scripts what happened, and what to do next:
//!
//! - 0 applied: appended now, or by an earlier attempt. Never resend it as a new intent.
//! - 3 rejected, for good: the rejection is recorded (SPEC ID-6); do not resend, a resend
//!   gets the same answer.
//! - 5 no decision yet: `IN_FLIGHT` (the service holds it: look again later) or `NONE`
//!   (nothing recorded: resending with the same request id is safe).
//! - 4 unknown: history could not be asked. Escalate; never resend under a new request id.

use crate::output::out;
use std::time::Duration;

use serde_json::{json, Value};
use wow_client::{CommandRequest, Lookup, Outcome, RetryPolicy, WowClient};
use wow_core::CommandStage;

use crate::tend::{answer, client, TendError};

/// The exit code of a rejected intent: final, do not resend.
pub(crate) const REJECTED: u8 = 3;
/// The exit code of an outcome that stays unknown: escalate.
pub(crate) const UNKNOWN: u8 = 4;
/// The exit code of an intent with no decision yet (`IN_FLIGHT` or `NONE`).
pub(crate) const NO_DECISION_YET: u8 = 5;

/// What the exit codes of `wow send` and `wow outcome` mean, for `--help`.
pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0  applied: appended now or by an earlier attempt (APPENDED, COMPLETED, ALREADY_APPLIED).
     Never resend it as a new intent.
  3  rejected, for good (REJECTED): the rejection is recorded and every resend gets the same
     answer. Do not resend.
  5  no decision yet: IN_FLIGHT (the service holds it: look it up again later) or NONE
     (nothing recorded: resending with the same request id is safe).
  4  unknown (UNKNOWN): history could not be asked. Escalate and look it up later; never
     resend under a new request id.";

/// Where and as whom the remote commands talk.
#[derive(Debug)]
pub(crate) struct Remote {
    pub(crate) server: String,
    pub(crate) token: Option<String>,
    pub(crate) tenant: Option<String>,
}

impl Remote {
    fn base(&self) -> &str {
        self.server.trim_end_matches('/')
    }

    pub(crate) fn client(&self) -> Result<WowClient, TendError> {
        let client =
            WowClient::new(self.base()).map_err(|error| TendError::Client(error.to_string()))?;
        Ok(match &self.token {
            Some(token) => client.bearer(token.clone()),
            None => client,
        })
    }
}

/// What `wow send` sends, as its command line gives it.
#[derive(Debug, clap::Args)]
pub(crate) struct SendArgs {
    /// The aggregate type, e.g. `account`.
    aggregate: String,
    /// The aggregate id.
    id: String,
    /// The command, e.g. `deposit`.
    command: String,
    /// The command body as JSON.
    #[arg(default_value = "{}")]
    body: String,
    /// The request id: keep it to resend the same intent [default: a new one].
    #[arg(long)]
    request_id: Option<String>,
    /// The stage to wait for.
    #[arg(long, default_value = "PROCESSED")]
    wait_stage: CommandStage,
    /// How long to wait for it, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    wait_timeout_ms: u64,
    /// Sends at most (the first one included) while history records no decision (NONE).
    #[arg(long, default_value_t = 3)]
    attempts: u32,
    /// How long to keep looking the request up while the service holds it in flight,
    /// in milliseconds; past it, exit 5.
    #[arg(long, default_value_t = 30_000)]
    in_flight_wait_ms: u64,
}

/// `wow send`: sends one command the safe way (SPEC TO-2: a stable request id, a look-up
/// before any resend) and prints what became of it as JSON; the exit code says which.
pub(crate) async fn send(remote: &Remote, args: SendArgs) -> Result<u8, TendError> {
    let body: Value = serde_json::from_str(&args.body)
        .map_err(|error| TendError::BadInput(format!("the body is not JSON: {error}")))?;
    let mut request = CommandRequest::new(&args.aggregate, &args.id, &args.command, body)
        .wait(args.wait_stage, Duration::from_millis(args.wait_timeout_ms));
    let request_id = args.request_id.unwrap_or_else(wow_core::id::new_id);
    request = request.request_id(request_id.clone());
    if let Some(tenant) = &remote.tenant {
        request = request.tenant(tenant.clone());
    }
    let client = remote.client()?.retry(RetryPolicy {
        attempts: args.attempts.max(1),
        in_flight_wait: Duration::from_millis(args.in_flight_wait_ms),
        ..RetryPolicy::default()
    });
    let (code, report) = match client.send_safely(&request).await {
        Outcome::Completed(result) => (
            0,
            json!({"outcome": "COMPLETED", "requestId": request_id, "result": result}),
        ),
        Outcome::AlreadyApplied {
            version,
            command_id,
            ..
        } => (
            0,
            json!({"outcome": "ALREADY_APPLIED", "requestId": request_id, "version": version, "commandId": command_id}),
        ),
        Outcome::Rejected {
            error_code,
            error_msg,
            command_id,
            version,
            result,
        } => (
            REJECTED,
            json!({
                "outcome": "REJECTED",
                "requestId": request_id,
                "errorCode": error_code,
                "errorMsg": error_msg,
                "commandId": command_id,
                "version": version,
                "result": result,
            }),
        ),
        Outcome::NoDecisionYet {
            request_id,
            in_flight,
            reason,
        } => (
            NO_DECISION_YET,
            json!({
                "outcome": "NO_DECISION_YET",
                "status": if in_flight { "IN_FLIGHT" } else { "NONE" },
                "requestId": request_id,
                "reason": reason,
            }),
        ),
        Outcome::Unknown { request_id, reason } => (
            UNKNOWN,
            json!({"outcome": "UNKNOWN", "requestId": request_id, "reason": reason}),
        ),
    };
    out!("{report:#}");
    Ok(code)
}

/// `wow outcome`: what the service says of a request id (SPEC TO-1), printed as JSON with
/// the look-up's fields: `APPENDED` (version, command id, the stream), `REJECTED` (code,
/// message, command id, version), `IN_FLIGHT`, `NONE`, or `UNKNOWN` (with the reason).
/// The exit code says which (see [`EXIT_CODES`]).
pub(crate) async fn outcome(
    remote: &Remote,
    aggregate: &str,
    id: &str,
    request_id: &str,
) -> Result<u8, TendError> {
    let found = remote
        .client()?
        .lookup(aggregate, id, request_id, remote.tenant.as_deref())
        .await;
    let (code, report) = match found {
        Lookup::Appended {
            version,
            command_id,
            create_time,
            stream,
        } => (
            0,
            json!({"status": "APPENDED", "version": version, "commandId": command_id, "createTime": create_time, "stream": stream}),
        ),
        Lookup::Rejected {
            error_code,
            error_msg,
            command_id,
            version,
            create_time,
        } => (
            REJECTED,
            json!({"status": "REJECTED", "errorCode": error_code, "errorMsg": error_msg, "commandId": command_id, "version": version, "createTime": create_time}),
        ),
        Lookup::InFlight => (NO_DECISION_YET, json!({"status": "IN_FLIGHT"})),
        Lookup::None => (NO_DECISION_YET, json!({"status": "NONE"})),
        Lookup::Unknown(reason) => (UNKNOWN, json!({"status": "UNKNOWN", "reason": reason})),
    };
    out!("{report:#}");
    Ok(code)
}

/// `wow events`: the streams of an aggregate with versions in `head..=tail`, as JSON.
pub(crate) async fn events(
    remote: &Remote,
    aggregate: &str,
    id: &str,
    head: u64,
    tail: Option<u64>,
) -> Result<u8, TendError> {
    let tail = tail.map_or_else(|| i64::MAX.to_string(), |tail| tail.to_string());
    let url = format!("{}/{aggregate}/{id}/event/{head}/{tail}", remote.base());
    let mut request = client()?.get(&url);
    if let Some(tenant) = &remote.tenant {
        request = request.header(wow_core::command::headers::TENANT_ID, tenant);
    }
    let streams = answer(&url, request, remote.token.as_deref()).await?;
    out!("{streams:#}");
    Ok(0)
}
