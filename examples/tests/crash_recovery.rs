//! A worker process killed with SIGKILL mid-job loses nothing: another worker completes the job
//! after its lease runs out, or after an operator releases the dead worker's jobs.

use std::process::Stdio;
use std::time::{Duration, Instant};

use pgq_core::{
    Client, Handler, JobContext, JobId, JobOutcome, JobStatus, Task, TaskError, Worker,
    WorkerEvent, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::broadcast;

const LIMIT: Duration = Duration::from_secs(60);

/// The graceful-shutdown example's task, handled here by the surviving worker.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "shutdown-demo", name = "Work")]
struct Work {
    millis: u64,
}

#[async_trait]
impl Handler for Work {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Starts the example with a 1 s lease, waits for its job to start, and kills it with SIGKILL.
/// Returns the dead worker's id and its job.
async fn kill_mid_job(db: &TestDatabase) -> (String, JobId) {
    kill_mid_job_with(db, &["--work-ms", "600000", "--lease-ms", "1000"]).await
}

/// Starts the example with `args`, waits for its job to start, and kills it with SIGKILL.
async fn kill_mid_job_with(db: &TestDatabase, args: &[&str]) -> (String, JobId) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_graceful_shutdown"))
        .args(args)
        .env("DATABASE_URL", db.url())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut worker, mut job) = (None, None);
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("worker ") {
                worker = rest.split(' ').next().map(str::to_owned);
            }
            if let Some(id) = line.strip_prefix("started job ") {
                job = Some(JobId::from(id.parse::<i64>().unwrap()));
                return;
            }
        }
        panic!("the example exited before starting its job");
    };
    tokio::time::timeout(LIMIT, read)
        .await
        .expect("job never started");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &child.id().unwrap().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().await.unwrap();
    assert!(!status.success(), "killed, not exited");
    (worker.expect("worker id printed"), job.unwrap())
}

async fn complete_with_a_new_worker(client: &Client, id: JobId) {
    let worker = Worker::builder(client.clone())
        .queue("shutdown-demo", 1)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    assert_eq!(outcome_of(&mut events, id).await, JobOutcome::Completed);
    handle.shutdown().await.unwrap();
}

/// How job `id`'s next attempt on the worker of `events` ends.
async fn outcome_of(events: &mut broadcast::Receiver<WorkerEvent>, id: JobId) -> JobOutcome {
    let finished = async {
        loop {
            if let WorkerEvent::JobFinished {
                id: done, outcome, ..
            } = events.recv().await.unwrap()
                && done == id
            {
                return outcome;
            }
        }
    };
    tokio::time::timeout(LIMIT, finished)
        .await
        .expect("job finished")
}

#[tokio::test]
async fn a_killed_workers_job_is_rescued_after_its_lease_and_completed_elsewhere() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (dead, id) = kill_mid_job(&db).await;
    let job = client.job(id).await.unwrap().unwrap();
    // The handler starts ahead of its `running` write: killed that early, the job is still
    // `claimed`. Either way the dead worker holds it.
    assert!(
        matches!(job.status, JobStatus::Claimed | JobStatus::Running),
        "{:?}",
        job.status
    );
    assert_eq!(job.worker_id.as_deref(), Some(dead.as_str()));

    // Nobody renews the lease now. Move time past it (1 s) and rescue, as the rescuer does.
    db.advance(Duration::from_secs(2)).await;
    assert_eq!(client.rescue_expired().await.unwrap(), vec![id]);
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Pending);
    assert!(job.last_error.unwrap().starts_with("lease expired"));
    db.make_due(id).await; // skip the retry backoff

    complete_with_a_new_worker(&client, id).await;
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 2));
}

#[tokio::test]
async fn an_operator_releases_a_dead_workers_jobs_in_one_call() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (dead, id) = kill_mid_job(&db).await;
    let due = client.job(id).await.unwrap().unwrap().run_at;
    assert_eq!(client.release_worker(&dead).await.unwrap(), vec![id]);
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Pending, 0));
    assert_eq!(job.run_at, due, "released due as it was");
    assert!(client.release_worker(&dead).await.unwrap().is_empty());

    complete_with_a_new_worker(&client, id).await;
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 1));
}

#[tokio::test]
async fn a_killed_workers_jobs_are_taken_back_long_before_their_leases_run_out() {
    let db = TestDatabase::new().await;
    let client = db.client();
    // A 60 s lease; a heartbeat every 200 ms, so dead 800 ms after the last one.
    let (dead, id) = kill_mid_job_with(
        &db,
        &[
            "--work-ms",
            "600000",
            "--lease-ms",
            "60000",
            "--heartbeat-ms",
            "200",
        ],
    )
    .await;
    let killed = Instant::now();

    // Another worker's rescuer, looking every 200 ms, finds the dead registration.
    let survivor = Worker::builder(client.clone())
        .queue("shutdown-demo", 1)
        .rescue_interval(Duration::from_millis(200))
        .poll_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let mut events = survivor.events();
    let handle = survivor.start();
    let taken_back = async {
        loop {
            let job = client.job(id).await.unwrap().unwrap();
            if job.status == JobStatus::Pending {
                return job;
            }
            // Not a wait for work: the row is read again until the rescuer has moved it.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let job = tokio::time::timeout(LIMIT, taken_back)
        .await
        .expect("the dead worker's job is taken back");
    assert!(
        killed.elapsed() < Duration::from_secs(30),
        "taken back after {:?}, not after the 60 s lease",
        killed.elapsed()
    );
    let error = job.last_error.unwrap();
    assert!(
        error.contains(&dead) && error.contains("heartbeat"),
        "{error}"
    );
    assert!(
        client.workers().await.unwrap().iter().all(|w| w.id != dead),
        "the dead worker is no longer listed"
    );

    db.make_due(id).await; // skip the retry backoff
    assert_eq!(outcome_of(&mut events, id).await, JobOutcome::Completed);
    handle.shutdown().await.unwrap();
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 2));
}
