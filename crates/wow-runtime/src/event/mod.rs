//! The dispatch of appended streams to their consumers: the in-memory event bus with its
//! partitions, the [`EventDispatcher`] (views, sagas, processors, each once per stream),
//! [`catch_up`] from the store's feed after a restart, and the [`FeedFollower`] that
//! follows the global feed in the distributed mode, and an operator's [`redispatch`] of a
//! range of history to one consumer.

mod bus;
mod catch_up;
mod dispatcher;
mod feed_follower;
mod parking;
mod position_writer;
mod redispatch;

pub use bus::{EventFeed, InMemoryDomainEventBus, DEFAULT_PARTITION_CAPACITY};
pub(crate) use catch_up::IdPages;
pub use catch_up::{catch_up, CatchUpError, CatchUpProgress};
pub use dispatcher::{EventDispatcher, EventDispatcherBuilder, NamedConsumer};
pub use feed_follower::{FeedFollower, FeedWake, PartitionOf, FEED_POLL};
pub use redispatch::{redispatch, RedispatchOutcome, RedispatchRange};
