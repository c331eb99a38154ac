//! Wow's query DSL in SQLite: a [`Filter`] as a `WHERE` clause of `json_type` /
//! `json_extract` tests over the row's JSON, and a sort as `ORDER BY`. Every value and every
//! path is bound; field segments were checked by the lowering. Each test is a definite 0 or
//! 1 (never NULL), so `NOT` and `NOR` negate exactly, as the reference does.

use rusqlite::types::Value as SqlValue;
use wow_core::query::{DocumentQuery, FieldPath, Filter, Range, Scalar, SortKey, TextMatch};

/// Builds SQL over the JSON column `document`, collecting the bound values.
pub(crate) struct Translation<'a> {
    document: &'a str,
    pub(crate) values: Vec<SqlValue>,
    elements: usize,
}

/// Where paths start: the document's root, or an element of an array being matched.
#[derive(Clone)]
enum Base {
    Root,
    Element(String),
}

impl<'a> Translation<'a> {
    /// A translation over `document`, with `values` bound before it (numbered on from them).
    pub(crate) fn new(document: &'a str, values: Vec<SqlValue>) -> Self {
        Self {
            document,
            values,
            elements: 0,
        }
    }

    /// Binds a count (a limit, an offset), clamped to SQLite's integers.
    pub(crate) fn bind_integer(&mut self, value: u64) -> String {
        self.bind(SqlValue::Integer(i64::try_from(value).unwrap_or(i64::MAX)))
    }

    fn bind(&mut self, value: SqlValue) -> String {
        self.values.push(value);
        format!("?{}", self.values.len())
    }

    /// The SQL expression of the JSON path of `path` under `base`.
    fn path(&mut self, base: &Base, path: &FieldPath) -> String {
        let suffix: String = path
            .segments()
            .iter()
            .map(|segment| format!(".\"{segment}\""))
            .collect();
        match base {
            Base::Root => self.bind(SqlValue::Text(format!("${suffix}"))),
            Base::Element(alias) if suffix.is_empty() => format!("{alias}.fullkey"),
            Base::Element(alias) => {
                let suffix = self.bind(SqlValue::Text(suffix));
                format!("({alias}.fullkey || {suffix})")
            }
        }
    }

    /// The page `query` asks for of the documents `select` reads (a `SELECT .. FROM ..`, no
    /// `WHERE`) within `scope` (`AND`-terminated conditions, or nothing), ordered by its sort
    /// and then `tie_break` so that pages are stable.
    pub(crate) fn page_sql(
        &mut self,
        select: &str,
        scope: &str,
        query: &DocumentQuery,
        tie_break: &str,
    ) -> String {
        let condition = self.condition(&query.filter);
        let mut order = self.order(&query.sort);
        order.push(tie_break.to_owned());
        let limit = self.bind_integer(query.limit);
        let offset = self.bind_integer(query.offset);
        format!(
            "{select} WHERE {scope}{condition} ORDER BY {} LIMIT {limit} OFFSET {offset}",
            order.join(", ")
        )
    }

    /// How many documents of `source` (a table or a subquery) within `scope` (as
    /// [`page_sql`](Self::page_sql)'s) `filter` selects.
    pub(crate) fn count_sql(&mut self, source: &str, scope: &str, filter: &Filter) -> String {
        let condition = self.condition(filter);
        format!("SELECT COUNT(*) FROM {source} WHERE {scope}{condition}")
    }

    /// `filter` as a condition that is 0 or 1.
    pub(crate) fn condition(&mut self, filter: &Filter) -> String {
        self.at(&Base::Root, filter)
    }

    fn at(&mut self, base: &Base, filter: &Filter) -> String {
        let doc = self.document;
        let each = |this: &mut Self, filters: &[Filter], joiner: &str| {
            let parts: Vec<String> = filters.iter().map(|f| this.at(base, f)).collect();
            format!("({})", parts.join(joiner))
        };
        match filter {
            Filter::All => "1".to_owned(),
            Filter::And(all) => each(self, all, " AND "),
            Filter::Or(any) => each(self, any, " OR "),
            Filter::Nor(none) => format!("NOT {}", each(self, none, " OR ")),
            Filter::Eq(path, scalar) => {
                let p = self.path(base, path);
                self.equals(
                    &format!("json_type({doc}, {p})"),
                    &format!("json_extract({doc}, {p})"),
                    scalar,
                )
            }
            Filter::Ne(path, scalar) => {
                let p = self.path(base, path);
                let eq = self.equals(
                    &format!("json_type({doc}, {p})"),
                    &format!("json_extract({doc}, {p})"),
                    scalar,
                );
                format!("NOT {eq}")
            }
            Filter::Range(path, range, scalar) => self.range(base, path, *range, scalar),
            Filter::In(path, scalars) => self.one_of(base, path, scalars),
            Filter::NotIn(path, scalars) => format!("NOT {}", self.one_of(base, path, scalars)),
            Filter::AllIn(path, scalars) => self.all_in(base, path, scalars),
            Filter::Text {
                path,
                kind,
                value,
                ignore_case,
            } => self.text(base, path, *kind, value, *ignore_case),
            Filter::ElemMatch(path, child) => {
                let p = self.path(base, path);
                let alias = self.alias();
                let inner = self.at(&Base::Element(alias.clone()), child);
                format!("(IFNULL(json_type({doc}, {p}) = 'array', 0) AND EXISTS (SELECT 1 FROM json_each({doc}, {p}) AS {alias} WHERE {inner}))")
            }
            Filter::Null(path) => {
                let p = self.path(base, path);
                format!("IFNULL(json_type({doc}, {p}) = 'null', 1)")
            }
            Filter::NotNull(path) => {
                let p = self.path(base, path);
                format!("IFNULL(json_type({doc}, {p}) <> 'null', 0)")
            }
            Filter::Bool(path, flag) => {
                let p = self.path(base, path);
                let word = if *flag { "true" } else { "false" };
                format!("IFNULL(json_type({doc}, {p}) = '{word}', 0)")
            }
            Filter::Exists(path, there) => {
                let p = self.path(base, path);
                let is = if *there { "IS NOT" } else { "IS" };
                format!("(json_type({doc}, {p}) {is} NULL)")
            }
        }
    }

    /// `path` compared to `scalar` by `range`; only a number to a number, text to text.
    fn range(&mut self, base: &Base, path: &FieldPath, range: Range, scalar: &Scalar) -> String {
        let doc = self.document;
        let op = match range {
            Range::Gt => ">",
            Range::Gte => ">=",
            Range::Lt => "<",
            Range::Lte => "<=",
        };
        let (types, value) = match scalar {
            Scalar::Number(n) => ("('integer', 'real')", number(n)),
            Scalar::Text(t) => ("('text')", SqlValue::Text(t.clone())),
            // A boolean has no order (and nothing is bound).
            Scalar::Bool(_) => return "0".to_owned(),
        };
        let p = self.path(base, path);
        let v = self.bind(value);
        format!("IFNULL(json_type({doc}, {p}) IN {types} AND json_extract({doc}, {p}) {op} {v}, 0)")
    }

    /// `path` equals one of `scalars`.
    fn one_of(&mut self, base: &Base, path: &FieldPath, scalars: &[Scalar]) -> String {
        // No values: nothing is in them (and the path is not bound, so every bound value is
        // used).
        if scalars.is_empty() {
            return "0".to_owned();
        }
        let doc = self.document;
        let p = self.path(base, path);
        let (t, v) = (
            format!("json_type({doc}, {p})"),
            format!("json_extract({doc}, {p})"),
        );
        self.member(&t, &v, scalars)
    }

    /// `path` is an array with an element equal to each of `scalars`: one bound list,
    /// however long, so the statement's size does not grow with the values.
    fn all_in(&mut self, base: &Base, path: &FieldPath, scalars: &[Scalar]) -> String {
        let doc = self.document;
        let p = self.path(base, path);
        let wanted = self.bind(SqlValue::Text(json_list(scalars)));
        let (w, e) = (self.alias(), self.alias());
        format!(
            "(IFNULL(json_type({doc}, {p}) = 'array', 0) AND NOT EXISTS (SELECT 1 FROM json_each({wanted}) AS {w} WHERE NOT EXISTS (SELECT 1 FROM json_each({doc}, {p}) AS {e} WHERE CASE {w}.type WHEN 'text' THEN {e}.type = 'text' AND {e}.value = {w}.value WHEN 'true' THEN {e}.type = 'true' WHEN 'false' THEN {e}.type = 'false' ELSE {e}.type IN ('integer', 'real') AND {e}.value = {w}.value END)))"
        )
    }

    /// `path` is text that contains, starts or ends with `value`.
    fn text(
        &mut self,
        base: &Base,
        path: &FieldPath,
        kind: TextMatch,
        value: &str,
        ignore_case: bool,
    ) -> String {
        let doc = self.document;
        let p = self.path(base, path);
        let v = self.bind(SqlValue::Text(value.to_owned()));
        let (field, v) = if ignore_case {
            (
                format!("lower(json_extract({doc}, {p}))"),
                format!("lower({v})"),
            )
        } else {
            (format!("json_extract({doc}, {p})"), v)
        };
        let test = match kind {
            TextMatch::Contains => format!("instr({field}, {v}) > 0"),
            TextMatch::StartsWith => format!("substr({field}, 1, length({v})) = {v}"),
            TextMatch::EndsWith => {
                format!("(length({v}) = 0 OR substr({field}, -length({v})) = {v})")
            }
        };
        format!("IFNULL(json_type({doc}, {p}) = 'text' AND {test}, 0)")
    }

    fn alias(&mut self) -> String {
        self.elements += 1;
        format!("e{}", self.elements)
    }

    /// Whether the value of type `t` and value `v` (SQL expressions) equals one of `scalars`:
    /// 0 or 1. The texts and the numbers are each one bound JSON list, so the statement's
    /// size does not grow with the values (SQLite bounds both its expression depth and its
    /// parameters).
    fn member(&mut self, t: &str, v: &str, scalars: &[Scalar]) -> String {
        let texts: Vec<&Scalar> = scalars
            .iter()
            .filter(|s| matches!(s, Scalar::Text(_)))
            .collect();
        let numbers: Vec<&Scalar> = scalars
            .iter()
            .filter(|s| matches!(s, Scalar::Number(_)))
            .collect();
        let mut any = Vec::new();
        if !texts.is_empty() {
            let list = self.bind(SqlValue::Text(json_list(texts)));
            any.push(format!(
                "({t} = 'text' AND {v} IN (SELECT value FROM json_each({list})))"
            ));
        }
        if !numbers.is_empty() {
            let list = self.bind(SqlValue::Text(json_list(numbers)));
            any.push(format!(
                "({t} IN ('integer', 'real') AND {v} IN (SELECT value FROM json_each({list})))"
            ));
        }
        for word in ["true", "false"] {
            if scalars
                .iter()
                .any(|s| matches!(s, Scalar::Bool(flag) if *flag == (word == "true")))
            {
                any.push(format!("{t} = '{word}'"));
            }
        }
        format!("IFNULL({}, 0)", any.join(" OR "))
    }

    /// Whether the value of type `t` and value `v` (SQL expressions) equals `scalar`: 0 or 1.
    fn equals(&mut self, t: &str, v: &str, scalar: &Scalar) -> String {
        match scalar {
            Scalar::Text(text) => {
                let b = self.bind(SqlValue::Text(text.clone()));
                format!("IFNULL({t} = 'text' AND {v} = {b}, 0)")
            }
            Scalar::Number(n) => {
                let b = self.bind(number(n));
                format!("IFNULL({t} IN ('integer', 'real') AND {v} = {b}, 0)")
            }
            Scalar::Bool(flag) => {
                let word = if *flag { "true" } else { "false" };
                format!("IFNULL({t} = '{word}', 0)")
            }
        }
    }

    /// `sort` as `ORDER BY` terms (without the tie-break): by type, then value, as the
    /// reference orders (missing and null, booleans, numbers, text, the rest).
    pub(crate) fn order(&mut self, sort: &[SortKey]) -> Vec<String> {
        let doc = self.document;
        sort.iter()
            .flat_map(|key| {
                let p = self.path(&Base::Root, &key.path);
                let direction = match key.direction {
                    wow_core::query::Direction::Asc => "ASC",
                    wow_core::query::Direction::Desc => "DESC",
                };
                let t = format!("json_type({doc}, {p})");
                [
                    format!("CASE {t} WHEN 'true' THEN 1 WHEN 'false' THEN 1 WHEN 'integer' THEN 2 WHEN 'real' THEN 2 WHEN 'text' THEN 3 WHEN 'object' THEN 4 WHEN 'array' THEN 4 ELSE 0 END {direction}"),
                    format!("CASE WHEN {t} IN ('true', 'false', 'integer', 'real', 'text') THEN json_extract({doc}, {p}) END {direction}"),
                ]
            })
            .collect()
    }
}

/// `scalars` as a JSON array, the list a statement binds as one value.
fn json_list<'s>(scalars: impl IntoIterator<Item = &'s Scalar>) -> String {
    let values: Vec<serde_json::Value> = scalars.into_iter().map(Scalar::to_json).collect();
    serde_json::Value::Array(values).to_string()
}

fn number(n: &serde_json::Number) -> SqlValue {
    match n.as_i64() {
        Some(integer) => SqlValue::Integer(integer),
        None => SqlValue::Real(n.as_f64().unwrap_or(f64::NAN)),
    }
}
