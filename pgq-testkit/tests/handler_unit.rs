//! Handlers run under a `TestContext` with no database: what they report is recorded.

use std::time::Duration;

use pgq_core::{Handler, JobContext, Task, TaskAction, TaskError, async_trait};
use pgq_testkit::TestContext;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "imports", unique_key = "import:{file}")]
struct Import {
    file: String,
    rows: u32,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, Task)]
struct Notify {
    file: String,
    rows: u32,
}

/// Stands for an app's configuration handed to handlers.
struct Limits {
    max_rows: u32,
}

#[async_trait]
impl Handler for Import {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let limits = ctx
            .state::<Limits>()
            .ok_or_else(|| TaskError::fail("no limits"))?;
        if self.rows > limits.max_rows {
            return Err(TaskError::fail(format_args!(
                "{} rows is too many",
                self.rows
            )));
        }
        if ctx.attempt() < 3 && self.file.starts_with("flaky") {
            return Err(TaskError::retry_after(
                Duration::from_secs(5),
                "storage busy",
            ));
        }
        for done in 1..=self.rows {
            if ctx.is_cancelled() {
                return Err(TaskError::fail("cancelled"));
            }
            ctx.progress((done * 100 / self.rows) as u8, "importing")
                .await;
        }
        ctx.event(&format!("imported {}", ctx.idempotency_key()))
            .await;
        ctx.enqueue(Notify {
            file: self.file,
            rows: self.rows,
        })
        .await?;
        Ok(())
    }
}

/// Waits until cancelled.
#[derive(Debug, Serialize, Deserialize, Task)]
struct Wait;

#[async_trait]
impl Handler for Wait {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.cancelled().await;
        Err(TaskError::snooze(Duration::from_secs(60)))
    }
}

fn import(file: &str, rows: u32) -> Import {
    Import {
        file: file.into(),
        rows,
    }
}

#[tokio::test]
async fn progress_events_and_enqueued_tasks_are_recorded() {
    let ctx = TestContext::new().state(Limits { max_rows: 10 });
    ctx.run(import("a.csv", 4)).await.unwrap();
    assert_eq!(
        ctx.progress(),
        vec![
            (25, "importing".to_string()),
            (50, "importing".to_string()),
            (75, "importing".to_string()),
            (100, "importing".to_string()),
        ]
    );
    assert_eq!(
        ctx.events(),
        vec!["imported Import:import:a.csv".to_string()]
    );
    assert_eq!(
        ctx.enqueued::<Notify>(),
        vec![Notify {
            file: "a.csv".into(),
            rows: 4
        }]
    );
    assert!(ctx.enqueued::<Import>().is_empty());
}

#[tokio::test]
async fn errors_carry_their_action() {
    let ctx = TestContext::new().state(Limits { max_rows: 10 });
    let err = ctx.run(import("big.csv", 11)).await.unwrap_err();
    assert_eq!(err.action(), TaskAction::Fail);
    assert_eq!(err.message(), "11 rows is too many");
    assert!(ctx.enqueued::<Notify>().is_empty());
}

#[tokio::test]
async fn the_attempt_number_is_chosen_by_the_test() {
    let first = TestContext::new().state(Limits { max_rows: 10 });
    let err = first.run(import("flaky.csv", 1)).await.unwrap_err();
    assert_eq!(err.action(), TaskAction::RetryAfter(Duration::from_secs(5)));

    let third = TestContext::new()
        .job_id(42)
        .attempt(3)
        .state(Limits { max_rows: 10 });
    third.run(import("flaky.csv", 1)).await.unwrap();
    assert_eq!(third.enqueued::<Notify>().len(), 1);
}

#[tokio::test]
async fn a_missing_state_value_is_the_handlers_error() {
    let err = TestContext::new()
        .run(import("a.csv", 1))
        .await
        .unwrap_err();
    assert_eq!(err.message(), "no limits");
}

#[tokio::test]
async fn the_cancellation_switch_fires_before_or_during_a_run() {
    let ctx = TestContext::new().state(Limits { max_rows: 10 });
    ctx.cancel();
    let err = ctx.run(import("a.csv", 3)).await.unwrap_err();
    assert_eq!(err.message(), "cancelled");
    assert!(ctx.progress().is_empty());

    // Numbered after the cancel, it is still cancelled.
    let ctx = TestContext::new().state(Limits { max_rows: 10 });
    ctx.cancel();
    let ctx = ctx.attempt(2).job_id(7);
    let err = ctx.run(import("a.csv", 3)).await.unwrap_err();
    assert_eq!(err.message(), "cancelled");

    let ctx = TestContext::new();
    let switch = ctx.cancel_switch();
    let (result, ()) = tokio::join!(ctx.run(Wait), async move {
        tokio::task::yield_now().await;
        switch.cancel();
    });
    assert_eq!(
        result.unwrap_err().action(),
        TaskAction::Snooze(Duration::from_secs(60))
    );
}

/// A task whose in-memory value and stored form differ: `cached` is not stored.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(timeout = "50ms")]
struct Render {
    pages: u32,
    #[serde(skip)]
    cached: bool,
}

#[async_trait]
impl Handler for Render {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        if self.cached {
            return Ok(());
        }
        if self.pages > 100 {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        Err(TaskError::retry("not cached"))
    }

    fn backoff(attempt: i32) -> Option<Duration> {
        Some(Duration::from_secs(7 * attempt as u64))
    }
}

#[tokio::test]
async fn the_handler_sees_the_task_as_a_worker_would_after_its_json_round_trip() {
    let ctx = TestContext::new().attempt(2);
    let err = ctx
        .run(Render {
            pages: 1,
            cached: true,
        })
        .await
        .expect_err("a field that is not stored does not reach the handler");
    // The task's own backoff turns a plain retry into a retry after 14 s, as under a worker.
    assert_eq!(
        err.action(),
        TaskAction::RetryAfter(Duration::from_secs(14))
    );
}

#[tokio::test]
async fn the_task_timeout_applies() {
    let ctx = TestContext::new();
    let err = ctx
        .run(Render {
            pages: 500,
            cached: false,
        })
        .await
        .expect_err("the attempt runs past its 50 ms timeout");
    assert!(err.message().contains("timed out after 50ms"), "{err:?}");
}

/// Enqueues `Notify` to the queue it is given.
#[derive(Debug, Serialize, Deserialize, Task)]
struct Forward {
    queue: String,
    file: String,
}

#[async_trait]
impl Handler for Forward {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let options = pgq_core::EnqueueOptions::default().queue(self.queue);
        ctx.enqueue_with(
            Notify {
                file: self.file,
                rows: 1,
            },
            options,
        )
        .await?;
        Ok(())
    }
}

/// What a real enqueue refuses before the database, a recorded one refuses too.
#[tokio::test]
async fn a_recorded_enqueue_refuses_what_a_real_one_refuses() {
    for (queue, file, refused) in [
        ("bad queue!", "a.csv", "invalid queue name"),
        ("imports", "a\0.csv", "NUL"),
    ] {
        let ctx = TestContext::new();
        let task = Forward {
            queue: queue.into(),
            file: file.into(),
        };
        let err = ctx.run(task).await.unwrap_err();
        assert!(err.message().contains(refused), "{}", err.message());
        assert!(ctx.enqueued::<Notify>().is_empty());
    }
    let ctx = TestContext::new();
    let task = Forward {
        queue: "imports".into(),
        file: "a.csv".into(),
    };
    ctx.run(task).await.unwrap();
    assert_eq!(ctx.enqueued::<Notify>().len(), 1);
}
