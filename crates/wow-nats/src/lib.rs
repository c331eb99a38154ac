//! wow-rs distributed mode on NATS JetStream.
