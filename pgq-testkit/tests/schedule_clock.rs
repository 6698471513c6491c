//! Periodic tasks on a test's clock: a tick at a time, each instant enqueued once, missed
//! instants by their policy, and the jobs run by a drain.

use chrono::{DateTime, Utc};
use pgq_core::{Handler, JobContext, Missed, Schedule, Task, TaskError, async_trait};
use pgq_testkit::{Drain, Expect, ScheduleClock, TestDatabase, all_enqueued};
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize, Task)]
#[task(queue = "reports", cron = "0 0 * * * *")]
struct HourlyReport;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "pings")]
struct Ping {
    from: String,
}

/// One at a time: its key is held while a run is pending.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "pings", unique_key = "sweep")]
struct Sweep;

#[async_trait]
impl Handler for Sweep {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[async_trait]
impl Handler for HourlyReport {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[async_trait]
impl Handler for Ping {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

#[pgq_testkit::test]
async fn each_tick_enqueues_its_instant_once(db: TestDatabase) {
    let client = db.client();
    let mut clock = ScheduleClock::start(&client, at("2026-11-24T08:30:00Z")).await;
    let first = clock.next_tick().await.unwrap();
    assert_eq!(first.at, at("2026-11-24T09:00:00Z"));
    assert_eq!(first.jobs.len(), 1);
    let second = clock.next_tick().await.unwrap();
    assert_eq!(second.at, at("2026-11-24T10:00:00Z"));
    assert_eq!(second.jobs.len(), 1);
    assert_eq!(clock.now(), at("2026-11-24T10:00:00Z"));

    let reports = all_enqueued::<HourlyReport>(db.pool()).await;
    let due: Vec<_> = reports.iter().map(|report| report.job.run_at).collect();
    assert_eq!(
        due,
        [at("2026-11-24T09:00:00Z"), at("2026-11-24T10:00:00Z")]
    );

    // Another clock over the same instants (a second process, a leader change): nothing twice.
    let mut again = ScheduleClock::start(&client, at("2026-11-24T08:30:00Z")).await;
    assert!(again.next_tick().await.unwrap().jobs.is_empty());
    assert!(again.next_tick().await.unwrap().jobs.is_empty());
    assert_eq!(all_enqueued::<HourlyReport>(db.pool()).await.len(), 2);

    // The jobs are due at their instants, which a drain with scheduled jobs runs.
    let drained = Drain::new(&client)
        .queue("reports")
        .with_scheduled(true)
        .run()
        .await;
    assert_eq!(drained.len(), 2);
}

#[pgq_testkit::test]
async fn a_schedule_given_in_code_ticks_with_the_declared_ones(db: TestDatabase) {
    let client = db.client();
    let mut clock = ScheduleClock::start(&client, at("2026-11-24T08:59:40Z"))
        .await
        .with(Schedule::cron("*/15 * * * * *").name("ping"), || Ping {
            from: "clock".into(),
        })
        .await;
    let ticks = [
        clock.next_tick().await.unwrap(),
        clock.next_tick().await.unwrap(),
    ];
    assert_eq!(ticks[0].at, at("2026-11-24T08:59:45Z"));
    assert_eq!(ticks[1].at, at("2026-11-24T09:00:00Z"));
    // At 09:00 both schedules have an instant.
    assert_eq!(ticks[1].jobs.len(), 2);
    pgq_testkit::assert_enqueued_with::<Ping>(
        db.pool(),
        Expect::default().queue("pings").count(2),
        |ping| ping.from == "clock",
    )
    .await;
}

#[pgq_testkit::test]
async fn advancing_past_missed_instants_follows_each_policy(db: TestDatabase) {
    let client = db.client();
    let mut clock = ScheduleClock::start(&client, at("2026-11-24T08:30:00Z"))
        .await
        .with(
            Schedule::cron("0 0 * * * *")
                .name("catch-up")
                .missed(Missed::Backfill(2)),
            || Ping {
                from: "backfill".into(),
            },
        )
        .await
        .with(
            Schedule::cron("0 0 * * * *")
                .name("once")
                .missed(Missed::RunOnce),
            || Ping {
                from: "once".into(),
            },
        )
        .await;
    // 09:00, 10:00 and 11:00 pass with no worker running.
    clock
        .advance(std::time::Duration::from_secs(3 * 3600))
        .await;
    let pings = all_enqueued::<Ping>(db.pool()).await;
    let count = |from: &str| pings.iter().filter(|ping| ping.task.from == from).count();
    assert_eq!(count("backfill"), 2, "the last two missed instants");
    assert_eq!(count("once"), 1);
    assert!(
        all_enqueued::<HourlyReport>(db.pool()).await.is_empty(),
        "the declared schedule skips what it missed"
    );
}

/// An instant whose unique key a pending job still holds enqueues nothing new: the tick lists
/// no job, and the schedule's last job stays the one that holds the key.
#[pgq_testkit::test]
async fn an_instant_whose_key_is_held_enqueues_nothing(db: TestDatabase) {
    let client = db.client();
    // Past the hour, so that the declared hourly report does not tick with it.
    let mut clock = ScheduleClock::start(&client, at("2026-11-24T09:00:10Z"))
        .await
        .with(Schedule::cron("0 * * * * *").name("sweep"), || Sweep)
        .await;
    let first = clock.next_tick().await.unwrap();
    assert_eq!(first.jobs.len(), 1);
    let second = clock.next_tick().await.unwrap();
    assert_eq!(second.jobs, vec![], "the key is still held");
    let schedule = client
        .schedules()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.name == "sweep")
        .unwrap();
    assert_eq!(schedule.last_job, Some(first.jobs[0]));
}

/// A clock moved further than a date can hold stops at the latest date, and does not panic.
#[pgq_testkit::test]
async fn advancing_by_the_longest_duration_does_not_panic(db: TestDatabase) {
    let client = db.client();
    let mut clock = ScheduleClock::start(&client, at("2026-11-24T08:30:00Z"))
        .await
        .with(
            Schedule::cron("0 0 * * * *")
                .name("once")
                .missed(Missed::RunOnce),
            || Ping {
                from: "once".into(),
            },
        )
        .await;
    clock.advance(std::time::Duration::MAX).await;
    assert_eq!(clock.now(), chrono::DateTime::<chrono::Utc>::MAX_UTC);
}

/// The message of the panic `clock` ends in.
async fn panic_of(
    clock: impl std::future::Future<Output = ScheduleClock> + Send + 'static,
) -> String {
    let panicked = tokio::spawn(clock)
        .await
        .expect_err("the clock panics")
        .into_panic();
    panicked
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default()
}

/// Two schedules with one name would share their bookkeeping, and one of them would enqueue
/// nothing: the clock refuses them, as `build()` does, a declared schedule's name included.
#[pgq_testkit::test]
async fn two_schedules_with_one_name_are_refused(db: TestDatabase) {
    let start = at("2026-11-24T08:30:00Z");
    let client = db.client();
    let message = panic_of(async move {
        ScheduleClock::start(&client, start)
            .await
            .with(Schedule::cron("0 0 * * * *"), || Ping { from: "a".into() })
            .await
            .with(Schedule::cron("0 0 * * * *"), || Ping { from: "b".into() })
            .await
    })
    .await;
    assert!(
        message.contains("two schedules have the name \"Ping\""),
        "{message}"
    );

    let client = db.client();
    let message = panic_of(async move {
        ScheduleClock::start(&client, start)
            .await
            .with(Schedule::cron("0 30 * * * *"), || HourlyReport)
            .await
    })
    .await;
    assert!(message.contains("\"HourlyReport\""), "{message}");

    // Named apart, each enqueues its own.
    let mut clock = ScheduleClock::start(&db.client(), start)
        .await
        .with(Schedule::cron("0 0 * * * *").name("a"), || Ping {
            from: "a".into(),
        })
        .await
        .with(Schedule::cron("0 0 * * * *").name("b"), || Ping {
            from: "b".into(),
        })
        .await;
    let tick = clock.next_tick().await.unwrap();
    // Both pings and the declared hourly report.
    assert_eq!(tick.jobs.len(), 3);
}
