//! The progress bar of a phase, on standard error: requests done of the count, or time
//! spent of the duration, with the rate so far. Hidden for `--json` and when standard
//! error is not a terminal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;

use super::duration::Limit;
use super::tally::average;

/// How often the bar is redrawn.
const TICK: Duration = Duration::from_millis(100);

/// A phase's bar, before the phase starts.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: ProgressBar,
    limit: Limit,
}

impl Progress {
    /// A bar labelled `label` for a phase that ends at `limit`; drawn only when `visible`.
    pub(crate) fn new(label: &str, limit: Limit, visible: bool) -> Self {
        let (length, template) = match limit {
            Limit::Count(n) => (n, "{prefix:>9} [{bar:40}] {pos}/{len} {msg}"),
            Limit::For(time) => (
                u64::try_from(time.as_millis()).unwrap_or(u64::MAX),
                "{prefix:>9} [{bar:40}] {elapsed} {msg}",
            ),
        };
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(length), target);
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(label.to_owned());
        Self { bar, limit }
    }

    /// Redraws the bar from `completed` until [`Ticker::finish`].
    pub(crate) fn follow(self, completed: Arc<AtomicU64>, start: Instant) -> Ticker {
        let bar = self.bar.clone();
        let limit = self.limit;
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            loop {
                tick.tick().await;
                let done = completed.load(Ordering::Relaxed);
                let elapsed = start.elapsed();
                let position = match limit {
                    Limit::Count(_) => done,
                    Limit::For(_) => u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
                };
                bar.set_position(position);
                bar.set_message(format!("{done} req, {:.0}/s", average(done, elapsed)));
            }
        });
        Ticker {
            bar: self.bar,
            task,
        }
    }
}

/// A bar being redrawn while its phase runs.
#[derive(Debug)]
pub(crate) struct Ticker {
    bar: ProgressBar,
    task: JoinHandle<()>,
}

impl Ticker {
    /// Stops redrawing and clears the bar.
    pub(crate) fn finish(self) {
        self.task.abort();
        self.bar.finish_and_clear();
    }
}
