//! pgq in a schema of the client's choosing: two instances share one database without seeing
//! each other's jobs, notifications or locks, and pgq lives beside another tool that owns a
//! schema called `pgq`.

use pgq_core::{
    Client, Error, Handler, JobContext, JobOutcome, Task, TaskError, Worker, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "shared-name", unique_key = "same:{n}")]
struct InItsSchema {
    n: u32,
}

#[async_trait]
impl Handler for InItsSchema {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

async fn jobs_in(db: &TestDatabase, schema: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM \"{schema}\".jobs"
    )))
    .fetch_one(db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn two_schemas_in_one_database_never_see_each_others_jobs() {
    let db = TestDatabase::new().await;
    let billing = db.client().with_schema("billing_jobs").unwrap();
    let mail = db.client().with_schema("mail_jobs").unwrap();
    billing.migrate().await.unwrap();
    mail.migrate().await.unwrap();

    // The same task and unique key in both: each schema has its own.
    let in_billing = billing.enqueue(InItsSchema { n: 1 }).await.unwrap();
    let in_mail = mail.enqueue(InItsSchema { n: 1 }).await.unwrap();
    assert!(!in_billing.is_duplicate() && !in_mail.is_duplicate());

    // A worker on the mail schema runs mail's job only, woken by mail's notification.
    let worker = Worker::builder(mail.clone())
        .queue("shared-name", 2)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    assert_eq!(
        support::finished(&mut events, in_mail.id()).await.0,
        JobOutcome::Completed
    );
    let second = mail.enqueue(InItsSchema { n: 2 }).await.unwrap().id();
    assert_eq!(
        support::finished(&mut events, second).await.0,
        JobOutcome::Completed
    );
    handle.shutdown().await.unwrap();
    let billing_job = billing.job(in_billing.id()).await.unwrap().unwrap();
    assert_eq!(
        billing_job.status,
        pgq_core::JobStatus::Pending,
        "billing's job never crossed"
    );
    assert_eq!(jobs_in(&db, "billing_jobs").await, 1);
    assert_eq!(jobs_in(&db, "mail_jobs").await, 2);
    assert_eq!(
        jobs_in(&db, "pgq").await,
        0,
        "the default schema saw nothing"
    );
}

#[tokio::test]
async fn migrating_one_schema_leaves_another_tool_s_pgq_schema_untouched() {
    let db = TestDatabase::new().await;
    // Another tool owns `pgq` (as Skytools PgQ does), with objects of its own names.
    sqlx::raw_sql(
        "DROP SCHEMA pgq CASCADE;
         CREATE SCHEMA pgq;
         CREATE TABLE pgq.queue (queue_id serial PRIMARY KEY, queue_name text NOT NULL);
         CREATE FUNCTION pgq.insert_event(text, text, text) RETURNS bigint LANGUAGE sql
             AS $$ SELECT 1::bigint $$;",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let snapshot = || async {
        sqlx::query_scalar::<_, String>(
            "SELECT string_agg(c.relname || ':' || c.relkind::text, ',' ORDER BY c.relname)
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'pgq'",
        )
        .fetch_one(db.pool())
        .await
        .unwrap()
    };
    let before = snapshot().await;
    let client = db.client().with_schema("jobs").unwrap();
    client.migrate().await.unwrap();
    client.migrate().await.unwrap();
    assert_eq!(
        snapshot().await,
        before,
        "the other tool's schema is untouched"
    );
    let id = client.enqueue(InItsSchema { n: 9 }).await.unwrap().id();
    assert!(client.job(id).await.unwrap().is_some());
}

#[tokio::test]
async fn a_schema_name_that_would_need_quoting_is_refused() {
    let db = TestDatabase::new().await;
    for name in [
        "",
        "Jobs",
        "app-jobs",
        "a\"b; DROP TABLE x",
        "pg_jobs",
        "1jobs",
    ] {
        let refused = db.client().with_schema(name);
        assert!(
            matches!(refused, Err(Error::InvalidSchema { .. })),
            "{name:?}: {refused:?}"
        );
    }
    let ok: Client = db.client().with_schema("app_jobs_2").unwrap();
    ok.migrate().await.unwrap();
}

/// A client moved to another schema wakes that schema's workers on its own channel, whatever
/// the client it was cloned from just did. (The two shared one wake-up window per queue name: an
/// enqueue in the other schema within it was left to a trailing notification sent on the first
/// schema's channel, and its workers found the job only when they polled.)
#[tokio::test]
async fn a_client_in_another_schema_wakes_that_schemas_workers_at_once() {
    let db = TestDatabase::new().await;
    let first = db
        .client()
        .with_wakeup_window(std::time::Duration::from_secs(3600));
    let other = first.clone().with_schema("other_jobs").unwrap();
    other.migrate().await.unwrap();
    let mut listener = sqlx::postgres::PgListener::connect_with(db.pool())
        .await
        .unwrap();
    listener.listen("other_jobs_insert").await.unwrap();

    first.enqueue(InItsSchema { n: 1 }).await.unwrap();
    other.enqueue(InItsSchema { n: 1 }).await.unwrap();
    let heard = tokio::time::timeout(support::LIMIT, listener.recv())
        .await
        .expect("the other schema's workers are woken")
        .unwrap();
    assert_eq!(heard.payload(), "shared-name");
}

/// A schema every role may create objects in (`CREATE` granted to `PUBLIC`, as `public` has
/// before PostgreSQL 15): another role's `power(integer, integer)` would run inside pgq's
/// functions. `migrate` refuses to create them there, saying how to close the schema.
#[tokio::test]
async fn migrate_refuses_a_schema_every_role_may_create_in() {
    let db = TestDatabase::new().await;
    sqlx::raw_sql("CREATE SCHEMA open_jobs; GRANT CREATE ON SCHEMA open_jobs TO PUBLIC")
        .execute(db.pool())
        .await
        .unwrap();
    let client = db.client().with_schema("open_jobs").unwrap();
    let err = client.migrate().await.unwrap_err();
    match &err {
        pgq_core::Error::Migration {
            version, message, ..
        } => {
            assert_eq!(*version, 1);
            assert!(message.contains("REVOKE CREATE ON SCHEMA"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let created: bool = sqlx::query_scalar("SELECT to_regclass('open_jobs.jobs') IS NOT NULL")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert!(!created, "nothing is created there");
    sqlx::raw_sql("REVOKE CREATE ON SCHEMA open_jobs FROM PUBLIC")
        .execute(db.pool())
        .await
        .unwrap();
    client.migrate().await.unwrap();
}
