//! Live workers: each registers, heartbeats with how many jobs it holds, and is removed at a
//! clean shutdown; a worker whose registration expired is dead, and any other worker's rescuer
//! takes its jobs back at once.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::{Handler, JobContext, JobStatus, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "registered")]
struct Held;

#[async_trait]
impl Handler for Held {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

#[tokio::test]
async fn a_worker_is_listed_with_its_queues_and_held_jobs_until_it_shuts_down() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client.clone())
        .queue("registered", 3)
        .heartbeat_interval(Duration::from_millis(50))
        .state(gate.clone())
        .build()
        .unwrap();
    let worker_id = worker.worker_id().to_owned();
    let handle = worker.start();
    let id = client.enqueue(Held).await.unwrap().id();
    support::held(db.pool(), id).await;

    let listed = support::eventually(|| async {
        let workers = client.workers().await.unwrap();
        workers
            .into_iter()
            .find(|w| w.id == worker_id && w.held == 1)
    })
    .await;
    assert_eq!(listed.pid, std::process::id());
    assert_eq!(listed.queues.get("registered"), Some(&3));
    assert!(!listed.host.is_empty());
    assert!(listed.heartbeat_at >= listed.started_at);

    // Heartbeats go on: the last one moves forward.
    support::eventually(|| async {
        let workers = client.workers().await.unwrap();
        workers
            .into_iter()
            .find(|w| w.id == worker_id && w.heartbeat_at > listed.heartbeat_at)
    })
    .await;

    gate.add_permits(1);
    handle.shutdown().await.unwrap();
    assert!(
        client.workers().await.unwrap().is_empty(),
        "a clean shutdown removes the registration"
    );
}

#[tokio::test]
async fn a_dead_workers_jobs_are_taken_back_by_any_rescuer_without_waiting_for_leases() {
    let db = TestDatabase::new().await;
    let client = db.client();
    // A worker that died holding a job with an hour of lease left: its registration expired.
    let id = client.enqueue(Held).await.unwrap().id();
    sqlx::raw_sql(
        "INSERT INTO pgq.workers (id, host, pid, queues, expires_at)
         VALUES ('gone:1:abc', 'gone', 1, '{\"registered\": 1}', now() - interval '1 second');
         UPDATE pgq.jobs SET status = 'running', phase = 1, attempts = 1, worker_id = 'gone:1:abc',
             claimed_at = now(), started_at = now(), lease_expires_at = now() + interval '1 hour'",
    )
    .execute(db.pool())
    .await
    .unwrap();
    assert!(
        client.workers().await.unwrap().is_empty(),
        "an expired worker is not live"
    );

    let gate = Arc::new(Semaphore::new(1));
    let worker = Worker::builder(client.clone())
        .queue("registered", 1)
        .rescue_interval(Duration::from_millis(50))
        .state(gate)
        .build()
        .unwrap();
    let handle = worker.start();
    let job = support::eventually(|| async {
        let job = client.job(id).await.unwrap().unwrap();
        (job.status == JobStatus::Pending).then_some(job)
    })
    .await;
    assert_eq!(job.attempts, 1, "the dead worker's attempt counts");
    let error = job.last_error.unwrap();
    assert!(
        error.contains("gone:1:abc") && error.contains("heartbeat"),
        "{error}"
    );
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.workers WHERE id = 'gone:1:abc'")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(left, 0, "the dead registration is removed");
    handle.shutdown().await.unwrap();
}

/// A process restarted under its predecessor's id (a container restarted with the same name and
/// pid) replaces the registration the dead one left, and takes back at once the jobs it held:
/// with its row refreshed, no rescuer would ever take the dead process for dead.
#[tokio::test]
async fn a_worker_restarted_under_the_same_id_takes_back_what_its_predecessor_held() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Held).await.unwrap().id();
    sqlx::raw_sql(
        "INSERT INTO pgq.workers (id, host, pid, queues, started_at, expires_at)
         VALUES ('pod:1', 'old-host', 7, '{\"elsewhere\": 1}', now() - interval '1 day',
                 now() + interval '1 hour');
         UPDATE pgq.jobs SET status = 'running', phase = 1, attempts = 1, worker_id = 'pod:1',
             claimed_at = now(), started_at = now(), lease_expires_at = now() + interval '1 hour'",
    )
    .execute(db.pool())
    .await
    .unwrap();

    let gate = Arc::new(Semaphore::new(1));
    let handle = Worker::builder(client.clone())
        .queue("registered", 1)
        .worker_id("pod:1")
        .state(gate)
        .build()
        .unwrap()
        .start();
    let job = support::eventually(|| async {
        let job = client.job(id).await.unwrap().unwrap();
        (job.status == JobStatus::Pending).then_some(job)
    })
    .await;
    assert_eq!(job.attempts, 1, "the dead process's attempt counts");
    let error = job.last_error.unwrap();
    assert!(
        error.contains("pod:1") && error.contains("restarted"),
        "{error}"
    );

    let listed = client.workers().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].pid, std::process::id());
    assert_ne!(listed[0].host, "old-host");
    assert_eq!(
        listed[0].queues.keys().collect::<Vec<_>>(),
        ["registered"],
        "this process's queues"
    );
    assert!(
        chrono::Utc::now() - listed[0].started_at < chrono::Duration::hours(1),
        "registered anew: {listed:?}"
    );
    handle.shutdown().await.unwrap();
}

/// A second worker of the same process under an id a running worker holds (started again
/// before the first's shutdown ended) takes nothing back: the first's running job is left to it.
#[tokio::test]
async fn a_second_worker_of_the_process_under_the_same_id_leaves_the_first_alone() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let gate = Arc::new(Semaphore::new(0));
    let first = Worker::builder(client.clone())
        .queue("registered", 1)
        .worker_id("twice:1")
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = first.events();
    let first = first.start();
    let running = client.enqueue(Held).await.unwrap().id();
    support::held(db.pool(), running).await;

    let second = Worker::builder(client.clone())
        .queue("registered-again", 1)
        .worker_id("twice:1")
        .state(Arc::new(Semaphore::new(1)))
        .build()
        .unwrap();
    let mut second_events = second.events();
    let second = second.start();
    // Once the second runs a job, its start (and what it would take back) is behind it.
    let elsewhere = pgq_core::EnqueueOptions::default().queue("registered-again");
    let next = client.enqueue_with(Held, elsewhere).await.unwrap().id();
    let (outcome, _) = support::finished(&mut second_events, next).await;
    assert_eq!(outcome, pgq_core::JobOutcome::Completed);

    gate.add_permits(1);
    let (outcome, _) = support::finished(&mut events, running).await;
    assert_eq!(outcome, pgq_core::JobOutcome::Completed, "never taken back");
    let job = client.job(running).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 1));
    second.shutdown().await.unwrap();
    first.shutdown().await.unwrap();
}

/// A rescuer never takes its own worker for dead, whatever its registration says (after an
/// outage of the database every registration has expired, the rescuer's own too): the statement
/// that takes back another expired worker's job leaves the rescuer's own running job alone.
#[tokio::test]
async fn a_rescuer_takes_back_a_dead_workers_jobs_and_never_its_own() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client.clone())
        .queue("registered", 1)
        .heartbeat_interval(Duration::from_secs(3600))
        .rescue_interval(Duration::from_millis(50))
        .state(gate.clone())
        .build()
        .unwrap();
    let worker_id = worker.worker_id().to_owned();
    let handle = worker.start();
    let own = client.enqueue(Held).await.unwrap().id();
    support::held(db.pool(), own).await;

    let gone = client.enqueue(Held).await.unwrap().id();
    // In one transaction, so that no rescue runs between: a dead worker holding a job with an
    // hour of lease left, and the rescuer's own registration expired as after an outage.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO pgq.workers (id, host, pid, queues, expires_at)
         VALUES ('gone:1:abc', 'gone', 1, '{{\"registered\": 1}}', now() - interval '1 second');
         UPDATE pgq.jobs SET status = 'running', phase = 1, attempts = 1, worker_id = 'gone:1:abc',
             claimed_at = now(), started_at = now(), lease_expires_at = now() + interval '1 hour'
         WHERE id = {gone};
         UPDATE pgq.workers SET expires_at = now() - interval '1 second' WHERE id = '{worker_id}'"
    )))
    .execute(db.pool())
    .await
    .unwrap();

    support::eventually(|| async {
        let job = client.job(gone).await.unwrap().unwrap();
        (job.status == JobStatus::Pending).then_some(())
    })
    .await;
    let job = client.job(own).await.unwrap().unwrap();
    assert_eq!(
        (job.status, job.worker_id.as_deref()),
        (JobStatus::Running, Some(worker_id.as_str()))
    );
    gate.add_permits(2);
    handle.shutdown().await.unwrap();
    let job = client.job(own).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 1));
}

/// A rescuer judges another worker dead only once its own heartbeats have landed for as long as
/// that worker's registration lives: one that just started (or whose heartbeats failed, as in an
/// outage of the database) cannot tell a dead worker from one cut off as it was.
#[tokio::test]
async fn a_rescuer_judges_only_registrations_that_lived_no_longer_than_its_own_heartbeats() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let long = client.enqueue(Held).await.unwrap().id();
    let short = client.enqueue(Held).await.unwrap().id();
    // Two expired registrations, each holding a job: one that lived 20 s after its last
    // heartbeat (a 5 s interval), one that lived a second.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO pgq.workers (id, host, pid, queues, heartbeat_at, expires_at)
         VALUES ('long:1:abc', 'h', 1, '{{}}', now() - interval '21 seconds',
                 now() - interval '1 second'),
                ('short:1:abc', 'h', 1, '{{}}', now() - interval '2 seconds',
                 now() - interval '1 second');
         UPDATE pgq.jobs SET status = 'running', phase = 1, attempts = 1,
             worker_id = CASE WHEN id = {long} THEN 'long:1:abc' ELSE 'short:1:abc' END,
             claimed_at = now(), started_at = now(), lease_expires_at = now() + interval '1 hour'"
    )))
    .execute(db.pool())
    .await
    .unwrap();

    let worker = Worker::builder(client.clone())
        .queue("registered", 1)
        .rescue_interval(Duration::from_millis(50))
        .state(Arc::new(Semaphore::new(0)))
        .build()
        .unwrap();
    let handle = worker.start();
    // A second of its heartbeats is enough for the short-lived registration...
    support::eventually(|| async {
        let job = client.job(short).await.unwrap().unwrap();
        (job.status == JobStatus::Pending).then_some(())
    })
    .await;
    // ... and twenty for the other: its job stays held meanwhile.
    let job = client.job(long).await.unwrap().unwrap();
    assert_eq!(
        (job.status, job.worker_id.as_deref()),
        (JobStatus::Running, Some("long:1:abc"))
    );
    handle.shutdown().await.unwrap();
}

/// A heartbeat may wait a second for its statement however short its interval, so a registration
/// lives at least four seconds: a worker heartbeating every 10 ms whose heartbeat is held up
/// for 400 ms keeps its running job. (Its registration lived four intervals, 40 ms, and another
/// worker's rescuer took the job back while its handler ran.)
#[tokio::test]
async fn a_slow_heartbeat_of_a_short_interval_does_not_make_its_worker_dead() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let gate = Arc::new(Semaphore::new(0));
    let build = || {
        Worker::builder(client.clone())
            .queue("registered", 1)
            .heartbeat_interval(Duration::from_millis(10))
            .rescue_interval(Duration::from_millis(10))
            .state(gate.clone())
            .build()
            .unwrap()
    };
    let a = build();
    let a_id = a.worker_id().to_owned();
    let a = a.start();
    let id = client.enqueue(Held).await.unwrap().id();
    support::held(db.pool(), id).await;
    let b = build().start();

    // A's next heartbeat takes 400 ms, once.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE public.slowed (done boolean NOT NULL);
         INSERT INTO public.slowed VALUES (false);
         CREATE FUNCTION public.slow_heartbeat() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF NEW.id = '{a_id}' AND NOT (SELECT done FROM public.slowed) THEN
                 UPDATE public.slowed SET done = true;
                 PERFORM pg_sleep(0.4);
             END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER slow_heartbeat BEFORE INSERT OR UPDATE ON pgq.workers
             FOR EACH ROW EXECUTE FUNCTION public.slow_heartbeat();"
    )))
    .execute(db.pool())
    .await
    .unwrap();
    support::eventually(|| async {
        let done: bool = sqlx::query_scalar("SELECT done FROM public.slowed")
            .fetch_one(db.pool())
            .await
            .unwrap();
        done.then_some(())
    })
    .await;

    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(
        (job.status, job.attempts, job.worker_id.as_deref()),
        (JobStatus::Running, 1, Some(a_id.as_str()))
    );
    gate.add_permits(1);
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 1));
}
