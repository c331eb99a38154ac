//! The processed-message conformance suite (SPEC DS-1, DS-2): a consumer's write and its
//! record commit together, once per message.
//!
//! A backend adapts its transactional API to a [`Ledger`]: a consumer adds amounts to its own
//! total, inside the store's transaction, once per message id. Run every case with
//! [`processed_message_tck!`](crate::processed_message_tck).

use std::sync::Arc;

use async_trait::async_trait;
use wow_core::event::{ProcessError, Processed};

/// A consumer's own table, written in the same transaction as the processed-message record.
#[async_trait]
pub trait Ledger: Send + Sync {
    /// Adds `amount` to `consumer`'s total once per `message_id`; with `fail` the work fails
    /// after writing, which must leave neither the write nor the record.
    async fn apply_once(
        &self,
        consumer: &str,
        message_id: &str,
        amount: i64,
        fail: bool,
    ) -> Result<Processed, ProcessError>;

    /// `consumer`'s total (0 before anything).
    async fn total(&self, consumer: &str) -> i64;
}

/// The ledger under test.
pub type Store = Arc<dyn Ledger>;

/// A message is applied once; a redelivery is skipped without running the work again.
pub async fn applies_a_message_once(ledger: Store) {
    assert_eq!(
        ledger
            .apply_once("projection", "m-1", 5, false)
            .await
            .unwrap(),
        Processed::Applied
    );
    assert_eq!(
        ledger
            .apply_once("projection", "m-1", 5, false)
            .await
            .unwrap(),
        Processed::AlreadyProcessed
    );
    assert_eq!(ledger.total("projection").await, 5);
}

/// A failed work writes nothing and records nothing, so the next delivery applies it.
pub async fn a_failed_work_leaves_nothing_and_runs_again(ledger: Store) {
    assert!(matches!(
        ledger.apply_once("projection", "m-1", 7, true).await,
        Err(ProcessError::Work(_))
    ));
    assert_eq!(
        ledger.total("projection").await,
        0,
        "the failed work's write was rolled back"
    );
    assert_eq!(
        ledger
            .apply_once("projection", "m-1", 7, false)
            .await
            .unwrap(),
        Processed::Applied
    );
    assert_eq!(ledger.total("projection").await, 7);
}

/// Each consumer keeps its own records: one message reaches every consumer once.
pub async fn consumers_keep_their_own_records(ledger: Store) {
    for consumer in ["projection", "processor", "saga"] {
        assert_eq!(
            ledger.apply_once(consumer, "m-1", 3, false).await.unwrap(),
            Processed::Applied
        );
    }
    for consumer in ["projection", "processor", "saga"] {
        assert_eq!(ledger.total(consumer).await, 3);
    }
}

/// 32 concurrent deliveries of one message apply it exactly once.
pub async fn concurrent_deliveries_apply_once(ledger: Store) {
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let ledger = ledger.clone();
            tokio::spawn(async move { ledger.apply_once("projection", "same", 1, false).await })
        })
        .collect();
    let mut applied = 0;
    for task in tasks {
        if task.await.expect("task runs").expect("no store failure") == Processed::Applied {
            applied += 1;
        }
    }
    assert_eq!(applied, 1);
    assert_eq!(ledger.total("projection").await, 1);
}

/// 1000 messages delivered with random redeliveries and failures end equal to a fold of the
/// messages, each once.
pub async fn random_redeliveries_end_equal_to_a_fold(ledger: Store) {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut expected = 0;
    for index in 0..1000i64 {
        let message = format!("m-{index}");
        expected += index;
        let deliveries = 1 + next() % 3;
        let mut applied = false;
        for _ in 0..deliveries {
            let fail = next() % 5 == 0;
            match ledger.apply_once("projection", &message, index, fail).await {
                Ok(Processed::Applied) => applied = true,
                Ok(Processed::AlreadyProcessed) => assert!(applied),
                Err(ProcessError::Work(_)) => {}
                Err(other) => panic!("store failed: {other}"),
            }
        }
        if !applied {
            assert_eq!(
                ledger
                    .apply_once("projection", &message, index, false)
                    .await
                    .unwrap(),
                Processed::Applied
            );
        }
    }
    assert_eq!(ledger.total("projection").await, expected);
}
