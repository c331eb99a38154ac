//! The identity of one aggregate: bounded context, aggregate name, id and tenant.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The tenant of an aggregate when the caller names none.
pub const DEFAULT_TENANT_ID: &str = "(0)";

/// The longest aggregate id, in bytes.
pub const MAX_AGGREGATE_ID_BYTES: usize = 128;

/// The rule of [`check_aggregate_id`] as a regular expression (JSON Schema's `pattern`), the
/// length aside: `A-Z a-z 0-9 . _ : -`, and not `.` or `..`.
pub const AGGREGATE_ID_PATTERN: &str = "^([.]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*|[.]{3,})$";

/// Whether `id` may name an aggregate: 1 to [`MAX_AGGREGATE_ID_BYTES`] bytes of
/// `A-Z a-z 0-9 . _ : -`, and not `.` or `..` (which a proxy that normalises addresses would
/// rewrite as a path step). The error says which rule `id` breaks, for a binding error.
pub fn check_aggregate_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() || id.len() > MAX_AGGREGATE_ID_BYTES {
        return Err("must be 1 to 128 bytes");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
    {
        return Err("may hold only A-Z a-z 0-9 . _ : -");
    }
    if id == "." || id == ".." {
        return Err("must not be `.` or `..`");
    }
    Ok(())
}

/// Whether `id` may be a request id a command carries over HTTP: 1 to 128 bytes of visible
/// ASCII and spaces (`0x20..=0x7E`), not only spaces. A header value can hold nothing else,
/// so a request id that breaks the rule was never recorded from a caller. The error says which
/// rule `id` breaks.
pub fn check_request_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() || id.len() > MAX_AGGREGATE_ID_BYTES {
        return Err("must be 1 to 128 bytes");
    }
    if !id.bytes().all(|b| (0x20..=0x7E).contains(&b)) {
        return Err("may hold only visible ASCII and spaces");
    }
    if id.bytes().all(|b| b == b' ') {
        return Err("must hold more than spaces");
    }
    Ok(())
}

/// An aggregate type: its bounded context and its name (for example `bank` / `account`).
///
/// Aggregate names are unique within one store; the context is kept with every stream so that
/// a scan can filter by it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NamedAggregate {
    /// The bounded context the aggregate belongs to.
    pub context_name: String,
    /// The aggregate's name, unique within a store.
    pub aggregate_name: String,
}

impl NamedAggregate {
    /// An aggregate type named `aggregate_name` in the context `context_name`.
    pub fn new(context_name: impl Into<String>, aggregate_name: impl Into<String>) -> Self {
        Self {
            context_name: context_name.into(),
            aggregate_name: aggregate_name.into(),
        }
    }

    /// The identity of the aggregate of this type with id `id`, in `tenant_id`.
    pub fn aggregate_id(&self, id: impl Into<String>, tenant_id: impl Into<String>) -> AggregateId {
        AggregateId {
            context_name: self.context_name.clone(),
            aggregate_name: self.aggregate_name.clone(),
            id: id.into(),
            tenant_id: tenant_id.into(),
        }
    }
}

impl fmt::Display for NamedAggregate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.context_name, self.aggregate_name)
    }
}

/// The identity of one aggregate instance.
///
/// Two aggregates are the same when their aggregate name and id are equal; the tenant is fixed
/// when the aggregate is created and travels with it. In JSON the fields are `contextName`,
/// `aggregateName`, `aggregateId` and `tenantId`, as in Wow.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AggregateId {
    /// The bounded context the aggregate belongs to.
    pub context_name: String,
    /// The aggregate's type name.
    pub aggregate_name: String,
    /// The aggregate's id, unique within its type.
    #[serde(rename = "aggregateId")]
    pub id: String,
    /// The tenant that owns the aggregate.
    pub tenant_id: String,
}

impl AggregateId {
    /// The aggregate `id` of the type `context_name` / `aggregate_name`, in `tenant_id`.
    pub fn new(
        context_name: impl Into<String>,
        aggregate_name: impl Into<String>,
        id: impl Into<String>,
        tenant_id: impl Into<String>,
    ) -> Self {
        Self {
            context_name: context_name.into(),
            aggregate_name: aggregate_name.into(),
            id: id.into(),
            tenant_id: tenant_id.into(),
        }
    }

    /// The aggregate's type.
    pub fn named_aggregate(&self) -> NamedAggregate {
        NamedAggregate::new(self.context_name.clone(), self.aggregate_name.clone())
    }

    /// Whether `other` names the same aggregate (same aggregate name and id), whatever tenant
    /// or context either one states.
    pub fn same_aggregate(&self, other: &AggregateId) -> bool {
        self.aggregate_name == other.aggregate_name && self.id == other.id
    }
}

impl fmt::Display for AggregateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}/{}@{}",
            self.context_name, self.aggregate_name, self.id, self.tenant_id
        )
    }
}

/// `items` grouped by the aggregate `of` names (its type and id, as the buses partition), each
/// group in arrival order: the groups can run side by side, each one in order. Takes any
/// iterator (a batch's `drain(..)` keeps the batch's buffer) and copies no id.
pub fn group_by_aggregate<T>(
    items: impl IntoIterator<Item = T>,
    of: impl Fn(&T) -> &AggregateId,
) -> Vec<Vec<T>> {
    use std::hash::BuildHasher;

    let items = items.into_iter();
    let hasher = foldhash::fast::FixedState::default();
    let mut groups: Vec<Vec<T>> = Vec::with_capacity(items.size_hint().0);
    // Each group's index by the hash of its aggregate's type and id; two aggregates whose
    // hashes meet are told apart by their first items.
    let mut index: std::collections::HashMap<u64, usize, foldhash::fast::FixedState> =
        std::collections::HashMap::with_capacity_and_hasher(groups.capacity(), hasher.clone());
    let same =
        |a: &AggregateId, b: &AggregateId| a.id == b.id && a.aggregate_name == b.aggregate_name;
    for item in items {
        let aggregate = of(&item);
        let hash = hasher.hash_one((&aggregate.aggregate_name, &aggregate.id));
        let found = match index.get(&hash) {
            Some(&at) if same(of(&groups[at][0]), aggregate) => Some(at),
            Some(_) => groups
                .iter()
                .position(|group| same(of(&group[0]), aggregate)),
            None => None,
        };
        match found {
            Some(at) => groups[at].push(item),
            None => {
                index.entry(hash).or_insert(groups.len());
                groups.push(vec![item]);
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_with_wow_field_names() {
        let id = AggregateId::new("bank", "account", "a-1", "t1");
        let json = serde_json::to_value(&id).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "contextName": "bank",
                "aggregateName": "account",
                "aggregateId": "a-1",
                "tenantId": "t1"
            })
        );
        let back: AggregateId = serde_json::from_value(json).unwrap();
        assert_eq!(back, id);
    }

    #[test]
    fn grouping_keeps_each_aggregates_order_and_first_arrival_order() {
        let id = |n: &str| AggregateId::new("c", "a", n, "t");
        let items = vec![
            (id("x"), 1),
            (id("y"), 1),
            (id("x"), 2),
            (id("z"), 1),
            (id("y"), 2),
        ];
        let groups = group_by_aggregate(items, |(a, _)| a);
        let versions: Vec<Vec<(String, u32)>> = groups
            .into_iter()
            .map(|g| g.into_iter().map(|(a, v)| (a.id, v)).collect())
            .collect();
        assert_eq!(
            versions,
            vec![
                vec![("x".to_owned(), 1), ("x".to_owned(), 2)],
                vec![("y".to_owned(), 1), ("y".to_owned(), 2)],
                vec![("z".to_owned(), 1)],
            ]
        );
    }

    #[test]
    fn dot_and_dot_dot_are_no_ids_and_other_dotted_ids_are() {
        for id in [".", ".."] {
            assert_eq!(check_aggregate_id(id), Err("must not be `.` or `..`"));
        }
        for id in ["...", ".a", "a.", "..a", "a..b", "v1.2"] {
            assert_eq!(check_aggregate_id(id), Ok(()), "{id}");
        }
    }
}
