//! The dispatcher's one statement per round trip: complete the attempts that finished, start the
//! jobs claimed ahead last time, and claim: jobs for the free slots straight to `running`, jobs
//! claimed ahead of a free slot to `claimed`. A job claimed ahead whose handler started and
//! returned before its start was written completes from `claimed`, its start written with it:
//! every job costs two row writes, its claim and its completion, unless it waited for a slot and
//! was still running at the next round trip. Three updates of distinct rows in one transaction,
//! each fenced on (id, attempt, worker).
//!
//! A claimed job's lease counts from when its row is written (`clock_timestamp()`), not from the
//! statement's start (`now()`): a claim that waited for a lock still gives its jobs their whole
//! lease.
//!
//! The statement sets its own `synchronous_commit` (transaction-local, so that nothing of the
//! session changes and it works behind a transaction pooler): durable when it carries
//! completions and the worker wants them durable; a claim or a start alone never waits for the
//! WAL flush, since a crash that loses one only runs the job again, as a lost lease does.
//!
//! A start found `running` under its own fence is one a tick already wrote: a tick whose answer
//! was lost after it committed is sent again, and its starts must not read as leases lost.
//!
//! A tick that only claims, every job of it to run at once, on a queue with neither a rate limit
//! nor keyed tasks — an idle worker woken by a notification — is [`CLAIM_RUNNING`], one update
//! without the completions, starts and ranking it would not use: on an idle machine its round
//! trip is about 0.1 ms shorter, a good part of the wake-up latency.
//!
//! The claim runs first: the statement's rows list it first, and PostgreSQL runs each CTE when
//! the rows first read it. Its `FOR UPDATE SKIP LOCKED` scan of the queue's head must come right
//! after the statement's snapshot. A row claimed by another tick that committed after the
//! snapshot still looks pending to it, and locking it finds the newer version, which PostgreSQL
//! locks before rechecking and skipping it. The lock lasts until this tick commits, and the other
//! tick's next writes (starts and completions of the jobs it claimed) wait for it. Scanned
//! after this tick's completions, the head was claimed in between often enough to stall the
//! drain a sixth of the time.
//!
//! Each update finds its rows by `id = ANY(...)` as well as by its join. A dispatch connection
//! keeps one plan for its life, and one built while the table was empty would otherwise read
//! the whole primary key on every tick once the table had grown: on an empty table, a scan of
//! all of it looks free. The joins themselves are hash joins on these connections
//! (`worker::connections`), linear in the rows of the tick.

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};

use crate::error::Result;
use crate::job_id::JobId;
use crate::store::Store;

/// The statement up to its completions, which [`TICK`] and [`TICK_DELETING`] write each their
/// own way.
macro_rules! tick_head {
    () => {
        "
WITH commit_mode AS MATERIALIZED (
    SELECT set_config('synchronous_commit', $10, true) AS synchronous_commit
),"
    };
}

/// The statement after its completions: starts, the claim, and what comes back. A queue with a
/// rate limit gets the `rated` form: the room its tokens leave bounds the claim, and comes back
/// as a row of its own. (A queue's concurrency limit costs its claims nothing: the worker's
/// seats, `store::seats`, bound its running handlers instead.)
macro_rules! tick_tail {
    () => {
        tick_tail!("", "", "$8", "", "", "")
    };
    (rated) => {
        tick_tail!(
            room!(),
            "",
            "least($8, (SELECT room FROM room))",
            "",
            tokens_back!(),
            room_rows!("")
        )
    };
    (keyed) => {
        tick_tail!(
            room!(),
            "
keyed AS MATERIALIZED (
    SELECT k.id, k.held_back
    FROM pgq.claimable_keyed($6, $1::bigint[], $3, least($8, coalesce((SELECT room FROM room), $8)),
                             $7) AS k
),",
            "least($8, coalesce((SELECT room FROM room), $8))",
            "
      AND id = ANY (ARRAY(SELECT id FROM keyed))",
            tokens_back!(),
            room_rows!(keyed)
        )
    };
    (
        $room:expr,
        $keyed:literal,
        $limit:literal,
        $filter:literal,
        $tokens_back:expr,
        $room_row:expr
    ) => {
        concat!(
            $room,
            $keyed,
            "
started AS (
    UPDATE pgq.jobs AS job
    SET status = 'running',
        started_at = CASE WHEN job.status = 'claimed' THEN now() ELSE job.started_at END,
        updated_at = now()
    FROM ROWS FROM (unnest($4::bigint[]), unnest($5::int[])) AS held(id, attempt)
    WHERE job.id = ANY($4::bigint[]) AND job.id = held.id AND job.attempts = held.attempt
      AND job.worker_id = $3 AND (job.status = 'claimed' OR job.status = 'running')
    RETURNING job.id
),
next AS (
    SELECT id FROM pgq.jobs
    WHERE phase = 0 AND queue = $6 AND run_at <= now() AND task = ANY($7)",
            $filter,
            "
    ORDER BY priority DESC, run_at, id
    LIMIT ",
            $limit,
            "
    FOR UPDATE SKIP LOCKED
),
ranked AS (
    SELECT * FROM unnest(ARRAY(SELECT id FROM next)) WITH ORDINALITY AS ranked(id, rank)
),
claimed AS (
    UPDATE pgq.jobs AS job
    SET status = CASE WHEN ranked.rank <= $11 THEN 'running' ELSE 'claimed' END,
        started_at = CASE WHEN ranked.rank <= $11 THEN now() ELSE job.started_at END,
        phase = 1, attempts = least(job.attempts + 1, 100000), worker_id = $3,
        claimed_at = now(),
        lease_expires_at = clock_timestamp() + (($9::bigint[])[array_position($7, job.task)]
                                    * interval '1 millisecond'),
        updated_at = now()
    FROM ranked
    WHERE job.id = ANY(ARRAY(SELECT id FROM ranked)) AND job.id = ranked.id
    RETURNING job.id, job.task, job.queue, job.payload, job.attempts, job.unique_key, job.run_at,
              job.meta, ranked.rank, ranked.rank <= $11 AS running
)",
            $tokens_back,
            "
SELECT 'claimed' AS step, id, task, queue, payload, attempts, unique_key, run_at, meta::text,
       rank, running
FROM claimed
UNION ALL
SELECT 'completed', id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM completed
UNION ALL
SELECT 'started', id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM started
UNION ALL
SELECT 'commit', 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM commit_mode",
            $room_row
        )
    };
}

/// The room a queue's rate limit leaves (`pgq.claimable`, migrations 0009 and 0010), evaluated
/// first.
macro_rules! room {
    () => {
        "
room AS MATERIALIZED (
    SELECT c.room, c.wait_ms FROM pgq.claimable($6, $1::bigint[], $3, $8, $7) AS c
),"
    };
}

/// The tokens taken for jobs the claim passed over (locked by another transaction, or of a key
/// at its limit) go back to the bucket (`pgq.return_tokens`, migration 0014), after the claim and
/// under the queue's row lock that `pgq.claimable` took. The room's row reads it, which runs it.
macro_rules! tokens_back {
    () => {
        ",
tokens_back AS MATERIALIZED (
    SELECT pgq.return_tokens($6, (SELECT room FROM room) - (SELECT count(*) FROM claimed)) AS n
)"
    };
}

/// The rows that report the room: `room` (-1 for no limit), and `wait` until the next token.
/// With keyed tasks, a claim that keys' limits held back reports the jobs it picked as its room.
macro_rules! room_rows {
    ("") => {
        room_rows!("coalesce(room, -1)")
    };
    (keyed) => {
        room_rows!(
            "CASE WHEN EXISTS (SELECT 1 FROM keyed WHERE held_back)
     THEN (SELECT count(id) FROM keyed) ELSE coalesce(room, -1) END"
        )
    };
    ($room:literal) => {
        concat!(
            "
UNION ALL
SELECT 'room', ",
            $room,
            ", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM room, tokens_back
UNION ALL
SELECT 'wait', wait_ms, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM room WHERE wait_ms IS NOT NULL"
        )
    };
}

/// The completions of [`TICK`]: completed jobs are kept, `completed`, until the cleaner deletes
/// them. A job still `claimed` gets its start (its claim time: it waited for a slot at most a
/// round trip) with it.
macro_rules! keeping {
    () => {
        "
completed AS (
    UPDATE pgq.jobs AS job
    SET status = 'completed', phase = 2, progress = 100, completed_at = now(),
        started_at = CASE WHEN job.status = 'claimed' THEN job.claimed_at
                          ELSE job.started_at END,
        lease_expires_at = NULL, updated_at = now()
    FROM ROWS FROM (unnest($1::bigint[]), unnest($2::int[])) AS done(id, attempt)
    WHERE job.id = ANY($1::bigint[]) AND job.id = done.id AND job.attempts = done.attempt
      AND job.worker_id = $3 AND (job.status = 'claimed' OR job.status = 'running')
    RETURNING job.id
),"
    };
}

/// The completions of [`TICK_DELETING`]: completed jobs are deleted by the statement that
/// completes them (a retention of zero).
macro_rules! deleting {
    () => {
        "
completed AS (
    DELETE FROM pgq.jobs AS job
    USING ROWS FROM (unnest($1::bigint[]), unnest($2::int[])) AS done(id, attempt)
    WHERE job.id = ANY($1::bigint[]) AND job.id = done.id AND job.attempts = done.attempt
      AND job.worker_id = $3 AND (job.status = 'claimed' OR job.status = 'running')
    RETURNING job.id
),"
    };
}

/// Completed jobs are kept.
const TICK: &str = concat!(tick_head!(), keeping!(), tick_tail!());

/// Completed jobs are deleted.
const TICK_DELETING: &str = concat!(tick_head!(), deleting!(), tick_tail!());

/// [`TICK`] for a queue with a rate limit. `pgq.claimable` (migration 0010) locks the queue's
/// row until the statement's transaction ends, so that the claimers of the queue take turns at
/// its token bucket, and counts the due jobs the tokens may take in a query of its own. The claim
/// itself is safe with the statement's snapshot: `FOR UPDATE` rechecks each row's latest version
/// and skips those claimed since.
const TICK_RATED: &str = concat!(tick_head!(), keeping!(), tick_tail!(rated));

/// [`TICK_DELETING`] for a queue with a rate limit.
const TICK_DELETING_RATED: &str = concat!(tick_head!(), deleting!(), tick_tail!(rated));

/// [`TICK`] for a worker whose tasks include one with a concurrency key. After
/// `pgq.claimable` (the queue's rate limit), `pgq.claimable_keyed` (migration 0009) locks the
/// queue's row and picks, in a snapshot taken after the lock, the jobs each key's limit leaves
/// room for; the claim locks those that are still pending, as [`TICK_RATED`] does.
const TICK_KEYED: &str = concat!(tick_head!(), keeping!(), tick_tail!(keyed));

/// [`TICK_DELETING`] for a worker with keyed tasks.
const TICK_DELETING_KEYED: &str = concat!(tick_head!(), deleting!(), tick_tail!(keyed));

/// The tick of an idle worker: nothing to complete or start, every job claimed to run at once.
/// Each job's lease is its task's ($5, in the order of `tasks`, $3); its commit never waits for
/// the WAL flush. `rank` is the first key of the claim order (priority, highest first), which
/// the rows come back without.
const CLAIM_RUNNING: &str = "
UPDATE pgq.jobs AS job
SET status = 'running', phase = 1, attempts = least(job.attempts + 1, 100000),
    worker_id = $1,
    claimed_at = now(), started_at = now(),
    lease_expires_at = clock_timestamp() + (($5::bigint[])[array_position($3, job.task)]
                                * interval '1 millisecond'),
    updated_at = now()
WHERE job.id = ANY(ARRAY(
        SELECT id FROM pgq.jobs
        WHERE phase = 0 AND queue = $2 AND run_at <= now() AND task = ANY($3)
        ORDER BY priority DESC, run_at, id
        LIMIT $4
        FOR UPDATE SKIP LOCKED))
  AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
RETURNING 'claimed' AS step, job.id, job.task, job.queue, job.payload, job.attempts,
          job.unique_key, job.run_at, job.meta::text AS meta, -job.priority::bigint AS rank,
          true AS running";

/// A job this worker claimed.
#[derive(Debug)]
pub(crate) struct ClaimedJob {
    pub(crate) id: JobId,
    pub(crate) task: String,
    pub(crate) queue: String,
    pub(crate) payload: Box<RawValue>,
    pub(crate) attempt: i32,
    pub(crate) unique_key: Option<String>,
    /// When it was due: the attempt's wait is measured from here.
    pub(crate) run_at: DateTime<Utc>,
    /// Its metadata as JSON text, for the trace context the attempt's span continues.
    pub(crate) meta: Option<String>,
    /// Claimed as `running`, its handler to start at once; otherwise `claimed`, waiting for a
    /// slot, its start written by a later tick.
    pub(crate) running: bool,
    /// When the claim came back: how long a job claimed ahead has waited for a slot.
    pub(crate) received: tokio::time::Instant,
}

/// One attempt to complete or start, by its fence. An attempt to complete may still be
/// `claimed`: its start is written with its completion.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Held {
    pub(crate) id: JobId,
    pub(crate) attempt: i32,
}

/// What one tick asks for.
#[derive(Debug)]
pub(crate) struct TickRequest<'a> {
    pub(crate) worker_id: &'a str,
    pub(crate) complete: &'a [Held],
    pub(crate) start: &'a [Held],
    pub(crate) queue: &'a str,
    pub(crate) tasks: &'a [&'static str],
    /// Each task's lease, in the order of `tasks`: a claim holds the job that long.
    pub(crate) leases_ms: &'a [i64],
    pub(crate) claim: usize,
    /// How many of the claimed jobs, the first in claim order, start at once: they go from
    /// `pending` to `running` in the claim itself; the others are `claimed`.
    pub(crate) run_now: usize,
    /// Whether completions commit durably: the commit waits for the WAL flush when the tick
    /// carries any.
    pub(crate) durable: bool,
    /// Whether completed jobs are deleted rather than kept.
    pub(crate) delete_completed: bool,
    /// Whether the queue has a rate limit: the claim takes no more jobs than it has tokens for.
    pub(crate) rated: bool,
    /// Whether the worker runs a task with a concurrency key: the claim takes no more of each
    /// key than its limit leaves across all workers.
    pub(crate) keyed: bool,
}

/// What one tick did.
#[derive(Debug, Default)]
pub(crate) struct TickResult {
    /// Attempts whose completion was written; the others in the request were fenced off.
    pub(crate) completed: Vec<JobId>,
    /// Jobs now running; the others in the request were fenced off (cancelled or rescued).
    pub(crate) started: Vec<JobId>,
    /// Newly claimed jobs, in claim order.
    pub(crate) claimed: Vec<ClaimedJob>,
    /// The queue's rate limit, or a concurrency key's limit, allowed fewer jobs than the claim
    /// asked for.
    pub(crate) limit_reached: bool,
    /// The queue's rate limit ran out of tokens: the next is due after this long.
    pub(crate) next_token: Option<std::time::Duration>,
}

impl TickRequest<'_> {
    /// Whether [`CLAIM_RUNNING`] does all this tick asks for.
    fn claims_only_to_run(&self) -> bool {
        self.complete.is_empty()
            && self.start.is_empty()
            && self.claim > 0
            && self.run_now >= self.claim
            && !self.rated
            && !self.keyed
    }
}

pub(crate) async fn tick(
    store: &Store,
    conn: &mut PgConnection,
    request: &TickRequest<'_>,
) -> Result<TickResult> {
    let claim = i64::try_from(request.claim).unwrap_or(i64::MAX);
    if request.claims_only_to_run() {
        let rows = sqlx::query(store.sql(CLAIM_RUNNING))
            .persistent(store.prepared())
            .bind(request.worker_id)
            .bind(request.queue)
            .bind(request.tasks)
            .bind(claim)
            .bind(request.leases_ms)
            .fetch_all(conn)
            .await?;
        return read_rows(&rows, request.claim);
    }
    let statement = match (request.delete_completed, request.rated, request.keyed) {
        (false, _, true) => TICK_KEYED,
        (true, _, true) => TICK_DELETING_KEYED,
        (false, false, false) => TICK,
        (true, false, false) => TICK_DELETING,
        (false, true, false) => TICK_RATED,
        (true, true, false) => TICK_DELETING_RATED,
    };
    let durable = request.durable && !request.complete.is_empty();
    let rows = sqlx::query(store.sql(statement))
        .persistent(store.prepared())
        .bind(
            request
                .complete
                .iter()
                .map(|h| h.id.get())
                .collect::<Vec<_>>(),
        )
        .bind(
            request
                .complete
                .iter()
                .map(|h| h.attempt)
                .collect::<Vec<_>>(),
        )
        .bind(request.worker_id)
        .bind(request.start.iter().map(|h| h.id.get()).collect::<Vec<_>>())
        .bind(request.start.iter().map(|h| h.attempt).collect::<Vec<_>>())
        .bind(request.queue)
        .bind(request.tasks)
        .bind(claim)
        .bind(request.leases_ms)
        .bind(if durable { "on" } else { "off" })
        .bind(i64::try_from(request.run_now).unwrap_or(i64::MAX))
        .fetch_all(conn)
        .await?;
    read_rows(&rows, request.claim)
}

/// The columns of a tick's rows, by position: every statement returns them in this order, and
/// reading by position spares a name lookup per value on the dispatcher's busiest path.
mod column {
    pub(super) const STEP: usize = 0;
    pub(super) const ID: usize = 1;
    pub(super) const TASK: usize = 2;
    pub(super) const QUEUE: usize = 3;
    pub(super) const PAYLOAD: usize = 4;
    pub(super) const ATTEMPTS: usize = 5;
    pub(super) const UNIQUE_KEY: usize = 6;
    pub(super) const RUN_AT: usize = 7;
    pub(super) const META: usize = 8;
    pub(super) const RANK: usize = 9;
    pub(super) const RUNNING: usize = 10;
}

/// What a tick's rows say; `asked`: the jobs its claim asked for.
fn read_rows(rows: &[PgRow], asked: usize) -> Result<TickResult> {
    let mut result = TickResult::default();
    let mut claimed = Vec::with_capacity(rows.len());
    let received = tokio::time::Instant::now();
    for row in rows {
        let id = JobId::from(row.try_get::<i64, _>(column::ID)?);
        match row.try_get::<&str, _>(column::STEP)? {
            "completed" => result.completed.push(id),
            "started" => result.started.push(id),
            "commit" => {}
            // What the queue's limit left: -1 when it has none (any more).
            "room" => {
                let room = usize::try_from(id.get()).unwrap_or(usize::MAX);
                result.limit_reached = room < asked;
            }
            "wait" => {
                let millis = u64::try_from(id.get()).unwrap_or(0);
                result.next_token = Some(std::time::Duration::from_millis(millis));
            }
            _ => {
                let Json(payload) = row.try_get::<Json<Box<RawValue>>, _>(column::PAYLOAD)?;
                let order: i64 = row.try_get(column::RANK)?;
                claimed.push((
                    order,
                    ClaimedJob {
                        id,
                        task: row.try_get(column::TASK)?,
                        queue: row.try_get(column::QUEUE)?,
                        payload,
                        attempt: row.try_get(column::ATTEMPTS)?,
                        unique_key: row.try_get(column::UNIQUE_KEY)?,
                        run_at: row.try_get(column::RUN_AT)?,
                        meta: row.try_get(column::META)?,
                        running: row.try_get(column::RUNNING)?,
                        received,
                    },
                ));
            }
        }
    }
    // RETURNING has no order: start jobs in the order they were claimed.
    claimed.sort_by_key(|(order, job)| (*order, job.run_at, job.id));
    result.claimed = claimed.into_iter().map(|(_, job)| job).collect();
    Ok(result)
}

#[cfg(test)]
mod tests {
    /// Every form of the tick's statement.
    const TICKS: [&str; 6] = [
        super::TICK,
        super::TICK_DELETING,
        super::TICK_RATED,
        super::TICK_DELETING_RATED,
        super::TICK_KEYED,
        super::TICK_DELETING_KEYED,
    ];

    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[super::CLAIM_RUNNING]);
        crate::store::sql::assert_renders(&TICKS);
    }

    #[test]
    fn every_tick_claims_before_it_completes_and_returns_columns_in_order() {
        let columns = "step id task queue payload attempts unique_key run_at meta rank running";
        for statement in TICKS {
            let rows = &statement[statement.rfind("\nSELECT 'claimed'").unwrap()..];
            let claimed = rows.find("FROM claimed").unwrap();
            assert!(claimed < rows.find("FROM completed").unwrap(), "{rows}");
            assert!(claimed < rows.find("FROM started").unwrap(), "{rows}");
            assert_eq!(names(&rows[..claimed]), columns, "{rows}");
        }
        let returning = &super::CLAIM_RUNNING[super::CLAIM_RUNNING.find("RETURNING").unwrap()..];
        assert_eq!(names(returning), columns, "{returning}");
    }

    /// The names a select list gives its columns, in order.
    fn names(list: &str) -> String {
        let list = list
            .trim_start_matches("\nSELECT ")
            .trim_start_matches("RETURNING ");
        list.split(',')
            .map(|column| {
                let column = column.split_whitespace().last().unwrap_or_default();
                let column = column.rsplit('.').next().unwrap_or_default();
                column.trim_end_matches("::text")
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_plain_claim_does_not_change_for_keys() {
        assert!(!super::TICK.contains("keyed") && !super::TICK.contains("room"));
        assert!(super::TICK_KEYED.contains("claimable_keyed("));
        assert!(super::TICK_KEYED.contains("AND id = ANY (ARRAY(SELECT id FROM keyed))"));
    }

    #[test]
    fn the_rate_function_is_called_in_its_schema() {
        let rendered = crate::store::sql::render(super::TICK_RATED, "jobs2");
        assert!(
            rendered.contains("FROM \"jobs2\".claimable($6, "),
            "{rendered}"
        );
    }

    /// A tick that committed but whose answer was lost is sent again: its start of a job
    /// claimed ahead finds the job running under its own fence, and counts as started (its
    /// start time kept), not as a lease lost.
    #[tokio::test]
    async fn a_start_sent_again_is_started() {
        use super::{Held, TickRequest, tick};

        let db = pgq_testkit::TestDatabase::new().await;
        let client = crate::client::Client::new(db.pool().clone());
        let store = client.store();
        sqlx::raw_sql("INSERT INTO pgq.jobs (task, queue, payload) VALUES ('T', 'q', '{}')")
            .execute(db.pool())
            .await
            .unwrap();
        let mut conn = db.pool().acquire().await.unwrap();
        let request = |start: &'static [Held], claim: usize| TickRequest {
            worker_id: "w",
            complete: &[],
            start,
            queue: "q",
            tasks: &["T"],
            leases_ms: &[60_000],
            claim,
            run_now: 0,
            durable: false,
            delete_completed: false,
            rated: false,
            keyed: false,
        };
        let claimed = tick(store, &mut conn, &request(&[], 1))
            .await
            .unwrap()
            .claimed;
        assert!(!claimed[0].running, "claimed ahead");
        let start: &'static [Held] = Box::leak(Box::new([Held {
            id: claimed[0].id,
            attempt: claimed[0].attempt,
        }]));
        let first = tick(store, &mut conn, &request(start, 0)).await.unwrap();
        assert_eq!(first.started, [claimed[0].id]);
        let started_at = || {
            sqlx::query_scalar::<_, chrono::DateTime<chrono::Utc>>(
                "SELECT started_at FROM pgq.jobs",
            )
            .fetch_one(db.pool())
        };
        let at = started_at().await.unwrap();
        let again = tick(store, &mut conn, &request(start, 0)).await.unwrap();
        assert_eq!(again.started, [claimed[0].id], "started, not lost");
        assert_eq!(started_at().await.unwrap(), at);
    }

    #[tokio::test]
    async fn no_plan_reads_the_whole_table() {
        crate::store::plans::assert_no_whole_table_reads(
            crate::store::plans::Connections::Own,
            &[
                ("CLAIM_RUNNING", super::CLAIM_RUNNING, ""),
                ("TICK", super::TICK, ""),
                ("TICK_DELETING", super::TICK_DELETING, ""),
                ("TICK_RATED", super::TICK_RATED, ""),
                ("TICK_DELETING_RATED", super::TICK_DELETING_RATED, ""),
                ("TICK_KEYED", super::TICK_KEYED, ""),
                ("TICK_DELETING_KEYED", super::TICK_DELETING_KEYED, ""),
            ],
        )
        .await;
    }
}
