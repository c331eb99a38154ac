//! Simulated callers. Each follows SPEC TO-2 as `wow-client`'s `send_safely` does: keep the
//! request id; on a timeout or an unavailable answer, confirm history by request id; if
//! appended, stop (never resend as a new intent); if absent, resend with the same request id;
//! if history cannot be asked, stay unknown. Every intent and every answer is recorded.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use wow_core::command::{CommandGateway, CommandResultError, WaitPlan, RECORDED};
use wow_core::eventsourcing::EventStore;
use wow_core::{AggregateId, CommandMessage, CommandResult, CommandStage, ErrorCode};

use crate::chaos::{Chaos, FaultKind};
use crate::domain::WalletCommand;

/// Sends of one intent before the caller gives up and leaves it unknown.
const MAX_ATTEMPTS: u32 = 4;
/// Look-ups of one unknown answer before the caller leaves it unknown.
const MAX_LOOKUPS: u32 = 4;

/// One business intent of a caller: one request id.
#[derive(Debug, Clone)]
pub(crate) struct Intent {
    /// `c<client>#<n>`, for the trace.
    pub(crate) label: String,
    pub(crate) aggregate: AggregateId,
    pub(crate) command: WalletCommand,
    pub(crate) request_id: String,
}

/// What a caller concluded about one answer or one intent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// The intent is in history (at this version, when the answer said).
    Applied { version: Option<u64>, how: String },
    /// The pipeline rejected it, with this code, at this stage.
    Rejected {
        code: ErrorCode,
        stage: CommandStage,
    },
    /// The caller could not tell; the final look-up resolves it.
    Unknown { reason: String },
}

/// Everything a caller did for one intent.
#[derive(Debug, Clone)]
pub(crate) struct IntentRecord {
    pub(crate) intent: Intent,
    /// The caller's conclusion.
    pub(crate) verdict: Verdict,
    /// The conclusions of concurrent resends of the same request id.
    pub(crate) side_verdicts: Vec<Verdict>,
    /// Results reported as `PROCESSED` (or later) and succeeded, with a recorded stream.
    pub(crate) reported_ok: Vec<CommandResult>,
    /// Messages sent for it.
    pub(crate) sends: u32,
}

/// One simulated caller.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) gateway: CommandGateway,
    pub(crate) store: Arc<dyn EventStore>,
    pub(crate) chaos: Arc<Chaos>,
}

enum Answer {
    Final(Verdict),
    Unknown(String),
}

impl Client {
    /// What history says of `intent` (SPEC TO-1): the version that holds its request id, or
    /// `None` when it is not there. A hit is noted in the trace.
    async fn look_up(
        &self,
        intent: &Intent,
        context: &str,
    ) -> Result<Option<u64>, wow_core::eventsourcing::EventStoreError> {
        let found = self
            .store
            .find_request(&intent.aggregate, &intent.request_id)
            .await?;
        if let Some(record) = &found {
            let context = if context.is_empty() {
                String::new()
            } else {
                format!(" {context}")
            };
            self.chaos.note(format!(
                "{} look-up{context}: appended at v{}",
                intent.label, record.version
            ));
        }
        Ok(found.map(|record| record.version))
    }

    /// Runs `intents` one after the other and records each.
    pub(crate) async fn run(self, intents: Vec<Intent>) -> Vec<IntentRecord> {
        let mut records = Vec::with_capacity(intents.len());
        for intent in intents {
            let pause = self.chaos.range(0, 60);
            tokio::time::sleep(Duration::from_millis(pause)).await;
            records.push(self.carry_out(intent).await);
        }
        records
    }

    fn message(&self, intent: &Intent) -> CommandMessage<serde_json::Value> {
        let mut message = CommandMessage::of(intent.aggregate.clone(), intent.command.clone())
            .into_json()
            .unwrap_or_else(|error| {
                // The wallet's commands always encode; keep going with an empty body, which
                // the gateway rejects (and the checks then flag).
                self.chaos.note(format!("encode failed: {error}"));
                CommandMessage::new(
                    intent.aggregate.clone(),
                    "deposit",
                    wow_core::command::CommandKind::Normal,
                    serde_json::Value::Null,
                )
            });
        message.id = self.chaos.next_id("cmd");
        message.request_id = intent.request_id.clone();
        message
    }

    fn plan(&self, intent: &Intent) -> WaitPlan {
        let stage = match self.chaos.range(0, 10) {
            0 => CommandStage::Projected,
            1 => CommandStage::EventHandled,
            2 | 3 => CommandStage::SagaHandled,
            _ => CommandStage::Processed,
        };
        let timeout = if self.chaos.inject(FaultKind::CallerTimeout, || {
            format!("{} waits briefly", intent.label)
        }) {
            Duration::from_millis(self.chaos.range(5, 80))
        } else {
            Duration::from_secs(5)
        };
        WaitPlan::new(stage).with_timeout(timeout)
    }

    /// One send, classified.
    async fn send_once(&self, intent: &Intent, reported: &Mutex<Vec<CommandResult>>) -> Answer {
        let message = self.message(intent);
        let plan = self.plan(intent);
        self.chaos.note(format!(
            "{} {} {} on {} as {} request {} wait {} {}ms",
            intent.label,
            message.name,
            message.body,
            intent.aggregate.id,
            message.id,
            intent.request_id,
            plan.stage,
            plan.timeout.as_millis()
        ));
        let outcome = self.gateway.send_and_wait(message, plan).await;
        let answer = classify(&outcome);
        if let Ok(result) = &outcome {
            if result.result.get(RECORDED) == Some(&true.into())
                || result.stage > CommandStage::Processed
            {
                reported
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(result.clone());
            }
        }
        let said = match &outcome {
            Ok(result) => format!("ok {} v{:?}", result.stage, result.aggregate_version),
            Err(error) => format!(
                "{} at {} ({})",
                error.error_code(),
                error.result().stage,
                if error.is_timeout() {
                    "timeout"
                } else {
                    "failed"
                }
            ),
        };
        self.chaos.note(format!("{} answer: {said}", intent.label));
        answer
    }

    /// Carries out one intent to a verdict (SPEC TO-2).
    async fn carry_out(&self, intent: Intent) -> IntentRecord {
        let reported = Arc::new(Mutex::new(Vec::new()));
        let mut side = Vec::new();
        let mut sends = 0;
        let mut backoff = Duration::from_millis(50);
        let verdict = 'intent: loop {
            sends += 1;
            if self.chaos.inject(FaultKind::ConcurrentResend, || {
                format!("{} sent twice at once", intent.label)
            }) {
                sends += 1;
                let twin = self.clone();
                let twin_intent = intent.clone();
                let twin_reported = reported.clone();
                side.push(tokio::spawn(async move {
                    match twin.send_once(&twin_intent, &twin_reported).await {
                        Answer::Final(verdict) => verdict,
                        Answer::Unknown(reason) => Verdict::Unknown { reason },
                    }
                }));
            }
            let reason = match self.send_once(&intent, &reported).await {
                // A rejection of a resend answers for that message only: an earlier one may
                // have been applied. Confirm it in history (SPEC TO-2).
                Answer::Final(Verdict::Rejected { code, stage }) if sends > 1 => {
                    match self.look_up(&intent, "after rejection").await {
                        Ok(Some(version)) => {
                            break 'intent Verdict::Applied {
                                version: Some(version),
                                how: format!("look-up after {code} on a resend"),
                            };
                        }
                        Ok(None) => break 'intent Verdict::Rejected { code, stage },
                        // History cannot say: unknown, like any other unanswered send.
                        Err(error) => {
                            format!("{code} on a resend, and the look-up failed: {error}")
                        }
                    }
                }
                Answer::Final(verdict) => break 'intent verdict,
                Answer::Unknown(reason) => reason,
            };
            // Unknown: confirm history before anything else.
            let mut lookups = 0;
            loop {
                lookups += 1;
                match self.look_up(&intent, "").await {
                    Ok(Some(version)) => {
                        break 'intent Verdict::Applied {
                            version: Some(version),
                            how: "look-up".to_owned(),
                        };
                    }
                    Ok(None) if sends < MAX_ATTEMPTS => {
                        self.chaos
                            .note(format!("{} look-up: not appended; resend", intent.label));
                        break;
                    }
                    Ok(None) => {
                        break 'intent Verdict::Unknown {
                            reason: format!("{reason}; not appended after {sends} sends"),
                        }
                    }
                    Err(error) if lookups < MAX_LOOKUPS => {
                        self.chaos
                            .note(format!("{} look-up failed: {error}", intent.label));
                        tokio::time::sleep(backoff).await;
                        backoff = backoff.saturating_mul(2);
                    }
                    Err(error) => {
                        break 'intent Verdict::Unknown {
                            reason: format!("{reason}; history unreachable: {error}"),
                        }
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = backoff.saturating_mul(2);
        };
        let mut side_verdicts = Vec::new();
        for twin in side {
            side_verdicts.push(twin.await.unwrap_or_else(|error| Verdict::Unknown {
                reason: format!("twin send panicked: {error}"),
            }));
        }
        self.chaos
            .note(format!("{} verdict {verdict:?}", intent.label));
        let reported_ok = reported.lock().unwrap_or_else(|p| p.into_inner()).clone();
        IntentRecord {
            intent,
            verdict,
            side_verdicts,
            reported_ok,
            sends,
        }
    }
}

/// What one answer tells the caller.
fn classify(outcome: &Result<CommandResult, CommandResultError>) -> Answer {
    let result = match outcome {
        Ok(result) => {
            return Answer::Final(Verdict::Applied {
                version: result.aggregate_version,
                how: format!("{} ok", result.stage),
            })
        }
        Err(CommandResultError::Timeout { result, .. }) => {
            return Answer::Unknown(format!("timeout at {}", result.stage))
        }
        Err(CommandResultError::Failed(result)) => result,
    };
    if result.stage > CommandStage::Processed {
        // A downstream stage failed: the command itself was processed (SPEC ST-5).
        return Answer::Final(Verdict::Applied {
            version: result.aggregate_version,
            how: format!("{} failed downstream", result.stage),
        });
    }
    match &result.error_code {
        // The request id is in history: an earlier attempt applied it.
        ErrorCode::DuplicateRequestId => Answer::Final(Verdict::Applied {
            version: result.aggregate_version,
            how: "duplicate".to_owned(),
        }),
        // Unavailable, or the node gave up on a busy aggregate: nothing is known.
        ErrorCode::ServiceUnavailable
        | ErrorCode::RequestTimeout
        | ErrorCode::EventVersionConflict
        | ErrorCode::InternalServerError => {
            Answer::Unknown(format!("{} at {}", result.error_code, result.stage))
        }
        code => Answer::Final(Verdict::Rejected {
            code: code.clone(),
            stage: result.stage,
        }),
    }
}
