//! Operator actions on single jobs: cancel and retry.

use sqlx::{PgConnection, Row};

use crate::cancellation::Cancellation;
use crate::error::{Error, Result};
use crate::job::JobStatus;
use crate::job_id::JobId;
use crate::store::{Store, run};

const CANCEL: &str = "
WITH target AS (
    SELECT id, status, phase FROM pgq.jobs WHERE id = $1 FOR UPDATE
),
updated AS (
    UPDATE pgq.jobs AS job SET
        status = CASE WHEN target.phase = 0 THEN 'cancelled' ELSE job.status END,
        phase = CASE WHEN target.phase = 0 THEN 2 ELSE job.phase END,
        completed_at = CASE WHEN target.phase = 0 THEN now() END,
        cancel_requested_at = coalesce(job.cancel_requested_at, now()),
        updated_at = now()
    FROM target
    WHERE job.id = $1 AND job.id = target.id AND target.phase < 2
    RETURNING job.id, job.status, job.phase
)
SELECT target.status AS before, updated.status AS after,
       CASE WHEN updated.phase = 1 THEN pg_notify('pgq_cancel', target.id::text) END AS notified
FROM target LEFT JOIN updated ON true";

pub(crate) async fn cancel(store: &Store, id: JobId) -> Result<Cancellation> {
    run!(store, |conn| async {
        let row = sqlx::query(store.sql(CANCEL))
            .persistent(store.prepared())
            .bind(id.get())
            .fetch_optional(&mut *conn)
            .await?
            .ok_or(Error::JobNotFound(id))?;
        let before = status(row.try_get("before")?)?;
        match row.try_get::<Option<String>, _>("after")? {
            Some(after) if after == "cancelled" => Ok(Cancellation::Cancelled),
            Some(_) => Ok(Cancellation::Requested),
            None => Err(Error::JobState {
                id,
                status: before,
                action: "cancel",
            }),
        }
    })
}

const RETRY: &str = "
UPDATE pgq.jobs SET status = 'pending', phase = 0, run_at = now(),
    max_attempts = greatest(max_attempts, least(attempts + 1, 1000)),
    completed_at = NULL, cancel_requested_at = NULL, worker_id = NULL, progress = 0,
    current_stage = NULL,
    lease_expires_at = NULL, updated_at = now()
WHERE id = $1 AND (status = 'failed' OR status = 'cancelled')
RETURNING pg_notify('pgq_insert', queue)";

const STATUS: &str = "SELECT status FROM pgq.jobs WHERE id = $1";

pub(crate) async fn retry(store: &Store, id: JobId) -> Result<()> {
    run!(store, |conn| async {
        let retried = sqlx::query(store.sql(RETRY))
            .persistent(store.prepared())
            .bind(id.get())
            .fetch_optional(&mut *conn)
            .await;
        match retried {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(refusal(store, &mut *conn, id, "retry").await?),
            Err(err) if is_unique_violation(&err) => Err(Error::UniqueKeyHeld(id)),
            Err(err) => Err(err.into()),
        }
    })
}

/// Why an action on job `id` changed nothing: the job is missing
/// ([`Error::JobNotFound`]), or its status does not allow `action` ([`Error::JobState`]).
pub(crate) async fn refusal(
    store: &Store,
    conn: &mut PgConnection,
    id: JobId,
    action: &'static str,
) -> Result<Error> {
    let current: Option<String> = sqlx::query_scalar(store.sql(STATUS))
        .persistent(store.prepared())
        .bind(id.get())
        .fetch_optional(conn)
        .await?;
    Ok(match current {
        None => Error::JobNotFound(id),
        Some(current) => Error::JobState {
            id,
            status: status(current)?,
            action,
        },
    })
}

fn is_unique_violation(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| code == "23505")
}

fn status(name: String) -> Result<JobStatus> {
    name.parse()
        .map_err(|message: String| Error::Database(sqlx::Error::Decode(message.into())))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[super::CANCEL, super::RETRY, super::STATUS]);
    }

    #[tokio::test]
    async fn no_plan_reads_the_whole_table() {
        crate::store::plans::assert_no_whole_table_reads(
            crate::store::plans::Connections::Application,
            &[
                ("CANCEL", super::CANCEL, ""),
                ("RETRY", super::RETRY, ""),
                ("STATUS", super::STATUS, ""),
            ],
        )
        .await;
    }
}
