//! The client and its safe-retry sequence.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use tokio::time::Instant;
use wow_core::command::{headers, ORIGINAL_COMMAND_ID, REPLAYED};
use wow_core::{CommandResult, ErrorCode};

use crate::path::url;
use crate::{CommandRequest, Lookup, Outcome, RetryPolicy};

/// A client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Build(#[from] reqwest::Error),
}

/// The longest pause between two look-ups of a request in flight.
const MAX_LOOK_UP_PAUSE: Duration = Duration::from_secs(2);

/// How long one look-up may take before it counts as unanswered ([`Lookup::Unknown`]).
const LOOK_UP_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// No usable answer: a transport error, a body cut short, or a body that is not a result.
    NoAnswer(String),
}

/// What an answered send says, for the helper.
enum Answer {
    /// It reached the awaited stage.
    Completed,
    /// The request id already holds an appended stream.
    Duplicate,
    /// A rejection that history has decided: a replayed recorded rejection, or the request
    /// id used for another body.
    Final,
    /// A rejection of this message.
    Rejected,
    /// Not a decision: the wait expired, the service was busy, unavailable or failed.
    Unknown,
}

fn answer(status: StatusCode, result: &CommandResult) -> Answer {
    if status.is_success() && result.succeeded {
        return Answer::Completed;
    }
    // A 5xx (500 included), 408, 429 or anything but a 4xx says nothing about the intent:
    // it may yet be appended. Only history can tell (SPEC TO-2).
    if !status.is_client_error()
        || matches!(
            status,
            StatusCode::REQUEST_TIMEOUT | StatusCode::TOO_MANY_REQUESTS
        )
    {
        return Answer::Unknown;
    }
    match result.error_code {
        ErrorCode::DuplicateRequestId => Answer::Duplicate,
        ErrorCode::RequestIdReused => Answer::Final,
        _ if result.result.get(REPLAYED) == Some(&Value::Bool(true)) => Answer::Final,
        _ => Answer::Rejected,
    }
}

/// What history says after an unknown answer, once any wait for a request in flight is over.
enum Settled {
    /// A decision: appended or rejected.
    Decided(Box<Outcome>),
    /// No decision recorded, and the service does not hold the request.
    None,
    /// The service still held the request when the wait ran out.
    InFlight,
    /// History could not be asked.
    Unknown(String),
}

impl WowClient {
    /// A client of the service at `base` (`http://host:port`).
    ///
    /// # Errors
    ///
    /// [`ClientError::Build`] when the HTTP client cannot be built (no TLS backend, ...).
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

    /// The service's base URL.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The HTTP client.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    pub(crate) fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        tenant: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        match tenant {
            Some(tenant) => request.header(headers::TENANT_ID, tenant),
            None => request,
        }
    }

    async fn send_once(&self, command: &CommandRequest, request_id: &str) -> Sent {
        let segments = [
            command.aggregate.as_str(),
            command.id.as_str(),
            command.command.as_str(),
        ];
        let url = match url(&self.base, &segments) {
            Ok(url) => url,
            Err(error) => return Sent::NoAnswer(format!("not sent: {error}")),
        };
        let mut request = self
            .http
            .post(url)
            .header(headers::REQUEST_ID, request_id)
            .header(headers::WAIT_STAGE, command.wait_stage.as_str())
            .header(
                headers::WAIT_TIMEOUT,
                command.wait_timeout.as_millis().to_string(),
            )
            .json(&command.body)
            // The server answers 408 when its wait expires; allow it time to say so.
            .timeout(command.wait_timeout + Duration::from_secs(5));
        if let Some(version) = command.expected_version {
            request = request.header(headers::AGGREGATE_VERSION, version.to_string());
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

    /// What the service says of `request_id` in the aggregate `aggregate`/`id` (SPEC TO-1):
    /// appended, rejected, in flight, no decision, or unknown. Every segment of the URL is
    /// percent-encoded, so a request id holding `/` (a saga's) is looked up as itself.
    ///
    /// Never fails: a transport error, a 5xx, a body cut short, an answer it cannot read or
    /// no answer within 30 s is [`Lookup::Unknown`], never a decision.
    pub async fn lookup(
        &self,
        aggregate: &str,
        id: &str,
        request_id: &str,
        tenant: Option<&str>,
    ) -> Lookup {
        let url = match url(&self.base, &[aggregate, id, "requests", request_id]) {
            Ok(url) => url,
            Err(error) => return Lookup::Unknown(format!("cannot look it up: {error}")),
        };
        let request = self.http.get(url).timeout(LOOK_UP_TIMEOUT);
        let response = match self.authorize(request, tenant).send().await {
            Ok(response) => response,
            Err(error) => return Lookup::Unknown(format!("look-up failed: {error}")),
        };
        let status = response.status();
        match response.json::<Value>().await {
            Ok(body) => crate::lookup::parse(status, &body),
            Err(error) => Lookup::Unknown(format!(
                "the look-up's answer {status} is unreadable: {error}"
            )),
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

    /// Looks the intent up until it is decided, has no decision, or stays in flight past
    /// the policy's `in_flight_wait`.
    async fn settle(&self, command: &CommandRequest, request_id: &str) -> Settled {
        let deadline = Instant::now() + self.retry.in_flight_wait;
        let mut pause = self.retry.backoff;
        loop {
            match self.lookup_intent(command, request_id).await {
                Lookup::Appended {
                    version,
                    command_id,
                    ..
                } => {
                    return Settled::Decided(Box::new(Outcome::AlreadyApplied {
                        version,
                        command_id,
                        result: None,
                    }))
                }
                Lookup::Rejected {
                    error_code,
                    error_msg,
                    command_id,
                    version,
                    ..
                } => {
                    return Settled::Decided(Box::new(Outcome::Rejected {
                        error_code,
                        error_msg,
                        command_id,
                        version: Some(version),
                        result: None,
                    }))
                }
                Lookup::None => return Settled::None,
                Lookup::Unknown(reason) => return Settled::Unknown(reason),
                Lookup::InFlight => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Settled::InFlight;
                    }
                    tokio::time::sleep(pause.min(deadline - now)).await;
                    pause = pause.saturating_mul(2).min(MAX_LOOK_UP_PAUSE);
                }
            }
        }
    }

    /// Sends `command` and resolves its outcome the safe way (SPEC TO-2):
    ///
    /// 1. keep the ids; an answer that is not a decision (no answer, a body cut short, 408,
    ///    429, 500, 503, any 5xx) makes the outcome unknown, never "rejected";
    /// 2. confirm it in history by aggregate and request id;
    /// 3. `APPENDED`: never resend — [`Outcome::AlreadyApplied`];
    /// 4. `REJECTED`: final — [`Outcome::Rejected`] with the recorded code and message;
    /// 5. `IN_FLIGHT`: wait and look again, up to the policy's `in_flight_wait`, then
    ///    [`Outcome::NoDecisionYet`];
    /// 6. `NONE`: resend with the same request id (up to the policy's attempts, then
    ///    [`Outcome::NoDecisionYet`]);
    /// 7. history unavailable: [`Outcome::Unknown`] — escalate.
    ///
    /// A rejection answered to the first send is final, as is a replayed one (header
    /// `Wow-Replayed`, `result.replayed`) or `RequestIdReused`. Any other rejection of a
    /// resend is confirmed in history first: an earlier send of the intent may have been
    /// appended after all.
    ///
    /// `DuplicateKey` (a unique key another aggregate holds, SPEC DM-1) is such a final
    /// rejection: it is recorded as the decision on its request id (SPEC ID-6), so it is never
    /// resent, and every later send under that request id gets the same refusal, also once
    /// the key is free again. Taking the key after its holder gave it up (or an operator
    /// released it) is a new intent: send it under a new request id.
    ///
    /// A command without a request id gets one here, kept for every attempt.
    pub async fn send_safely(&self, command: &CommandRequest) -> Outcome {
        let request_id = command
            .request_id
            .clone()
            .unwrap_or_else(wow_core::id::new_id);
        let attempts = self.retry.attempts.max(1);
        let mut backoff = self.retry.backoff;
        let mut last_unknown = String::new();
        for attempt in 1..=attempts {
            match self.send_once(command, &request_id).await {
                Sent::Answered(status, result) => match answer(status, &result) {
                    Answer::Completed => return Outcome::Completed(*result),
                    Answer::Duplicate => return already_applied(*result),
                    Answer::Final => return rejected(*result),
                    Answer::Rejected if attempt == 1 => return rejected(*result),
                    Answer::Rejected => {
                        return self.confirm_rejection(command, request_id, *result).await
                    }
                    Answer::Unknown => last_unknown = format!("{status}: {}", result.error_msg),
                },
                Sent::NoAnswer(reason) => last_unknown = reason,
            }
            tracing::info!(request_id, attempt, reason = %last_unknown, "outcome unknown; asking history");
            match self.settle(command, &request_id).await {
                Settled::Decided(outcome) => return *outcome,
                Settled::Unknown(reason) => {
                    return Outcome::Unknown {
                        request_id,
                        reason: format!("{last_unknown}; {reason}"),
                    }
                }
                Settled::InFlight => {
                    return Outcome::NoDecisionYet {
                        request_id,
                        in_flight: true,
                        reason: format!(
                            "{last_unknown}; still in flight after {:?}: look it up again later",
                            self.retry.in_flight_wait
                        ),
                    }
                }
                Settled::None if attempt < attempts => {
                    tokio::time::sleep(backoff).await;
                    backoff = backoff.saturating_mul(2);
                }
                Settled::None => {}
            }
        }
        Outcome::NoDecisionYet {
            request_id,
            in_flight: false,
            reason: format!(
                "no decision recorded after {attempts} attempts ({last_unknown}); resending with the same request id is safe"
            ),
        }
    }

    /// A resend's rejection answers for that message only: an earlier message of the intent
    /// may still have been appended (found by wow-sim). History decides.
    async fn confirm_rejection(
        &self,
        command: &CommandRequest,
        request_id: String,
        result: CommandResult,
    ) -> Outcome {
        match self.settle(command, &request_id).await {
            Settled::Decided(outcome) => match *outcome {
                // The recorded rejection, with the answer this send got.
                Outcome::Rejected {
                    error_code,
                    error_msg,
                    command_id,
                    version,
                    ..
                } => Outcome::Rejected {
                    error_code,
                    error_msg,
                    command_id,
                    version,
                    result: Some(result),
                },
                outcome => outcome,
            },
            // Not recorded (validation, a conflict the node does not record) and nothing
            // else holds the request id: the answer stands.
            Settled::None => rejected(result),
            Settled::InFlight => Outcome::NoDecisionYet {
                request_id,
                in_flight: true,
                reason: format!(
                    "a resend was rejected ({}) while an earlier send is still in flight: look it up again later",
                    result.error_code
                ),
            },
            Settled::Unknown(reason) => Outcome::Unknown {
                request_id,
                reason: format!(
                    "a resend was rejected ({}), and history cannot be asked: {reason}",
                    result.error_code
                ),
            },
        }
    }
}

/// The command id of the original attempt that `result` names, else its own.
fn original_command_id(result: &CommandResult) -> String {
    result
        .result
        .get(ORIGINAL_COMMAND_ID)
        .and_then(Value::as_str)
        .unwrap_or(&result.command_id)
        .to_owned()
}

fn already_applied(result: CommandResult) -> Outcome {
    Outcome::AlreadyApplied {
        version: result.aggregate_version.unwrap_or(0),
        command_id: original_command_id(&result),
        result: Some(result),
    }
}

fn rejected(result: CommandResult) -> Outcome {
    Outcome::Rejected {
        error_code: result.error_code.clone(),
        error_msg: result.error_msg.clone(),
        command_id: original_command_id(&result),
        version: result.aggregate_version,
        result: Some(result),
    }
}
