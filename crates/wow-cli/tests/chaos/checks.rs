//! The checks after the run: every answer the callers got, held against history.

use std::collections::BTreeMap;

use crate::client::{Answer, Intent, Op, Outcome, Send, WAIT_TIMEOUT_MS};
use crate::cluster::{Fault, Victim};
use crate::history::{Account, Snapshot, Stream};

/// A saga that settled at least this long before its caller's deadline should have answered
/// it (check 5).
const SETTLED_MARGIN_MS: u64 = 500;

/// One check's result: what it looked at, and each failure (one line each).
#[derive(Debug, Default)]
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) seen: Vec<(String, usize)>,
    pub(crate) failures: Vec<String>,
}

impl Check {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            ..Self::default()
        }
    }

    fn count(&mut self, what: impl Into<String>, n: usize) {
        self.seen.push((what.into(), n));
    }
}

/// Every check, in order.
pub(crate) fn all(
    intents: &[Intent],
    snapshot: &Snapshot,
    faults: &[Fault],
    t0: u64,
) -> Vec<Check> {
    vec![
        answers(intents, snapshot, t0),
        own_duplicates(intents),
        money(intents, snapshot),
        positions(snapshot, faults),
        saga_timeouts(intents, snapshot, faults, t0),
    ]
}

fn appended<'a>(snapshot: &'a Snapshot, intent: &Intent) -> Option<&'a Stream> {
    snapshot
        .accounts
        .get(intent.op.account())?
        .stream(&intent.request_id)
}

/// Check 1: No answer that history contradicts: a `NONE` for an intent appended from a message sent
/// before it (TO-1), a rejection of an appended intent (ID-6), an `APPENDED` or a success at
/// another version or by another command, an applied intent missing from history.
fn answers(intents: &[Intent], snapshot: &Snapshot, t0: u64) -> Check {
    let mut check = Check::new("1. look-up answers against history (TO-1, ID-6)");
    count_look_ups_and_resends(&mut check, intents);
    for intent in intents {
        let stream = appended(snapshot, intent);
        let name = format!("{} {}", intent.op.account(), intent.request_id);
        outcome_against_history(&mut check, &name, stream, &intent.outcome);
        let Some(stream) = stream else { continue };
        if !no_none_after_the_appending_send(&mut check, &name, intent, stream, t0) {
            continue;
        }
        look_ups_against_history(&mut check, &name, intent, stream, t0);
        sends_against_history(&mut check, &name, intent, stream);
    }
    check
}

/// Counts the look-ups by answer, and the resends.
fn count_look_ups_and_resends(check: &mut Check, intents: &[Intent]) {
    let look_ups: Vec<_> = intents.iter().flat_map(|i| &i.look_ups).collect();
    let count = |f: fn(&Answer) -> bool| look_ups.iter().filter(|l| f(&l.answer)).count();
    check.count("look-ups", look_ups.len());
    check.count("NONE", count(|a| *a == Answer::None));
    check.count("IN_FLIGHT", count(|a| *a == Answer::InFlight));
    check.count("UNKNOWN", count(|a| *a == Answer::Unknown));
    check.count("no answer", count(|a| matches!(a, Answer::Error(_))));
    check.count(
        "resends",
        intents
            .iter()
            .map(|i| i.sends.len().saturating_sub(1))
            .sum(),
    );
}

/// An intent told applied is in history; one told rejected is not.
fn outcome_against_history(
    check: &mut Check,
    name: &str,
    stream: Option<&Stream>,
    outcome: &Outcome,
) {
    match (stream, outcome) {
        (None, Outcome::Applied { version }) => check.failures.push(format!(
            "{name}: told applied at v{version}, not in history"
        )),
        (Some(s), Outcome::Rejected { code }) => check.failures.push(format!(
            "{name}: told rejected ({code}), appended at v{}",
            s.version
        )),
        _ => {}
    }
}

/// No `NONE` came after the last message that may have appended `stream` (the one whose id
/// history names, and those whose id the caller never learnt) was sent. `false` when no send
/// of the caller names the appending command.
fn no_none_after_the_appending_send(
    check: &mut Check,
    name: &str,
    intent: &Intent,
    stream: &Stream,
    t0: u64,
) -> bool {
    let at = |ms: u64| ms.saturating_sub(t0);
    let candidates: Vec<&Send> = intent
        .sends
        .iter()
        .filter(|s| {
            s.command_id
                .as_ref()
                .is_none_or(|c| *c == stream.command_id)
        })
        .collect();
    let Some(last_sent) = candidates.iter().map(|s| s.ended_ms).max() else {
        check.failures.push(format!(
            "{name}: appended by command {}, which no send of the caller names",
            stream.command_id
        ));
        return false;
    };
    if let Some(none) = intent
        .look_ups
        .iter()
        .find(|l| l.answer == Answer::None && l.started_ms >= last_sent)
    {
        check.failures.push(format!(
            "{name}: NONE at +{} ms, appended at v{} by the message sent at +{} ms (no resend after the NONE made it)",
            at(none.started_ms),
            stream.version,
            at(candidates.iter().map(|s| s.started_ms).max().unwrap_or_default()),
        ));
    }
    true
}

/// No look-up of an appended intent answers `APPENDED` at another version or by another
/// command, or `REJECTED`.
fn look_ups_against_history(
    check: &mut Check,
    name: &str,
    intent: &Intent,
    stream: &Stream,
    t0: u64,
) {
    let at = |ms: u64| ms.saturating_sub(t0);
    for look_up in &intent.look_ups {
        match &look_up.answer {
            Answer::Appended {
                version,
                command_id,
            } if *version != stream.version || *command_id != stream.command_id => {
                check.failures.push(format!(
                    "{name}: APPENDED v{version} by {command_id} at +{} ms; history: v{} by {}",
                    at(look_up.started_ms),
                    stream.version,
                    stream.command_id
                ))
            }
            Answer::Rejected { code } => check.failures.push(format!(
                "{name}: REJECTED ({code}) at +{} ms, appended at v{}",
                at(look_up.started_ms),
                stream.version
            )),
            _ => {}
        }
    }
}

/// No send of an appended intent is answered a success at another version.
fn sends_against_history(check: &mut Check, name: &str, intent: &Intent, stream: &Stream) {
    for sent in &intent.sends {
        let success =
            sent.status == Some(200) || sent.error_code.as_deref() == Some("DuplicateRequestId");
        if success && sent.version != Some(stream.version) {
            check.failures.push(format!(
                "{name}: answered {:?} at v{:?}; history: v{}",
                sent.status, sent.version, stream.version
            ));
        }
    }
}

/// Check 2: No caller is answered `DuplicateRequestId` naming its own command: the message it sent
/// was handled twice, and the caller told of the second time.
fn own_duplicates(intents: &[Intent]) -> Check {
    let mut check =
        Check::new("2. DuplicateRequestId naming the caller's own command (RQ-4, ID-6)");
    let duplicates: Vec<(&Intent, usize, &Send)> = intents
        .iter()
        .flat_map(|i| i.sends.iter().enumerate().map(move |(n, s)| (i, n, s)))
        .filter(|(_, _, s)| s.error_code.as_deref() == Some("DuplicateRequestId"))
        .collect();
    check.count("duplicates answered", duplicates.len());
    for (intent, n, sent) in duplicates {
        if sent.command_id.is_some() && sent.original_command_id == sent.command_id {
            check.failures.push(format!(
                "{} {}: send #{} (command {}) answered 409 naming itself",
                intent.op.account(),
                intent.request_id,
                n + 1,
                sent.command_id.as_deref().unwrap_or_default()
            ));
        }
    }
    check
}

/// Balance and held as history gives them.
fn fold(account: &Account) -> (i64, i64) {
    let (mut balance, mut held) = (0, 0);
    for event in account.streams.iter().flat_map(|s| &s.events) {
        let amount = event.body["amount"].as_i64().unwrap_or_default();
        match event.name.as_str() {
            "AccountOpened" => balance = event.body["balance"].as_i64().unwrap_or_default(),
            "Deposited" | "TransferReceived" => balance += amount,
            "Withdrawn" => balance -= amount,
            "TransferPrepared" => (balance, held) = (balance - amount, held + amount),
            "TransferConfirmed" => held -= amount,
            "TransferCancelled" => (balance, held) = (balance + amount, held - amount),
            _ => {}
        }
    }
    (balance, held)
}

/// Check 3: Each request id appended at most once; state and view what history gives; the money
/// what was opened and deposited; every transfer received and confirmed, or cancelled, once.
fn money(intents: &[Intent], snapshot: &Snapshot) -> Check {
    let mut check =
        Check::new("3. request ids once, deposits and transfers balanced (ID-3, DS-2, DS-3)");
    let (mut total, mut put_in) = (0, 0);
    for (id, account) in &snapshot.accounts {
        let mut seen = BTreeMap::new();
        for stream in &account.streams {
            *seen.entry(&stream.request_id).or_insert(0) += 1;
        }
        for (request_id, n) in seen.iter().filter(|(_, n)| **n > 1) {
            check
                .failures
                .push(format!("{id}: request {request_id} appended {n} times"));
        }
        let (balance, held) = fold(account);
        let head = account.head();
        for (what, shown) in [("state", account.state), ("view", account.view)] {
            if (shown.balance, shown.held, shown.version) != (balance, held, head) {
                check.failures.push(format!(
                    "{id}: {what} {}/{} at v{}; history {balance}/{held} at v{head}",
                    shown.balance, shown.held, shown.version
                ));
            }
        }
        total += balance + held;
        for event in account.streams.iter().flat_map(|s| &s.events) {
            match event.name.as_str() {
                "AccountOpened" => put_in += event.body["balance"].as_i64().unwrap_or_default(),
                "Deposited" => put_in += event.body["amount"].as_i64().unwrap_or_default(),
                _ => {}
            }
        }
    }
    if total != put_in {
        check.failures.push(format!(
            "the accounts hold {total}, {put_in} was opened or deposited"
        ));
    }
    // What the callers' intents bring in: an opening balance or a deposit; a transfer nothing.
    let brought = |ended: fn(&Outcome) -> bool| -> i64 {
        intents
            .iter()
            .filter(|i| ended(&i.outcome))
            .map(|i| match &i.op {
                Op::Open { balance, .. } => *balance,
                Op::Deposit { amount, .. } => *amount,
                Op::Transfer { .. } => 0,
            })
            .sum()
    };
    let applied = brought(|o| matches!(o, Outcome::Applied { .. }));
    let unresolved = brought(|o| *o == Outcome::Unresolved);
    // Unresolved deposits may be in history or not; applied ones must be.
    if put_in < applied || put_in > applied + unresolved {
        check.failures.push(format!(
            "history holds {put_in} opened or deposited; callers were told {applied} (+ up to {unresolved} unresolved)"
        ));
    }
    let transfers = transfers(snapshot, &mut check.failures);
    check.count("intents", intents.len());
    check.count(
        "unresolved",
        intents
            .iter()
            .filter(|i| i.outcome == Outcome::Unresolved)
            .count(),
    );
    check.count("transfers in history", transfers);
    check
}

/// Every `TransferPrepared` (event `E`, from `S` to `T`) settles once at `S` (request id
/// `E/1`): confirmed if and only if `T` received it once (request id `E/0`), else cancelled.
/// Returns how many transfers history holds.
fn transfers(snapshot: &Snapshot, failures: &mut Vec<String>) -> usize {
    let mut prepared = 0;
    let events = |account: &str, request_id: &str| -> Vec<String> {
        snapshot
            .accounts
            .get(account)
            .map(|a| {
                a.streams
                    .iter()
                    .filter(|s| s.request_id == request_id)
                    .flat_map(|s| s.events.iter().map(|e| e.name.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    for (source, account) in &snapshot.accounts {
        for event in account.streams.iter().flat_map(|s| &s.events) {
            if event.name != "TransferPrepared" {
                continue;
            }
            prepared += 1;
            let target = event.body["account"].as_str().unwrap_or_default();
            let received = events(target, &format!("{}/0", event.id));
            let settled = events(source, &format!("{}/1", event.id));
            let balanced = match settled.as_slice() {
                [one] if one == "TransferConfirmed" => received == ["TransferReceived"],
                [one] if one == "TransferCancelled" => received.is_empty(),
                _ => false,
            };
            if !balanced {
                failures.push(format!(
                    "transfer {} from {source} to {target}: received {received:?}, settled {settled:?}",
                    event.id
                ));
            }
        }
    }
    prepared
}

/// Check 4: Every consumer's position at each account's head (DS-5, DS-6); every restart whole
/// again.
fn positions(snapshot: &Snapshot, faults: &[Fault]) -> Check {
    let mut check = Check::new("4. consumer positions at the head, restarts (DS-5, DS-6)");
    let consumers = snapshot.consumers();
    check.count("consumers", consumers.len());
    check.count("aggregates", snapshot.accounts.len());
    for consumer in &consumers {
        for (id, account) in &snapshot.accounts {
            let at = snapshot
                .positions
                .get(&(consumer.clone(), id.clone()))
                .copied()
                .unwrap_or(0);
            if at != account.head() {
                check.failures.push(format!(
                    "{consumer} at {id} v{at}, head v{}",
                    account.head()
                ));
            }
        }
    }
    let mut took: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for fault in faults {
        let kind = match fault.victim {
            Victim::Processor(_) => "processor",
            Victim::Gateway => "gateway",
            Victim::Nats => "nats",
        };
        match fault.healthy_ms {
            Some(at) => took.entry(kind).or_default().push(at - fault.restarted_ms),
            None => check
                .failures
                .push(format!("{:?} killed and never whole again", fault.victim)),
        }
    }
    for (kind, mut times) in took {
        times.sort_unstable();
        println!(
            "   {kind} restarts: {} until whole again, ms: min {} median {} max {}",
            times.len(),
            times[0],
            times[times.len() / 2],
            times[times.len() - 1]
        );
    }
    check.count("kills", faults.len());
    for ((consumer, status), n) in &snapshot.failures {
        check.count(format!("{consumer} failures {status}"), *n as usize);
    }
    check
}

/// Check 5: No caller at `SAGA_HANDLED` answered 408 although the saga settled the transfer well
/// before the caller's deadline, with no process down meanwhile.
fn saga_timeouts(intents: &[Intent], snapshot: &Snapshot, faults: &[Fault], t0: u64) -> Check {
    let mut check = Check::new("5. 408 at SAGA_HANDLED after the saga had finished (ST-1, DS-6)");
    let (mut timeouts, mut excused) = (0, 0);
    for intent in intents {
        let Op::Transfer { from, .. } = &intent.op else {
            continue;
        };
        for sent in intent.sends.iter().filter(|s| s.status == Some(408)) {
            timeouts += 1;
            let deadline = sent.started_ms + WAIT_TIMEOUT_MS;
            let fault_meanwhile = faults.iter().any(|f| {
                f.killed_ms <= sent.ended_ms && f.healthy_ms.is_none_or(|h| h >= sent.started_ms)
            });
            let settled = appended(snapshot, intent)
                .filter(|prepared| sent.command_id.as_ref() == Some(&prepared.command_id))
                .and_then(|prepared| {
                    let event = prepared.events.first()?;
                    snapshot
                        .accounts
                        .get(from)?
                        .stream(&format!("{}/1", event.id))
                });
            let Some(settled) = settled else { continue };
            if settled.create_time + SETTLED_MARGIN_MS > deadline {
                continue;
            }
            if fault_meanwhile {
                excused += 1;
                continue;
            }
            check.failures.push(format!(
                "{from} {}: sent at +{} ms, settled at +{} ms, 408 at +{} ms",
                intent.request_id,
                sent.started_ms.saturating_sub(t0),
                settled.create_time.saturating_sub(t0),
                sent.ended_ms.saturating_sub(t0)
            ));
        }
    }
    check.count("408 at SAGA_HANDLED", timeouts);
    check.count("settled early, a process down meanwhile", excused);
    check
}
