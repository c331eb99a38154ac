//! Views over several aggregate types (SPEC DM-4): a view that chooses its own row key and
//! folds the events of every aggregate type it declares, each with its metadata.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::{de::DeserializeOwned, Serialize};

use crate::aggregate::decode_events;
use wow_model::aggregate::{Aggregate, AggregateError};
use wow_model::aggregate_id::{AggregateId, NamedAggregate};
use wow_model::command::EventBody;
use wow_model::command::OWNER_ID_HEADER;
use wow_model::event::DomainEventStream;

/// What a view's fold knows of one event besides its body: the aggregate it belongs to, its
/// stream's version and time, and the owner the stream was written for.
#[derive(Debug, Clone, Copy)]
pub struct EventMeta<'a> {
    /// The aggregate (its type, id and tenant).
    pub aggregate_id: &'a AggregateId,
    /// The version of the stream the event is in.
    pub version: u64,
    /// When the stream was appended, in milliseconds since the Unix epoch.
    pub time: i64,
    /// The owner the stream's command named (SPEC TN-2); empty when it named none.
    pub owner_id: &'a str,
    /// The event's name (today's, after its aggregate's upcasters).
    pub event_name: &'static str,
}

impl EventMeta<'_> {
    /// The tenant the aggregate belongs to.
    pub fn tenant_id(&self) -> &str {
        &self.aggregate_id.tenant_id
    }
}

/// A view over the events of several aggregate types (SPEC DM-4): a row per key the view
/// chooses (a row per room, fed by the room's own events and by the bookings that name it),
/// in each tenant.
///
/// The framework keeps its rows in the store's view store (one per (view, tenant, row
/// key)), each row's fold and the record that the stream was folded into it in one
/// transaction (SPEC DS-2, per input stream and row), and its position per input aggregate.
/// Every input's folds are pure and infallible, like [`View::apply`](crate::view::View):
/// a rebuild replays history through them aggregate by aggregate, so a row's state should
/// not depend on the order between the streams of *different* aggregates (it always sees
/// each aggregate's own streams in version order).
///
/// ```
/// use wow_core::testing_example::{Room, RoomEvent, Stay, StayEvent};
/// use wow_core::view::{EventMeta, MultiStreamView, ViewInputs};
///
/// #[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
/// struct Schedule {
///     room: String,
///     open: bool,
///     stays: Vec<String>,
/// }
///
/// #[derive(Debug)]
/// struct RoomSchedule;
///
/// impl MultiStreamView for RoomSchedule {
///     type State = Schedule;
///     const NAME: &'static str = "room_schedule";
///     const INDEXED: &'static [&'static str] = &["open"];
///
///     fn inputs(inputs: ViewInputs<Schedule>) -> ViewInputs<Schedule> {
///         inputs
///             .on::<Room>(
///                 |_, meta| Some(meta.aggregate_id.id.clone()),
///                 |row, event, meta| {
///                     row.room = meta.aggregate_id.id.clone();
///                     row.open = matches!(event, RoomEvent::Opened(_));
///                 },
///             )
///             .on::<Stay>(
///                 |StayEvent::Booked(book), _| Some(book.room.clone()),
///                 |row, _, meta| row.stays.push(meta.aggregate_id.id.clone()),
///             )
///     }
/// }
/// ```
pub trait MultiStreamView: Send + Sync + 'static {
    /// A row's value; `Default` is the value before the first event folded into it.
    type State: Serialize
        + DeserializeOwned
        + Default
        + Clone
        + fmt::Debug
        + PartialEq
        + Send
        + Sync
        + 'static;
    /// The view's name: unique within a store, its consumer name, and the `view` of its keys.
    const NAME: &'static str;
    /// The version of the view's definition (its folds, its state's shape). Raise it when a
    /// change means the stored rows are no longer what the view would fold: the next start
    /// rebuilds the view beside the rows it serves and swaps once the new rows have caught up.
    const VERSION: u32 = 0;
    /// Top-level fields of the state that lists filter on by equality
    /// (`GET /view/{name}?field=value`): each is kept in an index on every store, so such a
    /// list never reads every row of the tenant. A list may filter only on these.
    const INDEXED: &'static [&'static str] = &[];

    /// The aggregate types the view follows, each with its row key and its fold, added to
    /// `inputs` (empty).
    fn inputs(inputs: ViewInputs<Self::State>) -> ViewInputs<Self::State>;
}

/// The row an event of `A` goes to (`None`: the event does not concern the view).
pub type RowOf<A> = fn(&<A as Aggregate>::Event, &EventMeta<'_>) -> Option<String>;

/// How an event of `A` folds into its row's state.
pub type FoldOf<S, A> = fn(&mut S, &<A as Aggregate>::Event, &EventMeta<'_>);

/// The inputs of a [`MultiStreamView`]: for each aggregate type, which row each of its
/// events goes to and how it folds into it.
pub struct ViewInputs<S> {
    inputs: Vec<Arc<dyn ViewInput<S>>>,
}

impl<S> fmt::Debug for ViewInputs<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.inputs.iter().map(|input| input.aggregate()))
            .finish()
    }
}

impl<S: Send + 'static> Default for ViewInputs<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: Send + 'static> ViewInputs<S> {
    /// No inputs yet: what [`MultiStreamView::inputs`] is given.
    pub fn new() -> Self {
        Self { inputs: Vec::new() }
    }

    /// Follows the events of `A`: `row` names the row each goes to, `fold` folds it in. A
    /// second input of the same type replaces the first.
    pub fn on<A: Aggregate>(mut self, row: RowOf<A>, fold: FoldOf<S, A>) -> Self {
        let input = Input::<S, A> {
            named: A::named_aggregate(),
            row,
            fold,
            types: PhantomData,
        };
        self.inputs
            .retain(|other| *other.aggregate() != input.named);
        self.inputs.push(Arc::new(input));
        self
    }

    /// The aggregate types followed.
    pub fn aggregates(&self) -> Vec<NamedAggregate> {
        self.inputs
            .iter()
            .map(|input| input.aggregate().clone())
            .collect()
    }

    /// What `stream` changes: for each row its events go to, in the order first named, the
    /// fold of those events. Empty for a stream of a type the view does not follow, or whose
    /// events concern no row. A stream that does not decode (with its aggregate's upcasters)
    /// is [`AggregateError::CorruptHistory`].
    pub fn changes(&self, stream: &DomainEventStream) -> Result<Vec<RowChange<S>>, AggregateError> {
        let id = &stream.aggregate_id;
        match self.inputs.iter().find(|input| {
            let named = input.aggregate();
            named.aggregate_name == id.aggregate_name && named.context_name == id.context_name
        }) {
            Some(input) => input.changes(stream),
            None => Ok(Vec::new()),
        }
    }
}

/// The fold of one stream's events into one row.
pub struct RowChange<S> {
    /// The row's key, within the stream's tenant.
    pub row: String,
    /// Folds the stream's events for this row into a state.
    pub fold: Box<dyn FnOnce(&mut S) + Send>,
}

impl<S> fmt::Debug for RowChange<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowChange")
            .field("row", &self.row)
            .finish_non_exhaustive()
    }
}

/// One input with its aggregate type erased.
trait ViewInput<S>: Send + Sync {
    fn aggregate(&self) -> &NamedAggregate;
    fn changes(&self, stream: &DomainEventStream) -> Result<Vec<RowChange<S>>, AggregateError>;
}

struct Input<S, A: Aggregate> {
    named: NamedAggregate,
    row: RowOf<A>,
    fold: FoldOf<S, A>,
    types: PhantomData<fn(S) -> A>,
}

/// What a fold's [`EventMeta`] is made of, owned, so that the fold can run later (inside the
/// store's transaction).
struct OwnedMeta {
    aggregate_id: AggregateId,
    version: u64,
    time: i64,
    owner_id: String,
}

impl<S: Send + 'static, A: Aggregate> ViewInput<S> for Input<S, A> {
    fn aggregate(&self) -> &NamedAggregate {
        &self.named
    }

    fn changes(&self, stream: &DomainEventStream) -> Result<Vec<RowChange<S>>, AggregateError> {
        let events = decode_events::<A>(stream)?;
        let owned = Arc::new(OwnedMeta {
            aggregate_id: stream.aggregate_id.clone(),
            version: stream.version,
            time: stream.create_time,
            owner_id: stream
                .header
                .get(OWNER_ID_HEADER)
                .cloned()
                .unwrap_or_default(),
        });
        let mut rows: Vec<(String, Vec<A::Event>)> = Vec::new();
        for event in events {
            let meta = meta_of(&owned, event.event_name());
            let Some(row) = (self.row)(&event, &meta) else {
                continue;
            };
            match rows.iter_mut().find(|(key, _)| *key == row) {
                Some((_, events)) => events.push(event),
                None => rows.push((row, vec![event])),
            }
        }
        let fold = self.fold;
        Ok(rows
            .into_iter()
            .map(|(row, events)| {
                let owned = owned.clone();
                RowChange {
                    row,
                    fold: Box::new(move |state: &mut S| {
                        for event in &events {
                            fold(state, event, &meta_of(&owned, event.event_name()));
                        }
                    }),
                }
            })
            .collect())
    }
}

fn meta_of<'a>(owned: &'a OwnedMeta, event_name: &'static str) -> EventMeta<'a> {
    EventMeta {
        aggregate_id: &owned.aggregate_id,
        version: owned.version,
        time: owned.time,
        owner_id: &owned.owner_id,
        event_name,
    }
}
