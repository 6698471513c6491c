//! [`JobId`]: the identity of one job row.

use std::fmt;

/// The id of a job row (`pgq.jobs.id`).
///
/// ```
/// use pgq_core::JobId;
/// let id = JobId::from(42);
/// assert_eq!(id.get(), 42);
/// assert_eq!(id.to_string(), "42");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(i64);

impl JobId {
    /// The number stored in the `id` column, for your own queries.
    ///
    /// ```no_run
    /// # async fn example(pool: sqlx::PgPool, id: pgq_core::JobId) -> Result<(), sqlx::Error> {
    /// sqlx::query("UPDATE orders SET export_job = $1 WHERE id = 42")
    ///     .bind(id.get())
    ///     .execute(&pool)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn get(self) -> i64 {
        self.0
    }
}

impl From<i64> for JobId {
    fn from(id: i64) -> Self {
        Self(id)
    }
}

impl From<JobId> for i64 {
    fn from(id: JobId) -> Self {
        id.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
