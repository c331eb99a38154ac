//! Connecting to NATS and making sure the command stream exists as configured.

use async_nats::jetstream::{self, stream};
use async_nats::{Client, ConnectOptions};

use crate::config::{CommandStorage, NatsConfig};
use crate::error::NatsError;

/// Connects to `config.url`. The client reconnects by itself for as long as the process
/// runs; while it is disconnected, sends answer `ServiceUnavailable` (see
/// [`NatsCommandBus`](crate::NatsCommandBus)).
///
/// # Errors
///
/// [`NatsError::Connect`] when the first connection fails.
pub async fn connect(config: &NatsConfig, name: &str) -> Result<Client, NatsError> {
    ConnectOptions::new()
        .name(name)
        .retry_on_initial_connect()
        .max_reconnects(None)
        .event_callback(|event| async move {
            match event {
                async_nats::Event::Connected => tracing::info!("connected to NATS"),
                async_nats::Event::Disconnected => tracing::warn!("disconnected from NATS"),
                other => tracing::debug!(event = %other, "NATS client event"),
            }
        })
        .connect(config.url.as_str())
        .await
        .map_err(|source| NatsError::Connect {
            url: config.url.clone(),
            source: Box::new(source),
        })
}

/// Makes the command stream if it is missing (subjects `{subject_prefix}.*`, work-queue
/// retention: a command leaves the stream once a processor acknowledged it).
///
/// # Errors
///
/// [`NatsError::Stream`] when JetStream refuses, or when `partitions` is 0.
pub async fn ensure_command_stream(
    jetstream: &jetstream::Context,
    config: &NatsConfig,
) -> Result<stream::Stream, NatsError> {
    if config.partitions == 0 {
        return Err(NatsError::Config(
            "partitions must be more than zero".into(),
        ));
    }
    let storage = match config.storage {
        CommandStorage::File => stream::StorageType::File,
        CommandStorage::Memory => stream::StorageType::Memory,
    };
    jetstream
        .get_or_create_stream(stream::Config {
            name: config.stream.clone(),
            subjects: vec![format!("{}.*", config.subject_prefix)],
            retention: stream::RetentionPolicy::WorkQueue,
            storage,
            num_replicas: config.replicas,
            max_age: config.max_age,
            // A gateway that resends a publish after a lost acknowledgement (same command
            // id as `Nats-Msg-Id`) within this window does not enqueue it twice.
            duplicate_window: std::time::Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .map_err(|source| NatsError::Stream {
            stream: config.stream.clone(),
            source: Box::new(source),
        })
}
