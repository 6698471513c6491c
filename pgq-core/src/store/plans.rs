//! A check, for tests, that the plans PostgreSQL caches for pgq's statements cannot read the
//! whole jobs table. A cached plan is built on the table as it was then; built on an empty one,
//! a scan of the whole table (sequential, or of an index end to end) looks free, and that plan
//! stays while the table grows. So each statement is planned as pgq's own connections plan it
//! (a generic plan, without sequential scans) on a table whose statistics say it is empty, and
//! every read of the table must have an index condition.

use serde_json::Value;
use sqlx::types::Json;
use sqlx::{AssertSqlSafe, Connection};

/// Asserts that no statement's plan reads the jobs table without an index condition. Each is
/// `(name, statement, parameter types)`: the types as `PREPARE` takes them, where the
/// statement alone leaves them open, or empty.
pub(crate) async fn assert_no_whole_table_reads(statements: &[(&str, &str, &str)]) {
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
        whole_table_reads(&plan, &mut whole);
        assert!(
            whole.is_empty(),
            "{name} reads the whole table ({whole:?}):\n{plan:#}"
        );
        sqlx::raw_sql("DEALLOCATE checked")
            .execute(&mut conn)
            .await
            .expect("deallocate");
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
/// it, without an index condition.
fn whole_table_reads(node: &Value, found: &mut Vec<String>) {
    match node {
        Value::Array(items) => items.iter().for_each(|item| whole_table_reads(item, found)),
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
                    !fields.contains_key("Index Cond")
                        && !index.is_some_and(|index| ACTIVE_ONLY.contains(&index))
                }
                _ => false,
            };
            if on_jobs && unbounded {
                let index = fields.get("Index Name").and_then(Value::as_str);
                found.push(format!("{kind} {}", index.unwrap_or("jobs")));
            }
            fields
                .values()
                .for_each(|value| whole_table_reads(value, found));
        }
        _ => {}
    }
}
