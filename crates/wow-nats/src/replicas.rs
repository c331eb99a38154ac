//! Keeping every stream and bucket the distributed mode makes at the replica setting.
//!
//! A stream made with one replica before `WOW_NATS_REPLICAS` was raised would otherwise
//! keep its single copy for good, and losing the server holding it would stop what it
//! carries (the lease bucket: every partition) for as long as that server is away.

use async_nats::jetstream::{self, stream};
use async_nats::Client;
use wow_core::eventsourcing::BoxError;

/// Updates the stream `config` describes to `replicas` copies. JetStream (2.9 and later,
/// clustered) copies the messages to the new replicas while the stream keeps serving.
///
/// # Errors
///
/// What JetStream answers, with a sentence saying how to do it by hand, e.g. when the
/// cluster has fewer servers than `replicas`.
pub(crate) async fn raise(
    jetstream: &jetstream::Context,
    mut config: stream::Config,
    replicas: usize,
) -> Result<(), BoxError> {
    let name = config.name.clone();
    let from = config.num_replicas;
    config.num_replicas = replicas;
    match jetstream.update_stream(config).await {
        Ok(_) => {
            tracing::info!(
                stream = name,
                from,
                to = replicas,
                "raised the stream's replicas to the setting"
            );
            Ok(())
        }
        Err(error) => Err(format!(
            "the stream `{name}` has {from} replica(s) and the setting asks for {replicas}, \
             but JetStream refused to update it ({error}); raise it by hand \
             (`nats stream edit {name} --replicas {replicas}`) or lower WOW_NATS_REPLICAS"
        )
        .into()),
    }
}

/// Logs a warning when `replicas` is 1 and the server `client` is connected to belongs to
/// a cluster: every stream and bucket then lives on one server, and losing it stops the
/// deployment until it comes back.
pub(crate) fn warn_if_single_copy(client: &Client, replicas: usize) {
    if replicas > 1 {
        return;
    }
    let info = client.server_info();
    if info.cluster.is_some() || !info.connect_urls.is_empty() {
        tracing::warn!(
            cluster = info.cluster.as_deref().unwrap_or(""),
            "WOW_NATS_REPLICAS is 1 on a NATS cluster: each stream and bucket lives on one \
             server, and losing that server stops the deployment until it returns; set it to 3"
        );
    }
}
