//! `build()` refuses bad configuration with typed errors, and warns (or, strict, refuses) when
//! the worker's queues do not match its tasks'.

use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgq_core::{Error, Handler, JobContext, Registry, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "newsletters")]
struct SendNewsletter {
    issue: u32,
}

#[async_trait]
impl Handler for SendNewsletter {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Every queue declared by a task with a handler linked into this test binary, once each.
fn every_declared_queue() -> Vec<&'static str> {
    let mut queues: Vec<&str> = Registry::linked()
        .unwrap()
        .tasks()
        .filter(|task| task.has_handler())
        .map(|task| task.queue())
        .collect();
    queues.sort_unstable();
    queues.dedup();
    queues
}

/// Records the fields of each warning logged on this thread while it is the default subscriber.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// Runs `f` with this recorder as the thread's subscriber.
    fn capture<T>(&self, f: impl FnOnce() -> T) -> T {
        tracing::subscriber::with_default(self.clone(), f)
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() == tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn reason(result: Result<Worker, Error>) -> String {
    match result {
        Err(Error::InvalidWorker(reason)) => reason,
        Err(other) => panic!("expected InvalidWorker, got {other}"),
        Ok(_) => panic!("expected an error"),
    }
}

#[tokio::test]
async fn bad_configurations_are_refused() {
    let db = TestDatabase::new().await;
    let client = db.client();
    assert_eq!(
        reason(Worker::builder(client.clone()).build()),
        "no queues configured"
    );
    assert_eq!(
        reason(Worker::builder(client.clone()).queue("email", 0).build()),
        r#"queue "email" has concurrency 0, outside 1..=100000"#
    );
    // Each of these panicked or aborted the process once the worker started: a semaphore with
    // too many permits, a timer or a product of durations overflowing, or 200 GB allocated
    // for the ticks in flight.
    assert_eq!(
        reason(
            Worker::builder(client.clone())
                .queue("email", usize::MAX)
                .build()
        ),
        format!(
            r#"queue "email" has concurrency {}, outside 1..=100000"#,
            usize::MAX
        )
    );
    for (what, builder) in [
        (
            "poll",
            Worker::builder(client.clone()).poll_interval(Duration::MAX),
        ),
        (
            "poll",
            Worker::builder(client.clone()).poll_interval(Duration::from_nanos(1)),
        ),
        (
            "heartbeat",
            Worker::builder(client.clone()).heartbeat_interval(Duration::MAX),
        ),
        (
            "heartbeat",
            Worker::builder(client.clone()).heartbeat_interval(Duration::ZERO),
        ),
        (
            "rescue",
            Worker::builder(client.clone()).rescue_interval(Duration::ZERO),
        ),
        (
            "rescue",
            Worker::builder(client.clone()).rescue_interval(Duration::from_secs(25 * 3600)),
        ),
    ] {
        let reason = reason(builder.queue("email", 1).build());
        assert!(
            reason.starts_with(&format!("{what} interval "))
                && reason.ends_with("is outside 1 ms..=24 h"),
            "{reason}"
        );
    }
    for builder in [
        Worker::builder(client.clone()).dispatch_connections(u32::MAX),
        Worker::builder(client.clone()).upkeep_connections(0),
    ] {
        let reason = reason(builder.queue("email", 1).build());
        assert!(reason.ends_with("each must be within 1..=64"), "{reason}");
    }
    assert_eq!(
        reason(
            Worker::builder(client.clone())
                .queue("email", 1)
                .queue("email", 2)
                .build()
        ),
        r#"queue "email" is configured twice"#
    );
    for batch in [0, usize::MAX] {
        assert_eq!(
            reason(
                Worker::builder(client.clone())
                    .queue("email", 1)
                    .batch_size(batch)
                    .build()
            ),
            format!("batch size {batch} is outside 1..=100000")
        );
    }
    assert_eq!(
        reason(
            Worker::builder(client.clone())
                .queue("email", 1)
                .poll_interval(Duration::ZERO)
                .build()
        ),
        "poll interval 0ns is outside 1 ms..=24 h"
    );
    for lease in [Duration::from_millis(500), Duration::from_secs(25 * 3600)] {
        let reason = reason(
            Worker::builder(client.clone())
                .queue("email", 1)
                .lease(lease)
                .build(),
        );
        assert!(reason.ends_with("is outside 1 s..=24 h"), "{reason}");
    }
    let err = Worker::builder(client.clone())
        .queue("bad'queue", 1)
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidQueue { .. }), "{err}");
    assert!(
        Worker::builder(client.clone())
            .queue("email", 1)
            .build()
            .is_ok()
    );
    // The bounds themselves are allowed.
    assert!(
        Worker::builder(client)
            .queue("email", pgq_core::limits::MAX_QUEUE_CONCURRENCY)
            .batch_size(pgq_core::limits::MAX_BATCH_SIZE)
            .poll_interval(pgq_core::limits::MAX_WORKER_INTERVAL)
            .rescue_interval(pgq_core::limits::MIN_WORKER_INTERVAL)
            .dispatch_connections(pgq_core::limits::MAX_WORKER_CONNECTIONS)
            .build()
            .is_ok()
    );
}

#[tokio::test]
async fn a_misspelt_queue_builds_with_warnings_by_default() {
    let db = TestDatabase::new().await;
    let warnings = Warnings::default();
    let built = warnings.capture(|| Worker::builder(db.client()).queue("newsleters", 1).build());
    assert!(built.is_ok());
    let lines = warnings.lines();
    assert!(
        lines
            .iter()
            .any(|line| line.contains(r#"task="SendNewsletter""#)
                && line.contains(r#"queue="newsletters""#)
                && line.contains("which this worker does not serve")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.contains(r#"queue="newsleters""#)
                && line.contains("no task with a handler declares it")),
        "{lines:#?}"
    );
}

#[tokio::test]
async fn strict_queues_refuses_a_misspelt_queue_naming_the_task_and_the_queue() {
    let db = TestDatabase::new().await;
    let mut builder = Worker::builder(db.client()).strict_queues(true);
    for queue in every_declared_queue() {
        let queue = if queue == "newsletters" {
            "newsleters"
        } else {
            queue
        };
        builder = builder.queue(queue, 1);
    }
    let reason = reason(builder.build());
    assert_eq!(
        reason,
        r#"queues do not match the tasks (strict_queues): task "SendNewsletter" declares queue "newsletters", which this worker does not serve; queue "newsleters" is served, but no task with a handler declares it"#
    );
}

#[tokio::test]
async fn strict_queues_builds_a_worker_that_serves_every_declared_queue() {
    let db = TestDatabase::new().await;
    let warnings = Warnings::default();
    let mut builder = Worker::builder(db.client()).strict_queues(true);
    for queue in every_declared_queue() {
        builder = builder.queue(queue, 1);
    }
    assert!(warnings.capture(|| builder.build()).is_ok());
    assert_eq!(warnings.lines(), Vec::<String>::new());
}
