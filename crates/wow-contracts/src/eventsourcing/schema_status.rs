//! Where a database's schema stands against the migrations a build carries: what `wow migrate
//! --dry-run` reports before anything is applied.

use serde::Serialize;

/// One migration not applied yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingMigration {
    /// The schema version it brings the database to.
    pub version: u32,
    /// What it does: the first comment line of its SQL.
    pub summary: String,
}

/// A database's schema version, this build's, and the migrations between them. Migrations are
/// versioned and forward-only; a store applies the pending ones when it opens, in one
/// transaction, locked against another process migrating the same database at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaStatus {
    /// The version the database is at (0: no schema yet).
    pub found: u32,
    /// The version this build writes.
    pub latest: u32,
    /// What opening the store would apply, in order.
    pub pending: Vec<PendingMigration>,
}

impl SchemaStatus {
    /// The status of a database at `found` against `migrations` (migration `n`, 1-based, takes
    /// the schema from `n - 1` to `n`).
    pub fn of(found: u32, migrations: &[&str]) -> Self {
        let latest = u32::try_from(migrations.len()).unwrap_or(u32::MAX);
        let pending = migrations
            .iter()
            .enumerate()
            .skip(usize::try_from(found).unwrap_or(usize::MAX))
            .map(|(index, sql)| PendingMigration {
                version: u32::try_from(index + 1).unwrap_or(u32::MAX),
                summary: summary(sql),
            })
            .collect();
        Self {
            found,
            latest,
            pending,
        }
    }

    /// Whether the database is newer than this build (which then refuses to open it).
    pub fn is_too_new(&self) -> bool {
        self.found > self.latest
    }
}

/// The first comment line of `sql`, or its first statement's first line.
fn summary(sql: &str) -> String {
    let lines = sql.lines().map(str::trim).filter(|line| !line.is_empty());
    let mut first = None;
    for line in lines {
        if let Some(comment) = line.strip_prefix("--") {
            return comment.trim().to_owned();
        }
        first.get_or_insert(line);
    }
    first.unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_the_migrations_after_the_version_found_with_their_first_comment() {
        let migrations = [
            "CREATE TABLE a (x INT);",
            "\n  -- Adds b.\n  -- More.\n  CREATE TABLE b (x INT);",
            "-- Adds c.\nCREATE TABLE c (x INT);",
        ];
        let status = SchemaStatus::of(1, &migrations);
        assert_eq!(status.latest, 3);
        assert_eq!(
            status.pending,
            vec![
                PendingMigration {
                    version: 2,
                    summary: "Adds b.".into()
                },
                PendingMigration {
                    version: 3,
                    summary: "Adds c.".into()
                },
            ]
        );
        assert_eq!(
            SchemaStatus::of(0, &migrations).pending[0].summary,
            "CREATE TABLE a (x INT);"
        );
        assert!(SchemaStatus::of(3, &migrations).pending.is_empty());
        assert!(SchemaStatus::of(4, &migrations).is_too_new());
    }
}
