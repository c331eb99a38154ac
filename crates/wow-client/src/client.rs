//! The client and its safe-retry sequence.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use wow_core::{CommandResult, ErrorCode};

use crate::{CommandRequest, Lookup, Outcome, RetryPolicy};

/// A client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Build(#[from] reqwest::Error),
}

/// A client of one wow-rs service.
#[derive(Debug, Clone)]
pub struct WowClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    retry: RetryPolicy,
}

/// What one send came to, before the helper decides.
enum Sent {
    /// The server answered with a `CommandResult`.
    Answered(StatusCode, Box<CommandResult>),
    /// No usable answer: a transport error, or a body that is not a result.
    NoAnswer(String),
}

impl WowClient {
    /// A client of the service at `base` (`http://host:port`).
    pub fn new(base: impl Into<String>) -> Result<Self, ClientError> {
        Ok(Self {
            http: reqwest::Client::builder().build()?,
            base: base.into().trim_end_matches('/').to_owned(),
            token: None,
            retry: RetryPolicy::default(),
        })
    }

    /// Authenticates with a bearer token.
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Sets the retry policy of [`WowClient::send_safely`].
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        tenant: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        match tenant {
            Some(tenant) => request.header("Command-Tenant-Id", tenant),
            None => request,
        }
    }

    async fn send_once(&self, command: &CommandRequest, request_id: &str) -> Sent {
        let url = format!(
            "{}/{}/{}/{}",
            self.base, command.aggregate, command.id, command.command
        );
        let mut request = self
            .http
            .post(url)
            .header("Command-Request-Id", request_id)
            .header("Command-Wait-Stage", command.wait_stage.as_str())
            .header(
                "Command-Wait-Timeout",
                command.wait_timeout.as_millis().to_string(),
            )
            .json(&command.body)
            // The server answers 408 when its wait expires; allow it time to say so.
            .timeout(command.wait_timeout + Duration::from_secs(5));
        if let Some(version) = command.expected_version {
            request = request.header("Command-Aggregate-Version", version.to_string());
        }
        let response = match self
            .authorize(request, command.tenant.as_deref())
            .send()
            .await
        {
            Ok(response) => response,
            Err(error) => return Sent::NoAnswer(format!("no answer: {error}")),
        };
        let status = response.status();
        match response.json::<CommandResult>().await {
            Ok(result) => Sent::Answered(status, Box::new(result)),
            Err(error) => Sent::NoAnswer(format!("answer {status} is not a result: {error}")),
        }
    }

    /// What history says of `request_id` in the aggregate `aggregate`/`id` (SPEC TO-1).
    pub async fn lookup(
        &self,
        aggregate: &str,
        id: &str,
        request_id: &str,
        tenant: Option<&str>,
    ) -> Lookup {
        let url = format!("{}/{aggregate}/{id}/requests/{request_id}", self.base);
        let response = match self.authorize(self.http.get(url), tenant).send().await {
            Ok(response) => response,
            Err(error) => return Lookup::Unknown(format!("look-up failed: {error}")),
        };
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        match (status, body["status"].as_str()) {
            (StatusCode::OK, Some("APPENDED")) => Lookup::Appended {
                version: body["version"].as_u64().unwrap_or(0),
                command_id: body["commandId"].as_str().unwrap_or_default().to_owned(),
            },
            (StatusCode::NOT_FOUND, Some("NOT_APPENDED")) => Lookup::NotAppended,
            _ => Lookup::Unknown(format!("look-up answered {status}: {body}")),
        }
    }

    /// What history says of `command` sent under `request_id`.
    async fn lookup_intent(&self, command: &CommandRequest, request_id: &str) -> Lookup {
        self.lookup(
            &command.aggregate,
            &command.id,
            request_id,
            command.tenant.as_deref(),
        )
        .await
    }

    /// Sends `command` and resolves its outcome the safe way (SPEC TO-2):
    ///
    /// 1. keep the ids; an answer that is not a result (timeout, lost connection, 408, 503)
    ///    makes the outcome unknown;
    /// 2. confirm it in history by aggregate and request id;
    /// 3. appended: never resend — [`Outcome::AlreadyApplied`];
    /// 4. confirmed absent: resend with the same request id (up to the policy's attempts);
    /// 5. history unavailable: stay [`Outcome::Unknown`] and escalate.
    ///
    /// A rejection of the first send is final. A rejection of a resend is confirmed in
    /// history first: an earlier send of the intent may have been appended after all.
    ///
    /// A command without a request id gets one here, kept for every attempt.
    pub async fn send_safely(&self, command: &CommandRequest) -> Outcome {
        let request_id = command
            .request_id
            .clone()
            .unwrap_or_else(wow_core::id::new_id);
        let mut backoff = self.retry.backoff;
        let mut last_unknown = String::new();
        for attempt in 1..=self.retry.attempts.max(1) {
            match self.send_once(command, &request_id).await {
                Sent::Answered(status, result) if status.is_success() => {
                    return Outcome::Completed(*result)
                }
                Sent::Answered(_, result) if result.error_code == ErrorCode::DuplicateRequestId => {
                    return Outcome::AlreadyApplied {
                        version: result.aggregate_version.unwrap_or(0),
                        command_id: result
                            .result
                            .get("originalCommandId")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        result: Some(*result),
                    }
                }
                Sent::Answered(status, result)
                    if !matches!(
                        status,
                        StatusCode::REQUEST_TIMEOUT | StatusCode::SERVICE_UNAVAILABLE
                    ) =>
                {
                    if attempt == 1 {
                        return Outcome::Rejected(*result);
                    }
                    // A resend's rejection answers for this message only: an earlier message
                    // of the intent may still have been appended (found by wow-sim). History
                    // decides.
                    return match self.lookup_intent(command, &request_id).await {
                        Lookup::Appended {
                            version,
                            command_id,
                        } => Outcome::AlreadyApplied {
                            version,
                            command_id,
                            result: None,
                        },
                        Lookup::NotAppended => Outcome::Rejected(*result),
                        Lookup::Unknown(reason) => Outcome::Unknown {
                            request_id,
                            reason: format!(
                                "a resend was rejected ({}), and history cannot be asked: {reason}",
                                result.error_code
                            ),
                        },
                    };
                }
                Sent::Answered(status, result) => {
                    last_unknown = format!("{status}: {}", result.error_msg)
                }
                Sent::NoAnswer(reason) => last_unknown = reason,
            }
            tracing::info!(request_id, attempt, reason = %last_unknown, "outcome unknown; asking history");
            match self.lookup_intent(command, &request_id).await {
                Lookup::Appended {
                    version,
                    command_id,
                } => {
                    return Outcome::AlreadyApplied {
                        version,
                        command_id,
                        result: None,
                    }
                }
                Lookup::Unknown(reason) => {
                    return Outcome::Unknown {
                        request_id,
                        reason: format!("{last_unknown}; {reason}"),
                    }
                }
                Lookup::NotAppended if attempt < self.retry.attempts => {
                    tokio::time::sleep(backoff).await;
                    backoff = backoff.saturating_mul(2);
                }
                Lookup::NotAppended => {}
            }
        }
        Outcome::Unknown {
            request_id,
            reason: format!(
                "not appended after {} attempts ({last_unknown}); it may still be in flight: look it up later",
                self.retry.attempts
            ),
        }
    }
}
