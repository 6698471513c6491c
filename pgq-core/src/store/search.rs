//! Finding jobs by a [`JobFilter`]: one statement per page, composed from the fixed fragments
//! below for the conditions the filter sets, so that the planner sees exactly those (a partial
//! index matches only a condition written as a constant, such as `phase = 0`). Values are
//! always bound, at fixed positions, whether a fragment uses them or not.
//!
//! Every search reads an index or a bounded range: one limited to active jobs reads the small
//! partial indexes on `phase`; one that may match finished jobs — the long history — reads a
//! window of at most [`SEARCH_WINDOW`](crate::limits::SEARCH_WINDOW) ids a page through the
//! primary key, and its cursor then moves window by window.

use sqlx::types::Json;
use sqlx::{AssertSqlSafe, PgConnection, Row};

use crate::admin::cursor::JobCursor;
use crate::admin::filter::{JobFilter, JobOrder};
use crate::admin::page::{JobCount, JobPage};
use crate::error::Result;
use crate::job::JobStatus;
use crate::limits;
use crate::store::moment::moment;
use crate::store::{Store, job};

/// The lowest and highest id: two probes of the primary key.
const EDGES: &str = "SELECT min(id) AS first, max(id) AS last FROM pgq.jobs";

const SELECT_JOBS: &str = "SELECT * FROM pgq.jobs WHERE id >= $1 AND id < $2";
const SELECT_IDS: &str = "SELECT id, run_at FROM pgq.jobs WHERE id >= $1 AND id < $2";
const COUNT: &str = "SELECT count(*) FROM (SELECT 1 FROM pgq.jobs WHERE id >= $1 AND id < $2";

const PHASE_0: &str = " AND phase = 0";
const PHASE_1: &str = " AND phase = 1";
const PHASE_2: &str = " AND phase = 2";
const PHASE_ACTIVE: &str = " AND phase < 2";
const PHASE_HELD_OR_FINISHED: &str = " AND phase > 0";
const PHASE_NOT_HELD: &str = " AND phase <> 1";
const STATUS: &str = " AND status = ANY($4)";
const TASK: &str = " AND task = $5";
const QUEUE: &str = " AND queue = $6";
const UNIQUE_KEY: &str = " AND unique_key = $7";
const CREATED_FROM: &str = " AND created_at >= $8";
const CREATED_UNTIL: &str = " AND created_at < $9";
const RUN_AT_FROM: &str = " AND run_at >= $10";
const RUN_AT_UNTIL: &str = " AND run_at < $11";
const FINISHED_FROM: &str = " AND completed_at >= $12";
const FINISHED_UNTIL: &str = " AND completed_at < $13";
/// `~~*` is ILIKE, written as the operator so that it is qualified like every other.
const ERROR_CONTAINS: &str = " AND last_error ~~* $14";
/// Containment through the GIN index on `meta`, which holds only rows that have one.
const TAGS: &str = " AND meta IS NOT NULL AND meta @> $15";
const AFTER_RUN_AT: &str = " AND (run_at > $16 OR (run_at = $16 AND id > $17))";

const NEWEST: &str = " ORDER BY id DESC LIMIT $3";
const OLDEST: &str = " ORDER BY id LIMIT $3";
const SOONEST: &str = " ORDER BY run_at, id LIMIT $3";
const COUNT_END: &str = " LIMIT $3) AS matched";

/// The ids one statement looks at, `[lo, hi)`, and whether the filter's ids go on beyond them
/// in the direction of the search.
#[derive(Debug, Clone, Copy)]
struct Window {
    lo: i64,
    hi: i64,
    beyond: bool,
}

/// The phases whose statuses the filter allows, as a bit set (bit n: phase n).
fn phases(filter: &JobFilter) -> u8 {
    let of = |status: &JobStatus| match status {
        JobStatus::Pending => 1,
        JobStatus::Claimed | JobStatus::Running => 2,
        _ => 4,
    };
    if !filter.conflicting_tags.is_empty() {
        return 0;
    }
    let mut phases = if filter.statuses.is_empty() {
        7
    } else {
        filter.statuses.iter().map(of).fold(0, |a, b| a | b)
    };
    if filter.finished.is_set() {
        // Only finished jobs have a `completed_at`.
        phases &= 4;
    }
    phases
}

/// The filter's conditions after the id range, or `None` when no job can match.
fn conditions(filter: &JobFilter) -> Option<String> {
    let phases = phases(filter);
    let mut sql = String::new();
    sql.push_str(match phases {
        0 => return None,
        1 => PHASE_0,
        2 => PHASE_1,
        4 => PHASE_2,
        3 => PHASE_ACTIVE,
        6 => PHASE_HELD_OR_FINISHED,
        5 => PHASE_NOT_HELD,
        _ => "",
    });
    let all_of_phases = [
        (1, &[JobStatus::Pending][..]),
        (2, &[JobStatus::Claimed, JobStatus::Running][..]),
        (
            4,
            &[
                JobStatus::Completed,
                JobStatus::Failed,
                JobStatus::Cancelled,
            ][..],
        ),
    ]
    .iter()
    .filter(|(bit, _)| phases & bit != 0)
    .all(|(_, statuses)| statuses.iter().all(|s| filter.statuses.contains(s)));
    if !filter.statuses.is_empty() && !all_of_phases {
        sql.push_str(STATUS);
    }
    let fragments = [
        (filter.task.is_some(), TASK),
        (filter.queue.is_some(), QUEUE),
        (filter.unique_key.is_some(), UNIQUE_KEY),
        (filter.created.from.is_some(), CREATED_FROM),
        (filter.created.until.is_some(), CREATED_UNTIL),
        (filter.run_at.from.is_some(), RUN_AT_FROM),
        (filter.run_at.until.is_some(), RUN_AT_UNTIL),
        (filter.finished.from.is_some(), FINISHED_FROM),
        (filter.finished.until.is_some(), FINISHED_UNTIL),
        (filter.error_contains.is_some(), ERROR_CONTAINS),
        (!filter.tags.is_empty(), TAGS),
        (
            filter.order == JobOrder::RunAt && filter.after.is_some(),
            AFTER_RUN_AT,
        ),
    ];
    for (set, fragment) in fragments {
        if set {
            sql.push_str(fragment);
        }
    }
    Some(sql)
}

/// `text` as an ILIKE pattern that matches it anywhere, its `%`, `_` and `\` taken literally.
fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// The ids the next statement looks at, given the table's lowest and highest id.
fn window(filter: &JobFilter, first: i64, last: i64) -> Option<Window> {
    let floor = filter.ids.0.map_or(first, |from| from.max(first));
    let ceiling = filter.ids.1.map_or(last.saturating_add(1), |until| {
        until.min(last.saturating_add(1))
    });
    let windowed = !filter.active_only();
    let span = limits::SEARCH_WINDOW;
    let cursor = filter.after.map(|cursor| cursor.id);
    let window = match filter.order {
        JobOrder::Newest => {
            let hi = cursor.map_or(ceiling, |id| id.min(ceiling));
            let lo = if windowed {
                floor.max(hi.saturating_sub(span))
            } else {
                floor
            };
            Window {
                lo,
                hi,
                beyond: lo > floor,
            }
        }
        JobOrder::Oldest => {
            let lo = cursor.map_or(floor, |id| id.saturating_add(1).max(floor));
            let hi = if windowed {
                ceiling.min(lo.saturating_add(span))
            } else {
                ceiling
            };
            Window {
                lo,
                hi,
                beyond: hi < ceiling,
            }
        }
        JobOrder::RunAt => Window {
            lo: floor,
            hi: ceiling,
            beyond: false,
        },
    };
    (window.lo < window.hi).then_some(window)
}

/// Binds the filter's values at their fixed positions, after `$1` to `$3`.
macro_rules! bind_filter {
    ($query:expr, $filter:expr) => {{
        let filter: &JobFilter = $filter;
        let statuses: Vec<String> = filter.statuses.iter().map(|s| s.to_string()).collect();
        let tags = Json(serde_json::json!({ "tags": filter.tags }));
        $query
            .bind(statuses)
            .bind(filter.task.clone())
            .bind(filter.queue.clone())
            .bind(filter.unique_key.clone())
            .bind(filter.created.from)
            .bind(filter.created.until)
            .bind(filter.run_at.from)
            .bind(filter.run_at.until)
            .bind(filter.finished.from)
            .bind(filter.finished.until)
            .bind(filter.error_contains.as_deref().map(contains_pattern))
            .bind(tags)
            .bind(filter.after.and_then(|cursor| cursor.run_at))
            .bind(filter.after.map(|cursor| cursor.id))
    }};
}

/// The table's lowest and highest id, or `None` when it is empty.
async fn edges(store: &Store, conn: &mut PgConnection) -> Result<Option<(i64, i64)>> {
    let row = sqlx::query(store.sql(EDGES))
        .persistent(store.prepared())
        .fetch_one(&mut *conn)
        .await?;
    let first: Option<i64> = row.try_get("first")?;
    let last: Option<i64> = row.try_get("last")?;
    Ok(first.zip(last))
}

/// What a page's statement selects: whole jobs, or ids and `run_at` alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Columns {
    Jobs,
    Ids,
}

/// One page of jobs (`Columns::Jobs`), or of ids with empty rows otherwise (see [`ids`]).
pub(crate) async fn page(
    store: &Store,
    conn: &mut PgConnection,
    filter: &JobFilter,
) -> Result<JobPage> {
    let (rows, next) = rows(store, conn, filter, Columns::Jobs).await?;
    let jobs = rows.iter().map(job::decode).collect::<Result<Vec<_>>>()?;
    Ok(JobPage { jobs, next })
}

/// One page of ids, for actions by filter.
pub(crate) async fn ids(
    store: &Store,
    conn: &mut PgConnection,
    filter: &JobFilter,
) -> Result<(Vec<i64>, Option<JobCursor>)> {
    let (rows, next) = rows(store, conn, filter, Columns::Ids).await?;
    let ids = rows
        .iter()
        .map(|row| row.try_get::<i64, _>("id"))
        .collect::<sqlx::Result<Vec<_>>>()?;
    Ok((ids, next))
}

async fn rows(
    store: &Store,
    conn: &mut PgConnection,
    filter: &JobFilter,
    columns: Columns,
) -> Result<(Vec<sqlx::postgres::PgRow>, Option<JobCursor>)> {
    let Some(conditions) = conditions(filter) else {
        return Ok((Vec::new(), None));
    };
    let Some((first, last)) = edges(store, conn).await? else {
        return Ok((Vec::new(), None));
    };
    let Some(window) = window(filter, first, last) else {
        return Ok((Vec::new(), None));
    };
    let head = match columns {
        Columns::Jobs => SELECT_JOBS,
        Columns::Ids => SELECT_IDS,
    };
    let order = match filter.order {
        JobOrder::Newest => NEWEST,
        JobOrder::Oldest => OLDEST,
        JobOrder::RunAt => SOONEST,
    };
    let text = store.composed(&format!("{head}{conditions}{order}"));
    let query = sqlx::query(AssertSqlSafe(text))
        .persistent(store.prepared())
        .bind(window.lo)
        .bind(window.hi)
        .bind(i64::try_from(filter.limit).unwrap_or(i64::MAX));
    let rows = bind_filter!(query, filter).fetch_all(&mut *conn).await?;
    let next = if rows.len() >= filter.limit {
        let last = rows.last().expect("a full page has a last row");
        let id: i64 = last.try_get("id")?;
        Some(match filter.order {
            JobOrder::RunAt => JobCursor::run_at(id, moment(last, "run_at")?),
            _ => JobCursor::id(id),
        })
    } else if window.beyond {
        // The window ran out before the page filled: the next page starts past it.
        Some(JobCursor::id(match filter.order {
            JobOrder::Oldest => window.hi - 1,
            _ => window.lo,
        }))
    } else {
        None
    };
    Ok((rows, next))
}

/// How many jobs the filter matches, up to [`MAX_COUNT`](limits::MAX_COUNT), within the window
/// of ids a page would look at from the filter's cursor.
pub(crate) async fn count(
    store: &Store,
    conn: &mut PgConnection,
    filter: &JobFilter,
) -> Result<JobCount> {
    let exact_zero = JobCount {
        count: 0,
        exact: true,
    };
    let Some(conditions) = conditions(filter) else {
        return Ok(exact_zero);
    };
    let Some((first, last)) = edges(store, conn).await? else {
        return Ok(exact_zero);
    };
    let Some(window) = window(filter, first, last) else {
        return Ok(exact_zero);
    };
    let cap = limits::MAX_COUNT;
    let text = store.composed(&format!("{COUNT}{conditions}{COUNT_END}"));
    // One past the cap: exactly `cap` matches is an exact count.
    let query = sqlx::query(AssertSqlSafe(text))
        .persistent(store.prepared())
        .bind(window.lo)
        .bind(window.hi)
        .bind(i64::try_from(cap + 1).unwrap_or(i64::MAX));
    let count: i64 = bind_filter!(query, filter)
        .fetch_one(&mut *conn)
        .await?
        .try_get(0)?;
    let count = u64::try_from(count).unwrap_or(0);
    Ok(JobCount {
        count: count.min(cap),
        exact: count <= cap && !window.beyond,
    })
}

/// Every fragment, for the renderer's test: each alone and all together, in every head.
#[cfg(test)]
fn every_composition() -> Vec<String> {
    let conditions = [
        PHASE_0,
        PHASE_1,
        PHASE_2,
        PHASE_ACTIVE,
        PHASE_HELD_OR_FINISHED,
        PHASE_NOT_HELD,
        STATUS,
        TASK,
        QUEUE,
        UNIQUE_KEY,
        CREATED_FROM,
        CREATED_UNTIL,
        RUN_AT_FROM,
        RUN_AT_UNTIL,
        FINISHED_FROM,
        FINISHED_UNTIL,
        ERROR_CONTAINS,
        TAGS,
        AFTER_RUN_AT,
    ];
    let all: String = conditions[6..].concat();
    let mut out = vec![EDGES.to_owned()];
    for condition in conditions.iter().copied().chain([all.as_str()]) {
        for order in [NEWEST, OLDEST, SOONEST] {
            out.push(format!("{SELECT_JOBS}{condition}{order}"));
            out.push(format!("{SELECT_IDS}{condition}{order}"));
        }
        out.push(format!("{COUNT}{condition}{COUNT_END}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{contains_pattern, every_composition};
    use crate::store::sql;

    #[test]
    fn every_statement_renders() {
        let statements = every_composition();
        for statement in &statements {
            for schema in [sql::TEMPLATE_SCHEMA, "other_jobs"] {
                let rendered = sql::render(statement, schema);
                assert!(!rendered.contains(" IN ("), "{rendered}");
            }
        }
    }

    #[test]
    fn error_text_is_matched_literally() {
        assert_eq!(contains_pattern("50%_off\\"), "%50\\%\\_off\\\\%");
    }
}
