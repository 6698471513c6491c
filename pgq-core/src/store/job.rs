//! Reading job rows.

use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};

use crate::error::Result;
use crate::job::{AttemptError, Job, JobStatus};
use crate::job_id::JobId;
use crate::store::Store;
use crate::store::moment::{maybe_moment, moment};

const SELECT_JOB: &str = "SELECT * FROM pgq.jobs WHERE id = $1";

/// The job with this id, if it exists.
pub(crate) async fn find(store: &Store, conn: &mut PgConnection, id: JobId) -> Result<Option<Job>> {
    let row = sqlx::query(store.sql(SELECT_JOB))
        .persistent(store.prepared())
        .bind(id.get())
        .fetch_optional(conn)
        .await?;
    row.map(|row| decode(&row)).transpose()
}

pub(crate) fn decode(row: &PgRow) -> Result<Job> {
    let status: String = row.try_get("status")?;
    let status = status
        .parse::<JobStatus>()
        .map_err(|message| sqlx::Error::Decode(message.into()))?;
    // The column's domain holds an array; an entry pgq did not write there (SQL written by
    // hand) is left out rather than failing the job, and with it a page of a search.
    let Json(errors): Json<Vec<serde_json::Value>> = row.try_get("errors")?;
    let errors = errors
        .into_iter()
        .filter_map(|error| serde_json::from_value::<AttemptError>(error).ok())
        .collect();
    Ok(Job {
        id: JobId::from(row.try_get::<i64, _>("id")?),
        task: row.try_get("task")?,
        queue: row.try_get("queue")?,
        priority: row.try_get("priority")?,
        status,
        payload: row.try_get("payload")?,
        run_at: moment(row, "run_at")?,
        attempts: row.try_get("attempts")?,
        max_attempts: row.try_get("max_attempts")?,
        unique_key: row.try_get("unique_key")?,
        last_error: row.try_get("last_error")?,
        errors,
        progress: row.try_get("progress")?,
        current_stage: row.try_get("current_stage")?,
        events_count: row.try_get("events_count")?,
        worker_id: row.try_get("worker_id")?,
        claimed_at: maybe_moment(row, "claimed_at")?,
        lease_expires_at: maybe_moment(row, "lease_expires_at")?,
        cancel_requested_at: maybe_moment(row, "cancel_requested_at")?,
        created_at: moment(row, "created_at")?,
        started_at: maybe_moment(row, "started_at")?,
        completed_at: maybe_moment(row, "completed_at")?,
        updated_at: moment(row, "updated_at")?,
        meta: row.try_get("meta")?,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[super::SELECT_JOB]);
    }
}
