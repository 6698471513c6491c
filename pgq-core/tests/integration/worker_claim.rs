//! Claiming: priority, then run_at, then id; only due jobs; never more than free slots; an idle
//! worker's claim of what waits, in one round trip.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::{
    Client, EnqueueOptions, Handler, JobContext, JobId, JobStatus, Task, TaskError, Worker,
    WorkerEvent, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "claim-order")]
struct Ordered {
    label: String,
}

#[async_trait]
impl Handler for Ordered {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Holds its slot until the test adds a permit.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "claim-slots")]
struct Hold;

#[async_trait]
impl Handler for Hold {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

/// Two tasks of one queue with leases of their own, each holding its slot until the test adds a
/// permit.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "claim-idle", lease = "30s")]
struct ShortLease {
    label: String,
}

#[async_trait]
impl Handler for ShortLease {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "claim-idle", lease = "300s")]
struct LongLease {
    label: String,
}

#[async_trait]
impl Handler for LongLease {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

#[tokio::test]
async fn jobs_run_by_priority_then_run_at_then_id() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let at = |secs: i64| chrono::Utc::now() - chrono::Duration::seconds(secs);
    let enqueue = |label: &str, priority: i16, run_at| {
        let client = client.clone();
        let label = label.to_owned();
        async move {
            let options = EnqueueOptions::default().priority(priority).run_at(run_at);
            client
                .enqueue_with(Ordered { label }, options)
                .await
                .unwrap()
                .id()
        }
    };
    let backfill = enqueue("backfill", 30, at(300)).await;
    let normal_new = enqueue("normal-new", 100, at(10)).await;
    let normal_old = enqueue("normal-old", 100, at(200)).await;
    let urgent = enqueue("urgent", 150, at(5)).await;
    let tie_a = enqueue("tie-a", 100, at(100)).await;
    sqlx::query(
        "UPDATE pgq.jobs SET run_at = (SELECT run_at FROM pgq.jobs WHERE id = $1) WHERE id = $2",
    )
    .bind(tie_a.get())
    .bind(normal_new.get())
    .execute(db.pool())
    .await
    .unwrap();
    let future = client
        .enqueue_with(
            Ordered {
                label: "future".into(),
            },
            EnqueueOptions::default()
                .priority(1000)
                .delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap()
        .id();

    let worker = Worker::builder(client.clone())
        .queue("claim-order", 1)
        .batch_size(1)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let mut started = Vec::new();
    while started.len() < 5 {
        if let WorkerEvent::JobStarted { id, .. } =
            support::event(&mut events, |e| matches!(e, WorkerEvent::JobStarted { .. })).await
        {
            started.push(id);
        }
    }
    support::completed(&handle, 5).await;
    handle.shutdown().await.unwrap();
    let (first_tie, second_tie) = if tie_a < normal_new {
        (tie_a, normal_new)
    } else {
        (normal_new, tie_a)
    };
    assert_eq!(
        started,
        vec![urgent, normal_old, first_tie, second_tie, backfill]
    );
    let future = client.job(future).await.unwrap().unwrap();
    assert_eq!(
        (future.status, future.attempts),
        (JobStatus::Pending, 0),
        "a job due in an hour is not claimed"
    );
}

#[tokio::test]
async fn never_more_jobs_held_than_free_slots() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.enqueue_many((0..10).map(|_| Hold)).await.unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client.clone())
        .queue("claim-slots", 3)
        .batch_size(16)
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    for _ in 0..3 {
        support::event(&mut events, |e| matches!(e, WorkerEvent::JobStarted { .. })).await;
    }
    let held: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status IN ('claimed', 'running')")
            .fetch_one(db.pool())
            .await
            .unwrap();
    assert_eq!(held, 3);
    let row: (i32, String, bool, bool) = sqlx::query_as(
        "SELECT attempts, worker_id, claimed_at IS NOT NULL, lease_expires_at > now()
         FROM pgq.jobs WHERE status = 'running' LIMIT 1",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!(row, (1, handle.worker_id().to_owned(), true, true));

    gate.add_permits(10);
    support::completed(&handle, 10).await;
    handle.shutdown().await.unwrap();
}

/// Enqueues `task` with `priority`, due `secs_ago` seconds ago.
async fn enqueue_at<T: Task>(client: &Client, task: T, priority: i16, secs_ago: i64) -> JobId {
    let run_at = chrono::Utc::now() - chrono::Duration::seconds(secs_ago);
    let options = EnqueueOptions::default().priority(priority).run_at(run_at);
    client.enqueue_with(task, options).await.unwrap().id()
}

/// An idle worker with slots for everything that waits claims it in one statement with nothing
/// to complete or start: every job straight to `running`, started in claim order, each leased
/// for its own task's lease.
#[tokio::test]
async fn an_idle_worker_claims_what_waits_at_once_in_order_with_each_tasks_lease() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let low = enqueue_at(
        &client,
        ShortLease {
            label: "low".into(),
        },
        10,
        60,
    )
    .await;
    let old = enqueue_at(
        &client,
        LongLease {
            label: "old".into(),
        },
        100,
        50,
    )
    .await;
    let new = enqueue_at(
        &client,
        ShortLease {
            label: "new".into(),
        },
        100,
        5,
    )
    .await;
    let high = enqueue_at(
        &client,
        LongLease {
            label: "high".into(),
        },
        500,
        1,
    )
    .await;
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client.clone())
        .queue("claim-idle", 4)
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let mut started = Vec::new();
    while started.len() < 4 {
        if let WorkerEvent::JobStarted { id, .. } =
            support::event(&mut events, |e| matches!(e, WorkerEvent::JobStarted { .. })).await
        {
            started.push(id);
        }
    }
    assert_eq!(started, vec![high, old, new, low], "claim order");
    let rows: Vec<(i64, String, i16, i32, bool, bool, f64)> = sqlx::query_as(
        "SELECT id, status, phase, attempts, worker_id = $1, started_at = claimed_at,
                -- The lease counts from the row's write, a moment after the claim's start.
                round(extract(epoch FROM lease_expires_at - claimed_at))::float8
         FROM pgq.jobs ORDER BY id",
    )
    .bind(handle.worker_id())
    .fetch_all(db.pool())
    .await
    .unwrap();
    let lease = |id: JobId| if id == old || id == high { 300.0 } else { 30.0 };
    let expected: Vec<_> = [low, old, new, high]
        .into_iter()
        .map(|id| (id.get(), "running".to_owned(), 1, 1, true, true, lease(id)))
        .collect();
    assert_eq!(rows, expected);

    gate.add_permits(4);
    support::completed(&handle, 4).await;
    handle.shutdown().await.unwrap();
}

/// Quick, or holding its slot until the test adds a permit.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "claim-hoard")]
struct MaybeHung {
    hangs: bool,
}

#[async_trait]
impl Handler for MaybeHung {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if self.hangs {
            support::pass_gate(ctx).await;
        }
        Ok(())
    }
}

/// Quick jobs make a worker claim ahead of its slots; when the next job it starts hangs, the jobs
/// it claimed ahead go back to pending within seconds, and another worker runs them.
#[tokio::test]
async fn jobs_claimed_ahead_of_a_hung_slot_go_back_for_other_workers() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let quick = |n| (0..n).map(|_| MaybeHung { hangs: false });
    client.enqueue_many(quick(300)).await.unwrap();
    let hung = client
        .enqueue(MaybeHung { hangs: true })
        .await
        .unwrap()
        .id();
    let after: Vec<JobId> = client
        .enqueue_many(quick(100))
        .await
        .unwrap()
        .iter()
        .map(|e| e.id())
        .collect();
    let gate = Arc::new(Semaphore::new(0));
    let first = Worker::builder(client.clone())
        .queue("claim-hoard", 1)
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = first.events();
    let first = first.start();
    support::event(
        &mut events,
        |e| matches!(e, WorkerEvent::JobStarted { id, .. } if *id == hung),
    )
    .await;
    let second = Worker::builder(client.clone())
        .queue("claim-hoard", 4)
        .state(gate.clone())
        .build()
        .unwrap()
        .start();
    support::eventually(|| async {
        let mut done = 0;
        for &id in &after {
            if client.job(id).await.unwrap().unwrap().status == JobStatus::Completed {
                done += 1;
            }
        }
        (done == after.len()).then_some(())
    })
    .await;
    for &id in &after {
        let job = client.job(id).await.unwrap().unwrap();
        assert_eq!(job.attempts, 1, "{job:?} ran once");
    }
    gate.add_permits(1);
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
}
