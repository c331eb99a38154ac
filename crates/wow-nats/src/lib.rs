//! wow-rs distributed mode on NATS JetStream.

mod lease;

pub use lease::{Fence, LeaseConfig, LeaseError, OwnedPartitions, PartitionLeases, DEFAULT_BUCKET};
