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
/// Made and changed by an `AggregateRuntime` (wow-core); the typed state
/// inside can be read with [`AggregateState::downcast_ref`].
#[derive(Debug)]
pub struct AggregateState {
    version: u64,
    tenant_id: Option<String>,
    schema: u32,
    deleted: bool,
    inner: Box<dyn StateObject>,
}

impl Clone for AggregateState {
    fn clone(&self) -> Self {
        Self {
            version: self.version,
            tenant_id: self.tenant_id.clone(),
            schema: self.schema,
            deleted: self.deleted,
            inner: self.inner.clone_box(),
        }
    }
}

impl AggregateState {
    #[doc(hidden)]
    pub fn new<S>(state: S, version: u64) -> Self
    where
        S: Clone + Serialize + fmt::Debug + Send + Sync + 'static,
    {
        Self {
            version,
            tenant_id: None,
            schema: 1,
            deleted: false,
            inner: Box::new(state),
        }
    }

    #[doc(hidden)]
    pub fn with_schema(mut self, schema: u32) -> Self {
        self.schema = schema;
        self
    }

    /// The schema version of the state's shape ([`Aggregate::STATE_VERSION`](crate::aggregate::Aggregate::STATE_VERSION)),
    /// recorded with its snapshots.
    pub fn schema_version(&self) -> u32 {
        self.schema
    }

    #[doc(hidden)]
    pub fn with_tenant(mut self, tenant_id: &str) -> Self {
        self.tenant_id = Some(tenant_id.to_owned());
        self
    }

    /// The tenant that owns the aggregate, fixed by its first stream (`None` before it).
    pub fn tenant_id(&self) -> Option<&str> {
        self.tenant_id.as_deref()
    }

    /// Whether the aggregate exists and belongs to `tenant_id`.
    pub fn belongs_to(&self, tenant_id: &str) -> bool {
        self.exists() && self.tenant_id.as_deref() == Some(tenant_id)
    }

    /// The version of the last stream folded in (0 before the first).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether the aggregate exists.
    pub fn exists(&self) -> bool {
        self.version > 0
    }

    /// Whether the aggregate was deleted softly (and not recovered since): it refuses every
    /// command but `recover`, and keeps its history.
    pub fn is_deleted(&self) -> bool {
        self.deleted
    }

    /// Marks the state deleted softly, or not: how a state restored from a copy that records
    /// its deletion apart (a materialized snapshot) gets that mark back.
    pub fn set_deleted(&mut self, deleted: bool) {
        self.deleted = deleted;
    }

    #[doc(hidden)]
    pub fn set_version(&mut self, version: u64, tenant_id: &str) {
        self.version = version;
        if self.tenant_id.is_none() {
            self.tenant_id = Some(tenant_id.to_owned());
        }
    }

    /// The typed state, if it is an `S`.
    pub fn downcast_ref<S: 'static>(&self) -> Option<&S> {
        self.inner.as_any().downcast_ref()
    }

    #[doc(hidden)]
    pub fn downcast_mut<S: 'static>(&mut self) -> Option<&mut S> {
        self.inner.as_any_mut().downcast_mut()
    }

    /// The state as JSON.
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        self.inner.to_json()
    }
}
