//! An aggregate's state with its type erased, so that JSON-driven parts can hold it.

use std::any::Any;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

trait StateObject: Any + Send + Sync + fmt::Debug {
    fn clone_box(&self) -> Box<dyn StateObject>;
    fn to_json(&self) -> Result<Value, serde_json::Error>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<S> StateObject for S
where
    S: Clone + Serialize + fmt::Debug + Send + Sync + 'static,
{
    fn clone_box(&self) -> Box<dyn StateObject> {
        Box::new(self.clone())
    }

    fn to_json(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// One aggregate's state and the version it reflects (0: the aggregate does not exist yet).
///
/// Made and changed by an [`AggregateRuntime`](super::AggregateRuntime); the typed state
/// inside can be read with [`AggregateState::downcast_ref`].
#[derive(Debug)]
pub struct AggregateState {
    version: u64,
    inner: Box<dyn StateObject>,
}

impl Clone for AggregateState {
    fn clone(&self) -> Self {
        Self {
            version: self.version,
            inner: self.inner.clone_box(),
        }
    }
}

impl AggregateState {
    pub(crate) fn new<S>(state: S, version: u64) -> Self
    where
        S: Clone + Serialize + fmt::Debug + Send + Sync + 'static,
    {
        Self {
            version,
            inner: Box::new(state),
        }
    }

    /// The version of the last stream folded in (0 before the first).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether the aggregate exists.
    pub fn exists(&self) -> bool {
        self.version > 0
    }

    pub(crate) fn set_version(&mut self, version: u64) {
        self.version = version;
    }

    /// The typed state, if it is an `S`.
    pub fn downcast_ref<S: 'static>(&self) -> Option<&S> {
        self.inner.as_any().downcast_ref()
    }

    pub(crate) fn downcast_mut<S: 'static>(&mut self) -> Option<&mut S> {
        self.inner.as_any_mut().downcast_mut()
    }

    /// The state as JSON.
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        self.inner.to_json()
    }
}
