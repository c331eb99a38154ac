//! Pinned intents (SPEC ES-3): a caller that pins the version it last saw of an aggregate
//! (`with_expected_version`), and on `CommandExpectVersionConflict` reloads the aggregate's
//! version, re-decides and resends with the same request id and the fresh version, a bounded
//! number of times (drawn per run, up to [`MAX_CONFLICT_RETRIES`]); then it gives up, the
//! intent conflicted with nothing recorded.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use wow_core::CommandStage;
use wow_runtime::command::RequestOutcome;

use crate::chaos::Logged;

use super::{next_backoff, Client, Collected, Intent, Verdict};

/// The most resends of one pinned intent after a conflict before its caller gives up.
pub(crate) const MAX_CONFLICT_RETRIES: u64 = 3;
/// Reads of an aggregate's version before the caller gives up reloading.
const MAX_RELOADS: u32 = 6;

/// The version a caller last saw of each aggregate (by aggregate id): what it pins. Versions
/// only grow, so a replayed answer carrying an older version never moves it back.
#[derive(Debug, Default)]
pub(crate) struct SeenVersions(Mutex<BTreeMap<String, u64>>);

impl SeenVersions {
    /// Notes that `aggregate` was seen at `version`.
    pub(crate) fn saw(&self, aggregate: &str, version: u64) {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let at = seen.entry(aggregate.to_owned()).or_default();
        *at = (*at).max(version);
    }

    /// The version last seen of `aggregate`, if any.
    fn get(&self, aggregate: &str) -> Option<u64> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(aggregate)
            .copied()
    }
}

impl Client {
    /// The version a pinned intent's first message pins: the one its caller last saw, or,
    /// when it never saw the aggregate, the one it loads now. `None` for an intent that is
    /// not pinned, or whose aggregate could not be read (it is then sent unpinned).
    pub(super) async fn first_pin(&self, intent: &Intent) -> Option<u64> {
        if !intent.pinned {
            return None;
        }
        match self.seen.get(&intent.aggregate.id) {
            Some(version) => Some(version),
            None => self.reload(intent).await,
        }
    }

    /// After the `conflicts`-th `CommandExpectVersionConflict` of `intent`: reloads its
    /// aggregate's version and pins it for the resend (`None`: resend, SPEC ES-3), or, after
    /// the caller's `conflict_retries` resends or when the version cannot be read, gives up
    /// (see [`Client::give_up`]).
    pub(super) async fn after_conflict(
        &self,
        intent: &Intent,
        collected: &Mutex<Collected>,
        conflicts: u32,
    ) -> Option<Verdict> {
        let fresh = if conflicts > self.conflict_retries {
            None
        } else {
            self.reload(intent).await
        };
        let Some(version) = fresh else {
            return Some(self.give_up(intent, collected, conflicts).await);
        };
        self.chaos.note(format!(
            "{} conflict; re-decided at v{version}, resend",
            intent.label
        ));
        let mut collected = collected.lock().unwrap_or_else(|p| p.into_inner());
        collected.pin = Some(version);
        collected.conflict_retries += 1;
        None
    }

    /// Gives a pinned intent up after `conflicts` conflicts, once history confirms (SPEC
    /// TO-2): a conflict is no proof that no other message of the intent was appended (a
    /// concurrent resend, a redelivery). Appended or rejected, that is the verdict; no
    /// decision recorded, the intent ends conflicted (logged for the checks); a look-up
    /// that cannot tell leaves it unknown.
    async fn give_up(
        &self,
        intent: &Intent,
        collected: &Mutex<Collected>,
        conflicts: u32,
    ) -> Verdict {
        match self.look_up(intent, collected).await {
            RequestOutcome::Appended(record) => Verdict::Applied {
                version: Some(record.version),
                how: format!("look-up after {conflicts} conflict(s)"),
            },
            RequestOutcome::Rejected(record) => Verdict::Rejected {
                code: record.error_code,
                stage: CommandStage::Processed,
            },
            RequestOutcome::None => {
                self.chaos.note(format!(
                    "{} gives up after {conflicts} conflict(s)",
                    intent.label
                ));
                self.log_with_sent(intent, collected, |sent| Logged::GaveUpConflicted { sent });
                Verdict::Conflicted { conflicts }
            }
            outcome => Verdict::Unknown {
                reason: format!(
                    "{conflicts} conflict(s), then the look-up said {}",
                    outcome.status()
                ),
            },
        }
    }

    /// The aggregate's current version, read from the store (through its faults) with
    /// bounded retries; noted as seen. `None` when it cannot be read.
    async fn reload(&self, intent: &Intent) -> Option<u64> {
        let mut backoff = Duration::from_millis(50);
        for _ in 0..MAX_RELOADS {
            match self.store.last(&intent.aggregate).await {
                Ok(last) => {
                    let version = last.map_or(0, |stream| stream.version);
                    self.seen.saw(&intent.aggregate.id, version);
                    return Some(version);
                }
                Err(error) => {
                    self.chaos
                        .note(format!("{} reload failed: {error}", intent.label));
                    tokio::time::sleep(backoff).await;
                    backoff = next_backoff(backoff);
                }
            }
        }
        None
    }
}
