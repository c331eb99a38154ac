//! The lease bucket: opening it, and checking that its entry age is the TTL.

use std::time::Duration;

use async_nats::jetstream::{self, kv};

use super::error::{BoxError, LeaseError};

/// Opens the bucket, creating it if missing, and checks that it keeps entries for `ttl`.
pub(crate) async fn open(
    jetstream: &jetstream::Context,
    bucket: &str,
    ttl: Duration,
) -> Result<kv::Store, LeaseError> {
    let bucket_error = |source: BoxError| LeaseError::Bucket {
        bucket: bucket.to_owned(),
        source,
    };
    let store = match jetstream.get_key_value(bucket).await {
        Ok(store) => store,
        Err(_) => {
            // The bucket's stream, made as `create_key_value` would. That call first asks for
            // the account info, whose NATS 2.9 form async-nats 0.46 cannot parse.
            let config = jetstream::stream::Config {
                name: format!("KV_{bucket}"),
                description: Some("wow-rs partition leases".to_owned()),
                subjects: vec![format!("$KV.{bucket}.>")],
                max_messages_per_subject: 1,
                max_age: ttl,
                // File storage: a server restart must not forget who holds what.
                storage: jetstream::stream::StorageType::File,
                allow_rollup: true,
                deny_delete: true,
                allow_direct: true,
                discard: jetstream::stream::DiscardPolicy::New,
                num_replicas: 1,
                ..Default::default()
            };
            if let Err(create) = jetstream.create_stream(config).await {
                // Another node may have created it meanwhile; if not, report why.
                tracing::debug!(bucket, %create, "cannot create the lease bucket");
            }
            jetstream
                .get_key_value(bucket)
                .await
                .map_err(|error| bucket_error(Box::new(error)))?
        }
    };
    let bucket_max_age = store.stream.cached_info().config.max_age;
    if bucket_max_age != ttl {
        return Err(LeaseError::TtlMismatch {
            bucket: bucket.to_owned(),
            bucket_max_age,
            ttl,
        });
    }
    Ok(store)
}
