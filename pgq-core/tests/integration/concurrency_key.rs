//! Concurrency limits per key (`#[task(concurrency_key, concurrency)]`): the key and limit are
//! stored by every enqueue path, a key's jobs beyond its limit wait and then run, a hot key's
//! backlog does not hold back the other keys, and unkeyed tasks on the same queue run freely.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::{
    Client, EnqueueOptions, Enqueued, Error, Handler, JobContext, Task, TaskError, Worker,
    async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(
    queue = "tenants",
    concurrency_key = "tenant:{tenant}",
    concurrency = 1
)]
struct PerTenant {
    tenant: String,
    n: u32,
}

#[async_trait]
impl Handler for PerTenant {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

/// Shares `PerTenant`'s key on its queue, with a limit of its own.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(
    queue = "tenants",
    concurrency_key = "tenant:{tenant}",
    concurrency = 3
)]
struct TenantReport {
    tenant: String,
    n: u32,
}

#[async_trait]
impl Handler for TenantReport {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "tenants")]
struct Unkeyed {
    n: u32,
}

#[async_trait]
impl Handler for Unkeyed {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(name = "concurrency_key.unique", queue = "stored")]
#[task(unique_key = "{n}", concurrency_key = "{group}", concurrency = 3)]
struct UniqueAndKeyed {
    n: u32,
    group: u32,
}

fn tenant(tenant: &str, n: u32) -> PerTenant {
    PerTenant {
        tenant: tenant.into(),
        n,
    }
}

fn start(client: &Client, gate: &Arc<Semaphore>, concurrency: usize) -> pgq_core::WorkerHandle {
    Worker::builder(client.clone())
        .queue("tenants", concurrency)
        .poll_interval(Duration::from_millis(100))
        .state(gate.clone())
        .build()
        .unwrap()
        .start()
}

/// The held jobs per concurrency key (`None` for unkeyed jobs), sorted.
async fn held(db: &TestDatabase) -> Vec<(Option<String>, i64)> {
    sqlx::query_as(
        "SELECT concurrency_key, count(*) FROM pgq.jobs WHERE phase = 1
         GROUP BY concurrency_key ORDER BY concurrency_key",
    )
    .fetch_all(db.pool())
    .await
    .unwrap()
}

async fn wait_until_all_completed(db: &TestDatabase, jobs: i64) {
    support::eventually(|| async {
        let completed: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status = 'completed'")
                .fetch_one(db.pool())
                .await
                .unwrap();
        (completed == jobs).then_some(())
    })
    .await;
}

#[tokio::test]
async fn every_enqueue_path_stores_the_key_and_its_limit() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.enqueue(tenant("a", 1)).await.unwrap();
    client
        .enqueue_many([tenant("b", 2), tenant("c", 3)])
        .await
        .unwrap();
    let mut tx = db.pool().begin().await.unwrap();
    client.enqueue_in(&mut tx, tenant("d", 4)).await.unwrap();
    client
        .enqueue_many_in(&mut tx, [tenant("e", 5)])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    client
        .enqueue(UniqueAndKeyed { n: 1, group: 7 })
        .await
        .unwrap();
    client
        .enqueue_many([
            UniqueAndKeyed { n: 2, group: 7 },
            UniqueAndKeyed { n: 1, group: 8 },
        ])
        .await
        .unwrap();
    client.enqueue(Unkeyed { n: 1 }).await.unwrap();
    let rows: Vec<(String, Option<String>, Option<i32>)> =
        sqlx::query_as("SELECT task, concurrency_key, concurrency_limit FROM pgq.jobs ORDER BY id")
            .fetch_all(db.pool())
            .await
            .unwrap();
    let keyed = |key: &str, limit| ("PerTenant".to_owned(), Some(key.to_owned()), Some(limit));
    let unique = |key: &str| {
        (
            "concurrency_key.unique".to_owned(),
            Some(key.to_owned()),
            Some(3),
        )
    };
    assert_eq!(
        rows,
        [
            keyed("tenant:a", 1),
            keyed("tenant:b", 1),
            keyed("tenant:c", 1),
            keyed("tenant:d", 1),
            keyed("tenant:e", 1),
            unique("7"),
            // n = 1 again is a duplicate of the first: not inserted.
            unique("7"),
            ("Unkeyed".to_owned(), None, None),
        ]
    );
}

/// A replace takes the new payload's key: the job is counted under the key it will run with.
#[tokio::test]
async fn a_replaced_job_takes_the_new_payloads_key() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let first = client
        .enqueue(UniqueAndKeyed { n: 1, group: 7 })
        .await
        .unwrap();
    let replace = EnqueueOptions::default().replace();
    let replaced = client
        .enqueue_with(UniqueAndKeyed { n: 1, group: 8 }, replace)
        .await
        .unwrap();
    assert_eq!(replaced, Enqueued::Replaced(first.id()));
    let (key, limit, group): (Option<String>, Option<i32>, i64) = sqlx::query_as(
        "SELECT concurrency_key, concurrency_limit, (payload->>'group')::int8 FROM pgq.jobs",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!((key.as_deref(), limit, group), (Some("8"), Some(3), 8));
}

#[tokio::test]
async fn a_keyed_task_goes_only_to_its_own_queue() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let elsewhere = EnqueueOptions::default().queue("elsewhere");
    let refused = client
        .enqueue_with(tenant("acme", 1), elsewhere)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, Error::InvalidOption { option: "queue", reason, .. }
                 if reason.contains("concurrency key")),
        "{refused}"
    );
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.jobs")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(count, 0);
}

#[tokio::test]
async fn a_keys_jobs_beyond_its_limit_wait_and_then_run() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let gate = Arc::new(Semaphore::new(0));
    // Two workers with four slots each: eight slots, one job of the key at a time.
    let (first, second) = (start(&client, &gate, 4), start(&client, &gate, 4));
    let jobs = 4;
    client
        .enqueue_many((0..jobs).map(|n| tenant("acme", n)))
        .await
        .unwrap();
    for done in 0..i64::from(jobs) {
        support::eventually(|| async {
            (held(&db).await == [(Some("tenant:acme".to_owned()), 1)]).then_some(())
        })
        .await;
        gate.add_permits(1);
        support::eventually(|| async {
            let completed: i64 =
                sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status = 'completed'")
                    .fetch_one(db.pool())
                    .await
                    .unwrap();
            (completed > done).then_some(())
        })
        .await;
        assert!(held(&db).await.iter().all(|(_, count)| *count <= 1));
    }
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_hot_key_does_not_starve_other_keys() {
    let db = TestDatabase::new().await;
    let client = db.client();
    // The hot key's backlog is older than the other keys' jobs, and larger than any claim.
    client
        .enqueue_many((0..300).map(|n| tenant("hot", n)))
        .await
        .unwrap();
    client
        .enqueue_many([tenant("b", 0), tenant("c", 0)])
        .await
        .unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let worker = start(&client, &gate, 8);
    support::eventually(|| async {
        let expected = [
            (Some("tenant:b".to_owned()), 1),
            (Some("tenant:c".to_owned()), 1),
            (Some("tenant:hot".to_owned()), 1),
        ];
        (held(&db).await == expected).then_some(())
    })
    .await;
    gate.add_permits(1_000);
    wait_until_all_completed(&db, 302).await;
    worker.shutdown().await.unwrap();
}

#[tokio::test]
async fn unkeyed_tasks_on_the_same_queue_are_unaffected() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client
        .enqueue_many((0..3).map(|n| tenant("acme", n)))
        .await
        .unwrap();
    client
        .enqueue_many((0..4).map(|n| Unkeyed { n }))
        .await
        .unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let worker = start(&client, &gate, 8);
    support::eventually(|| async {
        let expected = [(Some("tenant:acme".to_owned()), 1), (None, 4)];
        (held(&db).await == expected).then_some(())
    })
    .await;
    gate.add_permits(1_000);
    wait_until_all_completed(&db, 7).await;
    worker.shutdown().await.unwrap();
}

/// Tasks that format one key share its slots, each job held to its own limit: while a job of
/// the limit-1 task runs, jobs of the limit-3 task on the same key still start, up to 3 held.
#[tokio::test]
async fn each_job_of_a_shared_key_is_held_to_its_own_limit() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let gate = Arc::new(Semaphore::new(0));
    let worker = start(&client, &gate, 8);
    client.enqueue(tenant("acme", 1)).await.unwrap();
    support::eventually(|| async {
        (held(&db).await == [(Some("tenant:acme".to_owned()), 1)]).then_some(())
    })
    .await;
    client
        .enqueue_many((0..4).map(|n| TenantReport {
            tenant: "acme".into(),
            n,
        }))
        .await
        .unwrap();
    // The running limit-1 job and two reports: three of the key, the reports' limit.
    support::eventually(|| async {
        (held(&db).await == [(Some("tenant:acme".to_owned()), 3)]).then_some(())
    })
    .await;
    gate.add_permits(5);
    wait_until_all_completed(&db, 5).await;
    worker.shutdown().await.unwrap();
}
