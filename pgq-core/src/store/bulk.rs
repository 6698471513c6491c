//! Operator actions on many jobs, one statement per batch of ids: each locks the jobs it may
//! change in id order, changes only those whose status allows it (the fence: a job that moved
//! meanwhile is left alone), writes `phase` with `status`, and reports every id it was given
//! with the status it found, so that what was skipped says why. Every read of the table is by
//! `id = ANY(...)`, and no update or delete joins its jobs to another list, so that no plan of
//! it scans the whole table or compares every pair of a batch's jobs, whatever the statistics
//! (see `store::plans`). An action by filter also passes the filter's statuses, checked under
//! the lock: a job that left them since the search (a pending job a worker claimed) is left
//! alone, even where the action could change it.

use std::collections::HashSet;

use sqlx::Row;

use crate::admin::action::{ActionReport, SkipReason};
use crate::error::{Error, Result};
use crate::job::JobStatus;
use crate::job_id::JobId;
use crate::store::{Store, run};

/// The end of every action's statement: one row per job asked for, with its status before
/// (none: no such job) and its phase after (none: left alone), from the CTE named `$changed`.
macro_rules! per_asked_job {
    ($changed:literal) => {
        concat!(
            "
FROM unnest($1::int8[]) AS asked(id)
LEFT JOIN (SELECT id, status FROM pgq.jobs WHERE id = ANY($1)) AS before ON before.id = asked.id
LEFT JOIN ",
            $changed,
            " ON ",
            $changed,
            ".id = asked.id"
        )
    };
}

/// Failed or cancelled jobs back to pending, due now, with at least `$2` attempts left.
const RETRY: &str = concat!(
    "
WITH target AS (
    SELECT id FROM pgq.jobs
    WHERE id = ANY($1) AND (status = 'failed' OR status = 'cancelled')
      AND ($3::text[] IS NULL OR status = ANY($3::text[]))
    ORDER BY id
    FOR UPDATE
),
changed AS (
    UPDATE pgq.jobs AS job SET status = 'pending', phase = 0, run_at = now(),
        max_attempts = greatest(job.max_attempts, least(job.attempts + $2, 1000)),
        completed_at = NULL, cancel_requested_at = NULL, worker_id = NULL, progress = 0,
        current_stage = NULL,
        lease_expires_at = NULL, updated_at = now()
    WHERE job.id = ANY(ARRAY(SELECT id FROM target))
    RETURNING job.id, job.phase, pg_notify('pgq_insert', job.queue)::text AS notified
)
SELECT asked.id, before.status AS before, changed.phase AS after",
    per_asked_job!("changed")
);

/// Pending jobs cancelled at once; claimed and running ones asked to stop (their handlers'
/// `ctx.cancelled()` fires through the cancel channel), as `Client::cancel` does one job.
const CANCEL: &str = concat!(
    "
WITH target AS (
    SELECT id FROM pgq.jobs
    WHERE id = ANY($1) AND phase < 2 AND ($2::text[] IS NULL OR status = ANY($2::text[]))
    ORDER BY id
    FOR UPDATE
),
changed AS (
    UPDATE pgq.jobs AS job SET
        status = CASE WHEN job.phase = 0 THEN 'cancelled' ELSE job.status END,
        phase = CASE WHEN job.phase = 0 THEN 2 ELSE job.phase END,
        completed_at = CASE WHEN job.phase = 0 THEN now() ELSE job.completed_at END,
        cancel_requested_at = coalesce(job.cancel_requested_at, now()),
        updated_at = now()
    WHERE job.id = ANY(ARRAY(SELECT id FROM target))
    RETURNING job.id, job.phase
)
SELECT asked.id, before.status AS before, changed.phase AS after,
       CASE WHEN changed.phase = 1 THEN pg_notify('pgq_cancel', asked.id::text)::text END AS notified",
    per_asked_job!("changed")
);

/// Finished jobs deleted; with `$2`, any job. A held job's handler is told to stop: whatever it
/// writes later finds no row, as after a lost lease.
const DELETE: &str = concat!(
    "
WITH target AS (
    SELECT id FROM pgq.jobs
    WHERE id = ANY($1) AND (phase = 2 OR $2) AND ($3::text[] IS NULL OR status = ANY($3::text[]))
    ORDER BY id
    FOR UPDATE
),
deleted AS (
    DELETE FROM pgq.jobs AS job
    WHERE job.id = ANY(ARRAY(SELECT id FROM target))
    RETURNING job.id, job.phase
)
SELECT asked.id, before.status AS before, deleted.phase AS after,
       CASE WHEN deleted.phase = 1 THEN pg_notify('pgq_cancel', asked.id::text)::text END AS notified",
    per_asked_job!("deleted")
);

/// Pending jobs due now; one already due keeps its `run_at`, and so its place.
const RUN_NOW: &str = concat!(
    "
WITH target AS (
    SELECT id FROM pgq.jobs
    WHERE id = ANY($1) AND phase = 0 AND ($2::text[] IS NULL OR status = ANY($2::text[]))
    ORDER BY id
    FOR UPDATE
),
changed AS (
    UPDATE pgq.jobs AS job SET run_at = least(job.run_at, now()), updated_at = now()
    WHERE job.id = ANY(ARRAY(SELECT id FROM target))
    RETURNING job.id, job.phase, pg_notify('pgq_insert', job.queue)::text AS notified
)
SELECT asked.id, before.status AS before, changed.phase AS after",
    per_asked_job!("changed")
);

/// Pending jobs given priority `$2`.
const PRIORITY: &str = concat!(
    "
WITH target AS (
    SELECT id FROM pgq.jobs
    WHERE id = ANY($1) AND phase = 0 AND ($3::text[] IS NULL OR status = ANY($3::text[]))
    ORDER BY id
    FOR UPDATE
),
changed AS (
    UPDATE pgq.jobs AS job SET priority = $2, updated_at = now()
    WHERE job.id = ANY(ARRAY(SELECT id FROM target))
    RETURNING job.id, job.phase
)
SELECT asked.id, before.status AS before, changed.phase AS after",
    per_asked_job!("changed")
);

/// An action on a batch of jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Failed or cancelled → pending, with at least this many attempts left.
    Retry { attempts_left: i32 },
    /// Pending → cancelled; claimed or running: asked to stop.
    Cancel,
    /// Finished jobs deleted; any job with `force`.
    Delete { force: bool },
    /// Pending → due now.
    RunNow,
    /// Pending → this priority.
    Priority(i16),
}

impl Action {
    /// The statuses the action may change, for actions by filter.
    pub(crate) fn statuses(self) -> &'static [JobStatus] {
        use JobStatus::*;
        match self {
            Action::Retry { .. } => &[Failed, Cancelled],
            Action::Cancel => &[Pending, Claimed, Running],
            Action::Delete { force: false } => &[Completed, Failed, Cancelled],
            Action::Delete { force: true } => {
                &[Pending, Claimed, Running, Completed, Failed, Cancelled]
            }
            Action::RunNow | Action::Priority(_) => &[Pending],
        }
    }
}

/// Applies `action` to `ids` (distinct, at most a batch) in one statement. A retry that would
/// give a unique key a second active job fails its whole statement: the batch is then retried
/// one job at a time, and the jobs that conflict are skipped.
pub(crate) async fn apply(
    store: &Store,
    action: Action,
    ids: &[i64],
    statuses: Option<&[JobStatus]>,
) -> Result<ActionReport> {
    let statuses: Option<Vec<&'static str>> =
        statuses.map(|statuses| statuses.iter().map(|s| s.as_str()).collect());
    let statuses = statuses.as_deref();
    match run_batch(store, action, ids, statuses).await {
        Err(err) if is_unique_violation(&err) && ids.len() > 1 => {
            let mut report = ActionReport::default();
            for &id in ids {
                report.extend(match run_batch(store, action, &[id], statuses).await {
                    Err(err) if is_unique_violation(&err) => ActionReport {
                        skipped: vec![(JobId::from(id), SkipReason::UniqueKeyHeld)],
                        ..ActionReport::default()
                    },
                    other => other?,
                });
            }
            Ok(report)
        }
        Err(err) if is_unique_violation(&err) => Ok(ActionReport {
            skipped: ids
                .iter()
                .map(|&id| (JobId::from(id), SkipReason::UniqueKeyHeld))
                .collect(),
            ..ActionReport::default()
        }),
        other => other,
    }
}

async fn run_batch(
    store: &Store,
    action: Action,
    ids: &[i64],
    statuses: Option<&[&str]>,
) -> Result<ActionReport> {
    let rows = run!(store, |conn| async {
        let query = match action {
            Action::Retry { attempts_left } => sqlx::query(store.sql(RETRY))
                .bind(ids)
                .bind(attempts_left.max(1))
                .bind(statuses),
            Action::Cancel => sqlx::query(store.sql(CANCEL)).bind(ids).bind(statuses),
            Action::Delete { force } => sqlx::query(store.sql(DELETE))
                .bind(ids)
                .bind(force)
                .bind(statuses),
            Action::RunNow => sqlx::query(store.sql(RUN_NOW)).bind(ids).bind(statuses),
            Action::Priority(priority) => sqlx::query(store.sql(PRIORITY))
                .bind(ids)
                .bind(priority)
                .bind(statuses),
        };
        Ok(query
            .persistent(store.prepared())
            .fetch_all(&mut *conn)
            .await?)
    })?;
    let allowed = |status: JobStatus| {
        action.statuses().contains(&status)
            && statuses.is_none_or(|statuses| statuses.contains(&status.as_str()))
    };
    // One row per id asked for; an id asked twice is reported once.
    let mut seen: HashSet<i64> = HashSet::with_capacity(rows.len());
    let mut report = ActionReport::default();
    let mut moved = Vec::new();
    for row in rows {
        let id: i64 = row.try_get("id")?;
        if !seen.insert(id) {
            continue;
        }
        let before: Option<String> = row.try_get("before")?;
        let after: Option<i16> = row.try_get("after")?;
        let job = JobId::from(id);
        match (before, after) {
            (None, _) => report.skipped.push((job, SkipReason::NotFound)),
            (Some(_), Some(1)) if action == Action::Cancel => report.requested.push(job),
            (Some(_), Some(_)) => report.changed.push(job),
            (Some(status), None) => {
                let status: JobStatus = status
                    .parse()
                    .map_err(|message: String| sqlx::Error::Decode(message.into()))?;
                if allowed(status) {
                    moved.push(job);
                } else {
                    report.skipped.push((job, SkipReason::State(status)));
                }
            }
        }
    }
    // Skipped in a status the action would change: the job moved after the statement's
    // snapshot, and the lock found it elsewhere. Its reason is where it is now.
    if !moved.is_empty() {
        let ids: Vec<i64> = moved.iter().map(|id| id.get()).collect();
        let now: Vec<(i64, String)> = run!(store, |conn| async {
            Ok(sqlx::query_as(store.sql(STATUSES))
                .persistent(store.prepared())
                .bind(&ids)
                .fetch_all(&mut *conn)
                .await?)
        })?;
        for job in moved {
            let reason = match now.iter().find(|(id, _)| *id == job.get()) {
                Some((_, status)) => SkipReason::State(
                    status
                        .parse()
                        .map_err(|message: String| sqlx::Error::Decode(message.into()))?,
                ),
                None => SkipReason::NotFound,
            };
            report.skipped.push((job, reason));
        }
    }
    Ok(report)
}

/// The statuses of jobs now.
const STATUSES: &str = "SELECT id, status::text FROM pgq.jobs WHERE id = ANY($1)";

fn is_unique_violation(err: &Error) -> bool {
    match err {
        Error::Database(err) => err
            .as_database_error()
            .and_then(|e| e.code())
            .is_some_and(|code| code == "23505"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[
            super::RETRY,
            super::CANCEL,
            super::DELETE,
            super::RUN_NOW,
            super::PRIORITY,
            super::STATUSES,
        ]);
    }

    #[tokio::test]
    async fn no_plan_reads_the_whole_table() {
        crate::store::plans::assert_no_whole_table_reads(
            crate::store::plans::Connections::Application,
            &[
                ("RETRY", super::RETRY, ""),
                ("CANCEL", super::CANCEL, ""),
                ("DELETE", super::DELETE, ""),
                ("RUN_NOW", super::RUN_NOW, ""),
                ("PRIORITY", super::PRIORITY, ""),
                ("STATUSES", super::STATUSES, ""),
            ],
        )
        .await;
    }
}
