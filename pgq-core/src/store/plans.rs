//! A check, for tests, that the plans PostgreSQL caches for pgq's statements cannot read the
//! whole jobs table, nor compare every job one side of a join holds with every job of the
//! other. A cached plan is built on the table as it was then; built on an empty one, a scan of
//! the whole table (sequential, or of an index end to end) looks free, and so does a nested
//! loop that rereads one side of a join for each row of the other; that plan stays while the
//! table grows. So each statement is planned as a generic plan without sequential scans on a
//! table whose statistics say it is empty: every read of the table must have an index
//! condition, and no join by id may be a nested loop's filter. On a worker's own connections,
//! planned with their settings, no plan may be compiled by JIT, which would cost each call far
//! more than the statement's work.

use serde_json::Value;
use sqlx::types::Json;
use sqlx::{AssertSqlSafe, Connection};

/// Where a statement runs, which decides the planner settings it is checked with.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Connections {
    /// A worker's own dispatch and upkeep connections, which turn nested loops off
    /// (`worker::connections`): joins by id are hash joins there.
    Own,
    /// The application's pool, planned as the application configured it: nested loops stay
    /// allowed, so a statement's reads of jobs by id must not be joins at all.
    Application,
}

/// Asserts that no statement's plan reads the jobs table without an index condition, or joins
/// jobs by id in a nested loop that compares every pair. Each is `(name, statement, parameter
/// types)`: the types as `PREPARE` takes them, where the statement alone leaves them open, or
/// empty.
pub(crate) async fn assert_no_whole_table_reads(
    connections: Connections,
    statements: &[(&str, &str, &str)],
) {
    let db = pgq_testkit::TestDatabase::new().await;
    let mut conn = sqlx::PgConnection::connect_with(&db.connect_options())
        .await
        .expect("connect");
    sqlx::raw_sql(
        "ANALYZE pgq.jobs;
         SET plan_cache_mode = force_generic_plan;
         SET enable_seqscan = off;",
    )
    .execute(&mut conn)
    .await
    .expect("an empty table's statistics");
    if let Connections::Own = connections {
        set_as_a_worker_connection(&mut conn).await;
    }
    for (name, template, types) in statements {
        let sql = crate::store::sql::render(template, "pgq");
        let types = if types.is_empty() {
            String::new()
        } else {
            format!("({types})")
        };
        sqlx::raw_sql(AssertSqlSafe(format!("PREPARE checked{types} AS {sql}")))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|err| panic!("{name} does not prepare: {err}"));
        let arguments = match highest_parameter(&sql) {
            0 => String::new(),
            count => format!("({})", vec!["NULL"; count].join(", ")),
        };
        let Json(plan): Json<Value> = sqlx::query_scalar(AssertSqlSafe(format!(
            "EXPLAIN (FORMAT JSON) EXECUTE checked{arguments}"
        )))
        .fetch_one(&mut conn)
        .await
        .unwrap_or_else(|err| panic!("{name} does not explain: {err}"));
        let mut whole = Vec::new();
        whole_table_reads(&plan, false, &mut whole);
        // Checked where the settings are the connection's own: the application's may differ.
        if let Connections::Own = connections
            && plan.pointer("/0/JIT").is_some()
        {
            whole.push("JIT compilation on every call".to_owned());
        }
        assert!(
            whole.is_empty(),
            "{name} has a plan that is not bounded ({whole:?}):\n{plan:#}"
        );
        sqlx::raw_sql("DEALLOCATE checked")
            .execute(&mut conn)
            .await
            .expect("deallocate");
    }
}

/// Gives `conn` the settings a worker's own connections start with.
pub(crate) async fn set_as_a_worker_connection(conn: &mut sqlx::PgConnection) {
    for (name, value) in crate::worker::connections::BOUNDED {
        sqlx::query("SELECT set_config($1, $2, false)")
            .bind(name)
            .bind(value)
            .execute(&mut *conn)
            .await
            .expect("a worker connection's settings");
    }
}

/// The highest `$n` in a statement.
fn highest_parameter(sql: &str) -> usize {
    sql.split('$')
        .skip(1)
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .max()
        .unwrap_or(0)
}

/// Indexes of active jobs alone (pending or held): read whole, they cost what the queues hold
/// now, not the table's history.
const ACTIVE_ONLY: &[&str] = &[
    "jobs_claim_idx",
    "jobs_lease_idx",
    "jobs_concurrency_key_idx",
    "jobs_unique_key_idx",
];

/// The scans of `jobs` in `node` and below that read the whole table, or an index of all of
/// it, without an index condition. An index read in order right under a `Limit`, with no filter
/// to skip entries, stops after that many: `limited` says `node` is one's child.
fn whole_table_reads(node: &Value, limited: bool, found: &mut Vec<String>) {
    match node {
        Value::Array(items) => items
            .iter()
            .for_each(|item| whole_table_reads(item, limited, found)),
        Value::Object(fields) => {
            let kind = fields
                .get("Node Type")
                .and_then(Value::as_str)
                .unwrap_or("");
            let on_jobs = fields.get("Relation Name").and_then(Value::as_str) == Some("jobs")
                || fields
                    .get("Index Name")
                    .and_then(Value::as_str)
                    .is_some_and(|index| index.starts_with("jobs_"));
            let unbounded = match kind {
                "Seq Scan" => true,
                "Index Scan" | "Index Only Scan" | "Bitmap Index Scan" => {
                    let index = fields.get("Index Name").and_then(Value::as_str);
                    let stops_at_limit = limited && !fields.contains_key("Filter");
                    !fields.contains_key("Index Cond")
                        && !index.is_some_and(|index| ACTIVE_ONLY.contains(&index))
                        && !stops_at_limit
                }
                _ => false,
            };
            if on_jobs && unbounded {
                let index = fields.get("Index Name").and_then(Value::as_str);
                found.push(format!("{kind} {}", index.unwrap_or("jobs")));
            }
            // A join by id left to a nested loop's filter rereads one side for every row of the
            // other: quadratic in the jobs of the statement.
            let join_filter = fields.get("Join Filter").and_then(Value::as_str);
            if kind == "Nested Loop"
                && let Some(filter) = join_filter.filter(|filter| filter.contains(".id = "))
            {
                found.push(format!("Nested Loop comparing every pair: {filter}"));
            }
            let children_limited = kind == "Limit";
            fields
                .values()
                .for_each(|value| whole_table_reads(value, children_limited, found));
        }
        _ => {}
    }
}
