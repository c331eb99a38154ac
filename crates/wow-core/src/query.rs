//! Wow's query DSL over documents (materialized snapshots, event streams, view rows): the
//! conditions and query bodies Wow's clients send, checked and lowered into what every
//! store runs the same way.
pub use wow_model::query::{
    matches, order, project, Condition, Direction, DocumentQuery, FieldPath, Filter, ListQuery,
    Lowering, Operator, PagedList, PagedQuery, Pagination, Projection, QueryBody, QueryError,
    QueryRefusal, Range, Scalar, SharePlace, SingleQuery, Sort, SortKey, Target, TenantShare,
    TextMatch, DEFAULT_QUERY_TIMEOUT, MAX_CONDITIONS, MAX_DEPTH, MAX_LIST_LIMIT, MAX_PAGE_SIZE,
    MAX_PAGE_WINDOW, MAX_PATH_LEN, MAX_VALUES, MAX_VALUES_IN_ALL,
};
