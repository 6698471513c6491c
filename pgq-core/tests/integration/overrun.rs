//! A hung job does not hold its row forever: an attempt past its `timeout` whose handler does not
//! stop (it blocks its thread) is no longer renewed, its lease runs out, another worker rescues
//! and runs the job, and the late result is fenced out.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pgq_core::{Handler, JobContext, JobOutcome, JobStatus, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

use crate::support;

/// Blocks its thread for a long time on its first attempt; later attempts return at once.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "overrun", timeout = "100ms", lease = "1s")]
struct Stuck;

#[async_trait]
impl Handler for Stuck {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if ctx.attempt() == 1 {
            std::thread::sleep(Duration::from_secs(6));
            let blocked = ctx.state::<Arc<AtomicUsize>>().expect("a counter");
            blocked.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

#[tokio::test]
async fn an_attempt_that_overruns_its_timeout_loses_its_row_to_another_worker() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Stuck).await.unwrap().id();
    let first_returned = Arc::new(AtomicUsize::new(0));
    let stuck_worker = Worker::builder(client.clone())
        .queue("overrun", 1)
        .worker_id("stuck")
        .shutdown_grace(Duration::from_millis(100))
        .state(first_returned.clone())
        .build()
        .unwrap();
    let mut stuck_events = stuck_worker.events();
    let application = support::application_runtime();
    let stuck = support::start_on(&application, stuck_worker).await;
    support::held(db.pool(), id).await;

    // No longer renewed after 100 ms + the margin, the 1 s lease runs out, and the other
    // worker's rescuer returns the job to pending: its handler still blocks its thread.
    let other = Worker::builder(client.clone())
        .queue("overrun", 1)
        .worker_id("other")
        .rescue_interval(Duration::from_millis(100))
        .state(Arc::new(AtomicUsize::new(0)))
        .build()
        .unwrap();
    let mut events = other.events();
    let other = other.start();
    let job = support::eventually(|| async {
        let job = client.job(id).await.unwrap().unwrap();
        (job.status == JobStatus::Pending).then_some(job)
    })
    .await;
    assert!(job.last_error.unwrap().contains("lease expired"));
    assert_eq!(
        first_returned.load(Ordering::SeqCst),
        0,
        "rescued while it still ran"
    );
    db.make_due(id).await;
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Completed
    );

    // The first attempt returns late: fenced out, it changes nothing.
    let (outcome, _) = support::finished(&mut stuck_events, id).await;
    assert_eq!(outcome, JobOutcome::LeaseLost);
    assert_eq!(first_returned.load(Ordering::SeqCst), 1);
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 2));
    assert_eq!(job.worker_id.as_deref(), Some("other"));
    other.shutdown().await.unwrap();
    stuck.shutdown().await.unwrap();
    application.shutdown_background();
}
