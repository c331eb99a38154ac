//! What runs beside a started pipeline: failed consumers retried on a schedule (SPEC DS-4) and
//! due deadlines fired (SPEC DM-2). [`Background::start`] is the one place that starts them,
//! for `wow serve`, a team's own service and a test's pipeline alike.

use std::time::Duration;

use tokio::task::JoinHandle;

use crate::compensation::CompensationScheduler;
use crate::deadline::{DeadlineScheduler, SchedulerConfig};

/// How often a pipeline's background work runs: each part is off where `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackgroundConfig {
    /// How often the compensation scheduler retries the failed consumers that are due.
    pub retry_every: Option<Duration>,
    /// The longest the deadline scheduler sleeps between two looks at the store; the first
    /// pass fires what came due while the service was down.
    pub deadline_poll_every: Option<Duration>,
}

/// A pipeline's running background work. Dropping it stops every part.
#[derive(Debug, Default)]
pub struct Background {
    retries: Option<JoinHandle<()>>,
    firing: Option<JoinHandle<()>>,
}

impl Background {
    /// Starts, as `config` says, the retries of `compensation` and the firing of `deadlines`
    /// (each where given: a pipeline without a compensation store retries nothing). Must be
    /// called inside a tokio runtime.
    pub fn start(
        config: BackgroundConfig,
        compensation: Option<&CompensationScheduler>,
        deadlines: Option<&DeadlineScheduler>,
    ) -> Self {
        let retries = config
            .retry_every
            .zip(compensation)
            .map(|(every, compensation)| compensation.clone().spawn(every));
        let firing = config
            .deadline_poll_every
            .zip(deadlines)
            .map(|(every, deadlines)| {
                let scheduler = deadlines.clone().with_config(SchedulerConfig {
                    poll_every: every,
                    ..SchedulerConfig::default()
                });
                tokio::spawn(scheduler.run(std::future::pending()))
            });
        Self { retries, firing }
    }

    /// Stops firing deadlines; the retries go on.
    pub fn stop_deadlines(&mut self) {
        if let Some(firing) = self.firing.take() {
            firing.abort();
        }
    }

    /// Stops every part.
    pub fn stop(&mut self) {
        self.stop_deadlines();
        if let Some(retries) = self.retries.take() {
            retries.abort();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}
