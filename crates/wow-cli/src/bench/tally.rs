//! What one worker counted: latencies, completions per second, refusals by code; merged
//! across workers at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::{CreationError, Histogram};

/// The longest latency kept exactly, in microseconds (longer ones are clamped to it).
const MAX_LATENCY_MICROS: u64 = 3_600_000_000;

/// Refusals and transport failures, by code.
pub(crate) type Errors = BTreeMap<String, u64>;

/// One worker's counts, or all of them merged.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    /// Latency of every answered request, in microseconds.
    pub(crate) latencies: Histogram<u64>,
    /// Requests completed (answered or failed) in each second since the phase began.
    pub(crate) per_second: Vec<u64>,
    /// Requests completed, successes and errors alike.
    pub(crate) requests: u64,
    /// Errors by `errorCode`, `HTTP <status>` or `Transport`.
    pub(crate) errors: Errors,
}

impl Tally {
    /// Empty counts: 3 significant digits from 1 µs to an hour.
    pub(crate) fn new() -> Result<Self, CreationError> {
        Ok(Self {
            latencies: Histogram::new_with_bounds(1, MAX_LATENCY_MICROS, 3)?,
            per_second: Vec::new(),
            requests: 0,
            errors: Errors::new(),
        })
    }

    /// Counts a request completed at `since_start`; `latency` when it was answered.
    pub(crate) fn record(&mut self, since_start: Duration, latency: Option<Duration>) {
        self.requests += 1;
        let second = usize::try_from(since_start.as_secs()).unwrap_or(usize::MAX);
        if second < 1 << 20 {
            if self.per_second.len() <= second {
                self.per_second.resize(second + 1, 0);
            }
            self.per_second[second] += 1;
        }
        if let Some(latency) = latency {
            let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
            self.latencies
                .saturating_record(micros.clamp(1, MAX_LATENCY_MICROS));
        }
    }

    /// Counts one error of `code`.
    pub(crate) fn error(&mut self, code: &str) {
        match self.errors.get_mut(code) {
            Some(n) => *n += 1,
            None => {
                self.errors.insert(code.to_owned(), 1);
            }
        }
    }

    /// Adds `other`'s counts to these.
    pub(crate) fn merge(&mut self, other: &Self) {
        // Both histograms have the same bounds, so adding cannot fail; clamp if it did.
        if self.latencies.add(&other.latencies).is_err() {
            for value in other.latencies.iter_recorded() {
                let clamped = value.value_iterated_to().min(MAX_LATENCY_MICROS);
                self.latencies
                    .saturating_record_n(clamped, value.count_at_value());
            }
        }
        if self.per_second.len() < other.per_second.len() {
            self.per_second.resize(other.per_second.len(), 0);
        }
        for (mine, theirs) in self.per_second.iter_mut().zip(&other.per_second) {
            *mine += theirs;
        }
        self.requests += other.requests;
        for (code, n) in &other.errors {
            *self.errors.entry(code.clone()).or_default() += n;
        }
    }

    /// The highest count of a whole second of a phase that lasted `elapsed`; the average
    /// rate when no second was whole.
    pub(crate) fn peak_tps(&self, elapsed: Duration) -> f64 {
        let whole = usize::try_from(elapsed.as_secs()).unwrap_or(usize::MAX);
        match self.per_second.iter().take(whole).max() {
            Some(&peak) => peak as f64,
            None => average(self.requests, elapsed),
        }
    }
}

/// `requests` over `elapsed`, per second.
pub(crate) fn average(requests: u64, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds > 0.0 {
        requests as f64 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_and_peaks() {
        let mut a = Tally::new().unwrap_or_else(|e| panic!("{e}"));
        a.record(Duration::from_millis(100), Some(Duration::from_millis(2)));
        a.record(Duration::from_millis(1500), None);
        a.error("Transport");
        let mut b = Tally::new().unwrap_or_else(|e| panic!("{e}"));
        b.record(Duration::from_millis(1200), Some(Duration::from_millis(4)));
        b.record(Duration::from_millis(2100), Some(Duration::from_millis(4)));
        b.error("Transport");
        a.merge(&b);
        assert_eq!(a.requests, 4);
        assert_eq!(a.per_second, vec![1, 2, 1]);
        assert_eq!(a.errors["Transport"], 2);
        assert_eq!(a.latencies.len(), 3);
        assert_eq!(a.peak_tps(Duration::from_millis(2200)), 2.0);
        assert_eq!(a.peak_tps(Duration::from_millis(500)), 8.0);
    }
}
