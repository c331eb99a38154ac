//! The invariants of pinned intents (SPEC ES-3): a version conflict is not a decision. No
//! store holds one; a pinned intent's retry with a fresh version is decided afresh, never
//! answered with the conflict replayed nor `RequestIdReused` (ID-5); an intent given up after
//! conflicts has no decision; every append of a pinned message is at the version it pinned
//! plus one.

use std::collections::{BTreeMap, BTreeSet};

use wow_core::ErrorCode;

use super::{ByRequest, IntentTally, Observed};
use crate::chaos::Logged;
use crate::client::{IntentRecord, Verdict};

/// Checks the four invariants of pinned intents and counts them in `tally`.
pub(super) fn conflicts(
    observed: &Observed<'_>,
    by_request: &ByRequest<'_>,
    violations: &mut Vec<String>,
    tally: &mut IntentTally,
) {
    no_recorded_conflict(observed, violations);
    conflicts_after_append(observed, tally);
    let gave_up = gave_up_at(observed);
    for record in observed.intents {
        count(record, tally);
        retry_decided_afresh(record, violations);
        given_up_records_nothing(observed, by_request, &gave_up, record, violations);
        appended_at_its_pin(record, by_request, violations);
    }
}

/// (1) No store holds a rejection whose code is `CommandExpectVersionConflict`.
fn no_recorded_conflict(observed: &Observed<'_>, violations: &mut Vec<String>) {
    for ((wallet, request_id), code) in &observed.rejections {
        if *code == ErrorCode::CommandExpectVersionConflict {
            violations.push(format!(
                "ES-3: the store holds a version conflict as the decision on request {request_id} of {wallet}"
            ));
        }
    }
}

/// (2) Once a message of the intent was answered with a conflict and the caller resent it
/// with a fresh version, no answer replays the conflict and none is `RequestIdReused`.
fn retry_decided_afresh(record: &IntentRecord, violations: &mut Vec<String>) {
    if record.conflict_retries == 0 {
        return;
    }
    let first = record
        .answers
        .iter()
        .position(|answer| answer.code == ErrorCode::CommandExpectVersionConflict);
    let Some(first) = first else {
        return;
    };
    for answer in &record.answers[first + 1..] {
        let replayed_conflict =
            answer.replayed && answer.code == ErrorCode::CommandExpectVersionConflict;
        if replayed_conflict || answer.code == ErrorCode::RequestIdReused {
            violations.push(format!(
                "ES-3: {} request {} was resent with a fresh version after a conflict and answered {}{} at {}",
                record.intent.label,
                record.intent.request_id,
                answer.code,
                if answer.replayed { " (replayed)" } else { "" },
                answer.stage
            ));
        }
    }
}

/// (3) An intent its caller gave up after conflicts has no decision in the store: no
/// rejection, and no append — unless a message of it was appended after the give-up (one
/// still under way then: a redelivery, a concurrent resend).
fn given_up_records_nothing(
    observed: &Observed<'_>,
    by_request: &ByRequest<'_>,
    gave_up: &BTreeMap<(&str, &str), usize>,
    record: &IntentRecord,
    violations: &mut Vec<String>,
) {
    if !matches!(record.verdict, Verdict::Conflicted { .. }) {
        return;
    }
    let intent = &record.intent;
    let key = (intent.aggregate.id.as_str(), intent.request_id.as_str());
    if let Some(code) = observed
        .rejections
        .get(&(key.0.to_owned(), key.1.to_owned()))
    {
        violations.push(format!(
            "ES-3: {} request {} was given up after conflicts, and the store holds its rejection with {code}",
            intent.label, intent.request_id
        ));
    }
    let Some(stream) = by_request.get(&key) else {
        return;
    };
    let appended_at = observed.log.iter().position(|entry| {
        (entry.aggregate.as_str(), entry.request_id.as_str()) == key
            && matches!(&entry.what, Logged::Appended { command_id, .. } if *command_id == stream.command_id)
    });
    let before_give_up = match (appended_at, gave_up.get(&key)) {
        (Some(at), Some(given_up)) => at < *given_up,
        _ => true,
    };
    if before_give_up {
        violations.push(format!(
            "ES-3: {} request {} was given up after conflicts, and history held it before (v{}, command {})",
            intent.label, intent.request_id, stream.version, stream.command_id
        ));
    }
}

/// (4) Every append of a pinned message is at exactly the version it pinned + 1.
fn appended_at_its_pin(
    record: &IntentRecord,
    by_request: &ByRequest<'_>,
    violations: &mut Vec<String>,
) {
    let intent = &record.intent;
    let Some(stream) = by_request.get(&(intent.aggregate.id.as_str(), intent.request_id.as_str()))
    else {
        return;
    };
    let Some(pin) = record.pins.get(&stream.command_id) else {
        return;
    };
    if stream.version != pin + 1 {
        violations.push(format!(
            "ES-3: {} command {} pinned v{pin} and was appended at v{}",
            intent.label, stream.command_id, stream.version
        ));
    }
}

/// Counts the conflicts the nodes answered for a request the log shows appended before.
fn conflicts_after_append(observed: &Observed<'_>, tally: &mut IntentTally) {
    let mut appended: BTreeSet<(&str, &str)> = BTreeSet::new();
    for entry in &observed.log {
        let key = (entry.aggregate.as_str(), entry.request_id.as_str());
        match entry.what {
            Logged::Appended { .. } => {
                appended.insert(key);
            }
            Logged::Conflict { .. } if appended.contains(&key) => {
                tally.conflicts_after_append += 1;
            }
            _ => {}
        }
    }
}

/// Where in the log each request was given up after conflicts (the first time).
fn gave_up_at<'o>(observed: &'o Observed<'_>) -> BTreeMap<(&'o str, &'o str), usize> {
    let mut gave_up = BTreeMap::new();
    for (seq, entry) in observed.log.iter().enumerate() {
        if matches!(entry.what, Logged::GaveUpConflicted { .. }) {
            gave_up
                .entry((entry.aggregate.as_str(), entry.request_id.as_str()))
                .or_insert(seq);
        }
    }
    gave_up
}

/// Counts a pinned intent, its conflicts and its resends after them, whether those were
/// decided afresh (applied or rejected), and whether it was given up.
fn count(record: &IntentRecord, tally: &mut IntentTally) {
    if record.pins.is_empty() {
        return;
    }
    tally.pinned += 1;
    tally.conflicts += record
        .answers
        .iter()
        .filter(|answer| answer.code == ErrorCode::CommandExpectVersionConflict)
        .count() as u64;
    tally.conflict_retries += u64::from(record.conflict_retries);
    match (&record.verdict, record.conflict_retries) {
        (Verdict::Conflicted { .. }, _) => tally.conflicted += 1,
        (Verdict::Applied { .. } | Verdict::Rejected { .. }, 1..) => tally.decided_afresh += 1,
        _ => {}
    }
}
