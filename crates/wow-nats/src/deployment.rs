//! What every node of one deployment must agree on, recorded in JetStream by the first node
//! and checked by every later one: the partition count.

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;

use crate::config::NatsConfig;
use crate::error::NatsError;

/// The key holding the deployment's partition count.
const PARTITIONS_KEY: &str = "partitions";

/// Records `config.partitions` as the deployment's partition count if none is recorded yet
/// (a KV `create`: the first node's count wins), else checks that it is the one recorded.
/// Nodes with different counts would send one aggregate's commands to different partitions
/// and so to different processors, out of order.
///
/// # Errors
///
/// [`NatsError::PartitionCount`] naming both counts when they differ;
/// [`NatsError::Deployment`] when the record can be neither read nor written.
pub async fn check_partition_count(
    jetstream: &jetstream::Context,
    config: &NatsConfig,
) -> Result<(), NatsError> {
    let bucket = config.deployment_bucket();
    let failed = |source: Box<dyn std::error::Error + Send + Sync>| NatsError::Deployment {
        bucket: bucket.clone(),
        source,
    };
    let store = crate::kv::open_or_create(
        jetstream,
        &bucket,
        "wow-rs deployment settings",
        Duration::ZERO,
        config.replicas,
    )
    .await
    .map_err(&failed)?;
    let mine = config.partitions.to_string();
    match store
        .create(PARTITIONS_KEY, Bytes::from(mine.clone()))
        .await
    {
        Ok(_) => {
            tracing::info!(
                partitions = config.partitions,
                "recorded the deployment's partition count"
            );
            return Ok(());
        }
        Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => {}
        Err(error) => return Err(failed(Box::new(error))),
    }
    let recorded = store
        .get(PARTITIONS_KEY)
        .await
        .map_err(|e| failed(Box::new(e)))?
        .map(|value| String::from_utf8_lossy(&value).into_owned());
    match recorded {
        Some(recorded) if recorded == mine => Ok(()),
        Some(recorded) => Err(NatsError::PartitionCount {
            configured: config.partitions,
            recorded,
        }),
        None => Err(failed(
            "the partition count was recorded, then removed".into(),
        )),
    }
}
