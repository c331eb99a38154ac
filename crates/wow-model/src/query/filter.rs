//! A [`Condition`] checked and lowered into a [`Filter`]: the few primitive tests every store
//! runs the same way (the TCK holds them to it), with Wow's shorthands (`AGGREGATE_ID`,
//! `DELETED`, ...) turned into fields and the date operators into time ranges.

use jiff::tz::TimeZone;
use jiff::{civil, Timestamp, ToSpan, Zoned};
use serde_json::{Number, Value};

use super::dsl::{Condition, Operator};
use super::QueryError;

/// The most conditions one query may hold (Wow's default guard).
pub const MAX_CONDITIONS: usize = 64;
/// The most values one `IN`, `NOT_IN`, `ALL_IN`, `IDS` or `AGGREGATE_IDS` may list.
pub const MAX_VALUES: usize = 1000;
/// The most values all the lists of one query may hold together.
pub const MAX_VALUES_IN_ALL: usize = 4000;
/// The deepest nesting of conditions (`AND`, `OR`, `NOR`, `ELEM_MATCH` inside one another); a
/// query of one condition has depth 1.
pub const MAX_DEPTH: usize = 16;
/// The longest field path, in bytes.
pub const MAX_PATH_LEN: usize = 256;

/// A field path: its segments (`state.balance` → `["state", "balance"]`). A segment holds
/// ASCII letters, digits, `_` and `-`; paths do not reach into arrays (use `ELEM_MATCH`).
/// Empty inside `ELEM_MATCH` only: the element itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldPath(Vec<String>);

impl FieldPath {
    /// Parses `path`; `Err` says why it is not one.
    pub fn parse(path: &str) -> Result<Self, QueryError> {
        if path.is_empty() {
            return Ok(Self(Vec::new()));
        }
        let bad = || QueryError::Field(path.to_owned());
        if path.len() > MAX_PATH_LEN {
            return Err(bad());
        }
        let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
        let well_formed = segments.iter().all(|segment| {
            !segment.is_empty()
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
        if !well_formed {
            return Err(bad());
        }
        Ok(Self(segments))
    }

    /// The segments, outermost first.
    pub fn segments(&self) -> &[String] {
        &self.0
    }

    /// Whether this is the empty path (the document or element itself).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value at this path in `document`, if there is one.
    pub fn find<'a>(&self, document: &'a Value) -> Option<&'a Value> {
        self.0
            .iter()
            .try_fold(document, |value, segment| value.as_object()?.get(segment))
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("."))
    }
}

/// A value a field is compared with.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// A JSON string.
    Text(String),
    /// A JSON number (an integer equals the same number with a fraction of zero).
    Number(Number),
    /// A JSON boolean.
    Bool(bool),
}

impl Scalar {
    /// The scalar as JSON: the value a store binds for it.
    pub fn to_json(&self) -> Value {
        match self {
            Scalar::Text(text) => Value::String(text.clone()),
            Scalar::Number(n) => Value::Number(n.clone()),
            Scalar::Bool(flag) => Value::Bool(*flag),
        }
    }

    fn of(operator: Operator, value: &Value) -> Result<Self, QueryError> {
        match value {
            Value::String(text) => Ok(Scalar::Text(checked_text(operator, text)?)),
            Value::Number(number) => Ok(Scalar::Number(number.clone())),
            Value::Bool(flag) => Ok(Scalar::Bool(*flag)),
            _ => Err(QueryError::value(
                operator,
                "a string, a number or a boolean",
            )),
        }
    }

    /// The number as a float (for stores that compare in floating point).
    pub fn as_f64(number: &Number) -> f64 {
        number.as_f64().unwrap_or(f64::NAN)
    }
}

/// An ordering test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// `>`
    Gt,
    /// `>=`
    Gte,
    /// `<`
    Lt,
    /// `<=`
    Lte,
}

/// A test on text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextMatch {
    /// Holds the value somewhere.
    Contains,
    /// Begins with the value.
    StartsWith,
    /// Ends with the value.
    EndsWith,
}

/// A checked condition, in the primitives every store runs.
///
/// The semantics, the same in every store:
/// - A test on a field holds only when the field holds a value of the compared type:
///   text with text, a number with a number (numerically: `1` equals `1.0`), a boolean with
///   a boolean. `NE` and `NOT_IN` are the negations of `EQ` and `IN`: they hold for a missing
///   field too.
/// - Text orders by bytes of UTF-8; the text tests compare exactly, or with `ignore_case`
///   ignoring the case of ASCII letters.
/// - `NULL` holds for a missing field or a JSON null; `NOT_NULL` for any other value;
///   `EXISTS` for any value, null included.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Every document.
    All,
    /// Every one of these.
    And(Vec<Filter>),
    /// At least one of these.
    Or(Vec<Filter>),
    /// None of these.
    Nor(Vec<Filter>),
    /// The field equals the value.
    Eq(FieldPath, Scalar),
    /// The field does not equal the value.
    Ne(FieldPath, Scalar),
    /// The field is ordered against the value so.
    Range(FieldPath, Range, Scalar),
    /// The field equals one of the values.
    In(FieldPath, Vec<Scalar>),
    /// The field equals none of the values.
    NotIn(FieldPath, Vec<Scalar>),
    /// The field is an array holding every one of the values.
    AllIn(FieldPath, Vec<Scalar>),
    /// The field is text that matches so.
    Text {
        /// The field.
        path: FieldPath,
        /// How it matches.
        kind: TextMatch,
        /// The text to find.
        value: String,
        /// Ignore the case of ASCII letters.
        ignore_case: bool,
    },
    /// The field is an array with an element that matches (paths relative to the element).
    ElemMatch(FieldPath, Box<Filter>),
    /// The field is missing or null.
    Null(FieldPath),
    /// The field holds a value other than null.
    NotNull(FieldPath),
    /// The field is this boolean.
    Bool(FieldPath, bool),
    /// The field is there (`true`, even as null) or missing (`false`).
    Exists(FieldPath, bool),
}

/// What kind of documents a query runs over: which fields Wow's shorthands stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Materialized snapshots (`aggregateId`, `tenantId`, `ownerId`, `spaceId`, `deleted`,
    /// `state`, ...).
    Snapshot,
    /// Event streams (`id`, `aggregateId`, `tenantId`, `ownerId`, `spaceId`, `version`,
    /// `body`, ...).
    EventStream,
}

/// What lowering needs besides the condition: the documents' kind, the time now and the
/// zone of the date operators when a condition names none.
#[derive(Debug, Clone)]
pub struct Lowering {
    /// The documents' kind.
    pub target: Target,
    /// Now, in milliseconds since the Unix epoch.
    pub now_millis: i64,
    /// The zone of `TODAY`, `THIS_WEEK`, ... without a `zoneId` option.
    pub zone: TimeZone,
}

impl Lowering {
    /// For `target`, now, in the system's zone (as Wow does).
    pub fn new(target: Target, now_millis: i64) -> Self {
        Self {
            target,
            now_millis,
            zone: TimeZone::system(),
        }
    }

    /// This lowering with the date operators' default zone `zone`.
    pub fn with_zone(mut self, zone: TimeZone) -> Self {
        self.zone = zone;
        self
    }

    /// Checks `condition` and lowers it.
    ///
    /// # Errors
    ///
    /// A [`QueryError`] naming the operator, field or option that cannot be run.
    pub fn lower(&self, condition: &Condition) -> Result<Filter, QueryError> {
        let mut budget = Budget {
            conditions: MAX_CONDITIONS,
            values: MAX_VALUES_IN_ALL,
        };
        self.lower_counted(condition, &mut budget, 1, false)
    }

    /// Lowers `c` at `depth`, counting it and its values against `budget`; `in_element`
    /// inside `ELEM_MATCH`, where an empty field is the element itself.
    fn lower_counted(
        &self,
        c: &Condition,
        budget: &mut Budget,
        depth: usize,
        in_element: bool,
    ) -> Result<Filter, QueryError> {
        // A condition the server imposed (a guard around the caller's query) counts against
        // none of the caller's limits, and adds no level to the depth of what it wraps.
        if !c.imposed {
            budget.conditions = budget
                .conditions
                .checked_sub(1)
                .ok_or(QueryError::TooLarge("conditions", MAX_CONDITIONS))?;
        }
        if depth > MAX_DEPTH {
            return Err(QueryError::TooLarge(
                "levels of nested conditions",
                MAX_DEPTH,
            ));
        }
        let lowered = match c.operator {
            Operator::All => Filter::All,
            Operator::And | Operator::Or | Operator::Nor | Operator::ElemMatch => {
                self.logical(c, budget, depth, in_element)?
            }
            Operator::Id
            | Operator::Ids
            | Operator::AggregateId
            | Operator::AggregateIds
            | Operator::TenantId
            | Operator::OwnerId
            | Operator::SpaceId
            | Operator::Deleted => self.shorthand(c, budget)?,
            _ => self.on_field(c, budget, in_element)?,
        };
        Ok(if self.target == Target::EventStream && !in_element {
            through_events(lowered)
        } else {
            lowered
        })
    }

    /// `AND`, `OR`, `NOR` over `c`'s children, or `ELEM_MATCH` of its one child.
    fn logical(
        &self,
        c: &Condition,
        budget: &mut Budget,
        depth: usize,
        in_element: bool,
    ) -> Result<Filter, QueryError> {
        let op = c.operator;
        if op == Operator::ElemMatch {
            let [child] = c.children.as_slice() else {
                return Err(QueryError::value(op, "exactly one child condition"));
            };
            let child = self.lower_counted(child, budget, depth + 1, true)?;
            return Ok(Filter::ElemMatch(field(c, in_element)?, Box::new(child)));
        }
        if c.children.is_empty() {
            return Err(QueryError::value(op, "at least one child condition"));
        }
        let below = if c.imposed { depth } else { depth + 1 };
        let children = c
            .children
            .iter()
            .map(|child| self.lower_counted(child, budget, below, in_element))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(match op {
            Operator::And => Filter::And(children),
            Operator::Or => Filter::Or(children),
            _ => Filter::Nor(children),
        })
    }

    /// Wow's shorthands for the document's own fields: ids, tenant, owner, space, deletion.
    fn shorthand(&self, c: &Condition, budget: &mut Budget) -> Result<Filter, QueryError> {
        let named = |name: &str| FieldPath(vec![name.to_owned()]);
        let id_field = match self.target {
            Target::Snapshot => "aggregateId",
            Target::EventStream => "id",
        };
        Ok(match c.operator {
            Operator::Id => Filter::Eq(named(id_field), text(c)?),
            Operator::Ids => Filter::In(named(id_field), texts(c, budget)?),
            Operator::AggregateId => Filter::Eq(named("aggregateId"), text(c)?),
            Operator::AggregateIds => Filter::In(named("aggregateId"), texts(c, budget)?),
            Operator::TenantId => Filter::Eq(named("tenantId"), text(c)?),
            Operator::OwnerId => Filter::Eq(named("ownerId"), text(c)?),
            Operator::SpaceId => Filter::Eq(named("spaceId"), text(c)?),
            _ => self.deleted(&c.value)?,
        })
    }

    /// An operator on `c`'s field: comparisons, lists, text, presence and dates.
    fn on_field(
        &self,
        c: &Condition,
        budget: &mut Budget,
        in_element: bool,
    ) -> Result<Filter, QueryError> {
        let op = c.operator;
        let field = || field(c, in_element);
        Ok(match op {
            Operator::Eq => Filter::Eq(field()?, Scalar::of(op, &c.value)?),
            Operator::Ne => Filter::Ne(field()?, Scalar::of(op, &c.value)?),
            Operator::Gt => Filter::Range(field()?, Range::Gt, Scalar::of(op, &c.value)?),
            Operator::Gte => Filter::Range(field()?, Range::Gte, Scalar::of(op, &c.value)?),
            Operator::Lt => Filter::Range(field()?, Range::Lt, Scalar::of(op, &c.value)?),
            Operator::Lte => Filter::Range(field()?, Range::Lte, Scalar::of(op, &c.value)?),
            Operator::In => Filter::In(field()?, scalars(op, &c.value, budget)?),
            Operator::NotIn => Filter::NotIn(field()?, scalars(op, &c.value, budget)?),
            Operator::AllIn => Filter::AllIn(field()?, scalars(op, &c.value, budget)?),
            Operator::Between => {
                let bounds = list(op, &c.value, budget)?;
                let [low, high] = bounds else {
                    return Err(QueryError::value(op, "an array of two bounds"));
                };
                let path = field()?;
                Filter::And(vec![
                    Filter::Range(path.clone(), Range::Gte, Scalar::of(op, low)?),
                    Filter::Range(path, Range::Lte, Scalar::of(op, high)?),
                ])
            }
            Operator::Contains | Operator::StartsWith | Operator::EndsWith => {
                let Scalar::Text(value) = text(c)? else {
                    return Err(QueryError::value(op, "a string"));
                };
                Filter::Text {
                    path: field()?,
                    kind: match op {
                        Operator::Contains => TextMatch::Contains,
                        Operator::StartsWith => TextMatch::StartsWith,
                        _ => TextMatch::EndsWith,
                    },
                    value,
                    ignore_case: flag(op, c, "ignoreCase")?,
                }
            }
            Operator::Null => Filter::Null(field()?),
            Operator::NotNull => Filter::NotNull(field()?),
            Operator::True => Filter::Bool(field()?, true),
            Operator::False => Filter::Bool(field()?, false),
            Operator::Exists => Filter::Exists(
                field()?,
                match &c.value {
                    Value::Null => true,
                    Value::String(text) if text.is_empty() => true,
                    Value::Bool(flag) => *flag,
                    _ => return Err(QueryError::value(op, "a boolean")),
                },
            ),
            Operator::Today
            | Operator::BeforeToday
            | Operator::Tomorrow
            | Operator::ThisWeek
            | Operator::NextWeek
            | Operator::LastWeek
            | Operator::ThisMonth
            | Operator::LastMonth
            | Operator::RecentDays
            | Operator::EarlierDays => self.date(c, field()?)?,
            _ => return Err(QueryError::Unsupported(op)),
        })
    }

    /// `DELETED`: `ACTIVE`/`false`, `DELETED`/`true`, or `ALL`.
    fn deleted(&self, value: &Value) -> Result<Filter, QueryError> {
        let op = Operator::Deleted;
        if self.target != Target::Snapshot {
            return Err(QueryError::value(
                op,
                "a snapshot query (event streams are never deleted)",
            ));
        }
        let deleted = FieldPath(vec!["deleted".to_owned()]);
        match value {
            Value::Bool(flag) => Ok(Filter::Bool(deleted, *flag)),
            Value::String(state) => match state.to_ascii_uppercase().as_str() {
                "ACTIVE" => Ok(Filter::Bool(deleted, false)),
                "DELETED" => Ok(Filter::Bool(deleted, true)),
                "ALL" => Ok(Filter::All),
                _ => Err(QueryError::value(op, "ACTIVE, DELETED, ALL or a boolean")),
            },
            _ => Err(QueryError::value(op, "ACTIVE, DELETED, ALL or a boolean")),
        }
    }

    /// A date operator as a range of epoch milliseconds in its zone.
    fn date(&self, c: &Condition, path: FieldPath) -> Result<Filter, QueryError> {
        let op = c.operator;
        if c.options.contains_key("datePattern") {
            return Err(QueryError::Option(
                op,
                "datePattern",
                "times are compared as epoch milliseconds; a date pattern is not supported",
            ));
        }
        let zone = match c.options.get("zoneId") {
            None => self.zone.clone(),
            Some(Value::String(name)) => TimeZone::get(name)
                .map_err(|_| QueryError::Option(op, "zoneId", "not a known time zone"))?,
            Some(_) => return Err(QueryError::Option(op, "zoneId", "must be a string")),
        };
        let now = Timestamp::from_millisecond(self.now_millis)
            .map_err(|_| QueryError::value(op, "a time now within range"))?
            .to_zoned(zone);
        let today = now.date();
        let days = |value: &Value| {
            value
                .as_i64()
                .filter(|days| (1..=36_500).contains(days))
                .ok_or_else(|| QueryError::value(op, "a number of days from 1"))
        };
        let monday = today
            .checked_sub(i64::from(today.weekday().to_monday_zero_offset()).days())
            .map_err(|_| out_of_range(op))?;
        let first_of_month = today.first_of_month();
        let (start, end) = match op {
            Operator::Today => (today, today),
            Operator::Tomorrow => {
                let tomorrow = today.tomorrow().map_err(|_| out_of_range(op))?;
                (tomorrow, tomorrow)
            }
            Operator::ThisWeek => (monday, add_days(op, monday, 6)?),
            Operator::NextWeek => (add_days(op, monday, 7)?, add_days(op, monday, 13)?),
            Operator::LastWeek => (add_days(op, monday, -7)?, add_days(op, monday, -1)?),
            Operator::ThisMonth => (first_of_month, today.last_of_month()),
            Operator::LastMonth => {
                let last = add_days(op, first_of_month, -1)?;
                (last.first_of_month(), last)
            }
            Operator::RecentDays => (add_days(op, today, 1 - days(&c.value)?)?, today),
            Operator::EarlierDays => {
                let from = add_days(op, today, 1 - days(&c.value)?)?;
                let bound = millis(op, &now, from, civil::Time::midnight())?;
                return Ok(Filter::Range(path, Range::Lt, Scalar::Number(bound.into())));
            }
            Operator::BeforeToday => {
                let time = time_of_day(&c.value).ok_or_else(|| {
                    QueryError::value(op, "a time of day (\"10:30\" or seconds of the day)")
                })?;
                let bound = millis(op, &now, today, time)?;
                return Ok(Filter::Range(path, Range::Lt, Scalar::Number(bound.into())));
            }
            _ => return Err(QueryError::Unsupported(op)),
        };
        let low = millis(op, &now, start, civil::Time::midnight())?;
        let high = millis(op, &now, end, civil::time(23, 59, 59, 999_000_000))?;
        Ok(Filter::And(vec![
            Filter::Range(path.clone(), Range::Gte, Scalar::Number(low.into())),
            Filter::Range(path, Range::Lte, Scalar::Number(high.into())),
        ]))
    }
}

/// `text`, unless it holds a NUL character, which no store's text can hold.
fn checked_text(op: Operator, text: &str) -> Result<String, QueryError> {
    if text.contains('\0') {
        return Err(QueryError::value(op, "text without NUL characters"));
    }
    Ok(text.to_owned())
}

fn out_of_range(op: Operator) -> QueryError {
    QueryError::value(op, "a date within range")
}

fn add_days(op: Operator, date: civil::Date, days: i64) -> Result<civil::Date, QueryError> {
    date.checked_add(days.days()).map_err(|_| out_of_range(op))
}

/// Epoch milliseconds of `date` at `time` in `now`'s zone.
fn millis(
    op: Operator,
    now: &Zoned,
    date: civil::Date,
    time: civil::Time,
) -> Result<i64, QueryError> {
    date.to_datetime(time)
        .to_zoned(now.time_zone().clone())
        .map(|zoned| zoned.timestamp().as_millisecond())
        .map_err(|_| out_of_range(op))
}

/// `"10:30"`, `"10:30:15"`, or seconds of the day.
fn time_of_day(value: &Value) -> Option<civil::Time> {
    match value {
        Value::Number(seconds) => {
            let seconds = seconds.as_i64().filter(|s| (0..86_400).contains(s))?;
            let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
            civil::Time::new(h as i8, m as i8, s as i8, 0).ok()
        }
        Value::String(text) => text.parse::<civil::Time>().ok(),
        _ => None,
    }
}

/// `c`'s field; empty only inside `ELEM_MATCH` (`in_element`), where it is the element.
fn field(c: &Condition, in_element: bool) -> Result<FieldPath, QueryError> {
    let path = FieldPath::parse(&c.field)?;
    if path.is_empty() && !in_element {
        return Err(QueryError::value(c.operator, "a `field`"));
    }
    Ok(path)
}

/// `c`'s value, a string.
fn text(c: &Condition) -> Result<Scalar, QueryError> {
    match &c.value {
        Value::String(text) => Ok(Scalar::Text(checked_text(c.operator, text)?)),
        _ => Err(QueryError::value(c.operator, "a string")),
    }
}

/// `c`'s value, a list of strings, counted against `budget`.
fn texts(c: &Condition, budget: &mut Budget) -> Result<Vec<Scalar>, QueryError> {
    let op = c.operator;
    list(op, &c.value, budget)?
        .iter()
        .map(|v| match v {
            Value::String(text) => Ok(Scalar::Text(checked_text(op, text)?)),
            _ => Err(QueryError::value(op, "an array of strings")),
        })
        .collect()
}

/// What a query may still hold as it is lowered.
struct Budget {
    /// Conditions left.
    conditions: usize,
    /// List values left, over every list.
    values: usize,
}

fn list<'v>(
    op: Operator,
    value: &'v Value,
    budget: &mut Budget,
) -> Result<&'v [Value], QueryError> {
    let values = value
        .as_array()
        .ok_or_else(|| QueryError::value(op, "an array"))?;
    if values.len() > MAX_VALUES {
        return Err(QueryError::TooLarge("values in one condition", MAX_VALUES));
    }
    budget.values = budget
        .values
        .checked_sub(values.len())
        .ok_or(QueryError::TooLarge(
            "values in all the conditions",
            MAX_VALUES_IN_ALL,
        ))?;
    Ok(values)
}

fn scalars(op: Operator, value: &Value, budget: &mut Budget) -> Result<Vec<Scalar>, QueryError> {
    list(op, value, budget)?
        .iter()
        .map(|v| Scalar::of(op, v))
        .collect()
}

fn flag(op: Operator, c: &Condition, key: &'static str) -> Result<bool, QueryError> {
    match c.options.get(key) {
        None => Ok(false),
        Some(Value::Bool(flag)) => Ok(*flag),
        Some(_) => Err(QueryError::Option(op, key, "must be a boolean")),
    }
}

/// A stream's `body` is its events: a condition on `body.name` (Wow's client's
/// `DomainEventStreamMetadataFields.BODY_NAME`) is about each event, as MongoDB reads a dotted
/// path through an array: it holds when it holds for one event (`ELEM_MATCH` on `body`), and
/// `NE` / `NOT_IN` hold when it holds for none. Other paths are left as they are.
fn through_events(filter: Filter) -> Filter {
    let mut filter = match filter {
        Filter::And(all) => return Filter::And(all.into_iter().map(through_events).collect()),
        Filter::Or(any) => return Filter::Or(any.into_iter().map(through_events).collect()),
        Filter::Nor(none) => return Filter::Nor(none.into_iter().map(through_events).collect()),
        // A negation holds when its positive test holds for no event.
        Filter::Ne(path, v) if is_through_body(&path) => {
            return Filter::Nor(vec![through_events(Filter::Eq(path, v))])
        }
        Filter::NotIn(path, vs) if is_through_body(&path) => {
            return Filter::Nor(vec![through_events(Filter::In(path, vs))])
        }
        leaf => leaf,
    };
    match filter.leaf_path() {
        Some(path) if is_through_body(path) => {
            let rest = FieldPath(path.0.split_off(1));
            let body = std::mem::replace(path, rest);
            Filter::ElemMatch(body, Box::new(filter))
        }
        _ => filter,
    }
}

/// Whether `path` goes through a stream's `body` to a field of its events.
fn is_through_body(path: &FieldPath) -> bool {
    path.0.len() > 1 && path.0[0] == "body"
}

impl Filter {
    /// The field a test (not `AND`, `OR`, `NOR` or `ALL`) is about.
    fn leaf_path(&mut self) -> Option<&mut FieldPath> {
        match self {
            Filter::All | Filter::And(_) | Filter::Or(_) | Filter::Nor(_) => None,
            Filter::Eq(path, _)
            | Filter::Ne(path, _)
            | Filter::Range(path, _, _)
            | Filter::In(path, _)
            | Filter::NotIn(path, _)
            | Filter::AllIn(path, _)
            | Filter::Text { path, .. }
            | Filter::ElemMatch(path, _)
            | Filter::Null(path)
            | Filter::NotNull(path)
            | Filter::Bool(path, _)
            | Filter::Exists(path, _) => Some(path),
        }
    }
}
