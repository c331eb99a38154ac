//! Which rows a [`ViewStore::list`](crate::view::ViewStore::list) returns: a conjunction of simple
//! conditions on top-level fields of the state.
//!
//! The semantics are the same in every store (the TCK checks them): a field that is missing,
//! or holds a value of another JSON type, satisfies no condition. Text equals only a string;
//! a boolean only a boolean; an integer any number numerically equal to it (`1` and `1.0`).
//! The range conditions hold only for numbers.

use std::cmp::Ordering;

use serde_json::Value;

use crate::view::ViewStoreError;

/// The longest field name a filter accepts, in bytes.
pub const MAX_FIELD_LEN: usize = 64;

/// Checks that `field` can name a top-level field of a state in a filter: 1 to
/// [`MAX_FIELD_LEN`] ASCII letters, digits or `_`, not starting with a digit. Backends rely
/// on it to build their JSON paths; values are always bound, never written into SQL.
pub fn check_field(field: &str) -> Result<(), ViewStoreError> {
    let mut chars = field.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !starts_well
        || field.len() > MAX_FIELD_LEN
        || !field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(ViewStoreError::IllegalArgument(format!(
            "`{field}` is not a field name a view filter accepts (1 to {MAX_FIELD_LEN} letters, digits or _, not starting with a digit)"
        )));
    }
    Ok(())
}

/// A value an equality condition compares a field with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterValue {
    /// A JSON string equal to this text.
    Text(String),
    /// A JSON number numerically equal to this integer.
    Integer(i64),
    /// A JSON boolean.
    Bool(bool),
}

impl From<&str> for FilterValue {
    fn from(value: &str) -> Self {
        FilterValue::Text(value.to_owned())
    }
}

impl From<String> for FilterValue {
    fn from(value: String) -> Self {
        FilterValue::Text(value)
    }
}

impl From<i64> for FilterValue {
    fn from(value: i64) -> Self {
        FilterValue::Integer(value)
    }
}

impl From<bool> for FilterValue {
    fn from(value: bool) -> Self {
        FilterValue::Bool(value)
    }
}

/// One condition on a top-level field of the state.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Condition {
    /// `field = value`.
    Equals {
        /// The field's name.
        field: String,
        /// The value it must equal.
        value: FilterValue,
    },
    /// `field >= value`, for a number.
    AtLeast {
        /// The field's name.
        field: String,
        /// The lower bound, inclusive.
        value: i64,
    },
    /// `field <= value`, for a number.
    AtMost {
        /// The field's name.
        field: String,
        /// The upper bound, inclusive.
        value: i64,
    },
}

impl Condition {
    /// The field the condition is on.
    pub fn field(&self) -> &str {
        match self {
            Condition::Equals { field, .. }
            | Condition::AtLeast { field, .. }
            | Condition::AtMost { field, .. } => field,
        }
    }

    /// Whether `state` satisfies the condition: the reference semantics every store follows.
    pub fn matches(&self, state: &Value) -> bool {
        let Some(found) = state.get(self.field()) else {
            return false;
        };
        match self {
            Condition::Equals {
                value: FilterValue::Text(text),
                ..
            } => found.as_str() == Some(text.as_str()),
            Condition::Equals {
                value: FilterValue::Bool(flag),
                ..
            } => found.as_bool() == Some(*flag),
            Condition::Equals {
                value: FilterValue::Integer(number),
                ..
            } => compare(found, *number) == Some(Ordering::Equal),
            Condition::AtLeast { value, .. } => {
                matches!(
                    compare(found, *value),
                    Some(Ordering::Greater | Ordering::Equal)
                )
            }
            Condition::AtMost { value, .. } => {
                matches!(
                    compare(found, *value),
                    Some(Ordering::Less | Ordering::Equal)
                )
            }
        }
    }
}

/// How a JSON number compares with `bound`; `None` for anything but a number.
fn compare(found: &Value, bound: i64) -> Option<Ordering> {
    let Value::Number(number) = found else {
        return None;
    };
    if let Some(integer) = number.as_i64() {
        return Some(integer.cmp(&bound));
    }
    if number.as_u64().is_some() {
        // Above i64::MAX, so above every bound.
        return Some(Ordering::Greater);
    }
    number.as_f64()?.partial_cmp(&(bound as f64))
}

/// All of its conditions, on top-level fields of a view's state; empty matches every row.
///
/// ```
/// use wow_core::view::ViewFilter;
///
/// let rich_alices = ViewFilter::new().equals("name", "Alice").at_least("balance", 1_000);
/// assert!(rich_alices.matches(&serde_json::json!({"name": "Alice", "balance": 5000})));
/// assert!(!rich_alices.matches(&serde_json::json!({"name": "Alice", "balance": "lots"})));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewFilter {
    conditions: Vec<Condition>,
}

impl ViewFilter {
    /// A filter that matches every row.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `field = value`.
    pub fn equals(mut self, field: impl Into<String>, value: impl Into<FilterValue>) -> Self {
        self.conditions.push(Condition::Equals {
            field: field.into(),
            value: value.into(),
        });
        self
    }

    /// Adds `field >= value` (the field must be a number).
    pub fn at_least(mut self, field: impl Into<String>, value: i64) -> Self {
        self.conditions.push(Condition::AtLeast {
            field: field.into(),
            value,
        });
        self
    }

    /// Adds `field <= value` (the field must be a number).
    pub fn at_most(mut self, field: impl Into<String>, value: i64) -> Self {
        self.conditions.push(Condition::AtMost {
            field: field.into(),
            value,
        });
        self
    }

    /// The conditions, in the order they were added.
    pub fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    /// Checks every field name with [`check_field`]; a store calls it before reading.
    pub fn check(&self) -> Result<(), ViewStoreError> {
        self.conditions
            .iter()
            .try_for_each(|condition| check_field(condition.field()))
    }

    /// Whether `state` satisfies every condition.
    pub fn matches(&self, state: &Value) -> bool {
        self.conditions
            .iter()
            .all(|condition| condition.matches(state))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn accepts_identifiers_and_refuses_anything_else() {
        for good in ["name", "_x", "balance_2", "A"] {
            assert!(check_field(good).is_ok(), "{good}");
        }
        let long = "a".repeat(MAX_FIELD_LEN + 1);
        for bad in ["", "2x", "a.b", "a'b", "a b", "$.a", "é", long.as_str()] {
            assert!(check_field(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_field_of_another_type_matches_nothing() {
        let state = json!({"n": 1, "s": "1", "b": true, "f": 1.0, "big": u64::MAX});
        assert!(ViewFilter::new().equals("n", 1).matches(&state));
        assert!(ViewFilter::new().equals("f", 1).matches(&state));
        assert!(!ViewFilter::new().equals("s", 1).matches(&state));
        assert!(!ViewFilter::new().equals("n", "1").matches(&state));
        assert!(!ViewFilter::new().equals("n", true).matches(&state));
        assert!(ViewFilter::new().equals("b", true).matches(&state));
        assert!(!ViewFilter::new().at_least("s", 0).matches(&state));
        assert!(ViewFilter::new().at_least("big", i64::MAX).matches(&state));
        assert!(!ViewFilter::new().at_most("missing", 0).matches(&state));
    }
}
