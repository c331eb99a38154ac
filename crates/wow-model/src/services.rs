//! Services a handler consults before it decides (SPEC DM-3): the typed values a domain
//! declares and a service is assembled with, and how a call to one fails.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use crate::aggregate::DomainError;

/// The services a processing node hands its handlers, one value per type: a pricing client,
/// a currency table. Given where the service is assembled (a fake in tests); cheap to clone.
#[derive(Clone, Default)]
pub struct Services {
    by_type: HashMap<TypeId, (&'static str, Arc<dyn Any + Send + Sync>)>,
}

impl fmt::Debug for Services {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.by_type.values().map(|(name, _)| *name).collect();
        names.sort_unstable();
        f.debug_struct("Services").field("types", &names).finish()
    }
}

impl Services {
    /// No services.
    pub fn new() -> Self {
        Self::default()
    }

    /// These services and `service`, which replaces one of the same type.
    pub fn with<T: Send + Sync + 'static>(mut self, service: T) -> Self {
        self.insert(service);
        self
    }

    /// Adds `service`, replacing one of the same type.
    pub fn insert<T: Send + Sync + 'static>(&mut self, service: T) {
        self.by_type.insert(
            TypeId::of::<T>(),
            (std::any::type_name::<T>(), Arc::new(service)),
        );
    }

    /// The service of type `T`, if there is one.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.by_type
            .get(&TypeId::of::<T>())
            .and_then(|(_, service)| service.downcast_ref::<T>())
    }

    /// Whether a service of the type `need` names is there.
    pub fn provides(&self, need: &ServiceNeed) -> bool {
        self.by_type.contains_key(&need.type_id)
    }
}

/// A service an aggregate needs, by type ([`Aggregate::required_services`](crate::aggregate::Aggregate::required_services)):
/// assembling a service without it is refused before anything runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceNeed {
    type_id: TypeId,
    name: &'static str,
}

impl ServiceNeed {
    /// The need of a service of type `T`.
    pub fn of<T: Send + Sync + 'static>() -> Self {
        Self {
            type_id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
        }
    }

    /// The type's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// A service a handler consulted failed, or did not answer in time: a transient failure, not
/// a decision (SPEC DM-3, ID-6). Nothing is recorded; the resend with the same request id
/// decides again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("service `{service}` {}: {message}", if *.timed_out { "did not answer in time" } else { "failed" })]
pub struct ServiceFailure {
    /// The service, as the handler names it.
    pub service: String,
    /// What went wrong.
    pub message: String,
    /// Whether the call ran out of the command's time.
    pub timed_out: bool,
}

impl ServiceFailure {
    /// `service` failed with `message`.
    pub fn new(service: impl Into<String>, message: impl fmt::Display) -> Self {
        Self {
            service: service.into(),
            message: message.to_string(),
            timed_out: false,
        }
    }
}

/// Why a handler that consults services decided no events: a business rule of the domain
/// (recorded, as any rejection), or a service that failed (not recorded). `?` turns either
/// into it.
#[derive(Debug)]
pub enum Refusal<E> {
    /// A business rule refused the command.
    Rejected(E),
    /// A service the handler consulted failed.
    ServiceFailed(ServiceFailure),
}

impl<E: DomainError> From<E> for Refusal<E> {
    fn from(error: E) -> Self {
        Refusal::Rejected(error)
    }
}

impl<E> From<ServiceFailure> for Refusal<E> {
    fn from(failure: ServiceFailure) -> Self {
        Refusal::ServiceFailed(failure)
    }
}

/// Awaits `call`, a call to the service `service`, within the time left until `deadline`
/// (none: no bound), mapping its error to a [`ServiceFailure`].
pub(crate) async fn bounded<T, E: fmt::Display>(
    service: &str,
    deadline: Option<Instant>,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, ServiceFailure> {
    let answered = match deadline {
        Some(deadline) => {
            match tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), call).await {
                Ok(answered) => answered,
                Err(_) => {
                    return Err(ServiceFailure {
                        service: service.to_owned(),
                        message: "the command's time ran out".to_owned(),
                        timed_out: true,
                    })
                }
            }
        }
        None => call.await,
    };
    answered.map_err(|error| ServiceFailure::new(service, error))
}
