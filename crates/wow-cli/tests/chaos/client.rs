//! The load: callers that deposit and transfer through the gateway, each intent with its own
//! request id, and resolve every unknown outcome as SPEC TO-2 says. Every send and every
//! look-up is recorded with its answer and its times.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::{now_ms, Rng};

/// The wait timeout every send asks for (`Command-Wait-Timeout`).
pub(crate) const WAIT_TIMEOUT_MS: u64 = 2_000;

/// What an intent does.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// Opens `account` with `balance`, waited for at `PROCESSED`.
    Open { account: String, balance: i64 },
    /// Deposits `amount` into `account`, waited for at `PROCESSED`.
    Deposit { account: String, amount: i64 },
    /// Transfers `amount` from `from` to `to`, waited for at `SAGA_HANDLED`.
    Transfer {
        from: String,
        to: String,
        amount: i64,
    },
}

impl Op {
    /// The aggregate the command goes to.
    pub(crate) fn account(&self) -> &str {
        match self {
            Op::Open { account, .. } | Op::Deposit { account, .. } => account,
            Op::Transfer { from, .. } => from,
        }
    }

    fn request(&self) -> (&'static str, &'static str, Value) {
        match self {
            Op::Open { balance, .. } => (
                "open",
                "PROCESSED",
                json!({"name": "Chaos", "balance": balance}),
            ),
            Op::Deposit { amount, .. } => ("deposit", "PROCESSED", json!({"amount": amount})),
            Op::Transfer { to, amount, .. } => (
                "transfer",
                "SAGA_HANDLED",
                json!({"to": to, "amount": amount}),
            ),
        }
    }
}

/// One send of an intent's command and what came back.
#[derive(Debug, Clone)]
pub(crate) struct Send {
    /// When it was sent and when its answer (or error) came, ms since the epoch.
    pub(crate) started_ms: u64,
    pub(crate) ended_ms: u64,
    /// The HTTP status; `None` when no answer came (connection refused or cut, a timeout).
    pub(crate) status: Option<u16>,
    /// The answer's `commandId`: this message's id.
    pub(crate) command_id: Option<String>,
    pub(crate) error_code: Option<String>,
    pub(crate) stage: Option<String>,
    pub(crate) version: Option<u64>,
    /// `result.originalCommandId` of a duplicate.
    pub(crate) original_command_id: Option<String>,
}

/// A look-up's answer (`/{aggregate}/{id}/requests/{requestId}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Appended {
        version: u64,
        command_id: String,
    },
    Rejected {
        code: String,
    },
    InFlight,
    None,
    Unknown,
    /// No readable answer: no connection, another status, a body that is not a look-up.
    Error(String),
}

/// One look-up and its answer.
#[derive(Debug, Clone)]
pub(crate) struct LookUp {
    pub(crate) started_ms: u64,
    pub(crate) ended_ms: u64,
    pub(crate) answer: Answer,
}

/// How the caller ended the intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Applied at `version` (an answer 200, a duplicate, or a look-up `APPENDED`).
    Applied { version: u64 },
    /// Rejected for good with `code` (a 4xx decision or a look-up `REJECTED`).
    Rejected { code: String },
    /// Still unknown when the deadline came.
    Unresolved,
}

/// One business intent: one request id, every message sent for it, every look-up.
#[derive(Debug, Clone)]
pub(crate) struct Intent {
    pub(crate) caller: usize,
    pub(crate) request_id: String,
    pub(crate) op: Op,
    pub(crate) sends: Vec<Send>,
    pub(crate) look_ups: Vec<LookUp>,
    pub(crate) outcome: Outcome,
}

/// The gateway over HTTP.
#[derive(Clone)]
pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    /// The API of the gateway at `address`.
    pub(crate) fn new(address: &str) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(WAIT_TIMEOUT_MS + 8_000))
            .connect_timeout(Duration::from_secs(1))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            http,
            base: format!("http://{address}"),
        })
    }

    /// `GET path`: the status and the JSON body, or why there is none.
    pub(crate) async fn get(&self, path: &str) -> Result<(StatusCode, Value), String> {
        let response = self
            .http
            .get(format!("{}/{path}", self.base))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let body = response.json().await.map_err(|e| e.to_string())?;
        Ok((status, body))
    }

    /// `GET {path}` of a state: the status, the bare state and its version (its `ETag`).
    pub(crate) async fn get_state(
        &self,
        path: &str,
    ) -> Result<(StatusCode, Value, Option<u64>), String> {
        let response = self
            .http
            .get(format!("{}/{path}", self.base))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let version = crate::support::tagged_version(response.headers());
        let body = response.json().await.map_err(|e| e.to_string())?;
        Ok((status, body, version))
    }

    async fn send(&self, op: &Op, request_id: &str) -> Send {
        let (command, stage, body) = op.request();
        let started_ms = now_ms();
        let answer = self
            .http
            .post(format!("{}/account/{}/{command}", self.base, op.account()))
            .header("Command-Request-Id", request_id)
            .header("Command-Wait-Stage", stage)
            .header("Command-Wait-Timeout", WAIT_TIMEOUT_MS.to_string())
            .json(&body)
            .send()
            .await;
        let (status, body) = match answer {
            Ok(response) => {
                let status = response.status().as_u16();
                (
                    Some(status),
                    response.json::<Value>().await.unwrap_or(Value::Null),
                )
            }
            Err(_) => (None, Value::Null),
        };
        let text = |value: &Value| value.as_str().map(str::to_owned);
        Send {
            started_ms,
            ended_ms: now_ms(),
            status,
            command_id: text(&body["commandId"]),
            error_code: text(&body["errorCode"]),
            stage: text(&body["stage"]),
            version: body["aggregateVersion"].as_u64(),
            original_command_id: text(&body["result"]["originalCommandId"]),
        }
    }

    async fn look_up(&self, account: &str, request_id: &str) -> LookUp {
        let started_ms = now_ms();
        let answer = match self
            .get(&format!("account/{account}/requests/{request_id}"))
            .await
        {
            Ok((_, body)) => match body["status"].as_str() {
                Some("APPENDED") => match (body["version"].as_u64(), body["commandId"].as_str()) {
                    (Some(version), Some(command_id)) => Answer::Appended {
                        version,
                        command_id: command_id.to_owned(),
                    },
                    _ => Answer::Error(format!("APPENDED without version or command id: {body}")),
                },
                Some("REJECTED") => Answer::Rejected {
                    code: body["errorCode"].as_str().unwrap_or_default().to_owned(),
                },
                Some("IN_FLIGHT") => Answer::InFlight,
                Some("NONE") => Answer::None,
                Some("UNKNOWN") => Answer::Unknown,
                _ => Answer::Error(format!("not a look-up: {body}")),
            },
            Err(error) => Answer::Error(error),
        };
        LookUp {
            started_ms,
            ended_ms: now_ms(),
            answer,
        }
    }

    /// Sends `op` under `request_id` and resolves its outcome as SPEC TO-2 says, until
    /// `deadline`: on a timeout, an error or no answer, looks the request up; `NONE`: sends it
    /// again with the same request id (after 200 ms if the last send was refused); `IN_FLIGHT` or `UNKNOWN` (or no answer): looks again
    /// later; `APPENDED` or `REJECTED`: done.
    pub(crate) async fn resolve(
        &self,
        caller: usize,
        request_id: String,
        op: Op,
        deadline: Instant,
    ) -> Intent {
        let mut intent = Intent {
            caller,
            request_id,
            op,
            sends: Vec::new(),
            look_ups: Vec::new(),
            outcome: Outcome::Unresolved,
        };
        let mut send = true;
        while Instant::now() < deadline {
            if send {
                let sent = self.send(&intent.op, &intent.request_id).await;
                let decided = decision(&sent);
                intent.sends.push(sent);
                if let Some(outcome) = decided {
                    intent.outcome = outcome;
                    return intent;
                }
            }
            let look_up = self.look_up(intent.op.account(), &intent.request_id).await;
            let answer = look_up.answer.clone();
            intent.look_ups.push(look_up);
            send = false;
            match answer {
                Answer::Appended { version, .. } => {
                    intent.outcome = Outcome::Applied { version };
                    return intent;
                }
                Answer::Rejected { code } => {
                    intent.outcome = Outcome::Rejected { code };
                    return intent;
                }
                Answer::None => {
                    // A send the deployment refused (NATS down: 503 at SENT) or never answered
                    // is sent again after a pause, not in a tight loop.
                    let refused = intent
                        .sends
                        .last()
                        .is_some_and(|s| s.status.is_none_or(|status| status >= 500));
                    if refused {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    send = true;
                }
                Answer::InFlight => tokio::time::sleep(Duration::from_millis(200)).await,
                Answer::Unknown | Answer::Error(_) => {
                    tokio::time::sleep(Duration::from_millis(300)).await
                }
            }
        }
        intent
    }
}

/// The outcome a send's answer decides, if it decides one: 200 or `DuplicateRequestId`
/// applied; a business rule (422) or a missing aggregate (404) rejected. Anything else (408,
/// 5xx, no answer, another conflict) leaves it to the look-up.
fn decision(sent: &Send) -> Option<Outcome> {
    let status = StatusCode::from_u16(sent.status?).ok()?;
    let version = sent.version.unwrap_or_default();
    match status {
        StatusCode::OK => Some(Outcome::Applied { version }),
        StatusCode::CONFLICT if sent.error_code.as_deref() == Some("DuplicateRequestId") => {
            Some(Outcome::Applied { version })
        }
        StatusCode::UNPROCESSABLE_ENTITY | StatusCode::NOT_FOUND => Some(Outcome::Rejected {
            code: sent.error_code.clone().unwrap_or_default(),
        }),
        _ => None,
    }
}

/// A caller: until `stop`, draws an intent (a deposit of 1 to 9 to one of `accounts`, or a
/// transfer of 1 to 9 between two of them, two times in five) and resolves it before the next;
/// an intent still open at `stop` is resolved until `deadline`.
pub(crate) async fn caller(
    api: Api,
    caller: usize,
    accounts: Vec<String>,
    mut rng: Rng,
    stop: Arc<AtomicBool>,
    deadline: Instant,
) -> Vec<Intent> {
    let mut intents = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let pick = |rng: &mut Rng| accounts[rng.between(0, accounts.len() as u64) as usize].clone();
        let amount = rng.between(1, 10) as i64;
        let op = if rng.between(0, 5) < 2 {
            let from = pick(&mut rng);
            let mut to = pick(&mut rng);
            while to == from {
                to = pick(&mut rng);
            }
            Op::Transfer { from, to, amount }
        } else {
            Op::Deposit {
                account: pick(&mut rng),
                amount,
            }
        };
        let request_id = format!("c{caller}-{n}");
        intents.push(api.resolve(caller, request_id, op, deadline).await);
        n += 1;
    }
    intents
}
