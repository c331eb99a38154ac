//! `StoreHealth`: what the store says of itself to `/health`, checked on a connection of the
//! command path within a short time.
//!
//! The check counts as a call for the store's "lost" and "back" log lines (see
//! [`crate::call`]): a probe polled by an orchestrator notices a lost store, and a standby
//! the pool is connected to, even when no command comes; a read-only answer puts the
//! connections in doubt, so the next ones walk to the primary.

use std::time::Duration;

use async_trait::async_trait;
use wow_core::eventsourcing::{ConnectionUse, StoreCheck, StoreHealth};

use crate::error::PgFault;
use crate::PostgresStore;

/// Whether the server is a standby, and whether this session's transactions are read-only.
const ROLE: &str = "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'";

/// Why a check found the store not writable.
#[derive(Debug, thiserror::Error)]
#[error("the server is read-only (in recovery: {in_recovery}): writes are refused with SQLSTATE 25006 until a primary is reached")]
struct ReadOnly {
    in_recovery: bool,
}

#[async_trait]
impl StoreHealth for PostgresStore {
    /// Within `within` and the call deadline, whichever is shorter: a connection of the
    /// command path, then one query of the server's role. A pool with no free connection in
    /// that time is reported as it is (reachable unknown, callers waiting), without putting
    /// the store in doubt.
    async fn check(&self, within: Duration) -> StoreCheck {
        let within = within.min(self.watch.deadline());
        let started = std::time::Instant::now();
        let status = self.pool.status();
        let connections = ConnectionUse {
            open: status.size,
            max: status.max_size,
            idle: status.available,
            waiting: status.waiting,
        };
        let check = tokio::time::timeout(within, async {
            let client = self.pool.get().await.map_err(|error| match error {
                deadpool_postgres::PoolError::Backend(error) => PgFault(&error).to_string(),
                other => other.to_string(),
            })?;
            let row = client
                .query_one(ROLE, &[])
                .await
                .map_err(|error| PgFault(&error).to_string())?;
            let in_recovery: bool = row.try_get(0).map_err(|e| e.to_string())?;
            let read_only: bool = row.try_get(1).map_err(|e| e.to_string())?;
            Ok::<_, String>((in_recovery, read_only))
        })
        .await;
        let found = match check {
            Ok(Ok((in_recovery, read_only))) if in_recovery || read_only => {
                let why = ReadOnly { in_recovery };
                self.watch.doubt(started, &why);
                StoreCheck::reachable(false).with_error(why.to_string())
            }
            Ok(Ok(_)) => {
                self.watch.answered();
                StoreCheck::reachable(true)
            }
            Ok(Err(error)) => {
                self.watch.doubt(started, &error);
                StoreCheck::unreachable(error)
            }
            Err(_)
                if status.waiting > 0
                    || status.available == 0 && status.size >= status.max_size =>
            {
                StoreCheck::saturated(format!(
                    "no free connection within {} ms: every connection is in use",
                    within.as_millis()
                ))
            }
            Err(_) => {
                let error = crate::call::PastDeadline(within);
                self.watch.doubt(started, &error);
                StoreCheck::unreachable(error.to_string())
            }
        };
        found
            .with_connections(connections)
            .lost_for(self.watch.lost_since().map(|since| since.elapsed()))
    }
}
