//! A worker's connection budget: its own pools are sized as configured, named so that an
//! operator finds them in `pg_stat_activity`, and made like the client's pool — its hooks run on
//! every connection pgq opens.

use std::collections::HashMap;

use pgq_core::{Client, Handler, JobContext, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::Executor;
use sqlx::postgres::PgPoolOptions;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "budget-a")]
struct Budgeted {
    n: u32,
}

#[async_trait]
impl Handler for Budgeted {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_worker_opens_the_connections_its_budget_allows_named_and_hooked() {
    let db = TestDatabase::new().await;
    sqlx::raw_sql("CREATE TABLE public.hooked (pid integer)")
        .execute(db.pool())
        .await
        .unwrap();
    // The application's pool, with a hook on every new connection.
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .test_before_acquire(false)
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                conn.execute("INSERT INTO public.hooked VALUES (pg_backend_pid())")
                    .await?;
                Ok(())
            })
        })
        .connect_with(db.connect_options().application_name("the-app"))
        .await
        .unwrap();
    let client = Client::new(pool);
    let worker = Worker::builder(client.clone())
        .queue("budget-a", 4)
        .queue("budget-b", 2)
        .dispatch_connections(2)
        .upkeep_connections(1)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::event(&mut events, |e| {
        *e == pgq_core::WorkerEvent::ListenerConnected
    })
    .await;
    let ids: Vec<_> = client
        .enqueue_many((0..200).map(|n| Budgeted { n }))
        .await
        .unwrap()
        .iter()
        .map(|e| e.id())
        .collect();
    support::all_finished(&mut events, &ids).await;

    let names: Vec<(String, i32)> = sqlx::query_as(
        "SELECT application_name, pid FROM pg_stat_activity WHERE datname = current_database()",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for (name, _) in &names {
        *count.entry(name.as_str()).or_default() += 1;
    }
    assert!(
        count.get("pgq-dispatch:budget-a").copied().unwrap_or(0) <= 2,
        "{count:?}"
    );
    assert!(
        count.get("pgq-dispatch:budget-b").copied().unwrap_or(0) <= 2,
        "{count:?}"
    );
    assert!(
        count.get("pgq-upkeep").copied().unwrap_or(0) <= 1,
        "{count:?}"
    );
    assert_eq!(count.get("pgq-listen").copied(), Some(1), "{count:?}");
    assert!(count.get("the-app").copied().unwrap_or(0) <= 4, "{count:?}");
    assert!(count.contains_key("pgq-dispatch:budget-a"), "{count:?}");

    // Every connection of the application's pool and of pgq's ran the application's hook.
    let hooked: Vec<i32> = sqlx::query_scalar("SELECT pid FROM public.hooked")
        .fetch_all(db.pool())
        .await
        .unwrap();
    for (name, pid) in &names {
        if name.starts_with("pgq-") || name == "the-app" {
            assert!(hooked.contains(pid), "{name} ({pid}) did not run the hook");
        }
    }
    handle.shutdown().await.unwrap();
}

/// `Client::connect` names its pool's connections, unless the URL names them.
#[tokio::test]
async fn the_pool_client_connect_makes_is_named() {
    let db = TestDatabase::new().await;
    // The name of the pool's connection that answers.
    let name = |client: Client| async move {
        client.enqueue(Budgeted { n: 1 }).await.unwrap();
        let name: String = sqlx::query_scalar("SELECT current_setting('application_name')")
            .fetch_one(client.pool())
            .await
            .unwrap();
        client.pool().close().await;
        name
    };
    assert_eq!(
        name(Client::connect(&db.url()).await.unwrap()).await,
        "pgq-client"
    );
    let url = format!("{}&application_name=billing", db.url());
    let url = if url.contains('?') {
        url
    } else {
        url.replacen('&', "?", 1)
    };
    assert_eq!(name(Client::connect(&url).await.unwrap()).await, "billing");
}

/// A statement time limit longer than PostgreSQL's (about 24.8 days) still lets a worker open
/// its connections and run jobs, and behind a pooler lets every statement run: the server's own
/// limit is held to the longest it takes. (It was sent as it was, and refused.)
#[tokio::test]
async fn a_statement_limit_longer_than_the_servers_still_runs_jobs() {
    let db = TestDatabase::new().await;
    let month = std::time::Duration::from_secs(30 * 24 * 3600);
    for behind_pooler in [false, true] {
        let mut client = Client::new(db.pool().clone()).with_statement_timeout(month);
        if behind_pooler {
            client = client.behind_pooler();
        }
        let worker = Worker::builder(client.clone())
            .queue("budget-a", 1)
            .build()
            .unwrap();
        let mut events = worker.events();
        let handle = worker.start();
        let id = client.enqueue(Budgeted { n: 1 }).await.unwrap().id();
        let (outcome, _) = support::finished(&mut events, id).await;
        assert_eq!(outcome, pgq_core::JobOutcome::Completed, "{behind_pooler}");
        handle.shutdown().await.unwrap();
    }
}

/// A statement of pgq's cancelled at the application's own `statement_timeout` (its pool's
/// setting) is the database's error, with PostgreSQL's code, not `Error::Unresponsive` naming
/// pgq's limit, and the connection is not closed for it.
#[tokio::test]
async fn the_applications_own_statement_timeout_is_the_databases_error() {
    let db = TestDatabase::new().await;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                conn.execute("SET statement_timeout = 200").await?;
                Ok(())
            })
        })
        .connect_with(db.connect_options())
        .await
        .unwrap();
    let client = Client::new(pool);
    client.pause_queue("held").await.unwrap();
    // The queue's row, locked elsewhere: the next pause waits for it past 200 ms.
    let mut holder = db.pool().begin().await.unwrap();
    sqlx::query("SELECT 1 FROM pgq.queues WHERE name = 'held' FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let err = client.pause_queue("held").await.unwrap_err();
    let code = match &err {
        pgq_core::Error::Database(db_err) => db_err
            .as_database_error()
            .and_then(|e| e.code())
            .map(|code| code.into_owned()),
        _ => None,
    };
    assert_eq!(code.as_deref(), Some("57014"), "{err:?}");
    holder.rollback().await.unwrap();
}

/// An application that rotates its pool's credentials (`set_connect_options`, as a cloud IAM
/// token needs) rotates them for the worker's own connections: those made after the change log
/// in with the new ones, and the worker goes on working.
#[tokio::test]
async fn the_workers_connections_follow_the_client_pools_new_credentials() {
    let db = TestDatabase::new().await;
    let role = format!("{}_rotated", db.name());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE \"{role}\" LOGIN PASSWORD '{role}';
         GRANT USAGE ON SCHEMA pgq TO \"{role}\";
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgq TO \"{role}\";
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA pgq TO \"{role}\";"
    )))
    .execute(db.pool())
    .await
    .unwrap();
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .test_before_acquire(false)
        .connect_with(db.connect_options())
        .await
        .unwrap();
    let client = Client::new(pool.clone());
    let worker = Worker::builder(client.clone())
        .queue("budget-a", 1)
        .build()
        .unwrap()
        .start();
    pool.set_connect_options(db.connect_options().username(&role).password(&role));
    // Connections made before the change keep their login; those made after take the new one.
    let own_by = |app: &'static str| {
        let (pool, role) = (db.pool().clone(), role.clone());
        async move {
            sqlx::query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = current_database() AND application_name = $1
                   AND usename <> $2",
            )
            .bind(app)
            .bind(&role)
            .execute(&pool)
            .await
            .unwrap();
            let by_role: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT FROM pg_stat_activity
                 WHERE datname = current_database() AND application_name = $1 AND usename = $2)",
            )
            .bind(app)
            .bind(&role)
            .fetch_one(&pool)
            .await
            .unwrap();
            by_role
        }
    };
    support::eventually(|| async {
        (own_by("pgq-upkeep").await && own_by("pgq-dispatch:budget-a").await).then_some(())
    })
    .await;
    let id = client.enqueue(Budgeted { n: 1 }).await.unwrap().id();
    support::eventually(|| async {
        let job = client.job(id).await.unwrap().unwrap();
        (job.status == pgq_core::JobStatus::Completed).then_some(())
    })
    .await;
    worker.shutdown().await.unwrap();
    pool.close().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP OWNED BY \"{role}\"; DROP ROLE \"{role}\""
    )))
    .execute(db.pool())
    .await
    .unwrap();
}
