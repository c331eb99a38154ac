//! A small pool of read-only connections; each read runs on the blocking thread pool.

use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::Semaphore;

use crate::schema::connect;
use crate::{OpenError, SqliteOptions};

/// Read-only connections, handed out one read at a time.
#[derive(Debug)]
pub(crate) struct ReadPool {
    idle: Mutex<Vec<Connection>>,
    available: Arc<Semaphore>,
}

impl ReadPool {
    pub(crate) fn open(options: &SqliteOptions, size: usize) -> Result<Arc<Self>, OpenError> {
        let connections = (0..size.max(1))
            .map(|_| crate::schema::patiently(|| connect(options, true)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(Self {
            available: Arc::new(Semaphore::new(connections.len())),
            idle: Mutex::new(connections),
        }))
    }

    /// Runs `read` on a pooled connection off the async threads.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped read finishes on its thread and returns the connection.
    pub(crate) async fn read<T, F>(self: &Arc<Self>, read: F) -> Result<T, rusqlite::Error>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        // The permit travels with the blocking work, so a dropped read keeps its connection
        // counted until the work is done.
        let permit = self
            .available
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| closed())?;
        let pool = self.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let connection = pool
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop()
                .ok_or_else(closed)?;
            let result = read(&connection);
            pool.idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(connection);
            result
        })
        .await
        .map_err(|_| closed())?
    }
}

fn closed() -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISUSE),
        Some("the read pool is closed".to_owned()),
    )
}
