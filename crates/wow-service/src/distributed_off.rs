//! The distributed mode in a build without the `nats` feature: a monolith only. A gateway or
//! processor role is refused at start, naming the feature.

use std::sync::Arc;

use wow_core::Stores;
use wow_http::NodeStatus;
use wow_runtime::deadline::DeadlinePartitions;
use wow_runtime::pipeline::{LocalPipeline, LocalPipelineBuilder};

use crate::error::ServiceError;
use crate::settings::{Role, Settings};

/// No distribution: this type has no values.
pub(crate) enum Distribution {}

impl Distribution {
    /// `None` for a monolith; the other roles need the `nats` feature.
    pub(crate) async fn connect(settings: &Settings) -> Result<Option<Self>, ServiceError> {
        if settings.role == Role::Monolith {
            return Ok(None);
        }
        Err(ServiceError::NotBuiltIn {
            what: format!("the {} role", settings.role),
            feature: "nats",
        })
    }

    pub(crate) fn runs_consumers(&self) -> bool {
        match *self {}
    }

    pub(crate) fn apply(&self, _: LocalPipelineBuilder) -> LocalPipelineBuilder {
        match *self {}
    }

    pub(crate) async fn start(
        &mut self,
        _: &LocalPipeline,
        _: &Stores,
    ) -> Result<(), ServiceError> {
        match *self {}
    }

    pub(crate) fn deadline_owner(&self) -> Option<DeadlinePartitions> {
        match *self {}
    }

    pub(crate) fn status(&self) -> Arc<dyn NodeStatus> {
        match *self {}
    }

    pub(crate) async fn stop(self) {
        match self {}
    }
}
