//! A private corner of the test NATS server per test: its own stream and subjects.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_nats::Client;
use wow_nats::{CommandStorage, NatsConfig};

/// The server under test, or `None` (with a `SKIPPED` line on stderr) when it is down and no
/// backend is required. Under `WOW_REQUIRE_BACKENDS=1` a server that cannot be reached fails the test.
pub(crate) async fn server() -> Option<(Client, Arc<NatsConfig>)> {
    let url = std::env::var("WOW_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let connected = tokio::time::timeout(Duration::from_secs(5), async_nats::connect(&url)).await;
    let client = match connected {
        Ok(Ok(client)) => client,
        failure => {
            let why = match failure {
                Ok(Err(error)) => error.to_string(),
                Ok(Ok(_)) => String::new(),
                Err(_) => "no answer within 5 s".to_owned(),
            };
            wow_tck::skip::unavailable(
                wow_tck::skip::Requirement::Backends,
                &format!("no NATS at {url} ({why}); start it or point WOW_TEST_NATS_URL at one"),
            );
            return None;
        }
    };
    let unique = uuid::Uuid::now_v7().simple().to_string();
    let mut config = NatsConfig::new(url);
    config.stream = format!("WOW_TEST_{unique}");
    config.subject_prefix = format!("wowtest.{unique}.commands");
    config.wait_prefix = format!("wowtest.{unique}.wait");
    config.partitions = 4;
    config.storage = CommandStorage::Memory;
    config.ack_wait = Duration::from_secs(30);
    Some((client, Arc::new(config)))
}

/// Deletes the test's stream and its deployment record.
pub(crate) async fn remove_stream(client: &Client, config: &NatsConfig) {
    let jetstream = async_nats::jetstream::new(client.clone());
    let _ = jetstream.delete_stream(&config.stream).await;
    let _ = jetstream.delete_key_value(config.deployment_bucket()).await;
}
