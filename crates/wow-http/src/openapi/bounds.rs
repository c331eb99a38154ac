//! The limits the server enforces, as JSON Schema: the rules of ids and tenant ids, request
//! ids, and whole numbers in headers.

use serde_json::{json, Value};
use wow_core::{AGGREGATE_ID_PATTERN, DEFAULT_TENANT_ID, MAX_AGGREGATE_ID_BYTES};

/// The JSON Schema of an aggregate id: 1 to 128 bytes of `A-Z a-z 0-9 . _ : -`, not `.` or
/// `..` (`wow_core::check_aggregate_id`).
pub(super) fn id_schema() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": MAX_AGGREGATE_ID_BYTES, "pattern": AGGREGATE_ID_PATTERN})
}

/// A tenant id follows the rules of an aggregate id; the default tenant's own name aside.
pub(super) fn tenant_schema() -> Value {
    let default: String = DEFAULT_TENANT_ID
        .chars()
        .flat_map(|c| {
            (!c.is_ascii_alphanumeric())
                .then_some('\\')
                .into_iter()
                .chain([c])
        })
        .collect();
    let id = AGGREGATE_ID_PATTERN
        .trim_start_matches('^')
        .trim_end_matches('$');
    json!({"type": "string", "minLength": 1, "maxLength": MAX_AGGREGATE_ID_BYTES,
        "pattern": format!("^({default}|{id})$")})
}

/// A request id: 1 to 128 bytes of visible ASCII (a header value is visible ASCII, and no
/// control characters are accepted), not only spaces (surrounding spaces are not part of a
/// header value).
pub(super) fn request_id_schema() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": MAX_AGGREGATE_ID_BYTES,
        "pattern": "^[\\x20-\\x7E]*[\\x21-\\x7E][\\x20-\\x7E]*$"})
}

/// A whole number in `min..=max` written in a header: text that `u64::from_str` reads after
/// trimming (an optional `+`, leading zeros), as a pattern rather than `type: integer`. A
/// header value is text, and the pattern states the range exactly; with `type: integer`,
/// schemathesis 4.32 validates the text against the number schema when it decides whether
/// a request was invalid, and reports every such request as wrongly accepted.
pub(super) fn whole_number_text(min: u64, max: u64) -> Value {
    json!({"type": "string", "pattern": format!("^\\+?0*({})$", digits_between(min, max).join("|"))})
}

/// Regular expressions that together match the decimal numbers in `min..=max` without
/// leading zeros, one or more per length.
fn digits_between(min: u64, max: u64) -> Vec<String> {
    let (min, max) = (min.to_string(), max.to_string());
    let mut alternatives = Vec::new();
    for length in min.len()..=max.len() {
        let low = if length == min.len() {
            min.clone()
        } else {
            format!("1{}", "0".repeat(length - 1))
        };
        let high = if length == max.len() {
            max.clone()
        } else {
            "9".repeat(length)
        };
        alternatives.extend(same_length(low.as_bytes(), high.as_bytes()));
    }
    alternatives
}

/// Patterns for the digit strings of one length from `low` to `high` (`low <= high`).
fn same_length(low: &[u8], high: &[u8]) -> Vec<String> {
    let any = |count: usize| match count {
        0 => String::new(),
        1 => "[0-9]".to_owned(),
        _ => format!("[0-9]{{{count}}}"),
    };
    let (Some((&first_low, rest_low)), Some((&first_high, rest_high))) =
        (low.split_first(), high.split_first())
    else {
        return vec![String::new()];
    };
    let prefixed = |first: u8, rest: Vec<String>| -> Vec<String> {
        rest.into_iter()
            .map(|tail| format!("{}{tail}", char::from(first)))
            .collect()
    };
    if first_low == first_high {
        return prefixed(first_low, same_length(rest_low, rest_high));
    }
    // From `first_low` (all of it when the rest of `low` is zeros) to `first_high` (all of it
    // when the rest of `high` is nines), with any digits after.
    let low_whole = rest_low.iter().all(|d| *d == b'0');
    let high_whole = rest_high.iter().all(|d| *d == b'9');
    let mut patterns = Vec::new();
    let (mut from, mut to) = (first_low, first_high);
    if !low_whole {
        patterns.extend(prefixed(
            first_low,
            same_length(rest_low, &vec![b'9'; rest_low.len()]),
        ));
        from += 1;
    }
    if !high_whole {
        to -= 1;
    }
    if from <= to {
        let digits = if from == to {
            char::from(from).to_string()
        } else {
            format!("[{}-{}]", char::from(from), char::from(to))
        };
        patterns.push(format!("{digits}{}", any(rest_low.len())));
    }
    if !high_whole {
        patterns.extend(prefixed(
            first_high,
            same_length(&vec![b'0'; rest_high.len()], rest_high),
        ));
    }
    patterns
}

/// A pattern that matches any of `words` in any case (JSON Schema patterns have no flags).
pub(super) fn any_case(words: &[&str]) -> String {
    let word = |w: &&str| -> String {
        w.chars()
            .map(|c| format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase()))
            .collect()
    };
    format!(
        "^({})$",
        words.iter().map(word).collect::<Vec<_>>().join("|")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_ranges_become_digit_patterns() {
        assert_eq!(
            digits_between(1, 600_000).join("|"),
            "[1-9]|[1-9][0-9]|[1-9][0-9]{2}|[1-9][0-9]{3}|[1-9][0-9]{4}|[1-5][0-9]{5}|600000"
        );
        assert_eq!(digits_between(0, 0), ["0"]);
        assert_eq!(digits_between(7, 42).join("|"), "[7-9]|[1-3][0-9]|4[0-2]");
        assert_eq!(digits_between(19, 31).join("|"), "19|2[0-9]|3[0-1]");
        let max = digits_between(0, u64::MAX);
        assert_eq!(max.first().map(String::as_str), Some("[0-9]"));
        assert_eq!(
            max.last().map(String::as_str),
            Some("1844674407370955161[0-5]")
        );
    }

    #[test]
    fn the_default_tenant_is_escaped_in_the_tenant_pattern() {
        let pattern = tenant_schema()["pattern"].as_str().map(str::to_owned);
        assert_eq!(
            pattern.as_deref(),
            Some("^(\\(0\\)|([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,}))$")
        );
    }
}
