//! Periodic tasks: every instant enqueued once however many workers run the schedule, missed
//! instants after each policy, the watermark that keeps a finished instant from running again,
//! schedules refused at build, declared schedules run by the workers of their queue, and the
//! admin view.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use pgq_core::__testkit::{enqueue_due, enqueue_due_declared};
use pgq_core::{
    Client, Error, Handler, JobContext, Missed, Schedule, Task, TaskError, Worker, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "sched_beat")]
struct Beat {
    n: u32,
}

#[async_trait]
impl Handler for Beat {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Declared on the type: enqueued by the workers that serve its queue.
#[derive(Debug, Default, Serialize, Deserialize, Task)]
#[task(queue = "sched_declared", cron = "* * * * * *")]
struct DeclaredBeat;

#[async_trait]
impl Handler for DeclaredBeat {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

fn beat_worker(client: &Client) -> Worker {
    Worker::builder(client.clone())
        .queue("sched_beat", 2)
        .periodic(Schedule::cron("* * * * * *"), || Beat { n: 1 })
        .leader_lease(Duration::from_secs(2))
        .build()
        .unwrap()
}

/// The instants of `task`'s jobs (their `run_at`), oldest first, duplicates kept.
async fn instants(pool: &PgPool, task: &str) -> Vec<DateTime<Utc>> {
    sqlx::query_scalar("SELECT run_at FROM pgq.jobs WHERE task = $1 ORDER BY run_at")
        .bind(task)
        .fetch_all(pool)
        .await
        .unwrap()
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

#[tokio::test]
async fn two_workers_enqueue_every_instant_once_and_show_it() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let first = beat_worker(&client).start();
    let second = beat_worker(&client).start();
    let workers = [first.worker_id().to_owned(), second.worker_id().to_owned()];

    // Five instants in a row, whichever worker leads.
    let enqueued = support::eventually(|| async {
        let instants = instants(db.pool(), "Beat").await;
        (instants.len() >= 5).then_some(instants)
    })
    .await;
    let schedules = client.schedules().await.unwrap();
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();

    let all = instants(db.pool(), "Beat").await;
    assert!(all.len() >= enqueued.len());
    for pair in all.windows(2) {
        assert_eq!(pair[1] - pair[0], TimeDelta::seconds(1), "{all:?}");
    }
    assert_eq!(schedules.len(), 1);
    let beat = &schedules[0];
    assert_eq!((beat.name.as_str(), beat.task.as_str()), ("Beat", "Beat"));
    assert_eq!(
        (beat.cron.as_str(), beat.time_zone.as_str()),
        ("* * * * * *", "UTC")
    );
    assert_eq!(beat.missed, Some(Missed::Skip));
    let last = beat.last_run.expect("a last run");
    assert!(last >= enqueued[enqueued.len() - 1]);
    // The next instant after the last one handled and after now, read in the same statement.
    let next = beat.next_run.expect("a next run");
    assert!(
        next > last && next - last <= TimeDelta::seconds(2),
        "{last} {next}"
    );
    assert!(beat.last_job.is_some());
    let leader = beat.leader.clone().expect("a live leader");
    assert!(
        workers.contains(&leader),
        "{leader} is not one of {workers:?}"
    );

    // A clean shutdown gives the lead up.
    let leaders: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.leaders")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(leaders, 0);
    assert_eq!(client.schedules().await.unwrap()[0].leader, None);
}

#[tokio::test]
async fn missed_instants_follow_each_policy_and_run_once() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let start = at("2026-03-02T10:00:00.25Z");
    // Ten minutes later: 10:01 to 10:09 were missed, 10:10 is on time.
    let later = at("2026-03-02T10:10:30Z");
    let policies = [
        ("skip", Missed::Skip, 1),
        ("run-once", Missed::RunOnce, 2),
        ("backfill", Missed::Backfill(3), 4),
    ];
    for (name, missed, expected) in policies {
        let schedule = || Schedule::cron("0 * * * * *").missed(missed).name(name);
        let first = enqueue_due(&client, schedule(), || Beat { n: 2 }, start)
            .await
            .unwrap();
        assert!(
            first.is_empty(),
            "a new schedule starts from its next instant"
        );
        let ids = enqueue_due(&client, schedule(), || Beat { n: 2 }, later)
            .await
            .unwrap();
        assert_eq!(ids.len(), expected, "{name}");
        // Its jobs finish and are deleted: the same instant still does not run again.
        sqlx::query("DELETE FROM pgq.jobs")
            .execute(db.pool())
            .await
            .unwrap();
        let again = enqueue_due(&client, schedule(), || Beat { n: 2 }, later)
            .await
            .unwrap();
        assert!(again.is_empty(), "{name}: enqueued twice");
    }
    let backfill = client
        .schedules()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.name == "backfill")
        .unwrap();
    assert_eq!(backfill.missed, Some(Missed::Backfill(3)));
    assert_eq!(backfill.last_run, Some(at("2026-03-02T10:10:00Z")));
}

#[tokio::test]
async fn backfilled_instants_are_due_at_their_own_time_with_the_schedule_tag() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let schedule = || {
        Schedule::cron("0 0 * * * *")
            .missed(Missed::Backfill(2))
            .name("hourly")
    };
    enqueue_due(
        &client,
        schedule(),
        || Beat { n: 3 },
        at("2026-03-02T00:30:00Z"),
    )
    .await
    .unwrap();
    let ids = enqueue_due(
        &client,
        schedule(),
        || Beat { n: 3 },
        at("2026-03-02T05:00:10Z"),
    )
    .await
    .unwrap();
    let mut run_at = Vec::new();
    for id in ids {
        let job = client.job(id).await.unwrap().unwrap();
        assert_eq!(job.task, "Beat");
        assert_eq!(job.queue, "sched_beat");
        assert_eq!(
            job.meta,
            Some(serde_json::json!({"tags": {"schedule": "hourly"}}))
        );
        run_at.push(job.run_at);
    }
    assert_eq!(
        run_at,
        [
            at("2026-03-02T03:00:00Z"),
            at("2026-03-02T04:00:00Z"),
            at("2026-03-02T05:00:00Z")
        ]
    );
}

#[tokio::test]
async fn a_declared_schedule_runs_on_the_workers_of_its_queue() {
    let db = TestDatabase::new().await;
    let client = db.client();
    // Outside a worker, the testkit's step enqueues it with the same bookkeeping.
    let t0 = at("2026-03-02T10:00:00.5Z");
    assert!(enqueue_due_declared(&client, t0).await.unwrap().is_empty());
    let ids = enqueue_due_declared(&client, t0 + TimeDelta::seconds(2))
        .await
        .unwrap();
    assert_eq!(ids.len(), 2);
    sqlx::query("DELETE FROM pgq.schedules")
        .execute(db.pool())
        .await
        .unwrap();
    sqlx::query("DELETE FROM pgq.jobs")
        .execute(db.pool())
        .await
        .unwrap();

    // A worker of another queue does not run it; one of its queue does.
    let other = Worker::builder(client.clone())
        .queue("sched_beat", 1)
        .build()
        .unwrap()
        .start();
    let own = Worker::builder(client.clone())
        .queue("sched_declared", 1)
        .build()
        .unwrap()
        .start();
    support::eventually(|| async {
        (instants(db.pool(), "DeclaredBeat").await.len() >= 2).then_some(())
    })
    .await;
    let schedules = client.schedules().await.unwrap();
    let own_id = own.worker_id().to_owned();
    other.shutdown().await.unwrap();
    own.shutdown().await.unwrap();
    assert_eq!(schedules.len(), 1);
    assert_eq!(schedules[0].name, "DeclaredBeat");
    assert_eq!(schedules[0].leader.as_deref(), Some(own_id.as_str()));
}

/// A schedule lists the leader that moves it on. During a deploy another release's processes,
/// with another set of schedules, lead it under another role; the last of them to write its row
/// may stop, and the schedule is listed under the leader that goes on, from its next instant.
#[tokio::test]
async fn a_schedule_lists_the_leader_that_moves_it_on() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let worker = beat_worker(&client).start();
    let leader = worker.worker_id().to_owned();
    support::eventually(|| async {
        let listed = client.schedules().await.unwrap();
        (listed.first()?.leader.as_deref() == Some(leader.as_str())).then_some(())
    })
    .await;
    // As the previous release's leader leaves it when it registered the schedule last, then
    // stopped.
    sqlx::query("UPDATE pgq.schedules SET role = 'schedules:stopped' WHERE name = 'Beat'")
        .execute(db.pool())
        .await
        .unwrap();
    assert_eq!(client.schedules().await.unwrap()[0].leader, None);
    support::eventually(|| async {
        let listed = client.schedules().await.unwrap();
        (listed[0].leader.as_deref() == Some(leader.as_str())).then_some(())
    })
    .await;
    worker.shutdown().await.unwrap();
}

/// Written by hand, so that no derive checks its queue and priority.
#[derive(Debug, Serialize, Deserialize)]
struct HandWritten;

impl Task for HandWritten {
    const NAME: &'static str = "HandWritten";
    const QUEUE: &'static str = "bad queue";
    const PRIORITY: i16 = 5000;
}

#[derive(Debug, Serialize, Deserialize)]
struct HandWrittenPriority;

impl Task for HandWrittenPriority {
    const NAME: &'static str = "HandWrittenPriority";
    const PRIORITY: i16 = 5000;
}

/// A schedule's task is held to what an enqueue of it is: a queue or priority that every
/// instant's enqueue would refuse is refused by `build`, with the enqueue's error.
#[tokio::test]
async fn a_schedule_of_a_task_no_enqueue_accepts_is_refused_by_build() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let built = Worker::builder(client.clone())
        .queue("sched_beat", 1)
        .periodic(Schedule::cron("* * * * * *"), || HandWritten)
        .build();
    assert!(
        matches!(built, Err(Error::InvalidQueue { .. })),
        "{built:?}"
    );
    let built = Worker::builder(client.clone())
        .queue("sched_beat", 1)
        .periodic(Schedule::cron("* * * * * *"), || HandWrittenPriority)
        .build();
    assert!(
        matches!(
            &built,
            Err(Error::InvalidOption {
                task: "HandWrittenPriority",
                option: "priority",
                ..
            })
        ),
        "{built:?}"
    );
    // As an enqueue of it is.
    let enqueued = client.enqueue(HandWrittenPriority).await;
    assert!(
        matches!(
            &enqueued,
            Err(Error::InvalidOption {
                option: "priority",
                ..
            })
        ),
        "{enqueued:?}"
    );
}

/// Written by hand with a name the column cannot hold: every registration of the worker's
/// schedules would fail on it.
#[derive(Debug, Serialize, Deserialize)]
struct HandWrittenName;

impl Task for HandWrittenName {
    const NAME: &'static str = "";
    const QUEUE: &'static str = "sched_beat";
}

#[tokio::test]
async fn a_schedule_of_a_task_whose_name_no_row_holds_is_refused_by_build() {
    let db = TestDatabase::new().await;
    let built = Worker::builder(db.client())
        .queue("sched_beat", 1)
        .periodic(Schedule::cron("* * * * * *").name("nameless"), || {
            HandWrittenName
        })
        .build();
    assert!(
        matches!(&built, Err(Error::InvalidOption { option: "name", .. })),
        "{built:?}"
    );
}

/// Jobs of `Beat` whose payload's `n` is `n`.
async fn beats(pool: &PgPool, n: u32) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE task = 'Beat' AND payload->>'n' = $1")
        .bind(n.to_string())
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A schedule's factory is the application's code: one that panics skips that instant of that
/// schedule, which goes on at its next instant, and the other schedules keep their instants.
#[tokio::test]
async fn a_factory_that_panics_stops_neither_its_schedule_nor_the_others() {
    let db = TestDatabase::new().await;
    let panicked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let first = panicked.clone();
    let broken_calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let calls = broken_calls.clone();
    let worker = Worker::builder(db.client())
        .queue("sched_beat", 2)
        .periodic(Schedule::cron("* * * * * *").name("broken"), move || {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if calls.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                panic!("this factory always fails");
            }
            Beat { n: 3 }
        })
        .periodic(Schedule::cron("* * * * * *").name("steady"), || Beat {
            n: 1,
        })
        .periodic(Schedule::cron("* * * * * *").name("flaky"), move || {
            if !first.swap(true, std::sync::atomic::Ordering::SeqCst) {
                panic!("the factory's first call fails");
            }
            Beat { n: 2 }
        })
        .leader_lease(Duration::from_secs(2))
        .build()
        .unwrap()
        .start();
    support::eventually(|| async {
        panicked
            .load(std::sync::atomic::Ordering::SeqCst)
            .then_some(())
    })
    .await;
    let steady_before = beats(db.pool(), 1).await;
    support::eventually(|| async {
        let steady = beats(db.pool(), 1).await;
        let flaky = beats(db.pool(), 2).await;
        (steady >= steady_before + 2 && flaky >= 2).then_some(())
    })
    .await;
    // The instant whose task could not be made is skipped, not enqueued late: the flaky
    // schedule's first job is of a later instant than the steady one's, which it shares.
    let first_instant = |n: u32| {
        sqlx::query_scalar::<_, chrono::DateTime<chrono::Utc>>(
            "SELECT min(run_at) FROM pgq.jobs WHERE task = 'Beat' AND payload->>'n' = $1",
        )
        .bind(n.to_string())
        .fetch_one(db.pool())
    };
    let (steady, flaky) = (
        first_instant(1).await.unwrap(),
        first_instant(2).await.unwrap(),
    );
    assert!(
        flaky > steady,
        "flaky's first job is of {flaky}, steady's of {steady}"
    );
    // A schedule that keeps failing is tried again at its next instant, not in a loop.
    let calls = broken_calls.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        (1..=10).contains(&calls),
        "the broken factory ran {calls} times"
    );
    worker.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_schedules_are_refused_by_build() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let build = |schedule: Schedule, second: Option<Schedule>| {
        let mut builder = Worker::builder(client.clone())
            .queue("sched_beat", 1)
            .periodic(schedule, || Beat { n: 0 });
        if let Some(second) = second {
            builder = builder.periodic(second, || Beat { n: 0 });
        }
        match builder.build() {
            Err(Error::InvalidSchedule { schedule, reason }) => (schedule, reason),
            other => panic!("expected InvalidSchedule, got {other:?}"),
        }
    };
    let (name, reason) = build(Schedule::cron("61 * * * * *"), None);
    assert_eq!(name, "Beat");
    assert!(
        reason.starts_with("cron expression \"61 * * * * *\" does not parse"),
        "{reason}"
    );
    // Parses (every second of every minute, listed), but the schedules table holds 256
    // characters: it failed every registration, and with it every schedule of the worker.
    let seconds = (0..60).map(|s| s.to_string()).collect::<Vec<_>>().join(",");
    let (_, reason) = build(Schedule::cron(format!("{seconds} {seconds} * * * *")), None);
    assert_eq!(reason, "a cron expression has at most 256 characters");
    let (_, reason) = build(Schedule::cron("0 0 0 30 2 *"), None);
    assert_eq!(
        reason,
        "cron expression \"0 0 0 30 2 *\" names no instant to come"
    );
    let (_, reason) = build(
        Schedule::cron("* * * * * *").time_zone("Mars/Olympus"),
        None,
    );
    assert!(
        reason.starts_with("unknown time zone \"Mars/Olympus\""),
        "{reason}"
    );
    let (_, reason) = build(
        Schedule::cron("* * * * * *"),
        Some(Schedule::cron("0 * * * * *")),
    );
    assert_eq!(
        reason,
        "two schedules have this name; name one with Schedule::name"
    );
    let (_, reason) = build(
        Schedule::cron("* * * * * *").missed(Missed::Backfill(0)),
        None,
    );
    assert_eq!(reason, "backfill 0 is outside 1..=1000");
    let (name, reason) = build(Schedule::cron("* * * * * *").name("a\nb"), None);
    assert_eq!(name, "a\nb");
    assert_eq!(reason, "a schedule name has no control characters");
    // Two schedules of one task, each named: accepted.
    Worker::builder(client.clone())
        .queue("sched_beat", 1)
        .periodic(Schedule::cron("0 * * * * *").name("minutely"), || Beat {
            n: 0,
        })
        .periodic(Schedule::cron("0 0 * * * *").name("hourly"), || Beat {
            n: 0,
        })
        .build()
        .unwrap();
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "sched_takeover")]
struct TakeoverBeat;

#[async_trait]
impl Handler for TakeoverBeat {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

fn takeover_worker(client: &Client) -> Worker {
    Worker::builder(client.clone())
        .queue("sched_takeover", 1)
        .periodic(Schedule::cron("*/10 * * * * *").name("takeover"), || {
            TakeoverBeat
        })
        .leader_lease(Duration::from_secs(120))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_leader_replaced_after_a_long_lease_misses_no_instant() {
    let db = TestDatabase::new().await;
    let client = db.client();
    // A first leader registers the schedule, then stops.
    let handle = takeover_worker(&client).start();
    support::eventually(|| async {
        let led: bool = sqlx::query_scalar("SELECT EXISTS (SELECT FROM pgq.schedules)")
            .fetch_one(db.pool())
            .await
            .unwrap();
        led.then_some(())
    })
    .await;
    handle.shutdown().await.unwrap();
    // As if it had died 90 s ago, right after its last step: its lead ran out 120 s later (a
    // lease of two minutes), and its instants since are still to enqueue.
    let died: DateTime<Utc> = sqlx::query_scalar(
        "UPDATE pgq.schedules SET done_through = now() - interval '90 seconds'
         RETURNING done_through",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    sqlx::raw_sql(
        "DELETE FROM pgq.jobs;
         UPDATE pgq.leaders SET expires_at = now() - interval '1 second'",
    )
    .execute(db.pool())
    .await
    .unwrap();

    let handle = takeover_worker(&client).start();
    let earliest = support::eventually(|| async {
        let earliest: Option<DateTime<Utc>> =
            sqlx::query_scalar("SELECT min(run_at) FROM pgq.jobs WHERE task = 'TakeoverBeat'")
                .fetch_one(db.pool())
                .await
                .unwrap();
        earliest
    })
    .await;
    handle.shutdown().await.unwrap();
    // The instants of (died, died + 20 s] are more than the default grace (60 s) old; they ran.
    assert!(
        earliest <= died + TimeDelta::seconds(20),
        "earliest instant {earliest}, watermark {died}"
    );
}
