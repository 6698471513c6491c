//! A paused queue is paused for every worker process, and stays paused across their restarts
//! until resumed: worker processes of the fleet example, started and stopped by the test.

mod fleet;

use std::time::Duration;

use pgq_core::{Client, JobId, JobStatus, Task};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::process::Child;
use tokio::sync::mpsc;

const LIMIT: Duration = Duration::from_secs(30);

/// Longer than a poll: a worker that still claimed from the paused queue would have done so by
/// then, woken by the jobs' notifications or by its poll.
const A_WORKER_WOULD_HAVE_CLAIMED: Duration = Duration::from_millis(2_500);

/// The fleet example's task; enqueued here, run by the fleet's processes.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "fleet", unique_key = "fleet:{key}", max_attempts = 3)]
struct FleetJob {
    key: u32,
    millis: u64,
    fail: bool,
}

/// A worker process of the fleet (killed when dropped) and the lines it prints.
struct FleetWorker {
    process: Child,
    output: mpsc::UnboundedReceiver<String>,
}

/// Starts one worker process of the fleet and waits until it runs.
async fn start_worker(db: &TestDatabase) -> FleetWorker {
    let (process, _, output) = fleet::start_worker(db, &["--concurrency", "2"]).await;
    FleetWorker { process, output }
}

/// Waits until `worker` says it claims nothing from the queue: no claim of its is in flight.
async fn paused(worker: &mut FleetWorker) {
    tokio::time::timeout(LIMIT, async {
        while let Some(line) = worker.output.recv().await {
            if line == "queue fleet paused" {
                return;
            }
        }
        panic!("the worker exited before it paused");
    })
    .await
    .expect("the worker pauses");
}

async fn statuses(client: &Client, ids: &[JobId]) -> Vec<JobStatus> {
    let mut statuses = Vec::new();
    for &id in ids {
        statuses.push(client.job(id).await.unwrap().unwrap().status);
    }
    statuses
}

#[tokio::test]
async fn a_pause_holds_for_every_worker_process_and_across_their_restarts() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut first = start_worker(&db).await;
    let mut second = start_worker(&db).await;

    client.pause_queue("fleet").await.unwrap();
    // A claim already on its way when a worker hears of the pause may still take jobs: the
    // pause holds from each worker's report on.
    paused(&mut first).await;
    paused(&mut second).await;
    let mut ids = Vec::new();
    for key in 0..4 {
        let job = FleetJob {
            key,
            millis: 0,
            fail: false,
        };
        ids.push(client.enqueue(job).await.unwrap().id());
    }
    tokio::time::sleep(A_WORKER_WOULD_HAVE_CLAIMED).await;
    assert_eq!(statuses(&client, &ids).await, [JobStatus::Pending; 4]);

    // A restarted worker finds the queue still paused.
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &first.process.id().unwrap().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let mut third = start_worker(&db).await;
    paused(&mut third).await;
    tokio::time::sleep(A_WORKER_WOULD_HAVE_CLAIMED).await;
    assert_eq!(statuses(&client, &ids).await, [JobStatus::Pending; 4]);

    client.resume_queue("fleet").await.unwrap();
    tokio::time::timeout(LIMIT, async {
        while statuses(&client, &ids).await != [JobStatus::Completed; 4] {
            // The rows are read again until the workers have run them.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("every job runs once the queue is resumed");
}
