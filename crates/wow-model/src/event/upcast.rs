//! Upcasters: how events stored in an older shape are read in today's. History is never
//! rewritten (SPEC ES-3); an upcaster turns a stored event's JSON at one revision into the
//! event (or events, or none) of the next, every time history is read.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// One event as upcasters see it: its name, its schema revision and its JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct EventShape {
    /// The event's name.
    pub name: String,
    /// The event's schema revision.
    pub revision: String,
    /// The event's body.
    pub body: Value,
}

impl EventShape {
    /// The event `name` at `revision` with `body`.
    pub fn new(name: impl Into<String>, revision: impl Into<String>, body: Value) -> Self {
        Self {
            name: name.into(),
            revision: revision.into(),
            body,
        }
    }
}

/// Why a stored event could not be upcast: its JSON is not what the upcaster of its name and
/// revision expects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UpcastError(pub String);

impl UpcastError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

type Step = Arc<dyn Fn(EventShape) -> Result<Vec<EventShape>, UpcastError> + Send + Sync>;

/// The most steps one stored event may take: a chain longer than this is a loop.
const MAX_STEPS: usize = 64;

/// The upcasters of one aggregate's events, keyed by the stored event's name and revision.
/// An aggregate declares them once ([`Aggregate::upcasters`](crate::aggregate::Aggregate::upcasters));
/// they run on every read of history (the node, views, sagas, outboxes, catch-up, the HTTP
/// history routes) and never write history back.
///
/// Each step takes the event stored as (name, revision) to what it returns, and the steps
/// chain: the result is upcast again until no step matches. A step may rename an event, add
/// or rename fields (at a new revision), split one event into several, or drop it.
#[derive(Clone, Default)]
pub struct Upcasters {
    /// By name, then by revision: looked up with borrowed names, no copy per event.
    exact: HashMap<String, HashMap<String, Step>>,
    any_revision: HashMap<String, Step>,
}

impl fmt::Debug for Upcasters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut exact: Vec<_> = self
            .exact
            .iter()
            .flat_map(|(name, revisions)| revisions.keys().map(move |revision| (name, revision)))
            .collect();
        exact.sort();
        let mut any: Vec<_> = self.any_revision.keys().collect();
        any.sort();
        f.debug_struct("Upcasters")
            .field("steps", &exact)
            .field("any_revision", &any)
            .finish()
    }
}

impl Upcasters {
    /// No upcasters: every event is read as stored.
    pub fn new() -> Self {
        Self::default()
    }

    /// The event stored as `name` at `revision` becomes what `step` makes of its body: one
    /// event at a newer revision (fields renamed or added with defaults), several (a split),
    /// or none (dropped).
    pub fn upcast(
        mut self,
        name: impl Into<String>,
        revision: impl Into<String>,
        step: impl Fn(Value) -> Result<Vec<EventShape>, UpcastError> + Send + Sync + 'static,
    ) -> Self {
        self.exact.entry(name.into()).or_default().insert(
            revision.into(),
            Arc::new(move |shape: EventShape| step(shape.body)),
        );
        self
    }

    /// Events stored under the name `old` (at any revision) are read as `new`, body and
    /// revision unchanged: an event type renamed in code.
    pub fn rename_event(mut self, old: impl Into<String>, new: impl Into<String>) -> Self {
        let new = new.into();
        self.any_revision.insert(
            old.into(),
            Arc::new(move |shape: EventShape| {
                Ok(vec![EventShape {
                    name: new.clone(),
                    ..shape
                }])
            }),
        );
        self
    }

    /// Events stored under `name` (at any revision) are skipped: they no longer mean
    /// anything. The stream's other events, and its version, stay.
    pub fn drop_event(mut self, name: impl Into<String>) -> Self {
        self.any_revision
            .insert(name.into(), Arc::new(|_shape: EventShape| Ok(Vec::new())));
        self
    }

    /// Whether no upcaster is declared.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.any_revision.is_empty()
    }

    fn step_for(&self, shape: &EventShape) -> Option<&Step> {
        self.exact
            .get(&shape.name)
            .and_then(|revisions| revisions.get(&shape.revision))
            .or_else(|| self.any_revision.get(&shape.name))
    }

    /// Whether an event stored as `name` at `revision` is changed by these upcasters.
    pub fn applies_to(&self, name: &str, revision: &str) -> bool {
        self.any_revision.contains_key(name)
            || self
                .exact
                .get(name)
                .is_some_and(|revisions| revisions.contains_key(revision))
    }

    /// Today's shape of the event stored as `shape`: every matching step in turn, until none
    /// matches.
    ///
    /// # Errors
    ///
    /// The [`UpcastError`] of a step, or one saying the chain loops.
    pub fn apply(&self, shape: EventShape) -> Result<Vec<EventShape>, UpcastError> {
        let mut done = Vec::new();
        let mut pending = vec![(shape, 0usize)];
        while let Some((shape, steps)) = pending.pop() {
            let Some(step) = self.step_for(&shape) else {
                done.push(shape);
                continue;
            };
            if steps >= MAX_STEPS {
                return Err(UpcastError::new(format!(
                    "the upcasters of `{}` at revision {} loop",
                    shape.name, shape.revision
                )));
            }
            let next = step(shape)?;
            // Kept in order: the last pushed is taken first.
            pending.extend(next.into_iter().rev().map(|shape| (shape, steps + 1)));
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn stored(name: &str, revision: &str, body: Value) -> EventShape {
        EventShape::new(name, revision, body)
    }

    #[test]
    fn an_event_without_upcasters_is_read_as_stored() {
        let upcasters = Upcasters::new();
        let shape = stored("opened", "0.0.1", json!({"name": "Ann"}));
        assert_eq!(upcasters.apply(shape.clone()).unwrap(), vec![shape]);
        assert!(upcasters.is_empty());
    }

    #[test]
    fn a_chain_across_three_revisions_renames_a_field_adds_one_and_renames_the_event() {
        let upcasters = Upcasters::new()
            .upcast("deposit", "1", |mut body| {
                // 1 → 2: `sum` became `amount`.
                let amount = body["sum"].take();
                Ok(vec![EventShape::new(
                    "deposit",
                    "2",
                    json!({"amount": amount}),
                )])
            })
            .upcast("deposit", "2", |mut body| {
                // 2 → 3: a currency, EUR for everything before.
                body["currency"] = json!("EUR");
                Ok(vec![EventShape::new("deposit", "3", body)])
            })
            .rename_event("deposit", "deposited");
        // An event at revision 1 takes every step; one already at revision 2 takes only the
        // steps after it.
        for (revision, body, amount) in
            [("1", json!({"sum": 5}), 5), ("2", json!({"amount": 7}), 7)]
        {
            let today = upcasters.apply(stored("deposit", revision, body)).unwrap();
            assert_eq!(
                today,
                vec![stored(
                    "deposited",
                    "3",
                    json!({"amount": amount, "currency": "EUR"})
                )],
                "from revision {revision}"
            );
        }
        assert!(
            upcasters.applies_to("deposit", "9"),
            "renamed at any revision"
        );
        assert!(!upcasters.applies_to("deposited", "3"));
    }

    #[test]
    fn a_split_keeps_its_parts_in_order_and_each_part_is_upcast_further() {
        let upcasters = Upcasters::new()
            .upcast("moved", "1", |body| {
                Ok(vec![
                    EventShape::new("left", "1", json!({"from": body["from"]})),
                    EventShape::new("arrived", "1", json!({"to": body["to"]})),
                ])
            })
            .upcast("left", "1", |body| {
                Ok(vec![EventShape::new("departed", "2", body)])
            });
        let today = upcasters
            .apply(stored("moved", "1", json!({"from": "a", "to": "b"})))
            .unwrap();
        assert_eq!(
            today,
            vec![
                stored("departed", "2", json!({"from": "a"})),
                stored("arrived", "1", json!({"to": "b"})),
            ]
        );
    }

    #[test]
    fn a_dropped_event_yields_nothing_and_a_loop_or_a_bad_body_is_an_error() {
        let upcasters = Upcasters::new()
            .drop_event("audited")
            .rename_event("ping", "pong")
            .rename_event("pong", "ping")
            .upcast("paid", "1", |body| {
                let amount = body["amount"]
                    .as_i64()
                    .ok_or_else(|| UpcastError::new("`amount` is not a whole number"))?;
                Ok(vec![EventShape::new(
                    "paid",
                    "2",
                    json!({"cents": amount * 100}),
                )])
            });
        assert!(upcasters
            .apply(stored("audited", "7", json!({})))
            .unwrap()
            .is_empty());
        let looped = upcasters.apply(stored("ping", "1", json!({}))).unwrap_err();
        assert!(looped.0.contains("loop"), "{looped}");
        let bad = upcasters
            .apply(stored("paid", "1", json!({"amount": "x"})))
            .unwrap_err();
        assert!(bad.0.contains("amount"), "{bad}");
    }
}
