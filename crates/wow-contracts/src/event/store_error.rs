//! What the downstream stores (positions, effect journal, compensation records) fail with.

use wow_model::error::BoxError;

/// Why a downstream store (consumer positions, the effect journal, compensation records)
/// could not answer. Nothing was written when it fails.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerStoreError {
    /// The store could not be reached; try again later.
    #[error("consumer store unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The store failed in an unexpected way.
    #[error("consumer store failed: {0}")]
    Internal(#[source] BoxError),
}
