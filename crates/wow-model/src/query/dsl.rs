//! Wow's query DSL as it travels over HTTP: conditions, projection, sort, pagination and the
//! three query bodies, with Wow's JSON field names, so that Wow's own clients' queries read
//! as they are.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Declares `Operator` and `Operator::ALL` from one list, so that no operator can be in one
/// and missing from the other.
macro_rules! operators {
    ($($name:ident),* $(,)?) => {
        /// Every operator of Wow's `Operator`, by its JSON name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        #[allow(missing_docs)] // each is documented in docs/coming-from-wow.md
        pub enum Operator {
            $($name),*
        }

        impl Operator {
            /// Every operator, in Wow's order.
            pub const ALL: &'static [Operator] = &[$(Operator::$name),*];
        }
    };
}

operators!(
    And,
    Or,
    Nor,
    Id,
    Ids,
    AggregateId,
    AggregateIds,
    TenantId,
    OwnerId,
    SpaceId,
    Deleted,
    All,
    Eq,
    Ne,
    Gt,
    Lt,
    Gte,
    Lte,
    Contains,
    In,
    NotIn,
    Between,
    AllIn,
    StartsWith,
    EndsWith,
    ElemMatch,
    Null,
    NotNull,
    True,
    False,
    Exists,
    Today,
    BeforeToday,
    Tomorrow,
    ThisWeek,
    NextWeek,
    LastWeek,
    ThisMonth,
    LastMonth,
    RecentDays,
    EarlierDays,
    Match,
    Raw,
);

impl Operator {
    /// The operator's JSON name (`AGGREGATE_ID`, ...).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

/// One condition of a query: `{field, operator, value, children, options}`, every part
/// optional as in Wow (an empty condition is `ALL`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// The field path (`state.balance`), for the operators on a field.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
    /// What the condition tests.
    #[serde(default = "all")]
    pub operator: Operator,
    /// The value (a scalar, an array, a number of days, ...), by operator.
    #[serde(default, skip_serializing_if = "is_empty_value")]
    pub value: Value,
    /// The conditions of `AND`, `OR`, `NOR` and `ELEM_MATCH`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Condition>,
    /// `ignoreCase` (text operators), `zoneId` and `datePattern` (date operators).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub options: Map<String, Value>,
    /// Whether the server imposed it (a tenant, owner, space or deletion guard around the
    /// caller's query): it counts against none of the caller's limits. Never read from or
    /// written to JSON, so no caller can set it.
    #[serde(skip)]
    pub imposed: bool,
}

fn all() -> Operator {
    Operator::All
}

fn is_empty_value(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => text.is_empty(),
        _ => false,
    }
}

impl Default for Condition {
    fn default() -> Self {
        Self::all()
    }
}

impl Condition {
    /// Matches everything.
    pub fn all() -> Self {
        Self::of(Operator::All, "", Value::Null)
    }

    /// `operator` on `field` with `value`.
    pub fn of(operator: Operator, field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self {
            field: field.into(),
            operator,
            value: value.into(),
            children: Vec::new(),
            options: Map::new(),
            imposed: false,
        }
    }

    /// This condition marked as imposed by the server ([`Condition::imposed`]): it and the
    /// levels it adds count against none of the caller's limits (conditions, depth), so a
    /// caller's query may use every limit the documentation gives whatever the server wraps
    /// around it. Its children keep their own marks.
    pub fn imposed(mut self) -> Self {
        self.imposed = true;
        self
    }

    /// `operator` (`AND`, `OR`, `NOR`) over `children`.
    pub fn logical(operator: Operator, children: Vec<Condition>) -> Self {
        Self {
            children,
            ..Self::of(operator, "", Value::Null)
        }
    }

    /// This condition with the option `key` set to `value`.
    pub fn with_option(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.options.insert(key.to_owned(), value.into());
        self
    }

    /// `self AND other`, or `other` alone when `self` is `ALL` (how Wow appends the tenant of
    /// a route to a query).
    pub fn and(self, other: Condition) -> Self {
        if self.operator == Operator::All {
            return other;
        }
        Self::logical(Operator::And, vec![self, other])
    }
}

/// Which fields of each document an answer keeps: `include` (only those), `exclude` (all
/// but those), or both; empty lists keep everything.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Projection {
    /// The field paths to keep.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// The field paths to drop.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
}

/// The order of a sort key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Direction {
    /// Smallest first.
    Asc,
    /// Largest first.
    Desc,
}

/// One sort key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sort {
    /// The field path.
    pub field: String,
    /// The order.
    pub direction: Direction,
}

/// A page: `index` from 1, `size` documents per page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pagination {
    /// The page, from 1.
    #[serde(default = "first_page")]
    pub index: u64,
    /// Documents per page.
    #[serde(default = "page_size")]
    pub size: u64,
}

fn first_page() -> u64 {
    1
}

fn page_size() -> u64 {
    10
}

impl Default for Pagination {
    fn default() -> Self {
        Self {
            index: first_page(),
            size: page_size(),
        }
    }
}

/// `POST …/single`: the first document that matches.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SingleQuery {
    /// Which documents.
    #[serde(default)]
    pub condition: Condition,
    /// Which fields.
    #[serde(default)]
    pub projection: Projection,
    /// In which order (the first is answered).
    #[serde(default)]
    pub sort: Vec<Sort>,
}

/// `POST …/list`: up to `limit` documents that match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListQuery {
    /// Which documents.
    #[serde(default)]
    pub condition: Condition,
    /// Which fields.
    #[serde(default)]
    pub projection: Projection,
    /// In which order.
    #[serde(default)]
    pub sort: Vec<Sort>,
    /// How many at most (1 to [`MAX_LIST_LIMIT`](super::MAX_LIST_LIMIT)).
    #[serde(default = "page_size")]
    pub limit: u64,
}

/// `POST …/paged`: one page of the documents that match, and how many match in all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PagedQuery {
    /// Which documents.
    #[serde(default)]
    pub condition: Condition,
    /// Which fields.
    #[serde(default)]
    pub projection: Projection,
    /// In which order.
    #[serde(default)]
    pub sort: Vec<Sort>,
    /// Which page.
    #[serde(default)]
    pub pagination: Pagination,
}

/// What the three query bodies share: a condition and a projection, and how each lowers.
pub trait QueryBody {
    /// Which documents.
    fn condition_mut(&mut self) -> &mut Condition;
    /// Which fields.
    fn projection(&self) -> &Projection;
    /// The body checked and lowered, as a store runs it.
    ///
    /// # Errors
    ///
    /// A [`QueryError`](super::QueryError) naming what cannot run.
    fn lower(&self, lowering: &super::Lowering) -> Result<super::DocumentQuery, super::QueryError>;
}

macro_rules! query_body {
    ($body:ty, $lower:ident) => {
        impl QueryBody for $body {
            fn condition_mut(&mut self) -> &mut Condition {
                &mut self.condition
            }

            fn projection(&self) -> &Projection {
                &self.projection
            }

            fn lower(
                &self,
                lowering: &super::Lowering,
            ) -> Result<super::DocumentQuery, super::QueryError> {
                super::DocumentQuery::$lower(self, lowering)
            }
        }
    };
}

query_body!(SingleQuery, single);
query_body!(ListQuery, list);
query_body!(PagedQuery, paged);

/// A page of a paged query: `{total, list}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PagedList<T> {
    /// How many documents match in all.
    pub total: u64,
    /// The page's documents.
    pub list: Vec<T>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_operator_of_wow_reads_by_its_name() {
        assert_eq!(Operator::ALL.len(), 43, "Wow's Operator has 43");
        for operator in Operator::ALL {
            let name = operator.name();
            let read: Operator = serde_json::from_value(Value::String(name.clone())).unwrap();
            assert_eq!(read, *operator, "{name}");
        }
        assert_eq!(Operator::AggregateIds.name(), "AGGREGATE_IDS");
        assert_eq!(Operator::BeforeToday.name(), "BEFORE_TODAY");
    }

    #[test]
    fn imposed_guards_count_against_none_of_the_callers_limits_and_no_caller_can_impose() {
        use crate::query::{Lowering, QueryError, Target, MAX_CONDITIONS, MAX_DEPTH};
        let leaf = Condition::of(Operator::Eq, "state.balance", 1);
        let nested = |levels: usize| {
            (1..levels).fold(leaf.clone(), |inner, _| {
                Condition::logical(Operator::And, vec![inner])
            })
        };
        let guarded = |condition: Condition| {
            let active = Condition::of(Operator::Deleted, "", "ACTIVE").imposed();
            let owner = Condition::of(Operator::OwnerId, "", "bob").imposed();
            Condition::logical(
                Operator::And,
                vec![
                    owner,
                    Condition::logical(Operator::And, vec![active, condition]).imposed(),
                ],
            )
            .imposed()
        };
        let lowering = Lowering::new(Target::Snapshot, 0);
        let widest = Condition::logical(Operator::Or, vec![leaf.clone(); MAX_CONDITIONS - 1]);
        assert!(lowering.lower(&guarded(nested(MAX_DEPTH))).is_ok());
        assert!(lowering.lower(&guarded(widest)).is_ok());
        assert_eq!(
            lowering.lower(&guarded(nested(MAX_DEPTH + 1))).unwrap_err(),
            QueryError::TooLarge("levels of nested conditions", MAX_DEPTH)
        );
        let wider = Condition::logical(Operator::Or, vec![leaf.clone(); MAX_CONDITIONS]);
        assert_eq!(
            lowering.lower(&guarded(wider)).unwrap_err(),
            QueryError::TooLarge("conditions", MAX_CONDITIONS)
        );
        // Not a field of the JSON: a caller cannot mark its own conditions imposed.
        let forged = serde_json::from_value::<Condition>(serde_json::json!({
            "operator": "AND", "children": [], "imposed": true
        }));
        assert!(forged.is_err());
    }
}
