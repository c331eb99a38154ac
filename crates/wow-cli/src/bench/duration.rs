//! How long a phase runs: `--duration` values (a whole number and a unit, `500ms`, `10s`,
//! `2m` or `1h`) and the [`Limit`] of a phase.

use std::time::Duration;

/// When a phase ends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Limit {
    /// After this many requests.
    Count(u64),
    /// When this much time has passed (requests in flight then still finish).
    For(Duration),
}

/// Parses `500ms`, `10s`, `2m`, `1h` (a bare number is seconds); refuses zero.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 500ms, 10s or 2m"))?;
    let duration = match unit {
        "ms" => Duration::from_millis(number),
        "" | "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number.saturating_mul(60)),
        "h" => Duration::from_secs(number.saturating_mul(3600)),
        other => return Err(format!("unknown unit `{other}`: use ms, s, m or h")),
    };
    if duration.is_zero() {
        return Err("the duration must be above zero".to_owned());
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn refusals() {
        for bad in ["", "s", "0s", "10x", "-1s", "1.5s", "ms10"] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
