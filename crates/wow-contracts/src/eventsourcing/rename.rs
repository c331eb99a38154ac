//! Renaming an aggregate in the store: every row kept under its old name re-keyed to the new
//! one, so that history, request ids, rejections, snapshots, consumer positions and
//! compensation records go on as one aggregate's.
//!
//! Reading an old name beside the new one is not enough: the store's keys (and so its
//! request-id uniqueness, SPEC ID-6, and its version check, ES-1) include the aggregate name,
//! and an aggregate kept under two names could take one request id twice. The rows are
//! re-keyed instead, once, in one transaction; the events themselves are not touched.

use std::sync::Arc;

use async_trait::async_trait;

use wow_model::error_code::ErrorCode;

/// How many rows a rename re-keyed (or, in a dry run, would re-key), by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RenamedRows {
    /// Appended streams and recorded rejections (one row each).
    pub streams: u64,
    /// Snapshots.
    pub snapshots: u64,
    /// Consumer positions.
    pub positions: u64,
    /// Compensation records (failed executions, quarantines).
    pub failures: u64,
}

impl RenamedRows {
    /// Counts of each kind.
    pub fn new(streams: u64, snapshots: u64, positions: u64, failures: u64) -> Self {
        Self {
            streams,
            snapshots,
            positions,
            failures,
        }
    }

    /// Whether nothing was (or would be) re-keyed: the rename was done before, or the old
    /// name never held anything.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Every row, of any kind.
    pub fn total(&self) -> u64 {
        self.streams + self.snapshots + self.positions + self.failures
    }
}

impl std::fmt::Display for RenamedRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} streams, {} snapshots, {} consumer positions, {} compensation records",
            self.streams, self.snapshots, self.positions, self.failures
        )
    }
}

/// Why a rename changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RenameError {
    /// One aggregate has rows under both names: merging two histories is not a rename, so
    /// nothing was changed. Usually a process of the previous release went on writing under
    /// the old name after the rename: stop it, then decide which history is the aggregate's.
    #[error("aggregate `{id}` of tenant `{tenant}` has rows under both `{from}` and `{to}`: nothing was renamed (is a process of the previous release still writing under `{from}`?)")]
    Conflict {
        /// The old name.
        from: String,
        /// The new name.
        to: String,
        /// The aggregate's tenant.
        tenant: String,
        /// The aggregate's id.
        id: String,
    },
    /// A name is empty, or both are the same.
    #[error("cannot rename aggregate `{from}` to `{to}`: {reason}")]
    Invalid {
        /// The old name.
        from: String,
        /// The new name.
        to: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The store could not be reached; nothing was changed. Try again.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// The store failed otherwise; nothing was changed.
    #[error("the store failed: {0}")]
    Internal(String),
}

impl RenameError {
    /// The error code this error reports as.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            RenameError::Conflict { .. } => ErrorCode::IllegalState,
            RenameError::Invalid { .. } => ErrorCode::IllegalArgument,
            RenameError::Unavailable(_) => ErrorCode::ServiceUnavailable,
            RenameError::Internal(_) => ErrorCode::InternalServerError,
        }
    }
}

/// Checks the names of a rename before any store is asked.
pub fn check_rename(from: &str, to: &str) -> Result<(), RenameError> {
    let invalid = |reason| RenameError::Invalid {
        from: from.to_owned(),
        to: to.to_owned(),
        reason,
    };
    if from.is_empty() || to.is_empty() {
        return Err(invalid("a name is empty"));
    }
    if from == to {
        return Err(invalid("the names are the same"));
    }
    Ok(())
}

/// A rename of the aggregate named `from` to `to`, in every tenant
/// ([`AggregateRenames::rename_aggregate`]); with `dry_run`, only counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AggregateRename<'a> {
    /// The name the aggregate's rows are kept under (its former name, an alias).
    pub from: &'a str,
    /// The name they are re-keyed to.
    pub to: &'a str,
    /// Only say what would be re-keyed, and change nothing.
    pub dry_run: bool,
}

impl<'a> AggregateRename<'a> {
    /// The rename of `from` to `to`, written (not a dry run).
    pub fn new(from: &'a str, to: &'a str) -> Self {
        Self {
            from,
            to,
            dry_run: false,
        }
    }

    /// The same rename as a dry run: counted, nothing changed.
    pub fn dry_run(self) -> Self {
        Self {
            dry_run: true,
            ..self
        }
    }

    /// This rename once its names pass [`check_rename`] (checked before any store is asked),
    /// or why they do not.
    pub fn checked(self) -> Result<Self, RenameError> {
        check_rename(self.from, self.to)?;
        Ok(self)
    }

    /// The refusal of this rename because the aggregate `id` of `tenant` has rows under both
    /// names: [`RenameError::Conflict`].
    pub fn conflict(&self, tenant: String, id: String) -> RenameError {
        RenameError::Conflict {
            from: self.from.to_owned(),
            to: self.to.to_owned(),
            tenant,
            id,
        }
    }
}

/// A store that can re-key an aggregate kept under an old name (an alias, see
/// [`Aggregate::ALIASES`](wow_model::aggregate::Aggregate::ALIASES)) to its new name.
#[async_trait]
pub trait AggregateRenames: Send + Sync + std::fmt::Debug {
    /// Re-keys every row of the aggregate named `rename.from`, of every tenant, to
    /// `rename.to`: streams and rejections (with their request ids), snapshots, consumer
    /// positions and compensation records, all in one transaction, and says how many of each.
    /// The events, their ids and their global feed positions stay as they are.
    ///
    /// Running it again changes nothing (empty counts). With `rename.dry_run` it says what it
    /// would re-key and changes nothing; a conflict is found then too.
    ///
    /// # Errors
    ///
    /// [`RenameError::Conflict`] when one (tenant, id) has rows under both names,
    /// [`RenameError::Invalid`] for empty or equal names, and the store's own failures; in
    /// every case nothing was changed.
    async fn rename_aggregate(
        &self,
        rename: AggregateRename<'_>,
    ) -> Result<RenamedRows, RenameError>;
}

#[async_trait]
impl<T: AggregateRenames + ?Sized> AggregateRenames for Arc<T> {
    async fn rename_aggregate(
        &self,
        rename: AggregateRename<'_>,
    ) -> Result<RenamedRows, RenameError> {
        (**self).rename_aggregate(rename).await
    }
}

/// Renames over the in-memory stores of [`Stores::in_memory`](crate::stores::Stores::in_memory):
/// the reference for the durable versions (each store is checked for a conflict first, then
/// re-keyed, under its own locks).
#[derive(Debug, Clone)]
pub struct InMemoryRenames {
    pub(crate) events: Arc<super::InMemoryEventStore>,
    pub(crate) snapshots: Arc<super::InMemorySnapshotStore>,
    pub(crate) positions: Arc<crate::event::InMemoryConsumerPositions>,
    pub(crate) compensation: Arc<crate::compensation::InMemoryCompensationStore>,
}

#[async_trait]
impl AggregateRenames for InMemoryRenames {
    async fn rename_aggregate(
        &self,
        rename: AggregateRename<'_>,
    ) -> Result<RenamedRows, RenameError> {
        let AggregateRename { from, to, dry_run } = rename.checked()?;
        let conflict = self
            .events
            .rename_conflict(from, to)
            .or_else(|| self.snapshots.rename_conflict(from, to))
            .or_else(|| self.positions.rename_conflict(from, to));
        if let Some((tenant, id)) = conflict {
            return Err(rename.conflict(tenant, id));
        }
        Ok(RenamedRows::new(
            self.events.rename(from, to, dry_run),
            self.snapshots.rename(from, to, dry_run),
            self.positions.rename(from, to, dry_run),
            self.compensation.rename(from, to, dry_run),
        ))
    }
}
