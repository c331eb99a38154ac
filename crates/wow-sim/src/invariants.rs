//! The invariants checked after every run, once the system is quiet. Each violation is a
//! line naming the clause it breaks; the three of SPEC ID-6/ID-7 and money are tagged
//! `(a)`, `(b)` and `(c)`:
//!
//! - (a) no intent is answered rejected (final) and later applied;
//! - (b) no applied intent is answered with a business error;
//! - (c) money is conserved (see [`check`]).

mod conflicts;
mod intents;

use std::collections::{BTreeMap, BTreeSet};

use wow_core::eventsourcing::EventStore;
use wow_core::saga::saga_request_id;
use wow_core::{AggregateId, CommandResult, DomainEventStream, ErrorCode};

use crate::chaos::LogEntry;
use crate::client::IntentRecord;
use crate::consumers::{earns_reward, typed_events, Balances};
use crate::domain::{
    balance_delta, held_delta, Amount, Open, WalletCommand, WalletEvent, REWARD_AMOUNT,
};
use conflicts::conflicts;
use intents::{decision_order, intents_end, none_then_appended};

/// What a run left behind, read after it went quiet.
#[derive(Debug)]
pub(crate) struct Observed<'a> {
    /// Every aggregate's history, by aggregate id, read from the store without faults.
    pub(crate) history: BTreeMap<String, Vec<DomainEventStream>>,
    pub(crate) intents: &'a [IntentRecord],
    pub(crate) saga_reported: &'a [CommandResult],
    pub(crate) balances: Balances,
    pub(crate) outbox: Vec<String>,
    /// Every delivery the consumers acknowledged, in order: (consumer, wallet, version).
    pub(crate) handled_order: Vec<(String, String, u64)>,
    pub(crate) waiting: usize,
    pub(crate) rewards_wallet: &'a str,
    /// The appends that took effect and the final rejections nodes answered, in order.
    pub(crate) log: Vec<LogEntry>,
    /// The callers' requests the store holds a rejection of, with its code.
    pub(crate) rejections: BTreeMap<(String, String), ErrorCode>,
    /// Requests the in-flight registry still holds (0 without one).
    pub(crate) in_flight: usize,
    /// Whether the gateway shares an in-flight registry with the nodes.
    pub(crate) monolith: bool,
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
    /// Intents left unknown that the final look-up found rejected (SPEC ID-6).
    pub unknown_then_rejected: u64,
    /// Intents left unknown that the final look-up found undecided.
    pub unknown_then_absent: u64,
    /// Messages sent beyond the first per intent (resends).
    pub resends: u64,
    /// Answers of the nodes that replayed a recorded rejection (a resend, a redelivery, a
    /// saga re-run).
    pub replayed_rejections: u64,
    /// Of those, `NotFound` replayed after the aggregate had been opened: a message that the
    /// handler would now accept (a deposit, a transfer's credit) got the original answer.
    pub replayed_after_opened: u64,
    /// Of those, a transfer's credit to its target (the saga ran again, or its message was
    /// redelivered, after the target was opened): the re-run got the original rejection
    /// and did not credit the target of a cancelled hold.
    pub credits_replayed_after_opened: u64,
    /// Look-ups that answered `NONE` for a request that a message sent before the look-up
    /// appended afterwards, with no new message (SPEC TO-1 says this never happens), in runs
    /// whose gateway shares an in-flight registry with the nodes (a monolith).
    pub none_then_appended: u64,
    /// The same, in runs with a gateway-only service, which cannot know what the nodes
    /// hold in flight.
    pub none_then_appended_gateway_only: u64,
    /// Transfers whose hold was confirmed (the target was credited).
    pub transfers_confirmed: u64,
    /// Transfers whose hold was cancelled (the target did not exist when the credit was
    /// decided).
    pub transfers_cancelled: u64,
    /// Of those, transfers whose target was opened later: every saga re-run after that had
    /// to replay the rejection rather than credit the target.
    pub cancelled_then_target_opened: u64,
    /// Intents whose caller pinned the version it last saw (SPEC ES-3).
    pub pinned: u64,
    /// Answers `CommandExpectVersionConflict` to their messages.
    pub conflicts: u64,
    /// Resends after a conflict, each with a freshly loaded version.
    pub conflict_retries: u64,
    /// Intents resent after a conflict that ended decided afresh: applied, or rejected on
    /// the fresh state.
    pub decided_afresh: u64,
    /// Pinned intents given up after conflicts, nothing recorded.
    pub conflicted: u64,
    /// Conflicts a node answered to a message of a request already appended (by another
    /// message of it: a concurrent resend, an earlier send that landed): a conflict is not
    /// confirmed against history as a rejection is (SPEC ID-7), so the caller must look the
    /// request up before it gives up.
    pub conflicts_after_append: u64,
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

/// Checks every invariant; returns the violations, in the order of the checks below, and how
/// the intents ended.
pub(crate) fn check(observed: &Observed<'_>) -> (Vec<String>, IntentTally) {
    let mut violations = Vec::new();
    let mut tally = IntentTally::default();
    let (by_request, event_ids) = versions_and_requests(observed, &mut violations);
    reported_are_in_history(observed, &by_request, &mut violations);
    let intent_requests = intents_end(observed, &by_request, &mut violations, &mut tally);
    decision_order(&observed.log, &mut violations, &mut tally);
    none_then_appended(observed, &mut tally);
    conflicts(observed, &by_request, &mut violations, &mut tally);
    let rewards_due = streams_have_intents(observed, &intent_requests, &mut violations);
    rewards_credited(observed, &rewards_due, &mut violations);
    transfers(observed, &by_request, &mut violations, &mut tally);
    conservation(observed, &by_request, &mut violations);
    projection_once_per_event(observed, &event_ids, &mut violations);
    outbox_once_per_event(observed, &event_ids, &mut violations);
    projection_folds_history(observed, &mut violations);
    consumers_keep_each_aggregates_order(observed, &mut violations);
    nothing_left_waiting(observed, &mut violations);
    (violations, tally)
}

/// Versions contiguous per aggregate (ES-1, ES-3) and at most one stream per (aggregate,
/// request id) (ID-3, ES-1). Returns history's streams by (aggregate id, request id), the
/// first of each, and every event id in history, in order.
fn versions_and_requests<'h>(
    observed: &'h Observed<'_>,
    violations: &mut Vec<String>,
) -> (ByRequest<'h>, Vec<String>) {
    let mut by_request: ByRequest<'h> = BTreeMap::new();
    let mut event_ids: Vec<String> = Vec::new();
    for (wallet, streams) in &observed.history {
        for (index, stream) in streams.iter().enumerate() {
            let expected = index as u64 + 1;
            if stream.version != expected {
                violations.push(format!(
                    "ES-1: {wallet} has version {} where {expected} was due",
                    stream.version
                ));
            }
        }
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
    (by_request, event_ids)
}

/// Every command reported PROCESSED-succeeded, to a caller or to the saga, is in history,
/// at the reported version, by the reported command (ST-4).
fn reported_are_in_history(
    observed: &Observed<'_>,
    by_request: &ByRequest<'_>,
    violations: &mut Vec<String>,
) {
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
}

/// No stream without an intent: history holds the callers' and the saga's request ids only
/// (TO-2, DS-3). Returns the request ids of the rewards history's events earn.
fn streams_have_intents(
    observed: &Observed<'_>,
    intent_requests: &BTreeSet<(String, String)>,
    violations: &mut Vec<String>,
) -> BTreeSet<String> {
    let mut rewards_due: BTreeSet<String> = BTreeSet::new();
    let mut saga_requests: BTreeSet<(String, String)> = BTreeSet::new();
    for (wallet, streams) in &observed.history {
        for stream in streams {
            for (event_id, event) in typed_events(stream) {
                if earns_reward(wallet, &event) {
                    rewards_due.insert(saga_request_id(&event_id, 0));
                }
                if let WalletEvent::TransferHeld(held) = &event {
                    saga_requests.insert((held.to.clone(), saga_request_id(&event_id, 0)));
                    saga_requests.insert((wallet.clone(), saga_request_id(&event_id, 1)));
                }
            }
        }
    }
    for (wallet, streams) in &observed.history {
        for stream in streams {
            let key = (wallet.clone(), stream.request_id.clone());
            let known = if wallet == observed.rewards_wallet {
                rewards_due.contains(&stream.request_id)
            } else {
                intent_requests.contains(&key) || saga_requests.contains(&key)
            };
            if !known {
                violations.push(format!(
                    "TO-2: {wallet}@v{} holds request id {} that no intent or saga event made",
                    stream.version, stream.request_id
                ));
            }
        }
    }
    rewards_due
}

/// Once quiet, every reward in `rewards_due` is credited to the rewards wallet (DS-3; at
/// most once is ES-1's one stream per request id).
fn rewards_credited(
    observed: &Observed<'_>,
    rewards_due: &BTreeSet<String>,
    violations: &mut Vec<String>,
) {
    let rewards: BTreeSet<&str> = observed
        .history
        .get(observed.rewards_wallet)
        .map(|streams| streams.iter().map(|s| s.request_id.as_str()).collect())
        .unwrap_or_default();
    for due in rewards_due {
        if !rewards.contains(due.as_str()) {
            violations.push(format!("DS-3: the reward {due} was never credited"));
        }
    }
}

/// The projection applied each event of history (`event_ids`) at most once and, once
/// quiet, exactly once, and no event outside history (DS-1, DS-2).
fn projection_once_per_event(
    observed: &Observed<'_>,
    event_ids: &[String],
    violations: &mut Vec<String>,
) {
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
}

/// No consumer acknowledged version n+1 of a wallet before version n (DS-5): each first
/// acknowledgement of a version comes after every version below it was acknowledged; a
/// redelivery of one already acknowledged is not a step.
fn consumers_keep_each_aggregates_order(observed: &Observed<'_>, violations: &mut Vec<String>) {
    let mut through: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    let mut reported = BTreeSet::new();
    for (consumer, wallet, version) in &observed.handled_order {
        let handled = through.entry((consumer, wallet)).or_insert(0);
        if *version == *handled + 1 {
            *handled = *version;
        } else if *version > *handled + 1 && reported.insert((consumer, wallet)) {
            violations.push(format!(
                "DS-5: {consumer} handled {wallet}@v{version} before v{}",
                *handled + 1
            ));
        }
    }
}

/// The outbox holds each event of history (`event_ids`) exactly once once quiet, and no
/// event outside history (DS-1, DS-2).
fn outbox_once_per_event(
    observed: &Observed<'_>,
    event_ids: &[String],
    violations: &mut Vec<String>,
) {
    let expected: BTreeSet<&String> = event_ids.iter().collect();
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
}

/// The projection equals a fold of history (DS-2), which never goes below zero (ES-3) and
/// opens each wallet only at its first version (ES-4).
fn projection_folds_history(observed: &Observed<'_>, violations: &mut Vec<String>) {
    for (wallet, streams) in &observed.history {
        let mut balance: i64 = 0;
        for stream in streams {
            for (_, event) in typed_events(stream) {
                balance = balance.saturating_add(balance_delta(&event));
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
}

/// No wait handle left registered (ST-6), no request left in flight (TO-1).
fn nothing_left_waiting(observed: &Observed<'_>, violations: &mut Vec<String>) {
    if observed.waiting != 0 {
        violations.push(format!(
            "ST-6: {} wait handles still registered once quiet",
            observed.waiting
        ));
    }
    if observed.in_flight != 0 {
        violations.push(format!(
            "TO-1: {} requests still in flight once quiet (a look-up would answer IN_FLIGHT for good)",
            observed.in_flight
        ));
    }
}

/// History's streams by (aggregate id, request id).
type ByRequest<'h> = BTreeMap<(&'h str, &'h str), &'h DomainEventStream>;

/// Every transfer's hold ends once quiet, exactly once, and consistently with its target: the
/// hold confirmed if and only if the target received the amount (under the saga's request
/// ids for that hold's event: index 0 on the target, index 1 on the source).
fn transfers(
    observed: &Observed<'_>,
    by_request: &ByRequest<'_>,
    violations: &mut Vec<String>,
    tally: &mut IntentTally,
) {
    for (wallet, streams) in &observed.history {
        for stream in streams {
            for (event_id, event) in typed_events(stream) {
                let WalletEvent::TransferHeld(held) = event else {
                    continue;
                };
                let at = format!(
                    "{wallet}@v{} ({} to {})",
                    stream.version, held.amount, held.to
                );
                let receive_id = saga_request_id(&event_id, 0);
                let settle_id = saga_request_id(&event_id, 1);
                let received = by_request
                    .get(&(held.to.as_str(), receive_id.as_str()))
                    .is_some_and(|s| {
                        typed_events(s).iter().any(|(_, e)| {
                            matches!(e, WalletEvent::TransferReceived(r) if r.hold == held.hold && r.amount == held.amount && r.from == *wallet)
                        })
                    });
                let settled: Vec<WalletEvent> = by_request
                    .get(&(wallet.as_str(), settle_id.as_str()))
                    .map(|s| typed_events(s).into_iter().map(|(_, e)| e).collect())
                    .unwrap_or_default();
                let ends = |confirm: bool| {
                    settled.iter().any(|e| match e {
                        WalletEvent::HoldConfirmed(x) => confirm && x.hold == held.hold,
                        WalletEvent::HoldCancelled(x) => !confirm && x.hold == held.hold,
                        _ => false,
                    })
                };
                match (ends(true), ends(false), received) {
                    (true, false, true) => tally.transfers_confirmed += 1,
                    (false, true, false) => {
                        tally.transfers_cancelled += 1;
                        if observed
                            .history
                            .get(&held.to)
                            .is_some_and(|target| !target.is_empty())
                        {
                            tally.cancelled_then_target_opened += 1;
                        }
                    }
                    (false, true, true) => violations.push(format!(
                        "(c) transfer {at}: the target received it and the hold was cancelled (money made)"
                    )),
                    (true, false, false) => violations.push(format!(
                        "(c) transfer {at}: the hold was confirmed and the target never received it (money lost)"
                    )),
                    (false, false, _) => violations.push(format!(
                        "DS-3: transfer {at}: the hold never ended once quiet (target received: {received})"
                    )),
                    (true, true, _) => violations.push(format!(
                        "DS-3: transfer {at}: the hold was both confirmed and cancelled"
                    )),
                }
            }
        }
    }
}

/// (c) Money is conserved. From history, counting each request once (history holds at most
/// one stream per request id, checked above):
///
/// Σ balances + Σ open holds ==
///   Σ opens' initial balances + Σ deposits + Σ reward credits − Σ withdrawals
///
/// of the callers' intents that history holds (each intent's amount as its caller sent it)
/// and the reward credits it holds. A transfer brings no money in: its hold takes the
/// amount out of the source's balance into the holds, and the hold ends either confirmed,
/// with the amount in the target's balance, or cancelled, with it back in the source's.
fn conservation(observed: &Observed<'_>, by_request: &ByRequest<'_>, violations: &mut Vec<String>) {
    let signed = |amount: u64| i128::from(amount);
    let (mut opens, mut deposits, mut withdrawals) = (0_i128, 0_i128, 0_i128);
    for record in observed.intents {
        let intent = &record.intent;
        if !by_request.contains_key(&(intent.aggregate.id.as_str(), intent.request_id.as_str())) {
            continue;
        }
        match &intent.command {
            WalletCommand::Open(Open { initial }) => opens += signed(*initial),
            WalletCommand::Deposit(Amount { amount }) => deposits += signed(*amount),
            WalletCommand::Withdraw(Amount { amount }) => withdrawals += signed(*amount),
            _ => {}
        }
    }
    let rewards = observed
        .history
        .get(observed.rewards_wallet)
        .map_or(0, |streams| {
            streams
                .iter()
                .flat_map(typed_events)
                .filter(|(_, e)| matches!(e, WalletEvent::Credited(_)))
                .count()
        });
    let rewards = i128::try_from(rewards).unwrap_or(i128::MAX) * signed(REWARD_AMOUNT);
    let (mut balances, mut held) = (0_i128, 0_i128);
    for streams in observed.history.values() {
        for (_, event) in streams.iter().flat_map(typed_events) {
            balances += i128::from(balance_delta(&event));
            held += i128::from(held_delta(&event));
        }
    }
    let came_in = opens + deposits + rewards - withdrawals;
    if balances + held != came_in {
        violations.push(format!(
            "(c) money: wallets hold {balances} and holds {held}, {} in all; the applied intents bring {came_in} (opens {opens} + deposits {deposits} + rewards {rewards} − withdrawals {withdrawals})",
            balances + held
        ));
    }
}
