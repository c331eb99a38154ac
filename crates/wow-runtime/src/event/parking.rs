//! The dispatcher's side of parked streams (SPEC DS-5): which deliveries wait behind an
//! earlier failure of the same consumer on the same aggregate, and the lanes to open when a
//! delivery fails. The lanes themselves are the store's ([`ParkedStreams`]); this keeps the
//! set of open ones in memory so that an aggregate with no open lane, the usual case, costs
//! no round trip. It also keeps the last version each consumer handled of each aggregate, so
//! that a stream that arrives past a gap (one never published, an append whose answer was
//! lost) is preceded by the missing ones, read from history.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::OnceCell;
use wow_core::event::{ConsumerError, ParkedLane, ParkedStreams};
use wow_core::{AggregateId, DomainEventStream, ErrorCode};

/// What to do with one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Run it; `head` when it is the failed stream at the head of its lane, whose success
    /// releases the streams parked behind it.
    Run {
        /// Whether the stream heads an open lane.
        head: bool,
    },
    /// Not run: parked behind the lane's head.
    Parked(ParkedLane),
}

/// The open lanes of every consumer of one dispatcher, over the store's [`ParkedStreams`].
#[derive(Debug)]
pub(crate) struct Parking {
    lanes: Arc<dyn ParkedStreams>,
    open: RwLock<HashSet<(String, AggregateId)>>,
    loaded: OnceCell<()>,
    /// The last version each consumer handled of each aggregate, in this process: per
    /// aggregate, per consumer (a read allocates nothing).
    heads: Mutex<HashMap<AggregateId, Vec<(String, u64)>>>,
}

/// How many aggregates' heads are kept before they are forgotten and read again
/// from the consumers' positions.
const MAX_HEADS: usize = 200_000;

impl Parking {
    /// Over `lanes`; the open ones are read from it before the first delivery.
    pub(crate) fn new(lanes: Arc<dyn ParkedStreams>) -> Self {
        Self {
            lanes,
            open: RwLock::new(HashSet::new()),
            loaded: OnceCell::new(),
            heads: Mutex::new(HashMap::new()),
        }
    }

    /// The last version of `aggregate` that `consumer` handled in this process, if known.
    pub(crate) fn head(&self, consumer: &str, aggregate: &AggregateId) -> Option<u64> {
        let heads = self.heads.lock().unwrap_or_else(|p| p.into_inner());
        heads
            .get(aggregate)?
            .iter()
            .find(|(of, _)| of == consumer)
            .map(|(_, head)| *head)
    }

    /// Forgets every head: they are read again from the consumers' positions.
    pub(crate) fn forget_heads(&self) {
        self.heads.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Notes that `consumer` handled `version` of `aggregate` (a redelivery of an older one
    /// changes nothing).
    pub(crate) fn handled(&self, consumer: &str, aggregate: &AggregateId, version: u64) {
        let mut heads = self.heads.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(consumers) = heads.get_mut(aggregate) {
            match consumers.iter_mut().find(|(of, _)| of == consumer) {
                Some((_, head)) => *head = (*head).max(version),
                None => consumers.push((consumer.to_owned(), version)),
            }
            return;
        }
        if heads.len() >= MAX_HEADS {
            heads.clear();
        }
        heads.insert(aggregate.clone(), vec![(consumer.to_owned(), version)]);
    }

    /// The store's lanes.
    pub(crate) fn lanes(&self) -> &Arc<dyn ParkedStreams> {
        &self.lanes
    }

    /// Whether `consumer` runs `stream` now, or parks it behind an open lane of its
    /// aggregate (recorded in the store before this answers). A store that cannot be read
    /// fails the delivery, to be recorded and retried as any failure.
    pub(crate) async fn turn(
        &self,
        consumer: &str,
        stream: &DomainEventStream,
    ) -> Result<Turn, ConsumerError> {
        self.load().await?;
        if !self.is_open(consumer, &stream.aggregate_id) {
            return Ok(Turn::Run { head: false });
        }
        let aggregate = &stream.aggregate_id;
        let Some(lane) = self
            .lanes
            .lane(consumer, aggregate)
            .await
            .map_err(unreadable)?
        else {
            self.forget(consumer, aggregate);
            return Ok(Turn::Run { head: false });
        };
        if stream.version == lane.head_version {
            return Ok(Turn::Run { head: true });
        }
        if stream.version < lane.head_version {
            // Handled before the lane opened: a redelivery, which the consumer's own
            // records make harmless.
            return Ok(Turn::Run { head: false });
        }
        let parked = self
            .lanes
            .park(consumer, aggregate, stream.version)
            .await
            .map_err(unreadable)?;
        if parked {
            Ok(Turn::Parked(lane))
        } else {
            // The lane was released meanwhile: this stream is the consumer's to run.
            self.forget(consumer, aggregate);
            Ok(Turn::Run { head: false })
        }
    }

    /// Opens (or moves to `stream`) the lane of `consumer` on the stream's aggregate: its
    /// delivery failed at `now`. Logged, never raised: the failure record stands either way.
    pub(crate) async fn hold(&self, consumer: &str, stream: &DomainEventStream, now: i64) {
        let aggregate = &stream.aggregate_id;
        match self
            .lanes
            .hold(consumer, aggregate, stream.version, now)
            .await
        {
            Ok(_) => self.remember(consumer, aggregate),
            Err(error) => {
                tracing::error!(consumer, %aggregate, version = stream.version, %error, "could not park the aggregate's later streams behind a failed one");
            }
        }
    }

    /// Marks the lane of (`consumer`, `aggregate`) closed in memory: the store closed it.
    pub(crate) fn forget(&self, consumer: &str, aggregate: &AggregateId) {
        let mut open = self.open.write().unwrap_or_else(|p| p.into_inner());
        open.remove(&(consumer.to_owned(), aggregate.clone()));
    }

    /// Reads the store's open lanes again (a partition moved here, or another process opened
    /// lanes this one must honour).
    pub(crate) async fn reload(&self) -> Result<usize, ConsumerError> {
        let lanes = self.lanes.lanes(None).await.map_err(unreadable)?;
        let mut open = self.open.write().unwrap_or_else(|p| p.into_inner());
        open.clear();
        open.extend(
            lanes
                .into_iter()
                .map(|lane| (lane.consumer, lane.aggregate_id)),
        );
        Ok(open.len())
    }

    async fn load(&self) -> Result<(), ConsumerError> {
        self.loaded
            .get_or_try_init(|| async { self.reload().await.map(|_| ()) })
            .await
            .map(|_| ())
    }

    /// Whether this process knows of an open lane of (`consumer`, `aggregate`).
    pub(crate) fn is_open(&self, consumer: &str, aggregate: &AggregateId) -> bool {
        let open = self.open.read().unwrap_or_else(|p| p.into_inner());
        !open.is_empty() && open.contains(&(consumer.to_owned(), aggregate.clone()))
    }

    fn remember(&self, consumer: &str, aggregate: &AggregateId) {
        let mut open = self.open.write().unwrap_or_else(|p| p.into_inner());
        open.insert((consumer.to_owned(), aggregate.clone()));
    }
}

/// The failure a parked delivery answers its waiting caller with.
pub(crate) fn parked_error(consumer: &str, lane: &ParkedLane) -> ConsumerError {
    ConsumerError::new(
        ErrorCode::StreamParked,
        format!(
            "`{consumer}` holds this stream back: version {} of {} failed for it and waits for its retry; the later streams follow it in order",
            lane.head_version, lane.aggregate_id
        ),
    )
}

fn unreadable(error: impl std::fmt::Display) -> ConsumerError {
    ConsumerError::new(
        ErrorCode::ServiceUnavailable,
        format!("the parked streams cannot be read: {error}"),
    )
}
