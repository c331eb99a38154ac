//! The lease bucket: opening it, and checking that its entry age is the TTL.

use std::time::Duration;

use async_nats::jetstream::{self, kv};

use super::error::{BoxError, LeaseError};

/// Opens the bucket, creating it if missing with `replicas` copies (raising an existing
/// one's to `replicas`), and checks that it keeps entries for `ttl`.
pub(crate) async fn open(
    jetstream: &jetstream::Context,
    bucket: &str,
    ttl: Duration,
    replicas: usize,
) -> Result<kv::Store, LeaseError> {
    let bucket_error = |source: BoxError| LeaseError::Bucket {
        bucket: bucket.to_owned(),
        source,
    };
    let store =
        crate::kv::open_or_create(jetstream, bucket, "wow-rs partition leases", ttl, replicas)
            .await
            .map_err(bucket_error)?;
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
