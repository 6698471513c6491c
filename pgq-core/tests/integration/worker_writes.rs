//! What a job costs the database: its claim and its completion. Jobs claimed into free slots go
//! `pending → running`; jobs claimed ahead that start and succeed before their start is written
//! go `claimed → completed`, their start with them. An audit trigger of the test's own records
//! every status change a worker makes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use pgq_core::{Handler, JobContext, JobOutcome, Retention, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use tokio::sync::Semaphore;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "writes")]
struct Counted {
    gated: bool,
    fail: bool,
}

#[async_trait]
impl Handler for Counted {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if self.gated {
            support::pass_gate(ctx).await;
        }
        if self.fail {
            return Err(TaskError::fail("kept for an operator"));
        }
        Ok(())
    }
}

/// Records every status change of a job, in order.
async fn audit(pool: &PgPool) {
    sqlx::raw_sql(
        "CREATE TABLE public.moves (n bigserial PRIMARY KEY, job bigint, move text);
         CREATE FUNCTION public.record_move() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF OLD.status <> NEW.status THEN
                 INSERT INTO public.moves (job, move) VALUES (NEW.id, OLD.status || '>' || NEW.status);
             END IF;
             RETURN NULL;
         END $$;
         CREATE TRIGGER record_move AFTER UPDATE ON pgq.jobs
             FOR EACH ROW EXECUTE FUNCTION public.record_move();",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// Each job's moves, in order.
async fn moves(pool: &PgPool) -> HashMap<i64, Vec<String>> {
    let rows: Vec<(i64, String)> = sqlx::query_as("SELECT job, move FROM public.moves ORDER BY n")
        .fetch_all(pool)
        .await
        .unwrap();
    let mut moves: HashMap<i64, Vec<String>> = HashMap::new();
    for (job, step) in rows {
        moves.entry(job).or_default().push(step);
    }
    moves
}

#[tokio::test]
async fn jobs_claimed_into_free_slots_run_in_two_writes() {
    let db = TestDatabase::new().await;
    audit(db.pool()).await;
    let client = db.client();
    let ids = [
        client
            .enqueue(Counted {
                gated: true,
                fail: false,
            })
            .await
            .unwrap()
            .id(),
        client
            .enqueue(Counted {
                gated: true,
                fail: false,
            })
            .await
            .unwrap()
            .id(),
    ];
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client.clone())
        .queue("writes", 2)
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    for _ in ids {
        support::event(&mut events, |e| {
            matches!(e, pgq_core::WorkerEvent::JobStarted { .. })
        })
        .await;
    }
    for id in ids {
        let job = client.job(id).await.unwrap().unwrap();
        assert_eq!(
            job.status,
            pgq_core::JobStatus::Running,
            "running from its claim"
        );
        assert!(job.started_at.is_some());
    }
    gate.add_permits(2);
    let outcomes = support::all_finished(&mut events, &ids).await;
    assert!(outcomes.values().all(|o| *o == JobOutcome::Completed));
    handle.shutdown().await.unwrap();
    let moves = moves(db.pool()).await;
    for id in ids {
        assert_eq!(
            moves[&id.get()],
            ["pending>running", "running>completed"],
            "job {id}: its claim and its completion"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_jobs_claimed_ahead_complete_with_their_start() {
    const JOBS: usize = 400;
    let db = TestDatabase::new().await;
    audit(db.pool()).await;
    let client = db.client();
    client
        .enqueue_many((0..JOBS).map(|_| Counted {
            gated: false,
            fail: false,
        }))
        .await
        .unwrap();
    let handle = Worker::builder(client.clone())
        .queue("writes", 4)
        .build()
        .unwrap()
        .start();
    support::completed(&handle, JOBS as u64).await;
    handle.shutdown().await.unwrap();

    let moves = moves(db.pool()).await;
    assert_eq!(moves.len(), JOBS, "every job moved");
    let mut by_path: HashMap<Vec<String>, usize> = HashMap::new();
    for path in moves.into_values() {
        *by_path.entry(path).or_default() += 1;
    }
    let path = |steps: &[&str]| steps.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let allowed = [
        path(&["pending>running", "running>completed"]),
        path(&["pending>claimed", "claimed>completed"]),
        path(&["pending>claimed", "claimed>running", "running>completed"]),
    ];
    for (steps, count) in &by_path {
        assert!(allowed.contains(steps), "{count} jobs went {steps:?}");
    }
    let direct = by_path.get(&allowed[1]).copied().unwrap_or(0);
    assert!(
        direct > 0,
        "quick jobs claimed ahead complete with their start: {by_path:?}"
    );
    let unstarted: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pgq.jobs
         WHERE status <> 'completed' OR started_at IS NULL OR started_at < claimed_at",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!(
        unstarted, 0,
        "every job completed, with a start after its claim"
    );
}

#[tokio::test]
async fn a_retention_of_zero_deletes_completed_jobs_as_they_complete() {
    let db = TestDatabase::new().await;
    audit(db.pool()).await;
    let client = db.client();
    let done: Vec<_> = client
        .enqueue_many((0..20).map(|_| Counted {
            gated: false,
            fail: false,
        }))
        .await
        .unwrap()
        .iter()
        .map(|e| e.id())
        .collect();
    let failed = client
        .enqueue(Counted {
            gated: false,
            fail: true,
        })
        .await
        .unwrap()
        .id();
    let worker = Worker::builder(client.clone())
        .queue("writes", 4)
        .retention(Retention {
            completed: Duration::ZERO,
            ..Retention::default()
        })
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let mut all = done.clone();
    all.push(failed);
    let outcomes = support::all_finished(&mut events, &all).await;
    handle.shutdown().await.unwrap();
    for id in &done {
        assert_eq!(outcomes[id], JobOutcome::Completed);
        assert!(client.job(*id).await.unwrap().is_none(), "job {id} deleted");
    }
    // Deleted by the statement that completed them, not completed and then cleaned away.
    let moves = moves(db.pool()).await;
    for id in &done {
        let completed = moves[&id.get()]
            .iter()
            .any(|step| step.ends_with(">completed"));
        assert!(!completed, "job {id} went {:?}", moves[&id.get()]);
    }
    assert_eq!(outcomes[&failed], JobOutcome::Failed);
    let kept = client
        .job(failed)
        .await
        .unwrap()
        .expect("a failed job is kept");
    assert_eq!(kept.last_error.as_deref(), Some("kept for an operator"));
}
