//! Draining with options: jobs that drained jobs enqueue, scheduled jobs, panics that fail the
//! test, and a bound.

use std::time::Duration;

use pgq_core::{EnqueueOptions, Handler, JobContext, JobOutcome, Task, TaskError, async_trait};
use pgq_testkit::{Drain, TestDatabase};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "signup")]
struct Signup {
    user_id: i64,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "email")]
struct Welcome {
    user_id: i64,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "email")]
struct Remind {
    user_id: i64,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "fragile", priority = 200)]
struct Fragile;

/// Runs after a [`Fragile`] job in its queue.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "fragile")]
struct Sturdy;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "forever")]
struct Forever {
    n: u32,
}

#[async_trait]
impl Handler for Signup {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.enqueue(Welcome {
            user_id: self.user_id,
        })
        .await?;
        let tomorrow = EnqueueOptions::default().delay(Duration::from_secs(24 * 3600));
        ctx.enqueue_with(
            Remind {
                user_id: self.user_id,
            },
            tomorrow,
        )
        .await?;
        Ok(())
    }
}

#[async_trait]
impl Handler for Welcome {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[async_trait]
impl Handler for Remind {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[async_trait]
impl Handler for Fragile {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        panic!("the parser choked");
    }
}

#[async_trait]
impl Handler for Sturdy {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[async_trait]
impl Handler for Forever {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.enqueue(Forever { n: self.n + 1 }).await?;
        Ok(())
    }
}

fn tasks(drained: &[pgq_core::DrainedJob]) -> Vec<&str> {
    drained.iter().map(|job| job.task.as_str()).collect()
}

#[tokio::test]
async fn jobs_enqueued_by_drained_jobs_are_drained_and_scheduled_ones_on_request() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.enqueue(Signup { user_id: 7 }).await.unwrap();
    let drained = Drain::new(&client)
        .queue("signup")
        .queue("email")
        .run()
        .await;
    assert_eq!(
        tasks(&drained),
        ["Signup", "Welcome"],
        "the reminder waits for tomorrow"
    );

    let drained = Drain::new(&client)
        .queue("email")
        .with_scheduled(true)
        .run()
        .await;
    assert_eq!(tasks(&drained), ["Remind"]);
    assert!(
        drained
            .iter()
            .all(|job| job.outcome == JobOutcome::Completed)
    );
}

/// Scheduled jobs run in the order of their run times, as a worker would run them as their
/// times came, behind the jobs due already: not in the order they were enqueued.
#[tokio::test]
async fn scheduled_jobs_drain_in_the_order_of_their_run_times() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let later = |hours: u64| EnqueueOptions::default().delay(Duration::from_secs(hours * 3600));
    let last = client
        .enqueue_with(Welcome { user_id: 1 }, later(2))
        .await
        .unwrap()
        .id();
    let second = client
        .enqueue_with(Welcome { user_id: 2 }, later(1))
        .await
        .unwrap()
        .id();
    let first = client.enqueue(Remind { user_id: 3 }).await.unwrap().id();
    let drained = Drain::new(&client)
        .queue("email")
        .with_scheduled(true)
        .run()
        .await;
    let order: Vec<_> = drained.iter().map(|job| job.id).collect();
    assert_eq!(order, [first, second, last]);
}

#[tokio::test]
async fn with_safety_off_a_handlers_panic_fails_the_test() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.enqueue(Fragile).await.unwrap();
    // With safety on, the panic is the failed attempt it is in production.
    let drained = Drain::new(&client).queue("fragile").run().await;
    assert_eq!(drained[0].outcome, JobOutcome::Retrying);

    let fragile = client.enqueue(Fragile).await.unwrap().id();
    let sturdy = client.enqueue(Sturdy).await.unwrap().id();
    let unsafe_drain = Drain::new(&client).queue("fragile").with_safety(false);
    let panic = tokio::spawn(unsafe_drain.run())
        .await
        .expect_err("the drain panics")
        .into_panic();
    let message = panic.downcast::<String>().map(|m| *m).unwrap_or_default();
    assert!(message.contains("the parser choked"), "{message}");
    // At once: the job after it did not run, and the panicked one ran once.
    let sturdy = client.job(sturdy).await.unwrap().unwrap();
    assert_eq!(
        (sturdy.status, sturdy.attempts),
        (pgq_core::JobStatus::Pending, 0)
    );
    assert_eq!(client.job(fragile).await.unwrap().unwrap().attempts, 1);
}

#[tokio::test]
async fn a_bound_stops_jobs_that_keep_enqueueing_jobs() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.enqueue(Forever { n: 0 }).await.unwrap();
    let drained = Drain::new(&client).queue("forever").limit(5).run().await;
    assert_eq!(drained.len(), 5);
}

/// Hands its signal's sender to the handler, which holds it and never returns.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "endless")]
struct Endless;

type Held = std::sync::Arc<std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>>;

#[async_trait]
impl Handler for Endless {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let _held_until_dropped = ctx.state::<Held>().unwrap().lock().unwrap().take();
        std::future::pending::<()>().await;
        Ok(())
    }
}

/// A drain dropped while a handler runs (a test's timeout) stops that handler: it does not run
/// on in the background, changing what the test reads afterwards.
#[tokio::test]
async fn a_dropped_drain_stops_its_running_handler() {
    let db = TestDatabase::new().await;
    db.client().enqueue(Endless).await.unwrap();
    let (sender, dropped) = tokio::sync::oneshot::channel::<()>();
    let held: Held = std::sync::Arc::new(std::sync::Mutex::new(Some(sender)));
    let builder = pgq_core::Worker::builder(db.client())
        .queue("endless", 1)
        .state(held.clone());
    let worker = builder.build().unwrap();
    let mut drain = Box::pin(worker.drain());
    // Polled until the handler holds the sender, then dropped.
    tokio::select! {
        _ = &mut drain => panic!("the drain never ends"),
        _ = async {
            while held.lock().unwrap().is_some() {
                tokio::task::yield_now().await;
            }
        } => {}
    }
    drop(drain);
    tokio::time::timeout(Duration::from_secs(10), dropped)
        .await
        .expect("the handler was dropped with its drain")
        .unwrap_err();
}

/// A task whose handler lives in another binary: this one cannot run it.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "email")]
struct Elsewhere;

async fn drain_panic(
    drain: impl Future<Output = Vec<pgq_core::DrainedJob>> + Send + 'static,
) -> String {
    let panic = tokio::spawn(drain)
        .await
        .expect_err("the drain panics")
        .into_panic();
    panic.downcast::<String>().map(|m| *m).unwrap_or_default()
}

#[tokio::test]
async fn a_drain_that_leaves_due_jobs_it_cannot_run_fails_naming_them() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.enqueue(Welcome { user_id: 1 }).await.unwrap();
    let stranded = client.enqueue(Elsewhere).await.unwrap().id();

    let owned = client.clone();
    let message = drain_panic(async move { pgq_testkit::drain(&owned, "email").await }).await;
    assert!(
        message.contains(&format!("job {stranded} (Elsewhere)")),
        "{message}"
    );
    let message = drain_panic(Drain::new(&client).queue("email").run()).await;
    assert!(
        message.contains(&format!("job {stranded} (Elsewhere)")),
        "{message}"
    );
    // What it could run, it ran.
    assert_eq!(
        client.job(stranded).await.unwrap().unwrap().status,
        pgq_core::JobStatus::Pending
    );
}

#[tokio::test]
async fn draining_a_queue_nothing_declares_or_uses_fails_as_a_typo() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let typo = client.clone();
    let message = drain_panic(async move { pgq_testkit::drain(&typo, "emial").await }).await;
    assert!(
        message.contains("\"emial\"") && message.contains("mistyped"),
        "{message}"
    );
    // A declared queue with nothing in it drains to nothing, as does one used by an override.
    assert!(pgq_testkit::drain(&client, "email").await.is_empty());
    let elsewhere = EnqueueOptions::default()
        .queue("overflow")
        .delay(Duration::from_secs(60));
    client
        .enqueue_with(Welcome { user_id: 2 }, elsewhere)
        .await
        .unwrap();
    assert!(pgq_testkit::drain(&client, "overflow").await.is_empty());
}

/// Without safety (one attempt a round), the queues still take turns, a job each, in the order
/// of their names, as with safety.
#[tokio::test]
async fn with_safety_off_the_queues_still_take_turns() {
    let db = TestDatabase::new().await;
    let client = db.client();
    for safety in [true, false] {
        let sturdy = [
            client.enqueue(Sturdy).await.unwrap().id(),
            client.enqueue(Sturdy).await.unwrap().id(),
        ];
        let welcome = [
            client.enqueue(Welcome { user_id: 1 }).await.unwrap().id(),
            client.enqueue(Welcome { user_id: 2 }).await.unwrap().id(),
        ];
        let drained = Drain::new(&client)
            .queue("fragile")
            .queue("email")
            .with_safety(safety)
            .run()
            .await;
        let order: Vec<_> = drained.iter().map(|job| job.id).collect();
        assert_eq!(
            order,
            [welcome[0], sturdy[0], welcome[1], sturdy[1]],
            "safety {safety}"
        );
        assert_eq!(drained[0].queue, "email");
    }
}

/// A mistyped queue fails the drain even when another of its queues ran jobs.
#[tokio::test]
async fn a_mistyped_queue_beside_one_that_ran_fails_the_drain() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.enqueue(Welcome { user_id: 1 }).await.unwrap();
    let both = Drain::new(&client).queue("email").queue("emial");
    let message = drain_panic(both.run()).await;
    assert!(
        message.contains("\"emial\"") && message.contains("mistyped"),
        "{message}"
    );
}
