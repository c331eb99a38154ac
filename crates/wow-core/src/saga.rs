//! Sagas: react to events by sending commands through the gateway, with request ids
//! derived from the event that caused them (SPEC DS-3). The dispatcher that runs them is
//! `wow-runtime`'s; [`SagaSender`] is the seam between the two.
pub use crate::domain::saga::{
    saga_request_id, DynSaga, Saga, SagaContext, SagaDelivery, SagaExpect, SagaGiven, SagaReply,
    SagaSender, SagaSpec, SentCommand, SentLog, StepError, REJECTION_DETAIL,
};
