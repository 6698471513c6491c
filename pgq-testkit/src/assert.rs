//! [`assert_enqueued`] and [`refute_enqueued`]: typed checks on what is waiting in the queue.

use pgq_core::Task;
use sqlx::PgPool;

/// Pending jobs of `T`, decoded, with their ids.
async fn pending<T: Task>(pool: &PgPool) -> Vec<(i64, Result<T, String>, serde_json::Value)> {
    let rows = pgq_core::__testkit::pending(&pgq_core::Client::new(pool.clone()), T::NAME)
        .await
        .unwrap_or_else(|err| panic!("cannot read pgq.jobs: {err}"));
    rows.into_iter()
        .map(|(id, payload)| {
            let id = id.get();
            let task = serde_json::from_value::<T>(payload.clone()).map_err(|e| e.to_string());
            (id, task, payload)
        })
        .collect()
}

fn describe(jobs: &[(i64, Result<impl Sized, String>, serde_json::Value)]) -> String {
    if jobs.is_empty() {
        return "none".into();
    }
    jobs.iter()
        .map(|(id, task, payload)| {
            let undecodable = match task {
                Ok(_) => String::new(),
                Err(err) => format!(" (does not decode: {err})"),
            };
            format!("\n  job {id}: {payload}{undecodable}")
        })
        .collect()
}

/// Asserts that a pending job of task `T` matches `predicate`, and returns its id. On failure
/// the message lists every pending job of `T`.
///
/// ```no_run
/// # use pgq_core::Task;
/// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// pgq_testkit::assert_enqueued::<SendWelcome>(db.pool(), |t| t.user_id == 7).await;
/// # }
/// ```
pub async fn assert_enqueued<T: Task>(pool: &PgPool, predicate: impl Fn(&T) -> bool) -> i64 {
    let jobs = pending::<T>(pool).await;
    match jobs
        .iter()
        .find(|(_, task, _)| task.as_ref().is_ok_and(&predicate))
    {
        Some((id, _, _)) => *id,
        None => panic!(
            "expected a pending {} job matching the predicate; pending {} jobs: {}",
            T::NAME,
            T::NAME,
            describe(&jobs)
        ),
    }
}

/// Asserts that no pending job of task `T` matches `predicate`. On failure the message lists the
/// matching jobs.
///
/// ```no_run
/// # use pgq_core::Task;
/// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// // The signup was refused, so no welcome mail may be waiting.
/// pgq_testkit::refute_enqueued::<SendWelcome>(db.pool(), |t| t.user_id == 7).await;
/// # }
/// ```
pub async fn refute_enqueued<T: Task>(pool: &PgPool, predicate: impl Fn(&T) -> bool) {
    let matching: Vec<_> = pending::<T>(pool)
        .await
        .into_iter()
        // A payload that does not decode as `T` may be what the predicate refutes: it fails.
        .filter(|(_, task, _)| task.as_ref().map_or(true, &predicate))
        .collect();
    if !matching.is_empty() {
        panic!(
            "expected no pending {} job matching the predicate; found: {}",
            T::NAME,
            describe(&matching)
        );
    }
}
