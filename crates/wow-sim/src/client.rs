//! Simulated callers. Each follows SPEC TO-2 as `wow-client`'s `send_safely` does: keep the
//! request id; on a timeout or an unavailable answer, look the request up (SPEC TO-1,
//! [`look_up_request`]); if appended, stop (never resend as a new intent); if rejected, that
//! is final (SPEC ID-6); if in flight, look again; if no decision is recorded, resend with
//! the same request id; if history cannot be asked, stay unknown. A business rejection is
//! final as answered: the node recorded it before answering. Some intents are pinned to the
//! version their caller last saw (SPEC ES-3, [`pinning`]). Every intent and every answer is
//! recorded.

mod pinning;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use wow_core::command::{CommandResultError, REPLAYED};
use wow_core::eventsourcing::{is_recorded_rejection, EventStore};
use wow_core::{AggregateId, CommandMessage, CommandResult, CommandStage, ErrorCode};
use wow_runtime::command::{look_up_request, CommandGateway, RequestOutcome, WaitPlan, RECORDED};

use crate::chaos::{Chaos, FaultKind, Logged};
use crate::domain::WalletCommand;
pub(crate) use pinning::{SeenVersions, MAX_CONFLICT_RETRIES};

/// Sends of one intent before the caller gives up and leaves it unknown.
const MAX_ATTEMPTS: u32 = 4;
/// The longest a caller waits between two tries (its backoff doubles up to this).
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Look-ups of one unknown answer before the caller leaves it unknown.
const MAX_LOOKUPS: u32 = 6;

/// One business intent of a caller: one request id.
#[derive(Debug, Clone)]
pub(crate) struct Intent {
    /// `c<client>#<n>`, for the trace.
    pub(crate) label: String,
    pub(crate) aggregate: AggregateId,
    pub(crate) command: WalletCommand,
    pub(crate) request_id: String,
    /// Whether its caller pins the version it last saw of the aggregate (SPEC ES-3).
    pub(crate) pinned: bool,
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
    /// A pinned intent answered `CommandExpectVersionConflict` this many times, its caller
    /// reloading and resending after each until it gave up: nothing recorded (SPEC ES-3).
    Conflicted { conflicts: u32 },
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
    /// Every answer any message of the intent got, in order.
    pub(crate) answers: Vec<Answered>,
    /// Messages sent for it.
    pub(crate) sends: u32,
    /// The version each pinned message of it pinned, by command id.
    pub(crate) pins: BTreeMap<String, u64>,
    /// Resends after a conflict, each with a freshly loaded version (SPEC ES-3).
    pub(crate) conflict_retries: u32,
}

/// One answer to one message of an intent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answered {
    /// Its code (`Ok` for a success).
    pub(crate) code: ErrorCode,
    /// The stage it came from.
    pub(crate) stage: CommandStage,
    /// Whether it replayed a recorded decision.
    pub(crate) replayed: bool,
}

/// What the sends of one intent collect, shared with its concurrent resends.
#[derive(Debug, Default)]
struct Collected {
    reported: Vec<CommandResult>,
    answers: Vec<Answered>,
    /// The command ids of the messages sent so far.
    sent: Vec<String>,
    /// The version the next message pins, for a pinned intent.
    pin: Option<u64>,
    /// The version each pinned message sent so far pinned, by command id.
    pins: BTreeMap<String, u64>,
    /// Resends after a conflict so far.
    conflict_retries: u32,
}

/// One simulated caller.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) gateway: CommandGateway,
    pub(crate) store: Arc<dyn EventStore>,
    pub(crate) chaos: Arc<Chaos>,
    /// The versions this caller last saw, which its pinned intents pin.
    pub(crate) seen: Arc<SeenVersions>,
    /// Resends of a pinned intent after conflicts before this caller gives up.
    pub(crate) conflict_retries: u32,
}

enum Answer {
    Final(Verdict),
    /// `CommandExpectVersionConflict`: history passed the pinned version (SPEC ES-3).
    Conflict,
    Unknown(String),
}

impl Client {
    /// What the pipeline says of `intent` (SPEC TO-1): the authoritative look-up, noted in
    /// the trace; a `NONE` is also logged for the checks, with the messages sent by then.
    async fn look_up(&self, intent: &Intent, collected: &Mutex<Collected>) -> RequestOutcome {
        let outcome = look_up_request(
            &self.gateway,
            self.store.as_ref(),
            &intent.aggregate,
            &intent.request_id,
        )
        .await;
        if let RequestOutcome::Appended(record) = &outcome {
            self.seen.saw(&intent.aggregate.id, record.version);
        }
        let said = match &outcome {
            RequestOutcome::Appended(record) => format!("appended at v{}", record.version),
            RequestOutcome::Rejected(record) => format!("rejected with {}", record.error_code),
            RequestOutcome::Unknown(error) => format!("unknown: {error}"),
            other => other.status().to_owned(),
        };
        self.chaos.note(format!("{} look-up: {said}", intent.label));
        if matches!(outcome, RequestOutcome::None) {
            self.log_with_sent(intent, collected, |sent| Logged::LookedUpNone { sent });
        }
        outcome
    }

    /// Logs what `logged` makes of the command ids of `intent`'s messages sent so far, for
    /// the checks.
    fn log_with_sent(
        &self,
        intent: &Intent,
        collected: &Mutex<Collected>,
        logged: impl FnOnce(Vec<String>) -> Logged,
    ) {
        let sent = collected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .sent
            .clone();
        self.chaos
            .log(&intent.aggregate.id, &intent.request_id, logged(sent));
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

    fn message(&self, intent: &Intent, pin: Option<u64>) -> CommandMessage<serde_json::Value> {
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
        match pin {
            Some(version) => message.with_expected_version(version),
            None => message,
        }
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
    async fn send_once(&self, intent: &Intent, collected: &Mutex<Collected>) -> Answer {
        let message = {
            let mut collected = collected.lock().unwrap_or_else(|p| p.into_inner());
            let message = self.message(intent, collected.pin);
            collected.sent.push(message.id.clone());
            if let Some(pin) = collected.pin {
                collected.pins.insert(message.id.clone(), pin);
            }
            message
        };
        let plan = self.plan(intent);
        self.chaos.note(format!(
            "{} {} {} on {} as {} request {}{} wait {} {}ms",
            intent.label,
            message.name,
            message.body,
            intent.aggregate.id,
            message.id,
            intent.request_id,
            message
                .aggregate_version
                .map_or(String::new(), |pin| format!(" pinned v{pin}")),
            plan.stage,
            plan.timeout.as_millis()
        ));
        let outcome = self.gateway.send_and_wait(message, plan).await;
        let answer = classify(&outcome);
        {
            let mut collected = collected.lock().unwrap_or_else(|p| p.into_inner());
            let result = match &outcome {
                Ok(result) => result,
                Err(error) => error.result(),
            };
            if let Some(version) = result.aggregate_version {
                self.seen.saw(&intent.aggregate.id, version);
            }
            collected.answers.push(Answered {
                code: result.error_code.clone(),
                stage: result.stage,
                replayed: result.result.get(REPLAYED) == Some(&true.into()),
            });
            if let Ok(result) = &outcome {
                if result.result.get(RECORDED) == Some(&true.into())
                    || result.stage > CommandStage::Processed
                {
                    collected.reported.push(result.clone());
                }
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

    /// Carries out one intent to a verdict (SPEC TO-2): send (sometimes twice at once), and
    /// on an unknown answer look the request up, resending with the same request id, after
    /// a growing backoff, while no decision is recorded; then wait for the twins and record
    /// everything.
    async fn carry_out(&self, intent: Intent) -> IntentRecord {
        let collected = Arc::new(Mutex::new(Collected {
            pin: self.first_pin(&intent).await,
            ..Collected::default()
        }));
        let mut side = Vec::new();
        let (mut sends, mut conflicts) = (0, 0);
        let mut backoff = Duration::from_millis(50);
        let verdict = loop {
            sends += 1;
            if let Some(twin) = self.maybe_send_twin(&intent, &collected) {
                sends += 1;
                side.push(twin);
            }
            let reason = match self.send_once(&intent, &collected).await {
                // Applied, or rejected for good: a rejection is recorded before it is
                // answered (SPEC ID-6), so no look-up is needed, and none may mask one that
                // was not.
                Answer::Final(verdict) => break verdict,
                // SPEC ES-3: nothing was recorded; reload, re-decide, resend at once with the
                // same request id and the fresh version.
                Answer::Conflict => {
                    conflicts += 1;
                    match self.after_conflict(&intent, &collected, conflicts).await {
                        Some(verdict) => break verdict,
                        None => continue,
                    }
                }
                Answer::Unknown(reason) => reason,
            };
            // Resends after a conflict do not count against the resends of unknown answers.
            let looked_up = self
                .resolve_unknown(
                    &intent,
                    &collected,
                    &reason,
                    sends - conflicts,
                    &mut backoff,
                )
                .await;
            if let Some(verdict) = looked_up {
                break verdict;
            }
            tokio::time::sleep(backoff).await;
            backoff = next_backoff(backoff);
        };
        let side_verdicts = twin_verdicts(side).await;
        self.chaos
            .note(format!("{} verdict {verdict:?}", intent.label));
        let collected = std::mem::take(&mut *collected.lock().unwrap_or_else(|p| p.into_inner()));
        IntentRecord {
            intent,
            verdict,
            side_verdicts,
            reported_ok: collected.reported,
            answers: collected.answers,
            sends,
            pins: collected.pins,
            conflict_retries: collected.conflict_retries,
        }
    }

    /// When the seed injects a concurrent resend, spawns a twin send of `intent` that
    /// collects into the same `collected`; its handle yields the twin's verdict.
    fn maybe_send_twin(
        &self,
        intent: &Intent,
        collected: &Arc<Mutex<Collected>>,
    ) -> Option<JoinHandle<Verdict>> {
        if !self.chaos.inject(FaultKind::ConcurrentResend, || {
            format!("{} sent twice at once", intent.label)
        }) {
            return None;
        }
        let twin = self.clone();
        let twin_intent = intent.clone();
        let twin_collected = collected.clone();
        Some(tokio::spawn(async move {
            match twin.send_once(&twin_intent, &twin_collected).await {
                Answer::Final(verdict) => verdict,
                // The caller's own send resolves a conflict; the twin cannot tell.
                Answer::Conflict => Verdict::Unknown {
                    reason: "version conflict".to_owned(),
                },
                Answer::Unknown(reason) => Verdict::Unknown { reason },
            }
        }))
    }

    /// After an unknown answer (`reason`) to the `sends`-th send, looks the request up until
    /// it tells: `Some` verdict when it is appended or rejected, or when the caller gives up
    /// (no decision after [`MAX_ATTEMPTS`] sends, or still undecided after [`MAX_LOOKUPS`]
    /// look-ups); `None` when no decision is recorded and the caller should resend. Waits
    /// `backoff` between look-ups, growing it.
    async fn resolve_unknown(
        &self,
        intent: &Intent,
        collected: &Mutex<Collected>,
        reason: &str,
        sends: u32,
        backoff: &mut Duration,
    ) -> Option<Verdict> {
        let mut lookups = 0;
        loop {
            lookups += 1;
            match self.look_up(intent, collected).await {
                RequestOutcome::Appended(record) => {
                    return Some(Verdict::Applied {
                        version: Some(record.version),
                        how: "look-up".to_owned(),
                    });
                }
                RequestOutcome::Rejected(record) => {
                    return Some(Verdict::Rejected {
                        code: record.error_code,
                        stage: CommandStage::Processed,
                    });
                }
                RequestOutcome::None if sends < MAX_ATTEMPTS => {
                    self.chaos
                        .note(format!("{} no decision recorded; resend", intent.label));
                    return None;
                }
                RequestOutcome::None => {
                    return Some(Verdict::Unknown {
                        reason: format!("{reason}; no decision after {sends} sends"),
                    })
                }
                // In flight (wait for it), or the store could not be asked: look again.
                RequestOutcome::InFlight | RequestOutcome::Unknown(_) if lookups < MAX_LOOKUPS => {
                    tokio::time::sleep(*backoff).await;
                    *backoff = next_backoff(*backoff);
                }
                outcome => {
                    return Some(Verdict::Unknown {
                        reason: format!(
                            "{reason}; still {} after {lookups} look-ups",
                            outcome.status()
                        ),
                    })
                }
            }
        }
    }
}

/// The backoff after `backoff`: doubled, at most [`MAX_BACKOFF`].
fn next_backoff(backoff: Duration) -> Duration {
    backoff.saturating_mul(2).min(MAX_BACKOFF)
}

/// The verdicts of the twin sends, in the order they were sent; a twin that panicked is
/// unknown.
async fn twin_verdicts(side: Vec<JoinHandle<Verdict>>) -> Vec<Verdict> {
    let mut side_verdicts = Vec::new();
    for twin in side {
        side_verdicts.push(twin.await.unwrap_or_else(|error| Verdict::Unknown {
            reason: format!("twin send panicked: {error}"),
        }));
    }
    side_verdicts
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
        // History passed the pinned version; nothing was recorded (SPEC ES-3).
        ErrorCode::CommandExpectVersionConflict => Answer::Conflict,
        // The request id is in history: an earlier attempt applied it.
        ErrorCode::DuplicateRequestId => Answer::Final(Verdict::Applied {
            version: result.aggregate_version,
            how: "duplicate".to_owned(),
        }),
        // Final: a business rejection (recorded, SPEC ID-6), a validation failure (its body
        // never passes), or a request id reused for another body (SPEC ID-5).
        code if is_recorded_rejection(code)
            || matches!(
                code,
                ErrorCode::CommandValidation | ErrorCode::RequestIdReused
            ) =>
        {
            Answer::Final(Verdict::Rejected {
                code: code.clone(),
                stage: result.stage,
            })
        }
        // Unavailable, the node gave up on a busy aggregate, or anything else: nothing is
        // known.
        code => Answer::Unknown(format!("{code} at {}", result.stage)),
    }
}
