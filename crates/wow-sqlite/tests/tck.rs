//! The SQLite store passes the whole conformance suite, each case on a file of its own.

#![allow(clippy::expect_used)]

use std::sync::Arc;

use wow_sqlite::{SqliteOptions, SqliteStore};

async fn fresh() -> Arc<SqliteStore> {
    // A file of its own per case, under cargo's scratch folder for tests (target/tmp).
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("wow-sqlite-tck")
        .join(format!("{}.db", uuid::Uuid::now_v7()));
    let store = SqliteStore::open(SqliteOptions::new(path))
        .await
        .expect("store opens");
    Arc::new(store)
}

mod event_store {
    use super::*;
    wow_tck::event_store_tck!(fresh);
}

mod snapshot_store {
    use super::*;
    wow_tck::snapshot_store_tck!(fresh);
}
