//! `wow send`, `wow outcome` and `wow events`: a running service's commands and history from
//! the command line. Exit codes tell scripts what happened: 0 applied (or appended), 3
//! rejected (or not appended), 4 unknown (history could not be asked: escalate, do not send
//! the intent again under a new request id).

use std::time::Duration;

use serde_json::Value;
use wow_client::{CommandRequest, Outcome, RetryPolicy, WowClient};
use wow_core::CommandStage;

use crate::tend::{answer, client, TendError};

/// The exit code of an intent refused, or of a request id not in history.
pub(crate) const REJECTED: u8 = 3;
/// The exit code of an outcome that stays unknown.
pub(crate) const UNKNOWN: u8 = 4;

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

    fn client(&self) -> Result<WowClient, TendError> {
        let client =
            WowClient::new(self.base()).map_err(|error| TendError::Client(error.to_string()))?;
        Ok(match &self.token {
            Some(token) => client.bearer(token.clone()),
            None => client,
        })
    }
}

/// What `wow send` sends.
#[derive(Debug)]
pub(crate) struct SendArgs {
    pub(crate) aggregate: String,
    pub(crate) id: String,
    pub(crate) command: String,
    pub(crate) body: String,
    pub(crate) request_id: Option<String>,
    pub(crate) wait_stage: CommandStage,
    pub(crate) wait_timeout: Duration,
    pub(crate) attempts: u32,
}

/// `wow send`: sends one command the safe way (SPEC TO-2: a stable request id, a look-up
/// before any resend) and prints what became of it as JSON.
pub(crate) async fn send(remote: &Remote, args: SendArgs) -> Result<u8, TendError> {
    let body: Value = serde_json::from_str(&args.body)
        .map_err(|error| TendError::BadInput(format!("the body is not JSON: {error}")))?;
    let mut request = CommandRequest::new(&args.aggregate, &args.id, &args.command, body)
        .wait(args.wait_stage, args.wait_timeout);
    let request_id = args.request_id.unwrap_or_else(wow_core::id::new_id);
    request = request.request_id(request_id.clone());
    if let Some(tenant) = &remote.tenant {
        request = request.tenant(tenant.clone());
    }
    let client = remote.client()?.retry(RetryPolicy {
        attempts: args.attempts.max(1),
        ..RetryPolicy::default()
    });
    let (code, report) = match client.send_safely(&request).await {
        Outcome::Completed(result) => (
            0,
            serde_json::json!({"outcome": "COMPLETED", "requestId": request_id, "result": result}),
        ),
        Outcome::AlreadyApplied {
            version,
            command_id,
            ..
        } => (
            0,
            serde_json::json!({"outcome": "ALREADY_APPLIED", "requestId": request_id, "version": version, "commandId": command_id}),
        ),
        Outcome::Rejected(result) => (
            REJECTED,
            serde_json::json!({"outcome": "REJECTED", "requestId": request_id, "result": result}),
        ),
        Outcome::Unknown { request_id, reason } => (
            UNKNOWN,
            serde_json::json!({"outcome": "UNKNOWN", "requestId": request_id, "reason": reason}),
        ),
    };
    println!("{report:#}");
    Ok(code)
}

/// `wow outcome`: what history says of a request id (SPEC TO-1), printed as JSON:
/// `APPENDED` (with version, command id and the stream), `NOT_APPENDED`, or `UNKNOWN`.
pub(crate) async fn outcome(
    remote: &Remote,
    aggregate: &str,
    id: &str,
    request_id: &str,
) -> Result<u8, TendError> {
    let url = format!("{}/{aggregate}/{id}/requests/{request_id}", remote.base());
    let mut request = client()?.get(&url);
    if let Some(token) = &remote.token {
        request = request.bearer_auth(token);
    }
    if let Some(tenant) = &remote.tenant {
        request = request.header("Command-Tenant-Id", tenant);
    }
    let (status, body) = match request.send().await {
        Ok(response) => {
            let status = response.status();
            (
                status.as_u16(),
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
        Err(error) => (
            0,
            serde_json::json!({"status": "UNKNOWN", "errorMsg": format!("the service cannot be reached: {error}")}),
        ),
    };
    let code = match (status, body["status"].as_str()) {
        (200, Some("APPENDED")) => 0,
        (404, Some("NOT_APPENDED")) => REJECTED,
        (_, Some(_)) => UNKNOWN,
        _ => {
            return Err(TendError::Refused {
                status,
                body: body.to_string(),
            })
        }
    };
    println!("{body:#}");
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
        request = request.header("Command-Tenant-Id", tenant);
    }
    let streams = answer(&url, request, remote.token.as_deref()).await?;
    println!("{streams:#}");
    Ok(0)
}
