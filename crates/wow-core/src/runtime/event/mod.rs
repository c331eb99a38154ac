mod bus;
mod catch_up;
mod dispatcher;
mod feed_follower;
mod position_writer;

pub use bus::{EventFeed, InMemoryDomainEventBus, DEFAULT_PARTITION_CAPACITY};
pub use catch_up::{catch_up, CatchUpError, CatchUpProgress};
pub use dispatcher::{EventDispatcher, EventDispatcherBuilder, NamedConsumer};
pub use feed_follower::{FeedFollower, FeedWake, PartitionOf, FEED_POLL};
