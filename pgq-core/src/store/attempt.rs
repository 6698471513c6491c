//! Recording how each attempt ended. Every update out of claimed/running is fenced on
//! (id, attempt, worker): zero rows changed means another attempt owns the job now.
//!
//! A statement that finds its job by id says "held" with the status, never with `phase = 1`: a
//! condition on `phase` lets the planner choose a partial index on it (the lease index), which
//! it scans whole — all held jobs, and every dead entry since the last vacuum — instead of
//! looking the id up.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row};

use crate::error::Result;
use crate::job_id::JobId;
use crate::limits;
use crate::store::{Store, run};
use crate::text;

/// Who holds an attempt: the fence every transition names.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fence<'a> {
    pub(crate) id: JobId,
    pub(crate) attempt: i32,
    pub(crate) worker_id: &'a str,
}

/// How many failed attempts a job's error history keeps, as the statements bind it.
pub(crate) const ERROR_HISTORY: i64 = limits::ERROR_HISTORY as i64;

const COMPLETE: &str = "
UPDATE pgq.jobs SET status = 'completed', phase = 2, progress = 100, completed_at = now(),
    lease_expires_at = NULL, updated_at = now()
WHERE id = $1 AND attempts = $2 AND worker_id = $3 AND status = 'running'";

/// [`COMPLETE`] for a worker that keeps no completed jobs (a retention of zero).
const COMPLETE_DELETING: &str = "
DELETE FROM pgq.jobs WHERE id = $1 AND attempts = $2 AND worker_id = $3 AND status = 'running'";

/// Completes the attempt on a connection of pgq's; deletes
/// the job instead when `deleting`. `false` when the fence no longer holds.
pub(crate) async fn complete(
    store: &Store,
    conn: &mut PgConnection,
    fence: Fence<'_>,
    deleting: bool,
) -> Result<bool> {
    let sql = if deleting {
        COMPLETE_DELETING
    } else {
        COMPLETE
    };
    let done = sqlx::query(store.sql(sql))
        .persistent(store.prepared())
        .bind(fence.id.get())
        .bind(fence.attempt)
        .bind(fence.worker_id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// [`COMPLETE`] in the handler's own transaction (`complete_in`), with the stage ($4) and events
/// ($5) the handler reported since the last write. A job still `claimed` in the transaction's
/// snapshot (taken, at repeatable read, before its start was written) completes with its start,
/// or fails to serialize; either is true of the attempt, where no row would say its lease was
/// lost. Completed already by this attempt (an earlier call in the same transaction): true.
const COMPLETE_IN: &str = "
WITH done AS (
    UPDATE pgq.jobs SET status = 'completed', phase = 2, progress = 100, completed_at = now(),
        started_at = CASE WHEN status = 'claimed' THEN claimed_at ELSE started_at END,
        current_stage = coalesce($4, current_stage), events_count = events_count + $5,
        lease_expires_at = NULL, updated_at = now()
    WHERE id = $1 AND attempts = $2 AND worker_id = $3 AND (status = 'claimed' OR status = 'running')
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM done)
    OR EXISTS (SELECT 1 FROM pgq.jobs
               WHERE id = $1 AND attempts = $2 AND worker_id = $3 AND status = 'completed')
       AS held,
       CASE WHEN EXISTS (SELECT 1 FROM done) THEN pg_current_xact_id()::text END AS xact";

/// What `complete_in`'s statement did.
#[derive(Debug)]
pub(crate) struct CompletedIn {
    /// The fence held: the job is completed in the handler's transaction (by this statement or
    /// an earlier one of the same attempt).
    pub(crate) held: bool,
    /// The id of the transaction this statement completed the job in; `None` when an earlier
    /// statement did.
    pub(crate) xact: Option<String>,
}

/// Whether the database stores any text as given: UTF-8, or no encoding at all.
const HOLDS_ANY_TEXT: &str =
    "SELECT pg_catalog.current_setting('server_encoding') = ANY (ARRAY['UTF8', 'SQL_ASCII'])";

/// Completes the attempt inside the handler's transaction. A stage beyond ASCII goes in ASCII
/// to a database whose encoding may lack its characters: a refused statement would abort the
/// handler's transaction, so the encoding is asked first, once per client.
pub(crate) async fn complete_in(
    store: &Store,
    conn: &mut PgConnection,
    fence: Fence<'_>,
    stage: Option<&str>,
    events: i32,
) -> Result<CompletedIn> {
    let ascii_stage;
    let stage = match stage {
        Some(stage) if !stage.is_ascii() => {
            let holds = match store.holds_any_text() {
                Some(holds) => holds,
                None => {
                    let holds: bool = sqlx::query_scalar(store.sql(HOLDS_ANY_TEXT))
                        .persistent(store.prepared())
                        .fetch_one(&mut *conn)
                        .await?;
                    store.found_holds_any_text(holds);
                    holds
                }
            };
            if holds {
                Some(stage)
            } else {
                ascii_stage = text::ascii(stage, limits::MAX_STAGE_BYTES);
                Some(ascii_stage.as_str())
            }
        }
        stage => stage,
    };
    let (held, xact) = sqlx::query_as(store.sql(COMPLETE_IN))
        .persistent(store.prepared())
        .bind(fence.id.get())
        .bind(fence.attempt)
        .bind(fence.worker_id)
        .bind(stage)
        .bind(events)
        .fetch_one(conn)
        .await?;
    Ok(CompletedIn { held, xact })
}

const XACT_STATUS: &str = "SELECT pg_xact_status($1::xid8)";

/// What became of a transaction that completed a job in the handler's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum XactStatus {
    /// Still open (or too old to tell).
    Open,
    Committed,
    Aborted,
}

/// What became of the transaction `xact` (from [`CompletedIn`]).
pub(crate) async fn xact_status(store: &Store, xact: &str) -> Result<XactStatus> {
    run!(store, |conn| async {
        let status: Option<String> = sqlx::query_scalar(store.sql(XACT_STATUS))
            .persistent(store.prepared())
            .bind(xact)
            .fetch_one(conn)
            .await?;
        Ok(match status.as_deref() {
            Some("committed") => XactStatus::Committed,
            Some("aborted") => XactStatus::Aborted,
            _ => XactStatus::Open,
        })
    })
}

const IS_COMPLETED: &str = "
SELECT EXISTS (SELECT 1 FROM pgq.jobs
               WHERE id = $1 AND attempts = $2 AND worker_id = $3 AND status = 'completed')";

/// [`IS_COMPLETED`] for a worker that keeps no completed jobs: the job is deleted once found.
const DELETE_COMPLETED: &str = "
WITH deleted AS (
    DELETE FROM pgq.jobs
    WHERE id = $1 AND attempts = $2 AND worker_id = $3 AND status = 'completed'
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM deleted)";

/// Whether this attempt completed the job (through `complete_in`, committed); when
/// `deleting`, the completed job is deleted in the same statement.
pub(crate) async fn is_completed(store: &Store, fence: Fence<'_>, deleting: bool) -> Result<bool> {
    let sql = if deleting {
        DELETE_COMPLETED
    } else {
        IS_COMPLETED
    };
    run!(store, |conn| async {
        Ok(sqlx::query_scalar(store.sql(sql))
            .persistent(store.prepared())
            .bind(fence.id.get())
            .bind(fence.attempt)
            .bind(fence.worker_id)
            .fetch_one(&mut *conn)
            .await?)
    })
}

const CANCELLED: &str = "
UPDATE pgq.jobs SET status = 'cancelled', phase = 2, completed_at = now(), lease_expires_at = NULL,
    last_error = coalesce($4, last_error), updated_at = now()
WHERE id = $1 AND attempts = $2 AND worker_id = $3 AND (status = 'claimed' OR status = 'running')";

/// Ends a held job `cancelled` after its handler saw the request. `false` when fenced off. An
/// error the database's encoding cannot hold is stored in ASCII rather than losing the outcome.
pub(crate) async fn cancelled(
    store: &Store,
    fence: Fence<'_>,
    error: Option<&str>,
) -> Result<bool> {
    match cancelled_with(store, fence, error).await {
        Err(err) if err.is_untranslatable() => {
            let error = error.map(|error| text::ascii(error, limits::MAX_ERROR_BYTES));
            cancelled_with(store, fence, error.as_deref()).await
        }
        written => written,
    }
}

async fn cancelled_with(store: &Store, fence: Fence<'_>, error: Option<&str>) -> Result<bool> {
    run!(store, |conn| async {
        let done = sqlx::query(store.sql(CANCELLED))
            .persistent(store.prepared())
            .bind(fence.id.get())
            .bind(fence.attempt)
            .bind(fence.worker_id)
            .bind(error)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    })
}

/// One statement for retry, retry-after, fail-now and snooze. `$4` is the action; `$5` an
/// explicit delay in milliseconds (NULL: the default backoff); `$6` the error message. A job
/// back to `pending` is nobody's, and its next attempt reports its own progress and stage. A job
/// whose cancel was asked for ends `cancelled` instead, whatever the action, with the error (a
/// snooze is none):
/// the worker may not have heard the request before its handler returned (behind a pooler it
/// hears at the next lease renewal), and a cancelled job is not run again.
const FAIL: &str = "
UPDATE pgq.jobs SET
    status = CASE
        WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
        WHEN $4 = 'snooze' THEN 'pending'
        WHEN $4 = 'fail' OR attempts >= max_attempts THEN 'failed'
        ELSE 'pending' END,
    phase = CASE WHEN cancel_requested_at IS NOT NULL
                      OR $4 <> 'snooze' AND ($4 = 'fail' OR attempts >= max_attempts) THEN 2
                 ELSE 0 END,
    attempts = CASE WHEN $4 = 'snooze' AND cancel_requested_at IS NULL THEN attempts - 1
                    ELSE attempts END,
    run_at = CASE
        WHEN cancel_requested_at IS NOT NULL THEN run_at
        WHEN $4 = 'snooze' THEN now() + ($5 * interval '1 millisecond')
        WHEN $4 = 'fail' OR attempts >= max_attempts THEN run_at
        ELSE now() + COALESCE($5 * interval '1 millisecond', pgq.default_backoff(attempts)) END,
    completed_at = CASE WHEN cancel_requested_at IS NOT NULL
                             OR $4 <> 'snooze' AND ($4 = 'fail' OR attempts >= max_attempts)
                        THEN now() END,
    last_error = CASE WHEN $4 = 'snooze' THEN last_error ELSE $6 END,
    errors = CASE WHEN $4 = 'snooze' THEN errors
                  ELSE pgq.append_error(errors, attempts, $6, $7) END,
    worker_id = CASE WHEN (cancel_requested_at IS NULL)
                          AND ($4 = 'snooze' OR ($4 <> 'fail' AND attempts < max_attempts))
                     THEN NULL ELSE worker_id END,
    progress = CASE WHEN (cancel_requested_at IS NULL)
                         AND ($4 = 'snooze' OR ($4 <> 'fail' AND attempts < max_attempts))
                    THEN 0 ELSE progress END,
    current_stage = CASE WHEN (cancel_requested_at IS NULL)
                              AND ($4 = 'snooze' OR ($4 <> 'fail' AND attempts < max_attempts))
                         THEN NULL ELSE current_stage END,
    lease_expires_at = NULL, updated_at = now()
WHERE id = $1 AND attempts = $2 AND worker_id = $3 AND (status = 'claimed' OR status = 'running')
RETURNING status, run_at, run_at <= now() AS due_now";

/// What a failed attempt turns into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Retry after the explicit delay, or the default backoff when `None`.
    Retry(Option<i64>),
    /// Fail now.
    Fail,
    /// Run again after the delay without spending the attempt.
    Snooze(i64),
}

/// Where a failed attempt left its job.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FailedState {
    /// `failed` for good, rather than back to `pending`.
    pub(crate) failed: bool,
    /// `cancelled`: a cancel was asked for before the failure was written.
    pub(crate) cancelled: bool,
    /// Pending and due at once.
    pub(crate) due_now: bool,
    /// When it runs again, unless failed.
    pub(crate) run_at: DateTime<Utc>,
}

/// Records a failed attempt. `None` when the fence no longer holds. An error the database's
/// encoding cannot hold (a `LATIN1` database, a message in Cyrillic or with pgq's own `…`) is
/// stored in ASCII rather than losing the outcome.
pub(crate) async fn fail(
    store: &Store,
    fence: Fence<'_>,
    failure: Failure,
    error: &str,
) -> Result<Option<FailedState>> {
    match fail_with(store, fence, failure, error).await {
        Err(err) if err.is_untranslatable() => {
            let error = text::ascii(error, limits::MAX_ERROR_BYTES);
            fail_with(store, fence, failure, &error).await
        }
        written => written,
    }
}

async fn fail_with(
    store: &Store,
    fence: Fence<'_>,
    failure: Failure,
    error: &str,
) -> Result<Option<FailedState>> {
    let (action, delay_ms) = match failure {
        Failure::Retry(delay) => ("retry", delay),
        Failure::Fail => ("fail", None),
        Failure::Snooze(delay) => ("snooze", Some(delay)),
    };
    run!(store, |conn| async {
        let row = sqlx::query(store.sql(FAIL))
            .persistent(store.prepared())
            .bind(fence.id.get())
            .bind(fence.attempt)
            .bind(fence.worker_id)
            .bind(action)
            .bind(delay_ms)
            .bind(error)
            .bind(ERROR_HISTORY)
            .fetch_optional(&mut *conn)
            .await?;
        row.map(|row| {
            let status = row.try_get::<String, _>("status")?;
            let (failed, cancelled) = (status == "failed", status == "cancelled");
            Ok(FailedState {
                failed,
                cancelled,
                due_now: !failed && !cancelled && row.try_get("due_now")?,
                run_at: row.try_get("run_at")?,
            })
        })
        .transpose()
    })
}

/// A released job keeps its `run_at`: it was due when claimed and is due still, so it keeps its
/// place in line, a scheduled job keeps its instant, and its wait is measured from when it came
/// due.
/// A job whose cancel was asked for ends `cancelled` instead: given back, it would run again.
macro_rules! give_back {
    () => {
        "
    status = CASE WHEN job.cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
    phase = CASE WHEN job.cancel_requested_at IS NULL THEN 0 ELSE 2 END,
    attempts = CASE WHEN job.cancel_requested_at IS NULL THEN job.attempts - 1
                    ELSE job.attempts END,
    worker_id = CASE WHEN job.cancel_requested_at IS NULL THEN NULL ELSE job.worker_id END,
    progress = CASE WHEN job.cancel_requested_at IS NULL THEN 0 ELSE job.progress END,
    current_stage = CASE WHEN job.cancel_requested_at IS NULL THEN NULL ELSE job.current_stage END,
    completed_at = CASE WHEN job.cancel_requested_at IS NULL THEN NULL ELSE now() END,
    lease_expires_at = NULL, updated_at = now()"
    };
}

const RELEASE: &str = concat!(
    "
UPDATE pgq.jobs AS job SET",
    give_back!(),
    "
WHERE id = $1 AND attempts = $2 AND worker_id = $3 AND (status = 'claimed' OR status = 'running')
RETURNING status = 'cancelled' AS cancelled"
);

/// Returns one attempt to `pending` without spending it, or ends it `cancelled` when a cancel
/// was asked for: `Some(cancelled)`, or `None` when the fence no longer holds.
pub(crate) async fn release(store: &Store, fence: Fence<'_>) -> Result<Option<bool>> {
    run!(store, |conn| async {
        let cancelled: Option<bool> = sqlx::query_scalar(store.sql(RELEASE))
            .persistent(store.prepared())
            .bind(fence.id.get())
            .bind(fence.attempt)
            .bind(fence.worker_id)
            .fetch_optional(&mut *conn)
            .await?;
        Ok(cancelled)
    })
}

/// Rows another statement holds are skipped, not waited for (so no order of locking is
/// needed): a concurrent completion or renewal takes them. The held jobs are found through the
/// index of held jobs, never by reading the table in id order. Each keeps its `run_at`, as
/// `RELEASE` says.
const RELEASE_WORKER: &str = concat!(
    "
WITH held AS (
    SELECT id FROM pgq.jobs WHERE worker_id = $1 AND phase = 1
    FOR UPDATE SKIP LOCKED
)
UPDATE pgq.jobs AS job SET",
    give_back!(),
    "
WHERE job.id = ANY(ARRAY(SELECT id FROM held))
RETURNING job.id"
);

/// Returns every job a worker holds to `pending` without spending their attempts.
pub(crate) async fn release_worker(store: &Store, worker_id: &str) -> Result<Vec<JobId>> {
    run!(store, |conn| async {
        let ids: Vec<i64> = sqlx::query_scalar(store.sql(RELEASE_WORKER))
            .persistent(store.prepared())
            .bind(worker_id)
            .fetch_all(&mut *conn)
            .await?;
        Ok(ids.into_iter().map(JobId::from).collect())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[
            super::COMPLETE,
            super::COMPLETE_DELETING,
            super::COMPLETE_IN,
            super::XACT_STATUS,
            super::HOLDS_ANY_TEXT,
            super::IS_COMPLETED,
            super::DELETE_COMPLETED,
            super::CANCELLED,
            super::FAIL,
            super::RELEASE,
            super::RELEASE_WORKER,
        ]);
    }

    #[tokio::test]
    async fn no_plan_reads_the_whole_table() {
        crate::store::plans::assert_no_whole_table_reads(
            crate::store::plans::Connections::Application,
            &[
                ("COMPLETE", super::COMPLETE, ""),
                ("IS_COMPLETED", super::IS_COMPLETED, ""),
                ("COMPLETE_DELETING", super::COMPLETE_DELETING, ""),
                ("COMPLETE_IN", super::COMPLETE_IN, ""),
                ("DELETE_COMPLETED", super::DELETE_COMPLETED, ""),
                ("CANCELLED", super::CANCELLED, ""),
                ("FAIL", super::FAIL, ""),
                ("RELEASE", super::RELEASE, ""),
                ("RELEASE_WORKER", super::RELEASE_WORKER, ""),
            ],
        )
        .await;
    }
}
