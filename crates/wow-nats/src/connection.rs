//! Connecting to NATS and making sure the command stream exists as configured.

use async_nats::jetstream::{self, stream};
use std::time::Duration;

use async_nats::connection::State;
use async_nats::{Client, ConnectOptions};

use crate::config::{CommandStorage, NatsConfig};
use crate::error::NatsError;

/// How long [`connect`] waits for the first connection before it returns a client that goes
/// on trying in the background.
const FIRST_CONNECTION: Duration = Duration::from_secs(5);

/// Connects to one of the servers of `config.url` (one URL, or a comma-separated list of a
/// cluster's), waiting up to 5 s for the first connection; servers still down then are
/// tried again in the background. The client reconnects by itself, to any server of the list
/// or of the cluster, for as long as the process runs; while it is not connected, sends
/// answer `ServiceUnavailable` (see [`NatsCommandBus`](crate::NatsCommandBus)).
///
/// The client pings its server every `config.ping_interval` and drops a connection whose
/// server left three pings unanswered: a hung server (stopped, partitioned away without a
/// reset) costs about three intervals, not the client's default of minutes.
///
/// # Errors
///
/// [`NatsError::Connect`] when a URL or the options are refused.
pub async fn connect(config: &NatsConfig, name: &str) -> Result<Client, NatsError> {
    let servers = config.servers();
    if servers.is_empty() {
        return Err(NatsError::Config("the NATS URL names no server".into()));
    }
    let client = ConnectOptions::new()
        .name(name)
        .retry_on_initial_connect()
        .max_reconnects(None)
        .ping_interval(config.ping_interval)
        .connection_timeout(config.ping_interval.max(Duration::from_secs(2)))
        .event_callback(|event| async move {
            match event {
                async_nats::Event::Connected => tracing::info!("connected to NATS"),
                async_nats::Event::Disconnected => tracing::warn!("disconnected from NATS"),
                other => tracing::debug!(event = %other, "NATS client event"),
            }
        })
        .connect(servers)
        .await
        .map_err(|source| NatsError::Connect {
            url: config.url.clone(),
            source: Box::new(source),
        })?;
    let deadline = tokio::time::Instant::now() + FIRST_CONNECTION;
    while client.connection_state() != State::Connected {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                url = config.url,
                "NATS is not reachable yet; trying on in the background"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(client)
}

/// Makes the command stream if it is missing (subjects `{subject_prefix}.>`, work-queue
/// retention: a command leaves the stream once a processor acknowledged it). A stream made
/// by an older version (subjects `{subject_prefix}.*`) is updated in place to the new
/// subjects, keeping its messages (SPEC RQ-14), and one with fewer replicas than
/// `config.replicas` is raised to them. Warns when one replica is used on a NATS cluster.
/// First checks that `config.partitions` is
/// the deployment's ([`check_partition_count`](crate::check_partition_count)).
///
/// # Errors
///
/// [`NatsError::Stream`] when JetStream refuses, or when `partitions` is 0;
/// [`NatsError::PartitionCount`] when the deployment records another partition count.
pub async fn ensure_command_stream(
    jetstream: &jetstream::Context,
    config: &NatsConfig,
) -> Result<stream::Stream, NatsError> {
    if config.partitions == 0 {
        return Err(NatsError::Config(
            "partitions must be more than zero".into(),
        ));
    }
    crate::replicas::warn_if_single_copy(&jetstream.client(), config.replicas);
    crate::check_partition_count(jetstream, config).await?;
    let failed = |source: Box<dyn std::error::Error + Send + Sync>| NatsError::Stream {
        stream: config.stream.clone(),
        source,
    };
    let storage = match config.storage {
        CommandStorage::File => stream::StorageType::File,
        CommandStorage::Memory => stream::StorageType::Memory,
    };
    let subjects = vec![config.stream_subjects()];
    let mut stream = jetstream
        .get_or_create_stream(stream::Config {
            name: config.stream.clone(),
            subjects: subjects.clone(),
            retention: stream::RetentionPolicy::WorkQueue,
            storage,
            num_replicas: config.replicas.max(1),
            max_age: config.max_age,
            // A gateway that resends a publish after a lost acknowledgement (same command
            // id as `Nats-Msg-Id`) within this window does not enqueue it twice.
            duplicate_window: std::time::Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .map_err(|e| failed(Box::new(e)))?;
    if stream.cached_info().config.num_replicas < config.replicas {
        crate::replicas::raise(
            jetstream,
            stream.cached_info().config.clone(),
            config.replicas,
        )
        .await
        .map_err(failed)?;
        stream = jetstream
            .get_stream(&config.stream)
            .await
            .map_err(|e| failed(Box::new(e)))?;
    }
    if stream.cached_info().config.subjects != subjects {
        let mut updated = stream.cached_info().config.clone();
        tracing::info!(from = ?updated.subjects, to = ?subjects, "updating the command stream's subjects");
        updated.subjects = subjects;
        jetstream
            .update_stream(updated)
            .await
            .map_err(|e| failed(Box::new(e)))?;
        stream = jetstream
            .get_stream(&config.stream)
            .await
            .map_err(|e| failed(Box::new(e)))?;
    }
    Ok(stream)
}
