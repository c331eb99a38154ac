//! The error type of whatever a store, a bus or a consumer reports from below it.

/// A boxed error from a backend (a driver's, an I/O error, ...).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
