//! What the server shows besides its answers: the consumers' backlog from `/metrics`
//! (`wow_event_backlog`) and its resident memory from `/proc/PID/status`.

use std::time::{Duration, Instant};

use super::client::{self, Target};

/// The gauge of streams appended but not yet handled by every consumer.
const BACKLOG_GAUGE: &str = "wow_event_backlog";
/// How often the backlog is read while it drains.
const POLL: Duration = Duration::from_millis(50);
/// How long the backlog may take to drain before the report gives up on it.
const DRAIN_DEADLINE: Duration = Duration::from_secs(60);

/// The backlog right after the load and how long it took to reach zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Drain {
    /// The backlog when the load ended; `None` when the server does not report it.
    pub(crate) backlog_at_end: Option<u64>,
    /// From the end of the load until the backlog was zero; `None` when it is not
    /// reported or did not drain within the deadline.
    pub(crate) drain_ms: Option<u64>,
}

/// The value of `wow_event_backlog` in a Prometheus text page: the highest over its
/// label sets, `None` when no sample of it is there.
pub(crate) fn parse_backlog(page: &str) -> Option<u64> {
    page.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let rest = line.strip_prefix(BACKLOG_GAUGE)?;
            let value = match rest.chars().next()? {
                '{' => rest.split_once('}')?.1,
                ' ' | '\t' => rest,
                _ => return None,
            };
            let value: f64 = value.split_whitespace().next()?.parse().ok()?;
            // A gauge of streams is a whole, non-negative number; anything else is noise.
            (value.is_finite() && value >= 0.0).then_some(value.round() as u64)
        })
        .max()
}

/// Reads the backlog from `target`'s `/metrics`.
async fn backlog(target: &Target) -> Option<u64> {
    let page = client::get(target, "/metrics").await?;
    parse_backlog(std::str::from_utf8(&page).ok()?)
}

/// Reads the backlog now and, when it is above zero, every 50 ms until it is zero (for at
/// most a minute).
pub(crate) async fn drain(target: &Target) -> Drain {
    let start = Instant::now();
    let Some(at_end) = backlog(target).await else {
        return Drain {
            backlog_at_end: None,
            drain_ms: None,
        };
    };
    let mut left = at_end;
    while left > 0 && start.elapsed() < DRAIN_DEADLINE {
        tokio::time::sleep(POLL).await;
        left = backlog(target).await.unwrap_or(left);
    }
    Drain {
        backlog_at_end: Some(at_end),
        drain_ms: (left == 0)
            .then(|| u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)),
    }
}

/// The resident memory of process `pid` (this process when `None`), in KiB.
pub(crate) fn rss_kib(pid: Option<u32>) -> Option<u64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_owned(),
    };
    parse_rss(&std::fs::read_to_string(path).ok()?)
}

/// `VmRSS` of a `/proc/PID/status` page, in KiB.
fn parse_rss(status: &str) -> Option<u64> {
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?;
    let mut parts = line.split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    (parts.next() == Some("kB")).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_gauge_is_read_with_or_without_labels() {
        let page = "# HELP wow_event_backlog Streams not yet handled.\n\
                    # TYPE wow_event_backlog gauge\n\
                    wow_event_backlog_total 99\n\
                    wow_event_backlog 12\n";
        assert_eq!(parse_backlog(page), Some(12));
        let labelled =
            "wow_event_backlog{consumer=\"a\"} 3\nwow_event_backlog{consumer=\"b\"} 7 1700000000\n";
        assert_eq!(parse_backlog(labelled), Some(7));
    }

    #[test]
    fn an_absent_or_garbled_gauge_is_none() {
        assert_eq!(parse_backlog("wow_commands_total 5\n"), None);
        assert_eq!(
            parse_backlog("wow_event_backlog NaN\nwow_event_backlog -1\n"),
            None
        );
        assert_eq!(parse_backlog("# wow_event_backlog 4\n"), None);
    }

    #[test]
    fn rss_is_read_from_the_status_page() {
        let status = "Name:\twow\nVmPeak:\t  9000 kB\nVmRSS:\t   51234 kB\nThreads:\t4\n";
        assert_eq!(parse_rss(status), Some(51234));
        assert_eq!(parse_rss("Name:\twow\n"), None);
        assert!(rss_kib(None).is_some());
    }
}
