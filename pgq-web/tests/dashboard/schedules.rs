//! The schedules page: a real worker's one-second schedule read from its row in the browser,
//! its task's link to the jobs it enqueued, and the same row once no worker leads it.

use chrono::{NaiveDateTime, Utc};
use pgq_core::{Handler, JobContext, Schedule, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use pgq_web::DashboardConfig;
use serde::{Deserialize, Serialize};

use crate::browser::Browser;
use crate::support::{eventually, serve};

/// What the schedule enqueues each second.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "ticks")]
struct Tick;

#[async_trait]
impl Handler for Tick {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

const ROW: &str = "tr[data-schedule='every-second']";

/// The exact time on the first line of a last- or next-run cell.
fn exact_time(cell: &str) -> chrono::DateTime<Utc> {
    let line = cell.lines().next().unwrap_or_default();
    NaiveDateTime::parse_from_str(line, "%Y-%m-%d %H:%M:%S UTC")
        .unwrap_or_else(|err| panic!("{line:?} is not an exact time: {err}"))
        .and_utc()
}

#[tokio::test]
async fn a_schedule_shows_its_runs_and_leader_and_links_to_its_jobs() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let every_second = Schedule::cron("* * * * * *")
        .time_zone("Europe/Paris")
        .name("every-second");
    let handle = Worker::builder(client.clone())
        .queue("ticks", 2)
        .periodic(every_second, || Tick)
        .build()
        .unwrap()
        .start();
    let leader = handle.worker_id().to_owned();
    eventually(
        "the worker leads the schedule and has enqueued for it",
        || async {
            client.schedules().await.unwrap().iter().any(|s| {
                s.name == "every-second"
                    && s.leader.as_deref() == Some(&leader)
                    && s.last_job.is_some()
            })
        },
    )
    .await;

    let served = serve(client.clone(), DashboardConfig::new(), "").await;
    let browser = Browser::start().await;
    browser.goto(&served.url).await;
    let clicked = Utc::now();
    browser.click("header.top nav a[href='/schedules']").await;
    assert_eq!(browser.text("h1").await, "Schedules");
    let loaded = Utc::now();
    assert_eq!(browser.text("nav a[aria-current=page]").await, "Schedules");
    assert_eq!(browser.all("table.schedules tbody tr").await.len(), 1);
    let cell = |name: &str| format!("{ROW} td.{name}");
    assert_eq!(browser.text(&cell("name")).await, "every-second");
    assert_eq!(browser.text(&cell("task")).await, "Tick");
    assert_eq!(browser.text(&cell("cron")).await, "* * * * * *");
    assert_eq!(browser.text(&cell("zone")).await, "Europe/Paris");
    assert_eq!(browser.text(&cell("missed")).await, "skip");
    assert_eq!(browser.text(&cell("leader")).await, leader);

    // The next run is the coming second, said as "in …" (or "now" when that second came while
    // the page was read); the last one has passed.
    let next = browser.text(&cell("next")).await;
    let soon = next.lines().nth(1).unwrap_or_default();
    assert!(soon.starts_with("in ") || soon == "now", "{next}");
    let next_at = exact_time(&next);
    assert!(
        next_at > clicked && next_at <= loaded + chrono::Duration::seconds(1),
        "next run {next_at} for a page loaded between {clicked} and {loaded}"
    );
    let last = browser.text(&cell("last")).await;
    let since = last.lines().nth(1).unwrap_or_default();
    assert!(since.contains(" ago") || since.starts_with("now"), "{last}");
    assert!(exact_time(&last) < next_at, "{last} before {next}");
    let last_job = browser
        .find(&format!("{ROW} td.last a"))
        .await
        .text()
        .await
        .unwrap();
    let last_job = last_job
        .strip_prefix("job ")
        .expect("a link to the last job")
        .to_owned();
    browser.screenshot("schedules").await;

    // The task's link is the job list filtered by that task: the scheduled jobs, the last one
    // among them.
    browser.click(&format!("{ROW} td.task a")).await;
    assert_eq!(browser.text("h1").await, "Jobs");
    let task_filter = browser.find("input[name=task]").await;
    assert_eq!(
        task_filter.prop("value").await.unwrap().as_deref(),
        Some("Tick")
    );
    let mut shown = Vec::new();
    for row in browser.all("table.jobs tbody tr").await {
        let text = row.text().await.unwrap();
        assert!(text.contains("Tick") && text.contains("ticks"), "{text}");
        shown.push(row.attr("data-job").await.unwrap().unwrap());
    }
    assert!(shown.contains(&last_job), "{last_job} among {shown:?}");

    // With its only worker gone, the schedule stays listed and says it has no leader.
    handle.shutdown().await.unwrap();
    eventually("the schedule has no leader", || async {
        client.schedules().await.unwrap()[0].leader.is_none()
    })
    .await;
    browser.goto(&format!("{}/schedules", served.url)).await;
    assert_eq!(browser.text(&cell("leader")).await, "no leader");
    assert_eq!(browser.text(&cell("name")).await, "every-second");

    browser.close().await;
}
