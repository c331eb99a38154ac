//! A list's filters ([`ViewFilter`]) as SQL over `view_row.state`.
//!
//! Filters become `jsonb` comparisons (`state -> $n::text`), the field names checked and
//! bound, the values bound through `to_jsonb`, so a number equals a number numerically and
//! never a string.

use wow_core::view::{Condition, FilterValue, ViewFilter, ViewStoreError};

use crate::query::Param;

/// The SQL of `filter`'s conditions (each `AND (...)`), with their parameters appended to
/// `params`: each condition binds its field name, then its value.
pub(super) fn conditions(
    filter: &ViewFilter,
    params: &mut Vec<Param>,
) -> Result<String, ViewStoreError> {
    filter.check()?;
    let mut sql = String::new();
    for condition in filter.conditions() {
        let (field, value) = (params.len() + 1, params.len() + 2);
        let found = format!("(state -> ${field}::TEXT)");
        let number = format!("jsonb_typeof{found} = 'number'");
        let (clause, bound): (String, Param) = match condition {
            Condition::Equals {
                value: FilterValue::Text(text),
                ..
            } => (
                format!("{found} = to_jsonb(${value}::TEXT)"),
                Box::new(text.clone()),
            ),
            Condition::Equals {
                value: FilterValue::Integer(integer),
                ..
            } => (
                format!("{number} AND {found} = to_jsonb(${value}::BIGINT)"),
                Box::new(*integer),
            ),
            Condition::Equals {
                value: FilterValue::Bool(flag),
                ..
            } => (
                format!("{found} = to_jsonb(${value}::BOOLEAN)"),
                Box::new(*flag),
            ),
            Condition::AtLeast { value: bound, .. } => (
                format!("{number} AND {found} >= to_jsonb(${value}::BIGINT)"),
                Box::new(*bound),
            ),
            Condition::AtMost { value: bound, .. } => (
                format!("{number} AND {found} <= to_jsonb(${value}::BIGINT)"),
                Box::new(*bound),
            ),
            other => {
                return Err(ViewStoreError::IllegalArgument(format!(
                    "this store cannot filter by {other:?}"
                )))
            }
        };
        params.push(Box::new(condition.field().to_owned()));
        params.push(bound);
        sql.push_str(" AND (");
        sql.push_str(&clause);
        sql.push(')');
    }
    Ok(sql)
}
