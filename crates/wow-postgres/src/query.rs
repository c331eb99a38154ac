//! Wow's query DSL in PostgreSQL: a [`Filter`] as a `WHERE` clause of `jsonb` tests over the
//! row's JSONB, and a sort as `ORDER BY`. Paths are bound as `text[]` and values as text
//! cast in SQL; field segments were checked by the lowering. Each test is a definite true or
//! false (never NULL), so `NOT` and `NOR` negate exactly, as the reference does. Text orders
//! by bytes (`COLLATE "C"`) and `ignoreCase` folds ASCII letters only, as the reference does.

use tokio_postgres::types::ToSql;
use wow_core::query::{
    Direction, DocumentQuery, FieldPath, Filter, Range, Scalar, SortKey, TextMatch,
};

/// A bound parameter.
pub(crate) type Param = Box<dyn ToSql + Sync + Send>;

/// `params` as the driver takes them.
pub(crate) fn param_refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|param| param.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// `value` as a bound `BIGINT` (a version, a position, a limit): the largest one where it
/// does not fit.
pub(crate) fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The longest list tested value by value (each test can use the GIN index); a longer one is
/// tested as one bound array.
const SHORT_LIST: usize = 16;

/// The ASCII capitals and, below, their lower case: `translate`'s arguments for `ignoreCase`.
const UPPER: &str = "'ABCDEFGHIJKLMNOPQRSTUVWXYZ'";
/// See [`UPPER`].
const LOWER: &str = "'abcdefghijklmnopqrstuvwxyz'";

/// Builds SQL over the JSONB column `document`, collecting the bound parameters.
pub(crate) struct Translation<'a> {
    document: &'a str,
    pub(crate) params: Vec<Param>,
    elements: usize,
    containment: bool,
}

impl<'a> Translation<'a> {
    /// A translation over `document`, with `params` bound before it (numbered on from them).
    pub(crate) fn new(document: &'a str, params: Vec<Param>) -> Self {
        Self {
            document,
            params,
            elements: 0,
            containment: false,
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
        let limit = self.bind(Box::new(clamp(query.limit)));
        let offset = self.bind(Box::new(clamp(query.offset)));
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

    /// Each equality test on the document's own fields also says `document @> {...}`, which
    /// a GIN index over the column (`jsonb_path_ops`) answers: the planner narrows the rows
    /// by the index, the exact test decides. Containment holds whenever the exact test does
    /// (a string equals a string, a number a number numerically, a boolean a boolean), so the
    /// answer is the same with or without the index.
    pub(crate) fn with_containment(mut self) -> Self {
        self.containment = true;
        self
    }

    /// `document @> {path: scalar}` when containment is on and the test is on the document
    /// itself (not an array element being matched); else nothing.
    fn contained(&mut self, document: &str, path: &FieldPath, scalar: &Scalar) -> Option<String> {
        // `#>` reads a segment of digits as an array index where the document has an array
        // there; containment would not: such a path is tested exactly only.
        let index_like = path
            .segments()
            .iter()
            .any(|segment| segment.bytes().all(|b| b.is_ascii_digit()));
        if !self.containment || document != self.document || path.is_empty() || index_like {
            return None;
        }
        let mut value = scalar.to_json();
        for segment in path.segments().iter().rev() {
            value = serde_json::json!({ segment.clone(): value });
        }
        let bound = self.bind(Box::new(value.to_string()));
        Some(format!("{document} @> {bound}::text::jsonb"))
    }

    /// The exact equality test of `x` (at `path` of `document`), with its containment.
    fn equals_at(&mut self, document: &str, path: &FieldPath, x: &str, scalar: &Scalar) -> String {
        let exact = self.equals(x, scalar);
        match self.contained(document, path, scalar) {
            Some(contained) => format!("({contained} AND {exact})"),
            None => exact,
        }
    }

    /// Binds `value`; its placeholder.
    pub(crate) fn bind(&mut self, value: Param) -> String {
        self.params.push(value);
        format!("${}", self.params.len())
    }

    /// The JSONB at `path` under `document` (a column, or an array element being matched).
    fn value(&mut self, document: &str, path: &FieldPath) -> String {
        if path.is_empty() {
            return document.to_owned();
        }
        let segments: Vec<String> = path.segments().to_vec();
        let p = self.bind(Box::new(segments));
        format!("({document} #> {p}::text[])")
    }

    /// `filter` as a condition that is true or false.
    pub(crate) fn condition(&mut self, filter: &Filter) -> String {
        let document = self.document;
        self.at(document, filter)
    }

    /// `filter` as a condition over `document` (the column, or an array element being
    /// matched).
    fn at(&mut self, document: &str, filter: &Filter) -> String {
        let each = |this: &mut Self, filters: &[Filter], joiner: &str| {
            let parts: Vec<String> = filters.iter().map(|f| this.at(document, f)).collect();
            format!("({})", parts.join(joiner))
        };
        match filter {
            Filter::All => "true".to_owned(),
            Filter::And(all) => each(self, all, " AND "),
            Filter::Or(any) => each(self, any, " OR "),
            Filter::Nor(none) => format!("NOT {}", each(self, none, " OR ")),
            Filter::Eq(path, scalar) => {
                let x = self.value(document, path);
                self.equals_at(document, path, &x, scalar)
            }
            Filter::Ne(path, scalar) => {
                let x = self.value(document, path);
                format!("NOT {}", self.equals(&x, scalar))
            }
            // A boolean has no order: nothing is above or below one (and nothing is bound).
            Filter::Range(_, _, Scalar::Bool(_)) => "false".to_owned(),
            Filter::Range(path, range, scalar) => self.range(document, path, range, scalar),
            Filter::In(path, scalars) => self.one_of(document, path, scalars, false),
            Filter::NotIn(path, scalars) => self.one_of(document, path, scalars, true),
            Filter::AllIn(path, scalars) => self.all_in(document, path, scalars),
            Filter::Text {
                path,
                kind,
                value,
                ignore_case,
            } => self.text(document, path, kind, value, *ignore_case),
            Filter::ElemMatch(path, child) => {
                let x = self.value(document, path);
                let alias = self.alias();
                let inner = self.at(&format!("{alias}.v"), child);
                format!("(COALESCE(jsonb_typeof({x}) = 'array', false) AND EXISTS (SELECT 1 FROM jsonb_array_elements({}) AS {alias}(v) WHERE {inner}))", array_or_empty(&x))
            }
            Filter::Null(path) => {
                let x = self.value(document, path);
                format!("COALESCE(jsonb_typeof({x}) = 'null', true)")
            }
            Filter::NotNull(path) => {
                let x = self.value(document, path);
                format!("COALESCE(jsonb_typeof({x}) <> 'null', false)")
            }
            Filter::Bool(path, flag) => {
                let x = self.value(document, path);
                format!("COALESCE({x} = '{flag}'::jsonb, false)")
            }
            Filter::Exists(path, there) => {
                let x = self.value(document, path);
                let is = if *there { "IS NOT" } else { "IS" };
                format!("({x} {is} NULL)")
            }
        }
    }

    /// Whether the value at `path` is `range` of `scalar`: numbers numerically, text by
    /// bytes; false for a value of another type.
    fn range(
        &mut self,
        document: &str,
        path: &FieldPath,
        range: &Range,
        scalar: &Scalar,
    ) -> String {
        let x = self.value(document, path);
        let op = match range {
            Range::Gt => ">",
            Range::Gte => ">=",
            Range::Lt => "<",
            Range::Lte => "<=",
        };
        match scalar {
            Scalar::Number(n) => {
                let v = self.bind(Box::new(n.to_string()));
                format!("COALESCE(jsonb_typeof({x}) = 'number' AND ({x} #>> '{{}}')::numeric {op} {v}::text::numeric, false)")
            }
            Scalar::Text(t) => {
                let v = self.bind(Box::new(t.clone()));
                format!("COALESCE(jsonb_typeof({x}) = 'string' AND ({x} #>> '{{}}') COLLATE \"C\" {op} {v}::text COLLATE \"C\", false)")
            }
            Scalar::Bool(_) => "false".to_owned(),
        }
    }

    /// Whether the value at `path` equals one of `scalars` (`negated`: none of them).
    fn one_of(
        &mut self,
        document: &str,
        path: &FieldPath,
        scalars: &[Scalar],
        negated: bool,
    ) -> String {
        // No values: nothing is in them (and the path is not bound, so every bound
        // parameter is used).
        let any = if scalars.is_empty() {
            "false".to_owned()
        } else if scalars.len() > SHORT_LIST {
            let x = self.value(document, path);
            self.member(&x, scalars)
        } else {
            let x = self.value(document, path);
            let any: Vec<String> = scalars
                .iter()
                .map(|s| {
                    if negated {
                        // NOT IN negates: a containment there would only cost.
                        self.equals(&x, s)
                    } else {
                        self.equals_at(document, path, &x, s)
                    }
                })
                .collect();
            format!("({})", any.join(" OR "))
        };
        if negated {
            format!("NOT {any}")
        } else {
            any
        }
    }

    /// Whether the value at `path` is an array with an element equal to each of `scalars`.
    fn all_in(&mut self, document: &str, path: &FieldPath, scalars: &[Scalar]) -> String {
        // JSONB containment of an array of scalars is exactly "every value has an
        // equal element" (strings by bytes, numbers numerically, booleans): one bound
        // value, however long the list.
        let x = self.value(document, path);
        let wanted = serde_json::Value::Array(scalars.iter().map(Scalar::to_json).collect());
        let wanted = self.bind(Box::new(wanted));
        format!("COALESCE(jsonb_typeof({x}) = 'array' AND {x} @> {wanted}::jsonb, false)")
    }

    /// Whether the value at `path` is a string that matches `value` as `kind` says
    /// (`ignore_case`: ASCII letters folded).
    fn text(
        &mut self,
        document: &str,
        path: &FieldPath,
        kind: &TextMatch,
        value: &str,
        ignore_case: bool,
    ) -> String {
        let x = self.value(document, path);
        let v = self.bind(Box::new(value.to_owned()));
        let (field, v) = if ignore_case {
            (
                format!("translate({x} #>> '{{}}', {UPPER}, {LOWER})"),
                format!("translate({v}::text, {UPPER}, {LOWER})"),
            )
        } else {
            (format!("({x} #>> '{{}}')"), format!("{v}::text"))
        };
        let test = match kind {
            TextMatch::Contains => format!("strpos({field}, {v}) > 0"),
            TextMatch::StartsWith => format!("starts_with({field}, {v})"),
            TextMatch::EndsWith => format!("right({field}, length({v})) = {v}"),
        };
        format!("COALESCE(jsonb_typeof({x}) = 'string' AND {test}, false)")
    }

    /// A fresh alias for an array element being matched (`e1`, `e2`, ...).
    fn alias(&mut self) -> String {
        self.elements += 1;
        format!("e{}", self.elements)
    }

    /// Whether `x` equals one of `scalars`, with the texts and the numbers each bound as one
    /// array: the statement's size and its parameters do not grow with the values.
    fn member(&mut self, x: &str, scalars: &[Scalar]) -> String {
        let texts: Vec<String> = scalars
            .iter()
            .filter_map(|s| match s {
                Scalar::Text(text) => Some(text.clone()),
                _ => None,
            })
            .collect();
        let numbers: Vec<String> = scalars
            .iter()
            .filter_map(|s| match s {
                Scalar::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect();
        let mut any = Vec::new();
        if !texts.is_empty() {
            let v = self.bind(Box::new(texts));
            any.push(format!(
                "CASE WHEN jsonb_typeof({x}) = 'string' THEN ({x} #>> '{{}}') = ANY({v}::text[]) ELSE false END"
            ));
        }
        if !numbers.is_empty() {
            let v = self.bind(Box::new(numbers));
            any.push(format!(
                "CASE WHEN jsonb_typeof({x}) = 'number' THEN ({x} #>> '{{}}')::numeric = ANY({v}::text[]::numeric[]) ELSE false END"
            ));
        }
        for flag in [true, false] {
            if scalars.contains(&Scalar::Bool(flag)) {
                any.push(format!("{x} = '{flag}'::jsonb"));
            }
        }
        format!("COALESCE({}, false)", any.join(" OR "))
    }

    /// Whether the JSONB `x` equals `scalar`: true or false.
    fn equals(&mut self, x: &str, scalar: &Scalar) -> String {
        match scalar {
            Scalar::Text(text) => {
                let v = self.bind(Box::new(text.clone()));
                format!("COALESCE(jsonb_typeof({x}) = 'string' AND ({x} #>> '{{}}') = {v}::text, false)")
            }
            Scalar::Number(n) => {
                let v = self.bind(Box::new(n.to_string()));
                format!("COALESCE(jsonb_typeof({x}) = 'number' AND ({x} #>> '{{}}')::numeric = {v}::text::numeric, false)")
            }
            Scalar::Bool(flag) => format!("COALESCE({x} = '{flag}'::jsonb, false)"),
        }
    }

    /// `sort` as `ORDER BY` terms (without the tie-break): by type, then value, as the
    /// reference orders (missing and null, booleans, numbers, text by bytes, the rest).
    pub(crate) fn order(&mut self, sort: &[SortKey]) -> Vec<String> {
        let document = self.document;
        sort.iter()
            .flat_map(|key| {
                let x = self.value(document, &key.path);
                let direction = match key.direction {
                    Direction::Asc => "ASC",
                    Direction::Desc => "DESC",
                };
                [
                    format!("CASE jsonb_typeof({x}) WHEN 'boolean' THEN 1 WHEN 'number' THEN 2 WHEN 'string' THEN 3 WHEN 'object' THEN 4 WHEN 'array' THEN 4 ELSE 0 END {direction}"),
                    format!("CASE WHEN jsonb_typeof({x}) = 'number' THEN ({x} #>> '{{}}')::numeric WHEN jsonb_typeof({x}) = 'boolean' THEN CASE WHEN {x} = 'true'::jsonb THEN 1 ELSE 0 END END {direction}"),
                    format!("CASE WHEN jsonb_typeof({x}) = 'string' THEN ({x} #>> '{{}}') END COLLATE \"C\" {direction}"),
                ]
            })
            .collect()
    }
}

/// `x` when it is an array, else an empty one (`jsonb_array_elements` refuses the rest).
fn array_or_empty(x: &str) -> String {
    format!("CASE WHEN jsonb_typeof({x}) = 'array' THEN {x} ELSE '[]'::jsonb END")
}
