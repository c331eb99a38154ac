//! A list's filters ([`ViewFilter`]) as SQL over `view_row.state`.
//!
//! Filters become `jsonb` comparisons (`state -> 'field'`), the field names checked and
//! written into the SQL (so that the expression is the one a field index holds,
//! [`super::field_index`]), the values bound through `to_jsonb`, so a number equals a number
//! numerically and never a string.

use wow_core::view::{Condition, FilterValue, ViewFilter, ViewStoreError};

use crate::query::Param;

/// The SQL of `filter`'s conditions (each `AND (...)`), with their parameters appended to
/// `params`: each condition binds its value.
pub(crate) fn conditions(
    filter: &ViewFilter,
    params: &mut Vec<Param>,
) -> Result<String, ViewStoreError> {
    filter.check()?;
    let mut sql = String::new();
    for condition in filter.conditions() {
        let value = params.len() + 1;
        // The field passed `check_field` (letters, digits and `_`): safe as a literal.
        let found = format!("(state -> '{}')", condition.field());
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
        params.push(bound);
        sql.push_str(" AND (");
        sql.push_str(&clause);
        sql.push(')');
    }
    Ok(sql)
}
