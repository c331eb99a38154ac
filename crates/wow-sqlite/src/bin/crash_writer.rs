//! Appends to a SQLite store from 32 concurrent writers until killed, recording every
//! acknowledged append as one line `aggregate_id version request_id` in a side file.
//!
//! Used by `tests/crash.rs`: the test kills this process with SIGKILL at a random moment and
//! checks that every recorded append survived. Usage:
//! `wow-sqlite-crash-writer DB_PATH ACK_PATH RUN_ID`.

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::{Arc, Mutex};
use wow_core::eventsourcing::History;

use wow_core::{id, AggregateId, DomainEvent, DomainEventStream};
use wow_sqlite::{SqliteOptions, SqliteStore};

const WRITERS: usize = 32;
const VERSIONS_PER_AGGREGATE: u64 = 8;

fn stream(aggregate: &AggregateId, version: u64) -> DomainEventStream {
    let event = |name: &str| DomainEvent {
        id: id::new_id(),
        name: name.to_owned(),
        revision: "0.0.1".to_owned(),
        body: serde_json::json!({"version": version, "padding": "x".repeat(64)}),
    };
    DomainEventStream {
        id: id::new_id(),
        request_id: id::new_id(),
        command_id: id::new_id(),
        aggregate_id: aggregate.clone(),
        version,
        create_time: id::now_millis(),
        fingerprint: "crash".to_owned(),
        header: Default::default(),
        body: vec![event("First"), event("Second")],
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(db), Some(ack), Some(run)) = (args.next(), args.next(), args.next()) else {
        return Err("usage: wow-sqlite-crash-writer DB_PATH ACK_PATH RUN_ID".into());
    };
    let store = SqliteStore::open(SqliteOptions::new(db)).await?;
    let ack = Arc::new(Mutex::new(
        OpenOptions::new().create(true).append(true).open(ack)?,
    ));
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let (store, ack, run) = (store.clone(), ack.clone(), run.clone());
        writers.push(tokio::spawn(async move {
            for round in 0u64.. {
                let aggregate =
                    AggregateId::new("crash", "ledger", format!("{run}-{writer}-{round}"), "t");
                for version in 1..=VERSIONS_PER_AGGREGATE {
                    let s = stream(&aggregate, version);
                    store.append(&s).await?;
                    // One write per line, after the append was acknowledged.
                    let line = format!("{} {} {}\n", aggregate.id, version, s.request_id);
                    ack.lock()
                        .map_err(|_| "ack file lock poisoned")?
                        .write_all(line.as_bytes())?;
                }
            }
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for writer in writers {
        writer.await?.map_err(|error| error.to_string())?;
    }
    Ok(())
}
