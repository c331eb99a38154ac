//! Queries over documents (materialized snapshots, event streams, view rows) in Wow's query
//! DSL: the DSL as it travels ([`Condition`], [`ListQuery`], ...), checked and lowered into a
//! [`DocumentQuery`] that every store runs the same way, and the reference semantics the
//! in-memory store runs ([`matches`](fn@matches), [`order`], [`project`]).

mod dsl;
mod evaluate;
mod filter;
mod share;

pub use dsl::{
    Condition, Direction, ListQuery, Operator, PagedList, PagedQuery, Pagination, Projection,
    QueryBody, SingleQuery, Sort,
};
pub use evaluate::{matches, order, project};
pub use filter::{
    FieldPath, Filter, Lowering, Range, Scalar, Target, TextMatch, MAX_CONDITIONS, MAX_DEPTH,
    MAX_PATH_LEN, MAX_VALUES, MAX_VALUES_IN_ALL,
};
pub use share::{QueryRefusal, SharePlace, TenantShare, DEFAULT_QUERY_TIMEOUT};

use crate::error_code::ErrorCode;

/// The most documents one list query may ask for.
pub const MAX_LIST_LIMIT: u64 = 1000;
/// The most documents one page may hold.
pub const MAX_PAGE_SIZE: u64 = 100;
/// The furthest a page may reach (`index × size`).
pub const MAX_PAGE_WINDOW: u64 = 10_000;

/// Why a query cannot run: always the caller's to fix (HTTP 400 `IllegalArgument`), and it
/// names the operator, field or option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The operator's value, field or children are not what it takes.
    #[error("{operator} takes {expected}")]
    Value {
        /// The operator's name.
        operator: String,
        /// What it takes.
        expected: &'static str,
    },
    /// A field path is not one (segments of letters, digits, `_` or `-`, joined by `.`).
    #[error("`{0}` is not a field path (segments of ASCII letters, digits, _ or -, joined by .)")]
    Field(String),
    /// An option of a condition is wrong.
    #[error("option `{1}` of {op}: {2}", op = .0.name())]
    Option(Operator, &'static str, &'static str),
    /// This store cannot run the operator.
    #[error("{} is not supported by this store", .0.name())]
    Unsupported(Operator),
    /// The query is larger than allowed.
    #[error("too many {0}: at most {1}")]
    TooLarge(&'static str, usize),
    /// The limit or page is out of range.
    #[error("{0}")]
    Paging(String),
}

impl QueryError {
    fn value(operator: Operator, expected: &'static str) -> Self {
        QueryError::Value {
            operator: operator.name(),
            expected,
        }
    }

    /// The error code it reports as.
    pub fn error_code(&self) -> ErrorCode {
        ErrorCode::IllegalArgument
    }
}

/// A sort key, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    /// The field.
    pub path: FieldPath,
    /// The order.
    pub direction: Direction,
}

/// A query checked and lowered, as a store runs it: the documents that match `filter`, in
/// `sort` order (then by key), `limit` of them from `offset`.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentQuery {
    /// Which documents.
    pub filter: Filter,
    /// In which order, before the documents' own key.
    pub sort: Vec<SortKey>,
    /// How many to skip.
    pub offset: u64,
    /// How many at most.
    pub limit: u64,
}

impl DocumentQuery {
    /// Every document that matches `filter`, in key order, up to `limit`.
    pub fn new(filter: Filter, limit: u64) -> Self {
        Self {
            filter,
            sort: Vec::new(),
            offset: 0,
            limit,
        }
    }

    /// A single query: the first match.
    pub fn single(query: &SingleQuery, lowering: &Lowering) -> Result<Self, QueryError> {
        Ok(Self {
            filter: lowering.lower(&query.condition)?,
            sort: sort_keys(&query.sort)?,
            offset: 0,
            limit: 1,
        })
    }

    /// A list query: `limit` (1 to [`MAX_LIST_LIMIT`]) from the first.
    pub fn list(query: &ListQuery, lowering: &Lowering) -> Result<Self, QueryError> {
        if !(1..=MAX_LIST_LIMIT).contains(&query.limit) {
            return Err(QueryError::Paging(format!(
                "limit must be 1 to {MAX_LIST_LIMIT}, not {}",
                query.limit
            )));
        }
        Ok(Self {
            filter: lowering.lower(&query.condition)?,
            sort: sort_keys(&query.sort)?,
            offset: 0,
            limit: query.limit,
        })
    }

    /// A paged query: page `index` (from 1) of `size` (1 to [`MAX_PAGE_SIZE`]), reaching at most
    /// [`MAX_PAGE_WINDOW`] documents.
    pub fn paged(query: &PagedQuery, lowering: &Lowering) -> Result<Self, QueryError> {
        let Pagination { index, size } = query.pagination;
        if index < 1
            || !(1..=MAX_PAGE_SIZE).contains(&size)
            || index.saturating_mul(size) > MAX_PAGE_WINDOW
        {
            return Err(QueryError::Paging(format!(
                "pagination must have index from 1, size 1 to {MAX_PAGE_SIZE} and index × size at most {MAX_PAGE_WINDOW}, not index {index} and size {size}"
            )));
        }
        Ok(Self {
            filter: lowering.lower(&query.condition)?,
            sort: sort_keys(&query.sort)?,
            offset: (index - 1) * size,
            limit: size,
        })
    }
}

fn sort_keys(sort: &[Sort]) -> Result<Vec<SortKey>, QueryError> {
    if sort.len() > 8 {
        return Err(QueryError::TooLarge("sort keys", 8));
    }
    sort.iter()
        .map(|key| {
            let path = FieldPath::parse(&key.field)?;
            if path.is_empty() {
                return Err(QueryError::Field(key.field.clone()));
            }
            Ok(SortKey {
                path,
                direction: key.direction,
            })
        })
        .collect()
}
