//! Hostile bytes and absurd values never lose an outcome: NUL characters in what a handler
//! reports, delays of `Duration::MAX`, worker ids and run times out of range, payloads the
//! database cannot store.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use pgq_core::{
    EnqueueOptions, Error, Handler, JobContext, JobOutcome, JobStatus, Task, TaskError, Worker,
    async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

use crate::support;

/// Does what its `mode` says, with NUL characters where they hurt.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "hostile")]
struct Hostile {
    mode: String,
}

#[async_trait]
impl Handler for Hostile {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        match self.mode.as_str() {
            "error" => Err(TaskError::retry("bad\0byte")),
            "panic" => panic!("panic with a \0 inside"),
            "stage" => {
                ctx.progress(50, "half\0way").await;
                Ok(())
            }
            "snooze" => Err(TaskError::snooze(Duration::MAX)),
            "retry_after" => Err(TaskError::retry_after(Duration::MAX, "later")),
            _ => Ok(()),
        }
    }
}

/// Fails once with a backoff of `Duration::MAX` from its own `Handler::backoff`.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "hostile")]
struct Forever;

#[async_trait]
impl Handler for Forever {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Err(TaskError::retry("try again much later"))
    }

    fn backoff(_attempt: i32) -> Option<Duration> {
        Some(Duration::MAX)
    }
}

/// Runs one job of `task` on a worker and returns its outcome, error and row.
async fn run_one<T: Task>(
    db: &TestDatabase,
    task: T,
) -> (JobOutcome, Option<String>, pgq_core::Job) {
    let client = db.client();
    let worker = Worker::builder(client.clone())
        .queue("hostile", 1)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let id = client.enqueue(task).await.unwrap().id();
    let (outcome, error) = support::finished(&mut events, id).await;
    handle.shutdown().await.unwrap();
    (outcome, error, client.job(id).await.unwrap().unwrap())
}

#[tokio::test]
async fn an_error_with_a_nul_byte_is_recorded_with_the_nul_replaced() {
    let db = TestDatabase::new().await;
    let (outcome, error, job) = run_one(
        &db,
        Hostile {
            mode: "error".into(),
        },
    )
    .await;
    assert_eq!(outcome, JobOutcome::Retrying);
    assert_eq!(error.as_deref(), Some("bad\u{FFFD}byte"));
    assert_eq!(job.status, JobStatus::Pending);
    assert_eq!(job.last_error.as_deref(), Some("bad\u{FFFD}byte"));
    assert_eq!(job.errors[0].error, "bad\u{FFFD}byte");
}

#[tokio::test]
async fn a_panic_with_a_nul_byte_is_recorded() {
    let db = TestDatabase::new().await;
    let (outcome, _, job) = run_one(
        &db,
        Hostile {
            mode: "panic".into(),
        },
    )
    .await;
    assert_eq!(outcome, JobOutcome::Retrying);
    assert_eq!(
        job.last_error.as_deref(),
        Some("handler panicked: panic with a \u{FFFD} inside")
    );
}

#[tokio::test]
async fn a_stage_with_a_nul_byte_is_written_and_the_job_completes() {
    let db = TestDatabase::new().await;
    let (outcome, _, job) = run_one(
        &db,
        Hostile {
            mode: "stage".into(),
        },
    )
    .await;
    assert_eq!(outcome, JobOutcome::Completed);
    assert_eq!(job.current_stage.as_deref(), Some("half\u{FFFD}way"));
}

/// How far in the future a job's next run is, by the database clock.
async fn due_in(db: &TestDatabase, id: pgq_core::JobId) -> chrono::Duration {
    let seconds: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM run_at - now())::float8 FROM pgq.jobs WHERE id = $1",
    )
    .bind(id.get())
    .fetch_one(db.pool())
    .await
    .unwrap();
    chrono::Duration::seconds(seconds as i64)
}

#[tokio::test]
async fn delays_of_any_length_are_recorded_capped_at_the_longest_delay() {
    let db = TestDatabase::new().await;
    let max = chrono::Duration::from_std(pgq_core::limits::MAX_DELAY).unwrap();
    let cases: [(Hostile, JobOutcome); 2] = [
        (
            Hostile {
                mode: "snooze".into(),
            },
            JobOutcome::Snoozed,
        ),
        (
            Hostile {
                mode: "retry_after".into(),
            },
            JobOutcome::Retrying,
        ),
    ];
    for (task, expected) in cases {
        let (outcome, _, job) = run_one(&db, task).await;
        assert_eq!(outcome, expected);
        let delay = due_in(&db, job.id).await;
        assert!(
            delay > max - chrono::Duration::days(1) && delay <= max,
            "{delay:?}"
        );
    }
    let (outcome, _, job) = run_one(&db, Forever).await;
    assert_eq!(outcome, JobOutcome::Retrying);
    let delay = due_in(&db, job.id).await;
    assert!(
        delay > max - chrono::Duration::days(1) && delay <= max,
        "{delay:?}"
    );
}

#[tokio::test]
async fn worker_ids_that_jobs_cannot_store_are_refused_when_the_worker_is_built() {
    let db = TestDatabase::new().await;
    for id in ["", "a\0b", "tab\there", &"w".repeat(129), &"é".repeat(65)] {
        let built = Worker::builder(db.client())
            .queue("hostile", 1)
            .worker_id(id)
            .build();
        assert!(
            matches!(built, Err(Error::InvalidWorker(ref reason)) if reason.contains("worker id")),
            "{id:?}: {built:?}"
        );
    }
    let longest = "w".repeat(128);
    let worker = Worker::builder(db.client())
        .queue("hostile", 1)
        .worker_id(&longest)
        .build()
        .unwrap();
    assert_eq!(worker.worker_id(), longest);
}

/// A task whose unique key comes from its payload.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "hostile", unique_key = "note:{text}")]
struct Note {
    text: String,
}

#[async_trait]
impl Handler for Note {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[tokio::test]
async fn payloads_and_keys_the_database_cannot_store_are_refused_with_typed_errors() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let refused = client
        .enqueue(Hostile {
            mode: "a\0b".into(),
        })
        .await;
    assert!(
        matches!(
            refused,
            Err(Error::InvalidPayload {
                task: "Hostile",
                ..
            })
        ),
        "{refused:?}"
    );
    let refused = client
        .enqueue(Note {
            text: "x\0y".into(),
        })
        .await;
    assert!(
        matches!(
            refused,
            Err(Error::InvalidOption {
                option: "unique_key" | "payload",
                ..
            }) | Err(Error::InvalidPayload { .. })
        ),
        "{refused:?}"
    );
    // A backslash followed by u0000 is text, not a NUL character.
    client
        .enqueue(Hostile {
            mode: "\\u0000".into(),
        })
        .await
        .expect("an escaped backslash is storable");
    let refused = client
        .enqueue_many([Hostile { mode: "ok".into() }, Hostile { mode: "\0".into() }])
        .await;
    assert!(
        matches!(refused, Err(Error::InvalidPayload { .. })),
        "{refused:?}"
    );
}

/// A task that carries any JSON.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "nested")]
struct Nested {
    value: serde_json::Value,
}

#[async_trait]
impl Handler for Nested {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// `levels` arrays, one inside the other.
fn nested(levels: usize) -> serde_json::Value {
    (0..levels).fold(serde_json::Value::Null, |inner, _| {
        serde_json::json!([inner])
    })
}

#[tokio::test]
async fn a_payload_nested_deeper_than_a_worker_decodes_is_refused_and_one_at_the_limit_runs() {
    let db = TestDatabase::new().await;
    let client = db.client();
    // The task's own object is the first level.
    let deepest = pgq_core::limits::MAX_PAYLOAD_DEPTH - 1;
    for task in [
        Nested {
            value: nested(deepest + 1),
        },
        Nested { value: nested(500) },
    ] {
        let refused = client.enqueue(task).await;
        assert!(
            matches!(refused, Err(Error::InvalidPayload { task: "Nested", reason })
                if reason.contains("127 levels")),
            "{refused:?}"
        );
    }
    let refused = client
        .enqueue_many([
            Nested { value: nested(1) },
            Nested {
                value: nested(deepest + 1),
            },
        ])
        .await;
    assert!(
        matches!(refused, Err(Error::InvalidPayload { .. })),
        "{refused:?}"
    );
    let id = client
        .enqueue(Nested {
            value: nested(deepest),
        })
        .await
        .expect("at the limit")
        .id();
    let drained = pgq_testkit::drain(&client, "nested").await;
    assert_eq!(
        drained
            .iter()
            .map(|d| (d.id, d.outcome))
            .collect::<Vec<_>>(),
        [(id, JobOutcome::Completed)],
        "nothing refused reached the table, and the job at the limit decodes"
    );
}

#[tokio::test]
async fn run_times_outside_the_years_1970_to_9999_are_refused() {
    let db = TestDatabase::new().await;
    let client = db.client();
    for run_at in [
        Utc.with_ymd_and_hms(1969, 12, 31, 23, 59, 59).unwrap(),
        Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap(),
        chrono::DateTime::<Utc>::MIN_UTC,
        chrono::DateTime::<Utc>::MAX_UTC,
    ] {
        let refused = client
            .enqueue_with(
                Hostile { mode: "ok".into() },
                EnqueueOptions::default().run_at(run_at),
            )
            .await;
        assert!(
            matches!(
                refused,
                Err(Error::InvalidOption {
                    option: "run_at",
                    ..
                })
            ),
            "{run_at}: {refused:?}"
        );
    }
    let latest = Utc.with_ymd_and_hms(9999, 12, 31, 0, 0, 0).unwrap();
    let id = client
        .enqueue_with(
            Hostile { mode: "ok".into() },
            EnqueueOptions::default().run_at(latest),
        )
        .await
        .unwrap()
        .id();
    assert_eq!(client.job(id).await.unwrap().unwrap().run_at, latest);
}

#[tokio::test]
async fn the_worker_keeps_running_after_every_hostile_outcome() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let worker = Worker::builder(client.clone())
        .queue("hostile", 2)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let mut ids = Vec::new();
    for mode in ["error", "panic", "stage", "snooze", "retry_after", "ok"] {
        ids.push(
            client
                .enqueue(Hostile { mode: mode.into() })
                .await
                .unwrap()
                .id(),
        );
    }
    let outcomes = support::all_finished(&mut events, &ids).await;
    assert!(
        outcomes.values().all(|o| *o != JobOutcome::Unrecorded),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[ids.last().unwrap()], JobOutcome::Completed);
    let after = client
        .enqueue(Hostile { mode: "ok".into() })
        .await
        .unwrap()
        .id();
    assert_eq!(
        support::finished(&mut events, after).await.0,
        JobOutcome::Completed
    );
    handle.shutdown().await.unwrap();
}

/// A float and its bits: the handler fails unless the float it reads is the one enqueued.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "floats")]
struct Measure {
    x: f64,
    bits: u64,
}

#[async_trait]
impl Handler for Measure {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        if self.x.to_bits() == self.bits {
            Ok(())
        } else {
            Err(TaskError::fail(format!("read {:e}", self.x)))
        }
    }
}

/// jsonb keeps a number as a decimal, and gives `1.9e41` back as 42 digits: every finite float
/// still reads back as itself, in the handler and through `Client::job`.
#[tokio::test]
async fn every_finite_float_reads_back_as_itself() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let floats = [
        1.9e41,
        1.7e308,
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        5e-324,
        0.1,
        -2.5e-300,
        123_456_789.123_456_79,
    ];
    // Each float with what it reads back as; the one exception, as the README says: a decimal
    // has no negative zero.
    let expected = floats.iter().map(|&x| (x, x)).chain([(-0.0, 0.0)]);
    for (x, back) in expected {
        let id = client
            .enqueue(Measure {
                x,
                bits: back.to_bits(),
            })
            .await
            .unwrap()
            .id();
        let job = client.job(id).await.unwrap().unwrap();
        let read: Measure = serde_json::from_value(job.payload).unwrap();
        assert_eq!(
            read.x.to_bits(),
            back.to_bits(),
            "{x:e} read back as {:e}",
            read.x
        );
    }
    let drained = pgq_testkit::drain(&client, "floats").await;
    for outcome in drained {
        assert_eq!(outcome.outcome, JobOutcome::Completed, "{outcome:?}");
    }
}
