//! wow-rs's distributed mode on NATS JetStream (docs/distributed.md).
//!
//! - [`NatsCommandBus`]: a gateway's [`CommandBus`](wow_core::command::CommandBus). Each
//!   command goes to a subject of its partition, a stable hash of (tenant, aggregate name,
//!   aggregate id) ([`partition_of`]), that names its request ([`request_token`]); `SENT`
//!   means JetStream stored it, and any gateway can ask whether it is still in transit.
//! - [`PartitionConsumer`]: a processor's side; one partition's commands, in order, into
//!   the processing node, while the node owns the partition.
//! - [`WaitSignals`] and [`NatsWaitNotifier`]: stage signals from processors back to the
//!   gateway that took the command, over core NATS.
//! - [`PartitionLeases`]: which processor owns which partition, as leases in a JetStream
//!   key-value bucket, each with a [`Fence`] that ends the owner's work before anyone else can
//!   take the partition; [`supervise`] runs a [`PartitionConsumer`] per owned partition.
//!
//! # What JetStream is trusted with
//!
//! Commands in transit only. History lives in the event store: a command JetStream loses
//! after `SENT` (a crash of NATS can lose acknowledged writes) is never appended, so its
//! caller times out, the outcome look-up answers `NONE`, and the resend is safe. A command
//! delivered twice (a redelivery after a processor died, a takeover) meets its own request
//! id in the store and is answered from the recorded decision.

mod command_bus;
mod config;
mod connection;
mod deployment;
mod error;
mod kv;
mod lease;
mod partition;
mod pump;
mod replicas;
mod stalled;
mod supervisor;
mod wait;
mod worker;

pub use command_bus::{
    NatsCommandBus, COMMAND_ID_NATS_HEADER, PROTOCOL_NATS_HEADER, WAIT_REPLY_HEADER,
};
pub use config::{CommandStorage, NatsConfig};
pub use connection::{connect, ensure_command_stream};
pub use deployment::check_partition_count;
pub use error::NatsError;
pub use lease::{Fence, LeaseConfig, LeaseError, OwnedPartitions, PartitionLeases, DEFAULT_BUCKET};
pub use partition::{command_partition, partition_of, request_token};
pub use stalled::StalledPartitions;
pub use supervisor::supervise;
pub use wait::{NatsWaitNotifier, WaitSignals};
pub use worker::PartitionConsumer;
