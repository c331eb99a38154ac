//! The invariants checked after every run, once the system is quiet. Each violation is a
//! line naming the clause it breaks.

use std::collections::{BTreeMap, BTreeSet};

use wow_core::eventsourcing::EventStore;
use wow_core::saga::saga_request_id;
use wow_core::{AggregateId, CommandResult, CommandStage, DomainEventStream, ErrorCode};

use crate::client::{IntentRecord, Verdict};
use crate::consumers::{earns_reward, typed_events, Balances};
use crate::domain::{balance_delta, WalletEvent};

/// What a run left behind, read after it went quiet.
#[derive(Debug)]
pub(crate) struct Observed<'a> {
    /// Every aggregate's history, by aggregate id, read from the store without faults.
    pub(crate) history: BTreeMap<String, Vec<DomainEventStream>>,
    pub(crate) intents: &'a [IntentRecord],
    pub(crate) saga_reported: &'a [CommandResult],
    pub(crate) balances: Balances,
    pub(crate) outbox: Vec<String>,
    pub(crate) waiting: usize,
    pub(crate) rewards_wallet: &'a str,
    /// Request ids a message of which the bus may have delivered again after its answer.
    pub(crate) arriving_again: BTreeSet<String>,
}

/// How the intents of a run ended, for the report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IntentTally {
    /// Intents the caller saw applied.
    pub applied: u64,
    /// Intents the caller saw rejected.
    pub rejected: u64,
    /// Intents left unknown that the final look-up found appended.
    pub unknown_then_applied: u64,
    /// Intents left unknown that the final look-up found absent.
    pub unknown_then_absent: u64,
    /// Messages sent beyond the first per intent (resends).
    pub resends: u64,
    /// Rejections superseded: the caller was told "rejected", and another message of the
    /// same intent (a resend, or a redelivery by the bus) was applied afterwards. A rejection
    /// answers for one message, not for the intent (see `docs/reliability.md`, finding 2).
    pub rejected_then_applied: u64,
}

/// Loads every aggregate's history from `store` (the store without faults).
pub(crate) async fn read_history(
    store: &dyn EventStore,
    aggregates: &[AggregateId],
) -> Result<BTreeMap<String, Vec<DomainEventStream>>, String> {
    let mut history = BTreeMap::new();
    for aggregate in aggregates {
        let streams = store
            .load(aggregate, 1, u64::MAX)
            .await
            .map_err(|e| format!("history of {} unreadable: {e}", aggregate.id))?;
        history.insert(aggregate.id.clone(), streams);
    }
    Ok(history)
}

/// Checks every invariant; returns the violations and how the intents ended.
pub(crate) fn check(observed: &Observed<'_>) -> (Vec<String>, IntentTally) {
    let mut violations = Vec::new();
    let mut by_request: BTreeMap<(&str, &str), &DomainEventStream> = BTreeMap::new();
    let mut event_ids: Vec<String> = Vec::new();

    for (wallet, streams) in &observed.history {
        // Versions contiguous per aggregate (ES-1, ES-3).
        for (index, stream) in streams.iter().enumerate() {
            let expected = index as u64 + 1;
            if stream.version != expected {
                violations.push(format!(
                    "ES-1: {wallet} has version {} where {expected} was due",
                    stream.version
                ));
            }
        }
        // At most one stream per (aggregate, request id) (ID-3, ES-1).
        for stream in streams {
            if by_request
                .insert((wallet.as_str(), stream.request_id.as_str()), stream)
                .is_some()
            {
                violations.push(format!(
                    "ES-1: {wallet} holds request id {} twice",
                    stream.request_id
                ));
            }
            event_ids.extend(stream.body.iter().map(|e| e.id.clone()));
        }
    }

    // Every command reported PROCESSED-succeeded is in history (ST-4).
    let reported = observed
        .intents
        .iter()
        .flat_map(|record| record.reported_ok.iter())
        .chain(observed.saga_reported.iter());
    for result in reported {
        match by_request.get(&(result.aggregate_id.as_str(), result.request_id.as_str())) {
            None => violations.push(format!(
                "ST-4: command {} reported {} succeeded but request {} of {} is not in history",
                result.command_id, result.stage, result.request_id, result.aggregate_id
            )),
            Some(stream) => {
                let same_version = result.aggregate_version == Some(stream.version);
                let same_command = result.command_id == stream.command_id;
                if !(same_version && same_command) {
                    violations.push(format!(
                        "ST-4: command {} reported {} at v{:?}, history holds command {} at v{}",
                        result.command_id,
                        result.stage,
                        result.aggregate_version,
                        stream.command_id,
                        stream.version
                    ));
                }
            }
        }
    }

    // Every intent ends applied once, rejected (and absent), or unknown and resolved (TO-2).
    let mut tally = IntentTally::default();
    let mut intent_requests: BTreeSet<(String, String)> = BTreeSet::new();
    for record in observed.intents {
        let intent = &record.intent;
        let key = (intent.aggregate.id.clone(), intent.request_id.clone());
        let in_history = by_request.get(&(key.0.as_str(), key.1.as_str()));
        intent_requests.insert(key.clone());
        tally.resends += u64::from(record.sends.saturating_sub(1));
        for verdict in std::iter::once(&record.verdict).chain(record.side_verdicts.iter()) {
            match verdict {
                Verdict::Applied { version, how } => match in_history {
                    None => violations.push(format!(
                        "TO-2: {} request {} was seen applied ({how}) but is not in history",
                        intent.label, intent.request_id
                    )),
                    Some(stream) if version.is_some_and(|v| v != stream.version) => violations
                        .push(format!(
                            "TO-2: {} seen applied at v{version:?} ({how}), history has v{}",
                            intent.label, stream.version
                        )),
                    Some(_) => {}
                },
                Verdict::Rejected { code, stage } => {
                    let superseded =
                        record.sends > 1 || observed.arriving_again.contains(&intent.request_id);
                    if in_history.is_some() && superseded {
                        tally.rejected_then_applied += 1;
                    } else if in_history.is_some() {
                        violations.push(format!(
                            "TO-2: {} request {} was reported rejected ({code} at {stage}) but is in history",
                            intent.label, intent.request_id
                        ));
                    }
                    if *code == ErrorCode::RequestIdReused {
                        violations.push(format!(
                            "ID-5: {} got RequestIdReused for its own body",
                            intent.label
                        ));
                    }
                    if *code == ErrorCode::CommandValidation && *stage != CommandStage::Sent {
                        violations.push(format!(
                            "RQ-9: {} failed validation at {stage}, not before sending",
                            intent.label
                        ));
                    }
                }
                Verdict::Unknown { .. } => {}
            }
        }
        match (&record.verdict, in_history) {
            (Verdict::Applied { .. }, _) => tally.applied += 1,
            (Verdict::Rejected { .. }, _) => tally.rejected += 1,
            (Verdict::Unknown { .. }, Some(_)) => tally.unknown_then_applied += 1,
            (Verdict::Unknown { .. }, None) => tally.unknown_then_absent += 1,
        }
    }

    // No stream without an intent: callers' and the saga's request ids only (TO-2, DS-3).
    let mut rewards_due: BTreeSet<String> = BTreeSet::new();
    for (wallet, streams) in &observed.history {
        for stream in streams {
            for (event_id, event) in typed_events(stream) {
                if earns_reward(wallet, &event) {
                    rewards_due.insert(saga_request_id(&event_id, 0));
                }
            }
        }
    }
    for (wallet, streams) in &observed.history {
        for stream in streams {
            let known = if wallet == observed.rewards_wallet {
                rewards_due.contains(&stream.request_id)
            } else {
                intent_requests.contains(&(wallet.clone(), stream.request_id.clone()))
            };
            if !known {
                violations.push(format!(
                    "TO-2: {wallet}@v{} holds request id {} that no intent or saga event made",
                    stream.version, stream.request_id
                ));
            }
        }
    }
    // Once quiet, every reward due is credited exactly once (DS-3).
    let rewards: BTreeSet<&str> = observed
        .history
        .get(observed.rewards_wallet)
        .map(|streams| streams.iter().map(|s| s.request_id.as_str()).collect())
        .unwrap_or_default();
    for due in &rewards_due {
        if !rewards.contains(due.as_str()) {
            violations.push(format!("DS-3: the reward {due} was never credited"));
        }
    }

    // Each downstream effect at most once per event and, once quiet, exactly once (DS-1, DS-2).
    let expected: BTreeSet<&String> = event_ids.iter().collect();
    for (event_id, times) in &observed.balances.applied {
        if *times != 1 {
            violations.push(format!(
                "DS-2: the projection applied event {event_id} {times} times"
            ));
        }
        if !expected.contains(event_id) {
            violations.push(format!(
                "DS-2: the projection applied event {event_id}, which is not in history"
            ));
        }
    }
    for event_id in &expected {
        if !observed.balances.applied.contains_key(*event_id) {
            violations.push(format!(
                "DS-1: the projection never applied event {event_id} once quiet"
            ));
        }
    }
    let mut rows: BTreeMap<&String, usize> = BTreeMap::new();
    for row in &observed.outbox {
        *rows.entry(row).or_default() += 1;
    }
    for (event_id, times) in &rows {
        if *times != 1 || !expected.contains(event_id) {
            violations.push(format!(
                "DS-2: the outbox holds event {event_id} {times} times (in history: {})",
                expected.contains(event_id)
            ));
        }
    }
    for event_id in &expected {
        if !rows.contains_key(event_id) {
            violations.push(format!(
                "DS-1: the outbox never got event {event_id} once quiet"
            ));
        }
    }

    // The projection equals a fold of history, which never goes below zero.
    for (wallet, streams) in &observed.history {
        let mut balance: i64 = 0;
        for stream in streams {
            for (_, event) in typed_events(stream) {
                balance += balance_delta(&event);
                if balance < 0 {
                    violations.push(format!(
                        "ES-3: {wallet} went below zero at v{} ({event:?})",
                        stream.version
                    ));
                }
                if matches!(event, WalletEvent::Opened) && stream.version != 1 {
                    violations.push(format!(
                        "ES-4: {wallet} opened again at v{}",
                        stream.version
                    ));
                }
            }
        }
        let projected = observed.balances.balances.get(wallet).copied().unwrap_or(0);
        if projected != balance {
            violations.push(format!(
                "DS-2: the projection says {wallet} holds {projected}, history folds to {balance}"
            ));
        }
    }

    // No wait handle left registered (ST-6).
    if observed.waiting != 0 {
        violations.push(format!(
            "ST-6: {} wait handles still registered once quiet",
            observed.waiting
        ));
    }
    (violations, tally)
}
