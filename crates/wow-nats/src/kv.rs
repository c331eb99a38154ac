//! Opening a JetStream key-value bucket, making it first if it is missing, with as many
//! copies as the deployment's replica setting asks for.

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use wow_core::eventsourcing::BoxError;

/// Opens `bucket`, making it if missing (history 1, file storage, `replicas` copies, entries
/// kept for `max_age`, zero for ever), as `create_key_value` would. A bucket that exists
/// with fewer copies than `replicas` is updated to `replicas` (JetStream copies its entries
/// to the new replicas while it keeps serving); one with more is left as it is.
pub(crate) async fn open_or_create(
    jetstream: &jetstream::Context,
    bucket: &str,
    description: &str,
    max_age: Duration,
    replicas: usize,
) -> Result<kv::Store, BoxError> {
    if let Ok(store) = jetstream.get_key_value(bucket).await {
        let info = store.stream.cached_info().config.clone();
        if info.num_replicas >= replicas {
            return Ok(store);
        }
        crate::replicas::raise(jetstream, info, replicas).await?;
        return Ok(jetstream.get_key_value(bucket).await?);
    }
    // The bucket's stream, made as `create_key_value` would. That call first asks for the
    // account info, whose NATS 2.9 form async-nats 0.46 cannot parse.
    let config = jetstream::stream::Config {
        name: format!("KV_{bucket}"),
        description: Some(description.to_owned()),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        max_age,
        // File storage: a server restart must not forget what the bucket holds.
        storage: jetstream::stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: jetstream::stream::DiscardPolicy::New,
        num_replicas: replicas.max(1),
        ..Default::default()
    };
    // A busy server can fail a create it would take a moment later: a few tries, 50 ms
    // apart and doubling, before the open's error is the answer.
    let mut pause = Duration::from_millis(50);
    for _ in 1..CREATE_ATTEMPTS {
        if let Ok(store) = create_and_open(jetstream, bucket, &config).await {
            return Ok(store);
        }
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
    create_and_open(jetstream, bucket, &config).await
}

/// How many times [`open_or_create`] tries to create a missing bucket.
const CREATE_ATTEMPTS: u32 = 4;

/// Creates the bucket's stream as `config` says (another node may have created it
/// meanwhile) and opens the bucket.
async fn create_and_open(
    jetstream: &jetstream::Context,
    bucket: &str,
    config: &jetstream::stream::Config,
) -> Result<kv::Store, BoxError> {
    if let Err(create) = jetstream.create_stream(config.clone()).await {
        // If no one created it, the open below says why.
        tracing::debug!(bucket, %create, "cannot create the bucket");
    }
    Ok(jetstream.get_key_value(bucket).await?)
}
