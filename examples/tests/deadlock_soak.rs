//! No deadlocks under mixed load: two worker processes and two clients, for thirty seconds, do
//! everything at once — claims, completions, lease renewal, failures and immediate retries,
//! cancellations, manual retries, rescues, retention deletes, keyed enqueues with `replace`, and
//! bulk keyed enqueues whose keys overlap — and the database detects no deadlock, and no pgq call
//! fails.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pgq_core::{Client, EnqueueOptions, Error, JobId, Retention, Task};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgPoolOptions;
use tokio::process::{Child, Command};

const SOAK: Duration = Duration::from_secs(30);

/// The fleet worker's task, enqueued from here.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(
    queue = "fleet",
    unique_key = "fleet:{key}",
    max_attempts = 3,
    name = "FleetJob"
)]
struct FleetJob {
    key: u32,
    millis: u64,
    fail: bool,
}

fn worker_process(db: &TestDatabase) -> Child {
    Command::new(env!("CARGO_BIN_EXE_fleet_worker"))
        .args([
            "--concurrency",
            "8",
            "--lease-ms",
            "1500",
            "--rescue-ms",
            "300",
        ])
        .env("DATABASE_URL", db.url())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the fleet worker starts")
}

async fn deadlocks(db: &TestDatabase) -> i64 {
    sqlx::query_scalar("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        .fetch_one(db.pool())
        .await
        .unwrap()
}

/// A cheap, varied number for each step of a client's loop.
fn pick(step: u64, salt: u64, modulo: u64) -> u64 {
    (step.wrapping_mul(6_364_136_223_846_793_005) ^ salt).rotate_left(17) % modulo
}

/// What a client calls counts as failed only when pgq itself failed: an action refused for the
/// job's state (cancelling a finished job, retrying a running one) is a typed answer.
fn failed(result: &Result<impl Sized, Error>) -> bool {
    matches!(
        result,
        Err(Error::Database(_) | Error::Unresponsive(_) | Error::Migration { .. })
    )
}

async fn client_loop(
    client: Client,
    salt: u64,
    failures: Arc<AtomicU64>,
    cancels: Arc<AtomicU64>,
    until: Instant,
) {
    let mut ids: Vec<JobId> = Vec::new();
    let mut step = 0u64;
    let check = |ok: bool| {
        if !ok {
            failures.fetch_add(1, Ordering::SeqCst);
        }
    };
    while Instant::now() < until {
        step += 1;
        let keys = (0..40).map(|i| FleetJob {
            key: ((pick(step, salt, 60) + i * 7) % 80) as u32,
            millis: pick(step + i, salt, 30),
            fail: pick(step + i, salt, 5) == 0,
        });
        match client.enqueue_many(keys).await {
            Ok(enqueued) => ids.extend(enqueued.iter().map(|e| e.id())),
            result => check(!failed(&result)),
        }
        let replaced = client
            .enqueue_with(
                FleetJob {
                    key: pick(step, salt, 80) as u32,
                    millis: 5,
                    fail: false,
                },
                EnqueueOptions::default().replace(),
            )
            .await;
        check(!failed(&replaced));
        if let Some(&id) = ids.get(pick(step, salt, ids.len().max(1) as u64) as usize) {
            let cancelled = client.cancel(id).await;
            if cancelled.is_ok() {
                cancels.fetch_add(1, Ordering::SeqCst);
            }
            check(!failed(&cancelled));
            check(!failed(&client.retry(id).await));
        }
        if step.is_multiple_of(5) {
            check(!failed(&client.rescue_expired().await));
            let retention = Retention {
                completed: Duration::ZERO,
                failed: Duration::from_secs(1),
            };
            check(!failed(&client.delete_finished(retention).await));
        }
        if ids.len() > 2_000 {
            ids.drain(..1_000);
        }
    }
}

#[tokio::test]
async fn mixed_load_from_two_workers_and_two_clients_never_deadlocks() {
    let db = TestDatabase::new().await;
    let before = deadlocks(&db).await;
    let mut workers = [worker_process(&db), worker_process(&db)];
    let failures = Arc::new(AtomicU64::new(0));
    let cancels = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + SOAK;
    let mut clients = Vec::new();
    for salt in [11, 97] {
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_with(db.connect_options())
            .await
            .unwrap();
        clients.push(tokio::spawn(client_loop(
            Client::new(pool),
            salt,
            failures.clone(),
            cancels.clone(),
            until,
        )));
    }
    // Jobs held by a worker that is gone, with leases run out: the rescuers take them back.
    let ghost = tokio::spawn({
        let pool = db.pool().clone();
        async move {
            while Instant::now() < until {
                sqlx::query(
                    "UPDATE pgq.jobs SET status = 'claimed', phase = 1, attempts = attempts + 1,
                            worker_id = 'ghost', claimed_at = now(),
                            lease_expires_at = now() - interval '1 second'
                     WHERE id = ANY(ARRAY(SELECT id FROM pgq.jobs WHERE phase = 0
                                          ORDER BY id LIMIT 5 FOR UPDATE SKIP LOCKED))",
                )
                .execute(&pool)
                .await
                .expect("ghost claims");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    for client in clients {
        client.await.unwrap();
    }
    ghost.await.unwrap();
    for worker in &mut workers {
        let stopped = std::process::Command::new("kill")
            .args(["-TERM", &worker.id().unwrap().to_string()])
            .status()
            .unwrap();
        assert!(stopped.success());
    }
    for worker in &mut workers {
        let status = tokio::time::timeout(Duration::from_secs(60), worker.wait())
            .await
            .expect("a worker stops within its grace period")
            .unwrap();
        assert!(status.success(), "a worker process failed: {status:?}");
    }
    assert_eq!(failures.load(Ordering::SeqCst), 0, "pgq calls failed");

    // Backends report their statistics when they end: wait until the others have.
    let settled = async {
        loop {
            let others: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .fetch_one(db.pool())
            .await
            .unwrap();
            if others == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(20), settled).await;
    assert_eq!(
        deadlocks(&db).await,
        before,
        "the database detected deadlocks"
    );
    // The load was the load described: rescues and cancellations happened, and work flowed.
    let (rescued, runs): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE errors::text LIKE '%lease expired%'),
                coalesce(sum(attempts), 0)::bigint
         FROM pgq.jobs",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    let cancels = cancels.load(Ordering::SeqCst);
    assert!(
        rescued > 0 && cancels > 0 && runs > 100,
        "{rescued} {cancels} {runs}"
    );
}
