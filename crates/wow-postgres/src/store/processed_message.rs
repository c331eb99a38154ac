//! Table `processed_message`: which messages each consumer has run, so that a redelivered
//! message runs once (SPEC DS-2).
//!
//! Why the record is written first, in the consumer's own transaction: its key makes
//! concurrent deliveries of one message wait for each other, and a failing work rolls the
//! record back with the work's writes, so the message runs again on its next delivery.

use futures::future::BoxFuture;
use wow_core::event::{ProcessError, Processed};
use wow_core::eventsourcing::BoxError;

use super::PostgresStore;
use crate::call::PastDeadline;

/// Records that consumer `$1` ran message `$2` at `$3` (epoch milliseconds): one row when it
/// had not, none when it had.
const RECORD_PROCESSED: &str = "INSERT INTO processed_message (consumer, message_id, processed_time) VALUES ($1, $2, $3) ON CONFLICT (consumer, message_id) DO NOTHING";

/// Forgets every message consumer `$1` ran, so that all of them run again.
pub(crate) const FORGET_CONSUMER: &str = "DELETE FROM processed_message WHERE consumer = $1";

impl PostgresStore {
    /// Runs `work` once per (`consumer`, `message_id`), in one transaction with the record
    /// that it ran (SPEC DS-2): a redelivered message finds the record and `work` does not
    /// run; a failing `work` leaves neither its writes nor the record. Concurrent deliveries
    /// of one message wait for each other on the record's key; one of them runs `work`.
    /// Consumers use at most half the pool at once, leaving the rest to appends. Once it has
    /// its share, the whole of it, `work` included, is bounded by the call deadline: past it the transaction is
    /// dropped uncommitted (the message runs again on its next delivery) and the answer is
    /// [`ProcessError::Store`].
    pub async fn process_once<F>(
        &self,
        consumer: &str,
        message_id: &str,
        work: F,
    ) -> Result<Processed, ProcessError>
    where
        F: for<'t> FnOnce(
                &'t deadpool_postgres::Transaction<'t>,
            ) -> BoxFuture<'t, Result<(), BoxError>>
            + Send,
    {
        // The wait for a consumer's slot is not the store's: it is outside the deadline.
        let _slot = self
            .consumer_slots
            .acquire()
            .await
            .map_err(|e| ProcessError::Store(Box::new(e)))?;
        let deadline = self.watch.deadline();
        let started = std::time::Instant::now();
        let run = async move {
            let store = |error: tokio_postgres::Error| {
                ProcessError::Store(Box::new(crate::error::DbFault::from(error)))
            };
            let mut client = self
                .pool
                .get()
                .await
                .map_err(|e| ProcessError::Store(Box::new(e)))?;
            let transaction = client.transaction().await.map_err(store)?;
            // The record first: its key makes concurrent deliveries of one message queue up.
            let record = transaction
                .prepare_cached(RECORD_PROCESSED)
                .await
                .map_err(store)?;
            let recorded = transaction
                .execute(&record, &[&consumer, &message_id, &self.clock.now_millis()])
                .await
                .map_err(store)?;
            if recorded == 0 {
                transaction.rollback().await.map_err(store)?;
                return Ok(Processed::AlreadyProcessed);
            }
            if let Err(error) = work(&transaction).await {
                transaction.rollback().await.map_err(store)?;
                return Err(ProcessError::Work(error));
            }
            transaction.commit().await.map_err(store)?;
            Ok(Processed::Applied)
        };
        match tokio::time::timeout(deadline, run).await {
            Ok(outcome) => outcome,
            Err(_) => {
                let error = PastDeadline(deadline);
                self.watch.doubt(started, &error);
                Err(ProcessError::Store(Box::new(error)))
            }
        }
    }
}
