//! An application role with only USAGE on pgq's schema and DML on its tables runs everything but
//! DDL: enqueues, works, cancels, retries, rescues, cleans and reads stats; steers queues (pause,
//! limits, rates) and jobs in bulk, reads the workers, schedules and history, leads a periodic
//! schedule and watches a job; `migrate` on an up-to-date schema needs no DDL privilege; and a
//! schema migrated by a newer pgq is refused.

use std::time::Duration;

use pgq_core::{
    Client, Error, Handler, JobContext, JobFilter, JobOutcome, JobStatus, RateLimit, Retention,
    Schedule, Task, TaskError, Worker, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgPoolOptions;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "least", unique_key = "least:{n}")]
struct Least {
    n: u32,
    fail: bool,
}

#[async_trait]
impl Handler for Least {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.progress(50, "half").await;
        if self.fail {
            return Err(TaskError::fail("on purpose"));
        }
        Ok(())
    }
}

/// The grants the README gives for an application role.
const GRANTS: &str = "
GRANT USAGE ON SCHEMA pgq TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgq TO {role};
GRANT USAGE ON ALL SEQUENCES IN SCHEMA pgq TO {role};";

/// A role with the README's grants and nothing else, and a client connected as it (with a
/// password, so that a server that asks for one lets it in).
async fn app_role(db: &TestDatabase) -> (String, Client) {
    let role = format!("{}_app", db.name());
    let setup = format!(
        "CREATE ROLE \"{role}\" LOGIN PASSWORD '{role}'; {}",
        GRANTS.replace("{role}", &format!("\"{role}\""))
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(setup))
        .execute(db.pool())
        .await
        .unwrap();
    let pool = PgPoolOptions::new()
        .max_connections(5)
        .test_before_acquire(false)
        .connect_with(db.connect_options().username(&role).password(&role))
        .await
        .unwrap();
    (role, Client::new(pool))
}

async fn drop_role(db: &TestDatabase, role: &str, client: Client) {
    client.pool().close().await;
    let teardown = format!("DROP OWNED BY \"{role}\"; DROP ROLE \"{role}\"");
    sqlx::raw_sql(sqlx::AssertSqlSafe(teardown))
        .execute(db.pool())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_role_with_dml_only_runs_everything_but_ddl() {
    let db = TestDatabase::new().await;
    let (role, client) = app_role(&db).await;
    let refused = sqlx::query("CREATE TABLE pgq.intruder (x int)")
        .execute(client.pool())
        .await;
    assert!(refused.is_err(), "the role must not have DDL privileges");

    client
        .migrate()
        .await
        .expect("an up-to-date schema needs no DDL");
    let ok = client
        .enqueue(Least { n: 1, fail: false })
        .await
        .unwrap()
        .id();
    let failing = client
        .enqueue(Least { n: 2, fail: true })
        .await
        .unwrap()
        .id();
    client
        .enqueue_many((3..6).map(|n| Least { n, fail: false }))
        .await
        .unwrap();
    let pending = client
        .enqueue_with(
            Least { n: 9, fail: false },
            pgq_core::EnqueueOptions::default().delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap()
        .id();
    let worker = Worker::builder(client.clone())
        .queue("least", 2)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let outcomes = support::all_finished(&mut events, &[ok, failing]).await;
    assert_eq!(outcomes[&ok], JobOutcome::Completed);
    assert_eq!(outcomes[&failing], JobOutcome::Failed);
    support::completed(&handle, 4).await;
    handle.shutdown().await.unwrap();

    client.retry(failing).await.unwrap();
    client.cancel(pending).await.unwrap();
    client.rescue_expired().await.unwrap();
    assert!(!client.stats().await.unwrap().is_empty());
    client
        .delete_finished(Retention {
            completed: Duration::ZERO,
            failed: Duration::ZERO,
        })
        .await
        .unwrap();
    drop_role(&db, &role, client).await;
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "least_beat")]
struct LeastBeat {
    n: u32,
}

#[async_trait]
impl Handler for LeastBeat {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_role_with_dml_only_steers_queues_and_jobs_and_leads_schedules() {
    let db = TestDatabase::new().await;
    let (role, client) = app_role(&db).await;

    // Queue control, persisted in pgq's tables.
    client.pause_queue("least").await.unwrap();
    client.set_queue_limit("least", Some(3)).await.unwrap();
    client
        .set_queue_rate("least", RateLimit::new(50, Duration::from_secs(1)))
        .await
        .unwrap();
    let queue = client
        .queues()
        .await
        .unwrap()
        .into_iter()
        .find(|q| q.name == "least")
        .expect("the queue is listed");
    assert!(queue.paused_at.is_some(), "{queue:?}");
    client.resume_queue("least").await.unwrap();

    // Bulk actions and searches on pending jobs.
    let later = pgq_core::EnqueueOptions::default().delay(Duration::from_secs(3600));
    let mut ids = Vec::new();
    for n in 10..14 {
        let enqueued = client
            .enqueue_with(Least { n, fail: false }, later.clone())
            .await
            .unwrap();
        ids.push(enqueued.id());
    }
    let pending = JobFilter::new().status(JobStatus::Pending).queue("least");
    assert_eq!(client.jobs(&pending).await.unwrap().jobs.len(), 4);
    assert!(client.count_jobs(&pending).await.is_ok());
    let report = client.set_jobs_priority(ids.clone(), 900).await.unwrap();
    assert_eq!(report.changed.len(), 4, "{report:?}");
    let report = client.cancel_jobs(ids[..2].to_vec()).await.unwrap();
    assert_eq!(report.changed.len(), 2, "{report:?}");
    let report = client.retry_jobs(ids[..1].to_vec(), 1).await.unwrap();
    assert_eq!(report.changed.len(), 1, "{report:?}");
    let report = client.run_jobs_now(ids[2..].to_vec()).await.unwrap();
    assert_eq!(report.changed.len(), 2, "{report:?}");
    let mut watch = client.watch(ids[1]).await.unwrap();
    let job = watch.next().await.unwrap().expect("the job as it is");
    assert_eq!(job.status, JobStatus::Cancelled);
    // Its listening connection goes back to the pool, which closes at the end.
    drop(watch);

    // A worker with the queue limited and rated, leading a periodic schedule.
    let worker = Worker::builder(client.clone())
        .queue("least", 2)
        .queue("least_beat", 1)
        .periodic(Schedule::cron("* * * * * *"), || LeastBeat { n: 0 })
        .build()
        .unwrap();
    let handle = worker.start();
    support::eventually(|| async {
        let done = client
            .count_jobs(&JobFilter::new().status(JobStatus::Completed))
            .await
            .unwrap();
        let beats = client
            .jobs(
                &JobFilter::new()
                    .queue("least_beat")
                    .status(JobStatus::Completed),
            )
            .await
            .unwrap();
        (done.count >= 3 && !beats.jobs.is_empty()).then_some(())
    })
    .await;
    assert!(!client.workers().await.unwrap().is_empty());
    let schedules = client.schedules().await.unwrap();
    assert_eq!(schedules.len(), 1, "{schedules:?}");
    assert!(schedules[0].leader.is_some(), "{schedules:?}");
    client.finished_history().await.unwrap();
    client.migration_states().await.unwrap();
    handle.shutdown().await.unwrap();

    let report = client.delete_jobs(ids, false).await.unwrap();
    assert!(!report.changed.is_empty(), "{report:?}");
    drop_role(&db, &role, client).await;
}

#[tokio::test]
async fn a_schema_migrated_by_a_newer_pgq_is_refused_naming_both_versions() {
    let db = TestDatabase::new().await;
    let newest: i64 = sqlx::query_scalar("SELECT max(version) FROM pgq.migrations")
        .fetch_one(db.pool())
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO pgq.migrations (version, name, checksum) VALUES ($1, 'from_the_future.sql', '')",
    )
    .bind(newest + 1)
    .execute(db.pool())
    .await
    .unwrap();
    let err = db.client().migrate().await.unwrap_err();
    assert!(
        matches!(err, Error::SchemaTooNew { database, binary } if database == newest + 1 && binary == newest),
        "{err:?}"
    );
    assert!(err.to_string().contains(&(newest + 1).to_string()));
    // The status of its migrations says the same, rather than list this binary's as applied.
    let err = db.client().migration_states().await.unwrap_err();
    assert!(matches!(err, Error::SchemaTooNew { .. }), "{err:?}");
}

/// A role that lost its grant on one table (one a later migration added, before the grants were
/// run again) still has expired leases rescued: the rescuer's steps stand apart.
#[tokio::test]
async fn a_rescue_goes_on_when_the_role_cannot_read_the_workers() {
    let db = TestDatabase::new().await;
    let (role, client) = app_role(&db).await;
    let id = client
        .enqueue(Least { n: 1, fail: false })
        .await
        .unwrap()
        .id();
    support::put_in(db.pool(), id, pgq_core::JobStatus::Running, "").await;
    sqlx::query("UPDATE pgq.jobs SET lease_expires_at = now() - interval '1 minute' WHERE id = $1")
        .bind(id.get())
        .execute(db.pool())
        .await
        .unwrap();
    let revoke = format!("REVOKE ALL ON pgq.workers FROM \"{role}\"");
    sqlx::raw_sql(sqlx::AssertSqlSafe(revoke))
        .execute(db.pool())
        .await
        .unwrap();
    let worker = Worker::builder(client.clone())
        .queue("least", 1)
        .rescue_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let handle = worker.start();
    support::eventually(|| async {
        let job = client.job(id).await.unwrap().unwrap();
        (job.attempts >= 1
            && job
                .last_error
                .as_deref()
                .is_some_and(|e| e.starts_with("lease expired")))
        .then_some(())
    })
    .await;
    handle.shutdown().await.ok();
    drop_role(&db, &role, client).await;
}
