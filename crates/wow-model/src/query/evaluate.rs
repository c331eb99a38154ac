//! The reference semantics of a [`Filter`], a sort and a projection over JSON documents: what
//! the in-memory store runs, and what the SQL of the other stores must agree with.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::filter::{FieldPath, Filter, Range, Scalar, TextMatch};
use super::{Direction, Projection, SortKey};

/// Whether `document` satisfies `filter`.
pub fn matches(filter: &Filter, document: &Value) -> bool {
    match filter {
        Filter::All => true,
        Filter::And(all) => all.iter().all(|f| matches(f, document)),
        Filter::Or(any) => any.iter().any(|f| matches(f, document)),
        Filter::Nor(none) => !none.iter().any(|f| matches(f, document)),
        Filter::Eq(path, scalar) => path.find(document).is_some_and(|v| equals(v, scalar)),
        Filter::Ne(path, scalar) => !path.find(document).is_some_and(|v| equals(v, scalar)),
        Filter::Range(path, range, scalar) => path
            .find(document)
            .and_then(|v| compare(v, scalar))
            .is_some_and(|ordering| match range {
                Range::Gt => ordering == Ordering::Greater,
                Range::Gte => ordering != Ordering::Less,
                Range::Lt => ordering == Ordering::Less,
                Range::Lte => ordering != Ordering::Greater,
            }),
        Filter::In(path, scalars) => path
            .find(document)
            .is_some_and(|v| scalars.iter().any(|s| equals(v, s))),
        Filter::NotIn(path, scalars) => !path
            .find(document)
            .is_some_and(|v| scalars.iter().any(|s| equals(v, s))),
        Filter::AllIn(path, scalars) => path
            .find(document)
            .and_then(Value::as_array)
            .is_some_and(|items| scalars.iter().all(|s| items.iter().any(|v| equals(v, s)))),
        Filter::Text {
            path,
            kind,
            value,
            ignore_case,
        } => path
            .find(document)
            .and_then(Value::as_str)
            .is_some_and(|text| {
                let (text, value) = if *ignore_case {
                    (text.to_ascii_lowercase(), value.to_ascii_lowercase())
                } else {
                    (text.to_owned(), value.clone())
                };
                match kind {
                    TextMatch::Contains => text.contains(&value),
                    TextMatch::StartsWith => text.starts_with(&value),
                    TextMatch::EndsWith => text.ends_with(&value),
                }
            }),
        Filter::ElemMatch(path, child) => path
            .find(document)
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(|item| matches(child, item))),
        Filter::Null(path) => path.find(document).is_none_or(Value::is_null),
        Filter::NotNull(path) => path.find(document).is_some_and(|v| !v.is_null()),
        Filter::Bool(path, flag) => path.find(document) == Some(&Value::Bool(*flag)),
        Filter::Exists(path, there) => path.find(document).is_some() == *there,
    }
}

fn equals(value: &Value, scalar: &Scalar) -> bool {
    match (value, scalar) {
        (Value::String(a), Scalar::Text(b)) => a == b,
        (Value::Bool(a), Scalar::Bool(b)) => a == b,
        (Value::Number(a), Scalar::Number(b)) => numbers(a, b) == Some(Ordering::Equal),
        _ => false,
    }
}

fn compare(value: &Value, scalar: &Scalar) -> Option<Ordering> {
    match (value, scalar) {
        (Value::String(a), Scalar::Text(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
        (Value::Number(a), Scalar::Number(b)) => numbers(a, b),
        _ => None,
    }
}

fn numbers(a: &serde_json::Number, b: &serde_json::Number) -> Option<Ordering> {
    match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// The order of two documents under `sort` (then by `tie`, the documents' keys): by each key's
/// value, missing and null first, then booleans, numbers, text (by bytes), and anything else.
pub fn order(sort: &[SortKey], a: &Value, b: &Value) -> Ordering {
    for key in sort {
        let ordering = rank(key.path.find(a))
            .cmp(&rank(key.path.find(b)))
            .then_with(|| match (key.path.find(a), key.path.find(b)) {
                (Some(Value::Bool(x)), Some(Value::Bool(y))) => x.cmp(y),
                (Some(Value::Number(x)), Some(Value::Number(y))) => {
                    numbers(x, y).unwrap_or(Ordering::Equal)
                }
                (Some(Value::String(x)), Some(Value::String(y))) => x.as_bytes().cmp(y.as_bytes()),
                _ => Ordering::Equal,
            });
        let ordering = match key.direction {
            Direction::Asc => ordering,
            Direction::Desc => ordering.reverse(),
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    Ordering::Equal
}

fn rank(value: Option<&Value>) -> u8 {
    match value {
        None | Some(Value::Null) => 0,
        Some(Value::Bool(_)) => 1,
        Some(Value::Number(_)) => 2,
        Some(Value::String(_)) => 3,
        Some(_) => 4,
    }
}

/// `document` with only the fields `projection` keeps: the `include` paths (all when empty),
/// less the `exclude` paths.
pub fn project(projection: &Projection, document: Value) -> Value {
    let mut kept = if projection.include.is_empty() {
        document
    } else {
        let mut kept = Value::Object(Map::new());
        for path in &projection.include {
            if let Ok(path) = FieldPath::parse(path) {
                if let Some(value) = path.find(&document) {
                    put(&mut kept, path.segments(), value.clone());
                }
            }
        }
        kept
    };
    for path in &projection.exclude {
        if let Ok(path) = FieldPath::parse(path) {
            remove(&mut kept, path.segments());
        }
    }
    kept
}

fn put(document: &mut Value, segments: &[String], value: Value) {
    let Some((last, parents)) = segments.split_last() else {
        return;
    };
    let mut at = document;
    for segment in parents {
        let Some(object) = at.as_object_mut() else {
            return;
        };
        at = object
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let Some(object) = at.as_object_mut() {
        object.insert(last.clone(), value);
    }
}

fn remove(document: &mut Value, segments: &[String]) {
    let Some((last, parents)) = segments.split_last() else {
        return;
    };
    let mut at = document;
    for segment in parents {
        match at.as_object_mut().and_then(|o| o.get_mut(segment)) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(object) = at.as_object_mut() {
        object.remove(last);
    }
}
