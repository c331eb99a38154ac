//! The invariants on the callers' intents: how each intent ended against history (TO-2,
//! ID-5, ID-6, ID-7, RQ-9), and the order of the nodes' decisions in the run's log ((a) and
//! (b) for every request, the callers' and the saga's).

use std::collections::{BTreeMap, BTreeSet};

use wow_core::eventsourcing::is_recorded_rejection;
use wow_core::{CommandStage, DomainEventStream, ErrorCode};

use super::{ByRequest, IntentTally, Observed};
use crate::chaos::{LogEntry, Logged};
use crate::client::{IntentRecord, Verdict};

/// Every intent ends applied once, rejected (and absent), or unknown and resolved (TO-2):
/// each verdict on it (its caller's and its concurrent resends') agrees with history, and
/// no message of an applied intent is answered with a business error ((b)). Counts the
/// intents' ends and resends in `tally`; returns every (aggregate id, request id) of an
/// intent.
pub(super) fn intents_end(
    observed: &Observed<'_>,
    by_request: &ByRequest<'_>,
    violations: &mut Vec<String>,
    tally: &mut IntentTally,
) -> BTreeSet<(String, String)> {
    let mut intent_requests: BTreeSet<(String, String)> = BTreeSet::new();
    for record in observed.intents {
        let intent = &record.intent;
        let key = (intent.aggregate.id.clone(), intent.request_id.clone());
        let in_history = by_request.get(&(key.0.as_str(), key.1.as_str())).copied();
        intent_requests.insert(key.clone());
        tally.resends += u64::from(record.sends.saturating_sub(1));
        for verdict in std::iter::once(&record.verdict).chain(record.side_verdicts.iter()) {
            match verdict {
                Verdict::Applied { version, how } => {
                    applied_is_in_history(record, *version, how, in_history, violations)
                }
                Verdict::Rejected { code, stage } => {
                    let recorded = observed.rejections.contains_key(&key);
                    rejection_holds(record, code, *stage, in_history, recorded, violations)
                }
                // Checked with the other invariants of pinned intents (ES-3).
                Verdict::Unknown { .. } | Verdict::Conflicted { .. } => {}
            }
        }
        applied_got_no_business_error(record, in_history, violations);
        let recorded = observed.rejections.contains_key(&key);
        count_end(&record.verdict, in_history.is_some(), recorded, tally);
    }
    intent_requests
}

/// An intent seen applied (at `version`, when the answer said) is in history at that
/// version (TO-2).
fn applied_is_in_history(
    record: &IntentRecord,
    version: Option<u64>,
    how: &str,
    in_history: Option<&DomainEventStream>,
    violations: &mut Vec<String>,
) {
    let intent = &record.intent;
    match in_history {
        None => violations.push(format!(
            "TO-2: {} request {} was seen applied ({how}) but is not in history",
            intent.label, intent.request_id
        )),
        Some(stream) if version.is_some_and(|v| v != stream.version) => violations.push(format!(
            "TO-2: {} seen applied at v{version:?} ({how}), history has v{}",
            intent.label, stream.version
        )),
        Some(_) => {}
    }
}

/// An intent seen rejected with `code` at `stage` is not in history ((a) ID-6) and, when the
/// code is a recorded rejection, the store holds its rejection (ID-6, `recorded`); it never
/// gets `RequestIdReused` for its own body (ID-5), and fails validation only before it is
/// sent (RQ-9).
fn rejection_holds(
    record: &IntentRecord,
    code: &ErrorCode,
    stage: CommandStage,
    in_history: Option<&DomainEventStream>,
    recorded: bool,
    violations: &mut Vec<String>,
) {
    let intent = &record.intent;
    if let Some(stream) = in_history {
        violations.push(format!(
            "(a) ID-6: {} request {} was reported rejected ({code} at {stage}), and history holds it at v{} (command {})",
            intent.label, intent.request_id, stream.version, stream.command_id
        ));
    } else if is_recorded_rejection(code) && !recorded {
        violations.push(format!(
            "ID-6: {} request {} was reported rejected ({code} at {stage}), and the store holds no rejection of it",
            intent.label, intent.request_id
        ));
    }
    if *code == ErrorCode::RequestIdReused {
        violations.push(format!(
            "ID-5: {} got RequestIdReused for its own body",
            intent.label
        ));
    }
    if *code == ErrorCode::CommandValidation && stage != CommandStage::Sent {
        violations.push(format!(
            "RQ-9: {} failed validation at {stage}, not before sending",
            intent.label
        ));
    }
}

/// (b) at the caller: no message of an intent that history holds was answered with a
/// business error.
fn applied_got_no_business_error(
    record: &IntentRecord,
    in_history: Option<&DomainEventStream>,
    violations: &mut Vec<String>,
) {
    let Some(stream) = in_history else {
        return;
    };
    let intent = &record.intent;
    if let Some(answer) = record
        .answers
        .iter()
        .find(|answer| is_recorded_rejection(&answer.code))
    {
        violations.push(format!(
            "(b) ID-7: {} request {} is in history at v{}, and a message of it was answered {} at {}{}",
            intent.label,
            intent.request_id,
            stream.version,
            answer.code,
            answer.stage,
            if answer.replayed { " (replayed)" } else { "" }
        ));
    }
}

/// Counts how one intent ended in `tally`: by its caller's verdict, and an unknown one by
/// whether history holds it (`in_history`) or the store holds its rejection (`recorded`).
fn count_end(verdict: &Verdict, in_history: bool, recorded: bool, tally: &mut IntentTally) {
    match (verdict, in_history) {
        (Verdict::Applied { .. }, _) => tally.applied += 1,
        (Verdict::Rejected { .. }, _) => tally.rejected += 1,
        (Verdict::Unknown { .. }, true) => tally.unknown_then_applied += 1,
        (Verdict::Unknown { .. }, false) if recorded => tally.unknown_then_rejected += 1,
        (Verdict::Unknown { .. }, false) => tally.unknown_then_absent += 1,
        // Counted with the other pinned intents.
        (Verdict::Conflicted { .. }, _) => {}
    }
}

/// (a) and (b) from the decision log, for every request (callers' and the saga's): a final
/// rejection answered before the request was appended is (a); one answered after is (b).
pub(super) fn decision_order(
    log: &[LogEntry],
    violations: &mut Vec<String>,
    tally: &mut IntentTally,
) {
    let mut appended: BTreeMap<(&str, &str), (usize, u64, &str)> = BTreeMap::new();
    let mut opened: BTreeMap<&str, usize> = BTreeMap::new();
    for (seq, entry) in log.iter().enumerate() {
        if let Logged::Appended {
            version,
            command_id,
        } = &entry.what
        {
            appended
                .entry((entry.aggregate.as_str(), entry.request_id.as_str()))
                .or_insert((seq, *version, command_id.as_str()));
            opened.entry(entry.aggregate.as_str()).or_insert(seq);
        }
    }
    for (seq, entry) in log.iter().enumerate() {
        let Logged::Rejected {
            code,
            command_id,
            replayed,
        } = &entry.what
        else {
            continue;
        };
        if *replayed {
            tally.replayed_rejections += 1;
            let exists = opened
                .get(entry.aggregate.as_str())
                .is_some_and(|at| *at < seq);
            if *code == ErrorCode::NotFound && exists {
                tally.replayed_after_opened += 1;
                // The saga's request ids are `<event id>/<index>`; the callers' never hold `/`.
                if entry.request_id.contains('/') {
                    tally.credits_replayed_after_opened += 1;
                }
            }
        }
        let Some((at, version, by)) =
            appended.get(&(entry.aggregate.as_str(), entry.request_id.as_str()))
        else {
            continue;
        };
        let replay = if *replayed { " (replayed)" } else { "" };
        if seq < *at {
            violations.push(format!(
                "(a) ID-6: request {} of {} was answered {code}{replay} (command {command_id}), then appended at v{version} (command {by})",
                entry.request_id, entry.aggregate
            ));
        } else {
            violations.push(format!(
                "(b) ID-7: request {} of {} was appended at v{version} (command {by}), then a message of it (command {command_id}) was answered {code}{replay}",
                entry.request_id, entry.aggregate
            ));
        }
    }
}

/// Counts look-ups that answered `NONE` for a request that one of the messages already
/// sent then appended (see [`IntentTally::none_then_appended`]).
pub(super) fn none_then_appended(observed: &Observed<'_>, tally: &mut IntentTally) {
    let mut appended: BTreeMap<(&str, &str), (usize, &str)> = BTreeMap::new();
    for (seq, entry) in observed.log.iter().enumerate() {
        if let Logged::Appended { command_id, .. } = &entry.what {
            appended
                .entry((entry.aggregate.as_str(), entry.request_id.as_str()))
                .or_insert((seq, command_id.as_str()));
        }
    }
    for (seq, entry) in observed.log.iter().enumerate() {
        let Logged::LookedUpNone { sent } = &entry.what else {
            continue;
        };
        let Some((at, by)) = appended.get(&(entry.aggregate.as_str(), entry.request_id.as_str()))
        else {
            continue;
        };
        if *at > seq && sent.iter().any(|id| id == by) {
            if observed.monolith {
                tally.none_then_appended += 1;
            } else {
                tally.none_then_appended_gateway_only += 1;
            }
        }
    }
}
